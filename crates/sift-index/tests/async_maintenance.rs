//! Asynchronous maintenance (`async-simple`, `async-session`): back-fill with sequence
//! numbers, retries and persistent failures, drains before flushes with tiny memtables,
//! crashes (SIGKILL of a writer child process: the test binary re-executes itself with
//! `SIFT_ASYNC_CHILD` set), sessions (read your writes, expiry, overlay cap), lag statistics
//! and named regressions. (Model equivalence for every kind and scheme is in `tests/model/`.)
//! `SIFT_SEED` replays a seed.

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

mod common;

use common::{seed, small_options, SeedGuard};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use sift_index::{
    format::decode_pk, format::decode_value, AttrType, AttrValue, Database, DatabaseOptions,
    IndexError, IndexKind, IndexSpec, Maintenance, SessionConsistency, TestHook, WriteOp,
};
use sift_lsm::fs::{FaultFileSystem, FileLock, FileSystem, RandomAccessFile, WritableFile};
use sift_lsm::{Db, ReadOptions};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

const COLLECTION: &str = "docs";
const PKS: u64 = 60;
const VALUES: i64 = 6;

/// pk -> (value of `v`, value of `s`, sequence number of the live version).
type Model = BTreeMap<u64, (Option<i64>, String, u64)>;

fn options(workers: usize) -> DatabaseOptions {
    let mut options = small_options();
    options.async_index.workers = workers;
    options.async_index.retry_backoff_initial = Duration::from_millis(1);
    options.async_index.retry_backoff_max = Duration::from_millis(20);
    options
}

/// Collection `docs` keyed by `id`, with `v` (int) indexed asynchronously and `s` (string)
/// indexed sync-full, so both paths run in the same writes.
fn setup(db: &Database, maintenance: Maintenance) {
    match db.collection(COLLECTION) {
        Ok(info) if info.indexes.iter().any(|index| index.name == "v") => return,
        Ok(_) => {}
        Err(_) => {
            db.create_collection(COLLECTION, "id").unwrap();
        }
    }
    db.create_index(
        COLLECTION,
        IndexSpec::new("v", "v", AttrType::Int, IndexKind::Composite).with_maintenance(maintenance),
    )
    .unwrap();
    db.create_index(
        COLLECTION,
        IndexSpec::new("s", "s", AttrType::String, IndexKind::Composite)
            .with_maintenance(Maintenance::SyncFull),
    )
    .unwrap();
}

fn doc(pk: u64, v: Option<i64>, s: &str) -> Vec<u8> {
    let mut json = serde_json::json!({ "id": pk, "s": s });
    if let Some(v) = v {
        json["v"] = serde_json::json!(v);
    }
    serde_json::to_vec(&json).unwrap()
}

fn pk_bytes(pk: u64) -> Vec<u8> {
    pk.to_string().into_bytes()
}

fn pk_of(bytes: &[u8]) -> u64 {
    std::str::from_utf8(bytes).unwrap().parse().unwrap()
}

/// The documents whose `v` is in `lo..=hi`, newest first, at most `limit`.
fn brute_force(model: &Model, lo: i64, hi: i64, limit: Option<usize>) -> Vec<(u64, u64)> {
    let mut hits: Vec<(u64, u64)> = model
        .iter()
        .filter(|(_, (v, _, _))| v.is_some_and(|v| (lo..=hi).contains(&v)))
        .map(|(pk, (_, _, seq))| (*pk, *seq))
        .collect();
    hits.sort_by_key(|(_, seq)| std::cmp::Reverse(*seq));
    hits.truncate(limit.unwrap_or(usize::MAX));
    hits
}

fn query(db: &Database, lo: i64, hi: i64, limit: Option<usize>) -> Vec<(u64, u64)> {
    let result = if lo == hi {
        db.lookup(COLLECTION, "v", &AttrValue::Int(lo), limit)
    } else {
        db.range(
            COLLECTION,
            "v",
            &AttrValue::Int(lo),
            &AttrValue::Int(hi),
            limit,
        )
    }
    .unwrap();
    result
        .hits
        .iter()
        .map(|hit| (pk_of(&hit.pk), hit.seq))
        .collect()
}

/// Every entry of the asynchronous index tree: (value, pk, stored sequence number).
fn index_entries(db: &Database) -> BTreeSet<(i64, u64, u64)> {
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
        entries.insert((value, pk_of(&pk), seq));
        iter.next().unwrap();
    }
    entries
}

fn expected_entries(model: &Model) -> BTreeSet<(i64, u64, u64)> {
    model
        .iter()
        .filter_map(|(pk, (v, _, seq))| v.map(|v| (v, *pk, *seq)))
        .collect()
}

/// After `wait_until_indexed`: every query equals brute force and the index holds exactly the
/// live versions' entries.
fn check_exact(db: &Database, model: &Model, context: &str) {
    db.wait_until_indexed().unwrap();
    for lo in -1..VALUES {
        for (hi, limit) in [(lo, None), (lo, Some(2)), (lo + 2, None), (lo + 3, Some(3))] {
            assert_eq!(
                query(db, lo, hi, limit),
                brute_force(model, lo, hi, limit),
                "{context}: v in {lo}..={hi} limit {limit:?}"
            );
        }
    }
    assert_eq!(
        index_entries(db),
        expected_entries(model),
        "{context}: index entries"
    );
    let stats = db.async_index_stats();
    assert_eq!(stats.queue_length, 0, "{context}");
}

