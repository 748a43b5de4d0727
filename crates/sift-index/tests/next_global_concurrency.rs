//! The global index of a `next` index under concurrency: while flushes and compactions install
//! new versions (the engine's background threads, plus a thread forcing more of both), a
//! checker thread runs `check_global_index` without waiting for the background work to
//! settle, and the writing thread queries between its writes. Every check must pass, every
//! answer must equal brute force over a `BTreeMap` model, and a `next` query must find every
//! table's blocks in the global index (no table's directory read: the global index it uses
//! describes exactly the files of the version it reads).
//!
//! Regression for the error a `sift study` run printed ("global index of index 2: file 8 has
//! no blocks, its directory 14"): the check took a view just after a flush installed it and
//! before the version listener had told the global index about the new file.
//!
//! `SIFT_STRESS_ITERATIONS` (default 6) runs that many seeds of `SIFT_MODEL_STEPS` (default
//! 1,500) writes each; `SIFT_SEED` replays one.

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

mod common;

use common::{seed, small_options, SeedGuard};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use sift_index::{AttrType, AttrValue, Database, GeoBox, IndexKind, IndexSpec, Validation};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

#[derive(Debug, Clone)]
struct ModelDoc {
    seq: u64,
    doc: Vec<u8>,
    n: i64,
    loc: (f64, f64),
}

common::impl_model_version!(ModelDoc);

type Model = BTreeMap<Vec<u8>, ModelDoc>;

const PKS: u32 = 300;

/// (name, kind, attribute path, type, validation)
const INDEXES: [(&str, IndexKind, &str, AttrType, Validation); 4] = [
    (
        "next_n",
        IndexKind::Next,
        "n",
        AttrType::Int,
        Validation::GetLite,
    ),
    (
        "next_n_memo",
        IndexKind::Next,
        "n",
        AttrType::Int,
        Validation::Memo,
    ),
    (
        "next_loc",
        IndexKind::Next,
        "loc",
        AttrType::Geo,
        Validation::GetLite,
    ),
    (
        "local_n",
        IndexKind::SstLocal,
        "n",
        AttrType::Int,
        Validation::GetLite,
    ),
];

