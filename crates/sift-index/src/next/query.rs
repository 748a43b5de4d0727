//! LOOKUP, RANGE and WITHIN for `next` and `sst-local` indexes (NEXT §3.3, Figure 4, and the
//! read history of §4). A query asks for a [`Region`]: a range of encoded values, or for geo
//! attributes a box (edges inside), matched exactly against each entry's point; blocks are
//! chosen by their value range or, for geo, their bounding rectangle.
//!
//! One engine view of the primary tree (at the query's snapshot) decides what exists:
//! 1. the memtables (the secondary blocks only cover tables): their candidates come from the
//!    index's memtable map (`NextIndexState::memtable`, ordered by value), validated and fetched
//!    by a point read (a memory read); when the map has forgotten writes the view still holds
//!    in memtables (a flush raced with the query, a failed write), the memtables are scanned;
//! 2. per live table: if it has secondary blocks for the attribute, the blocks whose value
//!    range meets the query are found through the global index (`next`; a table the global
//!    index does not know yet is handled like `sst-local`) or through the table's directory
//!    (`sst-local`), and read; a table without secondary blocks (written before the index
//!    existed) is scanned;
//! 3. the candidates (versions carrying a value in range, visible at the snapshot, not shadowed
//!    by a newer version in their own file) are validated newest first: the update memo or
//!    GetLite decide from memory; only a GetLite "maybe" costs a primary read. A live
//!    candidate's document comes from its data block: when its secondary entry says where the
//!    entry starts in the block and carries the value's checksum, straight from the
//!    memory-mapped block (no seek, no pass over the whole block for its checksum: the value
//!    is checked against the entry's own), the next candidates' entries prefetched meanwhile;
//!    otherwise (or on any mismatch) from the block read and verified, each data block read at
//!    most once per query (read history). Secondary blocks and
//!    directories are read through the engine's block cache and counted in the read
//!    statistics; within a secondary block the first entry in range is found by binary
//!    search over its restart points. Top-K stops at the K-th live candidate: candidates are versions
//!    and a live version's sequence number is the hit's, so no later candidate can be newer.
//!
//! Sources (memtables, secondary blocks, tables to scan) are read newest first by the largest
//! sequence number they can hold (a secondary block's is in its directory entry, a table's in
//! its metadata), and candidates newer than every source not yet read are validated before
//! the next source is read; so a top-K query stops reading once it has K live hits newer than
//! everything left (for time-correlated attributes most blocks are never read).

use super::format::{
    property_lists, secondary_name, visit_secondary_from, DirectoryEntry, COLLECTOR_NAME,
};
use super::global::Region;
use super::memo::{MemoAnswer, UpdateMemo};
use super::{encoded_attribute, geo_point, read_directory, NextIndexState, Registry, Validation};
use crate::envelope::EnvelopeRef;
use crate::error::{IndexError, Result};
use crate::geo::GeoBox;
use crate::kind::query::{Hit, QueryResult, QueryStats};
use crate::kind::{Collection, Index};
use sift_lsm::extension::parse_internal_key;
use sift_lsm::extension::ComponentView;
use sift_lsm::extension::FileMetaData;
use sift_lsm::extension::InternalIterator;
use sift_lsm::extension::{DataBlock, ReadContext, Table};
use sift_lsm::ValueKind;
use sift_lsm::{ComponentId, Db, NewerVersion, ReadOptions, ReadStats, SeqNo, Tree};
use std::collections::{BinaryHeap, HashMap, HashSet};
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;

/// The answer of a `next` / `sst-local` query (newest first, at most `limit`).
pub(crate) struct NextOutput {
    pub hits: Vec<Hit>,
    pub stats: QueryStats,
}

enum Origin {
    /// The stored envelope is at hand (memtable or scanned table).
    Loaded(Vec<u8>),
    /// From the memtable map: a point read at the snapshot (a memory read, the version is in
    /// a memtable) both validates it and fetches it.
    Recent,
    /// The version is in data block `ordinal` of `table` (file `file_number`); its secondary
    /// entry carried the CRC32C of its stored value and where the entry starts in the block
    /// (blocks written before entries had them did not).
    Block {
        table: Arc<Table>,
        file_number: u64,
        ordinal: u32,
        value_checksum: Option<u32>,
        entry_offset: Option<u32>,
    },
}

struct Candidate {
    seq: SeqNo,
    pk: Vec<u8>,
    component: ComponentId,
    source: Origin,
}

enum Verdict {
    Live,
    Stale,
    /// Only a primary read can tell.
    Unknown,
}

