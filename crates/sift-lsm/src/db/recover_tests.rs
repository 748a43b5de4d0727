//! Tests of recovery from background errors: for each point where a flush or compaction can
//! fail with an I/O error (creating, writing or syncing a table; writing or syncing the
//! manifest record), writes stop with an error naming the cause, and once the fault is healed
//! the automatic retry (or `Db::resume`) makes writes work again; reads equal a model before
//! and after a close and a crash, and no table file of a failed attempt is left behind. A
//! fatal error (a failed write-ahead log write) is never retried.

use crate::db::{Db, Tree};
use crate::fs::{FaultFileSystem, FaultKind};
use crate::options::{Options, ReadOptions, WriteOptions};
use crate::version::{parse_file_name, FileKind};
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

const SYNCED: WriteOptions = WriteOptions { sync: true };

#[derive(Debug, Clone, Copy)]
enum Job {
    Flush,
    Compaction,
}

#[derive(Debug, Clone, Copy)]
enum Healing {
    /// Wait for the flush thread's retry.
    Automatic,
    /// Automatic retries off; `Db::resume` retries.
    Resume,
}

fn options(fs: &FaultFileSystem, healing: Healing) -> Options {
    Options {
        file_system: std::sync::Arc::new(fs.clone()),
        l0_compaction_trigger: 2,
        compactions_paused_at_open: true,
        background_error_retry_interval_max_millis: match healing {
            Healing::Automatic => 200,
            Healing::Resume => 0,
        },
        ..Options::default()
    }
}

/// Puts (and every third round deletes) keys of a range shared by every round, so the L0
/// files overlap and a compaction of them writes new tables.
fn write_round(db: &Db, tree: &Tree, model: &mut Model, round: u32) {
    for i in 0..200u32 {
        let key = format!("key{:04}", (i * 7 + round * 13) % 300).into_bytes();
        if round % 3 == 2 && i % 5 == 0 {
            db.write(
                {
                    let mut batch = crate::write_batch::WriteBatch::new();
                    batch.delete(tree, &key);
                    batch
                },
                &SYNCED,
            )
            .unwrap();
            model.remove(&key);
        } else {
            let value = format!("value-{round}-{i}").into_bytes();
            put(db, tree, &key, &value).unwrap();
            model.insert(key, value);
        }
    }
}

fn put(db: &Db, tree: &Tree, key: &[u8], value: &[u8]) -> crate::Result<u64> {
    let mut batch = crate::write_batch::WriteBatch::new();
    batch.put(tree, key, value);
    db.write(batch, &SYNCED)
}

fn assert_matches_model(db: &Db, tree: &Tree, model: &Model, context: &str) {
    let mut iter = db.iter(tree, ReadOptions::default()).unwrap();
    iter.seek_to_first().unwrap();
    let mut stored = Model::new();
    while iter.valid() {
        stored.insert(iter.key().to_vec(), iter.value().to_vec());
        iter.next().unwrap();
    }
    assert!(
        stored == *model,
        "{context}: {} keys stored, {} in the model",
        stored.len(),
        model.len()
    );
    for (key, value) in model {
        assert_eq!(
            db.get(tree, key).unwrap().map(|e| e.value).as_ref(),
            Some(value),
            "{context}"
        );
    }
}

fn table_files_on_disk(fs: &FaultFileSystem, dir: &Path) -> BTreeSet<u64> {
    fs.file_names(dir)
        .iter()
        .filter_map(|name| match parse_file_name(name) {
            Some(FileKind::Table(n)) => Some(n),
            _ => None,
        })
        .collect()
}

fn live_table_files(db: &Db) -> BTreeSet<u64> {
    let state = db.inner.state.lock();
    state
        .version
        .trees
        .values()
        .flat_map(|tree| tree.all_files().map(|(_, f)| f.number))
        .collect()
}

/// Counts the recoveries it is told of.
#[derive(Default)]
struct RecoveryCounter(AtomicU64);

