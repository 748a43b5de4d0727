//! The Vinyl microbenchmark (Shpilevoy, Osipov, Volkanov, "Deferred secondary index update
//! with LSM-trees", §5.1), run by `sift bench vinyl`: one collection with an integer primary
//! key and four non-unique composite secondary indexes; client threads send batches of 1 to
//! `--batch-max` statements, half replaces and half deletes, keys uniform in 1..=`--keys`,
//! ~50-byte documents. Reports statements per second per interval, then average, median and
//! maximum, for each maintenance scheme asked for (`deferred` against `sync-full`).
//! The scheme `deferred-fast-path` is `deferred` with its in-memory fast path (a write also
//! deletes the entries of a shadowed version it finds in the memtables; see `sift-index/src/deferred/`).
//! `--disk-bound` reads tables with O_DIRECT through a small block cache, so each hidden
//! read of `sync-full` that misses the cache costs a real disk read.

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use sift_bench::kv::BenchError;
use sift_index::{AttrType, Database, DatabaseOptions, IndexKind, IndexSpec, Maintenance, WriteOp};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Options of `sift bench vinyl`.
#[derive(Debug, Clone, PartialEq, clap::Args)]
pub struct VinylArgs {
    /// Keys are uniform in 1..=keys.
    #[arg(long, default_value_t = 1_000_000)]
    pub keys: u64,
    /// Documents 1..=preload written before the measurement (not timed) [default: keys].
    #[arg(long)]
    pub preload: Option<u64>,
    #[arg(long, default_value_t = 4)]
    pub threads: usize,
    /// Statements per batch are uniform in 1..=batch-max.
    #[arg(long, default_value_t = 500)]
    pub batch_max: usize,
    /// Measured seconds per maintenance scheme.
    #[arg(long, default_value_t = 20.0)]
    pub seconds: f64,
    #[arg(long, default_value_t = 1.0)]
    pub interval_seconds: f64,
    /// Maintenance schemes to compare, comma-separated (also `deferred-fast-path`).
    #[arg(long, value_delimiter = ',', default_values_t = ["deferred".to_owned(), "sync-full".to_owned()])]
    pub maintenance: Vec<String>,
    /// O_DIRECT table reads and a block cache of --cache-bytes (the paper's disk-bound case).
    #[arg(long)]
    pub disk_bound: bool,
    /// Block cache bytes [default: Sift's default; 1 MiB with --disk-bound].
    #[arg(long)]
    pub cache_bytes: Option<usize>,
    /// Memtable bytes [default: Sift's default].
    #[arg(long)]
    pub memtable_bytes: Option<usize>,
    /// Parent of the databases (one subdirectory per scheme) [default: a temporary directory
    /// under the current one, removed at the end].
    #[arg(long)]
    pub db: Option<PathBuf>,
    #[arg(long, default_value_t = 7)]
    pub seed: u64,
    /// One JSON object per line instead of text.
    #[arg(long)]
    pub json: bool,
}

/// Requests per second of one scheme.
#[derive(Debug, Clone, PartialEq)]
pub struct VinylResult {
    pub maintenance: String,
    /// Statements per second of each interval.
    pub interval_rates: Vec<f64>,
    pub average_rate: f64,
    pub median_rate: f64,
    pub max_rate: f64,
    pub statements: u64,
    /// Seconds since the measurement started at the end of each interval.
    pub interval_end_s: Vec<f64>,
    /// `deferred` only: the deferred index `f2`'s garbage counters after the run.
    pub deferred_garbage: Option<String>,
    /// What the engine did during the measured window (counter differences).
    pub engine: EngineDelta,
}

/// Engine counter differences over the measured window: tells whether a run was disk-bound
/// (data blocks read from the device per statement) and what the background work cost.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct EngineDelta {
    /// Data blocks read from the files (with `--disk-bound`, O_DIRECT reads of the device),
    /// by user reads and compactions.
    pub blocks_read_from_disk: u64,
    pub blocks_read_from_cache: u64,
    /// Bytes compactions read (so user reads are `blocks_read_from_disk` minus these blocks).
    pub compaction_bytes_read: u64,
    pub compactions: u64,
    /// Of `compactions`: those point reads triggered (`sift_lsm::Options::seek_compaction`).
    pub seek_compactions: u64,
    pub flushes: u64,
    pub write_stall_micros: u64,
    /// `write_stall_micros` by cause (see `sift_lsm::Stats`).
    pub write_slowdown_micros: u64,
    pub write_stop_memtables_micros: u64,
    pub write_stop_l0_micros: u64,
    /// Other waits of writers that the stall time does not include.
    pub commit_lock_wait_micros: u64,
    pub write_state_lock_wait_micros: u64,
    pub memtable_switch_micros: u64,
    /// Internal writes (compaction observers' DELETEs) that took the commit lock outside
    /// the queue, and how long they held it.
    pub unqueued_commits: u64,
    pub unqueued_commit_micros: u64,
    /// Engine entries written (user and observer writes).
    pub writes: u64,
}

