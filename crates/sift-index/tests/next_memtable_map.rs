//! The memtable map of `next` and `sst-local` indexes (queries find the writes still in the
//! primary tree's memtables through an ordered map of their values instead of scanning the
//! memtables): queries right after many writes that are all still in memtables, across a
//! flush in the middle, after creating the index on a collection whose memtable holds data,
//! and after a reopen, all match brute force over a model.
//! Numeric ranges and points, and geo boxes (the map is searched by Z-order ranges, then
//! each point checked).

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

mod common;

use common::{newest_first, seed, SeedGuard};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use sift_index::{
    AttrType, AttrValue, Database, DatabaseOptions, GeoBox, IndexKind, IndexSpec, Validation,
};
use std::collections::BTreeMap;

#[derive(Debug, Clone)]
struct ModelDoc {
    seq: u64,
    doc: Vec<u8>,
    n: Option<i64>,
    point: Option<(f64, f64)>,
}

common::impl_model_version!(ModelDoc);

type Model = BTreeMap<Vec<u8>, ModelDoc>;

/// (index name, kind, validation, attribute)
const INDEXES: [(&str, IndexKind, Validation, &str); 5] = [
    ("next_lite", IndexKind::Next, Validation::GetLite, "n"),
    ("next_memo", IndexKind::Next, Validation::Memo, "n"),
    ("local_lite", IndexKind::SstLocal, Validation::GetLite, "n"),
    ("next_geo", IndexKind::Next, Validation::GetLite, "p"),
    ("local_geo", IndexKind::SstLocal, Validation::Memo, "p"),
];

/// Large memtables: nothing reaches a table unless the test flushes.
fn options() -> DatabaseOptions {
    let mut options = DatabaseOptions::default();
    options.engine.memtable_bytes_max = 64 << 20;
    options.engine.block_bytes = 512;
    options
}

fn create_indexes(db: &Database) {
    for (name, kind, validation, path) in INDEXES {
        let attr_type = if path == "p" {
            AttrType::Geo
        } else {
            AttrType::Int
        };
        db.create_index(
            "docs",
            IndexSpec::new(name, path, attr_type, kind).with_validation(validation),
        )
        .unwrap();
    }
}

/// One random put or delete, applied to the database and the model.
fn random_write(db: &Database, model: &mut Model, rng: &mut StdRng) {
    let pk = format!("k{:03}", rng.gen_range(0..150));
    if rng.gen_ratio(1, 6) {
        if let Some(seq) = db.delete("docs", pk.as_bytes()).unwrap() {
            assert!(model.remove(pk.as_bytes()).is_some());
            let _ = seq;
        }
        return;
    }
    let n = rng.gen_ratio(9, 10).then(|| rng.gen_range(0..60));
    let point = rng
        .gen_ratio(9, 10)
        .then(|| (rng.gen_range(-20.0..20.0), rng.gen_range(-10.0..10.0)));
    let mut doc = serde_json::json!({ "id": pk, "pad": "x".repeat(rng.gen_range(0..60)) });
    if let Some(n) = n {
        doc["n"] = serde_json::json!(n);
    }
    if let Some((lon, lat)) = point {
        doc["p"] = serde_json::json!([lon, lat]);
    }
    let bytes = serde_json::to_vec(&doc).unwrap();
    let seq = db.put("docs", &bytes).unwrap();
    model.insert(
        pk.into_bytes(),
        ModelDoc {
            seq,
            doc: bytes,
            n,
            point,
        },
    );
}

fn hits_of(result: &sift_index::QueryResult) -> Vec<(Vec<u8>, u64, Vec<u8>)> {
    result
        .hits
        .iter()
        .map(|h| (h.pk.clone(), h.seq, h.doc.clone()))
        .collect()
}

/// Every index against brute force: ranges, points, boxes, with and without a limit.
fn check(db: &Database, model: &Model, rng: &mut StdRng, step: &str) {
    for _ in 0..6 {
        let limit = rng.gen_bool(0.5).then(|| rng.gen_range(1..8));
        let lo = rng.gen_range(-2..62);
        let hi = lo + rng.gen_range(0..15);
        let (lon, lat) = (rng.gen_range(-22.0..18.0), rng.gen_range(-11.0..8.0));
        let geo_box = GeoBox::new(
            lon,
            lat,
            lon + rng.gen_range(0.0..12.0),
            lat + rng.gen_range(0.0..6.0),
        )
        .unwrap();
        for (name, _, _, path) in INDEXES {
            if path == "p" {
                let want = newest_first(
                    model,
                    |d| d.point.is_some_and(|(x, y)| geo_box.contains(x, y)),
                    limit,
                );
                let got = db.within("docs", name, &geo_box, limit).unwrap();
                assert_eq!(hits_of(&got), want, "{step}: {name} within {geo_box:?}");
            } else {
                let want = newest_first(model, |d| d.n.is_some_and(|n| n >= lo && n <= hi), limit);
                let got = db
                    .range(
                        "docs",
                        name,
                        &AttrValue::Int(lo),
                        &AttrValue::Int(hi),
                        limit,
                    )
                    .unwrap();
                assert_eq!(hits_of(&got), want, "{step}: {name} range {lo}..={hi}");
                let want = newest_first(model, |d| d.n == Some(lo), limit);
                let got = db.lookup("docs", name, &AttrValue::Int(lo), limit).unwrap();
                assert_eq!(hits_of(&got), want, "{step}: {name} lookup {lo}");
            }
        }
    }
}

