//! Flushing frozen memtables into L0 tables, and the pieces flush and compaction share:
//! writing one table, and installing a version edit (with version listeners told).

use crate::compaction::iter::{CompactionIterator, CompactionParams};
use crate::db::state::{DbInner, DbState, JobTicket, TreeInfo};
use crate::extension::{
    ChangeReason, FileChange, JobKind, TableContext, TableReason, VersionChange,
};
use crate::hooks::FlushInfo;
use crate::iterator::InternalIterator;
use crate::key::{SeqNo, TreeId};
use crate::memtable::Memtable;
use crate::sstable::{TableBuilder, TableBuilderOptions, TableSummary};
use crate::stats::EngineCounters;
use crate::version::edit::{NewFile, VersionEdit};
use crate::version::set::Version;
use crate::version::wal_file_name;
use crate::write_batch::WriteBatch;
use crate::Result;
use parking_lot::MutexGuard;
use std::collections::BTreeMap;
use std::sync::Arc;

/// Clears `DbState::manifest_writing` if the unlocked manifest write unwinds. `lock_api`
/// re-locks the state on unwind, so the flag would otherwise stay set and every later edit,
/// tree drop and close would wait for it forever. Runs with the state unlocked (it is dropped
/// inside the closure given to `MutexGuard::unlocked`). Writes stop: the edit was not
/// installed, and the manifest may hold part of its record.
struct ManifestWritingOnPanic<'a>(&'a DbInner);

impl Drop for ManifestWritingOnPanic<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            let mut state = self.0.state.lock();
            state.manifest_writing = false;
            self.0.set_bg_error(
                &mut state,
                &crate::Error::Closed("a manifest write panicked".into()),
            );
        }
    }
}

impl DbInner {
    /// Applies `edit` (manifest first), installs the new version and super version, and tells
    /// the version listeners what changed. Call with the state locked.
    ///
    /// The state lock is released while the manifest record is written and synced (as LevelDB
    /// does), so writers that switch memtables, readers taking snapshots and other jobs are not
    /// held up by the fsync. One manifest writer at a time (`DbState::manifest_writing`): the
    /// next edit is prepared only once this one is installed, so each edit is checked against,
    /// and applied to, the state it was written after. Meanwhile the state is the one before
    /// the edit, as it is while the job is still running, and the files the job removes stay
    /// marked as being compacted. Callers that check the state before calling this should
    /// first call [`DbInner::wait_for_manifest`], so the checks and the edit see the same state.
    pub(crate) fn apply_edit(
        &self,
        state: &mut MutexGuard<'_, DbState>,
        edit: &mut VersionEdit,
        reason: ChangeReason,
    ) -> Result<()> {
        self.wait_for_manifest(state);
        let before = Arc::clone(&state.version);
        // Every sequence number handed out so far is at most this; recovery resumes above it
        // even when the logs holding the newest writes are gone.
        let allocated = self
            .allocated_sequence
            .load(std::sync::atomic::Ordering::Acquire);
        edit.last_sequence = Some(edit.last_sequence.unwrap_or(0).max(allocated));
        let prepared = state.versions.prepare(edit)?;
        state.manifest_writing = true;
        let manifest_started = std::time::Instant::now();
        let written = MutexGuard::unlocked(state, || {
            let _on_panic = ManifestWritingOnPanic(self);
            prepared.write()
        });
        state.manifest_writing = false;
        self.bg_cv.notify_all();
        if let Err(e) = written {
            // Recoverable if it is an I/O error: the recovery rolls to a fresh manifest before
            // any later edit (see `VersionSet::recover_manifest`).
            self.set_job_bg_error(state, &e);
            return Err(e);
        }
        EngineCounters::add(&self.counters.manifest_writes, 1);
        EngineCounters::add_micros_since(&self.counters.manifest_write_micros, manifest_started);
        // Infallible: `install` reports no roll failure, so that a version set holding the
        // edit is always followed by the engine's version holding it too.
        state.versions.install(prepared, edit);
        let after = Arc::new(state.versions.version());
        state.version = Arc::clone(&after);
        // The change is numbered before the super version that holds it is installed, so a
        // reader whose view carries epoch `e` knows the listeners are told of change `e` (now,
        // or already); they are told under the state lock, in epoch order.
        let change = (!self.options.version_listeners.is_empty())
            .then(|| diff_versions(&before, &after, reason, state.files_epoch + 1))
            .filter(|change| !change.added.is_empty() || !change.removed.is_empty());
        if change.is_some() {
            state.files_epoch += 1;
        }
        self.install_super_version(state);
        if let Some(change) = change {
            for listener in &self.options.version_listeners {
                listener.on_version_change(&change);
            }
        }
        self.bg_cv.notify_all();
        Ok(())
    }