impl crate::hooks::RecoveryListener for RecoveryCounter {
    fn after_recovery(&self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

/// Polls `condition` for up to 30 seconds.
fn wait_until(what: &str, mut condition: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !condition() {
        assert!(Instant::now() < deadline, "timed out waiting until {what}");
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// Runs one failure point through: fail, stop writes, heal, recover, check against the model
/// (live, after a crash, after a close), check no table of the failed attempt is left.
fn fail_and_recover(job: Job, kind: FaultKind, file_name_part: &str, healing: Healing) {
    let context = format!("{job:?} failing on {kind:?} of a {file_name_part} file, {healing:?}");
    let fs = FaultFileSystem::new();
    let dir = Path::new("/recover");
    let recoveries = Arc::new(RecoveryCounter::default());
    let mut listened = options(&fs, healing);
    listened.recovery_listeners.push(recoveries.clone());
    let db = Db::open(dir, listened).unwrap();
    let tree = db.default_tree();
    let mut model = Model::new();
    let mut round = 0;
    write_round(&db, &tree, &mut model, round);
    round += 1;
    if matches!(job, Job::Compaction) {
        // Two overlapping L0 files: a compaction is due once compactions resume.
        db.flush().unwrap();
        write_round(&db, &tree, &mut model, round);
        round += 1;
        db.flush().unwrap();
        write_round(&db, &tree, &mut model, round);
        round += 1;
    }
    let tables_before = table_files_on_disk(&fs, dir);
    fs.fail_from_files(kind, 0, file_name_part);
    match job {
        Job::Flush => {
            let error = db.flush().unwrap_err().to_string();
            assert!(error.contains("injected fault"), "{context}: {error}");
        }
        Job::Compaction => {
            db.resume_compactions();
            wait_until("the compaction fails", || db.stats().background_errors > 0);
        }
    }
    let error = put(&db, &tree, b"refused", b"x").unwrap_err().to_string();
    assert!(
        error.contains("injected fault") && error.contains(file_name_part),
        "{context}: the error does not name the cause: {error}"
    );
    assert!(
        error.contains("recoverable"),
        "{context}: the error does not say the engine recovers: {error}"
    );
    assert_matches_model(&db, &tree, &model, &format!("{context}, while failing"));
    let reported = db.background_error();
    assert!(
        reported.as_ref().is_some_and(|e| e.recoverable
            && e.message.contains("injected fault")
            && e.message.contains(file_name_part)),
        "{context}: {reported:?}"
    );
    match healing {
        Healing::Automatic => {
            // Retries fail while the fault lasts.
            wait_until("a retry failed", || {
                db.stats().background_error_retries >= 1
            });
            assert!(put(&db, &tree, b"refused", b"x").is_err(), "{context}");
        }
        Healing::Resume => {
            assert!(db.resume().is_err(), "{context}: resumed while failing");
            std::thread::sleep(Duration::from_millis(150));
            assert!(
                put(&db, &tree, b"refused", b"x").is_err(),
                "{context}: retried although automatic retries are off"
            );
        }
    }
    fs.heal();
    match healing {
        Healing::Automatic => wait_until("writes work again", || {
            put(&db, &tree, b"after", b"healed").is_ok()
        }),
        Healing::Resume => {
            db.resume().unwrap();
            put(&db, &tree, b"after", b"healed").unwrap();
        }
    }
    model.insert(b"after".to_vec(), b"healed".to_vec());
    let stats = db.stats();
    assert!(stats.background_errors >= 1, "{context}: {stats:?}");
    assert_eq!(stats.background_error_recoveries, 1, "{context}");
    assert_eq!(db.background_error(), None, "{context}");
    // The listener heard of the recovery once (before `resume` returned, or the flush
    // thread's retry let writes in).
    wait_until("the listener hears of the recovery", || {
        recoveries.0.load(Ordering::SeqCst) >= 1
    });
    db.resume().unwrap();
    assert_eq!(
        recoveries.0.load(Ordering::SeqCst),
        1,
        "{context}: a resume without an error is no recovery"
    );
    write_round(&db, &tree, &mut model, round);
    round += 1;
    db.flush().unwrap();
    db.wait_for_background_work().unwrap();
    if matches!(job, Job::Compaction) {
        let level0 = db
            .components(&tree, &ReadOptions::default())
            .unwrap()
            .files(0)
            .len();
        assert!(level0 < 3, "{context}: the compaction was not redone");
    } else {
        assert!(
            db.inner.super_version.load().imms.is_empty(),
            "{context}: the failed memtable was not flushed"
        );
    }
    assert_matches_model(&db, &tree, &model, &format!("{context}, recovered"));
    // Every table on disk is live, or one the recovered work made obsolete and the reaper
    // removes once no version refers to it: none of the failed attempt is left.
    let live = live_table_files(&db);
    let orphans: Vec<u64> = table_files_on_disk(&fs, dir)
        .difference(&live)
        .filter(|n| !tables_before.contains(n))
        .copied()
        .collect();
    assert!(
        orphans.is_empty(),
        "{context}: tables of the failed attempt left behind: {orphans:?}"
    );
    // A crash now: every write was synced.
    fs.crash();
    drop(db);
    let db = Db::open(dir, options(&fs, healing)).unwrap();
    let tree = db.default_tree();
    assert_matches_model(&db, &tree, &model, &format!("{context}, after a crash"));
    write_round(&db, &tree, &mut model, round);
    db.close().unwrap();
    let db = Db::open(dir, options(&fs, healing)).unwrap();
    let tree = db.default_tree();
    assert_matches_model(&db, &tree, &model, &format!("{context}, after a close"));
}

fn every_healing(job: Job, kind: FaultKind, file_name_part: &str) {
    for healing in [Healing::Automatic, Healing::Resume] {
        fail_and_recover(job, kind, file_name_part, healing);
    }
}

#[test]
fn a_flush_failing_to_create_its_table_recovers() {
    every_healing(Job::Flush, FaultKind::Create, ".sst");
}

#[test]
fn a_flush_failing_to_write_its_table_recovers() {
    every_healing(Job::Flush, FaultKind::Write, ".sst");
}

#[test]
fn a_flush_failing_to_sync_its_table_recovers() {
    every_healing(Job::Flush, FaultKind::Sync, ".sst");
}

#[test]
fn a_compaction_failing_to_create_its_table_recovers() {
    every_healing(Job::Compaction, FaultKind::Create, ".sst");
}

#[test]
fn a_compaction_failing_to_write_its_table_recovers() {
    every_healing(Job::Compaction, FaultKind::Write, ".sst");
}

#[test]
fn a_compaction_failing_to_sync_its_table_recovers() {
    every_healing(Job::Compaction, FaultKind::Sync, ".sst");
}

#[test]
fn a_flush_failing_to_write_its_manifest_record_recovers_on_a_fresh_manifest() {
    every_healing(Job::Flush, FaultKind::Write, "MANIFEST");
}

#[test]
fn a_flush_failing_to_sync_its_manifest_record_recovers_on_a_fresh_manifest() {
    every_healing(Job::Flush, FaultKind::Sync, "MANIFEST");
}

#[test]
fn a_compaction_failing_to_sync_its_manifest_record_recovers_on_a_fresh_manifest() {
    every_healing(Job::Compaction, FaultKind::Sync, "MANIFEST");
}

/// A failed log write is fatal: neither the automatic retry nor `resume` clears it, and the
/// error says a reopen is needed; the reopen recovers every acknowledged write.
#[test]
fn a_failed_log_write_is_not_retried_and_resume_asks_for_a_reopen() {
    let fs = FaultFileSystem::new();
    let dir = Path::new("/recover-fatal");
    let recoveries = Arc::new(RecoveryCounter::default());
    let mut listened = options(&fs, Healing::Automatic);
    listened.recovery_listeners.push(recoveries.clone());
    let db = Db::open(dir, listened).unwrap();
    let tree = db.default_tree();
    let mut model = Model::new();
    write_round(&db, &tree, &mut model, 0);
    assert_eq!(db.background_error(), None);
    fs.fail_from_files(FaultKind::Write, 0, ".wal");
    let error = put(&db, &tree, b"lost", b"x").unwrap_err().to_string();
    assert!(error.contains("injected fault"), "{error}");
    fs.heal();
    let error = put(&db, &tree, b"refused", b"x").unwrap_err().to_string();
    assert!(error.contains("reopen"), "{error}");
    std::thread::sleep(Duration::from_millis(400));
    assert!(put(&db, &tree, b"refused", b"x").is_err(), "retried");
    let error = db.resume().unwrap_err().to_string();
    assert!(error.contains("reopen"), "{error}");
    assert!(put(&db, &tree, b"refused", b"x").is_err());
    let stats = db.stats();
    assert_eq!(stats.background_errors, 1);
    assert_eq!(stats.background_error_retries, 0);
    assert_eq!(stats.background_error_recoveries, 0);
    assert_eq!(recoveries.0.load(Ordering::SeqCst), 0);
    let reported = db.background_error();
    assert!(
        reported.as_ref().is_some_and(|e| !e.recoverable),
        "{reported:?}"
    );
    drop(db);
    let db = Db::open(dir, options(&fs, Healing::Automatic)).unwrap();
    let tree = db.default_tree();
    // The failed write was not acknowledged: the reopen may or may not find it.
    if db.get(&tree, b"lost").unwrap().is_some() {
        model.insert(b"lost".to_vec(), b"x".to_vec());
    }
    assert_matches_model(&db, &tree, &model, "after the reopen");
    put(&db, &tree, b"after", b"reopen").unwrap();
}

/// Corruption found by a compaction is fatal too.
#[test]
fn corruption_found_by_a_compaction_is_not_retried() {
    let fs = FaultFileSystem::new();
    let dir = Path::new("/recover-corrupt");
    let db = Db::open(dir, options(&fs, Healing::Automatic)).unwrap();
    let tree = db.default_tree();
    let mut model = Model::new();
    write_round(&db, &tree, &mut model, 0);
    db.flush().unwrap();
    write_round(&db, &tree, &mut model, 1);
    db.flush().unwrap();
    let first = *live_table_files(&db).first().unwrap();
    fs.corrupt(&dir.join(crate::version::table_file_name(first)), 10, 0xff)
        .unwrap();
    db.resume_compactions();
    wait_until("the compaction fails", || db.stats().background_errors > 0);
    let error = db.resume().unwrap_err().to_string();
    assert!(
        error.contains("reopen") && error.contains("corrupt"),
        "{error}"
    );
    std::thread::sleep(Duration::from_millis(300));
    assert!(put(&db, &tree, b"refused", b"x").is_err());
    assert_eq!(db.stats().background_error_retries, 0);
}
