//! The index benchmark runner: loads `tweets` synthetic tweets into an `IndexEngine` (one row
//! per tenth of the load, so PUT throughput can be plotted over time), flushes, then runs the
//! static queries of Table 7a (GETs; LOOKUPs on each indexed attribute for each top-K;
//! RANGELOOKUPs for each selectivity and top-K) or a mixed workload of Table 7b, and reports
//! one `IndexRow` per measurement.
//!
//! Every engine sees the same operations: the operations of a measurement are generated
//! before it runs (so a measurement cut short by the time limit does not shift the queries of
//! the next one). Times are those spent inside the engine's calls: document generation is
//! not counted.

use super::report::{round_to, top_k_value, IndexRow, Latencies};
use super::{BenchError, EngineCounters, IndexEngine};
use crate::kv::process_io;
use sift_workload::{
    table7, Attribute, Operation, OperationKind, QueryParameters, TweetConfig, Workload,
    WorkloadGenerator,
};
use std::collections::BTreeMap;
use std::str::FromStr;
use std::time::{Duration, Instant};

/// Rows per phase for the throughput curve.
pub const SLICES: u64 = 10;
/// RANGELOOKUP rows: how many of the measured queries are re-run (untimed) to count the
/// blocks that hold their results.
pub const RESULT_BLOCK_QUERIES: usize = 20;

/// A query's top-K: a number of hits, or all (`all` on the command line).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TopK(pub Option<usize>);

impl FromStr for TopK {
    type Err = BenchError;

    fn from_str(text: &str) -> Result<TopK, BenchError> {
        if text == "all" {
            return Ok(TopK(None));
        }
        match text.parse::<usize>() {
            Ok(k) if k > 0 => Ok(TopK(Some(k))),
            _ => Err(BenchError::new(format!(
                "top-K {text:?}: expected a positive number or \"all\""
            ))),
        }
    }
}

impl std::fmt::Display for TopK {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.0 {
            Some(k) => write!(f, "{k}"),
            None => f.write_str("all"),
        }
    }
}

/// What to run, validated (see `IndexBenchArgs::config`).
#[derive(Debug, Clone, PartialEq)]
pub struct IndexBenchConfig {
    /// Tweets loaded first (`--n`).
    pub tweets: u64,
    pub indexes: Vec<super::IndexSpec>,
    pub workload: Workload,
    /// Static: every top-K measured; mixed: the first is the LOOKUP top-K.
    pub top_ks: Vec<Option<usize>>,
    /// Operations of a mixed workload after the load.
    pub mixed_operations: u64,
    /// Static: operations per measurement (each stops early at `measurement_seconds_max`).
    pub gets: u64,
    pub lookups: u64,
    pub range_lookups: u64,
    pub measurement_seconds_max: f64,
    pub cache_bytes: usize,
    pub seed: u64,
    /// Sift's memtable size (and table-file target; level 1 is 4×); `None`: the engine's.
    pub memtable_bytes: Option<usize>,
    /// Bloom bits per value of `embedded` indexes (`None`: the index layer's default).
    pub bloom_bits_per_key: Option<u32>,
    /// δ of the value-aware split of `next` / `sst-local` indexes (`None`: no split).
    pub split_delta: Option<f64>,
    /// `--compact`: every tree compacted fully between the load and the queries.
    pub compact_after_load: bool,
    /// CPUs the engine's background threads are pinned to (Sift only; `None`: not pinned).
    pub background_cpus: Option<Vec<usize>>,
    /// CPUs the client thread is pinned to (`None`: not pinned); `run_from_args` pins it.
    pub client_cpus: Option<Vec<usize>>,
}

impl IndexBenchConfig {
    /// A small configuration with the paper's query shapes, for tests.
    pub fn small(tweets: u64, workload: Workload) -> IndexBenchConfig {
        IndexBenchConfig {
            tweets,
            indexes: Attribute::ALL
                .into_iter()
                .map(|attribute| super::IndexSpec {
                    attribute,
                    kind: "composite".to_owned(),
                    maintenance: None,
                })
                .collect(),
            workload,
            top_ks: default_top_ks(workload),
            mixed_operations: tweets,
            gets: 100,
            lookups: 50,
            range_lookups: 20,
            measurement_seconds_max: 60.0,
            cache_bytes: crate::kv::settings::DEFAULT_CACHE_BYTES,
            seed: 7,
            memtable_bytes: None,
            bloom_bits_per_key: None,
            split_delta: None,
            compact_after_load: false,
            background_cpus: None,
            client_cpus: None,
        }
    }
}

