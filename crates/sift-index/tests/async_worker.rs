//! The asynchronous workers' hot path (`async_index/worker.rs`, `queue.rs`): a backlog larger
//! than one engine write is applied completely and exactly (the workers commit in slices), and
//! the workers run at the configured lower CPU priority.

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

mod common;

use common::small_options;
use sift_index::{
    format::decode_pk, format::decode_value, AttrType, AttrValue, Database, IndexKind, IndexSpec,
    Maintenance, WriteOp,
};
use sift_lsm::ReadOptions;
use std::collections::BTreeSet;
use std::time::{Duration, Instant};

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

/// The `Cpus_allowed_list` of each of `db`'s background threads whose name starts with
/// `prefix` (looked up by thread id: other tests' databases have threads of the same names).
#[cfg(target_os = "linux")]
fn cpus_of_threads(db: &Database, prefix: &str) -> Vec<(String, Option<String>)> {
    db.engine()
        .background_thread_ids()
        .into_iter()
        .filter(|(name, _)| name.starts_with(prefix))
        .map(|(name, id)| {
            let list = std::fs::read_to_string(format!("/proc/self/task/{id}/status"))
                .ok()
                .and_then(|status| {
                    status
                        .lines()
                        .find_map(|line| line.strip_prefix("Cpus_allowed_list:"))
                        .map(|list| list.trim().to_owned())
                });
            (name, list)
        })
        .collect()
}

