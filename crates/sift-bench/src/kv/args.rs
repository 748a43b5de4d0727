//! Command-line options of `kv` (shared by `sift bench kv` and `sift-peer kv`, so every
//! engine takes the same flags), the database directory's lifecycle, and printing rows as a
//! table or as JSON lines.

use super::{
    report, run, settings, BenchError, CompressionKind, ConfiguredOpener, EngineOpener, KvConfig,
    Operation, Row,
};
use crate::pinning::{self, parse_cpus};
use std::io::Write;
use std::path::{Path, PathBuf};

/// Options of the kv benchmark.
#[derive(Debug, Clone, PartialEq, Eq, clap::Args)]
pub struct KvArgs {
    /// Operations to run, in order, comma-separated.
    #[arg(long, value_delimiter = ',', default_values_t = Operation::ALL.to_vec())]
    pub ops: Vec<Operation>,
    /// Operations per benchmark, and the key space (keys 0..n).
    #[arg(long, default_value_t = 1_000_000)]
    pub n: u64,
    /// Key length: the key number as zero-padded decimal.
    #[arg(long, default_value_t = 16)]
    pub key_bytes: usize,
    #[arg(long, default_value_t = 100)]
    pub value_bytes: usize,
    /// Threads; each does n/threads operations of the same kind concurrently.
    #[arg(long, default_value_t = 1)]
    pub threads: usize,
    /// Block cache capacity in bytes [default: Sift's default, 32 MiB].
    #[arg(long)]
    pub cache_bytes: Option<usize>,
    #[arg(long, value_enum, default_value_t = CompressionKind::None)]
    pub compression: CompressionKind,
    /// Database directory [default: a fresh temporary directory under the current one,
    /// removed at the end unless --keep]. A given directory is never removed; fill
    /// operations require it to be empty or absent.
    #[arg(long)]
    pub db: Option<PathBuf>,
    /// Keep the temporary database directory.
    #[arg(long)]
    pub keep: bool,
    /// Sync the WAL on every write (default: WAL on, not synced).
    #[arg(long)]
    pub sync: bool,
    /// Sift only: pin the engine's flush, compaction and WAL presync threads to these CPUs
    /// (engine option `background_thread_cpus`; Linux only), e.g. `1` or `2-3`. With
    /// --client-cpus on the other CPUs, background work never preempts a client on its core
    /// [default: every CPU].
    // A fully qualified `Vec`: one value parsed into a list, not one value per occurrence.
    #[arg(long, value_parser = parse_cpus)]
    pub background_cpus: Option<::std::vec::Vec<usize>>,
    /// Pin the client threads, the --threads threads that issue each operation's puts, gets,
    /// seeks and scans, to these CPUs (Linux only), e.g. `0`. The database is opened, waited
    /// on and closed from the main thread, which stays unpinned [default: every CPU].
    #[arg(long, value_parser = parse_cpus)]
    pub client_cpus: Option<::std::vec::Vec<usize>>,
    /// Seed of the random keys and values.
    #[arg(long, default_value_t = 301)]
    pub seed: u64,
    /// Print one JSON object per operation instead of a table.
    #[arg(long)]
    pub json: bool,
}

impl KvArgs {
    /// Checks the options and resolves defaults.
    pub fn config(&self) -> Result<KvConfig, BenchError> {
        if self.ops.is_empty() {
            return Err(BenchError::new("--ops names no operation"));
        }
        if self.n == 0 {
            return Err(BenchError::new("--n must be at least 1"));
        }
        if self.threads == 0 {
            return Err(BenchError::new("--threads must be at least 1"));
        }
        pinning::check_allowed(self.background_cpus.as_deref(), self.client_cpus.as_deref())?;
        let config = KvConfig {
            operations: self.ops.clone(),
            key_count: self.n,
            key_bytes: self.key_bytes,
            value_bytes: self.value_bytes,
            threads: self.threads,
            cache_bytes: self.cache_bytes.unwrap_or(settings::DEFAULT_CACHE_BYTES),
            compression: self.compression,
            sync: self.sync,
            seed: self.seed,
            background_cpus: self.background_cpus.clone(),
            client_cpus: self.client_cpus.clone(),
        };
        config.key_format()?;
        Ok(config)
    }
}

/// The database directory of one run: given by the user (kept) or temporary (removed when
/// dropped, unless kept).
#[derive(Debug)]
pub struct BenchDir {
    path: PathBuf,
    temporary: Option<tempfile::TempDir>,
}

