//! The `Engine` implementation for Sift (`sift_lsm::Db`, default tree), opened with the
//! shared benchmark settings.
//!
//! `seek_and_read_one` and `scan` use the user-facing iterator's API (`DbIterator::valid`,
//! `key`, `value`, `seek`, `seek_to_first`, `next`), written before that module landed.

use sift_bench::kv::{settings, BenchError, CompressionKind, Engine, EngineCounters, KvConfig};
use sift_lsm::DbIterator;
use sift_lsm::{Compression, Db, Options, ReadOptions, Tree, WriteBatch, WriteOptions};
use std::path::Path;

/// Sift behind the benchmark's `Engine` trait.
pub struct SiftEngine {
    db: Db,
    tree: Tree,
    write_options: WriteOptions,
}

fn sift_error(context: &str, error: sift_lsm::Error) -> BenchError {
    BenchError::new(format!("sift: {context}: {error}"))
}

/// The engine options the benchmark uses for a configuration.
pub fn options(config: &KvConfig) -> Options {
    Options {
        compression: match config.compression {
            CompressionKind::None => Compression::None,
            CompressionKind::Snappy => Compression::Snappy,
            CompressionKind::Lz4 => Compression::Lz4,
        },
        block_cache_bytes: config.cache_bytes,
        block_bytes: settings::BLOCK_BYTES,
        bloom_bits_per_key: settings::BLOOM_BITS_PER_KEY,
        memtable_bytes_max: settings::WRITE_BUFFER_BYTES,
        immutable_memtables_max: settings::IMMUTABLE_MEMTABLES_MAX,
        background_thread_cpus: config.background_cpus.clone(),
        ..Options::default()
    }
}

impl SiftEngine {
    pub fn open(config: &KvConfig, path: &Path) -> Result<SiftEngine, BenchError> {
        let db = Db::open(path, options(config))
            .map_err(|e| sift_error(&format!("cannot open {}", path.display()), e))?;
        let tree = db.default_tree();
        Ok(SiftEngine {
            db,
            tree,
            write_options: WriteOptions { sync: config.sync },
        })
    }

    /// `open` boxed as the runner wants it.
    pub fn open_boxed(config: &KvConfig, path: &Path) -> Result<Box<dyn Engine>, BenchError> {
        Ok(Box::new(SiftEngine::open(config, path)?))
    }

    fn iterator(&self) -> Result<DbIterator, BenchError> {
        self.db
            .iter(&self.tree, ReadOptions::default())
            .map_err(|e| sift_error("cannot create an iterator", e))
    }
}

impl Engine for SiftEngine {
    fn put(&self, key: &[u8], value: &[u8]) -> Result<(), BenchError> {
        if self.write_options.sync {
            let mut batch = WriteBatch::new();
            batch.put(&self.tree, key, value);
            self.db.write(batch, &self.write_options)
        } else {
            self.db.put(&self.tree, key, value)
        }
        .map(|_sequence| ())
        .map_err(|e| sift_error("put failed", e))
    }

    fn get(&self, key: &[u8]) -> Result<Option<usize>, BenchError> {
        self.db
            .get(&self.tree, key)
            .map(|entry| entry.map(|entry| entry.value.len()))
            .map_err(|e| sift_error("get failed", e))
    }

    fn seek_and_read_one(&self, key: &[u8]) -> Result<Option<usize>, BenchError> {
        let mut iterator = self.iterator()?;
        iterator
            .seek(key)
            .map_err(|e| sift_error("seek failed", e))?;
        Ok(iterator
            .valid()
            .then(|| iterator.key().len() + iterator.value().len()))
    }

    fn scan(
        &self,
        start: Option<&[u8]>,
        end: Option<&[u8]>,
        on_entry: &mut dyn FnMut(usize),
    ) -> Result<u64, BenchError> {
        let mut iterator = self.iterator()?;
        match start {
            Some(start) => iterator.seek(start),
            None => iterator.seek_to_first(),
        }
        .map_err(|e| sift_error("scan failed", e))?;
        let mut entries = 0;
        while iterator.valid() {
            if end.is_some_and(|end| iterator.key() >= end) {
                break;
            }
            on_entry(iterator.key().len() + iterator.value().len());
            entries += 1;
            iterator.next().map_err(|e| sift_error("scan failed", e))?;
        }
        Ok(entries)
    }

