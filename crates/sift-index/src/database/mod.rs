//! `Database`: collections of JSON documents with secondary indexes over one `sift_lsm::Db`.
//!
//! Shaped like `sift-lsm/src/db/`: the handle, its options and the helpers its parts share
//! (here), opening and closing with the catalog load and the recovery of half-built indexes
//! (`open.rs`), collections and indexes created and dropped, back-fills (`ddl.rs`), the write
//! path (`write.rs`), queries (`read.rs`) and read repair (`repair.rs`); which kind an index record
//! gets is decided in `kinds.rs`, the types the kinds share are in `kind/`. The design (trees,
//! locking, sequence numbers) is described in the crate documentation (`lib.rs`).

mod builds;
mod ddl;
mod inspect;
mod kinds;
mod maintenance;
mod open;
mod read;
mod repair;
mod write;

pub(crate) use write::{first_seq, put_seq};

pub use crate::catalog::{BackfillProgress, ProgressCallback};
use crate::catalog::{CollectionRecord, IndexRecord};
use crate::deferred::DeferredRegistry;
use crate::document::{DocumentParser, IndexedAttribute, TypeMismatchPolicy};
use crate::error::{IndexError, Result};
pub(crate) use crate::kind::collection::corrupt_document;
use crate::kind::{Catalog, Collection, Index};
use crate::next::Registry as NextRegistry;
use crate::path::AttrPath;
use parking_lot::{Mutex, MutexGuard, RwLock};
use sift_lsm::{Db, Options, SeqNo, Tree, TreeOptions, WriteBatch, WriteOptions};
use std::sync::Arc;
use std::time::Instant;

/// Documents between two progress reports of a back-fill or rebuild.
pub(super) const PROGRESS_EVERY_DOCUMENTS: u64 = 1000;

/// Where the time of [`Database::open`](crate::Database::open) went ([`Database::open_timings`](crate::Database::open_timings)), in microseconds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct OpenTimings {
    /// The whole open.
    pub total_us: u64,
    /// The engine's recovery (manifest, WAL replay, tables of the live files).
    pub engine_us: u64,
    /// Loading the catalog and opening every index (includes `next_register_us`).
    pub indexes_us: u64,
    /// Of `indexes_us`: registering `next` and `sst-local` indexes — for `next`, rebuilding
    /// the global index from the secondary-block directories of the live files.
    pub next_register_us: u64,
}

/// How a [`Database`] is opened.
#[derive(Clone, Default)]
pub struct DatabaseOptions {
    /// Engine options. The index layer sets `default_tree_options.merge_operator` (see
    /// `lib.rs`).
    pub engine: Options,
    /// What a write does with an attribute of the wrong type.
    pub type_mismatch: TypeMismatchPolicy,
    /// Told about back-fills and rebuilds done while opening, and (from a background thread)
    /// about the online builds that `open` resumes.
    pub progress: Option<ProgressCallback>,
    /// fdatasync the WAL before acknowledging each write.
    pub sync_writes: bool,
    /// Workers, retries and sessions of `async-simple` / `async-session` indexes.
    pub async_index: crate::async_index::AsyncIndexOptions,
    /// `deferred` indexes with the in-memory fast path: a write also deletes the entries of
    /// the version it shadows when that version is in a memtable (`deferred/`). Off by
    /// default: it costs a memtable search per write and more memtable inserts, for less
    /// garbage before flushes.
    pub deferred_fast_path: bool,
    /// What `open` does about `next` / `sst-local` indexes whose online build was interrupted
    /// (some live tables still lack their blocks): resume it in a background thread (the
    /// default; [`Database::wait_for_index_builds`](crate::Database::wait_for_index_builds)), or leave it.
    pub index_builds_at_open: crate::next::build::IndexBuildsAtOpen,
    /// Testing aid: runs in `open` right after the engine's compactions resume (they are
    /// paused from the engine's open until the asynchronous indexes' retention is in place),
    /// before the catalog is loaded.
    #[doc(hidden)]
    pub after_compactions_resumed: Option<crate::async_index::TestHook>,
}

impl std::fmt::Debug for DatabaseOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DatabaseOptions")
            .field("engine", &self.engine)
            .field("type_mismatch", &self.type_mismatch)
            .field("sync_writes", &self.sync_writes)
            .finish_non_exhaustive()
    }
}

/// One write of a batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriteOp<'a> {
    /// A JSON document; replaces the document with the same primary key.
    Put(&'a [u8]),
    /// A primary key (as `DocumentParser` gives it: a string's UTF-8 or an integer's text).
    Delete(&'a [u8]),
}

/// A collection and its indexes, as the catalog holds them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CollectionInfo {
    /// The collection's record.
    pub record: CollectionRecord,
    /// Its indexes, ready or building.
    pub indexes: Vec<IndexRecord>,
}