/// With the engine's `background_thread_cpus`, the asynchronous index workers run only on
/// those CPUs, like the engine's own background threads; without it they keep the set they
/// inherit from the opening thread.
#[cfg(target_os = "linux")]
#[test]
fn workers_follow_the_engine_background_thread_cpus() {
    let first_allowed = sift_lsm::process_allowed_cpus()[0];
    let opener = std::fs::read_to_string("/proc/thread-self/status")
        .unwrap()
        .lines()
        .find_map(|line| line.strip_prefix("Cpus_allowed_list:"))
        .map(|list| list.trim().to_owned())
        .unwrap();
    for pinned in [true, false] {
        let dir = tempfile::tempdir().unwrap();
        let mut options = small_options();
        options.async_index.workers = 2;
        options.engine.background_thread_cpus = pinned.then(|| vec![first_allowed]);
        let expected = if pinned {
            first_allowed.to_string()
        } else {
            opener.clone()
        };
        let db = open_with(dir.path(), options);
        db.put(COLLECTION, br#"{"id":"a","v":1}"#).unwrap();
        db.wait_until_indexed().unwrap();
        // The workers pin themselves as they start: wait (up to 10 s) until both have.
        let deadline = Instant::now() + Duration::from_secs(10);
        let settled = |threads: &[(String, Option<String>)]| {
            threads.len() == 2
                && threads
                    .iter()
                    .all(|(_, list)| list.as_deref() == Some(expected.as_str()))
        };
        while !settled(&cpus_of_threads(&db, "sift-index-async-")) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        let workers = cpus_of_threads(&db, "sift-index-async-");
        assert!(
            settled(&workers),
            "pinned: {pinned}, expected {expected}: {workers:?}"
        );
        // The engine's flush, WAL presync and compaction threads, and the two workers.
        let all_threads = cpus_of_threads(&db, "sift-");
        assert!(all_threads.len() >= 5, "{all_threads:?}");
        assert!(
            all_threads
                .iter()
                .all(|(_, list)| list.as_deref() == Some(expected.as_str())),
            "pinned: {pinned}, expected {expected}: {all_threads:?}"
        );
        assert_eq!(db.engine().stats().background_thread_pin_failures, 0);
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

fn open_coalescing(dir: &std::path::Path, coalesce_wait: Duration) -> Database {
    let mut options = small_options();
    options.async_index.coalesce_wait = coalesce_wait;
    open_with(dir, options)
}

/// Polls the stats until `applied` updates are applied (without `wait_until_indexed`, which
/// makes the workers stop coalescing).
fn wait_applied(db: &Database, applied: u64) {
    let deadline = Instant::now() + Duration::from_mins(1);
    while db.async_index_stats().updates_applied < applied {
        assert!(
            Instant::now() < deadline,
            "updates not applied: {:?}",
            db.async_index_stats()
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// A worker lets a few updates gather into one batch (one engine write) instead of applying
/// each as it arrives.
#[test]
fn a_worker_gathers_updates_that_arrive_close_together_into_one_batch() {
    let dir = tempfile::tempdir().unwrap();
    // Long enough that a busy machine does not split the ten writes below.
    let db = open_coalescing(dir.path(), Duration::from_secs(3));
    let mut seqs = Vec::new();
    for pk in 0..10 {
        let doc = format!(r#"{{"id":"d{pk}","v":{pk}}}"#);
        seqs.push(db.put(COLLECTION, doc.as_bytes()).unwrap());
        std::thread::sleep(Duration::from_millis(5));
    }
    wait_applied(&db, 10);
    let stats = db.async_index_stats();
    assert_eq!(stats.batches_written, 1, "{stats:?}");
    let expected: BTreeSet<(i64, String, u64)> = (0..10)
        .zip(seqs)
        .map(|(pk, seq)| (pk, format!("d{pk}"), seq))
        .collect();
    assert_eq!(index_entries(&db), expected);
    db.close().unwrap();
}

/// Someone waiting for an update (here `wait_until_indexed`, as a flush drain or close would)
/// never waits for the coalescing delay, even for a single update.
#[test]
fn waiting_for_an_update_cuts_the_coalescing_delay_short() {
    let dir = tempfile::tempdir().unwrap();
    let db = open_coalescing(dir.path(), Duration::from_hours(1));
    let seq = db.put(COLLECTION, br#"{"id":"a","v":1}"#).unwrap();
    let started = Instant::now();
    assert!(db
        .wait_until_indexed_for(Some(Duration::from_mins(1)))
        .unwrap());
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "waited {:?}",
        started.elapsed()
    );
    assert_eq!(
        index_entries(&db),
        BTreeSet::from([(1, "a".to_owned(), seq)])
    );
    // A memtable flush drains the queue the same way.
    let seq = db.put(COLLECTION, br#"{"id":"a","v":2}"#).unwrap();
    db.flush().unwrap();
    assert_eq!(
        index_entries(&db),
        BTreeSet::from([(2, "a".to_owned(), seq)])
    );
    db.close().unwrap();
}

/// Close applies the updates a coalescing worker holds back; dropping the database does not
/// wait for the coalescing delay either, and what it leaves is queued again at the next open.
#[test]
fn close_or_drop_with_a_worker_holding_updates_back_loses_none() {
    for close in [true, false] {
        let dir = tempfile::tempdir().unwrap();
        let db = open_coalescing(dir.path(), Duration::from_hours(1));
        db.put(COLLECTION, br#"{"id":"a","v":1}"#).unwrap();
        db.wait_until_indexed().unwrap();
        let seq = db.put(COLLECTION, br#"{"id":"a","v":2}"#).unwrap();
        std::thread::sleep(Duration::from_millis(20));
        assert_eq!(db.async_index_stats().queue_length, 1, "held back");
        let started = Instant::now();
        if close {
            db.close().unwrap();
        } else {
            drop(db);
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "close {close}: took {:?}",
            started.elapsed()
        );
        let db = Database::open(dir.path(), small_options()).unwrap();
        db.wait_until_indexed().unwrap();
        assert_eq!(
            index_entries(&db),
            BTreeSet::from([(2, "a".to_owned(), seq)]),
            "close {close}"
        );
        if close {
            // Applied and recorded by close, not queued again.
            assert_eq!(db.async_index_stats().updates_recovered, 0);
        }
        db.close().unwrap();
    }
}

/// Flush drains ask for a watermark write (a write under the engine's commit lock) at most
/// once per `watermark_interval`; close always writes it.
#[test]
fn drains_write_the_watermark_at_most_once_per_interval() {
    let dir = tempfile::tempdir().unwrap();
    let mut options = small_options();
    options.async_index.watermark_interval = Duration::from_hours(1);
    let db = open_with(dir.path(), options);
    db.put(COLLECTION, br#"{"id":"a","v":1}"#).unwrap();
    db.flush().unwrap();
    let deadline = Instant::now() + Duration::from_mins(1);
    while db.async_index_stats().watermark_written == 0 {
        assert!(
            Instant::now() < deadline,
            "no watermark after the first drain"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    let first = db.async_index_stats().watermark_written;
    let last = db.put(COLLECTION, br#"{"id":"b","v":2}"#).unwrap();
    db.flush().unwrap();
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(db.async_index_stats().watermark_written, first);
    db.close().unwrap();
    let db = Database::open(dir.path(), small_options()).unwrap();
    assert!(db.async_index_stats().durable_watermark >= last);
    assert_eq!(db.async_index_stats().updates_recovered, 0);
    db.close().unwrap();
}

/// The watermark is written without a log sync: a sync holds the engine's commit lock for an
/// `fdatasync`, and every writer waits for that lock. So the written watermark becomes durable,
/// and the primaries' versions above the older one stop being kept, only once the memtable
/// holding its record is flushed.
#[test]
fn the_watermark_is_written_without_a_sync_and_becomes_durable_at_the_next_flush() {
    let dir = tempfile::tempdir().unwrap();
    let mut options = small_options();
    options.async_index.watermark_interval = Duration::ZERO;
    let db = open_with(dir.path(), options);
    let first = db.put(COLLECTION, br#"{"id":"a","v":1}"#).unwrap();
    db.wait_until_indexed().unwrap();
    // The worker may have inserted the entries unlogged: the watermark passes them only once
    // their memtable is flushed.
    db.flush().unwrap();
    let syncs_before = db.engine().stats().unqueued_commit_syncs;
    db.write_index_watermark().unwrap();
    let written = db.async_index_stats();
    assert_eq!(
        db.engine().stats().unqueued_commit_syncs,
        syncs_before,
        "the watermark write synced the log under the commit lock"
    );
    assert!(written.watermark_written >= first, "{written:?}");
    assert!(
        written.durable_watermark < written.watermark_written,
        "a watermark whose record is only in the memtable counted as durable: {written:?}"
    );
    db.flush().unwrap();
    // The flush's own watermark request may settle it first; this call settles it otherwise.
    db.write_index_watermark().unwrap();
    let settled = db.async_index_stats();
    assert!(
        settled.durable_watermark >= written.watermark_written,
        "the watermark did not become durable after its flush: {settled:?}"
    );
    db.close().unwrap();
    let db = Database::open(dir.path(), small_options()).unwrap();
    assert!(db.async_index_stats().durable_watermark >= first);
    assert_eq!(db.async_index_stats().updates_recovered, 0);
    db.close().unwrap();
}
