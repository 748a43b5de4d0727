//! The Diff-Index experiments (Tan et al., EDBT'14 §8), run by `sift bench diff-index` and by
//! experiment 7 of the study: one collection of ~`document_bytes` documents with one secondary
//! index on an integer attribute (`price`, uniform in `0..VALUE_DOMAIN`), measured under each
//! maintenance scheme (`none`, `sync-full`, `sync-insert`, `async-simple`, `async-session`):
//!
//! - **saturation**: closed-loop updates (a replace of an existing document with a new indexed
//!   value) as fast as the clients can issue them; for asynchronous schemes the rate counts the
//!   time to drain the update queue afterwards, so it is the rate the index can sustain;
//! - **update latency against offered load**: open loop at fixed rates (percentages of the
//!   no-index saturation, or of each scheme's own): every update has a scheduled time and its
//!   latency runs from that time, so a stalled update also delays (and is charged to) the ones
//!   scheduled behind it — no coordinated omission;
//! - **index lag** of the asynchronous schemes per load step (base commit → index update
//!   committed, from the engine's histogram, `Database::async_index_stats`);
//! - **reads**, closed loop on the settled database: exact-match LOOKUPs of a live value and
//!   RANGELOOKUPs whose width selects 0.0001 % … 0.1 % of the documents.
//!
//! Writes of `async-session` go through one session per client, and its reads through a
//! session, so the overlay's cost is measured.

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde::Serialize;
use sift_bench::kv::BenchError;
use sift_bench::noise::hiccup::{self, Hiccups};
use sift_bench::noise::other_cpu::{OtherCpu, ThreadTimes};
use sift_bench::pinning::{self, parse_cpus, pin_client, pinning_description};
use sift_index::{
    AttrType, AttrValue, Database, DatabaseOptions, IndexKind, IndexSpec, Maintenance, Session,
    WriteOp,
};
use std::fmt::Write as _;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::time::{Duration, Instant};

pub const COLLECTION: &str = "items";
/// The indexed attribute (and the index's name).
pub const INDEXED_PATH: &str = "price";
/// Indexed values are uniform in `0..VALUE_DOMAIN`, so a range `VALUE_DOMAIN / 10^6` values
/// wide selects one document in a million: a RANGELOOKUP's width in values is its selectivity
/// in parts per million.
pub const VALUE_DOMAIN: u32 = 1_000_000;
const PRELOAD_BATCH_DOCUMENTS: u64 = 1000;

/// A maintenance scheme, or no secondary index at all.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scheme {
    NoIndex,
    Maintained(Maintenance),
}

impl Scheme {
    /// The schemes of the Diff-Index paper, in its order.
    pub const ALL: [Scheme; 5] = [
        Scheme::NoIndex,
        Scheme::Maintained(Maintenance::SyncFull),
        Scheme::Maintained(Maintenance::SyncInsert),
        Scheme::Maintained(Maintenance::AsyncSimple),
        Scheme::Maintained(Maintenance::AsyncSession),
    ];

    pub fn name(self) -> &'static str {
        match self {
            Scheme::NoIndex => "none",
            Scheme::Maintained(maintenance) => maintenance.name(),
        }
    }

    pub fn is_async(self) -> bool {
        matches!(self, Scheme::Maintained(m) if m.is_async())
    }

    pub fn parse(text: &str) -> Result<Scheme, BenchError> {
        if text == "none" {
            return Ok(Scheme::NoIndex);
        }
        text.parse::<Maintenance>()
            .map(Scheme::Maintained)
            .map_err(|e| BenchError::new(format!("{e} (or none)")))
    }
}

/// What the offered rates are percentages of.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum RateBasis {
    /// The saturation throughput without a secondary index: every scheme gets the same offered
    /// rates (the x axis of the paper's Figure 7).
    Baseline,
    /// Each scheme's own saturation throughput.
    Own,
}

/// Options of `sift bench diff-index`.
#[derive(Debug, Clone, PartialEq, clap::Args)]
pub struct DiffIndexArgs {
    /// Documents preloaded (ids 1..=documents); updates replace uniformly chosen ones.
    #[arg(long, default_value_t = 100_000)]
    pub documents: u64,
    /// Approximate size of a document's JSON.
    #[arg(long, default_value_t = 200)]
    pub document_bytes: usize,
    /// Kind of the secondary index on `price`.
    #[arg(long, default_value = "composite")]
    pub kind: String,
    /// Schemes to measure, comma-separated: none, sync-full, sync-insert, async-simple,
    /// async-session.
    #[arg(long, value_delimiter = ',', default_values_t = Scheme::ALL.iter().map(|s| s.name().to_owned()).collect::<Vec<_>>())]
    pub schemes: Vec<String>,
    /// Seconds of the closed-loop saturation measurement per scheme.
    #[arg(long, default_value_t = 1.5)]
    pub saturation_seconds: f64,
    /// Offered loads, in percent of the saturation throughput given by --rate-basis.
    #[arg(long, value_delimiter = ',', default_values_t = [10.0, 25.0, 50.0, 75.0, 90.0])]
    pub loads: Vec<f64>,
    /// What --loads are percentages of: the no-index saturation (same offered rates for every
    /// scheme) or each scheme's own.
    #[arg(long, value_enum, default_value_t = RateBasis::Baseline)]
    pub rate_basis: RateBasis,
    /// Seconds of each open-loop load step.
    #[arg(long, default_value_t = 1.5)]
    pub step_seconds: f64,
    /// Pairs of steps (no index, then the scheme, in alternating order) behind each target
    /// comparison at half of the scheme's own saturation (see [`HALF_LOAD_RULE`]); 0 skips it.
    #[arg(long, default_value_t = 2)]
    pub target_repeats: u32,
    /// Client threads (each with its share of the schedule; one session each for
    /// async-session).
    #[arg(long, default_value_t = 1)]
    pub clients: usize,
    /// Exact-match LOOKUPs timed per scheme (after a tenth as warm-up).
    #[arg(long, default_value_t = 2_000)]
    pub exact_reads: u64,
    /// RANGELOOKUPs timed per scheme and selectivity.
    #[arg(long, default_value_t = 200)]
    pub range_reads: u64,
    /// Range selectivities, in percent of the documents.
    #[arg(long, value_delimiter = ',', default_values_t = [0.0001, 0.001, 0.01, 0.1])]
    pub selectivities: Vec<f64>,
    /// Memtable bytes (small enough that the run flushes and compacts).
    #[arg(long, default_value_t = 4 << 20)]
    pub memtable_bytes: usize,
    /// Block cache bytes [default: Sift's default].
    #[arg(long)]
    pub cache_bytes: Option<usize>,
    /// Asynchronous index worker threads [default: Sift's default].
    #[arg(long)]
    pub async_workers: Option<usize>,
    /// Nice value of the asynchronous index workers (0: the writers' priority) [default:
    /// Sift's default].
    #[arg(long)]
    pub async_worker_nice: Option<i32>,
    /// Nice value (0–19) of the engine's flush and compaction threads (0: the writers'
    /// priority) [default: Sift's default].
    #[arg(long)]
    pub background_nice: Option<i32>,
    /// Flush and compaction threads pause briefly every 500 µs of work, compactions run under
    /// `SCHED_IDLE` (engine option `background_threads_yield_to_foreground`).
    #[arg(long)]
    pub background_yield: bool,
    /// Pin the engine's flush, compaction and WAL presync threads and the asynchronous index
    /// workers to these CPUs (engine option `background_thread_cpus`; Linux only), e.g. `1`
    /// or `2-3`. With --client-cpus on the other CPUs, background work never preempts a
    /// client on its core [default: every CPU].
    // A fully qualified `Vec`: one value parsed into a list, not one value per occurrence.
    #[arg(long, value_parser = parse_cpus)]
    pub background_cpus: Option<::std::vec::Vec<usize>>,
    /// Pin the client threads of every step (no-index baseline included, so the comparison
    /// stays fair) and the read phases to these CPUs (Linux only), e.g. `0` [default: every
    /// CPU].
    #[arg(long, value_parser = parse_cpus)]
    pub client_cpus: Option<::std::vec::Vec<usize>>,
    /// fdatasync the WAL before acknowledging each write.
    #[arg(long)]
    pub sync: bool,
    /// Parent of the databases (one subdirectory per scheme) [default: a temporary directory
    /// under the current one, removed at the end].
    #[arg(long)]
    pub db: Option<PathBuf>,
    #[arg(long, default_value_t = 11)]
    pub seed: u64,
    /// The whole result as one JSON object instead of tables.
    #[arg(long)]
    pub json: bool,
}

/// Everything a run needs (the study builds one directly).
#[derive(Debug, Clone)]
pub struct Settings {
    pub documents: u64,
    pub document_bytes: usize,
    pub kind: IndexKind,
    pub schemes: Vec<Scheme>,
    pub saturation_seconds: f64,
    pub load_percents: Vec<f64>,
    pub rate_basis: RateBasis,
    pub step_seconds: f64,
    /// Pairs of steps behind each target comparison (0: none).
    pub target_repeats: u32,
    pub clients: usize,
    pub exact_reads: u64,
    pub range_reads: u64,
    /// Range selectivities in parts per million of the documents.
    pub selectivities_ppm: Vec<u64>,
    pub options: DatabaseOptions,
    /// CPUs the client threads are pinned to (`None`: not pinned). The background threads'
    /// are `options.engine.background_thread_cpus`.
    pub client_cpus: Option<Vec<usize>>,
    pub seed: u64,
}

/// The machine's noise where the clients run: on a thread pinned as they are.
fn machine_noise(client_cpus: Option<&[usize]>) -> Result<Hiccups, BenchError> {
    std::thread::scope(|scope| {
        scope
            .spawn(|| {
                pin_client(client_cpus)?;
                Ok(hiccup::measure(HICCUP_METER_DURATION))
            })
            .join()
            .map_err(|_| BenchError::new("the machine-noise meter thread panicked"))?
    })
}

