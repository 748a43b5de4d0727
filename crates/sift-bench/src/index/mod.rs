//! The secondary-index benchmark (`sift bench index`, `sift-peer index`): the `IndexEngine`
//! trait a document store with secondary indexes implements (Sift's collections, SQLite with
//! JSON expression indexes and RocksDB with an application-maintained composite index in
//! `crates/sift-peers`), index specifications, the attribute values the benchmark queries, and
//! the runner (`runner`) that loads synthetic tweets (`sift_workload`) and runs the static or
//! mixed workloads of LevelDB++ (SIGMOD'18, Table 7) against an engine.
//!
//! Query semantics every engine must follow, so answers are comparable and checkable
//! (`verify` compares an engine with the brute-force `reference::ReferenceEngine`):
//! * A PUT of an existing `tweet_id` replaces the document; the new version is the newest.
//! * LOOKUP(A, a, K) returns the documents whose current version has `A == a`, newest first
//!   (by the order in which their current versions were written), at most K (`None`: all).
//!   RANGELOOKUP(A, lo, hi, K) the same for `lo <= A <= hi`. No stale or duplicate hit.
//! * Each hit's document is read (its bytes materialized), as a user's query would.

pub mod args;
pub mod reference;
pub mod report;
pub mod runner;
pub mod time;
pub mod verify;

pub use crate::kv::{BenchError, EngineCounters};

pub use args::{run_from_args, IndexBenchArgs};
pub use report::IndexRow;
pub use runner::{run_index_benchmark, IndexBenchConfig, TopK};
pub use sift_workload::{Attribute, Workload};

use std::collections::BTreeMap;
use std::fmt;
use std::path::Path;

/// One secondary index the benchmark asks for: `path:kind[:maintenance]` on the command line.
/// The path names one of the workload's attributes, which fixes the value type (`user.id`:
/// `int`, `created_at`: `time`). Kind and maintenance are labels the engine interprets (Sift:
/// `eager|lazy|composite|memory|sst-local|next`, `sync-full|sync-insert`); peers have one way to index and
/// report it through [`IndexEngine::index_labels`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IndexSpec {
    pub attribute: Attribute,
    pub kind: String,
    /// `None`: the engine's default for the kind.
    pub maintenance: Option<String>,
}

impl IndexSpec {
    /// The attribute's path in the documents (`user.id`, `created_at`).
    pub fn path(&self) -> &'static str {
        self.attribute.path()
    }

    /// The index type declared for the attribute (`int`, `time`).
    pub fn value_type(&self) -> &'static str {
        self.attribute.index_type()
    }

    /// Parses `path:kind[:maintenance]`.
    pub fn parse(text: &str) -> Result<IndexSpec, BenchError> {
        let mut parts = text.split(':');
        let path = parts.next().unwrap_or_default();
        let attribute = attribute_of_path(path)?;
        let kind = parts.next().unwrap_or_default();
        if kind.is_empty() {
            return Err(BenchError::new(format!(
                "index {text:?}: expected path:kind[:maintenance], for example user.id:lazy"
            )));
        }
        let maintenance = parts.next().map(str::to_owned);
        if maintenance.as_deref() == Some("") || parts.next().is_some() {
            return Err(BenchError::new(format!(
                "index {text:?}: expected path:kind[:maintenance], for example \
                 user.id:composite:sync-full"
            )));
        }
        Ok(IndexSpec {
            attribute,
            kind: kind.to_owned(),
            maintenance,
        })
    }
}

impl fmt::Display for IndexSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.path(), self.kind)?;
        if let Some(maintenance) = &self.maintenance {
            write!(f, ":{maintenance}")?;
        }
        Ok(())
    }
}

/// The workload attribute at `path` (`user.id` or `/user/id`, `created_at`).
pub fn attribute_of_path(path: &str) -> Result<Attribute, BenchError> {
    let normalized = path.trim_start_matches('/').replace('/', ".");
    Attribute::ALL
        .into_iter()
        .find(|attribute| attribute.path() == normalized)
        .ok_or_else(|| {
            BenchError::new(format!(
                "index path {path:?}: the tweet workload queries only user.id (int) and \
                 created_at (time)"
            ))
        })
}

/// The value of `attribute` in a parsed document, as the benchmark compares it: the integer
/// for `user.id`, epoch milliseconds for `created_at` (RFC 3339 text or an integer of epoch
/// milliseconds). `None` when absent or of another type (such a document is not indexed).
pub fn attribute_value(document: &serde_json::Value, attribute: Attribute) -> Option<i64> {
    let mut value = document;
    for segment in attribute.path().split('.') {
        value = value.get(segment)?;
    }
    match attribute {
        Attribute::UserId => value.as_i64(),
        Attribute::CreationTime => match value {
            serde_json::Value::String(text) => time::parse_rfc3339_ms(text),
            other => other.as_i64(),
        },
    }
}

