//! Writers on overlapping primary keys and values against concurrent queries: every hit seen is
//! a document version that really carried the queried value, no document is listed twice,
//! and after the writers stop every index (eager read-modify-write included) equals brute
//! force over the live documents.

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

mod common;

use common::{open, seed, SeedGuard, CONFIGS};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use sift_index::{AttrType, AttrValue, IndexSpec, WriteOp};
use std::collections::{BTreeMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

const PKS: u32 = 24;
const VALUES: i64 = 4;

fn value_of(doc: &[u8]) -> Option<i64> {
    let json: serde_json::Value = serde_json::from_slice(doc).unwrap();
    json["n"].as_i64()
}

#[test]
fn concurrent_writers_and_readers_see_only_real_versions() {
    let seed = seed();
    let _guard = SeedGuard(seed);
    let dir = tempfile::tempdir().unwrap();
    let db = Arc::new(open(dir.path()));
    db.create_collection("docs", "id").unwrap();
    for (name, kind, maintenance, read_repair) in CONFIGS {
        let spec = IndexSpec::new(name, "n", AttrType::Int, kind)
            .with_maintenance(maintenance)
            .with_read_repair(read_repair);
        db.create_index("docs", spec).unwrap();
    }
    let stop = Arc::new(AtomicBool::new(false));
    let mut writers = Vec::new();
    for thread in 0..3u64 {
        let db = Arc::clone(&db);
        writers.push(std::thread::spawn(move || {
            let mut rng = StdRng::seed_from_u64(seed ^ (thread + 1));
            for i in 0..400 {
                let pk = rng.gen_range(0..PKS);
                let n = rng.gen_range(0..VALUES);
                let json = format!(r#"{{"id": "p{pk}", "n": {n}, "w": {thread}, "i": {i}}}"#);
                match rng.gen_range(0..10) {
                    0 => {
                        db.delete("docs", format!("p{pk}").as_bytes()).unwrap();
                    }
                    1 => {
                        let other = format!(r#"{{"id": "p{}", "n": {n}}}"#, rng.gen_range(0..PKS));
                        db.write(
                            "docs",
                            &[
                                WriteOp::Put(json.as_bytes()),
                                WriteOp::Put(other.as_bytes()),
                            ],
                        )
                        .unwrap();
                    }
                    _ => {
                        db.put("docs", json.as_bytes()).unwrap();
                    }
                }
                if thread == 0 && i % 200 == 199 {
                    db.flush().unwrap();
                }
            }
        }));
    }
    let mut readers = Vec::new();
    for thread in 0..2u64 {
        let db = Arc::clone(&db);
        let stop = Arc::clone(&stop);
        readers.push(std::thread::spawn(move || {
            let mut rng = StdRng::seed_from_u64(seed ^ (100 + thread));
            let mut queries = 0u64;
            while !stop.load(Ordering::Acquire) || queries < 50 {
                let (name, ..) = CONFIGS[rng.gen_range(0..CONFIGS.len())];
                let limit = [Some(1), Some(3), None][rng.gen_range(0..3)];
                let (lo, hi) = if rng.gen_bool(0.5) {
                    let v = rng.gen_range(0..VALUES);
                    (v, v)
                } else {
                    (0, rng.gen_range(0..VALUES))
                };
                let result = if lo == hi {
                    db.lookup("docs", name, &AttrValue::Int(lo), limit)
                } else {
                    db.range(
                        "docs",
                        name,
                        &AttrValue::Int(lo),
                        &AttrValue::Int(hi),
                        limit,
                    )
                }
                .unwrap();
                let mut seen = HashSet::new();
                let mut previous = u64::MAX;
                for hit in &result.hits {
                    let n = value_of(&hit.doc).unwrap();
                    assert!(
                        lo <= n && n <= hi,
                        "{name}: hit carries {n}, queried {lo}..={hi}"
                    );
                    assert!(seen.insert(hit.pk.clone()), "{name}: duplicate hit");
                    assert!(hit.seq < previous, "{name}: not newest first");
                    previous = hit.seq;
                }
                if let Some(k) = limit {
                    assert!(result.hits.len() <= k);
                }
                queries += 1;
            }
        }));
    }
    for writer in writers {
        writer.join().unwrap();
    }
    stop.store(true, Ordering::Release);
    for reader in readers {
        reader.join().unwrap();
    }
    // Brute force over the live documents.
    let mut live: BTreeMap<Vec<u8>, (u64, i64)> = BTreeMap::new();
    for pk in 0..PKS {
        let key = format!("p{pk}").into_bytes();
        if let Some(hit) = db.get("docs", &key).unwrap() {
            live.insert(key, (hit.seq, value_of(&hit.doc).unwrap()));
        }
    }
    for (name, ..) in CONFIGS {
        for v in 0..VALUES {
            let mut want: Vec<(Vec<u8>, u64)> = live
                .iter()
                .filter(|(_, (_, n))| *n == v)
                .map(|(pk, (seq, _))| (pk.clone(), *seq))
                .collect();
            want.sort_by_key(|(_, seq)| std::cmp::Reverse(*seq));
            let got: Vec<(Vec<u8>, u64)> = db
                .lookup("docs", name, &AttrValue::Int(v), None)
                .unwrap()
                .hits
                .into_iter()
                .map(|hit| (hit.pk, hit.seq))
                .collect();
            assert_eq!(got, want, "{name}: value {v} after the writers stopped");
        }
    }
    // Eager lists hold exactly the live documents (no lost read-modify-write).
    let total: usize = (0..VALUES)
        .map(|v| {
            db.lookup("docs", "eager_full", &AttrValue::Int(v), None)
                .unwrap()
                .stats
                .candidates_examined as usize
        })
        .sum();
    assert_eq!(
        total,
        live.len(),
        "eager posting lists hold exactly the live documents"
    );
}

/// Regression (a reopen in a test binary that spawns child processes failed once with a LOCK
/// error): `drop(db); Database::open(same path)` must work at once, every time, while the
/// dropped database had background work in flight (asynchronous index workers with a queue,
/// flushes, compactions emitting deferred DELETEs) and while another thread spawns processes.
/// Dropping waits for every background thread; the LOCK was an `flock`, which a child process
/// shares from its spawn until it execs, so a reopen in that window found it held.
#[test]
fn drop_then_reopen_at_once_works_during_background_work_and_process_spawns() {
    use sift_index::{IndexKind, Maintenance};
    let seed = seed();
    let _guard = SeedGuard(seed);
    let mut rng = StdRng::seed_from_u64(seed);
    let dir = tempfile::tempdir().unwrap();
    let options = || {
        let mut options = common::small_options();
        options.engine.memtable_bytes_max = 4 << 10;
        options.engine.l0_compaction_trigger = 2;
        options.async_index.workers = 2;
        options
    };
    let indexes = [
        ("async", Maintenance::AsyncSimple),
        ("deferred", Maintenance::Deferred),
        ("full", Maintenance::SyncFull),
    ];
    let mut db = sift_index::Database::open(dir.path(), options()).unwrap();
    db.create_collection("docs", "id").unwrap();
    for (name, maintenance) in indexes {
        let spec = IndexSpec::new(name, "n", AttrType::Int, IndexKind::Composite)
            .with_maintenance(maintenance);
        db.create_index("docs", spec).unwrap();
    }
    let stop = Arc::new(AtomicBool::new(false));
    let spawner = {
        let stop = Arc::clone(&stop);
        std::thread::spawn(move || {
            let mut spawned = 0u32;
            while !stop.load(Ordering::SeqCst) {
                if let Ok(mut child) = std::process::Command::new("true").spawn() {
                    let _ = child.wait();
                    spawned += 1;
                }
            }
            spawned
        })
    };
    let mut model: BTreeMap<String, i64> = BTreeMap::new();
    for round in 0..40 {
        let mut docs = Vec::new();
        for _ in 0..40 {
            let pk = format!("pk{:02}", rng.gen_range(0..PKS));
            if rng.gen_range(0..5) == 0 {
                docs.push((pk, None));
            } else {
                let n = rng.gen_range(0..VALUES);
                docs.push((pk, Some(n)));
            }
        }
        let jsons: Vec<Vec<u8>> = docs
            .iter()
            .map(|(pk, n)| {
                serde_json::to_vec(&serde_json::json!({"id": pk, "n": n, "round": round})).unwrap()
            })
            .collect();
        let ops: Vec<WriteOp<'_>> = docs
            .iter()
            .zip(&jsons)
            .map(|((pk, n), json)| match n {
                Some(_) => WriteOp::Put(json),
                None => WriteOp::Delete(pk.as_bytes()),
            })
            .collect();
        db.write("docs", &ops).unwrap();
        for (pk, n) in docs {
            match n {
                Some(n) => model.insert(pk, n),
                None => model.remove(&pk),
            };
        }
        // No close, no wait: the queue, flushes and compactions are still busy.
        drop(db);
        db = match sift_index::Database::open(dir.path(), options()) {
            Ok(db) => db,
            Err(error) => panic!("round {round}: reopen right after drop failed: {error}"),
        };
    }
    stop.store(true, Ordering::SeqCst);
    let spawned = spawner.join().unwrap();
    assert!(spawned > 0, "no process was spawned");
    db.wait_until_indexed().unwrap();
    for (name, _) in indexes {
        for v in 0..VALUES {
            let got: HashSet<Vec<u8>> = db
                .lookup("docs", name, &AttrValue::Int(v), None)
                .unwrap()
                .hits
                .into_iter()
                .map(|hit| hit.pk)
                .collect();
            let want: HashSet<Vec<u8>> = model
                .iter()
                .filter(|(_, n)| **n == v)
                .map(|(pk, _)| pk.clone().into_bytes())
                .collect();
            assert_eq!(got, want, "index {name}, n = {v}");
        }
    }
}
