//! WITHIN over kinds that file geo points under Z-order keys (composite, memory): the top K
//! by recency and the validation of candidates against the primary, shared by those kinds.

use super::query::{Hit, QueryStats, SearchOutput, StaleEntry};
use super::{Collection, Index};
use crate::encoding::decode_value;
use crate::envelope::EnvelopeRef;
use crate::error::{IndexError, Result};
pub(crate) use crate::geo::key_bounds;
use crate::geo::GeoBox;
use crate::value::{AttrType, AttrValue};
use sift_lsm::{ReadOptions, ReadStats, SeqNo};
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, HashSet};
use std::sync::Arc;

/// WITHIN a box: the Z-order key ranges that cover it, and at most `limit` hits.
pub(crate) struct WithinRequest<'a> {
    pub(crate) engine: &'a sift_lsm::Db,
    pub(crate) collection: &'a Collection,
    pub(crate) geo_box: GeoBox,
    /// The box's cover (`geo::zorder_cover`).
    pub(crate) ranges: Vec<(u64, u64)>,
    pub(crate) limit: Option<usize>,
}

/// A candidate: `pk` filed under `value` (exact point inside the box), by an entry written at
/// `entry_seq` (composite) or naming version `entry_seq` (memory).
pub(crate) struct Candidate {
    pub(crate) entry_seq: SeqNo,
    pub(crate) pk: Vec<u8>,
    pub(crate) value: Vec<u8>,
}

pub(crate) struct Within<'a> {
    pub(crate) engine: &'a sift_lsm::Db,
    pub(crate) collection: &'a Collection,
    pub(crate) index: &'a Index,
    pub(crate) geo_box: GeoBox,
    pub(crate) read: ReadOptions,
    read_stats: Arc<ReadStats>,
    pub(crate) stats: QueryStats,
    pub(crate) limit: Option<usize>,
    /// The `limit` newest hits so far: a min-heap on sequence number.
    pub(crate) top: BinaryHeap<Reverse<(SeqNo, Vec<u8>)>>,
    pub(crate) docs: HashMap<Vec<u8>, Vec<u8>>,
    pub(crate) emitted: HashSet<Vec<u8>>,
    pub(crate) stale: Vec<StaleEntry>,
}

impl<'a> Within<'a> {
    /// Starts at a new engine snapshot (memory entries are read before it).
    pub(crate) fn new(request: &WithinRequest<'a>, index: &'a Index) -> Within<'a> {
        let read_stats = Arc::new(ReadStats::default());
        Within {
            engine: request.engine,
            collection: request.collection,
            index,
            geo_box: request.geo_box,
            read: ReadOptions {
                snapshot: Some(request.engine.snapshot()),
                read_stats: Some(Arc::clone(&read_stats)),
                ..ReadOptions::default()
            },
            read_stats,
            stats: QueryStats::default(),
            limit: request.limit,
            top: BinaryHeap::new(),
            docs: HashMap::new(),
            emitted: HashSet::new(),
            stale: Vec::new(),
        }
    }

    pub(crate) fn finish(mut self) -> SearchOutput {
        let mut stats = self.stats;
        stats.blocks_read = self.read_stats.blocks_read();
        let stale = std::mem::take(&mut self.stale);
        SearchOutput {
            hits: self.into_hits(),
            stats,
            stale,
        }
    }
}

impl Within<'_> {
    pub(crate) fn corrupt(&self, what: &str, error: &IndexError) -> IndexError {
        super::collection::corrupt_entry(self.collection, self.index, what, error)
    }

    /// Whether an encoded geo value lies in the box.
    pub(crate) fn value_inside(&self, encoded: &[u8]) -> Result<bool> {
        match decode_value(encoded, AttrType::Geo) {
            Ok((AttrValue::Geo { lon, lat }, _)) => Ok(self.geo_box.contains(lon, lat)),
            Ok(_) => Ok(false),
            Err(error) => Err(self.corrupt("geo value", &error)),
        }
    }

    fn is_full(&self) -> bool {
        self.limit.is_some_and(|k| self.top.len() >= k)
    }

    /// Whether a hit with this sequence number would enter the top K.
    pub(crate) fn would_accept(&self, seq: SeqNo) -> bool {
        self.limit != Some(0)
            && (!self.is_full() || self.top.peek().is_some_and(|Reverse((min, _))| seq > *min))
    }

    fn push(&mut self, seq: SeqNo, pk: Vec<u8>, doc: Vec<u8>) {
        if !self.would_accept(seq) {
            return;
        }
        if self.is_full() {
            if let Some(Reverse((_, evicted))) = self.top.pop() {
                self.docs.remove(&evicted);
            }
        }
        self.docs.insert(pk.clone(), doc);
        self.top.push(Reverse((seq, pk)));
    }

    /// Checks a candidate against the pk's live version at the snapshot: it must carry a point
    /// inside the box and, for postings (`posting_seq`), be the version the posting names.
    pub(crate) fn validate(
        &mut self,
        candidate: &Candidate,
        posting_seq: Option<SeqNo>,
    ) -> Result<()> {
        if self.emitted.contains(&candidate.pk) {
            return Ok(());
        }
        self.stats.validations += 1;
        let live = self
            .engine
            .get_with(&self.collection.primary, &candidate.pk, &self.read)?;
        let mut hit = None;
        if let Some(entry) = &live {
            let envelope =
                EnvelopeRef::decode(&entry.value).map_err(|e| self.corrupt("document", &e))?;
            let inside = match self.index.encoded_value(&envelope, entry.seq) {
                Some(value) => self.value_inside(&value)?,
                None => false,
            };
            if inside && posting_seq.is_none_or(|seq| seq == entry.seq) {
                hit = Some((entry.seq, envelope.doc().to_vec()));
            }
        }
        if let Some((seq, doc)) = hit {
            self.emitted.insert(candidate.pk.clone());
            self.push(seq, candidate.pk.clone(), doc);
        } else {
            self.stats.stale_entries += 1;
            if self.index.record.read_repair {
                self.stale.push(StaleEntry {
                    value: candidate.value.clone(),
                    pk: candidate.pk.clone(),
                    seq: posting_seq.unwrap_or(0),
                });
            }
        }
        Ok(())
    }

    fn into_hits(mut self) -> Vec<Hit> {
        let mut hits: Vec<Hit> = self
            .top
            .drain()
            .map(|Reverse((seq, pk))| {
                let doc = self.docs.remove(&pk).unwrap_or_default();
                Hit { pk, seq, doc }
            })
            .collect();
        hits.sort_by_key(|hit| Reverse(hit.seq));
        hits
    }
}