impl BenchDir {
    /// Uses `given` or makes a temporary directory under the current one. A given directory
    /// that already holds files is refused when an operation needs a fresh database: the
    /// harness never deletes data it did not write.
    pub fn prepare(given: Option<&Path>, operations: &[Operation]) -> Result<BenchDir, BenchError> {
        let Some(path) = given else {
            let current = std::env::current_dir()
                .map_err(|e| BenchError::new(format!("cannot read the current directory: {e}")))?;
            let temporary = tempfile::Builder::new()
                .prefix("sift-bench-kv-")
                .tempdir_in(current)
                .map_err(|e| {
                    BenchError::new(format!(
                        "cannot create a temporary database directory under the current \
                         directory: {e}"
                    ))
                })?;
            return Ok(BenchDir {
                path: temporary.path().to_path_buf(),
                temporary: Some(temporary),
            });
        };
        let has_files = match std::fs::read_dir(path) {
            Ok(mut entries) => entries.next().is_some(),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => false,
            Err(e) => {
                return Err(BenchError::new(format!(
                    "cannot read --db {}: {e}",
                    path.display()
                )))
            }
        };
        if has_files {
            if let Some(fresh) = operations.iter().find(|o| o.needs_fresh_db()) {
                return Err(BenchError::new(format!(
                    "--db {} is not empty, and {fresh} starts from a fresh database; remove the \
                     directory or choose another",
                    path.display()
                )));
            }
        }
        std::fs::create_dir_all(path)
            .map_err(|e| BenchError::new(format!("cannot create --db {}: {e}", path.display())))?;
        Ok(BenchDir {
            path: path.to_path_buf(),
            temporary: None,
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Removes a temporary directory, or keeps it (`keep`) and returns its path.
    pub fn finish(self, keep: bool) -> Result<Option<PathBuf>, BenchError> {
        match self.temporary {
            None => Ok(Some(self.path)),
            Some(temporary) if keep => Ok(Some(temporary.keep())),
            Some(temporary) => {
                temporary.close().map_err(|e| {
                    BenchError::new(format!("cannot remove {}: {e}", self.path.display()))
                })?;
                Ok(None)
            }
        }
    }
}

fn write_line(line: &str) -> Result<(), BenchError> {
    let mut stdout = std::io::stdout().lock();
    writeln!(stdout, "{line}")
        .and_then(|()| stdout.flush())
        .map_err(|e| BenchError::new(format!("cannot write to standard output: {e}")))
}

/// Runs the benchmark for `engine_name` with `open`, printing a table (or JSON lines with
/// `--json`) to standard output as operations finish. Used by both binaries.
pub fn run_from_args(
    args: &KvArgs,
    engine_name: &str,
    open: &mut ConfiguredOpener<'_>,
) -> Result<Vec<Row>, BenchError> {
    let config = args.config()?;
    let dir = BenchDir::prepare(args.db.as_deref(), &config.operations)?;
    if !args.json {
        write_line(&format!(
            "engine {engine_name}: n {} key_bytes {} value_bytes {} threads {} compression {} \
             cache_bytes {} sync {} seed {}\n{}\ndb {}\nlatency: per operation (readseq: per \
             entry)",
            config.key_count,
            config.key_bytes,
            config.value_bytes,
            config.threads,
            config.compression,
            config.cache_bytes,
            config.sync,
            config.seed,
            pinning::pinning_description(
                config.background_cpus.as_deref(),
                config.client_cpus.as_deref()
            ),
            dir.path().display()
        ))?;
        write_line(&report::table_header())?;
    }
    let json = args.json;
    let mut opener = |path: &Path| open(&config, path);
    let opener: &mut EngineOpener<'_> = &mut opener;
    let result = run(&config, engine_name, dir.path(), opener, &mut |row| {
        if json {
            let line = serde_json::to_string(row)
                .map_err(|e| BenchError::new(format!("cannot encode a result row: {e}")))?;
            write_line(&line)
        } else {
            write_line(&report::table_row(row))
        }
    });
    // The directory goes (or stays) whether or not the run worked.
    let kept = dir.finish(args.keep)?;
    let rows = result?;
    if let Some(path) = kept {
        if args.json {
            eprintln!("database kept in {}", path.display());
        } else {
            write_line(&format!("database kept in {}", path.display()))?;
        }
    }
    Ok(rows)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Debug, Parser)]
    struct Wrapper {
        #[command(flatten)]
        kv: KvArgs,
    }

    fn parse(arguments: &[&str]) -> Result<KvArgs, clap::Error> {
        Wrapper::try_parse_from(std::iter::once("kv").chain(arguments.iter().copied()))
            .map(|w| w.kv)
    }

    #[test]
    fn defaults_match_db_bench() {
        let args = parse(&[]).unwrap();
        assert_eq!(args.ops, Operation::ALL.to_vec());
        assert_eq!(args.n, 1_000_000);
        assert_eq!(
            (args.key_bytes, args.value_bytes, args.threads),
            (16, 100, 1)
        );
        assert_eq!(args.compression, CompressionKind::None);
        assert!(!args.sync && !args.json && !args.keep);
        let config = args.config().unwrap();
        assert_eq!(config.cache_bytes, settings::DEFAULT_CACHE_BYTES);
    }

    #[test]
    fn parses_every_option() {
        let args = parse(&[
            "--ops",
            "fillrandom,readrandom",
            "--n",
            "5000",
            "--key-bytes",
            "10",
            "--value-bytes",
            "400",
            "--threads",
            "4",
            "--cache-bytes",
            "0",
            "--compression",
            "lz4",
            "--db",
            "/tmp/x",
            "--keep",
            "--sync",
            "--seed",
            "9",
            "--json",
        ])
        .unwrap();
        assert_eq!(args.ops, [Operation::FillRandom, Operation::ReadRandom]);
        let config = args.config().unwrap();
        assert_eq!(config.key_count, 5000);
        assert_eq!(
            (config.key_bytes, config.value_bytes, config.threads),
            (10, 400, 4)
        );
        assert_eq!(config.cache_bytes, 0);
        assert_eq!(config.compression, CompressionKind::Lz4);
        assert!(config.sync && args.json && args.keep);
        assert_eq!(config.seed, 9);
        assert_eq!(args.db.as_deref(), Some(Path::new("/tmp/x")));
    }

    #[test]
    fn rejects_bad_options() {
        assert!(parse(&["--ops", "fillrandom,readsomething"]).is_err());
        assert!(parse(&["--compression", "zstd"]).is_err());
        assert!(parse(&["--n", "-5"]).is_err());
        assert!(parse(&["--n", "0"]).unwrap().config().is_err());
        assert!(parse(&["--threads", "0"]).unwrap().config().is_err());
        let too_short = parse(&["--n", "1000000", "--key-bytes", "5"])
            .unwrap()
            .config();
        assert!(too_short.unwrap_err().message().contains("--key-bytes 5"));
    }

    /// The CPU lists parse as `taskset -c` takes them and reach the configuration; a CPU
    /// this process may not use is refused, naming the option and the CPU.
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
    }

