//! An insert-only concurrent skiplist whose nodes live in the memtable's arena (the design of
//! LevelDB's and RocksDB's memtables): writers link nodes bottom-up with compare-and-swap, so
//! inserts from several threads need no lock; readers never lock. Nodes are never removed or
//! freed while the skiplist lives, so a node pointer stays valid as long as the skiplist does.
//!
//! Node layout (8-byte aligned, in the arena's node region):
//! `value: AtomicPtr | key_bytes: u32 | height: u32 | next: [AtomicPtr<Node>; height] | key`.
//! The value is a separate arena block `[length: usize][bytes]`, so nodes stay small whatever
//! the value size, and re-adding an identical key replaces the value with one atomic store.
//!
//! Memory-safety invariants the `unsafe` code relies on (the key order is not among them: a
//! comparator that is inconsistent or panics can misorder keys or leave a node unlinked in
//! the arena, but never makes a link point to anything but a fully initialised node):
//! - A node's header, tower and key are written before the node is first linked; every link
//!   is published with a release compare-and-swap and read with an acquire load, so whoever
//!   reaches a node through a link sees it initialised. Header and key are never written
//!   again; the value pointer changes only by release stores of initialised value blocks.
//! - A node is linked at level `l` only after its own link at `l` is set, and levels are
//!   linked bottom-up; a search reaches a node at level `l` only through a level-`l` link and
//!   then only reads its links at `l` and below, all below its height.
//! - Nodes and value blocks are never freed before the arena, which the skiplist owns: any
//!   node pointer obtained from a skiplist is valid while that skiplist is alive. Pointers and
//!   slices handed out carry no lifetime, so callers (`memtable/mod.rs`) must keep the
//!   skiplist alive for as long as they use them; the functions taking node pointers are
//!   `unsafe` for that reason.
//! - Insertion may run on several threads at once (the arena allocates under a mutex; linking
//!   is lock-free). The engine's write path inserts from one thread at a time (the write-group
//!   leader), so concurrent insertion is supported but not relied on.

use super::arena::{Area, Arena};
use super::chunk_pool::ChunkPool;
use std::cmp::Ordering as KeyOrdering;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicPtr, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

/// Levels at most; with a branching factor of 4, enough for billions of entries.
const HEIGHT_MAX: usize = 16;

/// Searches `SkipList::insert_group` runs interleaved: enough to overlap most of their cache
/// misses, few enough for the line fill buffers of one core.
pub(super) const GROUP_KEYS: usize = 8;

