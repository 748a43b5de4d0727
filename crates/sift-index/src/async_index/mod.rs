//! Asynchronous index maintenance (Diff-Index §5): `async-simple` and `async-session`
//! composite indexes.
//!
//! A write to a collection with asynchronous indexes writes only its primary entry (and the
//! entries of its synchronous indexes); each of its documents is queued ([`queue`]) while the
//! engine batch is built, and the write is acknowledged once it is in the WAL. Background
//! workers owned by the `Database` ([`worker`]) do the sync-full work later: read the version
//! and the previous version, delete the old entry, insert the new one. Every entry carries the
//! sequence number of the base write it indexes (layout: `docs/format/index-encodings.md`,
//! "Asynchronous composite entries"), and the worker only deletes or overwrites an entry whose
//! number is older than the update it applies, so applying an update twice, or an old update
//! after a newer one, does no harm. Queries validate every candidate against the primary, so
//! a hit is always current; a recent write may be missing from the results until its update
//! is applied. [`session`] adds read-your-writes.
//!
//! # Index entries at their base write's sequence number, unlogged
//! A worker puts the entries of an update of base write `s` into the engine with
//! `Db::insert_unlogged_at_sequence`: at internal sequence number `s` (the number already
//! inside the entry's value), into the memtable holding `s` — the base write's own memtable —
//! without a WAL record and without the engine's commit lock, which user writers need (a
//! worker preempted while holding it made them wait; issue 5). `s` was handed out by the base
//! write, so the entry needs no number of its own and is never visible before its base write.
//! - Per-key order: an index key names its document, whose updates one worker applies in
//!   sequence order, so the internal numbers of an index key only grow and the newest
//!   component still holds the newest entry. When the engine refuses (the memtable of `s` is
//!   being flushed or gone: an update queued again at open, or a drain cut short by a
//!   shutdown), the worker
//!   writes through the log at fresh numbers as before (`Db::write_unthrottled`), and from
//!   then on writes every update at or below the last fresh number it took through the log too,
//!   so an older `s` never lands below one of its own entries (`worker.rs`).
//! - Snapshots: an entry inserted at `s` appears in a snapshot taken after the base write but
//!   before the worker applied it. That is the eventual consistency asynchronous indexes have
//!   anyway; queries validate every candidate against the primary.
//! - Durability: the entry is durable exactly when the memtable of `s` is flushed, together
//!   with its base write. Until then a crash loses both the entry and its base write's
//!   memtable, and the base write comes back from its log at open and is queued again
//!   (below). See "Replay" for what this means for the watermark.
//!
//! # Crash safety without a second log (Diff-Index §5.3)
//! - Drain before flush: a `FlushListener` blocks each memtable flush until every update
//!   queued up to the flush's sequence bound is applied, so an update is never lost with the
//!   log that held its base write, and its unlogged entries are in the memtable before the
//!   flush seals it (the engine makes a flush wait for unlogged inserts still running into its
//!   memtable, and refuses later ones). Logged writes use `Db::write_unthrottled`, which never
//!   waits for the flush that waits for them.
//! - Replay: the engine writes the logs it replays at open straight into L0 tables before the
//!   index layer can run, so instead of observing the replay, the index layer keeps a durable
//!   watermark `W` in the catalog tree (every base write `<= W` is indexed durably; written by
//!   a worker once a flush is installed (at most one per `watermark_interval`), after the
//!   workers' entries, and at close) and, at open, queues again every primary
//!   entry with a sequence number above `W` (found by reading only the components whose
//!   sequence range reaches above `W`). Entries applied twice are harmless (see above).
//!   The watermark is written through the log after the entries it covers, without a sync: a
//!   log survives a crash as a prefix of its records, so a watermark record that survived
//!   never claims more than survived of the entries written through the log (and one that
//!   did not leaves the older watermark, which only means a longer replay). A sync would hold
//!   the engine's commit lock for the length of an `fdatasync`, and every writer waits for
//!   that lock: on this kind of machine a few milliseconds, a backlog behind which an
//!   open-loop client's mean latency doubled. Entries inserted unlogged survive only once their
//!   memtable's flush is installed, so `W` never exceeds the engine's `Db::flushed_through`
//!   while unlogged entries above it exist (`AsyncCore::durable_through`). The case this
//!   rules out: a drain applies the updates of memtable `M` unlogged, the watermark is written
//!   and synced past `M`, and the process dies before `M`'s table is installed — the open
//!   would replay `M`'s base writes from the log but queue none of them again, and their
//!   entries would be lost. With the bound, `W` stays below `M`, and the open queues `M`'s base
//!   writes again. (So the watermark is requested after each flush is installed, not right
//!   after its drain.) Close flushes the memtables first
//!   if they hold unlogged entries, so a clean reopen queues nothing again.
//! - Versions kept for the replay: the updates queued again at open need the primary's
//!   versions above `W` and the one visible at `W` (to delete the entries of values a
//!   document no longer has). A compaction could drop those — in the crashed process after a
//!   drain abandoned at shutdown, or at open right after the log replay put the unindexed
//!   writes into L0 tables beside the older versions. So the engine keeps them: the database
//!   holds a `VersionRetention` at the durable watermark, and at open the engine starts with
//!   compactions paused until that retention is registered from the stored watermark (or,
//!   before any was written, from the asynchronous indexes' creation points). Since the
//!   watermark is written without a sync, the retention moves up to a written watermark only
//!   once the memtable holding its record is flushed (`Db::flushed_through` reaches the record's
//!   sequence number; a table install is synced): before that a crash may lose the record, and
//!   the recovery from the older watermark needs the versions above it. So the retention trails
//!   the written watermark by one flush.
//! - Failed index operations are retried with exponential backoff, never dropped; a batch
//!   that keeps failing is reported by [`Database::wait_until_indexed`](crate::Database::wait_until_indexed) and in the stats. A
//!   drain waits through such failures, and the flush with it (only a shutdown cuts the wait
//!   short): a flush that went on would delete the log of updates not applied yet. Updates
//!   left when a shutdown cuts it short stay above the watermark, so the next open queues them
//!   again.

