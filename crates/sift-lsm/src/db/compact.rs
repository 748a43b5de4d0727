//! Leveled compaction: choosing what to compact (scores, round-robin pointers), running the
//! job, and manual range compaction.

use crate::compaction::iter::{CompactionIterator, CompactionParams};
use crate::db::state::{DbInner, DbState, JobTicket, TreeInfo};
use crate::extension::{ChangeReason, JobKind, TableReason, EMITTED_PIECE_ENTRIES};
use crate::iter::{LevelIterator, MergingIterator};
use crate::iterator::InternalIterator;
use crate::key::{compare_internal_keys, user_key, TreeId};
use crate::sstable::ReadContext;
use crate::stats::{EngineCounters, LEVELS_TRACKED};
use crate::version::edit::{NewFile, VersionEdit};
use crate::version::set::{sort_level, TreeVersion};
use crate::version::FileMetaData;
use crate::write_batch::WriteBatch;
use crate::{Error, Result};
use std::collections::HashSet;
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// One compaction job: `inputs[0]` from `level`, `inputs[1]` from `level + 1`.
pub(crate) struct Compaction {
    pub tree: Arc<TreeInfo>,
    pub level: usize,
    pub inputs: [Vec<Arc<FileMetaData>>; 2],
    /// Files of `level + 2`, to bound how much one output file overlaps there.
    pub grandparents: Vec<Arc<FileMetaData>>,
    /// A snapshot of the tree's levels at pick time (deeper levels, for tombstone dropping).
    pub tree_version: TreeVersion,
    /// Asked for by `compact_range`: the inputs are always rewritten, never moved down as
    /// they are (what the caller wants is what a rewrite drops).
    pub manual: bool,
    /// The inputs of the deepest level are rewritten into that level (`compact_range` only).
    pub in_place: bool,
    /// Picked because reads spent a file's seek allowance (`Options::seek_compaction`).
    pub seek_triggered: bool,
}

impl Compaction {
    pub fn output_level(&self) -> usize {
        if self.in_place {
            self.level
        } else {
            self.level + 1
        }
    }
    fn all_inputs(&self) -> impl Iterator<Item = &Arc<FileMetaData>> {
        self.inputs[0].iter().chain(self.inputs[1].iter())
    }
    pub(crate) fn mark(&self, on: bool) {
        for f in self.all_inputs() {
            f.being_compacted.store(on, Ordering::Release);
        }
    }
    fn is_trivial_move(&self) -> bool {
        !self.manual
            && self.inputs[0].len() == 1
            && self.inputs[1].is_empty()
            && self.grandparents.iter().map(|f| f.file_bytes).sum::<u64>()
                <= 10 * self.inputs[0][0].file_bytes.max(1 << 20)
    }
}

/// The smallest and largest user keys over `files`.
fn key_range(files: &[Arc<FileMetaData>]) -> Option<(Vec<u8>, Vec<u8>)> {
    let mut smallest: Option<&[u8]> = None;
    let mut largest: Option<&[u8]> = None;
    for f in files {
        if smallest.is_none_or(|s| f.smallest_user_key() < s) {
            smallest = Some(f.smallest_user_key());
        }
        if largest.is_none_or(|l| f.largest_user_key() > l) {
            largest = Some(f.largest_user_key());
        }
    }
    Some((smallest?.to_vec(), largest?.to_vec()))
}

/// The idle file with the most tombstones, if at least half of its entries are tombstones.
fn tombstone_heavy_file(files: &[Arc<FileMetaData>]) -> Option<&Arc<FileMetaData>> {
    files
        .iter()
        .filter(|f| !f.is_being_compacted() && f.deletions > 0 && f.deletions * 2 >= f.entries)
        .max_by_key(|f| f.deletions)
}

impl DbInner {
    pub(crate) fn level_bytes_max(&self, level: usize) -> u64 {
        let mut bytes = self.options.level1_bytes_max;
        for _ in 1..level {
            bytes = bytes.saturating_mul(self.options.level_size_ratio);
        }
        bytes
    }

