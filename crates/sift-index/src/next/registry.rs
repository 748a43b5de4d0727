//! The registry of `next` and `sst-local` indexes: per primary tree, the registered indexes,
//! their global indexes kept in step with the engine's version listener, the memtable maps, and
//! the pairing of a query's view with the global index it reads.

use super::format::{property_lists, COLLECTOR_NAME};
use super::global::{GlobalIndex, IntervalIndex};
use super::memo::{JobKey, UpdateMemo};
use super::query::QUERY_PAIRING_PATIENCE;
use super::rtree::RTreeIndex;
use super::{build, collector, memo};
use super::{
    encoded_attribute, read_directory, AttributeSpec, GlobalIndexReport, GlobalIndexStats,
    GlobalState, NextIndexState, TreeState,
};
use crate::catalog::Validation;
use crate::catalog::{IndexKind, IndexRecord};
use crate::document::DocumentParser;
use crate::embedded::memtable::MemtableMap;
use crate::envelope::EnvelopeRef;
use crate::error::{IndexError, Result};
use crate::value::AttrType;
use parking_lot::{Mutex, RwLock};
use sift_lsm::extension::ComponentView;
use sift_lsm::extension::FileMetaData;
use sift_lsm::extension::ReadContext;
use sift_lsm::extension::{
    ChangeReason, CompactionObserver, DroppedEntry, JobKind, VersionChange, VersionListener,
};
use sift_lsm::{Db, ReadOptions, SeqNo, Tree, TreeId, WriteBatch, WriteOptions};
use std::collections::{HashMap, HashSet};
use std::sync::Arc;

/// How long the invariant check waits for the version listener to apply the change of the
/// newest view (it does within microseconds unless the installing thread is descheduled).
pub(crate) const CHECK_PAIRING_PATIENCE: std::time::Duration = std::time::Duration::from_secs(10);

/// Which attributes to collect per primary tree, and the runtime state of each index.
pub(crate) struct Registry {
    pub(super) trees: RwLock<HashMap<TreeId, TreeState>>,
    /// Target size of a secondary block (the engine's data block size).
    pub block_bytes: usize,
    /// What the last collector held, so the next one starts with room for as much.
    pub collector_sizes: Arc<collector::CollectorSizes>,
}

impl Registry {
    pub fn new(block_bytes: usize) -> Registry {
        Registry {
            trees: RwLock::new(HashMap::new()),
            block_bytes: block_bytes.max(64),
            collector_sizes: Arc::default(),
        }
    }

    pub fn attributes_for(&self, tree: TreeId) -> Option<Arc<Vec<AttributeSpec>>> {
        self.trees.read().get(&tree).map(|t| Arc::clone(&t.specs))
    }

    pub fn index(&self, tree: TreeId, index_id: u64) -> Option<Arc<NextIndexState>> {
        self.trees
            .read()
            .get(&tree)?
            .indexes
            .iter()
            .find(|i| i.index_id == index_id)
            .cloned()
    }

    /// The registered indexes of a primary tree.
    pub fn indexes_of(&self, tree: TreeId) -> Vec<Arc<NextIndexState>> {
        self.trees
            .read()
            .get(&tree)
            .map(|t| t.indexes.clone())
            .unwrap_or_default()
    }

    /// Distrusts every memtable map of `tree` through `seq` (a failed write may have recorded
    /// versions that were never written; queries scan the memtables until a flush).
    pub fn distrust_memtable_maps(&self, tree: TreeId, seq: SeqNo) {
        for index in self.indexes_of(tree) {
            index.memtable.prune_through(seq);
        }
    }

    pub fn memo(&self, tree: TreeId) -> Option<Arc<UpdateMemo>> {
        self.trees.read().get(&tree)?.memo.clone()
    }

    /// The side tree of a primary tree, if it exists.
    pub fn side_tree(&self, tree: TreeId) -> Option<Tree> {
        self.trees.read().get(&tree)?.side.clone()
    }

    pub fn set_side_tree(&self, tree: TreeId, side: Tree) {
        if let Some(state) = self.trees.write().get_mut(&tree) {
            state.side = Some(side);
        }
    }

