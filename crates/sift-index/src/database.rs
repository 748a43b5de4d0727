//! `Database`: collections of JSON documents with secondary indexes over one `sift_lsm::Db`.
//!
//! Owns opening (catalog load, crash recovery of half-built indexes, memory-index rebuild),
//! the catalog operations and the write path. Queries are in `query.rs`. The design (trees,
//! locking, sequence numbers) is described in the crate documentation (`lib.rs`).

use crate::catalog::{
    check_name, collection_key, decode_record, encode_record, index_key, index_tree_name,
    CollectionRecord, IndexKind, IndexRecord, IndexSpec, IndexState, Maintenance, CATALOG_TREE,
    NEXT_ID_KEY, TREE_PREFIX,
};
use crate::deferred::{deferred_key, is_deferred, DeferredObserver, DeferredRegistry};
use crate::document::{DocumentParser, IndexedAttribute, TypeMismatchPolicy};
use crate::encoding::{encode_pk, encode_value_to_vec};
use crate::envelope::EnvelopeRef;
use crate::error::{IndexError, Result};
use crate::memory::MemoryIndex;
use crate::memory_snapshot::{self, MemoryIndexOrigin};
use crate::next::collector::NextCollectorFactory;
use crate::next::{NextListener, NextObserver, Registry as NextRegistry};
use crate::path::AttrPath;
use crate::postings::{decode_postings, encode_postings, Posting, PostingMergeOperator};
use crate::value::AttrValue;
use parking_lot::{Mutex, MutexGuard, RwLock};
use sift_lsm::{Db, Options, ReadOptions, SeqNo, Tree, TreeOptions, WriteBatch, WriteOptions};
use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

/// Documents between two progress reports of a back-fill or rebuild.
const PROGRESS_EVERY_DOCUMENTS: u64 = 1000;
/// Entries per engine batch written by a back-fill.
const BACKFILL_BATCH_ENTRIES: usize = 1024;

/// Progress of an index back-fill (at `create_index`, or at open for a `building` index) or of
/// a memory-index rebuild at open.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BackfillProgress {
    pub collection: String,
    pub index: String,
    pub documents_done: u64,
    pub finished: bool,
}

pub type ProgressCallback = Arc<dyn Fn(&BackfillProgress) + Send + Sync>;

/// Where the time of [`Database::open`] went ([`Database::open_timings`]), in microseconds.
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
    /// the version it shadows when that version is in a memtable (`deferred.rs`). Off by
    /// default: it costs a memtable search per write and more memtable inserts, for less
    /// garbage before flushes.
    pub deferred_fast_path: bool,
    /// What `open` does about `next` / `sst-local` indexes whose online build was interrupted
    /// (some live tables still lack their blocks): resume it in a background thread (the
    /// default; [`Database::wait_for_index_builds`]), or leave it.
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
    pub record: CollectionRecord,
    pub indexes: Vec<IndexRecord>,
}

/// An index in use.
#[derive(Debug)]
pub(crate) struct Index {
    pub(crate) record: IndexRecord,
    pub(crate) path: AttrPath,
    pub(crate) tree: Option<Tree>,
    pub(crate) memory: Option<MemoryIndex>,
    /// `embedded` only: the map of recent writes and what the collector gathers.
    pub(crate) embedded: Option<Arc<crate::embedded::EmbeddedIndex>>,
}

impl Index {
    /// The encoded value of this index's attribute in a stored document version written at
    /// `seq`, or `None` if the version does not carry it. Versions written before the index
    /// existed lack the attribute in their envelope; their JSON is parsed instead (a value
    /// that does not convert to the index type counts as absent).
    #[inline]
    pub(crate) fn encoded_value<'a>(
        &self,
        envelope: &EnvelopeRef<'a>,
        seq: SeqNo,
    ) -> Option<Cow<'a, [u8]>> {
        if let Some(encoded) = envelope.attr_encoded(self.record.attr_id) {
            return Some(Cow::Borrowed(encoded));
        }
        if seq > self.record.first_seq {
            return None;
        }
        self.value_from_json(envelope)
    }

    /// [`Index::encoded_value`] of a version older than the index (rare: out of line).
    #[cold]
    #[inline(never)]
    fn value_from_json<'a>(&self, envelope: &EnvelopeRef<'a>) -> Option<Cow<'a, [u8]>> {
        let document: serde_json::Value = serde_json::from_slice(envelope.doc()).ok()?;
        let json = self.path.lookup(&document)?;
        if json.is_null() {
            return None;
        }
        let value = AttrValue::from_json(json, self.record.attr_type, self.path.as_str()).ok()?;
        Some(Cow::Owned(encode_value_to_vec(&value)))
    }

    pub(crate) fn embedded_state(&self) -> Result<&crate::embedded::EmbeddedIndex> {
        self.embedded.as_deref().ok_or_else(|| {
            IndexError::Internal(format!("index `{}` is not embedded", self.record.name))
        })
    }

    pub(crate) fn stand_alone_tree(&self) -> Result<&Tree> {
        self.tree.as_ref().ok_or_else(|| {
            IndexError::Internal(format!("index `{}` has no tree", self.record.name))
        })
    }
}

/// A collection in use.
#[derive(Debug)]
pub(crate) struct Collection {
    pub(crate) record: CollectionRecord,
    pub(crate) primary: Tree,
    pub(crate) parser: DocumentParser,
    /// Ready indexes only.
    pub(crate) indexes: Vec<Arc<Index>>,
}

impl Collection {
    pub(crate) fn index(&self, name: &str) -> Result<&Arc<Index>> {
        self.indexes
            .iter()
            .find(|index| index.record.name == name)
            .ok_or_else(|| IndexError::UnknownIndex {
                collection: self.record.name.clone(),
                name: name.to_string(),
            })
    }
}

#[derive(Debug, Clone, Default)]
pub(crate) struct Catalog {
    pub(crate) collections: BTreeMap<String, Arc<Collection>>,
    next_id: u64,
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
    /// Deferred indexes by primary tree, for the compaction observer (`deferred.rs`).
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
    composite_seq: Arc<crate::composite_seq::CompositeSeqRegistry>,
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

/// (index position, pk, new live value and seq) for a memory index, applied after the write.
type MemoryUpdate = (usize, Vec<u8>, Option<(Vec<u8>, SeqNo)>);

/// What `build_batch` gathers for the layers that act around the commit.
#[derive(Default)]
struct AroundCommit {
    /// (pk, seq, an older version surely exists) for the update memo of `next` indexes.
    memo_writes: Vec<(Vec<u8>, SeqNo, bool)>,
    /// DELETEs the deferred fast path put in the batch (counted once it commits).
    deferred_fast_path_deletes: u64,
}

/// A parsed write, ready to apply.
enum Prepared {
    Put { pk: Vec<u8>, envelope: Vec<u8> },
    Delete { pk: Vec<u8> },
}

fn elapsed_us(started: Instant) -> u64 {
    u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX)
}