    /// Picks the most urgent compaction over all trees, or none if every score is below 1.
    pub(crate) fn pick_compaction(&self, state: &DbState) -> Option<Compaction> {
        let mut best: Option<(f64, TreeId, usize)> = None;
        let levels_max = self.options.levels_max;
        for (tree_id, tv) in &state.version.trees {
            for level in 0..levels_max.saturating_sub(1) {
                let score = if level == 0 {
                    let idle = tv.levels[0]
                        .iter()
                        .filter(|f| !f.is_being_compacted())
                        .count();
                    if tv.levels[0].iter().any(|f| f.is_being_compacted()) {
                        0.0
                    } else {
                        idle as f64 / self.options.l0_compaction_trigger.max(1) as f64
                    }
                } else {
                    let bytes: u64 = tv.levels[level]
                        .iter()
                        .filter(|f| !f.is_being_compacted())
                        .map(|f| f.file_bytes)
                        .sum();
                    bytes as f64 / self.level_bytes_max(level) as f64
                };
                if score >= 1.0 && best.is_none_or(|(s, _, _)| score > s) {
                    best = Some((score, *tree_id, level));
                }
            }
        }
        let Some((_, tree_id, level)) = best else {
            return self.pick_seek_compaction(state);
        };
        let tree = state.trees.get(&tree_id)?;
        let tv = state.version.trees.get(&tree_id)?;
        let first: Vec<Arc<FileMetaData>> = if level == 0 {
            tv.levels[0].clone()
        } else {
            let pointer = state
                .versions
                .state
                .compaction_pointers
                .get(&(tree_id, level));
            let files = &tv.levels[level];
            let start = pointer.map_or(0, |p| {
                files.partition_point(|f| compare_internal_keys(&f.largest, p).is_le())
            });
            let tombstone_heavy = self
                .options
                .compaction_prefer_tombstones
                .then(|| tombstone_heavy_file(files))
                .flatten();
            let pick = match tombstone_heavy {
                Some(file) => file,
                None => files[start..]
                    .iter()
                    .chain(files[..start].iter())
                    .find(|f| !f.is_being_compacted())?,
            };
            vec![Arc::clone(pick)]
        };
        self.setup_compaction(tree, tv, level, first)
    }

    /// When no level is over its size: a compaction of the first file (shallowest level first)
    /// whose seek allowance reads have spent, if any (`Options::seek_compaction`). Files of the
    /// deepest level have nowhere to go and are left.
    fn pick_seek_compaction(&self, state: &DbState) -> Option<Compaction> {
        if !self.options.seek_compaction {
            return None;
        }
        let levels_max = self.options.levels_max;
        for (tree_id, tv) in &state.version.trees {
            for level in 0..levels_max.saturating_sub(1).min(tv.levels.len()) {
                let Some(file) = tv.levels[level]
                    .iter()
                    .find(|f| f.seeks_spent() && !f.is_being_compacted())
                else {
                    continue;
                };
                let tree = state.trees.get(tree_id)?;
                let mut compaction =
                    self.setup_compaction(tree, tv, level, vec![Arc::clone(file)])?;
                compaction.seek_triggered = true;
                return Some(compaction);
            }
        }
        None
    }

    /// A point read charged the last of a file's seek allowance: wakes the compaction threads
    /// (under the state lock, so that a thread between its pick and its wait sees the file).
    pub(crate) fn seek_allowance_spent(&self) {
        let _state = self.state.lock();
        self.bg_cv.notify_all();
    }