pub mod queue;
pub(crate) mod sessions;

pub mod worker;

use crate::error::{IndexError, Result};
use parking_lot::{Mutex, RwLock};
use queue::{LagHistogram, UpdateQueue};
use sift_lsm::extension::{FlushInfo, FlushListener};
use sift_lsm::{
    Db, ReadOptions, SeqNo, Tree, TreeId, ValueKind, VersionRetention, WriteBatch, WriteOptions,
};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock, Weak};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Catalog-tree key of the durable watermark: every base write with a sequence number `<=`
/// the stored value (8 bytes, big-endian) has its asynchronous index updates applied.
pub const WATERMARK_KEY: &[u8] = b"async/indexed_through";

/// Options of asynchronous maintenance and sessions.
#[derive(Debug, Clone)]
pub struct AsyncIndexOptions {
    /// Background worker threads (each owns the documents whose key hashes to it).
    pub workers: usize,
    /// Most queued updates a worker takes at once (applied in engine writes of a few dozen
    /// entries each, see `worker.rs`).
    pub batch_items_max: usize,
    /// How long a worker lets updates gather before it applies fewer than a shard's wake-up
    /// count (64) of them, counted from when the oldest was queued; nobody waiting for them
    /// (`wait_until_indexed`, a flush drain, close) waits for this. Fewer, larger batches cost
    /// less per update (and a batch written through the log is a commit writers may have to
    /// wait for); the cost is up to this much more index lag.
    pub coalesce_wait: Duration,
    /// Least time between two watermark writes requested by flush drains (each is a small write
    /// under the engine's commit lock, which writers wait for); close always writes it.
    pub watermark_interval: Duration,
    /// Most index entries a worker commits per logged engine write, when it cannot insert them
    /// unlogged (each such write holds the engine's commit lock, which writers need too, while
    /// its entries go into the memtable). Unlogged inserts take no lock and are not sliced.
    pub write_entries_max: usize,
    /// First retry delay after a failed batch; doubled per failure up to `retry_backoff_max`.
    pub retry_backoff_initial: Duration,
    /// Longest retry delay.
    pub retry_backoff_max: Duration,
    /// Failed attempts after which `wait_until_indexed` and flush drains stop waiting for a
    /// batch and report it (the worker keeps retrying).
    pub failures_reported_after: u32,
    /// A session unused this long expires (Diff-Index: 30 minutes).
    pub session_idle_timeout: Duration,
    /// A session whose overlay would grow past this falls back to eventual consistency.
    pub session_overlay_bytes_max: usize,
    /// Nice value the workers give themselves (Linux; 0, the default, keeps the writers'
    /// priority). Index work is background work (Diff-Index's APS): at a lower priority a
    /// worker that wakes up is less likely to preempt a writer on a busy core. Not the default
    /// because on a machine short of CPU a low-priority worker falls behind: measured on a
    /// shared 2-core machine at nice 10, the index lag and the flush drains grew to about a
    /// second (the queue still drains before every flush, so nothing is lost).
    pub worker_nice: i32,
    /// Testing aid: each unit makes one index batch fail before it is written.
    #[doc(hidden)]
    pub inject_failures: Arc<AtomicU64>,
    /// Testing aid: runs at open just before the replay scan reads the primaries, where a
    /// background compaction may run (tests compact there).
    #[doc(hidden)]
    pub before_replay_scan: Option<TestHook>,
}

