//! The write path: group commit.
//!
//! Writes emitted by flushes and compactions (observers) bypass the queue and take the commit
//! lock directly, so they never wait behind a user writer stalled on that very job.
//!
//! Writers queue up; the writer at the front becomes the leader, takes the batches of the
//! writers behind it (up to a size limit), gives them consecutive sequence numbers, appends
//! them to the WAL with one flush (and one sync if any of them asked for it), inserts them into
//! the memtable, publishes the new visible sequence number and wakes the followers. Readers
//! never wait for any of this.

use crate::db::state::{ClosedLog, ClosedLogSyncer, DbInner, DbState, WAL_PRESYNC_BYTES};
use crate::key::{SeqNo, ValueKind, SEQ_MAX};
use crate::memtable::Memtable;
use crate::stats::EngineCounters;
use crate::version::wal_file_name;
use crate::wal::{ControlRecord, LogWriter};
use crate::write_batch::WriteBatch;
use crate::{Error, Result};
use parking_lot::{Condvar, Mutex};
use smallvec::{smallvec, SmallVec};
use std::collections::{HashMap, VecDeque};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Runs after an internal batch is in the memtable and before its sequence numbers become
/// visible: installs a flush's or compaction's version edit.
pub(crate) type CommitHook = Box<dyn FnOnce() -> Result<()> + Send>;

enum WriterKind {
    User,
    /// Freeze the active memtable (for `flush`).
    ForceSwitch,
    /// Builds its batch once its first sequence number is known (`Db::write_sequenced`);
    /// always committed alone, by its own thread.
    Sequenced,
}

/// Writers a group holds without allocating (more spill to the heap).
const GROUP_INLINE: usize = 4;
/// The first sequence number of each batch of a group, in group order.
pub(crate) type GroupFirsts = SmallVec<[SeqNo; GROUP_INLINE]>;

/// Builds a batch for a known first sequence number. An `Err` aborts the write.
pub(crate) type BatchBuilder<'a> = &'a mut dyn FnMut(SeqNo) -> Result<WriteBatch>;

struct PendingWriter {
    id: u64,
    batch: Option<WriteBatch>,
    sync: bool,
    kind: WriterKind,
}

#[derive(Default)]
struct QueueState {
    queue: VecDeque<PendingWriter>,
    next_id: u64,
    results: HashMap<u64, Result<SeqNo>>,
}

#[derive(Default)]
pub(crate) struct WriteQueue {
    state: Mutex<QueueState>,
    cv: Condvar,
}

/// How long a write leader spins for the commit lock held by an unthrottled commit before it
/// parks (see `lock_commit`).
const COMMIT_LOCK_SPIN: Duration = Duration::from_micros(200);

/// Group size limits, as in LevelDB: a small leader does not make itself wait for a big group.
const GROUP_BYTES_MAX: usize = 1 << 20;
const SMALL_BATCH_BYTES: usize = 128 << 10;

impl DbInner {
    pub(crate) fn write_batch(&self, batch: WriteBatch, sync: bool) -> Result<SeqNo> {
        self.check_open()?;
        self.validate_batch(&batch)?;
        if batch.is_empty() {
            return Ok(self.latest_sequence());
        }
        self.enqueue(Some(batch), sync, WriterKind::User, None)
    }

    /// Commits the batch `build` makes for its first sequence number. `build` runs in the
    /// calling thread under the commit lock, so no other write can take sequence numbers
    /// between the call and the commit; it should only assemble the batch (reads are fine, they
    /// take no write lock).
    pub(crate) fn write_sequenced(&self, sync: bool, build: BatchBuilder<'_>) -> Result<SeqNo> {
        self.check_open()?;
        self.enqueue(None, sync, WriterKind::Sequenced, Some(build))
    }

    /// Freezes the active memtable (if it holds anything) so a flush picks it up.
    pub(crate) fn force_memtable_switch(&self) -> Result<()> {
        self.enqueue(None, false, WriterKind::ForceSwitch, None)
            .map(|_| ())
    }

    pub(crate) fn validate_batch(&self, batch: &WriteBatch) -> Result<()> {
        // The guard, not a clone of the tree map's `Arc`: nothing below blocks.
        let super_version = self.super_version.load();
        // Entries mostly name the tree of the entry before them: look a tree up when it changes.
        let mut tree_found = None;
        for entry in batch {
            let entry = entry.map_err(Error::InvalidArgument)?;
            if tree_found != Some(entry.tree) {
                if !super_version.trees.contains_key(&entry.tree) {
                    return Err(Error::TreeNotFound(format!("tree id {}", entry.tree)));
                }
                tree_found = Some(entry.tree);
            }
            if entry.key.len() > self.options.key_bytes_max {
                return Err(Error::InvalidArgument(format!(
                    "key of {} bytes exceeds key_bytes_max ({})",
                    entry.key.len(),
                    self.options.key_bytes_max
                )));
            }
            if entry.value.len() > self.options.value_bytes_max {
                return Err(Error::InvalidArgument(format!(
                    "value of {} bytes exceeds value_bytes_max ({})",
                    entry.value.len(),
                    self.options.value_bytes_max
                )));
            }
        }
        Ok(())
    }