    /// Completes a compaction from its level inputs: adds the overlapping files of the next
    /// level. `None` if any of them is busy.
    fn setup_compaction(
        &self,
        tree: &Arc<TreeInfo>,
        tv: &TreeVersion,
        level: usize,
        mut first: Vec<Arc<FileMetaData>>,
    ) -> Option<Compaction> {
        if level == 0 {
            // L0 files overlap: every L0 file touching the inputs' key range must come along,
            // or an older version left behind in L0 would shadow the newer one moved down.
            loop {
                let (start, end) = key_range(&first)?;
                let more: Vec<_> = tv
                    .overlapping(0, Some(&start), Some(&end))
                    .into_iter()
                    .filter(|f| !first.iter().any(|g| g.number == f.number))
                    .collect();
                if more.is_empty() {
                    break;
                }
                first.extend(more);
            }
            sort_level(0, &mut first);
        }
        if first.is_empty() || first.iter().any(|f| f.is_being_compacted()) {
            return None;
        }
        let (start, end) = key_range(&first)?;
        let next = tv.overlapping(level + 1, Some(&start), Some(&end));
        if next.iter().any(|f| f.is_being_compacted()) {
            return None;
        }
        let mut all = first.clone();
        all.extend(next.iter().cloned());
        let (all_start, all_end) = key_range(&all)?;
        let grandparents = if level + 2 < self.options.levels_max {
            tv.overlapping(level + 2, Some(&all_start), Some(&all_end))
        } else {
            Vec::new()
        };
        Some(Compaction {
            tree: Arc::clone(tree),
            level,
            inputs: [first, next],
            grandparents,
            tree_version: tv.clone(),
            manual: false,
            in_place: false,
            seek_triggered: false,
        })
    }

    /// Runs compactions while any is due. Called by a compaction thread.
    pub(crate) fn compaction_loop(self: &Arc<Self>) {
        loop {
            let (compaction, attempt) = {
                let mut state = self.state.lock();
                loop {
                    if state.shutting_down {
                        return;
                    }
                    if state.bg_error.is_none()
                        && state.manual_compactions == 0
                        && state.compactions_paused == 0
                    {
                        if let Some(c) = self.pick_compaction(&state) {
                            c.mark(true);
                            state.compactions_running += 1;
                            break (c, state.begin_background_attempt());
                        }
                    }
                    self.bg_cv.wait(&mut state);
                }
            };
            let result = self.run_compaction(&compaction);
            compaction.mark(false);
            let mut state = self.state.lock();
            state.compactions_running -= 1;
            if let Err(e) = result {
                if !matches!(e, Error::Closed(_)) || state.versions.write_failed() {
                    self.set_job_bg_error(&mut state, &e);
                }
            }
            state.end_background_attempt(attempt);
            self.bg_cv.notify_all();
        }
    }

