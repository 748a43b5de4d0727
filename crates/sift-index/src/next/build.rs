//! Online creation of `next` and `sst-local` indexes on a collection that already has data
//! (NEXT §5).
//!
//! Creating the index only registers it (under the write lock, which takes a moment): from then
//! on every flush and compaction writes the index's secondary blocks into the tables it
//! produces, and queries scan the live tables that have none, so answers are exact at every
//! moment. Then, with the write lock released (writes go on), [`build_online`] indexes the
//! tables that existed before, from the largest level up: deep files are the least likely to
//! be rewritten soon, while the small upper levels are mostly rewritten by compactions anyway
//! (which index them as they write). A table's SSTable cannot change, so the blocks built for it
//! — exactly what the collector would have written, byte for byte: same encoders, and each
//! entry with where it starts in its data block, so queries read it in place — go into the
//! collection's
//! side tree (`<primary tree>.next`), keyed `file number (8 bytes, big-endian) ‖ meta block
//! name`. Once a file's blocks are durable, it is published: added to the index's set of
//! side-indexed files and, for `next`, to the global index — under the global lock, and only if
//! the file is still live (a version change that removed it takes that lock after us and
//! removes it again). The version listener drops removed files from that set; their side
//! entries are deleted at the next open, when no query can be reading them.
//!
//! A build that did not end (the process stopped, `progress` failed) leaves the index exact,
//! its remaining tables scanned; [`Database::open`](crate::Database::open) resumes it in a background thread
//! ([`IndexBuilds`]), which the database stops (after the data block at hand, or at once if
//! the thread waits to retry) and joins when it is dropped or closed. A failure there is
//! recorded in [`IndexBuildStatus`], not raised: a recoverable one (I/O, writes stopped by a
//! recoverable engine error) is retried after a backoff, when the engine recovers (a
//! [`sift_lsm::extension::RecoveryListener`]) or at [`Database::resume`](crate::Database::resume); a fatal one (corruption,
//! an engine that needs a reopen) waits for the next open. `create_index` hands the rest of a
//! build that failed recoverably to the same thread.