    /// Starts collecting for an index and, for `next`, loads its global index from the
    /// directories of the live files (this is the recovery at open). Call under the database
    /// write lock. Returns the index's state, which its `Next` keeps for the write path.
    pub fn register(
        &self,
        engine: &Db,
        primary: &Tree,
        record: &IndexRecord,
        reader: &DocumentParser,
    ) -> Result<Arc<NextIndexState>> {
        let spec = AttributeSpec {
            attr_id: record.attr_id,
            attr_type: record.attr_type,
            reader: reader.clone(),
            first_seq: record.first_seq,
            split: record.split_delta,
            block_bytes: self.block_bytes,
        };
        let validation = record.validation.unwrap_or_default();
        let state = Arc::new(NextIndexState {
            index_id: record.id,
            kind: record.kind,
            spec: spec.clone(),
            validation,
            global: (record.kind == IndexKind::Next).then(|| {
                let index: Box<dyn GlobalIndex> = if record.attr_type == AttrType::Geo {
                    Box::new(RTreeIndex::new())
                } else {
                    Box::new(IntervalIndex::new())
                };
                Mutex::new(GlobalState {
                    index,
                    pending: HashMap::new(),
                    files_epoch: 0,
                })
            }),
            side_files: Mutex::new(HashSet::new()),
            memtable: MemtableMap::default(),
        });
        {
            let mut trees = self.trees.write();
            let tree = trees.entry(primary.id()).or_default();
            tree.indexes.retain(|i| i.index_id != record.id);
            tree.indexes.push(Arc::clone(&state));
            tree.specs = Arc::new(tree.indexes.iter().map(|i| i.spec.clone()).collect());
            if validation == Validation::Memo && tree.memo.is_none() {
                // No write runs meanwhile (the caller holds the write lock).
                tree.memo = Some(Arc::new(UpdateMemo::new(engine.latest_sequence())));
            }
            if tree.side.is_none() {
                tree.side = engine.tree(&build::side_tree_name(primary.name())).ok();
            }
        }
        // Holding the global lock while reading the view: a version change installed after
        // the view waits for it and is then applied on top (adds and removes are idempotent),
        // so no file is missed or kept after its removal.
        let mut global = state.global.as_ref().map(Mutex::lock);
        let view = engine.components(primary, &ReadOptions::default())?;
        fill_memtable_map(&view, &state)?;
        if let Some(global) = global.as_mut() {
            for file in view_files(&view) {
                global.add(&file);
            }
            global.files_epoch = global.files_epoch.max(view.files_epoch());
            global.resolve(&view, &spec)?;
        }
        if let Some(side) = self.side_tree(primary.id()) {
            // Secondary blocks built online for files written before the index existed. At
            // open (the index is ready, no query runs yet) the blocks of dead files go.
            let collect_garbage = record.state == crate::catalog::IndexState::Ready;
            let (loaded, garbage) = build::load_side(engine, &side, &view, &spec, collect_garbage)?;
            let mut side_files = state.side_files.lock();
            for (file_number, blocks) in loaded {
                if let Some(global) = global.as_mut() {
                    global.index.insert_file(file_number, &blocks);
                }
                side_files.insert(file_number);
            }
            drop(side_files);
            // Not under the global lock: a compaction committing meanwhile holds the commit
            // lock and waits for the global lock in `on_version_change` (a deadlock the model
            // driver found at a reopen).
            drop(global.take());
            if let Some(garbage) = garbage {
                engine.write(garbage, &WriteOptions::default())?;
            }
        }
        drop(global);
        Ok(state)
    }

    pub fn unregister(&self, tree: TreeId, index_id: u64) {
        let mut trees = self.trees.write();
        let Some(state) = trees.get_mut(&tree) else {
            return;
        };
        state.indexes.retain(|i| i.index_id != index_id);
        state.specs = Arc::new(state.indexes.iter().map(|i| i.spec.clone()).collect());
        if !state
            .indexes
            .iter()
            .any(|i| i.validation == Validation::Memo)
        {
            state.memo = None;
        }
        if state.indexes.is_empty() {
            trees.remove(&tree);
        }
    }

