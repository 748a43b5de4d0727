//! The block property collector that writes the secondary index blocks of `next` and
//! `sst-local` indexes into every SSTable of a primary tree (NEXT Algorithm 1 with the
//! value-aware split of §4).
//!
//! One factory is installed in the engine's default tree options; for each table it asks the
//! registry which attributes to index for the tree being written (none: a collector that
//! writes nothing). Per indexed attribute the collector keeps `(value, pk, seq, next newer seq
//! in this file, data block ordinal, CRC32C of the stored value, where the entry starts in its
//! data block)` for every put carrying the attribute (a query then takes the value straight
//! out of the data block and checks it against the checksum instead of checking the whole
//! block), and at the end of
//! the table sorts them by value and cuts them into secondary blocks: a block ends when the
//! next entry would make it larger than the block size, or when the entry would widen its
//! value range by more than the index's δ ([`SplitDelta`]). Layout: [`super::format`].

use super::format::{
    directory_name, encode_directory, encode_secondary_block, encode_table_property,
    secondary_name, DirectoryEntry, SecondaryEntryRef, COLLECTOR_NAME,
};
use super::{encoded_attribute, geo_point, AttributeSpec, Registry, SplitDelta};
use crate::encoding::float_from_order_bits;
use crate::envelope::EnvelopeRef;
use crate::geo::GeoBox;
use crate::value::AttrType;
use sift_lsm::extension::{
    BlockPropertyCollector, BlockPropertyCollectorFactory, CollectorEntry, FinishedBlock,
    TableCollectorOutput, TableContext,
};
use sift_lsm::{SeqNo, ValueKind};
use std::cmp::Ordering;
use std::sync::atomic::{AtomicUsize, Ordering as AtomicOrdering};
use std::sync::Arc;

/// One entry kept while the table is built; value and pk live in the collector's arena.
#[derive(Debug, Clone, Copy)]
struct Pending {
    /// The value's first 8 bytes, big-endian, zero-padded: most sort comparisons end here.
    value_prefix: u64,
    value_start: usize,
    value_len: usize,
    pk_start: usize,
    pk_len: usize,
    seq: SeqNo,
    next_newer_seq: SeqNo,
    data_block: u32,
    value_checksum: u32,
    entry_offset: Option<u32>,
}

struct AttributeEntries {
    spec: AttributeSpec,
    entries: Vec<Pending>,
}

/// The largest sizes a finished table's collector reached: a collector reserves as much at
/// the start (tables are at most about the target file size), instead of growing its buffers
/// by doubling and copying them. Untouched reserved memory costs address space only.
#[derive(Debug, Default)]
pub(crate) struct CollectorSizes {
    arena_bytes: AtomicUsize,
    entries: AtomicUsize,
}

/// Reservations above this are not made from the hint (the buffers still grow as needed).
const RESERVE_BYTES_MAX: usize = 256 << 20;

pub(crate) struct NextCollector {
    attributes: Vec<AttributeEntries>,
    sizes: Arc<CollectorSizes>,
    arena: Vec<u8>,
    /// Ordinal of the data block being filled.
    data_block: u32,
    previous_key: Vec<u8>,
    previous_seq: SeqNo,
    has_previous: bool,
    /// Every entry so far came after the one before it in table order (key, then newest
    /// first), as a table builder adds them: then arrival order breaks value ties in the sort.
    arrival_ordered: bool,
}

impl NextCollector {
    pub(crate) fn new(specs: &[AttributeSpec], sizes: Arc<CollectorSizes>) -> NextCollector {
        let arena_bytes = sizes
            .arena_bytes
            .load(AtomicOrdering::Relaxed)
            .min(RESERVE_BYTES_MAX);
        let entries = sizes
            .entries
            .load(AtomicOrdering::Relaxed)
            .min(RESERVE_BYTES_MAX / std::mem::size_of::<Pending>());
        NextCollector {
            attributes: specs
                .iter()
                .map(|spec| AttributeEntries {
                    spec: spec.clone(),
                    entries: Vec::with_capacity(entries),
                })
                .collect(),
            sizes,
            arena: Vec::with_capacity(arena_bytes),
            data_block: 0,
            previous_key: Vec::new(),
            previous_seq: 0,
            has_previous: false,
            arrival_ordered: true,
        }
    }

    fn bytes(&self, start: usize, len: usize) -> &[u8] {
        self.arena.get(start..start + len).unwrap_or_default()
    }
}

