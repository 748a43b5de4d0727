//! What every index kind is and shares: the [`SecondaryIndex`] trait, the collections and
//! indexes in use (`collection.rs`), what a write hands a kind (`write.rs`), and the query
//! machinery kinds share — LOOKUP / RANGE validation and top K (`query.rs`), WITHIN over
//! Z-order keys (`within.rs`).
//!
//! Below every kind and the database: a kind's folder imports this module, never the database
//! or another kind, and the database reaches a kind only through the trait (and, to create or
//! open one, through its constructor in `database/kinds.rs`).

pub(crate) mod collection;
pub(crate) mod query;
pub(crate) mod unique;
pub(crate) mod within;
pub(crate) mod write;

pub(crate) use collection::{attribute_reader, encoded_value, Catalog, Collection, Index};

use crate::catalog::{IndexRecord, Maintenance};
use crate::error::{IndexError, Result};
use crate::postings::Posting;
use query::{SearchOutput, SearchRequest, StaleEntry};
use sift_lsm::{Db, SeqNo, Tree, WriteBatch, WriteOptions};
use std::any::Any;
use std::collections::BTreeMap;
use within::WithinRequest;
use write::{Change, WriteContext};

/// Entries per engine batch written by a back-fill.
pub(crate) const BACKFILL_BATCH_ENTRIES: usize = 1024;

/// Everything an index kind does. One implementation per kind, in the kind's folder
/// (`composite/`, `eager/`, `lazy/`, `memory/`, `embedded/`, `next/` — which serves `next` and
/// `sst-local` — and `deferred/`, the deferred scheme's composite). Asynchronous maintenance
/// wraps a kind from outside: the write path skips async indexes and the workers of
/// `async_index` apply their entries later.
///
/// Every method gets the [`Index`] it serves (record, attribute path), so the kind's struct
/// holds only its own state (a tree, a map, a registry handle).
pub(crate) trait SecondaryIndex: Send + Sync + std::fmt::Debug {
    /// The kind's state, for the few callers that need one kind's own handle (a memory index's
    /// map at close).
    fn as_any(&self) -> &dyn Any;

    /// The index's own engine tree, for kinds that keep their entries in one.
    fn tree(&self) -> Option<&Tree> {
        None
    }

    /// Whether a write must read the version it replaces for this index (to delete its
    /// entry). By default, for `sync-full` maintenance.
    fn needs_old_version(&self, index: &Index) -> bool {
        index.record.maintenance == Maintenance::SyncFull
    }

    /// The entries one document write produces: into the batch, into memory recorded before
    /// the commit, or kept in `cx` until the batch is complete or committed.
    fn write(&self, index: &Index, cx: &mut WriteContext<'_>, change: &Change<'_>) -> Result<()>;

    /// After every document of the batch (`position`: the index's place in its collection).
    fn finish_batch(
        &self,
        _index: &Index,
        _position: usize,
        _cx: &mut WriteContext<'_>,
    ) -> Result<()> {
        Ok(())
    }

    /// After the batch committed: a pk's new value (`None`: none) the kind kept for this
    /// moment (`WriteContext::after_commit`).
    fn apply_committed(&self, _pk: &[u8], _value: Option<(&[u8], SeqNo)>) {}

    /// The commit failed: entries recorded in memory for sequence numbers `<= through` may name
    /// versions that were never written.
    fn forget_uncommitted(&self, _through: SeqNo) {}

    /// Whether creating the index back-fills it by a scan of the primary tree
    /// ([`SecondaryIndex::backfill`]); kinds that read the primary's tables instead set
    /// themselves up elsewhere (their constructor, `next/build.rs`).
    fn backfills_by_scan(&self) -> bool {
        true
    }

    /// One live document of the back-fill scan, with its encoded value.
    fn backfill(
        &self,
        _index: &Index,
        _cx: &mut Backfill<'_>,
        _pk: &[u8],
        _value: &[u8],
        _seq: SeqNo,
    ) -> Result<()> {
        Ok(())
    }

    /// Creating an index that is not back-filled by a scan: what the kind does instead
    /// (register with the engine's hooks, read the memtables), under the write lock.
    fn build_without_scan(
        &self,
        _index: &Index,
        _engine: &Db,
        _collection: &Collection,
    ) -> Result<()> {
        Ok(())
    }

