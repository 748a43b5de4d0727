//! Regression tests for the `embedded` index kind: the faults of the published LevelDB++
//! Embedded Index (a stale version returned when an update and its old version sit in two L0
//! files, duplicates in RANGE, a crash on `lo > hi`, values of 8 bytes or more never found),
//! the Pebble trap, corrupted property bytes, spec validation, and block reads.

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

mod common;

use common::small_options;
use sift_index::format::EMBEDDED_COLLECTOR_NAME as COLLECTOR_NAME;
use sift_index::{
    AttrType, AttrValue, Database, DatabaseOptions, IndexError, IndexKind, IndexSpec, Maintenance,
};
use sift_lsm::extension::{
    BlockPropertyCollector, BlockPropertyCollectorFactory, CollectorEntry, FinishedBlock,
    TableCollectorOutput, TableContext,
};
use std::path::Path;
use std::sync::Arc;

/// Small tables that stay in L0 (no automatic compaction).
fn l0_options() -> DatabaseOptions {
    let mut options = small_options();
    options.engine.l0_compaction_trigger = 100;
    options.engine.l0_slowdown_trigger = 200;
    options.engine.l0_stop_trigger = 300;
    options
}

fn open_with(path: &Path, options: DatabaseOptions) -> Database {
    Database::open(path, options).unwrap()
}

fn embedded(db: &Database, name: &str, path: &str, attr_type: AttrType) {
    db.create_index(
        "docs",
        IndexSpec::new(name, path, attr_type, IndexKind::Embedded),
    )
    .unwrap();
}

fn pks(result: &sift_index::QueryResult) -> Vec<String> {
    result
        .hits
        .iter()
        .map(|hit| String::from_utf8(hit.pk.clone()).unwrap())
        .collect()
}

fn doc(pk: &str, n: i64) -> Vec<u8> {
    format!(r#"{{"id": "{pk}", "n": {n}}}"#).into_bytes()
}

#[test]
fn stale_version_in_an_older_l0_file_is_not_returned() {
    let dir = tempfile::tempdir().unwrap();
    let db = open_with(dir.path(), l0_options());
    db.create_collection("docs", "id").unwrap();
    embedded(&db, "n", "n", AttrType::Int);
    db.put("docs", &doc("a", 5)).unwrap();
    db.put("docs", &doc("b", 5)).unwrap();
    db.flush().unwrap();
    db.put("docs", &doc("a", 6)).unwrap(); // the update goes to a second L0 file
    db.delete("docs", b"b").unwrap(); // and a delete
    db.flush().unwrap();
    let levels = &db
        .engine()
        .stats()
        .trees
        .iter()
        .find(|t| t.name.ends_with(".docs"))
        .unwrap()
        .levels
        .clone();
    assert_eq!(levels[0].files, 2, "both versions must sit in L0 files");
    for limit in [Some(1), Some(10), None] {
        assert!(db
            .lookup("docs", "n", &AttrValue::Int(5), limit)
            .unwrap()
            .hits
            .is_empty());
        assert_eq!(
            pks(&db.lookup("docs", "n", &AttrValue::Int(6), limit).unwrap()),
            ["a"]
        );
    }
    // The same with the update still in the memtable.
    db.put("docs", &doc("a", 7)).unwrap();
    assert!(db
        .lookup("docs", "n", &AttrValue::Int(6), None)
        .unwrap()
        .hits
        .is_empty());
    assert_eq!(
        pks(&db.lookup("docs", "n", &AttrValue::Int(7), None).unwrap()),
        ["a"]
    );
}

#[test]
fn range_returns_each_document_once() {
    let dir = tempfile::tempdir().unwrap();
    let db = open_with(dir.path(), l0_options());
    db.create_collection("docs", "id").unwrap();
    embedded(&db, "n", "n", AttrType::Int);
    // Every version of "a" is in the range, spread over L0 files and the memtable.
    for (n, flush) in [(1, true), (2, true), (3, false), (2, false)] {
        db.put("docs", &doc("a", n)).unwrap();
        db.put("docs", &doc(&format!("other{n}"), 100)).unwrap();
        if flush {
            db.flush().unwrap();
        }
    }
    let result = db
        .range("docs", "n", &AttrValue::Int(0), &AttrValue::Int(10), None)
        .unwrap();
    assert_eq!(pks(&result), ["a"]);
    db.compact_all().unwrap();
    db.put("docs", &doc("a", 1)).unwrap();
    let result = db
        .range("docs", "n", &AttrValue::Int(0), &AttrValue::Int(10), None)
        .unwrap();
    assert_eq!(pks(&result), ["a"]);
}

#[test]
fn reversed_range_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let db = open_with(dir.path(), l0_options());
    db.create_collection("docs", "id").unwrap();
    embedded(&db, "n", "n", AttrType::Int);
    db.put("docs", &doc("a", 5)).unwrap();
    db.flush().unwrap();
    let error = db
        .range("docs", "n", &AttrValue::Int(9), &AttrValue::Int(1), None)
        .unwrap_err();
    assert!(matches!(error, IndexError::ReversedRange { .. }), "{error}");
    assert!(error.to_string().contains("greater than"), "{error}");
}

