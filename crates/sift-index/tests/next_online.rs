//! Online creation of `next` and `sst-local` indexes (NEXT §5) on a collection that already
//! has several levels of tables: writes go on while the older tables get their secondary
//! blocks (largest level first), and every answer is exact at every moment of the build.
//! One test interleaves writes, flushes, compactions and model-checked queries between the
//! files of the build (through the progress callback, which runs without the write lock);
//! one races writer threads against the creation. After every step of the first, the global
//! index must describe exactly the live files' blocks, those in the tables and those built
//! online. `SIFT_SEED` replays a run.

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

mod common;

use common::{open, seed, SeedGuard};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use sift_index::{AttrType, AttrValue, Database, GeoBox, IndexKind, IndexSpec, Validation};
use std::collections::BTreeMap;
use std::sync::Arc;

#[derive(Debug, Clone)]
struct ModelDoc {
    seq: u64,
    doc: Vec<u8>,
    n: i64,
    loc: (f64, f64),
}

common::impl_model_version!(ModelDoc);

type Model = BTreeMap<Vec<u8>, ModelDoc>;

const PKS: u32 = 400;

fn random_doc(rng: &mut StdRng, pk: u32) -> (Vec<u8>, i64, (f64, f64)) {
    let n = rng.gen_range(0..50);
    let loc = (
        f64::from(rng.gen_range(-40..=40)) * 0.5,
        f64::from(rng.gen_range(-40..=40)) * 0.5,
    );
    let doc = serde_json::json!({
        "id": format!("pk{pk:03}"),
        "n": n,
        "loc": [loc.0, loc.1],
        "pad": "x".repeat(rng.gen_range(0..80)),
    });
    (serde_json::to_vec(&doc).unwrap(), n, loc)
}

fn put(db: &Database, model: &mut Model, rng: &mut StdRng) {
    let pk = rng.gen_range(0..PKS);
    let (json, n, loc) = random_doc(rng, pk);
    let seq = db.put("docs", &json).unwrap();
    model.insert(
        format!("pk{pk:03}").into_bytes(),
        ModelDoc {
            seq,
            doc: json,
            n,
            loc,
        },
    );
}

fn write_some(db: &Database, model: &mut Model, rng: &mut StdRng) {
    for _ in 0..rng.gen_range(1..20) {
        if rng.gen_bool(0.85) {
            put(db, model, rng);
        } else {
            let pk = format!("pk{:03}", rng.gen_range(0..PKS)).into_bytes();
            let result = db.delete("docs", &pk).unwrap();
            assert_eq!(result.is_some(), model.remove(&pk).is_some());
        }
    }
}

/// Queries every listed index (`*_n` int, `*_loc` geo) and compares with the model.
fn check(db: &Database, model: &Model, rng: &mut StdRng, names: &[String], what: &str) {
    for name in names {
        let limit = [Some(1), Some(5), None][rng.gen_range(0..3)];
        if name.ends_with("_n") {
            let lo = rng.gen_range(0..50);
            let hi = lo + rng.gen_range(0..6);
            let got = db
                .range(
                    "docs",
                    name,
                    &AttrValue::Int(lo),
                    &AttrValue::Int(hi),
                    limit,
                )
                .unwrap();
            let want = common::newest_first(model, |d| lo <= d.n && d.n <= hi, limit);
            let got = common::hit_tuples(&got.hits);
            assert!(
                got == want,
                "{what}: {name} range {lo}..={hi} limit {limit:?}: got {:?}, want {:?}",
                common::show_hits(&got),
                common::show_hits(&want)
            );
        } else {
            let a = f64::from(rng.gen_range(-40..=40)) * 0.5;
            let b = f64::from(rng.gen_range(-40..=40)) * 0.5;
            let c = f64::from(rng.gen_range(-40..=40)) * 0.5;
            let d = f64::from(rng.gen_range(-40..=40)) * 0.5;
            let geo_box = GeoBox::new(a.min(b), c.min(d), a.max(b), c.max(d)).unwrap();
            let got = db.within("docs", name, &geo_box, limit).unwrap();
            let want =
                common::newest_first(model, |doc| geo_box.contains(doc.loc.0, doc.loc.1), limit);
            let got = common::hit_tuples(&got.hits);
            assert!(
                got == want,
                "{what}: {name} within {geo_box} limit {limit:?}: got {:?}, want {:?}",
                common::show_hits(&got),
                common::show_hits(&want)
            );
        }
    }
}

