//! The `sst-local` and `next` index kinds: secondary indexes stored inside the SSTables of the
//! primary tree (NEXT, SIGMOD 2025), for one-dimensional attributes (int, float, string, time)
//! and geo points.
//!
//! - `collector`: a block property collector writes, per table and per indexed attribute,
//!   secondary blocks `(value, pk, seq, next newer seq, data block)` sorted by value, cut by
//!   size and by the value-aware split (δ), plus a directory block of their value ranges.
//!   Layout: `format` and `docs/format/secondary-index-blocks.md`. Geo entries sort along the
//!   Z-order curve (their encoding starts with the code) and each geo block also records its
//!   bounding rectangle; δ then bounds how much a point may grow that rectangle.
//! - `global`: `next` keeps an in-memory interval index (`rtree`: an R-tree for geo) over
//!   every live file's secondary blocks, in step with the engine's version listener;
//!   `sst-local` has none and reads every live file's directory per query.
//! - `memo`: the update memo (pk → newest sequence number), one validation strategy; the
//!   other is the engine's GetLite (`newer_version_exists_above`).
//! - memtable map (`NextIndexState::memtable`, the embedded kind's `MemtableMap`): the writes
//!   still in memtables by value, so queries need not scan the memtables; filled at
//!   registration, fed by the write path, pruned by flushes.
//! - `query`: LOOKUP, RANGE and WITHIN: memtable map searched, matching secondary blocks read,
//!   each matching data block read at most once per query, candidates validated newest first.
//!
//! Writes cost the primary write and one map insert (plus, with memo validation, a memory-only
//! GetLite check per write of a key the memo does not know). Files written before an index existed (or while
//! it was being registered) carry no secondary blocks for it; queries scan them, so answers are
//! correct at every moment, and flushes and compactions index the data as they rewrite it.
//!
//! `Registry` (`registry.rs`) is shared by the engine hooks (collector factory, version listener, compaction
//! observer, all installed at `Database::open`) and the database: it says which attributes to
//! collect for which primary tree and holds each index's global index and each collection's
//! memo.

pub(crate) mod build;
pub(crate) mod collector;
pub mod format;
pub(crate) mod global;
mod kind;
pub(crate) mod memo;
pub(crate) mod query;
mod registry;
pub(crate) mod rtree;

pub use build::{IndexBuildFailure, IndexBuildStatus, IndexBuildsAtOpen, SecondaryBlocksReport};
pub(crate) use kind::Next;

pub use crate::catalog::{SplitDelta, Validation};

use crate::catalog::IndexKind;
use crate::document::DocumentParser;
use crate::embedded::memtable::MemtableMap;
use crate::encoding::decode_value;
use crate::envelope::EnvelopeRef;
use crate::error::Result;
use crate::value::{AttrType, AttrValue};
use format::{decode_directory, directory_name, property_lists, DirectoryEntry, COLLECTOR_NAME};
use global::GlobalIndex;
use memo::UpdateMemo;
use parking_lot::{Mutex, MutexGuard};
pub(crate) use registry::{view_files, NextListener, NextObserver, Registry};
use sift_lsm::extension::ComponentView;
use sift_lsm::extension::FileMetaData;
use sift_lsm::extension::ReadContext;
use sift_lsm::{Db, ReadOptions, SeqNo, Tree};
use std::borrow::Cow;
use std::collections::{HashMap, HashSet};
use std::sync::Arc;

/// What the collector indexes for one attribute.
#[derive(Debug, Clone)]
pub(crate) struct AttributeSpec {
    pub attr_id: u32,
    pub attr_type: AttrType,
    /// Reads the attribute from the JSON of versions older than the index (`Index::reader`).
    pub reader: DocumentParser,
    /// Versions at or below this may lack the attribute in their envelope (see `lib.rs`).
    pub first_seq: SeqNo,
    pub split: Option<SplitDelta>,
    pub block_bytes: usize,
}