fn iterations() -> u64 {
    std::env::var("SIFT_STRESS_ITERATIONS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(6)
}

fn write_one(db: &Database, model: &mut Model, rng: &mut StdRng) {
    let pk = format!("pk{:03}", rng.gen_range(0..PKS)).into_bytes();
    if rng.gen_bool(0.1) {
        let deleted = db.delete("docs", &pk).unwrap();
        assert_eq!(deleted.is_some(), model.remove(&pk).is_some());
        return;
    }
    let n = rng.gen_range(0..60);
    let loc = (
        f64::from(rng.gen_range(-40..=40)) * 0.5,
        f64::from(rng.gen_range(-40..=40)) * 0.5,
    );
    let doc = serde_json::json!({
        "id": String::from_utf8_lossy(&pk),
        "n": n,
        "loc": [loc.0, loc.1],
        "pad": "x".repeat(rng.gen_range(0..120)),
    });
    let json = serde_json::to_vec(&doc).unwrap();
    let seq = db.put("docs", &json).unwrap();
    model.insert(
        pk,
        ModelDoc {
            seq,
            doc: json,
            n,
            loc,
        },
    );
}

/// One query on a random index, compared with the model.
fn query_and_compare(db: &Database, model: &Model, rng: &mut StdRng, step: usize) {
    let (name, kind, _, attr_type, _) = INDEXES[rng.gen_range(0..INDEXES.len())];
    let limit = [Some(1), Some(4), Some(20), None][rng.gen_range(0..4)];
    let (result, want, what) = if attr_type == AttrType::Geo {
        let mut corner = || f64::from(rng.gen_range(-40..=40)) * 0.5;
        let (a, b, c, d) = (corner(), corner(), corner(), corner());
        let geo_box = GeoBox::new(a.min(b), c.min(d), a.max(b), c.max(d)).unwrap();
        let result = db.within("docs", name, &geo_box, limit).unwrap();
        let want = common::newest_first(model, |doc| geo_box.contains(doc.loc.0, doc.loc.1), limit);
        (result, want, format!("within {geo_box}"))
    } else {
        let lo = rng.gen_range(0..60);
        let hi = lo + rng.gen_range(0..8);
        let result = db
            .range(
                "docs",
                name,
                &AttrValue::Int(lo),
                &AttrValue::Int(hi),
                limit,
            )
            .unwrap();
        let want = common::newest_first(model, |doc| lo <= doc.n && doc.n <= hi, limit);
        (result, want, format!("range {lo}..={hi}"))
    };
    let got = common::hit_tuples(&result.hits);
    assert!(
        got == want,
        "step {step}: {name} {what} limit {limit:?}: got {:?}, want {:?}",
        common::show_hits(&got),
        common::show_hits(&want)
    );
    if kind == IndexKind::Next {
        assert_eq!(
            result.stats.directories_read, 0,
            "step {step}: {name} {what}: a `next` query read table directories, so its global \
             index did not describe the files of the version it read"
        );
    }
}

fn stress_case(seed: u64, steps: usize) {
    let _guard = SeedGuard(seed);
    let dir = tempfile::tempdir().unwrap();
    let db = Arc::new(Database::open(dir.path(), small_options()).unwrap());
    db.create_collection("docs", "id").unwrap();
    for (name, kind, path, attr_type, validation) in INDEXES {
        let spec = IndexSpec::new(name, path, attr_type, kind).with_validation(validation);
        db.create_index("docs", spec).unwrap();
    }
    let stop = Arc::new(AtomicBool::new(false));
    let checks = Arc::new(AtomicU64::new(0));
    let failure: Arc<Mutex<Option<String>>> = Arc::default();
    let checker = {
        let (db, stop, checks, failure) = (
            Arc::clone(&db),
            Arc::clone(&stop),
            Arc::clone(&checks),
            Arc::clone(&failure),
        );
        std::thread::spawn(move || {
            while !stop.load(Ordering::Acquire) {
                for name in ["next_n", "next_n_memo", "next_loc"] {
                    if let Err(e) = db.check_global_index("docs", name) {
                        failure
                            .lock()
                            .unwrap()
                            .get_or_insert_with(|| format!("check of {name}: {e}"));
                        stop.store(true, Ordering::Release);
                    }
                    checks.fetch_add(1, Ordering::Relaxed);
                }
            }
        })
    };
    let forcer = {
        let (db, stop) = (Arc::clone(&db), Arc::clone(&stop));
        let mut rng = StdRng::seed_from_u64(seed ^ 0x5eed);
        std::thread::spawn(move || {
            while !stop.load(Ordering::Acquire) {
                if rng.gen_bool(0.7) {
                    db.flush().unwrap();
                } else {
                    db.compact_all().unwrap();
                }
                std::thread::sleep(std::time::Duration::from_micros(rng.gen_range(0..2_000)));
            }
        })
    };
    let mut rng = StdRng::seed_from_u64(seed);
    let mut model = Model::new();
    for step in 0..steps {
        if stop.load(Ordering::Acquire) {
            break;
        }
        write_one(&db, &mut model, &mut rng);
        if rng.gen_bool(0.3) {
            query_and_compare(&db, &model, &mut rng, step);
        }
    }
    stop.store(true, Ordering::Release);
    forcer.join().unwrap();
    checker.join().unwrap();
    if let Some(failure) = failure.lock().unwrap().take() {
        panic!("seed {seed}: {failure}");
    }
    assert!(checks.load(Ordering::Relaxed) > 0, "the checker never ran");
    // At rest, the same holds and the accessor agrees with the check.
    db.engine().wait_for_background_work().unwrap();
    for _ in 0..20 {
        query_and_compare(&db, &model, &mut rng, steps);
    }
    for name in ["next_n", "next_n_memo", "next_loc"] {
        let report = db.check_global_index("docs", name).unwrap();
        let stats = db.global_index_stats("docs", name).unwrap();
        assert_eq!(stats.files, report.files_indexed, "{name}");
        assert_eq!(stats.blocks, report.blocks, "{name}");
        assert_eq!(stats.memory_bytes, report.memory_bytes, "{name}");
        assert!(report.files_indexed > 0, "{name}: no file was indexed");
    }
}

#[test]
fn global_index_matches_every_version_while_flushes_and_compactions_race_queries_and_checks() {
    let steps = common::steps(1_500);
    if let Some(seed) = std::env::var("SIFT_SEED").ok().and_then(|s| s.parse().ok()) {
        stress_case(seed, steps);
        return;
    }
    let first = seed();
    for iteration in 0..iterations() {
        stress_case(first.wrapping_add(iteration), steps);
    }
}

/// The memory accessor may be called at any moment, also while the index changes, and never
/// fails for a `next` index; for other kinds it says which kinds have a global index.
#[test]
fn global_index_stats_is_safe_to_call_while_flushes_run() {
    let seed = seed();
    let _guard = SeedGuard(seed);
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(dir.path(), small_options()).unwrap();
    db.create_collection("docs", "id").unwrap();
    for (name, kind, path, attr_type, validation) in INDEXES {
        let spec = IndexSpec::new(name, path, attr_type, kind).with_validation(validation);
        db.create_index("docs", spec).unwrap();
    }
    let mut rng = StdRng::seed_from_u64(seed);
    let mut model = Model::new();
    let mut memory_seen = 0;
    for _ in 0..2_000 {
        write_one(&db, &mut model, &mut rng);
        let stats = db.global_index_stats("docs", "next_n").unwrap();
        assert_eq!(stats.files == 0, stats.blocks == 0);
        memory_seen = memory_seen.max(stats.memory_bytes);
    }
    assert!(memory_seen > 0, "the global index never held anything");
    let error = db.global_index_stats("docs", "local_n").unwrap_err();
    assert!(
        error.to_string().contains("sst-local") && error.to_string().contains("next"),
        "{error}"
    );
}
