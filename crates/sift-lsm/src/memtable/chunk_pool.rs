//! Arena chunks of flushed memtables, kept for the next memtables of the same database.
//!
//! Why: a memtable's chunks are allocated by the write leader and freed by the flush thread
//! when it drops the flushed memtable. With glibc's allocator that free takes the lock of the
//! malloc arena the chunk came from, the writer's, and holds it while it returns megabytes;
//! a writer allocating meanwhile parks on the lock. The flush thread may even share the
//! writer's arena outright (glibc makes a limited number of arenas, and threads beyond them
//! share). In `sift bench diff-index` (sync-insert at half load), 13–43 writes of 20 µs or more
//! per target step parked in `__lll_lock_wait_private`, woken by the flush thread freeing arena
//! chunks or growing its bloom filter's vector (`sstable/bloom.rs`). Chunks handed from one
//! memtable to the next never reach the allocator.
//!
//! The pool keeps chunks of the arena's standard sizes (powers of two up to
//! `CHUNK_BYTES_MAX`) and at most `bytes_max` bytes of them; others are freed as before.

use super::arena::{Chunk, CHUNK_BYTES_MAX};
use parking_lot::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

/// Size classes: powers of two from 1 byte to `CHUNK_BYTES_MAX` (only some are used).
const CLASSES: usize = CHUNK_BYTES_MAX.trailing_zeros() as usize + 1;

/// Idle arena chunks, by size. Shared by the memtables of one database.
pub struct ChunkPool {
    bytes_max: usize,
    state: Mutex<PoolState>,
    chunks_reused: AtomicU64,
    chunks_freed: AtomicU64,
}

struct PoolState {
    /// `by_class[c]` holds chunks of `1 << c` bytes, the most recently returned last.
    by_class: [Vec<Chunk>; CLASSES],
    pooled_bytes: usize,
}

/// What a pool holds and has done.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ChunkPoolStats {
    /// Bytes of idle chunks held now.
    pub pooled_bytes: u64,
    /// Chunks handed to a memtable from the pool instead of the allocator.
    pub chunks_reused: u64,
    /// Chunks of dropped memtables returned to the allocator (full pool, or odd size).
    pub chunks_freed: u64,
}

impl std::fmt::Debug for ChunkPool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChunkPool")
            .field("bytes_max", &self.bytes_max)
            .field("stats", &self.stats())
            .finish()
    }
}

impl ChunkPool {
    /// A pool that holds at most `bytes_max` bytes of idle chunks (0: none, every chunk is
    /// freed when its memtable is dropped).
    pub fn new(bytes_max: usize) -> ChunkPool {
        ChunkPool {
            bytes_max,
            state: Mutex::new(PoolState {
                by_class: std::array::from_fn(|_| Vec::new()),
                pooled_bytes: 0,
            }),
            chunks_reused: AtomicU64::new(0),
            chunks_freed: AtomicU64::new(0),
        }
    }

    pub fn stats(&self) -> ChunkPoolStats {
        ChunkPoolStats {
            pooled_bytes: self.state.lock().pooled_bytes as u64,
            chunks_reused: self.chunks_reused.load(Ordering::Relaxed),
            chunks_freed: self.chunks_freed.load(Ordering::Relaxed),
        }
    }

    /// An idle chunk of exactly `bytes` bytes, if the pool holds one.
    pub(super) fn take(&self, bytes: usize) -> Option<Chunk> {
        let class = class_of(bytes)?;
        let mut state = self.state.lock();
        let chunk = state.by_class[class].pop()?;
        state.pooled_bytes -= bytes;
        drop(state);
        debug_assert_eq!(chunk.bytes(), bytes);
        self.chunks_reused.fetch_add(1, Ordering::Relaxed);
        Some(chunk)
    }

    /// Keeps what fits of `chunks` (the chunks of a dropped arena); frees the rest, after
    /// releasing the pool's lock.
    pub(super) fn give_back(&self, chunks: Vec<Chunk>) {
        let mut freed = Vec::new();
        let mut state = self.state.lock();
        for chunk in chunks {
            let bytes = chunk.bytes();
            match class_of(bytes) {
                Some(class) if state.pooled_bytes + bytes <= self.bytes_max => {
                    state.pooled_bytes += bytes;
                    state.by_class[class].push(chunk);
                }
                _ => freed.push(chunk),
            }
        }
        drop(state);
        self.chunks_freed
            .fetch_add(freed.len() as u64, Ordering::Relaxed);
        drop(freed);
    }
}

