//! Spatial queries on `geo` attributes: [`GeoBox`] and `Database::within`, for the `memory`
//! and `composite` kinds (`next` and `sst-local`: `next/query.rs`).
//!
//! Geo values are encoded Z-order code first (`encoding::zorder`), so the points inside a box
//! lie in a few ranges of encoded values. [`zorder_cover`] splits the box into at most
//! [`MAX_KEY_RANGES`] Z-order ranges by descending the quadtree of `encoding::zorder_cell`
//! while the budget allows; cells that touch the box's closed boundary are kept, so the cover
//! never misses a point. Each range is scanned (composite: the index tree; memory: its ordered
//! map), every candidate is filtered exactly against the box (edges inclusive), then
//! candidates are validated against the primary at the query snapshot newest entry first,
//! with the same top-K rules as LOOKUP/RANGE (`query.rs`).

use crate::catalog::IndexKind;
use crate::collection::{Collection, Index};
use crate::database::Database;
use crate::encoding::{decode_pk, decode_value, zorder_cell};
use crate::envelope::EnvelopeRef;
use crate::error::{IndexError, Result};
use crate::query::{Hit, QueryResult, QueryStats, StaleEntry};
use crate::value::{AttrType, AttrValue};
use sift_lsm::{ReadOptions, ReadStats, SeqNo};
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, HashSet};
use std::fmt;
use std::sync::Arc;

/// Most Z-order key ranges one `within` query scans.
pub const MAX_KEY_RANGES: usize = 16;

/// A longitude/latitude rectangle in degrees. Edges are inside: a point is in the box if
/// `min_lon <= lon <= max_lon` and `min_lat <= lat <= max_lat`. Boxes do not wrap around the
/// antimeridian (query two boxes for that).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GeoBox {
    pub min_lon: f64,
    pub min_lat: f64,
    pub max_lon: f64,
    pub max_lat: f64,
}

impl GeoBox {
    /// A box; every coordinate must be finite, longitudes in -180..=180, latitudes in
    /// -90..=90, and each minimum at most its maximum (equal is allowed: a line or a point).
    pub fn new(min_lon: f64, min_lat: f64, max_lon: f64, max_lat: f64) -> Result<GeoBox> {
        let geo_box = GeoBox {
            min_lon,
            min_lat,
            max_lon,
            max_lat,
        };
        let bad = |reason: String| IndexError::InvalidGeoBox {
            found: geo_box.to_string(),
            reason,
        };
        for (name, x) in [
            ("min_lon", min_lon),
            ("min_lat", min_lat),
            ("max_lon", max_lon),
            ("max_lat", max_lat),
        ] {
            if !x.is_finite() {
                return Err(bad(format!("{name} is {x}, not a finite number")));
            }
        }
        for (name, lon) in [("min_lon", min_lon), ("max_lon", max_lon)] {
            if !(-180.0..=180.0).contains(&lon) {
                return Err(bad(format!("{name} {lon} is outside -180..=180")));
            }
        }
        for (name, lat) in [("min_lat", min_lat), ("max_lat", max_lat)] {
            if !(-90.0..=90.0).contains(&lat) {
                return Err(bad(format!("{name} {lat} is outside -90..=90")));
            }
        }
        if min_lon > max_lon {
            return Err(bad(format!(
                "min_lon {min_lon} is greater than max_lon {max_lon}"
            )));
        }
        if min_lat > max_lat {
            return Err(bad(format!(
                "min_lat {min_lat} is greater than max_lat {max_lat}"
            )));
        }
        Ok(geo_box)
    }

    /// Parses `min_lon,min_lat,max_lon,max_lat` (spaces allowed around the numbers).
    pub fn parse(text: &str) -> Result<GeoBox> {
        let bad = |reason: String| IndexError::InvalidGeoBox {
            found: format!("{text:?}"),
            reason,
        };
        let numbers = text
            .split(',')
            .map(|part| {
                part.trim()
                    .parse::<f64>()
                    .map_err(|e| bad(format!("{:?} is not a number ({e})", part.trim())))
            })
            .collect::<Result<Vec<f64>>>()?;
        match numbers[..] {
            [min_lon, min_lat, max_lon, max_lat] => GeoBox::new(min_lon, min_lat, max_lon, max_lat),
            _ => Err(bad(format!("{} numbers instead of 4", numbers.len()))),
        }
    }

