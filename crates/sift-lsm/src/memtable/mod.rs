//! The memtable: a concurrent skiplist of internal keys of all trees.
//!
//! One memtable holds the entries of every tree written since its WAL file was started. Each
//! skiplist key is `[tree id, big-endian u32][internal key]`, ordered by tree id, then by
//! `key::compare_internal_keys`. Nodes and values live in an arena dropped with the memtable,
//! whose chunks then go to the database's chunk pool for the next memtables (`arena.rs`,
//! `chunk_pool.rs`, `skiplist.rs`). Writers insert concurrently (compare-and-swap linking);
//! readers never lock.

mod arena;
mod chunk_pool;
mod skiplist;

pub use chunk_pool::ChunkPool;

use crate::iterator::InternalIterator;
use crate::key::{
    append_internal_key, make_seek_key, parse_internal_key, SeqNo, TreeId, ValueKind, SEQ_MAX,
};
use crate::Result;
use skiplist::{KeyOrder, Node, SkipList};
use std::cmp::Ordering;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering as AtomicOrdering};
use std::sync::Arc;

/// Bytes of the tree-id prefix of every skiplist key.
const TREE_PREFIX_BYTES: usize = 4;

/// Estimated bytes an entry takes beyond its key and value bytes (node header, average tower,
/// value header, arena slack). Counted the same as when each entry was a heap allocation, so
/// memtables fill (and flush) at the same points.
const ENTRY_OVERHEAD_BYTES: usize = 64;

/// The order of skiplist keys `[tree id][user key][trailer]`: the big-endian tree id is fixed
/// width, so `[tree id][user key]` compares as one byte string (tree order, then user-key
/// order, in a single memcmp); then the trailer, descending (newest first). Same order as
/// `compare_internal_keys` per tree.
struct EncodedKeyOrder;

impl KeyOrder for EncodedKeyOrder {
    #[inline]
    fn compare(a: &[u8], b: &[u8]) -> Ordering {
        let (a_prefix, a_trailer) = split_trailer(a);
        let (b_prefix, b_trailer) = split_trailer(b);
        a_prefix
            .cmp(b_prefix)
            .then_with(|| b_trailer.cmp(&a_trailer))
    }
}

/// Splits `[tree id][user key][trailer]` into the prefix and the trailer value.
#[inline]
fn split_trailer(bytes: &[u8]) -> (&[u8], u64) {
    let split = bytes.len().saturating_sub(crate::key::TRAILER_BYTES);
    let (prefix, trailer) = bytes.split_at(split);
    let trailer = trailer.try_into().map_or(0, u64::from_le_bytes);
    (prefix, trailer)
}

fn tree_of(bytes: &[u8]) -> TreeId {
    let mut prefix = [0u8; TREE_PREFIX_BYTES];
    let n = bytes.len().min(TREE_PREFIX_BYTES);
    prefix[..n].copy_from_slice(&bytes[..n]);
    TreeId::from_be_bytes(prefix)
}

/// Fills `buffer` with `[tree][internal key]`.
///
/// A target shorter than a trailer is not an internal key; `compare_internal_keys` orders it
/// as an empty user key with trailer 0, so it is encoded as exactly that. Appended as is, its
/// bytes would be split as if the tree id were part of a trailer, and seeks would land
/// outside the tree.
fn encode_lookup_key(buffer: &mut Vec<u8>, tree: TreeId, internal_key: &[u8]) {
    buffer.clear();
    buffer.extend_from_slice(&tree.to_be_bytes());
    if internal_key.len() < crate::key::TRAILER_BYTES {
        buffer.extend_from_slice(&[0; crate::key::TRAILER_BYTES]);
    } else {
        buffer.extend_from_slice(internal_key);
    }
}

/// The smallest possible skiplist key of `tree` (user keys may be empty).
fn encode_tree_start(buffer: &mut Vec<u8>, tree: TreeId) {
    encode_lookup_key(buffer, tree, &make_seek_key(b"", SEQ_MAX));
}

/// The newest version of a user key visible at some sequence number.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemtableEntry {
    pub seq: SeqNo,
    pub kind: ValueKind,
    pub value: Vec<u8>,
}

/// A concurrent in-memory sorted buffer of recent writes of all trees.
pub struct Memtable {
    list: SkipList<EncodedKeyOrder>,
    wal_number: u64,
    approximate_bytes: AtomicUsize,
    /// The first sequence number that may be written into this memtable (`SeqNo::MAX`: not
    /// known, so it takes no unlogged inserts). Fixed at creation.
    sequence_floor: SeqNo,
    /// The last sequence number written into it: `SeqNo::MAX` while it is the active memtable,
    /// set (under the commit lock) when it is frozen.
    sequence_ceiling: AtomicU64,
    /// Unlogged inserts (`Db::insert_unlogged_at_sequence`) running now; see
    /// [`Memtable::begin_unlogged_insert`].
    unlogged_inserts_running: AtomicUsize,
    /// Set by the flush before it reads the memtable: no unlogged insert may start after.
    sealed: AtomicBool,
}

/// How a flush waits for the unlogged inserts still running into the memtable it sealed:
/// spins this many rounds (they take microseconds), then sleeps between checks (an inserting
/// thread may have been preempted).
const SEAL_SPIN_ROUNDS: u32 = 256;
const SEAL_SLEEP: std::time::Duration = std::time::Duration::from_micros(50);

impl std::fmt::Debug for Memtable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Memtable")
            .field("wal_number", &self.wal_number)
            .field("entries", &self.len())
            .field("approximate_bytes", &self.approximate_bytes())
            .field("arena_bytes", &self.list.arena_bytes())
            .finish()
    }
}

/// A published node's skiplist key.
///
/// # Safety
/// `node` is a non-null node returned by a search of a memtable's skiplist, and that memtable
/// outlives `'a` (it is borrowed, or kept alive by an `Arc`, for at least `'a`).
unsafe fn node_key<'a>(node: *const Node) -> &'a [u8] {
    // SAFETY: caller.
    unsafe { Node::key(node) }
}

