//! The shared state behind a `Db` handle: what background threads and callers share.

use crate::db::write::WriteQueue;
use crate::fs::{FileLock, FileSystem};
use crate::hooks::FlushInfo;
use crate::key::{SeqNo, TreeId};
use crate::memtable::{ChunkPool, Memtable};
use crate::options::{Options, TreeOptions};
use crate::snapshot::SnapshotList;
use crate::sstable::{BlockCache, Table};
use crate::stats::EngineCounters;
use crate::version::set::{Version, VersionSet};
use crate::version::{table_file_name, FileMetaData, FileReaper};
use crate::wal::LogWriter;
use crate::{Error, Result};
use arc_swap::ArcSwap;
use parking_lot::{Condvar, Mutex};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A tree's identity and code-level options.
#[derive(Debug)]
pub(crate) struct TreeInfo {
    pub id: TreeId,
    pub name: Arc<str>,
    pub options: TreeOptions,
}

pub(crate) type TreeMap = Arc<BTreeMap<TreeId, Arc<TreeInfo>>>;

/// What a reader needs, swapped atomically on every memtable switch, flush and compaction, so
/// readers never take a lock.
pub(crate) struct SuperVersion {
    pub mem: Arc<Memtable>,
    /// Frozen memtables, newest first.
    pub imms: Vec<Arc<Memtable>>,
    pub version: Arc<Version>,
    pub trees: TreeMap,
    /// `DbState::files_epoch` when this super version was installed.
    pub files_epoch: u64,
}

/// Mutable engine state, under `DbInner::state`.
pub(crate) struct DbState {
    pub versions: VersionSet,
    pub mem: Arc<Memtable>,
    /// Frozen memtables, newest first.
    pub imms: Vec<Arc<Memtable>>,
    pub version: Arc<Version>,
    pub trees: TreeMap,
    /// Counts the version changes told to version listeners (those that add or remove files),
    /// so a listener's state and a reader's view can be matched: a listener told the change
    /// numbered `e` and a view whose `files_epoch()` is `e` describe the same files. Bumped
    /// before the super version holding the change is installed; the listeners are told after.
    pub files_epoch: u64,
    /// Set by a failed background job (or a failed WAL write); writes fail while it is set.
    pub bg_error: Option<BackgroundError>,
    /// A recovery from a recoverable `bg_error` is running (`DbInner::recover`): one at a time.
    pub recovering: bool,
    /// The flush started last, while it is not installed: (log number of its memtable, what
    /// its flush listeners were told). A retry of that memtable's flush tells the listeners
    /// the same, not a newer sequence bound (see `DbInner::flush_oldest_memtable`).
    pub flush_attempted: Option<(u64, Option<FlushInfo>)>,
    /// Table files written by failed jobs whose manifest record may have reached the manifest:
    /// removed by the recovery once it has rolled to a fresh manifest without them (or by the
    /// next open's sweep of unreferenced files).
    pub failed_job_files: Vec<u64>,
    /// Flushes and compactions started by the background loops, and closed-log syncs of the
    /// WAL presync thread, whose outcome (success, or the error they record) is not in the
    /// state yet, by start number; and the next number. A `Db::resume` waits for those
    /// started before it, so an error they hit is seen.
    pub background_attempts: BTreeSet<u64>,
    pub next_background_attempt: u64,
    pub shutting_down: bool,
    pub compactions_running: usize,
    pub flush_running: bool,
    pub manual_compactions: usize,
    /// Pauses of automatic compactions in force (`Db::pause_compactions`); none run while
    /// this is above zero.
    pub compactions_paused: usize,
    /// Tickets of the flush and compaction jobs running now (see `JobTicket`).
    pub running_jobs: BTreeSet<u64>,
    /// The ticket the next job gets.
    pub next_job_ticket: u64,
    /// A version edit's manifest record is being written with the state unlocked (see
    /// `DbInner::apply_edit`); no other edit may be prepared until it is installed.
    pub manifest_writing: bool,
}

/// The first delay before an automatic retry after a recoverable background error.
pub(crate) const BACKGROUND_ERROR_RETRY_INTERVAL_FIRST: Duration = Duration::from_millis(100);

