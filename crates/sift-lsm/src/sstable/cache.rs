//! The shared block cache: decompressed, verified data blocks keyed by
//! `(file number, block offset)` and weighed by their bytes.

use super::block::Block;
use std::sync::Arc;

/// Bytes charged per cached block on top of its data (key, `Arc`, bookkeeping).
const ENTRY_OVERHEAD_BYTES: u64 = 64;

#[derive(Clone, Copy, Default)]
struct BlockWeighter;

impl quick_cache::Weighter<(u64, u64), Arc<Block>> for BlockWeighter {
    fn weight(&self, _key: &(u64, u64), block: &Arc<Block>) -> u64 {
        block.size_bytes() as u64 + ENTRY_OVERHEAD_BYTES
    }
}

/// A block cache shared by all tables of a database. Capacity 0 caches nothing.
pub struct BlockCache {
    cache: Option<quick_cache::sync::Cache<(u64, u64), Arc<Block>, BlockWeighter>>,
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
        self.cache.as_ref()?.get(&(file_number, offset))
    }

    pub(crate) fn insert(&self, file_number: u64, offset: u64, block: Arc<Block>) {
        if let Some(cache) = &self.cache {
            cache.insert((file_number, offset), block);
        }
    }
}