fn random_write(rng: &mut StdRng, db: &Database, model: &mut Model) {
    let count = if rng.gen_bool(0.2) {
        rng.gen_range(2..6)
    } else {
        1
    };
    let mut docs = Vec::new();
    let mut planned = Vec::new();
    for _ in 0..count {
        let pk = rng.gen_range(0..PKS);
        if rng.gen_bool(0.2) {
            planned.push((pk, None));
        } else {
            let v = (!rng.gen_bool(0.1)).then(|| rng.gen_range(0..VALUES));
            let s = ["a", "b"][rng.gen_range(0..2)];
            docs.push(doc(pk, v, s));
            planned.push((pk, Some((v, s.to_string(), docs.len() - 1))));
        }
    }
    let keys: Vec<Vec<u8>> = planned.iter().map(|(pk, _)| pk_bytes(*pk)).collect();
    let ops: Vec<WriteOp<'_>> = planned
        .iter()
        .zip(&keys)
        .map(|((_, plan), key)| match plan {
            Some((_, _, i)) => WriteOp::Put(&docs[*i]),
            None => WriteOp::Delete(key),
        })
        .collect();
    let seqs = db.write(COLLECTION, &ops).unwrap();
    for ((pk, plan), seq) in planned.into_iter().zip(seqs) {
        match (plan, seq) {
            (Some((v, s, _)), Some(seq)) => {
                model.insert(pk, (v, s, seq));
            }
            (None, Some(_)) => {
                model.remove(&pk);
            }
            (None, None) => assert!(!model.contains_key(&pk)),
            (Some(_), None) => panic!("a put returned no sequence number"),
        }
    }
}

#[test]
fn only_composite_indexes_can_be_asynchronous() {
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(dir.path(), options(1)).unwrap();
    db.create_collection(COLLECTION, "id").unwrap();
    for kind in [IndexKind::Eager, IndexKind::Lazy, IndexKind::Memory] {
        let error = db
            .create_index(
                COLLECTION,
                IndexSpec::new("x", "v", AttrType::Int, kind)
                    .with_maintenance(Maintenance::AsyncSimple),
            )
            .unwrap_err();
        assert!(
            matches!(error, IndexError::InvalidIndexSpec { ref reason, .. } if reason.contains("composite")),
            "{kind}: {error}"
        );
    }
    assert_eq!("async-session".parse(), Ok(Maintenance::AsyncSession));
    assert_eq!(Maintenance::AsyncSimple.to_string(), "async-simple");
}

#[test]
fn index_created_on_existing_documents_is_backfilled_with_sequence_numbers() {
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(dir.path(), options(1)).unwrap();
    db.create_collection(COLLECTION, "id").unwrap();
    let mut model = Model::new();
    for pk in 0..PKS {
        let seq = db
            .put(COLLECTION, &doc(pk, Some((pk % 4) as i64), "a"))
            .unwrap();
        model.insert(pk, (Some((pk % 4) as i64), "a".into(), seq));
    }
    setup(&db, Maintenance::AsyncSimple);
    check_exact(&db, &model, "after back-fill");
    let seq = db.put(COLLECTION, &doc(3, Some(5), "a")).unwrap();
    model.insert(3, (Some(5), "a".into(), seq));
    check_exact(&db, &model, "after an update");
}

#[test]
fn failed_index_batches_are_retried_and_persistent_failures_reported() {
    let dir = tempfile::tempdir().unwrap();
    let mut opts = options(1);
    opts.async_index.failures_reported_after = 3;
    let failures = Arc::clone(&opts.async_index.inject_failures);
    let db = Database::open(dir.path(), opts).unwrap();
    setup(&db, Maintenance::AsyncSimple);
    let mut model = Model::new();
    failures.store(2, Ordering::SeqCst);
    for pk in 0..10 {
        let seq = db.put(COLLECTION, &doc(pk, Some(1), "a")).unwrap();
        model.insert(pk, (Some(1), "a".into(), seq));
    }
    check_exact(&db, &model, "after transient failures");
    let stats = db.async_index_stats();
    assert_eq!(stats.failed_attempts, 2);
    assert!(!stats.persistent_failure);
    assert!(stats.last_error.unwrap().contains("injected"));

    failures.store(u64::MAX, Ordering::SeqCst);
    let seq = db.put(COLLECTION, &doc(0, Some(2), "a")).unwrap();
    model.insert(0, (Some(2), "a".into(), seq));
    let error = db.wait_until_indexed().unwrap_err();
    assert!(
        matches!(error, IndexError::IndexingFailed { attempts, .. } if attempts >= 3),
        "{error}"
    );
    let stats = db.async_index_stats();
    assert!(
        stats.persistent_failure && stats.queue_length == 1,
        "{stats:?}"
    );
    // Never dropped: once the failures stop, the update is applied.
    failures.store(0, Ordering::SeqCst);
    check_exact(&db, &model, "after the failures stopped");
    assert!(!db.async_index_stats().persistent_failure);
}

#[test]
fn updates_left_by_a_drop_without_close_are_queued_again_at_open() {
    let seed = seed();
    let _guard = SeedGuard(seed);
    let mut rng = StdRng::seed_from_u64(seed);
    let dir = tempfile::tempdir().unwrap();
    let mut model = Model::new();
    {
        let mut opts = options(1);
        // The workers never succeed (and no flush is needed, which would wait for them).
        opts.engine.memtable_bytes_max = 4 << 20;
        opts.async_index
            .inject_failures
            .store(u64::MAX, Ordering::SeqCst);
        let db = Database::open(dir.path(), opts).unwrap();
        setup(&db, Maintenance::AsyncSimple);
        // Some documents indexed before the failures start, then overwritten.
        for pk in 0..PKS {
            let seq = db.put(COLLECTION, &doc(pk, Some(0), "a")).unwrap();
            model.insert(pk, (Some(0), "a".into(), seq));
        }
        db.async_index_stats();
        for _ in 0..400 {
            random_write(&mut rng, &db, &mut model);
        }
        assert!(db.async_index_stats().queue_length > 0);
        drop(db); // no close: nothing drained
    }
    let db = Database::open(dir.path(), options(2)).unwrap();
    assert!(db.async_index_stats().updates_recovered > 0);
    check_exact(&db, &model, &format!("seed {seed} after reopen"));
    db.close().unwrap();
}