    /// Waits until no manifest record is being written (see [`DbInner::apply_edit`]).
    pub(crate) fn wait_for_manifest(&self, state: &mut MutexGuard<'_, DbState>) {
        while state.manifest_writing {
            self.bg_cv.wait(state);
        }
    }

    /// Writes the entries of `input` (already in internal-key order, already filtered) into
    /// one new table file. Returns `None` if there was nothing to write.
    pub(crate) fn write_table(
        &self,
        tree: &TreeInfo,
        level: usize,
        reason: TableReason,
        file_number: u64,
        entries: &mut dyn FnMut(&mut TableBuilder) -> Result<bool>,
    ) -> Result<Option<NewFile>> {
        let path = self.table_path(file_number);
        let context = TableContext {
            tree: tree.id,
            tree_name: Arc::clone(&tree.name),
            level,
            file_number,
            reason,
        };
        let collectors = tree
            .options
            .block_property_collectors
            .iter()
            .map(|factory| (factory.name().to_owned(), factory.create(&context)))
            .collect();
        let file = self.fs.create(&path)?;
        let mut builder = TableBuilder::new(
            file,
            path.clone(),
            TableBuilderOptions::from_options(&self.options, collectors),
        );
        let filled = entries(&mut builder);
        let filled = match filled {
            Ok(f) => f,
            Err(e) => {
                drop(builder);
                let _ = self.fs.remove(&path);
                return Err(e);
            }
        };
        if !filled || builder.entries() == 0 {
            drop(builder);
            let _ = self.fs.remove(&path);
            return Ok(None);
        }
        let summary = match builder.finish() {
            Ok(s) => s,
            Err(e) => {
                let _ = self.fs.remove(&path);
                return Err(e);
            }
        };
        EngineCounters::add(&self.counters.bytes_written, summary.file_bytes);
        Ok(Some(new_file_from_summary(file_number, summary)))
    }