use super::collector::NextCollector;
use super::format::{
    decode_directory, directory_name, property_lists, DirectoryEntry, COLLECTOR_NAME,
};
use super::{view_files, AttributeSpec, NextIndexState, Registry};
use crate::catalog::IndexRecord;
use crate::catalog::{BackfillProgress, ProgressCallback};
use crate::error::{IndexError, Result};
use crate::kind::Collection;
use crate::value::AttrType;
use parking_lot::{Condvar, Mutex};
use sift_lsm::extension::parse_internal_key;
use sift_lsm::extension::ComponentView;
use sift_lsm::extension::FileMetaData;
use sift_lsm::extension::ReadContext;
use sift_lsm::extension::{BlockPropertyCollector, CollectorEntry, FinishedBlock};
use sift_lsm::{ComponentId, Db, ReadOptions, Tree, TreeOptions, WriteBatch, WriteOptions};
use std::collections::{HashSet, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering as AtomicOrdering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Name of the side tree of a primary tree.
pub(crate) fn side_tree_name(primary_tree_name: &str) -> String {
    format!("{primary_tree_name}.next")
}

fn side_key(file_number: u64, name: &str) -> Vec<u8> {
    let mut key = file_number.to_be_bytes().to_vec();
    key.extend_from_slice(name.as_bytes());
    key
}

fn parse_side_key(key: &[u8]) -> Option<(u64, &str)> {
    let number = u64::from_be_bytes(key.get(..8)?.try_into().ok()?);
    Some((number, std::str::from_utf8(key.get(8..)?).ok()?))
}

fn side_corruption(engine: &Db, side: &Tree, offset: usize, message: String) -> IndexError {
    sift_lsm::Error::corruption(engine.path().join(side.name()), offset as u64, message).into()
}

/// A meta block of `file_number` stored in the side tree (missing: corruption, since the file
/// was published as having it).
pub(crate) fn read_side_block(
    engine: &Db,
    side: &Tree,
    file_number: u64,
    name: &str,
) -> Result<Vec<u8>> {
    match engine.get(side, &side_key(file_number, name))? {
        Some(entry) => Ok(entry.value),
        None => Err(side_corruption(
            engine,
            side,
            0,
            format!("side tree: file {file_number} is indexed but block {name:?} is missing"),
        )),
    }
}

fn decode_side_directory(
    engine: &Db,
    side: &Tree,
    file_number: u64,
    bytes: &[u8],
    spec: &AttributeSpec,
) -> Result<Vec<DirectoryEntry>> {
    decode_directory(bytes, spec.attr_id, spec.attr_type == AttrType::Geo).map_err(|e| {
        side_corruption(
            engine,
            side,
            e.offset,
            format!(
                "side tree: directory of attribute {} for file {file_number}: {} (byte {} of \
                 the block)",
                spec.attr_id, e.message, e.offset
            ),
        )
    })
}

/// The directory of the attribute for a file indexed online.
pub(crate) fn read_side_directory(
    engine: &Db,
    side: &Tree,
    file_number: u64,
    spec: &AttributeSpec,
) -> Result<Vec<DirectoryEntry>> {
    let bytes = read_side_block(engine, side, file_number, &directory_name(spec.attr_id))?;
    decode_side_directory(engine, side, file_number, &bytes, spec)
}

/// A live file's number and its directory of secondary blocks, as the side tree holds them.
pub(crate) type SideDirectory = (u64, Vec<DirectoryEntry>);

/// The directories of the attribute for the live files of `view` in the side tree, and, with
/// `collect_garbage`, a batch deleting the entries of files that are not live (any attribute)
/// for the caller to write once it holds no lock a commit may need (`Registry::register`
/// holds the global index's lock here, which a version change takes under the commit lock).
pub(crate) fn load_side(
    engine: &Db,
    side: &Tree,
    view: &ComponentView,
    spec: &AttributeSpec,
    collect_garbage: bool,
) -> Result<(Vec<SideDirectory>, Option<WriteBatch>)> {
    let live: HashSet<u64> = view_files(view).iter().map(|f| f.number).collect();
    let directory = directory_name(spec.attr_id);
    let mut loaded = Vec::new();
    let mut garbage = WriteBatch::new();
    let mut any_garbage = false;
    let mut iter = engine.iter(side, ReadOptions::default())?;
    iter.seek_to_first()?;
    while iter.valid() {
        match parse_side_key(iter.key()) {
            Some((file_number, _)) if live.contains(&file_number) => {
                if parse_side_key(iter.key()).is_some_and(|(_, name)| name == directory) {
                    let blocks =
                        decode_side_directory(engine, side, file_number, iter.value(), spec)?;
                    loaded.push((file_number, blocks));
                }
            }
            // A dead file's entries (or a key this module never writes).
            _ => {
                if collect_garbage {
                    garbage.delete(side, iter.key());
                    any_garbage = true;
                }
            }
        }
        iter.next()?;
    }
    Ok((loaded, any_garbage.then_some(garbage)))
}

/// Named meta blocks, as a collector returns them.
type MetaBlocks = Vec<(String, Vec<u8>)>;

/// The secondary blocks of one table for one attribute (and how many versions were read): the
/// table's entries fed to the collector, data block by data block, exactly as when the table
/// was written — with where each entry starts in its data block, as the table builder gives
/// it, so the blocks are byte for byte those a flush or compaction writes (entries that
/// queries read in place). `None` when `stop` was set meanwhile.
pub(crate) fn build_file(
    view: &ComponentView,
    file: &Arc<FileMetaData>,
    spec: &AttributeSpec,
    context: &ReadContext,
    stop: &AtomicBool,
) -> Result<Option<(MetaBlocks, u64)>> {
    let table = view.table(file)?;
    let mut collector = NextCollector::new(std::slice::from_ref(spec), Arc::default());
    let mut entries = 0u64;
    for ordinal in 0..table.block_count() {
        if stop.load(AtomicOrdering::Relaxed) {
            return Ok(None);
        }
        let block_offset = table.block_handle(ordinal).map_or(0, |h| h.offset);
        table.visit_block_entries(
            ordinal,
            context,
            |internal_key: &[u8], value: &[u8], entry_offset: usize| {
                let Some(parsed) = parse_internal_key(internal_key) else {
                    return Err(sift_lsm::Error::corruption(
                        table.path(),
                        block_offset,
                        format!("data block {ordinal} holds a malformed internal key"),
                    ));
                };
                entries += 1;
                collector.add(&CollectorEntry {
                    user_key: parsed.user_key,
                    seq: parsed.seq,
                    kind: parsed.kind,
                    value,
                    block_offset: u32::try_from(entry_offset).ok(),
                });
                Ok(())
            },
        )?;
        collector.finish_block(&FinishedBlock {
            ordinal: u32::try_from(ordinal).unwrap_or(u32::MAX),
            handle: table.block_handle(ordinal).unwrap_or_default(),
        });
    }
    Ok(Some((collector.finish_table().meta_blocks, entries)))
}

/// Live files without secondary blocks for the index: deepest level first, level 0 last.
pub(crate) fn unindexed_files(
    view: &ComponentView,
    state: &NextIndexState,
) -> Vec<Arc<FileMetaData>> {
    let mut levels: Vec<usize> = view
        .ids()
        .into_iter()
        .filter_map(|id| match id {
            ComponentId::Level(level) => Some(level),
            _ => None,
        })
        .collect();
    levels.sort_unstable_by(|a, b| b.cmp(a));
    levels.dedup();
    let side_files = state.side_files.lock().clone();
    levels
        .into_iter()
        .flat_map(|level| view.files(level))
        .chain(view.files(0))
        .filter(|file| {
            !property_lists(file.properties().get(COLLECTOR_NAME), state.spec.attr_id)
                && !side_files.contains(&file.number)
        })
        .collect()
}

/// The collection's side tree, created on first use.
fn side_tree(engine: &Db, next: &Registry, primary: &Tree) -> Result<Tree> {
    if let Some(side) = next.side_tree(primary.id()) {
        return Ok(side);
    }
    let name = side_tree_name(primary.name());
    let side = match engine.tree(&name) {
        Ok(side) => side,
        Err(_) => match engine.create_tree(&name, TreeOptions::default()) {
            Ok(side) => side,
            Err(sift_lsm::Error::TreeExists(_)) => engine.tree(&name)?,
            Err(e) => return Err(e.into()),
        },
    };
    next.set_side_tree(primary.id(), side.clone());
    Ok(side)
}

/// Makes a file's side blocks visible to queries, if the file is still live.
fn publish(
    engine: &Db,
    primary: &Tree,
    state: &NextIndexState,
    file_number: u64,
    directory: &[DirectoryEntry],
) -> Result<bool> {
    let mut global = state.global.as_ref().map(Mutex::lock);
    let mut side_files = state.side_files.lock();
    let view = engine.components(primary, &ReadOptions::default())?;
    if !view_files(&view).iter().any(|f| f.number == file_number) {
        return Ok(false); // compacted away meanwhile: its successors carry their own blocks
    }
    if let Some(global) = global.as_mut() {
        global.index.insert_file(file_number, directory);
    }
    side_files.insert(file_number);
    Ok(true)
}

/// Most passes over the live files: files written by jobs that started before the index was
/// registered lack its blocks too; a later pass picks them up.
const PASSES_MAX: usize = 3;

/// How an online build ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum BuildEnd {
    /// Every live table it found has blocks (or the index was dropped meanwhile).
    Done,
    /// `stop` was set: the remaining tables are still scanned by queries.
    Stopped,
}