    #[test]
    fn a_given_non_empty_directory_is_never_wiped_for_a_fill() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("precious"), b"data").unwrap();
        let error = BenchDir::prepare(
            Some(dir.path()),
            &[Operation::ReadRandom, Operation::FillSeq],
        )
        .unwrap_err();
        assert!(error.message().contains("not empty"), "{error}");
        // Reads on existing data are fine, and the directory stays.
        let bench_dir = BenchDir::prepare(Some(dir.path()), &[Operation::ReadRandom]).unwrap();
        assert_eq!(
            bench_dir.finish(false).unwrap().as_deref(),
            Some(dir.path())
        );
        assert!(dir.path().join("precious").exists());
        // An absent directory is created.
        let fresh = dir.path().join("new");
        BenchDir::prepare(Some(&fresh), &[Operation::FillSeq]).unwrap();
        assert!(fresh.is_dir());
    }

    #[test]
    fn temporary_directory_is_removed_unless_kept() {
        let removed = BenchDir::prepare(None, &Operation::ALL).unwrap();
        let path = removed.path().to_path_buf();
        assert!(path.is_dir() && path.is_absolute());
        assert!(path.starts_with(std::env::current_dir().unwrap()));
        std::fs::write(path.join("CURRENT"), b"x").unwrap();
        assert_eq!(removed.finish(false).unwrap(), None);
        assert!(!path.exists());

        let kept = BenchDir::prepare(None, &Operation::ALL).unwrap();
        let kept_path = kept.finish(true).unwrap().unwrap();
        assert!(kept_path.is_dir());
        std::fs::remove_dir_all(kept_path).unwrap();
    }
}
