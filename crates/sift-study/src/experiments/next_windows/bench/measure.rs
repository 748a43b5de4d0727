//! Measuring one case: load the documents under one configuration, query every window, and
//! record latencies, blocks read, sizes and the global index's memory.

use super::data::queries;
use super::data::Documents;
use super::data::Query;
use super::error;
use super::plan::Case;
use super::plan::CellSpec;
use super::plan::QueryOp;
use super::plan::Suite;
use super::plan::Target;
use super::plan::TargetFields;
use super::COLLECTION;
use sift_bench::index::BenchError;
use sift_index::{
    AttrValue, Database, DatabaseOptions, IndexKind, IndexSpec, SplitDelta, Validation,
};
use std::path::Path;
use std::time::{Duration, Instant};

/// Latencies of one cell, microseconds, and what the queries returned and read.
#[derive(Debug, Clone, PartialEq)]
pub struct CellResult {
    pub spec: CellSpec,
    /// Width in the target's unit (values, ms, degrees).
    pub width: f64,
    pub latencies_us: Vec<f64>,
    pub hits_per_query: f64,
    pub blocks_per_query: f64,
}

/// The timed load.
#[derive(Debug, Clone, PartialEq)]
pub struct LoadResult {
    pub documents: u64,
    pub latencies_us: Vec<f64>,
    /// Time inside the PUT calls.
    pub busy_s: f64,
    /// Flush and background-work wait after the load.
    pub settle_s: f64,
}

impl LoadResult {
    pub fn ops_per_sec(&self) -> f64 {
        if self.busy_s > 0.0 {
            self.documents as f64 / self.busy_s
        } else {
            0.0
        }
    }
}

/// Sizes after the load (flushed, compactions done).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SizeResult {
    /// The primary tree on disk (documents; NEXT's and embedded indexes' blocks live in it).
    pub data_bytes: u64,
    /// Index trees on disk (composite, eager, lazy).
    pub index_bytes: u64,
    /// Memory of the indexes (`Database::memory_bytes`: memory indexes, NEXT's global index
    /// and memo, embedded maps of recent writes).
    pub index_memory_bytes: u64,
    /// NEXT only: the global index (its memory and entries, one per secondary block).
    pub global_index_bytes: Option<u64>,
    pub global_index_entries: Option<u64>,
}

/// The global index against the data, at the end of a tenth of the load (not flushed: the
/// global index describes the files written so far).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MemoryPoint {
    pub documents: u64,
    pub data_bytes: u64,
    /// The global index alone (over the live tables' secondary index blocks).
    pub global_index_bytes: u64,
    /// All the index holds in memory: the global index, the memtables' map of secondary values
    /// (one entry per unflushed write) and the update memo. During a load the map dominates.
    pub index_memory_bytes: u64,
}

/// Everything measured for a case.
#[derive(Debug, Clone, PartialEq)]
pub struct CaseResult {
    pub case: Case,
    /// The targets indexed (the fallback when the first choice was refused).
    pub targets: Vec<Target>,
    /// Why something was not measured or was replaced.
    pub note: Option<String>,
    pub load: Option<LoadResult>,
    pub size: Option<SizeResult>,
    pub memory_curve: Vec<MemoryPoint>,
    pub cells: Vec<CellResult>,
}

/// How a case's database is opened and how long its cells run.
pub struct CaseSettings<'a> {
    pub options: &'a (dyn Fn() -> DatabaseOptions + Sync),
    pub queries: u64,
    pub repetitions: u32,
    pub seconds_max: f64,
    pub seed: u64,
    /// Slices of the load at which the global-index memory is recorded.
    pub memory_slices: u32,
    /// A cell also stops once its median is known to this fraction at 95% confidence, after
    /// at least `samples_min` queries (0: only the repetitions and the time cap stop it).
    pub precision: f64,
    pub samples_min: usize,
    /// Where the targets are in the documents.
    pub fields: &'a TargetFields,
}

pub(crate) fn index_spec(
    case: &Case,
    target: Target,
    fields: &TargetFields,
) -> Result<IndexSpec, BenchError> {
    let mut parts = case.configuration.split(':');
    let kind: IndexKind = parts.next().unwrap_or_default().parse().map_err(error)?;
    let mut spec = IndexSpec::new(
        target.index_name(),
        fields.path(target),
        fields.attr_type(target),
        kind,
    );
    if let Some(m) = parts.next() {
        match m.parse::<Validation>() {
            Ok(validation) if matches!(kind, IndexKind::Next | IndexKind::SstLocal) => {
                spec = spec.with_validation(validation);
            }
            _ => spec = spec.with_maintenance(m.parse().map_err(error)?),
        }
    }
    if matches!(kind, IndexKind::Next | IndexKind::SstLocal) && target != Target::Geo {
        if let Some(delta) = case.split_delta.and_then(SplitDelta::new) {
            spec = spec.with_split_delta(delta);
        }
    }
    Ok(spec)
}

