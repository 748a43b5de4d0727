//! Memory-index persistence: a clean close writes snapshots that the next open loads (and the
//! loaded index answers like brute force); after a crash, a stale snapshot, or a damaged one
//! the index is rebuilt by a scan and still answers exactly.

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

mod common;

use common::{seed, small_options, SeedGuard};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use sift_index::{
    AttrType, AttrValue, BackfillProgress, Database, IndexKind, IndexSpec, MemoryIndexOrigin,
};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// pk -> (seq, doc, n, s)
type Model = BTreeMap<Vec<u8>, (u64, Vec<u8>, Option<i64>, Option<String>)>;

const WORDS: [&str; 4] = ["red", "green", "blue", "blue\u{0}"];

/// Opens the database counting the documents that memory-index rebuilds scan.
fn open_counting(path: &Path) -> (Database, Arc<AtomicU64>) {
    let finished_scans = Arc::new(AtomicU64::new(0));
    let counter = Arc::clone(&finished_scans);
    let mut options = small_options();
    options.progress = Some(Arc::new(move |progress: &BackfillProgress| {
        if progress.finished {
            counter.fetch_add(1, Ordering::SeqCst);
        }
    }));
    (Database::open(path, options).unwrap(), finished_scans)
}

fn setup(path: &Path) -> Database {
    let (db, _) = open_counting(path);
    db.create_collection("docs", "id").unwrap();
    db.create_index(
        "docs",
        IndexSpec::new("mem_n", "n", AttrType::Int, IndexKind::Memory),
    )
    .unwrap();
    db.create_index(
        "docs",
        IndexSpec::new("mem_s", "s", AttrType::String, IndexKind::Memory),
    )
    .unwrap();
    db.create_index(
        "docs",
        IndexSpec::new("comp_n", "n", AttrType::Int, IndexKind::Composite),
    )
    .unwrap();
    db
}

fn random_writes(db: &Database, model: &mut Model, rng: &mut StdRng, count: usize) {
    for _ in 0..count {
        let pk = format!("p{}", rng.gen_range(0..60));
        if rng.gen_range(0..5) == 0 {
            let deleted = db.delete("docs", pk.as_bytes()).unwrap();
            assert_eq!(deleted.is_some(), model.remove(pk.as_bytes()).is_some());
            continue;
        }
        let n = (rng.gen_range(0..6) > 0).then(|| rng.gen_range(-3..5));
        let s = (rng.gen_range(0..6) > 0).then(|| WORDS[rng.gen_range(0..WORDS.len())].to_string());
        let mut doc = serde_json::json!({ "id": pk });
        if let Some(n) = n {
            doc["n"] = n.into();
        }
        if let Some(s) = &s {
            doc["s"] = s.clone().into();
        }
        let json = serde_json::to_vec(&doc).unwrap();
        let seq = db.put("docs", &json).unwrap();
        model.insert(pk.into_bytes(), (seq, json, n, s));
    }
}

fn check(db: &Database, model: &Model, what: &str) {
    let want = |keep: &dyn Fn(Option<i64>, Option<&str>) -> bool, limit: Option<usize>| {
        let mut hits: Vec<(Vec<u8>, u64, Vec<u8>)> = model
            .iter()
            .filter(|(_, (_, _, n, s))| keep(*n, s.as_deref()))
            .map(|(pk, (seq, doc, _, _))| (pk.clone(), *seq, doc.clone()))
            .collect();
        hits.sort_by_key(|hit| std::cmp::Reverse(hit.1));
        hits.truncate(limit.unwrap_or(usize::MAX));
        hits
    };
    let got = |result: sift_index::QueryResult| {
        result
            .hits
            .into_iter()
            .map(|hit| (hit.pk, hit.seq, hit.doc))
            .collect::<Vec<_>>()
    };
    for limit in [Some(1), Some(4), None] {
        for index in ["mem_n", "comp_n"] {
            for v in -4..6 {
                let result = db.lookup("docs", index, &AttrValue::Int(v), limit).unwrap();
                assert_eq!(
                    got(result),
                    want(&|n, _| n == Some(v), limit),
                    "{what}: {index} lookup {v} limit {limit:?}"
                );
                let result = db
                    .range(
                        "docs",
                        index,
                        &AttrValue::Int(v),
                        &AttrValue::Int(v + 2),
                        limit,
                    )
                    .unwrap();
                assert_eq!(
                    got(result),
                    want(&|n, _| n.is_some_and(|n| v <= n && n <= v + 2), limit),
                    "{what}: {index} range {v}..={} limit {limit:?}",
                    v + 2
                );
            }
        }
        for word in WORDS {
            let result = db
                .lookup("docs", "mem_s", &AttrValue::String(word.into()), limit)
                .unwrap();
            assert_eq!(
                got(result),
                want(&|_, s| s == Some(word), limit),
                "{what}: mem_s lookup {word:?} limit {limit:?}"
            );
        }
        let result = db
            .range(
                "docs",
                "mem_s",
                &AttrValue::String("blue".into()),
                &AttrValue::String("green".into()),
                limit,
            )
            .unwrap();
        assert_eq!(
            got(result),
            want(
                &|_, s| s.is_some_and(|s| ("blue"..="green").contains(&s)),
                limit
            ),
            "{what}: mem_s range limit {limit:?}"
        );
    }
}

