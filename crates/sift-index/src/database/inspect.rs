//! What an operator or a benchmark reads about indexes: memory, origins, garbage, and checks of
//! the `next` structures against the engine's files.

use super::Database;
use crate::deferred::{is_deferred, DeferredGarbage};
use crate::envelope::EnvelopeRef;
use crate::error::{IndexError, Result};
use crate::memory::snapshot::MemoryIndexOrigin;
use crate::memory::MemoryIndex;
use crate::next::build::{build_file, read_side_block};
use crate::next::format::{property_lists, COLLECTOR_NAME};
use crate::next::{view_files, GlobalIndexReport, GlobalIndexStats, SecondaryBlocksReport};
use sift_lsm::extension::ReadContext;
use sift_lsm::ReadOptions;
use std::sync::atomic::{AtomicBool, Ordering};

impl Database {
    /// Memory held by a `memory` index, by an `embedded` index's map of recent writes, or by a
    /// `next` / `sst-local` index's global index, memtable map and memo (0 for other kinds).
    pub fn memory_bytes(&self, collection: &str, index: &str) -> Result<u64> {
        let collection = self.collection_arc(collection)?;
        let index = collection.index(index)?;
        Ok(index.kind.memory_bytes(index))
    }

    /// How a `memory` index got its contents (`None` for other kinds): loaded from the snapshot
    /// of a clean close, rebuilt by a scan (and why), or back-filled.
    pub fn memory_index_origin(
        &self,
        collection: &str,
        index: &str,
    ) -> Result<Option<MemoryIndexOrigin>> {
        let collection = self.collection_arc(collection)?;
        let index = collection.index(index)?;
        Ok(index.state::<MemoryIndex>().map(MemoryIndex::origin))
    }

    /// Garbage report of a deferred index: scans the index tree and the collection (at one
    /// snapshot) and reads the tables' metadata.
    pub fn deferred_garbage(&self, collection: &str, index: &str) -> Result<DeferredGarbage> {
        let collection = self.collection_arc(collection)?;
        let index = collection.index(index)?;
        if !is_deferred(index) {
            return Err(IndexError::InvalidIndexSpec {
                name: index.record.name.clone(),
                reason: "garbage is reported for deferred indexes only".to_string(),
            });
        }
        let tree = index.stand_alone_tree()?;
        let read = ReadOptions {
            snapshot: Some(self.engine.snapshot()),
            skip_cache_fill: true,
            ..ReadOptions::default()
        };
        let mut report = DeferredGarbage::default();
        let mut iter = self.engine.iter(tree, read.clone())?;
        iter.seek_to_first()?;
        while iter.valid() {
            report.index_entries += 1;
            iter.next()?;
        }
        let mut iter = self.engine.iter(&collection.primary, read.clone())?;
        iter.seek_to_first()?;
        while iter.valid() {
            let envelope = EnvelopeRef::decode(iter.value()).map_err(|e| {
                crate::kind::collection::corrupt_document(&collection.record.name, iter.key(), &e)
            })?;
            if index.encoded_value(&envelope, iter.seq()).is_some() {
                report.live_entries += 1;
            }
            iter.next()?;
        }
        report.garbage_entries = report.index_entries.saturating_sub(report.live_entries);
        let view = self.engine.components(tree, &read)?;
        let levels = self
            .engine
            .stats()
            .trees
            .iter()
            .find(|stats| stats.name == tree.name())
            .map_or(0, |stats| stats.levels.len());
        for level in 0..levels {
            for file in view.files(level) {
                report.stored_entries += file.entries;
                report.stored_tombstones += file.deletions;
            }
        }
        report.deletes_emitted = self.deferred.deletes_emitted.load(Ordering::Relaxed);
        report.pending_versions_applied = self.deferred.pending_applied.load(Ordering::Relaxed);
        report.undecodable_versions = self.deferred.undecodable_versions.load(Ordering::Relaxed);
        report.fast_path_deletes = self.deferred.fast_path_deletes.load(Ordering::Relaxed);
        Ok(report)
    }