impl BlockPropertyCollector for NextCollector {
    fn add(&mut self, entry: &CollectorEntry<'_>) {
        // Versions of one key arrive newest first, so the previous entry with the same key is
        // the next newer version in this file.
        let order = if self.has_previous {
            self.previous_key.as_slice().cmp(entry.user_key)
        } else {
            Ordering::Less
        };
        let same_key = order == Ordering::Equal;
        if order == Ordering::Greater || (same_key && entry.seq >= self.previous_seq) {
            self.arrival_ordered = false;
        }
        let next_newer_seq = if same_key { self.previous_seq } else { 0 };
        if !same_key {
            self.previous_key.clear();
            self.previous_key.extend_from_slice(entry.user_key);
        }
        self.previous_seq = entry.seq;
        self.has_previous = true;
        if entry.kind != ValueKind::Put {
            return;
        }
        // A document that does not decode is not indexed; a query validating it would fail
        // on it anyway, loudly.
        let Ok(envelope) = EnvelopeRef::decode(entry.value) else {
            return;
        };
        let mut pk_at = None;
        // Computed once per entry, only if an attribute is indexed.
        let mut value_checksum = None;
        for position in 0..self.attributes.len() {
            let spec = &self.attributes[position].spec;
            let Some(value) = encoded_attribute(spec, &envelope, entry.seq) else {
                continue;
            };
            if spec.attr_type == AttrType::Geo && geo_point(&value).is_none() {
                // Not a point (a damaged envelope): no box holds it, and the block's
                // rectangle must bound every entry.
                continue;
            }
            let (pk_start, pk_len) = *pk_at.get_or_insert_with(|| {
                let start = self.arena.len();
                self.arena.extend_from_slice(entry.user_key);
                (start, entry.user_key.len())
            });
            let value_start = self.arena.len();
            self.arena.extend_from_slice(&value);
            self.attributes[position].entries.push(Pending {
                value_prefix: value_prefix(&value),
                value_start,
                value_len: value.len(),
                pk_start,
                pk_len,
                seq: entry.seq,
                next_newer_seq,
                data_block: self.data_block,
                value_checksum: *value_checksum.get_or_insert_with(|| crc32c::crc32c(entry.value)),
                entry_offset: entry.block_offset,
            });
        }
    }

    fn finish_block(&mut self, block: &FinishedBlock) -> Vec<u8> {
        self.data_block = block.ordinal.saturating_add(1);
        Vec::new()
    }

    fn finish_table(&mut self) -> TableCollectorOutput {
        let mut output = TableCollectorOutput::default();
        let mut attr_ids = Vec::new();
        let attributes = std::mem::take(&mut self.attributes);
        // The largest so far: the last table of a compaction or flush is often small.
        self.sizes
            .arena_bytes
            .fetch_max(self.arena.len(), AtomicOrdering::Relaxed);
        self.sizes.entries.fetch_max(
            attributes
                .iter()
                .map(|a| a.entries.len())
                .max()
                .unwrap_or(0),
            AtomicOrdering::Relaxed,
        );
        for attribute in attributes {
            let spec = &attribute.spec;
            attr_ids.push(spec.attr_id);
            let order = value_order(&attribute.entries, &self.arena, self.arrival_ordered);
            let mut refs: Vec<SecondaryEntryRef<'_>> = Vec::with_capacity(order.len());
            refs.extend(
                order
                    .iter()
                    .filter_map(|&i| attribute.entries.get(i))
                    .map(|p| SecondaryEntryRef {
                        value: self.bytes(p.value_start, p.value_len),
                        pk: self.bytes(p.pk_start, p.pk_len),
                        seq: p.seq,
                        next_newer_seq: p.next_newer_seq,
                        data_block: p.data_block,
                        value_checksum: Some(p.value_checksum),
                        entry_offset: p.entry_offset,
                    }),
            );
            let geo = spec.attr_type == AttrType::Geo;
            let mut directory = Vec::new();
            for (block, range) in cut_blocks(&refs, spec).into_iter().enumerate() {
                let entries = &refs[range];
                let (Some(first), Some(last)) = (entries.first(), entries.last()) else {
                    continue;
                };
                directory.push(DirectoryEntry {
                    min: first.value.to_vec(),
                    max: last.value.to_vec(),
                    entries: u32::try_from(entries.len()).unwrap_or(u32::MAX),
                    seq_max: entries.iter().map(|e| e.seq).max().unwrap_or(0),
                    rect: if geo {
                        bounding_rect(entries.iter().map(|e| e.value))
                    } else {
                        None
                    },
                });
                output.meta_blocks.push((
                    secondary_name(spec.attr_id, u32::try_from(block).unwrap_or(u32::MAX)),
                    encode_secondary_block(spec.attr_id, entries.iter().copied()),
                ));
            }
            output.meta_blocks.push((
                directory_name(spec.attr_id),
                encode_directory(spec.attr_id, &directory, geo),
            ));
        }
        output.table_property = encode_table_property(&attr_ids);
        output
    }
}