/// Indexes, largest level first, the live tables of the collection that have no secondary
/// blocks for the index, while writes go on (the caller must not hold the write lock).
/// `progress` is called after each file with the versions read so far. Checks `stop` between
/// data blocks.
pub(crate) fn build_online(
    engine: &Db,
    next: &Registry,
    collection: &Collection,
    record: &IndexRecord,
    stop: &AtomicBool,
    progress: &mut dyn FnMut(&BackfillProgress),
) -> Result<BuildEnd> {
    let primary = &collection.primary;
    let report = |documents_done: u64, finished: bool| BackfillProgress {
        collection: collection.record.name.clone(),
        index: record.name.clone(),
        documents_done,
        finished,
    };
    let mut done = 0;
    let context = ReadContext::from_read_options(&ReadOptions::default());
    for _ in 0..PASSES_MAX {
        let Some(state) = next.index(primary.id(), record.id) else {
            break; // dropped meanwhile
        };
        let view = engine.components(primary, &ReadOptions::default())?;
        let todo = unindexed_files(&view, &state);
        if todo.is_empty() {
            break;
        }
        let side = side_tree(engine, next, primary)?;
        for file in todo {
            if next.index(primary.id(), record.id).is_none() {
                break;
            }
            let Some((blocks, entries)) = build_file(&view, &file, &state.spec, &context, stop)?
            else {
                return Ok(BuildEnd::Stopped);
            };
            let directory_key = directory_name(state.spec.attr_id);
            let mut directory = Vec::new();
            let mut batch = WriteBatch::new();
            for (name, bytes) in &blocks {
                if *name == directory_key {
                    directory =
                        decode_side_directory(engine, &side, file.number, bytes, &state.spec)?;
                }
                batch.put(&side, &side_key(file.number, name), bytes);
            }
            engine.write(batch, &WriteOptions::default())?;
            publish(engine, primary, &state, file.number, &directory)?;
            done += entries;
            progress(&report(done, false));
        }
    }
    progress(&report(done, true));
    Ok(BuildEnd::Done)
}

