//! The `embedded` index kind (LevelDB++ Embedded Index, SIGMOD'18 §3, Algorithms 5 and 8):
//! no index tree at all. Every SSTable of the primary tree carries, per data block and per
//! indexed attribute, a bloom filter and a zone map, and per table a zone map kept in the
//! manifest (`collector.rs`); recent writes are found through an in-memory ordered map
//! (`memtable.rs`); LOOKUP and RANGE walk the primary tree component by component, read only
//! the blocks whose filters pass and validate candidates with GetLite (`query.rs`).
//!
//! Writes cost nothing beyond the primary write and one map insert. Creating the index needs
//! no back-fill: tables written before it existed carry no bytes for its attribute and are
//! scanned (not skipped) until compaction rewrites them. There is nothing to maintain, so the
//! index's maintenance is recorded as `sync-insert` (queries validate every candidate);
//! `sync-full` and read repair are rejected at creation.
//!
//! Shared state: one [`EmbeddedRegistry`] per `Database`, listing per primary tree the
//! embedded indexes in use. The collector factory (installed once in the engine's default tree
//! options) reads it to know what to gather for the tree being written, and a version
//! listener prunes the memtable maps when the primary tree is flushed.

pub mod collector;
mod kind;
pub mod memtable;
pub mod query;

use crate::document::DocumentParser;
use crate::envelope::EnvelopeRef;
use crate::error::Result;
use crate::kind::Index;
use memtable::MemtableMap;
use parking_lot::RwLock;
use sift_lsm::extension::{ChangeReason, VersionChange, VersionListener};
use sift_lsm::{ComponentId, Db, ReadOptions, SeqNo, Tree, TreeId, ValueKind};
use std::collections::HashMap;
use std::sync::Arc;

pub(crate) use kind::Embedded;

/// What the collector gathers for one attribute.
#[derive(Debug, Clone)]
pub struct CollectedAttr {
    pub attr_id: u32,
    pub bloom_bits_per_key: u32,
    /// Versions `<=` this lacking the attribute in their envelope predate the index: their
    /// value is in the JSON only.
    pub first_seq: SeqNo,
    /// Reads the attribute from the JSON of those versions (`Index::reader`).
    pub reader: DocumentParser,
}

/// A table's data blocks by decreasing largest sequence number (`(seq_max, ordinal)`), so a
/// top-K query visits the newest blocks first without looking at the others. Tables are
/// immutable, so it is computed once per table and dropped when the table leaves the tree.
#[derive(Debug)]
pub struct BlockOrder {
    pub newest_first: Vec<(SeqNo, u32)>,
}

/// The in-memory part of one embedded index.
#[derive(Debug)]
pub struct EmbeddedIndex {
    pub attr: CollectedAttr,
    pub map: MemtableMap,
    /// By table file number.
    block_orders: parking_lot::Mutex<HashMap<u64, Arc<BlockOrder>>>,
}

impl EmbeddedIndex {
    pub fn new(attr: CollectedAttr) -> EmbeddedIndex {
        EmbeddedIndex {
            attr,
            map: MemtableMap::default(),
            block_orders: parking_lot::Mutex::new(HashMap::new()),
        }
    }

    /// The cached block order of table `file_number`, or the one `build` makes (and caches).
    pub(crate) fn block_order(
        &self,
        file_number: u64,
        build: impl FnOnce() -> Result<BlockOrder>,
    ) -> Result<Arc<BlockOrder>> {
        if let Some(order) = self.block_orders.lock().get(&file_number) {
            return Ok(Arc::clone(order));
        }
        let order = Arc::new(build()?);
        self.block_orders
            .lock()
            .insert(file_number, Arc::clone(&order));
        Ok(order)
    }

    fn forget_table(&self, file_number: u64) {
        self.block_orders.lock().remove(&file_number);
    }
}

/// The embedded indexes in use, by primary tree.
#[derive(Debug, Default)]
pub struct EmbeddedRegistry {
    trees: RwLock<HashMap<TreeId, Vec<Arc<EmbeddedIndex>>>>,
}

impl EmbeddedRegistry {
    pub(crate) fn indexes_of(&self, tree: TreeId) -> Vec<Arc<EmbeddedIndex>> {
        self.trees.read().get(&tree).cloned().unwrap_or_default()
    }

    pub(crate) fn register(&self, tree: TreeId, index: Arc<EmbeddedIndex>) {
        let mut trees = self.trees.write();
        let list = trees.entry(tree).or_default();
        list.retain(|other| other.attr.attr_id != index.attr.attr_id);
        list.push(index);
    }

    pub(crate) fn unregister(&self, tree: TreeId, attr_id: u32) {
        let mut trees = self.trees.write();
        if let Some(list) = trees.get_mut(&tree) {
            list.retain(|other| other.attr.attr_id != attr_id);
            if list.is_empty() {
                trees.remove(&tree);
            }
        }
    }
}

/// Prunes the memtable maps of a primary tree when one of its memtables reaches a table, and
/// drops cached block orders of tables that leave it.
pub struct EmbeddedFlushListener {
    registry: Arc<EmbeddedRegistry>,
}

impl EmbeddedFlushListener {
    pub(crate) fn new(registry: Arc<EmbeddedRegistry>) -> EmbeddedFlushListener {
        EmbeddedFlushListener { registry }
    }
}

impl VersionListener for EmbeddedFlushListener {
    fn on_version_change(&self, change: &VersionChange) {
        let trees = self.registry.trees.read();
        for removed in &change.removed {
            if let Some(list) = trees.get(&removed.tree) {
                for index in list {
                    index.forget_table(removed.file.number);
                }
            }
        }
        if change.reason != ChangeReason::Flush {
            return;
        }
        for added in &change.added {
            if let Some(list) = trees.get(&added.tree) {
                for index in list {
                    index.map.prune_through(added.file.seq_max);
                }
            }
        }
    }
}

/// Fills an index's in-memory part from the primary tree's memtables as they are now, then
/// registers it. Call under the database's write lock (no write may land in a memtable between
/// the scan and the registration).
pub(crate) fn start(
    engine: &Db,
    registry: &EmbeddedRegistry,
    primary: &Tree,
    index: &Index,
    embedded: &Arc<EmbeddedIndex>,
) -> Result<()> {
    let view = engine.components(primary, &ReadOptions::default())?;
    let mut recent: Vec<(SeqNo, Vec<u8>, Vec<u8>)> = Vec::new();
    for id in view.ids() {
        if !matches!(
            id,
            ComponentId::Memtable | ComponentId::ImmutableMemtable(_)
        ) {
            continue;
        }
        let mut iter = view.iter(id)?;
        iter.seek_to_first()?;
        while iter.valid() {
            if iter.kind() == ValueKind::Put {
                let envelope = EnvelopeRef::decode(iter.value()).map_err(|e| {
                    crate::kind::collection::corrupt_document(
                        &index.record.collection,
                        iter.user_key(),
                        &e,
                    )
                })?;
                if let Some(value) = index.encoded_value(&envelope, iter.seq()) {
                    recent.push((iter.seq(), value.into_owned(), iter.user_key().to_vec()));
                }
            }
            iter.next()?;
        }
    }
    // In sequence order, as the write path records them.
    recent.sort_unstable_by_key(|(seq, ..)| *seq);
    for (seq, value, pk) in recent {
        embedded.map.insert(&value, seq, &pk);
    }
    registry.register(primary.id(), Arc::clone(embedded));
    Ok(())
}