fn check_global(db: &Database, names: &[String], what: &str) -> usize {
    db.engine().wait_for_background_work().unwrap();
    let mut built_online = 0;
    for name in names.iter().filter(|name| name.starts_with("next")) {
        let report = db
            .check_global_index("docs", name)
            .unwrap_or_else(|e| panic!("{what}: {name}: {e}"));
        built_online += report.files_built_online;
    }
    built_online
}

/// (name, kind, attribute path, type, validation)
const INDEXES: [(&str, IndexKind, &str, AttrType, Validation); 4] = [
    (
        "next_n",
        IndexKind::Next,
        "n",
        AttrType::Int,
        Validation::Memo,
    ),
    (
        "local_n",
        IndexKind::SstLocal,
        "n",
        AttrType::Int,
        Validation::GetLite,
    ),
    (
        "next_loc",
        IndexKind::Next,
        "loc",
        AttrType::Geo,
        Validation::GetLite,
    ),
    (
        "local_loc",
        IndexKind::SstLocal,
        "loc",
        AttrType::Geo,
        Validation::Memo,
    ),
];

/// Fills the collection until its tables span level 0 and deeper levels.
fn fill(db: &Database, model: &mut Model, rng: &mut StdRng) {
    for round in 0..6 {
        for _ in 0..150 {
            put(db, model, rng);
        }
        db.flush().unwrap();
        if round == 3 {
            db.compact_all().unwrap();
        }
    }
    db.engine().wait_for_background_work().unwrap();
}

#[test]
fn online_creation_is_exact_between_every_file_of_the_build() {
    online_creation_case(seed());
}

/// Regression: with this seed, the compactions and flushes drawn after the builds' files
/// replaced every file built online before it was counted, so the test's own precondition
/// ("some file was built online") failed although every answer was exact.
#[test]
fn online_creation_counts_a_file_built_online_when_compactions_follow_every_build() {
    online_creation_case(16_090_737_935_458_374_305);
}

fn online_creation_case(seed: u64) {
    let _guard = SeedGuard(seed);
    let mut rng = StdRng::seed_from_u64(seed);
    let dir = tempfile::tempdir().unwrap();
    let mut db = open(dir.path());
    db.create_collection("docs", "id").unwrap();
    let mut model = Model::new();
    fill(&db, &mut model, &mut rng);
    let mut created: Vec<String> = Vec::new();
    let mut built_online = 0;
    for (name, kind, path, attr_type, validation) in INDEXES {
        let mut files_built = 0;
        let mut names = created.clone();
        names.push(name.to_string());
        let spec = IndexSpec::new(name, path, attr_type, kind).with_validation(validation);
        // The callback runs between files of the build, without the write lock: it writes,
        // flushes, compacts, and checks every index (the new one included) against the model.
        db.create_index_with_progress("docs", spec, &mut |progress| {
            if progress.finished {
                return;
            }
            files_built += 1;
            let what = format!("seed {seed}: building {name}, after file {files_built}");
            write_some(&db, &mut model, &mut rng);
            let choice = rng.gen_range(0..10);
            // After an index's first file, no flush or compaction: the file built online
            // stays live for `check_global` to count (a compaction replaces it by a file
            // indexed as it is written, which counts as built at write).
            let choice = if files_built == 1 { 9 } else { choice };
            match choice {
                0..=1 => db.flush().unwrap(),
                2 => db.compact_all().unwrap(),
                _ => {}
            }
            check(&db, &model, &mut rng, &names, &what);
            built_online += check_global(&db, &names, &what);
        })
        .unwrap();
        assert!(
            files_built > 0,
            "seed {seed}: {name}: the build should have indexed older tables"
        );
        created.push(name.to_string());
        check(&db, &model, &mut rng, &created, &format!("after {name}"));
        check_global(&db, &created, &format!("after {name}"));
    }
    assert!(built_online > 0, "seed {seed}: no file was built online");
    // Blocks built online survive a restart (and dead files' ones are collected).
    for round in 0..3 {
        drop(db);
        db = open(dir.path());
        let what = format!("seed {seed}: reopen {round}");
        check(&db, &model, &mut rng, &created, &what);
        check_global(&db, &created, &what);
        write_some(&db, &mut model, &mut rng);
        db.flush().unwrap();
        check(&db, &model, &mut rng, &created, &what);
        check_global(&db, &created, &what);
    }
    db.compact_all().unwrap();
    check(&db, &model, &mut rng, &created, "after the last compaction");
    check_global(&db, &created, "after the last compaction");
}