#[test]
fn tiny_memtables_flush_while_writes_stream_without_deadlock() {
    let dir = tempfile::tempdir().unwrap();
    let mut opts = options(2);
    opts.engine.memtable_bytes_max = 4096;
    opts.engine.immutable_memtables_max = 1;
    let db = Arc::new(Database::open(dir.path(), opts).unwrap());
    setup(&db, Maintenance::AsyncSimple);
    let (done_sender, done) = std::sync::mpsc::channel();
    let writers: Vec<_> = (0..3u64)
        .map(|thread| {
            let db = Arc::clone(&db);
            let done_sender = done_sender.clone();
            std::thread::spawn(move || {
                let mut rng = StdRng::seed_from_u64(thread);
                for i in 0..600u64 {
                    let pk = thread * 1000 + rng.gen_range(0..40);
                    let value = rng.gen_range(0..VALUES);
                    db.put(COLLECTION, &doc(pk, Some(value), "a")).unwrap();
                    if i % 150 == 0 {
                        db.flush().unwrap();
                    }
                }
                done_sender.send(()).unwrap();
            })
        })
        .collect();
    for _ in 0..3 {
        done.recv_timeout(Duration::from_mins(1))
            .expect("writers stuck: deadlock between flush and index workers?");
    }
    for writer in writers {
        writer.join().unwrap();
    }
    assert!(db
        .wait_until_indexed_for(Some(Duration::from_secs(30)))
        .unwrap());
    let stats = db.async_index_stats();
    assert!(stats.flush_drains > 0, "{stats:?}");
    assert_eq!(stats.flush_drains_abandoned, 0);
    // Index equals the primary.
    let mut model = Model::new();
    for thread in 0..3u64 {
        for pk in thread * 1000..thread * 1000 + 40 {
            if let Some(hit) = db.get(COLLECTION, &pk_bytes(pk)).unwrap() {
                let json: serde_json::Value = serde_json::from_slice(&hit.doc).unwrap();
                model.insert(pk, (json["v"].as_i64(), "a".into(), hit.seq));
            }
        }
    }
    check_exact(&db, &model, "after streaming");
}

// ---- crash: a writer child process killed with SIGKILL -------------------------------------

const CHILD_ENV: &str = "SIFT_ASYNC_CHILD";

fn child_options(slow_workers: bool) -> DatabaseOptions {
    let mut opts = options(2);
    opts.engine.memtable_bytes_max = 8 << 10;
    if slow_workers {
        // Every index batch fails: updates pile up, and the first flush waits for them until
        // the child is killed (writes stall behind it).
        opts.async_index.retry_backoff_initial = Duration::from_millis(5);
        opts.async_index
            .inject_failures
            .store(u64::MAX, Ordering::SeqCst);
    }
    opts
}

/// Child mode: write until killed.
fn run_child(dir: &Path, slow_workers: bool, seed: u64) -> ! {
    let db = Database::open(dir, child_options(slow_workers)).unwrap();
    setup(&db, Maintenance::AsyncSimple);
    let mut rng = StdRng::seed_from_u64(seed);
    let mut model = Model::new(); // unused: the parent checks against the recovered primary
    loop {
        random_write(&mut rng, &db, &mut model);
    }
}

fn recovered_model(db: &Database) -> Model {
    let mut model = Model::new();
    for pk in 0..PKS {
        if let Some(hit) = db.get(COLLECTION, &pk_bytes(pk)).unwrap() {
            let json: serde_json::Value = serde_json::from_slice(&hit.doc).unwrap();
            model.insert(
                pk,
                (
                    json["v"].as_i64(),
                    json["s"].as_str().unwrap().to_string(),
                    hit.seq,
                ),
            );
        }
    }
    model
}

#[test]
fn killed_writer_loses_no_index_update() {
    if let Ok(spec) = std::env::var(CHILD_ENV) {
        let mut parts = spec.splitn(3, ':');
        let slow = parts.next() == Some("slow");
        let seed: u64 = parts.next().unwrap().parse().unwrap();
        run_child(Path::new(parts.next().unwrap()), slow, seed);
    }
    let seed = seed();
    let _guard = SeedGuard(seed);
    let mut rng = StdRng::seed_from_u64(seed);
    let dir = tempfile::tempdir().unwrap();
    let exe = std::env::current_exe().unwrap();
    for round in 0..4 {
        let slow = round % 2 == 1;
        let mode = if slow { "slow" } else { "normal" };
        let mut child = std::process::Command::new(&exe)
            .args([
                "--exact",
                "killed_writer_loses_no_index_update",
                "--nocapture",
            ])
            .env(
                CHILD_ENV,
                format!("{mode}:{}:{}", seed + round, dir.path().display()),
            )
            .stdout(std::process::Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis(rng.gen_range(300..700)));
        child.kill().unwrap(); // SIGKILL
        child.wait().unwrap();
        let db = Database::open(dir.path(), options(1)).unwrap();
        let model = recovered_model(&db);
        assert!(!model.is_empty(), "round {round}: the child wrote nothing");
        if slow {
            // Its updates were all pending: they come back from the primary, not from a queue.
            assert!(
                db.async_index_stats().updates_recovered > 0,
                "round {round}"
            );
        }
        let stats = db.async_index_stats();
        check_exact(
            &db,
            &model,
            &format!(
                "seed {seed} round {round} ({mode}), watermark at open {}, {} updates queued again",
                stats.durable_watermark, stats.updates_recovered
            ),
        );
        db.close().unwrap();
    }
}