/// Testing aid: a function given the engine at a fixed point of `Database::open`
/// (`AsyncIndexOptions::before_replay_scan`, `DatabaseOptions::after_compactions_resumed`).
#[doc(hidden)]
#[derive(Clone)]
pub struct TestHook(pub Arc<dyn Fn(&Db) + Send + Sync>);

impl std::fmt::Debug for TestHook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("TestHook")
    }
}

impl Default for AsyncIndexOptions {
    fn default() -> Self {
        AsyncIndexOptions {
            workers: 1,
            batch_items_max: 256,
            coalesce_wait: Duration::from_millis(1),
            watermark_interval: Duration::from_secs(1),
            write_entries_max: 64,
            retry_backoff_initial: Duration::from_millis(1),
            retry_backoff_max: Duration::from_secs(1),
            failures_reported_after: 5,
            session_idle_timeout: Duration::from_mins(30),
            session_overlay_bytes_max: 8 << 20,
            worker_nice: 0,
            inject_failures: Arc::new(AtomicU64::new(0)),
            before_replay_scan: None,
        }
    }
}

/// What the asynchronous maintenance did so far (since open).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AsyncIndexStats {
    /// Updates waiting (or being applied).
    pub queue_length: u64,
    /// Age of the oldest waiting update, in microseconds.
    pub oldest_pending_us: u64,
    /// Updates queued since open.
    pub updates_queued: u64,
    /// Of them, queued again at open from the primary (above the durable watermark).
    pub updates_recovered: u64,
    /// Updates applied to the index trees since open.
    pub updates_applied: u64,
    /// Engine writes the workers committed.
    pub batches_written: u64,
    /// Failed batch attempts (each retried).
    pub failed_attempts: u64,
    /// The error of the most recent failed attempt.
    pub last_error: Option<String>,
    /// Whether some batch has failed `failures_reported_after` times and still waits.
    pub persistent_failure: bool,
    /// Memtable flushes that waited for the queue, the total wait, and drains cut short by a
    /// shutdown (their updates are queued again at the next open).
    pub flush_drains: u64,
    /// Time flushes spent waiting for the queue, in microseconds.
    pub flush_drain_wait_us: u64,
    /// Drains cut short by a shutdown.
    pub flush_drains_abandoned: u64,
    /// Every base write `<=` this is indexed, and a record saying so is durable in the catalog:
    /// the primaries' versions above it are kept for the replay after a crash.
    pub durable_watermark: SeqNo,
    /// The watermark last written to the catalog (written without a log sync, so durable only
    /// once its memtable is flushed, when it becomes `durable_watermark`; a crash before that
    /// may lose it, and the open replays from the older one).
    pub watermark_written: SeqNo,
    /// Lag between a base write being queued (its commit) and its index update committing:
    /// upper bounds of log2 buckets, in microseconds, and the largest lag seen.
    pub lag_us_p50: u64,
    /// 90th percentile of the lag, in microseconds.
    pub lag_us_p90: u64,
    /// 99th percentile of the lag, in microseconds.
    pub lag_us_p99: u64,
    /// 99.9th percentile of the lag, in microseconds.
    pub lag_us_p999: u64,
    /// The largest lag seen, in microseconds.
    pub lag_us_max: u64,
    /// (bucket upper bound in µs, updates) of every non-empty bucket.
    pub lag_histogram: Vec<(u64, u64)>,
    /// Sessions neither dropped nor expired.
    pub sessions_live: u64,
    /// Bytes held by the live sessions' overlays.
    pub session_overlay_bytes: u64,
}

