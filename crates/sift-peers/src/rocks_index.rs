//! RocksDB with an application-maintained composite index behind the index benchmark's
//! `IndexEngine`, configured like the kv peer (4 KiB blocks, 10 bits/key bloom filters, one
//! LRU block cache of `--cache-bytes` shared by every column family, 64 MiB memtables, WAL on
//! and not synced, no compression).
//!
//! Column families:
//! * `documents`: big-endian `tweet_id` → header ⊕ JSON. The header holds the version's
//!   sequence number and the encoded values of the indexed attributes, so maintenance never
//!   parses an old document again.
//! * `index.<path>`, one per index: key = value (8 bytes, order-preserving: the `i64` with its
//!   sign bit flipped, big-endian) ⊕ inverted sequence (big-endian `!sequence`) ⊕ `tweet_id`,
//!   empty value. Within one value the newest version comes first in a forward scan.
//! * `default`: the last sequence number (recovered on open).
//!
//! A PUT reads the current version (if any) and, in one WriteBatch with the new document and
//! its new index entries, deletes the old version's entries (sync-full maintenance): every
//! index entry is live, so answers are exact without validation. LOOKUP scans the value's
//! prefix and takes the first K; RANGELOOKUP scans the value range keeping the K newest in a
//! heap. Every hit's document is then read from `documents`.

use rocksdb::{
    BlockBasedOptions, Cache, ColumnFamily, ColumnFamilyDescriptor, DBCompressionType, Options,
    ReadOptions, WriteBatch, WriteOptions, DB,
};
use sift_bench::index::{
    attribute_value, directory_bytes, BenchError, EngineCounters, IndexBenchConfig, IndexEngine,
    TreeBytes,
};
use sift_bench::kv::settings;
use sift_workload::Attribute;
use std::cell::Cell;
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::path::{Path, PathBuf};
use std::time::Duration;

const DOCUMENTS: &str = "documents";
const SEQUENCE_KEY: &[u8] = b"sequence";
/// Sequence (8) and, per attribute of `Attribute::ALL`, presence (1) and value (8).
const HEADER_BYTES: usize = 8 + 2 * 9;

pub struct RocksIndexEngine {
    db: DB,
    options: Options,
    write_options: WriteOptions,
    indexed: Vec<Attribute>,
    /// The last sequence number handed out.
    sequence: Cell<u64>,
    path: PathBuf,
    _cache: Cache,
}

fn rocks_error(context: &str, error: rocksdb::Error) -> BenchError {
    BenchError::new(format!("rocksdb: {context}: {error}"))
}

fn index_family(attribute: Attribute) -> String {
    format!("index.{}", attribute.path())
}

fn slot(attribute: Attribute) -> usize {
    match attribute {
        Attribute::UserId => 0,
        Attribute::CreationTime => 1,
    }
}

/// Order-preserving encoding of an `i64`.
fn encode_value(value: i64) -> [u8; 8] {
    ((value as u64) ^ (1 << 63)).to_be_bytes()
}

fn index_key(value: [u8; 8], sequence: u64, tweet_id: u64) -> [u8; 24] {
    let mut key = [0; 24];
    key[..8].copy_from_slice(&value);
    key[8..16].copy_from_slice(&(!sequence).to_be_bytes());
    key[16..].copy_from_slice(&tweet_id.to_be_bytes());
    key
}

/// (sequence, tweet_id) of an index key; `None` for a key of another length.
fn decode_index_key(key: &[u8]) -> Option<(u64, u64)> {
    let inverted = u64::from_be_bytes(key.get(8..16)?.try_into().ok()?);
    let tweet_id = u64::from_be_bytes(key.get(16..24)?.try_into().ok()?);
    (key.len() == 24).then_some((!inverted, tweet_id))
}

/// The header's sequence and encoded values.
fn decode_header(value: &[u8]) -> Option<(u64, [Option<[u8; 8]>; 2])> {
    let header = value.get(..HEADER_BYTES)?;
    let sequence = u64::from_be_bytes(header[..8].try_into().ok()?);
    let mut values = [None; 2];
    for (index, slot_value) in values.iter_mut().enumerate() {
        let start = 8 + index * 9;
        if header[start] == 1 {
            *slot_value = Some(header[start + 1..start + 9].try_into().ok()?);
        }
    }
    Some((sequence, values))
}

