//! A background worker of asynchronous maintenance (Diff-Index Algorithm 4): takes the updates
//! of its shard in sequence-number order, does their sync-full work, inserts the entries into
//! the engine unlogged at their updates' sequence numbers (see "Unlogged entries"), and
//! retries a failed batch with exponential backoff until it succeeds.
//!
//! Unlogged entries: each entry goes in at its base write's sequence number `s`, into the
//! memtable holding `s`, without the WAL or the engine's commit lock
//! (`Db::insert_unlogged_at_sequence`; why that is crash-safe: `mod.rs`). If the engine
//! refuses (the memtable of `s` is being flushed or gone), the batch is written through the
//! log at fresh sequence numbers, in engine writes of at most `write_entries_max` entries
//! (each holds the commit lock, which writers need too, so only briefly). A fresh number is
//! above every `s` handed out so far, so after such a write an update at `s <=` that number
//! must not go in unlogged: its entry would sit below the logged one of the same index key
//! (one document's keys belong to one worker) and be shadowed by it. So the worker tracks the
//! last fresh number it wrote (`logged_through`, starting at the sequence number at open,
//! which covers the updates queued again at open and every entry written before) and writes
//! updates at or below it through the log too.
//!
//! Interference with writers: logged writes and the watermark write take the commit lock, and
//! a writer that finds it held waits. So a worker that finds only a few updates ready lets them
//! gather (up to `coalesce_wait` after the oldest was queued; at once when someone waits for
//! them). The watermark write a flush drain asks for is a small unsynced write under that lock:
//! at most one per `watermark_interval`.
//!
//! For an update of document `pk` at sequence number `s`, for each asynchronous index:
//! 1. read the version written at `s` (BA1), the version before it (`s - 1`, BA2) and the live
//!    version;
//! 2. delete the previous version's entry if its value differs, but only if the stored entry
//!    names a write older than `s` (BA3);
//! 3. insert the new entry `value ‖ pk → s` unless the document has since moved to another
//!    value (the newer update will index it) or the stored entry already names `s` or later
//!    (BA4).
//!
//! Fast path: a put queued by the write path carries its stored value, and when it is the only
//! pending update of its document (per-shard counts by key hash), no newer write of the
//! document has committed and none will be applied before it. Then only the previous version
//! is read (1 read instead of 3 + 2 per index): its entry is deleted and the new one put
//! without checking the stored sequence numbers.
//!
//! The previous version's index values often need no read at all: each worker remembers, per
//! document, the values it last indexed for a fast-path put ([`RecentVersions`]). The next
//! fast-path put of that document finds them there, because every write of a document with an
//! asynchronous index is queued, and its shard's worker applies them in sequence order: the
//! version it indexed last is the one just before. A document whose update took the careful
//! path (a delete, a recovered update, or one with another write pending) is forgotten, and
//! the whole memory is dropped after a failed batch, so a miss only costs the read.
//!
//! Why the previous version is still there: an update stays queued until applied, and the
//! flush of the memtable holding its write waits for that (drain before flush); a compaction
//! drops a version only for a newer one in its own inputs, and the next version (`s`) is still
//! in a memtable. Updates queued again at open carry both versions, read when they were queued
//! (the recovered tables may be compacted before the updates are applied).

