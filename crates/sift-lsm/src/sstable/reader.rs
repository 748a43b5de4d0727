//! `Table`: an open table file. Opening reads and verifies the footer, metaindex, properties,
//! bloom filter and index; the index (with every block's collector properties) stays decoded
//! in memory, so choosing or filtering a block needs no I/O. Data blocks are read through the
//! shared `BlockCache`.

use super::block::BlockBytes;
use super::block::{Block, BlockCorruption, BlockIter};
use super::bloom::BloomFilter;
use super::cache::BlockCache;
use super::format::{read_block, read_block_shared, Footer, FOOTER_BYTES};
use super::iter::TableIterator;
use super::properties::TableProperties;
use super::{BlockHandle, META_BLOCK_SEPARATOR, META_FILTER, META_PROPERTIES};
use crate::coding::Decoder;
use crate::extension::{BlockFilter, Properties};
use crate::fs::RandomAccessFile;
use crate::key::{compare_internal_keys, user_key};
use crate::stats::{EngineCounters, ReadStats};
use crate::{Error, Result};
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;

/// How one read uses the cache, where it counts its I/O and which blocks it may skip.
#[derive(Clone)]
pub struct ReadContext {
    /// Insert blocks read from the file into the cache.
    pub fill_cache: bool,
    /// Counters the reads add to.
    pub stats: Option<Arc<ReadStats>>,
    /// Iterators skip blocks whose properties it rejects (`get` ignores it).
    pub block_filter: Option<Arc<dyn BlockFilter>>,
}

impl Default for ReadContext {
    fn default() -> Self {
        ReadContext {
            fill_cache: true,
            stats: None,
            block_filter: None,
        }
    }
}

impl std::fmt::Debug for ReadContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReadContext")
            .field("fill_cache", &self.fill_cache)
            .field("stats", &self.stats.is_some())
            .field("block_filter", &self.block_filter.is_some())
            .finish()
    }
}

impl ReadContext {
    /// The context of a read with these options.
    pub fn from_read_options(options: &crate::ReadOptions) -> Self {
        ReadContext {
            fill_cache: !options.skip_cache_fill,
            stats: options.read_stats.clone(),
            block_filter: options.block_filter.clone(),
        }
    }
}

/// One data block's index entry; its separator key is `index_keys[key_start..key_end]`.
struct IndexEntry {
    key_start: usize,
    key_end: usize,
    handle: BlockHandle,
}

/// One data block held by a reader (see [`Table::data_block`]).
pub struct DataBlock {
    ordinal: usize,
    block: Arc<Block>,
}

impl DataBlock {
    /// The block's position in its table.
    pub fn ordinal(&self) -> usize {
        self.ordinal
    }
}

/// An open table: its index, filter and properties in memory, its blocks read on demand.
pub struct Table {
    file: Arc<dyn RandomAccessFile>,
    file_number: u64,
    path: PathBuf,
    cache: Option<Arc<BlockCache>>,
    counters: Arc<EngineCounters>,
    /// Offset of the footer: every block ends (with its trailer) at or before it.
    footer_offset: u64,
    index_keys: Vec<u8>,
    index: Vec<IndexEntry>,
    /// Each collector's bytes (in `properties.collector_names` order) of data block 0, then
    /// of block 1, …, as ranges of `block_property_bytes`: two vectors for the table, so
    /// opening a table of many blocks costs no allocation per block.
    block_property_ranges: Vec<(usize, usize)>,
    block_property_bytes: Vec<u8>,
    filter: Option<BloomFilter>,
    properties: TableProperties,
    metaindex: Vec<(String, BlockHandle)>,
    /// One bit per data block of a memory-mapped file: its checksum was verified once. The
    /// file never changes, so later reads use the mapped bytes without hashing them again —
    /// what a block cache gives unmapped files (a block is checked when it enters the cache).
    mapped_blocks_verified: Box<[AtomicU64]>,
}

/// Decodes a meta block's bytes (block layout) into its entries.
fn block_entries(
    data: Vec<u8>,
    path: &Path,
    handle: BlockHandle,
    what: &str,
) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
    let fail = |e: BlockCorruption| {
        Error::corruption(
            path,
            handle.offset,
            format!("{what}: {} (byte {} of the block)", e.message, e.offset),
        )
    };
    Arc::new(Block::new(data).map_err(fail)?)
        .entries()
        .map_err(fail)
}

