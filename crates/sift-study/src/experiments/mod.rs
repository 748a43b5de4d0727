//! The study's experiments and what they share: the experiment list ([`ExperimentId`]), the
//! run context, opening a fresh database per configuration, timed loads in slices, query
//! measurements (warm-up, repetitions, exact percentiles, blocks read) and size accounting.
//!
//! Each experiment module turns its measurements into an [`ExperimentResult`] with verdicts
//! (`super::verdict`) and the figures the report draws.

pub mod bloom_compression;
pub mod diff_index;
pub mod mixed;
pub mod next_windows;
pub mod shared;
pub mod static_queries;
pub mod vinyl;

use super::data::StudyData;
use super::presets::{EngineSettings, Sizes};
use super::results::{DatabaseShape, ExperimentResult, Measurement};
use super::{IndexConfiguration, StudyProgress};
use crate::engines::index::{IndexSlot, SiftIndexEngine};
use sift_bench::index::runner::execute;
use sift_bench::index::{BenchError, IndexEngine};
use sift_workload::Operation;
use std::path::Path;
use std::str::FromStr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// The experiments, in report order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ExperimentId {
    /// 1: PUT cost over time, database size, GET latency.
    Static,
    /// 2: LOOKUP and RANGELOOKUP latency distributions by top-K and selectivity.
    Queries,
    /// 3: Table 7b mixed workloads.
    Mixed,
    /// 4: bloom bits-per-key sweep (Table 8) and compression on/off (App. C.2).
    BloomCompression,
    /// 5: NEXT's window / δ / skew / two-index / memory experiments.
    Next,
    /// 6: Vinyl's deferred-update microbenchmark.
    Vinyl,
    /// 7: Diff-Index's maintenance schemes under load (`diff_index/`).
    DiffIndex,
}

impl ExperimentId {
    pub const ALL: [ExperimentId; 7] = [
        ExperimentId::Static,
        ExperimentId::Queries,
        ExperimentId::Mixed,
        ExperimentId::BloomCompression,
        ExperimentId::Next,
        ExperimentId::Vinyl,
        ExperimentId::DiffIndex,
    ];

    /// The name used by `--only`, in `results.json` and in CSV file names.
    pub fn id(self) -> &'static str {
        match self {
            ExperimentId::Static => "static",
            ExperimentId::Queries => "queries",
            ExperimentId::Mixed => "mixed",
            ExperimentId::BloomCompression => "bloom-compression",
            ExperimentId::Next => "next",
            ExperimentId::Vinyl => "vinyl",
            ExperimentId::DiffIndex => "diff-index",
        }
    }

    pub fn number(self) -> u32 {
        match self {
            ExperimentId::Static => 1,
            ExperimentId::Queries => 2,
            ExperimentId::Mixed => 3,
            ExperimentId::BloomCompression => 4,
            ExperimentId::Next => 5,
            ExperimentId::Vinyl => 6,
            ExperimentId::DiffIndex => 7,
        }
    }

    pub fn title(self) -> &'static str {
        match self {
            ExperimentId::Static => "Static workload: PUT cost, database size, GET latency",
            ExperimentId::Queries => "LOOKUP and RANGELOOKUP latency by top-K and selectivity",
            ExperimentId::Mixed => "Mixed workloads: write-, read- and update-heavy",
            ExperimentId::BloomCompression => {
                "Bloom-filter bits per key, block compression and client threads"
            }
            ExperimentId::Next => "NEXT: windows, δ sweep, skew, global-index memory",
            ExperimentId::Vinyl => "Vinyl: deferred index updates",
            ExperimentId::DiffIndex => "Diff-Index: maintenance schemes under load",
        }
    }
}

impl FromStr for ExperimentId {
    type Err = BenchError;
    fn from_str(text: &str) -> Result<ExperimentId, BenchError> {
        ExperimentId::ALL
            .into_iter()
            .find(|id| id.id() == text || id.number().to_string() == text)
            .ok_or_else(|| {
                let names: Vec<&str> = ExperimentId::ALL.iter().map(|id| id.id()).collect();
                BenchError::new(format!(
                    "unknown experiment {text:?}: expected one of {} (or 1–7)",
                    names.join(", ")
                ))
            })
    }
}

