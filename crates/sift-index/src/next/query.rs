//! LOOKUP and RANGE for `next` and `sst-local` indexes (NEXT §3.3, Figure 4, and the read
//! history of §4).
//!
//! One engine view of the primary tree (at the query's snapshot) decides what exists:
//! 1. memtables are scanned (the secondary blocks only cover tables);
//! 2. per live table: if it has secondary blocks for the attribute, the blocks whose value
//!    range meets the query are found through the global index (`next`; a table the global
//!    index does not know yet is handled like `sst-local`) or through the table's directory
//!    (`sst-local`), and read; a table without secondary blocks (written before the index
//!    existed) is scanned;
//! 3. the candidates (versions carrying a value in range, visible at the snapshot, not shadowed
//!    by a newer version in their own file) are validated newest first: the update memo or
//!    GetLite decide from memory; only a GetLite "maybe" costs a primary read. A live
//!    candidate's document comes from its data block, each data block read at most once per
//!    query (read history). Top-K stops at the K-th live candidate: candidates are versions
//!    and a live version's sequence number is the hit's, so no later candidate can be newer.

use super::format::{decode_secondary_block, property_lists, secondary_name, COLLECTOR_NAME};
use super::memo::{MemoAnswer, UpdateMemo};
use super::{encoded_attribute, read_directory, NextIndexState, Registry, Validation};
use crate::database::{Collection, Index};
use crate::envelope::EnvelopeRef;
use crate::error::{IndexError, Result};
use crate::query::{Hit, QueryStats};
use sift_lsm::db::ComponentView;
use sift_lsm::iterator::InternalIterator;
use sift_lsm::key::{parse_internal_key, user_key};
use sift_lsm::sstable::ReadContext;
use sift_lsm::version::FileMetaData;
use sift_lsm::ValueKind;
use sift_lsm::{ComponentId, Db, NewerVersion, ReadOptions, ReadStats, SeqNo};
use std::collections::{HashMap, HashSet};
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;

/// The answer of a `next` / `sst-local` query (newest first, at most `limit`).
pub(crate) struct NextOutput {
    pub hits: Vec<Hit>,
    pub stats: QueryStats,
}

enum Source {
    /// The stored envelope is at hand (memtable or scanned table).
    Loaded(Vec<u8>),
    /// The version is in data block `ordinal` of `file`.
    Block {
        file: Arc<FileMetaData>,
        ordinal: u32,
    },
}

struct Candidate {
    seq: SeqNo,
    pk: Vec<u8>,
    component: ComponentId,
    source: Source,
}

enum Verdict {
    Live,
    Stale,
    /// Only a primary read can tell.
    Unknown,
}

struct Run<'a> {
    collection: &'a Collection,
    state: &'a NextIndexState,
    memo: Option<Arc<UpdateMemo>>,
    memo_epoch: u64,
    view: ComponentView,
    snapshot: SeqNo,
    start: &'a [u8],
    end: Option<&'a [u8]>,
    read: &'a ReadOptions,
    read_stats: &'a ReadStats,
    context: ReadContext,
    stats: QueryStats,
    candidates: Vec<Candidate>,
}