/// Regression (CI, `killed_writer_loses_no_index_update`, seeds 4797718652392583330 and
/// 10628404133040631396): the log replay at open puts writes whose index updates were never
/// applied into L0 tables beside the older versions, and a background compaction that ran
/// before the replay scan dropped the versions the scan needs (the one indexed at the
/// watermark, and versions above it whose updates were applied but not yet covered by a
/// watermark), leaving their entries in the index forever. The hook compacts every tree at
/// exactly that moment.
#[test]
fn versions_compacted_before_the_replay_scan_leave_no_stale_entries() {
    let dir = tempfile::tempdir().unwrap();
    let mut opts = options(1);
    opts.engine.memtable_bytes_max = 4 << 20; // no flush: no drain writes a watermark
    let value = |pk: u64, version: u64| Some(((pk + version) % VALUES as u64) as i64);
    let mut model = Model::new();
    let put = |db: &Database, model: &mut Model, pk: u64, v: Option<i64>| {
        let seq = db.put(COLLECTION, &doc(pk, v, "a")).unwrap();
        model.insert(pk, (v, "a".into(), seq));
    };
    {
        // Version 0 of every document, indexed; the close writes the watermark above it.
        let db = Database::open(dir.path(), opts.clone()).unwrap();
        setup(&db, Maintenance::AsyncSimple);
        for pk in 0..PKS {
            put(&db, &mut model, pk, value(pk, 0));
        }
        db.close().unwrap();
    }
    {
        let db = Database::open(dir.path(), opts.clone()).unwrap();
        // Version 1: indexed (its entries replace version 0's), but no watermark covers it.
        for pk in 0..PKS {
            put(&db, &mut model, pk, value(pk, 1));
        }
        db.wait_until_indexed().unwrap();
        // Version 2 (or a delete): never indexed.
        opts.async_index
            .inject_failures
            .store(u64::MAX, Ordering::SeqCst);
        for pk in 0..PKS {
            if pk % 7 == 3 {
                db.delete(COLLECTION, &pk_bytes(pk)).unwrap();
                model.remove(&pk);
            } else {
                put(&db, &mut model, pk, value(pk, 2));
            }
        }
        assert!(db.async_index_stats().queue_length > 0);
        drop(db); // no close: nothing drained, no watermark written
    }
    let mut reopen = options(1);
    reopen.async_index.before_replay_scan = Some(TestHook(Arc::new(|engine: &Db| {
        for name in engine.tree_names() {
            let tree = engine.tree(&name).unwrap();
            engine.compact_range(&tree, None, None).unwrap();
        }
    })));
    let db = Database::open(dir.path(), reopen).unwrap();
    assert!(db.async_index_stats().updates_recovered > 0);
    assert_eq!(recovered_model(&db), model, "the primary itself");
    check_exact(&db, &model, "after a compaction before the replay scan");
    db.close().unwrap();
}

// ---- sessions ---------------------------------------------------------------------------------

#[test]
fn sessions_read_their_writes_while_other_sessions_write() {
    let seed = seed();
    let _guard = SeedGuard(seed);
    let dir = tempfile::tempdir().unwrap();
    let mut opts = options(1);
    opts.engine.memtable_bytes_max = 4 << 20; // no flush drains to wait for failing workers
    opts.async_index.failures_reported_after = 1000;
    let failures = Arc::clone(&opts.async_index.inject_failures);
    let db = Database::open(dir.path(), opts).unwrap();
    setup(&db, Maintenance::AsyncSession);
    // The index lags far behind for the first part of the run.
    failures.store(400, Ordering::SeqCst);
    // Every write of every session: seq -> (pk, value).
    let log: parking_lot::Mutex<HashMap<u64, (u64, Option<i64>)>> = parking_lot::Mutex::default();
    let violations = std::sync::atomic::AtomicU64::new(0);
    std::thread::scope(|scope| {
        for thread in 0..3u64 {
            let db = &db;
            let log = &log;
            let violations = &violations;
            scope.spawn(move || {
                let mut rng = StdRng::seed_from_u64(seed ^ thread);
                let session = db.session();
                for _ in 0..300 {
                    let pk = rng.gen_range(0..20);
                    let value = rng.gen_range(0..VALUES);
                    let (seq, written) = if rng.gen_bool(0.15) {
                        let seq = session.delete(COLLECTION, &pk_bytes(pk)).unwrap();
                        (seq, None)
                    } else {
                        let seq = session.put(COLLECTION, &doc(pk, Some(value), "a")).unwrap();
                        (Some(seq), Some(value))
                    };
                    let Some(seq) = seq else { continue };
                    log.lock().insert(seq, (pk, written));
                    let probe = written.unwrap_or(value);
                    let result = session
                        .lookup(COLLECTION, "v", &AttrValue::Int(probe), None)
                        .unwrap();
                    assert_eq!(result.consistency, SessionConsistency::ReadYourWrites);
                    for hit in &result.hits {
                        let json: serde_json::Value = serde_json::from_slice(&hit.doc).unwrap();
                        assert_eq!(json["v"].as_i64(), Some(probe), "hit with another value");
                        // A writer logs its write right after the write returns, so a hit
                        // from another session may be seen a moment before it is logged.
                        let mut logged = log.lock().get(&hit.seq).copied();
                        for _ in 0..2000 {
                            if logged.is_some() {
                                break;
                            }
                            std::thread::sleep(std::time::Duration::from_millis(1));
                            logged = log.lock().get(&hit.seq).copied();
                        }
                        assert_eq!(
                            logged,
                            Some((pk_of(&hit.pk), Some(probe))),
                            "hit names no such write"
                        );
                    }
                    let found = result.hits.iter().any(|hit| pk_of(&hit.pk) == pk);
                    let live_seq = db.get(COLLECTION, &pk_bytes(pk)).unwrap().map(|h| h.seq);
                    let overwritten = live_seq != Some(seq) || live_seq.is_none();
                    match written {
                        // Own put: found unless another session wrote the document since.
                        Some(_) if !found && !overwritten => {
                            violations.fetch_add(1, Ordering::Relaxed);
                        }
                        // Own delete: never found unless rewritten since.
                        None if found && live_seq.is_some_and(|l| l < seq) => {
                            violations.fetch_add(1, Ordering::Relaxed);
                        }
                        _ => {}
                    }
                }
            });
        }
    });
    assert_eq!(violations.load(Ordering::Relaxed), 0, "seed {seed}");
    failures.store(0, Ordering::SeqCst);
    db.wait_until_indexed().unwrap();
    let session = db.session();
    session
        .lookup(COLLECTION, "v", &AttrValue::Int(0), None)
        .unwrap();
    assert_eq!(session.overlay_bytes(), 0);
}