use super::queue::{forget_key, Item, UpdateQueue, WAKE_ITEMS};
use super::AsyncCore;
use crate::encoding::encode_pk;
use crate::envelope::EnvelopeRef;
use crate::error::{IndexError, Result};
use crate::kind::{Catalog, Index};
use parking_lot::RwLock;
use sift_lsm::{Db, SeqNo, Tree, TreeId, UnloggedInsert, ValueKind, WriteBatch, WriteOptions};
use std::borrow::Borrow;
use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How often a worker that had work recently looks for more. Writes do not wake it (a wake-up
/// per write would cost the writer more than its own work at low load): updates wait up to
/// this long, unless the inbox fills up to `WAKE_ITEMS`.
const POLL_WAIT: Duration = Duration::from_millis(1);
/// After this long without work a worker parks: it sleeps until a write (or a drain) wakes it,
/// looking again after `PARKED_WAIT` at the latest.
const ACTIVE_WINDOW: Duration = Duration::from_millis(50);
const PARKED_WAIT: Duration = Duration::from_millis(100);
/// Approximate bytes a worker's [`RecentVersions`] may hold before it starts over (enough for
/// the values of a few hundred thousand documents).
const RECENT_VERSIONS_BYTES_MAX: usize = 16 << 20;
/// Bookkeeping bytes counted per remembered document besides its key and values.
const RECENT_ENTRY_OVERHEAD_BYTES: usize = 64;

pub(crate) struct Worker {
    pub core: Arc<AsyncCore>,
    pub engine: Arc<Db>,
    pub catalog: Arc<RwLock<Arc<Catalog>>>,
    pub shard: usize,
    pub recent: RecentVersions,
    /// The highest sequence number of an entry this worker (or anyone before this open) wrote
    /// through the log, at a fresh number: an update at or below it must be written through
    /// the log too (see the module comment, "Unlogged entries").
    pub logged_through: std::cell::Cell<SeqNo>,
}

/// The encoded values a worker last indexed for each document (see the module comment): the
/// previous version's values of the next fast-path put of the document, without reading it.
#[derive(Debug, Default)]
pub(crate) struct RecentVersions {
    /// (collection, pk) -> the version's sequence number and, per index id, its encoded value.
    documents: HashMap<(Arc<str>, Vec<u8>), RecentVersion>,
    bytes: usize,
}

/// A document's key in [`RecentVersions`] as borrowed parts: a lookup builds no owned key.
trait DocumentKey {
    fn parts(&self) -> (&str, &[u8]);
}

impl DocumentKey for (Arc<str>, Vec<u8>) {
    fn parts(&self) -> (&str, &[u8]) {
        (&self.0, &self.1)
    }
}

impl DocumentKey for (&str, &[u8]) {
    fn parts(&self) -> (&str, &[u8]) {
        (self.0, self.1)
    }
}

impl<'a> Borrow<dyn DocumentKey + 'a> for (Arc<str>, Vec<u8>) {
    fn borrow(&self) -> &(dyn DocumentKey + 'a) {
        self
    }
}

// Hashes and compares as the owned key does: an `Arc<str>` hashes as its `str`, a `Vec<u8>`
// as its slice, a pair as its two parts in order.
impl Hash for dyn DocumentKey + '_ {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.parts().hash(state);
    }
}

impl PartialEq for dyn DocumentKey + '_ {
    fn eq(&self, other: &Self) -> bool {
        self.parts() == other.parts()
    }
}

impl Eq for dyn DocumentKey + '_ {}

#[derive(Debug)]
struct RecentVersion {
    seq: SeqNo,
    values: Vec<(u64, Option<Box<[u8]>>)>,
}

impl RecentVersion {
    fn bytes(&self, pk: &[u8]) -> usize {
        RECENT_ENTRY_OVERHEAD_BYTES
            + pk.len()
            + self
                .values
                .iter()
                .map(|(_, value)| 16 + value.as_ref().map_or(0, |v| v.len()))
                .sum::<usize>()
    }
}

/// What a successful batch teaches a worker's [`RecentVersions`], applied in item order.
enum RecentUpdate {
    /// A fast-path put was indexed with these values.
    Indexed {
        collection: Arc<str>,
        pk: Vec<u8>,
        version: RecentVersion,
    },
    /// The document's update took the careful path: what was remembered may be stale.
    Forget { collection: Arc<str>, pk: Vec<u8> },
}