/// The size class of a chunk of `bytes`, if the pool keeps chunks of that size.
fn class_of(bytes: usize) -> Option<usize> {
    (bytes.is_power_of_two() && bytes <= CHUNK_BYTES_MAX).then(|| bytes.trailing_zeros() as usize)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memtable::arena::{Area, Arena};
    use std::sync::Arc;

    /// Start addresses of every chunk an arena holds.
    fn chunk_starts(arena: &Arena) -> Vec<usize> {
        let mut starts = arena.chunk_starts();
        starts.sort_unstable();
        starts
    }

    #[test]
    fn chunks_of_a_dropped_arena_are_handed_to_the_next_one() {
        let pool = Arc::new(ChunkPool::new(64 << 20));
        let first = Arena::with_pool(Some(Arc::clone(&pool)));
        for _ in 0..2000 {
            first.allocate(Area::Nodes(1), 100);
            first.allocate(Area::Values, 300);
        }
        let first_chunks = chunk_starts(&first);
        let first_bytes = first.allocated_bytes();
        drop(first);
        let stats = pool.stats();
        assert_eq!(stats.pooled_bytes, first_bytes as u64, "{stats:?}");
        assert_eq!(stats.chunks_freed, 0);

        // The same allocation pattern asks for the same chunk sizes, so every chunk comes back.
        let second = Arena::with_pool(Some(Arc::clone(&pool)));
        for _ in 0..2000 {
            second.allocate(Area::Nodes(1), 100);
            second.allocate(Area::Values, 300);
        }
        assert_eq!(chunk_starts(&second), first_chunks);
        let stats = pool.stats();
        assert_eq!(stats.pooled_bytes, 0, "{stats:?}");
        assert_eq!(stats.chunks_reused, first_chunks.len() as u64);
    }

    #[test]
    fn the_pool_never_holds_more_than_its_limit_and_frees_odd_sizes() {
        let limit = 200 << 10;
        let pool = Arc::new(ChunkPool::new(limit));
        let arena = Arena::with_pool(Some(Arc::clone(&pool)));
        for _ in 0..4000 {
            arena.allocate(Area::Values, 300);
        }
        // A large value gets a chunk of its own, of its own (odd) size.
        arena.allocate(Area::Values, 3 << 20);
        let chunks = arena.chunk_starts().len() as u64;
        let arena_bytes = arena.allocated_bytes();
        assert!(arena_bytes > limit, "the test needs more than the limit");
        drop(arena);
        let stats = pool.stats();
        assert!(stats.pooled_bytes <= limit as u64, "{stats:?}");
        assert!(stats.pooled_bytes > 0, "{stats:?}");
        assert!(
            stats.chunks_freed >= 1,
            "the odd-sized chunk is freed: {stats:?}"
        );
        assert!(stats.chunks_freed < chunks, "{stats:?}");

        // No pool, or a pool of 0 bytes: nothing is kept.
        let empty = Arc::new(ChunkPool::new(0));
        let arena = Arena::with_pool(Some(Arc::clone(&empty)));
        arena.allocate(Area::Values, 300);
        drop(arena);
        assert_eq!(empty.stats().pooled_bytes, 0);
        assert_eq!(empty.stats().chunks_freed, 1);
    }

    #[test]
    fn a_chunk_of_another_size_is_not_handed_out() {
        let pool = ChunkPool::new(1 << 20);
        let bytes = 64 << 10;
        pool.give_back(vec![Chunk::allocate(bytes)]);
        assert!(pool.take(bytes / 2).is_none());
        assert!(pool.take(bytes * 2).is_none());
        assert!(pool.take(bytes + 8).is_none());
        assert_eq!(pool.take(bytes).map(|chunk| chunk.bytes()), Some(bytes));
        assert!(pool.take(bytes).is_none());
    }
}