/// Regression (found by the Python binding's model test): a session query pruned its
/// overlay with the watermark read *after* the index query, so a write whose update a worker
/// applied during the query was in neither the query's snapshot nor the overlay, and the
/// session missed its own write (15 to 158 misses in 3,000 write-then-query rounds).
#[test]
fn regression_session_reads_a_write_applied_while_its_query_ran() {
    let dir = tempfile::tempdir().unwrap();
    let mut opts = options(2);
    opts.engine.memtable_bytes_max = 64 << 10;
    let db = Database::open(dir.path(), opts).unwrap();
    setup(&db, Maintenance::AsyncSession);
    let session = db.session();
    let mut rng = StdRng::seed_from_u64(seed());
    let mut misses = Vec::new();
    for round in 0..3000 {
        let pk = rng.gen_range(0..40);
        let value = rng.gen_range(0..VALUES);
        session.put(COLLECTION, &doc(pk, Some(value), "a")).unwrap();
        let lookup = session
            .lookup(COLLECTION, "v", &AttrValue::Int(value), None)
            .unwrap();
        let range = session
            .range(
                COLLECTION,
                "v",
                &AttrValue::Int(i64::MIN),
                &AttrValue::Int(VALUES),
                None,
            )
            .unwrap();
        for (what, result) in [("lookup", &lookup), ("range", &range)] {
            if !result.hits.iter().any(|hit| pk_of(&hit.pk) == pk) {
                misses.push((round, what, pk));
            }
        }
    }
    assert!(
        misses.is_empty(),
        "{} misses: {:?}",
        misses.len(),
        &misses[..misses.len().min(10)]
    );
}

/// A binding keeps a session as a handle between calls: the overlay outlives the `Session`
/// the writes went through, and a handle is refused by another database.
#[test]
fn a_detached_session_handle_keeps_reading_its_writes_and_is_refused_elsewhere() {
    let dir = tempfile::tempdir().unwrap();
    let mut opts = options(1);
    opts.engine.memtable_bytes_max = 4 << 20;
    opts.async_index.failures_reported_after = 1000;
    let failures = Arc::clone(&opts.async_index.inject_failures);
    let db = Database::open(dir.path(), opts).unwrap();
    setup(&db, Maintenance::AsyncSession);
    failures.store(1000, Ordering::SeqCst); // the index applies nothing meanwhile
    let handle = {
        let session = db.session();
        session.put(COLLECTION, &doc(1, Some(3), "a")).unwrap();
        session.handle()
    };
    assert!(db
        .lookup(COLLECTION, "v", &AttrValue::Int(3), None)
        .unwrap()
        .hits
        .is_empty());
    let again = db.attach_session(&handle).unwrap();
    assert_eq!(again.id(), handle.id());
    let result = again
        .lookup(COLLECTION, "v", &AttrValue::Int(3), None)
        .unwrap();
    assert_eq!(result.consistency, SessionConsistency::ReadYourWrites);
    assert_eq!(result.hits.len(), 1);
    assert!(again.overlay_bytes() > 0);

    let other_dir = tempfile::tempdir().unwrap();
    let other = Database::open(other_dir.path(), options(1)).unwrap();
    let refused = other.attach_session(&handle).unwrap_err();
    assert!(
        matches!(refused, IndexError::ForeignSession { id } if id == handle.id()),
        "{refused}"
    );
    failures.store(0, Ordering::SeqCst);
}

#[test]
fn session_overlay_is_dropped_once_indexed_and_session_expires_when_idle() {
    let dir = tempfile::tempdir().unwrap();
    let mut opts = options(1);
    opts.async_index.session_idle_timeout = Duration::from_millis(200);
    opts.async_index.failures_reported_after = 1000;
    let failures = Arc::clone(&opts.async_index.inject_failures);
    let db = Database::open(dir.path(), opts).unwrap();
    setup(&db, Maintenance::AsyncSession);
    failures.store(u64::MAX, Ordering::SeqCst);
    let session = db.session();
    session.put(COLLECTION, &doc(1, Some(3), "a")).unwrap();
    let own = session
        .lookup(COLLECTION, "v", &AttrValue::Int(3), None)
        .unwrap();
    assert_eq!(own.hits.len(), 1);
    assert_eq!(own.overlay_hits, 1);
    // Outside the session the write is not indexed yet.
    assert!(db
        .lookup(COLLECTION, "v", &AttrValue::Int(3), None)
        .unwrap()
        .hits
        .is_empty());
    assert!(session.overlay_bytes() > 0);
    assert_eq!(db.async_index_stats().sessions_live, 1);
    failures.store(0, Ordering::SeqCst);
    db.wait_until_indexed().unwrap();
    let indexed = session
        .range(
            COLLECTION,
            "v",
            &AttrValue::Int(0),
            &AttrValue::Int(5),
            None,
        )
        .unwrap();
    assert_eq!((indexed.hits.len(), indexed.overlay_hits), (1, 0));
    assert_eq!(session.overlay_bytes(), 0);

    std::thread::sleep(Duration::from_millis(300));
    let error = session
        .lookup(COLLECTION, "v", &AttrValue::Int(3), None)
        .unwrap_err();
    assert!(
        matches!(error, IndexError::SessionExpired { .. }),
        "{error}"
    );
    assert!(session.put(COLLECTION, &doc(2, Some(3), "a")).is_err());
    assert_eq!(db.async_index_stats().sessions_live, 0);
    // A new session works.
    let fresh = db.session();
    assert_eq!(
        fresh
            .lookup(COLLECTION, "v", &AttrValue::Int(3), None)
            .unwrap()
            .hits
            .len(),
        1
    );
}