/// Parses a δ of the value-aware split (NEXT §4): a finite number `>= 0`, or `none` (no
/// split).
pub fn parse_split_delta(text: &str) -> Result<Option<f64>, BenchError> {
    if text == "none" {
        return Ok(None);
    }
    text.parse::<f64>()
        .ok()
        .filter(|delta| delta.is_finite() && *delta >= 0.0)
        .map(Some)
        .ok_or_else(|| {
            BenchError::new(format!(
                "split delta {text:?}: expected a number >= 0 or none"
            ))
        })
}

/// Bytes on disk per tree (data, each index, logs; a peer may report one total), by name.
pub type TreeBytes = BTreeMap<String, u64>;

/// Table files per level, level 0 first, per tree name.
pub type LevelShape = BTreeMap<String, Vec<usize>>;

/// A document store with secondary indexes under benchmark. Used from one thread at a time:
/// opened on one, driven from a client thread of its own (`run_from_args`), closed on the
/// first.
///
/// Values in queries are `i64`: the integer for `int` attributes, epoch milliseconds for
/// `time` attributes. Ranges are inclusive. `hit_ids`, when given, receives the `tweet_id` of
/// each hit in answer order (newest first); the benchmark passes it only to check answers.
pub trait IndexEngine: Send {
    /// "sift", "sqlite", "rocksdb", "reference".
    fn name(&self) -> &str;

    /// The (kind, maintenance) of the index on `attribute` as this engine implements it, or
    /// `None` when the attribute has no index (its queries are skipped).
    fn index_labels(&self, attribute: Attribute) -> Option<(String, String)>;

    /// Settings that matter for reading the numbers (journal mode, sync, cache), for the
    /// report; empty when there is nothing to say.
    fn settings_note(&self) -> String {
        String::new()
    }

    /// Stores (or replaces) the document `json` under `tweet_id`, maintaining every index in
    /// the same atomic write.
    fn put(&self, tweet_id: u64, json: &str) -> Result<(), BenchError>;

    /// The document under `tweet_id`: its length in bytes, `None` when absent.
    fn get(&self, tweet_id: u64) -> Result<Option<usize>, BenchError>;

    /// LOOKUP(attribute, value, top_k): returns the number of hits.
    fn lookup(
        &self,
        attribute: Attribute,
        value: i64,
        top_k: Option<usize>,
        hit_ids: Option<&mut Vec<u64>>,
    ) -> Result<u64, BenchError>;

    /// RANGELOOKUP(attribute, lo, hi, top_k) over `lo..=hi`: returns the number of hits.
    fn range_lookup(
        &self,
        attribute: Attribute,
        lo: i64,
        hi: i64,
        top_k: Option<usize>,
        hit_ids: Option<&mut Vec<u64>>,
    ) -> Result<u64, BenchError>;

    /// The number of distinct data blocks holding the documents that RANGELOOKUP(attribute,
    /// lo, hi, top_k) returns (their live versions): what a perfect index would read. `None`
    /// where the engine cannot tell. Not timed: the benchmark asks after a measurement.
    fn result_blocks(
        &self,
        _attribute: Attribute,
        _lo: i64,
        _hi: i64,
        _top_k: Option<usize>,
    ) -> Result<Option<u64>, BenchError> {
        Ok(None)
    }

    /// Makes everything written so far durable in the engine's table files (memtables
    /// flushed, write-ahead log checkpointed) and waits for it.
    fn flush(&self) -> Result<(), BenchError>;

    /// Blocks until no background flush or compaction is pending or running.
    fn wait_for_background_work(&self) -> Result<(), BenchError>;

    /// Compacts every tree fully and waits for it (`--compact`). Engines that cannot
    /// return an error.
    fn compact_all(&self) -> Result<(), BenchError> {
        Err(BenchError::new(format!(
            "{}: --compact is not supported",
            self.name()
        )))
    }

    /// Bytes written to files and blocks (pages) read so far; `None` where not counted.
    fn counters(&self) -> EngineCounters;

    /// Bytes on disk per tree.
    fn disk_bytes_per_tree(&self) -> Result<TreeBytes, BenchError>;

    /// Table files per level (level 0 first) per tree: the shape of an LSM-tree the queries
    /// met. Empty where the engine does not tell.
    fn files_per_level(&self) -> Result<LevelShape, BenchError> {
        Ok(LevelShape::new())
    }

    /// Closes the store, releasing its directory.
    fn close(self: Box<Self>) -> Result<(), BenchError>;

    /// Closes the store and opens it again from its files (`--reopen`): the reopened engine
    /// and what the open cost. Engines that cannot tell return an error.
    fn reopen(self: Box<Self>) -> Result<(Box<dyn IndexEngine>, ReopenReport), BenchError> {
        Err(BenchError::new(format!(
            "{}: --reopen is not supported",
            self.name()
        )))
    }
}