/// Positions of `entries` in secondary-block order: by value, then pk, then newest first.
/// Entries that arrived in table order (`arrival_ordered`: pk, then newest first) already
/// have their ties in that order, so a value order that keeps arrival order on ties is the
/// same; values of at most 8 bytes then sort as one number each, `(prefix, length, arrival)`.
fn value_order(entries: &[Pending], arena: &[u8], arrival_ordered: bool) -> Vec<usize> {
    let bytes = |start: usize, len: usize| arena.get(start..start + len).unwrap_or_default();
    let short = entries.iter().all(|p| p.value_len <= 8);
    if arrival_ordered && short && u32::try_from(entries.len()).is_ok() {
        // A value of at most 8 bytes is its zero-padded prefix and its length: with equal
        // prefixes the shorter is a prefix of the longer, so it sorts first.
        let mut keys: Vec<u128> = entries
            .iter()
            .enumerate()
            .map(|(i, p)| {
                (u128::from(p.value_prefix) << 64) | ((p.value_len as u128) << 32) | i as u128
            })
            .collect();
        keys.sort_unstable();
        return keys
            .into_iter()
            .map(|key| (key & u128::from(u32::MAX)) as usize)
            .collect();
    }
    let mut order: Vec<usize> = (0..entries.len()).collect();
    order.sort_unstable_by(|&a, &b| {
        let (a, b) = (&entries[a], &entries[b]);
        a.value_prefix
            .cmp(&b.value_prefix)
            .then_with(|| bytes(a.value_start, a.value_len).cmp(bytes(b.value_start, b.value_len)))
            .then_with(|| bytes(a.pk_start, a.pk_len).cmp(bytes(b.pk_start, b.pk_len)))
            .then(b.seq.cmp(&a.seq))
    });
    order
}

/// The first 8 bytes of `value`, big-endian, zero-padded (ordered as the bytes are, ties
/// aside).
fn value_prefix(value: &[u8]) -> u64 {
    let mut prefix = [0u8; 8];
    let n = value.len().min(8);
    prefix[..n].copy_from_slice(&value[..n]);
    u64::from_be_bytes(prefix)
}

/// Where each secondary block starts and ends (ranges over `entries`, in value order).
fn cut_blocks(
    entries: &[SecondaryEntryRef<'_>],
    spec: &AttributeSpec,
) -> Vec<std::ops::Range<usize>> {
    let mut ranges = Vec::new();
    let mut start = 0;
    let mut bytes = 0;
    // Geo: the rectangle of the block being filled.
    let mut rect: Option<GeoBox> = None;
    let geo = spec.attr_type == AttrType::Geo;
    for (i, entry) in entries.iter().enumerate() {
        let entry_bytes = entry.encoded_bytes();
        // Decoded for geo values only (other values are not points, and a failed decode
        // costs an error message).
        let point = if geo { geo_point(entry.value) } else { None };
        if i > start {
            let full = bytes + entry_bytes > spec.block_bytes;
            let widens = spec.split.is_some_and(|delta| match (rect, point) {
                (Some(rect), Some(point)) => grows_too_much(&rect, point, delta),
                _ => widens_too_much(
                    spec.attr_type,
                    delta,
                    entries[start].value,
                    entries[i - 1].value,
                    entry.value,
                ),
            });
            if full || widens {
                ranges.push(start..i);
                start = i;
                bytes = 0;
                rect = None;
            }
        }
        bytes += entry_bytes;
        if spec.attr_type == AttrType::Geo {
            if let Some(point) = point {
                rect = Some(extend(rect, point));
            }
        }
    }
    if start < entries.len() {
        ranges.push(start..entries.len());
    }
    ranges
}

/// `rect` grown to hold `(lon, lat)` (or the point's own rectangle).
fn extend(rect: Option<GeoBox>, (lon, lat): (f64, f64)) -> GeoBox {
    match rect {
        None => GeoBox {
            min_lon: lon,
            min_lat: lat,
            max_lon: lon,
            max_lat: lat,
        },
        Some(rect) => GeoBox {
            min_lon: rect.min_lon.min(lon),
            min_lat: rect.min_lat.min(lat),
            max_lon: rect.max_lon.max(lon),
            max_lat: rect.max_lat.max(lat),
        },
    }
}

/// The smallest rectangle holding every point among `values` (encoded geo values; the
/// collector keeps only decodable ones).
fn bounding_rect<'a>(values: impl Iterator<Item = &'a [u8]>) -> Option<GeoBox> {
    values
        .filter_map(geo_point)
        .fold(None, |rect, point| Some(extend(rect, point)))
}