/// Where the footer starts, the footer, and the metaindex (name → handle).
type FooterAndMetaindex = (u64, Footer, Vec<(String, BlockHandle)>);

/// Reads and checks the footer and the metaindex of a table file.
fn read_footer_and_metaindex(
    file: &dyn RandomAccessFile,
    path: &Path,
) -> Result<FooterAndMetaindex> {
    let size = file.size();
    let Some(footer_offset) = size.checked_sub(FOOTER_BYTES as u64) else {
        return Err(Error::corruption(
            path,
            0,
            format!("file of {size} bytes is too short to be a table"),
        ));
    };
    let footer_bytes = file.read_at(footer_offset, FOOTER_BYTES)?;
    let footer = Footer::decode(&footer_bytes, path, footer_offset)?;

    // Metaindex: name → handle.
    let handle = footer.metaindex;
    let bytes = read_block(file, path, handle, footer_offset, "metaindex block")?;
    let mut metaindex = Vec::new();
    for (name, value) in block_entries(bytes, path, handle, "metaindex block")? {
        let bad = || Error::corruption(path, handle.offset, "malformed metaindex entry");
        let name = String::from_utf8(name).map_err(|_| bad())?;
        let mut decoder = Decoder::new(&value);
        let meta_handle = BlockHandle::decode_from(&mut decoder).ok_or_else(bad)?;
        if !decoder.is_empty() {
            return Err(bad());
        }
        metaindex.push((name, meta_handle));
    }
    Ok((footer_offset, footer, metaindex))
}

/// A meta block of a live table with the table's path and the block's handle (for error
/// messages): what `ComponentView::table_meta_block` returns.
pub type LiveMetaBlock = (PathBuf, BlockHandle, Arc<[u8]>);

/// A meta block read without opening its table (see [`read_meta_block_unopened`]).
#[derive(Debug, Clone)]
pub struct UnopenedMetaBlock {
    pub handle: BlockHandle,
    pub bytes: Vec<u8>,
}

/// The meta block `name` written by `collector`, read with the footer and the metaindex only:
/// the index and the bloom filter are not read (an open reads them, and they are most of what
/// an open costs). For readers that want one meta block of many files, such as an in-memory
/// index rebuilt at startup. `None`: the table has no such meta block.
pub fn read_meta_block_unopened(
    file: &dyn RandomAccessFile,
    collector: &str,
    name: &str,
) -> Result<Option<UnopenedMetaBlock>> {
    let path = file.path().to_path_buf();
    let (footer_offset, _, metaindex) = read_footer_and_metaindex(file, &path)?;
    let full_name = format!("{collector}{META_BLOCK_SEPARATOR}{name}");
    let Some(&(_, handle)) = metaindex.iter().find(|(n, _)| *n == full_name) else {
        return Ok(None);
    };
    let what = format!("meta block {full_name:?}");
    let bytes = read_block(file, &path, handle, footer_offset, &what)?;
    Ok(Some(UnopenedMetaBlock { handle, bytes }))
}

