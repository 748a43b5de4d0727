//! LOOKUP and RANGE queries for every index kind, with top-K by recency and validation of
//! every candidate against the primary tree (LevelDB++ Appendix B, Algorithms 1-4, 6, 7).
//!
//! A query reads one engine snapshot. A candidate `pk` is a hit only if the pk's live version
//! at that snapshot carries a value in the queried range and, for kinds whose entries carry
//! the version's sequence number (eager, lazy, memory), only if that number is the live
//! version's: so a document is returned at most once, never in a stale or deleted version,
//! and stale entries never count toward K. Hits come newest first by live sequence number.

use crate::catalog::IndexKind;
use crate::collection::{Collection, Index};
use crate::database::Database;
use crate::encoding::{checked_range_bounds, decode_pk, decode_value, value_bounds};
use crate::envelope::EnvelopeRef;
use crate::error::{IndexError, Result};
use crate::postings::{decode_postings, Posting};
use crate::value::AttrValue;
use sift_lsm::{ComponentId, ReadOptions, ReadStats, SeqNo, ValueKind};
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, HashSet};
use std::sync::Arc;

/// Keys of the components above (each in its own arena): `(arena, start, end)`, sorted by key.
type Shadows<'a> = (&'a [Vec<u8>], &'a [(usize, usize, usize)]);

/// A composite LOOKUP candidate: `(entry seq, key start, value end, key end)` in its arena.
type PointCandidate = (SeqNo, usize, usize, usize);

#[path = "deferred_query.rs"]
mod deferred_query;

#[path = "composite_bounded.rs"]
mod composite_bounded;

#[path = "lazy_point.rs"]
mod lazy_point;
use lazy_point::{ComponentFragments, RemovedPostings};

