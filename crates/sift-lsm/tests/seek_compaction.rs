//! Seek compaction (`Options::seek_compaction`): point reads that consult a table file in vain
//! before finding their key in another charge the first file; the read that spends its
//! allowance (at least 100) gets it compacted into the next level, and only then.

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

use sift_lsm::fs::FaultFileSystem;
use sift_lsm::{Db, Options, Tree};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The smallest allowance a file gets (`version/file.rs`): the files here are far smaller
/// than 100 × 16 KB, so each has exactly this many.
const ALLOWANCE: usize = 100;

fn options(fs: &FaultFileSystem, seek_compaction: bool) -> Options {
    Options {
        file_system: Arc::new(fs.clone()),
        // No size-triggered compaction: two L0 files stay where they are unless reads move them.
        l0_compaction_trigger: 8,
        seek_compaction,
        ..Options::default()
    }
}

/// An older L0 file with `k000`..`k199` and a newer one with only `k000` and `k199`, whose key
/// range covers every key of the older one (so a get of `k100` consults it first, in vain).
fn two_overlapping_files(dir: &Path, fs: &FaultFileSystem, seek_compaction: bool) -> (Db, Tree) {
    let db = Db::open(dir, options(fs, seek_compaction)).unwrap();
    let tree = db.default_tree();
    for i in 0..200u32 {
        db.put(
            &tree,
            format!("k{i:03}").as_bytes(),
            format!("old{i}").as_bytes(),
        )
        .unwrap();
    }
    db.flush().unwrap();
    db.put(&tree, b"k000", b"new0").unwrap();
    db.put(&tree, b"k199", b"new199").unwrap();
    db.flush().unwrap();
    db.wait_for_background_work().unwrap();
    assert_eq!(level_files(&db), vec![2], "setup: two L0 files");
    (db, tree)
}

/// Files per level of the default tree, trailing empty levels left out.
fn level_files(db: &Db) -> Vec<usize> {
    let stats = db.stats();
    let tree = stats
        .trees
        .iter()
        .find(|t| t.name == "default")
        .expect("default tree");
    let mut files: Vec<usize> = tree.levels.iter().map(|l| l.files).collect();
    while files.last() == Some(&0) {
        files.pop();
    }
    files
}

fn get_middle_keys(db: &Db, tree: &Tree, times: usize) {
    for i in 0..times {
        let key = format!("k{:03}", 1 + i % 198);
        let value = db.get(tree, key.as_bytes()).unwrap().expect("present");
        assert_eq!(value.value, format!("old{}", 1 + i % 198).as_bytes());
    }
}

#[test]
fn reads_that_spend_a_files_allowance_compact_it_and_not_one_read_earlier() {
    let fs = FaultFileSystem::new();
    let (db, tree) = two_overlapping_files(Path::new("/seek-spent"), &fs, true);
    get_middle_keys(&db, &tree, ALLOWANCE - 1);
    db.wait_for_background_work().unwrap();
    assert_eq!(level_files(&db), vec![2], "one read short of the allowance");
    assert_eq!(db.stats().seek_compactions, 0);

    get_middle_keys(&db, &tree, 1);
    // The spending read wakes the compaction thread itself: nothing else happens that would.
    let deadline = Instant::now() + Duration::from_secs(30);
    while db.stats().seek_compactions == 0 {
        assert!(Instant::now() < deadline, "no seek compaction ran");
        std::thread::sleep(Duration::from_millis(5));
    }
    db.wait_for_background_work().unwrap();
    let stats = db.stats();
    assert_eq!(stats.seek_compactions, 1);
    assert_eq!(stats.compactions, 1);
    let files = level_files(&db);
    assert_eq!(files[0], 0, "both L0 files compacted down: {files:?}");
    assert!(files[1..].iter().sum::<usize>() >= 1, "{files:?}");

    // The merged data reads as before, newest versions first.
    assert_eq!(db.get(&tree, b"k000").unwrap().unwrap().value, b"new0");
    assert_eq!(db.get(&tree, b"k199").unwrap().unwrap().value, b"new199");
    get_middle_keys(&db, &tree, 198);
    db.close().unwrap();
}

#[test]
fn reads_found_in_the_first_file_they_consult_charge_nothing() {
    let fs = FaultFileSystem::new();
    let (db, tree) = two_overlapping_files(Path::new("/seek-hit"), &fs, true);
    for _ in 0..10 * ALLOWANCE {
        assert_eq!(db.get(&tree, b"k000").unwrap().unwrap().value, b"new0");
        // Outside both files' ranges: consults neither.
        assert!(db.get(&tree, b"z").unwrap().is_none());
    }
    db.wait_for_background_work().unwrap();
    assert_eq!(level_files(&db), vec![2]);
    assert_eq!(db.stats().seek_compactions, 0);
    db.close().unwrap();
}

#[test]
fn without_seek_compaction_reads_never_compact() {
    let fs = FaultFileSystem::new();
    let (db, tree) = two_overlapping_files(Path::new("/seek-off"), &fs, false);
    get_middle_keys(&db, &tree, 10 * ALLOWANCE);
    db.wait_for_background_work().unwrap();
    assert_eq!(level_files(&db), vec![2]);
    assert_eq!(db.stats().compactions, 0);
    db.close().unwrap();
}

/// A reopened database's files start with a fresh allowance (it is not persisted), and what
/// reads spent before the reopen is not owed after it.
#[test]
fn a_reopen_gives_every_file_a_fresh_allowance() {
    let fs = FaultFileSystem::new();
    let dir = Path::new("/seek-reopen");
    let (db, tree) = two_overlapping_files(dir, &fs, true);
    get_middle_keys(&db, &tree, ALLOWANCE - 1);
    db.close().unwrap();
    let db = Db::open(dir, options(&fs, true)).unwrap();
    get_middle_keys(&db, &tree, ALLOWANCE - 1);
    db.wait_for_background_work().unwrap();
    assert_eq!(level_files(&db), vec![2]);
    get_middle_keys(&db, &tree, 1);
    db.wait_for_background_work().unwrap();
    assert_eq!(db.stats().seek_compactions, 1);
    assert_eq!(level_files(&db)[0], 0);
    db.close().unwrap();
}