    /// Whether the point is in the box, edges included.
    pub fn contains(&self, lon: f64, lat: f64) -> bool {
        self.min_lon <= lon && lon <= self.max_lon && self.min_lat <= lat && lat <= self.max_lat
    }
}

impl fmt::Display for GeoBox {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "[{}, {}, {}, {}]",
            self.min_lon, self.min_lat, self.max_lon, self.max_lat
        )
    }
}

/// How a quadtree cell relates to the box (conservatively: `Disjoint` only when no point of
/// the cell can be in the box, `Inside` only when every point is).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Relation {
    Disjoint,
    Partial,
    Inside,
}

fn relate(geo_box: &GeoBox, code: u64, prefix_bits: u32) -> Relation {
    let cell = zorder_cell(code, prefix_bits);
    // Cell edges: lower inclusive, upper exclusive (except 180/90); treating the upper edge as
    // inclusive only over-approximates the overlap.
    if geo_box.max_lon < cell.lon_min
        || geo_box.min_lon > cell.lon_max
        || geo_box.max_lat < cell.lat_min
        || geo_box.min_lat > cell.lat_max
    {
        return Relation::Disjoint;
    }
    if geo_box.min_lon <= cell.lon_min
        && cell.lon_max <= geo_box.max_lon
        && geo_box.min_lat <= cell.lat_min
        && cell.lat_max <= geo_box.max_lat
    {
        return Relation::Inside;
    }
    Relation::Partial
}

/// The inclusive Z-order range of the codes sharing `code`'s top `prefix_bits` bits.
fn prefix_range(code: u64, prefix_bits: u32) -> (u64, u64) {
    let free_bits = 64 - prefix_bits.min(64);
    let free_mask = if free_bits == 64 {
        u64::MAX
    } else {
        (1u64 << free_bits) - 1
    };
    (code & !free_mask, code | free_mask)
}

/// Sorts and joins overlapping or adjacent inclusive ranges.
fn merge_ranges(mut ranges: Vec<(u64, u64)>) -> Vec<(u64, u64)> {
    ranges.sort_unstable();
    let mut merged: Vec<(u64, u64)> = Vec::with_capacity(ranges.len());
    for (low, high) in ranges {
        match merged.last_mut() {
            Some((_, last_high)) if last_high.checked_add(1).is_none_or(|next| low <= next) => {
                *last_high = (*last_high).max(high);
            }
            _ => merged.push((low, high)),
        }
    }
    merged
}

/// At most `max_ranges` (at least 1) sorted, disjoint, inclusive Z-order ranges whose union
/// holds the code of every point inside `geo_box` (and usually some outside: filter exactly).
pub fn zorder_cover(geo_box: &GeoBox, max_ranges: usize) -> Vec<(u64, u64)> {
    let max_ranges = max_ranges.max(1);
    let mut inside: Vec<(u64, u64)> = Vec::new();
    let mut partial: Vec<u64> = vec![0];
    let mut prefix_bits = 0u32;
    while prefix_bits < 64 && !partial.is_empty() {
        let child_bits = prefix_bits + 2;
        let mut next_inside = Vec::new();
        let mut next_partial = Vec::new();
        for &code in &partial {
            for quadrant in 0..4u64 {
                let child = code | (quadrant << (64 - child_bits));
                match relate(geo_box, child, child_bits) {
                    Relation::Disjoint => {}
                    Relation::Inside => next_inside.push(prefix_range(child, child_bits)),
                    Relation::Partial => next_partial.push(child),
                }
            }
        }
        let candidate: Vec<(u64, u64)> = inside
            .iter()
            .copied()
            .chain(next_inside.iter().copied())
            .chain(
                next_partial
                    .iter()
                    .map(|&code| prefix_range(code, child_bits)),
            )
            .collect();
        if merge_ranges(candidate).len() > max_ranges {
            break;
        }
        inside.extend(next_inside);
        partial = next_partial;
        prefix_bits = child_bits;
    }
    merge_ranges(
        inside
            .into_iter()
            .chain(partial.iter().map(|&code| prefix_range(code, prefix_bits)))
            .collect(),
    )
}

/// Encoded-value bounds `[start, end)` of an inclusive Z-order range (geo encodings start with
/// the code, big-endian).
fn key_bounds((low, high): (u64, u64)) -> (Vec<u8>, Option<Vec<u8>>) {
    (
        low.to_be_bytes().to_vec(),
        high.checked_add(1).map(|next| next.to_be_bytes().to_vec()),
    )
}

