//! Flush listeners, `Db::get_at` and `Db::write_unthrottled`: a listener is told before every
//! flush with a sequence bound covering the memtable, may block the flush while unthrottled
//! writes go on (even when user writers are stalled behind that flush), and `get_at` reads
//! older versions.

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

use parking_lot::Mutex;
use sift_lsm::extension::{FlushInfo, FlushListener};
use sift_lsm::{Db, Options, WriteBatch, WriteOptions};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Records each call; blocks while `hold` is set.
#[derive(Default)]
struct Recorder {
    calls: Mutex<Vec<FlushInfo>>,
    hold: AtomicBool,
}

impl FlushListener for Recorder {
    fn before_flush(&self, info: &FlushInfo) {
        self.calls.lock().push(*info);
        while self.hold.load(Ordering::Acquire) {
            std::thread::sleep(Duration::from_millis(1));
        }
    }
}

fn open(dir: &std::path::Path, recorder: &Arc<Recorder>) -> Db {
    let options = Options {
        memtable_bytes_max: 4096,
        immutable_memtables_max: 1,
        flush_listeners: vec![Arc::clone(recorder) as Arc<dyn FlushListener>],
        ..Options::default()
    };
    Db::open(dir, options).unwrap()
}

#[test]
fn listener_sees_every_flush_with_a_covering_bound() {
    let dir = tempfile::tempdir().unwrap();
    let recorder = Arc::new(Recorder::default());
    let db = open(dir.path(), &recorder);
    let tree = db.default_tree();
    let last = db.put(&tree, b"k", b"v").unwrap();
    db.flush().unwrap();
    let calls = recorder.calls.lock().clone();
    assert_eq!(calls.len(), 1);
    assert!(calls[0].sequence_upper_bound >= last);
}

#[test]
fn a_blocked_flush_lets_unthrottled_writes_through_while_user_writes_stall() {
    let dir = tempfile::tempdir().unwrap();
    let recorder = Arc::new(Recorder::default());
    recorder.hold.store(true, Ordering::Release);
    let db = Arc::new(open(dir.path(), &recorder));
    let tree = db.default_tree();
    let value = vec![7u8; 512];
    // A user writer fills the memtables; the first flush blocks in the listener, so it stalls.
    let writer = {
        let db = Arc::clone(&db);
        let tree = tree.clone();
        let value = value.clone();
        std::thread::spawn(move || {
            for i in 0..64u32 {
                db.put(&tree, &i.to_be_bytes(), &value).unwrap();
            }
        })
    };
    while recorder.calls.lock().is_empty() {
        std::thread::sleep(Duration::from_millis(1));
    }
    std::thread::sleep(Duration::from_millis(50));
    assert!(
        !writer.is_finished(),
        "the writer should wait for the blocked flush"
    );
    // Unthrottled writes still commit (into a memtable past its size limit).
    for i in 0..32u32 {
        let mut batch = WriteBatch::new();
        batch.put(&tree, format!("u{i}").as_bytes(), &value);
        db.write_unthrottled(batch, &WriteOptions::default())
            .unwrap();
    }
    assert_eq!(db.get(&tree, b"u31").unwrap().unwrap().value, value);
    recorder.hold.store(false, Ordering::Release);
    writer.join().unwrap();
    db.flush().unwrap();
    assert!(recorder.calls.lock().len() >= 2);
    assert_eq!(
        db.get(&tree, &63u32.to_be_bytes()).unwrap().unwrap().value,
        value
    );
}

#[test]
fn get_at_reads_the_version_visible_at_a_sequence_number() {
    let dir = tempfile::tempdir().unwrap();
    let recorder = Arc::new(Recorder::default());
    let db = open(dir.path(), &recorder);
    let tree = db.default_tree();
    let first = db.put(&tree, b"k", b"one").unwrap();
    let second = db.put(&tree, b"k", b"two").unwrap();
    let deleted = db.delete(&tree, b"k").unwrap();
    assert_eq!(db.get_at(&tree, b"k", first - 1).unwrap(), None);
    assert_eq!(
        db.get_at(&tree, b"k", first).unwrap().unwrap().value,
        b"one"
    );
    let entry = db.get_at(&tree, b"k", deleted - 1).unwrap().unwrap();
    assert_eq!((entry.value.as_slice(), entry.seq), (&b"two"[..], second));
    assert_eq!(db.get_at(&tree, b"k", deleted).unwrap(), None);
    // From a table too (the flush kept only the delete, the newest version).
    db.flush().unwrap();
    assert_eq!(db.get_at(&tree, b"k", deleted).unwrap(), None);
}

/// `Options::compactions_paused_at_open` holds automatic compactions until
/// `Db::resume_compactions`, so a layer can register a `VersionRetention` first; the
/// retention keeps the newest version at or below its floor and every version above it, and
/// once released the next compaction drops them.
#[test]
fn compactions_paused_at_open_wait_for_a_retention_that_keeps_versions_above_its_floor() {
    let dir = tempfile::tempdir().unwrap();
    let versions: Vec<(u64, &[u8])> = {
        let options = Options {
            l0_compaction_trigger: 8,
            l0_slowdown_trigger: 16,
            l0_stop_trigger: 24,
            ..Options::default()
        };
        let db = Db::open(dir.path(), options).unwrap();
        let tree = db.default_tree();
        let mut versions = Vec::new();
        for value in [&b"v0"[..], b"v1", b"v2", b"v3"] {
            versions.push((db.put(&tree, b"k", value).unwrap(), value));
            db.flush().unwrap();
        }
        db.close().unwrap();
        versions
    };
    let l0_files = |db: &Db| {
        db.components(&db.default_tree(), &sift_lsm::ReadOptions::default())
            .unwrap()
            .files(0)
            .len()
    };
    let options = Options {
        l0_compaction_trigger: 2,
        compactions_paused_at_open: true,
        ..Options::default()
    };
    let db = Db::open(dir.path(), options).unwrap();
    let tree = db.default_tree();
    std::thread::sleep(Duration::from_millis(100));
    db.wait_for_background_work().unwrap();
    assert_eq!(l0_files(&db), 4, "no compaction may run before the resume");
    let floor = versions[1].0;
    let retention = db.retain_versions_above(floor);
    assert_eq!(retention.floor(), floor);
    assert!(db.resume_compactions());
    db.wait_for_background_work().unwrap();
    assert_eq!(l0_files(&db), 0, "compactions run after the resume");
    // v0 is shadowed at the floor by v1; v1 is the newest at the floor; v2 and v3 are above it.
    assert_eq!(db.get_at(&tree, b"k", versions[0].0).unwrap(), None);
    for (seq, value) in &versions[1..] {
        let entry = db.get_at(&tree, b"k", *seq).unwrap().unwrap();
        assert_eq!((entry.seq, entry.value.as_slice()), (*seq, *value));
    }
    drop(retention);
    db.put(&tree, b"k", b"v4").unwrap();
    db.compact_range(&tree, None, None).unwrap();
    assert_eq!(
        db.get_at(&tree, b"k", versions[3].0).unwrap(),
        None,
        "without the retention, compaction drops the shadowed versions"
    );
    assert_eq!(db.get(&tree, b"k").unwrap().unwrap().value, b"v4");
}
