//! Results of the index benchmark: one `IndexRow` per measurement (printed as one JSON object
//! by `--json`, the same for every engine), latency percentiles, and the human-readable table.

use super::{BenchError, TreeBytes};
use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// Latencies above this are clamped (an hour-long operation is already a failure).
const LATENCY_NS_MAX: u64 = 3_600 * 1_000_000_000;

/// Latencies of one measurement, recorded in nanoseconds.
#[derive(Debug, Clone)]
pub struct Latencies {
    histogram_ns: Histogram<u64>,
}

/// Percentiles in microseconds (3 significant digits); all zero when nothing was recorded.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Percentiles {
    pub mean_us: f64,
    pub p50_us: f64,
    pub p90_us: f64,
    pub p99_us: f64,
    pub max_us: f64,
}

impl Latencies {
    pub fn new() -> Result<Latencies, BenchError> {
        let histogram_ns = Histogram::new_with_bounds(1, LATENCY_NS_MAX, 3)
            .map_err(|e| BenchError::new(format!("cannot create latency histogram: {e}")))?;
        Ok(Latencies { histogram_ns })
    }

    pub fn record(&mut self, latency: Duration) {
        let latency_ns = u64::try_from(latency.as_nanos()).unwrap_or(u64::MAX);
        self.histogram_ns.saturating_record(latency_ns.max(1));
    }

    pub fn count(&self) -> u64 {
        self.histogram_ns.len()
    }

    pub fn percentiles(&self) -> Percentiles {
        if self.histogram_ns.is_empty() {
            return Percentiles::default();
        }
        let us = |ns: u64| round_to(ns as f64 / 1000.0, 3);
        Percentiles {
            mean_us: round_to(self.histogram_ns.mean() / 1000.0, 3),
            p50_us: us(self.histogram_ns.value_at_quantile(0.50)),
            p90_us: us(self.histogram_ns.value_at_quantile(0.90)),
            p99_us: us(self.histogram_ns.value_at_quantile(0.99)),
            max_us: us(self.histogram_ns.max()),
        }
    }
}

pub use crate::round_to;

/// One measurement. Fields that do not apply are `null` in JSON.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IndexRow {
    /// "sift", "sqlite", "rocksdb", "reference".
    pub engine: String,
    /// static, write-heavy, read-heavy, update-heavy.
    pub workload: String,
    /// "load" (the initial PUTs), "query" (static queries) or "mixed".
    pub phase: String,
    /// PUT, GET, LOOKUP, RANGELOOKUP, UPDATE, or MIXED (all operations of the mixed phase).
    pub op: String,
    /// Queries: the queried attribute's path; writes: every indexed path, `+`-joined.
    pub attribute: Option<String>,
    /// The index kind (as the engine implements it) of `attribute`, `+`-joined for writes.
    pub index_kind: Option<String>,
    pub maintenance: Option<String>,
    /// Top-K of queries: a number, or "all".
    pub top_k: Option<serde_json::Value>,
    /// RANGELOOKUP width: users (user.id) or minutes (created_at).
    pub selectivity: Option<u64>,
    /// 1..=10: the tenth of the phase's operations this row measures; `null` for the whole.
    pub slice: Option<u32>,
    /// Operations measured.
    pub n: u64,
    pub elapsed_s: f64,
    pub ops_per_sec: f64,
    pub mean_us: f64,
    pub p50_us: f64,
    pub p90_us: f64,
    pub p99_us: f64,
    pub max_us: f64,
    /// Queries: average hits (documents returned) per operation; GET: fraction found.
    pub hits_per_op: Option<f64>,
    /// Blocks (pages) read per operation, from cache or disk; `null` when not counted.
    pub blocks_per_op: Option<f64>,
    /// RANGELOOKUP: distinct data blocks holding the returned documents, per operation (over
    /// the first [`super::runner::RESULT_BLOCK_QUERIES`] queries), to compare with
    /// `blocks_per_op`; `null` when the engine cannot tell.
    #[serde(default)]
    pub result_blocks_per_op: Option<f64>,
    /// Bytes the engine wrote to files (logs, flushes, compactions) during the measurement
    /// (whole-phase rows: including the flush and background wait after it).
    pub bytes_written: Option<u64>,
    /// Bytes this process passed to write(2) meanwhile: the same measure for every engine.
    pub process_write_bytes: Option<u64>,
    /// Whole-phase write rows: total bytes on disk after the flush, and per tree.
    pub bytes_on_disk: Option<u64>,
    pub bytes_on_disk_per_tree: Option<TreeBytes>,
    /// Whole-phase write rows: time of the flush and background-work wait after the phase.
    pub background_wait_s: Option<f64>,
    /// Documents loaded before the queries (`--n`).
    pub tweets: u64,
    pub seed: u64,
    pub cache_bytes: u64,
    /// Engine settings worth knowing when reading the numbers.
    pub settings: String,
    /// CPUs the engine's background threads and the client thread were pinned to
    /// (`--background-cpus`, `--client-cpus`; `null`: not pinned).
    #[serde(default)]
    pub background_cpus: Option<Vec<usize>>,
    #[serde(default)]
    pub client_cpus: Option<Vec<usize>>,
}