/// What every experiment needs.
pub struct Context<'a> {
    pub data: &'a StudyData,
    pub sizes: &'a Sizes,
    pub engine: &'a EngineSettings,
    pub configurations: &'a [IndexConfiguration],
    /// Databases are created (and removed) under it.
    pub work_dir: &'a Path,
    /// Databases loaded by an earlier experiment of this run, to measure again.
    pub shared: &'a shared::SharedDatabases,
    /// The level shape of every database measured, for the report.
    pub shapes: &'a std::sync::Mutex<Vec<DatabaseShape>>,
    pub progress: &'a dyn StudyProgress,
    pub interrupted: &'a AtomicBool,
}

impl Context<'_> {
    /// Fails when the user pressed Ctrl-C.
    pub fn check_interrupt(&self) -> Result<(), BenchError> {
        if self.interrupted.load(Ordering::SeqCst) {
            Err(BenchError::new("interrupted"))
        } else {
            Ok(())
        }
    }

    /// A fresh empty directory for one database.
    pub fn fresh_dir(&self, label: &str) -> Result<tempfile::TempDir, BenchError> {
        let prefix: String = label
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
            .collect();
        tempfile::Builder::new()
            .prefix(&format!("{prefix}-"))
            .tempdir_in(self.work_dir)
            .map_err(|e| {
                BenchError::new(format!(
                    "cannot create a database directory in {}: {e}",
                    self.work_dir.display()
                ))
            })
    }

    /// Opens a database in `dir` with `settings` and one index per slot.
    pub fn open(
        &self,
        dir: &Path,
        settings: &EngineSettings,
        slots: &[IndexSlot],
    ) -> Result<Box<dyn IndexEngine>, BenchError> {
        SiftIndexEngine::open_slots(
            dir,
            settings.database_options(),
            self.data.primary_key(),
            slots,
        )
    }

    /// Records the table files per level of `engine`'s trees, labelled `database`.
    pub fn record_shape(&self, database: &str, engine: &dyn IndexEngine) -> Result<(), BenchError> {
        self.record_level_shape(database, engine.files_per_level()?);
        Ok(())
    }

    /// Records the table files per level of a database's trees, labelled `database`.
    pub fn record_level_shape(&self, database: &str, trees: sift_bench::index::LevelShape) {
        if !trees.is_empty() {
            self.shapes
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .push(DatabaseShape {
                    database: database.to_owned(),
                    trees,
                });
        }
    }

    /// The key of a database of the first `documents` documents with `slots`, loaded with
    /// this context's engine settings.
    pub fn load_key(&self, documents: u64, slots: &[IndexSlot]) -> shared::LoadKey {
        shared::LoadKey {
            settings: self.engine.clone(),
            documents,
            slots: slots.to_vec(),
        }
    }

    /// The configurations this build can measure, each with its name.
    pub fn known_configurations(&self) -> Vec<&IndexConfiguration> {
        self.configurations
            .iter()
            .filter(|configuration| configuration.check_known().is_ok())
            .collect()
    }

    /// Notes on configurations that are not measured because this build lacks them.
    pub fn unknown_configuration_notes(&self) -> Vec<String> {
        self.configurations
            .iter()
            .filter_map(|configuration| {
                configuration
                    .check_known()
                    .err()
                    .map(|reason| format!("{configuration}: not measured ({reason})"))
            })
            .collect()
    }
}