/// One result: the document's live version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hit {
    pub pk: Vec<u8>,
    /// Sequence number of the live version.
    pub seq: SeqNo,
    /// The JSON text as written.
    pub doc: Vec<u8>,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct QueryStats {
    /// Index entries (composite keys, postings, map entries) looked at. A lazy LOOKUP or
    /// RANGE counts, in each component it reads, the postings taken newest first up to and
    /// including the first one the top K could not accept (postings cancelled by a remove are
    /// not counted); the postings after that are not examined.
    pub candidates_examined: u64,
    /// Primary-tree reads made to validate candidates.
    pub validations: u64,
    /// Blocks read (from cache or disk) by the whole query.
    pub blocks_read: u64,
    /// Candidates found stale (not the live version, or not carrying the value).
    pub stale_entries: u64,
    /// Stale entries deleted by read repair.
    pub entries_repaired: u64,
    /// Components visited by a lazy- or embedded-index query.
    pub components_read: u64,
    /// Embedded: candidates validated from memory (GetLite, or a memtable read), without a
    /// data-block read.
    pub lite_validations: u64,
    /// Embedded: data blocks ruled out by their bloom filters, zone maps or sequence numbers.
    /// Composite LOOKUP: blocks of the value left unread by their sequence bounds.
    pub blocks_skipped: u64,
    /// Embedded: tables ruled out by their zone maps (from the manifest) or sequence numbers.
    pub tables_skipped: u64,
    /// `next` / `sst-local`: hits whose document was taken straight out of a memory-mapped
    /// data block, checked against the checksum in its secondary entry (no verified read of
    /// the whole block).
    pub entries_read_in_place: u64,
    /// `next` / `sst-local`: table directories read (for `next`, of tables its global index
    /// does not hold: written before the index existed, or built online into the side tree).
    pub directories_read: u64,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct QueryResult {
    /// Newest first.
    pub hits: Vec<Hit>,
    pub stats: QueryStats,
}

/// A stale index entry met by a query, for read repair.
#[derive(Debug, Clone)]
pub(crate) struct StaleEntry {
    /// The encoded value the entry is filed under.
    pub value: Vec<u8>,
    pub pk: Vec<u8>,
    /// The version the entry names (postings); 0 for composite entries.
    pub seq: SeqNo,
}

/// Hits ordered by sequence number, for the heap.
struct BySeq(Hit);

impl PartialEq for BySeq {
    fn eq(&self, other: &Self) -> bool {
        self.0.seq == other.0.seq
    }
}
impl Eq for BySeq {}
impl PartialOrd for BySeq {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for BySeq {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.0.seq.cmp(&other.0.seq)
    }
}

/// The K newest hits so far (Algorithm 1): a min-heap on sequence number.
pub(crate) struct TopK {
    limit: Option<usize>,
    heap: BinaryHeap<Reverse<BySeq>>,
}

impl TopK {
    fn new(limit: Option<usize>) -> TopK {
        TopK {
            limit,
            heap: BinaryHeap::new(),
        }
    }
    pub(crate) fn is_full(&self) -> bool {
        self.limit.is_some_and(|k| self.heap.len() >= k)
    }
    pub(crate) fn min_seq(&self) -> Option<SeqNo> {
        self.heap.peek().map(|Reverse(BySeq(hit))| hit.seq)
    }
    /// Whether a hit with this sequence number would enter the heap.
    pub(crate) fn would_accept(&self, seq: SeqNo) -> bool {
        !self.is_full() || self.min_seq().is_some_and(|min| seq > min)
    }
    pub(crate) fn push(&mut self, hit: Hit) {
        if self.limit == Some(0) || !self.would_accept(hit.seq) {
            return;
        }
        if self.is_full() {
            self.heap.pop();
        }
        self.heap.push(Reverse(BySeq(hit)));
    }
    /// Newest first (not heap order).
    fn into_sorted(self) -> Vec<Hit> {
        let mut hits: Vec<Hit> = self
            .heap
            .into_iter()
            .map(|Reverse(BySeq(hit))| hit)
            .collect();
        hits.sort_by_key(|hit| Reverse(hit.seq));
        hits
    }
}

/// What the snapshot says about a pk's live version.
struct Live {
    seq: SeqNo,
    /// Whether the version carries a value in the queried range.
    in_range: bool,
    envelope: Vec<u8>,
    /// Where the JSON starts in `envelope`.
    doc_offset: usize,
}

impl Live {
    /// The JSON bytes, reusing the envelope's buffer.
    fn into_doc(mut self) -> Vec<u8> {
        self.envelope
            .drain(..self.doc_offset.min(self.envelope.len()));
        self.envelope
    }
}

struct Query<'a> {
    engine: &'a sift_lsm::Db,
    collection: &'a Collection,
    index: &'a Index,
    /// `[start, end)` over encoded values.
    start: Vec<u8>,
    end: Option<Vec<u8>>,
    /// A point lookup (one value) rather than a range.
    point: bool,
    read: ReadOptions,
    read_stats: Arc<ReadStats>,
    stats: QueryStats,
    top: TopK,
    checked: HashMap<Vec<u8>, Option<Live>>,
    emitted: HashSet<Vec<u8>>,
    stale: Vec<StaleEntry>,
}