pub(crate) fn blocks_read(database: &Database) -> u64 {
    let stats = database.engine().stats();
    stats.blocks_read_from_disk + stats.blocks_read_from_cache
}

pub(crate) fn primary_tree_bytes(database: &Database) -> u64 {
    let Ok(info) = database.collection(COLLECTION) else {
        return 0;
    };
    let name = info.record.primary_tree_name();
    database
        .engine()
        .stats()
        .trees
        .iter()
        .filter(|t| t.name == name)
        .map(|t| t.levels.iter().map(|l| l.bytes).sum::<u64>())
        .sum()
}

pub(crate) fn sizes(
    database: &Database,
    targets: &[Target],
    kind: &str,
) -> Result<SizeResult, BenchError> {
    let info = database.collection(COLLECTION).map_err(error)?;
    let primary = info.record.primary_tree_name();
    let index_trees: Vec<&String> = info
        .indexes
        .iter()
        .filter_map(|i| i.tree.as_ref())
        .collect();
    let stats = database.engine().stats();
    let mut data_bytes = 0;
    let mut index_bytes = 0;
    for tree in &stats.trees {
        let bytes: u64 = tree.levels.iter().map(|l| l.bytes).sum();
        if tree.name == primary {
            data_bytes += bytes;
        } else if index_trees.contains(&&tree.name) {
            index_bytes += bytes;
        }
    }
    let mut index_memory_bytes = 0;
    let mut global_index_bytes = None;
    let mut global_index_entries = None;
    for target in targets {
        index_memory_bytes += database
            .memory_bytes(COLLECTION, target.index_name())
            .map_err(error)?;
        if kind == "next" {
            let report = database
                .global_index_stats(COLLECTION, target.index_name())
                .map_err(error)?;
            *global_index_bytes.get_or_insert(0) += report.memory_bytes;
            *global_index_entries.get_or_insert(0) += report.blocks as u64;
        }
    }
    Ok(SizeResult {
        data_bytes,
        index_bytes,
        index_memory_bytes,
        global_index_bytes,
        global_index_entries,
    })
}

pub(crate) fn execute(
    database: &Database,
    index: &str,
    query: &Query,
) -> Result<usize, BenchError> {
    let result = match query {
        Query::Range { lo, hi } => database.range(COLLECTION, index, lo, hi, None),
        Query::Lookup(value) => database.lookup(COLLECTION, index, value, None),
        Query::Within(geo_box) => database.within(COLLECTION, index, geo_box, None),
    }
    .map_err(error)?;
    Ok(result.hits.len())
}

pub(crate) fn measure_cell(
    database: &Database,
    spec: &CellSpec,
    width: f64,
    queries: &[Query],
    settings: &CaseSettings<'_>,
) -> Result<CellResult, BenchError> {
    let index = spec.target.index_name();
    // Warm-up: a tenth of the queries, within a quarter of the time cap.
    let warm_up_started = Instant::now();
    for query in &queries[..queries.len().div_ceil(10)] {
        execute(database, index, query)?;
        if warm_up_started.elapsed().as_secs_f64() >= settings.seconds_max / 4.0 {
            break;
        }
    }
    let before = blocks_read(database);
    let deadline = Duration::from_secs_f64(settings.seconds_max.max(0.0));
    let started = Instant::now();
    let mut latencies_us = Vec::new();
    let mut hits = 0;
    let mut next_check = settings.samples_min.max(2);
    'repetitions: for _ in 0..settings.repetitions.max(1) {
        for query in queries {
            let query_started = Instant::now();
            hits += execute(database, index, query)?;
            latencies_us.push(query_started.elapsed().as_secs_f64() * 1e6);
            if started.elapsed() >= deadline {
                break 'repetitions;
            }
            if settings.precision > 0.0 && latencies_us.len() >= next_check {
                next_check = latencies_us.len() + latencies_us.len() / 4;
                if crate::experiments::precise_enough(&latencies_us, settings.precision) {
                    break 'repetitions;
                }
            }
        }
    }
    let count = latencies_us.len().max(1) as f64;
    Ok(CellResult {
        spec: spec.clone(),
        width,
        hits_per_query: hits as f64 / count,
        blocks_per_query: blocks_read(database).saturating_sub(before) as f64 / count,
        latencies_us,
    })
}