impl RecentVersions {
    /// The remembered values of the version of `pk` just before `seq`, if every index in
    /// `index_ids` has one.
    fn before(
        &self,
        collection: &Arc<str>,
        pk: &[u8],
        seq: SeqNo,
        index_ids: &[u64],
    ) -> Option<&RecentVersion> {
        let version = self
            .documents
            .get(&(&**collection, pk) as &dyn DocumentKey)?;
        let complete = index_ids
            .iter()
            .all(|id| version.values.iter().any(|(known, _)| known == id));
        (version.seq < seq && complete).then_some(version)
    }

    fn apply(&mut self, updates: Vec<RecentUpdate>) {
        for update in updates {
            match update {
                RecentUpdate::Indexed {
                    collection,
                    pk,
                    version,
                } => {
                    let added = version.bytes(&pk);
                    if self.bytes + added > RECENT_VERSIONS_BYTES_MAX {
                        self.clear();
                    }
                    self.bytes += added;
                    if let Some(old) = self.documents.insert((collection, pk.clone()), version) {
                        self.bytes = self.bytes.saturating_sub(old.bytes(&pk));
                    }
                }
                RecentUpdate::Forget { collection, pk } => {
                    let key: &dyn DocumentKey = &(&*collection, pk.as_slice());
                    if let Some(old) = self.documents.remove(key) {
                        self.bytes = self.bytes.saturating_sub(old.bytes(&pk));
                    }
                }
            }
        }
    }

    fn clear(&mut self) {
        self.documents.clear();
        self.bytes = 0;
    }
}

/// The stored sequence number of an asynchronous composite entry: 8 bytes big-endian; an
/// empty value (never written by this layer for asynchronous indexes) counts as older than
/// every update.
pub(crate) fn entry_seq(tree: &Tree, key: &[u8], value: &[u8]) -> Result<SeqNo> {
    if value.is_empty() {
        return Ok(0);
    }
    let bytes: [u8; 8] = value.try_into().map_err(|_| IndexError::Corrupt {
        offset: 0,
        message: format!(
            "asynchronous index tree {}: entry {key:?} holds {} bytes, expected an 8-byte \
                 sequence number",
            tree.name(),
            value.len()
        ),
    })?;
    Ok(SeqNo::from_be_bytes(bytes))
}

fn with_seq(entry: &sift_lsm::Entry) -> Result<(EnvelopeRef<'_>, SeqNo)> {
    EnvelopeRef::decode(&entry.value).map(|envelope| (envelope, entry.seq))
}