/// The figure `figure` of `experiment`'s report section, drawn by the experiment's own
/// `report` module; `None` if the experiment is unknown or has no such figure.
pub(crate) fn report_figure(
    results: &crate::results::StudyResults,
    experiment: &ExperimentResult,
    figure: &crate::results::FigureInfo,
) -> Option<String> {
    match ExperimentId::from_str(&experiment.id).ok()? {
        ExperimentId::Static | ExperimentId::Queries => {
            static_queries::report::figure(results, experiment, figure)
        }
        ExperimentId::Mixed => mixed::report::figure(results, experiment, figure),
        ExperimentId::BloomCompression => {
            bloom_compression::report::figure(results, experiment, figure)
        }
        ExperimentId::Next => next_windows::report::figure(results, experiment, figure),
        ExperimentId::Vinyl => vinyl::report::figure(results, experiment, figure),
        ExperimentId::DiffIndex => diff_index::report::figure(results, experiment, figure),
    }
}

/// The tables of `experiment`'s report section, from the experiment's own `report` module.
pub(crate) fn report_tables(experiment: &ExperimentResult) -> String {
    match ExperimentId::from_str(&experiment.id) {
        Ok(ExperimentId::Static | ExperimentId::Queries) => {
            static_queries::report::tables(experiment)
        }
        Ok(ExperimentId::Mixed) => mixed::report::tables(experiment),
        Ok(ExperimentId::BloomCompression) => bloom_compression::report::tables(experiment),
        Ok(ExperimentId::Next) => next_windows::report::tables(experiment),
        Ok(ExperimentId::Vinyl) => vinyl::report::tables(experiment),
        Ok(ExperimentId::DiffIndex) => diff_index::report::tables(experiment),
        Err(_) => String::new(),
    }
}

/// The size of `id`'s main databases in `sizes`, and what it counts.
pub fn scale_of(id: ExperimentId, sizes: &Sizes) -> (u64, &'static str) {
    match id {
        ExperimentId::Static | ExperimentId::Queries | ExperimentId::BloomCompression => {
            (sizes.documents, "documents")
        }
        ExperimentId::Mixed => (sizes.mixed_preload, "documents"),
        ExperimentId::Next => (sizes.next_documents, "documents"),
        ExperimentId::Vinyl => (sizes.vinyl_keys, "keys"),
        ExperimentId::DiffIndex => (diff_index::settings_documents(sizes), "documents"),
    }
}

/// The engine settings experiment `id` opens its databases with, from the study's.
pub fn engine_of(id: ExperimentId, engine: &EngineSettings) -> EngineSettings {
    match id {
        ExperimentId::Next => next_windows::engine_settings(engine),
        _ => engine.clone(),
    }
}

/// Runs one experiment.
pub fn run(context: &Context<'_>, id: ExperimentId) -> Result<ExperimentResult, BenchError> {
    let started = Instant::now();
    let mut result = match id {
        ExperimentId::Static => static_queries::run(context, true, false)?,
        ExperimentId::Queries => static_queries::run(context, false, true)?,
        ExperimentId::Mixed => mixed::run(context)?,
        ExperimentId::BloomCompression => bloom_compression::run(context)?,
        ExperimentId::Vinyl => vinyl::run(context)?,
        ExperimentId::Next => next_windows::run(context)?,
        ExperimentId::DiffIndex => diff_index::run(context)?,
    };
    result.duration_s = round(started.elapsed().as_secs_f64(), 3);
    // JSON has no NaN or infinity; a value that is not finite was not measured.
    result.measurements.retain(|m| m.value.is_finite());
    Ok(result)
}

/// A new result for `id` with the given texts; the caller fills measurements and verdicts.
pub fn new_result(id: ExperimentId, paper: &str, method: &str) -> ExperimentResult {
    ExperimentResult {
        id: id.id().to_owned(),
        number: id.number(),
        title: id.title().to_owned(),
        status: "measured".to_owned(),
        note: String::new(),
        paper: paper.to_owned(),
        method: method.to_owned(),
        duration_s: 0.0,
        measurements: Vec::new(),
        verdicts: Vec::new(),
        figures: Vec::new(),
        scales: Vec::new(),
    }
}

pub use sift_bench::round_to as round;