fn origin(db: &Database, index: &str) -> MemoryIndexOrigin {
    db.memory_index_origin("docs", index).unwrap().unwrap()
}

fn snapshot_files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| {
            path.file_name()
                .and_then(|name| name.to_str())
                .is_some_and(|name| name.starts_with("sift-memory-index-"))
        })
        .collect();
    files.sort();
    files
}

#[test]
fn clean_close_snapshot_is_loaded_and_exact() {
    let seed = seed();
    let _guard = SeedGuard(seed);
    let mut rng = StdRng::seed_from_u64(seed);
    let dir = tempfile::tempdir().unwrap();
    let db = setup(dir.path());
    assert_eq!(origin(&db, "mem_n"), MemoryIndexOrigin::Backfilled);
    assert_eq!(db.memory_index_origin("docs", "comp_n").unwrap(), None);
    let mut model = Model::new();
    random_writes(&db, &mut model, &mut rng, 300);
    db.flush().unwrap();
    random_writes(&db, &mut model, &mut rng, 100);
    check(&db, &model, "before close");
    let memory_bytes = db.memory_bytes("docs", "mem_n").unwrap();
    let sequence = db.engine().latest_sequence();
    db.close().unwrap();
    assert_eq!(
        snapshot_files(dir.path()).len(),
        2,
        "one snapshot per memory index"
    );

    for round in 0..3 {
        let (db, finished_scans) = open_counting(dir.path());
        for index in ["mem_n", "mem_s"] {
            match origin(&db, index) {
                MemoryIndexOrigin::Snapshot { seq, entries } => {
                    assert_eq!(seq, db.engine().latest_sequence());
                    let expected = model
                        .values()
                        .filter(|(_, _, n, s)| {
                            if index == "mem_n" {
                                n.is_some()
                            } else {
                                s.is_some()
                            }
                        })
                        .count();
                    assert_eq!(entries, expected as u64, "round {round}: {index} entries");
                }
                other => {
                    panic!("round {round}: {index} was not loaded from its snapshot: {other:?}")
                }
            }
        }
        if round == 0 {
            assert_eq!(sequence, db.engine().latest_sequence());
            assert_eq!(db.memory_bytes("docs", "mem_n").unwrap(), memory_bytes);
        }
        assert_eq!(
            finished_scans.load(Ordering::SeqCst),
            0,
            "round {round}: nothing was scanned at open"
        );
        assert!(
            snapshot_files(dir.path()).is_empty(),
            "open consumes the snapshots"
        );
        check(&db, &model, &format!("round {round} after load"));
        // Writes after a load keep the index exact and go into the next snapshot.
        random_writes(&db, &mut model, &mut rng, 50);
        check(&db, &model, &format!("round {round} after writes"));
        db.close().unwrap();
    }
}

#[test]
fn crash_after_load_rebuilds() {
    let seed = seed();
    let _guard = SeedGuard(seed);
    let mut rng = StdRng::seed_from_u64(seed);
    let dir = tempfile::tempdir().unwrap();
    let db = setup(dir.path());
    let mut model = Model::new();
    random_writes(&db, &mut model, &mut rng, 200);
    db.close().unwrap();
    let (db, _) = open_counting(dir.path());
    assert!(matches!(
        origin(&db, "mem_n"),
        MemoryIndexOrigin::Snapshot { .. }
    ));
    random_writes(&db, &mut model, &mut rng, 100);
    drop(db); // no clean close: no snapshot written (as after a crash)
    let (db, finished_scans) = open_counting(dir.path());
    for index in ["mem_n", "mem_s"] {
        match origin(&db, index) {
            MemoryIndexOrigin::Rebuilt { reason } => {
                assert!(reason.contains("no snapshot"), "{index}: {reason}");
            }
            other => panic!("{index} should have been rebuilt: {other:?}"),
        }
    }
    assert_eq!(
        finished_scans.load(Ordering::SeqCst),
        2,
        "both rebuilt by a scan"
    );
    check(&db, &model, "after crash");
}

