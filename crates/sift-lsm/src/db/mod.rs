//! `Db`: the public engine API.

use crate::key::{SeqNo, TreeId};
use crate::options::{Options, ReadOptions, TreeOptions, WriteOptions};
use crate::snapshot::{Snapshot, VersionRetention};
use crate::stats::{EngineCounters, Stats};
use crate::write_batch::{WriteBatch, ENTRY_OVERHEAD_BYTES_MAX};
use crate::{Error, Result};
use parking_lot::Mutex;
use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::thread::JoinHandle;

mod checkpoint;
mod compact;
mod flush;
mod hooks;
mod open;
#[cfg(test)]
mod pause_tests;
mod read;
mod recover;
#[cfg(test)]
mod recover_tests;
mod state;
#[cfg(test)]
mod switch_sync_tests;
#[cfg(test)]
mod unlogged_tests;
mod write;

pub use hooks::{UnloggedInsert, UnloggedRefusal};
pub use read::ComponentView;
use state::{DbInner, TreeInfo};

/// A handle on a named tree. Cheap to clone. Using it after the tree was dropped gives
/// `Error::TreeNotFound`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Tree {
    id: TreeId,
    name: Arc<str>,
}

impl Tree {
    pub(crate) fn new(id: TreeId, name: Arc<str>) -> Self {
        Tree { id, name }
    }
    /// The tree's id (stable for the tree's life).
    pub fn id(&self) -> TreeId {
        self.id
    }
    /// The tree's name.
    pub fn name(&self) -> &str {
        &self.name
    }
}

/// The name of the tree every database has.
pub const DEFAULT_TREE: &str = "default";

/// A value and the sequence number of the write that stored it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// The stored value.
    pub value: Vec<u8>,
    /// The sequence number of the write that stored it.
    pub seq: SeqNo,
}

/// One component of a tree in level-by-level reads, newest first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ComponentId {
    /// The active memtable.
    Memtable,
    /// A frozen memtable waiting for flush; 0 is the newest.
    ImmutableMemtable(usize),
    /// One L0 file (by file number); L0 files come newest first.
    Level0File(u64),
    /// A sorted level, 1 and deeper.
    Level(usize),
}

/// Answer of `newer_version_exists_above`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NewerVersion {
    /// No component above holds the key with a higher sequence number.
    No,
    /// A memtable above holds a newer version (certain).
    Yes,
    /// A table above may hold it (its bloom filter and key range pass); only a data-block read
    /// can tell.
    Maybe,
}

/// The database. `Send + Sync`: share it between threads by reference or `Arc`.
///
/// Dropping it closes it (waiting for background work to stop); `close` does the same and
/// reports errors.
pub struct Db {
    inner: Arc<DbInner>,
    threads: Mutex<Vec<JoinHandle<()>>>,
}

impl std::fmt::Debug for Db {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Db")
            .field("dir", &self.inner.dir)
            .finish_non_exhaustive()
    }
}

const TREE_NAME_BYTES_MAX: usize = 255;

/// Lowers the calling thread's CPU priority to `nice` (1–19), never raising it; 0 or less does
/// nothing. Best effort and Linux only (there a nice value set for a thread id applies to that
/// thread alone); a refusal leaves the priority unchanged.
pub fn lower_current_thread_priority(nice: i32) {
    if nice > 0 {
        lower_thread_priority(current_thread_id(), nice);
    }
}

/// Lowers the priority of the thread with Linux thread id `thread_id` to `nice`, as
/// [`lower_current_thread_priority`] does (for a caller that already has the id).
#[cfg(target_os = "linux")]
fn lower_thread_priority(thread_id: i64, nice: i32) {
    let nice = nice.min(19);
    if nice <= 0 {
        return;
    }
    let Ok(thread_id) = libc::id_t::try_from(thread_id) else {
        return;
    };
    // SAFETY: these calls take plain integers and touch no memory of ours.
    unsafe {
        if libc::getpriority(libc::PRIO_PROCESS, thread_id) < nice {
            libc::setpriority(libc::PRIO_PROCESS, thread_id, nice);
        }
    }
}