/// Summary of a set of latencies (exact percentiles, nearest rank), microseconds.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Distribution {
    pub count: u64,
    pub mean: f64,
    pub p5: f64,
    pub p25: f64,
    pub p50: f64,
    pub p75: f64,
    pub p95: f64,
    pub p99: f64,
    pub max: f64,
}

impl Distribution {
    pub fn of(values_us: &[f64]) -> Distribution {
        if values_us.is_empty() {
            return Distribution::default();
        }
        let mut sorted = values_us.to_vec();
        sorted.sort_by(f64::total_cmp);
        let at = |quantile: f64| {
            let rank = (quantile * sorted.len() as f64).ceil() as usize;
            sorted[rank.clamp(1, sorted.len()) - 1]
        };
        Distribution {
            count: sorted.len() as u64,
            mean: round(sorted.iter().sum::<f64>() / sorted.len() as f64, 3),
            p5: round(at(0.05), 3),
            p25: round(at(0.25), 3),
            p50: round(at(0.50), 3),
            p75: round(at(0.75), 3),
            p95: round(at(0.95), 3),
            p99: round(at(0.99), 3),
            max: round(sorted[sorted.len() - 1], 3),
        }
    }

    /// One measurement per statistic: `{prefix}_mean`, `_p5`, …, `_max`, in microseconds,
    /// labelled like `template`.
    pub fn push(&self, out: &mut Vec<Measurement>, template: &Measurement, prefix: &str) {
        for (name, value) in [
            ("mean", self.mean),
            ("p5", self.p5),
            ("p25", self.p25),
            ("p50", self.p50),
            ("p75", self.p75),
            ("p95", self.p95),
            ("p99", self.p99),
            ("max", self.max),
        ] {
            out.push(Measurement {
                metric: format!("{prefix}_{name}"),
                unit: "us".to_owned(),
                value: self_value(value),
                count: Some(self.count),
                ..template.clone()
            });
        }
    }
}

fn self_value(value: f64) -> f64 {
    if value.is_finite() {
        value
    } else {
        0.0
    }
}

/// Per-slice statistics of a timed load.
#[derive(Debug, Clone, PartialEq)]
pub struct SliceStats {
    /// Documents loaded at the end of the slice.
    pub loaded: u64,
    pub count: u64,
    pub busy_s: f64,
    pub latency: Distribution,
}

/// A timed load.
#[derive(Debug, Clone, PartialEq)]
pub struct LoadStats {
    pub slices: Vec<SliceStats>,
    pub whole: Distribution,
    pub busy_s: f64,
    /// Flush and background-work wait after the load.
    pub settle_s: f64,
    /// Bytes the engine wrote (WAL, flushes, compactions) during load and settle.
    pub bytes_written: Option<u64>,
    /// Bytes of the documents' JSON.
    pub document_bytes: u64,
}

/// PUTs `documents` into `engine` in `slices` equal slices (timing each PUT), then flushes and
/// waits for background work.
pub fn timed_load(
    context: &Context<'_>,
    engine: &dyn IndexEngine,
    documents: &[(u64, String)],
    slices: u32,
    label: &str,
) -> Result<LoadStats, BenchError> {
    context
        .progress
        .phase(label, documents.len() as u64, "documents");
    let start_written = engine.counters().bytes_written;
    let slices = u64::from(slices.max(1));
    let mut all = Vec::with_capacity(documents.len());
    let mut stats = Vec::new();
    let mut loaded = 0_usize;
    let mut busy = Duration::ZERO;
    let mut document_bytes = 0;
    for slice in 1..=slices {
        let end = (documents.len() as u64 * slice / slices) as usize;
        if end == loaded {
            continue;
        }
        let mut latencies = Vec::with_capacity(end - loaded);
        let mut slice_busy = Duration::ZERO;
        for (id, json) in &documents[loaded..end] {
            let started = Instant::now();
            engine.put(*id, json)?;
            let latency = started.elapsed();
            slice_busy += latency;
            latencies.push(latency.as_secs_f64() * 1e6);
            document_bytes += json.len() as u64;
        }
        context.progress.advance((end - loaded) as u64);
        context.check_interrupt()?;
        busy += slice_busy;
        stats.push(SliceStats {
            loaded: end as u64,
            count: (end - loaded) as u64,
            busy_s: slice_busy.as_secs_f64(),
            latency: Distribution::of(&latencies),
        });
        all.extend(latencies);
        loaded = end;
    }
    let settle_started = Instant::now();
    engine.flush()?;
    engine.wait_for_background_work()?;
    let settle_s = settle_started.elapsed().as_secs_f64();
    context.progress.phase_done();
    Ok(LoadStats {
        slices: stats,
        whole: Distribution::of(&all),
        busy_s: busy.as_secs_f64(),
        settle_s,
        bytes_written: match (start_written, engine.counters().bytes_written) {
            (Some(before), Some(after)) => Some(after.saturating_sub(before)),
            _ => None,
        },
        document_bytes,
    })
}