/// What [`Database::open`](crate::Database::open) does about `next` / `sst-local` indexes whose online build was
/// interrupted (`DatabaseOptions::index_builds_at_open`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum IndexBuildsAtOpen {
    /// Resume the builds in a background thread, with writes and queries going on.
    #[default]
    Resume,
    /// Leave them: the tables without blocks are scanned by queries until a compaction
    /// rewrites them or [`Database::build_secondary_blocks`](crate::Database::build_secondary_blocks) is called.
    Leave,
}

/// A background build that failed (see [`IndexBuildStatus`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IndexBuildFailure {
    /// The collection's name.
    pub collection: String,
    /// The index's name.
    pub index: String,
    /// Why the build failed, as text.
    pub message: String,
}

/// The online builds of `next` and `sst-local` indexes that run in the background: those
/// [`Database::open`](crate::Database::open) resumed (an earlier build was interrupted: the process stopped, or
/// `progress` failed), and those `create_index` handed over after a recoverable failure.
/// Meanwhile, and after a failure, the index is exact: queries scan the tables that have no
/// blocks yet, so a build that waits costs only speed.
///
/// A build that fails with a recoverable error — an I/O error (reading a table, writing its
/// blocks), or writes stopped by a recoverable engine background error — waits and retries by
/// itself, from where it stopped (tables already indexed stay indexed): after a backoff (100
/// ms, doubling up to the engine's `Options::background_error_retry_interval_max_millis`; zero
/// turns the timed retries off), and at once when the engine recovers from a background error
/// (its automatic retry or `Db::resume`) or [`Database::resume`](crate::Database::resume) is called. While the engine
/// still reports a recoverable background error, the build waits for its recovery instead. A
/// fatal error — corruption, an engine that needs a reopen — is not retried: it goes to
/// `failures`, and the next open resumes the build. Closing or dropping the database stops a
/// build, waiting or not, at once.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct IndexBuildStatus {
    /// The background thread is building, or waiting to retry (`retry_pending`).
    pub running: bool,
    /// `(collection, index)` of every index built in the background, in build order.
    pub resumed: Vec<(String, String)>,
    /// Of `resumed`, those whose build ended with every live table indexed (or the index
    /// dropped).
    pub finished: Vec<(String, String)>,
    /// Tables indexed by the background builds.
    pub files_built: u64,
    /// Build attempts: each build's first one, and every retry (a failed attempt of
    /// `create_index` handed over to the background counts too).
    pub attempts: u64,
    /// Of `attempts`, the retries after a recoverable failure.
    pub retries: u64,
    /// The latest recoverable failure (kept once the retry succeeded, as a record).
    pub last_error: Option<IndexBuildFailure>,
    /// A build failed with a recoverable error and waits to retry (see above).
    pub retry_pending: bool,
    /// Builds that failed with a fatal error (corruption, an engine that needs a reopen):
    /// not retried before the next open (or a call of [`Database::build_secondary_blocks`](crate::Database::build_secondary_blocks)).
    pub failures: Vec<IndexBuildFailure>,
}