impl EngineDelta {
    fn between(before: &sift_lsm::Stats, after: &sift_lsm::Stats) -> EngineDelta {
        let delta =
            |counter: fn(&sift_lsm::Stats) -> u64| counter(after).saturating_sub(counter(before));
        // Each counter that is one `Stats` field, named once.
        macro_rules! deltas {
            ($($field:ident),*) => {
                EngineDelta {
                    compaction_bytes_read: delta(|s| s.compaction_bytes_read_per_level.iter().sum()),
                    $($field: delta(|s| s.$field)),*
                }
            };
        }
        deltas!(
            blocks_read_from_disk,
            blocks_read_from_cache,
            compactions,
            seek_compactions,
            flushes,
            write_stall_micros,
            write_slowdown_micros,
            write_stop_memtables_micros,
            write_stop_l0_micros,
            commit_lock_wait_micros,
            write_state_lock_wait_micros,
            memtable_switch_micros,
            unqueued_commits,
            unqueued_commit_micros,
            writes
        )
    }
}

/// One measured interval, as it ends.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct VinylInterval {
    pub maintenance: Maintenance,
    /// Seconds since the measurement started.
    pub end_s: f64,
    pub statements_per_second: f64,
}

const INDEXED_FIELDS: [&str; 4] = ["f2", "f3", "f4", "f5"];
const PRELOAD_BATCH_DOCUMENTS: u64 = 1000;

fn document(rng: &mut StdRng, key: u64) -> Vec<u8> {
    // Five unsigned fields, ~50 bytes of JSON.
    format!(
        "{{\"id\":{key},\"f2\":{},\"f3\":{},\"f4\":{},\"f5\":{}}}",
        rng.gen_range(0..1_000_000u32),
        rng.gen_range(0..1_000_000u32),
        rng.gen_range(0..1_000_000u32),
        rng.gen_range(0..1_000_000u32)
    )
    .into_bytes()
}

fn error(what: &str) -> impl Fn(sift_index::IndexError) -> BenchError + '_ {
    move |e| BenchError::new(format!("{what}: {e}"))
}

/// The database options of `args` (cache, direct reads, memtable).
pub fn database_options(args: &VinylArgs) -> DatabaseOptions {
    let mut options = DatabaseOptions::default();
    if args.disk_bound {
        options.engine.use_direct_reads = true;
        options.engine.block_cache_bytes = args.cache_bytes.unwrap_or(1 << 20);
    } else if let Some(bytes) = args.cache_bytes {
        options.engine.block_cache_bytes = bytes;
    }
    if let Some(bytes) = args.memtable_bytes {
        options.engine.memtable_bytes_max = bytes;
    }
    options
}

/// `deferred` with the in-memory fast path.
const DEFERRED_FAST_PATH: &str = "deferred-fast-path";

/// A scheme to run: its name in the output, its maintenance, and the fast path.
pub struct Scheme {
    pub name: String,
    pub maintenance: Maintenance,
    pub fast_path: bool,
}

impl Scheme {
    /// A maintenance scheme without the fast path, named by the scheme.
    #[must_use]
    pub fn plain(maintenance: Maintenance) -> Scheme {
        Scheme {
            name: maintenance.name().to_string(),
            maintenance,
            fast_path: false,
        }
    }
}

impl std::str::FromStr for Scheme {
    type Err = BenchError;
    fn from_str(name: &str) -> Result<Scheme, BenchError> {
        if name == DEFERRED_FAST_PATH {
            return Ok(Scheme {
                name: name.to_string(),
                maintenance: Maintenance::Deferred,
                fast_path: true,
            });
        }
        let maintenance = name.parse::<Maintenance>().map_err(BenchError::new)?;
        Ok(Scheme {
            name: maintenance.name().to_string(),
            maintenance,
            fast_path: false,
        })
    }
}