fn corrupt_document(collection: &str, pk: &[u8], error: &IndexError) -> IndexError {
    IndexError::Internal(format!(
        "stored document {:?} of collection `{collection}` is corrupt: {error}",
        String::from_utf8_lossy(pk)
    ))
}

impl Database {
    /// Opens (or creates) a database in `path`. Indexes left `building` by a crash are
    /// back-filled again and memory indexes are rebuilt before this returns.
    pub fn open(path: impl AsRef<Path>, options: DatabaseOptions) -> Result<Database> {
        let open_started = Instant::now();
        let mut engine_options = options.engine.clone();
        engine_options.default_tree_options.merge_operator = Some(Arc::new(PostingMergeOperator));
        let next = Arc::new(NextRegistry::new(options.engine.block_bytes));
        engine_options
            .default_tree_options
            .block_property_collectors
            .push(Arc::new(NextCollectorFactory {
                registry: Arc::clone(&next),
            }));
        engine_options
            .version_listeners
            .push(Arc::new(NextListener(Arc::clone(&next))));
        engine_options
            .compaction_observers
            .push(Arc::new(NextObserver(Arc::clone(&next))));
        let index_builds = crate::next::build::IndexBuilds::new(std::time::Duration::from_millis(
            options.engine.background_error_retry_interval_max_millis,
        ));
        engine_options
            .recovery_listeners
            .push(index_builds.recovery_listener());
        let embedded = Arc::new(crate::embedded::EmbeddedRegistry::default());
        engine_options
            .default_tree_options
            .block_property_collectors
            .push(Arc::new(
                crate::embedded::collector::EmbeddedCollectorFactory::new(Arc::clone(&embedded)),
            ));
        engine_options.version_listeners.push(Arc::new(
            crate::embedded::EmbeddedFlushListener::new(Arc::clone(&embedded)),
        ));
        let primary_tree_options = engine_options.default_tree_options.clone();
        // After the primaries' options are taken: index trees get their options from the
        // defaults when the engine reopens them.
        let composite_seq = Arc::new(crate::composite_seq::CompositeSeqRegistry::default());
        engine_options
            .default_tree_options
            .block_property_collectors
            .push(Arc::new(
                crate::composite_seq::CompositeSeqCollectorFactory::new(Arc::clone(&composite_seq)),
            ));
        let deferred = Arc::new(DeferredRegistry::new(crate::deferred::read_marker(
            options.engine.file_system.as_ref(),
            path.as_ref(),
        )));
        deferred.set_fast_path(options.deferred_fast_path);
        engine_options
            .compaction_observers
            .push(Arc::new(DeferredObserver {
                registry: Arc::clone(&deferred),
            }));
        // Deferred indexes accumulate DELETEs: let compaction push tombstone-heavy files down.
        engine_options.compaction_prefer_tombstones = true;
        let (async_index, flush_listener) =
            crate::async_index::AsyncIndexer::new(options.async_index.clone());
        engine_options.flush_listeners.push(flush_listener);
        // Paused until the asynchronous indexes' retention is in place (below).
        engine_options.compactions_paused_at_open = true;
        let engine_started = Instant::now();
        let engine = Arc::new(Db::open(path, engine_options)?);
        let engine_us = elapsed_us(engine_started);
        if engine.default_tree().id() != crate::deferred::DEFAULT_TREE_ID {
            return Err(IndexError::Internal(
                "the engine's default tree does not have id 0".into(),
            ));
        }
        let catalog_tree = match engine.tree(CATALOG_TREE) {
            Ok(tree) => tree,
            Err(sift_lsm::Error::TreeNotFound(_)) => {
                engine.create_tree(CATALOG_TREE, TreeOptions::default())?
            }
            Err(error) => return Err(error.into()),
        };
        // The versions the replay of asynchronous index updates will read must survive the
        // compactions that now start (`async_index` module docs).
        if let Some(floor) = crate::async_index::recovery_floor(&engine, &catalog_tree)? {
            async_index.core.retain_versions_above(&engine, floor);
        }
        engine.resume_compactions();
        if let Some(hook) = &options.after_compactions_resumed {
            (hook.0)(&engine);
        }
        let opened_sequence = engine.latest_sequence();
        let database = Database {
            index_builds,
            engine,
            catalog_tree,
            catalog: Arc::new(RwLock::new(Arc::new(Catalog::default()))),
            write_lock: Mutex::new(()),
            type_mismatch: options.type_mismatch,
            progress: options.progress.clone(),
            write_options: WriteOptions {
                sync: options.sync_writes,
            },
            deferred,
            file_system: Arc::clone(&options.engine.file_system),
            opened_sequence,
            next,
            embedded,
            primary_tree_options,
            async_index,
            composite_seq,
            open_timings: Mutex::new(OpenTimings {
                engine_us,
                ..OpenTimings::default()
            }),
        };
        let indexes_started = Instant::now();
        database.load_catalog()?;
        // A flush or compaction that started before the catalog was loaded may have recorded
        // dropped versions as pending and not committed them yet: wait for it, or its records
        // would land after the scan below and stay unapplied until the next open.
        database.engine.wait_for_running_jobs()?;
        database.open_timings.lock().indexes_us = elapsed_us(indexes_started);
        {
            let _guard = database.lock_writes();
            database.apply_pending_drops()?;
            database.update_deferred_marker(None)?;
        }
        database.start_async_index()?;
        if options.index_builds_at_open == crate::next::build::IndexBuildsAtOpen::Resume {
            database.resume_index_builds()?;
        }
        database.open_timings.lock().total_us = elapsed_us(open_started);
        Ok(database)
    }

    /// Where the time of the open that made this database went.
    pub fn open_timings(&self) -> OpenTimings {
        *self.open_timings.lock()
    }

