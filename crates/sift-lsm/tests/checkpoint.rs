//! `Db::checkpoint`: the copy opens as the database was at the call (checked against a model
//! of two trees through puts, deletes, flushes and compactions), stays intact while the
//! original compacts its files away, refuses an existing directory, and taken during a stream
//! of writes holds a prefix of that stream.

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use sift_lsm::{Db, Error, Options, ReadOptions, Tree, TreeOptions};
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

type Model = BTreeMap<(String, Vec<u8>), Vec<u8>>;

fn small_options() -> Options {
    Options {
        memtable_bytes_max: 32 << 10,
        table_file_bytes_target: 16 << 10,
        level1_bytes_max: 64 << 10,
        l0_compaction_trigger: 2,
        ..Options::default()
    }
}

fn open_tree(db: &Db, name: &str) -> Tree {
    db.tree(name)
        .or_else(|_| db.create_tree(name, TreeOptions::default()))
        .unwrap()
}

fn contents(db: &Db, names: &[&str]) -> Model {
    let mut found = Model::new();
    for name in names {
        let tree = db.tree(name).unwrap();
        let mut iter = db.iter(&tree, ReadOptions::default()).unwrap();
        iter.seek_to_first().unwrap();
        while iter.valid() {
            found.insert(
                ((*name).to_owned(), iter.key().to_vec()),
                iter.value().to_vec(),
            );
            iter.next().unwrap();
        }
    }
    found
}

fn write_random(
    db: &Db,
    trees: &[(&str, Tree)],
    model: &mut Model,
    rng: &mut StdRng,
    count: usize,
) {
    for _ in 0..count {
        let (name, tree) = &trees[rng.gen_range(0..trees.len())];
        let key = format!("k{:04}", rng.gen_range(0..400)).into_bytes();
        if rng.gen_bool(0.8) {
            let value = vec![rng.gen::<u8>(); rng.gen_range(10..200)];
            db.put(tree, &key, &value).unwrap();
            model.insert(((*name).to_owned(), key), value);
        } else {
            db.delete(tree, &key).unwrap();
            model.remove(&((*name).to_owned(), key));
        }
    }
}

#[test]
fn a_checkpoint_opens_as_the_database_was_and_outlives_the_originals_compactions() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path().join("db"), small_options()).unwrap();
    let names = ["a", "b"];
    let trees: Vec<(&str, Tree)> = names.iter().map(|n| (*n, open_tree(&db, n))).collect();
    let mut model = Model::new();
    let mut rng = StdRng::seed_from_u64(5);
    for round in 0..4 {
        write_random(&db, &trees, &mut model, &mut rng, 1500);
        if round % 2 == 1 {
            db.compact_range(&trees[0].1, None, None).unwrap();
        }
    }
    // Some writes only in the memtable: the checkpoint flushes them.
    write_random(&db, &trees, &mut model, &mut rng, 50);
    let copy = dir.path().join("copy");
    db.checkpoint(&copy).unwrap();
    let at_checkpoint = model.clone();

    // The original goes on, compacting away every file the checkpoint links.
    write_random(&db, &trees, &mut model, &mut rng, 3000);
    for (_, tree) in &trees {
        db.compact_range(tree, None, None).unwrap();
    }
    assert_eq!(contents(&db, &names), model);
    drop(db);

    let copied = Db::open(&copy, small_options()).unwrap();
    assert_eq!(contents(&copied, &names), at_checkpoint);
    // The copy is a database of its own: it takes writes and reopens.
    let tree = copied.tree("a").unwrap();
    copied.put(&tree, b"after", b"checkpoint").unwrap();
    drop(copied);
    let copied = Db::open(&copy, small_options()).unwrap();
    let mut expected = at_checkpoint;
    expected.insert(("a".to_owned(), b"after".to_vec()), b"checkpoint".to_vec());
    assert_eq!(contents(&copied, &names), expected);

    let original = Db::open(dir.path().join("db"), small_options()).unwrap();
    assert_eq!(contents(&original, &names), model);
}

#[test]
fn a_checkpoint_into_an_existing_directory_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path().join("db"), small_options()).unwrap();
    let existing = dir.path().join("taken");
    std::fs::create_dir(&existing).unwrap();
    std::fs::write(existing.join("keep"), b"mine").unwrap();
    let error = db.checkpoint(&existing).unwrap_err();
    assert!(
        matches!(&error, Error::InvalidArgument(m) if m.contains("already exists")),
        "{error:?}"
    );
    assert_eq!(std::fs::read(existing.join("keep")).unwrap(), b"mine");
    assert_eq!(std::fs::read_dir(&existing).unwrap().count(), 1);
}

/// A writer puts keys 0, 1, 2, … in order while checkpoints are taken: each checkpoint holds
/// keys 0..m for some m, never a later key without an earlier one.
#[test]
fn a_checkpoint_taken_during_writes_holds_a_prefix_of_them() {
    let dir = tempfile::tempdir().unwrap();
    let db = Arc::new(Db::open(dir.path().join("db"), small_options()).unwrap());
    let tree = open_tree(&db, "t");
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let (db, tree, stop) = (Arc::clone(&db), tree.clone(), Arc::clone(&stop));
        std::thread::spawn(move || {
            let mut i = 0_u32;
            while !stop.load(Ordering::Relaxed) && i < 200_000 {
                db.put(&tree, format!("{i:08}").as_bytes(), &[7; 64])
                    .unwrap();
                i += 1;
            }
            i
        })
    };
    let mut sizes = Vec::new();
    for n in 0..5 {
        std::thread::sleep(std::time::Duration::from_millis(30));
        let copy = dir.path().join(format!("copy{n}"));
        db.checkpoint(&copy).unwrap();
        let copied = Db::open(&copy, small_options()).unwrap();
        let keys: Vec<Vec<u8>> = contents(&copied, &["t"])
            .into_keys()
            .map(|(_, k)| k)
            .collect();
        for (i, key) in keys.iter().enumerate() {
            assert_eq!(
                key,
                format!("{i:08}").as_bytes(),
                "checkpoint {n}: a gap before key {i}"
            );
        }
        sizes.push(keys.len());
        check_removable(&copy);
    }
    stop.store(true, Ordering::Relaxed);
    let written = writer.join().unwrap();
    assert!(sizes.windows(2).all(|w| w[0] <= w[1]), "{sizes:?}");
    assert!(sizes.last().copied().unwrap_or(0) <= written as usize);
}

/// A checkpoint directory can be deleted without touching the original.
fn check_removable(copy: &Path) {
    std::fs::remove_dir_all(copy).unwrap();
}