#[test]
fn session_over_its_memory_cap_falls_back_to_eventual_and_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let mut opts = options(1);
    opts.async_index.session_overlay_bytes_max = 400;
    opts.async_index.failures_reported_after = 1000;
    let failures = Arc::clone(&opts.async_index.inject_failures);
    let db = Database::open(dir.path(), opts).unwrap();
    setup(&db, Maintenance::AsyncSession);
    failures.store(u64::MAX, Ordering::SeqCst);
    let session = db.session();
    for pk in 0..20 {
        session.put(COLLECTION, &doc(pk, Some(1), "a")).unwrap();
    }
    assert_eq!(session.consistency(), SessionConsistency::Eventual);
    let result = session
        .lookup(COLLECTION, "v", &AttrValue::Int(1), None)
        .unwrap();
    assert_eq!(result.consistency, SessionConsistency::Eventual);
    assert!(result.hits.len() < 20);
    assert!(session.overlay_bytes() <= 400);
    // Once everything it wrote is indexed, the session reads its writes again.
    failures.store(0, Ordering::SeqCst);
    db.wait_until_indexed().unwrap();
    let result = session
        .lookup(COLLECTION, "v", &AttrValue::Int(1), None)
        .unwrap();
    assert_eq!(result.consistency, SessionConsistency::ReadYourWrites);
    assert_eq!(result.hits.len(), 20);
    // An async-simple index is never tracked by sessions.
    db.create_index(
        COLLECTION,
        IndexSpec::new("w", "v", AttrType::Int, IndexKind::Composite)
            .with_maintenance(Maintenance::AsyncSimple),
    )
    .unwrap();
    let result = session
        .lookup(COLLECTION, "w", &AttrValue::Int(1), None)
        .unwrap();
    assert_eq!(result.consistency, SessionConsistency::Eventual);
}

#[test]
fn lag_statistics_follow_the_queue() {
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(dir.path(), options(1)).unwrap();
    setup(&db, Maintenance::AsyncSimple);
    let started = Instant::now();
    for pk in 0..200 {
        db.put(COLLECTION, &doc(pk, Some(1), "a")).unwrap();
    }
    db.wait_until_indexed().unwrap();
    let stats = db.async_index_stats();
    assert_eq!((stats.updates_queued, stats.updates_applied), (200, 200));
    assert_eq!(stats.lag_histogram.iter().map(|(_, n)| n).sum::<u64>(), 200);
    assert!(stats.lag_us_max <= u64::try_from(started.elapsed().as_micros()).unwrap());
    assert_eq!(stats.queue_length, 0);
}

// ---- unlogged index entries: the watermark, and the commit lock ----------------------------

/// Holds the creation of table files (so every flush, after its drain) while closed.
#[derive(Default)]
struct TableGate {
    closed: parking_lot::Mutex<bool>,
    opened: parking_lot::Condvar,
    /// Creations waiting at the gate now.
    waiting: std::sync::atomic::AtomicUsize,
}

impl TableGate {
    fn set_closed(&self, closed: bool) {
        *self.closed.lock() = closed;
        self.opened.notify_all();
    }
}

/// A `FaultFileSystem` whose table creations pass a [`TableGate`].
struct GatedFileSystem {
    inner: FaultFileSystem,
    gate: Arc<TableGate>,
}

impl FileSystem for GatedFileSystem {
    fn create(&self, path: &Path) -> sift_lsm::Result<Box<dyn WritableFile>> {
        if path.extension().is_some_and(|ext| ext == "sst") {
            let mut closed = self.gate.closed.lock();
            self.gate.waiting.fetch_add(1, Ordering::SeqCst);
            while *closed {
                self.gate.opened.wait(&mut closed);
            }
            self.gate.waiting.fetch_sub(1, Ordering::SeqCst);
        }
        self.inner.create(path)
    }
    fn open(&self, path: &Path, direct: bool) -> sift_lsm::Result<Arc<dyn RandomAccessFile>> {
        self.inner.open(path, direct)
    }
    fn read_all(&self, path: &Path) -> sift_lsm::Result<Vec<u8>> {
        self.inner.read_all(path)
    }
    fn rename(&self, from: &Path, to: &Path) -> sift_lsm::Result<()> {
        self.inner.rename(from, to)
    }
    fn remove(&self, path: &Path) -> sift_lsm::Result<()> {
        self.inner.remove(path)
    }
    fn exists(&self, path: &Path) -> bool {
        self.inner.exists(path)
    }
    fn create_dir_all(&self, path: &Path) -> sift_lsm::Result<()> {
        self.inner.create_dir_all(path)
    }
    fn list(&self, dir: &Path) -> sift_lsm::Result<Vec<String>> {
        self.inner.list(dir)
    }
    fn sync_dir(&self, dir: &Path) -> sift_lsm::Result<()> {
        self.inner.sync_dir(dir)
    }
    fn lock(&self, path: &Path) -> sift_lsm::Result<Box<dyn FileLock>> {
        self.inner.lock(path)
    }
    fn file_size(&self, path: &Path) -> sift_lsm::Result<u64> {
        self.inner.file_size(path)
    }
}

fn gated_options(fs: &FaultFileSystem, gate: &Arc<TableGate>) -> DatabaseOptions {
    let mut opts = options(1);
    opts.engine.file_system = Arc::new(GatedFileSystem {
        inner: fs.clone(),
        gate: Arc::clone(gate),
    });
    // Only the test's flushes.
    opts.engine.memtable_bytes_max = 64 << 20;
    opts.async_index.watermark_interval = Duration::ZERO;
    // Every base write synced: the test is about index entries, and an unsynced base write
    // survives the power cut only if the closed log's background sync happened to finish
    // first (when it did not, the open had nothing to queue again and the test failed).
    opts.sync_writes = true;
    opts
}

