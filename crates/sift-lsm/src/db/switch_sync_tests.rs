//! Tests that a memtable switch which leaves the closed log's sync to the presync thread (or to
//! the next synced write) keeps every guarantee: after a crash the recovered writes are a prefix
//! of the acknowledged ones, a synced write survives with everything before it, and damage in a
//! log recorded as synced is still reported as corruption.

use crate::db::state::ClosedLogSyncer;
use crate::db::Db;
use crate::fs::{FaultFileSystem, FaultKind, FileLock, FileSystem, RandomAccessFile, WritableFile};
use crate::options::{Options, WalRecovery, WriteOptions};
use crate::version::wal_file_name;
use crate::wal::{ControlRecord, LogWriter};
use crate::write_batch::WriteBatch;
use crate::{Error, Result};
use parking_lot::{Condvar, Mutex};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Holds `sync_data_hint` (called only by the WAL presync thread, after it synced the closed
/// logs it found) while closed: logs closed from then on stay unsynced unless a synced write
/// syncs them itself.
#[derive(Default)]
struct HintGate {
    closed: Mutex<bool>,
    opened: Condvar,
    waiting: AtomicUsize,
}

impl HintGate {
    fn set_closed(&self, closed: bool) {
        *self.closed.lock() = closed;
        self.opened.notify_all();
    }

    fn wait_for_the_presync_thread(&self) {
        let deadline = Instant::now() + Duration::from_secs(10);
        while self.waiting.load(Ordering::SeqCst) == 0 {
            assert!(
                Instant::now() < deadline,
                "the presync thread never reached the gate"
            );
            std::thread::sleep(Duration::from_millis(1));
        }
    }
}

struct HintGatedFileSystem {
    inner: FaultFileSystem,
    gate: Arc<HintGate>,
}

impl FileSystem for HintGatedFileSystem {
    fn create(&self, path: &Path) -> Result<Box<dyn WritableFile>> {
        self.inner.create(path)
    }
    fn open(&self, path: &Path, direct: bool) -> Result<Arc<dyn RandomAccessFile>> {
        self.inner.open(path, direct)
    }
    fn read_all(&self, path: &Path) -> Result<Vec<u8>> {
        self.inner.read_all(path)
    }
    fn rename(&self, from: &Path, to: &Path) -> Result<()> {
        self.inner.rename(from, to)
    }
    fn remove(&self, path: &Path) -> Result<()> {
        self.inner.remove(path)
    }
    fn exists(&self, path: &Path) -> bool {
        self.inner.exists(path)
    }
    fn create_dir_all(&self, path: &Path) -> Result<()> {
        self.inner.create_dir_all(path)
    }
    fn list(&self, dir: &Path) -> Result<Vec<String>> {
        self.inner.list(dir)
    }
    fn sync_dir(&self, dir: &Path) -> Result<()> {
        self.inner.sync_dir(dir)
    }
    fn sync_data_hint(&self, path: &Path) {
        let mut closed = self.gate.closed.lock();
        self.gate.waiting.fetch_add(1, Ordering::SeqCst);
        while *closed {
            self.gate.opened.wait(&mut closed);
        }
        self.gate.waiting.fetch_sub(1, Ordering::SeqCst);
        drop(closed);
        self.inner.sync_data_hint(path);
    }
    fn lock(&self, path: &Path) -> Result<Box<dyn FileLock>> {
        self.inner.lock(path)
    }
    fn file_size(&self, path: &Path) -> Result<u64> {
        self.inner.file_size(path)
    }
}

// Holds every flush while closed, so the closed logs stay live (not made obsolete).
use super::write::tests::FlushGate;

fn key(i: usize) -> Vec<u8> {
    format!("key{i:06}").into_bytes()
}

fn value(i: usize, bytes: usize) -> Vec<u8> {
    let mut value = format!("value{i}-").into_bytes();
    value.resize(bytes.max(value.len()), b'v');
    value
}

/// The number of writes recovered, checking they are exactly the first ones acknowledged
/// (`written[i]` is the value of `key(i)`): no gap, nothing newer than a missing write.
fn recovered_prefix(db: &Db, written: &[Vec<u8>], seed: u64) -> usize {
    let tree = db.default_tree();
    let present: Vec<bool> = (0..written.len())
        .map(|i| match db.get(&tree, &key(i)).unwrap() {
            Some(entry) => {
                assert_eq!(
                    entry.value, written[i],
                    "seed {seed}: wrong value of write {i}"
                );
                true
            }
            None => false,
        })
        .collect();
    let prefix = present.iter().take_while(|p| **p).count();
    if let Some(later) = present[prefix..].iter().position(|p| *p) {
        panic!(
            "seed {seed}: write {prefix} lost but write {} recovered: not a prefix",
            prefix + later
        );
    }
    prefix
}

struct CrashOutcome {
    recovered: usize,
    dropped_records: u64,
    syncs_by_writers: u64,
}

/// Writes unsynced across several memtable switches (flushes held, the presync thread held
/// after its first round), maybe one synced write after them, more unsynced writes, then a
/// power loss keeping random prefixes of the unsynced bytes. Checks the recovered writes are a
/// prefix that includes the synced write.
fn crash_after_switches(seed: u64, synced_write: bool) -> CrashOutcome {
    let mut rng = StdRng::seed_from_u64(seed);
    let fs = FaultFileSystem::new();
    let dir = Path::new("/switch-sync");
    let hint_gate = Arc::new(HintGate::default());
    let flush_gate = Arc::new(FlushGate::default());
    hint_gate.set_closed(true);
    flush_gate.set_closed(true);
    let options = Options {
        file_system: Arc::new(HintGatedFileSystem {
            inner: fs.clone(),
            gate: Arc::clone(&hint_gate),
        }),
        memtable_bytes_max: 8 << 10,
        immutable_memtables_max: 64,
        flush_listeners: vec![flush_gate.clone()],
        ..Options::default()
    };
    let db = Db::open(dir, options).unwrap();
    let tree = db.default_tree();
    let mut written = Vec::new();
    let target = 3 + rng.gen_range(0..3);
    let tail_writes = rng.gen_range(0..300);
    let mut put = |db: &Db, sync: bool, written: &mut Vec<Vec<u8>>| {
        let i = written.len();
        let v = value(i, rng.gen_range(10..400));
        let mut batch = WriteBatch::new();
        batch.put(&tree, &key(i), &v);
        db.write(batch, &WriteOptions { sync }).unwrap();
        written.push(v);
        assert!(i < 100_000, "seed {seed}: the memtable never switched");
    };
    let switches = |db: &Db| db.inner.counters.memtable_switches.load(Ordering::Relaxed);
    while switches(&db) == 0 {
        put(&db, false, &mut written);
    }
    // From here on the presync thread syncs nothing.
    hint_gate.wait_for_the_presync_thread();
    while switches(&db) < target {
        put(&db, false, &mut written);
    }
    let mut synced_index = None;
    if synced_write {
        synced_index = Some(written.len());
        put(&db, true, &mut written);
    }
    for _ in 0..tail_writes {
        put(&db, false, &mut written);
    }
    let syncs_by_writers = db
        .inner
        .counters
        .closed_wal_syncs_by_writers
        .load(Ordering::Relaxed);
    fs.crash_with_torn_writes(seed);
    hint_gate.set_closed(false);
    flush_gate.set_closed(false);
    drop(db);

    let options = Options {
        file_system: Arc::new(fs.clone()),
        memtable_bytes_max: 8 << 10,
        ..Options::default()
    };
    let db = Db::open(dir, options.clone())
        .unwrap_or_else(|e| panic!("seed {seed}: reopen failed: {e}"));
    let recovered = recovered_prefix(&db, &written, seed);
    if let Some(synced) = synced_index {
        assert!(
            recovered > synced,
            "seed {seed}: synced write {synced} lost (recovered {recovered} of {})",
            written.len()
        );
    }
    let dropped_records = db.stats().wal_recovery_dropped_records;
    // The dropped logs are gone: a second open recovers the same writes and drops nothing.
    drop(db);
    let db = Db::open(dir, options).unwrap();
    assert_eq!(
        recovered_prefix(&db, &written, seed),
        recovered,
        "seed {seed}"
    );
    assert_eq!(db.stats().wal_recovery_dropped_records, 0, "seed {seed}");
    CrashOutcome {
        recovered,
        dropped_records,
        syncs_by_writers,
    }
}

#[test]
fn unsynced_writes_across_switches_recover_a_prefix_after_a_crash() {
    let mut dropped = 0;
    for seed in 0..12u64 {
        let outcome = crash_after_switches(seed, false);
        dropped += outcome.dropped_records;
        assert_eq!(outcome.syncs_by_writers, 0, "seed {seed}");
        let _ = outcome.recovered;
    }
    // The case this is about: an older log cut short while a newer one held records.
    assert!(dropped > 0, "no seed dropped the records of a newer log");
}

#[test]
fn a_synced_write_after_switches_survives_a_crash_with_everything_before_it() {
    for seed in 100..110u64 {
        let outcome = crash_after_switches(seed, true);
        // The presync thread was held: the synced write had to sync the closed logs itself.
        assert!(outcome.syncs_by_writers > 0, "seed {seed}");
    }
}

/// A database directory with no data, and the log number of its (empty) active log.
fn empty_database(fs: &FaultFileSystem, dir: &Path) -> u64 {
    let db = Db::open(dir, memory_options(fs, WalRecovery::TolerateTornTail)).unwrap();
    let number = db.inner.super_version.load().mem.wal_number();
    db.close().unwrap();
    number
}

fn memory_options(fs: &FaultFileSystem, recovery: WalRecovery) -> Options {
    Options {
        file_system: Arc::new(fs.clone()),
        wal_recovery: recovery,
        ..Options::default()
    }
}

fn batch_record(sequence: u64, key_text: &str) -> Vec<u8> {
    let mut batch = WriteBatch::new();
    batch.put_in(0, key_text.as_bytes(), b"v");
    batch.set_sequence(sequence);
    batch.encoded().to_vec()
}

/// Writes a synced log of `records`; returns its path and each record's end offset.
fn write_log(
    fs: &FaultFileSystem,
    dir: &Path,
    number: u64,
    records: &[Vec<u8>],
) -> (PathBuf, Vec<u64>) {
    let path = dir.join(wal_file_name(number));
    let mut writer = LogWriter::new(fs.create(&path).unwrap(), path.clone());
    let mut ends = Vec::new();
    for record in records {
        writer.add_record(record).unwrap();
        ends.push(writer.file_bytes());
    }
    writer.sync().unwrap();
    fs.sync_dir(dir).unwrap();
    (path, ends)
}

/// Rewrites the file at `path` with its first `bytes` bytes.
fn truncate(fs: &FaultFileSystem, path: &Path, bytes: u64) {
    let content = fs.read_all(path).unwrap();
    let mut file = fs.create(path).unwrap();
    file.append(&content[..bytes as usize]).unwrap();
    file.sync().unwrap();
}

/// Log A (keys a1..a3) and log B after it (starts with `PreviousLog(A, full length)`, keys
/// b1, b2, and `LogSynced(A)` if `marker`); then A is cut inside its third record (`torn`) or
/// right after its second. Returns both paths and where A's valid records end.
fn two_logs(fs: &FaultFileSystem, dir: &Path, marker: bool, torn: bool) -> (PathBuf, PathBuf, u64) {
    let active = empty_database(fs, dir);
    let a = active + 10;
    let (a_path, a_ends) = write_log(
        fs,
        dir,
        a,
        &[
            batch_record(1, "a1"),
            batch_record(2, "a2"),
            batch_record(3, "a3"),
        ],
    );
    let mut b_records = vec![
        ControlRecord::PreviousLog {
            number: a,
            bytes: a_ends[2],
        }
        .encode()
        .to_vec(),
        batch_record(4, "b1"),
    ];
    if marker {
        b_records.push(
            ControlRecord::LogSynced {
                number: a,
                bytes: a_ends[2],
            }
            .encode()
            .to_vec(),
        );
    }
    b_records.push(batch_record(5, "b2"));
    let (b_path, _) = write_log(fs, dir, a + 1, &b_records);
    let cut = if torn { a_ends[2] - 3 } else { a_ends[1] };
    truncate(fs, &a_path, cut);
    (a_path, b_path, a_ends[1])
}

fn present(db: &Db, keys: &[&str]) -> Vec<bool> {
    let tree = db.default_tree();
    keys.iter()
        .map(|k| db.get(&tree, k.as_bytes()).unwrap().is_some())
        .collect()
}

#[test]
fn an_older_log_cut_short_without_a_synced_marker_drops_the_newer_logs() {
    for torn in [true, false] {
        for recovery in [WalRecovery::TolerateTornTail, WalRecovery::SalvageCorrupted] {
            let fs = FaultFileSystem::new();
            let dir = Path::new("/cut-without-marker");
            let (_, b_path, _) = two_logs(&fs, dir, false, torn);
            let db = Db::open(dir, memory_options(&fs, recovery)).unwrap();
            assert_eq!(
                present(&db, &["a1", "a2", "a3", "b1", "b2"]),
                [true, true, false, false, false],
                "torn {torn} {recovery:?}"
            );
            assert_eq!(db.stats().wal_recovery_dropped_records, 2);
            assert!(db.stats().wal_recovery_dropped_bytes > 0);
            // The dropped log is removed, never replayed by a later open.
            assert!(!fs.exists(&b_path), "torn {torn} {recovery:?}");
            let tree = db.default_tree();
            db.put(&tree, b"after", b"1").unwrap();
            drop(db);
            let db = Db::open(dir, memory_options(&fs, recovery)).unwrap();
            assert_eq!(
                present(&db, &["a1", "a2", "a3", "b1", "b2", "after"]),
                [true, true, false, false, false, true]
            );
        }
    }
}

#[test]
fn an_older_log_damaged_after_its_synced_marker_is_corruption() {
    for torn in [true, false] {
        let fs = FaultFileSystem::new();
        let dir = Path::new("/cut-with-marker");
        let (a_path, _, valid_end) = two_logs(&fs, dir, true, torn);
        match Db::open(dir, memory_options(&fs, WalRecovery::TolerateTornTail)) {
            Err(Error::Corruption {
                file,
                offset,
                message,
            }) => {
                assert_eq!(file, a_path, "{message}");
                assert_eq!(offset, valid_end, "{message}");
            }
            Err(e) => panic!("torn {torn}: expected corruption, got {e}"),
            Ok(_) => panic!("torn {torn}: a log damaged after it was synced opened silently"),
        }
        // Salvaging skips the damage and keeps the newer log's writes.
        let db = Db::open(dir, memory_options(&fs, WalRecovery::SalvageCorrupted)).unwrap();
        assert_eq!(
            present(&db, &["a1", "a2", "a3", "b1", "b2"]),
            [true, true, false, true, true]
        );
    }
}

/// Logs written before control records existed: the newer log has no `PreviousLog` record, so
/// the older one was synced before it got writes and damage at its end is corruption; intact,
/// both replay.
#[test]
fn logs_without_control_records_keep_the_old_rules() {
    for damaged in [true, false] {
        let fs = FaultFileSystem::new();
        let dir = Path::new("/old-format");
        let active = empty_database(&fs, dir);
        let a = active + 10;
        let (a_path, a_ends) =
            write_log(&fs, dir, a, &[batch_record(1, "a1"), batch_record(2, "a2")]);
        write_log(&fs, dir, a + 1, &[batch_record(3, "b1")]);
        if damaged {
            truncate(&fs, &a_path, a_ends[1] - 2);
            match Db::open(dir, memory_options(&fs, WalRecovery::TolerateTornTail)) {
                Err(Error::Corruption { file, offset, .. }) => {
                    assert_eq!(file, a_path);
                    assert_eq!(offset, a_ends[0]);
                }
                Err(e) => panic!("expected corruption, got {e}"),
                Ok(_) => panic!("a damaged old-format log followed by another opened"),
            }
        } else {
            let db = Db::open(dir, memory_options(&fs, WalRecovery::TolerateTornTail)).unwrap();
            assert_eq!(present(&db, &["a1", "a2", "b1"]), [true, true, true]);
            assert_eq!(db.stats().wal_recovery_dropped_records, 0);
        }
    }
}

#[test]
fn control_records_round_trip_and_unknown_kinds_are_corruption() {
    let path = Path::new("000001.wal");
    for record in [
        ControlRecord::PreviousLog {
            number: 7,
            bytes: 1234,
        },
        ControlRecord::LogSynced {
            number: u64::MAX,
            bytes: 0,
        },
    ] {
        let encoded = record.encode();
        assert_eq!(
            ControlRecord::decode(&encoded, path, 0).unwrap(),
            Some(record)
        );
        assert_eq!(&encoded[..8], &[0xFF; 8]);
    }
    // The documented example: PreviousLog of log 7 at 0x1234 bytes.
    let expected = [
        0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x01, 0x07, 0, 0, 0, 0, 0, 0, 0, 0x34,
        0x12, 0, 0, 0, 0, 0, 0,
    ];
    let example = ControlRecord::PreviousLog {
        number: 7,
        bytes: 0x1234,
    };
    assert_eq!(example.encode(), expected);
    assert_eq!(
        ControlRecord::decode(&batch_record(1, "k"), path, 0).unwrap(),
        None
    );
    let mut unknown = example.encode();
    unknown[8] = 9;
    assert!(matches!(
        ControlRecord::decode(&unknown, path, 40),
        Err(Error::Corruption { offset: 40, .. })
    ));
    assert!(ControlRecord::decode(&unknown[..20], path, 0).is_err());
}

/// A failed fsync may drop the dirty pages and let a retry report success (Linux does), so a
/// closed log whose sync failed must never count as synced: a retry, a later synced write and
/// close all fail rather than acknowledge writes that may be gone.
#[test]
fn a_closed_log_whose_sync_failed_is_never_taken_as_synced() {
    let fs = FaultFileSystem::new();
    let dir = Path::new("/switch-sync-failed");
    let hint_gate = Arc::new(HintGate::default());
    let flush_gate = Arc::new(FlushGate::default());
    hint_gate.set_closed(true);
    flush_gate.set_closed(true);
    let options = Options {
        file_system: Arc::new(HintGatedFileSystem {
            inner: fs.clone(),
            gate: Arc::clone(&hint_gate),
        }),
        memtable_bytes_max: 8 << 10,
        immutable_memtables_max: 64,
        flush_listeners: vec![flush_gate.clone()],
        ..Options::default()
    };
    let db = Db::open(dir, options).unwrap();
    let tree = db.default_tree();
    let switches = |db: &Db| db.inner.counters.memtable_switches.load(Ordering::Relaxed);
    let mut i = 0;
    let mut put = |db: &Db, sync: bool| {
        let mut batch = WriteBatch::new();
        batch.put(&tree, &key(i), &value(i, 200));
        i += 1;
        db.write(batch, &WriteOptions { sync })
    };
    while switches(&db) == 0 {
        put(&db, false).unwrap();
    }
    // From here on the presync thread syncs nothing: the next switch leaves an unsynced log.
    hint_gate.wait_for_the_presync_thread();
    while switches(&db) < 2 {
        put(&db, false).unwrap();
    }
    assert!(!db.inner.closed_logs.lock().is_empty());

    fs.fail_always(FaultKind::Sync);
    assert!(db
        .inner
        .sync_closed_logs(ClosedLogSyncer::Background)
        .is_err());
    fs.heal();
    let retried = db.inner.sync_closed_logs(ClosedLogSyncer::Background);
    assert!(
        retried.is_err(),
        "a closed log counted as synced after its sync failed"
    );
    assert!(put(&db, true).is_err(), "a synced write was acknowledged");
    assert!(db.inner.synced_log_markers.lock().is_empty());
    hint_gate.set_closed(false);
    flush_gate.set_closed(false);
    assert!(db.close().is_err(), "close reported the closed log synced");
}

/// A checksummed batch whose sequence numbers are impossible (0, or past `SEQ_MAX`) is
/// corruption at its file and offset, not an overflow or a database that cannot write.
#[test]
fn a_logged_batch_with_impossible_sequence_numbers_is_corruption() {
    for sequence in [0u64, crate::key::SEQ_MAX + 1, u64::MAX - 1] {
        let fs = FaultFileSystem::new();
        let dir = Path::new("/impossible-sequence");
        let active = empty_database(&fs, dir);
        let (path, ends) = write_log(
            &fs,
            dir,
            active + 10,
            &[batch_record(1, "a1"), batch_record(sequence, "bad")],
        );
        match Db::open(dir, memory_options(&fs, WalRecovery::TolerateTornTail)) {
            Err(Error::Corruption { file, offset, .. }) => {
                assert_eq!(file, path, "sequence {sequence}");
                assert_eq!(offset, ends[0], "sequence {sequence}");
            }
            Err(e) => panic!("sequence {sequence}: unexpected error {e}"),
            Ok(_) => panic!("sequence {sequence}: opened"),
        }
    }
}