impl Run<'_> {
    fn in_range(&self, value: &[u8]) -> bool {
        value >= self.start && self.end.is_none_or(|end| value < end)
    }

    fn corrupt_document(&self, pk: &[u8], error: &IndexError) -> IndexError {
        IndexError::Internal(format!(
            "stored document {:?} of collection `{}` is corrupt: {error}",
            String::from_utf8_lossy(pk),
            self.collection.record.name
        ))
    }

    /// Adds a loaded version if it carries a value in range.
    fn consider_loaded(
        &mut self,
        pk: &[u8],
        seq: SeqNo,
        envelope: &[u8],
        component: ComponentId,
    ) -> Result<()> {
        let decoded = EnvelopeRef::decode(envelope).map_err(|e| self.corrupt_document(pk, &e))?;
        let matches = encoded_attribute(&self.state.spec, &decoded, seq)
            .is_some_and(|value| self.in_range(&value));
        if matches {
            self.stats.candidates_examined += 1;
            self.candidates.push(Candidate {
                seq,
                pk: pk.to_vec(),
                component,
                source: Source::Loaded(envelope.to_vec()),
            });
        }
        Ok(())
    }

    /// A memtable: every visible version, the newest per key only (older ones are stale).
    fn scan_memtable(&mut self, id: ComponentId) -> Result<()> {
        let mut iter = self.view.iter(id)?;
        iter.seek_to_first()?;
        let mut previous: Option<Vec<u8>> = None;
        while iter.valid() {
            if previous.as_deref() != Some(iter.user_key()) {
                previous = Some(iter.user_key().to_vec());
                if iter.kind() == ValueKind::Put {
                    let (pk, seq, value) =
                        (iter.user_key().to_vec(), iter.seq(), iter.value().to_vec());
                    self.consider_loaded(&pk, seq, &value, id)?;
                }
            }
            iter.next()?;
        }
        Ok(())
    }

    /// A table without secondary blocks for the attribute: read whole.
    fn scan_table(&mut self, file: &Arc<FileMetaData>, component: ComponentId) -> Result<()> {
        let table = self.view.table(file)?;
        let mut iter = table.iter(self.context.clone());
        iter.seek_to_first()?;
        let mut previous: Option<Vec<u8>> = None;
        while iter.valid() {
            let Some(parsed) = parse_internal_key(iter.key()) else {
                return Err(sift_lsm::Error::corruption(
                    table.path(),
                    0,
                    "table returned a malformed internal key",
                )
                .into());
            };
            let visible = parsed.seq <= self.snapshot;
            if visible && previous.as_deref() != Some(parsed.user_key) {
                previous = Some(parsed.user_key.to_vec());
                if parsed.kind == ValueKind::Put {
                    let (pk, seq, value) =
                        (parsed.user_key.to_vec(), parsed.seq, iter.value().to_vec());
                    self.consider_loaded(&pk, seq, &value, component)?;
                }
            }
            iter.next()?;
        }
        Ok(())
    }

    /// Reads the given secondary blocks of a table and keeps the entries in range.
    fn read_blocks(
        &mut self,
        file: &Arc<FileMetaData>,
        component: ComponentId,
        blocks: &[u32],
    ) -> Result<()> {
        let table = self.view.table(file)?;
        let attr_id = self.state.spec.attr_id;
        for &block in blocks {
            let name = secondary_name(attr_id, block);
            let offset = table
                .meta_block_handle(COLLECTOR_NAME, &name)
                .map_or(0, |h| h.offset);
            let Some(bytes) = table.meta_block(COLLECTOR_NAME, &name)? else {
                return Err(sift_lsm::Error::corruption(
                    table.path(),
                    0,
                    format!("the directory names meta block {name:?}, which is missing"),
                )
                .into());
            };
            self.read_stats.blocks_read_from_disk.fetch_add(1, Relaxed);
            let entries = decode_secondary_block(&bytes, attr_id).map_err(|e| {
                sift_lsm::Error::corruption(
                    table.path(),
                    offset,
                    format!(
                        "meta block {name:?}: {} (byte {} of the block)",
                        e.message, e.offset
                    ),
                )
            })?;
            let first = entries.partition_point(|e| e.value.as_slice() < self.start);
            for entry in &entries[first..] {
                if !self.in_range(&entry.value) {
                    break;
                }
                if entry.seq > self.snapshot {
                    continue;
                }
                self.stats.candidates_examined += 1;
                if entry.next_newer_seq != 0 && entry.next_newer_seq <= self.snapshot {
                    self.stats.stale_entries += 1; // shadowed within its own file
                    continue;
                }
                self.candidates.push(Candidate {
                    seq: entry.seq,
                    pk: entry.pk.clone(),
                    component,
                    source: Source::Block {
                        file: Arc::clone(file),
                        ordinal: entry.data_block,
                    },
                });
            }
        }
        Ok(())
    }

    fn table(
        &mut self,
        file: &Arc<FileMetaData>,
        component: ComponentId,
        global: &GlobalHits,
    ) -> Result<()> {
        let attr_id = self.state.spec.attr_id;
        if !property_lists(file.properties().get(COLLECTOR_NAME), attr_id) {
            return self.scan_table(file, component);
        }
        if global.files.contains(&file.number) {
            let blocks = global.blocks.get(&file.number).cloned().unwrap_or_default();
            return self.read_blocks(file, component, &blocks);
        }
        let directory = read_directory(&self.view, file, attr_id)?;
        self.read_stats.blocks_read_from_disk.fetch_add(1, Relaxed);
        let blocks: Vec<u32> = directory
            .iter()
            .enumerate()
            .filter(|(_, b)| {
                b.max.as_slice() >= self.start && self.end.is_none_or(|end| b.min.as_slice() < end)
            })
            .map(|(i, _)| u32::try_from(i).unwrap_or(u32::MAX))
            .collect();
        self.read_blocks(file, component, &blocks)
    }

    fn verdict(&self, candidate: &Candidate) -> Result<Verdict> {
        if let Some(memo) = &self.memo {
            match memo.answer(&candidate.pk, candidate.seq, self.snapshot, self.memo_epoch) {
                MemoAnswer::Live => return Ok(Verdict::Live),
                MemoAnswer::Stale => return Ok(Verdict::Stale),
                MemoAnswer::Unknown => {}
            }
        }
        Ok(
            match self.view.newer_version_exists_above(
                &candidate.pk,
                candidate.seq,
                candidate.component,
            )? {
                NewerVersion::No => Verdict::Live,
                NewerVersion::Yes => Verdict::Stale,
                NewerVersion::Maybe => Verdict::Unknown,
            },
        )
    }
}

/// What the global index said: matching blocks per file, and which files it knows.
#[derive(Default)]
struct GlobalHits {
    files: HashSet<u64>,
    blocks: HashMap<u64, Vec<u32>>,
}