/// The value-aware split in two dimensions: whether adding `point` to a block whose rectangle
/// is `rect` makes the rectangle wider or taller by more than δ degrees. (The 1-D rule, "the
/// range grows by more than δ", applied per axis: points along a Z-order run that jump to a
/// far quadrant start a new block, so each block's rectangle stays tight.)
pub(crate) fn grows_too_much(rect: &GeoBox, point: (f64, f64), delta: SplitDelta) -> bool {
    let grown = extend(Some(*rect), point);
    let delta = delta.get();
    (grown.max_lon - grown.min_lon) - (rect.max_lon - rect.min_lon) > delta
        || (grown.max_lat - grown.min_lat) - (rect.max_lat - rect.min_lat) > delta
}

fn fixed(bytes: &[u8]) -> Option<u64> {
    bytes.get(..8)?.try_into().ok().map(u64::from_be_bytes)
}

/// Whether appending `value` to a block spanning `[min, max]` widens its range by more than
/// δ. int and time: the numeric gap `value - max` (milliseconds for time); float: the gap as a
/// float; string: δ is a prefix length `p` and the block must keep one `p`-byte prefix of the
/// encoded value (a gap in string order has no useful size).
pub(crate) fn widens_too_much(
    attr_type: AttrType,
    delta: SplitDelta,
    min: &[u8],
    max: &[u8],
    value: &[u8],
) -> bool {
    let delta = delta.get();
    match attr_type {
        AttrType::Int | AttrType::Time => match (fixed(max), fixed(value)) {
            // The encoding shifts by 2^63, so differences of encodings are differences of
            // values.
            (Some(max), Some(value)) => value.wrapping_sub(max) as f64 > delta,
            _ => false,
        },
        AttrType::Float => match (fixed(max), fixed(value)) {
            (Some(max), Some(value)) => {
                float_from_order_bits(value) - float_from_order_bits(max) > delta
            }
            _ => false,
        },
        AttrType::String => {
            // δ is a whole number of bytes (checked at index creation).
            let prefix = delta as usize;
            prefix > 0 && min.get(..prefix.min(min.len())) != value.get(..prefix.min(value.len()))
        }
        AttrType::Geo => false,
    }
}

/// The one factory installed in the engine: asks the registry what to collect per tree.
pub(crate) struct NextCollectorFactory {
    pub registry: Arc<Registry>,
}

struct NothingToCollect;

impl BlockPropertyCollector for NothingToCollect {
    fn add(&mut self, _entry: &CollectorEntry<'_>) {}
    fn finish_block(&mut self, _block: &FinishedBlock) -> Vec<u8> {
        Vec::new()
    }
    fn finish_table(&mut self) -> TableCollectorOutput {
        TableCollectorOutput::default()
    }
}

impl BlockPropertyCollectorFactory for NextCollectorFactory {
    fn name(&self) -> &str {
        COLLECTOR_NAME
    }

