//! What LOOKUP and RANGE share across kinds: the request a kind gets, the top K by recency
//! (LevelDB++ Appendix B, Algorithm 1) and the validation of every candidate against the
//! primary tree. Each kind's own search is in its folder.
//!
//! A query reads one engine snapshot. A candidate `pk` is a hit only if the pk's live version
//! at that snapshot carries a value in the queried range and, for kinds whose entries carry
//! the version's sequence number (eager, lazy, memory), only if that number is the live
//! version's: so a document is returned at most once, never in a stale or deleted version,
//! and stale entries never count toward K. Hits come newest first by live sequence number.

use super::{Collection, Index};
use crate::encoding::{decode_pk, decode_value};
use crate::envelope::EnvelopeRef;
use crate::error::{IndexError, Result};
use sift_lsm::{ComponentId, ReadOptions, ReadStats, SeqNo, ValueKind};
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, HashSet};
use std::sync::Arc;

/// Keys of the components above (each in its own arena): `(arena, start, end)`, sorted by key.
pub(crate) type Shadows<'a> = (&'a [Vec<u8>], &'a [(usize, usize, usize)]);

/// A composite LOOKUP candidate: `(entry seq, key start, value end, key end)` in its arena.
pub(crate) type PointCandidate = (SeqNo, usize, usize, usize);

/// One result: the document's live version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hit {
    /// The primary key.
    pub pk: Vec<u8>,
    /// Sequence number of the live version.
    pub seq: SeqNo,
    /// The JSON text as written.
    pub doc: Vec<u8>,
}

/// What a query did, for benchmarks and the study.
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

/// A query's hits and statistics.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct QueryResult {
    /// Newest first.
    pub hits: Vec<Hit>,
    /// What the query did.
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
    pub(crate) fn new(limit: Option<usize>) -> TopK {
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
    pub(crate) fn into_sorted(self) -> Vec<Hit> {
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
pub(crate) struct Live {
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

pub(crate) struct Query<'a> {
    pub(crate) engine: &'a sift_lsm::Db,
    pub(crate) collection: &'a Collection,
    pub(crate) index: &'a Index,
    /// `[start, end)` over encoded values.
    pub(crate) start: Vec<u8>,
    pub(crate) end: Option<Vec<u8>>,
    /// A point lookup (one value) rather than a range.
    pub(crate) point: bool,
    pub(crate) read: ReadOptions,
    pub(crate) read_stats: Arc<ReadStats>,
    pub(crate) stats: QueryStats,
    pub(crate) top: TopK,
    pub(crate) checked: HashMap<Vec<u8>, Option<Live>>,
    pub(crate) emitted: HashSet<Vec<u8>>,
    pub(crate) stale: Vec<StaleEntry>,
}

/// A LOOKUP (`point`: one value) or RANGE over encoded values `[start, end)`.
pub(crate) struct SearchRequest<'a> {
    pub(crate) engine: &'a sift_lsm::Db,
    pub(crate) collection: &'a Collection,
    pub(crate) start: Vec<u8>,
    pub(crate) end: Option<Vec<u8>>,
    pub(crate) point: bool,
    /// At most this many hits (`None`: all). Never `Some(0)`: the database answers that.
    pub(crate) limit: Option<usize>,
}

/// A kind's answer: hits newest first, its statistics, and stale entries for read repair.
#[derive(Debug, Default)]
pub(crate) struct SearchOutput {
    pub(crate) hits: Vec<Hit>,
    pub(crate) stats: QueryStats,
    pub(crate) stale: Vec<StaleEntry>,
}

impl<'a> Query<'a> {
    /// Starts a query at a new engine snapshot. Kinds that read candidates from memory read
    /// them before this, so the snapshot holds every version they name.
    pub(crate) fn new(request: SearchRequest<'a>, index: &'a Index) -> Query<'a> {
        let read_stats = Arc::new(ReadStats::default());
        let read = ReadOptions {
            snapshot: Some(request.engine.snapshot()),
            read_stats: Some(Arc::clone(&read_stats)),
            ..ReadOptions::default()
        };
        Query {
            engine: request.engine,
            collection: request.collection,
            index,
            start: request.start,
            end: request.end,
            point: request.point,
            read,
            read_stats,
            stats: QueryStats::default(),
            top: TopK::new(request.limit),
            checked: HashMap::new(),
            emitted: HashSet::new(),
            stale: Vec::new(),
        }
    }

    /// The hits newest first, with the blocks the query read.
    pub(crate) fn finish(self) -> SearchOutput {
        let mut stats = self.stats;
        stats.blocks_read = self.read_stats.blocks_read();
        SearchOutput {
            hits: self.top.into_sorted(),
            stats,
            stale: self.stale,
        }
    }
}

impl Query<'_> {
    pub(crate) fn in_range(&self, encoded: &[u8]) -> bool {
        encoded >= self.start.as_slice() && self.end.as_deref().is_none_or(|end| encoded < end)
    }

    pub(crate) fn corrupt(&self, what: &str, error: &IndexError) -> IndexError {
        super::collection::corrupt_entry(self.collection, self.index, what, error)
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
    pub(crate) fn validate(
        &mut self,
        pk: &[u8],
        value: &[u8],
        posting_seq: Option<SeqNo>,
    ) -> Result<()> {
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
    pub(crate) fn take_point_key(
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
    pub(crate) fn validate_point_key(&mut self, key: &[u8], value_bytes: usize) -> Result<()> {
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

    /// The newest sequence number any of `components` can hold in the queried key range
    /// (memtables: unbounded).
    pub(crate) fn newest_seq_in(
        &self,
        view: &sift_lsm::extension::ComponentView,
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
}