/// Runs one scheme in `dir` (fresh): preload, then `args.seconds` of client threads;
/// `on_interval` is called as each interval ends and stops the run early by returning
/// `Ok(false)` (the study's Ctrl-C).
pub fn run_scheme(
    args: &VinylArgs,
    scheme: &Scheme,
    dir: &Path,
    on_interval: &mut dyn FnMut(VinylInterval) -> Result<bool, BenchError>,
) -> Result<VinylResult, BenchError> {
    let maintenance = scheme.maintenance;
    let mut database_options = database_options(args);
    database_options.deferred_fast_path = scheme.fast_path;
    let database = Arc::new(Database::open(dir, database_options).map_err(error("open"))?);
    database
        .create_collection("test", "id")
        .map_err(error("create collection"))?;
    for field in INDEXED_FIELDS {
        let spec = IndexSpec::new(field, field, AttrType::Int, IndexKind::Composite)
            .with_maintenance(maintenance);
        database
            .create_index("test", spec)
            .map_err(error("create index"))?;
    }
    let mut rng = StdRng::seed_from_u64(args.seed);
    let preload = args.preload.unwrap_or(args.keys).min(args.keys);
    let mut key = 1;
    while key <= preload {
        let end = (key + PRELOAD_BATCH_DOCUMENTS).min(preload + 1);
        let docs: Vec<Vec<u8>> = (key..end).map(|k| document(&mut rng, k)).collect();
        let ops: Vec<WriteOp<'_>> = docs.iter().map(|d| WriteOp::Put(d)).collect();
        database.write("test", &ops).map_err(error("preload"))?;
        key = end;
    }
    database.flush().map_err(error("flush"))?;
    database
        .engine()
        .wait_for_background_work()
        .map_err(|e| BenchError::new(format!("background work: {e}")))?;

    let counters_before = database.engine().stats();
    let statements = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let failure: Arc<std::sync::Mutex<Option<String>>> = Arc::default();
    let threads: Vec<_> = (0..args.threads.max(1))
        .map(|thread| {
            let database = Arc::clone(&database);
            let statements = Arc::clone(&statements);
            let stop = Arc::clone(&stop);
            let failure = Arc::clone(&failure);
            let (keys, batch_max) = (args.keys.max(1), args.batch_max.max(1));
            let mut rng = StdRng::seed_from_u64(args.seed ^ ((thread as u64 + 1) << 32));
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    let count = rng.gen_range(1..=batch_max);
                    let mut docs: Vec<(bool, Vec<u8>)> = Vec::with_capacity(count);
                    for _ in 0..count {
                        let key = rng.gen_range(1..=keys);
                        if rng.gen_bool(0.5) {
                            docs.push((true, document(&mut rng, key)));
                        } else {
                            docs.push((false, key.to_string().into_bytes()));
                        }
                    }
                    let ops: Vec<WriteOp<'_>> = docs
                        .iter()
                        .map(|(put, bytes)| {
                            if *put {
                                WriteOp::Put(bytes)
                            } else {
                                WriteOp::Delete(bytes)
                            }
                        })
                        .collect();
                    if let Err(e) = database.write("test", &ops) {
                        if let Ok(mut slot) = failure.lock() {
                            *slot = Some(e.to_string());
                        }
                        stop.store(true, Ordering::Relaxed);
                        return;
                    }
                    statements.fetch_add(count as u64, Ordering::Relaxed);
                }
            })
        })
        .collect();
    let start = Instant::now();
    let interval = Duration::from_secs_f64(args.interval_seconds.max(0.1));
    let mut rates = Vec::new();
    let mut ends = Vec::new();
    let mut last = 0;
    let mut next = start + interval;
    let mut outcome = Ok(());
    while start.elapsed().as_secs_f64() < args.seconds && !stop.load(Ordering::Relaxed) {
        std::thread::sleep(next.saturating_duration_since(Instant::now()));
        let now = statements.load(Ordering::Relaxed);
        let rate = (now - last) as f64 / interval.as_secs_f64();
        last = now;
        let at = start.elapsed().as_secs_f64();
        rates.push(rate);
        ends.push(at);
        next += interval;
        match on_interval(VinylInterval {
            maintenance,
            end_s: at,
            statements_per_second: rate,
        }) {
            Ok(true) => {}
            Ok(false) => break,
            Err(error) => {
                outcome = Err(error);
                break;
            }
        }
    }
    stop.store(true, Ordering::Relaxed);
    for thread in threads {
        let _ = thread.join();
    }
    let engine = EngineDelta::between(&counters_before, &database.engine().stats());
    outcome?;
    if let Some(message) = failure.lock().ok().and_then(|mut slot| slot.take()) {
        return Err(BenchError::new(format!("write failed: {message}")));
    }
    let mut sorted = rates.clone();
    sorted.sort_by(f64::total_cmp);
    let result = VinylResult {
        maintenance: scheme.name.clone(),
        average_rate: rates.iter().sum::<f64>() / rates.len().max(1) as f64,
        median_rate: sorted.get(sorted.len() / 2).copied().unwrap_or(0.0),
        max_rate: sorted.last().copied().unwrap_or(0.0),
        statements: statements.load(Ordering::Relaxed),
        interval_rates: rates,
        interval_end_s: ends,
        deferred_garbage: if maintenance == Maintenance::Deferred {
            database
                .deferred_garbage("test", "f2")
                .ok()
                .map(|garbage| format!("{garbage:?}"))
        } else {
            None
        },
        engine,
    };
    drop(database);
    Ok(result)
}