/// Opens a database in `dir` with `targets` indexed; `Err` with the reason when an index is
/// refused.
pub(crate) fn open(
    case: &Case,
    targets: &[Target],
    dir: &Path,
    settings: &CaseSettings<'_>,
) -> Result<Database, BenchError> {
    let database = Database::open(dir, (settings.options)()).map_err(error)?;
    let created = (|| {
        database
            .create_collection(COLLECTION, &settings.fields.primary_key)
            .map_err(error)?;
        for &target in targets {
            database
                .create_index(COLLECTION, index_spec(case, target, settings.fields)?)
                .map_err(error)?;
        }
        Ok(())
    })();
    match created {
        Ok(()) => Ok(database),
        Err(e) => {
            let _ = database.close();
            Err(e)
        }
    }
}

pub(crate) fn empty_dir(dir: &Path) -> Result<(), BenchError> {
    if dir.exists() {
        std::fs::remove_dir_all(dir)
            .map_err(|e| BenchError::new(format!("cannot remove {}: {e}", dir.display())))?;
    }
    std::fs::create_dir_all(dir)
        .map_err(|e| BenchError::new(format!("cannot create {}: {e}", dir.display())))
}

/// Keeps cases with fallback targets comparable: when any of them cannot index its first
/// choice (probed in a scratch database under `scratch`: a kind without geo support), every
/// one of them indexes its fallback instead (score + created_at), with a note saying why.
pub fn align_fallbacks(
    cases: &mut [Case],
    scratch: &Path,
    settings: &CaseSettings<'_>,
) -> Result<(), BenchError> {
    let dir = scratch.join("probe");
    let mut refusal = None;
    for case in cases.iter().filter(|c| c.fallback_targets.is_some()) {
        empty_dir(&dir)?;
        match open(case, &case.targets, &dir, settings) {
            Ok(database) => database.close().map_err(error)?,
            Err(e) => {
                refusal = Some(format!("{}: {e}", case.configuration));
                break;
            }
        }
    }
    if dir.exists() {
        std::fs::remove_dir_all(&dir)
            .map_err(|e| BenchError::new(format!("cannot remove {}: {e}", dir.display())))?;
    }
    let Some(reason) = refusal else {
        return Ok(());
    };
    for case in cases.iter_mut() {
        if let Some(fallback) = case.fallback_targets.take() {
            case.note = Some(format!(
                "indexed {} in every configuration of this suite ({reason})",
                fallback
                    .iter()
                    .map(|t| t.path())
                    .collect::<Vec<_>>()
                    .join(" + ")
            ));
            case.targets = fallback;
        }
    }
    Ok(())
}

/// Loads and queries one case in `dir` (emptied first), with the suite's cells.
pub fn run_case(
    case: &Case,
    documents: &Documents,
    dir: &Path,
    settings: &CaseSettings<'_>,
) -> Result<CaseResult, BenchError> {
    let (database, mut result) = load_case(case, documents, dir, settings)?;
    let Some(database) = database else {
        return Ok(result);
    };
    let cells = result.case.cells(&result.targets);
    let measured = query_case(&database, documents, settings, &mut result, &cells);
    let closed = database.close().map_err(error);
    measured?;
    closed?;
    Ok(result)
}

/// Opens the case's database in `dir` (emptied first; the fallback targets when the first
/// choice is refused) and loads it, timing every PUT; the database is `None` when neither
/// could be indexed (the result's note says why). The caller queries it ([`query_case`]) and
/// closes it.
pub fn load_case(
    case: &Case,
    documents: &Documents,
    dir: &Path,
    settings: &CaseSettings<'_>,
) -> Result<(Option<Database>, CaseResult), BenchError> {
    let mut result = CaseResult {
        case: case.clone(),
        targets: case.targets.clone(),
        note: case.note.clone(),
        load: None,
        size: None,
        memory_curve: Vec::new(),
        cells: Vec::new(),
    };
    empty_dir(dir)?;
    let database = match open(case, &case.targets, dir, settings) {
        Ok(database) => database,
        Err(first) => {
            let Some(fallback) = &case.fallback_targets else {
                result.note = Some(format!("not measured: {first}"));
                return Ok((None, result));
            };
            empty_dir(dir)?;
            match open(case, fallback, dir, settings) {
                Ok(database) => {
                    result.note = Some(format!(
                        "indexed {} instead ({first})",
                        fallback
                            .iter()
                            .map(|t| t.path())
                            .collect::<Vec<_>>()
                            .join(" + ")
                    ));
                    result.targets.clone_from(fallback);
                    database
                }
                Err(second) => {
                    result.note = Some(format!("not measured: {first}; {second}"));
                    return Ok((None, result));
                }
            }
        }
    };
    match load_and_settle(&database, documents, settings, &mut result) {
        Ok(()) => Ok((Some(database), result)),
        Err(e) => {
            let _ = database.close();
            Err(e)
        }
    }
}