/// Table 7: 10, 100 and all for the static workload; 10 for the mixed ones.
pub fn default_top_ks(workload: Workload) -> Vec<Option<usize>> {
    if workload == Workload::Static {
        table7::STATIC_TOP_K.to_vec()
    } else {
        vec![Some(table7::MIXED_TOP_K)]
    }
}

/// Table 7a's RANGELOOKUP widths: users for UserID, minutes for CreationTime.
pub fn selectivities(attribute: Attribute) -> &'static [u64] {
    match attribute {
        Attribute::UserId => &table7::USER_RANGE_SELECTIVITY_USERS,
        Attribute::CreationTime => &table7::TIME_RANGE_SELECTIVITY_MINUTES,
    }
}

fn delta(before: Option<u64>, after: Option<u64>) -> Option<u64> {
    Some(after?.saturating_sub(before?))
}

/// Counters at the start of a measurement.
struct Snapshot {
    counters: EngineCounters,
    process_written: Option<u64>,
}

impl Snapshot {
    fn take(engine: &dyn IndexEngine) -> Snapshot {
        Snapshot {
            counters: engine.counters(),
            process_written: process_io::written_bytes(),
        }
    }
}

/// One measurement in progress.
struct Measurement {
    latencies: Latencies,
    busy: Duration,
    hits: u64,
    start: Snapshot,
}

impl Measurement {
    fn start(engine: &dyn IndexEngine) -> Result<Measurement, BenchError> {
        Ok(Measurement {
            latencies: Latencies::new()?,
            busy: Duration::ZERO,
            hits: 0,
            start: Snapshot::take(engine),
        })
    }

    fn record(&mut self, latency: Duration, hits: u64) {
        self.latencies.record(latency);
        self.busy += latency;
        self.hits += hits;
    }
}

/// Builds rows with the fields common to a run.
struct RowMaker {
    engine: String,
    workload: String,
    tweets: u64,
    seed: u64,
    cache_bytes: u64,
    settings: String,
    background_cpus: Option<Vec<usize>>,
    client_cpus: Option<Vec<usize>>,
}

impl RowMaker {
    fn row(
        &self,
        phase: &str,
        op: &str,
        measurement: &Measurement,
        engine: &dyn IndexEngine,
    ) -> IndexRow {
        let end = engine.counters();
        let n = measurement.latencies.count();
        let elapsed_s = measurement.busy.as_secs_f64();
        let percentiles = measurement.latencies.percentiles();
        let per_op = |total: Option<u64>| {
            total
                .filter(|_| n > 0)
                .map(|total| round_to(total as f64 / n as f64, 3))
        };
        IndexRow {
            engine: self.engine.clone(),
            workload: self.workload.clone(),
            phase: phase.to_owned(),
            op: op.to_owned(),
            attribute: None,
            index_kind: None,
            maintenance: None,
            top_k: None,
            selectivity: None,
            slice: None,
            n,
            elapsed_s: round_to(elapsed_s, 6),
            ops_per_sec: if elapsed_s > 0.0 {
                round_to(n as f64 / elapsed_s, 1)
            } else {
                0.0
            },
            mean_us: percentiles.mean_us,
            p50_us: percentiles.p50_us,
            p90_us: percentiles.p90_us,
            p99_us: percentiles.p99_us,
            max_us: percentiles.max_us,
            hits_per_op: None,
            blocks_per_op: per_op(delta(
                measurement.start.counters.blocks_read,
                end.blocks_read,
            )),
            result_blocks_per_op: None,
            bytes_written: delta(measurement.start.counters.bytes_written, end.bytes_written),
            process_write_bytes: delta(
                measurement.start.process_written,
                process_io::written_bytes(),
            ),
            bytes_on_disk: None,
            bytes_on_disk_per_tree: None,
            background_wait_s: None,
            tweets: self.tweets,
            seed: self.seed,
            cache_bytes: self.cache_bytes,
            settings: self.settings.clone(),
            background_cpus: self.background_cpus.clone(),
            client_cpus: self.client_cpus.clone(),
        }
    }
}

