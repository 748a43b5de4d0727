//! Named regression tests: each reproduces a failure the model test found.

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

use sift_lsm::fs::FaultFileSystem;
use sift_lsm::{Db, Options, ReadOptions, WriteOptions};
use std::path::Path;
use std::sync::Arc;

fn small_options(fs: &FaultFileSystem) -> Options {
    Options {
        file_system: Arc::new(fs.clone()),
        memtable_bytes_max: 64 << 10,
        l0_compaction_trigger: 8,
        l0_slowdown_trigger: 8,
        l0_stop_trigger: 12,
        level1_bytes_max: 1 << 20,
        table_file_bytes_target: 64 << 10,
        block_bytes: 256,
        ..Options::default()
    }
}

fn scan(db: &Db, tree: &sift_lsm::Tree) -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut iter = db.iter(tree, ReadOptions::default()).unwrap();
    iter.seek_to_first().unwrap();
    let mut out = Vec::new();
    while iter.valid() {
        out.push((iter.key().to_vec(), iter.value().to_vec()));
        iter.next().unwrap();
    }
    out
}

/// A compaction that only moves a file to the next level re-adds it under the same number;
/// it used to mark the file obsolete as well, so the file was deleted from disk while the
/// new level still listed it ("no such file" on the next read).
#[test]
fn regression_trivial_move_keeps_the_moved_file() {
    let fs = FaultFileSystem::new();
    let dir = Path::new("/trivial-move");
    let db = Db::open(dir, small_options(&fs)).unwrap();
    let tree = db.default_tree();
    for i in 0..100u32 {
        db.put(&tree, format!("k{i:03}").as_bytes(), b"v").unwrap();
    }
    db.flush().unwrap();
    db.compact_range(&tree, None, None).unwrap();
    let files = fs.file_names(dir);
    assert_eq!(
        files.iter().filter(|n| n.ends_with(".sst")).count(),
        1,
        "{files:?}"
    );
    assert_eq!(scan(&db, &tree).len(), 100);
    db.close().unwrap();
    let db = Db::open(dir, small_options(&fs)).unwrap();
    assert_eq!(scan(&db, &tree).len(), 100);
    assert_eq!(db.get(&tree, b"k042").unwrap().unwrap().value, b"v");
}

/// Compacting an L0 file into L1 must bring along every older L0 file overlapping its key
/// range: a manual compaction of a narrow range used to take only the files touching that
/// range, leaving an older version in L0 that then shadowed the newer one moved to L1.
#[test]
fn regression_partial_l0_compaction_does_not_resurrect_old_versions() {
    let fs = FaultFileSystem::new();
    let dir = Path::new("/partial-l0");
    let db = Db::open(dir, small_options(&fs)).unwrap();
    let tree = db.default_tree();
    db.put(&tree, b"b", b"old").unwrap();
    db.put(&tree, b"c", b"old").unwrap();
    db.flush().unwrap(); // older L0 file: [b, c]
    db.put(&tree, b"a", b"new").unwrap();
    db.put(&tree, b"b", b"new").unwrap();
    db.put(&tree, b"m", b"new").unwrap();
    db.put(&tree, b"z", b"new").unwrap();
    db.flush().unwrap(); // newer L0 file: [a, z]
    db.compact_range(&tree, Some(b"m"), Some(b"m")).unwrap();
    assert_eq!(db.get(&tree, b"b").unwrap().unwrap().value, b"new");
    assert_eq!(db.get(&tree, b"c").unwrap().unwrap().value, b"old");
    let all = scan(&db, &tree);
    assert_eq!(all.iter().find(|(k, _)| k == b"b").unwrap().1, b"new");
}

/// After the logs holding the newest writes were flushed and deleted, a crash used to make
/// the next open restart sequence numbers from the (stale) value in the manifest, so new
/// writes reused sequence numbers of data already in tables.
#[test]
fn regression_sequence_numbers_continue_after_a_crash_once_logs_are_gone() {
    let fs = FaultFileSystem::new();
    let dir = Path::new("/sequence-after-crash");
    let db = Db::open(dir, small_options(&fs)).unwrap();
    let tree = db.default_tree();
    let mut last = 0;
    for i in 0..50u32 {
        last = db
            .write(
                {
                    let mut b = sift_lsm::WriteBatch::new();
                    b.put(&tree, format!("k{i}").as_bytes(), b"v");
                    b
                },
                &WriteOptions { sync: true },
            )
            .unwrap();
    }
    db.flush().unwrap();
    fs.crash();
    drop(db);
    let db = Db::open(dir, small_options(&fs)).unwrap();
    assert!(
        db.latest_sequence() >= last,
        "{} < {last}",
        db.latest_sequence()
    );
    assert_eq!(db.get(&tree, b"k49").unwrap().unwrap().seq, last);
    let next = db.put(&tree, b"k0", b"w").unwrap();
    assert!(next > last);
    assert_eq!(db.get(&tree, b"k0").unwrap().unwrap().value, b"w");
}

