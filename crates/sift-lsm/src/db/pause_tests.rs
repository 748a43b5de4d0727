//! Tests that writers are not paused by a manifest sync held by a flush, that synced
//! unthrottled writes are durable and published only once synced, and that manifest write
//! failures and panics leave the engine in a state that fails cleanly rather than hangs.

use crate::db::Db;
use crate::fs::{FaultFileSystem, FaultKind, FileLock, FileSystem, RandomAccessFile, WritableFile};
use crate::options::{Options, TreeOptions, WriteOptions};
use crate::write_batch::WriteBatch;
use crate::{Error, Result};
use parking_lot::{Condvar, Mutex};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

/// Holds the syncs of the files whose name starts with `prefix` or ends with `suffix` while
/// closed.
struct SyncGate {
    prefix: &'static str,
    suffix: &'static str,
    closed: Mutex<bool>,
    opened: Condvar,
    /// Syncs waiting at the gate now.
    waiting: AtomicUsize,
    /// Gated syncs fail, or panic, while set.
    failing: AtomicBool,
    panicking: AtomicBool,
}

impl SyncGate {
    fn new(prefix: &'static str, suffix: &'static str) -> Arc<SyncGate> {
        Arc::new(SyncGate {
            prefix,
            suffix,
            closed: Mutex::new(false),
            opened: Condvar::new(),
            waiting: AtomicUsize::new(0),
            failing: AtomicBool::new(false),
            panicking: AtomicBool::new(false),
        })
    }

    fn set_closed(&self, closed: bool) {
        *self.closed.lock() = closed;
        self.opened.notify_all();
    }

    fn pass(&self, path: &Path) -> Result<()> {
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let gated = (!self.prefix.is_empty() && name.starts_with(self.prefix))
            || (!self.suffix.is_empty() && name.ends_with(self.suffix));
        if !gated {
            return Ok(());
        }
        assert!(
            !self.panicking.load(Ordering::SeqCst),
            "injected panic in a sync"
        );
        if self.failing.load(Ordering::SeqCst) {
            return Err(Error::io(
                path,
                std::io::Error::other("injected sync failure"),
            ));
        }
        let mut closed = self.closed.lock();
        self.waiting.fetch_add(1, Ordering::SeqCst);
        while *closed {
            self.opened.wait(&mut closed);
        }
        self.waiting.fetch_sub(1, Ordering::SeqCst);
        Ok(())
    }

    /// Waits until a sync is held at the gate.
    fn wait_for_a_held_sync(&self) {
        let deadline = Instant::now() + Duration::from_secs(10);
        while self.waiting.load(Ordering::SeqCst) == 0 {
            assert!(
                Instant::now() < deadline,
                "no sync reached the gate in 10 s"
            );
            std::thread::sleep(Duration::from_millis(1));
        }
    }
}

/// An in-memory file system whose syncs pass a [`SyncGate`].
struct GatedFileSystem {
    inner: FaultFileSystem,
    gate: Arc<SyncGate>,
}

struct GatedFile {
    inner: Box<dyn WritableFile>,
    path: PathBuf,
    gate: Arc<SyncGate>,
}

impl WritableFile for GatedFile {
    fn append(&mut self, data: &[u8]) -> Result<()> {
        self.inner.append(data)
    }
    fn flush(&mut self) -> Result<()> {
        self.inner.flush()
    }
    fn sync(&mut self) -> Result<()> {
        self.gate.pass(&self.path)?;
        self.inner.sync()
    }
    fn len(&self) -> u64 {
        self.inner.len()
    }
}

