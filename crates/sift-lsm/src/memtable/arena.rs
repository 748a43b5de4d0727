//! The memtable's bump allocator: skiplist nodes and values are carved out of large chunks
//! that live as long as the memtable (then go back to its `ChunkPool`, if it has one).
//!
//! Why: one heap allocation per entry (and one free per entry when a flushed memtable is
//! dropped) cost more than the insert itself, and scattered the small nodes of index trees
//! among the large documents, so a random-order insert missed the cache at every level of
//! the skiplist. Nodes come from one region and values from another, so the nodes (key bytes
//! and towers) stay densely packed however large the values are.

use super::chunk_pool::ChunkPool;
use parking_lot::Mutex;
use std::alloc::Layout;
use std::ptr::NonNull;
use std::sync::Arc;

/// Alignment of every allocation (skiplist nodes hold atomic pointers; values a `usize`).
pub(super) const ALIGN: usize = 8;
/// First chunk of the value region and of each node region; later chunks double up to
/// `CHUNK_BYTES_MAX`, so a small memtable (tests, idle trees) stays small. Node regions start
/// smaller because there is one per tree written: a memtable touching a thousand trees once
/// each must not hold a thousand 64 KiB chunks (memory the flush threshold never sees).
const VALUE_CHUNK_BYTES_MIN: usize = 64 << 10;
const NODE_CHUNK_BYTES_MIN: usize = 4 << 10;
pub(super) const CHUNK_BYTES_MAX: usize = 2 << 20;

/// One heap block, freed when dropped (or kept by a `ChunkPool` for the next arena).
pub(super) struct Chunk {
    start: NonNull<u8>,
    layout: Layout,
}

// SAFETY: a chunk owns its heap block exclusively; nothing else points into it once its arena
// is gone, so it may be freed or reused on any thread.
unsafe impl Send for Chunk {}

impl Chunk {
    pub(super) fn bytes(&self) -> usize {
        self.layout.size()
    }

    /// A chunk of `bytes` (a valid non-zero layout size) straight from the allocator.
    pub(super) fn allocate(bytes: usize) -> Chunk {
        let layout = match Layout::from_size_align(bytes, ALIGN) {
            Ok(layout) => layout,
            Err(_) => std::alloc::handle_alloc_error(Layout::new::<u8>()),
        };
        // SAFETY: `layout` has a non-zero size (`bytes >= ALIGN`: callers pass `rounded_bytes`
        // output or a chunk size).
        let raw = unsafe { std::alloc::alloc(layout) };
        let Some(start) = NonNull::new(raw) else {
            std::alloc::handle_alloc_error(layout)
        };
        Chunk { start, layout }
    }
}

impl Drop for Chunk {
    fn drop(&mut self) {
        // SAFETY: `start` was returned by `std::alloc::alloc(self.layout)` and is freed once.
        unsafe { std::alloc::dealloc(self.start.as_ptr(), self.layout) }
    }
}

/// A bump region: the current chunk's free tail.
struct Region {
    cursor: *mut u8,
    remaining: usize,
    next_chunk_bytes: usize,
}

impl Region {
    fn new(first_chunk_bytes: usize) -> Region {
        Region {
            cursor: std::ptr::null_mut(),
            remaining: 0,
            next_chunk_bytes: first_chunk_bytes,
        }
    }
}

struct ArenaState {
    chunks: Vec<Chunk>,
    /// One node region per class (the memtable's classes are tree ids), so the nodes of a
    /// tree of small entries stay dense among those of other trees.
    nodes: Vec<(u32, Region)>,
    values: Region,
    allocated_bytes: usize,
}

/// Which region an allocation comes from.
#[derive(Clone, Copy)]
pub(super) enum Area {
    Nodes(u32),
    Values,
}

pub(super) struct Arena {
    state: Mutex<ArenaState>,
    /// Where chunks come from first and go back to when the arena is dropped.
    pool: Option<Arc<ChunkPool>>,
}

// SAFETY: the raw pointers in `ArenaState` point into chunks the arena owns; they are only
// read and advanced under the mutex, and every block handed out is disjoint from every other.
unsafe impl Send for Arena {}
// SAFETY: as above; `allocate` takes the mutex.
unsafe impl Sync for Arena {}

impl Arena {
    /// An arena that takes chunks from `pool` when it has one of the size needed, and gives
    /// them all back to it when dropped (`None`: straight from and to the allocator).
    pub(super) fn with_pool(pool: Option<Arc<ChunkPool>>) -> Arena {
        Arena {
            state: Mutex::new(ArenaState {
                chunks: Vec::new(),
                nodes: Vec::new(),
                values: Region::new(VALUE_CHUNK_BYTES_MIN),
                allocated_bytes: 0,
            }),
            pool,
        }
    }

    #[cfg(test)]
    pub(super) fn chunk_starts(&self) -> Vec<usize> {
        let state = self.state.lock();
        state
            .chunks
            .iter()
            .map(|c| c.start.as_ptr() as usize)
            .collect()
    }

    /// Bytes of all chunks allocated so far.
    pub(super) fn allocated_bytes(&self) -> usize {
        self.state.lock().allocated_bytes
    }