    /// Applies the queued asynchronous index updates, stops background work, syncs the WAL,
    /// then saves each memory index to a snapshot so the next open loads it instead of
    /// scanning (`memory_snapshot.rs`).
    pub fn close(self) -> Result<()> {
        self.index_builds.stop();
        self.stop_async_index();
        let catalog = Arc::clone(&self.catalog.read());
        // No write can run: `self` is owned here and the workers are stopped, so this is the
        // state the snapshots reflect.
        let sequence = self.engine.latest_sequence();
        let directory = self.engine.path().to_path_buf();
        let file_system = Arc::clone(&self.file_system);
        let Database { engine, .. } = self;
        match Arc::try_unwrap(engine) {
            Ok(engine) => engine.close()?,
            // Not expected (the workers are joined): the last owner closes the engine on drop
            // and memory indexes are rebuilt by the next open.
            Err(_) => return Ok(()),
        }
        let memory_indexes = catalog.collections.values().flat_map(|collection| {
            collection
                .indexes
                .iter()
                .filter_map(|index| index.memory.as_ref().map(|memory| (&index.record, memory)))
        });
        memory_snapshot::write_snapshots(file_system.as_ref(), &directory, memory_indexes, sequence)
    }

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
            .map(|index| IndexedAttribute {
                id: index.record.attr_id,
                path: index.path.clone(),
                attr_type: index.record.attr_type,
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

    // ---- catalog ---------------------------------------------------------------------------

    fn load_catalog(&self) -> Result<()> {
        let _guard = self.lock_writes();
        let mut collections: Vec<CollectionRecord> = Vec::new();
        let mut indexes: Vec<IndexRecord> = Vec::new();
        let mut next_id = 1;
        for item in self
            .engine
            .iter(&self.catalog_tree, ReadOptions::default())?
        {
            let (key, value, _) = item?;
            if key.starts_with(b"collection/") {
                collections.push(decode_record(&key, &value)?);
            } else if key.starts_with(b"index/") {
                indexes.push(decode_record(&key, &value)?);
            } else if key == NEXT_ID_KEY {
                next_id = decode_record(&key, &value)?;
            }
        }
        let mut catalog = Catalog {
            collections: BTreeMap::new(),
            next_id,
        };
        let mut referenced: HashSet<String> = HashSet::new();
        for record in collections {
            let primary = self.engine.tree(&record.primary_tree_name()).map_err(|e| {
                IndexError::CorruptCatalog {
                    key: String::from_utf8_lossy(&collection_key(&record.name)).into_owned(),
                    message: format!("primary tree missing: {e}"),
                }
            })?;
            referenced.insert(record.primary_tree_name());
            referenced.insert(crate::next::build::side_tree_name(
                &record.primary_tree_name(),
            ));
            let collection = self.build_collection(record, primary, Vec::new())?;
            catalog
                .collections
                .insert(collection.record.name.clone(), Arc::new(collection));
        }
        // Indexes are added one at a time: a back-fill scans the collection with the indexes
        // ready so far.
        for record in indexes {
            let Some(collection) = catalog.collections.get(&record.collection).cloned() else {
                return Err(IndexError::CorruptCatalog {
                    key: String::from_utf8_lossy(&index_key(&record.collection, &record.name))
                        .into_owned(),
                    message: "index of an unknown collection".to_string(),
                });
            };
            let index = if record.state == IndexState::Building {
                self.rebuild_interrupted(&collection, record)?
            } else {
                self.open_ready_index(&collection, record)?
            };
            if let Some(tree) = &index.record.tree {
                referenced.insert(tree.clone());
            }
            let rebuilt = self.with_index(&collection, index)?;
            catalog
                .collections
                .insert(rebuilt.record.name.clone(), Arc::new(rebuilt));
        }
        // Trees created by a create_collection / create_index whose catalog record never made
        // it (crash), or left by a drop_index interrupted after its record went.
        for name in self.engine.tree_names() {
            if name.starts_with(TREE_PREFIX) && name != CATALOG_TREE && !referenced.contains(&name)
            {
                self.drop_engine_tree(&name)?;
            }
        }
        self.install(catalog);
        memory_snapshot::remove_snapshots(self.file_system.as_ref(), self.engine.path())?;
        Ok(())
    }

    fn open_ready_index(&self, collection: &Collection, record: IndexRecord) -> Result<Index> {
        let path = AttrPath::parse(&record.path)?;
        if record.kind == IndexKind::Embedded {
            let mut index = Index {
                record,
                path,
                tree: None,
                memory: None,
                embedded: None,
            };
            index.embedded = Some(crate::embedded::start(
                &self.engine,
                &self.embedded,
                &collection.primary,
                &index,
            )?);
            return Ok(index);
        }
        if record.kind == IndexKind::Memory {
            let index = Index {
                record,
                path,
                tree: None,
                memory: Some(MemoryIndex::default()),
                embedded: None,
            };
            if let Some(memory) = &index.memory {
                match memory_snapshot::restore(
                    self.file_system.as_ref(),
                    self.engine.path(),
                    &index.record,
                    self.opened_sequence,
                    memory,
                ) {
                    Ok(entries) => {
                        memory.set_origin(MemoryIndexOrigin::Snapshot {
                            seq: self.opened_sequence,
                            entries,
                        });
                        return Ok(index);
                    }
                    Err(rejection) => {
                        if let memory_snapshot::SnapshotRejection::Corrupt(_) = rejection {
                            // Damage on disk deserves a word to the operator; a missing or
                            // stale snapshot after a crash is routine and only recorded.
                            eprintln!(
                                "sift: memory index `{}` of `{}`: {rejection}; rebuilding it",
                                index.record.name, index.record.collection
                            );
                        }
                        memory.set_origin(MemoryIndexOrigin::Rebuilt {
                            reason: rejection.to_string(),
                        });
                    }
                }
            }
            let progress = self.progress.clone();
            self.backfill(collection, &index, &mut |p| {
                if let Some(callback) = &progress {
                    callback(p);
                }
            })?;
            return Ok(index);
        }
        if matches!(record.kind, IndexKind::SstLocal | IndexKind::Next) {
            let started = Instant::now();
            self.next
                .register(&self.engine, &collection.primary, &record)?;
            self.open_timings.lock().next_register_us += elapsed_us(started);
            return Ok(Index {
                record,
                path,
                tree: None,
                memory: None,
                embedded: None,
            });
        }
        let tree_name = record.tree.clone().unwrap_or_default();
        let tree = self
            .engine
            .tree(&tree_name)
            .map_err(|e| IndexError::CorruptCatalog {
                key: String::from_utf8_lossy(&index_key(&record.collection, &record.name))
                    .into_owned(),
                message: format!("index tree missing: {e}"),
            })?;
        if record.kind == IndexKind::Composite {
            self.composite_seq.register(tree.id());
        }
        Ok(Index {
            record,
            path,
            tree: Some(tree),
            memory: None,
            embedded: None,
        })
    }

    /// An index whose back-fill a crash interrupted: its tree is emptied and it is built again.
    fn rebuild_interrupted(
        &self,
        collection: &Collection,
        mut record: IndexRecord,
    ) -> Result<Index> {
        if let Some(name) = &record.tree {
            if self.engine.tree(name).is_ok() {
                self.drop_engine_tree(name)?;
            }
        }
        record.first_seq = self.engine.latest_sequence();
        let index = self.new_index(record)?;
        let progress = self.progress.clone();
        self.build_and_mark_ready(collection, index, &mut |p| {
            if let Some(callback) = &progress {
                callback(p);
            }
        })
    }

    /// Creates the index's tree (if stand-alone) for a record in state `building`.
    fn new_index(&self, record: IndexRecord) -> Result<Index> {
        let path = AttrPath::parse(&record.path)?;
        let tree = match &record.tree {
            Some(name) => {
                let mut options = TreeOptions {
                    merge_operator: (record.kind == IndexKind::Lazy)
                        .then(|| Arc::new(PostingMergeOperator) as _),
                    ..TreeOptions::default()
                };
                let composite = record.kind == IndexKind::Composite;
                if composite {
                    options.block_property_collectors.push(Arc::new(
                        crate::composite_seq::CompositeSeqCollectorFactory::new(Arc::clone(
                            &self.composite_seq,
                        )),
                    ));
                }
                let tree = self.engine.create_tree(name, options)?;
                if composite {
                    // Before anything is written to the tree.
                    self.composite_seq.register(tree.id());
                }
                Some(tree)
            }
            None => None,
        };
        let memory = (record.kind == IndexKind::Memory).then(MemoryIndex::default);
        Ok(Index {
            record,
            path,
            tree,
            memory,
            embedded: None,
        })
    }

    /// Back-fills, then records the index as ready.
    fn build_and_mark_ready(
        &self,
        collection: &Collection,
        mut index: Index,
        progress: &mut dyn FnMut(&BackfillProgress),
    ) -> Result<Index> {
        if index.record.kind == IndexKind::Embedded {
            // No back-fill: tables without the collector's bytes for the attribute are
            // scanned by queries; the memtables are read into the index's map.
            index.embedded = Some(crate::embedded::start(
                &self.engine,
                &self.embedded,
                &collection.primary,
                &index,
            )?);
            progress(&BackfillProgress {
                collection: collection.record.name.clone(),
                index: index.record.name.clone(),
                documents_done: 0,
                finished: true,
            });
        } else {
            self.backfill(collection, &index, progress)?;
        }
        index.record.state = IndexState::Ready;
        let mut batch = WriteBatch::new();
        batch.put(
            &self.catalog_tree,
            &index_key(&index.record.collection, &index.record.name),
            &encode_record(&index.record)?,
        );
        self.write_catalog(batch)?;
        Ok(index)
    }

    /// Fills `index` from every document of `collection`. Runs under the write lock, so the
    /// collection does not change meanwhile.
    fn backfill(
        &self,
        collection: &Collection,
        index: &Index,
        progress: &mut dyn FnMut(&BackfillProgress),
    ) -> Result<()> {
        let report = |documents_done: u64, finished: bool| BackfillProgress {
            collection: collection.record.name.clone(),
            index: index.record.name.clone(),
            documents_done,
            finished,
        };
        if matches!(index.record.kind, IndexKind::SstLocal | IndexKind::Next) {
            // Nothing to copy: tables written from now on carry the index's secondary blocks,
            // and queries scan the tables that do not; `create_index` then builds blocks for
            // the older tables with writes going on (`next/build.rs`), and reports progress.
            self.next
                .register(&self.engine, &collection.primary, &index.record)?;
            return Ok(());
        }
        let mut batch = WriteBatch::new();
        // Eager and lazy lists are gathered whole, so each value gets one list, newest first
        // (which keeps lazy LOOKUP's early stop exact; see `query.rs`).
        let mut lists: BTreeMap<Vec<u8>, Vec<Posting>> = BTreeMap::new();
        let mut documents_done = 0;
        let mut iter = self
            .engine
            .iter(&collection.primary, ReadOptions::default())?;
        iter.seek_to_first()?;
        while iter.valid() {
            let pk = iter.key();
            let seq = iter.seq();
            let envelope = EnvelopeRef::decode(iter.value())
                .map_err(|e| corrupt_document(&collection.record.name, pk, &e))?;
            if let Some(value) = index.encoded_value(&envelope, seq) {
                match index.record.kind {
                    IndexKind::Composite => {
                        let key = if is_deferred(index) {
                            deferred_key(&value, seq, pk)
                        } else {
                            let mut key = value.to_vec();
                            encode_pk(pk, &mut key);
                            key
                        };
                        // Asynchronous entries name the version they index (`async_index`).
                        let entry: &[u8] = if index.record.maintenance.is_async() {
                            &seq.to_be_bytes()
                        } else {
                            b""
                        };
                        batch.put(index.stand_alone_tree()?, &key, entry);
                        if batch.len() >= BACKFILL_BATCH_ENTRIES {
                            self.engine
                                .write(std::mem::take(&mut batch), &self.write_options)?;
                        }
                    }
                    IndexKind::Eager | IndexKind::Lazy => {
                        lists
                            .entry(value.into_owned())
                            .or_default()
                            .push(Posting::add(pk, seq));
                    }
                    IndexKind::Memory => {
                        if let Some(memory) = &index.memory {
                            memory.set(pk, Some((&value, seq)));
                        }
                    }
                    IndexKind::SstLocal | IndexKind::Next | IndexKind::Embedded => {}
                }
            }
            documents_done += 1;
            if documents_done % PROGRESS_EVERY_DOCUMENTS == 0 {
                progress(&report(documents_done, false));
            }
            iter.next()?;
        }
        for (value, mut list) in lists {
            list.sort_by_key(|posting| std::cmp::Reverse(posting.seq));
            batch.put(index.stand_alone_tree()?, &value, &encode_postings(&list));
            if batch.len() >= BACKFILL_BATCH_ENTRIES {
                self.engine
                    .write(std::mem::take(&mut batch), &self.write_options)?;
            }
        }
        if !batch.is_empty() {
            self.engine.write(batch, &self.write_options)?;
        }
        progress(&report(documents_done, true));
        Ok(())
    }

    /// Creates a collection whose documents are keyed by the field at `pk_path`.
    pub fn create_collection(&self, name: &str, pk_path: &str) -> Result<CollectionInfo> {
        check_name("collection", name)?;
        AttrPath::parse(pk_path)?;
        let _guard = self.lock_writes();
        let mut catalog = (**self.catalog.read()).clone();
        if catalog.collections.contains_key(name) {
            return Err(IndexError::AlreadyExists {
                what: "collection",
                name: name.to_string(),
            });
        }
        let record = CollectionRecord {
            name: name.to_string(),
            id: catalog.next_id,
            pk_path: pk_path.to_string(),
        };
        catalog.next_id += 1;
        let primary = self.engine.create_tree(
            &record.primary_tree_name(),
            self.primary_tree_options.clone(),
        )?;
        let mut batch = WriteBatch::new();
        batch.put(
            &self.catalog_tree,
            &collection_key(name),
            &encode_record(&record)?,
        );
        batch.put(
            &self.catalog_tree,
            NEXT_ID_KEY,
            &encode_record(&catalog.next_id)?,
        );
        self.write_catalog(batch)?;
        let collection = self.build_collection(record.clone(), primary, Vec::new())?;
        catalog
            .collections
            .insert(name.to_string(), Arc::new(collection));
        self.install(catalog);
        Ok(CollectionInfo {
            record,
            indexes: Vec::new(),
        })
    }

    /// The collection and its ready indexes.
    pub fn collection(&self, name: &str) -> Result<CollectionInfo> {
        let collection = self.collection_arc(name)?;
        Ok(CollectionInfo {
            record: collection.record.clone(),
            indexes: collection
                .indexes
                .iter()
                .map(|index| index.record.clone())
                .collect(),
        })
    }

    pub fn collections(&self) -> Vec<CollectionInfo> {
        let names: Vec<String> = self.catalog.read().collections.keys().cloned().collect();
        names
            .iter()
            .filter_map(|name| self.collection(name).ok())
            .collect()
    }

    /// [`Database::create_index_with_progress`] without progress reports.
    pub fn create_index(&self, collection: &str, spec: IndexSpec) -> Result<IndexRecord> {
        self.create_index_with_progress(collection, spec, &mut |_| {})
    }

    /// Creates an index and back-fills it from the documents already in the collection.
    /// Writes to the whole database wait until the back-fill is done. The index is recorded
    /// as `building` first and as `ready` at the end; a crash in between makes the next open
    /// build it again. `next` and `sst-local`: writes wait only while the index is registered;
    /// then the older tables get their blocks with writes going on, and `progress` is called
    /// after each table without the lock held. A build that fails leaves the index ready and
    /// exact, its unbuilt tables scanned: after a recoverable error (I/O, writes stopped by a
    /// recoverable engine error) this returns `Ok` and the rest of the build goes on in the
    /// background, retried until it succeeds (`index_build_status`, `IndexBuildStatus`); a
    /// fatal error (corruption, an engine that needs a reopen) is returned, and the next open
    /// resumes the build in the background, as does `build_secondary_blocks`.
    pub fn create_index_with_progress(
        &self,
        collection_name: &str,
        spec: IndexSpec,
        progress: &mut dyn FnMut(&BackfillProgress),
    ) -> Result<IndexRecord> {
        check_name("index", &spec.name)?;
        let path = AttrPath::parse(&spec.path)?;
        let maintenance = spec
            .maintenance
            .unwrap_or_else(|| spec.kind.default_maintenance());
        let invalid = |reason: &str| IndexError::InvalidIndexSpec {
            name: spec.name.clone(),
            reason: reason.to_string(),
        };
        match (spec.kind, maintenance) {
            (IndexKind::Eager, Maintenance::SyncInsert) => {
                return Err(invalid(
                    "an eager index is maintained sync-full (its posting lists are read-modify-written)",
                ))
            }
            (IndexKind::Memory, Maintenance::SyncInsert) => {
                return Err(invalid("a memory index is always exact (sync-full)"))
            }
            (IndexKind::SstLocal | IndexKind::Next, Maintenance::SyncFull) => {
                return Err(invalid(
                    "sst-local and next indexes are maintained sync-insert (queries validate)",
                ))
            }
            (IndexKind::Embedded, Maintenance::SyncFull) => {
                return Err(invalid(
                    "an embedded index writes nothing at write time, so there is nothing to \
                     remove (sync-full); queries validate every candidate (sync-insert)",
                ))
            }
            (
                IndexKind::Eager
                | IndexKind::Lazy
                | IndexKind::Memory
                | IndexKind::SstLocal
                | IndexKind::Next
                | IndexKind::Embedded,
                Maintenance::Deferred,
            ) => {
                return Err(invalid(
                    "deferred maintenance applies to composite indexes only (its DELETEs cancel entries that carry their version's sequence number)",
                ))
            }
            _ => {}
        }
        crate::next::check_spec(&spec).map_err(|reason| invalid(&reason))?;
        match (spec.kind, spec.bloom_bits_per_key) {
            (IndexKind::Embedded, Some(bits))
                if bits == 0 || bits > crate::embedded::BLOOM_BITS_PER_KEY_MAX =>
            {
                return Err(invalid(&format!(
                    "bloom bits per key must be 1 to {}, got {bits}",
                    crate::embedded::BLOOM_BITS_PER_KEY_MAX
                )))
            }
            (IndexKind::Embedded, _) | (_, None) => {}
            (_, Some(_)) => {
                return Err(invalid("bloom bits per key apply to embedded indexes only"))
            }
        }
        if spec.read_repair && spec.kind == IndexKind::Embedded {
            return Err(invalid(
                "an embedded index has no entries to repair (read repair does not apply)",
            ));
        }
        let maintenance = if spec.unique && spec.maintenance.is_none() {
            Maintenance::SyncFull
        } else {
            maintenance
        };
        if spec.unique {
            if maintenance != Maintenance::SyncFull {
                return Err(invalid(
                    "a unique index must be sync-full: checking that no other live document has the value needs an exact index, read at write (deferred and insert-only maintenance leave stale entries that would make the check wrong)",
                ));
            }
            if !matches!(spec.kind, IndexKind::Composite | IndexKind::Eager) {
                return Err(invalid(
                    "unique indexes are composite or eager (the kinds whose sync-full entries are read at write)",
                ));
            }
        }
        if let (true, Some(reason)) = (
            maintenance.is_async(),
            crate::async_index::unsupported_kind(spec.kind),
        ) {
            return Err(invalid(reason));
        }
        if spec.read_repair && maintenance != Maintenance::SyncInsert {
            return Err(invalid(
                "read repair applies to sync-insert maintenance only",
            ));
        }
        let guard = self.lock_writes();
        let mut catalog = (**self.catalog.read()).clone();
        let collection = catalog
            .collections
            .get(collection_name)
            .cloned()
            .ok_or_else(|| IndexError::UnknownCollection {
                name: collection_name.to_string(),
            })?;
        if collection
            .indexes
            .iter()
            .any(|index| index.record.name == spec.name)
        {
            return Err(IndexError::AlreadyExists {
                what: "index",
                name: spec.name.clone(),
            });
        }
        let id = catalog.next_id;
        catalog.next_id += 1;
        let attr_id = u32::try_from(id).map_err(|_| invalid("attribute ids exhausted"))?;
        let record = IndexRecord {
            name: spec.name.clone(),
            collection: collection_name.to_string(),
            id,
            path: path.as_str().to_string(),
            attr_type: spec.attr_type,
            kind: spec.kind,
            maintenance,
            read_repair: spec.read_repair,
            state: IndexState::Building,
            attr_id,
            first_seq: self.engine.latest_sequence(),
            tree: spec
                .kind
                .has_tree()
                .then(|| index_tree_name(collection.record.id, id)),
            split_delta: spec.split_delta,
            validation: spec.validation,
            bloom_bits_per_key: spec.bloom_bits_per_key,
            unique: spec.unique,
        };
        if record.maintenance.is_async() {
            // Until a watermark is written, a crash replays from the creation point.
            self.async_index
                .core
                .ensure_retention(&self.engine, record.first_seq);
        }
        if record.maintenance == Maintenance::Deferred {
            // Before the index can get entries: the observer must know this primary at the
            // next open even before the catalog is loaded (`deferred.rs`).
            self.update_deferred_marker(Some(collection.primary.id()))?;
        }
        if record.unique {
            // Before anything is created, so a failure leaves nothing behind.
            let probe = Index {
                record: record.clone(),
                path: path.clone(),
                tree: None,
                memory: None,
                embedded: None,
            };
            crate::unique::check_no_duplicates(&self.engine, &collection, &probe)?;
        }
        let index = self.new_index(record.clone())?;
        let mut batch = WriteBatch::new();
        batch.put(
            &self.catalog_tree,
            &index_key(collection_name, &spec.name),
            &encode_record(&record)?,
        );
        batch.put(
            &self.catalog_tree,
            NEXT_ID_KEY,
            &encode_record(&catalog.next_id)?,
        );
        self.write_catalog(batch)?;
        let index = self.build_and_mark_ready(&collection, index, progress)?;
        let record = index.record.clone();
        let rebuilt = self.with_index(&collection, index)?;
        catalog
            .collections
            .insert(collection_name.to_string(), Arc::new(rebuilt));
        self.install(catalog);
        drop(guard);
        if matches!(record.kind, IndexKind::SstLocal | IndexKind::Next) {
            // Online: writes go on while the older tables get their blocks (NEXT §5).
            let built = crate::next::build::build_online(
                &self.engine,
                &self.next,
                &collection,
                &record,
                &std::sync::atomic::AtomicBool::new(false),
                progress,
            );
            if let Err(error) = built {
                // The index exists and is exact (its remaining tables are scanned). A
                // recoverable failure leaves the rest to the background build, which retries.
                if !self.hand_over_failed_build(&collection, &record, &error) {
                    return Err(error);
                }
            }
        }
        Ok(record)
    }

    /// Removes an index and its data.
    pub fn drop_index(&self, collection_name: &str, index_name: &str) -> Result<()> {
        let _guard = self.lock_writes();
        let mut catalog = (**self.catalog.read()).clone();
        let collection = catalog
            .collections
            .get(collection_name)
            .cloned()
            .ok_or_else(|| IndexError::UnknownCollection {
                name: collection_name.to_string(),
            })?;
        let index = Arc::clone(collection.index(index_name)?);
        let mut batch = WriteBatch::new();
        batch.delete(&self.catalog_tree, &index_key(collection_name, index_name));
        self.write_catalog(batch)?;
        let indexes = collection
            .indexes
            .iter()
            .filter(|other| !Arc::ptr_eq(other, &index))
            .cloned()
            .collect();
        let rebuilt = self.build_collection(
            collection.record.clone(),
            collection.primary.clone(),
            indexes,
        )?;
        catalog
            .collections
            .insert(collection_name.to_string(), Arc::new(rebuilt));
        self.install(catalog);
        if index.embedded.is_some() {
            self.embedded
                .unregister(collection.primary.id(), index.record.attr_id);
        }
        if let Some(tree) = &index.tree {
            self.drop_engine_tree(tree.name())?;
        }
        self.next
            .unregister(collection.primary.id(), index.record.id);
        Ok(())
    }

    /// Memory held by a `memory` index, by an `embedded` index's map of recent writes, or by a
    /// `next` / `sst-local` index's global index, memtable map and memo (0 for other kinds).
    pub fn memory_bytes(&self, collection: &str, index: &str) -> Result<u64> {
        let collection = self.collection_arc(collection)?;
        let index = collection.index(index)?;
        Ok(index.memory.as_ref().map_or(0, MemoryIndex::memory_bytes)
            + self
                .next
                .memory_bytes(collection.primary.id(), index.record.id)
            + index
                .embedded
                .as_ref()
                .map_or(0, |embedded| embedded.map.memory_bytes()))
    }

    // ---- writes ----------------------------------------------------------------------------

    /// Stores a JSON document (replacing the one with the same primary key); returns the
    /// sequence number of the stored version.
    pub fn put(&self, collection: &str, json: &[u8]) -> Result<SeqNo> {
        self.write(collection, &[WriteOp::Put(json)])?
            .first()
            .copied()
            .flatten()
            .ok_or_else(|| IndexError::Internal("a put returned no sequence number".into()))
    }

    /// Deletes a document; `None` if there was none. In a collection with a `deferred` index
    /// and no index that needs the old version, deletes are blind: a tombstone is written and
    /// its sequence number returned whether or not the document existed.
    pub fn delete(&self, collection: &str, pk: &[u8]) -> Result<Option<SeqNo>> {
        Ok(self
            .write(collection, &[WriteOp::Delete(pk)])?
            .first()
            .copied()
            .flatten())
    }

    /// Applies the writes atomically, in order (one engine batch). Returns each write's
    /// sequence number (`None` for a delete of a missing document, unless deletes are blind:
    /// see [`Database::delete`]). If any document is bad, or a unique index would get a value
    /// another live document holds (`IndexError::UniqueViolation`), nothing is written.
    pub fn write(&self, collection_name: &str, ops: &[WriteOp<'_>]) -> Result<Vec<Option<SeqNo>>> {
        let mut collection = self.collection_arc(collection_name)?;
        let mut prepared = Self::prepare(&collection, ops)?;
        let _guard = self.lock_writes();
        let current = self.collection_arc(collection_name)?;
        if !Arc::ptr_eq(&current, &collection) {
            // The indexes changed while we parsed: parse again with the current attributes.
            collection = current;
            prepared = Self::prepare(&collection, ops)?;
        }
        self.apply_locked(&collection, prepared)
    }

    fn prepare(collection: &Collection, ops: &[WriteOp<'_>]) -> Result<Vec<Prepared>> {
        ops.iter()
            .map(|op| match op {
                WriteOp::Put(json) => {
                    let (pk, envelope) = collection.parser.parse_stored(json)?;
                    Ok(Prepared::Put { pk, envelope })
                }
                WriteOp::Delete(pk) => {
                    if pk.is_empty() || pk.len() > crate::error::MAX_PRIMARY_KEY_BYTES {
                        return Err(IndexError::InvalidPrimaryKey {
                            field: collection.record.pk_path.clone(),
                            found: format!("a key of {} bytes", pk.len()),
                        });
                    }
                    Ok(Prepared::Delete { pk: pk.to_vec() })
                }
            })
            .collect()
    }

    fn apply_locked(
        &self,
        collection: &Collection,
        prepared: Vec<Prepared>,
    ) -> Result<Vec<Option<SeqNo>>> {
        let mut results = Vec::with_capacity(prepared.len());
        let mut memory_updates: Vec<MemoryUpdate> = Vec::new();
        let mut queued: Option<(SeqNo, SeqNo)> = None;
        // The batch is built for the first sequence number the engine will give it, under the
        // engine's commit lock: postings and memory entries carry their version's number.
        let memo_tree = collection.primary.id();
        let mut memo_undo = None;
        let mut attempted_last: Option<SeqNo> = None;
        let mut fast_path_deletes = 0;
        let has_async = collection
            .indexes
            .iter()
            .any(|index| index.record.maintenance.is_async());
        let written = self.engine.write_sequenced(&self.write_options, |base| {
            // (pk, seq, an older version surely exists) for the update memo of `next` indexes.
            let mut around = AroundCommit::default();
            let mut batch = self.build_batch(
                collection,
                prepared,
                base,
                &mut results,
                &mut memory_updates,
                &mut around,
            )?;
            if !batch.is_empty() {
                attempted_last = Some(base + batch.len() as u64 - 1);
            }
            let AroundCommit {
                memo_writes,
                deferred_fast_path_deletes,
            } = around;
            fast_path_deletes = deferred_fast_path_deletes;
            if !batch.is_empty() && !memo_writes.is_empty() {
                // The memo learns of the writes before they become visible (see
                // `next/memo.rs`); undone below if the commit fails.
                memo_undo = Some(self.next.record_writes(
                    memo_tree,
                    &memo_writes,
                    &mut |pk: &[u8]| {
                        self.engine
                            .newer_version_exists_above(
                                &collection.primary,
                                pk,
                                0,
                                sift_lsm::ComponentId::Level(usize::MAX),
                            )
                            .map_or(true, |answer| answer != sift_lsm::NewerVersion::No)
                    },
                ));
            }
            if has_async && !batch.is_empty() {
                // A batch the commit refuses must not leave queued updates that another
                // write's sequence numbers could make look committed (the memo and the
                // embedded maps are undone instead). Checked here, the commit does not check
                // it again.
                self.engine.check_batch(&mut batch)?;
                // Queued before the sequence numbers are published (see `async_index`).
                queued = Some((base, base + batch.len() as u64));
                // The primary's entries of the batch are the documents to index.
                self.async_index.enqueue(
                    &collection.record.name,
                    collection.primary.id(),
                    &batch,
                    base,
                );
            }
            Ok::<_, IndexError>(batch)
        });
        if let Err(error) = written {
            if let Some((first, last)) = queued {
                self.async_index.cancel(first, last);
            }
            if let Some(undo) = memo_undo {
                self.next.undo_writes(memo_tree, undo);
            }
            // The embedded maps may hold versions that were never written (their sequence
            // numbers may go to other writes): distrust them, so queries scan the memtables
            // until a flush.
            if let Some(last) = attempted_last {
                self.next
                    .distrust_memtable_maps(memo_tree, last.max(self.engine.latest_sequence()));
                for index in &collection.indexes {
                    if let Some(embedded) = &index.embedded {
                        embedded
                            .map
                            .prune_through(last.max(self.engine.latest_sequence()));
                    }
                }
            }
            return Err(error);
        }
        if queued.is_some() {
            self.async_index.committed();
        }
        self.deferred.fast_path_deletes_written(fast_path_deletes);
        for (position, pk, value) in memory_updates {
            if let Some(memory) = &collection.indexes[position].memory {
                memory.set(&pk, value.as_ref().map(|(v, seq)| (v.as_slice(), *seq)));
            }
        }
        Ok(results)
    }

    /// The engine batch of `prepared` if its first entry gets sequence number `base`; fills
    /// `results` (each write's sequence number) and `memory_updates`.
    fn build_batch(
        &self,
        collection: &Collection,
        prepared: Vec<Prepared>,
        base: SeqNo,
        results: &mut Vec<Option<SeqNo>>,
        memory_updates: &mut Vec<MemoryUpdate>,
        around: &mut AroundCommit,
    ) -> Result<WriteBatch> {
        let name = &collection.record.name;
        let needs_old = collection.indexes.iter().any(|index| {
            index.record.maintenance == Maintenance::SyncFull
                && index.record.kind != IndexKind::Memory
        });
        // Deferred indexes make deletes blind when no index needs the old version: a tombstone
        // is written (and a sequence number returned) whether or not the document existed.
        let blind_deletes = !needs_old && collection.indexes.iter().any(|i| is_deferred(i));
        // The deferred fast path: DELETEs of a shadowed version known without a disk read.
        let deferred_fast_path =
            self.deferred.fast_path() && collection.indexes.iter().any(|i| is_deferred(i));
        let mut memtables: Option<crate::deferred::MemtableVersions> = None;
        let mut unique_claims = crate::unique::UniqueClaims::default();
        // Room for the primary entries (index entries, if any, grow it): no reallocation per
        // entry of a batch of puts.
        const ENTRY_OVERHEAD_BYTES: usize = 16;
        let primary_bytes = prepared
            .iter()
            .map(|op| match op {
                Prepared::Put { pk, envelope } => pk.len() + envelope.len() + ENTRY_OVERHEAD_BYTES,
                Prepared::Delete { pk } => pk.len() + ENTRY_OVERHEAD_BYTES,
            })
            .sum();
        let mut batch = WriteBatch::with_capacity(primary_bytes);
        // Versions written earlier in this batch, so a second write of a pk sees the first.
        let mut pending: HashMap<Vec<u8>, Option<(Vec<u8>, SeqNo)>> = HashMap::new();
        // Eager posting lists touched by this batch: (index position, encoded value) -> list.
        let mut lists: BTreeMap<(usize, Vec<u8>), Vec<Posting>> = BTreeMap::new();
        let memo_tree = collection.primary.id();
        let track_memo = self.next.has_memo(memo_tree);
        // `next` / `sst-local`: their maps of the writes still in memtables.
        let next_states = self.next.indexes_of(memo_tree);
        for op in prepared {
            let (pk, new_envelope) = match op {
                Prepared::Put { pk, envelope } => (pk, Some(envelope)),
                Prepared::Delete { pk } => (pk, None),
            };
            let old_read = needs_old || (new_envelope.is_none() && !blind_deletes);
            let old = if old_read {
                match pending.get(&pk) {
                    Some(version) => version.clone(),
                    None => self
                        .engine
                        .get(&collection.primary, &pk)?
                        .map(|entry| (entry.value, entry.seq)),
                }
            } else {
                None
            };
            if new_envelope.is_none() && old.is_none() && !blind_deletes {
                results.push(None);
                continue;
            }
            let old_envelope = match &old {
                Some((bytes, seq)) => Some((
                    EnvelopeRef::decode(bytes).map_err(|e| corrupt_document(name, &pk, &e))?,
                    *seq,
                )),
                None => None,
            };
            // The version this write shadows, for the deferred fast path when `old` was not read:
            // from this batch, or from the primary's memtables (memory only).
            let fast_old = if !deferred_fast_path || old_read {
                None
            } else if let Some(version) = pending.get(&pk) {
                version.clone()
            } else {
                crate::deferred::MemtableVersions::live(
                    &mut memtables,
                    &self.engine,
                    &collection.primary,
                    &pk,
                )?
            };
            let fast_old_envelope = match &fast_old {
                Some((bytes, seq)) => Some((
                    EnvelopeRef::decode(bytes).map_err(|e| corrupt_document(name, &pk, &e))?,
                    *seq,
                )),
                None => None,
            };
            let shadowed = if !deferred_fast_path {
                None
            } else if old_read {
                old_envelope.as_ref()
            } else {
                fast_old_envelope.as_ref()
            };
            let seq = base + batch.len() as u64;
            if track_memo {
                let surely_older = old.is_some() || pending.get(&pk).is_some_and(Option::is_some);
                around.memo_writes.push((pk.clone(), seq, surely_older));
            }
            match &new_envelope {
                Some(bytes) => batch.put(&collection.primary, &pk, bytes),
                None => batch.delete(&collection.primary, &pk),
            }
            let new_ref = match &new_envelope {
                Some(bytes) => {
                    Some(EnvelopeRef::decode(bytes).map_err(|e| corrupt_document(name, &pk, &e))?)
                }
                None => None,
            };
            for (position, index) in collection.indexes.iter().enumerate() {
                if index.record.maintenance.is_async() {
                    continue; // applied by the workers (`async_index`)
                }
                if index.record.kind == IndexKind::Embedded {
                    // Recorded before the engine write (see `embedded/memtable.rs`); the old
                    // version plays no part. First in the loop, so a put to a collection with
                    // an embedded index runs little code beyond the primary write.
                    if let (Some(embedded), Some(envelope)) = (&index.embedded, &new_ref) {
                        if let Some(value) = index.encoded_value(envelope, seq) {
                            embedded.map.insert(&value, seq, &pk);
                        }
                    }
                    continue;
                }
                let old_value = old_envelope.as_ref().and_then(|(envelope, old_seq)| {
                    index
                        .encoded_value(envelope, *old_seq)
                        .map(|v| (v, *old_seq))
                });
                let new_value = new_ref
                    .as_ref()
                    .and_then(|envelope| index.encoded_value(envelope, seq));
                let sync_full = index.record.maintenance == Maintenance::SyncFull;
                match index.record.kind {
                    IndexKind::Composite if is_deferred(index) => {
                        // Blind: the old version's entry is cancelled when the primary drops it,
                        // and now already if it is known without a disk read (`deferred.rs`).
                        if let Some((envelope, old_seq)) = shadowed {
                            if let Some(old_value) = index.encoded_value(envelope, *old_seq) {
                                batch.delete(
                                    index.stand_alone_tree()?,
                                    &deferred_key(&old_value, *old_seq, &pk),
                                );
                                around.deferred_fast_path_deletes += 1;
                            }
                        }
                        if let Some(new_value) = &new_value {
                            batch.put(
                                index.stand_alone_tree()?,
                                &deferred_key(new_value, seq, &pk),
                                b"",
                            );
                        }
                    }
                    IndexKind::Composite => {
                        let tree = index.stand_alone_tree()?;
                        if index.record.unique {
                            unique_claims.claim_composite(
                                &self.engine,
                                position,
                                index,
                                &pk,
                                old_value.as_ref().map(|(v, _)| v.as_ref()),
                                new_value.as_deref(),
                            )?;
                        }
                        if let (true, Some((old_value, _))) = (sync_full, &old_value) {
                            if new_value.as_deref() != Some(old_value.as_ref()) {
                                let mut key = old_value.to_vec();
                                encode_pk(&pk, &mut key);
                                batch.delete(tree, &key);
                            }
                        }
                        if let Some(new_value) = &new_value {
                            let mut key = new_value.to_vec();
                            encode_pk(&pk, &mut key);
                            batch.put(tree, &key, b"");
                        }
                    }
                    IndexKind::Eager => {
                        let tree = index.stand_alone_tree()?;
                        let mut load = |value: &[u8]| -> Result<()> {
                            if let std::collections::btree_map::Entry::Vacant(slot) =
                                lists.entry((position, value.to_vec()))
                            {
                                let list = match self.engine.get(tree, value)? {
                                    Some(entry) => decode_postings(&entry.value)?,
                                    None => Vec::new(),
                                };
                                slot.insert(list);
                            }
                            Ok(())
                        };
                        if let Some((old_value, _)) = &old_value {
                            load(old_value)?;
                        }
                        if let Some(new_value) = &new_value {
                            load(new_value)?;
                        }
                        if let (true, Some(new_value)) = (index.record.unique, &new_value) {
                            let taken = lists
                                .get(&(position, new_value.to_vec()))
                                .is_some_and(|list| list.iter().any(|p| p.pk != pk));
                            if taken {
                                return Err(crate::unique::violation(index, new_value));
                            }
                        }
                        if let Some((old_value, _)) = &old_value {
                            if let Some(list) = lists.get_mut(&(position, old_value.to_vec())) {
                                list.retain(|posting| posting.pk != pk);
                            }
                        }
                        if let Some(new_value) = &new_value {
                            if let Some(list) = lists.get_mut(&(position, new_value.to_vec())) {
                                list.retain(|posting| posting.pk != pk);
                                list.insert(0, Posting::add(&pk, seq));
                            }
                        }
                    }
                    IndexKind::Lazy => {
                        let tree = index.stand_alone_tree()?;
                        if let (true, Some((old_value, old_seq))) = (sync_full, &old_value) {
                            batch.merge(
                                tree,
                                old_value,
                                &encode_postings(&[Posting::remove(&pk, *old_seq)]),
                            );
                        }
                        if let Some(new_value) = &new_value {
                            batch.merge(
                                tree,
                                new_value,
                                &encode_postings(&[Posting::add(&pk, seq)]),
                            );
                        }
                    }
                    IndexKind::SstLocal | IndexKind::Next => {
                        // Recorded before the engine write, like the embedded map.
                        let state = next_states.iter().find(|s| s.index_id == index.record.id);
                        if let (Some(state), Some(value)) = (state, &new_value) {
                            state.memtable.insert(value, seq, &pk);
                        }
                    }
                    IndexKind::Embedded => {} // handled at the top of the loop
                    IndexKind::Memory => {
                        memory_updates.push((
                            position,
                            pk.clone(),
                            new_value.map(|value| (value.into_owned(), seq)),
                        ));
                    }
                }
            }
            results.push(Some(seq));
            pending.insert(pk, new_envelope.map(|bytes| (bytes, seq)));
        }
        for ((position, value), list) in &lists {
            let tree = collection.indexes[*position].stand_alone_tree()?;
            if list.is_empty() {
                batch.delete(tree, value);
            } else {
                batch.put(tree, value, &encode_postings(list));
            }
        }
        Ok(batch)
    }

    /// Writes read-repair deletions. `check` is re-run under the write lock against the
    /// latest state, so a repair never removes an entry a concurrent write made valid again.
    pub(crate) fn repair(
        &self,
        collection: &Collection,
        index: &Index,
        stale: Vec<crate::query::StaleEntry>,
    ) -> Result<u64> {
        let _guard = self.lock_writes();
        let tree = index.stand_alone_tree()?;
        let mut batch = WriteBatch::new();
        for entry in stale {
            match index.record.kind {
                IndexKind::Composite => {
                    let still_valid = match self.engine.get(&collection.primary, &entry.pk)? {
                        Some(live) => {
                            let envelope = EnvelopeRef::decode(&live.value).map_err(|e| {
                                corrupt_document(&collection.record.name, &entry.pk, &e)
                            })?;
                            index.encoded_value(&envelope, live.seq).as_deref()
                                == Some(entry.value.as_slice())
                        }
                        None => false,
                    };
                    if !still_valid {
                        let mut key = entry.value.clone();
                        encode_pk(&entry.pk, &mut key);
                        batch.delete(tree, &key);
                    }
                }
                IndexKind::Lazy => {
                    // A posting whose version is not live is stale for good.
                    batch.merge(
                        tree,
                        &entry.value,
                        &encode_postings(&[Posting::remove(&entry.pk, entry.seq)]),
                    );
                }
                IndexKind::Eager
                | IndexKind::Memory
                | IndexKind::SstLocal
                | IndexKind::Next
                | IndexKind::Embedded => {}
            }
        }
        let repaired = batch.len() as u64;
        if repaired > 0 {
            self.engine.write(batch, &self.write_options)?;
        }
        Ok(repaired)
    }
}

#[allow(dead_code)]
fn assert_send_sync() {
    fn check<T: Send + Sync>() {}
    check::<Database>();
}