/// Labels of the indexes as the engine implements them: attribute paths, kinds and
/// maintenances, each `+`-joined (for write rows).
fn write_labels(
    config: &IndexBenchConfig,
    engine: &dyn IndexEngine,
) -> (Option<String>, Option<String>, Option<String>) {
    if config.indexes.is_empty() {
        return (None, None, None);
    }
    let mut paths = Vec::new();
    let mut kinds = Vec::new();
    let mut maintenances = Vec::new();
    for spec in &config.indexes {
        let (kind, maintenance) = engine.index_labels(spec.attribute).unwrap_or_else(|| {
            (
                spec.kind.clone(),
                spec.maintenance.clone().unwrap_or_default(),
            )
        });
        paths.push(spec.path().to_owned());
        kinds.push(kind);
        maintenances.push(maintenance);
    }
    (
        Some(paths.join("+")),
        Some(kinds.join("+")),
        Some(maintenances.join("+")),
    )
}

/// Runs the benchmark on an engine opened (empty) with `config.indexes`, calling `on_row` as
/// each measurement finishes. Returns every row.
pub fn run_index_benchmark(
    config: &IndexBenchConfig,
    engine: &dyn IndexEngine,
    on_row: &mut dyn FnMut(&IndexRow) -> Result<(), BenchError>,
) -> Result<Vec<IndexRow>, BenchError> {
    let mut queries = QueryParameters::default();
    if let Some(&top_k) = config.top_ks.first() {
        queries.top_k = top_k;
    }
    let is_static = config.workload == Workload::Static;
    if !is_static && engine.index_labels(queries.lookup_attribute).is_none() {
        return Err(BenchError::new(format!(
            "the {} workload looks up {}: give it an index (--index {}:KIND)",
            config.workload,
            queries.lookup_attribute.path(),
            queries.lookup_attribute.path()
        )));
    }
    let tweet_config = TweetConfig::for_tweets(config.tweets.max(1), config.seed);
    let mut generator = WorkloadGenerator::new(tweet_config, config.workload)
        .map_err(|e| BenchError::new(format!("workload: {e}")))?
        .with_queries(queries);
    let maker = RowMaker {
        engine: engine.name().to_owned(),
        workload: config.workload.name().to_owned(),
        tweets: config.tweets,
        seed: config.seed,
        cache_bytes: config.cache_bytes as u64,
        settings: engine.settings_note(),
        background_cpus: config.background_cpus.clone(),
        client_cpus: config.client_cpus.clone(),
    };
    let mut rows = Vec::new();
    let mut emit = |row: IndexRow, rows: &mut Vec<IndexRow>| -> Result<(), BenchError> {
        on_row(&row)?;
        rows.push(row);
        Ok(())
    };
    let (write_paths, write_kinds, write_maintenances) = write_labels(config, engine);
    let label_write_row = |mut row: IndexRow| {
        row.attribute.clone_from(&write_paths);
        row.index_kind.clone_from(&write_kinds);
        row.maintenance.clone_from(&write_maintenances);
        row
    };

    // Load, one row per tenth, then the whole.
    if config.tweets > 0 {
        let mut whole = Measurement::start(engine)?;
        let mut loaded = 0;
        for slice in 1..=SLICES {
            let end = config.tweets * slice / SLICES;
            if end == loaded {
                continue;
            }
            let mut part = Measurement::start(engine)?;
            // One JSON buffer for the whole load: the generator allocates nothing per tweet.
            let mut spare_json = String::new();
            while loaded < end {
                let Operation::Put(tweet) = generator.put_reusing(std::mem::take(&mut spare_json))
                else {
                    return Err(BenchError::new("the workload generator returned no PUT"));
                };
                let started = Instant::now();
                engine.put(tweet.fields.tweet_id, &tweet.json)?;
                let latency = started.elapsed();
                part.record(latency, 0);
                whole.record(latency, 0);
                loaded += 1;
                spare_json = tweet.json;
            }
            let mut row = label_write_row(maker.row("load", "PUT", &part, engine));
            row.slice = Some(slice as u32);
            emit(row, &mut rows)?;
        }
        let row = settle_and_measure_disk(engine, &maker, "load", "PUT", &whole)?;
        emit(label_write_row(row), &mut rows)?;
        if config.compact_after_load {
            engine.compact_all()?;
        }
    }

    if is_static {
        run_static_queries(config, engine, &mut generator, &maker, &mut |row| {
            emit(row, &mut rows)
        })?;
    } else {
        let mixed = run_mixed(config, engine, &mut generator, &maker, queries)?;
        for row in mixed {
            let row = if matches!(row.op.as_str(), "PUT" | "UPDATE" | "MIXED") {
                label_write_row(row)
            } else {
                row
            };
            emit(row, &mut rows)?;
        }
    }
    Ok(rows)
}