    fn flush(&self) -> Result<(), BenchError> {
        self.db.flush().map_err(|e| sift_error("flush failed", e))
    }

    fn wait_for_background_work(&self) -> Result<(), BenchError> {
        self.db
            .wait_for_background_work()
            .map_err(|e| sift_error("background work failed", e))
    }

    fn counters(&self) -> EngineCounters {
        let stats = self.db.stats();
        EngineCounters {
            bytes_written: Some(stats.bytes_written),
            blocks_read: Some(stats.blocks_read_from_disk + stats.blocks_read_from_cache),
        }
    }

    fn close(self: Box<Self>) -> Result<(), BenchError> {
        self.db.close().map_err(|e| sift_error("close failed", e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn benchmark_defaults_are_sift_defaults() {
        let defaults = Options::default();
        assert_eq!(settings::DEFAULT_CACHE_BYTES, defaults.block_cache_bytes);
        assert_eq!(
            settings::IMMUTABLE_MEMTABLES_MAX,
            defaults.immutable_memtables_max
        );
        let config = KvConfig {
            operations: vec![],
            key_count: 1,
            key_bytes: 16,
            value_bytes: 100,
            threads: 1,
            cache_bytes: 1234,
            compression: CompressionKind::Snappy,
            sync: false,
            seed: 0,
            background_cpus: Some(vec![1]),
            client_cpus: None,
        };
        let options = options(&config);
        assert_eq!(options.block_cache_bytes, 1234);
        assert_eq!(options.compression, Compression::Snappy);
        assert_eq!(options.block_bytes, 4096);
        assert_eq!(options.bloom_bits_per_key, 10);
        assert_eq!(options.memtable_bytes_max, 64 << 20);
        assert_eq!(options.background_thread_cpus, Some(vec![1]));
    }

    /// `sift bench kv --background-cpus C --client-cpus C --json`: every row reports both
    /// lists; a CPU the process may not use is refused before anything runs.
    #[test]
    fn a_pinned_run_reports_its_cpus_in_json() {
        #[derive(Debug, clap::Parser)]
        struct Cli {
            #[command(flatten)]
            args: sift_bench::kv::KvArgs,
        }
        let parse = |cpus: &str| {
            let dir = tempfile::tempdir().unwrap();
            let db = dir.path().join("db").to_str().unwrap().to_owned();
            let args = <Cli as clap::Parser>::try_parse_from([
                "kv",
                "--ops",
                "fillrandom,readrandom",
                "--n",
                "300",
                "--threads",
                "2",
                "--db",
                &db,
                "--background-cpus",
                cpus,
                "--client-cpus",
                cpus,
                "--json",
            ])
            .unwrap()
            .args;
            (dir, args)
        };
        let first = sift_lsm::process_allowed_cpus()[0];
        let (_dir, args) = parse(&first.to_string());
        let rows =
            sift_bench::kv::run_from_args(&args, "sift", &mut SiftEngine::open_boxed).unwrap();
        assert_eq!(rows.len(), 2);
        for row in &rows {
            let json = serde_json::to_value(row).unwrap();
            assert_eq!(
                json["background_cpus"],
                serde_json::json!([first]),
                "{json}"
            );
            assert_eq!(json["client_cpus"], serde_json::json!([first]), "{json}");
        }
        if cfg!(target_os = "linux") {
            let (dir, args) = parse("4096");
            let error = sift_bench::kv::run_from_args(&args, "sift", &mut SiftEngine::open_boxed)
                .unwrap_err();
            assert!(
                error.message().starts_with("--background-cpus: CPU 4096 "),
                "{error}"
            );
            assert!(!dir.path().join("db").exists(), "nothing ran");
        }
    }
}