impl Table {
    /// Opens the table in `file`: footer, index, filter and properties are read and checked.
    pub fn open(
        file: Arc<dyn RandomAccessFile>,
        file_number: u64,
        cache: Option<Arc<BlockCache>>,
        counters: Arc<EngineCounters>,
    ) -> Result<Arc<Table>> {
        let path = file.path().to_path_buf();
        let (footer_offset, footer, metaindex) = read_footer_and_metaindex(&*file, &path)?;
        let find = |name: &str| {
            metaindex
                .iter()
                .find(|(n, _)| n == name)
                .map(|&(_, handle)| handle)
        };

        let Some(handle) = find(META_PROPERTIES) else {
            return Err(Error::corruption(
                &path,
                footer.metaindex.offset,
                "metaindex has no properties block",
            ));
        };
        let bytes = read_block(&*file, &path, handle, footer_offset, "properties block")?;
        let entries = block_entries(bytes, &path, handle, "properties block")?;
        let properties = TableProperties::decode(&entries).map_err(|m| {
            Error::corruption(&path, handle.offset, format!("properties block: {m}"))
        })?;
        if properties.format_version != footer.format_version {
            return Err(Error::corruption(
                &path,
                handle.offset,
                format!(
                    "properties say format version {}, footer says {}",
                    properties.format_version, footer.format_version
                ),
            ));
        }

        let filter = match find(META_FILTER) {
            None => None,
            Some(handle) => {
                let bytes = read_block(&*file, &path, handle, footer_offset, "filter block")?;
                Some(BloomFilter::decode(bytes).ok_or_else(|| {
                    Error::corruption(&path, handle.offset, "malformed bloom filter block")
                })?)
            }
        };

        // Index: separator → handle + per-block collector properties.
        let handle = footer.index;
        let bytes = read_block(&*file, &path, handle, footer_offset, "index block")?;
        let iter_bytes_len = bytes.len();
        let fail = |message: String| Error::corruption(&path, handle.offset, message);
        let block_fail = |e: BlockCorruption| {
            fail(format!(
                "index block: {} (byte {} of the block)",
                e.message, e.offset
            ))
        };
        let mut iter = BlockIter::new(Arc::new(Block::new(bytes).map_err(block_fail)?));
        let collectors = properties.collector_names.len();
        // Sized from the properties, bounded by the index block (every entry takes bytes of
        // it), so a corrupt count cannot reserve much.
        let blocks_expected = usize::try_from(properties.data_blocks)
            .unwrap_or(usize::MAX)
            .min(iter_bytes_len);
        let mut index_keys = Vec::with_capacity(iter_bytes_len);
        let mut index = Vec::with_capacity(blocks_expected);
        let mut block_property_ranges =
            Vec::with_capacity(blocks_expected.saturating_mul(collectors));
        let mut block_property_bytes = Vec::new();
        iter.seek_to_first().map_err(block_fail)?;
        while iter.valid() {
            let key = iter.key();
            if let Some(previous) = index
                .last()
                .map(|e: &IndexEntry| &index_keys[e.key_start..e.key_end])
            {
                if !compare_internal_keys(previous, key).is_lt() {
                    return Err(fail(format!(
                        "index keys out of order at block {}",
                        index.len()
                    )));
                }
            }
            let mut decoder = Decoder::new(iter.value());
            let bad = || fail(format!("malformed index entry for block {}", index.len()));
            let data_handle = BlockHandle::decode_from(&mut decoder).ok_or_else(bad)?;
            match data_handle.end_with_trailer() {
                Some(end) if end <= footer_offset => {}
                _ => {
                    return Err(fail(format!(
                        "index entry {} points past the end of the block area (offset {}, size {})",
                        index.len(),
                        data_handle.offset,
                        data_handle.size
                    )))
                }
            }
            let count = decoder.varint64().ok_or_else(bad)?;
            if count != collectors as u64 {
                return Err(fail(format!(
                    "index entry {} has {count} collector properties, the table has {collectors} collectors",
                    index.len()
                )));
            }
            for _ in 0..collectors {
                let value = decoder.length_prefixed().ok_or_else(bad)?;
                let start = block_property_bytes.len();
                block_property_bytes.extend_from_slice(value);
                block_property_ranges.push((start, block_property_bytes.len()));
            }
            if !decoder.is_empty() {
                return Err(bad());
            }
            let key_start = index_keys.len();
            index_keys.extend_from_slice(key);
            index.push(IndexEntry {
                key_start,
                key_end: index_keys.len(),
                handle: data_handle,
            });
            iter.next().map_err(block_fail)?;
        }
        if index.len() as u64 != properties.data_blocks {
            return Err(fail(format!(
                "index lists {} data blocks, properties say {}",
                index.len(),
                properties.data_blocks
            )));
        }

        let mapped_blocks_verified = (0..index.len().div_ceil(64))
            .map(|_| AtomicU64::new(0))
            .collect();
        Ok(Arc::new(Table {
            file,
            file_number,
            path,
            cache,
            counters,
            footer_offset,
            index_keys,
            index,
            block_property_ranges,
            block_property_bytes,
            filter,
            properties,
            metaindex,
            mapped_blocks_verified,
        }))
    }