    fn enqueue(
        &self,
        batch: Option<WriteBatch>,
        sync: bool,
        kind: WriterKind,
        build: Option<BatchBuilder<'_>>,
    ) -> Result<SeqNo> {
        let sequenced = matches!(kind, WriterKind::Sequenced);
        let mut queue = self.write_queue.state.lock();
        let id = queue.next_id;
        queue.next_id += 1;
        queue.queue.push_back(PendingWriter {
            id,
            batch,
            sync,
            kind,
        });
        loop {
            if let Some(result) = queue.results.remove(&id) {
                return result;
            }
            if queue.queue.front().is_some_and(|w| w.id == id) {
                break;
            }
            self.write_queue.cv.wait(&mut queue);
        }
        // Leader: take the group's batches out of the queue entries.
        // Inline: a write alone in its group (the common case) allocates nothing here.
        let mut group_ids: SmallVec<[u64; GROUP_INLINE]> = SmallVec::new();
        let mut batches: SmallVec<[WriteBatch; GROUP_INLINE]> = SmallVec::new();
        let mut group_sync = false;
        let mut force = false;
        let mut group_bytes = 0usize;
        for (i, writer) in queue.queue.iter_mut().enumerate() {
            let leader = i == 0;
            let joinable = matches!(writer.kind, WriterKind::User);
            if !leader && (!joinable || force || sequenced) {
                break;
            }
            let bytes = writer.batch.as_ref().map_or(0, WriteBatch::encoded_bytes);
            if !leader {
                let limit = if group_bytes <= SMALL_BATCH_BYTES {
                    group_bytes + SMALL_BATCH_BYTES
                } else {
                    GROUP_BYTES_MAX
                };
                if group_bytes + bytes > limit || (writer.sync && !group_sync) {
                    break;
                }
            }
            group_bytes += bytes;
            group_sync |= writer.sync;
            if matches!(writer.kind, WriterKind::ForceSwitch) {
                force = true;
            }
            if let Some(b) = writer.batch.take() {
                batches.push(b);
            }
            group_ids.push(writer.id);
        }
        drop(queue);

        let result = match build {
            Some(build) if sequenced => self
                .commit_sequenced(group_sync, build)
                .map(|first| smallvec![first]),
            _ => self.commit_group(&mut batches, group_sync, force),
        };

        let mut queue = self.write_queue.state.lock();
        for gid in &group_ids {
            if let Some(pos) = queue.queue.iter().position(|w| w.id == *gid) {
                queue.queue.remove(pos);
            }
        }
        // Each follower learns the first sequence number of its own batch.
        let mut own = Err(Error::Closed("write not committed".into()));
        match result {
            Ok(firsts) => {
                for (i, gid) in group_ids.iter().enumerate() {
                    let seq = firsts.get(i).copied().unwrap_or(0);
                    if *gid == id {
                        own = Ok(seq);
                    } else {
                        queue.results.insert(*gid, Ok(seq));
                    }
                }
            }
            Err(e) => {
                for gid in &group_ids {
                    if *gid == id {
                        own = Err(e.duplicate());
                    } else {
                        queue.results.insert(*gid, Err(e.duplicate()));
                    }
                }
            }
        }
        drop(queue);
        self.write_queue.cv.notify_all();
        own
    }

    /// Returns the first sequence number of each writer's batch, in group order (writers
    /// without a batch get the current sequence).
    fn commit_group(
        &self,
        batches: &mut [WriteBatch],
        sync: bool,
        force: bool,
    ) -> Result<GroupFirsts> {
        self.make_room_for_write(force)?;
        if batches.is_empty() {
            return Ok(smallvec![self.latest_sequence()]);
        }
        let mut wal = self.lock_commit();
        self.commit_locked(&mut wal, batches, sync, None)
    }

    /// [`crate::Db::sync_wal`]: under the commit lock, so no append races the sync and a
    /// failed sync stops writes like a failed synced commit does.
    pub(crate) fn sync_wal(&self) -> Result<()> {
        self.check_open()?;
        let mut wal = self.lock_commit();
        let synced = (|| {
            if !self.closed_logs.lock().is_empty() {
                self.sync_closed_logs(ClosedLogSyncer::Writer)?;
            }
            let writer = wal
                .as_mut()
                .ok_or_else(|| Error::Closed("no write-ahead log open".into()))?;
            writer.sync()
        })();
        if let Err(e) = synced {
            if !matches!(e, Error::Closed(_)) {
                let mut state = self.state.lock();
                self.set_bg_error(&mut state, &e);
            }
            return Err(e);
        }
        EngineCounters::add(&self.counters.wal_syncs, 1);
        Ok(())
    }

    /// The leader-only commit of a `Sequenced` writer.
    fn commit_sequenced(&self, sync: bool, build: BatchBuilder<'_>) -> Result<SeqNo> {
        self.make_room_for_write(false)?;
        let mut wal = self.lock_commit();
        let first = self.allocated_sequence.load(Ordering::Acquire) + 1;
        let batch = build(first)?;
        if batch.is_empty() {
            return Ok(self.latest_sequence());
        }
        // Checked by the builder (`Db::check_batch`) under this commit lock: not again.
        if !batch.is_checked_by(self.instance) {
            self.validate_batch(&batch)?;
        }
        let mut batches = [batch];
        let firsts = self.commit_locked(&mut wal, &mut batches, sync, None)?;
        let committed = firsts.first().copied().unwrap_or(0);
        debug_assert_eq!(committed, first, "the commit lock was held throughout");
        Ok(committed)
    }

    /// Sequence numbers, WAL append, memtable insert, hook, publish — all under the WAL lock,
    /// which is the commit lock. Lock order everywhere: WAL, then state.
    pub(crate) fn commit_locked(
        &self,
        wal: &mut Option<LogWriter>,
        batches: &mut [WriteBatch],
        sync: bool,
        hook: Option<CommitHook>,
    ) -> Result<GroupFirsts> {
        let mut next = self.allocated_sequence.load(Ordering::Acquire) + 1;
        let mut firsts = GroupFirsts::new();
        for b in batches.iter_mut() {
            b.set_sequence(next);
            firsts.push(next);
            next += b.len() as u64;
        }
        let last = next - 1;
        if last > SEQ_MAX {
            return Err(Error::InvalidArgument(
                "sequence numbers exhausted (2^56 writes)".into(),
            ));
        }
        let writer = wal
            .as_mut()
            .ok_or_else(|| Error::Closed("no write-ahead log open".into()))?;
        let before = writer.file_bytes();
        let logged = (|| {
            if let Some((number, bytes)) = self.previous_log_due.lock().take() {
                writer.add_record(&ControlRecord::PreviousLog { number, bytes }.encode())?;
            }
            if sync && !self.closed_logs.lock().is_empty() {
                // A synced write is durable only with everything before it: older logs first.
                self.sync_closed_logs(ClosedLogSyncer::Writer)?;
            }
            if self.synced_log_markers_due.load(Ordering::Acquire) {
                self.append_synced_log_markers(writer)?;
            }
            for b in batches.iter() {
                writer.add_record(b.encoded())?;
            }
            writer.flush()?;
            if sync {
                writer.sync()?;
                EngineCounters::add(&self.counters.wal_syncs, 1);
            }
            Ok::<(), Error>(())
        })();
        if let Err(e) = logged {
            // The log may now end in a partial record: no further write may follow it.
            let mut state = self.state.lock();
            self.set_bg_error(&mut state, &e);
            return Err(e);
        }
        let written = writer.file_bytes() - before;
        let logged_before = self
            .counters
            .wal_bytes
            .fetch_add(written, Ordering::Relaxed);
        if (logged_before + written) / WAL_PRESYNC_BYTES != logged_before / WAL_PRESYNC_BYTES {
            self.request_wal_presync();
        }
        EngineCounters::add(&self.counters.bytes_written, written);
        self.allocated_sequence.store(last, Ordering::Release);
        let mem = Arc::clone(&self.super_version.load().mem);
        let mut writes = 0u64;
        for b in batches.iter() {
            insert_into_memtable(&mem, b);
            writes += b.len() as u64;
        }
        EngineCounters::add(&self.counters.writes, writes);
        EngineCounters::add(&self.counters.write_groups, 1);
        if let Some(hook) = hook {
            // The writes are logged and in the memtable but invisible; if the edit fails the
            // database stops accepting writes and the next open replays them consistently.
            if let Err(e) = hook() {
                let mut state = self.state.lock();
                // The hook installs a job's edit (its own failure is already recorded, and
                // classified, by `apply_edit`).
                self.set_job_bg_error(&mut state, &e);
                self.visible_sequence.store(last, Ordering::Release);
                return Err(e);
            }
        }
        self.visible_sequence.store(last, Ordering::Release);
        Ok(firsts)
    }