/// What the build thread and its owners share.
struct BuildShared {
    state: Mutex<BuildState>,
    /// Signalled when `state` changes (`wakeups`, `status`).
    changed: Condvar,
    stop: AtomicBool,
    /// The longest backoff between retries (zero: no timed retries).
    retry_interval_max: Duration,
}

#[derive(Default)]
struct BuildState {
    /// Builds not started yet.
    queue: VecDeque<Resumed>,
    /// Bumped by every event that ends a wait for a retry: an engine recovery,
    /// [`Database::resume`](crate::Database::resume), a stop.
    wakeups: u64,
    /// A build thread exists and has not begun to exit.
    worker_alive: bool,
    status: IndexBuildStatus,
}

/// The first retry's wait, as the engine's (`Options::background_error_retry_interval_max_millis`).
const RETRY_INTERVAL_FIRST: Duration = Duration::from_millis(100);

impl BuildShared {
    /// Wakes a build waiting to retry.
    fn wake(&self) {
        self.state.lock().wakeups += 1;
        self.changed.notify_all();
    }

    /// The wait before a retry once `retries_failed` retries have failed (`None`: no timed
    /// retry).
    fn retry_delay(&self, retries_failed: u32) -> Option<Duration> {
        if self.retry_interval_max.is_zero() {
            return None;
        }
        let factor = 1u32.checked_shl(retries_failed.min(16)).unwrap_or(u32::MAX);
        Some(
            RETRY_INTERVAL_FIRST
                .saturating_mul(factor)
                .min(self.retry_interval_max),
        )
    }
}

/// Tells the build thread that the engine recovered from a background error.
struct WakeOnRecovery(Arc<BuildShared>);

impl sift_lsm::extension::RecoveryListener for WakeOnRecovery {
    fn after_recovery(&self) {
        self.0.wake();
    }
}

/// The background thread of online builds, owned by the [`Database`]: stopped and joined
/// when the database is dropped or closed.
pub(crate) struct IndexBuilds {
    shared: Arc<BuildShared>,
    worker: Mutex<Option<JoinHandle<()>>>,
}

/// An index to build in the background.
pub(crate) struct Resumed {
    pub(crate) collection: Arc<Collection>,
    pub(crate) record: IndexRecord,
    /// The failure of `create_index`'s own attempt, handed over: the first attempt here is a
    /// retry, after the backoff.
    pub(crate) failed: Option<String>,
}

/// How a failed attempt is handled.
pub(crate) enum Outcome {
    /// Retry after a backoff or an engine recovery.
    Retry,
    /// Not retried (the message says why).
    Fatal(String),
}