impl Query<'_> {
    fn in_range(&self, encoded: &[u8]) -> bool {
        encoded >= self.start.as_slice() && self.end.as_deref().is_none_or(|end| encoded < end)
    }

    fn corrupt(&self, what: &str, error: &IndexError) -> IndexError {
        IndexError::Internal(format!(
            "index `{}` of collection `{}`: corrupt {what}: {error}",
            self.index.record.name, self.collection.record.name
        ))
    }

    fn read_primary(&self, pk: &[u8]) -> Result<Option<Live>> {
        let Some(entry) = self
            .engine
            .get_with(&self.collection.primary, pk, &self.read)?
        else {
            return Ok(None);
        };
        let envelope =
            EnvelopeRef::decode(&entry.value).map_err(|e| self.corrupt("document", &e))?;
        let in_range = self
            .index
            .encoded_value(&envelope, entry.seq)
            .is_some_and(|v| self.in_range(&v));
        let doc_offset = envelope.doc_offset();
        Ok(Some(Live {
            seq: entry.seq,
            in_range,
            envelope: entry.value,
            doc_offset,
        }))
    }

    /// Checks one candidate: `pk` filed under `value`, naming version `posting_seq` (if the
    /// kind records it).
    fn validate(&mut self, pk: &[u8], value: &[u8], posting_seq: Option<SeqNo>) -> Result<()> {
        if self.emitted.contains(pk) {
            return Ok(());
        }
        self.validate_owned(pk.to_vec(), value, posting_seq, false)
    }

    /// [`Query::validate`] for a pk the caller owns (it moves into the hit). `unique`: the
    /// query meets no other candidate of this pk (a composite point lookup validates each
    /// `value ‖ pk` key once), so the version read is not remembered for reuse and the pk is
    /// not recorded as emitted.
    /// Takes the first visible version of one composite key of a LOOKUP component: the key is
    /// copied to `arena` and listed in `keys` (it shadows lower components), and it is a
    /// candidate `(entry seq, key start, value end, key end)` unless a newer component
    /// (`shadows`) already had the key or the version is a delete.
    pub(super) fn take_point_key(
        &mut self,
        key: &[u8],
        seq: SeqNo,
        kind: ValueKind,
        (arenas, seen): Shadows<'_>,
        arena: &mut Vec<u8>,
        keys: &mut Vec<(usize, usize)>,
    ) -> Result<Option<PointCandidate>> {
        let shadowed = !seen.is_empty()
            && seen
                .binary_search_by(|&(a, s, e)| arenas[a][s..e].cmp(key))
                .is_ok();
        let start = arena.len();
        arena.extend_from_slice(key);
        keys.push((start, arena.len()));
        if shadowed || kind == ValueKind::Delete {
            return Ok(None);
        }
        self.stats.candidates_examined += 1;
        let (_, value_bytes) = decode_value(key, self.index.record.attr_type)
            .map_err(|e| self.corrupt("composite key", &e))?;
        Ok(Some((seq, start, start + value_bytes, arena.len())))
    }

    /// Validates one distinct composite key `value ‖ pk` of a LOOKUP (`value_bytes`: the
    /// length of its value part) against the primary.
    pub(super) fn validate_point_key(&mut self, key: &[u8], value_bytes: usize) -> Result<()> {
        let (pk, pk_bytes) =
            decode_pk(&key[value_bytes..]).map_err(|e| self.corrupt("composite key", &e))?;
        // Distinct keys of one value name distinct pks only if each key is exactly
        // `value ‖ pk`.
        if value_bytes + pk_bytes != key.len() {
            return Err(self.corrupt(
                "composite key",
                &IndexError::corrupt(value_bytes + pk_bytes, "bytes after the primary key"),
            ));
        }
        self.validate_owned(pk, &key[..value_bytes], None, true)
    }

    fn validate_owned(
        &mut self,
        pk: Vec<u8>,
        value: &[u8],
        posting_seq: Option<SeqNo>,
        unique: bool,
    ) -> Result<()> {
        // A version read for an earlier candidate of the same pk is reused; one that becomes a
        // hit moves into the hit (its pk goes to `emitted`), so nothing is read twice.
        let cached = if unique {
            None
        } else {
            self.checked.remove(&pk)
        };
        let live = if let Some(live) = cached {
            live
        } else {
            self.stats.validations += 1;
            self.read_primary(&pk)?
        };
        match live {
            Some(live) if live.in_range && posting_seq.is_none_or(|seq| seq == live.seq) => {
                if !unique {
                    self.emitted.insert(pk.clone());
                }
                let hit = Hit {
                    pk,
                    seq: live.seq,
                    doc: live.into_doc(),
                };
                self.top.push(hit);
            }
            live => {
                if !unique {
                    self.checked.insert(pk.clone(), live);
                }
                self.stats.stale_entries += 1;
                if self.index.record.read_repair {
                    self.stale.push(StaleEntry {
                        value: value.to_vec(),
                        pk: pk.clone(),
                        seq: posting_seq.unwrap_or(0),
                    });
                }
            }
        }
        Ok(())
    }

    /// Composite (Algorithms 4 and 7): one scan of the key range over all components (the
    /// merged iterator gives each `value ‖ pk` key once, newest version). Keys come in pk
    /// order, not recency order, so the scan first collects every candidate with its entry's
    /// sequence number (an index read, no primary read), then validates candidates newest
    /// entry first and stops at the first one that cannot enter the top K (an entry is
    /// written at or after the version it names, so its sequence number bounds the version's:
    /// asynchronous indexes insert theirs at the version's own number, see `async_index`).
    /// LOOKUPs (one value) walk components instead: [`Query::run_composite_point`].
    fn run_composite(&mut self) -> Result<()> {
        if self.point {
            return self.run_composite_point();
        }
        let tree = self.index.stand_alone_tree()?;
        let options = ReadOptions {
            lower_bound: Some(self.start.clone()),
            upper_bound: self.end.clone(),
            ..self.read.clone()
        };
        let attr_type = self.index.record.attr_type;
        let mut iter = self.engine.iter(tree, options)?;
        iter.seek(&self.start.clone())?;
        // Keys are copied into one arena, (entry seq, key start, value end, key end) per
        // candidate: no allocation per entry, and only validated candidates decode their pk.
        let mut arena: Vec<u8> = Vec::new();
        let mut candidates: Vec<(SeqNo, usize, usize, usize)> = Vec::new();
        while iter.valid() {
            self.stats.candidates_examined += 1;
            let key = iter.key();
            let (_, value_bytes) =
                decode_value(key, attr_type).map_err(|e| self.corrupt("composite key", &e))?;
            let start = arena.len();
            arena.extend_from_slice(key);
            candidates.push((iter.seq(), start, start + value_bytes, arena.len()));
            iter.next()?;
        }
        candidates.sort_unstable_by_key(|c| std::cmp::Reverse(c.0));
        for (entry_seq, start, value_end, end) in candidates {
            if !self.top.would_accept(entry_seq) {
                break;
            }
            let (pk, _) =
                decode_pk(&arena[value_end..end]).map_err(|e| self.corrupt("composite key", &e))?;
            self.validate(&pk, &arena[start..value_end], None)?;
        }
        Ok(())
    }

    /// Composite LOOKUP, component by component, newest first (as Algorithm 3 walks a lazy
    /// index): each component's keys of the value are collected and validated newest entry
    /// first, and the walk stops once the K-th hit is at least as new as every component
    /// left (a hit's live version is no newer than its newest index entry). Most lookups find
    /// their K newest hits in the small upper components and never scan the large bottom
    /// level. A key met in a newer component (put or delete) shadows its entries below, so
    /// each key — each pk, for one value — is validated at most once, as in a merged scan.
    /// Inside a table component, blocks are read newest first by their sequence bound and the
    /// reading stops as early (`composite_bounded.rs`); memtables are scanned whole.
    fn run_composite_point(&mut self) -> Result<()> {
        let tree = self.index.stand_alone_tree()?;
        let view = self.engine.components(tree, &self.read)?;
        let ids = view.ids();
        // Keys of the components already read (each component's in their own arena), sorted.
        let mut arenas: Vec<Vec<u8>> = Vec::new();
        let mut seen: Vec<(usize, usize, usize)> = Vec::new();
        // Sized for a typical value's entries, so collecting them rarely reallocates.
        let mut keys: Vec<(usize, usize)> = Vec::with_capacity(256);
        let mut candidates: Vec<(SeqNo, usize, usize, usize)> = Vec::with_capacity(256);
        let mut table_buffers = composite_bounded::ComponentScratch::default();
        for (position, id) in ids.iter().enumerate() {
            self.stats.components_read += 1;
            // (entry seq, key start, value end, key end) per candidate, keys in `arena`.
            let mut arena: Vec<u8> = Vec::with_capacity(8 << 10);
            keys.clear();
            candidates.clear();
            if matches!(id, ComponentId::Level0File(_) | ComponentId::Level(_)) {
                // Tables: blocks newest first by their sequence bound (`composite_bounded.rs`).
                self.composite_table_component(
                    &view,
                    *id,
                    (&arenas, &seen),
                    &mut arena,
                    &mut keys,
                    &mut table_buffers,
                )?;
            } else {
                let mut iter = view.iter(*id)?;
                iter.seek(&self.start)?;
                while iter.valid() && self.in_range(iter.user_key()) {
                    let key = iter.user_key();
                    // A key's versions come newest first: the first visible one is the key's.
                    if keys.last().is_some_and(|&(s, e)| &arena[s..e] == key) {
                        iter.next()?;
                        continue;
                    }
                    let candidate = self.take_point_key(
                        key,
                        iter.seq(),
                        iter.kind(),
                        (&arenas, &seen),
                        &mut arena,
                        &mut keys,
                    )?;
                    candidates.extend(candidate);
                    iter.next()?;
                }
                candidates.sort_unstable_by_key(|c| Reverse(c.0));
                for &(entry_seq, start, value_end, end) in &candidates {
                    if !self.top.would_accept(entry_seq) {
                        break;
                    }
                    self.validate_point_key(&arena[start..end], value_end - start)?;
                }
            }
            let rest = &ids[position + 1..];
            if rest.is_empty() {
                break;
            }
            if self.top.is_full() {
                let newest_left = self.newest_seq_in(&view, rest);
                if self.top.min_seq().is_some_and(|min| newest_left <= min) {
                    break;
                }
            }
            if !keys.is_empty() {
                let arena_index = arenas.len();
                seen.extend(keys.iter().map(|&(s, e)| (arena_index, s, e)));
                arenas.push(arena);
                seen.sort_unstable_by(|&(a, s, e), &(b, t, f)| {
                    arenas[a][s..e].cmp(&arenas[b][t..f])
                });
            }
        }
        Ok(())
    }

    /// The newest sequence number any of `components` can hold in the queried key range
    /// (memtables: unbounded).
    fn newest_seq_in(
        &self,
        view: &sift_lsm::db::ComponentView,
        components: &[ComponentId],
    ) -> SeqNo {
        components
            .iter()
            .map(|id| match id {
                ComponentId::Memtable | ComponentId::ImmutableMemtable(_) => SeqNo::MAX,
                ComponentId::Level0File(number) => view
                    .files(0)
                    .iter()
                    .find(|f| f.number == *number)
                    .map_or(SeqNo::MAX, |f| f.seq_max),
                ComponentId::Level(level) => view
                    .files(*level)
                    .iter()
                    .filter(|f| f.overlaps(Some(&self.start), self.end.as_deref()))
                    .map(|f| f.seq_max)
                    .max()
                    .unwrap_or(0),
            })
            .max()
            .unwrap_or(0)
    }

    /// Postings of one list, newest first: validated until one cannot enter the top K.
    fn take_list(&mut self, value: &[u8], list: &[Posting]) -> Result<()> {
        for posting in list.iter().filter(|p| !p.remove) {
            self.stats.candidates_examined += 1;
            if !self.top.would_accept(posting.seq) {
                break;
            }
            self.validate(&posting.pk, value, Some(posting.seq))?;
        }
        Ok(())
    }

    /// Eager (Algorithm 2): LOOKUP reads one list; RANGE scans the lists of the range and
    /// merges them through the top-K heap.
    fn run_eager(&mut self) -> Result<()> {
        let tree = self.index.stand_alone_tree()?;
        if self.point {
            if let Some(entry) = self.engine.get_with(tree, &self.start, &self.read)? {
                let list =
                    decode_postings(&entry.value).map_err(|e| self.corrupt("posting list", &e))?;
                let value = self.start.clone();
                self.take_list(&value, &list)?;
            }
            return Ok(());
        }
        let options = ReadOptions {
            lower_bound: Some(self.start.clone()),
            upper_bound: self.end.clone(),
            ..self.read.clone()
        };
        let mut iter = self.engine.iter(tree, options)?;
        iter.seek(&self.start.clone())?;
        while iter.valid() {
            let value = iter.key().to_vec();
            let list =
                decode_postings(iter.value()).map_err(|e| self.corrupt("posting list", &e))?;
            self.take_list(&value, &list)?;
            iter.next()?;
        }
        Ok(())
    }

    /// Lazy (Algorithms 3 and 6): component by component, newest first. A fragment's postings
    /// are older than the fragment's own sequence number, and for one key every fragment of a
    /// component is newer than every fragment below it. So a LOOKUP stops after the first
    /// component at which K valid hits are known; a RANGE (several keys) stops once the K-th
    /// hit is newer than every table left to read.
    fn run_lazy(&mut self) -> Result<()> {
        if self.point {
            // LOOKUP: `lazy_point.rs`; what follows is RANGE only.
            return self.run_lazy_point();
        }
        let tree = self.index.stand_alone_tree()?;
        let view = self.engine.components(tree, &self.read)?;
        let ids = view.ids();
        let mut removed = RemovedPostings::default();
        // Keys whose base (a full list or a delete) was met: nothing below them counts.
        let mut based: HashSet<Vec<u8>> = HashSet::new();
        let mut fragments = ComponentFragments::default();
        for (position, id) in ids.iter().enumerate() {
            self.stats.components_read += 1;
            self.collect_fragments(&view, *id, &mut based, &mut fragments)?;
            self.take_lists(*id, &fragments, &mut removed)?;
            if !self.top.is_full() {
                continue;
            }
            let newest_left = self.newest_seq_in(&view, &ids[position + 1..]);
            if self.top.min_seq().is_some_and(|min| newest_left <= min) {
                break;
            }
        }
        Ok(())
    }

    /// Memory: the candidates come from the maps (read before the snapshot was taken, so the
    /// snapshot holds every version they name), newest first.
    fn run_memory(&mut self, mut candidates: Vec<(SeqNo, Vec<u8>)>) -> Result<()> {
        candidates.sort_by_key(|(seq, _)| Reverse(*seq));
        for (seq, pk) in candidates {
            self.stats.candidates_examined += 1;
            if !self.top.would_accept(seq) {
                break;
            }
            self.validate(&pk, &[], Some(seq))?;
        }
        Ok(())
    }
}