/// Regression (issue 5, unlogged index entries): a drain applies the updates of a memtable by
/// inserting their entries into it unlogged; if the watermark were then written (synced) past
/// that memtable, a crash before the flush's table is installed would lose the entries while
/// the open queues none of their base writes again (they are at or below the watermark). The
/// flush is held after its drain, at its table's creation; the watermark is written there,
/// then power fails. After the open and `wait_until_indexed`, the index equals brute force
/// over the recovered primary.
#[test]
fn a_crash_after_the_drain_and_before_the_flush_is_installed_loses_no_index_entry() {
    let seed = seed();
    let _guard = SeedGuard(seed);
    let mut rng = StdRng::seed_from_u64(seed);
    let fs = FaultFileSystem::new();
    let gate = Arc::new(TableGate::default());
    let path = Path::new("/watermark-hazard");
    let mut model = Model::new();
    let db = Database::open(path, gated_options(&fs, &gate)).unwrap();
    setup(&db, Maintenance::AsyncSimple);
    // Indexed and flushed: the watermark may legitimately cover these.
    for _ in 0..150 {
        random_write(&mut rng, &db, &mut model);
    }
    db.wait_until_indexed().unwrap();
    db.flush().unwrap();
    db.write_index_watermark().unwrap();
    let flushed_watermark = db.async_index_stats().watermark_written;
    assert!(
        flushed_watermark > 0,
        "seed {seed}: no watermark after a flush"
    );
    // Then writes whose updates the held flush's drain applies.
    for _ in 0..150 {
        random_write(&mut rng, &db, &mut model);
    }
    let last = db.engine().latest_sequence();
    gate.set_closed(true);
    // Checked once the gate is open again (a failed check inside would leave the flush held).
    let (reached, queued, watermark, flushed) = std::thread::scope(|scope| {
        let flush = scope.spawn(|| db.flush());
        let deadline = Instant::now() + Duration::from_secs(30);
        while gate.waiting.load(Ordering::SeqCst) == 0 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(1));
        }
        let reached = gate.waiting.load(Ordering::SeqCst) > 0;
        // The drain is done: every update is applied.
        let queued = db.async_index_stats().queue_length;
        let written = db.write_index_watermark();
        let watermark = db.async_index_stats().watermark_written;
        fs.crash();
        gate.set_closed(false);
        let flushed = flush.join().ok().map(|result| result.is_ok());
        written.unwrap();
        (reached, queued, watermark, flushed)
    });
    assert!(reached, "seed {seed}: the flush never reached its table");
    assert_eq!(queued, 0, "seed {seed}: the drain left updates");
    assert_eq!(
        flushed,
        Some(false),
        "seed {seed}: a flush succeeded on a crashed disk"
    );
    drop(db);
    let db = Database::open(path, gated_options(&fs, &Arc::new(TableGate::default()))).unwrap();
    let model = recovered_model(&db);
    assert!(
        db.async_index_stats().updates_recovered > 0,
        "seed {seed}: nothing queued again after the crash"
    );
    check_exact(&db, &model, &format!("seed {seed}: after the crash"));
    // What kept the entries: the watermark stayed below the memtable being flushed.
    assert!(
        watermark < last,
        "seed {seed}: watermark {watermark} written past the unflushed memtable (up to {last})"
    );
    db.close().unwrap();
}

/// In the steady state (no flush) the workers take no commit lock: their entries go into the
/// memtable unlogged, and the results are exact once indexed.
#[test]
fn async_workers_commit_without_the_commit_lock_between_flushes() {
    let seed = seed();
    let _guard = SeedGuard(seed);
    let mut rng = StdRng::seed_from_u64(seed);
    let dir = tempfile::tempdir().unwrap();
    let mut opts = options(2);
    opts.engine.memtable_bytes_max = 64 << 20;
    let db = Database::open(dir.path(), opts).unwrap();
    setup(&db, Maintenance::AsyncSimple);
    let before = db.engine().stats();
    let mut model = Model::new();
    for _ in 0..400 {
        random_write(&mut rng, &db, &mut model);
    }
    check_exact(&db, &model, &format!("seed {seed}"));
    let after = db.engine().stats();
    assert_eq!(after.flushes, before.flushes, "seed {seed}: a flush ran");
    assert!(db.async_index_stats().updates_applied > 0, "seed {seed}");
    assert!(
        after.unlogged_inserts > before.unlogged_inserts,
        "seed {seed}: no unlogged insert"
    );
    assert_eq!(
        after.unqueued_commits, before.unqueued_commits,
        "seed {seed}: the workers took the commit lock"
    );
    assert_eq!(after.unlogged_insert_refusals, 0, "seed {seed}");
    db.close().unwrap();
}

/// Regression guard for the workers' `logged_through` (`worker.rs`, "Unlogged entries"): the
/// updates queued again at open find their memtables gone, so they are written through the log
/// at fresh sequence numbers, above the writes made since the open. A later update of the same
/// document, at a number below those, must then go through the log too: inserted unlogged at
/// its own number it would sit below the recovered update's entries and be shadowed by them.
/// Here every document goes back, after the open, to the value it had before its lost update:
/// the recovered update deletes that value's entry (at a fresh number) and the newer update puts
/// it back (below that number, if unlogged), so the index would miss every document. Checked
/// against the model after `wait_until_indexed` and again after a reopen.
#[test]
fn updates_after_the_open_are_not_shadowed_by_recovered_updates_written_through_the_log() {
    let value_before = |pk: u64| Some((pk % VALUES as u64) as i64);
    let value_lost = |pk: u64| Some(((pk + 1) % VALUES as u64) as i64);
    let dir = tempfile::tempdir().unwrap();
    let options = || {
        let mut opts = options(1);
        // No flush: its drain would wait for the failing workers.
        opts.engine.memtable_bytes_max = 4 << 20;
        opts
    };
    let mut model = Model::new();
    let put = |db: &Database, model: &mut Model, pk: u64, v: Option<i64>| {
        let seq = db.put(COLLECTION, &doc(pk, v, "a")).unwrap();
        model.insert(pk, (v, "a".into(), seq));
    };
    {
        // Indexed, flushed and covered by the watermark the close writes.
        let db = Database::open(dir.path(), options()).unwrap();
        setup(&db, Maintenance::AsyncSimple);
        for pk in 0..PKS {
            put(&db, &mut model, pk, value_before(pk));
        }
        db.close().unwrap();
    }
    {
        // Never indexed: queued again at the next open.
        let opts = options();
        opts.async_index
            .inject_failures
            .store(u64::MAX, Ordering::SeqCst);
        let db = Database::open(dir.path(), opts).unwrap();
        for pk in 0..PKS {
            put(&db, &mut model, pk, value_lost(pk));
        }
        assert_eq!(db.async_index_stats().queue_length, PKS);
        drop(db); // no close: nothing drained, no watermark written
    }
    let mut opts = options();
    // The recovered updates take several batches, and the updates written after the open
    // come in later batches (their numbers are below the recovered ones' fresh numbers).
    opts.async_index.batch_items_max = 4;
    let failures = Arc::clone(&opts.async_index.inject_failures);
    // The workers hold off until the newer updates are written.
    failures.store(u64::MAX, Ordering::SeqCst);
    let db = Database::open(dir.path(), opts.clone()).unwrap();
    assert_eq!(db.async_index_stats().updates_recovered, PKS);
    for pk in 0..PKS {
        put(&db, &mut model, pk, value_before(pk));
    }
    failures.store(0, Ordering::SeqCst);
    check_exact(&db, &model, "after the recovered updates");
    db.close().unwrap();
    let db = Database::open(dir.path(), opts).unwrap();
    check_exact(&db, &model, "after a reopen");
    db.close().unwrap();
}

