//! Command-line options of the index benchmark (shared by `sift bench index` and `sift-peer
//! index`, so every engine takes the same flags), and running it from them: the database
//! directory, the engine, and printing rows as a table or as JSON lines.

use super::report::{table_header, table_row};
use super::runner::{default_top_ks, run_index_benchmark, IndexBenchConfig, TopK};
use super::{BenchError, IndexEngineOpener, IndexRow, IndexSpec};
use crate::kv::{settings, BenchDir};
use crate::pinning::{self, parse_cpus};
use sift_workload::Workload;
use std::io::Write;
use std::path::PathBuf;

/// Options of the index benchmark.
#[derive(Debug, Clone, PartialEq, clap::Args)]
pub struct IndexBenchArgs {
    /// Tweets to load before the queries (or the mixed operations).
    #[arg(long, default_value_t = 1_000_000)]
    pub n: u64,
    /// A secondary index, `path:kind[:maintenance]` (paths: user.id, created_at); repeat for
    /// several; `none` for no secondary index (the baseline of write-cost ratios). Peers index
    /// the attribute their one way and report it.
    #[arg(long = "index", default_values_t = ["user.id:composite".to_owned(), "created_at:composite".to_owned()])]
    pub indexes: Vec<String>,
    /// static (load, then GETs, LOOKUPs and RANGELOOKUPs), or a mixed workload of Table 7b:
    /// write-heavy, read-heavy, update-heavy (after the load).
    #[arg(long, default_value = "static")]
    pub workload: Workload,
    /// Top-K of the queries, comma-separated, `all` for no limit [default: static 10,100,all;
    /// mixed 10 (only the first is used)].
    #[arg(long, value_delimiter = ',')]
    pub top_k: Vec<TopK>,
    /// Operations of a mixed workload after the load [default: n].
    #[arg(long)]
    pub operations: Option<u64>,
    /// Static: GETs measured.
    #[arg(long, default_value_t = 10_000)]
    pub gets: u64,
    /// Static: LOOKUPs per attribute and top-K.
    #[arg(long, default_value_t = 2_000)]
    pub lookups: u64,
    /// Static: RANGELOOKUPs per attribute, selectivity and top-K.
    #[arg(long, default_value_t = 200)]
    pub range_lookups: u64,
    /// Static: a query measurement stops after this many seconds (it reports how many
    /// operations it did).
    #[arg(long, default_value_t = 5.0)]
    pub max_seconds: f64,
    /// Cache capacity in bytes (block cache, page cache) [default: Sift's default, 32 MiB].
    #[arg(long)]
    pub cache_bytes: Option<usize>,
    /// Database directory, empty or absent [default: a fresh temporary directory under the
    /// current one, removed at the end unless --keep]. A given directory is never removed.
    #[arg(long)]
    pub db: Option<PathBuf>,
    #[arg(long)]
    pub keep: bool,
    /// Seed of the tweets and the queries.
    #[arg(long, default_value_t = 301)]
    pub seed: u64,
    /// Print one JSON object per measurement instead of a table.
    #[arg(long)]
    pub json: bool,
    /// Sift: memtable size in bytes; also sets the table-file target (the same) and level 1
    /// (4×), scaling the engine with the data as the study's presets do [default: the
    /// engine's, 64 MiB].
    #[arg(long)]
    pub memtable_bytes: Option<usize>,
    /// Bits per value of the bloom filters of `embedded` indexes, 1 to 1000 (LevelDB++ Table 8
    /// sweeps 20 … 1000) [default: the index layer's, 10].
    #[arg(long)]
    pub bits_per_key: Option<u32>,
    /// δ of the value-aware split (NEXT §4) of `next` and `sst-local` indexes, in the
    /// attribute's units (milliseconds for created_at, values for user.id and score), or `none`.
    /// With `--next-suite delta`: comma-separated, the values swept [default: none; the sweep:
    /// none,1e7,1e6,1e5,1e4].
    #[arg(long, value_delimiter = ',')]
    pub split_delta: Vec<String>,
    /// Instead of the LevelDB++ workload, run NEXT §6's suites (comma-separated): `windows`
    /// (small/medium/large windows on a numeric attribute), `geo` (windows on the tweet's point),
    /// `delta` (the δ sweep), `skew` (uniform vs Zipf values), `two-indexes`, or `all`. The
    /// tweets get an integer `score` in 1..=10^8; windows are 0.01%, 0.1% and 1% of that
    /// domain and squares of 0.001°, 0.01° and 0.1°. Uses --n, --range-lookups (queries per
    /// window), --max-seconds, --seed, --cache-bytes.
    #[arg(long, value_delimiter = ',')]
    pub next_suite: Vec<String>,
    /// --next-suite: configurations compared, `kind[:maintenance]`; `none` is the no-index PUT
    /// baseline [default: none,next,sst-local,composite,memory].
    #[arg(long, value_delimiter = ',')]
    pub window_kinds: Vec<String>,
    /// --next-suite: distributions of `score`, `uniform` or `zipf-S`; the first is used
    /// outside the skew suite [default: uniform; with skew: uniform,zipf-0.5,zipf-0.8,zipf-1.0].
    #[arg(long, value_delimiter = ',')]
    pub distribution: Vec<String>,
    /// After the run, close the store and open it again, reporting the open time and its
    /// parts (Sift: engine recovery, index opening, the rebuild of `next` global indexes from
    /// the SSTables). With --gets 0 --lookups 0 --range-lookups 0: load, then reopen.
    #[arg(long)]
    pub reopen: bool,
    /// After the load, compact every tree fully before the queries run, so they meet one
    /// known shape (each tree in a single level) instead of whatever the background
    /// compactions left (Sift only).
    #[arg(long)]
    pub compact: bool,
    /// Sift only: pin the engine's flush, compaction and WAL presync threads and the index
    /// layer's background threads (asynchronous index workers, resumed index builds) to these
    /// CPUs (engine option `background_thread_cpus`; Linux only), e.g. `1` or `2-3`. With
    /// --client-cpus on the other CPUs, background work never preempts a client on its core
    /// [default: every CPU].
    // A fully qualified `Vec`: one value parsed into a list, not one value per occurrence.
    #[arg(long, value_parser = parse_cpus)]
    pub background_cpus: Option<::std::vec::Vec<usize>>,
    /// Pin the client thread, the one that loads the tweets and issues the GETs, LOOKUPs,
    /// RANGELOOKUPs and mixed operations, to these CPUs (Linux only), e.g. `0`. The store is
    /// opened, reopened (--reopen) and closed from the main thread, which stays unpinned
    /// [default: every CPU].
    #[arg(long, value_parser = parse_cpus)]
    pub client_cpus: Option<::std::vec::Vec<usize>>,
}