impl Database {
    /// The live version of one document.
    pub fn get(&self, collection: &str, pk: &[u8]) -> Result<Option<Hit>> {
        let collection = self.collection_arc(collection)?;
        let Some(entry) = self.engine.get(&collection.primary, pk)? else {
            return Ok(None);
        };
        let envelope = EnvelopeRef::decode(&entry.value).map_err(|e| {
            IndexError::Internal(format!(
                "stored document {:?} is corrupt: {e}",
                String::from_utf8_lossy(pk)
            ))
        })?;
        Ok(Some(Hit {
            pk: pk.to_vec(),
            seq: entry.seq,
            doc: envelope.doc().to_vec(),
        }))
    }

    /// LOOKUP(index, value, K): the documents whose attribute equals `value`, newest first,
    /// at most `limit` of them (`None`: all).
    pub fn lookup(
        &self,
        collection: &str,
        index: &str,
        value: &AttrValue,
        limit: Option<usize>,
    ) -> Result<QueryResult> {
        let collection = self.collection_arc(collection)?;
        let index = collection.index(index)?;
        crate::geo::reject_geo_index(index, "lookup")?;
        check_type(index, value)?;
        self.run_query(&collection, index, value_bounds(value), true, limit)
    }

    /// RANGELOOKUP(index, lo, hi, K): documents with `lo <= attribute <= hi`, newest first.
    pub fn range(
        &self,
        collection: &str,
        index: &str,
        lo: &AttrValue,
        hi: &AttrValue,
        limit: Option<usize>,
    ) -> Result<QueryResult> {
        let collection = self.collection_arc(collection)?;
        let index = collection.index(index)?;
        crate::geo::reject_geo_index(index, "range")?;
        check_type(index, lo)?;
        check_type(index, hi)?;
        let bounds = checked_range_bounds(lo, hi)?;
        self.run_query(&collection, index, bounds, false, limit)
    }

