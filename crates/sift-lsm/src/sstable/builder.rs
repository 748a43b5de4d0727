//! `TableBuilder`: writes a table from internal keys given in increasing order.
//!
//! File layout: data blocks, bloom filter, properties, collector meta blocks, metaindex,
//! index, footer (see `docs/format/sstable.md`). Each data block's index entry is written
//! once the next block's first key is known, so its separator can be shortened.

use super::block::BlockBuilder;
use super::bloom::BloomBuilder;
use super::format::{block_trailer, Compressor, Footer, BLOCK_TRAILER_BYTES, FORMAT_VERSION};
use super::properties::TableProperties;
use super::{BlockHandle, META_BLOCK_SEPARATOR, META_FILTER, META_PROPERTIES};
use crate::coding::{put_length_prefixed, put_varint64};
use crate::extension::{BlockPropertyCollector, CollectorEntry, FinishedBlock};
use crate::fs::WritableFile;
use crate::key::{
    compare_internal_keys, pack_trailer, parse_internal_key, user_key, SeqNo, ValueKind,
    KIND_FOR_SEEK, SEQ_MAX,
};
use crate::options::Compression;
use crate::{Error, Result};
use std::collections::BTreeMap;
use std::path::PathBuf;

/// How a table is written.
pub struct TableBuilderOptions {
    /// Uncompressed data block size target.
    pub block_bytes: usize,
    pub block_restart_interval: usize,
    /// Bloom filter bits per distinct user key; 0 writes no filter.
    pub bloom_bits_per_key: u32,
    pub compression: Compression,
    /// Collectors in table order, each with its stable name.
    pub collectors: Vec<(String, Box<dyn BlockPropertyCollector>)>,
}

impl TableBuilderOptions {
    pub fn from_options(
        options: &crate::Options,
        collectors: Vec<(String, Box<dyn BlockPropertyCollector>)>,
    ) -> Self {
        TableBuilderOptions {
            block_bytes: options.block_bytes,
            block_restart_interval: options.block_restart_interval,
            bloom_bits_per_key: options.bloom_bits_per_key,
            compression: options.compression,
            collectors,
        }
    }
}

/// What a finished table holds, for the manifest.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TableSummary {
    pub file_bytes: u64,
    pub entries: u64,
    pub deletions: u64,
    /// Smallest and largest internal keys (empty if the table is empty).
    pub smallest: Vec<u8>,
    pub largest: Vec<u8>,
    pub seq_min: SeqNo,
    pub seq_max: SeqNo,
    /// Collector names and their table properties, in table order.
    pub property_names: Vec<String>,
    pub property_values: Vec<Vec<u8>>,
}

pub struct TableBuilder {
    file: Box<dyn WritableFile>,
    path: PathBuf,
    block_bytes: usize,
    compression: Compression,
    collectors: Vec<(String, Box<dyn BlockPropertyCollector>)>,
    /// One collector's bytes for the block being finished (reused: no allocation per block).
    collector_block_bytes: Vec<u8>,
    /// Bytes written so far.
    offset: u64,
    data_block: BlockBuilder,
    index_block: BlockBuilder,
    compressor: Compressor,
    bloom: Option<BloomBuilder>,
    last_key: Vec<u8>,
    /// A finished block's index entry waits for the next key (to shorten its separator).
    pending_index_entry: bool,
    /// Index value of the pending block: handle then collector properties.
    pending_value: Vec<u8>,
    separator: Vec<u8>,
    properties: TableProperties,
    /// Whether the thread that made this builder paces its work (`crate::pacing`), read once:
    /// a builder is used by the thread that made it, and most threads never pace.
    paced: bool,
}

/// Appends `contents` plus its trailer, compressed if asked and worthwhile.
fn write_block(
    file: &mut dyn WritableFile,
    offset: &mut u64,
    compressor: &mut Compressor,
    contents: &[u8],
    compression: Compression,
) -> Result<BlockHandle> {
    let (stored, compression_type) = compressor.compress(contents, compression);
    let handle = BlockHandle {
        offset: *offset,
        size: stored.len() as u64,
    };
    file.append(stored)?;
    file.append(&block_trailer(stored, compression_type))?;
    *offset += stored.len() as u64 + BLOCK_TRAILER_BYTES as u64;
    Ok(handle)
}

/// A short internal key `k` with `start <= k < limit` (`start < limit`).
fn shortest_separator(start: &[u8], limit: &[u8], out: &mut Vec<u8>) {
    out.clear();
    let (start_user, limit_user) = (user_key(start), user_key(limit));
    let common = start_user
        .iter()
        .zip(limit_user)
        .take_while(|(a, b)| a == b)
        .count();
    if common < start_user.len() && common < limit_user.len() {
        let byte = start_user[common];
        if byte < 0xff && byte + 1 < limit_user[common] {
            out.extend_from_slice(&start_user[..=common]);
            out[common] += 1;
            // The smallest internal key of that user key.
            out.extend_from_slice(&pack_trailer(SEQ_MAX, KIND_FOR_SEEK).to_le_bytes());
            debug_assert!(compare_internal_keys(start, out).is_lt());
            debug_assert!(compare_internal_keys(out, limit).is_lt());
            return;
        }
    }
    out.extend_from_slice(start);
}