impl IndexBenchArgs {
    /// Checks the options and resolves defaults.
    pub fn config(&self) -> Result<IndexBenchConfig, BenchError> {
        let no_index = self.indexes.iter().any(|text| text == "none");
        if no_index && self.indexes.len() > 1 {
            return Err(BenchError::new(
                "`--index none` means no secondary index: give it alone",
            ));
        }
        let indexes = self
            .indexes
            .iter()
            .filter(|text| *text != "none")
            .map(|text| IndexSpec::parse(text))
            .collect::<Result<Vec<_>, _>>()?;
        for (position, spec) in indexes.iter().enumerate() {
            if indexes[..position]
                .iter()
                .any(|other| other.attribute == spec.attribute)
            {
                return Err(BenchError::new(format!(
                    "two indexes on {}: give one --index per attribute",
                    spec.path()
                )));
            }
        }
        if self.n == 0 && self.workload == Workload::Static {
            return Err(BenchError::new("--n must be at least 1"));
        }
        if !(self.max_seconds.is_finite() && self.max_seconds > 0.0) {
            return Err(BenchError::new("--max-seconds must be a positive number"));
        }
        let top_ks = if self.top_k.is_empty() {
            default_top_ks(self.workload)
        } else {
            self.top_k.iter().map(|top_k| top_k.0).collect()
        };
        if self.split_delta.len() > 1 {
            return Err(BenchError::new(
                "give one --split-delta (several are a sweep: --next-suite delta)",
            ));
        }
        let split_delta = match self.split_delta.first() {
            Some(text) => super::parse_split_delta(text)?,
            None => None,
        };
        pinning::check_allowed(self.background_cpus.as_deref(), self.client_cpus.as_deref())?;
        Ok(IndexBenchConfig {
            memtable_bytes: self.memtable_bytes,
            bloom_bits_per_key: self.bits_per_key,
            split_delta,
            compact_after_load: self.compact,
            tweets: self.n,
            indexes,
            workload: self.workload,
            top_ks,
            mixed_operations: self.operations.unwrap_or(self.n),
            gets: self.gets,
            lookups: self.lookups,
            range_lookups: self.range_lookups,
            measurement_seconds_max: self.max_seconds,
            cache_bytes: self.cache_bytes.unwrap_or(settings::DEFAULT_CACHE_BYTES),
            seed: self.seed,
            background_cpus: self.background_cpus.clone(),
            client_cpus: self.client_cpus.clone(),
        })
    }
}