/// A background failure that stops writes.
///
/// Recoverable: an I/O error while a flush or compaction reads its inputs, writes, syncs or
/// creates a table file, or while a manifest record (or a fresh manifest) is written or
/// synced. Nothing acknowledged depends on those files (the memtable and its log, or the
/// compaction's inputs, are all still there), so running the job again once the disk works
/// is safe: the engine retries by itself after a backoff, and `Db::resume` retries at once.
///
/// Fatal: everything else — corruption, a broken invariant (an edit the version set refuses),
/// a panic while writing the manifest, and any failure to write or sync a write-ahead log.
/// After a failed log append the log may end in part of a record, and after a failed log sync
/// the kernel may have dropped the dirty pages while a later sync reports success: whether an
/// unacknowledged write is durable is then unknown, and appending after it would hide a torn
/// record in the middle of the log. Only a reopen, which replays the log up to its last whole
/// record, recovers from that.
#[derive(Debug, Clone)]
pub(crate) struct BackgroundError {
    pub message: String,
    pub recoverable: bool,
    /// Retries that failed since the error was set.
    pub retries_failed: u32,
    /// When the next automatic retry is due.
    pub retry_at: Instant,
    /// Whether there are automatic retries (for the message).
    pub retries_automatically: bool,
}

impl std::fmt::Display for BackgroundError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.recoverable {
            write!(
                f,
                "{} (recoverable: {}, {} retries failed so far; Db::resume retries now)",
                self.message,
                if self.retries_automatically {
                    "the engine retries the failed work in the background"
                } else {
                    "automatic retries are off"
                },
                self.retries_failed
            )
        } else {
            write!(
                f,
                "{} (fatal: reopen the database to recover)",
                self.message
            )
        }
    }
}

/// Marks a flush or compaction job as running from before its compaction observers first run
/// until after its result (edit and emitted writes) is installed or abandoned, so
/// `Db::wait_for_running_jobs` can wait for every job that may have seen the observers'
/// state as it was before the call. Dropped without the state lock held.
pub(crate) struct JobTicket<'a> {
    inner: &'a DbInner,
    ticket: u64,
}

impl DbState {
    /// Registers a background flush or compaction about to start; returns its number, to
    /// pass to `end_background_attempt` once its outcome is recorded.
    pub fn begin_background_attempt(&mut self) -> u64 {
        let attempt = self.next_background_attempt;
        self.next_background_attempt += 1;
        self.background_attempts.insert(attempt);
        attempt
    }

    pub fn end_background_attempt(&mut self, attempt: u64) {
        self.background_attempts.remove(&attempt);
    }
}

impl<'a> JobTicket<'a> {
    pub fn new(inner: &'a DbInner) -> JobTicket<'a> {
        let mut state = inner.state.lock();
        let ticket = state.next_job_ticket;
        state.next_job_ticket += 1;
        state.running_jobs.insert(ticket);
        JobTicket { inner, ticket }
    }
}

impl Drop for JobTicket<'_> {
    fn drop(&mut self) {
        let mut state = self.inner.state.lock();
        state.running_jobs.remove(&self.ticket);
        self.inner.bg_cv.notify_all();
    }
}

/// Deletes table files once the last version referring to them is gone.
pub(crate) struct Reaper {
    pub dir: PathBuf,
    pub fs: Arc<dyn FileSystem>,
    pub failures: AtomicU64,
}

impl FileReaper for Reaper {
    fn reap(&self, file_number: u64) {
        if self
            .fs
            .remove(&self.dir.join(table_file_name(file_number)))
            .is_err()
        {
            // Left for the next open's sweep of unreferenced files.
            self.failures.fetch_add(1, Ordering::Relaxed);
        }
    }
}