    /// After the scan: what was gathered whole (posting lists) is written.
    fn finish_backfill(&self, _index: &Index, _cx: &mut Backfill<'_>) -> Result<()> {
        Ok(())
    }

    /// LOOKUP (`request.point`) and RANGE: the hits, newest first, at most `request.limit`.
    fn search(&self, index: &Index, request: SearchRequest<'_>) -> Result<SearchOutput>;

    /// WITHIN a box, for kinds that support it on a geo attribute.
    fn within(&self, index: &Index, _request: WithinRequest<'_>) -> Result<SearchOutput> {
        Err(IndexError::UnsupportedQuery {
            index: index.record.name.clone(),
            reason: format!(
                "`within` is not supported by kind {}; spatial queries need a memory, composite, \
                 next or sst-local index",
                index.record.kind
            ),
        })
    }

    /// Deletes one stale entry a query met (read repair), if it is still stale: under the
    /// write lock, into `batch`.
    fn repair(
        &self,
        _index: &Index,
        _engine: &Db,
        _collection: &Collection,
        _batch: &mut WriteBatch,
        _entry: &StaleEntry,
    ) -> Result<()> {
        Ok(())
    }

    /// Bytes of memory the index holds (maps, global index); 0 for kinds that hold none.
    fn memory_bytes(&self, _index: &Index) -> u64 {
        0
    }

    /// The index is being dropped: stop what the kind registered with the engine's hooks.
    fn dropped(&self, _index: &Index, _collection: &Collection) {}
}

/// A back-fill in progress: entries go to the engine in batches of
/// [`BACKFILL_BATCH_ENTRIES`]; posting lists are gathered whole, then written newest first.
pub(crate) struct Backfill<'a> {
    pub(crate) engine: &'a Db,
    pub(crate) write_options: &'a WriteOptions,
    pub(crate) batch: WriteBatch,
    /// Eager and lazy: each value's postings, gathered over the whole scan.
    pub(crate) lists: BTreeMap<Vec<u8>, Vec<Posting>>,
}

impl<'a> Backfill<'a> {
    pub(crate) fn new(engine: &'a Db, write_options: &'a WriteOptions) -> Backfill<'a> {
        Backfill {
            engine,
            write_options,
            batch: WriteBatch::new(),
            lists: BTreeMap::new(),
        }
    }

    pub(crate) fn put(&mut self, tree: &Tree, key: &[u8], value: &[u8]) -> Result<()> {
        self.batch.put(tree, key, value);
        if self.batch.len() >= BACKFILL_BATCH_ENTRIES {
            self.engine
                .write(std::mem::take(&mut self.batch), self.write_options)?;
        }
        Ok(())
    }

    /// Eager and lazy: files `pk`'s version `seq` under `value`, in the list written whole by
    /// [`Backfill::write_lists`].
    pub(crate) fn gather_posting(&mut self, value: &[u8], pk: &[u8], seq: SeqNo) {
        self.lists
            .entry(value.to_vec())
            .or_default()
            .push(Posting::add(pk, seq));
    }

    /// Writes the gathered lists into `tree`, each newest first (which keeps lazy LOOKUP's
    /// early stop exact; `lazy/`).
    pub(crate) fn write_lists(&mut self, tree: &Tree) -> Result<()> {
        for (value, mut list) in std::mem::take(&mut self.lists) {
            list.sort_by_key(|posting| std::cmp::Reverse(posting.seq));
            self.put(tree, &value, &crate::postings::encode_postings(&list))?;
        }
        Ok(())
    }

    /// Writes what is left in the batch.
    pub(crate) fn finish(self) -> Result<()> {
        if !self.batch.is_empty() {
            self.engine.write(self.batch, self.write_options)?;
        }
        Ok(())
    }
}

/// The index record's stand-alone tree, for the constructors of tree-backed kinds.
pub(crate) fn missing_tree(record: &IndexRecord) -> IndexError {
    IndexError::Internal(format!(
        "index `{}` of `{}` has no tree in its record",
        record.name, record.collection
    ))
}