/// Lowers a thread's CPU priority: nothing to do outside Linux.
#[cfg(not(target_os = "linux"))]
fn lower_thread_priority(_thread_id: i64, _nice: i32) {}

/// The calling thread's Linux thread id (0 elsewhere).
fn current_thread_id() -> i64 {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: gettid takes no arguments and touches no memory of ours.
        unsafe { libc::syscall(libc::SYS_gettid) }
    }
    #[cfg(not(target_os = "linux"))]
    {
        0
    }
}

/// Moves the calling thread to Linux's `SCHED_IDLE` policy: it then runs only on a core no
/// normal thread wants, and a normal thread that wakes up takes the core from it at once.
/// Best effort; a refusal leaves the policy unchanged.
#[cfg(target_os = "linux")]
pub fn move_current_thread_to_idle_policy() {
    let parameters = libc::sched_param { sched_priority: 0 };
    // SAFETY: `parameters` outlives the call, which only reads it; pid 0 names the caller.
    unsafe {
        libc::sched_setscheduler(0, libc::SCHED_IDLE, &raw const parameters);
    }
}

/// Moves the calling thread to an idle scheduling policy: nothing to do outside Linux.
#[cfg(not(target_os = "linux"))]
pub fn move_current_thread_to_idle_policy() {}

/// Which engine thread a spawned thread is, for the priority it gives itself.
#[derive(Clone, Copy, PartialEq, Eq)]
enum ThreadRole {
    Flush,
    Compaction,
    /// Issues fsyncs that writers would otherwise wait for: keeps the caller's priority.
    WalPresync,
}

impl Db {
    /// Opens (or creates) the database in `path`.
    pub fn open(path: impl AsRef<Path>, options: Options) -> Result<Db> {
        Db::open_impl(path.as_ref(), options)
    }

    fn start(inner: Arc<DbInner>) -> Result<Db> {
        let mut threads = Vec::new();
        let background_nice = inner.options.background_thread_nice;
        let yield_to_foreground = inner.options.background_threads_yield_to_foreground;
        let mut spawn = |name: String, role: ThreadRole, f: Box<dyn FnOnce() + Send>| {
            let registry = Arc::clone(&inner);
            let thread_name = name.clone();
            let handle = std::thread::Builder::new()
                .name(name)
                .spawn(move || {
                    let registration = registry.enter_background_thread(thread_name);
                    let thread_id = registration.thread_id;
                    drop(registry);
                    if role != ThreadRole::WalPresync {
                        lower_thread_priority(thread_id, background_nice);
                        if yield_to_foreground {
                            // Flushes keep the normal policy: writers stall when they fall
                            // behind, and under `SCHED_IDLE` they would share a core with
                            // compactions on equal terms.
                            if role == ThreadRole::Compaction {
                                move_current_thread_to_idle_policy();
                            }
                            crate::pacing::enable_for_current_thread();
                        }
                    }
                    f();
                    drop(registration);
                })
                .map_err(|e| Error::io(&inner.dir, e))?;
            threads.push(handle);
            Ok::<(), Error>(())
        };
        let flusher = Arc::clone(&inner);
        let presyncer = Arc::clone(&inner);
        let mut started = spawn(
            "sift-flush".into(),
            ThreadRole::Flush,
            Box::new(move || flusher.flush_loop()),
        )
        .and_then(|()| {
            spawn(
                "sift-wal-presync".into(),
                ThreadRole::WalPresync,
                Box::new(move || presyncer.wal_presync_loop()),
            )
        });
        for i in 0..inner.options.compaction_threads.max(1) {
            if started.is_err() {
                break;
            }
            let compactor = Arc::clone(&inner);
            started = spawn(
                format!("sift-compact-{i}"),
                ThreadRole::Compaction,
                Box::new(move || compactor.compaction_loop()),
            );
        }
        let db = Db {
            inner,
            threads: Mutex::new(threads),
        };
        if let Err(e) = started {
            // Stop and join the threads already running, so a failed open leaks none.
            let _ = db.shutdown();
            return Err(e);
        }
        db.inner.bg_cv.notify_all();
        Ok(db)
    }