/// Whether the failure of a build attempt is worth a retry: I/O errors, and writes stopped
/// by a background error the engine retries, are; corruption, an engine that needs a
/// reopen, and anything else are not.
pub(crate) fn classify(engine: &Db, error: &IndexError) -> Outcome {
    if let Some(background) = engine.background_error() {
        return if background.recoverable {
            Outcome::Retry
        } else {
            let message = error.to_string();
            // The engine's error is named unless the build's error already quotes it.
            let cause = if message.contains(&background.message) {
                String::new()
            } else {
                format!(": {}", background.message)
            };
            Outcome::Fatal(format!(
                "{message} (not retried: the engine stopped writes after an error that needs a \
                 reopen{cause}; the next open resumes the build)"
            ))
        };
    }
    match error {
        // `Closed` without a background error now: the error was cleared meanwhile (the
        // database closing stops the build before the engine closes).
        IndexError::Engine(sift_lsm::Error::Io { .. } | sift_lsm::Error::Closed(_)) => {
            Outcome::Retry
        }
        IndexError::Engine(e) if e.is_corruption() => Outcome::Fatal(format!(
            "{error} (not retried: corruption; the next open resumes the build)"
        )),
        _ => Outcome::Fatal(format!(
            "{error} (not retried; the next open resumes the build)"
        )),
    }
}

impl IndexBuilds {
    /// `retry_interval_max`: the engine's `background_error_retry_interval_max_millis`.
    pub(crate) fn new(retry_interval_max: Duration) -> IndexBuilds {
        IndexBuilds {
            shared: Arc::new(BuildShared {
                state: Mutex::new(BuildState::default()),
                changed: Condvar::new(),
                stop: AtomicBool::new(false),
                retry_interval_max,
            }),
            worker: Mutex::new(None),
        }
    }

    /// The engine listener that wakes a build waiting to retry when the engine recovers.
    pub(crate) fn recovery_listener(&self) -> Arc<dyn sift_lsm::extension::RecoveryListener> {
        Arc::new(WakeOnRecovery(Arc::clone(&self.shared)))
    }

    /// Queues `todo` for the build thread (started if none runs), which builds one index
    /// after the other.
    pub(crate) fn start(
        &self,
        engine: Arc<Db>,
        next: Arc<Registry>,
        todo: Vec<Resumed>,
        progress: Option<ProgressCallback>,
    ) {
        let mut worker = self.worker.lock();
        {
            let mut state = self.shared.state.lock();
            if self.shared.stop.load(AtomicOrdering::Relaxed) {
                return;
            }
            // A thread that starts now waits first if its first build failed (a running
            // thread gets to these builds later, and says so then).
            let starts_waiting = !state.worker_alive && state.queue.is_empty();
            for (position, resumed) in todo.iter().enumerate() {
                let names = (
                    resumed.collection.record.name.clone(),
                    resumed.record.name.clone(),
                );
                if let Some(message) = &resumed.failed {
                    state.status.attempts += 1;
                    state.status.retry_pending |= starts_waiting && position == 0;
                    state.status.last_error = Some(IndexBuildFailure {
                        collection: names.0.clone(),
                        index: names.1.clone(),
                        message: message.clone(),
                    });
                }
                state.status.resumed.push(names);
            }
            state.queue.extend(todo);
            state.status.running = true;
            self.shared.changed.notify_all();
            if state.worker_alive {
                return; // it takes the queued builds after its current one
            }
            state.worker_alive = true;
        }
        // A thread that ended (it left `worker_alive` before exiting).
        if let Some(handle) = worker.take() {
            let _ = handle.join();
        }
        let shared = Arc::clone(&self.shared);
        let spawned = std::thread::Builder::new()
            .name("sift-index-build".to_string())
            .spawn(move || {
                // Pinned like the engine's background threads (`background_thread_cpus`).
                // Kept until the builds end: the thread then leaves the engine's list.
                let _registration = engine.enter_background_thread();
                run_builds(&engine, &next, &shared, progress.as_ref());
            });
        match spawned {
            Ok(handle) => *worker = Some(handle),
            Err(error) => {
                let mut state = self.shared.state.lock();
                state.worker_alive = false;
                state.queue.clear();
                state.status.running = false;
                state.status.retry_pending = false;
                state.status.failures.push(IndexBuildFailure {
                    collection: String::new(),
                    index: String::new(),
                    message: format!("cannot start the index build thread: {error}"),
                });
                self.shared.changed.notify_all();
            }
        }
    }