/// Not a model failure, but the same style: a long-lived database rewrites its manifest once it
/// passes `manifest_bytes_max`, and the rewritten manifest reopens to the same state.
#[test]
fn manifest_is_rolled_over_and_reopens_to_the_same_state() {
    let fs = FaultFileSystem::new();
    let dir = Path::new("/manifest-roll");
    let options = Options {
        manifest_bytes_max: 512,
        ..small_options(&fs)
    };
    let db = Db::open(dir, options.clone()).unwrap();
    let tree = db.default_tree();
    let mut manifests_seen = std::collections::BTreeSet::new();
    for round in 0..20u32 {
        for i in 0..20u32 {
            db.put(&tree, format!("k{round:02}-{i:02}").as_bytes(), b"v")
                .unwrap();
        }
        db.flush().unwrap();
        for name in fs.file_names(dir) {
            if name.starts_with("MANIFEST-") {
                manifests_seen.insert(name);
            }
        }
    }
    assert!(
        manifests_seen.len() > 2,
        "manifest never rolled: {manifests_seen:?}"
    );
    let live = fs
        .file_names(dir)
        .into_iter()
        .filter(|n| n.starts_with("MANIFEST-"))
        .count();
    assert_eq!(live, 1, "old manifests are removed");
    let before = scan(&db, &tree);
    db.close().unwrap();
    let db = Db::open(dir, options).unwrap();
    assert_eq!(scan(&db, &tree), before);
    assert_eq!(before.len(), 400);
}

/// The engine reads tables with O_DIRECT when asked, and gets the same answers.
#[test]
fn direct_reads_return_the_same_data() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let options = Options {
        use_direct_reads: true,
        block_cache_bytes: 0,
        memtable_bytes_max: 64 << 10,
        ..Options::default()
    };
    let db = Db::open(dir.path(), options).unwrap();
    let tree = db.default_tree();
    for i in 0..3000u32 {
        db.put(
            &tree,
            format!("key{i:05}").as_bytes(),
            format!("value{i}").as_bytes(),
        )
        .unwrap();
    }
    db.flush().unwrap();
    db.wait_for_background_work().unwrap();
    let stats = sift_lsm::ReadStats::default();
    let stats = Arc::new(stats);
    let read = ReadOptions {
        read_stats: Some(Arc::clone(&stats)),
        ..ReadOptions::default()
    };
    for i in (0..3000u32).step_by(7) {
        let e = db
            .get_with(&tree, format!("key{i:05}").as_bytes(), &read)
            .unwrap()
            .unwrap();
        assert_eq!(e.value, format!("value{i}").as_bytes());
    }
    assert!(
        stats
            .blocks_read_from_disk
            .load(std::sync::atomic::Ordering::Relaxed)
            > 0
    );
    assert_eq!(scan(&db, &tree).len(), 3000);
}

/// Writes emitted by a compaction observer used to queue behind user writers; a user writer
/// stalled on full immutable memtables waits for the flush, and the flush waited for its
/// emitted writes: a deadlock. Emitted writes now take the commit lock directly.
#[test]
fn regression_observer_writes_do_not_deadlock_with_stalled_writers() {
    use sift_lsm::extension::{CompactionObserver, DroppedEntry, JobKind};
    struct Echo(sift_lsm::TreeId);
    impl CompactionObserver for Echo {
        fn on_drop(
            &self,
            _job: JobKind,
            entry: &DroppedEntry<'_>,
            emit: &mut sift_lsm::WriteBatch,
        ) {
            let mut key = entry.user_key.to_vec();
            key.extend_from_slice(&entry.seq.to_be_bytes());
            emit.put_in(self.0, &key, b"");
        }
    }
    let fs = FaultFileSystem::new();
    let dir = Path::new("/observer-stall");
    // The "log" tree gets id 1: the first tree created after "default".
    let options = Options {
        memtable_bytes_max: 8 << 10,
        immutable_memtables_max: 1,
        compaction_observers: vec![Arc::new(Echo(1))],
        ..small_options(&fs)
    };
    let db = Arc::new(Db::open(dir, options).unwrap());
    let log = db
        .create_tree("log", sift_lsm::TreeOptions::default())
        .unwrap();
    assert_eq!(log.id(), 1);
    let (done_tx, done_rx) = std::sync::mpsc::channel();
    let mut writers = Vec::new();
    for t in 0..4u32 {
        let db = Arc::clone(&db);
        let done = done_tx.clone();
        writers.push(std::thread::spawn(move || {
            let tree = db.default_tree();
            for i in 0..3000u32 {
                db.put(&tree, format!("k{}", (i + t) % 16).as_bytes(), &[b'x'; 64])
                    .unwrap();
            }
            done.send(()).unwrap();
        }));
    }
    for _ in 0..4 {
        done_rx
            .recv_timeout(std::time::Duration::from_mins(1))
            .expect("writers made no progress for 60 s: deadlock between stalled writers and a flush's emitted writes");
    }
    for w in writers {
        w.join().unwrap();
    }
    db.flush().unwrap();
    assert!(
        !scan(&db, &log).is_empty(),
        "the observer saw shadowed versions and its writes landed"
    );
}