    /// The table's file number.
    pub fn file_number(&self) -> u64 {
        self.file_number
    }

    /// The table's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The table's properties.
    pub fn properties(&self) -> &TableProperties {
        &self.properties
    }

    /// Bloom filter check on a user key, no I/O. `true` if there is no filter.
    #[inline]
    /// Maps the table's cached pages ahead of reads (see `RandomAccessFile::prefault`).
    pub fn prefault(&self) {
        self.file.prefault();
    }

    /// The bloom filter's answer (`true` without a filter).
    pub fn may_contain_user_key(&self, user_key: &[u8]) -> bool {
        self.filter.as_ref().is_none_or(|f| f.may_contain(user_key))
    }

    /// Data blocks in the table.
    pub fn block_count(&self) -> usize {
        self.index.len()
    }

    /// Where data block `ordinal` is.
    pub fn block_handle(&self, ordinal: usize) -> Option<BlockHandle> {
        self.index.get(ordinal).map(|e| e.handle)
    }

    /// The index key of data block `ordinal`: an internal key `>=` the block's last key and
    /// `<` the next block's first key. Its user key bounds the block's last user key without
    /// reading the block (a reader can tell a key cannot end the block).
    pub fn block_separator(&self, ordinal: usize) -> Option<&[u8]> {
        (ordinal < self.index.len()).then(|| self.index_key(ordinal))
    }