    pub(crate) fn run_compaction(self: &Arc<Self>, c: &Compaction) -> Result<()> {
        let _job = JobTicket::new(self);
        let tree_id = c.tree.id;
        let level = c.level;
        let output_level = c.output_level();
        let mut edit = VersionEdit::default();
        for (which, files) in c.inputs.iter().enumerate() {
            for f in files {
                edit.deleted_files.push((tree_id, level + which, f.number));
            }
        }
        if let Some(last) = c.inputs[0]
            .iter()
            .map(|f| &f.largest)
            .max_by(|a, b| compare_internal_keys(a, b))
        {
            edit.compaction_pointers
                .push((tree_id, level, last.clone()));
        }
        if c.is_trivial_move() {
            let f = &c.inputs[0][0];
            edit.new_files
                .push((tree_id, output_level, NewFile::from_meta(f)));
            {
                let mut state = self.state.lock();
                self.apply_edit(&mut state, &mut edit, ChangeReason::TrivialMove)?;
            }
            // The moved file has new metadata, so its table is opened (mapped) again.
            self.prefault_new_tables(&[f.number]);
            return Ok(());
        }

        let context = ReadContext {
            fill_cache: false,
            stats: None,
            block_filter: None,
        };
        let mut children: Vec<Box<dyn InternalIterator>> = Vec::new();
        if level == 0 {
            for f in &c.inputs[0] {
                let table = self.table(f)?;
                children.push(Box::new(table.iter(context.clone())));
            }
        } else {
            children.push(Box::new(self.level_iterator(c.inputs[0].clone(), &context)));
        }
        children.push(Box::new(self.level_iterator(c.inputs[1].clone(), &context)));
        let mut merged = MergingIterator::new(children);
        merged.seek_to_first()?;

        let deeper = &c.tree_version;
        let levels_max = self.options.levels_max;
        let may_exist_below = move |key: &[u8]| {
            (output_level + 1..levels_max).any(|l| deeper.file_for_key(l, key).is_some())
        };
        let snapshots = self.snapshots.sequences();
        let params = CompactionParams {
            tree: tree_id,
            tree_name: Arc::clone(&c.tree.name),
            snapshots,
            retain_above: self.snapshots.retention_floor(),
            key_may_exist_below: &may_exist_below,
            merge_operator: c.tree.options.merge_operator.clone(),
            observers: &self.options.compaction_observers,
            job: JobKind::Compaction {
                input_level: level,
                output_level,
            },
        };
        let mut iter = CompactionIterator::new(Box::new(merged), params);
        let bytes_read: u64 = c.all_inputs().map(|f| f.file_bytes).sum();

        let mut outputs: Vec<NewFile> = Vec::new();
        let mut created: Vec<u64> = Vec::new();
        let mut pending: Option<(Vec<u8>, Vec<u8>)> = None;
        // Where the walk over the grandparents stands; it goes on across output files (only the
        // overlap is counted per file), or every file after the first would count all the
        // grandparents before it and be cut after one key.
        let mut grandparent_index = 0usize;
        // Whether emitted writes were committed while the job ran (`commit_job` then syncs
        // the log before the edit, even when nothing is left to commit with it).
        let mut pieces_committed = false;
        let target = self.options.table_file_bytes_target;
        let grandparent_limit = 10 * target;
        let result = (|| {
            loop {
                if pending.is_none() {
                    pending = iter.next_entry()?;
                }
                if pending.is_none() {
                    break;
                }
                let number = self.state.lock().versions.new_file_number();
                created.push(number);
                let mut overlapped = 0u64;
                let new_file = self.write_table(
                    &c.tree,
                    output_level,
                    TableReason::Compaction,
                    number,
                    &mut |builder| {
                        let mut last_user_key: Vec<u8> = Vec::new();
                        while let Some((key, value)) = pending
                            .take()
                            .map(Ok)
                            .or_else(|| iter.next_entry().transpose())
                            .transpose()?
                        {
                            let uk = user_key(&key);
                            let new_user_key =
                                builder.entries() == 0 || uk != last_user_key.as_slice();
                            if new_user_key && builder.entries() > 0 {
                                // Cut only between user keys, so no key spans two files of a level.
                                while grandparent_index < c.grandparents.len()
                                    && c.grandparents[grandparent_index].largest_user_key() < uk
                                {
                                    overlapped += c.grandparents[grandparent_index].file_bytes;
                                    grandparent_index += 1;
                                }
                                if builder.estimated_file_bytes() >= target
                                    || overlapped > grandparent_limit
                                {
                                    pending = Some((key, value));
                                    return Ok(true);
                                }
                            }
                            if new_user_key {
                                last_user_key.clear();
                                last_user_key.extend_from_slice(uk);
                            }
                            builder.add(&key, &value)?;
                            if iter.emitted_len() >= EMITTED_PIECE_ENTRIES {
                                self.write_internal(iter.emitted(), false, None)?;
                                pieces_committed = true;
                            }
                        }
                        Ok(true)
                    },
                )?;
                if let Some(f) = new_file {
                    outputs.push(f);
                }
                if self.state.lock().shutting_down {
                    return Err(Error::Closed("compaction interrupted by close".into()));
                }
            }
            Ok::<(), Error>(())
        })();
        let emitted: WriteBatch = iter.emitted();
        if let Err(e) = result {
            for n in created {
                let _ = self.fs.remove(&self.table_path(n));
            }
            return Err(e);
        }
        let bytes_written: u64 = outputs.iter().map(|f| f.file_bytes).sum();
        let new_numbers: Vec<u64> = outputs.iter().map(|f| f.number).collect();
        if !outputs.is_empty() {
            if let Err(e) = self.fs.sync_dir(&self.dir) {
                // Nothing names the outputs yet: a retry writes new ones.
                for n in &new_numbers {
                    let _ = self.fs.remove(&self.table_path(*n));
                }
                return Err(e);
            }
        }
        for f in outputs {
            edit.new_files.push((tree_id, output_level, f));
        }
        let committed = self.commit_job(emitted, pieces_committed, move |inner: &DbInner| {
            let mut state = inner.state.lock();
            inner.apply_edit(&mut state, &mut edit, ChangeReason::Compaction)
        });
        if let Err(e) = committed {
            // The edit's record may be in the manifest (a failed sync): the outputs stay until
            // the recovery has rolled to a manifest without it.
            self.state.lock().failed_job_files.extend(&new_numbers);
            return Err(e);
        }
        self.prefault_new_tables(&new_numbers);
        let slot = output_level.min(LEVELS_TRACKED - 1);
        EngineCounters::add(&self.counters.compactions, 1);
        if c.seek_triggered {
            EngineCounters::add(&self.counters.seek_compactions, 1);
        }
        EngineCounters::add(&self.counters.compaction_bytes_read[slot], bytes_read);
        EngineCounters::add(&self.counters.compaction_bytes_written[slot], bytes_written);
        Ok(())
    }

