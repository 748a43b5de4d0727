//! The asynchronous update queue (Diff-Index's AUQ): base writes whose index work is not done
//! yet, sharded by primary key so that one worker applies every update of a document, in
//! sequence-number order; plus the counters and the lag histogram of what the workers did.
//!
//! An item is pushed while its write's batch is being built, under the engine's commit lock,
//! before its sequence number is published: so when the engine says sequence number `s` was
//! handed out, every item of every write up to `s` is in the queue or already done. Workers
//! take an item only once its sequence number is visible to reads.
//!
//! Writes never take the lock of the queue's state: they append to an [`Inbox`], and whoever
//! takes the state lock ([`UpdateQueue::lock`]) first moves the inbox into the shards. Why:
//! the workers hold the state lock while they take and finish batches, and they run niced, on
//! a core shared with flushes and compactions. A worker preempted while holding it kept a
//! writer waiting for the rest of its time slice: measured with `perf` (`sched_switch` with
//! call stacks) in `sift bench diff-index`, async-simple writers slept 1,100 times per run
//! on that lock, up to 84 ms at once, and spun 650 times more. The inbox lock is held by a
//! worker only to swap two pairs of vectors.
//!
//! The inbox holds plain records and their bytes in two flat buffers, and the items are built
//! from them on the state lock's side: a write touches only memory that follows the previous
//! write's, never an item a worker on another core used last. Why: when writes refilled items
//! the workers had recycled, `perf` (cpu-clock samples, `sift bench diff-index`) put 8 % of an
//! async-simple write's time in the push, nearly all of it stalled on those items' cache lines
//! (the reference count checked before reuse, then the stores), half of the write's cost over
//! no index.

use parking_lot::{Condvar, Mutex, MutexGuard};
use sift_lsm::SeqNo;
use std::collections::{HashMap, VecDeque};
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use xxhash_rust::xxh3::{xxh3_64, xxh3_64_with_seed};

/// One base write whose index work is pending.
#[derive(Debug, Clone)]
pub(crate) struct Item {
    pub collection: Arc<str>,
    pub seq: SeqNo,
    /// The write deleted the document (otherwise it stored a version).
    pub delete: bool,
    /// The primary key, then the stored value (envelope) the write put when the write path
    /// queued it (the worker then needs no read to find it; only its header and attribute
    /// values, see `indexed_part` in `mod.rs`): one buffer, reused by later writes once the
    /// item is applied (see [`QueueState::spare_items`]).
    bytes: Vec<u8>,
    pk_bytes: usize,
    has_version: bool,
    /// [`UpdateQueue::key_hash`] of (collection, pk), set by `push`.
    pub key_hash: u64,
    /// When the write queued it (about when it committed): the start of its index lag.
    pub queued_at: Instant,
    /// For an update queued again at open: its version and the one before, as found then
    /// (a compaction of the recovered tables may drop them before the update is applied).
    pub recovered: Option<Arc<RecoveredVersions>>,
}

impl Item {
    /// An update of `pk` at `seq` (`version`: the stored value, if the caller has it).
    pub fn new(
        collection: Arc<str>,
        pk: &[u8],
        seq: SeqNo,
        delete: bool,
        version: Option<&[u8]>,
        queued_at: Instant,
    ) -> Item {
        let mut item = Item {
            collection,
            seq,
            delete,
            bytes: Vec::new(),
            pk_bytes: 0,
            has_version: false,
            key_hash: 0,
            queued_at,
            recovered: None,
        };
        item.set_document(pk, version);
        item
    }

    /// Sets the primary key and the stored version, reusing the buffer.
    fn set_document(&mut self, pk: &[u8], version: Option<&[u8]>) {
        self.bytes.clear();
        self.bytes.extend_from_slice(pk);
        self.pk_bytes = pk.len();
        self.has_version = version.is_some();
        if let Some(version) = version {
            self.bytes.extend_from_slice(version);
        }
    }