/// Asks the CPU to bring the first 128 bytes at `node` into the cache (for a node: header,
/// low links, key start). Safe for any pointer: nothing is dereferenced.
#[inline]
fn prefetch<T>(node: *const T) {
    #[cfg(target_arch = "x86_64")]
    if !node.is_null() {
        // SAFETY: a prefetch is a hint: it never faults, whatever the address, and has no
        // effect on memory; the second address is formed with wrapping arithmetic.
        unsafe {
            use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
            _mm_prefetch::<_MM_HINT_T0>(node.cast::<i8>());
            _mm_prefetch::<_MM_HINT_T0>(node.cast::<i8>().wrapping_add(64));
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = node;
}

/// The fixed part of a node; the tower and the key follow it in the same block.
#[repr(C)]
pub(super) struct Node {
    value: AtomicPtr<u8>,
    key_bytes: u32,
    height: u32,
}

const NODE_HEADER_BYTES: usize = std::mem::size_of::<Node>();
const LINK_BYTES: usize = std::mem::size_of::<AtomicPtr<Node>>();
const VALUE_HEADER_BYTES: usize = std::mem::size_of::<usize>();

/// The value block of an empty value (shared; never written).
static EMPTY_VALUE: usize = 0;

// The arena's alignment suffices for the node header and the links; the header size keeps
// the links that follow it aligned.
const _: () = assert!(std::mem::align_of::<Node>() <= super::arena::ALIGN);
const _: () = assert!(std::mem::align_of::<AtomicPtr<Node>>() <= super::arena::ALIGN);
const _: () = assert!(NODE_HEADER_BYTES.is_multiple_of(std::mem::align_of::<AtomicPtr<Node>>()));

/// The shared block of every empty value: `EMPTY_VALUE` is a zero length header. Mutable only
/// in type (`AtomicPtr<u8>`); nothing writes through it.
fn empty_value_block() -> *mut u8 {
    std::ptr::addr_of!(EMPTY_VALUE).cast_mut().cast::<u8>()
}

/// Bytes of a node of `height` links and a key of `key_bytes`, or `None` on overflow.
fn node_bytes(height: usize, key_bytes: usize) -> Option<usize> {
    height
        .checked_mul(LINK_BYTES)?
        .checked_add(NODE_HEADER_BYTES)?
        .checked_add(key_bytes)
}

impl Node {
    /// The link at `level` (`level < height`).
    ///
    /// # Safety
    /// `node` must point to a node initialised by `SkipList::allocate_node` whose skiplist is
    /// alive, and `level` must be below its height.
    unsafe fn link<'a>(node: *const Node, level: usize) -> &'a AtomicPtr<Node> {
        // SAFETY: the tower starts right after the header (whose size is a multiple of the
        // link alignment, checked at compile time, so the links are aligned) and has `height`
        // initialised links (caller); the node's block outlives `'a` (caller).
        unsafe { &*node.add(1).cast::<AtomicPtr<Node>>().add(level) }
    }

    /// The node's key.
    ///
    /// # Safety
    /// As for `link`.
    pub(super) unsafe fn key<'a>(node: *const Node) -> &'a [u8] {
        // SAFETY: the node is initialised (caller), so `height` and `key_bytes` are set; the
        // key follows the `height` links in the same arena block (pointer arithmetic stays in
        // that block) and is `key_bytes` long; it is never written after the node is
        // published, and the arena lives as long as `'a` (caller).
        unsafe {
            let header = &*node;
            let start = node
                .add(1)
                .cast::<AtomicPtr<Node>>()
                .add(header.height as usize)
                .cast::<u8>();
            std::slice::from_raw_parts(start, header.key_bytes as usize)
        }
    }

    /// The node's current value.
    ///
    /// # Safety
    /// As for `link`.
    pub(super) unsafe fn value<'a>(node: *const Node) -> &'a [u8] {
        // SAFETY: the value pointer always points to a `[length][bytes]` block initialised
        // before it was stored (release store, acquire load here) that lives as long as the
        // arena, or to `EMPTY_VALUE` (length 0, never written). The length header is read
        // unaligned-safe as bytes.
        unsafe {
            let block = (*node).value.load(Ordering::Acquire);
            let length = usize::from_ne_bytes(block.cast::<[u8; VALUE_HEADER_BYTES]>().read());
            std::slice::from_raw_parts(block.add(VALUE_HEADER_BYTES), length)
        }
    }
}

/// The order of a skiplist's keys (a type, so the comparison is inlined into the searches).
pub(super) trait KeyOrder {
    fn compare(a: &[u8], b: &[u8]) -> KeyOrdering;
}

pub(super) struct SkipList<O: KeyOrder> {
    head: NonNull<Node>,
    /// Height of the tallest node (at least 1).
    height: AtomicUsize,
    entries: AtomicUsize,
    /// State of the height generator (a Weyl sequence, mixed).
    random: AtomicU64,
    arena: Arena,
    order: std::marker::PhantomData<fn() -> O>,
}

// SAFETY: the nodes are in `arena`, owned by the skiplist; all shared mutation goes through
// atomics (links published with release stores, read with acquire loads).
unsafe impl<O: KeyOrder> Send for SkipList<O> {}
// SAFETY: as above.
unsafe impl<O: KeyOrder> Sync for SkipList<O> {}

impl<O: KeyOrder> SkipList<O> {
    #[cfg(test)]
    pub(super) fn new() -> SkipList<O> {
        SkipList::with_pool(None)
    }

    /// An empty skiplist whose arena takes chunks from `pool` (see `chunk_pool.rs`).
    pub(super) fn with_pool(pool: Option<Arc<ChunkPool>>) -> SkipList<O> {
        let arena = Arena::with_pool(pool);
        // The head's value is the empty block, not null, so even `Node::value(head)` is sound
        // (searches never return the head, but nothing else would stop a null dereference).
        let head = Self::allocate_node(&arena, 0, HEIGHT_MAX, &[], empty_value_block());
        SkipList {
            head,
            height: AtomicUsize::new(1),
            entries: AtomicUsize::new(0),
            random: AtomicU64::new(0x853C_49E6_748F_EA9B),
            arena,
            order: std::marker::PhantomData,
        }
    }

    pub(super) fn len(&self) -> usize {
        self.entries.load(Ordering::Relaxed)
    }

    /// Bytes of arena chunks allocated so far.
    pub(super) fn arena_bytes(&self) -> usize {
        self.arena.allocated_bytes()
    }

    /// Allocates and initialises a node with all links null.
    fn allocate_node(
        arena: &Arena,
        class: u32,
        height: usize,
        key: &[u8],
        value: *mut u8,
    ) -> NonNull<Node> {
        debug_assert!((1..=HEIGHT_MAX).contains(&height));
        // A key the `u32` length field cannot describe is refused like an impossible
        // allocation (abort), never truncated: the engine's options cap keys far below it.
        let (Some(bytes), Ok(key_bytes)) =
            (node_bytes(height, key.len()), u32::try_from(key.len()))
        else {
            std::alloc::handle_alloc_error(std::alloc::Layout::new::<Node>())
        };
        let node = arena.allocate(Area::Nodes(class), bytes).cast::<Node>();
        let tower = node.as_ptr().wrapping_add(1).cast::<AtomicPtr<Node>>();
        // SAFETY: the block is `bytes` long (header, `height` links, key), aligned to
        // `ALIGN` (enough for `Node` and `AtomicPtr`, checked below at compile time), and ours
        // alone until published. Everything is written through raw pointers, so no reference
        // to uninitialised memory is created.
        unsafe {
            node.as_ptr().write(Node {
                value: AtomicPtr::new(value),
                key_bytes,
                height: height as u32,
            });
            for level in 0..height {
                tower.add(level).write(AtomicPtr::new(std::ptr::null_mut()));
            }
            let key_start = tower.add(height).cast::<u8>();
            std::ptr::copy_nonoverlapping(key.as_ptr(), key_start, key.len());
        }
        node
    }

    /// Copies `value` into a value block.
    fn allocate_value(&self, value: &[u8]) -> *mut u8 {
        if value.is_empty() {
            return empty_value_block();
        }
        let Some(bytes) = value.len().checked_add(VALUE_HEADER_BYTES) else {
            std::alloc::handle_alloc_error(std::alloc::Layout::new::<usize>())
        };
        let block = self.arena.allocate(Area::Values, bytes);
        // SAFETY: the block is `VALUE_HEADER_BYTES + value.len()` long and ours alone until
        // its pointer is stored in a node (release).
        unsafe {
            block
                .as_ptr()
                .cast::<[u8; VALUE_HEADER_BYTES]>()
                .write(value.len().to_ne_bytes());
            std::ptr::copy_nonoverlapping(
                value.as_ptr(),
                block.as_ptr().add(VALUE_HEADER_BYTES),
                value.len(),
            );
        }
        block.as_ptr()
    }

    fn random_height(&self) -> usize {
        // SplitMix64 over a shared Weyl sequence: distinct values for concurrent callers.
        let mut z = self
            .random
            .fetch_add(0x9E37_79B9_7F4A_7C15, Ordering::Relaxed)
            .wrapping_add(0x9E37_79B9_7F4A_7C15);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        // Branching factor 4: each further level with probability 1/4.
        let mut height = 1;
        while height < HEIGHT_MAX && z.trailing_zeros() >= 2 {
            height += 1;
            z >>= 2;
        }
        height
    }

    fn head(&self) -> *const Node {
        self.head.as_ptr()
    }

    /// The successor of `node` at `level`, or null.
    ///
    /// # Safety
    /// `node` is the head or a published node of a live skiplist, reached at `level` or
    /// higher (so `level` is below its height).
    unsafe fn next(node: *const Node, level: usize) -> *const Node {
        // SAFETY: caller; the acquire load pairs with the release compare-and-swap that
        // linked the successor, so the successor is seen initialised.
        unsafe { Node::link(node, level).load(Ordering::Acquire) }
    }

    /// Whether `node` (not null) sorts before `key` (or, with `or_equal`, not after it).
    ///
    /// # Safety
    /// `node` is a published node of a live skiplist.
    unsafe fn before(node: *const Node, key: &[u8], or_equal: bool) -> bool {
        // SAFETY: caller.
        let node_key = unsafe { Node::key(node) };
        match O::compare(node_key, key) {
            KeyOrdering::Less => true,
            KeyOrdering::Equal => or_equal,
            KeyOrdering::Greater => false,
        }
    }

    /// The first node whose key is `>= key`, or null.
    pub(super) fn seek(&self, key: &[u8]) -> *const Node {
        // The successor the search compared, not a fresh load of the predecessor's link: a
        // node linked after the predecessor since then may sort before `key` (a memtable
        // `get` would return a version newer than its snapshot).
        self.last_before(key, false).1
    }

    /// The last node whose key is `< key` (or `<= key` with `or_equal`), or null.
    pub(super) fn seek_before(&self, key: &[u8], or_equal: bool) -> *const Node {
        let (node, _) = self.last_before(key, or_equal);
        self.non_head(node)
    }

    /// The first node, or null.
    pub(super) fn first(&self) -> *const Node {
        // SAFETY: the head has every level.
        unsafe { Self::next(self.head(), 0) }
    }

    /// The last node, or null.
    pub(super) fn last(&self) -> *const Node {
        let mut node = self.head();
        for level in (0..self.height.load(Ordering::Acquire)).rev() {
            loop {
                // SAFETY: `node` is the head or was reached at a level `>= level`.
                let next = unsafe { Self::next(node, level) };
                if next.is_null() {
                    break;
                }
                node = next;
            }
        }
        self.non_head(node)
    }

    /// The node after `node`, or null.
    ///
    /// # Safety
    /// `node` is a node of a skiplist (returned by one of its searches) that is still alive;
    /// the result is valid as long as that skiplist is.
    pub(super) unsafe fn after(node: *const Node) -> *const Node {
        // SAFETY: caller; every node has level 0.
        unsafe { Self::next(node, 0) }
    }

    /// Asks the CPU for what a forward scan standing on `node` reads next: its value block
    /// and the node after it. Values live in their own region, in insertion order, so a
    /// scan in key order would otherwise wait for two unrelated cache misses per entry.
    ///
    /// # Safety
    /// As for `after`.
    pub(super) unsafe fn prefetch_scan_from(node: *const Node) {
        // SAFETY: caller; relaxed loads suffice, the pointers are only prefetched (a hint
        // that never dereferences), never read through here.
        let (value, following) = unsafe {
            (
                (*node).value.load(Ordering::Relaxed),
                Node::link(node, 0).load(Ordering::Relaxed),
            )
        };
        prefetch(value.cast_const());
        prefetch(following);
    }

    /// The node before `node`, or null.
    ///
    /// # Safety
    /// `node` is a node of this skiplist (returned by one of its searches).
    pub(super) unsafe fn before_node(&self, node: *const Node) -> *const Node {
        // SAFETY: caller; `self` is borrowed, so the skiplist is alive during the search.
        let key = unsafe { Node::key(node) };
        self.seek_before(key, false)
    }

    fn non_head(&self, node: *const Node) -> *const Node {
        if std::ptr::eq(node, self.head()) {
            std::ptr::null()
        } else {
            node
        }
    }

    /// The last node (or the head) sorting before `key` (or not after it with `or_equal`),
    /// and the level-0 successor it had when the search compared it (null or a node sorting
    /// after `key`).
    fn last_before(&self, key: &[u8], or_equal: bool) -> (*const Node, *const Node) {
        let mut node = self.head();
        let mut successor = std::ptr::null();
        for level in (0..self.height.load(Ordering::Acquire)).rev() {
            loop {
                // SAFETY: `node` is the head or was reached at a level `>= level`; `next`,
                // when not null, is a published node.
                let next = unsafe { Self::next(node, level) };
                // The successor one level up was already found not to sort before `key`; it
                // is often the successor here too (RocksDB's skiplist skips this compare).
                if next.is_null()
                    || next == successor
                    // SAFETY: runs only when `next` is not null: a published node.
                    || !unsafe { Self::before(next, key, or_equal) }
                {
                    successor = next;
                    break;
                }
                node = next;
            }
        }
        (node, successor)
    }

    /// From `start` (the head or a node before `key`) at `level`: the last node before `key`
    /// and its successor. `known_after` (or null) is a node known not to sort before `key`
    /// (the successor found one level up), taken as the successor without a compare.
    ///
    /// # Safety
    /// As for `next`, for `start`.
    unsafe fn splice_at(
        key: &[u8],
        start: *const Node,
        level: usize,
        known_after: *const Node,
    ) -> (*const Node, *const Node) {
        let mut node = start;
        loop {
            // SAFETY: `node` is `start` (caller) or was reached at `level`; `next`, when not
            // null, is a published node.
            let next = unsafe { Self::next(node, level) };
            // SAFETY: `before` runs only when `next` is not null: a published node.
            if next.is_null() || next == known_after || !unsafe { Self::before(next, key, false) } {
                return (node, next);
            }
            node = next;
        }
    }

    /// Whether `node` (may be null) has exactly `key`.
    ///
    /// # Safety
    /// `node` is null or a published node of a live skiplist.
    unsafe fn has_key(node: *const Node, key: &[u8]) -> bool {
        // SAFETY: caller, and `node` is not null here.
        !node.is_null() && O::compare(unsafe { Node::key(node) }, key).is_eq()
    }

    /// Inserts `key` with `value`; if the key is present, replaces its value. Thread-safe.
    /// Nodes of the same `class` are allocated together.
    pub(super) fn insert(&self, class: u32, key: &[u8], value: &[u8]) {
        let value = self.allocate_value(value);
        let height = self.random_height();
        let top = self.raise_height(height);
        let mut splice = Splice::new(self.head());
        let mut node = self.head();
        let mut after = std::ptr::null();
        for level in (0..top).rev() {
            // SAFETY: `node` is the head or was reached at `level + 1`; `after`, the successor
            // found there, does not sort before `key`.
            let (before, next) = unsafe { Self::splice_at(key, node, level, after) };
            after = next;
            splice.prev[level] = before;
            splice.next[level] = after;
            node = before;
        }
        // SAFETY: every level below `top >= height` was bracketed by the search above, which
        // recorded the successors it compared.
        unsafe { self.link(class, key, value, height, &mut splice) };
    }

    /// Makes the skiplist at least `height` tall; returns its height (`>= height`).
    fn raise_height(&self, height: usize) -> usize {
        let mut top = self.height.load(Ordering::Acquire);
        while height > top {
            match self.height.compare_exchange_weak(
                top,
                height,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => top = height,
                Err(current) => top = current,
            }
        }
        top
    }

    /// Inserts up to [`GROUP_KEYS`] keys (entries `(class, key, value)`, further entries are
    /// ignored), ascending, whose searches run interleaved: each step of one search prefetches
    /// the node it will compare next and hands over to the next search, so the cache misses of
    /// the group's searches overlap instead of following one another (a search through a
    /// large memtable is a chain of dependent cache misses). The keys are then linked in
    /// order; a bracket made stale by a key linked before (or by another writer) is detected
    /// by the linking compare-and-swap, which then searches again. Same result as `insert` of
    /// each entry in order. Any key order is correct; ascending keys share cached nodes.
    pub(super) fn insert_group(&self, entries: &[(u32, &[u8], &[u8])]) {
        let count = entries.len().min(GROUP_KEYS);
        let mut values = [std::ptr::null_mut::<u8>(); GROUP_KEYS];
        let mut heights = [0usize; GROUP_KEYS];
        // At least 1 (the skiplist's height) and, as the height only grows, at least every
        // entry's height.
        let mut top = self.height.load(Ordering::Acquire);
        for (i, (_, _, value)) in entries.iter().take(count).enumerate() {
            values[i] = self.allocate_value(value);
            heights[i] = self.random_height();
            top = top.max(self.raise_height(heights[i]));
        }
        let mut splices: [Splice; GROUP_KEYS] = std::array::from_fn(|_| Splice::new(self.head()));
        // Per search: the node it stands on (the head or a node sorting before its key,
        // reached at `levels[i]` or higher), its level, and that node's successor at that
        // level as loaded at the search's previous turn (prefetched; compared at its next
        // turn, and if it does not sort before the key, recorded as the bracket's successor:
        // the successor compared, never a second load of the link).
        let mut nodes = [self.head(); GROUP_KEYS];
        let mut levels = [top - 1; GROUP_KEYS];
        let mut nexts = [std::ptr::null::<Node>(); GROUP_KEYS];
        for next in nexts.iter_mut().take(count) {
            // SAFETY: the head has every level.
            *next = unsafe { Self::next(self.head(), top - 1) };
            prefetch(*next);
        }
        let mut searching = count;
        let mut done = [false; GROUP_KEYS];
        while searching > 0 {
            for i in 0..count {
                if done[i] {
                    continue;
                }
                let key = entries[i].1;
                let next = nexts[i];
                // SAFETY: `next` is not null here, so a published node (loaded by acquire).
                if !next.is_null() && unsafe { Self::before(next, key, false) } {
                    nodes[i] = next;
                } else {
                    splices[i].prev[levels[i]] = nodes[i];
                    splices[i].next[levels[i]] = next;
                    if levels[i] == 0 {
                        done[i] = true;
                        searching -= 1;
                        continue;
                    }
                    levels[i] -= 1;
                }
                // SAFETY: `nodes[i]` is the head or was reached at a level `>= levels[i]`.
                nexts[i] = unsafe { Self::next(nodes[i], levels[i]) };
                prefetch(nexts[i]);
            }
        }
        for (i, (class, key, _)) in entries.iter().take(count).enumerate() {
            // SAFETY: search `i` bracketed `key` at every level below `top >= heights[i]`
            // with the successors it compared; brackets may be stale (not tight), which the
            // compare-and-swap in `link` detects.
            unsafe { self.link(*class, key, values[i], heights[i], &mut splices[i]) };
        }
    }

    /// Links a new node for `key` (value block `value`, `height` levels) between the nodes
    /// `splice` brackets it with at each level below `height`, or replaces the value of a node
    /// with exactly `key`. A bracket that went stale (another node was linked between its
    /// nodes since the search) fails the compare-and-swap and is searched again from its
    /// predecessor, which still sorts before `key` (nodes are never removed).
    ///
    /// # Safety
    /// `value` is a value block of this skiplist (or the empty block) and `1 <= height <=
    /// HEIGHT_MAX`. For every `level < height`: `splice.prev[level]` is the head or a node of
    /// this skiplist that sorts before `key` and was reached at `level` or higher (so its
    /// tower reaches `level`), and `splice.next[level]` is null or a node of this skiplist
    /// that does not sort before `key`, as compared by the search (not re-read after it).
    unsafe fn link(
        &self,
        class: u32,
        key: &[u8],
        value: *mut u8,
        height: usize,
        splice: &mut Splice,
    ) {
        let (prev, next) = (&mut splice.prev, &mut splice.next);
        // SAFETY: `next[0]` is null or a published node (caller).
        if unsafe { Self::has_key(next[0], key) } {
            // SAFETY: a published node; `value` is initialised and the release store
            // publishes it; value blocks are never freed before the arena.
            unsafe { (*next[0]).value.store(value, Ordering::Release) };
            return;
        }
        let new = Self::allocate_node(&self.arena, class, height, key, value).as_ptr();
        for level in 0..height {
            loop {
                // SAFETY: `new` is ours and `level < height`; it is not yet reachable at
                // `level`, so nobody else writes this link.
                unsafe { Node::link(new, level).store(next[level].cast_mut(), Ordering::Relaxed) };
                // SAFETY: `prev[level]` is the head or a node reached at `level` (caller, or
                // the re-search below), so its tower reaches `level`.
                let link = unsafe { Node::link(prev[level], level) };
                // Succeeds only if `prev[level]` is still directly followed by the successor
                // the search compared, so `new` lands between a node before `key` and one not
                // before it.
                if link
                    .compare_exchange(
                        next[level].cast_mut(),
                        new,
                        Ordering::AcqRel,
                        Ordering::Acquire,
                    )
                    .is_ok()
                {
                    break;
                }
                // Another node was linked here first (the bracket is stale): find the bracket
                // again from `prev`, which still sorts before `key` (nodes are never removed).
                // SAFETY: `prev[level]` is the head or a node reached at `level`.
                let (before, after) =
                    unsafe { Self::splice_at(key, prev[level], level, std::ptr::null()) };
                // SAFETY: `after` is null or a published node.
                if level == 0 && unsafe { Self::has_key(after, key) } {
                    // The same key was inserted meanwhile: replace its value; `new` was never
                    // published and stays unused in the arena.
                    // SAFETY: a published node.
                    unsafe { (*after).value.store(value, Ordering::Release) };
                    return;
                }
                prev[level] = before;
                next[level] = after;
            }
        }
        self.entries.fetch_add(1, Ordering::Relaxed);
    }
}

/// An insert position: at each level, the last node found before the key and the successor
/// the search compared after it (see `SkipList::link`).
struct Splice {
    prev: [*const Node; HEIGHT_MAX],
    next: [*const Node; HEIGHT_MAX],
}

impl Splice {
    /// A splice at the start of every level of a skiplist whose head is `head` (to be filled
    /// by a search).
    fn new(head: *const Node) -> Splice {
        Splice {
            prev: [head; HEIGHT_MAX],
            next: [std::ptr::null(); HEIGHT_MAX],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};
    use std::collections::BTreeMap;

    struct Bytewise;
    impl KeyOrder for Bytewise {
        fn compare(a: &[u8], b: &[u8]) -> KeyOrdering {
            a.cmp(b)
        }
    }

    fn collect(list: &SkipList<Bytewise>) -> Vec<(Vec<u8>, Vec<u8>)> {
        let mut out = Vec::new();
        let mut node = list.first();
        while !node.is_null() {
            // SAFETY: published nodes of a live skiplist.
            unsafe { out.push((Node::key(node).to_vec(), Node::value(node).to_vec())) };
            // SAFETY: a node of `list`, which is borrowed.
            node = unsafe { SkipList::<Bytewise>::after(node) };
        }
        out
    }

    #[test]
    fn concurrent_inserts_and_replacements_match_a_model() {
        let seed: u64 = rand::thread_rng().gen();
        println!("skiplist test seed {seed}");
        let list = SkipList::<Bytewise>::new();
        let threads = 4u64;
        std::thread::scope(|scope| {
            for thread in 0..threads {
                let list = &list;
                scope.spawn(move || {
                    let mut rng = StdRng::seed_from_u64(seed ^ thread);
                    for i in 0..3000u64 {
                        // Disjoint keys per thread, plus a few shared keys written with one
                        // value by everyone (replacement must be idempotent).
                        if i % 100 == 0 {
                            list.insert(0, format!("shared{i:05}").as_bytes(), b"same");
                        } else {
                            let key = format!("{:05}-{thread}", rng.gen_range(0..20_000));
                            list.insert(1, key.as_bytes(), key.as_bytes());
                        }
                    }
                });
            }
        });
        let mut model = BTreeMap::new();
        for thread in 0..threads {
            let mut rng = StdRng::seed_from_u64(seed ^ thread);
            for i in 0..3000u64 {
                if i % 100 == 0 {
                    model.insert(format!("shared{i:05}").into_bytes(), b"same".to_vec());
                } else {
                    let key = format!("{:05}-{thread}", rng.gen_range(0..20_000));
                    model.insert(key.clone().into_bytes(), key.into_bytes());
                }
            }
        }
        let expected: Vec<_> = model.into_iter().collect();
        assert_eq!(collect(&list), expected, "seed {seed}");
        assert_eq!(list.len(), expected.len(), "seed {seed}");
        // Point searches in both directions.
        let mut rng = StdRng::seed_from_u64(seed);
        for _ in 0..2000 {
            let probe = format!("{:05}", rng.gen_range(0..20_100)).into_bytes();
            let at = expected.partition_point(|(k, _)| k.as_slice() < probe.as_slice());
            let found = list.seek(&probe);
            // SAFETY: published nodes.
            let got = (!found.is_null()).then(|| unsafe { Node::key(found).to_vec() });
            assert_eq!(got, expected.get(at).map(|e| e.0.clone()), "seed {seed}");
            let found = list.seek_before(&probe, false);
            // SAFETY: published nodes.
            let got = (!found.is_null()).then(|| unsafe { Node::key(found).to_vec() });
            let want = at.checked_sub(1).map(|i| expected[i].0.clone());
            assert_eq!(got, want, "seed {seed}");
        }
        let last = list.last();
        assert_eq!(
            // SAFETY: a published node.
            unsafe { Node::key(last) },
            expected.last().map(|e| e.0.as_slice()).unwrap_or_default()
        );
    }

    #[test]
    fn readers_during_one_writer_see_sorted_prefix_consistent_views() {
        use std::sync::atomic::AtomicBool;
        let seed: u64 = rand::thread_rng().gen();
        println!("skiplist reader/writer test seed {seed}");
        let mut rng = StdRng::seed_from_u64(seed);
        // Distinct keys in random order (lengths 0..=24, so empty and long keys mix); the
        // value of key `i` names `i`, and a key is re-inserted with an empty value later.
        let mut keys: Vec<Vec<u8>> = Vec::new();
        let mut index_of = std::collections::HashMap::new();
        while keys.len() < 6000 {
            let length = rng.gen_range(0..=24);
            let key: Vec<u8> = (0..length).map(|_| rng.gen_range(b'a'..=b'd')).collect();
            if !index_of.contains_key(&key) {
                index_of.insert(key.clone(), keys.len());
                keys.push(key);
            }
        }
        let value_of = |i: usize| format!("value{i}").into_bytes();
        let list = SkipList::<Bytewise>::new();
        // Number of inserts completed (release after each insert).
        let inserted = AtomicUsize::new(0);
        let done = AtomicBool::new(false);
        std::thread::scope(|scope| {
            for reader in 0..2u64 {
                let (list, keys, index_of, inserted, done) =
                    (&list, &keys, &index_of, &inserted, &done);
                scope.spawn(move || {
                    let mut rng = StdRng::seed_from_u64(seed ^ (reader + 1));
                    let mut scans = 0;
                    while !done.load(Ordering::Acquire) || scans < 3 {
                        scans += 1;
                        let before = inserted.load(Ordering::Acquire);
                        let mut seen = vec![false; keys.len()];
                        let mut previous: Option<&[u8]> = None;
                        let mut node = list.first();
                        while !node.is_null() {
                            // SAFETY: nodes of `list`, alive for the whole scope.
                            let (key, value) = unsafe { (Node::key(node), Node::value(node)) };
                            assert!(previous < Some(key), "seed {seed}: out of order");
                            previous = Some(key);
                            let i = index_of[key];
                            assert!(!seen[i], "seed {seed}: key {i} seen twice");
                            seen[i] = true;
                            assert!(value.is_empty() || value == value_of(i), "seed {seed}");
                            // SAFETY: as above.
                            node = unsafe { SkipList::<Bytewise>::after(node) };
                        }
                        let after = inserted.load(Ordering::Acquire);
                        for (i, seen) in seen.iter().enumerate() {
                            // Every insert completed before the scan is seen; nothing that
                            // was not started before it ended is.
                            assert!(
                                i >= before || *seen,
                                "seed {seed}: key {i} missing ({before} inserted before scan)"
                            );
                            assert!(
                                i <= after || !*seen,
                                "seed {seed}: key {i} seen ({after} inserted after scan)"
                            );
                        }
                        // Point searches for inserted keys find exactly them.
                        for _ in 0..50 {
                            if before == 0 {
                                break;
                            }
                            let i = rng.gen_range(0..before);
                            let found = list.seek(&keys[i]);
                            assert!(!found.is_null(), "seed {seed}");
                            // SAFETY: as above.
                            assert_eq!(unsafe { Node::key(found) }, keys[i], "seed {seed}");
                        }
                    }
                });
            }
            let (list, keys, inserted, done) = (&list, &keys, &inserted, &done);
            scope.spawn(move || {
                for (i, key) in keys.iter().enumerate() {
                    list.insert(0, key, &value_of(i));
                    inserted.store(i + 1, Ordering::Release);
                    if i % 64 == 0 {
                        // Let the readers overlap the writes even on a busy machine.
                        std::thread::yield_now();
                    }
                    if i % 7 == 3 {
                        // Replace an earlier key's value: readers see the old or the new.
                        list.insert(0, &keys[i / 2], b"");
                    }
                }
                done.store(true, Ordering::Release);
            });
        });
        let mut model = BTreeMap::new();
        for (i, key) in keys.iter().enumerate() {
            model.insert(key.clone(), value_of(i));
            if i % 7 == 3 {
                model.insert(keys[i / 2].clone(), Vec::new());
            }
        }
        let expected: Vec<_> = model.into_iter().collect();
        assert_eq!(collect(&list), expected, "seed {seed}");
        assert_eq!(list.len(), expected.len(), "seed {seed}");
    }

    /// Bytewise order that, when a search compares node key `c` with target `bb`, inserts a
    /// key between `bb`'s predecessor and `bb` first: a writer racing a reader's search,
    /// deterministically and on one thread.
    struct RacingOrder;

    std::thread_local! {
        static RACING_LIST: std::cell::Cell<*const SkipList<RacingOrder>> =
            const { std::cell::Cell::new(std::ptr::null()) };
        static RACING_INSERTS: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
    }

    impl KeyOrder for RacingOrder {
        fn compare(a: &[u8], b: &[u8]) -> KeyOrdering {
            let list = RACING_LIST.with(std::cell::Cell::get);
            if a == b"c" && b == b"bb" && !list.is_null() {
                let n = RACING_INSERTS.with(|c| c.replace(c.get() + 1));
                // SAFETY: the test sets the pointer to a skiplist it keeps alive while
                // searching; only shared access is needed (insert takes `&self`).
                unsafe { (*list).insert(0, format!("b{n:02}").as_bytes(), b"raced") };
            }
            a.cmp(b)
        }
    }

    #[test]
    fn seek_returns_the_successor_it_compared_even_if_a_node_is_linked_meanwhile() {
        let list = SkipList::<RacingOrder>::new();
        list.insert(0, b"a", b"");
        list.insert(0, b"c", b"");
        RACING_LIST.with(|cell| cell.set(&raw const list));
        let found = list.seek(b"bb");
        RACING_LIST.with(|cell| cell.set(std::ptr::null()));
        assert!(RACING_INSERTS.with(std::cell::Cell::get) > 0);
        // SAFETY: a node of `list`.
        let found_key = (!found.is_null()).then(|| unsafe { Node::key(found) });
        // The first node >= "bb" when the search passed it: "c". The keys linked during the
        // search ("b00", ...) sort before the target and must never be returned.
        assert_eq!(found_key, Some(b"c".as_slice()));
    }

    #[test]
    fn seek_never_returns_a_node_before_its_target_during_inserts() {
        use std::sync::atomic::AtomicBool;
        let list = SkipList::<Bytewise>::new();
        let done = AtomicBool::new(false);
        let keys = 30_000u32;
        std::thread::scope(|scope| {
            let (list, done) = (&list, &done);
            scope.spawn(move || {
                // Ascending keys: each new node is linked right after the last one, which is
                // the predecessor every reader's `seek(b"~")` stops at.
                for i in 0..keys {
                    list.insert(0, format!("k{i:06}").as_bytes(), b"v");
                }
                done.store(true, Ordering::Release);
            });
            scope.spawn(move || {
                let mut seeks = 0u64;
                while !done.load(Ordering::Acquire) {
                    seeks += 1;
                    let found = list.seek(b"~");
                    // SAFETY: a node of `list`, alive for the whole scope.
                    let found_key = (!found.is_null()).then(|| unsafe { Node::key(found) });
                    assert_eq!(found_key, None, "seek 'past the end' found a smaller key");
                    let target = format!("k{:06}", seeks % u64::from(keys));
                    let found = list.seek(target.as_bytes());
                    if !found.is_null() {
                        // SAFETY: as above.
                        let found_key = unsafe { Node::key(found) };
                        assert!(found_key >= target.as_bytes(), "{found_key:?} < {target}");
                    }
                }
            });
        });
    }

    #[test]
    fn group_inserts_from_several_threads_match_a_model() {
        let seed: u64 = rand::thread_rng().gen();
        println!("skiplist group test seed {seed}");
        let list = SkipList::<Bytewise>::new();
        let threads = 3u64;
        // Per thread: groups of 1..=GROUP_KEYS ascending keys (equal keys allowed: the later
        // one replaces the value), owned by the thread or shared (value "shared").
        let groups = |thread: u64| -> Vec<Vec<(Vec<u8>, Vec<u8>)>> {
            let mut rng = StdRng::seed_from_u64(seed ^ thread);
            (0..400u64)
                .map(|group| {
                    let mut keys: Vec<u64> = (0..rng.gen_range(1..=GROUP_KEYS))
                        .map(|_| rng.gen_range(0..3000))
                        .collect();
                    keys.sort_unstable();
                    keys.into_iter()
                        .enumerate()
                        .map(|(i, k)| {
                            if k % 7 == 0 {
                                (format!("{k:05}-s").into_bytes(), b"shared".to_vec())
                            } else {
                                let key = format!("{k:05}-{thread}").into_bytes();
                                (key, format!("{thread}-{group}-{i}").into_bytes())
                            }
                        })
                        .collect()
                })
                .collect()
        };
        let all: Vec<_> = (0..threads).map(groups).collect();
        std::thread::scope(|scope| {
            for groups in &all {
                let list = &list;
                scope.spawn(move || {
                    for group in groups {
                        let entries: Vec<(u32, &[u8], &[u8])> = group
                            .iter()
                            .map(|(key, value)| (1, key.as_slice(), value.as_slice()))
                            .collect();
                        list.insert_group(&entries);
                    }
                });
            }
        });
        let mut model = BTreeMap::new();
        for groups in &all {
            for (key, value) in groups.iter().flatten() {
                model.insert(key.clone(), value.clone());
            }
        }
        let expected: Vec<_> = model.into_iter().collect();
        assert_eq!(collect(&list), expected, "seed {seed}");
        assert_eq!(list.len(), expected.len(), "seed {seed}");
    }

    /// Bytewise order that, when a search compares node key `c` with target `bb` or `bd`,
    /// first links a key before the target (`b00`..`b03`, at most four): a writer racing a
    /// group's searches and its linking, deterministically and on one thread.
    struct GroupRacingOrder;

    std::thread_local! {
        static GROUP_RACING_LIST: std::cell::Cell<*const SkipList<GroupRacingOrder>> =
            const { std::cell::Cell::new(std::ptr::null()) };
        static GROUP_RACING_INSERTS: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
    }

    impl KeyOrder for GroupRacingOrder {
        fn compare(a: &[u8], b: &[u8]) -> KeyOrdering {
            let list = GROUP_RACING_LIST.with(std::cell::Cell::get);
            if a == b"c" && (b == b"bb" || b == b"bd") && !list.is_null() {
                let n = GROUP_RACING_INSERTS.with(|c| c.replace(c.get() + 1));
                if n < 4 {
                    // SAFETY: the test sets the pointer to a skiplist it keeps alive while
                    // inserting; only shared access is needed (insert takes `&self`).
                    unsafe { (*list).insert(0, format!("b{n:02}").as_bytes(), b"raced") };
                }
            }
            a.cmp(b)
        }
    }

    #[test]
    fn group_insert_links_in_order_when_nodes_are_linked_during_its_searches() {
        let list = SkipList::<GroupRacingOrder>::new();
        // Enough keys that some nodes are tall, so upper-level brackets go stale too.
        for i in 0..200 {
            list.insert(0, format!("a{i:03}").as_bytes(), b"");
        }
        list.insert(0, b"c", b"");
        GROUP_RACING_LIST.with(|cell| cell.set(&raw const list));
        list.insert_group(&[(0, b"bb", b"1"), (0, b"bd", b"2"), (0, b"bd", b"3")]);
        GROUP_RACING_LIST.with(|cell| cell.set(std::ptr::null()));
        // At least one comparison per search, and the stale brackets' re-searches.
        assert!(GROUP_RACING_INSERTS.with(std::cell::Cell::get) >= 4);
        // Every level is strictly ascending and level 0 holds exactly the expected keys.
        for level in 0..HEIGHT_MAX {
            let mut previous: Option<&[u8]> = None;
            // SAFETY: the head has every level; nodes of `list`, which is alive.
            let mut node = unsafe { SkipList::<GroupRacingOrder>::next(list.head(), level) };
            while !node.is_null() {
                // SAFETY: as above.
                let key = unsafe { Node::key(node) };
                assert!(
                    previous < Some(key),
                    "level {level}: {previous:?} !< {key:?}"
                );
                previous = Some(key);
                // SAFETY: reached at `level`.
                node = unsafe { SkipList::<GroupRacingOrder>::next(node, level) };
            }
        }
        let mut got = Vec::new();
        let mut node = list.first();
        while !node.is_null() {
            // SAFETY: nodes of `list`, which is alive.
            unsafe { got.push((Node::key(node).to_vec(), Node::value(node).to_vec())) };
            // SAFETY: as above.
            node = unsafe { SkipList::<GroupRacingOrder>::after(node) };
        }
        let mut want: Vec<(Vec<u8>, Vec<u8>)> = (0..200)
            .map(|i| (format!("a{i:03}").into_bytes(), Vec::new()))
            .collect();
        for n in 0..4 {
            want.push((format!("b{n:02}").into_bytes(), b"raced".to_vec()));
        }
        want.push((b"bb".to_vec(), b"1".to_vec()));
        want.push((b"bd".to_vec(), b"3".to_vec()));
        want.push((b"c".to_vec(), Vec::new()));
        assert_eq!(got, want);
        assert_eq!(list.len(), want.len());
    }

    #[test]
    fn node_sizes_do_not_wrap() {
        assert_eq!(node_bytes(1, 0), Some(NODE_HEADER_BYTES + LINK_BYTES));
        assert_eq!(
            node_bytes(HEIGHT_MAX, 5),
            Some(NODE_HEADER_BYTES + HEIGHT_MAX * LINK_BYTES + 5)
        );
        assert_eq!(node_bytes(HEIGHT_MAX, usize::MAX - 8), None);
    }

    #[test]
    fn large_and_empty_values_round_trip() {
        let list = SkipList::<Bytewise>::new();
        let big = vec![7u8; 3 << 20];
        list.insert(0, b"b", &big);
        list.insert(0, b"a", b"");
        list.insert(0, b"c", b"x");
        list.insert(0, b"c", b"y");
        let entries = collect(&list);
        assert_eq!(entries.len(), 3);
        assert_eq!(entries[0], (b"a".to_vec(), Vec::new()));
        assert_eq!(entries[1].1.len(), big.len());
        assert_eq!(entries[2], (b"c".to_vec(), b"y".to_vec()));
        assert!(list.arena_bytes() >= big.len());
    }
}