/// PUTs without timing (a preload), then settles.
pub fn untimed_load(
    context: &Context<'_>,
    engine: &dyn IndexEngine,
    documents: &[(u64, String)],
    label: &str,
) -> Result<(), BenchError> {
    context
        .progress
        .phase(label, documents.len() as u64, "documents");
    for chunk in documents.chunks(1000) {
        for (id, json) in chunk {
            engine.put(*id, json)?;
        }
        context.progress.advance(chunk.len() as u64);
        context.check_interrupt()?;
    }
    engine.flush()?;
    engine.wait_for_background_work()?;
    context.progress.phase_done();
    Ok(())
}

/// The directory of a settled database of `documents` with `slots`, closed: the one an
/// earlier experiment kept, or one loaded here (not timed) and kept for the next.
pub fn loaded_database(
    context: &Context<'_>,
    name: &str,
    slots: &[IndexSlot],
    documents: &[(u64, String)],
) -> Result<std::path::PathBuf, BenchError> {
    let key = context.load_key(documents.len() as u64, slots);
    let loading = shared::Loading::new(context.shared, key, true, || context.fresh_dir(name))?;
    let path = loading.path().to_path_buf();
    if loading.is_fresh() {
        let engine = context.open(&path, context.engine, slots)?;
        let loaded = untimed_load(
            context,
            engine.as_ref(),
            documents,
            &format!("{name}: load"),
        );
        let closed = engine.close();
        loaded?;
        closed?;
        loading.keep(context.shared);
    }
    Ok(path)
}

/// A query measurement: every latency of every pass, per-pass medians, the confidence
/// interval of the median, hits and blocks read per query.
#[derive(Debug, Clone, PartialEq)]
pub struct CellStats {
    pub all: Distribution,
    pub repetition_medians_us: Vec<f64>,
    /// 95% confidence interval of the median (order statistics, no distribution assumed).
    pub median_ci_us: (f64, f64),
    pub hits_per_query: f64,
    pub blocks_per_query: Option<f64>,
    /// Why the measurement stopped.
    pub stopped: CellStop,
}

/// Why a query measurement stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CellStop {
    /// The median's confidence interval became narrow enough.
    Precise,
    /// Every pass over the operations was done.
    Passes,
    /// The time cap was reached first.
    Time,
}

/// When a query measurement stops: as soon as the 95% confidence interval of its median is
/// within `precision` of the median (after at least `samples_min` queries), or after
/// `passes_max` passes over its operations, or after `seconds_max`, whichever comes first.
/// Cheap, steady cells stop early; the time goes to the noisy ones.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CellBudget {
    pub passes_max: u32,
    pub seconds_max: f64,
    /// Relative half-width of the median's 95% confidence interval, e.g. 0.03.
    pub precision: f64,
    pub samples_min: usize,
}

