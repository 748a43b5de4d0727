//! Results: per-operation latency histograms (recorded in nanoseconds, reported in
//! microseconds), the `Row` every engine prints (one JSON object per operation), and the
//! human-readable table.

use super::BenchError;
use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// Latencies above this are clamped (an operation stalled for an hour is already a failure).
const LATENCY_NS_MAX: u64 = 3_600 * 1_000_000_000;
const SIGNIFICANT_DIGITS: u8 = 3;

/// Operation latencies of one thread or, merged, of one operation.
#[derive(Debug, Clone)]
pub struct LatencyHistogram {
    histogram_ns: Histogram<u64>,
}

impl LatencyHistogram {
    pub fn new() -> Result<LatencyHistogram, BenchError> {
        let histogram_ns = Histogram::new_with_bounds(1, LATENCY_NS_MAX, SIGNIFICANT_DIGITS)
            .map_err(|e| BenchError::new(format!("cannot create latency histogram: {e}")))?;
        Ok(LatencyHistogram { histogram_ns })
    }

    pub fn record(&mut self, latency: Duration) {
        self.record_ns(u64::try_from(latency.as_nanos()).unwrap_or(u64::MAX));
    }

    pub fn record_ns(&mut self, latency_ns: u64) {
        // Clamps into [1, max]: a 0 ns reading (coarse clock) counts as the smallest value.
        self.histogram_ns.saturating_record(latency_ns.max(1));
    }

    pub fn merge(&mut self, other: &LatencyHistogram) -> Result<(), BenchError> {
        self.histogram_ns
            .add(&other.histogram_ns)
            .map_err(|e| BenchError::new(format!("cannot merge latency histograms: {e}")))
    }

    pub fn count(&self) -> u64 {
        self.histogram_ns.len()
    }

    pub fn summary(&self) -> LatencySummary {
        if self.histogram_ns.is_empty() {
            return LatencySummary::default();
        }
        let us = |ns: u64| round_to(ns as f64 / 1000.0, 3);
        LatencySummary {
            count: self.histogram_ns.len(),
            mean_us: round_to(self.histogram_ns.mean() / 1000.0, 3),
            p50_us: us(self.histogram_ns.value_at_quantile(0.50)),
            p99_us: us(self.histogram_ns.value_at_quantile(0.99)),
            p999_us: us(self.histogram_ns.value_at_quantile(0.999)),
            max_us: us(self.histogram_ns.max()),
        }
    }
}

/// Percentiles of one operation, in microseconds (hdrhistogram precision: 3 significant
/// digits). All zero when nothing was recorded.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct LatencySummary {
    pub count: u64,
    pub mean_us: f64,
    pub p50_us: f64,
    pub p99_us: f64,
    pub p999_us: f64,
    pub max_us: f64,
}

pub use crate::round_to;

/// One operation's result: printed as one JSON line by `--json`, the same for every engine.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Row {
    /// "sift", "rocksdb" or "leveldb".
    pub engine: String,
    pub op: String,
    /// Operations done (for readseq: entries read).
    pub n: u64,
    pub threads: usize,
    pub key_bytes: usize,
    pub value_bytes: usize,
    pub compression: String,
    pub cache_bytes: u64,
    pub sync: bool,
    pub seed: u64,
    /// Wall time of the operation itself, without the background-work wait after it.
    pub elapsed_s: f64,
    pub ops_per_sec: f64,
    /// Key and value bytes written or read (reads count found entries only), in MiB/s.
    pub mb_per_sec: f64,
    /// Per-operation latency; for readseq, per entry (time between consecutive entries).
    pub mean_us: f64,
    pub p50_us: f64,
    pub p99_us: f64,
    pub p999_us: f64,
    pub max_us: f64,
    /// Reads that found their key (gets) or an entry (seeks); absent for writes.
    pub found: Option<u64>,
    /// Bytes the engine wrote to files (WAL, flushes, compactions) during the operation and
    /// the background-work wait after it; `None` when the engine does not count them.
    pub bytes_written: Option<u64>,
    /// Blocks the engine read (from cache or disk); `None` when the engine does not count them.
    pub blocks_read: Option<u64>,
    /// Bytes this process passed to write(2) meanwhile (`wchar` of /proc/self/io): the same
    /// measure for every engine, including ones without counters.
    pub process_write_bytes: Option<u64>,
    /// Time spent waiting for flushes and compactions after a write operation.
    pub background_wait_s: f64,
    /// CPUs the engine's background threads and the client threads were pinned to
    /// (`--background-cpus`, `--client-cpus`; `null`: not pinned).
    #[serde(default)]
    pub background_cpus: Option<Vec<usize>>,
    #[serde(default)]
    pub client_cpus: Option<Vec<usize>>,
}

/// Header of the human-readable table.
pub fn table_header() -> String {
    format!(
        "{:<12} {:>12} {:>9} {:>10} {:>10} {:>10} {:>12} {:>14} {:>9}",
        "op",
        "ops/s",
        "MB/s",
        "p50 us",
        "p99 us",
        "found",
        "blocks read",
        "bytes written",
        "elapsed s"
    )
}