impl Worker {
    pub fn run(mut self) {
        // Pinned like the engine's background threads (`background_thread_cpus`).
        // Kept for the thread's life: the thread leaves the engine's list when it ends.
        let _registration = self.engine.enter_background_thread();
        sift_lsm::lower_current_thread_priority(self.core.options.worker_nice);
        let queue = &self.core.queue;
        let mut last_work = Instant::now();
        // Watermark writes (first worker only): the last one, and one put off until then.
        let mut watermark_written: Option<Instant> = None;
        let mut watermark_due: Option<Instant> = None;
        loop {
            // Each item with whether it is the only pending write of its document.
            let batch: Vec<(Arc<Item>, bool)> = {
                let mut state = queue.lock();
                loop {
                    if state.shutting_down {
                        return;
                    }
                    if self.shard == 0
                        && (self.core.watermark_requested.load(Ordering::Acquire)
                            || watermark_due.is_some_and(|due| Instant::now() >= due))
                    {
                        break Vec::new();
                    }
                    let visible = self.engine.latest_sequence();
                    let shard = &state.shards[self.shard];
                    let ready = shard.items.partition_point(|item| item.seq <= visible);
                    if ready > 0 {
                        // Coalesce: a batch of a few updates costs the writers nearly as much as
                        // a full one (each is a commit they may wait for), so a worker that
                        // finds only a few updates ready (say those that arrived while it
                        // applied the previous batch) lets them gather for up to
                        // `coalesce_wait` after the oldest was queued. Not when someone
                        // waits for them (a drain, `wait_until_indexed`, close).
                        let items_max = self.core.options.batch_items_max.max(1);
                        let gather_until = shard
                            .items
                            .front()
                            .map(|oldest| oldest.queued_at + self.core.options.coalesce_wait);
                        let coalescing = ready < items_max.min(WAKE_ITEMS)
                            && state.progress_waiters == 0
                            && gather_until.is_some_and(|until| Instant::now() < until);
                        if let (true, Some(until)) = (coalescing, gather_until) {
                            queue.wait_until(&queue.work, &mut state, until);
                            continue;
                        }
                        let shard = &state.shards[self.shard];
                        break shard
                            .items
                            .iter()
                            .take(ready.min(items_max))
                            .map(|item| {
                                let alone = shard.pending_per_key.get(&item.key_hash) == Some(&1);
                                (Arc::clone(item), alone)
                            })
                            .collect();
                    }
                    // Items not visible yet, or recent work: poll soon. Otherwise park, so the
                    // next write wakes this worker (`UpdateQueue::push`).
                    if !state.shards[self.shard].items.is_empty()
                        || last_work.elapsed() < ACTIVE_WINDOW
                    {
                        queue.wait_until(&queue.work, &mut state, Instant::now() + POLL_WAIT);
                    } else {
                        // Parked without the state lock: a write wakes it through the inbox.
                        queue.park(&mut state, PARKED_WAIT);
                    }
                }
            };
            last_work = Instant::now();
            if batch.is_empty() {
                self.core
                    .watermark_requested
                    .store(false, Ordering::Release);
                // The write takes the engine's commit lock, which every writer waits for
                // meanwhile: at most one per `watermark_interval` (a later one only means a
                // longer replay after a crash, and that versions are kept a little longer).
                let interval = self.core.options.watermark_interval;
                if let Some(written) = watermark_written.filter(|at| at.elapsed() < interval) {
                    watermark_due = Some(written + interval);
                    continue;
                }
                watermark_written = Some(Instant::now());
                watermark_due = None;
                let visible = self.engine.latest_sequence();
                if let Err(error) = self.core.persist_watermark(&self.engine, visible) {
                    self.core
                        .record_failure(&format!("writing the index watermark: {error}"));
                }
                continue;
            }
            match self.apply(&batch) {
                Ok(updates) => {
                    self.recent.apply(updates);
                    self.finish(batch);
                }
                Err(error) => {
                    // Conservative: what a partly applied batch taught is not trusted.
                    self.recent.clear();
                    let attempts = {
                        let mut state = queue.lock();
                        let shard = &mut state.shards[self.shard];
                        shard.attempts += 1;
                        shard.last_error = Some(error.to_string());
                        shard.attempts
                    };
                    self.core.record_failure(&error.to_string());
                    queue.progress.notify_all();
                    self.back_off(attempts);
                }
            }
        }
    }

    /// Sleeps before a retry, waking early on shutdown.
    fn back_off(&self, attempts: u32) {
        let options = &self.core.options;
        let delay = options
            .retry_backoff_initial
            .saturating_mul(1u32 << attempts.saturating_sub(1).min(20))
            .min(options.retry_backoff_max);
        let deadline = Instant::now() + delay;
        let queue = &self.core.queue;
        let mut state = queue.lock();
        while !state.shutting_down && Instant::now() < deadline {
            queue.wait_until(&queue.work, &mut state, deadline);
        }
    }