/// A published node's value.
///
/// # Safety
/// As for `node_key`.
unsafe fn node_value<'a>(node: *const Node) -> &'a [u8] {
    // SAFETY: caller.
    unsafe { Node::value(node) }
}

impl Memtable {
    /// A memtable for the records of WAL file `wal_number`.
    /// Its sequence range is not known, so it takes no unlogged inserts (memtables of the
    /// logs replayed at open, tests); see [`Memtable::with_sequence_floor`].
    pub fn new(wal_number: u64) -> Self {
        Memtable::with_sequence_floor(wal_number, SeqNo::MAX)
    }

    /// An active memtable for the records of WAL file `wal_number` whose writes get sequence
    /// numbers from `sequence_floor` on (the highest number handed out so far, plus one).
    pub fn with_sequence_floor(wal_number: u64, sequence_floor: SeqNo) -> Self {
        Memtable::with_chunk_pool(wal_number, sequence_floor, None)
    }

    /// As [`Memtable::with_sequence_floor`], with arena chunks taken from `pool` when it holds
    /// one of the size needed, and given back to it when the memtable is dropped.
    pub fn with_chunk_pool(
        wal_number: u64,
        sequence_floor: SeqNo,
        pool: Option<Arc<ChunkPool>>,
    ) -> Self {
        Memtable {
            list: SkipList::with_pool(pool),
            wal_number,
            approximate_bytes: AtomicUsize::new(0),
            sequence_floor,
            sequence_ceiling: AtomicU64::new(SeqNo::MAX),
            unlogged_inserts_running: AtomicUsize::new(0),
            sealed: AtomicBool::new(false),
        }
    }

    /// The first sequence number its writes may have (`SeqNo::MAX` if not known).
    pub fn sequence_floor(&self) -> SeqNo {
        self.sequence_floor
    }

    /// The last sequence number its writes may have: `SeqNo::MAX` while it is active.
    pub fn sequence_ceiling(&self) -> SeqNo {
        self.sequence_ceiling.load(AtomicOrdering::Acquire)
    }

    /// Records that `last` is the last sequence number written into it: it was frozen.
    /// Called by the write leader under the commit lock, so no write gets a number in between.
    pub(crate) fn freeze_at(&self, last: SeqNo) {
        self.sequence_ceiling.store(last, AtomicOrdering::Release);
    }

    /// Whether `seq` lies in its sequence range.
    pub fn holds_sequence(&self, seq: SeqNo) -> bool {
        self.sequence_floor <= seq && seq <= self.sequence_ceiling()
    }

    /// Registers an unlogged insert about to start. `false` (nothing registered) if a flush
    /// has sealed the memtable: the insert must not go in. Pair a `true` with
    /// [`Memtable::end_unlogged_insert`] once the entries are in.
    ///
    /// Memory ordering (with [`Memtable::seal_for_flush`]): the inserter increments
    /// `unlogged_inserts_running`, then reads `sealed`; the flush stores `sealed`, then reads
    /// the counter. All four accesses are `SeqCst`, so they fall in one total order, and in it
    /// either the increment comes before the flush's read of the counter (the flush sees it
    /// and waits) or the store of `sealed` comes before the inserter's read of it (the insert
    /// backs out). Weaker orderings would allow both to read the old values (each store still
    /// in its core's store buffer) and the flush to iterate while the insert links nodes.
    pub(crate) fn begin_unlogged_insert(&self) -> bool {
        self.unlogged_inserts_running
            .fetch_add(1, AtomicOrdering::SeqCst);
        if self.sealed.load(AtomicOrdering::SeqCst) {
            self.end_unlogged_insert();
            return false;
        }
        true
    }

    /// Ends an insert registered by [`Memtable::begin_unlogged_insert`]. Release: a flush
    /// that reads the decremented count (acquire) sees every node the insert linked.
    pub(crate) fn end_unlogged_insert(&self) {
        self.unlogged_inserts_running
            .fetch_sub(1, AtomicOrdering::Release);
    }

    /// Whether a flush has sealed it.
    #[cfg(test)]
    pub fn is_sealed(&self) -> bool {
        self.sealed.load(AtomicOrdering::Acquire)
    }

    /// Stops unlogged inserts into it and waits for those already running to end, so a flush
    /// reads every entry it will ever hold (see [`Memtable::begin_unlogged_insert`] for the
    /// memory ordering). Called by the flush before it reads the memtable; idempotent.
    pub(crate) fn seal_for_flush(&self) {
        self.sealed.store(true, AtomicOrdering::SeqCst);
        let mut rounds = 0u32;
        while self.unlogged_inserts_running.load(AtomicOrdering::SeqCst) > 0 {
            rounds = rounds.saturating_add(1);
            if rounds < SEAL_SPIN_ROUNDS {
                std::hint::spin_loop();
            } else {
                std::thread::sleep(SEAL_SLEEP);
            }
        }
    }

    /// Unlogged inserts running now (for tests).
    #[cfg(test)]
    pub(crate) fn unlogged_inserts_running(&self) -> usize {
        self.unlogged_inserts_running.load(AtomicOrdering::SeqCst)
    }

    /// The WAL file whose records this memtable holds.
    pub fn wal_number(&self) -> u64 {
        self.wal_number
    }