#[test]
fn values_of_eight_bytes_and_more_are_found() {
    let dir = tempfile::tempdir().unwrap();
    let db = open_with(dir.path(), l0_options());
    db.create_collection("docs", "id").unwrap();
    embedded(&db, "s", "s", AttrType::String);
    let values: Vec<String> = [1usize, 7, 8, 9, 63, 64, 65, 200, 1023]
        .iter()
        .map(|&len| "v".repeat(len - 1) + "!")
        .collect();
    for (i, value) in values.iter().enumerate() {
        let json = serde_json::json!({"id": format!("d{i}"), "s": value});
        db.put("docs", &serde_json::to_vec(&json).unwrap()).unwrap();
        // Neighbours that share long prefixes, so cut zone maps are exercised.
        let json = serde_json::json!({"id": format!("e{i}"), "s": format!("{value}?")});
        db.put("docs", &serde_json::to_vec(&json).unwrap()).unwrap();
    }
    for flushed in [false, true] {
        if flushed {
            db.flush().unwrap();
        }
        for (i, value) in values.iter().enumerate() {
            let result = db
                .lookup("docs", "s", &AttrValue::String(value.clone()), None)
                .unwrap();
            assert_eq!(pks(&result), [format!("d{i}")], "length {}", value.len());
            let result = db
                .range(
                    "docs",
                    "s",
                    &AttrValue::String(value.clone()),
                    &AttrValue::String(format!("{value}?")),
                    None,
                )
                .unwrap();
            assert_eq!(result.hits.len(), 2, "range at length {}", value.len());
        }
    }
}

/// A collector that claims the embedded index's name and writes malformed bytes.
struct Forger {
    block: Vec<u8>,
    table: Vec<u8>,
}