    pub fn pk(&self) -> &[u8] {
        &self.bytes[..self.pk_bytes]
    }

    /// The stored value the write put, when the write path queued it.
    pub fn version(&self) -> Option<&[u8]> {
        self.has_version.then(|| &self.bytes[self.pk_bytes..])
    }
}

/// A document write of a committing batch, to queue: (primary key, sequence number, the
/// stored value; `None`: a delete).
pub(crate) type DocumentWrite<'a> = (&'a [u8], SeqNo, Option<&'a [u8]>);

/// The versions a recovered update needs, read when it was queued again.
#[derive(Debug)]
pub(crate) struct RecoveredVersions {
    /// The stored value at the update's sequence number (`None`: a delete).
    pub version: Option<Vec<u8>>,
    /// The previous version and its sequence number (`None`: none, or deleted).
    pub previous: Option<(Vec<u8>, SeqNo)>,
}

/// One worker's share of the queue.
#[derive(Debug, Default)]
pub(crate) struct Shard {
    /// In sequence-number order. Items a worker is applying stay here until they are done
    /// (shared, so the worker takes a batch under the lock without copying keys or values).
    pub items: VecDeque<Arc<Item>>,
    /// Items per key hash: an item whose hash counts 1 is the only pending write of its
    /// document (a collision only makes the worker take the careful path).
    pub pending_per_key: PendingPerKey,
    /// Failed attempts of the batch at the front, since its last success.
    pub attempts: u32,
    pub last_error: Option<String>,
}

#[derive(Debug, Default)]
pub(crate) struct QueueState {
    pub shards: Vec<Shard>,
    pub shutting_down: bool,
    /// Threads waiting for updates to be applied (`AsyncCore::wait_for`): workers then take
    /// what is ready at once instead of letting it gather.
    pub progress_waiters: usize,
    /// Updates queued since open (counted under the lock the push holds anyway).
    pub queued_total: u64,
    /// Applied items no one else holds, whose allocations (the shared item and its buffer)
    /// the items built from the inbox reuse: so items are allocated, filled and freed on the
    /// workers' side of the queue, not on the write path.
    pub spare_items: Vec<Arc<Item>>,
    /// The inbox's buffers being moved into the shards (kept for their capacity).
    absorbing: InboxBuffers,
    /// The collections the inbox's records name, by position (copied from [`Inbox`]).
    collections: Vec<Arc<str>>,
}

impl QueueState {
    /// The oldest pending sequence number, if any.
    pub fn oldest_pending(&self) -> Option<SeqNo> {
        self.shards
            .iter()
            .filter_map(|shard| shard.items.front().map(|item| item.seq))
            .min()
    }

    /// Pending items with sequence numbers `<= seq` (each shard is in sequence order: a binary
    /// search, so drains that poll this under the lock do not hold it for long).
    pub fn pending_up_to(&self, seq: SeqNo) -> usize {
        self.shards
            .iter()
            .map(|shard| shard.items.partition_point(|item| item.seq <= seq))
            .sum()
    }

    pub fn length(&self) -> usize {
        self.shards.iter().map(|shard| shard.items.len()).sum()
    }

    /// Failed attempts of each shard's front batch.
    pub fn attempts(&self) -> Vec<u32> {
        self.shards.iter().map(|shard| shard.attempts).collect()
    }

    /// The first shard, among those holding an item `<= seq`, whose front batch has failed at
    /// least `attempts` times, and more often than `since` says (so a failure is reported
    /// only once it recurred): (attempts, last error).
    pub fn failure_up_to(&self, seq: SeqNo, attempts: u32, since: &[u32]) -> Option<(u32, String)> {
        self.shards
            .iter()
            .enumerate()
            .find(|(i, shard)| {
                shard.items.front().is_some_and(|item| item.seq <= seq)
                    && shard.attempts >= attempts
                    && shard.attempts > since.get(*i).copied().unwrap_or(0)
            })
            .map(|(_, shard)| (shard.attempts, shard.last_error.clone().unwrap_or_default()))
    }
}