    /// Inserts one entry. Thread-safe. Sequence numbers are unique, so an entry never replaces
    /// another (re-adding the identical `(tree, key, seq, kind)` replaces the value).
    pub fn add(&self, tree: TreeId, seq: SeqNo, kind: ValueKind, user_key: &[u8], value: &[u8]) {
        let mut stack = [0u8; 256];
        let key_bytes = TREE_PREFIX_BYTES + user_key.len() + crate::key::TRAILER_BYTES;
        let mut heap = Vec::new();
        let key: &[u8] = if key_bytes <= stack.len() {
            stack[..TREE_PREFIX_BYTES].copy_from_slice(&tree.to_be_bytes());
            stack[TREE_PREFIX_BYTES..TREE_PREFIX_BYTES + user_key.len()].copy_from_slice(user_key);
            let trailer = crate::key::pack_trailer(seq, kind as u8).to_le_bytes();
            stack[TREE_PREFIX_BYTES + user_key.len()..key_bytes].copy_from_slice(&trailer);
            &stack[..key_bytes]
        } else {
            heap.reserve_exact(key_bytes);
            heap.extend_from_slice(&tree.to_be_bytes());
            append_internal_key(&mut heap, user_key, seq, kind);
            &heap
        };
        self.list.insert(tree, key, value);
        self.approximate_bytes.fetch_add(
            key_bytes + value.len() + ENTRY_OVERHEAD_BYTES,
            AtomicOrdering::Relaxed,
        );
    }

    /// Inserts many entries `(tree, seq, kind, user key, value)` (a write batch's), with the
    /// same result as [`Memtable::add`] for each. A search through a large memtable is a chain
    /// of dependent cache misses (the Vinyl benchmark's deferred writes spent ~65% of their CPU
    /// time waiting on them); here the entries are sorted and inserted in groups whose searches
    /// run interleaved with prefetches, so the misses of a group overlap
    /// (`SkipList::insert_group`).
    pub fn add_batch<'a>(
        &self,
        entries: impl IntoIterator<Item = (TreeId, SeqNo, ValueKind, &'a [u8], &'a [u8])>,
    ) {
        let entries = entries.into_iter();
        let mut keys: Vec<u8> = Vec::new();
        // (key start, key end in `keys`, tree, value)
        let mut items: Vec<(usize, usize, TreeId, &'a [u8])> =
            Vec::with_capacity(entries.size_hint().0);
        let mut bytes = 0;
        for (tree, seq, kind, user_key, value) in entries {
            let start = keys.len();
            keys.extend_from_slice(&tree.to_be_bytes());
            append_internal_key(&mut keys, user_key, seq, kind);
            items.push((start, keys.len(), tree, value));
            bytes += keys.len() - start + value.len() + ENTRY_OVERHEAD_BYTES;
        }
        // Stable, so identical keys (re-adds) keep their order and the last value wins, as
        // with `add`.
        if items.len() > 1 {
            items.sort_by(|a, b| EncodedKeyOrder::compare(&keys[a.0..a.1], &keys[b.0..b.1]));
        }
        for group in items.chunks(skiplist::GROUP_KEYS) {
            let mut entries: [(u32, &[u8], &[u8]); skiplist::GROUP_KEYS] =
                [(0, &[], &[]); skiplist::GROUP_KEYS];
            for (slot, (start, end, tree, value)) in entries.iter_mut().zip(group) {
                *slot = (*tree, &keys[*start..*end], value);
            }
            self.list.insert_group(&entries[..group.len()]);
        }
        self.approximate_bytes
            .fetch_add(bytes, AtomicOrdering::Relaxed);
    }

    /// The first node at or after `[tree][internal key of user_key at seq]` if it is a version
    /// of `user_key` in `tree`.
    fn find_version(&self, tree: TreeId, user_key: &[u8], seq: SeqNo) -> Option<*const Node> {
        let mut lookup = Vec::with_capacity(TREE_PREFIX_BYTES + user_key.len() + 8);
        encode_lookup_key(
            &mut lookup,
            tree,
            &make_seek_key(user_key, seq.min(SEQ_MAX)),
        );
        let node = self.list.seek(&lookup);
        if node.is_null() {
            return None;
        }
        // SAFETY: a node of our skiplist; the slice does not outlive `&self`.
        let key = unsafe { node_key(node) };
        if tree_of(key) != tree {
            return None;
        }
        let parsed = parse_internal_key(key.get(TREE_PREFIX_BYTES..)?)?;
        (parsed.user_key == user_key).then_some(node)
    }

    /// The newest entry of `user_key` in `tree` whose sequence number is `<= seq`.
    pub fn get(&self, tree: TreeId, user_key: &[u8], seq: SeqNo) -> Option<MemtableEntry> {
        let node = self.find_version(tree, user_key, seq)?;
        // SAFETY: a node of our skiplist; the slices do not outlive `&self` (copied out).
        let (key, value) = unsafe { (node_key(node), node_value(node)) };
        let parsed = parse_internal_key(key.get(TREE_PREFIX_BYTES..)?)?;
        Some(MemtableEntry {
            seq: parsed.seq,
            kind: parsed.kind,
            value: value.to_vec(),
        })
    }

    /// The sequence number of the newest version of `user_key`, whatever the snapshot.
    #[cfg(test)]
    pub fn newest_seq(&self, tree: TreeId, user_key: &[u8]) -> Option<SeqNo> {
        let node = self.find_version(tree, user_key, SEQ_MAX)?;
        // SAFETY: a node of our skiplist; the slice does not outlive `&self`.
        let key = unsafe { node_key(node) };
        parse_internal_key(key.get(TREE_PREFIX_BYTES..)?).map(|parsed| parsed.seq)
    }

    /// Key, value and per-entry overhead bytes inserted so far.
    pub fn approximate_bytes(&self) -> usize {
        self.approximate_bytes.load(AtomicOrdering::Relaxed)
    }

    pub fn len(&self) -> usize {
        self.list.len()
    }

    pub fn is_empty(&self) -> bool {
        self.list.first().is_null()
    }

    /// The trees that have entries, ascending.
    pub fn trees(&self) -> Vec<TreeId> {
        let mut trees = Vec::new();
        let mut lookup = Vec::new();
        let mut next = self.list.first();
        while !next.is_null() {
            // SAFETY: a node of our skiplist; the slice does not outlive `&self`.
            let tree = tree_of(unsafe { node_key(next) });
            trees.push(tree);
            let Some(following) = tree.checked_add(1) else {
                break;
            };
            encode_tree_start(&mut lookup, following);
            next = self.list.seek(&lookup);
        }
        trees
    }

    /// A bidirectional iterator over the entries of `tree` only. It keeps the memtable alive.
    pub fn iter(self: &Arc<Self>, tree: TreeId) -> MemtableIterator {
        MemtableIterator {
            current: std::ptr::null(),
            memtable: Arc::clone(self),
            tree,
            lookup: Vec::new(),
        }
    }
}