#[derive(Debug, Default)]
pub(crate) struct Counters {
    pub recovered: AtomicU64,
    pub applied: AtomicU64,
    pub batches: AtomicU64,
    pub failed_attempts: AtomicU64,
    pub flush_drains: AtomicU64,
    pub flush_drain_wait_us: AtomicU64,
    pub flush_drains_abandoned: AtomicU64,
}

/// State shared by the database, its workers and the flush listener.
pub(crate) struct AsyncCore {
    pub options: AsyncIndexOptions,
    pub queue: UpdateQueue,
    pub counters: Counters,
    pub lag: LagHistogram,
    pub last_error: Mutex<Option<String>>,
    /// Where the watermark is written; set once the engine is open.
    pub catalog_tree: OnceLock<Tree>,
    /// A flush asked the first worker to write the watermark (the flush thread must not hold
    /// the engine: it could end up dropping the last handle and joining itself).
    pub watermark_requested: AtomicBool,
    /// Whether the watermark is worth writing (some asynchronous index exists or did).
    pub active: AtomicBool,
    pub durable_watermark: AtomicU64,
    /// The watermark last written (see `AsyncIndexStats::watermark_written`).
    pub watermark_written: AtomicU64,
    /// `(record's sequence number, watermark)` of written watermarks not known durable yet,
    /// oldest first (one per watermark write between two flushes: a few at most).
    pub watermarks_unsettled: Mutex<std::collections::VecDeque<(SeqNo, SeqNo)>>,
    /// The highest sequence number at which a worker inserted entries unlogged
    /// (`Db::insert_unlogged_at_sequence`): entries at numbers above the engine's
    /// `flushed_through` are in memtables only (see the module docs, "Replay").
    pub unlogged_through: AtomicU64,
    /// Keeps the primaries' versions above the durable watermark (see the module docs).
    pub retention: Mutex<Option<VersionRetention>>,
    pub sessions: Mutex<Vec<Weak<sessions::SessionState>>>,
    pub next_session_id: AtomicU64,
}

impl AsyncCore {
    pub fn new(options: AsyncIndexOptions) -> AsyncCore {
        AsyncCore {
            queue: UpdateQueue::new(options.workers.max(1)),
            options,
            counters: Counters::default(),
            lag: LagHistogram::default(),
            last_error: Mutex::new(None),
            catalog_tree: OnceLock::new(),
            watermark_requested: AtomicBool::new(false),
            active: AtomicBool::new(false),
            durable_watermark: AtomicU64::new(0),
            watermark_written: AtomicU64::new(0),
            watermarks_unsettled: Mutex::new(std::collections::VecDeque::new()),
            unlogged_through: AtomicU64::new(0),
            retention: Mutex::new(None),
            sessions: Mutex::new(Vec::new()),
            next_session_id: AtomicU64::new(1),
        }
    }

    /// Every base write `<= ` the result is indexed. `visible` must be read before the call
    /// (a write's items are queued before its sequence number becomes visible).
    pub fn indexed_through(&self, visible: SeqNo) -> SeqNo {
        match self.queue.lock().oldest_pending() {
            Some(oldest) => visible.min(oldest.saturating_sub(1)),
            None => visible,
        }
    }