impl Settings {
    pub fn from_args(args: &DiffIndexArgs) -> Result<Settings, BenchError> {
        let kind = args
            .kind
            .parse::<IndexKind>()
            .map_err(|e| BenchError::new(format!("--kind: {e}")))?;
        let schemes = args
            .schemes
            .iter()
            .map(|name| Scheme::parse(name))
            .collect::<Result<Vec<_>, _>>()?;
        let mut options = DatabaseOptions::default();
        options.engine.memtable_bytes_max = args.memtable_bytes;
        if let Some(bytes) = args.cache_bytes {
            options.engine.block_cache_bytes = bytes;
        }
        if let Some(workers) = args.async_workers {
            options.async_index.workers = workers.max(1);
        }
        if let Some(nice) = args.async_worker_nice {
            options.async_index.worker_nice = nice;
        }
        if let Some(nice) = args.background_nice {
            options.engine.background_thread_nice = nice;
        }
        options.engine.background_threads_yield_to_foreground = args.background_yield;
        options
            .engine
            .background_thread_cpus
            .clone_from(&args.background_cpus);
        pinning::check_allowed(args.background_cpus.as_deref(), args.client_cpus.as_deref())?;
        options.sync_writes = args.sync;
        let selectivities_ppm = args
            .selectivities
            .iter()
            .map(|percent| {
                if percent.is_finite() && *percent > 0.0 && *percent <= 100.0 {
                    Ok(((percent * 10_000.0).round() as u64).max(1))
                } else {
                    Err(BenchError::new(format!(
                        "--selectivities: {percent} is not a percentage in (0, 100]"
                    )))
                }
            })
            .collect::<Result<Vec<_>, _>>()?;
        if let Some(bad) = args
            .loads
            .iter()
            .find(|load| !(load.is_finite() && **load > 0.0))
        {
            return Err(BenchError::new(format!(
                "--loads: {bad} is not a positive percentage"
            )));
        }
        Ok(Settings {
            documents: args.documents.max(1),
            document_bytes: args.document_bytes,
            kind,
            schemes,
            saturation_seconds: args.saturation_seconds.max(0.05),
            load_percents: args.loads.clone(),
            rate_basis: args.rate_basis,
            step_seconds: args.step_seconds.max(0.05),
            target_repeats: args.target_repeats,
            clients: args.clients.max(1),
            exact_reads: args.exact_reads,
            range_reads: args.range_reads,
            selectivities_ppm,
            options,
            client_cpus: args.client_cpus.clone(),
            seed: args.seed,
        })
    }
}

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

/// How "half of saturation load" is read for the targets (also printed with them).
pub const HALF_LOAD_RULE: &str = "half of saturation load = 50% of the scheme's OWN sustained \
saturation throughput (closed loop, including the drain of its update queue); no index is offered \
the same absolute rate. So both latencies are read at equal throughput, as in the paper's Fig. 7 \
(x axis: TPS; each scheme's curve ends at its own saturation), and neither side is overloaded. \
Each side runs `target_repeats` open-loop steps, alternating, and their updates are pooled.";

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

/// The targets of issue 5: (scheme, limit on its latency relative to no index).
pub const TARGETS: [(Scheme, f64); 2] = [
    (Scheme::Maintained(Maintenance::SyncInsert), 2.2),
    (Scheme::Maintained(Maintenance::AsyncSimple), 1.3),
];

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

/// Told where the run is; an error stops it (Ctrl-C in the study).
pub type Progress<'a> = &'a mut dyn FnMut(&str) -> Result<(), BenchError>;

fn index_error(what: &str) -> impl Fn(sift_index::IndexError) -> BenchError + '_ {
    move |e| BenchError::new(format!("{what}: {e}"))
}

/// A document: `{"id":K,"price":V,"title":"…"}` padded to about `bytes`.
pub fn document(rng: &mut StdRng, key: u64, value: u32, bytes: usize) -> Vec<u8> {
    let mut text = format!("{{\"id\":{key},\"price\":{value},\"title\":\"");
    let pad = bytes.saturating_sub(text.len() + 2).max(1);
    for _ in 0..pad {
        text.push(char::from(b'a' + rng.gen_range(0..26u8)));
    }
    text.push_str("\"}");
    text.into_bytes()
}

/// What a query found: (hits, candidates examined, stale entries met).
type QueryCounts = (u64, u64, u64);

/// Where a client writes and reads: the database, or its session (async-session).
enum Client<'a> {
    Direct(&'a Database),
    Session(Session<'a>),
}

impl Client<'_> {
    fn put(&self, json: &[u8]) -> Result<(), BenchError> {
        match self {
            Client::Direct(database) => database.put(COLLECTION, json),
            Client::Session(session) => session.put(COLLECTION, json),
        }
        .map(|_| ())
        .map_err(index_error("update"))
    }

    /// (hits, candidates examined, stale entries met).
    fn range(&self, lo: i64, hi: i64) -> Result<QueryCounts, BenchError> {
        let (lo, hi) = (AttrValue::Int(lo), AttrValue::Int(hi));
        let (hits, stats) = match self {
            Client::Direct(database) => database
                .range(COLLECTION, INDEXED_PATH, &lo, &hi, None)
                .map(|r| (r.hits.len(), r.stats)),
            Client::Session(session) => session
                .range(COLLECTION, INDEXED_PATH, &lo, &hi, None)
                .map(|r| (r.hits.len(), r.stats)),
        }
        .map_err(index_error("range"))?;
        Ok((hits as u64, stats.candidates_examined, stats.stale_entries))
    }

    fn lookup(&self, value: i64) -> Result<QueryCounts, BenchError> {
        let value = AttrValue::Int(value);
        let (hits, stats) = match self {
            Client::Direct(database) => database
                .lookup(COLLECTION, INDEXED_PATH, &value, None)
                .map(|r| (r.hits.len(), r.stats)),
            Client::Session(session) => session
                .lookup(COLLECTION, INDEXED_PATH, &value, None)
                .map(|r| (r.hits.len(), r.stats)),
        }
        .map_err(index_error("lookup"))?;
        Ok((hits as u64, stats.candidates_examined, stats.stale_entries))
    }
}

fn client_for(database: &Database, scheme: Scheme) -> Client<'_> {
    if scheme == Scheme::Maintained(Maintenance::AsyncSession) {
        Client::Session(database.session())
    } else {
        Client::Direct(database)
    }
}

/// What one open-loop schedule did.
struct Schedule {
    scheduled: u64,
    unissued: u64,
    /// Over all clients.
    spin_gaps: SpinGaps,
    /// From the scheduled time, and from the call, to the acknowledgement (µs).
    latencies: Vec<f64>,
    services: Vec<f64>,
    elapsed_s: f64,
}

/// The database of one scheme with its documents' current indexed values.
struct Bench<'a> {
    settings: &'a Settings,
    scheme: Scheme,
    database: Database,
    /// Current `price` of document `id` at index `id - 1`.
    values: Vec<AtomicU32>,
    /// False for the no-index database opened only for its saturation (the rates' basis).
    measured: bool,
}

/// How long the machine-noise meter spins before and after the load steps.
const HICCUP_METER_DURATION: Duration = Duration::from_secs(1);

/// Names of [`Bench::writer_wait_counters`], in order (µs: microseconds).
const WRITER_WAIT_COUNTERS: [&str; 16] = [
    "stalls",
    "stall_us",
    "state_lock_wait_us",
    "switches",
    "switch_us",
    "switch_sync_us",
    "commit_waits",
    "commit_wait_us",
    "unqueued_commits",
    "unqueued_commit_us",
    "unqueued_syncs",
    "manifest_writes",
    "manifest_us",
    "drain_us",
    "closed_log_sync_by_writer_us",
    "closed_log_sync_bg_us",
];

/// A client's stretch without the CPU this long, while it only waited for an update's time,
/// marks its step as hit by a machine pause (see [`SpinGaps`]).
pub const HOST_PAUSE: Duration = Duration::from_millis(5);

/// Time the machine took from a client, seen two ways.
///
/// While the client spins, waiting for the next update's time: the longest interval between two
/// consecutive clock reads. No engine call is inside such an interval, so a long one is time
/// the machine took from the client (another task, an interrupt, or the hypervisor running
/// another guest on this virtual CPU; `perf` showed pauses of 10-40 ms with the client in
/// `clock_gettime` and no context switch), the kind [`sift_bench::noise::hiccup`] measures before and after
/// the steps.
///
/// Inside an engine call: a call of [`HOST_PAUSE`] or longer during which the client's thread
/// was never switched out (its context-switch count, read before the wait for the update's
/// time and again after such a call, did not move). The count is read only when the client is
/// ahead of schedule, so the reads never delay an update; a call that started behind schedule
/// is not judged. Every engine wait (a lock, a condition, I/O) parks the thread after
/// at most a short spin (the commit lock spins 200 µs), which counts a switch; so such a call
/// ran its whole time as the guest saw it. An engine call computes for microseconds, so what
/// remains is time the hypervisor took, or kernel work done on the thread (memory reclaim, say).
/// A call during which the thread was switched out (or whose wait before it slept) is not
/// counted: its time stays in the latencies like any engine wait.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct SpinGaps {
    pub longest: Duration,
    /// Intervals of [`HOST_PAUSE`] or longer.
    pub pauses: u64,
    /// Engine calls of [`HOST_PAUSE`] or longer without a context switch, and the longest.
    pub unswitched_calls: u64,
    pub longest_unswitched_call: Duration,
}

impl SpinGaps {
    fn note(&mut self, gap: Duration) {
        self.longest = self.longest.max(gap);
        if gap >= HOST_PAUSE {
            self.pauses += 1;
        }
    }