impl RocksIndexEngine {
    pub fn open(config: &IndexBenchConfig, dir: &Path) -> Result<Box<dyn IndexEngine>, BenchError> {
        Ok(Box::new(Self::create(config, dir)?))
    }

    pub fn create(config: &IndexBenchConfig, dir: &Path) -> Result<RocksIndexEngine, BenchError> {
        let cache = Cache::new_lru_cache(config.cache_bytes.max(1))
            .map_err(|e| rocks_error("cannot create the block cache", e))?;
        let family_options = || {
            let mut options = Options::default();
            options.set_write_buffer_size(settings::WRITE_BUFFER_BYTES);
            options.set_max_write_buffer_number((settings::IMMUTABLE_MEMTABLES_MAX + 1) as i32);
            options.set_compression_type(DBCompressionType::None);
            let mut table_options = BlockBasedOptions::default();
            table_options.set_block_size(settings::BLOCK_BYTES);
            table_options.set_bloom_filter(f64::from(settings::BLOOM_BITS_PER_KEY), false);
            table_options.set_block_cache(&cache);
            options.set_block_based_table_factory(&table_options);
            options
        };
        let mut options = family_options();
        options.create_if_missing(true);
        options.create_missing_column_families(true);
        options.enable_statistics();
        let indexed: Vec<Attribute> = config.indexes.iter().map(|spec| spec.attribute).collect();
        let mut families = vec![
            ColumnFamilyDescriptor::new("default", family_options()),
            ColumnFamilyDescriptor::new(DOCUMENTS, family_options()),
        ];
        for attribute in &indexed {
            families.push(ColumnFamilyDescriptor::new(
                index_family(*attribute),
                family_options(),
            ));
        }
        let db = DB::open_cf_descriptors(&options, dir, families)
            .map_err(|e| rocks_error(&format!("cannot open {}", dir.display()), e))?;
        let sequence = match db
            .get_pinned(SEQUENCE_KEY)
            .map_err(|e| rocks_error("cannot read the sequence", e))?
        {
            Some(bytes) => u64::from_be_bytes(bytes.as_ref().try_into().map_err(|_| {
                BenchError::new(format!(
                    "rocksdb: {}: the sequence record has {} bytes, expected 8",
                    dir.display(),
                    bytes.len()
                ))
            })?),
            None => 0,
        };
        let mut write_options = WriteOptions::default();
        write_options.set_sync(false);
        Ok(RocksIndexEngine {
            db,
            options,
            write_options,
            indexed,
            sequence: Cell::new(sequence),
            path: dir.to_path_buf(),
            _cache: cache,
        })
    }

    fn family(&self, name: &str) -> Result<&ColumnFamily, BenchError> {
        self.db
            .cf_handle(name)
            .ok_or_else(|| BenchError::new(format!("rocksdb: no column family {name}")))
    }

    fn index(&self, attribute: Attribute) -> Result<&ColumnFamily, BenchError> {
        if !self.indexed.contains(&attribute) {
            return Err(BenchError::new(format!(
                "rocksdb: no index on {}",
                attribute.path()
            )));
        }
        self.family(&index_family(attribute))
    }

    /// Reads the documents of the hits (as a user's query would) and reports their ids.
    fn fetch(
        &self,
        hits: &[(u64, u64)],
        hit_ids: Option<&mut Vec<u64>>,
    ) -> Result<u64, BenchError> {
        let documents = self.family(DOCUMENTS)?;
        let mut document_bytes = 0;
        for &(_, tweet_id) in hits {
            let document = self
                .db
                .get_pinned_cf(documents, tweet_id.to_be_bytes())
                .map_err(|e| rocks_error("cannot read a hit's document", e))?
                .ok_or_else(|| {
                    BenchError::new(format!(
                        "rocksdb: index entry for tweet {tweet_id} without its document"
                    ))
                })?;
            document_bytes += document.len();
        }
        std::hint::black_box(document_bytes);
        if let Some(ids) = hit_ids {
            ids.extend(hits.iter().map(|&(_, tweet_id)| tweet_id));
        }
        Ok(hits.len() as u64)
    }