/// Flushes, waits for background work and measures the disk: the whole-phase write row.
fn settle_and_measure_disk(
    engine: &dyn IndexEngine,
    maker: &RowMaker,
    phase: &str,
    op: &str,
    whole: &Measurement,
) -> Result<IndexRow, BenchError> {
    let wait_started = Instant::now();
    engine.flush()?;
    engine.wait_for_background_work()?;
    let background_wait = wait_started.elapsed();
    let trees = engine.disk_bytes_per_tree()?;
    let mut row = maker.row(phase, op, whole, engine);
    row.bytes_on_disk = Some(trees.values().sum());
    row.bytes_on_disk_per_tree = Some(trees);
    row.background_wait_s = Some(round_to(background_wait.as_secs_f64(), 6));
    Ok(row)
}

/// Runs the operations of one measurement until done or out of time.
fn measure_queries(
    config: &IndexBenchConfig,
    engine: &dyn IndexEngine,
    operations: &[Operation],
) -> Result<Measurement, BenchError> {
    let mut measurement = Measurement::start(engine)?;
    let deadline = Duration::from_secs_f64(config.measurement_seconds_max.max(0.0));
    let started = Instant::now();
    for operation in operations {
        let (latency, hits) = execute(engine, operation)?;
        measurement.record(latency, hits);
        if started.elapsed() >= deadline {
            break;
        }
    }
    Ok(measurement)
}

/// The mean number of blocks holding the results of `ranges` (RANGELOOKUPs), or `None` when
/// the engine cannot tell.
fn result_blocks_per_op(
    engine: &dyn IndexEngine,
    ranges: &[Operation],
) -> Result<Option<f64>, BenchError> {
    let mut total = 0;
    let mut counted = 0_u64;
    for operation in ranges {
        if let Operation::RangeLookup {
            attribute,
            lo,
            hi,
            top_k,
        } = operation
        {
            let Some(blocks) = engine.result_blocks(*attribute, *lo, *hi, *top_k)? else {
                return Ok(None);
            };
            total += blocks;
            counted += 1;
        }
    }
    Ok((counted > 0).then(|| round_to(total as f64 / counted as f64, 3)))
}

/// Runs one operation; returns its latency and hits (GET: 1 when found; writes: 0).
pub fn execute(
    engine: &dyn IndexEngine,
    operation: &Operation,
) -> Result<(Duration, u64), BenchError> {
    let started = Instant::now();
    let hits = match operation {
        Operation::Put(tweet) | Operation::Update(tweet) => {
            engine.put(tweet.fields.tweet_id, &tweet.json)?;
            0
        }
        Operation::Get { tweet_id } => u64::from(engine.get(*tweet_id)?.is_some()),
        Operation::Lookup {
            attribute,
            value,
            top_k,
        } => engine.lookup(*attribute, *value, *top_k, None)?,
        Operation::RangeLookup {
            attribute,
            lo,
            hi,
            top_k,
        } => engine.range_lookup(*attribute, *lo, *hi, *top_k, None)?,
    };
    Ok((started.elapsed(), hits))
}

fn query_row(
    maker: &RowMaker,
    engine: &dyn IndexEngine,
    op: &str,
    attribute: Option<Attribute>,
    measurement: &Measurement,
) -> IndexRow {
    let mut row = maker.row("query", op, measurement, engine);
    if measurement.latencies.count() > 0 {
        row.hits_per_op = Some(round_to(
            measurement.hits as f64 / measurement.latencies.count() as f64,
            3,
        ));
    }
    if let Some(attribute) = attribute {
        row.attribute = Some(attribute.path().to_owned());
        if let Some((kind, maintenance)) = engine.index_labels(attribute) {
            row.index_kind = Some(kind);
            row.maintenance = Some(maintenance);
        }
    }
    row
}