/// A short internal key `>= key`.
fn short_successor(key: &[u8], out: &mut Vec<u8>) {
    out.clear();
    let user = user_key(key);
    if let Some(i) = user.iter().position(|&b| b != 0xff) {
        out.extend_from_slice(&user[..=i]);
        out[i] += 1;
        out.extend_from_slice(&pack_trailer(SEQ_MAX, KIND_FOR_SEEK).to_le_bytes());
        if out.len() < key.len() {
            return;
        }
        out.clear();
    }
    out.extend_from_slice(key);
}

impl TableBuilder {
    pub fn new(file: Box<dyn WritableFile>, path: PathBuf, options: TableBuilderOptions) -> Self {
        let offset = file.len();
        TableBuilder {
            file,
            path,
            block_bytes: options.block_bytes.max(1),
            compression: options.compression,
            collectors: options.collectors,
            collector_block_bytes: Vec::new(),
            offset,
            data_block: BlockBuilder::new(options.block_restart_interval),
            index_block: BlockBuilder::new(options.block_restart_interval),
            compressor: Compressor::default(),
            bloom: (options.bloom_bits_per_key > 0)
                .then(|| BloomBuilder::new(options.bloom_bits_per_key)),
            last_key: Vec::new(),
            pending_index_entry: false,
            pending_value: Vec::new(),
            separator: Vec::new(),
            properties: TableProperties {
                compression: options.compression,
                format_version: FORMAT_VERSION,
                bloom_bits_per_key: options.bloom_bits_per_key,
                ..TableProperties::default()
            },
            paced: crate::pacing::enabled_for_current_thread(),
        }
    }

    /// Adds an entry; keys must be strictly increasing in internal-key order.
    pub fn add(&mut self, internal_key: &[u8], value: &[u8]) -> Result<()> {
        if self.paced {
            crate::pacing::pace();
        }
        let Some(parsed) = parse_internal_key(internal_key) else {
            return Err(Error::InvalidArgument(format!(
                "table {}: malformed internal key {internal_key:?}",
                self.path.display()
            )));
        };
        if u32::try_from(internal_key.len()).is_err() || u32::try_from(value.len()).is_err() {
            return Err(Error::InvalidArgument(format!(
                "table {}: key or value longer than 4 GiB",
                self.path.display()
            )));
        }
        let first = self.properties.entries == 0;
        debug_assert!(
            first || compare_internal_keys(&self.last_key, internal_key).is_lt(),
            "table keys must be strictly increasing"
        );
        if self.pending_index_entry {
            shortest_separator(&self.last_key, internal_key, &mut self.separator);
            self.add_index_entry();
        }
        if let Some(bloom) = &mut self.bloom {
            if first || user_key(&self.last_key) != parsed.user_key {
                bloom.add_key(parsed.user_key);
            }
        }
        let entry = CollectorEntry {
            user_key: parsed.user_key,
            seq: parsed.seq,
            kind: parsed.kind,
            value,
            block_offset: u32::try_from(self.data_block.entries_bytes()).ok(),
        };
        for (_, collector) in &mut self.collectors {
            collector.add(&entry);
        }
        let props = &mut self.properties;
        if first {
            props.smallest = internal_key.to_vec();
            props.seq_min = parsed.seq;
        }
        props.seq_min = props.seq_min.min(parsed.seq);
        props.seq_max = props.seq_max.max(parsed.seq);
        props.entries += 1;
        match parsed.kind {
            ValueKind::Delete => props.deletions += 1,
            ValueKind::Merge => props.merges += 1,
            ValueKind::Put => {}
        }
        props.raw_key_bytes += internal_key.len() as u64;
        props.raw_value_bytes += value.len() as u64;

        self.data_block.add(internal_key, value);
        self.last_key.clear();
        self.last_key.extend_from_slice(internal_key);
        if self.data_block.size_estimate() >= self.block_bytes {
            self.flush_data_block()?;
        }
        Ok(())
    }

    pub fn entries(&self) -> u64 {
        self.properties.entries
    }

    /// Bytes written so far plus the unfinished data block (for cutting output files).
    pub fn estimated_file_bytes(&self) -> u64 {
        self.offset + self.data_block.size_estimate() as u64
    }

    /// Adds the pending block's index entry keyed by `self.separator`.
    fn add_index_entry(&mut self) {
        self.index_block.add(&self.separator, &self.pending_value);
        self.pending_index_entry = false;
    }

    fn flush_data_block(&mut self) -> Result<()> {
        if self.data_block.is_empty() {
            return Ok(());
        }
        let handle = write_block(
            &mut *self.file,
            &mut self.offset,
            &mut self.compressor,
            self.data_block.finish(),
            self.compression,
        )?;
        self.data_block.reset();
        let finished = FinishedBlock {
            ordinal: self.properties.data_blocks as u32,
            handle,
        };
        self.properties.data_blocks += 1;
        self.pending_value.clear();
        handle.encode_to(&mut self.pending_value);
        put_varint64(&mut self.pending_value, self.collectors.len() as u64);
        for (_, collector) in &mut self.collectors {
            self.collector_block_bytes.clear();
            collector.finish_block_into(&finished, &mut self.collector_block_bytes);
            put_length_prefixed(&mut self.pending_value, &self.collector_block_bytes);
        }
        self.pending_index_entry = true;
        Ok(())
    }