    /// Commits a batch without queueing behind user writers, so without back-pressure either:
    /// logged (and synced with `sync`), then `hook` (a job's edit) runs, then the writes become
    /// visible. For background jobs' emitted writes (a user leader may be stalled waiting for
    /// this very job; a compaction commits them in pieces while it runs, unsynced and without
    /// a hook, and the rest synced with its edit: `DbInner::commit_job`) and for unthrottled
    /// writes (`hooks.rs`: index workers).
    pub(crate) fn write_internal(
        &self,
        batch: WriteBatch,
        sync: bool,
        hook: Option<CommitHook>,
    ) -> Result<SeqNo> {
        let mut wal = self.wal.lock();
        let held = Instant::now();
        let mut batches = [batch];
        // A synced write syncs its log under the commit lock, before it is published: a write
        // that a reader can see, or that is acknowledged, is durable. (Syncing through another
        // descriptor after releasing the lock could miss a writeback error already reported to
        // the writer's descriptor, and would publish the write before it is durable.)
        let committed = self.commit_locked(&mut wal, &mut batches, sync, hook);
        EngineCounters::add(&self.counters.unqueued_commits, 1);
        EngineCounters::add_micros_since(&self.counters.unqueued_commit_micros, held);
        if sync {
            EngineCounters::add(&self.counters.unqueued_commit_syncs, 1);
        }
        // Handed straight to a waiting writer: a committer that commits again at once (an
        // index worker, a compaction's next piece) must not take the lock back before the
        // writers queued behind it (parking_lot lets a thread barge in for up to half a
        // millisecond otherwise).
        parking_lot::MutexGuard::unlock_fair(wal);
        Ok(committed?.first().copied().unwrap_or(0))
    }