    /// Flushes the oldest frozen memtable. Returns false if there was none.
    pub(crate) fn flush_oldest_memtable(self: &Arc<Self>) -> Result<bool> {
        // The switch that froze this memtable took the spare log: make the next one before the
        // flush, not after it, or a switch that comes while the flush runs creates its log and
        // syncs the directory itself, under the commit lock.
        self.prepare_spare_wal();
        let mut listened = None;
        let (oldest_wal_number, told_before) = {
            let state = self.state.lock();
            let Some(wal_number) = state.imms.last().map(|m| m.wal_number()) else {
                return Ok(false);
            };
            let told_before = state
                .flush_attempted
                .filter(|(attempted, _)| *attempted == wal_number)
                .and_then(|(_, info)| info);
            (wal_number, told_before)
        };
        if !self.options.flush_listeners.is_empty() {
            // Before anything of the flush is decided: a listener may block (see `hooks.rs`),
            // and only this thread (or a recovery, while this thread waits) removes frozen
            // memtables, so the oldest stays the same. A retry of a failed flush of this
            // memtable tells the listeners what the failed attempt told them: they did their
            // work up to that bound then (an index layer drained its queue), and a newer bound
            // would make them wait for writes made since, which cannot complete while writes
            // are stopped by the error being recovered from.
            let info = told_before.unwrap_or(FlushInfo {
                wal_number: oldest_wal_number,
                sequence_upper_bound: self
                    .allocated_sequence
                    .load(std::sync::atomic::Ordering::Acquire),
            });
            for listener in &self.options.flush_listeners {
                listener.before_flush(&info);
            }
            listened = Some(info);
        }
        self.state.lock().flush_attempted = Some((oldest_wal_number, listened));
        // From here on the observers may run (after the listeners, which may block).
        let _job = JobTicket::new(self);
        let (imm, trees, log_number_after) = {
            let state = self.state.lock();
            let Some(imm) = state.imms.last().cloned() else {
                return Ok(false);
            };
            // Once this memtable is in tables, the oldest log still needed is the next one's.
            let next_wal = state
                .imms
                .iter()
                .rev()
                .nth(1)
                .map_or(state.mem.wal_number(), |m| m.wal_number());
            (imm, Arc::clone(&state.trees), next_wal)
        };
        // Unlogged inserts (`Db::insert_unlogged_at_sequence`) may still be adding entries to
        // it: stop new ones and wait for those running, so the table gets every entry.
        imm.seal_for_flush();
        let snapshots = self.snapshots.sequences();
        let retain_above = self.snapshots.retention_floor();
        let mut edit = VersionEdit {
            log_number: Some(log_number_after),
            ..VersionEdit::default()
        };
        let mut emitted = WriteBatch::new();
        let mut flushed_bytes = 0;
        let mut created = Vec::new();
        let result = (|| {
            for tree_id in imm.trees() {
                let Some(tree) = trees.get(&tree_id) else {
                    continue; // dropped since the write
                };
                let number = self.state.lock().versions.new_file_number();
                created.push(number);
                let new_file =
                    self.flush_tree(&imm, tree, number, &snapshots, retain_above, &mut emitted)?;
                if let Some(f) = new_file {
                    flushed_bytes += f.file_bytes;
                    edit.new_files.push((tree_id, 0, f));
                }
            }
            Ok::<(), crate::Error>(())
        })();
        if let Err(e) = result {
            for n in created {
                let _ = self.fs.remove(&self.table_path(n));
            }
            return Err(e);
        }
        let new_numbers: Vec<u64> = edit.new_files.iter().map(|(_, _, f)| f.number).collect();
        if !edit.new_files.is_empty() {
            if let Err(e) = self.fs.sync_dir(&self.dir) {
                // Nothing names the tables yet: the retry writes new ones.
                for n in &new_numbers {
                    let _ = self.fs.remove(&self.table_path(*n));
                }
                return Err(e);
            }
        }
        let install = {
            let imm = Arc::clone(&imm);
            move |inner: &DbInner| -> Result<()> {
                let mut state = inner.state.lock();
                inner.wait_for_manifest(&mut state);
                // A tree dropped while this flush ran gets no files: they would name a tree
                // the manifest no longer has.
                let (live, dropped): (Vec<_>, Vec<_>) = std::mem::take(&mut edit.new_files)
                    .into_iter()
                    .partition(|(tree, _, _)| state.trees.contains_key(tree));
                edit.new_files = live;
                for (_, _, file) in dropped {
                    let _ = inner.fs.remove(&inner.table_path(file.number));
                }
                inner.apply_edit(&mut state, &mut edit, ChangeReason::Flush)?;
                if let Some(pos) = state.imms.iter().position(|m| Arc::ptr_eq(m, &imm)) {
                    state.imms.remove(pos);
                }
                // Counted before the flush is visible: whoever sees the flushed state (a
                // `Db::flush` caller returning) sees it counted too.
                EngineCounters::add(&inner.counters.flushes, 1);
                EngineCounters::add(&inner.counters.flush_bytes_written, flushed_bytes);
                inner.install_super_version(&state);
                Ok(())
            }
        };
        if let Err(e) = self.commit_job(emitted, false, install) {
            // The edit's record may be in the manifest (a failed sync): the tables stay until
            // the recovery has rolled to a manifest without it.
            self.state.lock().failed_job_files.extend(&new_numbers);
            return Err(e);
        }
        {
            let mut state = self.state.lock();
            if state
                .flush_attempted
                .is_some_and(|(attempted, _)| attempted == oldest_wal_number)
            {
                state.flush_attempted = None;
            }
        }
        if let Some(info) = listened {
            for listener in &self.options.flush_listeners {
                listener.after_flush(&info);
            }
        }
        self.prefault_new_tables(&new_numbers);
        self.delete_obsolete_wals(log_number_after);
        Ok(true)
    }

    fn flush_tree(
        &self,
        imm: &Arc<Memtable>,
        tree: &Arc<TreeInfo>,
        number: u64,
        snapshots: &[u64],
        retain_above: Option<SeqNo>,
        emitted: &mut WriteBatch,
    ) -> Result<Option<NewFile>> {
        let mut input = imm.iter(tree.id);
        input.seek_to_first()?;
        let always = |_: &[u8]| true;
        let params = CompactionParams {
            tree: tree.id,
            tree_name: Arc::clone(&tree.name),
            snapshots: snapshots.to_vec(),
            retain_above,
            key_may_exist_below: &always,
            merge_operator: tree.options.merge_operator.clone(),
            observers: &self.options.compaction_observers,
            job: JobKind::Flush,
        };
        let mut iter = CompactionIterator::new(Box::new(input), params);
        let new_file = self.write_table(tree, 0, TableReason::Flush, number, &mut |builder| {
            while let Some((key, value)) = iter.next_entry()? {
                builder.add(&key, &value)?;
            }
            Ok(true)
        })?;
        emitted.append(&iter.emitted());
        Ok(new_file)
    }