/// Runs every scheme of `args` and prints per-interval rates and a summary.
pub fn run(args: &VinylArgs, out: &mut dyn Write) -> Result<Vec<VinylResult>, BenchError> {
    let schemes = args
        .maintenance
        .iter()
        .map(|name| name.parse::<Scheme>())
        .collect::<Result<Vec<_>, _>>()?;
    let parent = if let Some(path) = &args.db {
        (path.clone(), None)
    } else {
        let current = std::env::current_dir()
            .map_err(|e| BenchError::new(format!("cannot read the current directory: {e}")))?;
        let temporary = tempfile::Builder::new()
            .prefix("sift-bench-vinyl-")
            .tempdir_in(current)
            .map_err(|e| BenchError::new(format!("cannot create a temporary directory: {e}")))?;
        (temporary.path().to_path_buf(), Some(temporary))
    };
    let mut results = Vec::new();
    for scheme in schemes {
        let dir = parent.0.join(&scheme.name);
        if dir.exists() {
            return Err(BenchError::new(format!(
                "{} exists: give an empty --db",
                dir.display()
            )));
        }
        let mut print = |interval: VinylInterval| -> Result<bool, BenchError> {
            let (at, rate) = (interval.end_s, interval.statements_per_second);
            let line = if args.json {
                serde_json::json!({"maintenance": scheme.name, "disk_bound": args.disk_bound,
                    "t_seconds": at, "statements_per_second": rate})
                .to_string()
            } else {
                format!("{:<10} t={at:>6.1}s {rate:>10.0} statements/s", scheme.name)
            };
            writeln!(out, "{line}").map_err(|e| BenchError::new(e.to_string()))?;
            Ok(true)
        };
        let result = run_scheme(args, &scheme, &dir, &mut print)?;
        if let Some(garbage) = &result.deferred_garbage {
            writeln!(out, "# deferred index f2 after the run: {garbage}")
                .map_err(|e| BenchError::new(e.to_string()))?;
        }
        results.push(result);
    }
    for result in &results {
        let line = if args.json {
            serde_json::json!({"maintenance": result.maintenance, "disk_bound": args.disk_bound,
                "average": result.average_rate, "median": result.median_rate,
                "max": result.max_rate, "statements": result.statements,
                "engine": result.engine})
            .to_string()
        } else {
            format!(
                "{:<10} average {:>10.0}  median {:>10.0}  max {:>10.0} statements/s ({} statements)\n{:<10} engine: {:?}",
                result.maintenance, result.average_rate, result.median_rate, result.max_rate, result.statements,
                "", result.engine
            )
        };
        writeln!(out, "{line}").map_err(|e| BenchError::new(e.to_string()))?;
    }
    Ok(results)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn a_tiny_run_reports_both_schemes() {
        let dir = tempfile::tempdir().unwrap();
        let args = VinylArgs {
            keys: 200,
            preload: None,
            threads: 2,
            batch_max: 20,
            seconds: 0.3,
            interval_seconds: 0.1,
            maintenance: vec![
                "deferred".into(),
                "sync-full".into(),
                DEFERRED_FAST_PATH.into(),
            ],
            disk_bound: false,
            cache_bytes: None,
            memtable_bytes: Some(16 << 10),
            db: Some(dir.path().to_path_buf()),
            seed: 1,
            json: false,
        };
        let mut out = Vec::new();
        let results = run(&args, &mut out).unwrap();
        assert_eq!(results.len(), 3);
        assert_eq!(results[2].maintenance, DEFERRED_FAST_PATH);
        for result in &results {
            assert!(result.statements > 0, "{result:?}");
            assert!(!result.interval_rates.is_empty(), "{result:?}");
        }
        let text = String::from_utf8(out).unwrap();
        assert!(
            text.contains("deferred") && text.contains("sync-full"),
            "{text}"
        );
    }
}