/// Writes one line to standard output at once (rows appear as they finish).
pub fn write_line(line: &str) -> Result<(), BenchError> {
    let mut stdout = std::io::stdout().lock();
    writeln!(stdout, "{line}")
        .and_then(|()| stdout.flush())
        .map_err(|e| BenchError::new(format!("cannot write to standard output: {e}")))
}

/// Runs the benchmark on the engine `open` creates, printing a table (or JSON lines with
/// `--json`) to standard output as measurements finish. With `--next-suite`, runs NEXT's
/// suites on Sift instead (their rows are printed; the returned list is empty).
pub fn run_from_args(
    args: &IndexBenchArgs,
    open: &mut IndexEngineOpener<'_>,
) -> Result<Vec<IndexRow>, BenchError> {
    if !args.next_suite.is_empty() {
        if args.background_cpus.is_some() || args.client_cpus.is_some() {
            return Err(BenchError::new(
                "--background-cpus and --client-cpus pin the LevelDB++ workload's threads; \
                 --next-suite does not take them",
            ));
        }
        // `sift bench index` runs the suites itself (`sift_study`), before it gets here.
        return Err(BenchError::new(
            "--next-suite measures Sift's index kinds: run it with `sift bench index`",
        ));
    }
    let config = args.config()?;
    if let Some(path) = &args.db {
        let has_files = std::fs::read_dir(path).is_ok_and(|mut entries| entries.next().is_some());
        if has_files {
            return Err(BenchError::new(format!(
                "--db {} is not empty; the index benchmark loads a fresh database: remove the \
                 directory or choose another",
                path.display()
            )));
        }
    }
    let dir = BenchDir::prepare(args.db.as_deref(), &[])?;
    let engine = open(&config, dir.path())?;
    if !args.json {
        let indexes: Vec<String> = config.indexes.iter().map(ToString::to_string).collect();
        write_line(&format!(
            "engine {}: n {} workload {} indexes [{}] cache_bytes {} seed {}\n{}\n{}db {}\n\
             latency: time inside the engine's calls, per operation",
            engine.name(),
            config.tweets,
            config.workload,
            indexes.join(", "),
            config.cache_bytes,
            config.seed,
            pinning::pinning_description(
                config.background_cpus.as_deref(),
                config.client_cpus.as_deref()
            ),
            match engine.settings_note() {
                note if note.is_empty() => String::new(),
                note => format!("settings: {note}\n"),
            },
            dir.path().display()
        ))?;
        write_line(&table_header())?;
    }
    let json = args.json;
    // On a client thread of its own, pinned as asked; the engine was opened here, so its
    // background threads do not inherit the client's CPUs.
    let (engine, result) = std::thread::scope(|scope| {
        let config = &config;
        scope
            .spawn(move || {
                let result = pinning::pin_client(config.client_cpus.as_deref()).and_then(|()| {
                    run_index_benchmark(config, engine.as_ref(), &mut |row| {
                        if json {
                            let line = serde_json::to_string(row).map_err(|e| {
                                BenchError::new(format!("cannot encode a result row: {e}"))
                            })?;
                            write_line(&line)
                        } else {
                            write_line(&table_row(row))
                        }
                    })
                });
                (engine, result)
            })
            .join()
            .map_err(|_| BenchError::new("the benchmark's client thread panicked"))
    })?;
    let engine = match (&result, args.reopen) {
        (Ok(_), true) => {
            let (engine, mut report) = engine.reopen()?;
            report.tweets = config.tweets;
            if json {
                let line = serde_json::to_string(&report)
                    .map_err(|e| BenchError::new(format!("cannot encode the reopen row: {e}")))?;
                write_line(&line)?;
            } else {
                write_line(&report.line())?;
            }
            engine
        }
        _ => engine,
    };
    let closed = engine.close();
    let rows = result?;
    closed?;
    let kept = dir.finish(args.keep)?;
    if let (Some(path), false, true) = (kept, json, args.keep || args.db.is_some()) {
        write_line(&format!("database kept in {}", path.display()))?;
    }
    Ok(rows)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::index::reference::ReferenceEngine;
    use crate::index::IndexEngine;
    use clap::Parser;
    use sift_workload::Attribute;

    #[derive(Debug, Parser)]
    struct Cli {
        #[command(flatten)]
        args: IndexBenchArgs,
    }

    fn parse(arguments: &[&str]) -> Result<IndexBenchArgs, clap::Error> {
        Cli::try_parse_from(std::iter::once("bench").chain(arguments.iter().copied()))
            .map(|cli| cli.args)
    }

    #[test]
    fn defaults() {
        let config = parse(&[]).unwrap().config().unwrap();
        assert_eq!(config.tweets, 1_000_000);
        assert_eq!(config.workload, Workload::Static);
        assert_eq!(config.top_ks, vec![Some(10), Some(100), None]);
        assert_eq!(config.indexes.len(), 2);
        assert_eq!(config.mixed_operations, 1_000_000);
        assert_eq!(config.cache_bytes, settings::DEFAULT_CACHE_BYTES);
    }

    #[test]
    fn index_none_is_the_no_index_baseline() {
        let config = parse(&["--index", "none"]).unwrap().config().unwrap();
        assert!(config.indexes.is_empty());
        let both = parse(&["--index", "none", "--index", "user.id:lazy"]).unwrap();
        assert!(both.config().is_err());
    }

    #[test]
    fn parses_every_option() {
        let args = parse(&[
            "--n",
            "500",
            "--index",
            "user.id:lazy:sync-insert",
            "--workload",
            "update-heavy",
            "--top-k",
            "5,all",
            "--operations",
            "70",
            "--gets",
            "1",
            "--lookups",
            "2",
            "--range-lookups",
            "3",
            "--max-seconds",
            "0.5",
            "--cache-bytes",
            "1024",
            "--seed",
            "9",
            "--json",
        ])
        .unwrap();
        let config = args.config().unwrap();
        assert_eq!(config.indexes.len(), 1);
        assert_eq!(config.indexes[0].attribute, Attribute::UserId);
        assert_eq!(
            config.indexes[0].maintenance.as_deref(),
            Some("sync-insert")
        );
        assert_eq!(config.workload, Workload::UpdateHeavy);
        assert_eq!(config.top_ks, vec![Some(5), None]);
        assert_eq!(
            (
                config.mixed_operations,
                config.gets,
                config.lookups,
                config.range_lookups
            ),
            (70, 1, 2, 3)
        );
        assert!((config.measurement_seconds_max - 0.5).abs() < 1e-12);
        assert_eq!((config.cache_bytes, config.seed), (1024, 9));
        assert!(args.json);
    }

    #[test]
    fn rejects_bad_options() {
        assert!(parse(&["--workload", "heavy"]).is_err());
        assert!(parse(&["--top-k", "0"]).is_err());
        for bad in [
            vec!["--index", "text:lazy"],
            vec!["--index", "user.id:lazy", "--index", "user.id:eager"],
            vec!["--n", "0"],
            vec!["--max-seconds", "0"],
        ] {
            let args = parse(&bad).unwrap();
            assert!(args.config().is_err(), "{bad:?}");
        }
        // A mixed workload may start from an empty store.
        let args = parse(&["--n", "0", "--workload", "write-heavy"]).unwrap();
        assert_eq!(args.config().unwrap().tweets, 0);
    }

    /// The CPU lists parse as `taskset -c` takes them and reach the configuration; a CPU
    /// this process may not use is refused, naming the option and the CPU; `--next-suite`
    /// takes neither.
    #[test]
    fn cpu_lists_parse_and_are_checked() {
        crate::pinning::test_support::check_cpu_options(&|arguments| {
            let args = parse(arguments).map_err(|e| e.to_string())?;
            let configured = args
                .config()
                .map(|config| (config.background_cpus, config.client_cpus))
                .map_err(|e| e.to_string());
            Ok(((args.background_cpus, args.client_cpus), configured))
        });
        let suite = parse(&["--next-suite", "windows", "--client-cpus", "0"]).unwrap();
        let error = run_from_args(&suite, &mut |_, _| {
            Err(BenchError::new("must not be opened"))
        })
        .unwrap_err();
        assert!(error.message().contains("--next-suite"), "{error}");
    }

    /// The reference engine, noting the CPUs of every thread that loads or queries it.
    #[cfg(target_os = "linux")]
    struct CpuNoting {
        inner: ReferenceEngine,
        cpus: std::sync::Arc<std::sync::Mutex<std::collections::BTreeSet<Option<String>>>>,
    }

    #[cfg(target_os = "linux")]
    impl CpuNoting {
        fn note(&self) {
            let cpus = crate::pinning::current_thread_cpu_list();
            self.cpus.lock().unwrap().insert(cpus);
        }
    }

    #[cfg(target_os = "linux")]
    impl IndexEngine for CpuNoting {
        fn name(&self) -> &str {
            self.inner.name()
        }
        fn index_labels(&self, attribute: Attribute) -> Option<(String, String)> {
            self.inner.index_labels(attribute)
        }
        fn put(&self, tweet_id: u64, json: &str) -> Result<(), BenchError> {
            self.note();
            self.inner.put(tweet_id, json)
        }
        fn get(&self, tweet_id: u64) -> Result<Option<usize>, BenchError> {
            self.note();
            self.inner.get(tweet_id)
        }
        fn lookup(
            &self,
            attribute: Attribute,
            value: i64,
            top_k: Option<usize>,
            hit_ids: Option<&mut Vec<u64>>,
        ) -> Result<u64, BenchError> {
            self.note();
            self.inner.lookup(attribute, value, top_k, hit_ids)
        }
        fn range_lookup(
            &self,
            attribute: Attribute,
            lo: i64,
            hi: i64,
            top_k: Option<usize>,
            hit_ids: Option<&mut Vec<u64>>,
        ) -> Result<u64, BenchError> {
            self.note();
            self.inner.range_lookup(attribute, lo, hi, top_k, hit_ids)
        }
        fn flush(&self) -> Result<(), BenchError> {
            self.inner.flush()
        }
        fn wait_for_background_work(&self) -> Result<(), BenchError> {
            self.inner.wait_for_background_work()
        }
        fn counters(&self) -> crate::index::EngineCounters {
            self.inner.counters()
        }
        fn disk_bytes_per_tree(&self) -> Result<crate::index::TreeBytes, BenchError> {
            self.inner.disk_bytes_per_tree()
        }
        fn close(self: Box<Self>) -> Result<(), BenchError> {
            Box::new(self.inner).close()
        }
    }

    /// With `--client-cpus`, the thread that loads and queries runs on those CPUs, and the
    /// calling thread (which opens and closes the store) keeps its own; without, the loads
    /// and queries run where the caller may.
    #[cfg(target_os = "linux")]
    #[test]
    fn the_client_thread_runs_on_the_client_cpus() {
        let allowed = crate::pinning::process_allowed_cpus();
        let own = crate::pinning::current_thread_cpu_list();
        let first = allowed[0].to_string();
        for pinned in [true, false] {
            let mut arguments = vec!["--n", "200", "--gets", "5", "--lookups", "5"];
            arguments.extend(["--range-lookups", "2", "--json"]);
            if pinned {
                arguments.extend(["--client-cpus", &first]);
            }
            let args = parse(&arguments).unwrap();
            let cpus = std::sync::Arc::default();
            let mut opener_cpus = None;
            let rows = run_from_args(&args, &mut |config, _| {
                opener_cpus = crate::pinning::current_thread_cpu_list();
                Ok(Box::new(CpuNoting {
                    inner: ReferenceEngine::new(&config.indexes),
                    cpus: std::sync::Arc::clone(&cpus),
                }) as Box<dyn IndexEngine>)
            })
            .unwrap();
            let expected = if pinned {
                Some(first.clone())
            } else {
                own.clone()
            };
            assert_eq!(
                *cpus.lock().unwrap(),
                std::iter::once(expected).collect(),
                "pinned: {pinned}"
            );
            assert_eq!(opener_cpus, own, "pinned: {pinned}");
            assert_eq!(crate::pinning::current_thread_cpu_list(), own);
            let reported = pinned.then(|| vec![allowed[0]]);
            assert!(rows.iter().all(|row| row.client_cpus == reported));
            assert!(rows.iter().all(|row| row.background_cpus.is_none()));
        }
    }

    #[test]
    fn runs_and_refuses_a_non_empty_directory() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("db");
        let db_text = db.to_str().unwrap();
        let args = parse(&[
            "--n",
            "200",
            "--gets",
            "5",
            "--lookups",
            "5",
            "--range-lookups",
            "2",
            "--db",
            db_text,
            "--json",
        ])
        .unwrap();
        let mut opens = 0;
        let rows = run_from_args(&args, &mut |config, path| {
            opens += 1;
            std::fs::write(path.join("marker"), b"x").unwrap();
            Ok(Box::new(ReferenceEngine::new(&config.indexes)) as Box<dyn IndexEngine>)
        })
        .unwrap();
        assert_eq!(opens, 1);
        assert!(rows.len() > 11);
        assert!(db.join("marker").exists(), "a given directory is kept");
        let error = run_from_args(&args, &mut |_, _| {
            Err(BenchError::new("must not be opened"))
        })
        .unwrap_err();
        assert!(error.message().contains("not empty"), "{error}");
    }
}