    /// Takes the commit (WAL) lock for a queued write leader, counting the time spent waiting
    /// for another committer (an unthrottled or internal write) to release it.
    fn lock_commit(&self) -> parking_lot::MutexGuard<'_, Option<LogWriter>> {
        if let Some(wal) = self.wal.try_lock() {
            return wal;
        }
        let start = Instant::now();
        // Spin first: the holder is an unthrottled commit (an index worker's group of entries,
        // tens of microseconds), and a leader that parks pays a wake-up on top, which on a busy
        // machine takes far longer than the commit it waited for.
        let mut spins = 0u32;
        while start.elapsed() < COMMIT_LOCK_SPIN {
            if let Some(wal) = self.wal.try_lock() {
                EngineCounters::add(&self.counters.commit_lock_waits, 1);
                EngineCounters::add_micros_since(&self.counters.commit_lock_wait_micros, start);
                return wal;
            }
            spins += 1;
            if spins.is_multiple_of(64) {
                std::thread::yield_now();
            } else {
                std::hint::spin_loop();
            }
        }
        let wal = self.wal.lock();
        EngineCounters::add(&self.counters.commit_lock_waits, 1);
        EngineCounters::add_micros_since(&self.counters.commit_lock_wait_micros, start);
        wal
    }

    /// Takes the state lock on the write path, counting the time spent waiting for it.
    pub(crate) fn lock_state_for_write(&self) -> parking_lot::MutexGuard<'_, DbState> {
        if let Some(state) = self.state.try_lock() {
            return state;
        }
        let start = Instant::now();
        let state = self.state.lock();
        EngineCounters::add_micros_since(&self.counters.write_state_lock_wait_micros, start);
        state
    }

    /// Makes sure the active memtable has room, freezing it when full (or when `force`), and
    /// applies back-pressure when flushes or L0 compactions fall behind.
    fn make_room_for_write(&self, mut force: bool) -> Result<()> {
        if !force && !self.writes_stopped.load(Ordering::Acquire) {
            // The common case, decided without the state lock: a flush or compaction holds it
            // while it syncs the manifest, which would stall every writer for milliseconds.
            // Only the write leader switches memtables, so the super version shows the active
            // one; the L0 count may be a moment old, as it would be a moment after locking.
            let current = self.super_version.load();
            if current.mem.approximate_bytes() < self.options.memtable_bytes_max
                && max_l0_files_in(&current.version) < self.options.l0_slowdown_trigger
            {
                return Ok(());
            }
        }
        let mut allow_delay = !force;
        loop {
            let state = self.lock_state_for_write();
            if let Some(e) = &state.bg_error {
                return Err(Error::Closed(format!(
                    "writes stopped after a background error: {e}"
                )));
            }
            if state.shutting_down {
                return Err(Error::Closed("the database is closing".into()));
            }
            let l0_files = max_l0_files(&state);
            if allow_delay && l0_files >= self.options.l0_slowdown_trigger {
                drop(state);
                let start = Instant::now();
                std::thread::sleep(Duration::from_millis(1));
                EngineCounters::add(&self.counters.write_slowdowns, 1);
                let waited = start.elapsed().as_micros() as u64;
                EngineCounters::add(&self.counters.write_stall_micros, waited);
                EngineCounters::add(&self.counters.write_slowdown_micros, waited);
                allow_delay = false;
                continue;
            }
            let mem_bytes = state.mem.approximate_bytes();
            if !force && mem_bytes < self.options.memtable_bytes_max {
                return Ok(());
            }
            if force && state.mem.is_empty() {
                return Ok(());
            }
            if state.imms.len() >= self.options.immutable_memtables_max
                || l0_files >= self.options.l0_stop_trigger
            {
                let mut state = state;
                let cause = if state.imms.len() >= self.options.immutable_memtables_max {
                    &self.counters.write_stop_memtables_micros
                } else {
                    &self.counters.write_stop_l0_micros
                };
                let start = Instant::now();
                EngineCounters::add(&self.counters.write_stalls, 1);
                self.bg_cv.notify_all();
                self.bg_cv.wait_for(&mut state, Duration::from_millis(100));
                let waited = start.elapsed().as_micros() as u64;
                EngineCounters::add(&self.counters.write_stall_micros, waited);
                EngineCounters::add(cause, waited);
                continue;
            }
            drop(state);
            // Lock order: WAL, then state.
            let mut wal = self.lock_commit();
            let switch_started = Instant::now();
            self.switch_memtable(&mut wal)?;
            EngineCounters::add(&self.counters.memtable_switches, 1);
            EngineCounters::add_micros_since(&self.counters.memtable_switch_micros, switch_started);
            force = false;
        }
    }

    /// Freezes the active memtable and starts a new WAL: the spare one the flush thread
    /// created ahead of time (see `prepare_spare_wal`), or a new one. Called by the write
    /// leader with the WAL (commit) lock held; the state lock is taken only to swap the
    /// memtables, not while files are created or synced.
    fn switch_memtable(&self, wal: &mut Option<LogWriter>) -> Result<()> {
        // Logs must be numbered in the order they get writes: recovery replays them by number.
        // A spare numbered before the active log (the flush thread took its number, then this
        // thread created a log itself before the spare was ready) is removed unused.
        let active = self.super_version.load().mem.wal_number();
        let spare = match self.spare_wal.lock().take() {
            Some((number, writer)) if number <= active => {
                let path = writer.path().to_path_buf();
                drop(writer);
                let _ = self.fs.remove(&path);
                None
            }
            spare => spare,
        };
        let (number, writer) = if let Some(spare) = spare {
            spare
        } else {
            let number = self.lock_state_for_write().versions.new_file_number();
            let path = self.dir.join(wal_file_name(number));
            let file = self.fs.create(&path)?;
            self.fs.sync_dir(&self.dir)?;
            (number, LogWriter::new(file, path))
        };
        if let Some(old) = wal.as_ref() {
            // The old log is not synced here, under the commit lock: the presync thread syncs
            // it, or the next synced write if it comes first. The new log's first record
            // (written by the first commit into it, so the switch itself writes nothing) names
            // the old log and its length, so recovery can tell that it was cut short by a crash
            // before that sync and then replays nothing newer (docs/format/wal.md). If the old
            // log never got a record, the record still to write names the log before it.
            self.previous_log_due
                .lock()
                .get_or_insert((active, old.file_bytes()));
        }
        if let Some(old) = wal.take() {
            self.closed_logs.lock().push(Arc::new(ClosedLog {
                number: active,
                bytes: old.file_bytes(),
                writer: Mutex::new(Some(old)),
                sync_failed: Mutex::new(None),
            }));
            self.request_wal_presync();
        }
        *wal = Some(writer);
        // Under the commit lock: the frozen memtable holds every number handed out so far,
        // the new one every later number (`Db::insert_unlogged_at_sequence` relies on it).
        let allocated = self.allocated_sequence.load(Ordering::Acquire);
        let mut state = self.lock_state_for_write();
        let frozen = std::mem::replace(
            &mut state.mem,
            Arc::new(self.new_memtable(number, allocated + 1)),
        );
        frozen.freeze_at(allocated);
        state.imms.insert(0, frozen);
        self.install_super_version(&state);
        // Notified after the unlock: a notify under the lock moves the flush thread onto the
        // state lock's queue, and the unlock may then hand the lock straight to it (parking_lot
        // does that now and then, for fairness) while it waits for a core, often behind a
        // compaction on a busy machine. This writer, taking the state lock again a moment
        // later, then waited that long: milliseconds, seen with `perf sched`.
        drop(state);
        self.bg_cv.notify_all();
        Ok(())
    }

    /// Appends a `LogSynced` record for each closed log synced since the last commit.
    fn append_synced_log_markers(&self, writer: &mut LogWriter) -> Result<()> {
        let markers = {
            let mut markers = self.synced_log_markers.lock();
            self.synced_log_markers_due.store(false, Ordering::Release);
            std::mem::take(&mut *markers)
        };
        for (number, bytes) in markers {
            writer.add_record(&ControlRecord::LogSynced { number, bytes }.encode())?;
        }
        Ok(())
    }

    /// Creates the next write-ahead log ahead of time, unless there is one already (called by
    /// the flush thread, outside every lock but the moment it takes a file number). An empty
    /// spare left behind by a crash or close is an empty log: recovery skips it, and the next
    /// open removes it with the other logs it no longer needs.
    pub(crate) fn prepare_spare_wal(&self) {
        if self.spare_wal.lock().is_some() || self.writes_stopped.load(Ordering::Acquire) {
            return;
        }
        let number = self.state.lock().versions.new_file_number();
        let path = self.dir.join(wal_file_name(number));
        let created = self.fs.create(&path).and_then(|file| {
            self.fs.sync_dir(&self.dir)?;
            Ok(file)
        });
        match created {
            Ok(file) => {
                // Blocks for the whole log now, while no writer appends to it (see
                // `preallocate_active_log`). Recorded before the spare is offered to a switch.
                let end = self.wal_bytes_reserved_at_creation();
                if self.fs.preallocate_hint(&path, end) {
                    self.record_wal_reservation(number, end);
                    EngineCounters::add(&self.counters.wal_preallocations_at_creation, 1);
                }
                // Never replace a spare stored meanwhile (by another caller): the replaced one
                // would stay on disk unused.
                let mut spare = self.spare_wal.lock();
                if spare.is_none() {
                    *spare = Some((number, LogWriter::new(file, path)));
                } else {
                    drop(spare);
                    drop(file);
                    let _ = self.fs.remove(&path);
                }
            }
            // Not an error of any write: the switch creates its log itself, and reports it if
            // that fails too.
            Err(_) => {
                let _ = self.fs.remove(&path);
            }
        }
    }
}