impl BlockPropertyCollector for Forger {
    fn add(&mut self, _entry: &CollectorEntry<'_>) {}
    fn finish_block(&mut self, _block: &FinishedBlock) -> Vec<u8> {
        self.block.clone()
    }
    fn finish_table(&mut self) -> TableCollectorOutput {
        TableCollectorOutput {
            table_property: self.table.clone(),
            meta_blocks: Vec::new(),
        }
    }
}

struct ForgerFactory {
    block: Vec<u8>,
    table: Vec<u8>,
}

impl BlockPropertyCollectorFactory for ForgerFactory {
    fn name(&self) -> &str {
        COLLECTOR_NAME
    }
    fn create(&self, _context: &TableContext) -> Box<dyn BlockPropertyCollector> {
        Box::new(Forger {
            block: self.block.clone(),
            table: self.table.clone(),
        })
    }
}

#[test]
fn corrupted_property_bytes_are_errors_not_missing_results() {
    // block bytes, table bytes: each case has one malformed part.
    let cases: [(&[u8], &[u8]); 4] = [
        (&[1, 9, 1, 200], &[]),           // a block record cut short
        (&[7, 0, 0], &[]),                // unknown block format version
        (&[1, 9, 1, 5, 0x80], &[]),       // unknown flag
        (&[], &[1, 1, 5, 0x01, 3, 1, 2]), // table zone map cut short (manifest copy)
    ];
    for (case, (block, table)) in cases.iter().enumerate() {
        let dir = tempfile::tempdir().unwrap();
        {
            let db = open_with(dir.path(), l0_options());
            db.create_collection("docs", "id").unwrap();
            embedded(&db, "n", "n", AttrType::Int);
            db.close().unwrap();
        }
        let mut options = l0_options();
        options
            .engine
            .default_tree_options
            .block_property_collectors
            .push(Arc::new(ForgerFactory {
                block: block.to_vec(),
                table: table.to_vec(),
            }));
        let db = open_with(dir.path(), options);
        for i in 0..50 {
            db.put("docs", &doc(&format!("d{i:02}"), i % 3)).unwrap();
        }
        // From the memtable: fine.
        assert_eq!(
            db.lookup("docs", "n", &AttrValue::Int(1), None)
                .unwrap()
                .hits
                .len(),
            17
        );
        db.flush().unwrap();
        for query in 0..2 {
            let result = if query == 0 {
                db.lookup("docs", "n", &AttrValue::Int(1), None)
            } else {
                db.range("docs", "n", &AttrValue::Int(0), &AttrValue::Int(1), Some(5))
            };
            let error = result.expect_err("corrupt property bytes must fail the query");
            let text = error.to_string();
            assert!(
                text.contains("corrupt") && text.contains(".sst"),
                "case {case}: {text}"
            );
        }
    }
}

#[test]
fn corrupted_table_file_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let db = open_with(dir.path(), l0_options());
    db.create_collection("docs", "id").unwrap();
    embedded(&db, "n", "n", AttrType::Int);
    for i in 0..200 {
        db.put("docs", &doc(&format!("d{i:03}"), i % 5)).unwrap();
    }
    db.flush().unwrap();
    db.close().unwrap();
    // Flip a byte in the middle of the data area of every table.
    for entry in std::fs::read_dir(dir.path()).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "sst") {
            let mut bytes = std::fs::read(&path).unwrap();
            let at = bytes.len() / 3;
            bytes[at] ^= 0x55;
            std::fs::write(&path, bytes).unwrap();
        }
    }
    match Database::open(dir.path(), l0_options()) {
        Err(error) => assert!(error.to_string().contains("corrupt"), "{error}"),
        Ok(db) => {
            // A range over every value reads every block.
            let result = db.range("docs", "n", &AttrValue::Int(0), &AttrValue::Int(4), None);
            let error = result.expect_err("a corrupt data block must fail the query");
            assert!(error.to_string().contains("corrupt"), "{error}");
        }
    }
}

#[test]
fn specs_that_make_no_sense_are_rejected() {
    let dir = tempfile::tempdir().unwrap();
    let db = open_with(dir.path(), l0_options());
    db.create_collection("docs", "id").unwrap();
    let spec = || IndexSpec::new("n", "n", AttrType::Int, IndexKind::Embedded);
    for bad in [
        spec().with_maintenance(Maintenance::SyncFull),
        spec().with_read_repair(true),
        spec().with_bloom_bits_per_key(0),
        spec().with_bloom_bits_per_key(100_000),
        IndexSpec::new("c", "n", AttrType::Int, IndexKind::Composite).with_bloom_bits_per_key(5),
    ] {
        let error = db.create_index("docs", bad.clone()).unwrap_err();
        assert!(
            matches!(error, IndexError::InvalidIndexSpec { .. }),
            "{bad:?}: {error}"
        );
    }
    let record = db
        .create_index("docs", spec().with_bloom_bits_per_key(42))
        .unwrap();
    assert_eq!(record.maintenance, Maintenance::SyncInsert);
    assert_eq!(record.tree, None);
    assert_eq!(record.bloom_bits_per_key, Some(42));
    assert_eq!("embedded".parse::<IndexKind>(), Ok(IndexKind::Embedded));
    drop(db);
    let db = open_with(dir.path(), l0_options());
    let info = db.collection("docs").unwrap();
    assert_eq!(info.indexes[0].bloom_bits_per_key, Some(42));
    assert_eq!(info.indexes[0].kind, IndexKind::Embedded);
}