    fn shutdown(&self) -> Result<()> {
        if self.inner.closed.swap(true, Ordering::AcqRel) {
            return Ok(());
        }
        {
            let mut state = self.inner.state.lock();
            state.shutting_down = true;
            self.inner.writes_stopped.store(true, Ordering::Release);
            self.inner.bg_cv.notify_all();
        }
        self.inner.request_wal_presync();
        for handle in self.threads.lock().drain(..) {
            let _ = handle.join();
        }
        // Make everything acknowledged so far durable, even writes made without sync (the
        // logs closed by memtable switches first).
        let synced = self
            .inner
            .sync_closed_logs(crate::db::state::ClosedLogSyncer::Background)
            .and_then(|()| match self.inner.wal.lock().as_mut() {
                Some(wal) => wal.sync(),
                None => Ok(()),
            });
        *self.inner.directory_lock.lock() = None;
        synced
    }

    /// Stops background work, syncs the WAL and releases the LOCK.
    pub fn close(self) -> Result<()> {
        self.shutdown()
    }

    /// The directory of the database.
    pub fn path(&self) -> &Path {
        &self.inner.dir
    }

    /// The tree every database has ([`DEFAULT_TREE`]).
    pub fn default_tree(&self) -> Tree {
        self.tree(DEFAULT_TREE)
            .unwrap_or_else(|_| Tree::new(0, Arc::from(DEFAULT_TREE)))
    }

    /// Creates a tree; `options` also apply after reopening only if given again in
    /// `Options::tree_options`.
    pub fn create_tree(&self, name: &str, options: TreeOptions) -> Result<Tree> {
        self.inner.check_open()?;
        if name.is_empty() || name.len() > TREE_NAME_BYTES_MAX {
            return Err(Error::InvalidArgument(format!(
                "tree names must be 1 to {TREE_NAME_BYTES_MAX} bytes, got {}",
                name.len()
            )));
        }
        let mut state = self.inner.state.lock();
        self.inner.wait_for_manifest(&mut state);
        if state.trees.values().any(|t| &*t.name == name) {
            return Err(Error::TreeExists(name.to_owned()));
        }
        let id = state.versions.state.next_tree_id;
        let mut edit = crate::version::edit::VersionEdit {
            trees_created: vec![(id, name.to_owned())],
            next_tree_id: Some(id + 1),
            ..Default::default()
        };
        if let Err(e) = state.versions.log_and_apply(&mut edit) {
            if state.versions.write_failed() {
                // The manifest takes no more edits until the recovery rolls to a fresh one: no
                // flush could be recorded either.
                self.inner.set_job_bg_error(&mut state, &e);
            }
            return Err(e);
        }
        crate::stats::EngineCounters::add(&self.inner.counters.manifest_writes, 1);
        state.version = Arc::new(state.versions.version());
        let mut trees = (*state.trees).clone();
        let name: Arc<str> = Arc::from(name);
        trees.insert(
            id,
            Arc::new(TreeInfo {
                id,
                name: Arc::clone(&name),
                options,
            }),
        );
        state.trees = Arc::new(trees);
        self.inner.install_super_version(&state);
        Ok(Tree::new(id, name))
    }

    /// The tree named `name`, if it exists.
    pub fn tree(&self, name: &str) -> Result<Tree> {
        self.inner
            .super_version
            .load()
            .trees
            .values()
            .find(|t| &*t.name == name)
            .map(|t| Tree::new(t.id, Arc::clone(&t.name)))
            .ok_or_else(|| Error::TreeNotFound(name.to_owned()))
    }