    /// Waits until no update `<= seq` is pending. With `report_failures`, returns
    /// `Err((attempts, error))` once a batch holding one has failed `failures_reported_after`
    /// times, failing again during this wait. `Ok(false)` on shutdown or timeout.
    pub fn wait_for(
        &self,
        seq: SeqNo,
        timeout: Option<Duration>,
        report_failures: bool,
    ) -> std::result::Result<bool, (u32, String)> {
        let deadline = timeout.map(|t| Instant::now() + t);
        let mut state = self.queue.lock();
        let attempts_before = state.attempts();
        // Counted while waiting: workers do not hold back (coalesce) updates someone waits for.
        state.progress_waiters += 1;
        let outcome = loop {
            if state.pending_up_to(seq) == 0 {
                break Ok(true);
            }
            if report_failures {
                if let Some(failure) = state.failure_up_to(
                    seq,
                    self.options.failures_reported_after.max(1),
                    &attempts_before,
                ) {
                    break Err(failure);
                }
            }
            if state.shutting_down || deadline.is_some_and(|d| Instant::now() >= d) {
                break Ok(false);
            }
            self.queue.wake_workers();
            let retry_at = Instant::now() + Duration::from_millis(20);
            self.queue
                .wait_until(&self.queue.progress, &mut state, retry_at);
        };
        state.progress_waiters -= 1;
        outcome
    }

    /// Every base write `<=` the result has its index entries durable (once the logs written
    /// so far are synced): applied (`indexed_through`), and, if entries were inserted unlogged
    /// at numbers the engine has not flushed through, no further than that flush bound (those
    /// entries live in memtables only, and a crash loses them; the module docs, "Replay").
    pub fn durable_through(&self, engine: &Db, visible: SeqNo) -> SeqNo {
        // The queue first: a worker records `unlogged_through` before it removes the applied
        // items from the queue (under its lock), so an update found applied here has its
        // unlogged entries counted below.
        let indexed = self.indexed_through(visible);
        let unlogged = self.unlogged_through.load(Ordering::Acquire);
        let flushed = engine.flushed_through();
        if unlogged > flushed {
            indexed.min(flushed)
        } else {
            indexed
        }
    }

    /// Writes the watermark to the catalog tree if it moved (never blocks on a flush, never
    /// syncs the log), and moves the durable watermark and the retention up to the written
    /// watermarks whose records are now in tables.
    pub fn persist_watermark(&self, engine: &Db, visible: SeqNo) -> Result<()> {
        if !self.active.load(Ordering::Acquire) {
            return Ok(());
        }
        let Some(catalog_tree) = self.catalog_tree.get() else {
            return Ok(());
        };
        self.settle_watermarks(engine);
        let watermark = self.durable_through(engine, visible);
        if watermark <= self.watermark_written.load(Ordering::Acquire) {
            return Ok(());
        }
        let mut batch = WriteBatch::new();
        batch.put(catalog_tree, WATERMARK_KEY, &watermark.to_be_bytes());
        // Not synced (see the module docs, "Replay"): the retention waits for the flush.
        let mut unsettled = self.watermarks_unsettled.lock();
        let record = engine.write_unthrottled(batch, &WriteOptions::default())?;
        unsettled.push_back((record, watermark));
        drop(unsettled);
        self.watermark_written
            .fetch_max(watermark, Ordering::AcqRel);
        Ok(())
    }

    /// Makes durable the written watermarks whose records are in tables now: the durable
    /// watermark, and the retention of the primaries' versions, move up to the newest of them.
    pub fn settle_watermarks(&self, engine: &Db) {
        let flushed = engine.flushed_through();
        let mut settled = None;
        {
            let mut unsettled = self.watermarks_unsettled.lock();
            while let Some(&(record, watermark)) = unsettled.front() {
                if record > flushed {
                    break;
                }
                settled = Some(settled.map_or(watermark, |s: SeqNo| s.max(watermark)));
                unsettled.pop_front();
            }
        }
        if let Some(watermark) = settled {
            self.durable_watermark
                .fetch_max(watermark, Ordering::AcqRel);
            self.retain_versions_above(engine, watermark);
        }
    }

