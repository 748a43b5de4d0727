//! The db_bench-style key-value benchmark: operations, configuration, the `Engine` trait every
//! engine implements (Sift in `sift-study`, RocksDB and LevelDB in `crates/sift-peers`), and the runner
//! that drives an engine through the operations and turns measurements into `Row`s.
//!
//! Semantics follow LevelDB's db_bench: `fillseq` and `fillrandom` start from a fresh
//! database, `overwrite` writes random keys over what is there, reads run on whatever the
//! previous operations left. After each write operation the runner waits for the engine's
//! background work (flushes, compactions) so that reads measure a settled tree; that wait is
//! reported separately and not counted in the operation's time.

pub mod args;
pub mod keys;
pub mod process_io;
pub mod report;

pub use args::{run_from_args, BenchDir, KvArgs};
pub use keys::{KeyFormat, RandomKeys, ValueGenerator};
pub use report::{LatencyHistogram, LatencySummary, Row};

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// Settings every engine uses, so the comparison is like for like.
pub mod settings {
    /// Uncompressed data block size.
    pub const BLOCK_BYTES: usize = 4096;
    pub const BLOOM_BITS_PER_KEY: u32 = 10;
    /// Memtable (write buffer) size.
    pub const WRITE_BUFFER_BYTES: usize = 64 << 20;
    /// Block cache capacity when `--cache-bytes` is not given: Sift's default
    /// (`sift_lsm::Options::default().block_cache_bytes`, checked by a test), given to the
    /// peers too.
    pub const DEFAULT_CACHE_BYTES: usize = 32 << 20;
    /// Frozen memtables waiting for flush before writers stall (Sift's default).
    pub const IMMUTABLE_MEMTABLES_MAX: usize = 2;
}

pub use crate::error::BenchError;

/// One benchmark operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, clap::ValueEnum)]
pub enum Operation {
    /// n puts of keys 0..n in order, on a fresh database.
    #[value(name = "fillseq")]
    FillSeq,
    /// n puts of uniformly random keys in 0..n, on a fresh database.
    #[value(name = "fillrandom")]
    FillRandom,
    /// n puts of uniformly random keys in 0..n over the existing data.
    #[value(name = "overwrite")]
    Overwrite,
    /// n gets of uniformly random keys in 0..n (counts how many exist).
    #[value(name = "readrandom")]
    ReadRandom,
    /// One forward scan over the whole database.
    #[value(name = "readseq")]
    ReadSeq,
    /// n seeks to uniformly random keys in 0..n, each reading the entry it lands on.
    #[value(name = "seekrandom")]
    SeekRandom,
}

impl Operation {
    /// The default sequence, db_bench's order.
    pub const ALL: [Operation; 6] = [
        Operation::FillSeq,
        Operation::FillRandom,
        Operation::Overwrite,
        Operation::ReadRandom,
        Operation::ReadSeq,
        Operation::SeekRandom,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Operation::FillSeq => "fillseq",
            Operation::FillRandom => "fillrandom",
            Operation::Overwrite => "overwrite",
            Operation::ReadRandom => "readrandom",
            Operation::ReadSeq => "readseq",
            Operation::SeekRandom => "seekrandom",
        }
    }

    pub fn is_write(self) -> bool {
        matches!(
            self,
            Operation::FillSeq | Operation::FillRandom | Operation::Overwrite
        )
    }

    /// db_bench's `fresh_db`: the operation starts from an empty database.
    pub fn needs_fresh_db(self) -> bool {
        matches!(self, Operation::FillSeq | Operation::FillRandom)
    }

    /// Stable identifier mixed into the random streams, so an operation draws the same keys
    /// whatever else runs before it.
    fn stream_id(self) -> u64 {
        match self {
            Operation::FillSeq => 1,
            Operation::FillRandom => 2,
            Operation::Overwrite => 3,
            Operation::ReadRandom => 4,
            Operation::ReadSeq => 5,
            Operation::SeekRandom => 6,
        }
    }
}