fn max_l0_files(state: &DbState) -> usize {
    max_l0_files_in(&state.version)
}

fn max_l0_files_in(version: &crate::version::set::Version) -> usize {
    version
        .trees
        .values()
        .map(|t| t.levels.first().map_or(0, Vec::len))
        .max()
        .unwrap_or(0)
}

/// Applies a batch whose sequence number is set to a memtable (in key order, see
/// `Memtable::add_batch`).
/// Batches up to this size skip `Memtable::add_batch` (see `insert_into_memtable`).
const SMALL_BATCH_ENTRIES: usize = 2;

pub(crate) fn insert_into_memtable(mem: &Memtable, batch: &WriteBatch) {
    // A batch of one or two entries (a document, maybe one index entry) is inserted entry by
    // entry: `add_batch`'s sort and temporary key buffer only pay off from a few entries on.
    if batch.len() <= SMALL_BATCH_ENTRIES {
        for (seq, entry) in (batch.sequence()..).zip(batch.iter().flatten()) {
            let value = if entry.kind == ValueKind::Delete {
                &[][..]
            } else {
                entry.value
            };
            mem.add(entry.tree, seq, entry.kind, entry.key, value);
        }
        return;
    }
    mem.add_batch(
        (batch.sequence()..)
            .zip(batch.iter().flatten())
            .map(|(seq, entry)| match entry.kind {
                ValueKind::Delete => (entry.tree, seq, ValueKind::Delete, entry.key, &[][..]),
                kind => (entry.tree, seq, kind, entry.key, entry.value),
            }),
    );
}

#[cfg(test)]
pub(super) mod tests {
    use crate::db::Db;
    use crate::options::Options;
    use crate::version::{parse_file_name, FileKind};
    use std::sync::atomic::Ordering;
    use std::sync::mpsc;
    use std::time::{Duration, Instant};

    /// Every entry is checked, whether or not it names the tree of the entry before it.
    #[test]
    fn validation_checks_every_entry_of_a_batch() {
        let dir = tempfile::tempdir().unwrap();
        let options = Options {
            key_bytes_max: 8,
            value_bytes_max: 8,
            ..Options::default()
        };
        let db = Db::open(dir.path(), options).unwrap();
        let default = db.default_tree().id();
        let other = db
            .create_tree("other", crate::TreeOptions::default())
            .unwrap()
            .id();
        let missing = other + 1;
        let validate = |entries: &[(u32, &[u8], &[u8])]| {
            let mut batch = crate::WriteBatch::new();
            for (tree, key, value) in entries {
                batch.put_in(*tree, key, value);
            }
            db.inner.validate_batch(&batch).map_err(|e| e.to_string())
        };
        assert_eq!(validate(&[]), Ok(()));
        let fine = [
            (default, &b"a"[..], &b"1"[..]),
            (default, b"b", b"2"),
            (other, b"c", b"3"),
            (other, b"d", b"4"),
            (default, b"e", b"5"),
        ];
        assert_eq!(validate(&fine), Ok(()));
        let missing_tree = format!("tree id {missing}");
        type Entry<'a> = (u32, &'a [u8], &'a [u8]);
        let bad: [(Entry, &str); 3] = [
            ((missing, b"x", b"y"), &missing_tree),
            (
                (default, b"too long a key", b"y"),
                "key of 14 bytes exceeds key_bytes_max (8)",
            ),
            (
                (other, b"k", b"too long a value"),
                "value of 16 bytes exceeds value_bytes_max (8)",
            ),
        ];
        for position in 0..=fine.len() {
            for (entry, expected) in &bad {
                let mut entries = fine.to_vec();
                entries.insert(position, *entry);
                let refused = validate(&entries).unwrap_err();
                assert!(
                    refused.contains(expected),
                    "{expected:?} at {position}: {refused}"
                );
            }
        }
    }

    fn small_memtable_options() -> Options {
        Options {
            memtable_bytes_max: 64 << 10,
            ..Options::default()
        }
    }

    fn wal_numbers(db: &Db) -> Vec<u64> {
        let mut numbers: Vec<u64> = std::fs::read_dir(db.path())
            .map(|entries| {
                entries
                    .flatten()
                    .filter_map(
                        |e| match parse_file_name(&e.file_name().to_string_lossy()) {
                            Some(FileKind::Wal(n)) => Some(n),
                            _ => None,
                        },
                    )
                    .collect()
            })
            .unwrap_or_default();
        numbers.sort_unstable();
        numbers
    }