    /// Drops a tree and deletes its files. The default tree cannot be dropped.
    pub fn drop_tree(&self, name: &str) -> Result<()> {
        self.inner.check_open()?;
        if name == DEFAULT_TREE {
            return Err(Error::InvalidArgument(
                "the default tree cannot be dropped".into(),
            ));
        }
        let tree = self.tree(name)?;
        let mut state = self.inner.state.lock();
        while state.compactions_running > 0 || state.manifest_writing {
            // A running compaction of this tree would re-add files to it; an edit being
            // written must be installed before this one is checked.
            self.inner.bg_cv.wait(&mut state);
        }
        let mut edit = crate::version::edit::VersionEdit {
            trees_dropped: vec![tree.id()],
            ..Default::default()
        };
        let before = Arc::clone(&state.trees);
        let mut trees = (*state.trees).clone();
        trees.remove(&tree.id());
        state.trees = Arc::new(trees);
        let dropped = self.inner.apply_edit(
            &mut state,
            &mut edit,
            crate::extension::ChangeReason::DropTree,
        );
        if dropped.is_err() {
            // The manifest still has the tree: so must the engine, or a flush after a
            // recovery would skip its writes and then delete the log holding them.
            state.trees = before;
            self.inner.install_super_version(&state);
        }
        dropped
    }

    /// The names of every tree.
    pub fn tree_names(&self) -> Vec<String> {
        self.inner
            .super_version
            .load()
            .trees
            .values()
            .map(|t| t.name.to_string())
            .collect()
    }