/// `Some(10)` as 10, `None` (no limit) as "all".
pub fn top_k_value(top_k: Option<usize>) -> serde_json::Value {
    top_k.map_or_else(|| serde_json::Value::from("all"), serde_json::Value::from)
}

/// Header of the human-readable table. "bytes written" is the engine's count, or with a `w`
/// suffix the bytes the process passed to write(2) when the engine keeps no count.
pub fn table_header() -> String {
    format!(
        "{:<6} {:<12} {:<18} {:>5} {:>5} {:>5} {:>9} {:>12} {:>10} {:>10} {:>10} {:>9} {:>10} {:>11} {:>14}",
        "phase",
        "op",
        "attribute",
        "top-K",
        "sel",
        "slice",
        "n",
        "ops/s",
        "p50 us",
        "p90 us",
        "p99 us",
        "hits/op",
        "blocks/op",
        "res.blk/op",
        "bytes written"
    )
}

/// One row of the human-readable table.
pub fn table_row(row: &IndexRow) -> String {
    let text = |value: Option<String>| value.unwrap_or_else(|| "-".to_owned());
    let top_k = row.top_k.as_ref().map(|value| match value {
        serde_json::Value::String(text) => text.clone(),
        other => other.to_string(),
    });
    let mut line = format!(
        "{:<6} {:<12} {:<18} {:>5} {:>5} {:>5} {:>9} {:>12.0} {:>10.2} {:>10.2} {:>10.2} {:>9} {:>10} {:>11} {:>14}",
        row.phase,
        row.op,
        text(row.attribute.clone()),
        text(top_k),
        text(row.selectivity.map(|s| s.to_string())),
        text(row.slice.map(|s| s.to_string())),
        row.n,
        row.ops_per_sec,
        row.p50_us,
        row.p90_us,
        row.p99_us,
        text(row.hits_per_op.map(|h| format!("{h:.2}"))),
        text(row.blocks_per_op.map(|b| format!("{b:.2}"))),
        text(row.result_blocks_per_op.map(|b| format!("{b:.2}"))),
        // Engines without a counter: what the process passed to write(2), marked `w`.
        text(
            row.bytes_written
                .map(|b| b.to_string())
                .or_else(|| row.process_write_bytes.map(|b| format!("{b}w")))
        ),
    );
    if let Some(trees) = &row.bytes_on_disk_per_tree {
        let trees: Vec<String> = trees
            .iter()
            .map(|(name, bytes)| format!("{name} {bytes}"))
            .collect();
        line = format!(
            "{line}\n       on disk {} bytes ({}); flush and background wait {:.2} s",
            row.bytes_on_disk.unwrap_or(0),
            trees.join(", "),
            row.background_wait_s.unwrap_or(0.0)
        );
    }
    line
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_of_known_latencies() {
        let mut latencies = Latencies::new().unwrap();
        for us in 1..=1000_u64 {
            latencies.record(Duration::from_micros(us));
        }
        let percentiles = latencies.percentiles();
        assert_eq!(latencies.count(), 1000);
        for (actual, expected) in [
            (percentiles.p50_us, 500.0),
            (percentiles.p90_us, 900.0),
            (percentiles.p99_us, 990.0),
            (percentiles.max_us, 1000.0),
            (percentiles.mean_us, 500.5),
        ] {
            assert!(
                (actual - expected).abs() <= expected * 0.002,
                "{actual} vs {expected}"
            );
        }
        assert_eq!(
            Latencies::new().unwrap().percentiles(),
            Percentiles::default()
        );
    }

    #[test]
    fn table_rows_line_up_with_the_header() {
        let row = IndexRow {
            engine: "sqlite".into(),
            workload: "static".into(),
            phase: "query".into(),
            op: "LOOKUP".into(),
            attribute: Some("user.id".into()),
            index_kind: Some("composite".into()),
            maintenance: Some("sync-full".into()),
            top_k: Some(top_k_value(None)),
            selectivity: None,
            slice: None,
            n: 20,
            elapsed_s: 0.1,
            ops_per_sec: 200.0,
            mean_us: 1.0,
            p50_us: 1.5,
            p90_us: 2.0,
            p99_us: 3.0,
            max_us: 4.0,
            hits_per_op: Some(3.5),
            blocks_per_op: None,
            result_blocks_per_op: Some(4.5),
            bytes_written: None,
            process_write_bytes: Some(77),
            bytes_on_disk: None,
            bytes_on_disk_per_tree: None,
            background_wait_s: None,
            tweets: 100,
            seed: 1,
            cache_bytes: 1,
            settings: String::new(),
            background_cpus: None,
            client_cpus: None,
        };
        let line = table_row(&row);
        assert_eq!(line.len(), table_header().len(), "{line}");
        assert!(line.contains(" all "), "{line}");
        assert!(line.ends_with(" 77w"), "{line}");
        assert!(line.contains(" 3.50 "), "{line}");
        assert!(line.contains(" 4.50 "), "{line}");
    }

    #[test]
    fn top_k_labels() {
        assert_eq!(top_k_value(Some(10)), serde_json::json!(10));
        assert_eq!(top_k_value(None), serde_json::json!("all"));
    }
}