    /// Removes an applied batch from the shard (keeping its items for reuse) and records its
    /// lag.
    fn finish(&self, batch: Vec<(Arc<Item>, bool)>) {
        let now = Instant::now();
        for (item, _) in &batch {
            self.core
                .lag
                .record(now.saturating_duration_since(item.queued_at));
        }
        let applied_items = batch.len();
        // Only the shard holds the items now, so they can be reused.
        let applied_seqs: Vec<SeqNo> = batch.into_iter().map(|(item, _)| item.seq).collect();
        {
            let mut state = self.core.queue.lock();
            let super::queue::QueueState {
                shards,
                spare_items,
                ..
            } = &mut *state;
            let shard = &mut shards[self.shard];
            // The batch was taken from the front of the shard in order, and only `cancel`
            // removes items meanwhile (never a committed one, but no matter): pop the batch's
            // items while they lead the shard.
            let mut applied = applied_seqs.iter().copied().peekable();
            while let (Some(front), Some(&next)) = (shard.items.front(), applied.peek()) {
                match front.seq.cmp(&next) {
                    std::cmp::Ordering::Equal => {
                        applied.next();
                        if let Some(item) = shard.items.pop_front() {
                            forget_key(&mut shard.pending_per_key, item.key_hash);
                            UpdateQueue::recycle(spare_items, item);
                        }
                    }
                    // Removed meanwhile.
                    std::cmp::Ordering::Greater => {
                        applied.next();
                    }
                    std::cmp::Ordering::Less => break,
                }
            }
            shard.attempts = 0;
            shard.last_error = None;
        }
        let counters = &self.core.counters;
        counters
            .applied
            .fetch_add(applied_items as u64, Ordering::Relaxed);
        counters.batches.fetch_add(1, Ordering::Relaxed);
        self.core.queue.progress.notify_all();
    }

