//! Shared helpers for the index-layer integration tests.
#![allow(dead_code, clippy::expect_used, clippy::unwrap_used, clippy::panic)]

use rand::Rng;
use sift_index::{Database, DatabaseOptions, IndexKind, Maintenance};
use std::path::Path;

/// Small engine settings so that flushes and compactions happen after a few hundred writes.
pub fn small_options() -> DatabaseOptions {
    let mut options = DatabaseOptions::default();
    options.engine.memtable_bytes_max = 16 << 10;
    options.engine.table_file_bytes_target = 16 << 10;
    options.engine.level1_bytes_max = 64 << 10;
    options.engine.level_size_ratio = 4;
    options.engine.l0_compaction_trigger = 3;
    options.engine.block_bytes = 512;
    options.engine.block_cache_bytes = 64 << 10;
    options
}

pub fn open(path: &Path) -> Database {
    Database::open(path, small_options()).unwrap()
}

/// Every kind × maintenance combination under test, with a short name.
pub const CONFIGS: [(&str, IndexKind, Maintenance, bool); 6] = [
    (
        "composite_insert",
        IndexKind::Composite,
        Maintenance::SyncInsert,
        false,
    ),
    (
        "composite_repair",
        IndexKind::Composite,
        Maintenance::SyncInsert,
        true,
    ),
    (
        "composite_full",
        IndexKind::Composite,
        Maintenance::SyncFull,
        false,
    ),
    ("eager_full", IndexKind::Eager, Maintenance::SyncFull, false),
    (
        "lazy_insert",
        IndexKind::Lazy,
        Maintenance::SyncInsert,
        false,
    ),
    ("memory", IndexKind::Memory, Maintenance::SyncFull, false),
];

pub const STRINGS: [&str; 6] = ["a", "ab", "b", "b\u{0}", "", "zz"];

/// Prints the seed if the test panics.
pub struct SeedGuard(pub u64);

impl Drop for SeedGuard {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("test failed with SIFT_SEED={}", self.0);
        }
    }
}

pub fn seed() -> u64 {
    std::env::var("SIFT_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| rand::thread_rng().gen())
}

pub fn steps(default: usize) -> usize {
    std::env::var("SIFT_MODEL_STEPS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

/// A document version in a model test: the sequence number the database gave it and its JSON.
pub trait ModelVersion {
    fn seq(&self) -> u64;
    fn doc(&self) -> &[u8];
}

/// Implements [`ModelVersion`] for a model document type with fields `seq: u64` and
/// `doc: Vec<u8>`, the shape every model test uses.
#[allow(unused_macros)] // Not every test binary that includes this module has a model.
macro_rules! impl_model_version {
    ($document:ty) => {
        impl common::ModelVersion for $document {
            fn seq(&self) -> u64 {
                self.seq
            }
            fn doc(&self) -> &[u8] {
                &self.doc
            }
        }
    };
}
#[allow(unused_imports)]
pub(crate) use impl_model_version;

/// Brute force over a model: the documents that `matches`, newest first, at most `limit`, as
/// `(pk, seq, doc)` — what every query must return.
pub fn newest_first<D: ModelVersion>(
    model: &std::collections::BTreeMap<Vec<u8>, D>,
    matches: impl Fn(&D) -> bool,
    limit: Option<usize>,
) -> Vec<(Vec<u8>, u64, Vec<u8>)> {
    let mut hits: Vec<(Vec<u8>, u64, Vec<u8>)> = model
        .iter()
        .filter(|(_, doc)| matches(doc))
        .map(|(pk, doc)| (pk.clone(), doc.seq(), doc.doc().to_vec()))
        .collect();
    hits.sort_by_key(|hit| std::cmp::Reverse(hit.1));
    hits.truncate(limit.unwrap_or(usize::MAX));
    hits
}

/// A random entry of a model (cloned), or `None` if it is empty.
pub fn random_entry<D: Clone>(
    model: &std::collections::BTreeMap<Vec<u8>, D>,
    rng: &mut impl Rng,
) -> Option<(Vec<u8>, D)> {
    model
        .iter()
        .nth(rng.gen_range(0..model.len().max(1)))
        .map(|(pk, doc)| (pk.clone(), doc.clone()))
}

/// Query hits as `(pk, seq, doc)`, the shape [`newest_first`] returns.
pub fn hit_tuples(hits: &[sift_index::Hit]) -> Vec<(Vec<u8>, u64, Vec<u8>)> {
    hits.iter()
        .map(|hit| (hit.pk.clone(), hit.seq, hit.doc.clone()))
        .collect()
}

/// `pk@seq` of each hit, for failure messages.
pub fn show_hits(hits: &[(Vec<u8>, u64, Vec<u8>)]) -> Vec<String> {
    hits.iter()
        .map(|(pk, seq, _)| format!("{}@{seq}", String::from_utf8_lossy(pk)))
        .collect()
}

/// Asserts that query hits are exactly `want` (as [`newest_first`] gives it), naming `what`
/// and showing `pk@seq` of both sides on failure.
pub fn compare(got: &[sift_index::Hit], want: &[(Vec<u8>, u64, Vec<u8>)], what: &str) {
    let got = hit_tuples(got);
    assert!(
        got == want,
        "{what}: got {:?}, want {:?}",
        show_hits(&got),
        show_hits(want)
    );
}