    /// `bytes` (rounded up to `ALIGN`) of uninitialised memory aligned to `ALIGN`, valid until
    /// the arena is dropped. Aborts like any allocation when memory is exhausted or when
    /// `bytes` is beyond what any allocation can hold.
    pub(super) fn allocate(&self, area: Area, bytes: usize) -> NonNull<u8> {
        let Some(bytes) = rounded_bytes(bytes) else {
            std::alloc::handle_alloc_error(Layout::new::<u8>())
        };
        let mut guard = self.state.lock();
        let state = &mut *guard;
        let region = match area {
            Area::Nodes(class) => {
                let found = state.nodes.iter().position(|(c, _)| *c == class);
                let position = found.unwrap_or_else(|| {
                    state.nodes.push((class, Region::new(NODE_CHUNK_BYTES_MIN)));
                    state.nodes.len() - 1
                });
                &mut state.nodes[position].1
            }
            Area::Values => &mut state.values,
        };
        // `remaining > 0` implies `cursor` points into a chunk: a fresh region (null cursor)
        // has `remaining == 0`, and `bytes >= ALIGN > 0`, so it never takes this branch.
        if bytes <= region.remaining {
            let start = region.cursor;
            // SAFETY: `start + bytes` stays inside the current chunk (`bytes <= remaining`,
            // and `remaining` is the length of the chunk's free tail starting at `start`).
            region.cursor = unsafe { start.add(bytes) };
            region.remaining -= bytes;
            // SAFETY: `start` points into a live chunk (see above), so it is not null.
            return unsafe { NonNull::new_unchecked(start) };
        }
        if bytes > region.next_chunk_bytes / 4 {
            // A large value gets a chunk of its own and leaves the current one in use.
            return push_chunk(
                &mut state.chunks,
                &mut state.allocated_bytes,
                self.pool.as_deref(),
                bytes,
            );
        }
        let chunk_bytes = region.next_chunk_bytes;
        region.next_chunk_bytes = (chunk_bytes * 2).min(CHUNK_BYTES_MAX);
        let start = push_chunk(
            &mut state.chunks,
            &mut state.allocated_bytes,
            self.pool.as_deref(),
            chunk_bytes,
        );
        // SAFETY: the chunk is `chunk_bytes` long and `bytes <= chunk_bytes / 4`, so the new
        // cursor stays inside it.
        region.cursor = unsafe { start.as_ptr().add(bytes) };
        region.remaining = chunk_bytes - bytes;
        start
    }
}

/// `bytes` (at least 1) rounded up to a multiple of `ALIGN`, or `None` if that overflows or
/// exceeds what a `Layout` can describe (so no wrapped, too-small size reaches the bump
/// arithmetic).
fn rounded_bytes(bytes: usize) -> Option<usize> {
    let rounded = bytes.max(1).checked_next_multiple_of(ALIGN)?;
    Layout::from_size_align(rounded, ALIGN).ok()?;
    Some(rounded)
}

impl Drop for Arena {
    fn drop(&mut self) {
        // Every block handed out dies with the arena (the memtable owns both), so its chunks
        // may serve another arena now.
        if let Some(pool) = &self.pool {
            pool.give_back(std::mem::take(&mut self.state.get_mut().chunks));
        }
    }
}

/// Takes a chunk of `bytes` (`rounded_bytes` output, so a valid non-zero layout size) from
/// `pool` or else allocates one, records it, and returns its start.
fn push_chunk(
    chunks: &mut Vec<Chunk>,
    allocated_bytes: &mut usize,
    pool: Option<&ChunkPool>,
    bytes: usize,
) -> NonNull<u8> {
    let chunk = pool
        .and_then(|pool| pool.take(bytes))
        .unwrap_or_else(|| Chunk::allocate(bytes));
    let start = chunk.start;
    chunks.push(chunk);
    *allocated_bytes = allocated_bytes.saturating_add(bytes);
    start
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_round_up_without_wrapping() {
        assert_eq!(rounded_bytes(0), Some(ALIGN));
        assert_eq!(rounded_bytes(1), Some(ALIGN));
        assert_eq!(rounded_bytes(ALIGN), Some(ALIGN));
        assert_eq!(rounded_bytes(ALIGN + 1), Some(2 * ALIGN));
        // Rounding these up used to wrap to 0 in release builds: a 0-byte block handed out
        // for a huge request.
        assert_eq!(rounded_bytes(usize::MAX), None);
        assert_eq!(rounded_bytes(usize::MAX - ALIGN + 2), None);
        // Beyond `isize::MAX` no layout exists.
        assert_eq!(rounded_bytes(isize::MAX.unsigned_abs()), None);
    }

    #[test]
    fn many_node_classes_stay_small() {
        let arena = Arena::with_pool(None);
        for class in 0..1000u32 {
            arena.allocate(Area::Nodes(class), 40);
        }
        // One small first chunk per class, not 64 KiB each.
        assert!(
            arena.allocated_bytes() <= 1000 * NODE_CHUNK_BYTES_MIN,
            "{} bytes",
            arena.allocated_bytes()
        );
    }

    #[test]
    fn allocations_are_aligned_disjoint_and_writable() {
        let arena = Arena::with_pool(None);
        let mut blocks: Vec<(usize, usize)> = Vec::new();
        for (i, bytes) in [1usize, 7, 8, 100, 20_000, 70_000, 3, 1 << 20, 5]
            .into_iter()
            .cycle()
            .take(200)
            .enumerate()
        {
            let area = match i % 3 {
                0 => Area::Nodes(0),
                1 => Area::Nodes(9),
                _ => Area::Values,
            };
            let start = arena.allocate(area, bytes);
            assert_eq!(start.as_ptr() as usize % ALIGN, 0);
            // SAFETY: the block is `bytes` long and ours.
            unsafe { std::ptr::write_bytes(start.as_ptr(), i as u8, bytes) };
            blocks.push((start.as_ptr() as usize, bytes));
        }
        blocks.sort_unstable();
        for pair in blocks.windows(2) {
            assert!(pair[0].0 + pair[0].1 <= pair[1].0, "overlap: {pair:?}");
        }
        assert!(arena.allocated_bytes() >= blocks.iter().map(|b| b.1).sum::<usize>());
    }
}