    /// The sync-full work of `items`, in engine writes of at most `write_entries_max` entries
    /// (an item's entries always in one write). Returns what [`RecentVersions`] should learn
    /// once the whole batch is applied.
    fn apply(&self, items: &[(Arc<Item>, bool)]) -> Result<Vec<RecentUpdate>> {
        let injected = self.core.options.inject_failures.fetch_update(
            Ordering::AcqRel,
            Ordering::Acquire,
            |left| left.checked_sub(1),
        );
        if injected.is_ok() {
            return Err(IndexError::Internal("injected index failure".into()));
        }
        let catalog = Arc::clone(&self.catalog.read());
        let mut batch = WriteBatch::new();
        // Where each item's entries start in `batch`, and its sequence number.
        let mut starts: Vec<(usize, SeqNo)> = Vec::with_capacity(items.len());
        // Entries this batch already wrote: (tree, key) -> stored sequence number (None: gone).
        let mut written: HashMap<(TreeId, Vec<u8>), Option<SeqNo>> = HashMap::new();
        let mut learned = Vec::new();
        for (item, alone) in items {
            starts.push((batch.len(), item.seq));
            // A collection or index dropped since the write needs nothing any more.
            let Some(collection) = catalog.collections.get(&*item.collection) else {
                continue;
            };
            let indexes: Vec<&Arc<Index>> = collection
                .indexes
                .iter()
                .filter(|index| {
                    index.record.maintenance.is_async() && item.seq > index.record.first_seq
                })
                .collect();
            if indexes.is_empty() {
                continue;
            }
            let primary = &collection.primary;
            // The common case: a put queued by the write path (its stored value in hand) whose
            // document has no newer write pending. A newer write is queued before it commits,
            // so none has committed; and it will be applied after this one, by this worker. So
            // only the previous version is read, and the entries need no reads: delete the
            // previous value's, put the new one's.
            let newest = *alone && !item.delete && item.recovered.is_none();
            let fast_version = if newest { item.version() } else { None };
            let live = if fast_version.is_some() {
                None
            } else {
                self.engine.get(primary, item.pk())?
            };
            let newest = fast_version.is_some();
            let index_ids: Vec<u64> = indexes.iter().map(|index| index.record.id).collect();
            let remembered = if newest {
                self.recent
                    .before(&item.collection, item.pk(), item.seq, &index_ids)
            } else {
                learned.push(RecentUpdate::Forget {
                    collection: Arc::clone(&item.collection),
                    pk: item.pk().to_vec(),
                });
                None
            };
            let mut indexed = Vec::with_capacity(if newest { indexes.len() } else { 0 });
            let (version, previous) = if remembered.is_some() {
                (None, None)
            } else if newest {
                let previous =
                    self.engine
                        .get_at(primary, item.pk(), item.seq.saturating_sub(1))?;
                (None, previous)
            } else if let Some(recovered) = &item.recovered {
                (
                    recovered.version.clone(),
                    recovered
                        .previous
                        .clone()
                        .map(|(value, seq)| sift_lsm::Entry { value, seq }),
                )
            } else {
                let version = match (
                    item.delete,
                    self.engine.get_at(primary, item.pk(), item.seq)?,
                ) {
                    (false, Some(entry)) if entry.seq == item.seq => Some(entry.value),
                    (true, None) => None,
                    // Not this write's version: the write never committed.
                    _ => continue,
                };
                let previous =
                    self.engine
                        .get_at(primary, item.pk(), item.seq.saturating_sub(1))?;
                (version, previous)
            };
            let corrupt = |e: IndexError| {
                crate::kind::collection::corrupt_document(&item.collection, item.pk(), &e)
            };
            let version_envelope = fast_version
                .or(version.as_deref())
                .map(EnvelopeRef::decode)
                .transpose()
                .map_err(corrupt)?;
            let previous_envelope = previous
                .as_ref()
                .map(with_seq)
                .transpose()
                .map_err(corrupt)?;
            let live_envelope = live.as_ref().map(with_seq).transpose().map_err(corrupt)?;
            for index in indexes {
                let tree = index.stand_alone_tree()?;
                let new_value = version_envelope
                    .as_ref()
                    .and_then(|envelope| index.encoded_value(envelope, item.seq));
                let old_value = match remembered {
                    Some(remembered) => remembered
                        .values
                        .iter()
                        .find(|(id, _)| *id == index.record.id)
                        .and_then(|(_, value)| value.as_deref())
                        .map(std::borrow::Cow::Borrowed),
                    None => previous_envelope
                        .as_ref()
                        .and_then(|(envelope, seq)| index.encoded_value(envelope, *seq)),
                };
                if newest {
                    indexed.push((index.record.id, new_value.as_deref().map(Box::<[u8]>::from)));
                }
                let live_seq = live_envelope.as_ref().map(|(_, seq)| *seq);
                let live_value = live_envelope
                    .as_ref()
                    .and_then(|(envelope, seq)| index.encoded_value(envelope, *seq));
                if let Some(old_value) = &old_value {
                    if new_value.as_deref() != Some(old_value.as_ref()) {
                        let mut key = old_value.to_vec();
                        encode_pk(item.pk(), &mut key);
                        if newest
                            || self
                                .stored_seq(tree, &key, &written)?
                                .is_some_and(|stored| stored < item.seq)
                        {
                            batch.delete(tree, &key);
                            // A key names its pk, and the newest update is its document's only
                            // pending one: no later item of the batch asks for it.
                            if !newest {
                                written.insert((tree.id(), key), None);
                            }
                        }
                    }
                }
                if let Some(new_value) = &new_value {
                    let still_current = newest
                        || live_seq == Some(item.seq)
                        || live_value.as_deref() == Some(new_value.as_ref());
                    if still_current {
                        let mut key = new_value.to_vec();
                        encode_pk(item.pk(), &mut key);
                        if newest
                            || self
                                .stored_seq(tree, &key, &written)?
                                .is_none_or(|stored| stored < item.seq)
                        {
                            batch.put(tree, &key, &item.seq.to_be_bytes());
                            if !newest {
                                written.insert((tree.id(), key), Some(item.seq));
                            }
                        }
                    }
                }
            }
            if newest {
                learned.push(RecentUpdate::Indexed {
                    collection: Arc::clone(&item.collection),
                    pk: item.pk().to_vec(),
                    version: RecentVersion {
                        seq: item.seq,
                        values: indexed,
                    },
                });
            }
        }
        self.commit(&batch, &starts)?;
        Ok(learned)
    }