/// The error for `lookup`/`range` on a geo index.
pub(crate) fn reject_geo_index(index: &Index, operation: &str) -> Result<()> {
    if index.record.attr_type == AttrType::Geo {
        return Err(IndexError::UnsupportedQuery {
            index: index.record.name.clone(),
            reason: format!(
                "`{operation}` does not apply to geo values; query a geo index by bounding box \
                 with `within` (CLI: sift within --bbox min_lon,min_lat,max_lon,max_lat)"
            ),
        });
    }
    Ok(())
}

/// A candidate: `pk` filed under `value` (exact point inside the box), by an entry written at
/// `entry_seq` (composite) or naming version `entry_seq` (memory).
struct Candidate {
    entry_seq: SeqNo,
    pk: Vec<u8>,
    value: Vec<u8>,
}

struct Within<'a> {
    engine: &'a sift_lsm::Db,
    collection: &'a Collection,
    index: &'a Index,
    geo_box: GeoBox,
    read: ReadOptions,
    stats: QueryStats,
    limit: Option<usize>,
    /// The `limit` newest hits so far: a min-heap on sequence number.
    top: BinaryHeap<Reverse<(SeqNo, Vec<u8>)>>,
    docs: HashMap<Vec<u8>, Vec<u8>>,
    emitted: HashSet<Vec<u8>>,
    stale: Vec<StaleEntry>,
}