    fn run_query(
        &self,
        collection: &Collection,
        index: &Index,
        (start, end): (Vec<u8>, Option<Vec<u8>>),
        point: bool,
        limit: Option<usize>,
    ) -> Result<QueryResult> {
        let memory_candidates = index
            .memory
            .as_ref()
            .map(|memory| memory.candidates(&start, end.as_deref()));
        let read_stats = Arc::new(ReadStats::default());
        let read = ReadOptions {
            snapshot: Some(self.engine.snapshot()),
            read_stats: Some(Arc::clone(&read_stats)),
            ..ReadOptions::default()
        };
        let mut query = Query {
            engine: &self.engine,
            collection,
            index,
            start,
            end,
            point,
            read,
            read_stats,
            stats: QueryStats::default(),
            top: TopK::new(limit),
            checked: HashMap::new(),
            emitted: HashSet::new(),
            stale: Vec::new(),
        };
        let mut ordered_hits = None;
        if limit != Some(0) {
            match index.record.kind {
                IndexKind::Composite if crate::deferred::is_deferred(index) => {
                    query.run_deferred()?;
                }
                IndexKind::Composite => query.run_composite()?,
                IndexKind::Eager => query.run_eager()?,
                IndexKind::Lazy => query.run_lazy()?,
                IndexKind::Memory => query.run_memory(memory_candidates.unwrap_or_default())?,
                IndexKind::SstLocal | IndexKind::Next => {
                    let output = crate::next::query::run(
                        &self.engine,
                        &self.next,
                        collection,
                        index,
                        &query.start,
                        query.end.as_deref(),
                        limit,
                        &query.read,
                        &query.read_stats,
                    )?;
                    query.stats = output.stats;
                    // Already newest first and within the limit (checked: else through the
                    // heap): no heap pass and re-sort of every hit.
                    let sorted = output.hits.windows(2).all(|w| w[0].seq >= w[1].seq);
                    if sorted && limit.is_none_or(|k| output.hits.len() <= k) {
                        ordered_hits = Some(output.hits);
                    } else {
                        for hit in output.hits {
                            query.top.push(hit);
                        }
                    }
                }
                IndexKind::Embedded => {
                    crate::embedded::query::run(crate::embedded::query::Request {
                        engine: &self.engine,
                        collection,
                        index,
                        embedded: index.embedded_state()?,
                        start: &query.start,
                        end: query.end.as_deref(),
                        point,
                        read: &query.read,
                        top: &mut query.top,
                        stats: &mut query.stats,
                    })?;
                }
            }
        }
        let mut stats = query.stats;
        stats.blocks_read = query.read_stats.blocks_read();
        let stale = std::mem::take(&mut query.stale);
        let hits = ordered_hits.unwrap_or_else(|| query.top.into_sorted());
        if !stale.is_empty() {
            stats.entries_repaired = self.repair(collection, index, stale)?;
        }
        Ok(QueryResult { hits, stats })
    }
}

fn check_type(index: &Index, value: &AttrValue) -> Result<()> {
    if value.attr_type() == index.record.attr_type {
        Ok(())
    } else {
        Err(IndexError::QueryTypeMismatch {
            index: index.record.name.clone(),
            found: index.record.attr_type,
            given: value.attr_type(),
        })
    }
}
