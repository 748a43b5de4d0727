//! Online creation of `next` and `sst-local` indexes on a collection that already has data
//! (NEXT §5).
//!
//! Creating the index only registers it (under the write lock, which takes a moment): from then
//! on every flush and compaction writes the index's secondary blocks into the tables it
//! produces, and queries scan the live tables that have none, so answers are exact at every
//! moment. Then, with the write lock released (writes go on), [`build_online`] indexes the
//! tables that existed before, from the largest level up: deep files are the least likely to
//! be rewritten soon, while the small upper levels are mostly rewritten by compactions anyway
//! (which index them as they write). A table's SSTable cannot change, so the blocks built for it
//! — exactly what the collector would have written, same encoders — go into the collection's
//! side tree (`<primary tree>.next`), keyed `file number (8 bytes, big-endian) ‖ meta block
//! name`. Once a file's blocks are durable, it is published: added to the index's set of
//! side-indexed files and, for `next`, to the global index — under the global lock, and only if
//! the file is still live (a version change that removed it takes that lock after us and
//! removes it again). The version listener drops removed files from that set; their side
//! entries are deleted at the next open, when no query can be reading them.

use super::collector::NextCollector;
use super::format::{
    decode_directory, directory_name, property_lists, DirectoryEntry, COLLECTOR_NAME,
};
use super::{view_files, AttributeSpec, NextIndexState};
use crate::catalog::IndexRecord;
use crate::database::{BackfillProgress, Collection, Database};
use crate::error::{IndexError, Result};
use crate::value::AttrType;
use parking_lot::Mutex;
use sift_lsm::db::ComponentView;
use sift_lsm::extension::{BlockPropertyCollector, CollectorEntry, FinishedBlock};
use sift_lsm::key::parse_internal_key;
use sift_lsm::sstable::ReadContext;
use sift_lsm::version::FileMetaData;
use sift_lsm::{ComponentId, Db, ReadOptions, Tree, TreeOptions, WriteBatch, WriteOptions};
use std::collections::HashSet;
use std::sync::Arc;

/// Name of the side tree of a primary tree.
pub(crate) fn side_tree_name(primary_tree_name: &str) -> String {
    format!("{primary_tree_name}.next")
}

fn side_key(file_number: u64, name: &str) -> Vec<u8> {
    let mut key = file_number.to_be_bytes().to_vec();
    key.extend_from_slice(name.as_bytes());
    key
}

fn parse_side_key(key: &[u8]) -> Option<(u64, &str)> {
    let number = u64::from_be_bytes(key.get(..8)?.try_into().ok()?);
    Some((number, std::str::from_utf8(key.get(8..)?).ok()?))
}

fn side_corruption(engine: &Db, side: &Tree, offset: usize, message: String) -> IndexError {
    sift_lsm::Error::corruption(engine.path().join(side.name()), offset as u64, message).into()
}

/// A meta block of `file_number` stored in the side tree (missing: corruption, since the file
/// was published as having it).
pub(crate) fn read_side_block(
    engine: &Db,
    side: &Tree,
    file_number: u64,
    name: &str,
) -> Result<Vec<u8>> {
    match engine.get(side, &side_key(file_number, name))? {
        Some(entry) => Ok(entry.value),
        None => Err(side_corruption(
            engine,
            side,
            0,
            format!("side tree: file {file_number} is indexed but block {name:?} is missing"),
        )),
    }
}

fn decode_side_directory(
    engine: &Db,
    side: &Tree,
    file_number: u64,
    bytes: &[u8],
    spec: &AttributeSpec,
) -> Result<Vec<DirectoryEntry>> {
    decode_directory(bytes, spec.attr_id, spec.attr_type == AttrType::Geo).map_err(|e| {
        side_corruption(
            engine,
            side,
            e.offset,
            format!(
                "side tree: directory of attribute {} for file {file_number}: {} (byte {} of \
                 the block)",
                spec.attr_id, e.message, e.offset
            ),
        )
    })
}

/// The directory of the attribute for a file indexed online.
pub(crate) fn read_side_directory(
    engine: &Db,
    side: &Tree,
    file_number: u64,
    spec: &AttributeSpec,
) -> Result<Vec<DirectoryEntry>> {
    let bytes = read_side_block(engine, side, file_number, &directory_name(spec.attr_id))?;
    decode_side_directory(engine, side, file_number, &bytes, spec)
}