    /// Opens the tables numbered `numbers` (just written or moved, so in the page cache) and
    /// maps their pages into the process, on this background thread: otherwise the first
    /// reads of every 64 KiB of a new table each take a page fault in a reader's thread.
    pub(crate) fn prefault_new_tables(&self, numbers: &[u64]) {
        if numbers.is_empty() || !self.options.use_mmap_reads || self.options.use_direct_reads {
            return;
        }
        let version = Arc::clone(&self.state.lock().version);
        for tree in version.trees.values() {
            for (_, file) in tree.all_files() {
                if numbers.contains(&file.number) {
                    // A hint: a table that fails to open fails again for its first reader.
                    if let Ok(table) = self.table(file) {
                        table.prefault();
                    }
                }
            }
        }
    }

    /// Installs a job's result: directly, or — when observers emitted writes — through the
    /// write path so the writes and the edit become visible together. With `pieces_logged`
    /// (the job committed emitted writes while it ran) the log is synced before the edit even
    /// when nothing is left to commit with it: everything emitted is durable before the edit.
    pub(crate) fn commit_job(
        self: &Arc<Self>,
        emitted: WriteBatch,
        pieces_logged: bool,
        install: impl FnOnce(&DbInner) -> Result<()> + Send + 'static,
    ) -> Result<()> {
        if emitted.is_empty() {
            if pieces_logged {
                self.sync_wal()?;
            }
            return install(self);
        }
        let inner = Arc::clone(self);
        let hook = Box::new(move || install(&inner));
        self.write_internal(emitted, true, Some(hook)).map(|_| ())
    }

    /// Deletes WAL files older than `log_number` (their contents are in tables).
    pub(crate) fn delete_obsolete_wals(&self, log_number: u64) {
        self.forget_obsolete_closed_logs(log_number);
        if let Ok(names) = self.fs.list(&self.dir) {
            for name in names {
                if let Some(crate::version::FileKind::Wal(n)) =
                    crate::version::parse_file_name(&name)
                {
                    if n < log_number {
                        let _ = self.fs.remove(&self.dir.join(wal_file_name(n)));
                    }
                }
            }
        }
    }
}

pub(crate) fn new_file_from_summary(number: u64, s: TableSummary) -> NewFile {
    NewFile {
        number,
        file_bytes: s.file_bytes,
        smallest: s.smallest,
        largest: s.largest,
        seq_min: s.seq_min,
        seq_max: s.seq_max,
        entries: s.entries,
        deletions: s.deletions,
        property_names: s.property_names,
        property_values: s.property_values,
    }
}

/// Which files `after` has that `before` lacks, and the reverse.
pub(crate) fn diff_versions(
    before: &Version,
    after: &Version,
    reason: ChangeReason,
    files_epoch: u64,
) -> VersionChange {
    fn index(v: &Version) -> BTreeMap<(TreeId, u64), (usize, Arc<crate::version::FileMetaData>)> {
        let mut m = BTreeMap::new();
        for (tree, tv) in &v.trees {
            for (level, f) in tv.all_files() {
                m.insert((*tree, f.number), (level, Arc::clone(f)));
            }
        }
        m
    }
    let b = index(before);
    let a = index(after);
    let mut change = VersionChange {
        reason,
        added: Vec::new(),
        removed: Vec::new(),
        files_epoch,
    };
    for ((tree, number), (level, file)) in &b {
        match a.get(&(*tree, *number)) {
            Some((new_level, _)) if new_level == level => {}
            _ => change.removed.push(FileChange {
                tree: *tree,
                level: *level,
                file: Arc::clone(file),
            }),
        }
    }
    for ((tree, number), (level, file)) in &a {
        match b.get(&(*tree, *number)) {
            Some((old_level, _)) if old_level == level => {}
            _ => change.added.push(FileChange {
                tree: *tree,
                level: *level,
                file: Arc::clone(file),
            }),
        }
    }
    change
}