impl CellBudget {
    pub fn of(sizes: &Sizes) -> CellBudget {
        CellBudget {
            passes_max: sizes.repetitions.max(1),
            seconds_max: sizes.cell_seconds_max,
            precision: sizes.cell_precision,
            samples_min: sizes.cell_samples_min,
        }
    }
}

/// The 95% confidence interval of the median of `sorted` (ascending): the order statistics
/// at ranks n/2 ± 1.96·√n/2 (normal approximation of the binomial).
pub fn median_interval(sorted: &[f64]) -> (f64, f64) {
    if sorted.is_empty() {
        return (0.0, 0.0);
    }
    let n = sorted.len() as f64;
    let spread = 1.96 * n.sqrt() / 2.0;
    let low = ((n / 2.0 - spread).floor() as usize).clamp(1, sorted.len());
    let high = ((n / 2.0 + spread).ceil() as usize).clamp(1, sorted.len());
    (sorted[low - 1], sorted[high - 1])
}

/// Whether the median of `latencies` is known to within `precision` (relative half-width).
pub(crate) fn precise_enough(latencies: &[f64], precision: f64) -> bool {
    let mut sorted = latencies.to_vec();
    sorted.sort_by(f64::total_cmp);
    let median = sorted[(sorted.len() - 1) / 2];
    let (low, high) = median_interval(&sorted);
    median > 0.0 && (high - low) / 2.0 <= precision * median
}

/// Runs a tenth of `operations` as warm-up (at most a quarter of the time cap), then timed
/// passes over them until `budget` says stop (at least one timed operation is kept).
pub fn measure_cell(
    context: &Context<'_>,
    engine: &dyn IndexEngine,
    operations: &[Operation],
    budget: &CellBudget,
) -> Result<CellStats, BenchError> {
    // Warm-up: a tenth of the operations, within a quarter of the time cap (at the quick
    // preset's size an unlimited 100-minute RANGELOOKUP takes most of a second).
    let warm_up = operations.len().div_ceil(10);
    let warm_up_deadline = Duration::from_secs_f64(budget.seconds_max.max(0.0) / 4.0);
    let warm_up_started = Instant::now();
    for operation in &operations[..warm_up] {
        execute(engine, operation)?;
        if warm_up_started.elapsed() >= warm_up_deadline {
            break;
        }
    }
    let before_blocks = engine.counters().blocks_read;
    let deadline = Duration::from_secs_f64(budget.seconds_max.max(0.0));
    let started = Instant::now();
    let mut all: Vec<f64> = Vec::new();
    let mut medians = Vec::new();
    let mut hits = 0;
    // The interval is checked at growing sample counts (each check sorts).
    let mut next_check = budget.samples_min.max(2);
    let mut stopped = CellStop::Passes;
    'passes: for _ in 0..budget.passes_max.max(1) {
        let pass_start = all.len();
        for operation in operations {
            let (latency, found) = execute(engine, operation)?;
            all.push(latency.as_secs_f64() * 1e6);
            hits += found;
            if all.len() >= next_check {
                next_check = all.len() + all.len() / 4;
                if precise_enough(&all, budget.precision) {
                    stopped = CellStop::Precise;
                }
            }
            if stopped == CellStop::Passes && started.elapsed() >= deadline {
                stopped = CellStop::Time;
            }
            if stopped != CellStop::Passes {
                medians.push(Distribution::of(&all[pass_start..]).p50);
                break 'passes;
            }
        }
        medians.push(Distribution::of(&all[pass_start..]).p50);
        context.check_interrupt()?;
    }
    context.progress.advance(1);
    let count = all.len().max(1) as f64;
    let mut sorted = all.clone();
    sorted.sort_by(f64::total_cmp);
    let (low, high) = median_interval(&sorted);
    Ok(CellStats {
        all: Distribution::of(&all),
        repetition_medians_us: medians,
        median_ci_us: (round(low, 3), round(high, 3)),
        hits_per_query: round(hits as f64 / count, 3),
        blocks_per_query: match (before_blocks, engine.counters().blocks_read) {
            (Some(before), Some(after)) => {
                Some(round(after.saturating_sub(before) as f64 / count, 3))
            }
            _ => None,
        },
        stopped,
    })
}