impl std::fmt::Display for Operation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Block compression, named the same for every engine.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum CompressionKind {
    #[default]
    None,
    Snappy,
    Lz4,
}

impl CompressionKind {
    pub fn name(self) -> &'static str {
        match self {
            CompressionKind::None => "none",
            CompressionKind::Snappy => "snappy",
            CompressionKind::Lz4 => "lz4",
        }
    }
}

impl std::fmt::Display for CompressionKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// What to run, validated (see `KvArgs::config`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KvConfig {
    pub operations: Vec<Operation>,
    /// `--n`: operations per benchmark and the key space `0..key_count`.
    pub key_count: u64,
    pub key_bytes: usize,
    pub value_bytes: usize,
    pub threads: usize,
    pub cache_bytes: usize,
    pub compression: CompressionKind,
    /// Sync the WAL on every write.
    pub sync: bool,
    pub seed: u64,
    /// CPUs the engine's background threads are pinned to (Sift only; `None`: not pinned).
    pub background_cpus: Option<Vec<usize>>,
    /// CPUs the client threads are pinned to (`None`: not pinned).
    pub client_cpus: Option<Vec<usize>>,
}

impl KvConfig {
    pub fn key_format(&self) -> Result<KeyFormat, BenchError> {
        KeyFormat::new(self.key_bytes, self.key_count)
    }
}

/// Counters an engine keeps; `None` where it keeps none.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct EngineCounters {
    /// Bytes written to files (WAL, flushes, compactions).
    pub bytes_written: Option<u64>,
    /// Blocks read, from the block cache or from files.
    pub blocks_read: Option<u64>,
}

/// A key-value engine under benchmark. Shared by all benchmark threads.
pub trait Engine: Send + Sync {
    /// Stores `value` under `key` (WAL on; synced when the engine was opened with `sync`).
    fn put(&self, key: &[u8], value: &[u8]) -> Result<(), BenchError>;
    /// Looks `key` up; returns the value's length when found.
    fn get(&self, key: &[u8]) -> Result<Option<usize>, BenchError>;
    /// Opens an iterator, seeks to the first key `>= key` and reads that entry; returns the
    /// entry's key plus value length, or `None` when the seek ran off the end.
    fn seek_and_read_one(&self, key: &[u8]) -> Result<Option<usize>, BenchError>;
    /// Reads forward through the keys in `[start, end)` (`None`: from the first key, to the
    /// last), calling `on_entry` with each entry's key plus value length. Returns the number
    /// of entries read.
    fn scan(
        &self,
        start: Option<&[u8]>,
        end: Option<&[u8]>,
        on_entry: &mut dyn FnMut(usize),
    ) -> Result<u64, BenchError>;
    /// Writes the memtable out to a table file and waits for it.
    fn flush(&self) -> Result<(), BenchError>;
    /// Blocks until no flush or compaction is pending or running.
    fn wait_for_background_work(&self) -> Result<(), BenchError>;
    fn counters(&self) -> EngineCounters;
    /// Closes the database, releasing its directory.
    fn close(self: Box<Self>) -> Result<(), BenchError>;
}

/// Opens an engine on a directory with the benchmark's settings.
pub type EngineOpener<'a> = dyn FnMut(&Path) -> Result<Box<dyn Engine>, BenchError> + 'a;

/// Opens an engine on a directory with the settings of a configuration.
pub type ConfiguredOpener<'a> =
    dyn FnMut(&KvConfig, &Path) -> Result<Box<dyn Engine>, BenchError> + 'a;

/// The contiguous share of `total` items that thread `index` of `threads` takes: the first
/// `total % threads` threads take one more. Returns `(first, count)`.
pub fn thread_share(total: u64, threads: usize, index: usize) -> (u64, u64) {
    let threads = threads.max(1) as u64;
    let index = index as u64;
    let base = total / threads;
    let extra = total % threads;
    let count = base + u64::from(index < extra);
    let first = index * base + index.min(extra);
    (first, count)
}