    /// Returns the sequence number given to the write.
    pub fn put(&self, tree: &Tree, key: &[u8], value: &[u8]) -> Result<SeqNo> {
        let mut batch =
            WriteBatch::with_capacity(ENTRY_OVERHEAD_BYTES_MAX + key.len() + value.len());
        batch.put(tree, key, value);
        self.write(batch, &WriteOptions::default())
    }
    /// Deletes `key`; returns the write's sequence number.
    pub fn delete(&self, tree: &Tree, key: &[u8]) -> Result<SeqNo> {
        let mut batch = WriteBatch::new();
        batch.delete(tree, key);
        self.write(batch, &WriteOptions::default())
    }
    /// Merges `operand` into `key` (the tree needs a merge operator).
    pub fn merge(&self, tree: &Tree, key: &[u8], operand: &[u8]) -> Result<SeqNo> {
        let mut batch =
            WriteBatch::with_capacity(ENTRY_OVERHEAD_BYTES_MAX + key.len() + operand.len());
        batch.merge(tree, key, operand);
        self.write(batch, &WriteOptions::default())
    }
    /// Applies the batch atomically; returns the sequence number of its first entry (entry `i`
    /// gets `first + i`).
    pub fn write(&self, batch: WriteBatch, options: &WriteOptions) -> Result<SeqNo> {
        self.inner.write_batch(batch, options.sync)
    }
    /// Makes every write acknowledged so far durable: fdatasyncs the logs closed by memtable
    /// switches and the active log. For "sync once a second" policies (`sift serve --fsync
    /// everysec`): writes without [`WriteOptions::sync`] are in the operating system once
    /// acknowledged (they survive the process, not the machine) until this runs. Writers wait
    /// for the sync (it holds the commit lock); the presync thread keeps what is left to sync
    /// under `WAL_PRESYNC_BYTES`.
    pub fn sync_wal(&self) -> Result<()> {
        self.inner.sync_wal()
    }
    /// The checks every write applies to its batch before committing it: each tree exists,
    /// and every key and value is within `key_bytes_max` / `value_bytes_max`. A
    /// [`Db::write_sequenced`] builder that acts on its batch (queues work for the sequence
    /// numbers it names) checks it first, so a batch the commit would refuse leaves no trace;
    /// a batch that passed and is not changed afterwards is not checked again by this
    /// database's commit (under the same commit lock); another database checks it.
    pub fn check_batch(&self, batch: &mut WriteBatch) -> Result<()> {
        self.inner.validate_batch(batch)?;
        batch.mark_checked_by(self.inner.instance);
        Ok(())
    }
    /// Applies atomically the batch that `build` makes for the first sequence number it will
    /// get (entry `i` gets `first + i`), and returns that number. For layers that store a
    /// write's own sequence number inside the write (posting lists, index entries): no other
    /// write, including writes emitted by compaction observers, can take sequence numbers
    /// between `build` and the commit. `build` runs in the calling thread while the commit lock
    /// is held: it should only assemble the batch. If it fails, nothing is written and its
    /// error is returned; an empty batch writes nothing and returns the latest sequence number.
    pub fn write_sequenced<E: From<Error>>(
        &self,
        options: &WriteOptions,
        build: impl FnOnce(SeqNo) -> std::result::Result<WriteBatch, E>,
    ) -> std::result::Result<SeqNo, E> {
        let mut build = Some(build);
        let mut failure: Option<E> = None;
        let result = self.inner.write_sequenced(options.sync, &mut |first| {
            let Some(build) = build.take() else {
                return Err(Error::InvalidArgument("batch builder called twice".into()));
            };
            build(first).map_err(|e| {
                failure = Some(e);
                Error::InvalidArgument("the batch builder failed".into())
            })
        });
        match (result, failure) {
            (_, Some(e)) => Err(e),
            (Ok(first), None) => Ok(first),
            (Err(e), None) => Err(e.into()),
        }
    }
    /// The newest value of `key`.
    pub fn get(&self, tree: &Tree, key: &[u8]) -> Result<Option<Entry>> {
        self.get_with(tree, key, &ReadOptions::default())
    }
    /// The value of `key` as `options` say (snapshot, statistics).
    pub fn get_with(
        &self,
        tree: &Tree,
        key: &[u8],
        options: &ReadOptions,
    ) -> Result<Option<Entry>> {
        self.inner.get(tree, key, options)
    }
    /// A consistent view of every tree as of now.
    pub fn snapshot(&self) -> Snapshot {
        // Registered under the state lock so a compaction picking its snapshot list either
        // sees this snapshot or started before its sequence number existed.
        let _state = self.inner.state.lock();
        self.inner.snapshots.acquire(self.inner.latest_sequence())
    }
    /// Keeps every version above `floor` (and the newest at or below it) through flushes and
    /// compactions that start while the returned guard lives; see [`VersionRetention`].
    pub fn retain_versions_above(&self, floor: SeqNo) -> VersionRetention {
        // Under the state lock, like `snapshot`.
        let _state = self.inner.state.lock();
        self.inner.snapshots.retain_above(floor)
    }
    /// Writes a consistent copy of the database into `dir` (which must not exist): every
    /// memtable is flushed, then the tables are hard-linked (copied where the file system
    /// cannot link) and described by a new manifest. Open the copy with [`Db::open`]; it holds
    /// every write acknowledged before this call and has no write-ahead log of its own.
    pub fn checkpoint(&self, dir: impl AsRef<Path>) -> Result<()> {
        self.flush()?;
        self.inner.checkpoint(dir.as_ref())
    }
    /// Pauses automatic compactions (running ones finish) until a matching
    /// [`Db::resume_compactions`]. Pauses nest. Flushes and manual compactions still run, and
    /// writes stall at `l0_stop_trigger` while paused.
    pub fn pause_compactions(&self) {
        self.inner.state.lock().compactions_paused += 1;
    }
    /// Ends one pause (also the one `Options::compactions_paused_at_open` starts with). Returns
    /// whether automatic compactions may run now; resuming with no pause in force is a no-op.
    pub fn resume_compactions(&self) -> bool {
        let mut state = self.inner.state.lock();
        state.compactions_paused = state.compactions_paused.saturating_sub(1);
        self.inner.bg_cv.notify_all();
        state.compactions_paused == 0
    }
    /// The newest sequence number visible to reads.
    pub fn latest_sequence(&self) -> SeqNo {
        self.inner.latest_sequence()
    }
    /// An iterator over `tree` in key order, as `options` say.
    pub fn iter(&self, tree: &Tree, options: ReadOptions) -> Result<crate::iter::DbIterator> {
        self.inner.iterator(tree, &options)
    }
    /// A view of `tree` component by component, for level-by-level reads.
    pub fn components(&self, tree: &Tree, options: &ReadOptions) -> Result<ComponentView> {
        self.inner.components(tree, options)
    }
    /// GetLite against the current state: see `ComponentView::newer_version_exists_above`.
    pub fn newer_version_exists_above(
        &self,
        tree: &Tree,
        key: &[u8],
        seq: SeqNo,
        component: ComponentId,
    ) -> Result<NewerVersion> {
        self.components(tree, &ReadOptions::default())?
            .newer_version_exists_above(key, seq, component)
    }
    /// A named meta block that a block property collector wrote into one of the tree's live
    /// tables.
    pub fn table_meta_block(
        &self,
        tree: &Tree,
        file_number: u64,
        collector: &str,
        name: &str,
    ) -> Result<Option<Vec<u8>>> {
        let view = self.components(tree, &ReadOptions::default())?;
        let levels = self.inner.options.levels_max;
        let file = (0..levels)
            .flat_map(|l| view.files(l))
            .find(|f| f.number == file_number)
            .ok_or_else(|| {
                Error::InvalidArgument(format!(
                    "file {file_number} is not a live table of tree {:?}",
                    tree.name()
                ))
            })?;
        view.table(&file)?.meta_block(collector, name)
    }
    /// Freezes the active memtable and waits until everything written before the call is in
    /// SSTables.
    pub fn flush(&self) -> Result<()> {
        self.inner.check_open()?;
        self.inner.force_memtable_switch()?;
        let mut state = self.inner.state.lock();
        while !state.imms.is_empty() {
            if let Some(e) = &state.bg_error {
                return Err(Error::Closed(format!("flush failed: {e}")));
            }
            self.inner.bg_cv.notify_all();
            self.inner.bg_cv.wait(&mut state);
        }
        drop(state);
        // A flush whose observers emitted writes removes the memtable while it still holds the
        // commit lock and publishes the writes just after; taking the lock waits for that.
        drop(self.inner.wal.lock());
        Ok(())
    }
    /// Retries now, in the calling thread, the work whose failure stopped writes, and tells
    /// whether the engine is healthy afterwards.
    ///
    /// A flush or compaction that fails with an I/O error while it reads its inputs or
    /// writes, syncs or creates its table files or its manifest record (a full disk, a
    /// transient `EIO`) sets a *recoverable* background error: writes fail (the error says
    /// why, and that the engine is retrying), reads go on, and the flush thread retries the
    /// failed work by itself after a backoff (100 ms, doubling up to
    /// `Options::background_error_retry_interval_max_millis`). A retry first rolls to a fresh
    /// manifest if a manifest write failed (the old one may end in part of a record), removes
    /// the table files of the failed attempts, then runs the failed flush (the same frozen
    /// memtable, its flush listeners told the same bound as before) or a compaction again.
    /// When that succeeds, the error is cleared and writes work again, without a reopen.
    ///
    /// Returns `Ok(())` if no error is set or the retry succeeded; the retry's error if it
    /// failed again (the error stays recoverable and the automatic retries go on); and
    /// `Error::Closed` saying a reopen is needed if the error is fatal (corruption, a failed
    /// write-ahead log write or sync, a broken invariant), which no retry clears. If an
    /// automatic retry is running, waits for it and reports its outcome.
    pub fn resume(&self) -> Result<()> {
        self.inner.check_open()?;
        self.inner.recover()
    }
    /// The background error that stops writes now, if any (see [`Db::resume`]): whether a
    /// retry can clear it, and how many retries failed. `None` when the engine is healthy.
    pub fn background_error(&self) -> Option<crate::hooks::BackgroundErrorStatus> {
        let state = self.inner.state.lock();
        state
            .bg_error
            .as_ref()
            .map(|error| crate::hooks::BackgroundErrorStatus {
                message: error.to_string(),
                recoverable: error.recoverable,
                retries_failed: error.retries_failed,
            })
    }
    /// Compacts every file of `tree` overlapping `[start, end]` down to the deepest level
    /// that holds data (after flushing the memtable), then rewrites in place the files of that
    /// level the first pass left alone: every file of the range is rewritten once, so what a
    /// snapshot or a version retention kept when a file was written goes once its holder is
    /// gone. No file moves down unread.
    pub fn compact_range(
        &self,
        tree: &Tree,
        start: Option<&[u8]>,
        end: Option<&[u8]>,
    ) -> Result<()> {
        self.inner.check_open()?;
        self.tree(tree.name())?;
        self.flush()?;
        self.inner.compact_range(tree.id(), start, end)
    }
    /// Blocks until every flush and compaction job running at the time of the call has
    /// finished: its version edit and the writes its compaction observers emitted are visible
    /// (or it failed and installed nothing). Jobs started after the call are not waited for,
    /// so this returns even under a steady stream of background work. A job that failed counts
    /// as finished.
    ///
    /// For layers whose observers change behaviour at some point (say, once a catalog is
    /// loaded): after changing the state the observers read, this call guarantees that every
    /// job still acting on the old state has committed, and every later job sees the new state.
    pub fn wait_for_running_jobs(&self) -> Result<()> {
        self.inner.check_open()?;
        let mut state = self.inner.state.lock();
        let horizon = state.next_job_ticket;
        while state
            .running_jobs
            .first()
            .is_some_and(|ticket| *ticket < horizon)
        {
            self.inner.bg_cv.wait(&mut state);
        }
        Ok(())
    }
    /// Blocks until no flush or compaction is pending or running.
    pub fn wait_for_background_work(&self) -> Result<()> {
        let mut state = self.inner.state.lock();
        loop {
            if let Some(e) = &state.bg_error {
                return Err(Error::Closed(format!("background work failed: {e}")));
            }
            let busy = !state.imms.is_empty()
                || state.flush_running
                || state.compactions_running > 0
                || (state.compactions_paused == 0 && self.inner.pick_compaction(&state).is_some());
            if !busy {
                return Ok(());
            }
            self.inner.bg_cv.notify_all();
            self.inner
                .bg_cv
                .wait_for(&mut state, std::time::Duration::from_millis(50));
        }
    }
    /// The engine's counters and the shape of its trees.
    pub fn stats(&self) -> Stats {
        let inner = &self.inner;
        let mut stats = inner.counters.snapshot();
        let sv = inner.super_version.load();
        stats.memtable_bytes = sv.mem.approximate_bytes() as u64;
        stats.immutable_memtables = sv.imms.len();
        let pool = inner.memtable_chunks.stats();
        stats.memtable_chunk_pool_bytes = pool.pooled_bytes;
        stats.memtable_chunks_reused = pool.chunks_reused;
        stats.memtable_chunks_freed = pool.chunks_freed;
        stats.block_cache_bytes = inner.block_cache.as_ref().map_or(0, |c| c.used_bytes());
        stats.last_sequence = inner.latest_sequence();
        for (id, tv) in &sv.version.trees {
            let name = sv
                .trees
                .get(id)
                .map_or_else(String::new, |t| t.name.to_string());
            stats.trees.push(crate::stats::TreeStats {
                name,
                levels: tv
                    .levels
                    .iter()
                    .map(|files| crate::stats::LevelStats {
                        files: files.len(),
                        bytes: files.iter().map(|f| f.file_bytes).sum(),
                    })
                    .collect(),
            });
        }
        stats
    }

