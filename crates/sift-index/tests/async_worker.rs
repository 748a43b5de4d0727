//! The asynchronous workers' hot path (`async_index/worker.rs`, `queue.rs`): a backlog larger
//! than one engine write is applied completely and exactly (the workers commit in slices), and
//! the workers run at the configured lower CPU priority.

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

mod common;

use common::small_options;
use sift_index::{
    decode_pk, decode_value, AttrType, AttrValue, Database, IndexKind, IndexSpec, Maintenance,
    WriteOp,
};
use sift_lsm::ReadOptions;
use std::collections::BTreeSet;

const COLLECTION: &str = "docs";

fn open(dir: &std::path::Path, nice: i32) -> Database {
    let mut options = small_options();
    options.async_index.worker_nice = nice;
    open_with(dir, options)
}

/// A database with collection `docs` and its async-simple composite index `v` on `v`.
fn open_with(dir: &std::path::Path, options: sift_index::DatabaseOptions) -> Database {
    let db = Database::open(dir, options).unwrap();
    db.create_collection(COLLECTION, "id").unwrap();
    db.create_index(
        COLLECTION,
        IndexSpec::new("v", "v", AttrType::Int, IndexKind::Composite)
            .with_maintenance(Maintenance::AsyncSimple),
    )
    .unwrap();
    db
}

/// Every entry of the asynchronous index tree: (value, pk, stored sequence number).
fn index_entries(db: &Database) -> BTreeSet<(i64, String, u64)> {
    let info = db.collection(COLLECTION).unwrap();
    let record = info.indexes.iter().find(|i| i.name == "v").unwrap();
    let tree = db.engine().tree(record.tree.as_deref().unwrap()).unwrap();
    let mut iter = db.engine().iter(&tree, ReadOptions::default()).unwrap();
    iter.seek_to_first().unwrap();
    let mut entries = BTreeSet::new();
    while iter.valid() {
        let (value, used) = decode_value(iter.key(), AttrType::Int).unwrap();
        let (pk, _) = decode_pk(&iter.key()[used..]).unwrap();
        let AttrValue::Int(value) = value else {
            panic!("not an int")
        };
        let seq = u64::from_be_bytes(iter.value().try_into().unwrap());
        entries.insert((value, String::from_utf8(pk).unwrap(), seq));
        iter.next().unwrap();
    }
    entries
}

#[test]
fn a_backlog_larger_than_one_engine_write_is_applied_exactly() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path(), 0);
    // 700 documents in one write, then each moved to another value in one write: the worker
    // takes batches of up to 256 updates, each of two entries (delete the old, put the new),
    // so every batch spans several engine writes.
    let documents = 700u64;
    for round in 0..2i64 {
        let docs: Vec<Vec<u8>> = (0..documents)
            .map(|pk| {
                format!("{{\"id\":\"d{pk:04}\",\"v\":{}}}", pk as i64 * 10 + round).into_bytes()
            })
            .collect();
        let ops: Vec<WriteOp<'_>> = docs.iter().map(|d| WriteOp::Put(d)).collect();
        let seqs = db.write(COLLECTION, &ops).unwrap();
        db.wait_until_indexed().unwrap();
        let expected: BTreeSet<(i64, String, u64)> = (0..documents)
            .zip(seqs)
            .map(|(pk, seq)| (pk as i64 * 10 + round, format!("d{pk:04}"), seq.unwrap()))
            .collect();
        assert_eq!(index_entries(&db), expected, "round {round}");
    }
    let stats = db.async_index_stats();
    assert_eq!(stats.updates_applied, 2 * documents);
    assert_eq!(stats.queue_length, 0);
    // A lookup finds the moved document under its new value only.
    let hits = db
        .lookup(COLLECTION, "v", &AttrValue::Int(6991), None)
        .unwrap()
        .hits;
    assert_eq!(hits.len(), 1);
    assert_eq!(hits[0].pk, b"d0699");
    assert!(db
        .lookup(COLLECTION, "v", &AttrValue::Int(6990), None)
        .unwrap()
        .hits
        .is_empty());
    db.close().unwrap();
}

/// The nice value of every thread of this process named `name` (Linux `/proc`).
#[cfg(target_os = "linux")]
fn nice_of_threads(name: &str) -> Vec<i64> {
    let mut found = Vec::new();
    for task in std::fs::read_dir("/proc/self/task").unwrap() {
        let Ok(stat) = std::fs::read_to_string(task.unwrap().path().join("stat")) else {
            continue;
        };
        // "tid (comm) state ppid ..." — the nice value is field 19, the 17th after the comm.
        let (Some(open), Some(close)) = (stat.find('('), stat.rfind(')')) else {
            continue;
        };
        if !stat[open + 1..close].starts_with(name) {
            continue;
        }
        let fields: Vec<&str> = stat[close + 2..].split(' ').collect();
        found.push(fields[16].parse().unwrap());
    }
    found
}

#[cfg(target_os = "linux")]
#[test]
fn workers_run_at_the_configured_nice_value() {
    let own = nice_of_threads("").into_iter().min().unwrap_or(0);
    for nice in [7, 13] {
        let dir = tempfile::tempdir().unwrap();
        let db = open(dir.path(), nice);
        db.put(COLLECTION, br#"{"id":"a","v":1}"#).unwrap();
        db.wait_until_indexed().unwrap();
        // "sift-index-async-0" is cut to 15 bytes in the comm. Workers of databases that other
        // tests open concurrently keep the process's value (their `worker_nice` is 0).
        let workers = nice_of_threads("sift-index-asyn");
        // A worker only ever lowers its priority (raising it needs privileges).
        let expected = own.max(i64::from(nice));
        assert!(
            workers.contains(&expected),
            "nice {nice}: workers at {workers:?}, the process at {own}"
        );
        db.close().unwrap();
    }
}

/// Regression (review of the write path): a write the engine refuses after its batch was
/// built (here a document over the engine's `value_bytes_max`) queued its index updates
/// before the refusal and cancelled them only after the commit lock was released. In that
/// gap another write could take the same sequence numbers and a worker could apply the
/// refused write's updates. Now the batch is checked before anything is queued.
#[test]
fn a_write_the_engine_refuses_queues_no_index_update() {
    let dir = tempfile::tempdir().unwrap();
    let mut options = small_options();
    options.engine.value_bytes_max = 1024;
    let db = open_with(dir.path(), options);
    db.put(COLLECTION, br#"{"id":"a","v":1}"#).unwrap();
    db.wait_until_indexed().unwrap();
    let queued_before = db.async_index_stats().updates_queued;
    let oversized = format!(r#"{{"id":"a","v":2,"body":"{}"}}"#, "x".repeat(2048));
    let error = db.put(COLLECTION, oversized.as_bytes()).unwrap_err();
    assert!(
        error.to_string().contains("value_bytes_max"),
        "unexpected error: {error}"
    );
    assert_eq!(
        db.async_index_stats().updates_queued,
        queued_before,
        "the refused write queued index updates"
    );
    db.wait_until_indexed().unwrap();
    let seq = db.get(COLLECTION, b"a").unwrap().unwrap().seq;
    assert_eq!(
        index_entries(&db),
        BTreeSet::from([(1, "a".to_owned(), seq)])
    );
}