    /// Commits the entries of a batch of items (`starts`: where each item's entries start,
    /// and its sequence number): inserted unlogged, each at its item's sequence number, or,
    /// if the engine refuses that or an item is at or below `logged_through`, written through
    /// the log in slices (see the module comment, "Unlogged entries").
    fn commit(&self, batch: &WriteBatch, starts: &[(usize, SeqNo)]) -> Result<()> {
        if batch.is_empty() {
            return Ok(());
        }
        let mut sequences = Vec::with_capacity(batch.len());
        for (index, &(start, seq)) in starts.iter().enumerate() {
            let end = starts.get(index + 1).map_or(batch.len(), |next| next.0);
            sequences.resize(sequences.len() + (end - start), seq);
        }
        // Items come in sequence order, so the first is the oldest.
        let oldest = starts.first().map_or(0, |(_, seq)| *seq);
        if oldest > self.logged_through.get() {
            let newest = sequences.iter().copied().max().unwrap_or(0);
            if self.engine.insert_unlogged_at_sequence(batch, &sequences)?
                == UnloggedInsert::Inserted
            {
                // Before the items leave the queue (`finish`): see `AsyncCore::durable_through`.
                self.core
                    .unlogged_through
                    .fetch_max(newest, Ordering::AcqRel);
                return Ok(());
            }
        }
        // Through the log, in slices of at most `write_entries_max` entries cut between items:
        // each slice holds the engine's commit lock, which writers need too, only briefly
        // (applying twice is harmless, so a retry after a partial failure is too).
        let limit = self.core.options.write_entries_max.max(1);
        let mut boundaries = starts.iter().map(|(start, _)| *start).peekable();
        let mut slice = WriteBatch::new();
        for (index, entry) in batch.iter().enumerate() {
            while boundaries.next_if(|start| *start < index).is_some() {}
            if boundaries.peek() == Some(&index) && slice.len() >= limit {
                self.write_logged(std::mem::take(&mut slice))?;
            }
            let entry = entry.map_err(|e| {
                IndexError::Internal(format!("an index batch built by a worker is corrupt: {e}"))
            })?;
            match entry.kind {
                ValueKind::Delete => slice.delete_in(entry.tree, entry.key),
                ValueKind::Merge => slice.merge_in(entry.tree, entry.key, entry.value),
                ValueKind::Put => slice.put_in(entry.tree, entry.key, entry.value),
            }
        }
        self.write_logged(slice)
    }

    /// One logged slice of [`Worker::commit`], at fresh sequence numbers: from now on no
    /// entry of this worker may go in below its last one.
    fn write_logged(&self, slice: WriteBatch) -> Result<()> {
        if slice.is_empty() {
            return Ok(());
        }
        let entries = slice.len() as SeqNo;
        let first = self
            .engine
            .write_unthrottled(slice, &WriteOptions::default())?;
        let last = first + entries - 1;
        if last > self.logged_through.get() {
            self.logged_through.set(last);
        }
        Ok(())
    }