    fn property(&self, family: &ColumnFamily, name: &str) -> Result<u64, BenchError> {
        Ok(self
            .db
            .property_int_value_cf(family, name)
            .map_err(|e| rocks_error(&format!("cannot read property {name}"), e))?
            .unwrap_or(0))
    }

    fn family_names(&self) -> Vec<String> {
        let mut names = vec!["default".to_owned(), DOCUMENTS.to_owned()];
        names.extend(
            self.indexed
                .iter()
                .map(|attribute| index_family(*attribute)),
        );
        names
    }
}

impl IndexEngine for RocksIndexEngine {
    fn name(&self) -> &'static str {
        "rocksdb"
    }

    fn index_labels(&self, attribute: Attribute) -> Option<(String, String)> {
        self.indexed
            .contains(&attribute)
            .then(|| ("composite".to_owned(), "sync-full".to_owned()))
    }

    fn settings_note(&self) -> String {
        "rocksdb: WAL on, not synced; index entries in the document's WriteBatch; old entries \
         deleted on overwrite (read before write)"
            .to_owned()
    }

    fn put(&self, tweet_id: u64, json: &str) -> Result<(), BenchError> {
        let document: serde_json::Value = serde_json::from_str(json)
            .map_err(|e| BenchError::new(format!("rocksdb: tweet {tweet_id}: {e}")))?;
        let documents = self.family(DOCUMENTS)?;
        let key = tweet_id.to_be_bytes();
        let mut batch = WriteBatch::default();
        let previous = self
            .db
            .get_pinned_cf(documents, key)
            .map_err(|e| rocks_error("cannot read the previous version", e))?;
        if let Some(previous) = previous {
            let (old_sequence, old_values) = decode_header(&previous).ok_or_else(|| {
                BenchError::new(format!(
                    "rocksdb: the stored document of tweet {tweet_id} has a {}-byte value, \
                     shorter than its header",
                    previous.len()
                ))
            })?;
            for &attribute in &self.indexed {
                if let Some(old_value) = old_values[slot(attribute)] {
                    batch.delete_cf(
                        self.index(attribute)?,
                        index_key(old_value, old_sequence, tweet_id),
                    );
                }
            }
        }
        let sequence = self.sequence.get() + 1;
        let mut stored = Vec::with_capacity(HEADER_BYTES + json.len());
        stored.extend_from_slice(&sequence.to_be_bytes());
        for attribute in Attribute::ALL {
            let value = self
                .indexed
                .contains(&attribute)
                .then(|| attribute_value(&document, attribute))
                .flatten();
            match value {
                Some(value) => {
                    let encoded = encode_value(value);
                    stored.push(1);
                    stored.extend_from_slice(&encoded);
                    batch.put_cf(
                        self.index(attribute)?,
                        index_key(encoded, sequence, tweet_id),
                        [],
                    );
                }
                None => stored.extend_from_slice(&[0; 9]),
            }
        }
        stored.extend_from_slice(json.as_bytes());
        batch.put_cf(documents, key, stored);
        batch.put(SEQUENCE_KEY, sequence.to_be_bytes());
        self.db
            .write_opt(batch, &self.write_options)
            .map_err(|e| rocks_error(&format!("cannot store tweet {tweet_id}"), e))?;
        self.sequence.set(sequence);
        Ok(())
    }

    fn get(&self, tweet_id: u64) -> Result<Option<usize>, BenchError> {
        let stored = self
            .db
            .get_pinned_cf(self.family(DOCUMENTS)?, tweet_id.to_be_bytes())
            .map_err(|e| rocks_error("get failed", e))?;
        Ok(stored.map(|stored| stored.len().saturating_sub(HEADER_BYTES)))
    }

    fn lookup(
        &self,
        attribute: Attribute,
        value: i64,
        top_k: Option<usize>,
        hit_ids: Option<&mut Vec<u64>>,
    ) -> Result<u64, BenchError> {
        let family = self.index(attribute)?;
        let prefix = encode_value(value);
        let mut read_options = ReadOptions::default();
        if let Some(next) = u64::from_be_bytes(prefix).checked_add(1) {
            read_options.set_iterate_upper_bound(next.to_be_bytes());
        }
        let limit = top_k.unwrap_or(usize::MAX);
        let mut hits = Vec::new();
        let mut iterator = self.db.raw_iterator_cf_opt(family, read_options);
        iterator.seek(prefix);
        while hits.len() < limit {
            let Some(key) = iterator.key() else { break };
            if !key.starts_with(&prefix) {
                break;
            }
            hits.push(decode_index_key(key).ok_or_else(|| {
                BenchError::new(format!("rocksdb: index key of {} bytes", key.len()))
            })?);
            iterator.next();
        }
        iterator
            .status()
            .map_err(|e| rocks_error("lookup scan failed", e))?;
        drop(iterator);
        self.fetch(&hits, hit_ids)
    }

    fn range_lookup(
        &self,
        attribute: Attribute,
        lo: i64,
        hi: i64,
        top_k: Option<usize>,
        hit_ids: Option<&mut Vec<u64>>,
    ) -> Result<u64, BenchError> {
        let family = self.index(attribute)?;
        if lo > hi {
            return Ok(0);
        }
        let hi_encoded = encode_value(hi);
        let mut read_options = ReadOptions::default();
        if let Some(next) = u64::from_be_bytes(hi_encoded).checked_add(1) {
            read_options.set_iterate_upper_bound(next.to_be_bytes());
        }
        let limit = top_k.unwrap_or(usize::MAX);
        // The K newest (highest sequence) seen so far; its top is the oldest of them.
        let mut newest: BinaryHeap<Reverse<(u64, u64)>> = BinaryHeap::new();
        let mut iterator = self.db.raw_iterator_cf_opt(family, read_options);
        iterator.seek(encode_value(lo));
        while let Some(key) = iterator.key() {
            if key.get(..8).is_none_or(|value| value > &hi_encoded[..]) {
                break;
            }
            let hit = decode_index_key(key).ok_or_else(|| {
                BenchError::new(format!("rocksdb: index key of {} bytes", key.len()))
            })?;
            if newest.len() < limit {
                newest.push(Reverse(hit));
            } else if newest.peek().is_some_and(|Reverse(oldest)| *oldest < hit) {
                newest.pop();
                newest.push(Reverse(hit));
            }
            iterator.next();
        }
        iterator
            .status()
            .map_err(|e| rocks_error("range scan failed", e))?;
        drop(iterator);
        // Ascending by Reverse = newest first.
        let hits: Vec<(u64, u64)> = newest
            .into_sorted_vec()
            .into_iter()
            .map(|Reverse(hit)| hit)
            .collect();
        self.fetch(&hits, hit_ids)
    }

    fn flush(&self) -> Result<(), BenchError> {
        for name in self.family_names() {
            self.db
                .flush_cf(self.family(&name)?)
                .map_err(|e| rocks_error(&format!("cannot flush {name}"), e))?;
        }
        Ok(())
    }

    /// Polls the pending and running flush and compaction properties of every column family
    /// (RocksDB 7.8's C API has no wait-for-compaction call).
    fn wait_for_background_work(&self) -> Result<(), BenchError> {
        const PROPERTIES: [&str; 4] = [
            "rocksdb.mem-table-flush-pending",
            "rocksdb.num-running-flushes",
            "rocksdb.compaction-pending",
            "rocksdb.num-running-compactions",
        ];
        loop {
            let mut busy = false;
            for name in self.family_names() {
                let family = self.family(&name)?;
                for property in PROPERTIES {
                    busy |= self.property(family, property)? > 0;
                }
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
                .map(|name| crate::rocks::ticker(&statistics, name))
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

    /// Table files per column family, plus the write-ahead logs.
    fn disk_bytes_per_tree(&self) -> Result<TreeBytes, BenchError> {
        let mut trees = TreeBytes::new();
        for name in self.family_names() {
            let bytes = self.property(self.family(&name)?, "rocksdb.total-sst-files-size")?;
            trees.insert(name, bytes);
        }
        trees.insert(
            "wal".to_owned(),
            directory_bytes(&self.path, &|name| {
                Path::new(name)
                    .extension()
                    .is_some_and(|extension| extension == "log")
            })?,
        );
        Ok(trees)
    }

    fn close(self: Box<Self>) -> Result<(), BenchError> {
        drop(self);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sift_bench::index::verify::{verify_against_reference, verify_indexes, VerifyConfig};
    use sift_bench::index::{run_index_benchmark, Workload};

    fn config() -> IndexBenchConfig {
        let mut config = IndexBenchConfig::small(400, Workload::Static);
        config.indexes = verify_indexes("x");
        config.cache_bytes = 1 << 20;
        config
    }

    #[test]
    fn encodings_preserve_order() {
        let values = [i64::MIN, -1_000, -1, 0, 1, 7, 1_506_816_005_000, i64::MAX];
        for pair in values.windows(2) {
            assert!(encode_value(pair[0]) < encode_value(pair[1]), "{pair:?}");
        }
        // Newer versions of one value sort first; the key decodes back.
        let older = index_key(encode_value(5), 10, 99);
        let newer = index_key(encode_value(5), 11, 1);
        assert!(newer < older);
        assert!(older < index_key(encode_value(6), 1_000, 0));
        assert_eq!(decode_index_key(&older), Some((10, 99)));
        assert_eq!(decode_index_key(&older[..23]), None);
        assert_eq!(decode_header(&[0; 5]), None);
    }

    #[test]
    fn answers_like_the_reference() {
        let dir = tempfile::tempdir().unwrap();
        let engine = RocksIndexEngine::create(&config(), dir.path()).unwrap();
        let summary = verify_against_reference(&engine, VerifyConfig::default()).unwrap();
        assert!(summary.answers > 300, "{summary:?}");
        assert!(summary.overwrites > 300, "{summary:?}");
    }

    #[test]
    fn overwrites_leave_no_stale_entries_and_survive_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let config = config();
        let document = |user: i64| {
            format!(r#"{{"created_at":"2020-01-01T00:00:00Z","user":{{"id":{user}}}}}"#)
        };
        {
            let engine = RocksIndexEngine::create(&config, dir.path()).unwrap();
            engine.put(1, &document(5)).unwrap();
            engine.put(1, &document(5)).unwrap();
            engine.put(1, &document(6)).unwrap();
            engine.put(2, &document(6)).unwrap();
            let index = engine.index(Attribute::UserId).unwrap();
            let mut iterator = engine.db.raw_iterator_cf(index);
            iterator.seek_to_first();
            let mut entries = 0;
            while iterator.valid() {
                entries += 1;
                iterator.next();
            }
            assert_eq!(entries, 2, "one entry per live document");
        }
        let engine = RocksIndexEngine::create(&config, dir.path()).unwrap();
        assert_eq!(engine.sequence.get(), 4);
        engine.put(1, &document(6)).unwrap();
        let mut ids = Vec::new();
        engine
            .lookup(Attribute::UserId, 6, None, Some(&mut ids))
            .unwrap();
        assert_eq!(ids, [1, 2]);
        assert_eq!(engine.lookup(Attribute::UserId, 5, None, None).unwrap(), 0);
    }

    #[test]
    fn runs_the_benchmark() {
        let dir = tempfile::tempdir().unwrap();
        let config = config();
        let engine = RocksIndexEngine::create(&config, dir.path()).unwrap();
        let rows = run_index_benchmark(&config, &engine, &mut |_| Ok(())).unwrap();
        let load = rows
            .iter()
            .find(|r| r.phase == "load" && r.slice.is_none())
            .unwrap();
        assert_eq!(load.n, 400);
        assert_eq!(load.index_kind.as_deref(), Some("composite+composite"));
        let trees = load.bytes_on_disk_per_tree.as_ref().unwrap();
        assert!(trees[DOCUMENTS] > 200_000, "{trees:?}");
        assert!(trees["index.user.id"] > 0, "{trees:?}");
        assert!(load.bytes_written.unwrap() > 400_000);
        let lookup = rows.iter().find(|r| r.op == "LOOKUP").unwrap();
        assert!(lookup.blocks_per_op.unwrap() > 0.0);
        Box::new(engine).close().unwrap();
    }
}