impl Within<'_> {
    fn corrupt(&self, what: &str, error: &IndexError) -> IndexError {
        IndexError::Internal(format!(
            "index `{}` of collection `{}`: corrupt {what}: {error}",
            self.index.record.name, self.collection.record.name
        ))
    }

    /// Whether an encoded geo value lies in the box.
    fn value_inside(&self, encoded: &[u8]) -> Result<bool> {
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
    fn would_accept(&self, seq: SeqNo) -> bool {
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
    fn validate(&mut self, candidate: &Candidate, posting_seq: Option<SeqNo>) -> Result<()> {
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

    /// Composite: each range of the cover is one scan of the index tree; keys whose point is
    /// outside the box are dropped without a primary read; the rest are validated newest entry
    /// first until one cannot enter the top K (an entry is written after the version it names).
    fn run_composite(&mut self, ranges: &[(u64, u64)]) -> Result<()> {
        let tree = self.index.stand_alone_tree()?;
        let mut candidates = Vec::new();
        for &range in ranges {
            let (start, end) = key_bounds(range);
            let options = ReadOptions {
                lower_bound: Some(start.clone()),
                upper_bound: end,
                ..self.read.clone()
            };
            let mut iter = self.engine.iter(tree, options)?;
            iter.seek(&start)?;
            while iter.valid() {
                self.stats.candidates_examined += 1;
                let key = iter.key();
                let (value, value_bytes) = decode_value(key, AttrType::Geo)
                    .map_err(|e| self.corrupt("composite key", &e))?;
                if let AttrValue::Geo { lon, lat } = value {
                    if self.geo_box.contains(lon, lat) {
                        let (pk, _) = decode_pk(&key[value_bytes..])
                            .map_err(|e| self.corrupt("composite key", &e))?;
                        candidates.push(Candidate {
                            entry_seq: iter.seq(),
                            pk,
                            value: key[..value_bytes].to_vec(),
                        });
                    }
                }
                iter.next()?;
            }
        }
        candidates.sort_unstable_by_key(|candidate| Reverse(candidate.entry_seq));
        for candidate in candidates {
            if !self.would_accept(candidate.entry_seq.saturating_sub(1)) {
                break;
            }
            self.validate(&candidate, None)?;
        }
        Ok(())
    }

    /// Memory: the map's entries in the cover's ranges (read before the snapshot was taken),
    /// filtered by the box, validated newest first.
    fn run_memory(&mut self, entries: Vec<(Vec<u8>, Vec<u8>, SeqNo)>) -> Result<()> {
        let mut candidates = Vec::new();
        for (value, pk, seq) in entries {
            self.stats.candidates_examined += 1;
            if self.value_inside(&value)? {
                candidates.push(Candidate {
                    entry_seq: seq,
                    pk,
                    value,
                });
            }
        }
        candidates.sort_unstable_by_key(|candidate| Reverse(candidate.entry_seq));
        for candidate in candidates {
            if !self.would_accept(candidate.entry_seq) {
                break;
            }
            let seq = candidate.entry_seq;
            self.validate(&candidate, Some(seq))?;
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

impl Database {
    /// Documents whose `geo` attribute (indexed by `index`) lies inside `geo_box`, edges
    /// included, newest first by live sequence number, at most `limit` of them (`None`: all).
    /// Supported by `memory`, `composite`, `next` and `sst-local` indexes on a geo attribute.
    pub fn within(
        &self,
        collection: &str,
        index: &str,
        geo_box: &GeoBox,
        limit: Option<usize>,
    ) -> Result<QueryResult> {
        let collection = self.collection_arc(collection)?;
        let index = collection.index(index)?;
        if index.record.attr_type != AttrType::Geo {
            return Err(IndexError::UnsupportedQuery {
                index: index.record.name.clone(),
                reason: format!(
                    "`within` needs an index on a geo attribute; this one holds {} values \
                     (use `lookup` or `range`)",
                    index.record.attr_type
                ),
            });
        }
        match index.record.kind {
            IndexKind::Composite if crate::deferred::is_deferred(index) => {
                return Err(IndexError::UnsupportedQuery {
                    index: index.record.name.clone(),
                    reason: "`within` does not read deferred composite indexes yet (their keys \
                             carry a sequence number between value and pk); use `lookup` or \
                             `range`, or a sync-full / sync-insert composite index"
                        .to_string(),
                })
            }
            IndexKind::Composite | IndexKind::Memory => {}
            IndexKind::SstLocal | IndexKind::Next => {
                // Secondary blocks in the primary's tables, bounding rectangles (`next/`).
                return crate::next::query::within(self, &collection, index, geo_box, limit);
            }
            #[allow(unreachable_patterns)] // kinds added later land here until they support it
            kind => {
                return Err(IndexError::UnsupportedQuery {
                    index: index.record.name.clone(),
                    reason: format!(
                        "`within` is not supported by kind {kind}; spatial queries need a \
                         memory or composite index"
                    ),
                })
            }
        }
        let ranges = zorder_cover(geo_box, MAX_KEY_RANGES);
        // Memory entries are read before the snapshot is taken, so it holds every version
        // they name (as in `query.rs`).
        let memory_entries = index.memory.as_ref().map(|memory| {
            ranges
                .iter()
                .flat_map(|&range| {
                    let (start, end) = key_bounds(range);
                    memory.entries_in(&start, end.as_deref())
                })
                .collect::<Vec<_>>()
        });
        let read_stats = Arc::new(ReadStats::default());
        let read = ReadOptions {
            snapshot: Some(self.engine.snapshot()),
            read_stats: Some(Arc::clone(&read_stats)),
            ..ReadOptions::default()
        };
        let mut query = Within {
            engine: &self.engine,
            collection: &collection,
            index,
            geo_box: *geo_box,
            read,
            stats: QueryStats::default(),
            limit,
            top: BinaryHeap::new(),
            docs: HashMap::new(),
            emitted: HashSet::new(),
            stale: Vec::new(),
        };
        if limit != Some(0) {
            match memory_entries {
                Some(entries) => query.run_memory(entries)?,
                None => query.run_composite(&ranges)?,
            }
        }
        let mut stats = query.stats;
        stats.blocks_read = read_stats.blocks_read();
        let stale = std::mem::take(&mut query.stale);
        let hits = query.into_hits();
        if !stale.is_empty() {
            stats.entries_repaired = self.repair(&collection, index, stale)?;
        }
        Ok(QueryResult { hits, stats })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::encoding::zorder;
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};

    #[test]
    fn box_validation_errors_name_the_problem() {
        let message = |result: Result<GeoBox>| match result {
            Err(error) => error.to_string(),
            Ok(geo_box) => format!("accepted {geo_box}"),
        };
        assert!(message(GeoBox::new(f64::NAN, 0.0, 1.0, 1.0)).contains("min_lon is NaN"));
        assert!(message(GeoBox::new(0.0, 0.0, f64::INFINITY, 1.0)).contains("not a finite"));
        assert!(message(GeoBox::new(-181.0, 0.0, 1.0, 1.0)).contains("outside -180..=180"));
        assert!(message(GeoBox::new(0.0, 0.0, 1.0, 90.5)).contains("max_lat 90.5"));
        assert!(message(GeoBox::new(2.0, 0.0, 1.0, 1.0)).contains("greater than max_lon"));
        assert!(message(GeoBox::new(0.0, 2.0, 1.0, 1.0)).contains("greater than max_lat"));
        assert!(GeoBox::new(1.0, 1.0, 1.0, 1.0).is_ok(), "a point is a box");
        assert!(GeoBox::new(-180.0, -90.0, 180.0, 90.0).is_ok());
        assert_eq!(
            GeoBox::parse(" -74.5, 40,-73 ,41 ").ok(),
            GeoBox::new(-74.5, 40.0, -73.0, 41.0).ok()
        );
        assert!(message(GeoBox::parse("1,2,3")).contains("3 numbers instead of 4"));
        assert!(message(GeoBox::parse("1,2,x,4")).contains("\"x\" is not a number"));
        assert!(message(GeoBox::parse("1,2,3,nan")).contains("not a finite"));
    }

    #[test]
    fn edges_are_inside() {
        let geo_box = GeoBox::new(-10.0, -5.0, 10.0, 5.0).unwrap_or_else(|_| unreachable!());
        for (lon, lat) in [(-10.0, 0.0), (10.0, 5.0), (0.0, -5.0), (-10.0, -5.0)] {
            assert!(geo_box.contains(lon, lat), "[{lon}, {lat}]");
        }
        assert!(!geo_box.contains(10.000_001, 0.0));
    }

    /// The cover holds the code of every point inside the box, including points on its edges
    /// and at the poles and antimeridian, and stays within the range budget.
    #[test]
    fn cover_contains_every_inside_point() {
        let seed: u64 = std::env::var("SIFT_SEED")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(rand::random);
        let mut rng = StdRng::seed_from_u64(seed);
        let grid = |rng: &mut StdRng, limit: f64| -> f64 {
            match rng.gen_range(0..4) {
                0 => limit * if rng.gen_bool(0.5) { 1.0 } else { -1.0 },
                1 => f64::from(rng.gen_range(-8..=8)) * limit / 8.0,
                _ => rng.gen_range(-limit..=limit),
            }
        };
        for round in 0..300 {
            let (a, b) = (grid(&mut rng, 180.0), grid(&mut rng, 180.0));
            let (c, d) = (grid(&mut rng, 90.0), grid(&mut rng, 90.0));
            let geo_box = GeoBox::new(a.min(b), c.min(d), a.max(b), c.max(d))
                .unwrap_or_else(|e| panic!("seed {seed}: {e}"));
            let budget = rng.gen_range(1..=MAX_KEY_RANGES);
            let cover = zorder_cover(&geo_box, budget);
            assert!(
                !cover.is_empty() && cover.len() <= budget,
                "seed {seed} round {round}: {} ranges for budget {budget}",
                cover.len()
            );
            let mut points = vec![
                (geo_box.min_lon, geo_box.min_lat),
                (geo_box.max_lon, geo_box.max_lat),
                (geo_box.min_lon, geo_box.max_lat),
                (geo_box.max_lon, geo_box.min_lat),
            ];
            for _ in 0..50 {
                points.push((
                    rng.gen_range(geo_box.min_lon..=geo_box.max_lon),
                    rng.gen_range(geo_box.min_lat..=geo_box.max_lat),
                ));
            }
            for (lon, lat) in points {
                let code = zorder(lon, lat);
                assert!(
                    cover.iter().any(|&(low, high)| low <= code && code <= high),
                    "seed {seed} round {round}: [{lon}, {lat}] of {geo_box} not covered by {cover:?}"
                );
            }
        }
    }

    #[test]
    fn small_boxes_get_tight_covers() {
        let geo_box = GeoBox::new(-74.1, 40.6, -73.8, 40.9).unwrap_or_else(|_| unreachable!());
        let cover = zorder_cover(&geo_box, MAX_KEY_RANGES);
        let covered: u128 = cover
            .iter()
            .map(|&(low, high)| u128::from(high - low) + 1)
            .sum();
        // The box is about 1e-6 of the world; the cover should be well under 1e-3 of it.
        assert!(
            covered < (1u128 << 64) / 1000,
            "cover spans {covered} codes"
        );
    }
}