    /// An engine call that took `service`; `before` is the thread's context-switch count read
    /// before the wait for the call's time (`None`: not read), and `after` reads it now. It is
    /// called only for a call long enough to judge, so a short call costs no system call.
    fn note_call(
        &mut self,
        service: Duration,
        before: Option<u64>,
        after: impl FnOnce() -> Option<u64>,
    ) {
        if service < HOST_PAUSE {
            return;
        }
        if let (Some(before), Some(after)) = (before, before.and_then(|_| after())) {
            if after == before {
                self.unswitched_calls += 1;
                self.longest_unswitched_call = self.longest_unswitched_call.max(service);
            }
        }
    }

    fn merge(&mut self, other: SpinGaps) {
        self.longest = self.longest.max(other.longest);
        self.pauses += other.pauses;
        self.unswitched_calls += other.unswitched_calls;
        self.longest_unswitched_call = self
            .longest_unswitched_call
            .max(other.longest_unswitched_call);
    }

    fn hit(&self) -> bool {
        self.pauses > 0 || self.unswitched_calls > 0
    }
}

/// How many other processes the report names (by the CPU time they used during the steps).
const OTHER_PROCESSES_LISTED: usize = 5;

/// A call at least this long (µs) is counted as slow in the target steps' progress lines.
const SLOW_CALL_US: f64 = 20.0;

/// Time a client must have before an update is due to read its context-switch count first (a
/// read is a system call: 0.14 µs on the 2-core development machine, where the sync-insert
/// target leaves a client about 3.5 µs between updates).
const SWITCH_READ_SLACK: Duration = Duration::from_micros(1);

/// Waits until `at`: sleeps while far from it, then spins, so updates start on time even at
/// tens of thousands per second (a yield could hand the core to another process for
/// milliseconds on a busy machine). Notes the gaps between the spin's clock reads in `gaps`.
fn wait_until(at: Instant, gaps: &mut SpinGaps) {
    wait_until_with(at, gaps, |_| {});
}

/// [`wait_until`], calling `between_reads` with the time left before each spin's clock read
/// (tests use it to take the thread away for a known time).
fn wait_until_with(at: Instant, gaps: &mut SpinGaps, mut between_reads: impl FnMut(Duration)) {
    // The previous read of the spin; none after a sleep, which is no lost time.
    let mut previous: Option<Instant> = None;
    loop {
        let now = Instant::now();
        if let Some(previous) = previous {
            gaps.note(now.saturating_duration_since(previous));
        }
        if now >= at {
            return;
        }
        let left = at - now;
        if left > Duration::from_millis(1) {
            std::thread::sleep(left.saturating_sub(Duration::from_micros(500)));
            previous = None;
        } else {
            std::hint::spin_loop();
            between_reads(left);
            previous = Some(now);
        }
    }
}

/// Per-repeat (scheme, no index) pairs as `scheme/none` items, space-separated.
fn per_repeat<T>(pairs: &[(T, T)], show: impl Fn(&T) -> String) -> String {
    pairs
        .iter()
        .map(|(ours, theirs)| format!("{}/{}", show(ours), show(theirs)))
        .collect::<Vec<_>>()
        .join(" ")
}

/// One line on the repeats a machine pause hit: which, and the ratios without them.
fn describe_unpaused(scheme: &str, half: &HalfLoad) -> String {
    let gaps = per_repeat(&half.repeat_client_gaps_ms, |ms| format!("{ms:.1}"));
    let calls = per_repeat(&half.repeat_unswitched_calls, u64::to_string);
    let hit = half.repeats.saturating_sub(half.unpaused_repeats);
    let head = format!(
        "{scheme}: longest client gap while only waiting, per repeat (scheme/none, ms): {gaps}; \
         calls of {pause} ms or more without a context switch (scheme/none): {calls}; \
         {hit} of {} repeats had a gap or such a call on either side",
        half.repeats,
        pause = HOST_PAUSE.as_millis()
    );
    if hit == 0 || half.unpaused_repeats == 0 {
        return head;
    }
    format!(
        "{head}; without them ({} repeats): mean {:.2}×, p50 {:.2}× no index ({:.1} vs {:.1} µs)",
        half.unpaused_repeats,
        ratio(
            half.unpaused_latency.mean_us,
            half.unpaused_baseline_latency.mean_us
        ),
        ratio(
            half.unpaused_latency.p50_us,
            half.unpaused_baseline_latency.p50_us
        ),
        half.unpaused_latency.mean_us,
        half.unpaused_baseline_latency.mean_us
    )
}

fn micros(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1e6
}