/// Writer threads race an online creation; queries of the new indexes by another thread are
/// plausible throughout (in range, no document twice, newest first), and exact once writes
/// stop.
#[test]
fn writers_race_an_online_creation() {
    let seed = seed();
    let _guard = SeedGuard(seed);
    let mut rng = StdRng::seed_from_u64(seed);
    let dir = tempfile::tempdir().unwrap();
    let db = Arc::new(open(dir.path()));
    db.create_collection("docs", "id").unwrap();
    let mut model = Model::new();
    fill(&db, &mut model, &mut rng);
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let writers: Vec<_> = (0..2u64)
        .map(|w| {
            let db = Arc::clone(&db);
            let stop = Arc::clone(&stop);
            std::thread::spawn(move || {
                let mut rng = StdRng::seed_from_u64(seed ^ (w + 1));
                let mut i = 0;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) || i < 200 {
                    let pk = rng.gen_range(0..PKS);
                    let (json, ..) = random_doc(&mut rng, pk);
                    db.put("docs", &json).unwrap();
                    if i % 9 == 0 {
                        db.delete("docs", format!("pk{pk:03}").as_bytes()).unwrap();
                    }
                    if i % 150 == 0 {
                        db.flush().unwrap();
                    }
                    i += 1;
                }
            })
        })
        .collect();
    let reader = {
        let db = Arc::clone(&db);
        let stop = Arc::clone(&stop);
        std::thread::spawn(move || {
            let mut rng = StdRng::seed_from_u64(seed);
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                for name in ["next_n", "local_n"] {
                    let lo = rng.gen_range(0..50);
                    let Ok(result) = db.range(
                        "docs",
                        name,
                        &AttrValue::Int(lo),
                        &AttrValue::Int(lo + 5),
                        None,
                    ) else {
                        continue; // not created yet
                    };
                    let mut pks: Vec<&Vec<u8>> = result.hits.iter().map(|h| &h.pk).collect();
                    let count = pks.len();
                    pks.sort();
                    pks.dedup();
                    assert_eq!(pks.len(), count, "{name}: a document returned twice");
                    assert!(
                        result.hits.windows(2).all(|w| w[0].seq > w[1].seq),
                        "{name}: not newest first"
                    );
                    for hit in &result.hits {
                        let value: serde_json::Value = serde_json::from_slice(&hit.doc).unwrap();
                        let n = value["n"].as_i64().unwrap();
                        assert!((lo..=lo + 5).contains(&n), "{name}: {n} out of range");
                    }
                }
            }
        })
    };
    for (name, kind, path, attr_type, validation) in INDEXES {
        db.create_index(
            "docs",
            IndexSpec::new(name, path, attr_type, kind).with_validation(validation),
        )
        .unwrap();
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    for writer in writers {
        writer.join().unwrap();
    }
    reader.join().unwrap();
    let mut model = Model::new();
    for pk in 0..PKS {
        let key = format!("pk{pk:03}").into_bytes();
        if let Some(hit) = db.get("docs", &key).unwrap() {
            let value: serde_json::Value = serde_json::from_slice(&hit.doc).unwrap();
            model.insert(
                key,
                ModelDoc {
                    seq: hit.seq,
                    doc: hit.doc.clone(),
                    n: value["n"].as_i64().unwrap(),
                    loc: (
                        value["loc"][0].as_f64().unwrap(),
                        value["loc"][1].as_f64().unwrap(),
                    ),
                },
            );
        }
    }
    let names: Vec<String> = INDEXES.iter().map(|i| i.0.to_string()).collect();
    for _ in 0..10 {
        check(&db, &model, &mut rng, &names, "after the race");
    }
    check_global(&db, &names, "after the race");
}