/// Documents and their secondary indexes. `Send + Sync`.
pub struct Database {
    /// Online builds in the background: resumed at open, or handed over by `create_index`
    /// after a recoverable failure (`next/build.rs`). First, so that dropping the database
    /// stops and joins its thread before the engine handle goes.
    pub(crate) index_builds: crate::next::build::IndexBuilds,
    /// Shared with the asynchronous index workers.
    pub(crate) engine: Arc<Db>,
    pub(crate) catalog_tree: Tree,
    pub(crate) catalog: Arc<RwLock<Arc<Catalog>>>,
    /// Serialises every engine write made by this layer (see `lib.rs`: read-modify-write
    /// maintenance relies on it).
    write_lock: Mutex<()>,
    type_mismatch: TypeMismatchPolicy,
    pub(crate) progress: Option<ProgressCallback>,
    write_options: WriteOptions,
    /// Deferred indexes by primary tree, for the compaction observer (`deferred/`).
    pub(crate) deferred: Arc<DeferredRegistry>,
    /// The engine's file system: memory-index snapshots are written through it.
    pub(crate) file_system: Arc<dyn sift_lsm::fs::FileSystem>,
    /// The engine's latest sequence number right after recovery, before this layer wrote
    /// anything: a memory-index snapshot is current only if written at exactly this number.
    opened_sequence: SeqNo,
    /// `next` / `sst-local` indexes: what the collector writes, global indexes, memos.
    pub(crate) next: Arc<NextRegistry>,
    /// Embedded indexes in use, read by the block property collector and the flush listener.
    embedded: Arc<crate::embedded::EmbeddedRegistry>,
    /// Options of new primary trees (the engine's defaults, with the embedded collector).
    primary_tree_options: TreeOptions,
    /// Queue and workers of asynchronous indexes (`async_index`).
    pub(crate) async_index: crate::async_index::AsyncIndexer,
    /// Composite index trees, whose tables record each block's largest sequence number.
    composite_seq: Arc<crate::composite::seq::CompositeSeqRegistry>,
    /// Filled while opening, read by `open_timings`.
    open_timings: Mutex<OpenTimings>,
}

impl std::fmt::Debug for Database {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Database")
            .field("engine", &self.engine)
            .finish_non_exhaustive()
    }
}

pub(super) fn elapsed_us(started: Instant) -> u64 {
    u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX)
}

impl Database {
    /// The engine underneath, for statistics, flushes and compactions. Writing to it directly
    /// breaks the index layer's sequence-number bookkeeping: do not.
    pub fn engine(&self) -> &Db {
        &self.engine
    }

    /// Flushes every memtable to tables.
    pub fn flush(&self) -> Result<()> {
        Ok(self.engine.flush()?)
    }

    /// Compacts every tree of the database fully.
    pub fn compact_all(&self) -> Result<()> {
        {
            let _guard = self.lock_writes();
            self.apply_pending_drops()?;
        }
        // Primaries first: their compactions emit the DELETEs of deferred indexes.
        let mut names = self.engine.tree_names();
        names.sort_by_key(|name| !name.ends_with(".docs"));
        for name in names {
            let tree = self.engine.tree(&name)?;
            self.engine.compact_range(&tree, None, None)?;
        }
        Ok(())
    }

    fn lock_writes(&self) -> MutexGuard<'_, ()> {
        self.write_lock.lock()
    }

    pub(crate) fn collection_arc(&self, name: &str) -> Result<Arc<Collection>> {
        self.catalog
            .read()
            .collections
            .get(name)
            .cloned()
            .ok_or_else(|| IndexError::UnknownCollection {
                name: name.to_string(),
            })
    }

    fn install(&self, catalog: Catalog) {
        self.deferred.replace(catalog.collections.values());
        *self.catalog.write() = Arc::new(catalog);
    }

    fn parser_for(
        &self,
        record: &CollectionRecord,
        indexes: &[Arc<Index>],
    ) -> Result<DocumentParser> {
        let attributes = indexes
            .iter()
            .map(|index| {
                IndexedAttribute::new(
                    index.record.attr_id,
                    index.path.clone(),
                    index.record.attr_type,
                )
                .with_source(index.record.conversion, &index.record.key_prefixes)
            })
            .collect();
        Ok(
            DocumentParser::new(AttrPath::parse(&record.pk_path)?, attributes)?
                .with_type_mismatch_policy(self.type_mismatch),
        )
    }

    /// `collection` with one more ready index (its parser rebuilt to extract the new attribute).
    fn with_index(&self, collection: &Collection, index: Index) -> Result<Collection> {
        let mut indexes = collection.indexes.clone();
        indexes.push(Arc::new(index));
        self.build_collection(
            collection.record.clone(),
            collection.primary.clone(),
            indexes,
        )
    }

    fn build_collection(
        &self,
        record: CollectionRecord,
        primary: Tree,
        indexes: Vec<Arc<Index>>,
    ) -> Result<Collection> {
        let parser = self.parser_for(&record, &indexes)?;
        Ok(Collection {
            record,
            primary,
            parser,
            indexes,
        })
    }

    /// Drops an engine tree. The memtables are flushed first: the engine's flush does not
    /// expect entries of a tree that was dropped meanwhile ("file added to unknown tree").
    fn drop_engine_tree(&self, name: &str) -> Result<()> {
        self.engine.flush()?;
        self.engine.drop_tree(name)?;
        Ok(())
    }

    fn write_catalog(&self, batch: WriteBatch) -> Result<()> {
        self.engine.write(
            batch,
            &WriteOptions {
                sync: true, // catalog changes are rare and must survive
            },
        )?;
        Ok(())
    }
}

#[allow(dead_code)]
fn assert_send_sync() {
    fn check<T: Send + Sync>() {}
    check::<Database>();
}