/// An inbox (or, for items queued at open, a shard) holding this many items wakes the workers
/// at the next commit; fewer wait for a worker's next poll (see `worker.rs`), so that a write
/// does not pay for a wake-up.
pub const WAKE_ITEMS: usize = 64;

/// Most spare items kept for reuse, and the largest buffer kept with one.
pub const SPARE_ITEMS_MAX: usize = 1024;
pub const SPARE_ITEM_BYTES_MAX: usize = 16 << 10;

/// Capacity the inbox's buffers keep once emptied (beyond it they shrink back: a burst does
/// not pin its memory).
const INBOX_BYTES_KEPT_MAX: usize = 1 << 20;
const INBOX_RECORDS_KEPT_MAX: usize = 16 << 10;

/// What writes hand to the queue without taking its state lock.
#[derive(Debug, Default)]
pub(crate) struct Inbox {
    /// Writes pushed since the state lock was last taken, in sequence-number order.
    buffers: InboxBuffers,
    /// The collections records name, by position: only ever appended to (a handful).
    collections: Vec<Arc<str>>,
    /// Workers sleeping until a write wakes them ([`UpdateQueue::park`]).
    workers_parked: usize,
}

impl Inbox {
    /// The position of `collection` in [`Inbox::collections`], added (named by `name`) if new.
    fn collection_position(&mut self, collection: &str, name: impl Fn() -> Arc<str>) -> u32 {
        // Newest first: a workload writes to one collection, which was likely added last.
        if let Some(position) = self
            .collections
            .iter()
            .rposition(|known| **known == *collection)
        {
            return position as u32;
        }
        self.collections.push(name());
        (self.collections.len() - 1) as u32
    }
}

/// Queued writes as the write path leaves them: fixed-size records, and the keys and values
/// they name one after another in `bytes` (each record's primary key, then its version).
#[derive(Debug, Default)]
struct InboxBuffers {
    records: Vec<InboxRecord>,
    bytes: Vec<u8>,
}

/// One queued write in [`InboxBuffers`]. Its key hash is computed when the item is built, off
/// the write path.
#[derive(Debug, Clone, Copy)]
struct InboxRecord {
    seq: SeqNo,
    queued_at: Instant,
    /// Position in [`Inbox::collections`].
    collection: u32,
    /// The write deleted the document; otherwise `version_bytes` of its version follow its key.
    delete: bool,
    pk_bytes: usize,
    version_bytes: usize,
}

/// The queue and the conditions its users wait on.
#[derive(Debug, Default)]
pub(crate) struct UpdateQueue {
    /// Take it with [`UpdateQueue::lock`], which moves the inbox in first.
    state: Mutex<QueueState>,
    inbox: Mutex<Inbox>,
    /// Idle workers wait here, with the inbox lock, for the next write.
    parked: Condvar,
    /// Workers wait here for items (and for sequence numbers to become visible).
    pub work: Condvar,
    /// Drains (`wait_until_indexed`, flushes, close) wait here for progress.
    pub progress: Condvar,
    /// A push asked for the workers to be woken once its write commits.
    pub wake_requested: AtomicBool,
}

impl UpdateQueue {
    pub fn new(shards: usize) -> UpdateQueue {
        let queue = UpdateQueue::default();
        queue
            .state
            .lock()
            .shards
            .resize_with(shards.max(1), Shard::default);
        queue
    }