    pub(crate) fn level_iterator(
        &self,
        files: Vec<Arc<FileMetaData>>,
        context: &ReadContext,
    ) -> LevelIterator {
        let opener = Arc::clone(&self.tables);
        let table_context = context.clone();
        let open = Arc::new(
            move |f: &Arc<FileMetaData>| -> Result<Box<dyn InternalIterator>> {
                let table = opener.table(f)?;
                Ok(Box::new(table.iter(table_context.clone())) as Box<dyn InternalIterator>)
            },
        );
        LevelIterator::new(
            files,
            open,
            context.block_filter.clone(),
            context.stats.clone(),
        )
    }

    /// Compacts every file of the tree overlapping `[start, end]` down level by level, in the
    /// calling thread.
    pub(crate) fn compact_range(
        self: &Arc<Self>,
        tree: TreeId,
        start: Option<&[u8]>,
        end: Option<&[u8]>,
    ) -> Result<()> {
        {
            let mut state = self.state.lock();
            state.manual_compactions += 1;
            // No background job starts from here on; one already running may still move files
            // below the level this compaction finds deepest, leaving them out: let it finish.
            while state.compactions_running > 0 && !state.shutting_down {
                self.bg_cv.wait(&mut state);
            }
        }
        let result = self.compact_range_levels(tree, start, end);
        let mut state = self.state.lock();
        state.manual_compactions -= 1;
        self.bg_cv.notify_all();
        result
    }

    fn compact_range_levels(
        self: &Arc<Self>,
        tree: TreeId,
        start: Option<&[u8]>,
        end: Option<&[u8]>,
    ) -> Result<()> {
        let levels_max = self.options.levels_max;
        let deepest = self.deepest_level_with(tree, start, end)?;
        let bottom_before: HashSet<u64> = self
            .files_in_range(tree, deepest, start, end)?
            .iter()
            .map(|f| f.number)
            .collect();
        for level in 0..deepest.max(1).min(levels_max - 1) {
            self.run_manual_compaction(tree, level, start, end, None)?;
        }
        // Every file of the range is rewritten once: the files of the deepest level that the
        // pass above did not rewrite are rewritten in place. A job that wrote them kept what a
        // snapshot or a version retention needed then (a tombstone and the version it hides,
        // or a shadowed version), and no later job might ever read them again; now it goes.
        // Runs of neighbouring files, so that an output never overlaps a file left out.
        if deepest > 0 {
            let files = self.files_in_range(tree, deepest, start, end)?;
            let mut run: Vec<u64> = Vec::new();
            for file in &files {
                if bottom_before.contains(&file.number) {
                    run.push(file.number);
                } else if !run.is_empty() {
                    self.run_manual_compaction(tree, deepest, start, end, Some(&run))?;
                    run.clear();
                }
            }
            if !run.is_empty() {
                self.run_manual_compaction(tree, deepest, start, end, Some(&run))?;
            }
        }
        Ok(())
    }

    /// The files of `tree` at `level` overlapping `[start, end]`, in key order.
    fn files_in_range(
        &self,
        tree: TreeId,
        level: usize,
        start: Option<&[u8]>,
        end: Option<&[u8]>,
    ) -> Result<Vec<Arc<FileMetaData>>> {
        let state = self.state.lock();
        let tv = state
            .version
            .trees
            .get(&tree)
            .ok_or_else(|| Error::TreeNotFound(format!("tree id {tree}")))?;
        Ok(tv.overlapping(level, start, end))
    }