/// What reopening a loaded store cost (`--reopen`; one JSON object with `--json`).
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ReopenReport {
    /// Always "reopen".
    pub phase: String,
    pub engine: String,
    /// Documents loaded before the reopen.
    pub tweets: u64,
    /// Wall time of the open call.
    pub open_s: f64,
    /// Parts of it the engine reports: its storage recovery, opening its indexes, and of the
    /// latter rebuilding in-memory global indexes (Sift `next`: from the SSTables'
    /// secondary-block directories).
    pub engine_open_s: Option<f64>,
    pub indexes_open_s: Option<f64>,
    pub global_index_rebuild_s: Option<f64>,
    /// Over every global index after the open: live files indexed, secondary blocks listed,
    /// and memory held.
    pub global_index_files: Option<u64>,
    pub global_index_blocks: Option<u64>,
    pub global_index_memory_bytes: Option<u64>,
    /// Bytes of the store on disk (all trees).
    pub bytes_on_disk: Option<u64>,
}

impl ReopenReport {
    /// One human-readable line.
    pub fn line(&self) -> String {
        let seconds =
            |value: Option<f64>| value.map_or_else(|| "-".to_owned(), |s| format!("{s:.3} s"));
        let count = |value: Option<u64>| value.map_or_else(|| "-".to_owned(), |n| n.to_string());
        format!(
            "reopen after loading {} documents: open {:.3} s (engine {}, indexes {}, of which \
             global-index rebuild {}); global indexes: {} files, {} blocks, {} bytes of memory; \
             on disk {} bytes",
            self.tweets,
            self.open_s,
            seconds(self.engine_open_s),
            seconds(self.indexes_open_s),
            seconds(self.global_index_rebuild_s),
            count(self.global_index_files),
            count(self.global_index_blocks),
            count(self.global_index_memory_bytes),
            count(self.bytes_on_disk),
        )
    }
}

/// Opens (creating) an engine in an empty directory with the benchmark's indexes.
pub type IndexEngineOpener<'a> =
    dyn FnMut(&IndexBenchConfig, &Path) -> Result<Box<dyn IndexEngine>, BenchError> + 'a;

/// Total bytes of the files directly in `dir` whose name satisfies `include` (for engines
/// that report sizes by file).
pub fn directory_bytes(dir: &Path, include: &dyn Fn(&str) -> bool) -> Result<u64, BenchError> {
    let entries = std::fs::read_dir(dir)
        .map_err(|e| BenchError::new(format!("cannot list {}: {e}", dir.display())))?;
    let mut total = 0;
    for entry in entries {
        let entry =
            entry.map_err(|e| BenchError::new(format!("cannot list {}: {e}", dir.display())))?;
        let name = entry.file_name();
        if !include(&name.to_string_lossy()) {
            continue;
        }
        let metadata = entry
            .metadata()
            .map_err(|e| BenchError::new(format!("cannot stat {}: {e}", entry.path().display())))?;
        if metadata.is_file() {
            total += metadata.len();
        }
    }
    Ok(total)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_index_specs() {
        let spec = IndexSpec::parse("user.id:lazy").unwrap();
        assert_eq!(spec.attribute, Attribute::UserId);
        assert_eq!(spec.kind, "lazy");
        assert_eq!(spec.maintenance, None);
        assert_eq!(spec.value_type(), "int");
        let spec = IndexSpec::parse("/created_at:composite:sync-full").unwrap();
        assert_eq!(spec.attribute, Attribute::CreationTime);
        assert_eq!(spec.maintenance.as_deref(), Some("sync-full"));
        assert_eq!(spec.to_string(), "created_at:composite:sync-full");
        assert_eq!(spec.value_type(), "time");
        for bad in [
            "",
            "user.id",
            "user.id:",
            "text:lazy",
            "user.id:lazy:",
            "user.id:a:b:c",
        ] {
            assert!(IndexSpec::parse(bad).is_err(), "{bad:?} accepted");
        }
        assert!(IndexSpec::parse("retweet_count:lazy")
            .unwrap_err()
            .message()
            .contains("user.id"));
    }

    #[test]
    fn extracts_attribute_values() {
        let document: serde_json::Value = serde_json::from_str(
            r#"{"tweet_id":7,"created_at":"2017-10-01T00:00:05Z","user":{"id":-12}}"#,
        )
        .unwrap();
        assert_eq!(attribute_value(&document, Attribute::UserId), Some(-12));
        assert_eq!(
            attribute_value(&document, Attribute::CreationTime),
            Some(1_506_816_005_000)
        );
        let numeric: serde_json::Value =
            serde_json::from_str(r#"{"created_at":15,"user":{"id":"x"}}"#).unwrap();
        assert_eq!(attribute_value(&numeric, Attribute::CreationTime), Some(15));
        assert_eq!(attribute_value(&numeric, Attribute::UserId), None);
        assert_eq!(
            attribute_value(&serde_json::json!({}), Attribute::UserId),
            None
        );
    }
}