fn run_static_queries(
    config: &IndexBenchConfig,
    engine: &dyn IndexEngine,
    generator: &mut WorkloadGenerator,
    maker: &RowMaker,
    emit: &mut dyn FnMut(IndexRow) -> Result<(), BenchError>,
) -> Result<(), BenchError> {
    let gets: Vec<Operation> = (0..config.gets).filter_map(|_| generator.get()).collect();
    if !gets.is_empty() {
        let measurement = measure_queries(config, engine, &gets)?;
        emit(query_row(maker, engine, "GET", None, &measurement))?;
    }
    for attribute in Attribute::ALL {
        if engine.index_labels(attribute).is_none() {
            continue;
        }
        for &top_k in &config.top_ks {
            let lookups: Vec<Operation> = (0..config.lookups)
                .filter_map(|_| generator.lookup(attribute, top_k))
                .collect();
            if lookups.is_empty() {
                continue;
            }
            let measurement = measure_queries(config, engine, &lookups)?;
            let mut row = query_row(maker, engine, "LOOKUP", Some(attribute), &measurement);
            row.top_k = Some(top_k_value(top_k));
            emit(row)?;
        }
        for &selectivity in selectivities(attribute) {
            for &top_k in &config.top_ks {
                let ranges: Vec<Operation> = (0..config.range_lookups)
                    .filter_map(|_| generator.range_lookup(attribute, selectivity, top_k))
                    .collect();
                if ranges.is_empty() {
                    continue;
                }
                let measurement = measure_queries(config, engine, &ranges)?;
                let mut row =
                    query_row(maker, engine, "RANGELOOKUP", Some(attribute), &measurement);
                row.top_k = Some(top_k_value(top_k));
                row.selectivity = Some(selectivity);
                let measured = (measurement.latencies.count() as usize).min(RESULT_BLOCK_QUERIES);
                row.result_blocks_per_op = result_blocks_per_op(engine, &ranges[..measured])?;
                emit(row)?;
            }
        }
    }
    Ok(())
}

/// The mixed phase: per-kind rows (latency, throughput over that kind's time), then the
/// MIXED rows (one per tenth, then the whole with the disk).
fn run_mixed(
    config: &IndexBenchConfig,
    engine: &dyn IndexEngine,
    generator: &mut WorkloadGenerator,
    maker: &RowMaker,
    queries: QueryParameters,
) -> Result<Vec<IndexRow>, BenchError> {
    let mut rows = Vec::new();
    let mut per_kind: BTreeMap<OperationKind, Measurement> = BTreeMap::new();
    let mut whole = Measurement::start(engine)?;
    let mut done = 0;
    for slice in 1..=SLICES {
        let end = config.mixed_operations * slice / SLICES;
        if end == done {
            continue;
        }
        let mut part = Measurement::start(engine)?;
        while done < end {
            let operation = generator.next_operation();
            let (latency, hits) = execute(engine, &operation)?;
            let kind = operation.kind();
            let measurement = match per_kind.entry(kind) {
                std::collections::btree_map::Entry::Occupied(entry) => entry.into_mut(),
                std::collections::btree_map::Entry::Vacant(entry) => {
                    entry.insert(Measurement::start(engine)?)
                }
            };
            measurement.record(latency, hits);
            part.record(latency, 0);
            whole.record(latency, 0);
            done += 1;
        }
        let mut row = maker.row("mixed", "MIXED", &part, engine);
        row.slice = Some(slice as u32);
        rows.push(row);
    }
    let mut kind_rows = Vec::new();
    for (kind, measurement) in &per_kind {
        let mut row = maker.row("mixed", kind.name(), measurement, engine);
        // Counters run across all kinds; only the MIXED rows can carry them.
        row.blocks_per_op = None;
        row.bytes_written = None;
        row.process_write_bytes = None;
        match kind {
            OperationKind::Get | OperationKind::Lookup | OperationKind::RangeLookup => {
                row.hits_per_op = Some(round_to(
                    measurement.hits as f64 / measurement.latencies.count().max(1) as f64,
                    3,
                ));
            }
            OperationKind::Put | OperationKind::Update => {}
        }
        let queried = match kind {
            OperationKind::Lookup => Some(queries.lookup_attribute),
            OperationKind::RangeLookup => Some(queries.range_attribute),
            _ => None,
        };
        if let Some(attribute) = queried {
            row.attribute = Some(attribute.path().to_owned());
            if let Some((index_kind, maintenance)) = engine.index_labels(attribute) {
                row.index_kind = Some(index_kind);
                row.maintenance = Some(maintenance);
            }
            row.top_k = Some(top_k_value(queries.top_k));
            if *kind == OperationKind::RangeLookup {
                row.selectivity = Some(queries.range_selectivity);
            }
        }
        kind_rows.push(row);
    }
    let whole_row = settle_and_measure_disk(engine, maker, "mixed", "MIXED", &whole)?;
    kind_rows.extend(rows);
    kind_rows.push(whole_row);
    Ok(kind_rows)
}

