//! Opening and closing: the engine with the index layer's hooks installed, the catalog, the
//! recovery of indexes whose back-fill a crash interrupted, memory indexes loaded from their
//! snapshots (or rebuilt), online builds resumed; at close, the memory-index snapshots.

use super::kinds::Phase;
use super::{elapsed_us, Database, DatabaseOptions, OpenTimings};
use crate::catalog::{
    collection_key, decode_record, index_key, CollectionRecord, IndexRecord, IndexState,
    CATALOG_TREE, NEXT_ID_KEY, TREE_PREFIX,
};
use crate::deferred::{DeferredObserver, DeferredRegistry};
use crate::error::{IndexError, Result};
use crate::kind::{attribute_reader, Catalog, Collection, Index};
use crate::memory::snapshot::{self, MemoryIndexOrigin};
use crate::memory::MemoryIndex;
use crate::next::collector::NextCollectorFactory;
use crate::next::{NextListener, NextObserver, Registry as NextRegistry};
use crate::path::AttrPath;
use crate::postings::PostingMergeOperator;
use parking_lot::{Mutex, RwLock};
use sift_lsm::{Db, ReadOptions, TreeOptions, WriteOptions};
use std::collections::{BTreeMap, HashSet};
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

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
        let composite_seq = Arc::new(crate::composite::seq::CompositeSeqRegistry::default());
        engine_options
            .default_tree_options
            .block_property_collectors
            .push(Arc::new(
                crate::composite::seq::CompositeSeqCollectorFactory::new(Arc::clone(
                    &composite_seq,
                )),
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
    /// scanning (`memory/snapshot.rs`).
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
            collection.indexes.iter().filter_map(|index| {
                index
                    .state::<MemoryIndex>()
                    .map(|memory| (&index.record, memory))
            })
        });
        snapshot::write_snapshots(file_system.as_ref(), &directory, memory_indexes, sequence)
    }

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
        snapshot::remove_snapshots(self.file_system.as_ref(), self.engine.path())?;
        Ok(())
    }

    fn open_ready_index(&self, collection: &Collection, record: IndexRecord) -> Result<Index> {
        let path = AttrPath::parse(&record.path)?;
        let reader = attribute_reader(&record, &path, &collection.record.pk_path)?;
        let kind = self.kind_for(&record, &reader, collection.primary.id(), Phase::Open)?;
        let index = Index::new(record, path, kind, reader);
        if let Some(memory) = index.state::<MemoryIndex>() {
            match snapshot::restore(
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
                    if let snapshot::SnapshotRejection::Corrupt(_) = rejection {
                        // Damage on disk deserves a word to the operator; a missing or stale
                        // snapshot after a crash is routine and only recorded.
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
            let progress = self.progress.clone();
            self.backfill(collection, &index, &mut |p| {
                if let Some(callback) = &progress {
                    callback(p);
                }
            })?;
            return Ok(index);
        }
        if !index.kind.backfills_by_scan() {
            // Registered with the engine's hooks (for `next`: its global index rebuilt from the
            // directories of the live files), maps filled from the memtables.
            let started = Instant::now();
            index
                .kind
                .build_without_scan(&index, &self.engine, collection)?;
            if index.record.kind.builds_online() {
                self.open_timings.lock().next_register_us += elapsed_us(started);
            }
        }
        Ok(index)
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
        let index = self.new_index(collection, record)?;
        let progress = self.progress.clone();
        self.build_and_mark_ready(collection, index, &mut |p| {
            if let Some(callback) = &progress {
                callback(p);
            }
        })
    }
}