/// Iterates over one tree of a memtable, holding a node pointer so each step is a pointer
/// walk rather than a fresh search.
pub struct MemtableIterator {
    /// A node of `memtable`'s skiplist, or null when not positioned.
    current: *const Node,
    memtable: Arc<Memtable>,
    tree: TreeId,
    /// Reused buffer for `[tree][target]` seek keys.
    lookup: Vec<u8>,
}

// SAFETY: `current` points into the skiplist of `memtable`, which the `Arc` keeps alive
// wherever the iterator goes, and which is safe to read from any thread (`SkipList` is
// `Sync`: nodes are immutable once published, except for atomics). Not `Sync`: not needed.
unsafe impl Send for MemtableIterator {}

impl MemtableIterator {
    /// Positions at `node` (of `self.memtable`, may be null) if it belongs to our tree.
    /// Invariant: `current` is null or a node of `self.memtable`'s skiplist.
    fn set_current(&mut self, node: *const Node) {
        // SAFETY: `node_key` runs only when `node` is not null; it was returned by a search of
        // `self.memtable.list`, which `self.memtable` keeps alive.
        self.current = if !node.is_null() && tree_of(unsafe { node_key(node) }) == self.tree {
            node
        } else {
            std::ptr::null()
        };
    }

    /// Lets the value and the next node load while the merge looks at other iterators
    /// (about halves a memtable scan: values are not next to their nodes).
    fn prefetch_scan(&self) {
        if !self.current.is_null() {
            // SAFETY: `current` is a node of `self.memtable`'s skiplist (invariant), alive.
            unsafe { SkipList::<EncodedKeyOrder>::prefetch_scan_from(self.current) };
        }
    }
}

impl InternalIterator for MemtableIterator {
    fn valid(&self) -> bool {
        !self.current.is_null()
    }

    fn seek_to_first(&mut self) -> Result<()> {
        encode_tree_start(&mut self.lookup, self.tree);
        let node = self.memtable.list.seek(&self.lookup);
        self.set_current(node);
        Ok(())
    }

    fn seek_to_last(&mut self) -> Result<()> {
        let node = match self.tree.checked_add(1) {
            Some(following) => {
                encode_tree_start(&mut self.lookup, following);
                self.memtable.list.seek_before(&self.lookup, false)
            }
            None => self.memtable.list.last(),
        };
        self.set_current(node);
        Ok(())
    }

    fn seek(&mut self, target: &[u8]) -> Result<()> {
        encode_lookup_key(&mut self.lookup, self.tree, target);
        let node = self.memtable.list.seek(&self.lookup);
        self.set_current(node);
        self.prefetch_scan();
        Ok(())
    }

    fn seek_for_prev(&mut self, target: &[u8]) -> Result<()> {
        encode_lookup_key(&mut self.lookup, self.tree, target);
        let node = self.memtable.list.seek_before(&self.lookup, true);
        self.set_current(node);
        Ok(())
    }

    fn next(&mut self) -> Result<()> {
        if !self.current.is_null() {
            // SAFETY: `current` is a node of `self.memtable`'s skiplist (invariant), alive.
            let node = unsafe { SkipList::<EncodedKeyOrder>::after(self.current) };
            self.set_current(node);
            self.prefetch_scan();
        }
        Ok(())
    }

    fn prev(&mut self) -> Result<()> {
        if !self.current.is_null() {
            // SAFETY: `current` is a node of `self.memtable.list` (invariant).
            let node = unsafe { self.memtable.list.before_node(self.current) };
            self.set_current(node);
        }
        Ok(())
    }

    fn key(&self) -> &[u8] {
        if self.current.is_null() {
            return &[];
        }
        // SAFETY: `current` is a node of `self.memtable`'s skiplist (invariant); the slice
        // borrows `self`, which holds the `Arc` keeping the memtable alive.
        let key = unsafe { node_key(self.current) };
        // Every key was built by `add` (tree prefix, user key, trailer), so `get` cannot fail.
        key.get(TREE_PREFIX_BYTES..).unwrap_or_default()
    }

    fn value(&self) -> &[u8] {
        if self.current.is_null() {
            return &[];
        }
        // SAFETY: as in `key`.
        unsafe { node_value(self.current) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::key::make_internal_key;
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};
    use std::collections::BTreeMap;

    fn seed() -> u64 {
        std::env::var("SIFT_SEED")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| rand::thread_rng().gen())
    }

    /// One `add`: tree, sequence number, kind, user key, value.
    type Write = (TreeId, SeqNo, ValueKind, Vec<u8>, Vec<u8>);
    /// An internal key, its value and its sequence number.
    type Version = (Vec<u8>, Vec<u8>, SeqNo);

    /// Model: (tree, internal key) -> value, in memtable order.
    type Model = BTreeMap<(TreeId, crate::key::InternalKey), Vec<u8>>;

    fn model_entries(model: &Model, tree: TreeId) -> Vec<(Vec<u8>, Vec<u8>)> {
        model
            .iter()
            .filter(|((t, _), _)| *t == tree)
            .map(|((_, k), v)| (k.0.clone(), v.clone()))
            .collect()
    }

