//! Collections and indexes created and dropped: the catalog records, each new index's tree,
//! and the back-fill of a stand-alone index from a scan of the primary tree.

use super::kinds::Phase;
use super::{
    corrupt_document, BackfillProgress, CollectionInfo, Database, PROGRESS_EVERY_DOCUMENTS,
};
use crate::catalog::{
    check_name, collection_key, encode_record, index_key, index_tree_name, CollectionRecord,
    IndexRecord, IndexSpec, IndexState, Maintenance, NEXT_ID_KEY,
};
use crate::envelope::EnvelopeRef;
use crate::error::{IndexError, Result};
use crate::kind::Backfill;
use crate::kind::{attribute_reader, Catalog, Collection, Index};
use crate::path::AttrPath;
use sift_lsm::{ReadOptions, WriteBatch};
use std::sync::Arc;

impl Database {
    /// The index of a record in state `building`: its kind, with its tree created.
    pub(super) fn new_index(&self, collection: &Collection, record: IndexRecord) -> Result<Index> {
        let path = AttrPath::parse(&record.path)?;
        let reader = attribute_reader(&record, &path, &collection.record.pk_path)?;
        let kind = self.kind_for(&record, &reader, collection.primary.id(), Phase::Create)?;
        Ok(Index::new(record, path, kind, reader))
    }

    /// Back-fills, then records the index as ready.
    pub(super) fn build_and_mark_ready(
        &self,
        collection: &Collection,
        mut index: Index,
        progress: &mut dyn FnMut(&BackfillProgress),
    ) -> Result<Index> {
        self.backfill(collection, &index, progress)?;
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
    pub(super) fn backfill(
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
        if !index.kind.backfills_by_scan() {
            // `next` / `sst-local`: nothing to copy. Tables written from now on carry the
            // index's secondary blocks, and queries scan the tables that do not; `create_index`
            // then builds blocks for the older tables with writes going on (`next/build.rs`),
            // and reports progress. `embedded`: tables without the collector's bytes for the
            // attribute are scanned by queries; the memtables are read into the index's map.
            index
                .kind
                .build_without_scan(index, &self.engine, collection)?;
            if !index.record.kind.builds_online() {
                progress(&report(0, true));
            }
            return Ok(());
        }
        let mut backfill = Backfill::new(&self.engine, &self.write_options);
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
                index.kind.backfill(index, &mut backfill, pk, &value, seq)?;
            }
            documents_done += 1;
            if documents_done % PROGRESS_EVERY_DOCUMENTS == 0 {
                progress(&report(documents_done, false));
            }
            iter.next()?;
        }
        index.kind.finish_backfill(index, &mut backfill)?;
        backfill.finish()?;
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

    /// The attribute type of index `index` of `collection` (what a query value must parse
    /// as).
    pub fn index_type(&self, collection: &str, index: &str) -> Result<crate::AttrType> {
        let found = self.collection_arc(collection)?;
        found
            .indexes
            .iter()
            .find(|candidate| candidate.record.name == index)
            .map(|candidate| candidate.record.attr_type)
            .ok_or_else(|| IndexError::UnknownIndex {
                collection: collection.to_owned(),
                name: index.to_owned(),
            })
    }

    /// Every collection with its indexes, by name.
    pub fn collections(&self) -> Vec<CollectionInfo> {
        let names: Vec<String> = self.catalog.read().collections.keys().cloned().collect();
        names
            .iter()
            .filter_map(|name| self.collection(name).ok())
            .collect()
    }

    /// A copy of the catalog to change, and the collection `name` in it. Under the write lock.
    fn catalog_copy_with(&self, name: &str) -> Result<(Catalog, Arc<Collection>)> {
        let catalog = (**self.catalog.read()).clone();
        let collection = catalog.collections.get(name).cloned().ok_or_else(|| {
            IndexError::UnknownCollection {
                name: name.to_string(),
            }
        })?;
        Ok((catalog, collection))
    }

    /// [`Database::create_index_with_progress`](crate::Database::create_index_with_progress) without progress reports.
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
        let maintenance =
            spec.checked_maintenance()
                .map_err(|reason| IndexError::InvalidIndexSpec {
                    name: spec.name.clone(),
                    reason,
                })?;
        let guard = self.lock_writes();
        let (mut catalog, collection) = self.catalog_copy_with(collection_name)?;
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
        let attr_id = u32::try_from(id).map_err(|_| IndexError::InvalidIndexSpec {
            name: spec.name.clone(),
            reason: "attribute ids exhausted".to_string(),
        })?;
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
            key_prefixes: spec.key_prefixes.clone(),
            conversion: spec.conversion,
        };
        if record.maintenance.is_async() {
            // Until a watermark is written, a crash replays from the creation point.
            self.async_index
                .core
                .ensure_retention(&self.engine, record.first_seq);
        }
        if record.maintenance == Maintenance::Deferred {
            // Before the index can get entries: the observer must know this primary at the
            // next open even before the catalog is loaded (`deferred/`).
            self.update_deferred_marker(Some(collection.primary.id()))?;
        }
        if record.unique {
            // Before anything is created, so a failure leaves nothing behind.
            crate::kind::unique::check_no_duplicates(&self.engine, &collection, &record, &path)?;
        }
        let index = self.new_index(&collection, record.clone())?;
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
        if record.kind.builds_online() {
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
        let (mut catalog, collection) = self.catalog_copy_with(collection_name)?;
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
        index.kind.dropped(&index, &collection);
        if let Some(tree) = index.kind.tree() {
            self.drop_engine_tree(tree.name())?;
        }
        Ok(())
    }
}
