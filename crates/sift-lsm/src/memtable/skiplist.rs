//! An insert-only concurrent skiplist whose nodes live in the memtable's arena (the design of
//! LevelDB's and RocksDB's memtables): writers link nodes bottom-up with compare-and-swap, so
//! inserts from several threads need no lock; readers never lock. Nodes are never removed or
//! freed while the skiplist lives, so a node pointer stays valid as long as the skiplist does.
//!
//! Node layout (8-byte aligned, in the arena's node region):
//! `value: AtomicPtr | key_bytes: u32 | height: u32 | next: [AtomicPtr<Node>; height] | key`.
//! The value is a separate arena block `[length: usize][bytes]`, so nodes stay small whatever
//! the value size, and re-adding an identical key replaces the value with one atomic store.

use super::arena::{Area, Arena};
use std::cmp::Ordering as KeyOrdering;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicPtr, AtomicU64, AtomicUsize, Ordering};

/// Levels at most; with a branching factor of 4, enough for billions of entries.
const HEIGHT_MAX: usize = 16;

/// Searches `SkipList::insert_group` runs interleaved: enough to overlap most of their cache
/// misses, few enough for the line fill buffers of one core.
pub(super) const GROUP_KEYS: usize = 8;

/// Asks the CPU to bring `node`'s first bytes (header, low links, key start) into the cache.
#[inline]
fn prefetch(node: *const Node) {
    #[cfg(target_arch = "x86_64")]
    if !node.is_null() {
        // SAFETY: a prefetch is a hint: it never faults and has no effect on memory.
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

impl Node {
    /// The link at `level` (`level < height`).
    ///
    /// # Safety
    /// `node` must point to a node initialised by `SkipList::allocate_node` whose skiplist is
    /// alive, and `level` must be below its height.
    unsafe fn link<'a>(node: *const Node, level: usize) -> &'a AtomicPtr<Node> {
        // SAFETY: the tower starts right after the header (which is a multiple of 8 bytes, so
        // the links are aligned) and has `height` links (caller).
        unsafe { &*node.add(1).cast::<AtomicPtr<Node>>().add(level) }
    }

    /// The node's key.
    ///
    /// # Safety
    /// As for `link`.
    pub(super) unsafe fn key<'a>(node: *const Node) -> &'a [u8] {
        // SAFETY: the key follows the tower and is `key_bytes` long; it is never written after
        // the node is published.
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
        // SAFETY: the value pointer always points to a published `[length][bytes]` block that
        // lives as long as the arena (or to `EMPTY_VALUE`).
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
    pub(super) fn new() -> SkipList<O> {
        let arena = Arena::new();
        let head = Self::allocate_node(&arena, 0, HEIGHT_MAX, &[], std::ptr::null_mut());
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
        let bytes = NODE_HEADER_BYTES + height * LINK_BYTES + key.len();
        let node = arena.allocate(Area::Nodes(class), bytes).cast::<Node>();
        // SAFETY: the block is `bytes` long, 8-byte aligned and ours alone until published.
        unsafe {
            node.as_ptr().write(Node {
                value: AtomicPtr::new(value),
                key_bytes: key.len() as u32,
                height: height as u32,
            });
            for level in 0..height {
                Node::link(node.as_ptr(), level).store(std::ptr::null_mut(), Ordering::Relaxed);
            }
            let key_start = node
                .as_ptr()
                .add(1)
                .cast::<AtomicPtr<Node>>()
                .add(height)
                .cast::<u8>();
            std::ptr::copy_nonoverlapping(key.as_ptr(), key_start, key.len());
        }
        node
    }

    /// Copies `value` into a value block.
    fn allocate_value(&self, value: &[u8]) -> *mut u8 {
        if value.is_empty() {
            return std::ptr::addr_of!(EMPTY_VALUE).cast_mut().cast::<u8>();
        }
        let block = self
            .arena
            .allocate(Area::Values, VALUE_HEADER_BYTES + value.len());
        // SAFETY: the block is `VALUE_HEADER_BYTES + value.len()` long, aligned, ours.
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
    fn next(node: *const Node, level: usize) -> *const Node {
        // SAFETY: callers pass the head or a published node of this skiplist, and `level`
        // below its height (searches only descend through levels a node has).
        unsafe { Node::link(node, level).load(Ordering::Acquire) }
    }

    /// Whether `node` (not null) sorts before `key` (or, with `or_equal`, not after it).
    fn before(node: *const Node, key: &[u8], or_equal: bool) -> bool {
        // SAFETY: a published node of this skiplist.
        let node_key = unsafe { Node::key(node) };
        match O::compare(node_key, key) {
            KeyOrdering::Less => true,
            KeyOrdering::Equal => or_equal,
            KeyOrdering::Greater => false,
        }
    }

    /// The first node whose key is `>= key`, or null.
    pub(super) fn seek(&self, key: &[u8]) -> *const Node {
        let last = self.last_before(key, false);
        Self::next(last, 0)
    }

    /// The last node whose key is `< key` (or `<= key` with `or_equal`), or null.
    pub(super) fn seek_before(&self, key: &[u8], or_equal: bool) -> *const Node {
        let node = self.last_before(key, or_equal);
        self.non_head(node)
    }

    /// The first node, or null.
    pub(super) fn first(&self) -> *const Node {
        Self::next(self.head(), 0)
    }

    /// The last node, or null.
    pub(super) fn last(&self) -> *const Node {
        let mut node = self.head();
        for level in (0..self.height.load(Ordering::Acquire)).rev() {
            loop {
                let next = Self::next(node, level);
                if next.is_null() {
                    break;
                }
                node = next;
            }
        }
        self.non_head(node)
    }

    /// The node after `node` (a published node), or null.
    pub(super) fn after(node: *const Node) -> *const Node {
        Self::next(node, 0)
    }

    /// The node before `node` (a published node), or null.
    pub(super) fn before_node(&self, node: *const Node) -> *const Node {
        // SAFETY: a published node of this skiplist.
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

    /// The last node (or the head) sorting before `key` (or not after it with `or_equal`).
    fn last_before(&self, key: &[u8], or_equal: bool) -> *const Node {
        let mut node = self.head();
        for level in (0..self.height.load(Ordering::Acquire)).rev() {
            loop {
                let next = Self::next(node, level);
                if next.is_null() || !Self::before(next, key, or_equal) {
                    break;
                }
                node = next;
            }
        }
        node
    }

    /// From `start` (the head or a node before `key`) at `level`: the last node before `key`
    /// and its successor.
    fn splice_at(key: &[u8], start: *const Node, level: usize) -> (*const Node, *const Node) {
        let mut node = start;
        loop {
            let next = Self::next(node, level);
            if next.is_null() || !Self::before(next, key, false) {
                return (node, next);
            }
            node = next;
        }
    }

    /// Whether `node` (may be null) has exactly `key`.
    fn has_key(node: *const Node, key: &[u8]) -> bool {
        // SAFETY: a published node of this skiplist.
        !node.is_null() && O::compare(unsafe { Node::key(node) }, key).is_eq()
    }

    /// Inserts `key` with `value`; if the key is present, replaces its value. Thread-safe.
    /// Nodes of the same `class` are allocated together.
    pub(super) fn insert(&self, class: u32, key: &[u8], value: &[u8]) {
        self.insert_with_splice(class, key, value, &mut Splice::new());
    }

    /// Like [`SkipList::insert`], but the search starts from `splice`, where the previous
    /// insert through it linked its node: for keys inserted in ascending order (a sorted
    /// batch) each search climbs only as high as the gap to the previous key, and the nodes it
    /// visits are mostly those the previous search brought into the cache. Any key order is
    /// correct; out-of-order keys just search from higher up.
    pub(super) fn insert_with_splice(
        &self,
        class: u32,
        key: &[u8],
        value: &[u8],
        splice: &mut Splice,
    ) {
        let value = self.allocate_value(value);
        let height = self.random_height();
        let top = self.raise_height(height);
        self.find_splice(key, top, splice);
        self.link(class, key, value, height, splice);
    }

    /// Makes the skiplist at least `height` tall; returns its height.
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

    /// Inserts up to [`GROUP_KEYS`] keys, ascending, whose searches run interleaved: each step
    /// of one search prefetches the node it will compare next and hands over to the next
    /// search, so the cache misses of the group's searches overlap instead of following one
    /// another (a search through a large memtable is a chain of dependent cache misses). The
    /// keys are then linked in order; a bracket made stale by a key linked before is fixed by
    /// the linking loop's compare-and-swap. Same result as `insert` of each entry in order.
    pub(super) fn insert_group(&self, entries: &[(u32, &[u8], &[u8])]) {
        let count = entries.len().min(GROUP_KEYS);
        let mut values = [std::ptr::null_mut::<u8>(); GROUP_KEYS];
        let mut heights = [0usize; GROUP_KEYS];
        let mut top = 0;
        for (i, (_, _, value)) in entries.iter().take(count).enumerate() {
            values[i] = self.allocate_value(value);
            heights[i] = self.random_height();
            top = self.raise_height(heights[i]);
        }
        let top = top.max(self.height.load(Ordering::Acquire));
        let mut splices: [Splice; GROUP_KEYS] = std::array::from_fn(|_| Splice::new());
        // Per search: the node it stands on, its level, and that node's successor there
        // (prefetched, compared at the search's next turn).
        let mut nodes = [self.head(); GROUP_KEYS];
        let mut levels = [top - 1; GROUP_KEYS];
        let mut nexts = [std::ptr::null::<Node>(); GROUP_KEYS];
        for next in nexts.iter_mut().take(count) {
            *next = Self::next(self.head(), top - 1);
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
                if !next.is_null() && Self::before(next, key, false) {
                    nodes[i] = next;
                } else {
                    splices[i].prev[levels[i]] = nodes[i];
                    splices[i].next[levels[i]] = next;
                    if levels[i] == 0 {
                        splices[i].height = top;
                        done[i] = true;
                        searching -= 1;
                        continue;
                    }
                    levels[i] -= 1;
                }
                nexts[i] = Self::next(nodes[i], levels[i]);
                prefetch(nexts[i]);
            }
        }
        for (i, (class, key, _)) in entries.iter().take(count).enumerate() {
            self.link(*class, key, values[i], heights[i], &mut splices[i]);
        }
    }

    /// Links a new node for `key` (value block `value`, `height` levels) after the nodes
    /// `splice` brackets it with (below its `height`), or replaces the value of a node with
    /// exactly `key`; leaves `splice` at the new node.
    fn link(&self, class: u32, key: &[u8], value: *mut u8, height: usize, splice: &mut Splice) {
        let (prev, next) = (&mut splice.prev, &mut splice.next);
        if Self::has_key(next[0], key) {
            // SAFETY: a published node; value blocks are never freed before the arena.
            unsafe { (*next[0]).value.store(value, Ordering::Release) };
            return;
        }
        let new = Self::allocate_node(&self.arena, class, height, key, value).as_ptr();
        for level in 0..height {
            loop {
                // SAFETY: `new` is ours and `level < height`; it is not yet reachable at
                // `level`, so nobody else writes this link.
                unsafe { Node::link(new, level).store(next[level].cast_mut(), Ordering::Relaxed) };
                // SAFETY: `prev[level]` is the head or a node reached at `level`, so its tower
                // reaches `level`.
                let link = unsafe { Node::link(prev[level], level) };
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
                // Another writer linked a node here first: find the splice again from `prev`,
                // which still sorts before `key` (nodes are never removed).
                let (before, after) = Self::splice_at(key, prev[level], level);
                if level == 0 && Self::has_key(after, key) {
                    // The same key was inserted meanwhile: replace its value; `new` was never
                    // published and stays unused in the arena. The splice still brackets
                    // `key` at every level it covers.
                    // SAFETY: a published node.
                    unsafe { (*after).value.store(value, Ordering::Release) };
                    return;
                }
                prev[level] = before;
                next[level] = after;
            }
        }
        // `new` now follows `prev[level]` at each of its levels.
        for slot in prev.iter_mut().take(height) {
            *slot = new;
        }
        self.entries.fetch_add(1, Ordering::Relaxed);
    }

    /// Makes `splice` bracket `key` at every level below `top`: `prev[level]` sorts before
    /// `key`, and `next[level]` (its successor at `level` when found) is null or does not sort
    /// before it. Levels whose remembered bracket still holds `key` are kept (a stale `next` is
    /// fixed by the linking loop's compare-and-swap); the levels below the lowest such level
    /// are searched again, starting from it.
    fn find_splice(&self, key: &[u8], top: usize, splice: &mut Splice) {
        let valid = splice.height.min(top);
        // The lowest remembered level whose bracket holds `key` (`top` if none: search all).
        let mut from = top;
        if valid == top {
            for level in 0..valid {
                let prev = splice.prev[level];
                let next = splice.next[level];
                // Not tight (another writer linked a node in between): look higher, as
                // RocksDB's splice does; a wide gap would cost a long walk.
                if !std::ptr::eq(Self::next(prev, level), next) {
                    continue;
                }
                let after_prev = std::ptr::eq(prev, self.head()) || Self::before(prev, key, false);
                let before_next = next.is_null() || !Self::before(next, key, false);
                if after_prev && before_next {
                    from = level;
                    break;
                }
            }
        }
        let mut node = if from < top {
            splice.prev[from]
        } else {
            self.head()
        };
        for level in (0..from).rev() {
            let (before, after) = Self::splice_at(key, node, level);
            splice.prev[level] = before;
            splice.next[level] = after;
            node = before;
        }
        if from == top {
            // Levels at and above `top` were not searched: only the head reaches them.
            for level in top..HEIGHT_MAX {
                splice.prev[level] = self.head();
                splice.next[level] = std::ptr::null();
            }
        }
        splice.height = top;
    }
}

/// A remembered insert position: the last node before it and that node's successor at each
/// level (see [`SkipList::insert_with_splice`]). Valid only for the skiplist it was used with.
pub(super) struct Splice {
    prev: [*const Node; HEIGHT_MAX],
    next: [*const Node; HEIGHT_MAX],
    /// Levels below this hold a bracket found by a search; 0 in a new splice.
    height: usize,
}

impl Splice {
    pub(super) fn new() -> Splice {
        Splice {
            prev: [std::ptr::null(); HEIGHT_MAX],
            next: [std::ptr::null(); HEIGHT_MAX],
            height: 0,
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
            node = SkipList::<Bytewise>::after(node);
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
            let got = (!found.is_null()).then(|| unsafe { Node::key(found).to_vec() });
            let want = at.checked_sub(1).map(|i| expected[i].0.clone());
            assert_eq!(got, want, "seed {seed}");
        }
        let last = list.last();
        // SAFETY: a published node.
        assert_eq!(
            unsafe { Node::key(last) },
            expected.last().map(|e| e.0.as_slice()).unwrap_or_default()
        );
    }

    #[test]
    fn splice_inserts_in_any_order_from_several_threads_match_a_model() {
        let seed: u64 = rand::thread_rng().gen();
        println!("skiplist splice test seed {seed}");
        let list = SkipList::<Bytewise>::new();
        let threads = 3u64;
        // Each thread inserts runs of keys through one reused splice: ascending runs (the case
        // the splice is for), descending runs and random keys (out of order for the splice),
        // and re-inserts of keys already present (value replaced).
        let runs = |thread: u64| -> Vec<Vec<(Vec<u8>, Vec<u8>)>> {
            let mut rng = StdRng::seed_from_u64(seed ^ thread);
            let mut runs = Vec::new();
            for run in 0..60u64 {
                let length = rng.gen_range(1..80);
                let mut keys: Vec<u64> = (0..length).map(|_| rng.gen_range(0..5000)).collect();
                match run % 3 {
                    0 => keys.sort_unstable(),
                    1 => keys.sort_unstable_by(|a, b| b.cmp(a)),
                    _ => {}
                }
                runs.push(
                    keys.into_iter()
                        .map(|k| {
                            // Every seventh key is shared by all threads, the rest are owned.
                            if k % 7 == 0 {
                                (format!("{k:05}-s").into_bytes(), b"shared".to_vec())
                            } else {
                                let key = format!("{k:05}-{thread}").into_bytes();
                                (key, format!("{thread}-{run}").into_bytes())
                            }
                        })
                        .collect(),
                );
            }
            runs
        };
        let all: Vec<_> = (0..threads).map(runs).collect();
        std::thread::scope(|scope| {
            for runs in &all {
                let list = &list;
                scope.spawn(move || {
                    for run in runs {
                        let mut splice = Splice::new();
                        for (key, value) in run {
                            list.insert_with_splice(1, key, value, &mut splice);
                        }
                    }
                });
            }
        });
        let mut model = BTreeMap::new();
        // An owned key is written only by its owner, in order; shared keys always get
        // "shared" (replacement must be idempotent).
        for runs in &all {
            for (key, value) in runs.iter().flatten() {
                model.insert(key.clone(), value.clone());
            }
        }
        let expected: Vec<_> = model.into_iter().collect();
        assert_eq!(collect(&list), expected, "seed {seed}");
        assert_eq!(list.len(), expected.len(), "seed {seed}");
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