/// Runs `work(i)` for each `i` in `0..threads` on scoped threads and returns each thread's
/// outcome in order; a thread that panicked is an error naming its `role`.
pub fn on_threads<T: Send>(
    threads: usize,
    role: &str,
    work: impl Fn(usize) -> Result<T, BenchError> + Sync,
) -> Vec<Result<T, BenchError>> {
    let work = &work;
    std::thread::scope(|scope| {
        let handles: Vec<_> = (0..threads)
            .map(|thread| scope.spawn(move || work(thread)))
            .collect();
        handles
            .into_iter()
            .map(|handle| {
                handle
                    .join()
                    .unwrap_or_else(|_| Err(BenchError::new(format!("a {role} thread panicked"))))
            })
            .collect()
    })
}

/// The blocks read per query of a cell, labelled like `labelled` (when the engine counts them).
pub fn push_blocks(out: &mut Vec<Measurement>, labelled: &Measurement, cell: &CellStats) {
    if let Some(blocks) = cell.blocks_per_query {
        out.push(Measurement {
            metric: "blocks_read_per_query".to_owned(),
            unit: "blocks".to_owned(),
            value: blocks,
            count: Some(cell.all.count),
            ..labelled.clone()
        });
    }
}

/// Bytes on disk grouped into data, index and other trees.
pub fn grouped_sizes(engine: &dyn IndexEngine) -> Result<Vec<(&'static str, u64)>, BenchError> {
    let mut data = 0;
    let mut index = 0;
    let mut other = 0;
    for (tree, bytes) in engine.disk_bytes_per_tree()? {
        if tree == "data" {
            data += bytes;
        } else if tree.starts_with("index ") {
            index += bytes;
        } else {
            other += bytes;
        }
    }
    Ok(vec![("data", data), ("index", index), ("other", other)])
}

/// Records a configuration that could not be measured in `notes`.
pub fn note_failure(notes: &mut Vec<String>, what: &str, error: &BenchError) {
    notes.push(format!("{what}: not measured ({error})"));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn experiment_ids_round_trip() {
        for id in ExperimentId::ALL {
            assert_eq!(id.id().parse::<ExperimentId>().unwrap(), id);
            assert_eq!(id.number().to_string().parse::<ExperimentId>().unwrap(), id);
        }
        assert!("nope".parse::<ExperimentId>().is_err());
    }

    #[test]
    fn distribution_of_known_values() {
        let values: Vec<f64> = (1..=100).map(f64::from).collect();
        let distribution = Distribution::of(&values);
        assert_eq!(distribution.count, 100);
        assert_eq!(
            (distribution.p5, distribution.p25, distribution.p50),
            (5.0, 25.0, 50.0)
        );
        assert_eq!(
            (distribution.p75, distribution.p95, distribution.max),
            (75.0, 95.0, 100.0)
        );
        assert!((distribution.mean - 50.5).abs() < 1e-9);
        assert_eq!(Distribution::of(&[]), Distribution::default());
    }

    #[test]
    fn median_interval_narrows_with_samples() {
        // 100 values 1..=100: ranks 50 ± 9.8 -> the 40th and 60th values.
        let hundred: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(median_interval(&hundred), (40.0, 60.0));
        // 10,000 values 1..=10,000: ranks 5000 ± 98.
        let many: Vec<f64> = (1..=10_000).map(f64::from).collect();
        assert_eq!(median_interval(&many), (4902.0, 5098.0));
        assert_eq!(median_interval(&[7.0]), (7.0, 7.0));
        assert_eq!(median_interval(&[]), (0.0, 0.0));
        // Steady values are precise at once; a wide spread is not.
        assert!(precise_enough(&[10.0; 60], 0.01));
        assert!(!precise_enough(&hundred, 0.1));
        assert!(precise_enough(&many, 0.03));
    }
}