/// Makes the next file creation fail once a flush reaches it, when armed (after the flush made
/// its spare log: the next creation is the flush's first table).
struct FailNextTableCreation {
    fs: FaultFileSystem,
    armed: std::sync::atomic::AtomicBool,
}

impl sift_lsm::extension::FlushListener for FailNextTableCreation {
    fn before_flush(&self, _info: &sift_lsm::extension::FlushInfo) {
        if self.armed.swap(false, Ordering::SeqCst) {
            self.fs.fail_after(sift_lsm::fs::FaultKind::Create, 0);
        }
    }
}

/// A flush fails (its table cannot be created) after its drain inserted index entries into
/// the memtable unlogged. With the engine's automatic retries off, nothing retries it before
/// the database is dropped; the watermark written before the failure stays at or below
/// `flushed_through`, so the reopen (the recovery) queues the memtable's base writes again,
/// and after `wait_until_indexed` the index holds exactly the live versions' entries, once
/// each, as brute force over the model says.
#[test]
fn a_failed_flush_of_unlogged_index_entries_is_recovered_by_the_reopen() {
    failed_flush_of_unlogged_index_entries(Recovery::Reopen);
}

/// The same failed flush, recovered without a reopen: once the fault is healed,
/// `Db::resume` (or the automatic retry it waits for) flushes the same memtable again. Its
/// flush listener, the drain, is told the bound it drained to before, so it does not wait
/// for index updates of writes made later (which could not be applied while writes are
/// stopped). Writes and index maintenance go on; the index holds exactly the live versions'
/// entries, before and after a reopen.
#[test]
fn a_failed_flush_of_unlogged_index_entries_is_recovered_by_resume() {
    failed_flush_of_unlogged_index_entries(Recovery::Resume);
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Recovery {
    Reopen,
    Resume,
}

fn failed_flush_of_unlogged_index_entries(recovery: Recovery) {
    let seed = seed();
    let _guard = SeedGuard(seed);
    let mut rng = StdRng::seed_from_u64(seed);
    let fs = FaultFileSystem::new();
    let failure = Arc::new(FailNextTableCreation {
        fs: fs.clone(),
        armed: std::sync::atomic::AtomicBool::new(false),
    });
    let path = Path::new("/index-failed-flush");
    let mut opts = options(1);
    opts.engine.file_system = Arc::new(fs.clone());
    opts.engine.flush_listeners.push(failure.clone());
    opts.engine.memtable_bytes_max = 64 << 20; // only the test's flushes
    opts.async_index.watermark_interval = Duration::ZERO;
    if recovery == Recovery::Reopen {
        opts.engine.background_error_retry_interval_max_millis = 0;
    }
    let mut model = Model::new();
    let db = Database::open(path, opts.clone()).unwrap();
    setup(&db, Maintenance::AsyncSimple);
    for _ in 0..150 {
        random_write(&mut rng, &db, &mut model);
    }
    db.wait_until_indexed().unwrap();
    db.flush().unwrap();
    let flushed = db.engine().flushed_through();
    // Indexed unlogged into the memtable whose flush will fail.
    for _ in 0..150 {
        random_write(&mut rng, &db, &mut model);
    }
    db.wait_until_indexed().unwrap();
    db.write_index_watermark().unwrap();
    let watermark = db.async_index_stats().watermark_written;
    assert!(
        watermark <= db.engine().flushed_through(),
        "seed {seed}: watermark {watermark} past the unflushed memtable"
    );
    failure
        .armed
        .store(true, std::sync::atomic::Ordering::SeqCst);
    assert!(db.flush().is_err(), "seed {seed}: the flush did not fail");
    if recovery == Recovery::Resume {
        fs.heal();
        db.engine().resume().unwrap();
        assert!(db.engine().flushed_through() > flushed, "seed {seed}");
        for _ in 0..150 {
            random_write(&mut rng, &db, &mut model);
        }
        db.wait_until_indexed().unwrap();
        check_exact(&db, &model, &format!("seed {seed}: after resume"));
        db.flush().unwrap();
        db.close().unwrap();
        let db = Database::open(path, opts).unwrap();
        assert_eq!(recovered_model(&db), model, "seed {seed}: the primary");
        check_exact(&db, &model, &format!("seed {seed}: after the reopen"));
        db.close().unwrap();
        return;
    }
    assert_eq!(db.engine().flushed_through(), flushed, "seed {seed}");
    drop(db);
    fs.heal();
    let db = Database::open(path, opts).unwrap();
    assert!(
        db.async_index_stats().updates_recovered > 0,
        "seed {seed}: nothing queued again after the failed flush"
    );
    assert_eq!(recovered_model(&db), model, "seed {seed}: the primary");
    check_exact(&db, &model, &format!("seed {seed}: after the reopen"));
    db.close().unwrap();
}