impl FileSystem for GatedFileSystem {
    fn create(&self, path: &Path) -> Result<Box<dyn WritableFile>> {
        Ok(Box::new(GatedFile {
            inner: self.inner.create(path)?,
            path: path.to_path_buf(),
            gate: Arc::clone(&self.gate),
        }))
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
    fn lock(&self, path: &Path) -> Result<Box<dyn FileLock>> {
        self.inner.lock(path)
    }
    fn file_size(&self, path: &Path) -> Result<u64> {
        self.inner.file_size(path)
    }
}

fn gated_options(fs: &FaultFileSystem, gate: &Arc<SyncGate>) -> Options {
    Options {
        file_system: Arc::new(GatedFileSystem {
            inner: fs.clone(),
            gate: Arc::clone(gate),
        }),
        memtable_bytes_max: 64 << 10,
        ..Options::default()
    }
}

/// Old behaviour: a flush held the state lock while it synced the manifest, and the memtable
/// switch of the next write that found the memtable full waited for it (milliseconds per
/// flush on a real disk). Now the switch, and the writes after it, go through while the
/// manifest sync is held; the flush then completes and everything is there after a reopen.
#[test]
fn a_memtable_switch_completes_while_a_flush_holds_its_manifest_sync() {
    let fs = FaultFileSystem::new();
    let gate = SyncGate::new("MANIFEST-", "");
    let dir = Path::new("/manifest-sync-held");
    let db = Db::open(dir, gated_options(&fs, &gate)).unwrap();
    let tree = db.default_tree();
    let value = vec![b'v'; 200];
    for i in 0..100u32 {
        db.put(&tree, format!("old{i:05}").as_bytes(), &value)
            .unwrap();
    }
    gate.set_closed(true);
    std::thread::scope(|scope| {
        let flusher = scope.spawn(|| db.flush());
        gate.wait_for_a_held_sync();
        let (sender, receiver) = mpsc::channel();
        let (db, tree, value) = (&db, &tree, &value);
        let writer = scope.spawn(move || {
            let active = db.inner.super_version.load().mem.wal_number();
            let mut i = 0u32;
            // Fill the active memtable until a writer switches it.
            while db.inner.super_version.load().mem.wal_number() == active && i < 100_000 {
                let written = db.put(tree, format!("new{i:05}").as_bytes(), value);
                if written.is_err() {
                    break;
                }
                i += 1;
            }
            let switched = db.inner.super_version.load().mem.wal_number() != active;
            sender.send((switched, i)).unwrap();
        });
        let outcome = receiver.recv_timeout(Duration::from_secs(10));
        let still_held = gate.waiting.load(Ordering::SeqCst) > 0;
        gate.set_closed(false);
        writer.join().unwrap();
        flusher.join().unwrap().unwrap();
        let (switched, written) =
            outcome.expect("the memtable switch waited for the manifest sync");
        assert!(switched, "no switch after {written} writes");
        assert!(
            still_held,
            "the manifest sync was released before the writes were done"
        );
        assert!(written > 0);
    });
    db.flush().unwrap();
    let stats = db.stats();
    assert!(stats.manifest_writes >= 2, "{stats:?}");
    assert!(stats.memtable_switches >= 1, "{stats:?}");
    drop(db);
    let db = Db::open(dir, gated_options(&fs, &gate)).unwrap();
    let tree = db.default_tree();
    for i in 0..100u32 {
        assert!(db
            .get(&tree, format!("old{i:05}").as_bytes())
            .unwrap()
            .is_some());
    }
    assert!(db.get(&tree, b"new00000").unwrap().is_some());
}

/// A synced unthrottled write syncs its log under the commit lock before it is published: it
/// survives a crash that drops everything unsynced, and when the sync fails it is neither
/// acknowledged nor visible, and writes stop.
#[test]
fn a_synced_unthrottled_write_is_durable_and_hidden_when_its_sync_fails() {
    let fs = FaultFileSystem::new();
    let gate = SyncGate::new("", ".wal");
    let dir = Path::new("/unthrottled-sync");
    let db = Db::open(dir, gated_options(&fs, &gate)).unwrap();
    let tree = db.default_tree();
    db.put(&tree, b"before", b"1").unwrap();
    let mut batch = WriteBatch::new();
    batch.put(&tree, b"synced", b"2");
    db.write_unthrottled(batch, &WriteOptions { sync: true })
        .unwrap();
    assert_eq!(db.stats().unqueued_commit_syncs, 1);
    fs.fail_always(FaultKind::Sync);
    let mut batch = WriteBatch::new();
    batch.put(&tree, b"unsynced", b"3");
    assert!(db
        .write_unthrottled(batch, &WriteOptions { sync: true })
        .is_err());
    assert!(
        db.get(&tree, b"unsynced").unwrap().is_none(),
        "a write whose sync failed was published"
    );
    assert!(db.put(&tree, b"after", b"4").is_err(), "writes went on");
    fs.heal();
    // Power loss: only synced bytes survive. The synced write (and what the log held before
    // it) must be there.
    fs.crash();
    drop(db);
    let db = Db::open(dir, gated_options(&fs, &gate)).unwrap();
    let tree = db.default_tree();
    assert_eq!(db.get(&tree, b"synced").unwrap().unwrap().value, b"2");
    assert_eq!(db.get(&tree, b"before").unwrap().unwrap().value, b"1");
}

/// A panic inside the manifest write, which runs with the state unlocked, used to leave
/// `manifest_writing` set: every later edit, tree drop and close then waited forever. Now the
/// panic stops writes and everything after it fails or completes promptly.
#[test]
fn a_panic_in_a_manifest_write_does_not_hang_later_edits_or_close() {
    let fs = FaultFileSystem::new();
    let gate = SyncGate::new("MANIFEST-", "");
    let dir = Path::new("/manifest-write-panics");
    let db = Db::open(dir, gated_options(&fs, &gate)).unwrap();
    let tree = db.default_tree();
    db.put(&tree, b"kept", b"1").unwrap();
    db.create_tree("first", TreeOptions::default()).unwrap();
    db.create_tree("second", TreeOptions::default()).unwrap();
    gate.panicking.store(true, Ordering::SeqCst);
    // `drop_tree` writes its edit through `apply_edit` on this thread.
    let dropped = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| db.drop_tree("first")));
    assert!(dropped.is_err(), "the injected panic did not happen");
    gate.panicking.store(false, Ordering::SeqCst);
    let (sender, receiver) = mpsc::channel();
    std::thread::spawn(move || {
        let dropped = db.drop_tree("second");
        let written = db.put(&db.default_tree(), b"later", b"2");
        drop(db);
        sender.send((dropped.is_err(), written.is_err())).unwrap();
    });
    let (drop_failed, write_failed) = receiver
        .recv_timeout(Duration::from_secs(10))
        .expect("an edit or close after a panicked manifest write hung");
    assert!(
        drop_failed,
        "an edit was appended after a panicked manifest write"
    );
    assert!(
        write_failed,
        "writes went on after a panicked manifest write"
    );
    let db = Db::open(dir, gated_options(&fs, &gate)).unwrap();
    assert_eq!(
        db.get(&db.default_tree(), b"kept").unwrap().unwrap().value,
        b"1"
    );
}

