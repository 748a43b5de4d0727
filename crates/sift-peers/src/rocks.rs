//! RocksDB (Debian's librocksdb through the `rocksdb` crate) behind the benchmark's `Engine`
//! trait, configured like Sift: WAL on (synced only with `--sync`), 4 KiB blocks, a 10
//! bits/key bloom filter, an LRU block cache of `--cache-bytes`, 64 MiB memtables with up to
//! two frozen ones, leveled compaction with RocksDB's defaults (which match Sift's: L0
//! triggers 4/20/36, 256 MiB L1, ratio 10, 64 MiB files).

use rocksdb::{BlockBasedOptions, Cache, DBCompressionType, Options, WriteOptions, DB};
use sift_bench::kv::settings;
use sift_bench::kv::{BenchError, CompressionKind, Engine, EngineCounters, KvConfig};
use std::path::Path;
use std::time::Duration;

pub struct RocksDbEngine {
    db: DB,
    /// Kept for its statistics object, which the database shares.
    options: Options,
    write_options: WriteOptions,
    /// The block cache must outlive the database.
    _cache: Option<Cache>,
}

fn rocks_error(context: &str, error: rocksdb::Error) -> BenchError {
    BenchError::new(format!("rocksdb: {context}: {error}"))
}

impl RocksDbEngine {
    pub fn open(config: &KvConfig, path: &Path) -> Result<Box<dyn Engine>, BenchError> {
        let mut options = Options::default();
        options.create_if_missing(true);
        options.set_write_buffer_size(settings::WRITE_BUFFER_BYTES);
        options.set_max_write_buffer_number((settings::IMMUTABLE_MEMTABLES_MAX + 1) as i32);
        options.set_compression_type(match config.compression {
            CompressionKind::None => DBCompressionType::None,
            CompressionKind::Snappy => DBCompressionType::Snappy,
            CompressionKind::Lz4 => DBCompressionType::Lz4,
        });
        // For the bytes-written and blocks-read tickers.
        options.enable_statistics();
        let mut table_options = BlockBasedOptions::default();
        table_options.set_block_size(settings::BLOCK_BYTES);
        table_options.set_bloom_filter(f64::from(settings::BLOOM_BITS_PER_KEY), false);
        let cache = if config.cache_bytes > 0 {
            let cache = Cache::new_lru_cache(config.cache_bytes)
                .map_err(|e| rocks_error("cannot create the block cache", e))?;
            table_options.set_block_cache(&cache);
            Some(cache)
        } else {
            table_options.disable_cache();
            None
        };
        options.set_block_based_table_factory(&table_options);
        let db = DB::open(&options, path)
            .map_err(|e| rocks_error(&format!("cannot open {}", path.display()), e))?;
        let mut write_options = WriteOptions::default();
        write_options.set_sync(config.sync);
        Ok(Box::new(RocksDbEngine {
            db,
            options,
            write_options,
            _cache: cache,
        }))
    }

    fn property(&self, name: &str) -> Result<u64, BenchError> {
        Ok(self
            .db
            .property_int_value(name)
            .map_err(|e| rocks_error(&format!("cannot read property {name}"), e))?
            .unwrap_or(0))
    }
}

/// The value of ticker `name` in RocksDB's statistics dump (`name COUNT : value` lines).
pub fn ticker(statistics: &str, name: &str) -> Option<u64> {
    statistics.lines().find_map(|line| {
        let (key, value) = line.split_once(" COUNT : ")?;
        (key.trim() == name)
            .then(|| value.trim().parse().ok())
            .flatten()
    })
}

impl Engine for RocksDbEngine {
    fn put(&self, key: &[u8], value: &[u8]) -> Result<(), BenchError> {
        self.db
            .put_opt(key, value, &self.write_options)
            .map_err(|e| rocks_error("put failed", e))
    }

    fn get(&self, key: &[u8]) -> Result<Option<usize>, BenchError> {
        self.db
            .get_pinned(key)
            .map(|value| value.map(|value| value.len()))
            .map_err(|e| rocks_error("get failed", e))
    }

    fn seek_and_read_one(&self, key: &[u8]) -> Result<Option<usize>, BenchError> {
        let mut iterator = self.db.raw_iterator();
        iterator.seek(key);
        iterator
            .status()
            .map_err(|e| rocks_error("seek failed", e))?;
        Ok(match (iterator.key(), iterator.value()) {
            (Some(key), Some(value)) => Some(key.len() + value.len()),
            _ => None,
        })
    }

    fn scan(
        &self,
        start: Option<&[u8]>,
        end: Option<&[u8]>,
        on_entry: &mut dyn FnMut(usize),
    ) -> Result<u64, BenchError> {
        let mut iterator = self.db.raw_iterator();
        match start {
            Some(start) => iterator.seek(start),
            None => iterator.seek_to_first(),
        }
        let mut entries = 0;
        while let (Some(key), Some(value)) = (iterator.key(), iterator.value()) {
            if end.is_some_and(|end| key >= end) {
                break;
            }
            on_entry(key.len() + value.len());
            entries += 1;
            iterator.next();
        }
        iterator
            .status()
            .map_err(|e| rocks_error("scan failed", e))?;
        Ok(entries)
    }

    fn flush(&self) -> Result<(), BenchError> {
        self.db.flush().map_err(|e| rocks_error("flush failed", e))
    }

    /// RocksDB 7.8's C API has no wait-for-compaction call: polls the pending and running
    /// flush and compaction properties until all are zero.
    fn wait_for_background_work(&self) -> Result<(), BenchError> {
        const PROPERTIES: [&str; 4] = [
            "rocksdb.mem-table-flush-pending",
            "rocksdb.num-running-flushes",
            "rocksdb.compaction-pending",
            "rocksdb.num-running-compactions",
        ];
        loop {
            let mut busy = false;
            for name in PROPERTIES {
                busy |= self.property(name)? > 0;
            }
            if !busy {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    fn counters(&self) -> EngineCounters {
        let Some(statistics) = self.options.get_statistics() else {
            return EngineCounters::default();
        };
        let sum = |names: &[&str]| -> Option<u64> {
            names
                .iter()
                .map(|name| ticker(&statistics, name))
                .sum::<Option<u64>>()
        };
        EngineCounters {
            bytes_written: sum(&[
                "rocksdb.wal.bytes",
                "rocksdb.flush.write.bytes",
                "rocksdb.compact.write.bytes",
            ]),
            blocks_read: sum(&["rocksdb.block.cache.hit", "rocksdb.block.cache.miss"]),
        }
    }

    fn close(self: Box<Self>) -> Result<(), BenchError> {
        // Dropping the handle closes the database (waiting for background work to stop).
        drop(self);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_tickers() {
        let dump = "rocksdb.block.cache.miss COUNT : 12\nrocksdb.block.cache.hit COUNT : 30\n\
                    rocksdb.db.get.micros P50 : 1.0 P95 : 2.0 COUNT : 5 SUM : 9\n";
        assert_eq!(ticker(dump, "rocksdb.block.cache.miss"), Some(12));
        assert_eq!(ticker(dump, "rocksdb.block.cache.hit"), Some(30));
        assert_eq!(ticker(dump, "rocksdb.wal.bytes"), None);
    }
}