#[cfg(test)]
mod tests {
    use super::super::reference::ReferenceEngine;
    use super::*;

    fn run(config: &IndexBenchConfig) -> Vec<IndexRow> {
        let engine = ReferenceEngine::new(&config.indexes);
        let mut printed = 0;
        let rows = run_index_benchmark(config, &engine, &mut |row| {
            printed += 1;
            serde_json::to_string(row).map_err(|e| BenchError::new(e.to_string()))?;
            Ok(())
        })
        .unwrap();
        assert_eq!(printed, rows.len());
        rows
    }

    #[test]
    fn parses_top_k() {
        assert_eq!("10".parse::<TopK>().unwrap(), TopK(Some(10)));
        assert_eq!("all".parse::<TopK>().unwrap(), TopK(None));
        assert!("0".parse::<TopK>().is_err());
        assert!("x".parse::<TopK>().is_err());
        assert_eq!(TopK(None).to_string(), "all");
    }

    #[test]
    fn static_run_reports_slices_and_every_query_shape() {
        let config = IndexBenchConfig::small(1000, Workload::Static);
        let rows = run(&config);
        let load: Vec<&IndexRow> = rows.iter().filter(|r| r.phase == "load").collect();
        assert_eq!(load.len(), 11);
        let slices: Vec<Option<u32>> = load.iter().map(|r| r.slice).collect();
        assert_eq!(slices[..10], (1..=10).map(Some).collect::<Vec<_>>()[..]);
        assert_eq!(slices[10], None);
        assert!(load[..10].iter().all(|r| r.n == 100 && r.op == "PUT"));
        let whole = load[10];
        assert_eq!(whole.n, 1000);
        assert_eq!(whole.attribute.as_deref(), Some("user.id+created_at"));
        assert_eq!(whole.index_kind.as_deref(), Some("brute-force+brute-force"));
        let trees = whole.bytes_on_disk_per_tree.as_ref().unwrap();
        assert_eq!(whole.bytes_on_disk, Some(trees.values().sum()));
        assert!(whole.bytes_on_disk.unwrap() > 400 * 1000, "{whole:?}");
        assert!(whole.background_wait_s.is_some());

        let get = rows.iter().find(|r| r.op == "GET").unwrap();
        assert_eq!(get.n, 100);
        assert_eq!(get.hits_per_op, Some(1.0));
        // 2 attributes x 3 top-Ks of LOOKUP, 2 x 2 selectivities x 3 top-Ks of RANGELOOKUP.
        let lookups: Vec<&IndexRow> = rows.iter().filter(|r| r.op == "LOOKUP").collect();
        assert_eq!(lookups.len(), 6);
        let ranges: Vec<&IndexRow> = rows.iter().filter(|r| r.op == "RANGELOOKUP").collect();
        assert_eq!(ranges.len(), 12);
        for row in lookups.iter().chain(&ranges) {
            assert_eq!(row.n, if row.op == "LOOKUP" { 50 } else { 20 });
            assert_eq!(row.blocks_per_op, Some(0.0));
            let hits = row.hits_per_op.unwrap();
            assert!(hits >= 1.0, "queries target existing values: {row:?}");
            if row.top_k == Some(serde_json::json!(10)) {
                assert!(hits <= 10.0);
            }
        }
        // A 100-minute CreationTime range without limit reaches the end of the data set
        // (1000 tweets at ~35 per second span well under 100 minutes) from a uniformly chosen
        // start: about half of it on average.
        let everything = ranges
            .iter()
            .find(|r| {
                r.attribute.as_deref() == Some("created_at")
                    && r.selectivity == Some(100)
                    && r.top_k == Some(serde_json::json!("all"))
            })
            .unwrap();
        assert!(
            (300.0..700.0).contains(&everything.hits_per_op.unwrap()),
            "{everything:?}"
        );
        // JSON carries the agreed fields.
        let json: serde_json::Value = serde_json::to_value(ranges[0]).unwrap();
        for field in [
            "engine",
            "index_kind",
            "maintenance",
            "attribute",
            "op",
            "top_k",
            "n",
            "ops_per_sec",
            "p50_us",
            "p90_us",
            "p99_us",
            "blocks_per_op",
            "bytes_on_disk",
            "bytes_written",
            "slice",
            "selectivity",
        ] {
            assert!(json.get(field).is_some(), "missing {field}");
        }
        assert_eq!(json["engine"], "reference");
        assert_eq!(json["workload"], "static");
    }