    /// The state, with every item pushed so far in its shard.
    pub fn lock(&self) -> MutexGuard<'_, QueueState> {
        let mut state = self.state.lock();
        self.absorb(&mut state);
        state
    }

    /// Moves the inbox's items into their shards (under the state lock, so in the order they
    /// were pushed), and hands the inbox the spare items if it ran out.
    fn absorb(&self, state: &mut QueueState) {
        {
            let mut inbox = self.inbox.lock();
            if inbox.buffers.records.is_empty() {
                return;
            }
            std::mem::swap(&mut inbox.buffers, &mut state.absorbing);
            let known = state.collections.len();
            if let Some(new) = inbox.collections.get(known..) {
                state.collections.extend(new.iter().cloned());
            }
        }
        let mut absorbing = std::mem::take(&mut state.absorbing);
        let mut offset = 0;
        for record in absorbing.records.drain(..) {
            let pk = &absorbing.bytes[offset..offset + record.pk_bytes];
            offset += record.pk_bytes;
            let version = (!record.delete).then(|| {
                let version = &absorbing.bytes[offset..offset + record.version_bytes];
                offset += record.version_bytes;
                version
            });
            let collection = &state.collections[record.collection as usize];
            let key_hash = Self::key_hash(collection, pk);
            let reused = state.spare_items.pop().and_then(|mut spare| {
                let item = Arc::get_mut(&mut spare)?;
                if !Arc::ptr_eq(&item.collection, collection) {
                    item.collection = Arc::clone(collection);
                }
                item.seq = record.seq;
                item.delete = record.delete;
                item.set_document(pk, version);
                item.key_hash = key_hash;
                item.queued_at = record.queued_at;
                item.recovered = None;
                Some(spare)
            });
            let item = reused.unwrap_or_else(|| {
                let mut item = Item::new(
                    Arc::clone(collection),
                    pk,
                    record.seq,
                    record.delete,
                    version,
                    record.queued_at,
                );
                item.key_hash = key_hash;
                Arc::new(item)
            });
            Self::push_locked(state, item);
        }
        debug_assert_eq!(
            offset,
            absorbing.bytes.len(),
            "inbox records and bytes disagree"
        );
        absorbing.bytes.clear();
        absorbing.bytes.shrink_to(INBOX_BYTES_KEPT_MAX);
        absorbing.records.shrink_to(INBOX_RECORDS_KEPT_MAX);
        state.absorbing = absorbing;
    }

    /// Waits on `condition` (`work` or `progress`) with the state lock until `deadline`, then
    /// moves in what was pushed meanwhile: every wait on the state goes through here or
    /// [`UpdateQueue::park`], so the holder always sees every item pushed so far.
    pub fn wait_until(
        &self,
        condition: &Condvar,
        state: &mut MutexGuard<'_, QueueState>,
        deadline: Instant,
    ) {
        condition.wait_until(state, deadline);
        self.absorb(state);
    }

    /// Sleeps without the state lock until a write pushes something, `wake_workers` is called,
    /// or `timeout` passes; at once if the inbox holds items. The check and the wait are under
    /// the inbox lock, which a write holds while it pushes and decides to wake: so no write's
    /// wake-up is missed.
    pub fn park(&self, state: &mut MutexGuard<'_, QueueState>, timeout: Duration) {
        MutexGuard::unlocked(state, || {
            let mut inbox = self.inbox.lock();
            if inbox.buffers.records.is_empty() {
                inbox.workers_parked += 1;
                self.parked.wait_for(&mut inbox, timeout);
                inbox.workers_parked -= 1;
            }
        });
        self.absorb(state);
    }

    /// A hash of (collection, pk): XXH3 of the primary key, seeded with XXH3 of the collection
    /// name, so equal keys of two collections differ. Its low bits pick the shard. Cheaper than
    /// SipHash, and run by every write under the engine's commit lock; nothing depends on it
    /// being unguessable (a collision only sends an update down the careful path).
    pub fn key_hash(collection: &str, pk: &[u8]) -> u64 {
        xxh3_64_with_seed(pk, xxh3_64(collection.as_bytes()))
    }

    pub fn shard_of(shards: usize, key_hash: u64) -> usize {
        (key_hash % shards.max(1) as u64) as usize
    }

    /// Queues items given in sequence-number order (after every item pushed before).
    pub fn push(&self, items: impl IntoIterator<Item = Item>) -> usize {
        let mut state = self.lock();
        let mut pushed = 0;
        let mut wake = self.inbox.lock().workers_parked > 0;
        for mut item in items {
            item.key_hash = Self::key_hash(&item.collection, item.pk());
            wake |= Self::push_locked(&mut state, Arc::new(item));
            pushed += 1;
        }
        self.request_wake(wake);
        pushed
    }

    /// Queues the document writes of a committing batch, given in sequence-number order, as
    /// updates of `collection` (`name` gives its shared name the first time). Run by every
    /// such write under the engine's commit lock: it appends a record and the write's bytes to
    /// the inbox's buffers (see the module comment), so it usually allocates nothing, and it
    /// never waits for a worker.
    pub fn push_writes<'a>(
        &self,
        collection: &str,
        name: impl Fn() -> Arc<str>,
        writes: impl IntoIterator<Item = DocumentWrite<'a>>,
        queued_at: Instant,
    ) -> usize {
        let mut inbox = self.inbox.lock();
        let position = inbox.collection_position(collection, name);
        let buffers = &mut inbox.buffers;
        let mut pushed = 0;
        for (pk, seq, version) in writes {
            buffers.bytes.extend_from_slice(pk);
            if let Some(version) = version {
                buffers.bytes.extend_from_slice(version);
            }
            buffers.records.push(InboxRecord {
                seq,
                queued_at,
                collection: position,
                delete: version.is_none(),
                pk_bytes: pk.len(),
                version_bytes: version.map_or(0, <[u8]>::len),
            });
            pushed += 1;
        }
        let wake = inbox.buffers.records.len() >= WAKE_ITEMS || inbox.workers_parked > 0;
        drop(inbox);
        self.request_wake(wake);
        pushed
    }

    /// Adds a hashed item to its shard; whether its shard now asks for a wake-up.
    fn push_locked(state: &mut QueueState, item: Arc<Item>) -> bool {
        let shards = state.shards.len();
        state.queued_total += 1;
        let shard = &mut state.shards[Self::shard_of(shards, item.key_hash)];
        *shard.pending_per_key.entry(item.key_hash).or_insert(0) += 1;
        shard.items.push_back(item);
        shard.items.len() >= WAKE_ITEMS
    }

    fn request_wake(&self, wake: bool) {
        // Read first: a store to the shared line on every write would cost a cache miss.
        if wake && !self.wake_requested.load(Ordering::Relaxed) {
            self.wake_requested.store(true, Ordering::Release);
        }
    }

    /// Keeps an applied item for reuse if no one else holds it (and its buffer is not large).
    pub fn recycle(spare_items: &mut Vec<Arc<Item>>, mut item: Arc<Item>) {
        if spare_items.len() >= SPARE_ITEMS_MAX {
            return;
        }
        if let Some(unique) = Arc::get_mut(&mut item) {
            if unique.bytes.capacity() > SPARE_ITEM_BYTES_MAX {
                return;
            }
            unique.recovered = None;
            spare_items.push(item);
        }
    }

    /// Wakes the workers if a push since the last call asked for it.
    pub fn wake_if_requested(&self) {
        // Read first: a swap would write the shared line on every write.
        if self.wake_requested.load(Ordering::Acquire)
            && self.wake_requested.swap(false, Ordering::AcqRel)
        {
            self.wake_workers();
        }
    }

    /// Removes the items of a write that did not commit (sequence numbers `first..=last`).
    pub fn cancel(&self, first: SeqNo, last: SeqNo) {
        let mut state = self.lock();
        for shard in &mut state.shards {
            let Shard {
                items,
                pending_per_key,
                ..
            } = shard;
            items.retain(|item| {
                let keep = item.seq < first || item.seq > last;
                if !keep {
                    forget_key(pending_per_key, item.key_hash);
                }
                keep
            });
        }
        drop(state);
        self.progress.notify_all();
    }

    /// Wakes every waiting worker, parked ones included.
    pub fn wake_workers(&self) {
        self.work.notify_all();
        self.parked.notify_all();
    }
}