    /// Waits until the flush thread has created the spare log; returns its number.
    fn spare_number(db: &Db) -> u64 {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Some((number, _)) = db.inner.spare_wal.lock().as_ref() {
                return *number;
            }
            assert!(Instant::now() < deadline, "no spare log after 10 s");
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    #[test]
    fn writes_do_not_wait_for_the_state_lock() {
        let dir = tempfile::tempdir().unwrap();
        let db = Db::open(dir.path(), Options::default()).unwrap();
        let tree = db.default_tree();
        db.put(&tree, b"before", b"1").unwrap();
        // A flush or compaction holds the state lock while it syncs the manifest.
        let held = db.inner.state.lock();
        let (sender, receiver) = mpsc::channel();
        std::thread::scope(|scope| {
            scope.spawn(|| {
                let result = db.put(&tree, b"during", b"2");
                sender.send(result.is_ok()).unwrap();
            });
            let finished = receiver.recv_timeout(Duration::from_secs(10));
            drop(held);
            assert_eq!(
                finished,
                Ok(true),
                "a write with room in the memtable waited for the state lock"
            );
        });
        assert_eq!(db.get(&tree, b"during").unwrap().unwrap().value, b"2");
    }

    #[test]
    fn a_spare_log_numbered_before_the_active_one_is_never_used() {
        let dir = tempfile::tempdir().unwrap();
        {
            let db = Db::open(dir.path(), Options::default()).unwrap();
            let tree = db.default_tree();
            spare_number(&db);
            db.inner.spare_wal.lock().take();
            // The race: the flush thread takes a number for its spare, then a writer freezes
            // the memtable and creates a newer log itself, then the spare is stored.
            let stale = db.inner.state.lock().versions.new_file_number();
            let path = db.path().join(crate::version::wal_file_name(stale));
            let file = db.inner.fs.create(&path).unwrap();
            for i in 0..100u32 {
                db.put(&tree, format!("key{i:03}").as_bytes(), b"old")
                    .unwrap();
            }
            db.inner.force_memtable_switch().unwrap();
            let active = db.inner.super_version.load().mem.wal_number();
            assert!(active > stale);
            *db.inner.spare_wal.lock() = Some((stale, crate::wal::LogWriter::new(file, path)));
            for i in 0..100u32 {
                db.put(&tree, format!("key{i:03}").as_bytes(), b"new")
                    .unwrap();
            }
            db.inner.force_memtable_switch().unwrap();
            let after = db.inner.super_version.load().mem.wal_number();
            assert!(after > active, "switched to log {after} after log {active}");
            assert!(
                !wal_numbers(&db).contains(&stale),
                "the stale spare was not removed"
            );
            for i in 0..100u32 {
                db.put(&tree, format!("key{i:03}").as_bytes(), b"newest")
                    .unwrap();
            }
        }
        // Recovery replays the logs in number order: the newest versions win.
        let db = Db::open(dir.path(), Options::default()).unwrap();
        let tree = db.default_tree();
        db.compact_range(&tree, None, None).unwrap();
        for i in 0..100u32 {
            let entry = db
                .get(&tree, format!("key{i:03}").as_bytes())
                .unwrap()
                .unwrap();
            assert_eq!(entry.value, b"newest");
        }
    }

    /// Whether the file system under `dir` takes `preallocate_hint` (tests expect reserved
    /// blocks only where it does).
    fn file_system_can_reserve_blocks(dir: &std::path::Path) -> bool {
        use crate::fs::FileSystem;
        let probe = dir.join("probe");
        std::fs::write(&probe, b"x").unwrap();
        let can_reserve = crate::fs::StdFileSystem.preallocate_hint(&probe, 1 << 20);
        std::fs::remove_file(&probe).unwrap();
        can_reserve
    }

    /// The presync thread syncs the active log as it grows and reserves disk blocks ahead of it
    /// (where the file system can), without changing the log's length; a reopen replays
    /// exactly what was written, and closing stops the thread (the drop joins it).
    #[test]
    fn the_presync_thread_syncs_and_reserves_blocks_ahead_of_the_active_log() {
        use std::os::unix::fs::MetadataExt;
        let dir = tempfile::tempdir().unwrap();
        let can_reserve = file_system_can_reserve_blocks(dir.path());
        let value = vec![b'v'; 1000];
        let rounds = 2 * crate::db::state::WAL_PRESYNC_BYTES / 1000;
        {
            let db = Db::open(dir.path(), Options::default()).unwrap();
            let tree = db.default_tree();
            assert_eq!(db.inner.wal_presyncs.load(Ordering::Relaxed), 0);
            for i in 0..rounds {
                db.put(&tree, format!("key{i:08}").as_bytes(), &value)
                    .unwrap();
            }
            let deadline = Instant::now() + Duration::from_secs(10);
            while db.inner.wal_presyncs.load(Ordering::Relaxed) == 0 {
                assert!(
                    Instant::now() < deadline,
                    "no presync after {rounds} KB of log"
                );
                std::thread::sleep(Duration::from_millis(1));
            }
            let preallocations = db.stats().wal_preallocations;
            let number = db.inner.super_version.load().mem.wal_number();
            let metadata =
                std::fs::metadata(dir.path().join(crate::version::wal_file_name(number))).unwrap();
            if can_reserve {
                assert!(preallocations > 0, "no blocks reserved ahead of the log");
                // Reserved past the length; the length is only what was appended.
                assert!(
                    metadata.blocks() * 512 > metadata.len() + crate::db::state::WAL_PRESYNC_BYTES,
                    "{} bytes of blocks for a log of {} bytes",
                    metadata.blocks() * 512,
                    metadata.len()
                );
                assert!(
                    metadata.len() < rounds * 1100,
                    "log length {}",
                    metadata.len()
                );
            } else {
                assert_eq!(preallocations, 0);
            }
            // Dropped without a flush: the reopen replays the log.
        }
        let db = Db::open(dir.path(), Options::default()).unwrap();
        let tree = db.default_tree();
        for i in 0..rounds {
            let entry = db.get(&tree, format!("key{i:08}").as_bytes()).unwrap();
            assert_eq!(entry.map(|e| e.value), Some(value.clone()), "key {i}");
        }
        assert_eq!(db.stats().wal_recovery_dropped_records, 0);
        db.close().unwrap();
    }

    /// A spare log gets disk blocks for a whole memtable when the flush thread creates it, so
    /// the presync thread, which would otherwise reserve while the writer appends to the same
    /// file, reserves nothing more as that log fills; its length stays what was appended and a
    /// reopen replays every write.
    #[test]
    fn a_spare_log_gets_its_blocks_at_creation_and_the_presync_reserves_none_while_it_fills() {
        use std::os::unix::fs::MetadataExt;
        let dir = tempfile::tempdir().unwrap();
        let can_reserve = file_system_can_reserve_blocks(dir.path());
        let options = Options {
            memtable_bytes_max: 8 << 20,
            ..Options::default()
        };
        let value = vec![b'v'; 1000];
        // Several presyncs' worth of log, well under a memtable.
        let rounds = 6 * (crate::db::state::WAL_PRESYNC_BYTES / 1000);
        {
            let db = Db::open(dir.path(), options.clone()).unwrap();
            let tree = db.default_tree();
            db.put(&tree, b"first", b"1").unwrap();
            let deadline = Instant::now() + Duration::from_secs(10);
            let spare = loop {
                if let Some((number, _)) = db.inner.spare_wal.lock().as_ref() {
                    break *number;
                }
                assert!(Instant::now() < deadline, "no spare log was created");
                std::thread::sleep(Duration::from_millis(1));
            };
            let spare_path = dir.path().join(crate::version::wal_file_name(spare));
            let metadata = std::fs::metadata(&spare_path).unwrap();
            assert_eq!(metadata.len(), 0, "a spare log holds no record");
            let reserved = db.inner.wal_bytes_reserved_at_creation();
            assert!(reserved >= options.memtable_bytes_max as u64);
            if can_reserve {
                assert_eq!(db.stats().wal_preallocations_at_creation, 1);
                assert!(
                    metadata.blocks() * 512 >= reserved,
                    "{} bytes of blocks for a spare that should have {reserved}",
                    metadata.blocks() * 512
                );
            } else {
                assert_eq!(db.stats().wal_preallocations_at_creation, 0);
            }
            let presyncs_before_switch = db.inner.wal_presyncs.load(Ordering::Relaxed);
            db.inner.force_memtable_switch().unwrap();
            assert_eq!(db.inner.super_version.load().mem.wal_number(), spare);
            // The switch asks for a presync before it installs the new log, so that presync may
            // still see (and reserve for) the log it closed; later ones see the spare.
            let deadline = Instant::now() + Duration::from_secs(10);
            while db.inner.wal_presyncs.load(Ordering::Relaxed) == presyncs_before_switch {
                assert!(Instant::now() < deadline, "no presync after the switch");
                std::thread::sleep(Duration::from_millis(1));
            }
            let preallocations_before = db.stats().wal_preallocations;
            // One presync per `WAL_PRESYNC_BYTES` appended, each awaited (requests made while
            // one runs are merged), so the presync thread sees the log at every length.
            let per_presync = crate::db::state::WAL_PRESYNC_BYTES / 1000;
            for chunk in 0..rounds / per_presync {
                let presyncs_before = db.inner.wal_presyncs.load(Ordering::Relaxed);
                for i in chunk * per_presync..(chunk + 1) * per_presync {
                    db.put(&tree, format!("key{i:08}").as_bytes(), &value)
                        .unwrap();
                }
                let deadline = Instant::now() + Duration::from_secs(10);
                while db.inner.wal_presyncs.load(Ordering::Relaxed) == presyncs_before {
                    assert!(Instant::now() < deadline, "no presync after chunk {chunk}");
                    std::thread::sleep(Duration::from_millis(1));
                }
            }
            assert_eq!(db.inner.super_version.load().mem.wal_number(), spare);
            assert_eq!(
                db.stats().wal_preallocations,
                preallocations_before,
                "the presync thread reserved blocks for a log that had them from its creation"
            );
            let metadata = std::fs::metadata(&spare_path).unwrap();
            assert!(
                metadata.len() >= rounds * 1000,
                "log length {}",
                metadata.len()
            );
            assert!(
                metadata.len() < rounds * 1100,
                "log length {}",
                metadata.len()
            );
            if can_reserve {
                assert!(metadata.blocks() * 512 >= reserved);
            }
            // Dropped without a flush: the reopen replays both logs.
        }
        let db = Db::open(dir.path(), options).unwrap();
        let tree = db.default_tree();
        assert_eq!(
            db.get(&tree, b"first").unwrap().map(|e| e.value),
            Some(b"1".to_vec())
        );
        for i in 0..rounds {
            let entry = db.get(&tree, format!("key{i:08}").as_bytes()).unwrap();
            assert_eq!(entry.map(|e| e.value), Some(value.clone()), "key {i}");
        }
        assert_eq!(db.stats().wal_recovery_dropped_records, 0);
        db.close().unwrap();
    }

    #[test]
    fn writes_fail_after_a_background_error_without_taking_the_state_lock_first() {
        let dir = tempfile::tempdir().unwrap();
        let db = Db::open(dir.path(), Options::default()).unwrap();
        let tree = db.default_tree();
        db.put(&tree, b"a", b"1").unwrap();
        {
            let mut state = db.inner.state.lock();
            db.inner
                .set_bg_error(&mut state, &crate::Error::Closed("injected".into()));
        }
        let error = db.put(&tree, b"b", b"2").unwrap_err();
        assert!(error.to_string().contains("injected"), "{error}");
        let mut batch = crate::WriteBatch::new();
        batch.put(&tree, b"c", b"3");
        assert!(db
            .write_unthrottled(batch, &crate::WriteOptions::default())
            .is_err());
    }

    /// Holds every flush in `before_flush` while closed: no table is written and no directory
    /// synced by a flush until it opens.
    #[derive(Default)]
    pub(in crate::db) struct FlushGate {
        closed: parking_lot::Mutex<bool>,
        changed: parking_lot::Condvar,
    }

    impl FlushGate {
        pub(in crate::db) fn set_closed(&self, closed: bool) {
            *self.closed.lock() = closed;
            self.changed.notify_all();
        }
    }

    impl crate::hooks::FlushListener for FlushGate {
        fn before_flush(&self, _info: &crate::hooks::FlushInfo) {
            let mut closed = self.closed.lock();
            while *closed {
                self.changed.wait(&mut closed);
            }
        }
    }

    /// Power loss (unsynced bytes and directory changes not made durable vanish) after synced
    /// writes went through switches to spare logs, the last one with its memtable's flush
    /// held (so no flush syncs the directory after the switch): every acknowledged write is
    /// recovered, so each spare's directory entry was durable before it got writes, the old
    /// logs were complete before the new ones got writes, and recovery replayed them in order.
    #[test]
    fn synced_writes_in_spare_logs_survive_a_power_loss() {
        let fs = crate::fs::FaultFileSystem::new();
        let dir = std::path::Path::new("/spare-power-loss");
        let gate = std::sync::Arc::new(FlushGate::default());
        let options = Options {
            file_system: std::sync::Arc::new(fs.clone()),
            memtable_bytes_max: 8 << 10,
            flush_listeners: vec![gate.clone()],
            ..Options::default()
        };
        let sync = crate::WriteOptions { sync: true };
        let mut written = Vec::new();
        let db = Db::open(dir, options.clone()).unwrap();
        let tree = db.default_tree();
        let mut i = 0u32;
        let mut put = |db: &Db, written: &mut Vec<String>| {
            let key = format!("key{i:06}");
            let mut batch = crate::WriteBatch::new();
            batch.put(&tree, key.as_bytes(), format!("value{i}").as_bytes());
            db.write(batch, &sync).unwrap();
            written.push(key);
            i += 1;
            assert!(i < 100_000, "the memtable never switched");
        };
        for round in 0..3 {
            let spare = spare_number(&db);
            if round == 2 {
                gate.set_closed(true);
            }
            let active = db.inner.super_version.load().mem.wal_number();
            while db.inner.super_version.load().mem.wal_number() == active {
                put(&db, &mut written);
            }
            assert_eq!(
                db.inner.super_version.load().mem.wal_number(),
                spare,
                "the switch did not take the spare log"
            );
        }
        for _ in 0..10 {
            put(&db, &mut written);
        }
        fs.crash();
        gate.set_closed(false);
        drop(db);
        let options = Options {
            file_system: std::sync::Arc::new(fs.clone()),
            flush_listeners: Vec::new(),
            ..options
        };
        let db = Db::open(dir, options).unwrap();
        let tree = db.default_tree();
        for (i, key) in written.iter().enumerate() {
            let entry = db.get(&tree, key.as_bytes()).unwrap();
            assert_eq!(
                entry.map(|e| e.value),
                Some(format!("value{i}").into_bytes()),
                "acknowledged synced write {key} lost"
            );
        }
    }

    #[test]
    fn a_full_memtable_switches_to_the_spare_log_made_by_the_flush_thread() {
        let dir = tempfile::tempdir().unwrap();
        let mut written = Vec::new();
        {
            let db = Db::open(dir.path(), small_memtable_options()).unwrap();
            let tree = db.default_tree();
            let spare = spare_number(&db);
            let active = db.inner.super_version.load().mem.wal_number();
            assert!(spare > active, "spare {spare} not after active {active}");
            assert!(wal_numbers(&db).contains(&spare), "the spare is on disk");
            let mut i = 0u32;
            while db.inner.super_version.load().mem.wal_number() == active {
                let key = format!("key{i:06}");
                db.put(&tree, key.as_bytes(), &[b'v'; 100]).unwrap();
                written.push(key);
                i += 1;
                assert!(i < 100_000, "the memtable never switched");
            }
            assert_eq!(db.inner.super_version.load().mem.wal_number(), spare);
            // The flush thread makes the next spare; the writes go on.
            let next = spare_number(&db);
            assert!(next > spare);
            for _ in 0..10 {
                let key = format!("key{i:06}");
                db.put(&tree, key.as_bytes(), &[b'v'; 100]).unwrap();
                written.push(key);
                i += 1;
            }
        }
        // The empty spare left behind is skipped by recovery and removed by the open.
        let db = Db::open(dir.path(), small_memtable_options()).unwrap();
        let tree = db.default_tree();
        for key in &written {
            assert!(
                db.get(&tree, key.as_bytes()).unwrap().is_some(),
                "{key} lost"
            );
        }
        let active = db.inner.super_version.load().mem.wal_number();
        assert!(
            wal_numbers(&db).iter().all(|n| *n >= active),
            "logs older than the active one left: {:?} (active {active})",
            wal_numbers(&db)
        );
    }

    #[test]
    fn memtables_reuse_the_arena_chunks_of_flushed_ones() {
        let dir = tempfile::tempdir().unwrap();
        let options = small_memtable_options();
        let mut model = std::collections::BTreeMap::new();
        {
            let db = Db::open(dir.path(), options.clone()).unwrap();
            let tree = db.default_tree();
            for i in 0..20_000u32 {
                // Overwrites and deletes too, so older versions sit in reused chunks' memtables.
                let key = format!("key{:05}", (i * 7919) % 5000);
                if i % 5 == 4 {
                    db.delete(&tree, key.as_bytes()).unwrap();
                    model.remove(&key);
                } else {
                    let value = format!("{i}-{}", "v".repeat((i % 97) as usize));
                    db.put(&tree, key.as_bytes(), value.as_bytes()).unwrap();
                    model.insert(key, value);
                }
            }
            db.wait_for_background_work().unwrap();
            let stats = db.stats();
            assert!(stats.memtable_switches >= 10, "{stats:?}");
            assert!(stats.memtable_chunks_reused > 0, "{stats:?}");
            assert!(
                stats.memtable_chunk_pool_bytes <= 2 * options.memtable_bytes_max as u64,
                "{stats:?}"
            );
            let read = |db: &Db| -> Vec<(String, String)> {
                let mut iter = db.iter(&tree, crate::ReadOptions::default()).unwrap();
                iter.seek_to_first().unwrap();
                let mut out = Vec::new();
                while iter.valid() {
                    out.push((
                        String::from_utf8(iter.key().to_vec()).unwrap(),
                        String::from_utf8(iter.value().to_vec()).unwrap(),
                    ));
                    iter.next().unwrap();
                }
                out
            };
            let expected: Vec<(String, String)> = model.clone().into_iter().collect();
            assert_eq!(read(&db), expected);
        }
        let db = Db::open(dir.path(), options).unwrap();
        let tree = db.default_tree();
        for (key, value) in &model {
            assert_eq!(
                db.get(&tree, key.as_bytes())
                    .unwrap()
                    .map(|entry| entry.value),
                Some(value.clone().into_bytes()),
                "{key}"
            );
        }
    }

    #[test]
    fn a_chunk_pool_of_zero_bytes_keeps_no_chunks() {
        let dir = tempfile::tempdir().unwrap();
        let options = Options {
            memtable_chunk_pool_bytes_max: Some(0),
            ..small_memtable_options()
        };
        let db = Db::open(dir.path(), options).unwrap();
        let tree = db.default_tree();
        for i in 0..5000u32 {
            db.put(&tree, format!("key{i:05}").as_bytes(), &[b'v'; 100])
                .unwrap();
        }
        db.wait_for_background_work().unwrap();
        let stats = db.stats();
        assert!(stats.memtable_switches >= 3, "{stats:?}");
        assert_eq!(stats.memtable_chunks_reused, 0, "{stats:?}");
        assert_eq!(stats.memtable_chunk_pool_bytes, 0, "{stats:?}");
        assert!(stats.memtable_chunks_freed > 0, "{stats:?}");
        for i in (0..5000u32).step_by(97) {
            let value = db.get(&tree, format!("key{i:05}").as_bytes()).unwrap();
            assert_eq!(
                value.map(|entry| entry.value),
                Some(vec![b'v'; 100]),
                "key{i:05}"
            );
        }
    }
}