    /// Joins the thread if it ended (or was told to stop).
    fn join(&self) {
        let mut worker = self.worker.lock();
        if let Some(handle) = worker.take() {
            if handle.join().is_err() {
                let mut state = self.shared.state.lock();
                state.worker_alive = false;
                state.status.running = false;
                state.status.retry_pending = false;
                state.status.failures.push(IndexBuildFailure {
                    collection: String::new(),
                    index: String::new(),
                    message: "the index build thread panicked".to_string(),
                });
            }
        }
    }

    /// Waits until the builds ended, or one waits to retry after a recoverable failure
    /// (`retry_pending`).
    pub(crate) fn wait(&self) -> IndexBuildStatus {
        {
            let mut state = self.shared.state.lock();
            while state.status.running && !state.status.retry_pending {
                self.shared.changed.wait(&mut state);
            }
            if state.status.running {
                return state.status.clone();
            }
        }
        self.join();
        self.status()
    }

    pub(crate) fn status(&self) -> IndexBuildStatus {
        self.shared.state.lock().status.clone()
    }

    /// Wakes a build waiting to retry: it retries now.
    pub(crate) fn wake(&self) {
        self.shared.wake();
    }

    /// Stops the thread (after its current data block, or at once if it waits to retry) and
    /// joins it.
    pub(crate) fn stop(&self) {
        self.shared.stop.store(true, AtomicOrdering::Relaxed);
        self.shared.wake();
        self.join();
        let mut state = self.shared.state.lock();
        // What it did not start stays for the next open.
        state.queue.clear();
        state.status.running = false;
        state.status.retry_pending = false;
    }
}