    /// What the global index of a `next` index holds now: files, blocks and memory, in step
    /// with the engine's current files. Safe to call at any moment; checks nothing (see
    /// [`crate::Database::check_global_index`] for that).
    pub fn global_index_stats(&self, collection: &str, index: &str) -> Result<GlobalIndexStats> {
        let collection = self.collection_arc(collection)?;
        let index = collection.index(index)?;
        self.next
            .global_index_stats(&self.engine, &collection.primary, index.record.id)?
            .ok_or_else(|| IndexError::UnsupportedQuery {
                index: index.record.name.clone(),
                reason: format!(
                    "it is a {} index: only next indexes have a global index (sst-local \
                         indexes read each table's directory instead)",
                    index.record.kind
                ),
            })
    }

    /// Checks that the global index of a `next` index describes exactly the secondary blocks
    /// of the live files of its collection (nothing more, nothing less), against a view of
    /// the same version: it holds at every moment, also while flushes and compactions run.
    /// For the global index's size alone, [`crate::Database::global_index_stats`] is cheaper.
    pub fn check_global_index(&self, collection: &str, index: &str) -> Result<GlobalIndexReport> {
        let collection = self.collection_arc(collection)?;
        let index = collection.index(index)?;
        self.next
            .check_global_index(&self.engine, &collection.primary, index.record.id)
            .map_err(|error| match error {
                IndexError::InconsistentIndex { message, .. } => IndexError::InconsistentIndex {
                    index: index.record.name.clone(),
                    message,
                },
                other => other,
            })
    }

    /// Rebuilds, from its entries, the secondary blocks of every live table of the collection
    /// that has blocks for a `next` or `sst-local` index (in the table, or built online into
    /// the side tree) and checks that the stored blocks are byte for byte the rebuilt ones.
    /// Reads every such table. Meaningful when no build of the index runs (blocks written by
    /// an older format version, without checksums or entry offsets, are reported as
    /// different).
    pub fn check_secondary_blocks(
        &self,
        collection: &str,
        index: &str,
    ) -> Result<SecondaryBlocksReport> {
        let (collection, record) = self.next_index(collection, index)?;
        let primary = &collection.primary;
        let engine = &self.engine;
        let state = self.next.index(primary.id(), record.id).ok_or_else(|| {
            IndexError::Internal(format!("index `{}` is not registered", record.name))
        })?;
        let view = engine.components(primary, &ReadOptions::default())?;
        let side_files = state.side_files.lock().clone();
        let side = self.next.side_tree(primary.id());
        let context = ReadContext::from_read_options(&ReadOptions::default());
        let never = AtomicBool::new(false);
        let mut report = SecondaryBlocksReport::default();
        for file in view_files(&view) {
            let in_table =
                property_lists(file.properties().get(COLLECTOR_NAME), state.spec.attr_id);
            let online = side
                .as_ref()
                .filter(|_| !in_table && side_files.contains(&file.number));
            if !in_table && online.is_none() {
                report.files_unindexed += 1;
                continue;
            }
            let Some((rebuilt, _)) = build_file(&view, &file, &state.spec, &context, &never)?
            else {
                continue;
            };
            let table = view.table(&file)?;
            for (name, bytes) in &rebuilt {
                let stored = match online {
                    Some(side) => read_side_block(engine, side, file.number, name)?,
                    None => table.meta_block(COLLECTOR_NAME, name)?.ok_or_else(|| {
                        sift_lsm::Error::corruption(
                            table.path(),
                            0,
                            format!(
                                "table lists attribute {} but has no block {name:?}",
                                state.spec.attr_id
                            ),
                        )
                    })?,
                };
                if stored != *bytes {
                    return Err(IndexError::InconsistentIndex {
                        index: record.name.clone(),
                        message: format!(
                            "block {name:?} of file {} ({}) differs from the one \
                         rebuilt from the file's entries ({} bytes stored, {} rebuilt)",
                            file.number,
                            if online.is_some() {
                                "built online"
                            } else {
                                "in the table"
                            },
                            stored.len(),
                            bytes.len()
                        ),
                    });
                }
                report.blocks += 1;
            }
            if online.is_some() {
                report.files_built_online += 1;
            } else {
                report.files_in_tables += 1;
            }
        }
        Ok(report)
    }
}