#[test]
fn lookups_read_few_blocks_and_validate_from_memory() {
    let dir = tempfile::tempdir().unwrap();
    let mut options = small_options();
    options.engine.block_cache_bytes = 0;
    let db = open_with(dir.path(), options);
    db.create_collection("docs", "id").unwrap();
    embedded(&db, "n", "n", AttrType::Int);
    embedded(&db, "t", "t", AttrType::Time);
    const DOCS: i64 = 3000;
    for i in 0..DOCS {
        let json = format!(
            r#"{{"id": "d{:05}", "n": {}, "t": {}, "pad": "{}"}}"#,
            i,               // pk order is insertion order (like tweet ids) ...
            (i * 31) % 1000, // ... and n is not correlated with it
            1_000_000 + i,
            "p".repeat(60)
        );
        db.put("docs", json.as_bytes()).unwrap();
    }
    db.compact_all().unwrap();
    let stats = db.engine().stats();
    let blocks_total: u64 = stats
        .trees
        .iter()
        .find(|t| t.name.ends_with(".docs"))
        .unwrap()
        .levels
        .iter()
        .map(|l| l.bytes / 512)
        .sum();
    // Every value has 3 documents; LOOKUP reads about the blocks that hold them.
    let result = db.lookup("docs", "n", &AttrValue::Int(77), None).unwrap();
    assert_eq!(result.hits.len(), 3);
    assert!(
        result.stats.blocks_read <= 8,
        "LOOKUP read {} blocks of ~{blocks_total}",
        result.stats.blocks_read
    );
    // Each candidate is validated once: from memory (GetLite), or by one point read when it
    // is the first key of a block whose predecessor was not read (the layout depends on
    // background compaction timing).
    assert_eq!(
        result.stats.validations + result.stats.lite_validations,
        3,
        "{:?}",
        result.stats
    );
    let absent = db.lookup("docs", "n", &AttrValue::Int(5000), None).unwrap();
    assert_eq!(absent.stats.blocks_read, 0);
    // Time-correlated attribute: a window of 10 documents reads about the blocks holding
    // them, not the whole tree.
    let result = db
        .range(
            "docs",
            "t",
            &AttrValue::Time(1_000_000 + 1000),
            &AttrValue::Time(1_000_000 + 1009),
            Some(5),
        )
        .unwrap();
    assert_eq!(result.hits.len(), 5);
    let seqs: Vec<u64> = result.hits.iter().map(|h| h.seq).collect();
    assert!(seqs.windows(2).all(|w| w[0] > w[1]));
    assert!(
        result.stats.blocks_read <= 4,
        "time RANGE read {} blocks of ~{blocks_total}",
        result.stats.blocks_read
    );
}

/// The Pebble trap inside one table: old versions kept for a snapshot sit in later blocks of
/// the same file than the newest version; the blocks holding newer versions do not match and
/// are skipped, yet the older matching versions must not be returned as current.
#[test]
fn older_versions_behind_skipped_blocks_are_not_returned() {
    let dir = tempfile::tempdir().unwrap();
    let db = open_with(dir.path(), l0_options());
    db.create_collection("docs", "id").unwrap();
    embedded(&db, "n", "n", AttrType::Int);
    let pad = "p".repeat(400); // about one version per 512-byte block
    let put = |pk: &str, n: i64| {
        db.put(
            "docs",
            format!(r#"{{"id": "{pk}", "n": {n}, "pad": "{pad}"}}"#).as_bytes(),
        )
        .unwrap()
    };
    put("a", 100);
    let mut snapshots = Vec::new();
    for n in 1..=5 {
        put("k", n);
        snapshots.push(db.engine().snapshot()); // keeps every version through the flush
    }
    put("z", 100);
    db.flush().unwrap();
    for n in 1..=4 {
        let result = db.lookup("docs", "n", &AttrValue::Int(n), None).unwrap();
        assert!(result.hits.is_empty(), "old version n = {n} returned");
        let result = db
            .range("docs", "n", &AttrValue::Int(n), &AttrValue::Int(n), Some(1))
            .unwrap();
        assert!(
            result.hits.is_empty(),
            "old version n = {n} returned by RANGE"
        );
    }
    let result = db.lookup("docs", "n", &AttrValue::Int(5), None).unwrap();
    assert_eq!(pks(&result), ["k"]);
    let result = db
        .range("docs", "n", &AttrValue::Int(1), &AttrValue::Int(5), None)
        .unwrap();
    assert_eq!(pks(&result), ["k"]);
    drop(snapshots);
}