/// One row of the human-readable table.
pub fn table_row(row: &Row) -> String {
    let optional = |value: Option<u64>| value.map_or_else(|| "-".to_owned(), |v| v.to_string());
    format!(
        "{:<12} {:>12.0} {:>9.1} {:>10.2} {:>10.2} {:>10} {:>12} {:>14} {:>9.2}",
        row.op,
        row.ops_per_sec,
        row.mb_per_sec,
        row.p50_us,
        row.p99_us,
        optional(row.found),
        optional(row.blocks_read),
        optional(row.bytes_written),
        row.elapsed_s
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn assert_close(actual: f64, expected: f64, relative: f64) {
        assert!(
            (actual - expected).abs() <= expected.abs() * relative,
            "{actual} is not within {relative} of {expected}"
        );
    }

    #[test]
    fn percentiles_of_known_latencies() {
        let mut histogram = LatencyHistogram::new().unwrap();
        // 1..=1000 microseconds, once each.
        for us in 1..=1000_u64 {
            histogram.record(Duration::from_micros(us));
        }
        let summary = histogram.summary();
        assert_eq!(summary.count, 1000);
        assert_close(summary.p50_us, 500.0, 0.002);
        assert_close(summary.p99_us, 990.0, 0.002);
        assert_close(summary.p999_us, 999.0, 0.002);
        assert_close(summary.max_us, 1000.0, 0.002);
        assert_close(summary.mean_us, 500.5, 0.002);
    }

    #[test]
    fn percentiles_of_a_skewed_distribution_and_sub_microsecond_values() {
        let mut histogram = LatencyHistogram::new().unwrap();
        for _ in 0..990 {
            histogram.record_ns(250);
        }
        for _ in 0..10 {
            histogram.record_ns(2_000_000);
        }
        let summary = histogram.summary();
        assert_close(summary.p50_us, 0.25, 0.01);
        // The 99th percentile is still the fast value; 99.9th is the slow one.
        assert_close(summary.p99_us, 0.25, 0.01);
        assert_close(summary.p999_us, 2000.0, 0.002);
        // A zero reading is kept as the smallest value, not dropped.
        histogram.record_ns(0);
        assert_eq!(histogram.count(), 1001);
    }

    #[test]
    fn merging_thread_histograms_adds_counts() {
        let mut first = LatencyHistogram::new().unwrap();
        let mut second = LatencyHistogram::new().unwrap();
        for _ in 0..100 {
            first.record_ns(1_000);
            second.record_ns(3_000);
        }
        first.merge(&second).unwrap();
        let summary = first.summary();
        assert_eq!(summary.count, 200);
        assert_close(summary.p50_us, 1.0, 0.01);
        assert_close(summary.p99_us, 3.0, 0.01);
        assert_close(summary.mean_us, 2.0, 0.01);
    }

    #[test]
    fn empty_histogram_summarizes_to_zero() {
        let summary = LatencyHistogram::new().unwrap().summary();
        assert_eq!(summary, LatencySummary::default());
        assert!(LatencyHistogram::new().unwrap().count() == 0);
    }

    #[test]
    fn clamps_huge_latencies() {
        let mut histogram = LatencyHistogram::new().unwrap();
        histogram.record(Duration::from_secs(36_001));
        assert_eq!(histogram.count(), 1);
        assert!(histogram.summary().max_us <= 3_600.0 * 1e6 * 1.001);
    }

    fn sample_row() -> Row {
        Row {
            engine: "sift".into(),
            op: "readrandom".into(),
            n: 1000,
            threads: 2,
            key_bytes: 16,
            value_bytes: 100,
            compression: "none".into(),
            cache_bytes: 32 << 20,
            sync: false,
            seed: 301,
            elapsed_s: 0.5,
            ops_per_sec: 2000.0,
            mb_per_sec: 0.2,
            mean_us: 1.5,
            p50_us: 1.25,
            p99_us: 9.5,
            p999_us: 12.0,
            max_us: 20.0,
            found: Some(632),
            bytes_written: Some(0),
            blocks_read: None,
            process_write_bytes: Some(10),
            background_wait_s: 0.0,
            background_cpus: None,
            client_cpus: Some(vec![0]),
        }
    }

    #[test]
    fn row_json_has_the_agreed_fields_and_round_trips() {
        let row = sample_row();
        let json = serde_json::to_string(&row).unwrap();
        let value: serde_json::Value = serde_json::from_str(&json).unwrap();
        for field in [
            "op",
            "n",
            "ops_per_sec",
            "p50_us",
            "p99_us",
            "bytes_written",
            "blocks_read",
            "threads",
            "key_bytes",
            "value_bytes",
            "compression",
            "cache_bytes",
            "elapsed_s",
            "engine",
            "background_cpus",
            "client_cpus",
        ] {
            assert!(value.get(field).is_some(), "missing {field} in {json}");
        }
        assert!(value["background_cpus"].is_null());
        assert_eq!(value["client_cpus"], serde_json::json!([0]));
        assert_eq!(value["engine"], "sift");
        assert!(value["blocks_read"].is_null());
        assert_eq!(value["found"], 632);
        let back: Row = serde_json::from_str(&json).unwrap();
        assert_eq!(back, row);
    }

    #[test]
    fn table_rows_line_up_with_the_header() {
        let row = sample_row();
        let line = table_row(&row);
        assert_eq!(line.len(), table_header().len());
        assert!(line.starts_with("readrandom"));
        assert!(line.contains(" 2000 "));
        assert!(line.contains(" 632 "));
        assert!(
            line.contains(" - "),
            "missing blocks_read shows as a dash: {line}"
        );
        assert!(line.contains("1.25"));
        assert!((round_to(1.23456, 3) - 1.235).abs() < 1e-12);
    }
}