    /// Moves the retention of the primaries' versions up to `floor` (never down), or sets it.
    pub fn retain_versions_above(&self, engine: &Db, floor: SeqNo) {
        let mut retention = self.retention.lock();
        if retention.as_ref().is_none_or(|held| held.floor() < floor) {
            // The new guard is registered before the old one is released.
            let previous = retention.replace(engine.retain_versions_above(floor));
            drop(previous);
        }
    }

    /// Sets the retention at `floor` unless one is held (an asynchronous index was created
    /// at `floor`: the replay after a crash starts there until a watermark is written).
    pub fn ensure_retention(&self, engine: &Db, floor: SeqNo) {
        let mut retention = self.retention.lock();
        if retention.is_none() {
            *retention = Some(engine.retain_versions_above(floor));
        }
    }

    /// Asks the first worker to write the watermark soon.
    pub fn request_watermark(&self) {
        if self.active.load(Ordering::Acquire) {
            self.watermark_requested.store(true, Ordering::Release);
            self.queue.wake_workers();
        }
    }

    pub fn record_failure(&self, error: &str) {
        self.counters
            .failed_attempts
            .fetch_add(1, Ordering::Relaxed);
        *self.last_error.lock() = Some(error.to_string());
    }
}

/// The flush hook: drain, then, once the flush is installed, record the watermark
/// (Diff-Index Figure 5, "pause & drain"). Not before: the entries the drain inserted unlogged
/// are durable only with the flush's table (see the module docs, "Replay").
struct DrainBeforeFlush(Arc<AsyncCore>);

impl FlushListener for DrainBeforeFlush {
    fn after_flush(&self, _info: &FlushInfo) {
        self.0.request_watermark();
    }

    fn before_flush(&self, info: &FlushInfo) {
        let core = &self.0;
        if core.queue.lock().pending_up_to(info.sequence_upper_bound) == 0 {
            return;
        }
        let started = Instant::now();
        core.counters.flush_drains.fetch_add(1, Ordering::Relaxed);
        // Waits through failures (they are retried): a flush that went on would delete the
        // log of updates not applied yet. Only a shutdown cuts the wait short.
        let drained = core.wait_for(info.sequence_upper_bound, None, false);
        let waited_us = u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX);
        core.counters
            .flush_drain_wait_us
            .fetch_add(waited_us, Ordering::Relaxed);
        if !matches!(drained, Ok(true)) {
            core.counters
                .flush_drains_abandoned
                .fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// The asynchronous machinery a `Database` owns: the shared core and the worker threads.
/// Dropping it stops the workers without draining (the next open re-queues what is left).
pub(crate) struct AsyncIndexer {
    pub core: Arc<AsyncCore>,
    pub(crate) workers: Mutex<Vec<JoinHandle<()>>>,
    /// Names of the collections that queued items (see `collection_name`).
    collection_names: RwLock<Vec<Arc<str>>>,
}

impl std::fmt::Debug for AsyncIndexer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AsyncIndexer").finish_non_exhaustive()
    }
}

impl AsyncIndexer {
    /// The indexer and the flush listener to install in the engine options before opening.
    pub fn new(options: AsyncIndexOptions) -> (AsyncIndexer, Arc<dyn FlushListener>) {
        let core = Arc::new(AsyncCore::new(options));
        let listener: Arc<dyn FlushListener> = Arc::new(DrainBeforeFlush(Arc::clone(&core)));
        (
            AsyncIndexer {
                core,
                workers: Mutex::new(Vec::new()),
                collection_names: RwLock::new(Vec::new()),
            },
            listener,
        )
    }