    /// What an index's global index holds now (`None` for an index without one), the files
    /// flushes and compactions have just added loaded first (as a query would). Checks
    /// nothing: safe to call at any moment.
    pub fn global_index_stats(
        &self,
        engine: &Db,
        primary: &Tree,
        index_id: u64,
    ) -> Result<Option<GlobalIndexStats>> {
        let Some(state) = self.index(primary.id(), index_id) else {
            return Ok(None);
        };
        if state.global.is_none() {
            return Ok(None);
        }
        let (_, global, _) = state.paired_view(
            engine,
            primary,
            &ReadOptions::default(),
            QUERY_PAIRING_PATIENCE,
        )?;
        Ok(global.map(|global| GlobalIndexStats {
            files: global.index.file_numbers().len(),
            blocks: global.index.len(),
            memory_bytes: global.index.memory_bytes() as u64,
        }))
    }

    /// Memory held by an index's global index and memtable map (and its collection's memo).
    pub fn memory_bytes(&self, tree: TreeId, index_id: u64) -> u64 {
        let state = self.index(tree, index_id);
        let global = state
            .as_ref()
            .and_then(|state| state.global.as_ref().map(|g| g.lock().index.memory_bytes()))
            .unwrap_or(0);
        let map = state.map_or(0, |state| state.memtable.memory_bytes());
        let memo = self.memo(tree).map_or(0, |m| m.memory_bytes());
        (global + memo) as u64 + map
    }

    /// Records writes in the memo before they are applied; returns what to undo if the
    /// engine write fails. `older_may_exist(pk)` is asked for keys the memo does not know.
    pub fn record_writes(
        &self,
        tree: TreeId,
        writes: &[(Vec<u8>, SeqNo, bool)],
        older_may_exist: &mut dyn FnMut(&[u8]) -> bool,
    ) -> Vec<memo::MemoUndo> {
        let Some(memo) = self.memo(tree) else {
            return Vec::new();
        };
        writes
            .iter()
            .filter_map(|(pk, seq, known_older)| {
                memo.record_write(pk, *seq, || *known_older || older_may_exist(pk))
            })
            .collect()
    }

    pub fn undo_writes(&self, tree: TreeId, undo: Vec<memo::MemoUndo>) {
        if let Some(memo) = self.memo(tree) {
            memo.undo(undo);
        }
    }

    /// Whether writes to `tree` need memo bookkeeping.
    pub fn has_memo(&self, tree: TreeId) -> bool {
        self.trees
            .read()
            .get(&tree)
            .is_some_and(|t| t.memo.is_some())
    }