    fn create(&self, context: &TableContext) -> Box<dyn BlockPropertyCollector> {
        match self.registry.attributes_for(context.tree) {
            Some(specs) if !specs.is_empty() => Box::new(NextCollector::new(
                &specs,
                Arc::clone(&self.registry.collector_sizes),
            )),
            _ => Box::new(NothingToCollect),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::encoding::encode_value_to_vec;
    use crate::value::AttrValue;

    fn int(v: i64) -> Vec<u8> {
        encode_value_to_vec(&AttrValue::Int(v))
    }

    /// The fast order (entries in table order, short values) equals the full comparison.
    #[test]
    fn value_order_fast_path_matches_the_full_order() {
        use rand::rngs::StdRng;
        use rand::{Rng, SeedableRng};
        let seed = 11;
        let mut rng = StdRng::seed_from_u64(seed);
        for round in 0..20 {
            let mut arena = Vec::new();
            let mut entries = Vec::new();
            let mut pk = 0u32;
            let mut seq = 1_000_000u64;
            for _ in 0..rng.gen_range(0..300) {
                if rng.gen_ratio(2, 3) {
                    pk += rng.gen_range(1..5);
                    seq = 1_000_000;
                }
                seq -= rng.gen_range(1..10);
                let len = rng.gen_range(0..=8usize);
                let value: Vec<u8> = (0..len).map(|_| rng.gen_range(0..3u8)).collect();
                let pk_bytes = format!("{pk:08}").into_bytes();
                let pk_start = arena.len();
                arena.extend_from_slice(&pk_bytes);
                let value_start = arena.len();
                arena.extend_from_slice(&value);
                entries.push(Pending {
                    value_prefix: value_prefix(&value),
                    value_start,
                    value_len: len,
                    pk_start,
                    pk_len: pk_bytes.len(),
                    seq,
                    next_newer_seq: 0,
                    data_block: 0,
                    value_checksum: 0,
                    entry_offset: None,
                });
            }
            assert_eq!(
                value_order(&entries, &arena, true),
                value_order(&entries, &arena, false),
                "round {round} seed {seed}"
            );
        }
    }

    #[test]
    fn value_aware_split_rules() {
        let delta = SplitDelta::new(10.0).unwrap_or_default();
        assert!(!widens_too_much(
            AttrType::Int,
            delta,
            &int(-5),
            &int(-5),
            &int(5)
        ));
        assert!(widens_too_much(
            AttrType::Int,
            delta,
            &int(-5),
            &int(-5),
            &int(6)
        ));
        assert!(widens_too_much(
            AttrType::Int,
            delta,
            &int(i64::MIN),
            &int(i64::MIN),
            &int(i64::MAX)
        ));
        let f = |x: f64| encode_value_to_vec(&AttrValue::Float(x));
        assert!(!widens_too_much(
            AttrType::Float,
            delta,
            &f(-1.0),
            &f(-1.0),
            &f(8.5)
        ));
        assert!(widens_too_much(
            AttrType::Float,
            delta,
            &f(-1.0),
            &f(-1.0),
            &f(9.5)
        ));
        let s = |x: &str| encode_value_to_vec(&AttrValue::String(x.into()));
        let two = SplitDelta::new(2.0).unwrap_or_default();
        assert!(!widens_too_much(
            AttrType::String,
            two,
            &s("abc"),
            &s("abd"),
            &s("abz")
        ));
        assert!(widens_too_much(
            AttrType::String,
            two,
            &s("abc"),
            &s("abd"),
            &s("acz")
        ));
    }

    #[test]
    fn geo_split_rule_is_per_axis_growth() {
        let delta = SplitDelta::new(1.0).unwrap_or_default();
        let rect = GeoBox {
            min_lon: 0.0,
            min_lat: 0.0,
            max_lon: 5.0,
            max_lat: 5.0,
        };
        assert!(!grows_too_much(&rect, (3.0, 3.0), delta), "inside");
        assert!(
            !grows_too_much(&rect, (6.0, -1.0), delta),
            "grows by 1 each way"
        );
        assert!(grows_too_much(&rect, (6.5, 2.0), delta), "wider by 1.5");
        assert!(grows_too_much(&rect, (2.0, -1.5), delta), "taller by 1.5");
        let zero = SplitDelta::new(0.0).unwrap_or_default();
        assert!(!grows_too_much(&rect, (5.0, 0.0), zero), "on the edge");
        let geo = |lon: f64, lat: f64| encode_value_to_vec(&AttrValue::Geo { lon, lat });
        let values = [geo(1.0, 2.0), geo(-3.0, 4.0), geo(0.5, -7.0)];
        assert_eq!(
            bounding_rect(values.iter().map(Vec::as_slice)),
            Some(GeoBox {
                min_lon: -3.0,
                min_lat: -7.0,
                max_lon: 1.0,
                max_lat: 4.0
            })
        );
    }
}