/// The encoded attribute value of a stored version (the envelope's, or for versions written
/// before the index existed, the JSON's). Same rule as `Index::encoded_value`.
pub(crate) fn encoded_attribute<'a>(
    spec: &AttributeSpec,
    envelope: &EnvelopeRef<'a>,
    seq: SeqNo,
) -> Option<Cow<'a, [u8]>> {
    crate::kind::encoded_value(spec.attr_id, spec.first_seq, &spec.reader, envelope, seq)
}

/// The point of an encoded geo value (`None` if it is not a canonical geo encoding).
pub(crate) fn geo_point(encoded: &[u8]) -> Option<(f64, f64)> {
    match decode_value(encoded, AttrType::Geo) {
        Ok((AttrValue::Geo { lon, lat }, _)) => Some((lon, lat)),
        _ => None,
    }
}

/// A `next` index's global index plus the files the listener added that are not loaded yet
/// (their directories are read at the next query or check, not inside the listener, which
/// runs under the engine's state lock).
pub(crate) struct GlobalState {
    pub index: Box<dyn GlobalIndex>,
    pending: HashMap<u64, Arc<FileMetaData>>,
    /// The engine's files epoch this state is in step with: the last version change applied
    /// (`VersionChange::files_epoch`), or the epoch of the view it was loaded from. A view
    /// with the same `files_epoch()` shows exactly the files this describes (see
    /// [`NextIndexState::paired_view`]).
    files_epoch: u64,
}

impl GlobalState {
    fn add(&mut self, file: &Arc<FileMetaData>) {
        if !self.index.contains_file(file.number) {
            self.pending.insert(file.number, Arc::clone(file));
        }
    }

    fn remove(&mut self, file_number: u64) {
        self.pending.remove(&file_number);
        self.index.remove_file(file_number);
    }

    /// Loads the directories of pending files that have secondary blocks for the attribute.
    pub fn resolve(&mut self, view: &ComponentView, spec: &AttributeSpec) -> Result<()> {
        let attr_id = spec.attr_id;
        let mut numbers: Vec<u64> = self.pending.keys().copied().collect();
        numbers.sort_unstable();
        for number in numbers {
            let Some(file) = self.pending.get(&number).cloned() else {
                continue;
            };
            if property_lists(file.properties().get(COLLECTOR_NAME), attr_id) {
                let blocks = read_directory_unopened(view, &file, spec)?;
                self.index.insert_file(number, &blocks);
            }
            self.pending.remove(&number);
        }
        Ok(())
    }
}

/// Reads (through the block cache, counted in `context`) and decodes the directory of the
/// attribute in `file` (which must list it).
pub(crate) fn read_directory(
    view: &ComponentView,
    file: &Arc<FileMetaData>,
    spec: &AttributeSpec,
    context: &ReadContext,
) -> Result<Vec<DirectoryEntry>> {
    let attr_id = spec.attr_id;
    let table = view.table(file)?;
    let name = directory_name(attr_id);
    let offset = table
        .meta_block_handle(COLLECTOR_NAME, &name)
        .map_or(0, |h| h.offset);
    let Some(bytes) = table.meta_block_cached(COLLECTOR_NAME, &name, context)? else {
        return Err(sift_lsm::Error::corruption(
            table.path(),
            0,
            format!("the table lists attribute {attr_id} but has no meta block {name:?}"),
        )
        .into());
    };
    decode_directory(&bytes, attr_id, spec.attr_type == AttrType::Geo).map_err(|e| {
        sift_lsm::Error::corruption(
            table.path(),
            offset,
            format!(
                "meta block {name:?}: {} (byte {} of the block)",
                e.message, e.offset
            ),
        )
        .into()
    })
}

/// Like [`read_directory`], for loading the global index: a table not open yet stays
/// unopened (only its footer, metaindex and directory are read, not its index and bloom
/// filter), so the rebuild at open reads a few kilobytes per file.
pub(crate) fn read_directory_unopened(
    view: &ComponentView,
    file: &Arc<FileMetaData>,
    spec: &AttributeSpec,
) -> Result<Vec<DirectoryEntry>> {
    let attr_id = spec.attr_id;
    let name = directory_name(attr_id);
    let Some((path, handle, bytes)) =
        view.table_meta_block(file, COLLECTOR_NAME, &name, &ReadContext::default())?
    else {
        return Err(sift_lsm::Error::corruption(
            sift_lsm::extension::table_file_name(file.number),
            0,
            format!("the table lists attribute {attr_id} but has no meta block {name:?}"),
        )
        .into());
    };
    decode_directory(&bytes, attr_id, spec.attr_type == AttrType::Geo).map_err(|e| {
        sift_lsm::Error::corruption(
            path,
            handle.offset,
            format!(
                "meta block {name:?}: {} (byte {} of the block)",
                e.message, e.offset
            ),
        )
        .into()
    })
}