/// The directories of the attribute for the live files of `view` in the side tree. With
/// `collect_garbage`, deletes the entries of files that are not live (any attribute).
pub(crate) fn load_side(
    engine: &Db,
    side: &Tree,
    view: &ComponentView,
    spec: &AttributeSpec,
    collect_garbage: bool,
) -> Result<Vec<(u64, Vec<DirectoryEntry>)>> {
    let live: HashSet<u64> = view_files(view).iter().map(|f| f.number).collect();
    let directory = directory_name(spec.attr_id);
    let mut loaded = Vec::new();
    let mut garbage = WriteBatch::new();
    let mut any_garbage = false;
    let mut iter = engine.iter(side, ReadOptions::default())?;
    iter.seek_to_first()?;
    while iter.valid() {
        match parse_side_key(iter.key()) {
            Some((file_number, _)) if live.contains(&file_number) => {
                if parse_side_key(iter.key()).is_some_and(|(_, name)| name == directory) {
                    let blocks =
                        decode_side_directory(engine, side, file_number, iter.value(), spec)?;
                    loaded.push((file_number, blocks));
                }
            }
            // A dead file's entries (or a key this module never writes).
            _ => {
                if collect_garbage {
                    garbage.delete(side, iter.key());
                    any_garbage = true;
                }
            }
        }
        iter.next()?;
    }
    if any_garbage {
        engine.write(garbage, &WriteOptions::default())?;
    }
    Ok(loaded)
}

/// Named meta blocks, as a collector returns them.
type MetaBlocks = Vec<(String, Vec<u8>)>;

/// The secondary blocks of one table for one attribute (and how many versions were read): the
/// table's entries fed to the collector, data block by data block, exactly as when the table
/// was written.
fn build_file(
    view: &ComponentView,
    file: &Arc<FileMetaData>,
    spec: &AttributeSpec,
    context: &ReadContext,
) -> Result<(MetaBlocks, u64)> {
    let table = view.table(file)?;
    let mut collector = NextCollector::new(std::slice::from_ref(spec), Arc::default());
    let mut entries = 0u64;
    for ordinal in 0..table.block_count() {
        for (internal_key, value) in table.read_block_entries(ordinal, context)? {
            let Some(parsed) = parse_internal_key(&internal_key) else {
                return Err(sift_lsm::Error::corruption(
                    table.path(),
                    table.block_handle(ordinal).map_or(0, |h| h.offset),
                    format!("data block {ordinal} holds a malformed internal key"),
                )
                .into());
            };
            entries += 1;
            collector.add(&CollectorEntry {
                user_key: parsed.user_key,
                seq: parsed.seq,
                kind: parsed.kind,
                value: &value,
                block_offset: None,
            });
        }
        collector.finish_block(&FinishedBlock {
            ordinal: u32::try_from(ordinal).unwrap_or(u32::MAX),
            handle: table.block_handle(ordinal).unwrap_or_default(),
        });
    }
    Ok((collector.finish_table().meta_blocks, entries))
}

/// Live files without secondary blocks for the index: deepest level first, level 0 last.
fn unindexed_files(view: &ComponentView, state: &NextIndexState) -> Vec<Arc<FileMetaData>> {
    let mut levels: Vec<usize> = view
        .ids()
        .into_iter()
        .filter_map(|id| match id {
            ComponentId::Level(level) => Some(level),
            _ => None,
        })
        .collect();
    levels.sort_unstable_by(|a, b| b.cmp(a));
    levels.dedup();
    let side_files = state.side_files.lock().clone();
    levels
        .into_iter()
        .flat_map(|level| view.files(level))
        .chain(view.files(0))
        .filter(|file| {
            !property_lists(file.properties().get(COLLECTOR_NAME), state.spec.attr_id)
                && !side_files.contains(&file.number)
        })
        .collect()
}

