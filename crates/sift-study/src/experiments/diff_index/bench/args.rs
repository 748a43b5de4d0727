//! The options of `sift bench diff-index` and the settings of a run made from them or by the
//! study.

use super::load::HICCUP_METER_DURATION;
use serde::Serialize;
use sift_bench::kv::BenchError;
use sift_bench::noise::hiccup::{self, Hiccups};
use sift_bench::pinning::{self, parse_cpus, pin_client};
use sift_index::{DatabaseOptions, IndexKind, Maintenance};
use std::path::PathBuf;

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
    /// Print the forensic detail under the tables: machine noise before and after the steps,
    /// other processes' CPU time, service times, write stalls and flush drains per step, lag
    /// histograms, and the per-repeat ratios and machine pauses behind the targets.
    #[arg(long)]
    pub detail: bool,
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
pub(crate) fn machine_noise(client_cpus: Option<&[usize]>) -> Result<Hiccups, BenchError> {
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