    fn collect_forward(iter: &mut MemtableIterator) -> Vec<(Vec<u8>, Vec<u8>)> {
        let mut out = Vec::new();
        iter.seek_to_first().unwrap();
        while iter.valid() {
            out.push((iter.key().to_vec(), iter.value().to_vec()));
            iter.next().unwrap();
        }
        out
    }

    fn collect_backward(iter: &mut MemtableIterator) -> Vec<(Vec<u8>, Vec<u8>)> {
        let mut out = Vec::new();
        iter.seek_to_last().unwrap();
        while iter.valid() {
            out.push((iter.key().to_vec(), iter.value().to_vec()));
            iter.prev().unwrap();
        }
        out.reverse();
        out
    }

    fn kind_for(i: u64) -> ValueKind {
        match i % 3 {
            0 => ValueKind::Put,
            1 => ValueKind::Delete,
            _ => ValueKind::Merge,
        }
    }

    #[test]
    fn a_memtable_on_reused_chunks_holds_only_its_own_entries() {
        let seed = seed();
        println!("memtable chunk reuse test seed {seed} (replay with SIFT_SEED={seed})");
        let pool = Arc::new(ChunkPool::new(64 << 20));
        let mut rng = StdRng::seed_from_u64(seed);
        let mut previous_keys: Vec<String> = Vec::new();
        for round in 0..4u64 {
            let memtable = Arc::new(Memtable::with_chunk_pool(round, 1, Some(Arc::clone(&pool))));
            let mut model: Model = BTreeMap::new();
            // Keys, values and trees vary per round, so a node or value left over from an
            // earlier memtable in a reused chunk would show up as a wrong entry.
            for i in 0..3000u64 {
                let tree = (rng.gen_range(0..3) + round * 3) as TreeId;
                let key = format!("r{round}-key{:05}", rng.gen_range(0..2000));
                let value = vec![b'a' + round as u8; rng.gen_range(0..200)];
                let seq = 1 + i;
                memtable.add(tree, seq, kind_for(seq), key.as_bytes(), &value);
                let ikey = make_internal_key(key.as_bytes(), seq, kind_for(seq));
                model.insert((tree, crate::key::InternalKey(ikey)), value);
                previous_keys.push(key);
            }
            assert_eq!(memtable.len(), model.len(), "seed {seed} round {round}");
            for tree in 0..12 {
                let mut iter = memtable.iter(tree);
                assert_eq!(
                    collect_forward(&mut iter),
                    model_entries(&model, tree),
                    "seed {seed} round {round} tree {tree}"
                );
            }
            // Keys of earlier rounds are absent from every tree.
            for key in previous_keys
                .iter()
                .filter(|k| !k.starts_with(&format!("r{round}-")))
            {
                for tree in 0..12 {
                    assert_eq!(memtable.get(tree, key.as_bytes(), SeqNo::MAX), None);
                }
            }
            drop(memtable);
        }
        let stats = pool.stats();
        assert!(stats.chunks_reused > 0, "seed {seed}: {stats:?}");
    }

    #[test]
    fn concurrent_inserts_then_ordered_iteration_and_snapshot_gets() {
        let seed = seed();
        println!("memtable concurrent test seed {seed} (replay with SIFT_SEED={seed})");
        let memtable = Arc::new(Memtable::new(7));
        assert_eq!(memtable.wal_number(), 7);
        let threads = 4u64;
        let per_thread = 2000u64;
        // Each thread writes its own sequence numbers (`seq % threads == thread`) over a shared
        // key space, so versions of one key interleave across threads.
        std::thread::scope(|scope| {
            for thread in 0..threads {
                let memtable = Arc::clone(&memtable);
                scope.spawn(move || {
                    let mut rng = StdRng::seed_from_u64(seed ^ thread);
                    for i in 0..per_thread {
                        let seq = 1 + i * threads + thread;
                        let key = format!("key{:04}", rng.gen_range(0..500));
                        let value = format!("v{seq}");
                        memtable.add(0, seq, kind_for(seq), key.as_bytes(), value.as_bytes());
                    }
                });
            }
        });
        // Rebuild the same writes deterministically for the model.
        let mut model: Model = BTreeMap::new();
        for thread in 0..threads {
            let mut rng = StdRng::seed_from_u64(seed ^ thread);
            for i in 0..per_thread {
                let seq = 1 + i * threads + thread;
                let key = format!("key{:04}", rng.gen_range(0..500));
                let ikey = make_internal_key(key.as_bytes(), seq, kind_for(seq));
                model.insert(
                    (0, crate::key::InternalKey(ikey)),
                    format!("v{seq}").into_bytes(),
                );
            }
        }
        assert_eq!(memtable.len(), model.len(), "seed {seed}");
        assert!(memtable.approximate_bytes() > model.len() * ENTRY_OVERHEAD_BYTES);
        let expected = model_entries(&model, 0);
        let mut iter = memtable.iter(0);
        assert_eq!(collect_forward(&mut iter), expected, "seed {seed}");
        assert_eq!(collect_backward(&mut iter), expected, "seed {seed}");

        // Point reads at random snapshots against the model.
        let mut rng = StdRng::seed_from_u64(seed);
        let max_seq = threads * per_thread;
        for _ in 0..2000 {
            let key = format!("key{:04}", rng.gen_range(0..510));
            let snapshot = rng.gen_range(0..=max_seq + 1);
            let want = model.iter().find_map(|((_, k), v)| {
                let p = parse_internal_key(&k.0)?;
                (p.user_key == key.as_bytes() && p.seq <= snapshot).then(|| MemtableEntry {
                    seq: p.seq,
                    kind: p.kind,
                    value: v.clone(),
                })
            });
            assert_eq!(
                memtable.get(0, key.as_bytes(), snapshot),
                want,
                "seed {seed} key {key} snapshot {snapshot}"
            );
            let newest = model
                .keys()
                .filter_map(|(_, k)| parse_internal_key(&k.0))
                .find(|p| p.user_key == key.as_bytes())
                .map(|p| p.seq);
            assert_eq!(
                memtable.newest_seq(0, key.as_bytes()),
                newest,
                "seed {seed} key {key}"
            );
        }
    }

