//! Blocks read by `embedded` RANGE queries on a time-correlated attribute (issue 4's target:
//! at most twice the blocks that hold the results): over known layouts, a range whose results
//! sit in K data blocks reads each of them once — no point read of a block's first key when
//! the unread block before it provably ends below that key — and returns what brute force
//! returns.

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

mod common;

use common::small_options;
use sift_index::{AttrType, AttrValue, Database, DatabaseOptions, IndexKind, IndexSpec};
use sift_lsm::extension::InternalIterator;
use sift_lsm::extension::ReadContext;
use sift_lsm::extension::{make_seek_key, parse_internal_key};
use sift_lsm::{ComponentId, ReadOptions, SeqNo};
use std::collections::HashSet;

const DOCS: i64 = 3000;
const TIME_BASE: i64 = 1_000_000;

/// Documents `d00000`, `d00001`, … written in key order (like tweet ids), each with the time
/// `TIME_BASE + i` and padding that puts a few documents in each 512-byte block.
fn load(db: &Database) {
    db.create_collection("docs", "id").unwrap();
    db.create_index(
        "docs",
        IndexSpec::new("t", "t", AttrType::Time, IndexKind::Embedded),
    )
    .unwrap();
    for i in 0..DOCS {
        let json = format!(
            r#"{{"id": "d{i:05}", "t": {}, "pad": "{}"}}"#,
            TIME_BASE + i,
            "p".repeat(100)
        );
        db.put("docs", json.as_bytes()).unwrap();
    }
}

/// The distinct (file, data block) pairs holding the versions `(pk, seq)` of `docs`.
fn result_blocks(db: &Database, versions: &[(Vec<u8>, SeqNo)]) -> usize {
    let engine = db.engine();
    let tree = engine
        .tree(&db.collection("docs").unwrap().record.primary_tree_name())
        .unwrap();
    let view = engine.components(&tree, &ReadOptions::default()).unwrap();
    let mut files = Vec::new();
    for id in view.ids() {
        match id {
            ComponentId::Level(level) => files.extend(view.files(level)),
            ComponentId::Level0File(number) => files.extend(
                view.files(0)
                    .into_iter()
                    .filter(|file| file.number == number),
            ),
            ComponentId::Memtable | ComponentId::ImmutableMemtable(_) => {}
        }
    }
    let mut blocks = HashSet::new();
    for (pk, seq) in versions {
        let seek_key = make_seek_key(pk, *seq);
        let holder = files.iter().find_map(|file| {
            let table = view.table(file).unwrap();
            let mut iter = table.iter(ReadContext::default());
            iter.seek(&seek_key).unwrap();
            let found = iter.valid()
                && parse_internal_key(iter.key())
                    .is_some_and(|key| key.user_key == pk.as_slice() && key.seq == *seq);
            found.then(|| (file.number, iter.block_ordinal().unwrap()))
        });
        blocks.insert(holder.expect("every result is in a table"));
    }
    blocks.len()
}

/// Runs windows of several sizes and limits; each must return the brute-force answer and
/// read at most one block more than the blocks holding its results.
fn check_ranges(db: &Database, layout: &str) {
    let windows = [(1500, 1509), (1000, 1099), (200, 1199), (0, DOCS - 1)];
    for (first, last) in windows {
        for limit in [Some(10), Some(100), None] {
            let result = db
                .range(
                    "docs",
                    "t",
                    &AttrValue::Time(TIME_BASE + first),
                    &AttrValue::Time(TIME_BASE + last),
                    limit,
                )
                .unwrap();
            // Brute force: every document matches once, newest (last written) first.
            let mut expected: Vec<String> =
                (first..=last).rev().map(|i| format!("d{i:05}")).collect();
            expected.truncate(limit.unwrap_or(usize::MAX));
            let got: Vec<String> = result
                .hits
                .iter()
                .map(|hit| String::from_utf8(hit.pk.clone()).unwrap())
                .collect();
            assert_eq!(
                got, expected,
                "{layout}: window {first}..={last} limit {limit:?}"
            );
            let versions: Vec<(Vec<u8>, SeqNo)> = result
                .hits
                .iter()
                .map(|hit| (hit.pk.clone(), hit.seq))
                .collect();
            let holding = result_blocks(db, &versions) as u64;
            assert!(holding >= 1);
            assert!(
                result.stats.blocks_read <= holding + 1,
                "{layout}: window {first}..={last} limit {limit:?}: read {} blocks, results \
                 in {holding}: {:?}",
                result.stats.blocks_read,
                result.stats
            );
            // No candidate needed a point read (which would read a block again).
            assert_eq!(
                result.stats.validations, 0,
                "{layout}: window {first}..={last} limit {limit:?}: {:?}",
                result.stats
            );
        }
    }
}

fn options() -> DatabaseOptions {
    let mut options = small_options();
    options.engine.block_cache_bytes = 1 << 20;
    options
}

#[test]
fn time_ranges_read_each_result_block_once_after_full_compaction() {
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(dir.path(), options()).unwrap();
    load(&db);
    db.compact_all().unwrap();
    check_ranges(&db, "compacted");
}

#[test]
fn time_ranges_read_each_result_block_once_across_l0_files() {
    let dir = tempfile::tempdir().unwrap();
    let mut options = options();
    // Every flush stays an L0 file: each is its own component.
    options.engine.l0_compaction_trigger = 1000;
    options.engine.l0_slowdown_trigger = 2000;
    options.engine.l0_stop_trigger = 3000;
    let db = Database::open(dir.path(), options).unwrap();
    load(&db);
    db.flush().unwrap();
    check_ranges(&db, "level 0");
}