/// Pending items per key hash; the keys are hashes already, so the map uses them as they are.
pub(crate) type PendingPerKey = HashMap<u64, u32, BuildHasherDefault<KeyHashHasher>>;

/// A hasher for keys that are [`UpdateQueue::key_hash`]es: passes the `u64` through.
#[derive(Debug, Default)]
pub(crate) struct KeyHashHasher(u64);

impl Hasher for KeyHashHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        // Only `write_u64` is used (the keys are `u64`); fold anything else in anyway.
        for byte in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(*byte);
        }
    }

    fn write_u64(&mut self, value: u64) {
        self.0 = value;
    }
}

/// Counts one pending item of `key_hash` less.
pub(crate) fn forget_key(pending_per_key: &mut PendingPerKey, key_hash: u64) {
    if let Some(count) = pending_per_key.get_mut(&key_hash) {
        *count -= 1;
        if *count == 0 {
            pending_per_key.remove(&key_hash);
        }
    }
}

/// Number of buckets of the lag histogram: bucket `i` counts lags in `[2^(i-1), 2^i)` µs
/// (bucket 0: under 1 µs), up to about 2^39 µs (6 days).
pub const LAG_BUCKETS: usize = 40;

/// A log2-bucket histogram of index lags, in microseconds (lock-free).
#[derive(Debug)]
pub(crate) struct LagHistogram {
    buckets: [AtomicU64; LAG_BUCKETS],
    max_us: AtomicU64,
}