    #[test]
    fn readers_during_one_writer_see_every_committed_version_in_order() {
        use std::sync::atomic::AtomicBool;
        let seed = seed();
        println!("memtable reader/writer test seed {seed} (replay with SIFT_SEED={seed})");
        let mut rng = StdRng::seed_from_u64(seed);
        // The writes, in sequence order (seq = index + 1), as the write path applies them.
        let writes: Vec<Write> = (0..4000u64)
            .map(|i| {
                let seq = i + 1;
                let tree = rng.gen_range(0..3u32);
                let key = format!("{:03}", rng.gen_range(0..300)).into_bytes();
                let value = if i % 5 == 0 {
                    Vec::new()
                } else {
                    format!("{tree}-{seq}").into_bytes()
                };
                (tree, seq, kind_for(i), key, value)
            })
            .collect();
        // Per tree, every version in memtable order with its sequence number.
        let sorted: Vec<Vec<Version>> = (0..3u32)
            .map(|tree| {
                let mut entries: Vec<_> = writes
                    .iter()
                    .filter(|w| w.0 == tree)
                    .map(|(_, seq, kind, key, value)| {
                        (make_internal_key(key, *seq, *kind), value.clone(), *seq)
                    })
                    .collect();
                entries.sort_by(|a, b| crate::key::compare_internal_keys(&a.0, &b.0));
                entries
            })
            .collect();
        let memtable = Arc::new(Memtable::new(1));
        let committed = std::sync::atomic::AtomicU64::new(0);
        let done = AtomicBool::new(false);
        std::thread::scope(|scope| {
            for reader in 0..2u64 {
                let (memtable, committed, done, sorted, writes) =
                    (&memtable, &committed, &done, &sorted, &writes);
                scope.spawn(move || {
                    let mut rng = StdRng::seed_from_u64(seed ^ (reader + 1));
                    let mut scans = 0;
                    while !done.load(AtomicOrdering::Acquire) || scans < 3 {
                        scans += 1;
                        let tree = rng.gen_range(0..3u32);
                        let before = committed.load(AtomicOrdering::Acquire);
                        let mut iter = memtable.iter(tree);
                        let backward = scans % 2 == 0;
                        let mut scanned = if backward {
                            collect_backward(&mut iter)
                        } else {
                            collect_forward(&mut iter)
                        };
                        let after = committed.load(AtomicOrdering::Acquire);
                        for pair in scanned.windows(2) {
                            assert!(
                                crate::key::compare_internal_keys(&pair[0].0, &pair[1].0).is_lt(),
                                "seed {seed}: scan (backward: {backward}) out of order"
                            );
                        }
                        // A backward scan may miss entries inserted behind it, and a forward
                        // scan those inserted before its position; neither may miss an entry
                        // committed before it started, nor see one not started before it
                        // ended.
                        scanned.retain(|(key, _)| {
                            let seq = parse_internal_key(key).map_or(0, |p| p.seq);
                            assert!(seq <= after + 1, "seed {seed}: seq {seq} > {after} seen");
                            seq <= before
                        });
                        let want: Vec<_> = sorted[tree as usize]
                            .iter()
                            .filter(|e| e.2 <= before)
                            .map(|e| (e.0.clone(), e.1.clone()))
                            .collect();
                        assert_eq!(scanned, want, "seed {seed} tree {tree} at seq {before}");
                        // Point reads at the committed sequence number see the model.
                        for _ in 0..20 {
                            let key = format!("{:03}", rng.gen_range(0..300)).into_bytes();
                            let expected = writes[..before as usize]
                                .iter()
                                .rev()
                                .find(|w| w.0 == tree && w.3 == key)
                                .map(|w| MemtableEntry {
                                    seq: w.1,
                                    kind: w.2,
                                    value: w.4.clone(),
                                });
                            assert_eq!(
                                memtable.get(tree, &key, before),
                                expected,
                                "seed {seed} tree {tree} at seq {before}"
                            );
                        }
                    }
                });
            }
            let (memtable, committed, done, writes) = (&memtable, &committed, &done, &writes);
            scope.spawn(move || {
                for (tree, seq, kind, key, value) in writes {
                    memtable.add(*tree, *seq, *kind, key, value);
                    committed.store(*seq, AtomicOrdering::Release);
                    if seq % 64 == 0 {
                        // Let the readers overlap the writes even on a busy machine.
                        std::thread::yield_now();
                    }
                }
                done.store(true, AtomicOrdering::Release);
            });
        });
        for tree in 0..3u32 {
            let want: Vec<_> = sorted[tree as usize]
                .iter()
                .map(|e| (e.0.clone(), e.1.clone()))
                .collect();
            let mut iter = memtable.iter(tree);
            assert_eq!(collect_forward(&mut iter), want, "seed {seed} tree {tree}");
        }
        assert_eq!(memtable.len(), writes.len());
    }

    #[test]
    fn gets_during_writes_never_see_versions_above_the_snapshot() {
        use std::sync::atomic::{AtomicBool, AtomicU64};
        let memtable = Memtable::new(1);
        let committed = AtomicU64::new(0);
        let done = AtomicBool::new(false);
        std::thread::scope(|scope| {
            let (memtable, committed, done) = (&memtable, &committed, &done);
            scope.spawn(move || {
                // Versions of one key, newest linked first in the skiplist (right after the
                // head, the predecessor of a lookup at the committed sequence number).
                for seq in 1..=30_000u64 {
                    memtable.add(0, seq, ValueKind::Put, b"key", format!("{seq}").as_bytes());
                    committed.store(seq, AtomicOrdering::Release);
                }
                done.store(true, AtomicOrdering::Release);
            });
            scope.spawn(move || {
                while !done.load(AtomicOrdering::Acquire) {
                    let snapshot = committed.load(AtomicOrdering::Acquire);
                    let got = memtable.get(0, b"key", snapshot).map(|e| e.seq);
                    let want = (snapshot > 0).then_some(snapshot);
                    assert_eq!(got, want, "a read at seq {snapshot} saw another version");
                    let newest = memtable.newest_seq(0, b"key").unwrap_or(0);
                    assert!(newest >= snapshot, "newest {newest} < committed {snapshot}");
                }
            });
        });
    }