impl Bench<'_> {
    /// Opens a fresh database in `dir`, creates the index (unless none) and preloads.
    fn open<'a>(
        settings: &'a Settings,
        scheme: Scheme,
        dir: &Path,
        progress: Progress<'_>,
    ) -> Result<Bench<'a>, BenchError> {
        let database =
            Database::open(dir, settings.options.clone()).map_err(index_error("open"))?;
        database
            .create_collection(COLLECTION, "id")
            .map_err(index_error("create collection"))?;
        if let Scheme::Maintained(maintenance) = scheme {
            let spec = IndexSpec::new(INDEXED_PATH, INDEXED_PATH, AttrType::Int, settings.kind)
                .with_maintenance(maintenance);
            database
                .create_index(COLLECTION, spec)
                .map_err(index_error("create index"))?;
        }
        let mut rng = StdRng::seed_from_u64(settings.seed);
        let mut values = Vec::with_capacity(settings.documents as usize);
        let mut key = 1;
        while key <= settings.documents {
            let end = (key + PRELOAD_BATCH_DOCUMENTS).min(settings.documents + 1);
            let docs: Vec<Vec<u8>> = (key..end)
                .map(|k| {
                    let value = rng.gen_range(0..VALUE_DOMAIN);
                    values.push(AtomicU32::new(value));
                    document(&mut rng, k, value, settings.document_bytes)
                })
                .collect();
            let ops: Vec<WriteOp<'_>> = docs.iter().map(|d| WriteOp::Put(d)).collect();
            database
                .write(COLLECTION, &ops)
                .map_err(index_error("preload"))?;
            key = end;
            if key % (PRELOAD_BATCH_DOCUMENTS * 20) == 1 {
                progress(&format!("{}: preloaded {}", scheme.name(), key - 1))?;
            }
        }
        let bench = Bench {
            settings,
            scheme,
            database,
            values,
            measured: true,
        };
        bench.settle()?;
        Ok(bench)
    }

    /// Flushes, waits for the index queue and background work.
    fn settle(&self) -> Result<(), BenchError> {
        self.database.flush().map_err(index_error("flush"))?;
        self.drain()?;
        self.database
            .engine()
            .wait_for_background_work()
            .map_err(|e| BenchError::new(format!("background work: {e}")))
    }

    /// Waits until every asynchronous index update is applied.
    fn drain(&self) -> Result<(), BenchError> {
        self.database
            .wait_until_indexed()
            .map_err(index_error("wait until indexed"))
    }

    fn lag_histogram(&self) -> Vec<(u64, u64)> {
        self.database.async_index_stats().lag_histogram
    }

    /// The next update of a client: (key, new value, document).
    fn next_update(&self, rng: &mut StdRng) -> (u64, u32, Vec<u8>) {
        let key = rng.gen_range(1..=self.settings.documents);
        let value = rng.gen_range(0..VALUE_DOMAIN);
        let json = document(rng, key, value, self.settings.document_bytes);
        (key, value, json)
    }

    fn apply(
        &self,
        client: &Client<'_>,
        key: u64,
        value: u32,
        json: &[u8],
    ) -> Result<(), BenchError> {
        client.put(json)?;
        self.values[(key - 1) as usize].store(value, Ordering::Relaxed);
        Ok(())
    }

    /// Closed loop for `seconds`: (updates, elapsed, latencies in µs).
    fn saturate(&self, phase_seed: u64) -> Result<Saturation, BenchError> {
        let clients = self.settings.clients;
        let stop = AtomicBool::new(false);
        let done = AtomicU64::new(0);
        let started = Instant::now();
        let outcomes: Vec<Result<Vec<f64>, BenchError>> = std::thread::scope(|scope| {
            let handles: Vec<_> = (0..clients)
                .map(|c| {
                    let (stop, done) = (&stop, &done);
                    scope.spawn(move || -> Result<Vec<f64>, BenchError> {
                        pin_client(self.settings.client_cpus.as_deref())?;
                        let client = client_for(&self.database, self.scheme);
                        let mut rng = StdRng::seed_from_u64(phase_seed ^ ((c as u64 + 1) << 40));
                        let mut latencies = Vec::new();
                        while !stop.load(Ordering::Relaxed) {
                            let (key, value, json) = self.next_update(&mut rng);
                            let begun = Instant::now();
                            self.apply(&client, key, value, &json)?;
                            latencies.push(micros(begun.elapsed()));
                            done.fetch_add(1, Ordering::Relaxed);
                        }
                        Ok(latencies)
                    })
                })
                .collect();
            std::thread::sleep(Duration::from_secs_f64(self.settings.saturation_seconds));
            stop.store(true, Ordering::Relaxed);
            handles
                .into_iter()
                .map(|h| {
                    h.join()
                        .unwrap_or_else(|_| Err(BenchError::new("a client thread panicked")))
                })
                .collect()
        });
        let elapsed = started.elapsed();
        let mut latencies = Vec::new();
        for outcome in outcomes {
            latencies.extend(outcome?);
        }
        let drain_started = Instant::now();
        self.drain()?;
        let drain = drain_started.elapsed();
        let updates = done.load(Ordering::Relaxed);
        Ok(Saturation {
            updates,
            acknowledged_rate: updates as f64 / elapsed.as_secs_f64(),
            sustained_rate: updates as f64 / (elapsed + drain).as_secs_f64(),
            drain_ms: drain.as_secs_f64() * 1e3,
            latency: Latency::of(&mut latencies),
        })
    }

    /// Counters sampled around a step: (engine write stalls, their µs, flush drains, their µs).
    fn stall_counters(&self) -> [u64; 4] {
        let engine = self.database.engine().stats();
        let index = self.database.async_index_stats();
        [
            engine.write_stalls,
            engine.write_stall_micros,
            index.flush_drains,
            index.flush_drain_wait_us,
        ]
    }

    /// Where writers waited (see [`WRITER_WAIT_COUNTERS`]), sampled around a target step.
    fn writer_wait_counters(&self) -> [u64; 16] {
        let engine = self.database.engine().stats();
        let index = self.database.async_index_stats();
        [
            engine.write_stalls,
            engine.write_stall_micros,
            engine.write_state_lock_wait_micros,
            engine.memtable_switches,
            engine.memtable_switch_micros,
            engine.memtable_switch_wal_sync_micros,
            engine.commit_lock_waits,
            engine.commit_lock_wait_micros,
            engine.unqueued_commits,
            engine.unqueued_commit_micros,
            engine.unqueued_commit_syncs,
            engine.manifest_writes,
            engine.manifest_write_micros,
            index.flush_drain_wait_us,
            engine.closed_wal_sync_by_writer_micros,
            engine.closed_wal_sync_micros,
        ]
    }

    /// One open-loop step at `rate` updates per second.
    fn open_loop(
        &self,
        load_percent: f64,
        rate: f64,
        phase_seed: u64,
    ) -> Result<LoadStep, BenchError> {
        let lag_before = self.lag_histogram();
        let counters_before = self.stall_counters();
        let mut run = self.run_schedule(rate, phase_seed)?;
        let queue_length_at_end = self.database.async_index_stats().queue_length;
        let drain_started = Instant::now();
        self.drain()?;
        let drain_ms = drain_started.elapsed().as_secs_f64() * 1e3;
        let lag = self
            .scheme
            .is_async()
            .then(|| Lag::between(&lag_before, &self.lag_histogram()));
        let counters = self.stall_counters();
        let delta = |i: usize| counters[i].saturating_sub(counters_before[i]);
        self.database
            .engine()
            .wait_for_background_work()
            .map_err(|e| BenchError::new(format!("background work: {e}")))?;
        let completed = run.scheduled - run.unissued;
        Ok(LoadStep {
            load_percent,
            offered_rate: rate,
            achieved_rate: completed as f64 / run.elapsed_s.max(1e-9),
            scheduled: run.scheduled,
            unissued: run.unissued,
            latency: Latency::of(&mut run.latencies),
            service: Latency::of(&mut run.services),
            lag,
            queue_length_at_end,
            drain_ms,
            write_stalls: delta(0),
            write_stall_ms: delta(1) as f64 / 1e3,
            flush_drains: delta(2),
            flush_drain_wait_ms: delta(3) as f64 / 1e3,
        })
    }

    /// The updates of one open-loop step at `rate` per second, as scheduled (no drain).
    fn run_schedule(&self, rate: f64, phase_seed: u64) -> Result<Schedule, BenchError> {
        let clients = self.settings.clients;
        let seconds = self.settings.step_seconds;
        let scheduled_total = (rate * seconds).round().max(1.0) as u64;
        let interval_s = 1.0 / rate.max(1e-9);
        // The clients stop issuing a step behind schedule (at least one second).
        let grace = Duration::from_secs_f64(seconds.max(1.0));
        let start = Instant::now() + Duration::from_millis(2);
        let end_of_schedule = start + Duration::from_secs_f64(seconds);
        let hard_stop = end_of_schedule + grace;
        type Outcome = Result<(Vec<f64>, Vec<f64>, u64, SpinGaps), BenchError>;
        let outcomes: Vec<Outcome> = std::thread::scope(|scope| {
            let handles: Vec<_> = (0..clients)
                .map(|c| {
                    scope.spawn(move || -> Outcome {
                        pin_client(self.settings.client_cpus.as_deref())?;
                        let client = client_for(&self.database, self.scheme);
                        let mut rng = StdRng::seed_from_u64(phase_seed ^ ((c as u64 + 1) << 40));
                        let mut latencies = Vec::new();
                        let mut services = Vec::new();
                        let mut unissued = 0;
                        let mut spin_gaps = SpinGaps::default();
                        let mut i = c as u64;
                        while i < scheduled_total {
                            let scheduled = start + Duration::from_secs_f64(i as f64 * interval_s);
                            let (key, value, json) = self.next_update(&mut rng);
                            // Read only with time to spare before the update is due, so a
                            // client behind schedule does not pay for it (it then stays unknown).
                            let switches = (Instant::now() + SWITCH_READ_SLACK < scheduled)
                                .then(sift_bench::noise::thread_context_switches)
                                .flatten();
                            wait_until(scheduled, &mut spin_gaps);
                            let now = Instant::now();
                            if now >= hard_stop {
                                // Too far behind: the rest waited at least until now.
                                let mut j = i;
                                while j < scheduled_total {
                                    let at = start + Duration::from_secs_f64(j as f64 * interval_s);
                                    latencies.push(micros(now.saturating_duration_since(at)));
                                    unissued += 1;
                                    j += clients as u64;
                                }
                                break;
                            }
                            self.apply(&client, key, value, &json)?;
                            let done = Instant::now();
                            let service = done.saturating_duration_since(now);
                            // After the clock: outside the timed call.
                            spin_gaps.note_call(
                                service,
                                switches,
                                sift_bench::noise::thread_context_switches,
                            );
                            latencies.push(micros(done.saturating_duration_since(scheduled)));
                            services.push(micros(service));
                            i += clients as u64;
                        }
                        Ok((latencies, services, unissued, spin_gaps))
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| {
                    h.join()
                        .unwrap_or_else(|_| Err(BenchError::new("a client thread panicked")))
                })
                .collect()
        });
        let finished = Instant::now();
        let mut latencies = Vec::new();
        let mut services = Vec::new();
        let mut unissued = 0;
        let mut spin_gaps = SpinGaps::default();
        for outcome in outcomes {
            let (mut these, mut their_services, missed, gaps) = outcome?;
            latencies.append(&mut these);
            services.append(&mut their_services);
            unissued += missed;
            spin_gaps.merge(gaps);
        }
        Ok(Schedule {
            scheduled: scheduled_total,
            unissued,
            spin_gaps,
            latencies,
            services,
            elapsed_s: finished.saturating_duration_since(start).as_secs_f64(),
        })
    }

    /// The target comparison of this scheme against `baseline` (no index), both offered half of
    /// `saturation_rate`: `repeats` pairs of steps, alternating which side runs first.
    fn half_load(
        &self,
        baseline: &Bench<'_>,
        saturation_rate: f64,
        target: u64,
        progress: Progress<'_>,
    ) -> Result<HalfLoad, BenchError> {
        let rate = (saturation_rate / 2.0).max(1.0);
        let repeats = self.settings.target_repeats.max(1);
        let mut ours = (Vec::new(), Vec::new(), 0, 0);
        let mut theirs = (Vec::new(), Vec::new(), 0, 0);
        let mut repeat_means_us = Vec::new();
        let mut repeat_client_gaps_ms = Vec::new();
        let mut repeat_unswitched_calls = Vec::new();
        // Latencies of the repeats in which neither client was hit by a machine pause.
        let mut clean = (Vec::new(), Vec::new(), 0u32);
        let mut drains = (0, 0);
        for repeat in 0..repeats {
            let mut means = (0.0, 0.0);
            let mut gaps = (SpinGaps::default(), SpinGaps::default());
            let mut latencies = (Vec::new(), Vec::new());
            let order: [(&Bench<'_>, bool); 2] = if repeat % 2 == 0 {
                [(baseline, false), (self, true)]
            } else {
                [(self, true), (baseline, false)]
            };
            for (bench, is_scheme) in order {
                progress(&format!(
                    "target {}: {} at {rate:.0} updates/s (half of {saturation_rate:.0}), repeat {}",
                    self.scheme.name(),
                    bench.scheme.name(),
                    repeat + 1
                ))?;
                let before = bench.stall_counters();
                let waits_before = bench.writer_wait_counters();
                let index_before = bench.database.async_index_stats();
                let seed = phase_seed(
                    self.settings,
                    bench.scheme,
                    1000 + target * 100 + u64::from(repeat),
                );
                let run = bench.run_schedule(rate, seed)?;
                bench.drain()?;
                let after = bench.stall_counters();
                bench
                    .database
                    .engine()
                    .wait_for_background_work()
                    .map_err(|e| BenchError::new(format!("background work: {e}")))?;
                let mean = run.latencies.iter().sum::<f64>() / run.latencies.len().max(1) as f64;
                let step = Latency::of(&mut run.latencies.clone());
                let service = Latency::of(&mut run.services.clone());
                // Calls long enough to back the schedule up (each delays the updates due
                // meanwhile): how many, and their time.
                let (slow_calls, slow_call_us) = run
                    .services
                    .iter()
                    .filter(|us| **us >= SLOW_CALL_US)
                    .fold((0_u64, 0.0), |(count, total), us| (count + 1, total + us));
                let waits = bench.writer_wait_counters();
                let index_after = bench.database.async_index_stats();
                let delta: Vec<String> = WRITER_WAIT_COUNTERS
                    .iter()
                    .zip(waits.iter().zip(waits_before.iter()))
                    .map(|(name, (after, before))| {
                        format!("{name}={}", after.saturating_sub(*before))
                    })
                    .collect();
                // What the asynchronous workers did in the step: engine writes of index
                // entries (`index_batches`; each a commit unless split), updates applied and
                // their lag (log2 bucket bounds).
                let worker = if bench.scheme.is_async() {
                    let lag = Lag::between(&index_before.lag_histogram, &index_after.lag_histogram);
                    format!(
                        " index_batches={} index_updates={} lag_p50_us={} lag_p99_us={}",
                        index_after
                            .batches_written
                            .saturating_sub(index_before.batches_written),
                        index_after
                            .updates_applied
                            .saturating_sub(index_before.updates_applied),
                        lag.p50_us,
                        lag.p99_us
                    )
                } else {
                    String::new()
                };
                progress(&format!(
                    "target {} step {}: mean {mean:.1} µs, p50 {:.1} µs, p99 {:.1} µs, max {:.0} µs; service mean {:.2} µs, p50 {:.2} µs, p99 {:.1} µs, max {:.0} µs; slow_calls={} slow_call_ms={:.2}; client_spin_gap_max_us={:.0} client_pauses={} client_unswitched_calls={} client_unswitched_call_max_us={:.0} {}{worker}",
                    self.scheme.name(),
                    bench.scheme.name(),
                    step.p50_us,
                    step.p99_us,
                    step.max_us,
                    service.mean_us,
                    service.p50_us,
                    service.p99_us,
                    service.max_us,
                    slow_calls,
                    slow_call_us / 1e3,
                    micros(run.spin_gaps.longest),
                    run.spin_gaps.pauses,
                    run.spin_gaps.unswitched_calls,
                    micros(run.spin_gaps.longest_unswitched_call),
                    delta.join(" ")
                ))?;
                let side = if is_scheme {
                    means.0 = mean;
                    gaps.0 = run.spin_gaps;
                    latencies.0.clone_from(&run.latencies);
                    drains.0 += after[2].saturating_sub(before[2]);
                    drains.1 += after[3].saturating_sub(before[3]);
                    &mut ours
                } else {
                    means.1 = mean;
                    gaps.1 = run.spin_gaps;
                    latencies.1.clone_from(&run.latencies);
                    &mut theirs
                };
                side.0.extend(run.latencies);
                side.1.extend(run.services);
                side.2 += run.unissued;
                side.3 += after[0].saturating_sub(before[0]);
            }
            repeat_means_us.push(means);
            repeat_client_gaps_ms.push((
                gaps.0.longest.as_secs_f64() * 1e3,
                gaps.1.longest.as_secs_f64() * 1e3,
            ));
            repeat_unswitched_calls.push((gaps.0.unswitched_calls, gaps.1.unswitched_calls));
            if !gaps.0.hit() && !gaps.1.hit() {
                clean.0.append(&mut latencies.0);
                clean.1.append(&mut latencies.1);
                clean.2 += 1;
            }
        }
        Ok(HalfLoad {
            repeat_client_gaps_ms,
            repeat_unswitched_calls,
            unpaused_repeats: clean.2,
            unpaused_latency: Latency::of(&mut clean.0),
            unpaused_baseline_latency: Latency::of(&mut clean.1),
            saturation_rate,
            offered_rate: rate,
            repeats,
            latency: Latency::of(&mut ours.0),
            service: Latency::of(&mut ours.1),
            baseline_latency: Latency::of(&mut theirs.0),
            baseline_service: Latency::of(&mut theirs.1),
            repeat_means_us,
            unissued: ours.2,
            baseline_unissued: theirs.2,
            write_stalls: ours.3,
            baseline_write_stalls: theirs.3,
            flush_drains: drains.0,
            flush_drain_wait_ms: drains.1 as f64 / 1e3,
        })
    }

    /// Closed-loop reads: `count` timed after `count / 10` untimed, each made by `query`.
    fn reads(
        count: u64,
        rng: &mut StdRng,
        query: &mut dyn FnMut(&mut StdRng) -> Result<QueryCounts, BenchError>,
    ) -> Result<Reads, BenchError> {
        for _ in 0..count.div_ceil(10) {
            query(rng)?;
        }
        let mut latencies = Vec::with_capacity(count as usize);
        let (mut hits, mut candidates, mut stale) = (0, 0, 0);
        for _ in 0..count {
            let started = Instant::now();
            let (h, c, s) = query(rng)?;
            latencies.push(micros(started.elapsed()));
            hits += h;
            candidates += c;
            stale += s;
        }
        let n = count.max(1) as f64;
        Ok(Reads {
            latency: Latency::of(&mut latencies),
            hits_per_query: hits as f64 / n,
            candidates_per_query: candidates as f64 / n,
            stale_per_query: stale as f64 / n,
        })
    }

    fn exact_reads(&self, client: &Client<'_>) -> Result<Reads, BenchError> {
        let mut rng = StdRng::seed_from_u64(self.settings.seed ^ 0x5EAD);
        Self::reads(self.settings.exact_reads, &mut rng, &mut |rng| {
            let key = rng.gen_range(1..=self.settings.documents);
            let value = self.values[(key - 1) as usize].load(Ordering::Relaxed);
            client.lookup(i64::from(value))
        })
    }

    fn range_reads(
        &self,
        client: &Client<'_>,
        selectivity_ppm: u64,
    ) -> Result<RangeReads, BenchError> {
        let width = (u64::from(VALUE_DOMAIN) * selectivity_ppm / 1_000_000)
            .clamp(1, u64::from(VALUE_DOMAIN));
        let mut rng = StdRng::seed_from_u64(self.settings.seed ^ 0x0EA6 ^ (selectivity_ppm << 8));
        let reads = Self::reads(self.settings.range_reads, &mut rng, &mut |rng| {
            let lo = rng.gen_range(0..=u64::from(VALUE_DOMAIN) - width) as i64;
            client.range(lo, lo + width as i64 - 1)
        })?;
        Ok(RangeReads {
            selectivity_ppm,
            width_values: width,
            expected_hits: self.settings.documents as f64 * width as f64 / f64::from(VALUE_DOMAIN),
            reads,
        })
    }
}

fn phase_seed(settings: &Settings, scheme: Scheme, phase: u64) -> u64 {
    let scheme_number = Scheme::ALL.iter().position(|s| *s == scheme).unwrap_or(9) as u64;
    settings.seed ^ (scheme_number << 48) ^ (phase << 24)
}

/// The reads of one scheme on its settled database.
fn read_phase(bench: &Bench<'_>) -> Result<(Option<Reads>, Vec<RangeReads>), BenchError> {
    if bench.scheme == Scheme::NoIndex {
        return Ok((None, Vec::new()));
    }
    bench.settle()?;
    // On a client thread of its own, pinned like the update clients.
    std::thread::scope(|scope| {
        scope
            .spawn(|| {
                pin_client(bench.settings.client_cpus.as_deref())?;
                let client = client_for(&bench.database, bench.scheme);
                let exact = bench.exact_reads(&client)?;
                let ranges = bench
                    .settings
                    .selectivities_ppm
                    .iter()
                    .map(|ppm| bench.range_reads(&client, *ppm))
                    .collect::<Result<Vec<_>, _>>()?;
                Ok((Some(exact), ranges))
            })
            .join()
            .unwrap_or_else(|_| Err(BenchError::new("the read client thread panicked")))
    })
}

/// The measurements of every open database: saturation one scheme after the other, then each
/// load step for every scheme in turn (so that a change in the machine's load, shared with
/// other work, affects the schemes of a step alike), then the reads.
fn measure(
    settings: &Settings,
    benches: &[Bench<'_>],
    progress: Progress<'_>,
) -> Result<(Vec<SchemeResult>, Option<f64>), BenchError> {
    let mut saturations = Vec::new();
    for bench in benches {
        progress(&format!("{}: saturation", bench.scheme.name()))?;
        saturations.push(bench.saturate(phase_seed(settings, bench.scheme, 0))?);
        bench.settle()?;
    }
    let baseline = benches
        .iter()
        .zip(&saturations)
        .find(|(bench, _)| bench.scheme == Scheme::NoIndex)
        .map(|(_, saturation)| saturation.sustained_rate);
    let bases: Vec<f64> = saturations
        .iter()
        .map(|saturation| match (settings.rate_basis, baseline) {
            (RateBasis::Baseline, Some(rate)) => rate,
            _ => saturation.sustained_rate,
        })
        .map(|rate| rate.max(1.0))
        .collect();
    let mut steps: Vec<Vec<LoadStep>> = benches.iter().map(|_| Vec::new()).collect();
    for (position, percent) in settings.load_percents.iter().enumerate() {
        for ((bench, basis), steps) in benches.iter().zip(&bases).zip(&mut steps) {
            if !bench.measured {
                continue;
            }
            let rate = basis * percent / 100.0;
            progress(&format!(
                "{}: {percent}% load ({rate:.0} updates/s)",
                bench.scheme.name()
            ))?;
            steps.push(bench.open_loop(
                *percent,
                rate,
                phase_seed(settings, bench.scheme, position as u64 + 1),
            )?);
        }
    }
    // The targets: each target scheme and no index at half of the scheme's own saturation.
    let mut half_loads: Vec<Option<HalfLoad>> = benches.iter().map(|_| None).collect();
    let no_index = benches.iter().find(|bench| bench.scheme == Scheme::NoIndex);
    if let (Some(no_index), true) = (no_index, settings.target_repeats > 0) {
        for (target, (scheme, _)) in TARGETS.iter().enumerate() {
            let Some(position) = benches
                .iter()
                .position(|bench| bench.scheme == *scheme && bench.measured)
            else {
                continue;
            };
            half_loads[position] = Some(benches[position].half_load(
                no_index,
                saturations[position].sustained_rate,
                target as u64,
                progress,
            )?);
        }
    }
    let mut results = Vec::new();
    for ((((bench, saturation), basis), steps), half_load) in benches
        .iter()
        .zip(saturations)
        .zip(bases)
        .zip(steps)
        .zip(half_loads)
    {
        if !bench.measured {
            continue;
        }
        progress(&format!("{}: reads", bench.scheme.name()))?;
        let (exact, ranges) = read_phase(bench)?;
        results.push(SchemeResult {
            scheme: bench.scheme.name().to_owned(),
            saturation,
            basis_rate: basis,
            steps,
            half_load,
            exact,
            ranges,
        });
    }
    Ok((results, baseline))
}

/// The step of `result` closest to `percent`.
fn step_near(result: &SchemeResult, percent: f64) -> Option<&LoadStep> {
    result.steps.iter().min_by(|a, b| {
        (a.load_percent - percent)
            .abs()
            .total_cmp(&(b.load_percent - percent).abs())
    })
}

fn ratio(a: f64, b: f64) -> f64 {
    if b > 0.0 {
        a / b
    } else {
        f64::INFINITY
    }
}

/// The targets: sync-insert ≤ 2.2× and async-simple ≤ 1.3× the no-index update latency
/// at half of saturation load, read as [`HALF_LOAD_RULE`] says.
pub fn check_targets(results: &[SchemeResult]) -> Vec<TargetCheck> {
    let mut checks = Vec::new();
    for (scheme, limit) in TARGETS {
        let Some(half) = results
            .iter()
            .find(|r| r.scheme == scheme.name())
            .and_then(|r| r.half_load.as_ref())
        else {
            continue;
        };
        let mean_ratio = ratio(half.latency.mean_us, half.baseline_latency.mean_us);
        let p50_ratio = ratio(half.latency.p50_us, half.baseline_latency.p50_us);
        checks.push(TargetCheck {
            scheme: scheme.name().to_owned(),
            rule: HALF_LOAD_RULE.to_owned(),
            load_percent: 50.0,
            saturation_rate: half.saturation_rate,
            offered_rate: half.offered_rate,
            limit,
            mean_ratio,
            p50_ratio,
            p99_ratio: ratio(half.latency.p99_us, half.baseline_latency.p99_us),
            service_mean_ratio: ratio(half.service.mean_us, half.baseline_service.mean_us),
            service_p50_ratio: ratio(half.service.p50_us, half.baseline_service.p50_us),
            mean_above_baseline_us: half.latency.mean_us - half.baseline_latency.mean_us,
            met: mean_ratio <= limit && p50_ratio <= limit,
        });
    }
    checks
}

/// Runs every scheme of `settings` in subdirectories of `parent` (which must not hold them).
pub fn run_all(
    settings: &Settings,
    parent: &Path,
    progress: Progress<'_>,
) -> Result<Report, BenchError> {
    let mut order: Vec<Scheme> = Vec::new();
    for scheme in &settings.schemes {
        if !order.contains(scheme) {
            order.push(*scheme);
        }
    }
    // The no-index database first: with the baseline basis its saturation sets every rate;
    // it is measured (saturation only) even when `none` is not asked for.
    // It is also the other side of every target comparison.
    order.sort_by_key(|s| *s != Scheme::NoIndex);
    let needs_baseline = settings.rate_basis == RateBasis::Baseline
        || (settings.target_repeats > 0
            && TARGETS.iter().any(|(scheme, _)| order.contains(scheme)));
    let baseline_only = needs_baseline && order.first() != Some(&Scheme::NoIndex);
    if baseline_only {
        order.insert(0, Scheme::NoIndex);
    }
    let mut benches = Vec::new();
    let mut skipped = Vec::new();
    for (position, scheme) in order.into_iter().enumerate() {
        let dir = parent.join(scheme.name());
        if dir.exists() {
            return Err(BenchError::new(format!(
                "{} exists: give an empty --db",
                dir.display()
            )));
        }
        match Bench::open(settings, scheme, &dir, progress) {
            Ok(mut bench) => {
                bench.measured = !(baseline_only && position == 0);
                benches.push(bench);
            }
            Err(error) if error.message().starts_with("create index") => {
                skipped.push((scheme.name().to_owned(), error.message().to_owned()));
                let _ = std::fs::remove_dir_all(&dir);
            }
            Err(error) => return Err(error),
        }
    }
    let client_cpus = settings.client_cpus.as_deref();
    let mut platform_hiccups = vec![machine_noise(client_cpus)?];
    let others_before = ThreadTimes::sample();
    let measured = measure(settings, &benches, progress);
    let others = others_before
        .zip(ThreadTimes::sample())
        .map(|(before, after)| after.busiest_since(&before, OTHER_PROCESSES_LISTED));
    platform_hiccups.push(machine_noise(client_cpus)?);
    let mut closed = Ok(());
    for bench in benches {
        let dir = bench.database.engine().path().to_path_buf();
        if let Err(error) = bench.database.close() {
            closed = Err(BenchError::new(format!("close: {error}")));
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
    let (results, baseline_saturation_rate) = measured?;
    closed?;
    let targets = check_targets(&results);
    Ok(Report {
        documents: settings.documents,
        document_bytes: settings.document_bytes,
        kind: settings.kind.name().to_owned(),
        clients: settings.clients,
        rate_basis: settings.rate_basis,
        step_seconds: settings.step_seconds,
        background_cpus: settings.options.engine.background_thread_cpus.clone(),
        client_cpus: settings.client_cpus.clone(),
        baseline_saturation_rate,
        results,
        skipped,
        targets,
        platform_hiccups,
        other_processes_seconds: others.as_ref().map(|(_, total)| *total),
        other_processes: others.map(|(busiest, _)| busiest).unwrap_or_default(),
    })
}

fn ms(us: f64) -> String {
    if us >= 10_000.0 {
        format!("{:.0}ms", us / 1e3)
    } else if us >= 1000.0 {
        format!("{:.1}ms", us / 1e3)
    } else {
        format!("{us:.1}")
    }
}

/// The report as text tables.
pub fn format_report(report: &Report) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "# sift bench diff-index: {} documents of ~{} B, one {} index on `{}`, {} client(s), \
         open-loop steps of {} s, offered rates in % of {}; {}",
        report.documents,
        report.document_bytes,
        report.kind,
        INDEXED_PATH,
        report.clients,
        report.step_seconds,
        match report.rate_basis {
            RateBasis::Baseline => "the no-index saturation".to_owned(),
            RateBasis::Own => "each scheme's own sustained saturation".to_owned(),
        },
        pinning_description(
            report.background_cpus.as_deref(),
            report.client_cpus.as_deref()
        )
    );
    for (when, hiccups) in ["before", "after"].iter().zip(&report.platform_hiccups) {
        let _ = writeln!(
            out,
            "# machine noise {when} the steps: {}",
            hiccups.describe()
        );
    }
    if let Some(total) = report.other_processes_seconds {
        let busiest: Vec<String> = report
            .other_processes
            .iter()
            .map(|other| format!("{} {:.2} s", other.name, other.seconds))
            .collect();
        let _ = writeln!(
            out,
            "# other processes' CPU time during the steps: {total:.2} s in all{}{}",
            if busiest.is_empty() { "" } else { "; most: " },
            busiest.join(", ")
        );
    }
    let _ = writeln!(out, "\n## saturation (closed loop)");
    let _ = writeln!(
        out,
        "{:<14} {:>12} {:>12} {:>10} {:>9} {:>9}",
        "scheme", "ack/s", "sustained/s", "drain ms", "p50 µs", "p99 µs"
    );
    for r in &report.results {
        let s = &r.saturation;
        let _ = writeln!(
            out,
            "{:<14} {:>12.0} {:>12.0} {:>10.1} {:>9.1} {:>9.1}",
            r.scheme,
            s.acknowledged_rate,
            s.sustained_rate,
            s.drain_ms,
            s.latency.p50_us,
            s.latency.p99_us
        );
    }
    let _ = writeln!(
        out,
        "\n## update latency against offered load (µs from the scheduled time; lag = base commit → \
         index update; stalls = engine write stalls; drains = flushes that waited for the update queue)"
    );
    let _ = writeln!(
        out,
        "{:<14} {:>6} {:>10} {:>10} {:>8} {:>8} {:>8} {:>8} {:>8} {:>9} {:>9} {:>9} {:>9} {:>8} {:>7} {:>9} {:>7} {:>9}",
        "scheme",
        "load%",
        "offered/s",
        "done/s",
        "n",
        "mean",
        "p50",
        "p90",
        "p99",
        "svc mean",
        "svc p50",
        "lag p50",
        "lag p99",
        "unissued",
        "stalls",
        "stall ms",
        "drains",
        "drain ms"
    );
    for r in &report.results {
        for step in &r.steps {
            let (lag50, lag99) = step
                .lag
                .as_ref()
                .map_or(("-".to_owned(), "-".to_owned()), |lag| {
                    (ms(lag.p50_us as f64), ms(lag.p99_us as f64))
                });
            let _ = writeln!(
                out,
                "{:<14} {:>6.0} {:>10.0} {:>10.0} {:>8} {:>8} {:>8} {:>8} {:>8} {:>9} {:>9} {:>9} {:>9} {:>8} {:>7} {:>9.1} {:>7} {:>9.1}",
                r.scheme,
                step.load_percent,
                step.offered_rate,
                step.achieved_rate,
                step.latency.count,
                ms(step.latency.mean_us),
                ms(step.latency.p50_us),
                ms(step.latency.p90_us),
                ms(step.latency.p99_us),
                ms(step.service.mean_us),
                ms(step.service.p50_us),
                lag50,
                lag99,
                step.unissued,
                step.write_stalls,
                step.write_stall_ms,
                step.flush_drains,
                step.flush_drain_wait_ms
            );
        }
    }
    let _ = writeln!(out, "\n## reads (closed loop, settled database; µs)");
    let _ = writeln!(
        out,
        "{:<14} {:<14} {:>8} {:>8} {:>8} {:>8} {:>10} {:>10} {:>8}",
        "scheme", "query", "n", "p50", "p90", "p99", "hits/q", "cands/q", "stale/q"
    );
    for r in &report.results {
        let rows = r
            .exact
            .iter()
            .map(|reads| ("exact match".to_owned(), reads))
            .chain(r.ranges.iter().map(|range| {
                (
                    format!("range {}%", range.selectivity_ppm as f64 / 10_000.0),
                    &range.reads,
                )
            }));
        for (query, reads) in rows {
            let _ = writeln!(
                out,
                "{:<14} {:<14} {:>8} {:>8} {:>8} {:>8} {:>10.2} {:>10.2} {:>8.2}",
                r.scheme,
                query,
                reads.latency.count,
                ms(reads.latency.p50_us),
                ms(reads.latency.p90_us),
                ms(reads.latency.p99_us),
                reads.hits_per_query,
                reads.candidates_per_query,
                reads.stale_per_query
            );
        }
    }
    let async_steps: Vec<_> = report
        .results
        .iter()
        .flat_map(|r| {
            r.steps
                .iter()
                .filter_map(move |s| s.lag.as_ref().map(|lag| (r, s, lag)))
        })
        .collect();
    if !async_steps.is_empty() {
        let _ = writeln!(
            out,
            "\n## index lag histograms (updates per log2 bucket, upper bound)"
        );
        for (r, step, lag) in async_steps {
            let buckets: Vec<String> = lag
                .histogram
                .iter()
                .map(|(bound, count)| format!("≤{}:{count}", ms(*bound as f64)))
                .collect();
            let _ = writeln!(
                out,
                "{:<14} {:>4.0}%  {}",
                r.scheme,
                step.load_percent,
                buckets.join(" ")
            );
        }
    }
    for (scheme, reason) in &report.skipped {
        let _ = writeln!(out, "# {scheme}: not measured ({reason})");
    }
    if !report.targets.is_empty() {
        let _ = writeln!(
            out,
            "\n## targets (issue 5): update latency relative to no index at half of saturation load"
        );
        let _ = writeln!(out, "# rule: {HALF_LOAD_RULE}");
        let _ = writeln!(
            out,
            "{:<14} {:>10} {:>10} {:>7} {:>17} {:>17} {:>17} {:>17} {:>7} {:>7}",
            "scheme",
            "own sat/s",
            "offered/s",
            "repeats",
            "mean (none) µs",
            "p50 (none) µs",
            "p99 (none) µs",
            "svc mean (none)",
            "stalls",
            "drains"
        );
        for r in &report.results {
            let Some(half) = &r.half_load else { continue };
            let pair = |ours: f64, theirs: f64| format!("{} ({})", ms(ours), ms(theirs));
            let _ = writeln!(
                out,
                "{:<14} {:>10.0} {:>10.0} {:>7} {:>17} {:>17} {:>17} {:>17} {:>7} {:>7}",
                r.scheme,
                half.saturation_rate,
                half.offered_rate,
                half.repeats,
                pair(half.latency.mean_us, half.baseline_latency.mean_us),
                pair(half.latency.p50_us, half.baseline_latency.p50_us),
                pair(half.latency.p99_us, half.baseline_latency.p99_us),
                pair(half.service.mean_us, half.baseline_service.mean_us),
                format!("{}/{}", half.write_stalls, half.baseline_write_stalls),
                half.flush_drains
            );
        }
        for t in &report.targets {
            let spread = report
                .results
                .iter()
                .find(|r| r.scheme == t.scheme)
                .and_then(|r| r.half_load.as_ref())
                .map(|half| {
                    half.repeat_means_us
                        .iter()
                        .map(|(ours, theirs)| format!("{:.2}×", ratio(*ours, *theirs)))
                        .collect::<Vec<_>>()
                        .join(" ")
                })
                .unwrap_or_default();
            let _ = writeln!(
                out,
                "{:<14} at 50% of its own saturation ({:.0}/s): mean {:.2}×, p50 {:.2}×, p99 {:.2}× \
                 (target ≤ {}× on mean and p50): {}; service time mean {:.2}×, p50 {:.2}×; mean \
                 ratio per repeat: {spread}; mean above no index: {:+.1} µs",
                t.scheme,
                t.offered_rate,
                t.mean_ratio,
                t.p50_ratio,
                t.p99_ratio,
                t.limit,
                if t.met { "met" } else { "missed" },
                t.service_mean_ratio,
                t.service_p50_ratio,
                t.mean_above_baseline_us
            );
            if let Some(half) = report
                .results
                .iter()
                .find(|r| r.scheme == t.scheme)
                .and_then(|r| r.half_load.as_ref())
            {
                let _ = writeln!(out, "# {}", describe_unpaused(t.scheme.as_str(), half));
            }
        }
        // The table's own step nearest 50%, for reference: with the baseline basis a scheme
        // slower than no index may be overloaded there, which is why the targets use the rule.
        if let Some(baseline) = report.results.iter().find(|r| r.scheme == "none") {
            for t in &report.targets {
                let Some(result) = report.results.iter().find(|r| r.scheme == t.scheme) else {
                    continue;
                };
                if let (Some(step), Some(base)) =
                    (step_near(result, 50.0), step_near(baseline, 50.0))
                {
                    let _ = writeln!(
                        out,
                        "# for reference, the table's {:.0}% step ({:.0}/s offered, {:.0}/s done): \
                         {} mean {:.2}×, p50 {:.2}× no index (not the target rule)",
                        step.load_percent,
                        step.offered_rate,
                        step.achieved_rate,
                        t.scheme,
                        ratio(step.latency.mean_us, base.latency.mean_us),
                        ratio(step.latency.p50_us, base.latency.p50_us)
                    );
                }
            }
        }
    }
    out
}

/// `sift bench diff-index`.
pub fn run(args: &DiffIndexArgs, out: &mut dyn Write) -> Result<Report, BenchError> {
    let settings = Settings::from_args(args)?;
    let (parent, _temporary) = if let Some(path) = &args.db {
        (path.clone(), None)
    } else {
        let current = std::env::current_dir()
            .map_err(|e| BenchError::new(format!("cannot read the current directory: {e}")))?;
        let temporary = tempfile::Builder::new()
            .prefix("sift-bench-diff-index-")
            .tempdir_in(current)
            .map_err(|e| BenchError::new(format!("cannot create a temporary directory: {e}")))?;
        (temporary.path().to_path_buf(), Some(temporary))
    };
    let quiet = args.json;
    let mut progress = |message: &str| -> Result<(), BenchError> {
        if !quiet {
            eprintln!("# {message}");
        }
        Ok(())
    };
    let report = run_all(&settings, &parent, &mut progress)?;
    let text = if args.json {
        serde_json::to_string(&report).map_err(|e| BenchError::new(e.to_string()))? + "\n"
    } else {
        format_report(&report)
    };
    out.write_all(text.as_bytes())
        .map_err(|e| BenchError::new(e.to_string()))?;
    Ok(report)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn lag_between_snapshots_subtracts_buckets() {
        let before = vec![(8, 2), (16, 1)];
        let after = vec![(8, 5), (16, 1), (1024, 1)];
        let lag = Lag::between(&before, &after);
        assert_eq!(lag.histogram, vec![(8, 3), (1024, 1)]);
        assert_eq!(lag.updates, 4);
        assert_eq!((lag.p50_us, lag.p99_us, lag.max_bucket_us), (8, 1024, 1024));
    }

    #[test]
    fn latency_percentiles_are_exact() {
        let mut values: Vec<f64> = (1..=100).map(f64::from).collect();
        let latency = Latency::of(&mut values);
        assert_eq!(
            (latency.p50_us, latency.p90_us, latency.p99_us),
            (50.0, 90.0, 99.0)
        );
        assert!((latency.mean_us - 50.5).abs() < 1e-9);
    }

    /// A run of a few tenths of a second over 300 documents, every scheme.
    fn tiny_args(dir: &Path) -> DiffIndexArgs {
        DiffIndexArgs {
            documents: 300,
            document_bytes: 120,
            kind: "composite".into(),
            schemes: Scheme::ALL.iter().map(|s| s.name().to_owned()).collect(),
            saturation_seconds: 0.1,
            loads: vec![25.0, 50.0],
            rate_basis: RateBasis::Baseline,
            step_seconds: 0.1,
            target_repeats: 1,
            clients: 1,
            exact_reads: 20,
            range_reads: 5,
            selectivities: vec![0.1, 10.0],
            memtable_bytes: 32 << 10,
            cache_bytes: None,
            async_workers: None,
            async_worker_nice: None,
            background_nice: None,
            background_yield: false,
            background_cpus: None,
            client_cpus: None,
            sync: false,
            db: Some(dir.to_path_buf()),
            seed: 3,
            json: false,
        }
    }

    /// The pinning asked for is applied (a CPU the process may not use is refused up front),
    /// printed in the header line and stored in the JSON report.
    #[test]
    fn pinning_is_validated_printed_and_reported() {
        let dir = tempfile::tempdir().unwrap();
        let mut args = tiny_args(dir.path());
        args.client_cpus = Some(vec![4096]);
        let refused = Settings::from_args(&args).map(|_| ()).unwrap_err();
        if cfg!(target_os = "linux") {
            assert!(refused.message().contains("CPU 4096"), "{refused:?}");
        }
        let first_allowed = sift_lsm::process_allowed_cpus()
            .first()
            .copied()
            .unwrap_or(0);
        args.schemes = vec!["none".into(), "sync-insert".into()];
        args.background_cpus = Some(vec![first_allowed]);
        args.client_cpus = Some(vec![first_allowed]);
        args.json = true;
        let mut out = Vec::new();
        let report = run(&args, &mut out).unwrap();
        assert_eq!(report.background_cpus, Some(vec![first_allowed]));
        assert_eq!(report.client_cpus, Some(vec![first_allowed]));
        let json: serde_json::Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(json["background_cpus"], serde_json::json!([first_allowed]));
        assert_eq!(json["client_cpus"], serde_json::json!([first_allowed]));
        let header = format_report(&report);
        let header = header.lines().next().unwrap();
        assert!(
            header.ends_with(&format!(
                "background threads on CPUs {first_allowed}, clients on CPUs {first_allowed}"
            )),
            "{header}"
        );
    }

    /// The CPU-list flags as a user types them (clap checks the parsed type only at parse
    /// time: a mismatch panics there, not at compile time).
    #[test]
    fn cpu_list_flags_parse_from_the_command_line() {
        #[derive(clap::Parser)]
        struct Command {
            #[command(flatten)]
            args: DiffIndexArgs,
        }
        let parsed = <Command as clap::Parser>::try_parse_from([
            "diff-index",
            "--background-cpus",
            "1-2,4",
            "--client-cpus",
            "0",
        ])
        .unwrap();
        assert_eq!(parsed.args.background_cpus, Some(vec![1, 2, 4]));
        assert_eq!(parsed.args.client_cpus, Some(vec![0]));
        let unset = <Command as clap::Parser>::try_parse_from(["diff-index"]).unwrap();
        assert_eq!(unset.args.background_cpus, None);
        assert!(
            <Command as clap::Parser>::try_parse_from(["diff-index", "--client-cpus", "x"])
                .is_err()
        );
    }

    /// Time taken from a client while it spins for the next update's time is noted as a
    /// machine pause; the sleep while far from that time is not.
    #[test]
    fn a_pause_while_waiting_is_noted_and_a_sleep_is_not() {
        let pause = HOST_PAUSE + Duration::from_millis(1);
        // Under 1 ms ahead, so the wait spins at once (no sleep to overshoot the time); tried
        // again if the thread lost the core for that long before its first read.
        let mut gaps = SpinGaps::default();
        let mut paused = false;
        for _ in 0..100 {
            gaps = SpinGaps::default();
            wait_until_with(
                Instant::now() + Duration::from_micros(900),
                &mut gaps,
                |_left| {
                    if !paused {
                        paused = true;
                        std::thread::sleep(pause);
                    }
                },
            );
            if paused {
                break;
            }
        }
        assert!(paused, "the wait never spun");
        assert!(gaps.longest >= pause, "{gaps:?}");
        assert_eq!(gaps.pauses, 1, "{gaps:?}");
        assert!(gaps.hit());
        // A wait of 20 ms sleeps about 19.5 of them: no gap of that length is noted.
        let mut quiet = SpinGaps::default();
        wait_until(Instant::now() + Duration::from_millis(20), &mut quiet);
        assert!(quiet.longest < Duration::from_millis(15), "{quiet:?}");
        let mut both = gaps;
        both.merge(quiet);
        assert_eq!(both.longest, gaps.longest.max(quiet.longest));
        assert_eq!(both.pauses, gaps.pauses + quiet.pauses);
    }

    #[test]
    fn only_long_calls_without_a_context_switch_are_counted_as_pauses() {
        let long = HOST_PAUSE + Duration::from_millis(1);
        let mut gaps = SpinGaps::default();
        gaps.note_call(Duration::from_millis(1), Some(7), || Some(7));
        assert_eq!(gaps.unswitched_calls, 0, "a short call is no pause");
        gaps.note_call(long, Some(7), || Some(8));
        assert_eq!(
            gaps.unswitched_calls, 0,
            "the thread was switched out: an engine wait"
        );
        gaps.note_call(long, None, || Some(8));
        // The count is read again only for a long call whose first count is known.
        gaps.note_call(Duration::from_millis(1), Some(7), || {
            panic!("read after a short call")
        });
        gaps.note_call(long, None, || panic!("read without a first count"));
        assert_eq!(gaps.unswitched_calls, 0, "unknown counts decide nothing");
        assert!(!gaps.hit());
        gaps.note_call(long, Some(8), || Some(8));
        assert_eq!(gaps.unswitched_calls, 1);
        assert_eq!(gaps.longest_unswitched_call, long);
        assert!(gaps.hit());
        let mut merged = SpinGaps::default();
        merged.merge(gaps);
        merged.merge(gaps);
        assert_eq!(merged.unswitched_calls, 2);
        assert_eq!(merged.longest_unswitched_call, long);
        assert_eq!(merged.pauses, 0);
    }

    /// What the detection rests on: a thread that sleeps is switched out (so an engine wait is
    /// never taken for a pause), and one that only computes is not, unless preempted.
    #[cfg(target_os = "linux")]
    #[test]
    fn a_sleep_moves_the_context_switch_count_and_a_short_spin_usually_does_not() {
        let before = sift_bench::noise::thread_context_switches();
        std::thread::sleep(Duration::from_millis(2));
        let after = sift_bench::noise::thread_context_switches();
        assert!(before.is_some() && after > before, "{before:?} {after:?}");
        // 200 µs of spinning: a preemption can land in it on a busy machine, so try again.
        let unswitched = (0..50).any(|_| {
            let before = sift_bench::noise::thread_context_switches();
            let started = Instant::now();
            while started.elapsed() < Duration::from_micros(200) {
                std::hint::spin_loop();
            }
            sift_bench::noise::thread_context_switches() == before
        });
        assert!(unswitched, "every spin was switched out");
    }

    #[test]
    fn a_tiny_run_measures_every_scheme() {
        let dir = tempfile::tempdir().unwrap();
        let args = tiny_args(dir.path());
        let mut out = Vec::new();
        let report = run(&args, &mut out).unwrap();
        assert_eq!(report.results.len(), 5, "{report:?}");
        let baseline = report.baseline_saturation_rate.unwrap();
        for result in &report.results {
            assert!(result.saturation.updates > 0, "{result:?}");
            assert_eq!(result.steps.len(), 2);
            // Every scheme is offered the same rates (percentages of the no-index saturation).
            assert!((result.steps[1].offered_rate - baseline * 0.5).abs() < 1e-6);
            assert!(result.steps.iter().all(|s| s.latency.count == s.scheduled));
            assert_eq!(
                result.steps[0].lag.is_some(),
                result.scheme.starts_with("async")
            );
            if result.scheme == "none" {
                assert!(result.exact.is_none());
            } else {
                // Every lookup asks for a live value: at least the document itself matches.
                let exact = result.exact.as_ref().unwrap();
                assert!(exact.hits_per_query >= 1.0, "{result:?}");
                // A 10% range over 300 documents finds about 30.
                let wide = &result.ranges[1];
                assert!(wide.reads.hits_per_query > 5.0, "{result:?}");
            }
        }
        for result in report
            .results
            .iter()
            .filter(|r| r.scheme.starts_with("async"))
        {
            let lag: u64 = result
                .steps
                .iter()
                .map(|s| s.lag.as_ref().unwrap().updates)
                .sum();
            let scheduled: u64 = result.steps.iter().map(|s| s.scheduled).sum();
            assert_eq!(
                lag, scheduled,
                "every update of a step is lagged once: {result:?}"
            );
        }
        assert_eq!(report.targets.len(), 2);
        for target in &report.targets {
            // Half of the scheme's own saturation, offered to both sides.
            let result = report
                .results
                .iter()
                .find(|r| r.scheme == target.scheme)
                .unwrap();
            let half = result.half_load.as_ref().unwrap();
            assert!((half.offered_rate - result.saturation.sustained_rate / 2.0).abs() < 1e-6);
            assert_eq!(half.latency.count, half.baseline_latency.count, "{half:?}");
            assert!(half.latency.count > 0);
            assert_eq!(half.repeat_means_us.len(), 1);
            assert_eq!(half.repeat_client_gaps_ms.len(), 1);
            assert_eq!(half.repeat_unswitched_calls.len(), 1);
            // Both sides of a repeat are kept or dropped together.
            assert!(half.unpaused_repeats <= half.repeats);
            if half.unpaused_repeats == half.repeats {
                assert_eq!(half.unpaused_latency, half.latency);
                assert_eq!(half.unpaused_baseline_latency, half.baseline_latency);
            } else {
                assert!(half.unpaused_latency.count < half.latency.count, "{half:?}");
            }
            let above = half.latency.mean_us - half.baseline_latency.mean_us;
            assert!((target.mean_above_baseline_us - above).abs() < 1e-9);
        }
        // The machine's noise, before and after the steps, each run for its full second.
        assert_eq!(report.platform_hiccups.len(), 2);
        assert!(report
            .platform_hiccups
            .iter()
            .all(|h| h.seconds >= HICCUP_METER_DURATION.as_secs_f64()));
        // Other processes' CPU time is read on Linux, and then reported.
        if cfg!(target_os = "linux") {
            let total = report.other_processes_seconds.expect("read from /proc");
            let listed: f64 = report.other_processes.iter().map(|o| o.seconds).sum();
            assert!(listed <= total + 1e-9, "{:?}", report.other_processes);
            assert!(report.other_processes.len() <= OTHER_PROCESSES_LISTED);
        }
        assert!(report
            .results
            .iter()
            .filter(|r| r.half_load.is_some())
            .all(|r| r.scheme == "sync-insert" || r.scheme == "async-simple"));
        let text = String::from_utf8(out).unwrap();
        assert!(
            text.contains("async-session")
                && text.contains("targets")
                && text.contains("machine noise before the steps")
                && text.contains("mean above no index")
                && text.contains("OWN sustained")
                && text.contains("longest client gap while only waiting")
                && (report.other_processes_seconds.is_none()
                    || text.contains("other processes' CPU time during the steps")),
            "{text}"
        );
    }
}
