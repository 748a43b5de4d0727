//! Collections and indexes created and dropped: the catalog records, each new index's tree,
//! and the back-fill of a stand-alone index from a scan of the primary tree.

use super::{
    corrupt_document, BackfillProgress, CollectionInfo, Database, BACKFILL_BATCH_ENTRIES,
    PROGRESS_EVERY_DOCUMENTS,
};
use crate::catalog::{
    check_name, collection_key, encode_record, index_key, index_tree_name, CollectionRecord,
    IndexKind, IndexRecord, IndexSpec, IndexState, Maintenance, NEXT_ID_KEY,
};
use crate::collection::{Collection, Index};
use crate::deferred::{deferred_key, is_deferred};
use crate::encoding::encode_pk;
use crate::envelope::EnvelopeRef;
use crate::error::{IndexError, Result};
use crate::memory::MemoryIndex;
use crate::path::AttrPath;
use crate::postings::{encode_postings, Posting, PostingMergeOperator};
use sift_lsm::{ReadOptions, TreeOptions, WriteBatch};
use std::collections::BTreeMap;
use std::sync::Arc;

impl Database {
    /// Creates the index's tree (if stand-alone) for a record in state `building`.
    pub(super) fn new_index(&self, record: IndexRecord) -> Result<Index> {
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
    pub(super) fn build_and_mark_ready(
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
}