    #[test]
    fn static_run_skips_attributes_without_index_and_honours_top_k() {
        let mut config = IndexBenchConfig::small(300, Workload::Static);
        config.indexes.truncate(1);
        config.top_ks = vec![Some(5)];
        let rows = run(&config);
        assert!(rows
            .iter()
            .filter(|r| r.phase == "query" && r.op != "GET")
            .all(|r| r.attribute.as_deref() == Some("user.id")
                && r.top_k == Some(serde_json::json!(5))));
        assert_eq!(rows.iter().filter(|r| r.op == "RANGELOOKUP").count(), 2);
    }

    #[test]
    fn time_limit_cuts_measurements_short() {
        let mut config = IndexBenchConfig::small(200, Workload::Static);
        config.measurement_seconds_max = 0.0;
        let rows = run(&config);
        assert!(rows.iter().filter(|r| r.phase == "query").all(|r| r.n == 1));
    }

    #[test]
    fn mixed_runs_report_each_kind_and_slices() {
        let mut config = IndexBenchConfig::small(500, Workload::UpdateHeavy);
        config.mixed_operations = 2000;
        let rows = run(&config);
        let mixed: Vec<&IndexRow> = rows.iter().filter(|r| r.phase == "mixed").collect();
        let count = |op: &str| {
            mixed
                .iter()
                .filter(|r| r.op == op)
                .map(|r| r.n)
                .collect::<Vec<_>>()
        };
        let puts = count("PUT")[0];
        let updates = count("UPDATE")[0];
        let gets = count("GET")[0];
        let lookups = count("LOOKUP")[0];
        assert_eq!(puts + updates + gets + lookups, 2000);
        // 40/40/15/5 percent, loosely.
        assert!((650..950).contains(&updates), "{updates}");
        assert!((40..170).contains(&lookups), "{lookups}");
        let lookup = mixed.iter().find(|r| r.op == "LOOKUP").unwrap();
        assert_eq!(lookup.top_k, Some(serde_json::json!(10)));
        assert!(lookup.hits_per_op.unwrap() >= 1.0);
        let totals = count("MIXED");
        assert_eq!(totals.len(), 11);
        assert_eq!(totals[..10].iter().sum::<u64>(), 2000);
        assert_eq!(totals[10], 2000);
        let last = mixed.last().unwrap();
        assert!(last.bytes_on_disk.is_some() && last.slice.is_none());
    }

    #[test]
    fn mixed_runs_need_an_index_on_the_looked_up_attribute() {
        let mut config = IndexBenchConfig::small(100, Workload::ReadHeavy);
        config
            .indexes
            .retain(|spec| spec.attribute != Attribute::UserId);
        let engine = ReferenceEngine::new(&config.indexes);
        let error = run_index_benchmark(&config, &engine, &mut |_| Ok(())).unwrap_err();
        assert!(error.message().contains("user.id"), "{error}");
    }
}