    /// The collector properties stored with data block `ordinal`.
    pub fn block_properties(&self, ordinal: usize) -> Option<Properties<'_>> {
        if ordinal >= self.index.len() {
            return None;
        }
        let collectors = self.properties.collector_names.len();
        let ranges = self
            .block_property_ranges
            .get(ordinal * collectors..(ordinal + 1) * collectors)?;
        Some(Properties::from_ranges(
            &self.properties.collector_names,
            &self.block_property_bytes,
            ranges,
        ))
    }

    /// Bytes of memory held by the decoded index and filter.
    pub fn memory_bytes(&self) -> usize {
        self.index_keys.len()
            + self.index.len() * std::mem::size_of::<IndexEntry>()
            + self.filter.as_ref().map_or(0, BloomFilter::size_bytes)
    }

    /// The meta block `name` written by `collector`, read from the file (not cached).
    pub fn meta_block(&self, collector: &str, name: &str) -> Result<Option<Vec<u8>>> {
        let Some(handle) = self.meta_block_handle(collector, name) else {
            return Ok(None);
        };
        let what = format!("meta block \"{collector}{META_BLOCK_SEPARATOR}{name}\"");
        read_block(&*self.file, &self.path, handle, self.footer_offset, &what).map(Some)
    }

    /// The meta block `name` written by `collector`, through the block cache (filled unless
    /// `ctx` says not to) and counted in `ctx`'s read statistics like a data block: for
    /// readers that consult meta blocks per query (secondary index blocks).
    pub fn meta_block_cached(
        &self,
        collector: &str,
        name: &str,
        ctx: &ReadContext,
    ) -> Result<Option<Arc<[u8]>>> {
        let Some(handle) = self.meta_block_handle(collector, name) else {
            return Ok(None);
        };
        if let Some(cache) = &self.cache {
            if let Some(bytes) = cache.get_meta(self.file_number, handle.offset) {
                self.counters.blocks_read_from_cache.fetch_add(1, Relaxed);
                if let Some(stats) = &ctx.stats {
                    stats.blocks_read_from_cache.fetch_add(1, Relaxed);
                }
                return Ok(Some(bytes));
            }
        }
        let what = format!("meta block \"{collector}{META_BLOCK_SEPARATOR}{name}\"");
        let bytes: Arc<[u8]> =
            read_block(&*self.file, &self.path, handle, self.footer_offset, &what)?.into();
        let disk_bytes = handle.size + super::BLOCK_TRAILER_BYTES as u64;
        self.count_disk_read(disk_bytes, ctx);
        if ctx.fill_cache {
            if let Some(cache) = &self.cache {
                cache.insert_meta(self.file_number, handle.offset, Arc::clone(&bytes));
            }
        }
        Ok(Some(bytes))
    }

    /// Where the meta block `name` written by `collector` lives (for error messages that
    /// name a file offset). The metaindex is written sorted by name, so this is a binary
    /// search (a table may hold thousands of collector meta blocks).
    pub fn meta_block_handle(&self, collector: &str, name: &str) -> Option<BlockHandle> {
        // Built on the stack when short: queries ask for meta blocks often enough that
        // allocating the full name showed in profiles.
        let mut buffer = [0u8; 128];
        let mut separator = [0u8; 4];
        let separator = META_BLOCK_SEPARATOR.encode_utf8(&mut separator).as_bytes();
        let total = collector.len() + separator.len() + name.len();
        let allocated;
        let full_name: &[u8] = if let Some(target) = buffer.get_mut(..total) {
            let (first, rest) = target.split_at_mut(collector.len());
            first.copy_from_slice(collector.as_bytes());
            let (middle, last) = rest.split_at_mut(separator.len());
            middle.copy_from_slice(separator);
            last.copy_from_slice(name.as_bytes());
            target
        } else {
            allocated = format!("{collector}{META_BLOCK_SEPARATOR}{name}");
            allocated.as_bytes()
        };
        self.metaindex
            .binary_search_by(|(n, _)| n.as_bytes().cmp(full_name))
            .ok()
            .and_then(|i| self.metaindex.get(i))
            .map(|&(_, handle)| handle)
    }

    /// The separator key of data block `ordinal`.
    #[inline]
    fn index_key(&self, ordinal: usize) -> &[u8] {
        let entry = &self.index[ordinal];
        &self.index_keys[entry.key_start..entry.key_end]
    }

    /// The first data block whose separator is `>= target` (`block_count()` if none): the only
    /// block that can hold the first entry `>= target`.
    pub(crate) fn find_block(&self, target: &[u8]) -> usize {
        let (mut low, mut high) = (0, self.index.len());
        while low < high {
            let mid = low + (high - low) / 2;
            if compare_internal_keys(self.index_key(mid), target).is_lt() {
                low = mid + 1;
            } else {
                high = mid;
            }
        }
        low
    }

    /// Turns a block decoding failure into a corruption error naming this file.
    pub(crate) fn block_error(&self, ordinal: usize, e: BlockCorruption) -> Error {
        let offset = self
            .index
            .get(ordinal)
            .map_or(0, |entry| entry.handle.offset);
        Error::corruption(
            &self.path,
            offset,
            format!(
                "data block {ordinal}: {} (byte {} of the decompressed block)",
                e.message, e.offset
            ),
        )
    }

    /// Whether `ctx`'s block filter lets block `ordinal` be read; counts skips.
    pub(crate) fn block_passes_filter(&self, ordinal: usize, ctx: &ReadContext) -> bool {
        let Some(filter) = &ctx.block_filter else {
            return true;
        };
        let Some(properties) = self.block_properties(ordinal) else {
            return true;
        };
        let pass = filter.block_may_match(&properties);
        if !pass {
            if let Some(stats) = &ctx.stats {
                stats.blocks_skipped.fetch_add(1, Relaxed);
            }
        }
        pass
    }

    /// Data block `ordinal`, from the cache or the file (verified and decompressed).
    pub(crate) fn read_data_block(&self, ordinal: usize, ctx: &ReadContext) -> Result<Arc<Block>> {
        let Some(entry) = self.index.get(ordinal) else {
            return Err(Error::InvalidArgument(format!(
                "table {} has no data block {ordinal}",
                self.path.display()
            )));
        };
        let handle = entry.handle;
        // Blocks of a memory-mapped file are used in place: caching them would only copy.
        let mapped = self.file.mapped().is_some();
        if let (Some(cache), false) = (&self.cache, mapped) {
            if let Some(block) = cache.get(self.file_number, handle.offset) {
                self.counters.blocks_read_from_cache.fetch_add(1, Relaxed);
                if let Some(stats) = &ctx.stats {
                    stats.blocks_read_from_cache.fetch_add(1, Relaxed);
                }
                return Ok(block);
            }
        }
        let (word, bit) = (ordinal / 64, 1u64 << (ordinal % 64));
        let verified = mapped
            && self
                .mapped_blocks_verified
                .get(word)
                .is_some_and(|bits| bits.load(Relaxed) & bit != 0);
        let data = read_block_shared(
            &self.file,
            &self.path,
            handle,
            self.footer_offset,
            "data block",
            verified,
        )?;
        let borrowed = matches!(data, BlockBytes::Mapped(_));
        if borrowed && !verified {
            if let Some(bits) = self.mapped_blocks_verified.get(word) {
                bits.fetch_or(bit, Relaxed);
            }
        }
        let block = Arc::new(Block::new(data).map_err(|e| self.block_error(ordinal, e))?);
        let disk_bytes = handle.size + super::BLOCK_TRAILER_BYTES as u64;
        self.count_disk_read(disk_bytes, ctx);
        if ctx.fill_cache && !borrowed {
            if let Some(cache) = &self.cache {
                cache.insert(self.file_number, handle.offset, Arc::clone(&block));
            }
        }
        Ok(block)
    }

    /// The first entry `>= seek_key` if its user key is the seek key's; bloom-checked first,
    /// reads at most one data block. Ignores `ctx.block_filter` (point reads must be exact).
    pub fn get(&self, seek_key: &[u8], ctx: &ReadContext) -> Result<Option<(Vec<u8>, Vec<u8>)>> {
        let user = user_key(seek_key);
        if !self.may_contain_user_key(user) {
            if let Some(stats) = &ctx.stats {
                stats.blocks_skipped.fetch_add(1, Relaxed);
            }
            return Ok(None);
        }
        let ordinal = self.find_block(seek_key);
        if ordinal >= self.index.len() {
            return Ok(None);
        }
        let block = self.read_data_block(ordinal, ctx)?;
        let mut iter = BlockIter::new(block);
        iter.reserve_key(seek_key.len() + 16);
        iter.seek(seek_key)
            .map_err(|e| self.block_error(ordinal, e))?;
        if iter.valid() && user_key(iter.key()) == user {
            Ok(Some((iter.key().to_vec(), iter.value().to_vec())))
        } else {
            Ok(None)
        }
    }

    /// All entries of data block `ordinal` (for secondary-index readers).
    pub fn read_block_entries(
        &self,
        ordinal: usize,
        ctx: &ReadContext,
    ) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        let block = self.read_data_block(ordinal, ctx)?;
        block.entries().map_err(|e| self.block_error(ordinal, e))
    }

    /// Calls `visit(internal_key, value, entry_offset)` for each entry of data block `ordinal`
    /// (from the cache or the file, verified), in block order, without copying them.
    /// `entry_offset` is where the entry starts in the uncompressed block: what the table
    /// builder gave collectors as `CollectorEntry::block_offset` when it wrote the entry, so a
    /// reader feeding a collector from an existing table gives it the same.
    pub fn visit_block_entries<F>(
        &self,
        ordinal: usize,
        ctx: &ReadContext,
        mut visit: F,
    ) -> Result<()>
    where
        F: FnMut(&[u8], &[u8], usize) -> Result<()>,
    {
        let block = self.read_data_block(ordinal, ctx)?;
        let mut iter = BlockIter::new(block);
        iter.seek_to_first()
            .map_err(|e| self.block_error(ordinal, e))?;
        while iter.valid() {
            visit(iter.key(), iter.value(), iter.entry_offset())?;
            iter.next().map_err(|e| self.block_error(ordinal, e))?;
        }
        Ok(())
    }

    /// [`Table::visit_block_entries`] from the first entry of data block `ordinal` that is
    /// `>= seek_key` (an internal key), for as long as `visit` returns `true`: a reader of one
    /// key range decodes neither the block's entries before the range nor those after it.
    pub fn visit_block_entries_from<F>(
        &self,
        ordinal: usize,
        ctx: &ReadContext,
        seek_key: &[u8],
        mut visit: F,
    ) -> Result<()>
    where
        F: FnMut(&[u8], &[u8], usize) -> Result<bool>,
    {
        let block = self.read_data_block(ordinal, ctx)?;
        let mut iter = BlockIter::new(block);
        iter.seek(seek_key)
            .map_err(|e| self.block_error(ordinal, e))?;
        while iter.valid() {
            if !visit(iter.key(), iter.value(), iter.entry_offset())? {
                break;
            }
            iter.next().map_err(|e| self.block_error(ordinal, e))?;
        }
        Ok(())
    }

    /// Data block `ordinal` (from the cache or the file, verified), for readers that pick
    /// entries out of it by key ([`Table::data_block_value`]) without copying the others.
    pub fn data_block(&self, ordinal: usize, ctx: &ReadContext) -> Result<DataBlock> {
        Ok(DataBlock {
            ordinal,
            block: self.read_data_block(ordinal, ctx)?,
        })
    }

    /// The bytes of uncompressed data block `ordinal` (entries and restart array) in place in
    /// a memory-mapped table, not checksum-verified; `None` when the table is not memory-mapped,
    /// the block is compressed or its handle points outside the data area.
    fn mapped_block_bytes(&self, ordinal: usize) -> Option<&[u8]> {
        let handle = self.index.get(ordinal)?.handle;
        let mapped = self.file.mapped()?;
        let end_with_trailer = handle.end_with_trailer()?;
        if end_with_trailer > self.footer_offset {
            return None;
        }
        let start = usize::try_from(handle.offset).ok()?;
        let end = start.checked_add(usize::try_from(handle.size).ok()?)?;
        let uncompressed = *mapped.get(end)? == crate::options::Compression::None as u8;
        uncompressed.then(|| mapped.get(start..end)).flatten()
    }

    /// The value of the entry that starts at byte `offset` of data block `ordinal` (where the
    /// table builder said it would: `CollectorEntry::block_offset`), read in place from a
    /// memory-mapped table WITHOUT verifying the block's checksum, if the entry there is
    /// consistent with the put of `user_key` at `seq`: its key has that length and the part of
    /// the key it stores (the suffix after the prefix shared with the previous entry, which
    /// cannot be checked without decoding from a restart point) matches. `None` when the table
    /// is not memory-mapped, the block is compressed, or the bytes there do not match. Only
    /// for readers that check the value against a checksum of their own (the secondary entries
    /// of `next` keep one per entry) and fall back to [`Table::data_block`] — which verifies
    /// the block and reports damage as corruption — on any mismatch: one entry then costs its
    /// own cache lines, not a seek and a checksum pass over the whole block. Counts nothing
    /// ([`Table::count_data_block_read`]).
    pub fn mapped_entry_value(
        &self,
        ordinal: usize,
        offset: usize,
        user_key: &[u8],
        seq: crate::SeqNo,
    ) -> Option<&[u8]> {
        let entry = self.mapped_block_bytes(ordinal)?.get(offset..)?;
        let (shared, unshared, value_len, header) = super::block::decode_entry_header(entry)?;
        let user_len = user_key.len();
        if shared.checked_add(unshared)? != user_len + crate::key::TRAILER_BYTES {
            return None;
        }
        let suffix = entry.get(header..header.checked_add(unshared)?)?;
        let trailer = crate::key::pack_trailer(seq, crate::ValueKind::Put as u8).to_le_bytes();
        let key_matches = if shared <= user_len {
            let (user_part, trailer_part) = suffix.split_at(user_len - shared);
            user_part == &user_key[shared..] && trailer_part == trailer
        } else {
            suffix == trailer.get(shared - user_len..)?
        };
        if !key_matches {
            return None;
        }
        let value_start = header + unshared;
        entry.get(value_start..value_start.checked_add(value_len)?)
    }

    /// Counts one block of `disk_bytes` (trailer included) read from the file, in the table's
    /// counters and the read's own statistics.
    fn count_disk_read(&self, disk_bytes: u64, ctx: &ReadContext) {
        self.counters.blocks_read_from_disk.fetch_add(1, Relaxed);
        self.counters
            .bytes_read_from_disk
            .fetch_add(disk_bytes, Relaxed);
        if let Some(stats) = &ctx.stats {
            stats.blocks_read_from_disk.fetch_add(1, Relaxed);
            stats.bytes_read_from_disk.fetch_add(disk_bytes, Relaxed);
        }
    }

    /// Counts one read of a data block (what [`Table::data_block`] counts when it reads from
    /// the file), for readers that take entries out of blocks in place.
    pub fn count_data_block_read(&self, ordinal: usize, ctx: &ReadContext) {
        let Some(entry) = self.index.get(ordinal) else {
            return;
        };
        let disk_bytes = entry.handle.size + super::BLOCK_TRAILER_BYTES as u64;
        self.count_disk_read(disk_bytes, ctx);
    }

    /// A hint that `bytes` bytes from byte `offset` of data block `ordinal` of a memory-mapped
    /// table are about to be read ([`Table::mapped_entry_value`]): asks the CPU to start
    /// loading those cache lines (and the block's trailer) now, so a reader that knows its
    /// next entries in advance overlaps their memory latency with its current work. Never
    /// faults and reads nothing; does nothing for a table read through system calls.
    pub fn prefetch_mapped_entry(&self, ordinal: usize, offset: usize, bytes: usize) {
        // No byte of the block is read here (that would wait for the memory it asks for).
        let (Some(entry), Some(mapped)) = (self.index.get(ordinal), self.file.mapped()) else {
            return;
        };
        let (Ok(start), Ok(size)) = (
            usize::try_from(entry.handle.offset),
            usize::try_from(entry.handle.size),
        ) else {
            return;
        };
        let block_end = start.saturating_add(size);
        let from = start.saturating_add(offset).min(block_end);
        let to = from.saturating_add(bytes).min(block_end);
        if let Some(range) = mapped.get(from..to) {
            prefetch_lines(range);
        }
        // The trailer's compression byte, which the read checks.
        if let Some(trailer) = mapped.get(block_end..=block_end) {
            prefetch_lines(trailer);
        }
    }

    /// A hint that data block `ordinal`'s place in the file is about to be asked for
    /// ([`Table::prefetch_mapped_entry`], [`Table::mapped_entry_value`]): asks the CPU to start
    /// loading the index entry holding its handle, so a reader that knows its next blocks in
    /// advance does not wait for that load when it prefetches the entries themselves. Reads
    /// nothing.
    pub fn prefetch_block_handle(&self, ordinal: usize) {
        if ordinal < self.index.len() {
            prefetch_address(self.index.as_ptr().wrapping_add(ordinal).cast::<u8>());
        }
    }

    /// The value of the entry of `block` (a block of this table) with user key `user_key`
    /// and sequence number `seq`, if the block holds it.
    pub fn data_block_value<'b>(
        &self,
        block: &'b DataBlock,
        user_key: &[u8],
        seq: crate::SeqNo,
    ) -> Result<Option<&'b [u8]>> {
        let seek_key = crate::key::make_seek_key(user_key, seq);
        let mut iter = BlockIter::new(Arc::clone(&block.block));
        iter.seek(&seek_key)
            .map_err(|e| self.block_error(block.ordinal, e))?;
        let found = iter.valid()
            && crate::key::parse_internal_key(iter.key())
                .is_some_and(|parsed| parsed.user_key == user_key && parsed.seq == seq);
        Ok(found.then(|| block.block.value_at(iter.value_range())))
    }

    /// A bidirectional iterator over the table (unpositioned until a seek).
    pub fn iter(self: &Arc<Self>, ctx: ReadContext) -> TableIterator {
        TableIterator::new(Arc::clone(self), ctx)
    }
}

/// Asks the CPU to load the cache line holding `address` (a hint: never faults, reads
/// nothing; the address need not be valid).
#[inline]
fn prefetch_address(address: *const u8) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        // SAFETY: a prefetch is a hint that never faults and reads nothing into the program,
        // whatever the address. SSE (which provides it) is part of the x86_64 baseline.
        unsafe { _mm_prefetch::<_MM_HINT_T0>(address.cast::<i8>()) };
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = address;
}

/// Asks the CPU to load every cache line of `bytes` (see [`Table::prefetch_data_block`]).
#[inline]
fn prefetch_lines(bytes: &[u8]) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        const LINE_BYTES: usize = 64;
        for line in bytes.chunks(LINE_BYTES) {
            // SAFETY: a prefetch is a hint that never faults and reads nothing into the
            // program; `line` is a valid slice in any case. SSE (which provides it) is part of
            // the x86_64 baseline.
            unsafe { _mm_prefetch::<_MM_HINT_T0>(line.as_ptr().cast::<i8>()) };
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = bytes;
}