/// What one thread measured.
struct ThreadOutcome {
    histogram: LatencyHistogram,
    operations: u64,
    found: u64,
    payload_bytes: u64,
    started: Instant,
    finished: Instant,
}

/// Runs the configured operations against the engine that `open` opens in `db_dir`,
/// calling `on_row` as each operation finishes. The directory must exist; fresh-database
/// operations after the first write empty it (it holds only what this run wrote).
pub fn run(
    config: &KvConfig,
    engine_name: &str,
    db_dir: &Path,
    open: &mut EngineOpener<'_>,
    on_row: &mut dyn FnMut(&Row) -> Result<(), BenchError>,
) -> Result<Vec<Row>, BenchError> {
    let key_format = config.key_format()?;
    let mut rows = Vec::with_capacity(config.operations.len());
    let mut engine: Option<Box<dyn Engine>> = None;
    let mut wrote_this_run = false;
    for &operation in &config.operations {
        if operation.needs_fresh_db() && wrote_this_run {
            if let Some(open_engine) = engine.take() {
                open_engine.close()?;
            }
            empty_directory(db_dir)?;
        }
        let current = match engine.take() {
            Some(open_engine) => open_engine,
            None => open(db_dir)?,
        };
        let result = run_operation(current.as_ref(), config, key_format, engine_name, operation);
        engine = Some(current);
        let row = result?;
        wrote_this_run |= operation.is_write();
        on_row(&row)?;
        rows.push(row);
    }
    if let Some(open_engine) = engine.take() {
        open_engine.close()?;
    }
    Ok(rows)
}

fn empty_directory(dir: &Path) -> Result<(), BenchError> {
    std::fs::remove_dir_all(dir)
        .and_then(|()| std::fs::create_dir_all(dir))
        .map_err(|e| {
            BenchError::new(format!(
                "cannot empty {} for a fresh database: {e}",
                dir.display()
            ))
        })
}

fn delta(before: Option<u64>, after: Option<u64>) -> Option<u64> {
    Some(after?.saturating_sub(before?))
}