fn load_and_settle(
    database: &Database,
    documents: &Documents,
    settings: &CaseSettings<'_>,
    result: &mut CaseResult,
) -> Result<(), BenchError> {
    let kind = result.case.kind().to_owned();
    let targets = result.targets.clone();
    let total = documents.jsons.len();
    let slices = settings.memory_slices.max(1) as usize;
    let mut latencies_us = Vec::with_capacity(total);
    let mut busy = Duration::ZERO;
    let mut loaded = 0;
    for slice in 1..=slices {
        let end = total * slice / slices;
        for (_, json) in &documents.jsons[loaded..end] {
            let started = Instant::now();
            database.put(COLLECTION, json.as_bytes()).map_err(error)?;
            let latency = started.elapsed();
            busy += latency;
            latencies_us.push(latency.as_secs_f64() * 1e6);
        }
        loaded = end;
        if kind == "next" && result.case.suite == Suite::Windows {
            if let Some(point) = memory_point(database, &targets, end as u64)? {
                result.memory_curve.push(point);
            }
        }
    }
    let settle_started = Instant::now();
    database.flush().map_err(error)?;
    database.wait_until_indexed().map_err(error)?;
    database
        .engine()
        .wait_for_background_work()
        .map_err(error)?;
    if kind == "next" && result.case.suite == Suite::Windows {
        // The settled end of the curve: everything flushed.
        if let Some(point) = memory_point(database, &targets, total as u64)? {
            result.memory_curve.push(point);
        }
    }
    result.load = Some(LoadResult {
        documents: total as u64,
        latencies_us,
        busy_s: busy.as_secs_f64(),
        settle_s: settle_started.elapsed().as_secs_f64(),
    });
    result.size = Some(sizes(database, &targets, &kind)?);
    Ok(())
}

/// Measures `cells` on a loaded case's database (cells on targets it does not index are
/// skipped).
pub fn query_case(
    database: &Database,
    documents: &Documents,
    settings: &CaseSettings<'_>,
    result: &mut CaseResult,
    cells: &[CellSpec],
) -> Result<(), BenchError> {
    let time_span = match (
        documents.times_ms.iter().min(),
        documents.times_ms.iter().max(),
    ) {
        (Some(first), Some(last)) => (last - first).max(1) as f64,
        _ => 1.0,
    };
    for spec in cells {
        if !result.targets.contains(&spec.target) {
            continue;
        }
        let queries = queries(
            spec,
            documents,
            settings.fields.attr_type(Target::Score),
            settings.queries,
            settings.seed,
        )?;
        if queries.is_empty() {
            continue;
        }
        let width = match (spec.op, spec.target) {
            (QueryOp::Lookup, _) => 0.0,
            (QueryOp::Window, Target::Score) => (spec.size * documents.score_span as f64).round(),
            (QueryOp::Window, Target::CreationTime) => (spec.size * time_span).round(),
            (QueryOp::Window, Target::Geo) => spec.size,
        };
        let cell = measure_cell(database, spec, width, &queries, settings)?;
        result.cells.push(cell);
    }
    Ok(())
}

/// The global index against the data tree now; `None` before the first flush (no file,
/// nothing to compare).
pub(crate) fn memory_point(
    database: &Database,
    targets: &[Target],
    documents: u64,
) -> Result<Option<MemoryPoint>, BenchError> {
    let data_bytes = primary_tree_bytes(database);
    if data_bytes == 0 {
        return Ok(None);
    }
    let mut global_index_bytes = 0;
    let mut index_memory_bytes = 0;
    for target in targets {
        // The global index loads the directories of new files at its next query: ask one
        // that matches nothing (scores start at 1) so the memory is up to date.
        if *target == Target::Score {
            let zero = AttrValue::Int(0);
            database
                .range(COLLECTION, target.index_name(), &zero, &zero, Some(1))
                .map_err(error)?;
        }
        index_memory_bytes += database
            .memory_bytes(COLLECTION, target.index_name())
            .map_err(error)?;
        global_index_bytes += database
            .global_index_stats(COLLECTION, target.index_name())
            .map_err(error)?
            .memory_bytes;
    }
    Ok(Some(MemoryPoint {
        documents,
        data_bytes,
        global_index_bytes,
        index_memory_bytes,
    }))
}

/// Percentile by nearest rank of sorted values (0 when empty).
pub fn percentile(sorted: &[f64], quantile: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = (quantile * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

pub(crate) fn sorted(values: &[f64]) -> Vec<f64> {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    sorted
}

pub(crate) fn mean(values: &[f64]) -> f64 {
    if values.is_empty() {
        0.0
    } else {
        values.iter().sum::<f64>() / values.len() as f64
    }
}