    #[test]
    fn batch_inserts_from_several_threads_equal_single_adds() {
        let seed = seed();
        println!("memtable batch test seed {seed} (replay with SIFT_SEED={seed})");
        let batched = Arc::new(Memtable::new(1));
        let single = Memtable::new(2);
        let threads = 3u64;
        // Per thread: batches of 1..60 entries over three trees (one of them the largest id),
        // each with consecutive sequence numbers from the thread's own range.
        type Batch = Vec<(TreeId, SeqNo, ValueKind, Vec<u8>, Vec<u8>)>;
        let batches = |thread: u64| -> Vec<Batch> {
            let mut rng = StdRng::seed_from_u64(seed ^ thread);
            let mut seq = 1 + thread * 1_000_000;
            (0..80)
                .map(|_| {
                    (0..rng.gen_range(1..60))
                        .map(|_| {
                            seq += 1;
                            let tree = [0, 3, TreeId::MAX][rng.gen_range(0..3)];
                            let key = format!("k{:03}", rng.gen_range(0..300)).into_bytes();
                            let kind = kind_for(seq);
                            let value = if kind == ValueKind::Delete {
                                Vec::new()
                            } else {
                                format!("v{seq}").into_bytes()
                            };
                            (tree, seq, kind, key, value)
                        })
                        .collect()
                })
                .collect()
        };
        let all: Vec<_> = (0..threads).map(batches).collect();
        std::thread::scope(|scope| {
            for batches in &all {
                let batched = Arc::clone(&batched);
                scope.spawn(move || {
                    for batch in batches {
                        batched.add_batch(batch.iter().map(|(tree, seq, kind, key, value)| {
                            (*tree, *seq, *kind, key.as_slice(), value.as_slice())
                        }));
                    }
                });
            }
        });
        for (tree, seq, kind, key, value) in all.iter().flatten().flatten() {
            single.add(*tree, *seq, *kind, key, value);
        }
        assert_eq!(batched.len(), single.len(), "seed {seed}");
        assert_eq!(
            batched.approximate_bytes(),
            single.approximate_bytes(),
            "seed {seed}"
        );
        let single = Arc::new(single);
        for tree in [0, 3, TreeId::MAX] {
            let expected = collect_forward(&mut single.iter(tree));
            assert!(!expected.is_empty(), "seed {seed}");
            let mut iter = batched.iter(tree);
            assert_eq!(
                collect_forward(&mut iter),
                expected,
                "seed {seed} tree {tree}"
            );
            assert_eq!(
                collect_backward(&mut iter),
                expected,
                "seed {seed} tree {tree}"
            );
        }
        let mut rng = StdRng::seed_from_u64(seed);
        for _ in 0..500 {
            let tree = [0, 3, TreeId::MAX][rng.gen_range(0..3)];
            let key = format!("k{:03}", rng.gen_range(0..310));
            let snapshot = rng.gen_range(0..3_000_000);
            assert_eq!(
                batched.get(tree, key.as_bytes(), snapshot),
                single.get(tree, key.as_bytes(), snapshot),
                "seed {seed} tree {tree} key {key} snapshot {snapshot}"
            );
        }
    }

    #[test]
    fn trees_are_isolated() {
        let memtable = Arc::new(Memtable::new(1));
        assert!(memtable.is_empty());
        assert!(memtable.trees().is_empty());
        // Empty user keys and the extreme tree ids must stay inside their tree.
        for (seq, tree) in [(1, 0u32), (2, 5), (3, TreeId::MAX), (4, 5), (5, 1)] {
            memtable.add(
                tree,
                seq,
                ValueKind::Put,
                b"",
                format!("empty{seq}").as_bytes(),
            );
            memtable.add(
                tree,
                seq + 100,
                ValueKind::Put,
                b"k",
                format!("k{seq}").as_bytes(),
            );
        }
        assert_eq!(memtable.trees(), vec![0, 1, 5, TreeId::MAX]);
        assert_eq!(memtable.len(), 10);
        assert_eq!(
            memtable.get(5, b"k", SEQ_MAX).map(|e| e.value),
            Some(b"k4".to_vec())
        );
        assert_eq!(
            memtable.get(5, b"k", 103).map(|e| e.value),
            Some(b"k2".to_vec())
        );
        assert_eq!(memtable.get(5, b"k", 101), None);
        assert_eq!(memtable.get(2, b"k", SEQ_MAX), None);
        assert_eq!(
            memtable.get(TreeId::MAX, b"", SEQ_MAX).map(|e| e.seq),
            Some(3)
        );
        assert_eq!(memtable.newest_seq(1, b"k"), Some(105));
        assert_eq!(memtable.newest_seq(1, b"j"), None);

        for tree in [0, 1, 5, TreeId::MAX, 2, 6] {
            let mut iter = memtable.iter(tree);
            let forward = collect_forward(&mut iter);
            let backward = collect_backward(&mut iter);
            assert_eq!(forward, backward, "tree {tree}");
            let expected_entries = match tree {
                5 => 4,
                0 | 1 | TreeId::MAX => 2,
                _ => 0,
            };
            assert_eq!(forward.len(), expected_entries, "tree {tree}");
            // Seeks beyond the tree's keys must not leak into the neighbour tree.
            iter.seek(&make_seek_key(b"z", SEQ_MAX)).unwrap();
            assert!(!iter.valid(), "tree {tree}");
            iter.seek_for_prev(&make_seek_key(b"", SEQ_MAX)).unwrap();
            assert!(!iter.valid(), "tree {tree}");
        }
    }