/// Runs one query; `read` carries the query's snapshot and I/O counters.
#[allow(clippy::too_many_arguments)]
pub(crate) fn run(
    engine: &Db,
    registry: &Registry,
    collection: &Collection,
    index: &Index,
    start: &[u8],
    end: Option<&[u8]>,
    limit: Option<usize>,
    read: &ReadOptions,
    read_stats: &ReadStats,
) -> Result<NextOutput> {
    let tree = collection.primary.id();
    let state = registry.index(tree, index.record.id).ok_or_else(|| {
        IndexError::Internal(format!(
            "index `{}` is not registered with the secondary-block registry",
            index.record.name
        ))
    })?;
    let memo = (state.validation == Validation::Memo)
        .then(|| registry.memo(tree))
        .flatten();
    // The epoch is read before the view, so pruning installed after it is noticed.
    let memo_epoch = memo.as_ref().map_or(0, |m| m.epoch());
    let view = engine.components(&collection.primary, read)?;
    let snapshot = view.sequence();
    let mut run = Run {
        collection,
        state: &state,
        memo,
        memo_epoch,
        view,
        snapshot,
        start,
        end,
        read,
        read_stats,
        context: ReadContext::from_read_options(read),
        stats: QueryStats::default(),
        candidates: Vec::new(),
    };
    let mut global_hits = GlobalHits::default();
    if let Some(global) = &state.global {
        let mut global = global.lock();
        global.resolve(&run.view, state.spec.attr_id)?;
        global.index.search(start, end, &mut |block| {
            global_hits
                .blocks
                .entry(block.file_number)
                .or_default()
                .push(block.block);
        });
        for file in super::view_files(&run.view) {
            if global.index.contains_file(file.number) {
                global_hits.files.insert(file.number);
            }
        }
    }
    for id in run.view.ids() {
        match id {
            ComponentId::Memtable | ComponentId::ImmutableMemtable(_) => run.scan_memtable(id)?,
            ComponentId::Level0File(number) => {
                let file = run.view.files(0).into_iter().find(|f| f.number == number);
                if let Some(file) = file {
                    run.table(&file, id, &global_hits)?;
                }
            }
            ComponentId::Level(level) => {
                for file in run.view.files(level) {
                    run.table(&file, id, &global_hits)?;
                }
            }
        }
    }
    let mut candidates = std::mem::take(&mut run.candidates);
    candidates.sort_by_key(|c| std::cmp::Reverse(c.seq));
    let mut hits: Vec<Hit> = Vec::new();
    let mut emitted: HashSet<Vec<u8>> = HashSet::new();
    // Read history: data blocks read by this query, (file, ordinal) → entries.
    let mut history: HashMap<(u64, u32), Vec<(Vec<u8>, Vec<u8>)>> = HashMap::new();
    for candidate in candidates {
        if limit.is_some_and(|k| hits.len() >= k) {
            break;
        }
        if emitted.contains(&candidate.pk) {
            run.stats.stale_entries += 1; // an older version of a document already returned
            continue;
        }
        let envelope = match run.verdict(&candidate)? {
            Verdict::Stale => None,
            Verdict::Unknown => {
                run.stats.validations += 1;
                engine
                    .get_with(&collection.primary, &candidate.pk, run.read)?
                    .filter(|live| live.seq == candidate.seq)
                    .map(|live| live.value)
            }
            Verdict::Live => Some(match candidate.source {
                Source::Loaded(envelope) => envelope,
                Source::Block { ref file, ordinal } => {
                    fetch_from_block(&run, &mut history, file, ordinal, &candidate)?
                }
            }),
        };
        let Some(envelope) = envelope else {
            run.stats.stale_entries += 1;
            continue;
        };
        let decoded =
            EnvelopeRef::decode(&envelope).map_err(|e| run.corrupt_document(&candidate.pk, &e))?;
        hits.push(Hit {
            pk: candidate.pk.clone(),
            seq: candidate.seq,
            doc: decoded.doc().to_vec(),
        });
        emitted.insert(candidate.pk);
    }
    Ok(NextOutput {
        hits,
        stats: run.stats,
    })
}

/// The stored envelope of a candidate, from its data block (read once per query).
fn fetch_from_block(
    run: &Run<'_>,
    history: &mut HashMap<(u64, u32), Vec<(Vec<u8>, Vec<u8>)>>,
    file: &Arc<FileMetaData>,
    ordinal: u32,
    candidate: &Candidate,
) -> Result<Vec<u8>> {
    let table = run.view.table(file)?;
    let key = (file.number, ordinal);
    if !history.contains_key(&key) {
        let entries = table.read_block_entries(ordinal as usize, &run.context)?;
        history.insert(key, entries);
    }
    let found = history.get(&key).and_then(|entries| {
        entries.iter().find(|(ikey, _)| {
            user_key(ikey) == candidate.pk.as_slice()
                && parse_internal_key(ikey).is_some_and(|p| p.seq == candidate.seq)
        })
    });
    match found {
        Some((_, value)) => Ok(value.clone()),
        None => Err(sift_lsm::Error::corruption(
            table.path(),
            table.block_handle(ordinal as usize).map_or(0, |h| h.offset),
            format!(
                "a secondary entry names version {} of key {:?} in data block {ordinal}, \
                 which does not hold it",
                candidate.seq,
                String::from_utf8_lossy(&candidate.pk)
            ),
        )
        .into()),
    }
}