/// The collection's side tree, created on first use.
fn side_tree(database: &Database, primary: &Tree) -> Result<Tree> {
    if let Some(side) = database.next.side_tree(primary.id()) {
        return Ok(side);
    }
    let name = side_tree_name(primary.name());
    let side = match database.engine.tree(&name) {
        Ok(side) => side,
        Err(_) => match database.engine.create_tree(&name, TreeOptions::default()) {
            Ok(side) => side,
            Err(sift_lsm::Error::TreeExists(_)) => database.engine.tree(&name)?,
            Err(e) => return Err(e.into()),
        },
    };
    database.next.set_side_tree(primary.id(), side.clone());
    Ok(side)
}

/// Makes a file's side blocks visible to queries, if the file is still live.
fn publish(
    engine: &Db,
    primary: &Tree,
    state: &NextIndexState,
    file_number: u64,
    directory: &[DirectoryEntry],
) -> Result<bool> {
    let mut global = state.global.as_ref().map(Mutex::lock);
    let mut side_files = state.side_files.lock();
    let view = engine.components(primary, &ReadOptions::default())?;
    if !view_files(&view).iter().any(|f| f.number == file_number) {
        return Ok(false); // compacted away meanwhile: its successors carry their own blocks
    }
    if let Some(global) = global.as_mut() {
        global.index.insert_file(file_number, directory);
    }
    side_files.insert(file_number);
    Ok(true)
}

/// Most passes over the live files: files written by jobs that started before the index was
/// registered lack its blocks too; a later pass picks them up.
const PASSES_MAX: usize = 3;

/// Indexes, largest level first, the live tables of the collection that have no secondary
/// blocks for the index, while writes go on (the caller must not hold the write lock).
/// `progress` is called after each file with the versions read so far.
pub(crate) fn build_online(
    database: &Database,
    collection: &Collection,
    record: &IndexRecord,
    progress: &mut dyn FnMut(&BackfillProgress),
) -> Result<()> {
    let engine = &database.engine;
    let primary = &collection.primary;
    let report = |documents_done: u64, finished: bool| BackfillProgress {
        collection: collection.record.name.clone(),
        index: record.name.clone(),
        documents_done,
        finished,
    };
    let mut done = 0;
    let context = ReadContext::from_read_options(&ReadOptions::default());
    for _ in 0..PASSES_MAX {
        let Some(state) = database.next.index(primary.id(), record.id) else {
            break; // dropped meanwhile
        };
        let view = engine.components(primary, &ReadOptions::default())?;
        let todo = unindexed_files(&view, &state);
        if todo.is_empty() {
            break;
        }
        let side = side_tree(database, primary)?;
        for file in todo {
            if database.next.index(primary.id(), record.id).is_none() {
                break;
            }
            let (blocks, entries) = build_file(&view, &file, &state.spec, &context)?;
            let directory_key = directory_name(state.spec.attr_id);
            let mut directory = Vec::new();
            let mut batch = WriteBatch::new();
            for (name, bytes) in &blocks {
                if *name == directory_key {
                    directory =
                        decode_side_directory(engine, &side, file.number, bytes, &state.spec)?;
                }
                batch.put(&side, &side_key(file.number, name), bytes);
            }
            engine.write(batch, &WriteOptions::default())?;
            publish(engine, primary, &state, file.number, &directory)?;
            done += entries;
            progress(&report(done, false));
        }
    }
    progress(&report(done, true));
    Ok(())
}

impl Database {
    /// Builds, online, the secondary blocks a `next` or `sst-local` index lacks for the live
    /// tables written before it existed (largest level first; writes go on meanwhile, and
    /// queries are exact throughout since unindexed tables are scanned). `create_index` does
    /// this already; call it after a restart interrupted that build. Returns when done.
    pub fn build_secondary_blocks(
        &self,
        collection: &str,
        index: &str,
        progress: &mut dyn FnMut(&BackfillProgress),
    ) -> Result<()> {
        let collection = self.collection_arc(collection)?;
        let index = collection.index(index)?;
        if !matches!(
            index.record.kind,
            crate::catalog::IndexKind::Next | crate::catalog::IndexKind::SstLocal
        ) {
            return Err(IndexError::UnsupportedQuery {
                index: index.record.name.clone(),
                reason: format!(
                    "secondary blocks belong to next and sst-local indexes, not {}",
                    index.record.kind
                ),
            });
        }
        let record = index.record.clone();
        build_online(self, &collection, &record, progress)
    }
}