/// After a manifest record was appended but its sync failed, later edits were still appended
/// after it, and an edit failing outside a background job (manual compaction, tree creation
/// or drop) did not stop writes. Now the version set refuses every later edit with a clear
/// error and writes stop (automatic retries are off here), until `Db::resume` rolls to a
/// fresh manifest: then edits and writes work again, and a reopen finds the data intact and
/// not the tree whose creation failed (its record, appended to the old manifest, is in no
/// manifest CURRENT names).
#[test]
fn a_failed_manifest_sync_refuses_later_edits_and_resume_recovers() {
    let fs = FaultFileSystem::new();
    let gate = SyncGate::new("MANIFEST-", "");
    let dir = Path::new("/manifest-sync-fails");
    let options = Options {
        background_error_retry_interval_max_millis: 0,
        ..gated_options(&fs, &gate)
    };
    let db = Db::open(dir, options.clone()).unwrap();
    let tree = db.default_tree();
    for i in 0..50u32 {
        db.put(&tree, format!("key{i:03}").as_bytes(), b"v")
            .unwrap();
    }
    let manifest_writes = db.stats().manifest_writes;
    gate.failing.store(true, Ordering::SeqCst);
    assert!(
        db.create_tree("refused", TreeOptions::default()).is_err(),
        "a manifest sync failure was not reported"
    );
    gate.failing.store(false, Ordering::SeqCst);
    let refused = db
        .create_tree("later", TreeOptions::default())
        .expect_err("an edit was appended after a failed manifest sync");
    assert!(
        refused
            .to_string()
            .contains("earlier manifest write failed"),
        "{refused}"
    );
    assert!(
        db.flush().is_err(),
        "a flush was recorded after a failed manifest sync"
    );
    assert!(db.put(&tree, b"after", b"v").is_err(), "writes went on");
    assert_eq!(db.stats().manifest_writes, manifest_writes);
    db.resume().unwrap();
    db.create_tree("after-resume", TreeOptions::default())
        .unwrap();
    db.put(&tree, b"after", b"v").unwrap();
    db.flush().unwrap();
    drop(db);
    let db = Db::open(dir, options).unwrap();
    let tree = db.default_tree();
    assert!(db.tree("after-resume").is_ok());
    assert!(
        db.tree("refused").is_err(),
        "a failed tree creation came back"
    );
    assert_eq!(db.get(&tree, b"after").unwrap().unwrap().value, b"v");
    for i in 0..50u32 {
        assert_eq!(
            db.get(&tree, format!("key{i:03}").as_bytes())
                .unwrap()
                .unwrap()
                .value,
            b"v"
        );
    }
    db.create_tree("after-reopen", TreeOptions::default())
        .unwrap();
    db.flush().unwrap();
}
