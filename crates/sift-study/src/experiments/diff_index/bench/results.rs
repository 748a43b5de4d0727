//! What a run measured, per scheme: saturation, load steps, the half-load targets, reads; the
//! report they make (also its JSON).

use super::args::RateBasis;
use serde::Serialize;
use sift_bench::noise::hiccup::Hiccups;
use sift_bench::noise::other_cpu::OtherCpu;

/// A latency distribution, microseconds (exact percentiles, nearest rank).
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize)]
pub struct Latency {
    pub count: u64,
    pub mean_us: f64,
    pub p5_us: f64,
    pub p25_us: f64,
    pub p50_us: f64,
    pub p75_us: f64,
    pub p90_us: f64,
    pub p95_us: f64,
    pub p99_us: f64,
    pub max_us: f64,
}

impl Latency {
    pub fn of(values_us: &mut [f64]) -> Latency {
        if values_us.is_empty() {
            return Latency::default();
        }
        values_us.sort_by(f64::total_cmp);
        let at = |quantile: f64| {
            let rank = (quantile * values_us.len() as f64).ceil() as usize;
            values_us[rank.clamp(1, values_us.len()) - 1]
        };
        Latency {
            count: values_us.len() as u64,
            mean_us: values_us.iter().sum::<f64>() / values_us.len() as f64,
            p5_us: at(0.05),
            p25_us: at(0.25),
            p50_us: at(0.50),
            p75_us: at(0.75),
            p90_us: at(0.90),
            p95_us: at(0.95),
            p99_us: at(0.99),
            max_us: values_us[values_us.len() - 1],
        }
    }
}

/// Index lag of the updates of one phase (log2 buckets: the bound is the bucket's upper end).
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
pub struct Lag {
    pub updates: u64,
    pub p50_us: u64,
    pub p90_us: u64,
    pub p99_us: u64,
    /// Upper bound of the highest non-empty bucket.
    pub max_bucket_us: u64,
    /// (bucket upper bound in µs, updates) of every non-empty bucket.
    pub histogram: Vec<(u64, u64)>,
}

impl Lag {
    /// The lag of the updates recorded between two snapshots of the engine's histogram.
    pub fn between(before: &[(u64, u64)], after: &[(u64, u64)]) -> Lag {
        let histogram: Vec<(u64, u64)> = after
            .iter()
            .map(|(bound, count)| {
                let earlier = before
                    .iter()
                    .find(|(b, _)| b == bound)
                    .map_or(0, |(_, c)| *c);
                (*bound, count.saturating_sub(earlier))
            })
            .filter(|(_, count)| *count > 0)
            .collect();
        let updates: u64 = histogram.iter().map(|(_, count)| count).sum();
        let quantile = |q: f64| {
            let rank = ((q * updates as f64).ceil() as u64).max(1);
            let mut seen = 0;
            for (bound, count) in &histogram {
                seen += count;
                if seen >= rank {
                    return *bound;
                }
            }
            0
        };
        Lag {
            updates,
            p50_us: quantile(0.5),
            p90_us: quantile(0.9),
            p99_us: quantile(0.99),
            max_bucket_us: histogram.last().map_or(0, |(bound, _)| *bound),
            histogram,
        }
    }
}

/// The closed-loop saturation measurement.
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
pub struct Saturation {
    pub updates: u64,
    /// Updates per second acknowledged to the clients.
    pub acknowledged_rate: f64,
    /// Updates per second including the time to drain the asynchronous queue afterwards (the
    /// same as acknowledged for synchronous schemes): what the scheme sustains.
    pub sustained_rate: f64,
    pub drain_ms: f64,
    pub latency: Latency,
}

/// One open-loop load step.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LoadStep {
    pub load_percent: f64,
    pub offered_rate: f64,
    /// Updates completed per second of the step.
    pub achieved_rate: f64,
    /// Updates scheduled in the step, and those never issued because the clients fell more than
    /// a step behind (their latency is counted as the time they had waited when the step ended,
    /// a lower bound).
    pub scheduled: u64,
    pub unissued: u64,
    /// From the scheduled time to the acknowledgement.
    pub latency: Latency,
    /// From the call to the acknowledgement (the update's own cost, without the wait behind
    /// earlier updates or a late client).
    pub service: Latency,
    /// Asynchronous schemes: the step's index lag, the queue left when the step ended and the
    /// time to drain it.
    pub lag: Option<Lag>,
    pub queue_length_at_end: u64,
    pub drain_ms: f64,
    /// Engine write stalls during the step (a writer waited for a flush or for L0 to shrink)
    /// and the time writers spent in them.
    pub write_stalls: u64,
    pub write_stall_ms: f64,
    /// Memtable flushes that waited for the asynchronous update queue, and their total wait.
    pub flush_drains: u64,
    pub flush_drain_wait_ms: f64,
}