fn map_bytes(db: &Database) -> u64 {
    db.memory_bytes("docs", "local_lite").unwrap()
}

#[test]
fn memtable_map_matches_brute_force_across_flushes_and_reopens() {
    let seed = seed();
    let _guard = SeedGuard(seed);
    let mut rng = StdRng::seed_from_u64(seed);
    let dir = tempfile::tempdir().unwrap();
    let mut model = Model::new();
    let mut db = Database::open(dir.path(), options()).unwrap();
    db.create_collection("docs", "id").unwrap();
    // Created while the memtable holds documents: the maps are filled from it.
    for _ in 0..200 {
        random_write(&db, &mut model, &mut rng);
    }
    create_indexes(&db);
    assert!(map_bytes(&db) > 0, "the map holds the memtable's documents");
    check(&db, &model, &mut rng, "after creation");
    for round in 0..3 {
        for step in 0..300 {
            random_write(&db, &mut model, &mut rng);
            if step % 60 == 0 {
                check(&db, &model, &mut rng, &format!("round {round} step {step}"));
            }
        }
        if round == 1 {
            // A flush in the middle: the maps forget what reached the table.
            let before = map_bytes(&db);
            db.flush().unwrap();
            db.engine().wait_for_background_work().unwrap();
            check(&db, &model, &mut rng, "after the flush");
            assert!(
                map_bytes(&db) < before,
                "the flush pruned the map ({before} bytes before)"
            );
        }
    }
    // Reopened: whatever the memtables hold after recovery is in the maps.
    drop(db);
    db = Database::open(dir.path(), options()).unwrap();
    check(&db, &model, &mut rng, "after reopen");
    for step in 0..200 {
        random_write(&db, &mut model, &mut rng);
        if step % 50 == 0 {
            check(&db, &model, &mut rng, &format!("after reopen, step {step}"));
        }
    }
    assert!(map_bytes(&db) > 0, "new writes are in the map");
    for (name, kind, ..) in INDEXES {
        if kind == IndexKind::Next {
            db.check_global_index("docs", name).unwrap();
        }
    }
}

/// Queries racing with writes and flushes: every hit is a version that was live at some point
/// and carries a value in the window, and no pk is returned twice (exactness under races
/// relies on the map's distrust rule; the model tests check the answers themselves).
#[test]
fn memtable_map_with_concurrent_flushes() {
    let dir = tempfile::tempdir().unwrap();
    let mut options = options();
    options.engine.memtable_bytes_max = 32 << 10;
    let db = std::sync::Arc::new(Database::open(dir.path(), options).unwrap());
    db.create_collection("docs", "id").unwrap();
    create_indexes(&db);
    let writer = {
        let db = std::sync::Arc::clone(&db);
        std::thread::spawn(move || {
            let mut rng = StdRng::seed_from_u64(5);
            let mut model = Model::new();
            for _ in 0..3000 {
                random_write(&db, &mut model, &mut rng);
            }
            model
        })
    };
    let mut rng = StdRng::seed_from_u64(6);
    while !writer.is_finished() {
        let lo = rng.gen_range(0..60);
        for name in ["next_lite", "next_memo", "local_lite"] {
            let result = db
                .range(
                    "docs",
                    name,
                    &AttrValue::Int(lo),
                    &AttrValue::Int(lo + 5),
                    None,
                )
                .unwrap();
            let mut pks: Vec<&[u8]> = result.hits.iter().map(|h| h.pk.as_slice()).collect();
            pks.sort_unstable();
            let before = pks.len();
            pks.dedup();
            assert_eq!(before, pks.len(), "{name}: duplicate hits");
            for hit in &result.hits {
                let doc: serde_json::Value = serde_json::from_slice(&hit.doc).unwrap();
                let n = doc["n"].as_i64().expect("a hit carries the attribute");
                assert!((lo..=lo + 5).contains(&n), "{name}: {n} outside the window");
            }
        }
    }
    let model = writer.join().unwrap();
    db.engine().wait_for_background_work().unwrap();
    let mut rng = StdRng::seed_from_u64(7);
    check(&db, &model, &mut rng, "after the racing writes");
}