#[test]
fn stale_snapshot_is_not_used() {
    let seed = seed();
    let _guard = SeedGuard(seed);
    let mut rng = StdRng::seed_from_u64(seed);
    let dir = tempfile::tempdir().unwrap();
    let db = setup(dir.path());
    let mut model = Model::new();
    random_writes(&db, &mut model, &mut rng, 200);
    db.close().unwrap();
    let saved: Vec<(PathBuf, Vec<u8>)> = snapshot_files(dir.path())
        .into_iter()
        .map(|path| {
            let bytes = std::fs::read(&path).unwrap();
            (path, bytes)
        })
        .collect();
    let (db, _) = open_counting(dir.path());
    random_writes(&db, &mut model, &mut rng, 60);
    drop(db);
    // A snapshot of an older state reappears (e.g. restored by hand): it must be ignored.
    for (path, bytes) in &saved {
        std::fs::write(path, bytes).unwrap();
    }
    let (db, _) = open_counting(dir.path());
    for index in ["mem_n", "mem_s"] {
        match origin(&db, index) {
            MemoryIndexOrigin::Rebuilt { reason } => {
                assert!(reason.contains("stale"), "{index}: {reason}");
            }
            other => panic!("{index} should have been rebuilt: {other:?}"),
        }
    }
    check(&db, &model, "after stale snapshot");
    assert!(snapshot_files(dir.path()).is_empty());
}

#[test]
fn corrupted_snapshot_is_rebuilt_exactly() {
    let seed = seed();
    let _guard = SeedGuard(seed);
    let mut rng = StdRng::seed_from_u64(seed);
    let dir = tempfile::tempdir().unwrap();
    let db = setup(dir.path());
    let mut model = Model::new();
    random_writes(&db, &mut model, &mut rng, 200);
    db.close().unwrap();
    // Several kinds of damage, each on a fresh clean close.
    for damage in 0..4 {
        let files = snapshot_files(dir.path());
        assert_eq!(files.len(), 2);
        let target = &files[rng.gen_range(0..files.len())];
        let mut bytes = std::fs::read(target).unwrap();
        let expected_reason = match damage {
            0 => {
                let at = rng.gen_range(0..bytes.len());
                bytes[at] ^= 1 << rng.gen_range(0..8);
                "checksum"
            }
            1 => {
                bytes.truncate(rng.gen_range(0..bytes.len()));
                ""
            }
            2 => {
                // The other index's snapshot under this index's name: valid CRC, wrong index.
                let other = files.iter().find(|path| *path != target).unwrap();
                bytes = std::fs::read(other).unwrap();
                "describes index"
            }
            _ => {
                bytes.clear();
                "shorter"
            }
        };
        std::fs::write(target, &bytes).unwrap();
        let (db, finished_scans) = open_counting(dir.path());
        let damaged = if target.to_string_lossy().contains(&format!(
            "sift-memory-index-{}.",
            db.collection("docs")
                .unwrap()
                .indexes
                .iter()
                .find(|index| index.name == "mem_n")
                .unwrap()
                .id
        )) {
            "mem_n"
        } else {
            "mem_s"
        };
        let intact = if damaged == "mem_n" { "mem_s" } else { "mem_n" };
        match origin(&db, damaged) {
            MemoryIndexOrigin::Rebuilt { reason } => {
                assert!(
                    reason.contains(expected_reason) && reason.contains("corruption in"),
                    "damage {damage}: {reason}"
                );
                assert!(reason.contains(&*target.to_string_lossy()), "{reason}");
            }
            other => panic!("damage {damage}: {damaged} should have been rebuilt: {other:?}"),
        }
        assert!(matches!(
            origin(&db, intact),
            MemoryIndexOrigin::Snapshot { .. }
        ));
        assert_eq!(finished_scans.load(Ordering::SeqCst), 1);
        check(&db, &model, &format!("damage {damage}"));
        random_writes(&db, &mut model, &mut rng, 20);
        db.close().unwrap();
    }
}

#[test]
fn dropped_memory_index_leaves_no_snapshot_and_recreated_one_is_exact() {
    let seed = seed();
    let _guard = SeedGuard(seed);
    let mut rng = StdRng::seed_from_u64(seed);
    let dir = tempfile::tempdir().unwrap();
    let db = setup(dir.path());
    let mut model = Model::new();
    random_writes(&db, &mut model, &mut rng, 100);
    db.drop_index("docs", "mem_s").unwrap();
    db.close().unwrap();
    assert_eq!(snapshot_files(dir.path()).len(), 1);
    let (db, _) = open_counting(dir.path());
    db.create_index(
        "docs",
        IndexSpec::new("mem_s", "s", AttrType::String, IndexKind::Memory),
    )
    .unwrap();
    assert_eq!(origin(&db, "mem_s"), MemoryIndexOrigin::Backfilled);
    check(&db, &model, "recreated");
    db.close().unwrap();
    let (db, _) = open_counting(dir.path());
    assert!(matches!(
        origin(&db, "mem_s"),
        MemoryIndexOrigin::Snapshot { .. }
    ));
    check(&db, &model, "reloaded");
}