/// One registered `next` or `sst-local` index.
pub(crate) struct NextIndexState {
    pub index_id: u64,
    pub kind: IndexKind,
    pub spec: AttributeSpec,
    pub validation: Validation,
    /// `next` only.
    pub global: Option<Mutex<GlobalState>>,
    /// Live files whose secondary blocks for this index were built after the file was written
    /// and live in the collection's side tree (online creation, `build`). Lock order: the
    /// global index first, then this.
    pub side_files: Mutex<HashSet<u64>>,
    /// The writes still in the primary tree's memtables that carry the attribute
    /// (`value → (seq, pk)`, the embedded kind's map): queries find memtable candidates here
    /// instead of scanning the memtables. Filled at registration, fed by the write path,
    /// pruned when a flush puts writes into a table; see `next/query.rs` for when it is trusted.
    pub memtable: MemtableMap,
}

impl NextIndexState {
    /// A view of `primary` and, for `next`, this index's global index (locked, its pending
    /// files loaded) that describe the same files: the global index holds the secondary
    /// blocks of exactly the view's files that have them. The version listener tells the
    /// global index of a change just after the engine installs it, so a view can be one
    /// change ahead (the listener is being told: wait for it) or, taken before a change the
    /// listener has applied, behind (take a newer view). Both last microseconds; after
    /// `patience` the view and the global index are returned as they are, with `false`.
    pub(crate) fn paired_view(
        &self,
        engine: &Db,
        primary: &Tree,
        read: &ReadOptions,
        patience: std::time::Duration,
    ) -> Result<(ComponentView, Option<MutexGuard<'_, GlobalState>>, bool)> {
        let Some(global) = &self.global else {
            return Ok((engine.components(primary, read)?, None, true));
        };
        let started = std::time::Instant::now();
        let mut attempts: u32 = 0;
        loop {
            let view = engine.components(primary, read)?;
            let mut guard = global.lock();
            let in_step = guard.files_epoch == view.files_epoch();
            if in_step || started.elapsed() >= patience {
                guard.resolve(&view, &self.spec)?;
                return Ok((view, Some(guard), in_step));
            }
            let listener_behind = guard.files_epoch < view.files_epoch();
            drop(guard);
            attempts += 1;
            if listener_behind {
                // The installing thread holds the engine's state lock and is about to take
                // the global lock: let it run.
                if attempts < 64 {
                    std::thread::yield_now();
                } else {
                    std::thread::sleep(std::time::Duration::from_micros(50));
                }
            }
        }
    }
}

#[derive(Default)]
struct TreeState {
    indexes: Vec<Arc<NextIndexState>>,
    specs: Arc<Vec<AttributeSpec>>,
    memo: Option<Arc<UpdateMemo>>,
    /// The collection's side tree, once it exists (`build`).
    side: Option<Tree>,
}

/// What the global-index invariant check found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GlobalIndexReport {
    /// Live files with secondary blocks for the index (all of them in the global index).
    pub files_indexed: usize,
    /// Live files without secondary blocks for the index (scanned by queries).
    pub files_unindexed: usize,
    /// Of `files_indexed`, those whose blocks were built online into the side tree.
    pub files_built_online: usize,
    /// Global index entries (= secondary blocks of the live files).
    pub blocks: usize,
    /// Bytes the global index holds.
    pub memory_bytes: u64,
}

/// What a `next` index's global index holds now ([`crate::Database::global_index_stats`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GlobalIndexStats {
    /// Files whose secondary blocks it holds.
    pub files: usize,
    /// Its entries: one per secondary block.
    pub blocks: usize,
    /// Approximate heap bytes it holds.
    pub memory_bytes: u64,
}