/// The comparison behind a target: the scheme and no index, each offered half of the scheme's
/// own sustained saturation ([`HALF_LOAD_RULE`]).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HalfLoad {
    /// The scheme's own sustained saturation throughput.
    pub saturation_rate: f64,
    /// Half of it: the rate both sides are offered.
    pub offered_rate: f64,
    pub repeats: u32,
    /// Pooled over the repeats: latency from the scheduled time, and service time.
    pub latency: Latency,
    pub service: Latency,
    pub baseline_latency: Latency,
    pub baseline_service: Latency,
    /// Mean latency of each repeat (scheme, no index), to show the spread.
    pub repeat_means_us: Vec<(f64, f64)>,
    /// Longest stretch each repeat's client (scheme, no index) lost while it only waited for
    /// the next update's time (see [`SpinGaps`]), in ms.
    pub repeat_client_gaps_ms: Vec<(f64, f64)>,
    /// Engine calls of [`HOST_PAUSE`] or longer without a context switch in each repeat
    /// (scheme, no index; see [`SpinGaps`]).
    pub repeat_unswitched_calls: Vec<(u64, u64)>,
    /// The repeats in which neither client lost [`HOST_PAUSE`] at once either way, and the
    /// latencies pooled over those repeats alone (both sides of a repeat are kept or dropped
    /// together, so the alternation stays balanced).
    pub unpaused_repeats: u32,
    pub unpaused_latency: Latency,
    pub unpaused_baseline_latency: Latency,
    pub unissued: u64,
    pub baseline_unissued: u64,
    pub write_stalls: u64,
    pub baseline_write_stalls: u64,
    pub flush_drains: u64,
    pub flush_drain_wait_ms: f64,
}

/// A closed-loop read measurement.
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
pub struct Reads {
    pub latency: Latency,
    pub hits_per_query: f64,
    pub candidates_per_query: f64,
    pub stale_per_query: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RangeReads {
    pub selectivity_ppm: u64,
    /// Width of the range in values (equal to the selectivity in ppm, see [`VALUE_DOMAIN`]).
    pub width_values: u64,
    pub expected_hits: f64,
    pub reads: Reads,
}

/// Everything measured for one scheme.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SchemeResult {
    pub scheme: String,
    pub saturation: Saturation,
    /// The rate the load percentages were applied to.
    pub basis_rate: f64,
    pub steps: Vec<LoadStep>,
    /// The target comparison (sync-insert and async-simple, when no index is measured too).
    pub half_load: Option<HalfLoad>,
    /// Absent without an index.
    pub exact: Option<Reads>,
    pub ranges: Vec<RangeReads>,
}

/// A target of issue 5: a scheme's update latency relative to no index at half of saturation
/// load, read as [`HALF_LOAD_RULE`] says.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TargetCheck {
    pub scheme: String,
    pub rule: String,
    /// Percent of the scheme's own sustained saturation (50).
    pub load_percent: f64,
    pub saturation_rate: f64,
    pub offered_rate: f64,
    pub limit: f64,
    pub mean_ratio: f64,
    pub p50_ratio: f64,
    pub p99_ratio: f64,
    /// The same for the service time (the call alone).
    pub service_mean_ratio: f64,
    pub service_p50_ratio: f64,
    /// The scheme's pooled mean latency minus no index's, in µs: what the ratio hides when
    /// machine noise inflates both means (see [`Report::platform_hiccups`]).
    pub mean_above_baseline_us: f64,
    /// Judged on the mean (the paper's Figure 7 plots averages) and the median.
    pub met: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Report {
    pub documents: u64,
    pub document_bytes: usize,
    pub kind: String,
    pub clients: usize,
    pub rate_basis: RateBasis,
    pub step_seconds: f64,
    /// CPUs the engine's and the index layer's background threads were pinned to, and the
    /// clients' (absent: not pinned).
    pub background_cpus: Option<Vec<usize>>,
    pub client_cpus: Option<Vec<usize>>,
    /// The no-index saturation (the basis of the offered rates with `baseline`).
    pub baseline_saturation_rate: Option<f64>,
    pub results: Vec<SchemeResult>,
    /// Schemes that could not run (scheme, reason).
    pub skipped: Vec<(String, String)>,
    pub targets: Vec<TargetCheck>,
    /// The machine's own interruptions of a spinning thread, measured with the databases open
    /// but idle, before and after the load steps (see [`sift_bench::noise::hiccup`]): what the no-index
    /// mean latency is made of on a noisy machine.
    pub platform_hiccups: Vec<Hiccups>,
    /// Other processes' threads that used the most CPU during the steps, and the CPU seconds
    /// of all of them (absent where `/proc` cannot tell; see [`sift_bench::noise::other_cpu`]).
    pub other_processes: Vec<OtherCpu>,
    pub other_processes_seconds: Option<f64>,
}