    /// Checks that the global index of a `next` index describes exactly the secondary blocks
    /// of the live files (in their tables or, built online, in the side tree): the same files,
    /// and per file the same blocks with the same ranges (rectangles for geo) as its
    /// directory. Compares against a view of the same files epoch, so it holds at every
    /// moment, flushes and compactions running or not.
    pub fn check_global_index(
        &self,
        engine: &Db,
        primary: &Tree,
        index_id: u64,
    ) -> Result<GlobalIndexReport> {
        let state = self.index(primary.id(), index_id).ok_or_else(|| {
            IndexError::Internal(format!("index {index_id} is not a registered next index"))
        })?;
        let attr_id = state.spec.attr_id;
        // Before the global lock: the version listener takes the registry's lock, then it.
        let side_tree = self.side_tree(primary.id());
        let (view, global, in_step) = state.paired_view(
            engine,
            primary,
            &ReadOptions::default(),
            CHECK_PAIRING_PATIENCE,
        )?;
        let Some(global) = global else {
            return Err(inconsistent(
                index_id,
                format!("index {index_id} has no global index (kind {})", state.kind),
            ));
        };
        if !in_step {
            return Err(inconsistent(
                index_id,
                format!(
                    "global index of index {index_id}: the version listener did not catch up with \
                 the engine's files (epoch {}) within {CHECK_PAIRING_PATIENCE:?}",
                    view.files_epoch()
                ),
            ));
        }
        let mut expected = Vec::new();
        let mut files_unindexed = 0;
        let mut blocks = 0;
        let side_files = state.side_files.lock().clone();
        for file in view_files(&view) {
            let in_table = property_lists(file.properties().get(COLLECTOR_NAME), attr_id);
            let side = side_tree
                .as_ref()
                .filter(|_| !in_table && side_files.contains(&file.number));
            if in_table || side.is_some() {
                let directory = match side {
                    Some(side) => {
                        build::read_side_directory(engine, side, file.number, &state.spec)?
                    }
                    None => read_directory(&view, &file, &state.spec, &ReadContext::default())?,
                };
                blocks += directory.len();
                match global.index.file_blocks(file.number) {
                    Some(found) if found == directory => {}
                    found => {
                        return Err(inconsistent(
                            index_id,
                            format!(
                                "global index of index {index_id}: file {} has {} blocks, its \
                             directory {}",
                                file.number,
                                found.map_or_else(|| "no".to_string(), |f| f.len().to_string()),
                                directory.len()
                            ),
                        ))
                    }
                }
                expected.push(file.number);
            } else {
                files_unindexed += 1;
            }
        }
        expected.sort_unstable();
        let live: HashSet<u64> = view_files(&view).iter().map(|f| f.number).collect();
        if let Some(dead) = side_files.iter().find(|n| !live.contains(n)) {
            return Err(inconsistent(
                index_id,
                format!("index {index_id} lists file {dead} as built online, which is not live"),
            ));
        }
        let found = global.index.file_numbers();
        if found != expected {
            return Err(inconsistent(
                index_id,
                format!(
                    "global index of index {index_id} covers files {found:?}, the live files \
                 with secondary blocks are {expected:?}"
                ),
            ));
        }
        if global.index.len() != blocks {
            return Err(inconsistent(
                index_id,
                format!(
                    "global index of index {index_id} has {} entries for {blocks} secondary blocks",
                    global.index.len()
                ),
            ));
        }
        Ok(GlobalIndexReport {
            files_indexed: expected.len(),
            files_unindexed,
            blocks,
            memory_bytes: global.index.memory_bytes() as u64,
            files_built_online: side_files.len(),
        })
    }

    pub(crate) fn on_version_change(&self, change: &VersionChange) {
        let trees = self.trees.read();
        if trees.is_empty() {
            return;
        }
        let touched: HashSet<TreeId> = change
            .added
            .iter()
            .chain(&change.removed)
            .map(|f| f.tree)
            .collect();
        // Every global index is in step with the new version once this returns, also those of
        // trees the change leaves alone (the epoch counts the changes of all trees). Those the
        // change touches move to the new epoch in the same critical section as their files.
        for (_, state) in trees.iter().filter(|(tree, _)| !touched.contains(tree)) {
            for index in &state.indexes {
                if let Some(global) = &index.global {
                    let mut global = global.lock();
                    global.files_epoch = global.files_epoch.max(change.files_epoch);
                }
            }
        }
        for tree in touched {
            let Some(state) = trees.get(&tree) else {
                continue;
            };
            let added: Vec<&sift_lsm::extension::FileChange> =
                change.added.iter().filter(|f| f.tree == tree).collect();
            let removed: Vec<&sift_lsm::extension::FileChange> =
                change.removed.iter().filter(|f| f.tree == tree).collect();
            // A trivial move removes and adds the same file: nothing changes for us.
            let moved: HashSet<u64> = added
                .iter()
                .filter(|a| removed.iter().any(|r| r.file.number == a.file.number))
                .map(|a| a.file.number)
                .collect();
            for index in &state.indexes {
                if change.reason == ChangeReason::Flush {
                    // Memtables are flushed in sequence order: every write up to the new
                    // file's largest sequence number is in tables now.
                    for file in &added {
                        index.memtable.prune_through(file.file.seq_max);
                    }
                }
                let mut global = index.global.as_ref().map(Mutex::lock);
                let mut side_files = index.side_files.lock();
                for file in removed.iter().filter(|f| !moved.contains(&f.file.number)) {
                    if let Some(global) = global.as_mut() {
                        global.remove(file.file.number);
                    }
                    side_files.remove(&file.file.number);
                }
                if let Some(global) = global.as_mut() {
                    for file in added.iter().filter(|f| !moved.contains(&f.file.number)) {
                        global.add(&file.file);
                    }
                    global.files_epoch = global.files_epoch.max(change.files_epoch);
                }
            }
            if let Some(memo) = &state.memo {
                let key = match change.reason {
                    ChangeReason::Flush => Some(JobKey::Flush),
                    ChangeReason::Compaction => {
                        removed.iter().map(|f| f.level).min().map(|input_level| {
                            JobKey::Compaction {
                                input_level,
                                output_level: added
                                    .iter()
                                    .chain(&removed)
                                    .map(|f| f.level)
                                    .max()
                                    .unwrap_or(input_level),
                            }
                        })
                    }
                    ChangeReason::Open | ChangeReason::TrivialMove | ChangeReason::DropTree => None,
                };
                if let Some(key) = key {
                    memo.apply_drops(key);
                }
            }
        }
    }