    /// Queues the document writes of a batch about to commit (under the commit lock): the
    /// entries of `primary` in `batch`, whose first entry gets sequence number `first`. Reads
    /// them from the batch itself, so the write path gathers nothing for the queue.
    pub fn enqueue(&self, collection: &str, primary: TreeId, batch: &WriteBatch, first: SeqNo) {
        let now = Instant::now();
        // Read first: a store on every write would claim the line the workers read.
        if !self.core.active.load(Ordering::Relaxed) {
            self.core.active.store(true, Ordering::Release);
        }
        // Entry `i` of the batch gets sequence number `first + i`. The batch passed the
        // engine's checks (`Db::check_batch`), so every entry decodes.
        let writes = batch
            .iter()
            .zip(first..)
            .filter_map(|(entry, seq)| entry.ok().map(|entry| (entry, seq)))
            .filter(|(entry, _)| entry.tree == primary)
            .map(|(entry, seq)| {
                let version = (entry.kind != ValueKind::Delete).then(|| indexed_part(entry.value));
                (entry.key, seq, version)
            });
        self.core
            .queue
            .push_writes(collection, || self.collection_name(collection), writes, now);
    }

    /// The shared name of a collection for its queued items: one allocation per collection,
    /// not per write (writes queue under the engine's commit lock, and the worker would free
    /// each copy on another thread).
    fn collection_name(&self, collection: &str) -> Arc<str> {
        if let Some(name) = self
            .collection_names
            .read()
            .iter()
            .find(|name| ***name == *collection)
        {
            return Arc::clone(name);
        }
        let mut names = self.collection_names.write();
        if let Some(name) = names.iter().find(|name| ***name == *collection) {
            return Arc::clone(name);
        }
        let name: Arc<str> = Arc::from(collection);
        names.push(Arc::clone(&name));
        name
    }

    /// The write holding `first..=last` failed: its items never committed.
    pub fn cancel(&self, first: SeqNo, last: SeqNo) {
        self.core.queue.cancel(first, last);
    }

    /// A write committed: its items may now be applied (by a worker's next poll, or now if
    /// the workers are parked or the inbox filled up).
    pub fn committed(&self) {
        self.core.queue.wake_if_requested();
    }

    pub(crate) fn stop(&self) {
        self.core.queue.lock().shutting_down = true;
        self.core.queue.wake_workers();
        self.core.queue.progress.notify_all();
        for handle in self.workers.lock().drain(..) {
            let _ = handle.join();
        }
    }
}

impl Drop for AsyncIndexer {
    fn drop(&mut self) {
        self.stop();
    }
}

/// The part of a stored envelope the workers read: its header and attribute values, without
/// the document's JSON (an asynchronous index only indexes versions newer than itself, whose
/// envelopes carry their values, so `Index::encoded_value` never needs the JSON). The queue
/// copies only this. A value whose records do not add up is queued whole (the worker's decode
/// reports it).
fn indexed_part(envelope: &[u8]) -> &[u8] {
    attributes_end(envelope)
        .and_then(|end| envelope.get(..end))
        .unwrap_or(envelope)
}

/// Where the JSON starts in an envelope (`EnvelopeRef::doc_offset`), found by skipping the
/// attribute records without validating them (the worker decodes what is queued).
fn attributes_end(envelope: &[u8]) -> Option<usize> {
    use crate::envelope::{ENVELOPE_MAGIC, ENVELOPE_VERSION};
    if envelope.get(..2)? != [ENVELOPE_MAGIC, ENVELOPE_VERSION] {
        return None;
    }
    let (count, mut pos) = varint32_at(envelope, 2)?;
    for _ in 0..count {
        // `id: varint | type: u8 | length: varint | value`
        let (_, after_id) = varint32_at(envelope, pos)?;
        let (length, after_length) = varint32_at(envelope, after_id + 1)?;
        pos = after_length.checked_add(length as usize)?;
    }
    (pos <= envelope.len()).then_some(pos)
}

/// The varint32 at `pos` and the position after it.
fn varint32_at(bytes: &[u8], pos: usize) -> Option<(u32, usize)> {
    let mut value: u32 = 0;
    for (index, &byte) in bytes.get(pos..)?.iter().enumerate().take(5) {
        value |= u32::from(byte & 0x7F).checked_shl(7 * index as u32)?;
        if byte & 0x80 == 0 {
            return Some((value, pos + index + 1));
        }
    }
    None
}