/// Runs one operation on all threads and waits for background work after writes.
pub fn run_operation(
    engine: &dyn Engine,
    config: &KvConfig,
    key_format: KeyFormat,
    engine_name: &str,
    operation: Operation,
) -> Result<Row, BenchError> {
    let counters_before = engine.counters();
    let io_before = process_io::written_bytes();
    let stop = AtomicBool::new(false);
    let outcomes: Vec<Result<ThreadOutcome, BenchError>> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..config.threads.max(1))
            .map(|thread_index| {
                let stop = &stop;
                scope.spawn(move || {
                    let outcome = crate::pinning::pin_client(config.client_cpus.as_deref())
                        .and_then(|()| {
                            run_thread(engine, config, key_format, operation, thread_index, stop)
                        });
                    if outcome.is_err() {
                        stop.store(true, Ordering::Relaxed);
                    }
                    outcome
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|handle| {
                handle.join().unwrap_or_else(|_| {
                    Err(BenchError::new(format!(
                        "a {operation} thread panicked (see the message above)"
                    )))
                })
            })
            .collect()
    });
    let mut histogram = LatencyHistogram::new()?;
    let mut operations = 0;
    let mut found = 0;
    let mut payload_bytes = 0;
    let mut started: Option<Instant> = None;
    let mut finished: Option<Instant> = None;
    for outcome in outcomes {
        let outcome = outcome?;
        histogram.merge(&outcome.histogram)?;
        operations += outcome.operations;
        found += outcome.found;
        payload_bytes += outcome.payload_bytes;
        started = Some(started.map_or(outcome.started, |s| s.min(outcome.started)));
        finished = Some(finished.map_or(outcome.finished, |f| f.max(outcome.finished)));
    }
    let elapsed = match (started, finished) {
        (Some(s), Some(f)) => f.duration_since(s),
        _ => Duration::ZERO,
    };

    let mut background_wait = Duration::ZERO;
    if operation.is_write() {
        let wait_started = Instant::now();
        engine.wait_for_background_work()?;
        background_wait = wait_started.elapsed();
    }
    let counters_after = engine.counters();
    let io_after = process_io::written_bytes();

    let elapsed_s = elapsed.as_secs_f64();
    let per_second = |amount: f64| {
        if elapsed_s > 0.0 {
            amount / elapsed_s
        } else {
            0.0
        }
    };
    let summary = histogram.summary();
    Ok(Row {
        engine: engine_name.to_owned(),
        op: operation.name().to_owned(),
        n: operations,
        threads: config.threads,
        key_bytes: config.key_bytes,
        value_bytes: config.value_bytes,
        compression: config.compression.name().to_owned(),
        cache_bytes: config.cache_bytes as u64,
        sync: config.sync,
        seed: config.seed,
        elapsed_s: report::round_to(elapsed_s, 6),
        ops_per_sec: report::round_to(per_second(operations as f64), 1),
        mb_per_sec: report::round_to(per_second(payload_bytes as f64 / 1_048_576.0), 3),
        mean_us: summary.mean_us,
        p50_us: summary.p50_us,
        p99_us: summary.p99_us,
        p999_us: summary.p999_us,
        max_us: summary.max_us,
        found: (!operation.is_write()).then_some(found),
        bytes_written: delta(counters_before.bytes_written, counters_after.bytes_written),
        blocks_read: delta(counters_before.blocks_read, counters_after.blocks_read),
        process_write_bytes: delta(io_before, io_after),
        background_wait_s: report::round_to(background_wait.as_secs_f64(), 6),
        background_cpus: config.background_cpus.clone(),
        client_cpus: config.client_cpus.clone(),
    })
}