    #[test]
    fn iterator_matches_model_under_random_moves() {
        let seed = seed();
        println!("memtable iterator test seed {seed} (replay with SIFT_SEED={seed})");
        let mut rng = StdRng::seed_from_u64(seed);
        let memtable = Arc::new(Memtable::new(3));
        let mut model: Model = BTreeMap::new();
        for seq in 1..=600u64 {
            let tree = rng.gen_range(0..3u32);
            let key = format!("{:03}", rng.gen_range(0..150));
            let kind = kind_for(rng.gen());
            let value = format!("{tree}-{key}-{seq}").into_bytes();
            memtable.add(tree, seq, kind, key.as_bytes(), &value);
            model.insert(
                (
                    tree,
                    crate::key::InternalKey(make_internal_key(key.as_bytes(), seq, kind)),
                ),
                value,
            );
        }
        for tree in 0..3u32 {
            let expected = model_entries(&model, tree);
            let mut iter = memtable.iter(tree);
            // `pos == expected.len()` means invalid.
            let mut pos = expected.len();
            for step in 0..3000 {
                let op = rng.gen_range(0..6);
                let target = make_seek_key(
                    format!("{:03}", rng.gen_range(0..155)).as_bytes(),
                    rng.gen_range(0..700),
                );
                match op {
                    0 => {
                        iter.seek_to_first().unwrap();
                        pos = 0;
                    }
                    1 => {
                        iter.seek_to_last().unwrap();
                        pos = expected.len().saturating_sub(1);
                    }
                    2 => {
                        iter.seek(&target).unwrap();
                        pos = expected.partition_point(|(k, _)| {
                            crate::key::compare_internal_keys(k, &target).is_lt()
                        });
                    }
                    3 => {
                        iter.seek_for_prev(&target).unwrap();
                        let n = expected.partition_point(|(k, _)| {
                            crate::key::compare_internal_keys(k, &target).is_le()
                        });
                        pos = if n == 0 { expected.len() } else { n - 1 };
                    }
                    4 if pos < expected.len() => {
                        iter.next().unwrap();
                        pos += 1;
                    }
                    5 if pos < expected.len() => {
                        iter.prev().unwrap();
                        pos = if pos == 0 { expected.len() } else { pos - 1 };
                    }
                    _ => continue,
                }
                let want = expected.get(pos);
                let got = iter
                    .valid()
                    .then(|| (iter.key().to_vec(), iter.value().to_vec()));
                assert_eq!(
                    got.as_ref(),
                    want,
                    "seed {seed} tree {tree} step {step} op {op}"
                );
            }
        }
    }

    #[test]
    fn seeks_to_targets_shorter_than_a_trailer_follow_the_internal_key_order() {
        let seed = seed();
        println!("memtable short-target test seed {seed} (replay with SIFT_SEED={seed})");
        let mut rng = StdRng::seed_from_u64(seed);
        let memtable = Arc::new(Memtable::new(1));
        let mut model: Model = BTreeMap::new();
        for seq in 1..=200u64 {
            let tree = rng.gen_range(0..3u32);
            let key_bytes = rng.gen_range(0..3);
            let key: Vec<u8> = (0..key_bytes).map(|_| rng.gen_range(0..3u8)).collect();
            let value = format!("{seq}").into_bytes();
            memtable.add(tree, seq, ValueKind::Put, &key, &value);
            let internal_key = make_internal_key(&key, seq, ValueKind::Put);
            model.insert((tree, crate::key::InternalKey(internal_key)), value);
        }
        for tree in 0..3u32 {
            let expected = model_entries(&model, tree);
            let mut iter = memtable.iter(tree);
            for _ in 0..200 {
                // Malformed targets (0..8 bytes) and well-formed ones.
                let target_bytes = rng.gen_range(0..11);
                let target: Vec<u8> = (0..target_bytes).map(|_| rng.gen_range(0..3u8)).collect();
                iter.seek(&target).unwrap();
                let at = expected.partition_point(|(k, _)| {
                    crate::key::compare_internal_keys(k, &target).is_lt()
                });
                let got = iter.valid().then(|| iter.key().to_vec());
                let want = expected.get(at).map(|e| e.0.clone());
                assert_eq!(got, want, "seed {seed} tree {tree} seek {target:?}");
                iter.seek_for_prev(&target).unwrap();
                let at = expected.partition_point(|(k, _)| {
                    crate::key::compare_internal_keys(k, &target).is_le()
                });
                let got = iter.valid().then(|| iter.key().to_vec());
                let want = at.checked_sub(1).map(|i| expected[i].0.clone());
                assert_eq!(
                    got, want,
                    "seed {seed} tree {tree} seek_for_prev {target:?}"
                );
            }
        }
    }

    #[test]
    fn iterator_keeps_memtable_alive_and_sees_later_inserts() {
        let memtable = Arc::new(Memtable::new(1));
        memtable.add(0, 1, ValueKind::Put, b"a", b"1");
        memtable.add(0, 3, ValueKind::Put, b"c", b"3");
        let mut iter = memtable.iter(0);
        let writer = Arc::clone(&memtable);
        drop(memtable);
        iter.seek_to_first().unwrap();
        assert_eq!(
            iter.key(),
            make_internal_key(b"a", 1, ValueKind::Put).as_slice()
        );
        writer.add(0, 2, ValueKind::Put, b"b", b"2");
        drop(writer);
        iter.next().unwrap();
        assert_eq!(iter.value(), b"2");
        iter.next().unwrap();
        assert_eq!(iter.value(), b"3");
        iter.next().unwrap();
        assert!(!iter.valid());
    }
}