/// A stored version: sequence number and value (`None`: a delete).
pub(crate) type Version = (SeqNo, Option<Vec<u8>>);

/// Whether a collection has an asynchronous index.
pub(crate) fn has_async_index(collection: &crate::kind::Collection) -> bool {
    collection
        .indexes
        .iter()
        .any(|index| index.record.maintenance.is_async())
}

/// The stored durable watermark, if one was ever written.
pub(crate) fn stored_watermark(engine: &Db, catalog_tree: &Tree) -> Result<Option<SeqNo>> {
    let Some(entry) = engine.get(catalog_tree, WATERMARK_KEY)? else {
        return Ok(None);
    };
    let bytes: [u8; 8] =
        entry
            .value
            .as_slice()
            .try_into()
            .map_err(|_| IndexError::CorruptCatalog {
                key: String::from_utf8_lossy(WATERMARK_KEY).into_owned(),
                message: format!(
                    "the index watermark is {} bytes, expected 8",
                    entry.value.len()
                ),
            })?;
    Ok(Some(SeqNo::from_be_bytes(bytes)))
}

/// Where the replay at open will start, read before any compaction may run (the engine is
/// opened with compactions paused): the stored watermark, or without one the lowest creation
/// point of the asynchronous indexes in the catalog; `None` if there is nothing to replay.
pub(crate) fn recovery_floor(engine: &Db, catalog_tree: &Tree) -> Result<Option<SeqNo>> {
    if let Some(watermark) = stored_watermark(engine, catalog_tree)? {
        return Ok(Some(watermark));
    }
    let mut floor: Option<SeqNo> = None;
    for item in engine.iter(catalog_tree, ReadOptions::default())? {
        let (key, value, _) = item?;
        if key.starts_with(b"index/") {
            let record: crate::catalog::IndexRecord = crate::catalog::decode_record(&key, &value)?;
            if record.maintenance.is_async() {
                floor = Some(floor.map_or(record.first_seq, |f| f.min(record.first_seq)));
            }
        }
    }
    Ok(floor)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::envelope::{Envelope, EnvelopeRef};
    use crate::value::AttrValue;

    /// The queued part of an envelope ends where its JSON starts, for every attribute type,
    /// ids of one and two varint bytes, and long strings (two-byte lengths).
    #[test]
    fn indexed_part_ends_where_the_json_starts() {
        let values = [
            AttrValue::Int(-5),
            AttrValue::Float(2.5),
            AttrValue::String("x".repeat(300)),
            AttrValue::String(String::new()),
            AttrValue::Time(1_600_000_000_000),
        ];
        for ids in [vec![1u32], vec![3, 200], vec![1, 2, 130, 20_000, 20_001]] {
            let attrs: Vec<(u32, AttrValue)> = ids
                .iter()
                .zip(values.iter().cycle())
                .map(|(id, value)| (*id, value.clone()))
                .collect();
            let envelope = Envelope {
                attrs,
                doc: br#"{"id":1}"#.to_vec(),
            }
            .encode();
            let decoded = EnvelopeRef::decode(&envelope).expect("decodes");
            assert_eq!(
                attributes_end(&envelope),
                Some(decoded.doc_offset()),
                "{ids:?}"
            );
            let part = indexed_part(&envelope);
            let reread = EnvelopeRef::decode(part).expect("the part decodes");
            assert_eq!(reread.attr_count(), ids.len());
            assert!(reread.doc().is_empty());
            for id in &ids {
                assert_eq!(reread.attr_encoded(*id), decoded.attr_encoded(*id));
            }
        }
        // Not an envelope, or cut inside its records: queued whole.
        assert_eq!(indexed_part(b"{}"), b"{}");
        let envelope = Envelope {
            attrs: vec![(1, AttrValue::String("abc".into()))],
            doc: Vec::new(),
        }
        .encode();
        let cut = &envelope[..envelope.len() - 1];
        assert_eq!(indexed_part(cut), cut);
    }
}