pub(crate) struct DbInner {
    pub dir: PathBuf,
    pub options: Options,
    pub fs: Arc<dyn FileSystem>,
    pub state: Mutex<DbState>,
    /// Signalled when background work may be needed or has finished.
    pub bg_cv: Condvar,
    pub super_version: ArcSwap<SuperVersion>,
    /// Highest sequence number visible to reads.
    pub visible_sequence: AtomicU64,
    /// Highest sequence number handed out (only the write leader changes it).
    pub allocated_sequence: AtomicU64,
    pub write_queue: WriteQueue,
    /// Only the write leader touches it.
    pub wal: Mutex<Option<LogWriter>>,
    /// The next write-ahead log, created (and its directory entry synced) ahead of time by the
    /// flush thread, so the writer that freezes a full memtable does not create a file and sync
    /// the directory on its own thread: (file number, writer).
    pub spare_wal: Mutex<Option<(u64, LogWriter)>>,
    /// (log number, end of the disk blocks reserved for it) of the newest logs given blocks
    /// ahead of their appends: a spare at its creation, the active log by the presync thread
    /// (see `WAL_PREALLOCATE_AHEAD_BYTES`). Entries of logs older than the active one are
    /// dropped as the presync thread passes them.
    pub wal_reserved_ends: Mutex<Vec<(u64, u64)>>,
    /// Arena chunks of flushed memtables, for the next memtables (see `memtable/chunk_pool.rs`):
    /// at most `Options::memtable_chunk_pool_bytes_max` bytes.
    pub memtable_chunks: Arc<ChunkPool>,
    /// Linux thread ids of this database's running background threads (and of those a layer
    /// on top started with `Db::enter_background_thread`), by thread name, recorded as each
    /// starts and removed as it ends (tests check each thread's scheduling through
    /// `/proc/self/task/<id>`: by name alone they would find the threads of other databases
    /// open in the process).
    pub background_thread_ids: Mutex<Vec<(String, i64)>>,
    /// Unique among the databases opened by this process (a batch's `checked_by`).
    pub instance: u64,
    /// Set once writes must fail (a background error, or shutting down): writers check it
    /// without taking the state lock, which a flush or compaction holds while it syncs the
    /// manifest.
    pub writes_stopped: AtomicBool,
    /// Set (and signalled) by the write leader each time `WAL_PRESYNC_BYTES` more log bytes
    /// were written, and by each memtable switch: the WAL presync thread then syncs the closed
    /// logs (`closed_logs`) and writes back the active log but its tail through a second handle
    /// (`FileSystem::sync_data_hint`), so a synced write finds little left to sync.
    pub wal_presync_due: Mutex<bool>,
    pub wal_presync_cv: Condvar,
    /// Presyncs done (for tests).
    pub wal_presyncs: AtomicU64,
    /// Logs closed by memtable switches and not yet synced, oldest first. A switch does not
    /// sync the log it closes under the commit lock: the presync thread syncs it, or the next
    /// synced write does first if it comes sooner (see `sync_closed_logs`).
    pub closed_logs: Mutex<Vec<Arc<ClosedLog>>>,
    /// The `PreviousLog` record the active log still has to start with, as (number, bytes) of
    /// the log closed before it; written by the first commit into the active log. Only
    /// touched under the commit lock.
    pub previous_log_due: Mutex<Option<(u64, u64)>>,
    /// Closed logs synced since the last commit, as (number, bytes): the next commit appends
    /// a `LogSynced` record for each to the active log, before its own records.
    pub synced_log_markers: Mutex<Vec<(u64, u64)>>,
    /// Whether `synced_log_markers` holds anything (checked on every commit without locking).
    pub synced_log_markers_due: AtomicBool,
    pub snapshots: Arc<SnapshotList>,
    pub block_cache: Option<Arc<BlockCache>>,
    pub counters: Arc<EngineCounters>,
    pub tables: Arc<TableOpener>,
    pub closed: AtomicBool,
    pub directory_lock: Mutex<Option<Box<dyn FileLock>>>,
}

/// A log closed by a memtable switch that may still hold unsynced records.
pub(crate) struct ClosedLog {
    pub number: u64,
    /// The log's length when it was closed; nothing is appended after that.
    pub bytes: u64,
    /// `None` once synced (or given up because the log became obsolete). Held while syncing,
    /// so a second syncer waits for the first and then finds nothing left to do.
    pub writer: Mutex<Option<LogWriter>>,
    /// Why a sync of this log failed, if one did (touched only with `writer` locked). A
    /// failed fsync may have dropped the dirty pages while a retry reports success, so the
    /// log can never count as synced after that: every later syncer gets the error again.
    pub sync_failed: Mutex<Option<String>>,
}

/// Who syncs a closed log, for the counters.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum ClosedLogSyncer {
    /// The WAL presync thread, off the commit lock.
    Background,
    /// A synced write, under the commit lock, before it appends its own records.
    Writer,
}

/// Log bytes between two writebacks of the active WAL by the presync thread.
pub(crate) const WAL_PRESYNC_BYTES: u64 = 512 << 10;

/// How far past its length the presync thread reserves disk blocks for the active WAL (when
/// less than half of that is left). On ext4, an append that reaches a page with no block yet
/// takes the inode's block-map lock for writing, and writeback (the presync's own sync, or the
/// kernel's) holds that lock while it allocates blocks for earlier pages: the writer then waits
/// milliseconds inside `write`, under the commit lock. Appends into reserved blocks take no
/// such lock.
pub(crate) const WAL_PREALLOCATE_AHEAD_BYTES: u64 = 8 * WAL_PRESYNC_BYTES;