    /// Prepares the calling thread as one of this database's background threads, for the
    /// threads a layer on top spawns (index workers, index builds): pins it to
    /// `Options::background_thread_cpus` when set (a refusal is counted in
    /// `Stats::background_thread_pin_failures`, never fatal) and records its thread id under
    /// its name (`background_thread_ids`) until the returned registration is dropped: keep it
    /// for the thread's whole life. The engine's own threads start the same way.
    #[must_use = "the thread leaves `background_thread_ids` when the registration is dropped"]
    pub fn enter_background_thread(&self) -> BackgroundThreadRegistration {
        let name = std::thread::current().name().unwrap_or("").to_owned();
        self.inner.enter_background_thread(name)
    }

    /// Testing aid: the Linux thread id (0 elsewhere) of every thread that entered as one of
    /// this database's background threads and has not ended, by name, oldest first. Tests
    /// read each thread's scheduling from `/proc/self/task/<id>` (by name alone they would
    /// find the threads of other databases open in the same process).
    #[doc(hidden)]
    pub fn background_thread_ids(&self) -> Vec<(String, i64)> {
        self.inner.background_thread_ids.lock().clone()
    }
}

impl Drop for Db {
    fn drop(&mut self) {
        let _ = self.shutdown();
    }
}

/// A background thread's entry in `Db::background_thread_ids`, removed when this is dropped
/// (at the end of the thread). Holds the database weakly: a thread that outlives the database
/// keeps nothing of it alive.
#[derive(Debug)]
pub struct BackgroundThreadRegistration {
    database: std::sync::Weak<DbInner>,
    name: String,
    thread_id: i64,
}