/// One thread's share of an operation.
fn run_thread(
    engine: &dyn Engine,
    config: &KvConfig,
    key_format: KeyFormat,
    operation: Operation,
    thread_index: usize,
    stop: &AtomicBool,
) -> Result<ThreadOutcome, BenchError> {
    let (first, count) = thread_share(config.key_count, config.threads, thread_index);
    let seed = keys::stream_seed(config.seed, operation.stream_id(), thread_index as u64);
    let mut random_keys = RandomKeys::new(seed, config.key_count);
    let mut values = ValueGenerator::new(seed ^ 0x7661_6C75_6573, config.value_bytes);
    let mut histogram = LatencyHistogram::new()?;
    let mut key = vec![0_u8; key_format.key_bytes()];
    let entry_bytes = (config.key_bytes + config.value_bytes) as u64;
    let mut operations = 0_u64;
    let mut found = 0_u64;
    let mut payload_bytes = 0_u64;
    let started = Instant::now();
    match operation {
        Operation::FillSeq | Operation::FillRandom | Operation::Overwrite => {
            for index in 0..count {
                if stop.load(Ordering::Relaxed) {
                    break;
                }
                let number = if operation == Operation::FillSeq {
                    first + index
                } else {
                    random_keys.next_number()
                };
                key_format.write(number, &mut key);
                let value = values.next_value(config.value_bytes);
                let op_started = Instant::now();
                engine.put(&key, value)?;
                histogram.record(op_started.elapsed());
                operations += 1;
                payload_bytes += entry_bytes;
            }
        }
        Operation::ReadRandom | Operation::SeekRandom => {
            for _ in 0..count {
                if stop.load(Ordering::Relaxed) {
                    break;
                }
                key_format.write(random_keys.next_number(), &mut key);
                let op_started = Instant::now();
                let read = if operation == Operation::ReadRandom {
                    engine.get(&key)?.map(|value_bytes| key.len() + value_bytes)
                } else {
                    engine.seek_and_read_one(&key)?
                };
                histogram.record(op_started.elapsed());
                operations += 1;
                if let Some(bytes) = read {
                    found += 1;
                    payload_bytes += bytes as u64;
                }
            }
        }
        Operation::ReadSeq => {
            // One thread scans everything; several split the key space into contiguous
            // ranges (the first from the very first key, the last to the very last).
            let mut end_key = vec![0_u8; key_format.key_bytes()];
            let start = (thread_index > 0).then(|| {
                key_format.write(first, &mut key);
                key.as_slice()
            });
            let end = (thread_index + 1 < config.threads).then(|| {
                key_format.write(first + count, &mut end_key);
                end_key.as_slice()
            });
            let mut previous = Instant::now();
            let scanned = engine.scan(start, end, &mut |bytes| {
                let now = Instant::now();
                histogram.record(now.duration_since(previous));
                previous = now;
                payload_bytes += bytes as u64;
            })?;
            operations = scanned;
            found = scanned;
        }
    }
    Ok(ThreadOutcome {
        histogram,
        operations,
        found,
        payload_bytes,
        started,
        finished: Instant::now(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;
    use std::sync::Mutex;

    #[test]
    fn thread_shares_cover_the_range_once() {
        for (total, threads) in [(10, 3), (1_000_000, 1), (7, 7), (3, 5), (0, 2), (100, 8)] {
            let mut next = 0;
            for index in 0..threads {
                let (first, count) = thread_share(total, threads, index);
                assert_eq!(first, next, "total {total} threads {threads} index {index}");
                next += count;
            }
            assert_eq!(next, total);
        }
        assert_eq!(thread_share(10, 3, 0), (0, 4));
        assert_eq!(thread_share(10, 3, 2), (7, 3));
    }

    #[test]
    fn operation_names_parse_back() {
        use clap::ValueEnum;
        for operation in Operation::ALL {
            assert_eq!(
                Operation::from_str(operation.name(), false).unwrap(),
                operation
            );
        }
        assert!(Operation::ALL.iter().filter(|o| o.needs_fresh_db()).count() == 2);
    }

    /// A model engine: a BTreeMap behind a mutex. Notes the CPUs of the threads that put.
    #[derive(Default)]
    struct ModelEngine {
        map: Mutex<BTreeMap<Vec<u8>, Vec<u8>>>,
        waits: Mutex<u32>,
        putter_cpus: Mutex<std::collections::BTreeSet<Option<String>>>,
    }

    impl Engine for ModelEngine {
        fn put(&self, key: &[u8], value: &[u8]) -> Result<(), BenchError> {
            self.putter_cpus
                .lock()
                .unwrap()
                .insert(crate::pinning::current_thread_cpu_list());
            self.map
                .lock()
                .unwrap()
                .insert(key.to_vec(), value.to_vec());
            Ok(())
        }
        fn get(&self, key: &[u8]) -> Result<Option<usize>, BenchError> {
            Ok(self.map.lock().unwrap().get(key).map(Vec::len))
        }
        fn seek_and_read_one(&self, key: &[u8]) -> Result<Option<usize>, BenchError> {
            let map = self.map.lock().unwrap();
            Ok(map
                .range(key.to_vec()..)
                .next()
                .map(|(k, v)| k.len() + v.len()))
        }
        fn scan(
            &self,
            start: Option<&[u8]>,
            end: Option<&[u8]>,
            on_entry: &mut dyn FnMut(usize),
        ) -> Result<u64, BenchError> {
            let map = self.map.lock().unwrap();
            let mut count = 0;
            for (k, v) in map.range(start.unwrap_or_default().to_vec()..) {
                if end.is_some_and(|end| k.as_slice() >= end) {
                    break;
                }
                on_entry(k.len() + v.len());
                count += 1;
            }
            Ok(count)
        }
        fn flush(&self) -> Result<(), BenchError> {
            Ok(())
        }
        fn wait_for_background_work(&self) -> Result<(), BenchError> {
            *self.waits.lock().unwrap() += 1;
            Ok(())
        }
        fn counters(&self) -> EngineCounters {
            EngineCounters {
                bytes_written: Some(self.map.lock().unwrap().len() as u64 * 1000),
                blocks_read: None,
            }
        }
        fn close(self: Box<Self>) -> Result<(), BenchError> {
            Ok(())
        }
    }

    fn config(operations: Vec<Operation>, threads: usize) -> KvConfig {
        KvConfig {
            operations,
            key_count: 1000,
            key_bytes: 8,
            value_bytes: 20,
            threads,
            cache_bytes: settings::DEFAULT_CACHE_BYTES,
            compression: CompressionKind::None,
            sync: false,
            seed: 301,
            background_cpus: None,
            client_cpus: None,
        }
    }

    #[test]
    fn operations_measure_what_they_did_on_a_model_engine() {
        let format = KeyFormat::new(8, 1000).unwrap();
        for threads in [1, 3] {
            let engine = ModelEngine::default();
            let config = config(Operation::ALL.to_vec(), threads);
            let fill =
                run_operation(&engine, &config, format, "model", Operation::FillSeq).unwrap();
            assert_eq!(fill.n, 1000);
            assert_eq!(engine.map.lock().unwrap().len(), 1000);
            assert_eq!(fill.found, None);
            assert_eq!(fill.bytes_written, Some(1_000_000));
            assert_eq!(fill.blocks_read, None);
            assert_eq!(*engine.waits.lock().unwrap(), 1, "waits after a write");
            assert!(fill.ops_per_sec > 0.0);
            assert!(fill.mb_per_sec > 0.0);

            let read =
                run_operation(&engine, &config, format, "model", Operation::ReadRandom).unwrap();
            assert_eq!(
                (read.n, read.found),
                (1000, Some(1000)),
                "every key exists after fillseq"
            );
            assert_eq!(*engine.waits.lock().unwrap(), 1, "no wait after a read");

            let scan =
                run_operation(&engine, &config, format, "model", Operation::ReadSeq).unwrap();
            assert_eq!(scan.n, 1000, "threads {threads}");
            let seek =
                run_operation(&engine, &config, format, "model", Operation::SeekRandom).unwrap();
            assert_eq!(seek.found, Some(1000));
            assert_eq!(seek.engine, "model");
            assert_eq!(seek.threads, threads);
        }
    }

    /// With client CPUs, every thread that issues operations runs on them, and the calling
    /// thread (which opens and waits) keeps its own; without, the threads keep the caller's.
    #[cfg(target_os = "linux")]
    #[test]
    fn client_threads_run_on_the_client_cpus() {
        let format = KeyFormat::new(8, 1000).unwrap();
        let allowed = crate::pinning::process_allowed_cpus();
        let own = crate::pinning::current_thread_cpu_list();
        for client_cpus in [Some(vec![allowed[0]]), None] {
            let engine = ModelEngine::default();
            let mut config = config(vec![Operation::FillSeq], 3);
            config.client_cpus.clone_from(&client_cpus);
            let row = run_operation(&engine, &config, format, "model", Operation::FillSeq).unwrap();
            assert_eq!(row.n, 1000);
            assert_eq!(row.client_cpus, client_cpus);
            let expected = match &client_cpus {
                Some(cpus) => Some(crate::pinning::format_cpus(cpus)),
                None => own.clone(),
            };
            assert_eq!(
                *engine.putter_cpus.lock().unwrap(),
                std::iter::once(expected).collect(),
                "client CPUs {client_cpus:?}"
            );
            assert_eq!(crate::pinning::current_thread_cpu_list(), own);
        }
    }

    #[test]
    fn random_fill_is_reproducible_and_partial() {
        let format = KeyFormat::new(8, 1000).unwrap();
        let fill = |seed| {
            let engine = ModelEngine::default();
            let mut config = config(vec![Operation::FillRandom], 2);
            config.seed = seed;
            run_operation(&engine, &config, format, "model", Operation::FillRandom).unwrap();
            let read =
                run_operation(&engine, &config, format, "model", Operation::ReadRandom).unwrap();
            let keys: Vec<Vec<u8>> = engine.map.lock().unwrap().keys().cloned().collect();
            // Threads scan disjoint ranges that together cover every entry once.
            for threads in [1, 2, 3, 7] {
                config.threads = threads;
                let scan =
                    run_operation(&engine, &config, format, "model", Operation::ReadSeq).unwrap();
                assert_eq!(scan.n, keys.len() as u64, "threads {threads}");
            }
            (keys, read.found)
        };
        let (keys, found) = fill(1);
        // n uniform draws over n keys cover about 1 - 1/e of them.
        assert!(
            (550..=720).contains(&keys.len()),
            "{} distinct keys",
            keys.len()
        );
        assert!(found.unwrap() > 500 && found.unwrap() < 750);
        assert_eq!(fill(1).0, keys);
        assert_ne!(fill(2).0, keys);
        assert!(keys.iter().all(|k| k.len() == 8));
    }

    #[test]
    fn run_starts_fill_operations_on_an_empty_directory() {
        let dir = tempfile::tempdir().unwrap();
        let config = config(
            vec![
                Operation::FillSeq,
                Operation::FillRandom,
                Operation::ReadSeq,
            ],
            1,
        );
        let mut opens = 0;
        let mut printed = Vec::new();
        let rows = run(
            &config,
            "model",
            dir.path(),
            &mut |path: &Path| {
                opens += 1;
                // The runner must hand an empty directory to the second fill.
                assert_eq!(std::fs::read_dir(path).unwrap().count(), 0);
                std::fs::write(path.join("data"), b"x").unwrap();
                Ok(Box::new(ModelEngine::default()) as Box<dyn Engine>)
            },
            &mut |row| {
                printed.push(row.op.clone());
                Ok(())
            },
        )
        .unwrap();
        assert_eq!(opens, 2);
        assert_eq!(printed, ["fillseq", "fillrandom", "readseq"]);
        // The scan sees only the second fill's keys.
        assert!(rows[2].n < 1000 && rows[2].n > 500, "{}", rows[2].n);
    }

    #[test]
    fn engine_errors_stop_the_run() {
        struct Failing;
        impl Engine for Failing {
            fn put(&self, _: &[u8], _: &[u8]) -> Result<(), BenchError> {
                Err(BenchError::new("disk full"))
            }
            fn get(&self, _: &[u8]) -> Result<Option<usize>, BenchError> {
                Ok(None)
            }
            fn seek_and_read_one(&self, _: &[u8]) -> Result<Option<usize>, BenchError> {
                Ok(None)
            }
            fn scan(
                &self,
                _: Option<&[u8]>,
                _: Option<&[u8]>,
                _: &mut dyn FnMut(usize),
            ) -> Result<u64, BenchError> {
                Ok(0)
            }
            fn flush(&self) -> Result<(), BenchError> {
                Ok(())
            }
            fn wait_for_background_work(&self) -> Result<(), BenchError> {
                Ok(())
            }
            fn counters(&self) -> EngineCounters {
                EngineCounters::default()
            }
            fn close(self: Box<Self>) -> Result<(), BenchError> {
                Ok(())
            }
        }
        let dir = tempfile::tempdir().unwrap();
        let error = run(
            &config(vec![Operation::FillSeq], 4),
            "failing",
            dir.path(),
            &mut |_: &Path| Ok(Box::new(Failing) as Box<dyn Engine>),
            &mut |_| Ok(()),
        )
        .unwrap_err();
        assert_eq!(error.message(), "disk full");
    }
}