impl Drop for IndexBuilds {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Whether a build ran to its end (`Continue`) or the thread must stop.
#[derive(PartialEq, Eq)]
enum Next {
    Continue,
    Stop,
}

/// The body of the build thread: the queued builds, one after the other.
fn run_builds(
    engine: &Db,
    next: &Registry,
    shared: &BuildShared,
    progress: Option<&ProgressCallback>,
) {
    loop {
        let resumed = {
            let mut state = shared.state.lock();
            match state.queue.pop_front() {
                Some(resumed) if !shared.stop.load(AtomicOrdering::Relaxed) => resumed,
                _ => {
                    state.worker_alive = false;
                    state.status.running = false;
                    state.status.retry_pending = false;
                    shared.changed.notify_all();
                    return;
                }
            }
        };
        if build_with_retries(engine, next, shared, &resumed, progress) == Next::Stop {
            let mut state = shared.state.lock();
            state.worker_alive = false;
            state.status.running = false;
            state.status.retry_pending = false;
            shared.changed.notify_all();
            return;
        }
    }
}

/// One index's build, retried after recoverable failures until it ends, fails fatally, or
/// the database stops it.
fn build_with_retries(
    engine: &Db,
    next: &Registry,
    shared: &BuildShared,
    resumed: &Resumed,
    progress: Option<&ProgressCallback>,
) -> Next {
    let collection = &resumed.collection;
    let record = &resumed.record;
    let names = (collection.record.name.clone(), record.name.clone());
    let stop = &shared.stop;
    let mut retries_failed = 0u32;
    let mut retry = resumed.failed.is_some();
    // Wake-ups seen before the attempt that failed (a later one ends the wait at once).
    let mut wakeups_seen = {
        let mut state = shared.state.lock();
        state.status.retry_pending |= retry;
        state.wakeups
    };
    loop {
        if retry {
            if !wait_for_retry(engine, shared, retries_failed, wakeups_seen) {
                return Next::Stop;
            }
            retries_failed = retries_failed.saturating_add(1);
        }
        let wakeups = {
            let mut state = shared.state.lock();
            state.status.attempts += 1;
            if retry {
                state.status.retries += 1;
            }
            state.status.retry_pending = false;
            shared.changed.notify_all();
            state.wakeups
        };
        let result = build_online(engine, next, collection, record, stop, &mut |report| {
            if !report.finished {
                shared.state.lock().status.files_built += 1;
            }
            if let Some(progress) = progress {
                progress(report);
            }
        });
        // Classified before the status is locked: the engine's state has a lock of its own.
        let result = result.map_err(|error| {
            let dropped = next.index(collection.primary.id(), record.id).is_none();
            (classify(engine, &error), error, dropped)
        });
        let mut state = shared.state.lock();
        let failure = |message: String| IndexBuildFailure {
            collection: names.0.clone(),
            index: names.1.clone(),
            message,
        };
        match result {
            Ok(BuildEnd::Stopped) => return Next::Stop,
            Err(_) if stop.load(AtomicOrdering::Relaxed) => return Next::Stop,
            // An index (or collection) dropped meanwhile is not a failure.
            Ok(BuildEnd::Done) | Err((_, _, true)) => state.status.finished.push(names),
            Err((outcome, error, false)) => match outcome {
                Outcome::Retry => {
                    wakeups_seen = wakeups;
                    state.status.last_error = Some(failure(error.to_string()));
                    state.status.retry_pending = true;
                    shared.changed.notify_all();
                    retry = true;
                    continue;
                }
                Outcome::Fatal(message) => state.status.failures.push(failure(message)),
            },
        }
        shared.changed.notify_all();
        return Next::Continue;
    }
}

/// Waits before a retry: until the backoff for `retries_failed` failed retries has passed
/// (if timed retries are on) or a wake-up comes after the `wakeups_seen`th (an engine
/// recovery, `Database::resume`), and as long as the engine reports a recoverable background
/// error (writes would fail: its recovery wakes us). False if the database stops meanwhile.
fn wait_for_retry(
    engine: &Db,
    shared: &BuildShared,
    retries_failed: u32,
    mut wakeups_seen: u64,
) -> bool {
    let mut delay = shared.retry_delay(retries_failed);
    loop {
        let mut state = shared.state.lock();
        let deadline = delay.map(|delay| Instant::now() + delay);
        while state.wakeups == wakeups_seen && !shared.stop.load(AtomicOrdering::Relaxed) {
            match deadline {
                Some(deadline) => {
                    if shared.changed.wait_until(&mut state, deadline).timed_out() {
                        break;
                    }
                }
                None => shared.changed.wait(&mut state),
            }
        }
        if shared.stop.load(AtomicOrdering::Relaxed) {
            return false;
        }
        // Taken before the engine is asked: a recovery after the question wakes the next
        // wait.
        wakeups_seen = state.wakeups;
        drop(state);
        // While the error lasts, writes fail: wait for its recovery (or the next backoff).
        match engine.background_error() {
            Some(background) if background.recoverable => {
                delay = shared.retry_delay(retries_failed.saturating_add(1));
            }
            // Fatal: the retry fails at once and records it.
            _ => return true,
        }
    }
}

/// What [`Database::check_secondary_blocks`](crate::Database::check_secondary_blocks) found.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SecondaryBlocksReport {
    /// Live files whose blocks are in the table (written by a flush or compaction).
    pub files_in_tables: usize,
    /// Live files whose blocks were built online (in the side tree).
    pub files_built_online: usize,
    /// Live files without blocks for the index (scanned by queries).
    pub files_unindexed: usize,
    /// Meta blocks compared (secondary blocks and directories).
    pub blocks: usize,
}