/// Dropping a tree while a flush of its writes was running used to make the flush add a file
/// to a tree the manifest no longer had: the edit failed and every later write was refused.
/// Found by the index layer (its `drop_index` had to flush first as a workaround). The race is
/// provoked by many drops under constant background flushing.
#[test]
fn regression_dropping_a_tree_during_its_flush_keeps_the_database_writable() {
    let fs = FaultFileSystem::new();
    let dir = Path::new("/drop-during-flush");
    let options = Options {
        memtable_bytes_max: 4096,
        ..small_options(&fs)
    };
    let db = Db::open(dir, options.clone()).unwrap();
    let kept = db.default_tree();
    for round in 0..40u32 {
        let name = format!("doomed{round}");
        let doomed = db
            .create_tree(&name, sift_lsm::TreeOptions::default())
            .unwrap();
        for i in 0..60u32 {
            db.put(&doomed, format!("d{i}").as_bytes(), &[b'x'; 40])
                .unwrap();
            db.put(&kept, format!("k{round}-{i}").as_bytes(), b"y")
                .unwrap();
        }
        db.drop_tree(&name).unwrap();
    }
    db.put(&kept, b"after", b"z").unwrap();
    db.flush().unwrap();
    db.wait_for_background_work().unwrap();
    assert_eq!(scan(&db, &kept).len(), 40 * 60 + 1);
    db.close().unwrap();
    let db = Db::open(dir, options).unwrap();
    assert_eq!(scan(&db, &db.default_tree()).len(), 40 * 60 + 1);
    assert_eq!(db.tree_names(), vec!["default".to_owned()]);
}

/// Regression (found by the index layer's model driver: a `deferred` index kept cancelled
/// DELETE/put pairs after full compactions whenever an async index held a version retention):
/// a compaction that ran under a retention keeps a tombstone and the version it hides in one
/// bottom file; `compact_range` never rewrote the deepest level (and moved single files down
/// as they were), so once the retention was gone nothing dropped them. Now `compact_range`
/// rewrites every file of the range once, and never moves a file unread. The second half is
/// the same with a shadowed put instead of a tombstone.
#[test]
fn compact_range_drops_pairs_a_released_retention_kept() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), Options::default()).unwrap();
    let tree = db.default_tree();
    let stored = |db: &Db| -> (u64, u64) {
        let view = db.components(&tree, &ReadOptions::default()).unwrap();
        (0..7)
            .flat_map(|level| view.files(level).clone())
            .fold((0, 0), |(entries, deletions), file| {
                (entries + file.entries, deletions + file.deletions)
            })
    };
    let put = db.put(&tree, b"k", b"v").unwrap();
    db.put(&tree, b"other", b"kept").unwrap();
    db.flush().unwrap();
    let retention = db.retain_versions_above(put - 1);
    db.delete(&tree, b"k").unwrap();
    db.compact_range(&tree, None, None).unwrap();
    assert_eq!(
        stored(&db),
        (3, 1),
        "the retention keeps the put under its tombstone"
    );
    drop(retention);
    db.compact_range(&tree, None, None).unwrap();
    assert_eq!(
        stored(&db),
        (1, 0),
        "both go once the retention is released"
    );
    assert_eq!(
        scan(&db, &tree),
        vec![(b"other".to_vec(), b"kept".to_vec())]
    );

    let retention = db.retain_versions_above(db.latest_sequence());
    db.put(&tree, b"other", b"newer").unwrap();
    db.compact_range(&tree, None, None).unwrap();
    assert_eq!(stored(&db), (2, 0), "the retention keeps the shadowed put");
    drop(retention);
    db.compact_range(&tree, None, None).unwrap();
    assert_eq!(
        stored(&db),
        (1, 0),
        "the shadowed put goes once the retention is released"
    );
    assert_eq!(
        scan(&db, &tree),
        vec![(b"other".to_vec(), b"newer".to_vec())]
    );
}

/// `Db::flush` returned before the flush thread counted the flush, so statistics read right
/// after a flush said 0 flushes (found through the Python binding's `db.stats()`).
#[test]
fn regression_a_flush_is_counted_when_flush_returns() {
    let fs = FaultFileSystem::new();
    let db = Db::open(Path::new("/db"), small_options(&fs)).unwrap();
    let tree = db.default_tree();
    for round in 1..=20u64 {
        db.put(&tree, format!("k{round:03}").as_bytes(), b"v")
            .unwrap();
        db.flush().unwrap();
        let stats = db.stats();
        assert_eq!(stats.flushes, round, "round {round}");
        assert!(stats.flush_bytes_written > 0, "round {round}");
    }
}