struct Run<'a> {
    engine: &'a Db,
    collection: &'a Collection,
    state: &'a NextIndexState,
    memo: Option<Arc<UpdateMemo>>,
    memo_epoch: u64,
    view: ComponentView,
    snapshot: SeqNo,
    region: Region<'a>,
    /// The collection's side tree and the files whose blocks live there (online creation).
    side_tree: Option<Tree>,
    side_files: HashSet<u64>,
    read: &'a ReadOptions,
    read_stats: &'a ReadStats,
    context: ReadContext,
    stats: QueryStats,
    candidates: Vec<Candidate>,
}

impl Run<'_> {
    fn in_range(&self, value: &[u8]) -> bool {
        match self.region {
            Region::Range { start, end } => value >= start && end.is_none_or(|end| value < end),
            // A value that is not a point is in no box.
            Region::Within(geo_box) => {
                geo_point(value).is_some_and(|(lon, lat)| geo_box.contains(lon, lat))
            }
        }
    }

    /// Whether a secondary block (by its directory entry) may hold a value in the region.
    fn block_meets(&self, block: &DirectoryEntry) -> bool {
        match self.region {
            Region::Range { start, end } => {
                block.max.as_slice() >= start && end.is_none_or(|end| block.min.as_slice() < end)
            }
            Region::Within(q) => block.rect.is_none_or(|r| {
                r.min_lon <= q.max_lon
                    && q.min_lon <= r.max_lon
                    && r.min_lat <= q.max_lat
                    && q.min_lat <= r.max_lat
            }),
        }
    }

    fn corrupt_document(&self, pk: &[u8], error: &IndexError) -> IndexError {
        self.collection.corrupt_document(pk, error)
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
                source: Origin::Loaded(envelope.to_vec()),
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

    /// The memtables: their candidates from the index's memtable map when it holds every
    /// write this view has in memtables, else a scan of each memtable.
    fn read_memtables(&mut self) -> Result<()> {
        // Memtables are flushed in sequence order, so the view's memtables hold exactly its
        // writes above the tables' largest sequence number. The map forgets writes as
        // flushes put them into tables; if it forgot any above that number (a flush
        // finished after the view was taken, a failed write made it distrust recent
        // numbers, or a compaction dropped the newest table entries), scan instead.
        let tables_seq_max = super::view_files(&self.view)
            .iter()
            .map(|f| f.seq_max)
            .max()
            .unwrap_or(0);
        // For geo, the Z-order ranges covering the box (points are checked exactly below).
        let owned: Vec<(Vec<u8>, Option<Vec<u8>>)> = match self.region {
            Region::Range { .. } => Vec::new(),
            Region::Within(geo_box) => {
                crate::geo::zorder_cover(geo_box, crate::geo::MAX_KEY_RANGES)
                    .into_iter()
                    .map(|(low, high)| {
                        (
                            low.to_be_bytes().to_vec(),
                            high.checked_add(1).map(|next| next.to_be_bytes().to_vec()),
                        )
                    })
                    .collect()
            }
        };
        let ranges: Vec<(&[u8], Option<&[u8]>)> = match self.region {
            Region::Range { start, end } => vec![(start, end)],
            Region::Within(_) => owned
                .iter()
                .map(|(start, end)| (start.as_slice(), end.as_deref()))
                .collect(),
        };
        let mut found: Vec<(SeqNo, Vec<u8>)> = Vec::new();
        let region = self.region;
        let pruned_through = self.state.memtable.visit(
            &ranges,
            tables_seq_max,
            self.snapshot,
            &mut |value, seq, pk| {
                let inside = match region {
                    Region::Range { .. } => true,
                    Region::Within(geo_box) => {
                        geo_point(value).is_some_and(|(lon, lat)| geo_box.contains(lon, lat))
                    }
                };
                if inside {
                    found.push((seq, pk.to_vec()));
                }
            },
        );
        if pruned_through > tables_seq_max {
            for id in self.view.ids() {
                if matches!(
                    id,
                    ComponentId::Memtable | ComponentId::ImmutableMemtable(_)
                ) {
                    self.scan_memtable(id)?;
                }
            }
            return Ok(());
        }
        self.stats.candidates_examined += found.len() as u64;
        self.candidates
            .extend(found.into_iter().map(|(seq, pk)| Candidate {
                seq,
                pk,
                component: ComponentId::Memtable,
                source: Origin::Recent,
            }));
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

    /// The side tree, when `file`'s blocks live there.
    fn side_of(&self, file: &FileMetaData) -> Option<&Tree> {
        self.side_tree.as_ref().filter(|_| {
            self.side_files.contains(&file.number)
                && !property_lists(
                    file.properties().get(COLLECTOR_NAME),
                    self.state.spec.attr_id,
                )
        })
    }

    /// Reads one secondary block of a table and keeps its entries in range.
    fn read_block(
        &mut self,
        file: &Arc<FileMetaData>,
        component: ComponentId,
        block: u32,
    ) -> Result<()> {
        let table = self.view.table(file)?;
        let attr_id = self.state.spec.attr_id;
        let name = secondary_name(attr_id, block);
        let (bytes, path, offset) = if let Some(side) = self.side_of(file) {
            let bytes = super::build::read_side_block(self.engine, side, file.number, &name)?;
            self.read_stats.blocks_read_from_disk.fetch_add(1, Relaxed);
            (
                Arc::<[u8]>::from(bytes),
                self.engine.path().join(side.name()),
                0,
            )
        } else {
            let Some(handle) = table.meta_block_handle(COLLECTOR_NAME, &name) else {
                return Err(sift_lsm::Error::corruption(
                    table.path(),
                    0,
                    format!("the directory names meta block {name:?}, which is missing"),
                )
                .into());
            };
            let bytes = table
                .meta_block_cached(COLLECTOR_NAME, &name, &self.context)?
                .unwrap_or_default();
            (bytes, table.path().to_path_buf(), handle.offset)
        };
        let (region, snapshot) = (self.region, self.snapshot);
        let mut found = Vec::new();
        let mut examined = 0;
        let mut shadowed = 0;
        let mut not_a_point = None;
        // Geo: every point in the box has a Z-order code between those of the box's corners
        // (the code grows with each coordinate), and entries are sorted by code: start at the
        // lower corner's code (binary search over the restart points) and stop past the upper
        // one, decoding and checking only the points in between.
        let codes = match region {
            Region::Range { .. } => None,
            Region::Within(geo_box) => Some((
                crate::encoding::zorder(geo_box.min_lon, geo_box.min_lat),
                crate::encoding::zorder(geo_box.max_lon, geo_box.max_lat),
            )),
        };
        let lowest_code = codes.map_or([0; 8], |(low, _)| low.to_be_bytes());
        let from: &[u8] = match region {
            Region::Range { start, .. } => start,
            Region::Within(_) => &lowest_code,
        };
        visit_secondary_from(&bytes, attr_id, from, &mut |entry| {
            match region {
                Region::Range { start, end } => {
                    if entry.value < start {
                        return true;
                    }
                    if end.is_some_and(|end| entry.value >= end) {
                        return false; // values are sorted: nothing further is in range
                    }
                }
                Region::Within(geo_box) => {
                    let code = entry
                        .value
                        .get(..8)
                        .and_then(|b| <[u8; 8]>::try_from(b).ok())
                        .map(u64::from_be_bytes);
                    if let (Some(code), Some((low, high))) = (code, codes) {
                        if code < low {
                            return true;
                        }
                        if code > high {
                            return false; // sorted by code: nothing further is in the box
                        }
                    }
                    match geo_point(entry.value) {
                        Some((lon, lat)) if geo_box.contains(lon, lat) => {}
                        Some(_) => return true,
                        None => {
                            not_a_point = Some(String::from_utf8_lossy(entry.pk).into_owned());
                            return false;
                        }
                    }
                }
            }
            if entry.seq > snapshot {
                return true;
            }
            examined += 1;
            if entry.next_newer_seq != 0 && entry.next_newer_seq <= snapshot {
                shadowed += 1; // a newer version in the same file is visible
                return true;
            }
            found.push((
                entry.seq,
                entry.pk.to_vec(),
                entry.data_block,
                entry.value_checksum,
                entry.entry_offset,
            ));
            true
        })
        .map_err(|e| {
            sift_lsm::Error::corruption(
                &path,
                offset,
                format!(
                    "meta block {name:?}: {} (byte {} of the block)",
                    e.message, e.offset
                ),
            )
        })?;
        if let Some(pk) = not_a_point {
            return Err(sift_lsm::Error::corruption(
                &path,
                offset,
                format!("meta block {name:?}: the entry of key {pk:?} is not a geo point"),
            )
            .into());
        }
        self.stats.candidates_examined += examined;
        self.stats.stale_entries += shadowed;
        for (seq, pk, ordinal, value_checksum, entry_offset) in found {
            self.candidates.push(Candidate {
                seq,
                pk,
                component,
                source: Origin::Block {
                    table: Arc::clone(&table),
                    file_number: file.number,
                    ordinal,
                    value_checksum,
                    entry_offset,
                },
            });
        }
        Ok(())
    }

    /// The sources one table contributes: its matching secondary blocks, or the whole table.
    fn table_sources(
        &mut self,
        file: &Arc<FileMetaData>,
        component: ComponentId,
        global: &GlobalHits,
        sources: &mut Vec<Source>,
    ) -> Result<()> {
        let attr_id = self.state.spec.attr_id;
        let side = self.side_of(file).cloned();
        if side.is_none() && !property_lists(file.properties().get(COLLECTOR_NAME), attr_id) {
            sources.push(Source {
                seq_max: file.seq_max,
                component,
                file: Some(Arc::clone(file)),
                block: None,
            });
            return Ok(());
        }
        let block_source = |(block, seq_max): (u32, SeqNo)| Source {
            seq_max,
            component,
            file: Some(Arc::clone(file)),
            block: Some(block),
        };
        if global.files.contains(&file.number) {
            if let Some(blocks) = global.blocks.get(&file.number) {
                sources.extend(blocks.iter().copied().map(block_source));
            }
            return Ok(());
        }
        self.stats.directories_read += 1;
        let directory = match &side {
            Some(side) => {
                self.read_stats.blocks_read_from_disk.fetch_add(1, Relaxed);
                super::build::read_side_directory(self.engine, side, file.number, &self.state.spec)?
            }
            None => read_directory(&self.view, file, &self.state.spec, &self.context)?,
        };
        sources.extend(
            directory
                .iter()
                .enumerate()
                .filter(|(_, b)| self.block_meets(b))
                .map(|(i, b)| (u32::try_from(i).unwrap_or(u32::MAX), b.seq_max))
                .map(block_source),
        );
        Ok(())
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

/// What the global index said: matching blocks (with their newest sequence number) per file,
/// and which files it knows.
#[derive(Default)]
struct GlobalHits {
    files: HashSet<u64>,
    blocks: HashMap<u64, Vec<(u32, SeqNo)>>,
}

/// Something to read, holding versions up to `seq_max`: the memtables (`file == None`), a whole
/// table (`block == None`) or one secondary block.
struct Source {
    seq_max: SeqNo,
    component: ComponentId,
    file: Option<Arc<FileMetaData>>,
    block: Option<u32>,
}

/// Runs one LOOKUP or RANGE (`[start, end)` of encoded values); `read` carries the query's
/// snapshot and I/O counters.
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
    run_region(
        engine,
        registry,
        collection,
        index,
        Region::Range { start, end },
        limit,
        read,
        read_stats,
    )
}

/// `Database::within` on a `next` or `sst-local` index (a geo attribute): the documents whose
/// point lies in `geo_box` (edges inside), newest first, at most `limit`.
pub(crate) fn within(
    engine: &Db,
    registry: &Registry,
    collection: &Collection,
    index: &Index,
    geo_box: &GeoBox,
    limit: Option<usize>,
) -> Result<QueryResult> {
    let read_stats = Arc::new(ReadStats::default());
    let read = ReadOptions {
        snapshot: Some(engine.snapshot()),
        read_stats: Some(Arc::clone(&read_stats)),
        ..ReadOptions::default()
    };
    if limit == Some(0) {
        return Ok(QueryResult::default());
    }
    let output = run_region(
        engine,
        registry,
        collection,
        index,
        Region::Within(geo_box),
        limit,
        &read,
        &read_stats,
    )?;
    let mut stats = output.stats;
    stats.blocks_read = read_stats.blocks_read();
    Ok(QueryResult {
        hits: output.hits,
        stats,
    })
}

/// How long a query waits for the global index to catch up with its view (microseconds,
/// normally) before it reads the directories of the tables the global index lacks.
pub(crate) const QUERY_PAIRING_PATIENCE: std::time::Duration =
    std::time::Duration::from_millis(200);

/// Runs one query for `region`.
#[allow(clippy::too_many_arguments)]
fn run_region(
    engine: &Db,
    registry: &Registry,
    collection: &Collection,
    index: &Index,
    region: Region<'_>,
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
    // Before the global lock: the version listener takes the registry's lock, then it.
    let side_tree = registry.side_tree(tree);
    // The global index in step with the view: every table of the view with secondary blocks
    // is found in it (a table it did not hold would cost a directory read). Should the
    // listener not catch up in time, the directories fill the gap and the answer is as exact.
    let (view, global, _in_step) =
        state.paired_view(engine, &collection.primary, read, QUERY_PAIRING_PATIENCE)?;
    let snapshot = view.sequence();
    let mut run = Run {
        engine,
        collection,
        state: &state,
        memo,
        memo_epoch,
        view,
        snapshot,
        region,
        side_tree,
        side_files: state.side_files.lock().clone(),
        read,
        read_stats,
        context: ReadContext::from_read_options(read),
        stats: QueryStats::default(),
        candidates: Vec::new(),
    };
    let mut global_hits = GlobalHits::default();
    if let Some(mut global) = global {
        global.index.search(&region, &mut |block| {
            global_hits
                .blocks
                .entry(block.file_number)
                .or_default()
                .push((block.block, block.seq_max));
        });
        for file in super::view_files(&run.view) {
            if global.index.contains_file(file.number) {
                global_hits.files.insert(file.number);
            }
        }
    }
    let mut sources: Vec<Source> = Vec::new();
    // All memtables at once (their map, or a scan of each).
    sources.push(Source {
        seq_max: SeqNo::MAX,
        component: ComponentId::Memtable,
        file: None,
        block: None,
    });
    for id in run.view.ids() {
        match id {
            ComponentId::Memtable | ComponentId::ImmutableMemtable(_) => {}
            ComponentId::Level0File(number) => {
                let file = run.view.files(0).into_iter().find(|f| f.number == number);
                if let Some(file) = file {
                    run.table_sources(&file, id, &global_hits, &mut sources)?;
                }
            }
            ComponentId::Level(level) => {
                for file in run.view.files(level) {
                    run.table_sources(&file, id, &global_hits, &mut sources)?;
                }
            }
        }
    }
    sources.sort_by_key(|source| std::cmp::Reverse(source.seq_max));
    let mut finisher = Finisher {
        limit,
        hits: Vec::new(),
        emitted: EmittedKeys::default(),
        history: HashMap::default(),
        pending: BinaryHeap::new(),
        candidates: Vec::new(),
        batch: Vec::new(),
    };
    for source in sources {
        // Everything newer than this source and all after it is final now. Without a limit
        // nothing can stop the reads early: every candidate is validated at the end, in one
        // batch, so the entries of the next candidates are always known and prefetched.
        if limit.is_some() {
            finisher.finish_above(&mut run, source.seq_max)?;
        }
        if finisher.done() {
            break;
        }
        match (&source.file, source.block) {
            (None, _) => run.read_memtables()?,
            (Some(file), None) => run.scan_table(file, source.component)?,
            (Some(file), Some(block)) => run.read_block(file, source.component, block)?,
        }
        finisher.take(&mut run);
    }
    finisher.finish_above(&mut run, 0)?;
    let hits = finisher.hits;
    Ok(NextOutput {
        hits,
        stats: run.stats,
    })
}

/// Data blocks read by one query: (file number, ordinal) → the block once read and verified
/// (`None`: only entries taken out of it in place, each checked against its checksum).
type ReadHistory = HashMap<(u64, u32), Option<DataBlock>, BlockKeyHash>;

/// Hashes the read history's keys (file numbers and block ordinals the engine assigned, not
/// user data, so a fast multiplicative hash is safe) with one multiply per word instead of
/// SipHash's rounds: the history is probed two or three times per hit.
#[derive(Default, Clone, Copy)]
struct BlockKeyHash;

impl std::hash::BuildHasher for BlockKeyHash {
    type Hasher = BlockKeyHasher;
    fn build_hasher(&self) -> BlockKeyHasher {
        BlockKeyHasher(0)
    }
}

struct BlockKeyHasher(u64);

impl std::hash::Hasher for BlockKeyHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &byte in bytes {
            self.write_u64(u64::from(byte));
        }
    }
    fn write_u32(&mut self, word: u32) {
        self.write_u64(u64::from(word));
    }
    fn write_u64(&mut self, word: u64) {
        // FxHash's step; the top bits (which hashbrown uses) mix every input bit.
        self.0 = (self.0.rotate_left(5) ^ word).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
}

/// A hash of a primary key for [`EmittedKeys`]: FxHash's step over the key's 8-byte words and
/// its length, folded so the low bits (a table's bucket index) depend on every input bit. Not
/// keyed: keys crafted to collide only cost [`EmittedKeys`] a SipHash set, never a wrong answer.
fn key_hash(bytes: &[u8]) -> u64 {
    use std::hash::Hasher;
    let mut hasher = BlockKeyHasher(0);
    let mut words = bytes.chunks_exact(8);
    for word in &mut words {
        let mut buffer = [0; 8];
        buffer.copy_from_slice(word);
        hasher.write_u64(u64::from_le_bytes(buffer));
    }
    let rest = words.remainder();
    let mut buffer = [0; 8];
    buffer[..rest.len()].copy_from_slice(rest);
    hasher.write_u64(u64::from_le_bytes(buffer));
    hasher.write_u64(bytes.len() as u64);
    let hash = hasher.finish();
    hash ^ (hash >> 32)
}

/// The primary keys of a query's hits so far, so an older version of a document already
/// returned is never returned: no copy of a key, one fast hash per candidate (instead of a
/// `HashSet<Vec<u8>>`: two SipHash passes and a copy of the key per hit). The first key seen
/// with a hash is found through its position in the hits; a different key with the same hash
/// (rare, or crafted) goes to a set of copies.
#[derive(Default)]
struct EmittedKeys {
    /// [`key_hash`] → position in the hits of the first hit with that hash.
    first: HashMap<u64, usize, BlockKeyHash>,
    /// Keys whose hash an earlier, different key already has in `first`.
    colliding: HashSet<Vec<u8>>,
}

impl EmittedKeys {
    /// Whether `pk` (hashing to `hash`) is the key of one of `hits`, all of which were
    /// inserted.
    fn contains(&self, hits: &[Hit], pk: &[u8], hash: u64) -> bool {
        match self.first.get(&hash) {
            None => false,
            Some(&position) => {
                hits.get(position).is_some_and(|hit| hit.pk == pk)
                    || (!self.colliding.is_empty() && self.colliding.contains(pk))
            }
        }
    }

    /// Records `pk` (hashing to `hash`) as the key of the hit about to be pushed at the end of
    /// `hits`.
    fn insert(&mut self, hits: &[Hit], pk: &[u8], hash: u64) {
        let position = hits.len();
        match self.first.entry(hash) {
            std::collections::hash_map::Entry::Vacant(slot) => {
                slot.insert(position);
            }
            std::collections::hash_map::Entry::Occupied(slot) => {
                let same = hits.get(*slot.get()).is_some_and(|hit| hit.pk == pk);
                if !same {
                    self.colliding.insert(pk.to_vec());
                }
            }
        }
    }
}

/// Validates candidates newest first and keeps the hits.
struct Finisher {
    limit: Option<usize>,
    hits: Vec<Hit>,
    emitted: EmittedKeys,
    /// Read history: data blocks read by this query.
    history: ReadHistory,
    /// Candidates not validated yet: (seq, position in `candidates`).
    pending: BinaryHeap<(SeqNo, usize)>,
    candidates: Vec<Option<Candidate>>,
    /// Positions of the candidates `finish_above` is validating (kept for its allocation).
    batch: Vec<usize>,
}

/// Candidates ahead of the one being validated whose data-block entries are prefetched
/// ([`PREFETCH_BYTES`] from the entry's start).
const PREFETCH_DISTANCE: usize = 4;
/// Candidates ahead whose entries' first cache line alone is prefetched: a prefetch that
/// misses the TLB holds up the instructions after it until the page walk is done (slow in a
/// virtual machine), so the walk is started well ahead, by one prefetch per entry, and the
/// entry's other lines are asked for later, when their page is known.
const PAGE_PREFETCH_DISTANCE: usize = 12;
/// Candidates ahead whose data blocks' handles (in the table's block index: a cache miss per
/// random block) are prefetched, so a handle is in cache when the entry prefetches need it to
/// compute the entry's address.
///
/// Measured on 0.1% windows over 300,000 tweets (about 300 hits each, every one in another
/// data block), CPU per query against prefetching [`PREFETCH_DISTANCE`] entries alone:
/// handles ahead -18%, then the first lines ahead another -15%.
const HANDLE_PREFETCH_DISTANCE: usize = 16;
/// Bytes prefetched from the start of an entry (its header, key and a typical document of
/// about 600 bytes). Each line takes a fill buffer until it arrives; prefetching 1 KiB for
/// four candidates at once ran out of them (the prefetches themselves stalled).
const PREFETCH_BYTES: usize = 512;
/// What [`PAGE_PREFETCH_DISTANCE`] prefetches: one line.
const CACHE_LINE_BYTES: usize = 64;

impl Finisher {
    fn done(&self) -> bool {
        self.limit.is_some_and(|k| self.hits.len() >= k)
    }

    /// Takes the candidates the last source produced.
    fn take(&mut self, run: &mut Run<'_>) {
        for candidate in run.candidates.drain(..) {
            self.pending.push((candidate.seq, self.candidates.len()));
            self.candidates.push(Some(candidate));
        }
    }

    /// Validates, newest first, every pending candidate newer than `bound`. They are taken
    /// off the heap first, so the data-block entries of the next candidates are known and
    /// start loading (in three steps: [`HANDLE_PREFETCH_DISTANCE`]) while the current one is
    /// validated and fetched.
    fn finish_above(&mut self, run: &mut Run<'_>, bound: SeqNo) -> Result<()> {
        let mut batch = std::mem::take(&mut self.batch);
        batch.clear();
        if bound == 0 && self.pending.len() > 1 {
            // The last call (the only one without a limit) takes every candidate: one sort
            // costs less than a pop per candidate. Same order: descending (seq, position).
            let mut all = std::mem::take(&mut self.pending).into_vec();
            all.sort_unstable_by(|a, b| b.cmp(a));
            let taken = all.partition_point(|&(seq, _)| seq > bound);
            batch.extend(all[..taken].iter().map(|&(_, position)| position));
            self.pending = BinaryHeap::from(all.split_off(taken));
        }
        while let Some(&(seq, position)) = self.pending.peek() {
            if seq <= bound {
                break;
            }
            self.pending.pop();
            batch.push(position);
        }
        // Room for the hits this batch can add (each in another data block, at worst), so
        // the tables are not regrown (and rehashed) hit by hit.
        let room = self
            .limit
            .map_or(batch.len(), |k| k.saturating_sub(self.hits.len()))
            .min(batch.len());
        self.hits.reserve(room);
        self.emitted.first.reserve(room);
        self.history.reserve(room);
        for &position in batch.iter().take(HANDLE_PREFETCH_DISTANCE) {
            self.prefetch_handle(position);
        }
        for &position in batch.iter().take(PAGE_PREFETCH_DISTANCE) {
            self.prefetch(position, CACHE_LINE_BYTES);
        }
        for &position in batch.iter().take(PREFETCH_DISTANCE) {
            self.prefetch(position, PREFETCH_BYTES);
        }
        for (i, &position) in batch.iter().enumerate() {
            if self.done() {
                break;
            }
            if let Some(&ahead) = batch.get(i + HANDLE_PREFETCH_DISTANCE) {
                self.prefetch_handle(ahead);
            }
            if let Some(&ahead) = batch.get(i + PAGE_PREFETCH_DISTANCE) {
                self.prefetch(ahead, CACHE_LINE_BYTES);
            }
            if let Some(&ahead) = batch.get(i + PREFETCH_DISTANCE) {
                self.prefetch(ahead, PREFETCH_BYTES);
            }
            if let Some(candidate) = self.candidates.get_mut(position).and_then(Option::take) {
                self.finish(run, candidate)?;
            }
        }
        self.batch = batch;
        Ok(())
    }

    /// Starts loading the block handle of the candidate at `position`'s data block (what
    /// [`Finisher::prefetch`] reads to find the entry).
    fn prefetch_handle(&self, position: usize) {
        if let Some(Some(Candidate {
            source: Origin::Block { table, ordinal, .. },
            ..
        })) = self.candidates.get(position)
        {
            table.prefetch_block_handle(*ordinal as usize);
        }
    }

    /// Starts loading the first `bytes` bytes of the data-block entry of the candidate at
    /// `position` when the candidate knows where it is (a hint: its memory latency then
    /// overlaps the work on earlier candidates).
    fn prefetch(&self, position: usize, bytes: usize) {
        if let Some(Some(Candidate {
            source:
                Origin::Block {
                    table,
                    ordinal,
                    value_checksum: Some(_),
                    entry_offset: Some(offset),
                    ..
                },
            ..
        })) = self.candidates.get(position)
        {
            table.prefetch_mapped_entry(*ordinal as usize, *offset as usize, bytes);
        }
    }

    fn finish(&mut self, run: &mut Run<'_>, candidate: Candidate) -> Result<()> {
        let pk_hash = key_hash(&candidate.pk);
        if self.emitted.contains(&self.hits, &candidate.pk, pk_hash) {
            run.stats.stale_entries += 1; // an older version of a document already returned
            return Ok(());
        }
        let verdict = match candidate.source {
            // The point read below is the validation.
            Origin::Recent => Verdict::Unknown,
            _ => run.verdict(&candidate)?,
        };
        let doc = match verdict {
            Verdict::Stale => None,
            Verdict::Unknown => {
                if !matches!(candidate.source, Origin::Recent) {
                    run.stats.validations += 1;
                }
                match run
                    .engine
                    .get_with(&run.collection.primary, &candidate.pk, run.read)?
                {
                    Some(live) if live.seq == candidate.seq => {
                        Some(document_of(run, &candidate.pk, &live.value)?)
                    }
                    _ => None,
                }
            }
            Verdict::Live => Some(match &candidate.source {
                Origin::Loaded(envelope) => document_of(run, &candidate.pk, envelope)?,
                Origin::Recent => {
                    return Err(IndexError::Internal(
                        "a memtable-map candidate was validated without a read".to_string(),
                    ))
                }
                Origin::Block {
                    table,
                    file_number,
                    ordinal,
                    value_checksum,
                    entry_offset,
                } => fetch_from_block(
                    run,
                    &mut self.history,
                    table,
                    (*file_number, *ordinal),
                    (*value_checksum, *entry_offset),
                    &candidate,
                )?,
            }),
        };
        let Some(doc) = doc else {
            run.stats.stale_entries += 1;
            return Ok(());
        };
        self.emitted.insert(&self.hits, &candidate.pk, pk_hash);
        self.hits.push(Hit {
            pk: candidate.pk,
            seq: candidate.seq,
            doc,
        });
        Ok(())
    }
}

/// The JSON document of a stored envelope.
fn document_of(run: &Run<'_>, pk: &[u8], envelope: &[u8]) -> Result<Vec<u8>> {
    let decoded = EnvelopeRef::decode(envelope).map_err(|e| run.corrupt_document(pk, &e))?;
    Ok(decoded.doc().to_vec())
}

/// The document of a candidate, from its data block (read once per query; only the
/// candidate's entry is decoded). With the value's checksum and the entry's place in the
/// block from the secondary entry, the value is taken straight out of a memory-mapped block
/// without a seek and without checking the whole block's checksum: it is checked against the
/// entry's checksum instead (one entry's cache lines, not a pass over the 4 KiB block).
/// Anything that does not match falls back to the verified read of the block, which reports a
/// damaged block as corruption.
fn fetch_from_block(
    run: &mut Run<'_>,
    history: &mut ReadHistory,
    table: &Arc<Table>,
    (file_number, ordinal): (u64, u32),
    (value_checksum, entry_offset): (Option<u32>, Option<u32>),
    candidate: &Candidate,
) -> Result<Vec<u8>> {
    let key = (file_number, ordinal);
    if let (Some(checksum), Some(offset)) = (value_checksum, entry_offset) {
        let in_place = table.mapped_entry_value(
            ordinal as usize,
            offset as usize,
            &candidate.pk,
            candidate.seq,
        );
        if let Some(envelope) = in_place.filter(|v| crc32c::crc32c(v) == checksum) {
            history.entry(key).or_insert_with(|| {
                table.count_data_block_read(ordinal as usize, &run.context);
                None
            });
            run.stats.entries_read_in_place += 1;
            return document_of(run, &candidate.pk, envelope);
        }
    }
    if !matches!(history.get(&key), Some(Some(_))) {
        let block = table.data_block(ordinal as usize, &run.context)?;
        history.insert(key, Some(block));
    }
    let Some(Some(block)) = history.get(&key) else {
        return Err(IndexError::Internal(
            "a data block left the read history".to_string(),
        ));
    };
    let corrupt = |message: String| -> IndexError {
        sift_lsm::Error::corruption(
            table.path(),
            table.block_handle(ordinal as usize).map_or(0, |h| h.offset),
            message,
        )
        .into()
    };
    match table.data_block_value(block, &candidate.pk, candidate.seq)? {
        Some(envelope) if value_checksum.is_none_or(|c| crc32c::crc32c(envelope) == c) => {
            document_of(run, &candidate.pk, envelope)
        }
        Some(_) => Err(corrupt(format!(
            "version {} of key {:?} in data block {ordinal} does not match the value checksum \
             of its secondary entry",
            candidate.seq,
            String::from_utf8_lossy(&candidate.pk)
        ))),
        None => Err(corrupt(format!(
            "a secondary entry names version {} of key {:?} in data block {ordinal}, \
             which does not hold it",
            candidate.seq,
            String::from_utf8_lossy(&candidate.pk)
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::{key_hash, EmittedKeys, Hit};
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};
    use std::collections::HashSet;

    /// Runs random contains/insert steps against a `HashSet` model with `hash` as the key
    /// hash (a degenerate one forces collisions through the set of copies).
    fn check_against_model(seed: u64, hash: &dyn Fn(&[u8]) -> u64) {
        let mut random = StdRng::seed_from_u64(seed);
        let mut emitted = EmittedKeys::default();
        let mut hits: Vec<Hit> = Vec::new();
        let mut model: HashSet<Vec<u8>> = HashSet::new();
        for step in 0..2_000 {
            let length = random.gen_range(0..20);
            let pk: Vec<u8> = (0..length).map(|_| random.gen_range(b'a'..=b'd')).collect();
            let found = emitted.contains(&hits, &pk, hash(&pk));
            assert_eq!(
                found,
                model.contains(&pk),
                "seed {seed} step {step}: key {pk:?}"
            );
            if !found {
                emitted.insert(&hits, &pk, hash(&pk));
                hits.push(Hit {
                    pk: pk.clone(),
                    seq: step,
                    doc: Vec::new(),
                });
                model.insert(pk);
            }
        }
        assert_eq!(hits.len(), model.len(), "seed {seed}");
    }

    #[test]
    fn emitted_keys_match_a_set() {
        for seed in 0..4 {
            check_against_model(seed, &key_hash);
            check_against_model(seed, &|pk: &[u8]| pk.len() as u64 % 3);
            check_against_model(seed, &|_: &[u8]| 7);
        }
    }

    #[test]
    fn key_hash_depends_on_every_byte_and_the_length() {
        let base = b"document-0001234".to_vec();
        let mut seen = HashSet::new();
        assert!(seen.insert(key_hash(&base)));
        for position in 0..base.len() {
            let mut changed = base.clone();
            changed[position] ^= 1;
            assert!(seen.insert(key_hash(&changed)), "byte {position}");
        }
        // Trailing zero bytes are padding only when the length is ignored.
        assert_ne!(key_hash(b"ab"), key_hash(b"ab\0"));
        assert_ne!(key_hash(b""), key_hash(b"\0"));
    }
}