    pub(crate) fn on_drop(&self, job: JobKind, entry: &DroppedEntry<'_>) {
        let memo = {
            let trees = self.trees.read();
            match trees.get(&entry.tree).and_then(|t| t.memo.clone()) {
                Some(memo) => memo,
                None => return,
            }
        };
        memo.queue_drop(job, entry.user_key, entry.seq, entry.reason);
    }
}

/// Fills a new index's memtable map from the primary tree's memtables as `view` sees them.
/// Called under the database's write lock, so no write lands in between.
pub(crate) fn fill_memtable_map(view: &ComponentView, state: &NextIndexState) -> Result<()> {
    let mut recent: Vec<(SeqNo, Vec<u8>, Vec<u8>)> = Vec::new();
    for id in view.ids() {
        if !matches!(
            id,
            sift_lsm::ComponentId::Memtable | sift_lsm::ComponentId::ImmutableMemtable(_)
        ) {
            continue;
        }
        let mut iter = view.iter(id)?;
        iter.seek_to_first()?;
        while iter.valid() {
            if iter.kind() == sift_lsm::ValueKind::Put {
                let envelope =
                    EnvelopeRef::decode(iter.value()).map_err(|e| IndexError::Corrupt {
                        offset: 0,
                        message: format!(
                            "stored document {:?}: {e}",
                            String::from_utf8_lossy(iter.user_key())
                        ),
                    })?;
                if let Some(value) = encoded_attribute(&state.spec, &envelope, iter.seq()) {
                    recent.push((iter.seq(), value.into_owned(), iter.user_key().to_vec()));
                }
            }
            iter.next()?;
        }
    }
    // In sequence order, as the write path records them.
    recent.sort_unstable_by_key(|(seq, ..)| *seq);
    for (seq, value, pk) in recent {
        state.memtable.insert(&value, seq, &pk);
    }
    Ok(())
}

/// Every file of the view, all levels.
pub(crate) fn view_files(view: &ComponentView) -> Vec<Arc<FileMetaData>> {
    let mut files = view.files(0);
    for id in view.ids() {
        if let sift_lsm::ComponentId::Level(level) = id {
            files.extend(view.files(level));
        }
    }
    files
}

/// The version listener installed at open (forwards to the registry).
pub(crate) struct NextListener(pub Arc<Registry>);

impl VersionListener for NextListener {
    fn on_version_change(&self, change: &VersionChange) {
        self.0.on_version_change(change);
    }
}

/// The compaction observer installed at open: feeds the memos' drop counts.
pub(crate) struct NextObserver(pub Arc<Registry>);

impl CompactionObserver for NextObserver {
    fn on_drop(&self, job: JobKind, entry: &DroppedEntry<'_>, _emit: &mut WriteBatch) {
        self.0.on_drop(job, entry);
    }
}

/// A check's finding: the global index of `index_id` does not match the engine's files (the
/// database names the index).
pub(crate) fn inconsistent(index_id: u64, message: String) -> IndexError {
    IndexError::InconsistentIndex {
        index: format!("id {index_id}"),
        message,
    }
}