impl Drop for BackgroundThreadRegistration {
    fn drop(&mut self) {
        if let Some(database) = self.database.upgrade() {
            let mut threads = database.background_thread_ids.lock();
            // Thread ids are unique among live threads on Linux; elsewhere all are 0 and one
            // entry of the same name goes, which keeps the count right.
            if let Some(position) = threads
                .iter()
                .position(|(name, id)| *id == self.thread_id && *name == self.name)
            {
                threads.remove(position);
            }
        }
    }
}

impl DbInner {
    /// See `Db::enter_background_thread`; `name` is the thread's name.
    fn enter_background_thread(self: &Arc<Self>, name: String) -> BackgroundThreadRegistration {
        let thread_id = current_thread_id();
        self.background_thread_ids
            .lock()
            .push((name.clone(), thread_id));
        if let Some(cpus) = &self.options.background_thread_cpus {
            if crate::cpu_affinity::pin_current_thread_to_cpus(cpus).is_err() {
                EngineCounters::add(&self.counters.background_thread_pin_failures, 1);
            }
        }
        BackgroundThreadRegistration {
            database: Arc::downgrade(self),
            name,
            thread_id,
        }
    }

    /// The flush thread: flushes frozen memtables, and retries the failed work after a
    /// recoverable background error once its backoff has passed (see `DbInner::recover`).
    fn flush_loop(self: &Arc<Self>) {
        loop {
            self.prepare_spare_wal();
            let flush_attempt = {
                let mut state = self.state.lock();
                loop {
                    if state.shutting_down {
                        return;
                    }
                    match &state.bg_error {
                        None if !state.imms.is_empty() => {
                            state.flush_running = true;
                            break Some(state.begin_background_attempt());
                        }
                        Some(error)
                            if error.recoverable
                                && !state.recovering
                                && self.retries_automatically() =>
                        {
                            let retry_at = error.retry_at;
                            if std::time::Instant::now() >= retry_at {
                                break None;
                            }
                            self.bg_cv.wait_until(&mut state, retry_at);
                            continue;
                        }
                        // Nothing to flush, or an error no automatic retry may clear.
                        _ => {}
                    }
                    self.bg_cv.wait(&mut state);
                }
            };
            let Some(attempt) = flush_attempt else {
                // A failure is recorded in the state, with the next retry's time.
                let _ = self.recover();
                continue;
            };
            let result = self.flush_oldest_memtable();
            let mut state = self.state.lock();
            state.flush_running = false;
            if let Err(e) = result {
                self.set_job_bg_error(&mut state, &e);
            }
            state.end_background_attempt(attempt);
            self.bg_cv.notify_all();
        }
    }
}
