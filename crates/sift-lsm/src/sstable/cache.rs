//! The shared block cache: decompressed, verified data blocks (and the meta blocks that
//! secondary-index readers ask for, `Table::meta_block_cached`) keyed by
//! `(file number, block offset)` and weighed by their bytes.

use super::block::Block;
use std::sync::Arc;

/// Bytes charged per cached block on top of its data (key, `Arc`, bookkeeping).
const ENTRY_OVERHEAD_BYTES: u64 = 64;

#[derive(Clone, Copy, Default)]
struct BlockWeighter;

/// A cached block: a data block (decoded) or a meta block (its verified bytes). A file's
/// blocks have distinct offsets, so the two never share a key.
#[derive(Clone)]
enum Cached {
    Data(Arc<Block>),
    Meta(Arc<[u8]>),
}

impl quick_cache::Weighter<(u64, u64), Cached> for BlockWeighter {
    fn weight(&self, _key: &(u64, u64), cached: &Cached) -> u64 {
        let bytes = match cached {
            Cached::Data(block) => block.size_bytes(),
            Cached::Meta(bytes) => bytes.len(),
        };
        bytes as u64 + ENTRY_OVERHEAD_BYTES
    }
}

/// A block cache shared by all tables of a database. Capacity 0 caches nothing.
pub struct BlockCache {
    cache: Option<quick_cache::sync::Cache<(u64, u64), Cached, BlockWeighter>>,
}

impl BlockCache {
    pub fn new(capacity_bytes: usize) -> Self {
        let cache = (capacity_bytes > 0).then(|| {
            let estimated_blocks = (capacity_bytes / 4096).max(16);
            quick_cache::sync::Cache::with_weighter(
                estimated_blocks,
                capacity_bytes as u64,
                BlockWeighter,
            )
        });
        BlockCache { cache }
    }

    /// Bytes currently charged to cached blocks.
    pub fn used_bytes(&self) -> u64 {
        self.cache
            .as_ref()
            .map_or(0, quick_cache::sync::Cache::weight)
    }

    pub fn capacity_bytes(&self) -> u64 {
        self.cache
            .as_ref()
            .map_or(0, quick_cache::sync::Cache::capacity)
    }

    /// Number of cached blocks.
    pub fn blocks(&self) -> usize {
        self.cache.as_ref().map_or(0, quick_cache::sync::Cache::len)
    }

    pub(crate) fn get(&self, file_number: u64, offset: u64) -> Option<Arc<Block>> {
        match self.cache.as_ref()?.get(&(file_number, offset))? {
            Cached::Data(block) => Some(block),
            Cached::Meta(_) => None,
        }
    }

    pub(crate) fn insert(&self, file_number: u64, offset: u64, block: Arc<Block>) {
        if let Some(cache) = &self.cache {
            cache.insert((file_number, offset), Cached::Data(block));
        }
    }

    pub(crate) fn get_meta(&self, file_number: u64, offset: u64) -> Option<Arc<[u8]>> {
        match self.cache.as_ref()?.get(&(file_number, offset))? {
            Cached::Meta(bytes) => Some(bytes),
            Cached::Data(_) => None,
        }
    }

    pub(crate) fn insert_meta(&self, file_number: u64, offset: u64, bytes: Arc<[u8]>) {
        if let Some(cache) = &self.cache {
            cache.insert((file_number, offset), Cached::Meta(bytes));
        }
    }
}