    /// The sequence number the entry `key` names now (this batch's writes first).
    fn stored_seq(
        &self,
        tree: &Tree,
        key: &[u8],
        written: &HashMap<(TreeId, Vec<u8>), Option<SeqNo>>,
    ) -> Result<Option<SeqNo>> {
        if let Some(stored) = written.get(&(tree.id(), key.to_vec())) {
            return Ok(*stored);
        }
        match self.engine.get(tree, key)? {
            Some(entry) => Ok(Some(entry_seq(tree, key, &entry.value)?)),
            None => Ok(None),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn indexed(
        collection: &Arc<str>,
        pk: &[u8],
        seq: SeqNo,
        values: &[(u64, Option<&[u8]>)],
    ) -> RecentUpdate {
        RecentUpdate::Indexed {
            collection: Arc::clone(collection),
            pk: pk.to_vec(),
            version: RecentVersion {
                seq,
                values: values
                    .iter()
                    .map(|(id, value)| (*id, value.map(Box::<[u8]>::from)))
                    .collect(),
            },
        }
    }

    #[test]
    fn remembered_values_serve_only_later_updates_of_the_same_document_and_indexes() {
        let items: Arc<str> = Arc::from("items");
        let other: Arc<str> = Arc::from("other");
        let mut recent = RecentVersions::default();
        recent.apply(vec![indexed(
            &items,
            b"a",
            10,
            &[(1, Some(b"x")), (2, None)],
        )]);
        let found = recent.before(&items, b"a", 11, &[1, 2]).map(|v| v.seq);
        assert_eq!(found, Some(10));
        assert!(
            recent.before(&items, b"a", 10, &[1]).is_none(),
            "not before itself"
        );
        assert!(
            recent.before(&items, b"a", 12, &[1, 3]).is_none(),
            "index 3 unknown"
        );
        assert!(recent.before(&items, b"b", 12, &[1]).is_none());
        assert!(recent.before(&other, b"a", 12, &[1]).is_none());
        // A newer version replaces it; a careful-path update forgets it.
        recent.apply(vec![indexed(&items, b"a", 15, &[(1, Some(b"y"))])]);
        let value = recent
            .before(&items, b"a", 16, &[1])
            .and_then(|v| v.values[0].1.as_deref().map(<[u8]>::to_vec));
        assert_eq!(value, Some(b"y".to_vec()));
        recent.apply(vec![RecentUpdate::Forget {
            collection: Arc::clone(&items),
            pk: b"a".to_vec(),
        }]);
        assert!(recent.before(&items, b"a", 16, &[1]).is_none());
        assert_eq!(recent.bytes, 0);
    }

    /// A lookup by borrowed parts finds the document remembered under the same collection and
    /// pk only, not one whose collection and pk split the same bytes differently.
    #[test]
    fn remembered_values_are_found_by_collection_and_pk_together() {
        let ab: Arc<str> = Arc::from("ab");
        let a: Arc<str> = Arc::from("a");
        let mut recent = RecentVersions::default();
        recent.apply(vec![indexed(&ab, b"c", 10, &[(1, Some(b"x"))])]);
        assert_eq!(recent.before(&ab, b"c", 11, &[1]).map(|v| v.seq), Some(10));
        assert!(recent.before(&a, b"bc", 11, &[1]).is_none());
        recent.apply(vec![RecentUpdate::Forget {
            collection: Arc::clone(&a),
            pk: b"bc".to_vec(),
        }]);
        assert_eq!(
            recent.before(&ab, b"c", 11, &[1]).map(|v| v.seq),
            Some(10),
            "forgetting another document's key forgot this one"
        );
        recent.apply(vec![RecentUpdate::Forget {
            collection: Arc::clone(&ab),
            pk: b"c".to_vec(),
        }]);
        assert!(recent.before(&ab, b"c", 11, &[1]).is_none());
        assert_eq!(recent.bytes, 0);
    }

    #[test]
    fn remembered_values_stay_under_their_byte_limit() {
        let items: Arc<str> = Arc::from("items");
        let mut recent = RecentVersions::default();
        let value = vec![7u8; 1000];
        for key in 0..40_000u32 {
            recent.apply(vec![indexed(
                &items,
                &key.to_be_bytes(),
                1,
                &[(1, Some(&value))],
            )]);
            assert!(recent.bytes <= RECENT_VERSIONS_BYTES_MAX);
        }
        let counted: usize = recent
            .documents
            .iter()
            .map(|((_, pk), version)| version.bytes(pk))
            .sum();
        assert_eq!(counted, recent.bytes);
        assert!(recent
            .before(&items, &39_999u32.to_be_bytes(), 2, &[1])
            .is_some());
    }
}