    /// The deepest level holding a file of `tree` in `[start, end]`.
    fn deepest_level_with(
        &self,
        tree: TreeId,
        start: Option<&[u8]>,
        end: Option<&[u8]>,
    ) -> Result<usize> {
        let state = self.state.lock();
        let tv = state
            .version
            .trees
            .get(&tree)
            .ok_or_else(|| Error::TreeNotFound(format!("tree id {tree}")))?;
        Ok((0..self.options.levels_max)
            .rev()
            .find(|l| !tv.overlapping(*l, start, end).is_empty())
            .unwrap_or(0))
    }

    /// Compacts the files of `level` in `[start, end]` into the next level, or with
    /// `in_place` rewrites the files of `level` with those numbers into `level` itself; waits
    /// while another
    /// compaction runs.
    fn run_manual_compaction(
        self: &Arc<Self>,
        tree: TreeId,
        level: usize,
        start: Option<&[u8]>,
        end: Option<&[u8]>,
        in_place: Option<&[u64]>,
    ) -> Result<()> {
        let compaction = {
            let mut state = self.state.lock();
            loop {
                if state.shutting_down {
                    return Err(Error::Closed("the database is closing".into()));
                }
                if let Some(e) = &state.bg_error {
                    return Err(Error::Closed(format!(
                        "stopped after a background error: {e}"
                    )));
                }
                let tree_info = state
                    .trees
                    .get(&tree)
                    .cloned()
                    .ok_or_else(|| Error::TreeNotFound(format!("tree id {tree}")))?;
                let Some(tv) = state.version.trees.get(&tree).cloned() else {
                    return Err(Error::TreeNotFound(format!("tree id {tree}")));
                };
                let mut first = tv.overlapping(level, start, end);
                if let Some(numbers) = in_place {
                    first.retain(|f| numbers.contains(&f.number));
                }
                if first.is_empty() {
                    break None;
                }
                let busy = state.compactions_running > 0;
                if !busy {
                    let picked = if in_place.is_some() {
                        Some(Compaction {
                            tree: tree_info,
                            level,
                            inputs: [first, Vec::new()],
                            grandparents: Vec::new(),
                            tree_version: tv.clone(),
                            manual: true,
                            in_place: true,
                            seek_triggered: false,
                        })
                    } else {
                        self.setup_compaction(&tree_info, &tv, level, first)
                    };
                    if let Some(mut c) = picked {
                        c.manual = true;
                        c.mark(true);
                        state.compactions_running += 1;
                        break Some(c);
                    }
                }
                self.bg_cv.wait(&mut state);
            }
        };
        if let Some(c) = compaction {
            let result = self.run_compaction(&c);
            c.mark(false);
            let mut state = self.state.lock();
            state.compactions_running -= 1;
            self.bg_cv.notify_all();
            drop(state);
            result?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tombstone_preference_tests {
    use super::*;

    fn file(number: u64, entries: u64, deletions: u64) -> Arc<FileMetaData> {
        Arc::new(FileMetaData::new(
            number,
            1000,
            Vec::new(),
            Vec::new(),
            0,
            0,
            entries,
            deletions,
            Vec::new(),
            Vec::new(),
        ))
    }

    #[test]
    fn the_file_with_most_tombstones_is_preferred_only_if_half_are_tombstones() {
        let files = vec![
            file(1, 100, 10),
            file(2, 100, 60),
            file(3, 200, 100),
            file(4, 10, 9),
        ];
        assert_eq!(tombstone_heavy_file(&files).map(|f| f.number), Some(3));
        files[2].being_compacted.store(true, Ordering::Release);
        assert_eq!(tombstone_heavy_file(&files).map(|f| f.number), Some(2));
        let light = vec![file(1, 100, 49), file(2, 100, 0)];
        assert!(tombstone_heavy_file(&light).is_none());
    }
}