    /// Writes the remaining blocks and the footer, then syncs the file.
    pub fn finish(mut self) -> Result<TableSummary> {
        self.flush_data_block()?;
        if self.pending_index_entry {
            short_successor(&self.last_key, &mut self.separator);
            self.add_index_entry();
        }
        self.properties.largest.clone_from(&self.last_key);

        let mut metaindex: BTreeMap<String, BlockHandle> = BTreeMap::new();
        if let Some(bloom) = &self.bloom {
            let filter = bloom.finish();
            let handle = write_block(
                &mut *self.file,
                &mut self.offset,
                &mut self.compressor,
                &filter,
                Compression::None,
            )?;
            metaindex.insert(META_FILTER.to_owned(), handle);
        }

        let mut collector_meta_blocks = Vec::new();
        for (name, collector) in &mut self.collectors {
            let output = collector.finish_table();
            self.properties.collector_names.push(name.clone());
            self.properties
                .collector_table_properties
                .push(output.table_property);
            for (block_name, bytes) in output.meta_blocks {
                collector_meta_blocks
                    .push((format!("{name}{META_BLOCK_SEPARATOR}{block_name}"), bytes));
            }
        }

        let properties_block = self.properties.encode();
        let handle = write_block(
            &mut *self.file,
            &mut self.offset,
            &mut self.compressor,
            &properties_block,
            Compression::None,
        )?;
        metaindex.insert(META_PROPERTIES.to_owned(), handle);

        for (full_name, bytes) in collector_meta_blocks {
            if metaindex.contains_key(&full_name) {
                return Err(Error::InvalidArgument(format!(
                    "table {}: two meta blocks named {full_name:?}",
                    self.path.display()
                )));
            }
            let handle = write_block(
                &mut *self.file,
                &mut self.offset,
                &mut self.compressor,
                &bytes,
                self.compression,
            )?;
            metaindex.insert(full_name, handle);
        }

        let mut metaindex_block = BlockBuilder::new(1);
        let mut encoded_handle = Vec::new();
        for (name, handle) in &metaindex {
            encoded_handle.clear();
            handle.encode_to(&mut encoded_handle);
            metaindex_block.add(name.as_bytes(), &encoded_handle);
        }
        let metaindex_handle = write_block(
            &mut *self.file,
            &mut self.offset,
            &mut self.compressor,
            metaindex_block.finish(),
            Compression::None,
        )?;
        let index_handle = write_block(
            &mut *self.file,
            &mut self.offset,
            &mut self.compressor,
            self.index_block.finish(),
            self.compression,
        )?;
        let footer = Footer {
            metaindex: metaindex_handle,
            index: index_handle,
            format_version: FORMAT_VERSION,
        };
        let footer_bytes = footer.encode();
        self.file.append(&footer_bytes)?;
        self.offset += footer_bytes.len() as u64;
        self.file.flush()?;
        self.file.sync()?;

        let props = self.properties;
        Ok(TableSummary {
            file_bytes: self.offset,
            entries: props.entries,
            deletions: props.deletions,
            smallest: props.smallest,
            largest: props.largest,
            seq_min: props.seq_min,
            seq_max: props.seq_max,
            property_names: props.collector_names,
            property_values: props.collector_table_properties,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::key::make_internal_key;

    #[test]
    fn separators_are_short_and_between() {
        let cases: &[(&[u8], &[u8])] = &[
            (b"abcdef", b"abzzz"),
            (b"abc", b"abd"),
            (b"abc", b"abcd"),
            (b"a\xff\xff", b"b"),
            (b"same", b"same"),
        ];
        let mut out = Vec::new();
        for &(a, b) in cases {
            let start = make_internal_key(a, 9, ValueKind::Put);
            let limit = make_internal_key(b, 3, ValueKind::Put);
            shortest_separator(&start, &limit, &mut out);
            assert!(compare_internal_keys(&start, &out).is_le(), "{a:?} {b:?}");
            assert!(compare_internal_keys(&out, &limit).is_lt(), "{a:?} {b:?}");
            assert!(out.len() <= start.len());
        }
        shortest_separator(
            &make_internal_key(b"abcdef", 1, ValueKind::Put),
            &make_internal_key(b"abzzz", 1, ValueKind::Put),
            &mut out,
        );
        assert_eq!(user_key(&out), b"abd");
        for key in [&b"abc"[..], b"\xff\xff", b"", b"\xffa"] {
            let k = make_internal_key(key, 5, ValueKind::Delete);
            short_successor(&k, &mut out);
            assert!(compare_internal_keys(&k, &out).is_le(), "{key:?}");
            assert!(out.len() <= k.len());
        }
    }
}