impl Default for LagHistogram {
    fn default() -> Self {
        LagHistogram {
            buckets: std::array::from_fn(|_| AtomicU64::new(0)),
            max_us: AtomicU64::new(0),
        }
    }
}

impl LagHistogram {
    pub fn record(&self, lag: Duration) {
        let us = u64::try_from(lag.as_micros()).unwrap_or(u64::MAX);
        let bucket = (64 - us.leading_zeros() as usize).min(LAG_BUCKETS - 1);
        self.buckets[bucket].fetch_add(1, Ordering::Relaxed);
        self.max_us.fetch_max(us, Ordering::Relaxed);
    }

    /// (bucket upper bound in µs, count) of every non-empty bucket.
    pub fn buckets(&self) -> Vec<(u64, u64)> {
        self.buckets
            .iter()
            .enumerate()
            .map(|(i, count)| (1u64 << i, count.load(Ordering::Relaxed)))
            .filter(|(_, count)| *count > 0)
            .collect()
    }

    pub fn max_us(&self) -> u64 {
        self.max_us.load(Ordering::Relaxed)
    }

    /// The upper bound of the bucket holding the `quantile` (0..=1) lag; 0 when empty.
    pub fn quantile_us(&self, quantile: f64) -> u64 {
        let counts: Vec<u64> = self
            .buckets
            .iter()
            .map(|c| c.load(Ordering::Relaxed))
            .collect();
        let total: u64 = counts.iter().sum();
        if total == 0 {
            return 0;
        }
        #[allow(
            clippy::cast_possible_truncation,
            clippy::cast_sign_loss,
            clippy::cast_precision_loss
        )]
        let rank = ((quantile.clamp(0.0, 1.0) * total as f64).ceil() as u64).max(1);
        let mut seen = 0;
        for (i, count) in counts.iter().enumerate() {
            seen += count;
            if seen >= rank {
                return (1u64 << i).min(self.max_us().max(1));
            }
        }
        self.max_us()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histogram_quantiles_fall_in_the_right_buckets() {
        let histogram = LagHistogram::default();
        for us in [1u64, 3, 3, 100, 5000] {
            histogram.record(Duration::from_micros(us));
        }
        assert_eq!(histogram.quantile_us(0.2), 2); // 1 µs is in [1, 2)
        assert_eq!(histogram.quantile_us(0.6), 4); // 3 µs is in [2, 4)
        assert_eq!(histogram.quantile_us(0.8), 128);
        assert_eq!(histogram.quantile_us(1.0), 5000); // capped by the maximum
        assert_eq!(histogram.buckets().iter().map(|b| b.1).sum::<u64>(), 5);
    }

    #[test]
    fn cancel_removes_only_the_failed_write() {
        let queue = UpdateQueue::new(2);
        let item = |seq| {
            Item::new(
                Arc::from("c"),
                format!("k{seq}").as_bytes(),
                seq,
                false,
                Some(b"v"),
                Instant::now(),
            )
        };
        queue.push((1..=6).map(item));
        queue.cancel(3, 4);
        let state = queue.lock();
        assert_eq!(state.length(), 4);
        assert_eq!(state.oldest_pending(), Some(1));
        assert_eq!(state.pending_up_to(4), 2);
        let counted: u32 = state
            .shards
            .iter()
            .flat_map(|shard| shard.pending_per_key.values())
            .sum();
        assert_eq!(counted, 4, "cancelled items are no longer counted");
    }

    fn push_one(queue: &UpdateQueue, seq: SeqNo) -> usize {
        let pk = format!("k{seq}");
        let name = || Arc::<str>::from("c");
        let writes = [(pk.as_bytes(), seq, Some(&b"v"[..]))];
        queue.push_writes("c", name, writes, Instant::now())
    }

    #[test]
    fn key_hashes_tell_collections_apart_and_spread_keys_over_the_shards() {
        assert_ne!(
            UpdateQueue::key_hash("tweets", b"42"),
            UpdateQueue::key_hash("users", b"42")
        );
        // The separator is the seed, not a byte: moving bytes between name and key changes it.
        assert_ne!(
            UpdateQueue::key_hash("ab", b"c"),
            UpdateQueue::key_hash("a", b"bc")
        );
        let shards = 4;
        let mut per_shard = vec![0_usize; shards];
        for key in 0..4000_u32 {
            let pk = key.to_be_bytes();
            per_shard[UpdateQueue::shard_of(shards, UpdateQueue::key_hash("tweets", &pk))] += 1;
        }
        // Sequential keys differ in one byte or two; each shard still gets close to a quarter.
        assert!(
            per_shard.iter().all(|&count| (800..=1200).contains(&count)),
            "{per_shard:?}"
        );
    }

    /// Every write comes out of the inbox as it went in (key, version or delete, collection,
    /// hash, time), across collections, key and value lengths, absorbs between pushes, and
    /// items reused from the spare list (which may have belonged to another collection).
    #[test]
    fn writes_come_out_of_the_inbox_as_they_went_in() {
        let queue = UpdateQueue::new(3);
        let names = ["tweets", "users"];
        let started = Instant::now();
        let mut expected = Vec::new();
        let mut seq = 0;
        for round in 0..40_usize {
            let collection = names[round % 3 % 2];
            let writes: Vec<(Vec<u8>, SeqNo, Option<Vec<u8>>)> = (0..=(round % 5))
                .map(|i| {
                    seq += 1;
                    let pk = vec![b'k'; 1 + (round * 7 + i) % 23];
                    let version = (seq % 4 != 0).then(|| vec![seq as u8; (round * 13 + i) % 61]);
                    (pk, seq, version)
                })
                .collect();
            let queued_at = started + Duration::from_micros(round as u64);
            let pushed = queue.push_writes(
                collection,
                || Arc::<str>::from(collection),
                writes
                    .iter()
                    .map(|(pk, seq, version)| (pk.as_slice(), *seq, version.as_deref())),
                queued_at,
            );
            assert_eq!(pushed, writes.len());
            for (pk, seq, version) in writes {
                expected.push((collection, pk, seq, version, queued_at));
            }
            if round % 4 == 3 {
                // Absorb now, and hand the applied items back for reuse, as a worker does.
                let mut state = queue.lock();
                let QueueState {
                    shards,
                    spare_items,
                    ..
                } = &mut *state;
                for shard in shards.iter_mut() {
                    for item in shard.items.drain(..) {
                        let (collection, pk, seq, version, queued_at) = expected.remove(
                            expected
                                .iter()
                                .position(|write| write.2 == item.seq)
                                .unwrap_or(usize::MAX),
                        );
                        assert_eq!(&*item.collection, collection, "seq {seq}");
                        assert_eq!(item.pk(), pk.as_slice(), "seq {seq}");
                        assert_eq!(item.version(), version.as_deref(), "seq {seq}");
                        assert_eq!(item.delete, version.is_none(), "seq {seq}");
                        assert_eq!(item.key_hash, UpdateQueue::key_hash(collection, &pk));
                        assert_eq!(item.queued_at, queued_at, "seq {seq}");
                        UpdateQueue::recycle(spare_items, item);
                    }
                    shard.pending_per_key.clear();
                }
                assert!(!spare_items.is_empty(), "applied items are kept for reuse");
            }
        }
        let state = queue.lock();
        assert_eq!(state.length(), expected.len());
    }

    /// The point of the inbox: a write never waits for the state lock, which a worker may
    /// hold while preempted. The pushes below run while another thread holds it.
    #[test]
    fn writes_queue_while_the_state_lock_is_held_and_every_reader_sees_them_in_order() {
        let queue = UpdateQueue::new(3);
        let held = queue.state.lock();
        let (done_sender, done) = std::sync::mpsc::channel();
        std::thread::scope(|scope| {
            scope.spawn(|| {
                let pushed: usize = (1..=100).map(|seq| push_one(&queue, seq)).sum();
                let _ = done_sender.send(pushed);
            });
            let pushed = done.recv_timeout(Duration::from_secs(20));
            drop(held);
            assert_eq!(pushed, Ok(100), "a write waited for the state lock");
        });
        let state = queue.lock();
        assert_eq!(state.length(), 100);
        assert_eq!(state.queued_total, 100);
        assert_eq!(state.oldest_pending(), Some(1));
        assert_eq!(state.pending_up_to(40), 40);
        for shard in &state.shards {
            let seqs: Vec<SeqNo> = shard.items.iter().map(|item| item.seq).collect();
            assert!(seqs.windows(2).all(|pair| pair[0] < pair[1]), "{seqs:?}");
            assert_eq!(
                shard.pending_per_key.values().sum::<u32>() as usize,
                seqs.len()
            );
        }
        drop(state);
        // Recovered items queued later come after the inbox's.
        queue.push([Item::new(
            Arc::from("c"),
            b"r",
            101,
            false,
            None,
            Instant::now(),
        )]);
        push_one(&queue, 102);
        queue.cancel(50, 60);
        let state = queue.lock();
        assert_eq!(state.length(), 100 + 2 - 11);
        assert_eq!(state.pending_up_to(101), 101 - 11);
    }

    /// A parked worker is woken by the next write that asks for it, however the two interleave.
    #[test]
    fn a_write_wakes_a_parked_worker() {
        for round in 0..200 {
            let queue = UpdateQueue::new(1);
            std::thread::scope(|scope| {
                let worker = scope.spawn(|| {
                    let started = Instant::now();
                    // As a worker does: it parks only when nothing is queued.
                    let mut state = queue.lock();
                    if state.length() == 0 {
                        queue.park(&mut state, Duration::from_secs(30));
                    }
                    (started.elapsed(), state.length())
                });
                if round % 2 == 0 {
                    // Sometimes only once the worker is asleep.
                    while queue.inbox.lock().workers_parked == 0 && !worker.is_finished() {
                        std::thread::yield_now();
                    }
                }
                push_one(&queue, round + 1);
                queue.wake_if_requested();
                let (slept, queued) = worker.join().unwrap_or((Duration::MAX, 0));
                assert!(
                    slept < Duration::from_secs(20),
                    "round {round}: the worker missed the wake-up and slept {slept:?}"
                );
                assert_eq!(queued, 1, "round {round}: the woken worker sees the write");
            });
        }
    }
}