impl DbInner {
    /// Wakes the WAL presync thread (also at shutdown, so it sees `writes_stopped`).
    pub fn request_wal_presync(&self) {
        *self.wal_presync_due.lock() = true;
        self.wal_presync_cv.notify_one();
    }

    /// The WAL presync thread: each time it is asked to, until writes stop, syncs the closed
    /// logs and writes back the active log (but its tail, which the writer is appending to).
    pub fn wal_presync_loop(&self) {
        loop {
            {
                let mut due = self.wal_presync_due.lock();
                while !*due {
                    self.wal_presync_cv.wait(&mut due);
                }
                *due = false;
            }
            // Closed logs first: a synced write waits for them, and after a crash the records
            // of newer logs are only replayed once the older ones are known complete.
            if self.closed.load(Ordering::Acquire) {
                return;
            }
            // Registered, so a `Db::resume` waits for this sync's outcome (a failure is fatal).
            let attempt = self.state.lock().begin_background_attempt();
            let synced = self.sync_closed_logs(ClosedLogSyncer::Background);
            {
                let mut state = self.state.lock();
                state.end_background_attempt(attempt);
                self.bg_cv.notify_all();
                if let Err(e) = synced {
                    // A closed log that cannot be synced may lose acknowledged writes on a
                    // crash.
                    self.set_bg_error(&mut state, &e);
                    return;
                }
            }
            if self.writes_stopped.load(Ordering::Acquire) {
                // A background error: no write is acknowledged until it is cleared (a
                // recoverable one may be), so the active log gets nothing new; this thread
                // waits for the next request.
                continue;
            }
            let number = self.super_version.load().mem.wal_number();
            let path = self.dir.join(crate::version::wal_file_name(number));
            self.preallocate_active_log(&path, number);
            self.fs.sync_data_hint(&path);
            self.wal_presyncs.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Reserves blocks for the active log up to `WAL_PREALLOCATE_AHEAD_BYTES` past its length
    /// when less than half of that is reserved (see there why). A log that began as a spare
    /// usually has enough from its creation (see `wal_bytes_reserved_at_creation`), so this
    /// rarely runs while the writer appends to the same file: `fallocate` holds the inode lock
    /// that the writer's `write` needs.
    fn preallocate_active_log(&self, path: &Path, number: u64) {
        let Ok(length) = self.fs.file_size(path) else {
            return;
        };
        let reserved_end = {
            let mut reserved = self.wal_reserved_ends.lock();
            reserved.retain(|&(log, _)| log >= number);
            reserved
                .iter()
                .find(|&&(log, _)| log == number)
                .map_or(0, |&(_, end)| end)
        };
        if reserved_end >= length + WAL_PREALLOCATE_AHEAD_BYTES / 2 {
            return;
        }
        let end = length + WAL_PREALLOCATE_AHEAD_BYTES;
        if self.fs.preallocate_hint(path, end) {
            self.record_wal_reservation(number, end);
            EngineCounters::add(&self.counters.wal_preallocations, 1);
        }
    }

    /// Notes that log `number` has disk blocks reserved up to `end`.
    pub(crate) fn record_wal_reservation(&self, number: u64, end: u64) {
        let mut reserved = self.wal_reserved_ends.lock();
        match reserved.iter_mut().find(|(log, _)| *log == number) {
            Some(entry) => entry.1 = entry.1.max(end),
            None => reserved.push((number, end)),
        }
    }

    /// Bytes of disk blocks reserved for a spare log at its creation: enough for a whole
    /// memtable's records, so the presync thread (which reserves more only when less than half
    /// of `WAL_PREALLOCATE_AHEAD_BYTES` is left past the length) does not reserve again while
    /// the log is active.
    pub(crate) fn wal_bytes_reserved_at_creation(&self) -> u64 {
        self.options.memtable_bytes_max as u64 + WAL_PREALLOCATE_AHEAD_BYTES
    }

    /// Syncs every closed log not synced yet, oldest first, and queues a `LogSynced` marker
    /// for each (appended to the active log by the next commit). Safe to call from several
    /// threads: each log is synced once. Returns the first sync error (the log stays queued,
    /// so a later synced write fails on it too rather than being acknowledged).
    pub fn sync_closed_logs(&self, syncer: ClosedLogSyncer) -> Result<()> {
        let logs = self.closed_logs.lock().clone();
        for log in logs {
            let mut writer = log.writer.lock();
            let Some(open) = writer.as_mut() else {
                continue;
            };
            if let Some(message) = log.sync_failed.lock().as_ref() {
                return Err(Error::io(
                    open.path(),
                    std::io::Error::other(format!(
                        "an earlier sync of closed log {} failed: {message}",
                        log.number
                    )),
                ));
            }
            let started = std::time::Instant::now();
            if let Err(e) = open.sync() {
                *log.sync_failed.lock() = Some(e.to_string());
                return Err(e);
            }
            let (count, micros) = match syncer {
                ClosedLogSyncer::Background => (
                    &self.counters.closed_wal_syncs,
                    &self.counters.closed_wal_sync_micros,
                ),
                ClosedLogSyncer::Writer => (
                    &self.counters.closed_wal_syncs_by_writers,
                    &self.counters.closed_wal_sync_by_writer_micros,
                ),
            };
            EngineCounters::add(count, 1);
            EngineCounters::add_micros_since(micros, started);
            // The marker is queued before the log counts as synced: a synced write that finds
            // the log synced must also find its marker to append ahead of its own records.
            self.synced_log_markers.lock().push((log.number, log.bytes));
            self.synced_log_markers_due.store(true, Ordering::Release);
            *writer = None;
            drop(writer);
            self.closed_logs
                .lock()
                .retain(|other| !Arc::ptr_eq(other, &log));
        }
        Ok(())
    }

    /// Forgets closed logs numbered below `log_number` without syncing them: their records
    /// are in synced tables now, and recovery no longer reads them.
    pub fn forget_obsolete_closed_logs(&self, log_number: u64) {
        let obsolete: Vec<Arc<ClosedLog>> = {
            let mut logs = self.closed_logs.lock();
            let (obsolete, live) = logs.drain(..).partition(|log| log.number < log_number);
            *logs = live;
            obsolete
        };
        for log in obsolete {
            // A syncer holding it finishes first; then the handle is closed unsynced.
            if log.writer.lock().take().is_some() {
                EngineCounters::add(&self.counters.closed_wal_syncs_skipped, 1);
            }
        }
    }

    /// Rebuilds and installs the super version from the state. Call with the state locked.
    pub fn install_super_version(&self, state: &DbState) {
        self.super_version.store(Arc::new(SuperVersion {
            mem: Arc::clone(&state.mem),
            imms: state.imms.clone(),
            version: Arc::clone(&state.version),
            trees: Arc::clone(&state.trees),
            files_epoch: state.files_epoch,
        }));
    }

    pub fn table_path(&self, number: u64) -> PathBuf {
        self.dir.join(table_file_name(number))
    }

    /// The opened table of a live file (opened on first use and kept with the file metadata).
    pub fn table(&self, file: &Arc<FileMetaData>) -> Result<Arc<Table>> {
        self.tables.table(file)
    }

    pub fn check_open(&self) -> Result<()> {
        if self.closed.load(Ordering::Acquire) {
            return Err(Error::Closed("the database was closed".into()));
        }
        Ok(())
    }

    pub fn latest_sequence(&self) -> SeqNo {
        self.visible_sequence.load(Ordering::Acquire)
    }

    /// Records a fatal background failure: from now on writes fail, reads go on, until the
    /// database is reopened (see [`BackgroundError`]).
    pub fn set_bg_error(&self, state: &mut DbState, error: &Error) {
        self.record_bg_error(state, error, false);
    }

    /// Records the failure of a flush or compaction job (or of its manifest write): fatal or
    /// recoverable as [`DbInner::job_error_is_recoverable`] decides.
    pub fn set_job_bg_error(&self, state: &mut DbState, error: &Error) {
        let recoverable = Self::job_error_is_recoverable(state, error);
        self.record_bg_error(state, error, recoverable);
    }

    /// Whether a job's error is one the engine retries: an I/O error (the job's table files
    /// or manifest record; a log write that failed under a job's commit already recorded a
    /// fatal error, which stays), or the version set's refusal of an edit after an earlier
    /// manifest write failed (the recovery rolls to a fresh manifest).
    pub fn job_error_is_recoverable(state: &DbState, error: &Error) -> bool {
        match error {
            Error::Io { .. } => true,
            Error::Closed(_) => state.versions.write_failed(),
            _ => false,
        }
    }

    /// Keeps the first error (it explains the state), except that a fatal error replaces a
    /// recoverable one: once anything fatal happened, no retry may clear it.
    fn record_bg_error(&self, state: &mut DbState, error: &Error, recoverable: bool) {
        let replace = match &state.bg_error {
            None => true,
            Some(existing) => existing.recoverable && !recoverable,
        };
        if replace {
            if state.bg_error.is_none() {
                EngineCounters::add(&self.counters.background_errors, 1);
            }
            state.bg_error = Some(BackgroundError {
                message: error.to_string(),
                recoverable,
                retries_failed: 0,
                retry_at: Instant::now() + self.retry_delay(0),
                retries_automatically: self.retries_automatically(),
            });
        }
        self.writes_stopped.store(true, Ordering::Release);
        self.bg_cv.notify_all();
    }

    /// Whether the flush thread retries by itself (`Options::background_error_retry_interval_max_millis`
    /// above zero).
    pub fn retries_automatically(&self) -> bool {
        self.options.background_error_retry_interval_max_millis > 0
    }

    /// `Options::background_error_retry_interval_max_millis`.
    pub fn retry_interval_max(&self) -> Duration {
        Duration::from_millis(self.options.background_error_retry_interval_max_millis)
    }

    /// The wait before the next automatic retry once `retries_failed` retries have failed:
    /// `BACKGROUND_ERROR_RETRY_INTERVAL_FIRST`, doubled per failed retry, at most
    /// `retry_interval_max`.
    pub fn retry_delay(&self, retries_failed: u32) -> Duration {
        BACKGROUND_ERROR_RETRY_INTERVAL_FIRST
            .saturating_mul(1u32.checked_shl(retries_failed.min(16)).unwrap_or(u32::MAX))
            .min(self.retry_interval_max())
    }
}

/// Opens table files; shared with iterators that open tables lazily.
pub(crate) struct TableOpener {
    pub dir: PathBuf,
    pub fs: Arc<dyn FileSystem>,
    pub direct_reads: bool,
    pub mmap_reads: bool,
    pub block_cache: Option<Arc<BlockCache>>,
    pub counters: Arc<EngineCounters>,
}

impl TableOpener {
    pub fn table(&self, file: &Arc<FileMetaData>) -> Result<Arc<Table>> {
        if let Some(t) = file.table.get() {
            return Ok(Arc::clone(t));
        }
        let path = self.dir.join(table_file_name(file.number));
        let handle = self.open_file(&path)?;
        let table = Table::open(
            handle,
            file.number,
            self.block_cache.clone(),
            Arc::clone(&self.counters),
        )?;
        let _ = file.table.set(Arc::clone(&table));
        Ok(table)
    }

    fn open_file(&self, path: &std::path::Path) -> Result<Arc<dyn crate::fs::RandomAccessFile>> {
        if self.mmap_reads && !self.direct_reads {
            self.fs.open_mapped(path)
        } else {
            self.fs.open(path, self.direct_reads)
        }
    }

    /// The meta block `name` written by `collector` into a live file, with the file's path and
    /// the block's handle (for error messages). From the opened table when it is open (through
    /// the block cache); otherwise read with the footer and metaindex only, leaving the table
    /// unopened: rebuilding an in-memory index from one meta block per file then reads neither
    /// the index blocks nor the bloom filters of every table. Counted as one block read.
    pub fn meta_block(
        &self,
        file: &Arc<FileMetaData>,
        collector: &str,
        name: &str,
        ctx: &crate::sstable::ReadContext,
    ) -> Result<Option<crate::sstable::LiveMetaBlock>> {
        if let Some(table) = file.table.get() {
            let Some(handle) = table.meta_block_handle(collector, name) else {
                return Ok(None);
            };
            return Ok(table
                .meta_block_cached(collector, name, ctx)?
                .map(|bytes| (table.path().to_path_buf(), handle, bytes)));
        }
        let path = self.dir.join(table_file_name(file.number));
        let handle = self.open_file(&path)?;
        let Some(block) = crate::sstable::read_meta_block_unopened(&*handle, collector, name)?
        else {
            return Ok(None);
        };
        let disk_bytes = block.handle.size + crate::sstable::BLOCK_TRAILER_BYTES as u64;
        self.counters
            .blocks_read_from_disk
            .fetch_add(1, Ordering::Relaxed);
        self.counters
            .bytes_read_from_disk
            .fetch_add(disk_bytes, Ordering::Relaxed);
        if let Some(stats) = &ctx.stats {
            stats.blocks_read_from_disk.fetch_add(1, Ordering::Relaxed);
            stats
                .bytes_read_from_disk
                .fetch_add(disk_bytes, Ordering::Relaxed);
        }
        Ok(Some((path, block.handle, block.bytes.into())))
    }
}
