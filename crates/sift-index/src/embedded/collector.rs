//! The `embedded` index's bytes in the SSTables of a primary tree: the block property
//! collector that writes them while a table is built, and the decoders queries use to skip
//! tables and blocks. Byte layout: `docs/format/embedded-index.md` (the constants here are the
//! truth; the page is written from them).
//!
//! Per data block and per indexed attribute: a zone map (smallest and largest encoded value)
//! and, unless the block holds a single value, a bloom filter on the encoded values. Per table:
//! a zone map per attribute, which the engine copies into the manifest so whole files are
//! skipped without being opened. Values are read from the envelope's pre-encoded attributes;
//! the JSON text is parsed only for versions written before the index existed (the same rule
//! as `Index::encoded_value`), so old files converge to being fully described by compaction.
//!
//! A block or table whose bytes do not mention an attribute (written before the index
//! existed, or holding an entry whose envelope did not decode) must be read: queries never
//! skip what they know nothing about.

use super::EmbeddedIndex;
use crate::envelope::EnvelopeRef;
use crate::kind::encoded_value;
use sift_lsm::extension::{
    BlockPropertyCollector, BlockPropertyCollectorFactory, CollectorEntry, FinishedBlock,
    TableCollectorOutput, TableContext,
};
use sift_lsm::{SeqNo, ValueKind};
use std::sync::Arc;

/// Name of the collector; identifies its bytes in every table. Stable across restarts.
pub const COLLECTOR_NAME: &str = "sift.embedded";
/// First byte of every block and table property this code writes (and the only one it reads).
pub const PROPERTY_FORMAT_VERSION: u8 = 1;
/// Flag: the record carries a zone map (the block or table holds at least one value).
pub const FLAG_ZONE_MAP: u8 = 0x01;
/// Flag: the stored maximum is a prefix of the true maximum (see `ZONE_VALUE_BYTES_MAX`).
pub const FLAG_MAX_TRUNCATED: u8 = 0x02;
/// Flag: the record carries a bloom filter (absent when the block holds exactly one value,
/// which the zone map then describes exactly).
pub const FLAG_BLOOM: u8 = 0x04;
/// Every flag this code knows; others are corruption.
pub const FLAGS_KNOWN: u8 = FLAG_ZONE_MAP | FLAG_MAX_TRUNCATED | FLAG_BLOOM;
/// Zone-map bounds longer than this are cut to this many bytes: a prefix of the minimum is
/// still a lower bound; a cut maximum is flagged and read as "anything with this prefix".
pub const ZONE_VALUE_BYTES_MAX: usize = 64;
/// Bloom filters have at least this many bits.
pub const BLOOM_BITS_MIN: u64 = 64;
/// Probe counts are `round(bits_per_key × ln 2)` clamped to `1..=BLOOM_PROBES_MAX`.
pub const BLOOM_PROBES_MAX: u32 = 30;
pub use crate::catalog::DEFAULT_BLOOM_BITS_PER_KEY;

const FNV_OFFSET_BASIS: u64 = 0xcbf2_9ce4_8422_2325;
const FNV_PRIME: u64 = 0x0000_0100_0000_01b3;

/// The hash of an encoded value: FNV-1a 64 over the bytes, then MurmurHash3's `fmix64`
/// finaliser (so the low bits mix well).
#[inline]
pub fn value_hash(encoded: &[u8]) -> u64 {
    let mut h = FNV_OFFSET_BASIS;
    match encoded.first_chunk::<8>() {
        // An int or time value is 8 bytes: a loop of known length is unrolled.
        Some(head) if encoded.len() == 8 => {
            for &byte in head {
                h ^= u64::from(byte);
                h = h.wrapping_mul(FNV_PRIME);
            }
        }
        _ => {
            for &byte in encoded {
                h ^= u64::from(byte);
                h = h.wrapping_mul(FNV_PRIME);
            }
        }
    }
    h ^= h >> 33;
    h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^= h >> 33;
    h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    h ^ (h >> 33)
}

/// `round(bits_per_key × ln 2)` clamped to `1..=BLOOM_PROBES_MAX`.
pub fn bloom_probes(bits_per_key: u32) -> u32 {
    let k = (f64::from(bits_per_key) * std::f64::consts::LN_2).round() as u32;
    k.clamp(1, BLOOM_PROBES_MAX)
}

/// Probe `i` of hash `h` in a filter of `bits` bits: `x = h + i·delta` (u64 wrapping,
/// `delta = rotate_left(h, 32) | 1`), mapped to `0..bits` by `(x · bits) >> 64` (a multiply,
/// not a division).
#[inline]
fn probe_bit(h: u64, i: u32, bits: u64) -> u64 {
    let delta = h.rotate_left(32) | 1;
    let x = h.wrapping_add(u64::from(i).wrapping_mul(delta));
    ((u128::from(x) * u128::from(bits)) >> 64) as u64
}

/// A bloom filter over `hashes` (distinct): `max(n × bits_per_key, BLOOM_BITS_MIN)` bits
/// rounded up to whole bytes, bit `b` being bit `b % 8` of byte `b / 8`.
pub fn build_bloom(hashes: &[u64], bits_per_key: u32) -> (Vec<u8>, u8) {
    let mut filter = Vec::new();
    let probes = append_bloom(hashes, bits_per_key, &mut filter);
    (filter, probes)
}

/// Bytes of the filter [`build_bloom`] makes for `keys` distinct values.
fn bloom_bytes(keys: usize, bits_per_key: u32) -> u64 {
    (keys as u64)
        .saturating_mul(u64::from(bits_per_key))
        .max(BLOOM_BITS_MIN)
        .div_ceil(8)
}

/// Appends the filter [`build_bloom`] makes to `out` (no buffer of its own); returns the
/// probe count.
fn append_bloom(hashes: &[u64], bits_per_key: u32, out: &mut Vec<u8>) -> u8 {
    append_bloom_probing(hashes, bits_per_key, bloom_probes(bits_per_key), out)
}

/// Filters up to this many 64-bit words are built on the stack.
const SMALL_BLOOM_WORDS: usize = 8;

/// [`append_bloom`] with the probe count (`bloom_probes(bits_per_key)`) already known.
fn append_bloom_probing(hashes: &[u64], bits_per_key: u32, probes: u32, out: &mut Vec<u8>) -> u8 {
    let bytes = bloom_bytes(hashes.len(), bits_per_key);
    let bits = bytes * 8;
    if bytes == 8 {
        // The smallest filter (every block of a few documents): one word, bit `b` of byte
        // `b / 8` being bit `b` of the little-endian word.
        let mut word = 0u64;
        for &h in hashes {
            // `probe_bit(h, i, 64)` for i = 0, 1, …: `x` steps by `delta` (one add per probe).
            let delta = h.rotate_left(32) | 1;
            let mut x = h;
            for _ in 0..probes {
                word |= 1 << (x >> 58);
                x = x.wrapping_add(delta);
            }
        }
        out.extend_from_slice(&word.to_le_bytes());
        return probes as u8;
    }
    if bytes <= 8 * SMALL_BLOOM_WORDS as u64 {
        // A block of a few dozen values: the filter is built in words on the stack (bit `b` of
        // byte `b / 8` is bit `b % 64` of word `b / 64`, little-endian), then its bytes copied.
        let mut words = [0u64; SMALL_BLOOM_WORDS];
        // The default bits per key's probe count with a loop of known length (unrolled).
        const DEFAULT_PROBES: u32 = 7;
        debug_assert_eq!(bloom_probes(DEFAULT_BLOOM_BITS_PER_KEY), DEFAULT_PROBES);
        if probes == DEFAULT_PROBES {
            // A constant probe count: the inlined loop is unrolled.
            set_word_bits(hashes, DEFAULT_PROBES, bits, &mut words);
        } else {
            set_word_bits(hashes, probes, bits, &mut words);
        }
        let mut filter = [0u8; 8 * SMALL_BLOOM_WORDS];
        for (chunk, word) in filter.chunks_exact_mut(8).zip(words) {
            chunk.copy_from_slice(&word.to_le_bytes());
        }
        out.extend_from_slice(&filter[..bytes as usize]);
        return probes as u8;
    }
    let start = out.len();
    out.resize(start + bytes as usize, 0);
    set_bloom_bits(hashes, probes, &mut out[start..]);
    probes as u8
}

/// The stack-word filter's probes (see [`append_bloom_probing`]). Always inlined, so a caller
/// passing a constant `probes` gets an unrolled loop.
#[allow(clippy::inline_always)] // the unrolled default case is why this function exists
#[inline(always)]
fn set_word_bits(hashes: &[u64], probes: u32, bits: u64, words: &mut [u64; SMALL_BLOOM_WORDS]) {
    for &h in hashes {
        // `probe_bit(h, i, bits)` for i = 0, 1, …: `x` steps by `delta` (one add per probe).
        let delta = h.rotate_left(32) | 1;
        let mut x = h;
        for _ in 0..probes {
            let bit = ((u128::from(x) * u128::from(bits)) >> 64) as u64;
            words[(bit / 64) as usize % SMALL_BLOOM_WORDS] |= 1 << (bit % 64);
            x = x.wrapping_add(delta);
        }
    }
}

/// Sets the probed bits of `hashes` in `filter`, byte by byte (the layout's definition).
fn set_bloom_bits(hashes: &[u64], probes: u32, filter: &mut [u8]) {
    let bits = filter.len() as u64 * 8;
    for &h in hashes {
        for i in 0..probes {
            let bit = probe_bit(h, i, bits);
            filter[(bit / 8) as usize] |= 1 << (bit % 8);
        }
    }
}

/// False means no value with this hash was added.
pub fn bloom_may_contain(filter: &[u8], probes: u8, h: u64) -> bool {
    let bits = filter.len() as u64 * 8;
    if bits == 0 {
        return true;
    }
    (0..u32::from(probes)).all(|i| {
        let bit = probe_bit(h, i, bits);
        filter[(bit / 8) as usize] & (1 << (bit % 8)) != 0
    })
}

fn put_varint(out: &mut Vec<u8>, mut value: u64) {
    while value >= 0x80 {
        out.push((value as u8) | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

fn put_bytes(out: &mut Vec<u8>, bytes: &[u8]) {
    put_varint(out, bytes.len() as u64);
    out.extend_from_slice(bytes);
}

/// Smallest and largest value seen (full encodings; cut only when written).
#[derive(Debug, Default, Clone)]
struct ZoneMap {
    min: Vec<u8>,
    max: Vec<u8>,
    /// The first 8 bytes of `min` and `max`, big-endian, zero-padded: a value whose prefix
    /// lies strictly between them is inside without comparing bytes.
    min_prefix: u64,
    max_prefix: u64,
    seen: bool,
    /// Every value added is 8 bytes (an int or time value): the bounds are the prefixes alone,
    /// and `min` and `max` are written from them only when read ([`ZoneMap::settle`]).
    fixed: bool,
}

/// Replaces a zone-map bound by `value` (an int or time value, 8 bytes, without a call to copy).
#[inline]
fn set_bound(bound: &mut Vec<u8>, value: &[u8]) {
    bound.clear();
    match value.first_chunk::<8>() {
        Some(head) if value.len() == 8 => bound.extend_from_slice(head),
        _ => bound.extend_from_slice(value),
    }
}

/// The first 8 bytes of `value`, big-endian, zero-padded (ordered as the bytes are, ties aside:
/// a value whose prefix is larger is larger, as the first byte that differs is a real byte of
/// it, greater than the other's byte or past the other's end).
#[inline]
fn prefix_of(value: &[u8]) -> u64 {
    if let Some(head) = value.first_chunk::<8>() {
        return u64::from_be_bytes(*head);
    }
    let mut prefix = [0u8; 8];
    let n = value.len().min(8);
    prefix[..n].copy_from_slice(&value[..n]);
    u64::from_be_bytes(prefix)
}

impl ZoneMap {
    /// Adds `value` as [`AttrState::add`] does.
    #[cfg(test)]
    fn add(&mut self, value: &[u8]) {
        if value.len() == 8 {
            self.add_fixed(prefix_of(value));
        } else {
            self.add_with_prefix(value, prefix_of(value));
        }
    }

    /// Adds an 8-byte value (its prefix is all of it, and prefixes order such values as their
    /// bytes do).
    // Called for every int or time value of every table written (see `AttrState::add`).
    #[allow(clippy::inline_always)]
    #[inline(always)]
    fn add_fixed(&mut self, prefix: u64) {
        if !self.seen {
            self.seen = true;
            self.fixed = true;
            self.min_prefix = prefix;
            self.max_prefix = prefix;
        } else if self.fixed {
            if prefix < self.min_prefix {
                self.min_prefix = prefix;
            } else if prefix > self.max_prefix {
                self.max_prefix = prefix;
            }
        } else {
            self.add_with_prefix(&prefix.to_be_bytes(), prefix);
        }
    }

    /// Writes `min` and `max` of a map of 8-byte values (before they are read).
    #[inline]
    fn settle(&mut self) {
        if self.fixed {
            self.fixed = false;
            set_bound(&mut self.min, &self.min_prefix.to_be_bytes());
            set_bound(&mut self.max, &self.max_prefix.to_be_bytes());
        }
    }

    #[inline]
    fn add_with_prefix(&mut self, value: &[u8], prefix: u64) {
        self.settle();
        if !self.seen {
            self.seen = true;
            set_bound(&mut self.min, value);
            set_bound(&mut self.max, value);
            self.min_prefix = prefix;
            self.max_prefix = prefix;
            return;
        }
        if prefix > self.min_prefix && prefix < self.max_prefix {
            return;
        }
        // Different prefixes order the values as their bytes do (see `prefix_of`): the bytes
        // are compared only on a tie, and not even then when both are the same length of at
        // most 8 bytes (equal prefixes are then equal values: a time-ordered block's repeats).
        let prefix_is_all = |bound: &[u8]| bound.len() == value.len() && value.len() <= 8;
        if prefix < self.min_prefix
            || (prefix == self.min_prefix
                && !prefix_is_all(&self.min)
                && value < self.min.as_slice())
        {
            set_bound(&mut self.min, value);
            self.min_prefix = prefix;
        } else if prefix > self.max_prefix
            || (prefix == self.max_prefix
                && !prefix_is_all(&self.max)
                && value > self.max.as_slice())
        {
            set_bound(&mut self.max, value);
            self.max_prefix = prefix;
        }
    }

    fn clear(&mut self) {
        self.min.clear();
        self.max.clear();
        self.seen = false;
        self.fixed = false;
    }

    /// Flags and the zone-map bytes of a record (the map is settled).
    fn encode(&self, out: &mut Vec<u8>, extra_flags: u8) {
        debug_assert!(!self.fixed);
        if !self.seen {
            out.push(extra_flags);
            return;
        }
        if let (Some(min), Some(max)) = (self.min.first_chunk::<8>(), self.max.first_chunk::<8>()) {
            if self.min.len() == 8 && self.max.len() == 8 {
                // Two 8-byte bounds (int and time values): the record in one copy.
                let mut record = [0u8; 19];
                record[0] = FLAG_ZONE_MAP | extra_flags;
                record[1] = 8;
                record[2..10].copy_from_slice(min);
                record[10] = 8;
                record[11..].copy_from_slice(max);
                out.extend_from_slice(&record);
                return;
            }
        }
        let truncated = self.max.len() > ZONE_VALUE_BYTES_MAX;
        let flags = FLAG_ZONE_MAP | extra_flags | if truncated { FLAG_MAX_TRUNCATED } else { 0 };
        out.push(flags);
        put_bytes(out, &self.min[..self.min.len().min(ZONE_VALUE_BYTES_MAX)]);
        put_bytes(out, &self.max[..self.max.len().min(ZONE_VALUE_BYTES_MAX)]);
    }
}

/// What one attribute gathers in the current block and table.
#[derive(Debug, Default)]
struct AttrState {
    block: ZoneMap,
    hashes: Vec<u64>,
    /// The blocks finished so far (every entry is in a block finished before the table).
    table: ZoneMap,
    /// `bloom_probes` of the index's bits per key, computed once per table.
    bloom_probes: u32,
}

impl AttrState {
    /// Adds a value of the current block (the table's zone map takes the block's bounds when
    /// the block ends).
    // Called for every entry of every table written; left to itself the compiler makes it a
    // call whose register saves cost as much as its body.
    #[allow(clippy::inline_always)]
    #[inline(always)]
    fn add(&mut self, value: &[u8]) {
        let prefix = prefix_of(value);
        if value.len() == 8 {
            self.block.add_fixed(prefix);
        } else {
            let block = &self.block;
            // Most values of a block lie strictly inside its bounds (by their prefixes alone):
            // nothing to update, and no call.
            if !(block.seen && prefix > block.min_prefix && prefix < block.max_prefix) {
                self.block.add_with_prefix(value, prefix);
            }
        }
        self.hashes.push(value_hash(value));
    }

    /// At the end of a block: settles the block's zone map (before it is encoded) and widens
    /// the table's by the block's bounds.
    fn end_block(&mut self) {
        let block = &mut self.block;
        if !block.seen {
            return;
        }
        if block.fixed {
            self.table.add_fixed(block.min_prefix);
            self.table.add_fixed(block.max_prefix);
            block.settle();
        } else {
            self.table.add_with_prefix(&block.min, block.min_prefix);
            self.table.add_with_prefix(&block.max, block.max_prefix);
        }
    }

    /// Leaves the distinct hashes of the block in `hashes` (in any order: the filter and its
    /// size depend only on the set). A block holds a few documents, so a few comparisons beat a
    /// sort.
    fn dedup_hashes(&mut self) {
        const COMPARE_ALL_MAX: usize = 8;
        if self.hashes.len() <= COMPARE_ALL_MAX {
            let mut distinct = 0;
            for i in 0..self.hashes.len() {
                let h = self.hashes[i];
                if !self.hashes[..distinct].contains(&h) {
                    self.hashes[distinct] = h;
                    distinct += 1;
                }
            }
            self.hashes.truncate(distinct);
        } else {
            self.hashes.sort_unstable();
            self.hashes.dedup();
        }
    }
}

/// Collects the embedded-index bytes of one table.
pub struct EmbeddedCollector {
    /// Sorted by attribute id.
    indexes: Vec<Arc<EmbeddedIndex>>,
    states: Vec<AttrState>,
    block_seq_max: SeqNo,
    /// An entry of the block had an envelope that did not decode: the block's values are
    /// unknown, so its record names no attribute (queries read it and report the corruption).
    block_unknown: bool,
    table_unknown: bool,
}

impl EmbeddedCollector {
    pub(crate) fn new(mut indexes: Vec<Arc<EmbeddedIndex>>) -> EmbeddedCollector {
        indexes.sort_by_key(|index| index.attr.attr_id);
        indexes.dedup_by_key(|index| index.attr.attr_id);
        let states = indexes
            .iter()
            .map(|index| AttrState {
                bloom_probes: bloom_probes(index.attr.bloom_bits_per_key),
                ..AttrState::default()
            })
            .collect();
        EmbeddedCollector {
            indexes,
            states,
            block_seq_max: 0,
            block_unknown: false,
            table_unknown: false,
        }
    }
}

/// The encoded value of one collected attribute in a stored version (see
/// `Index::encoded_value`: versions older than the index carry it only in their JSON).
fn collected_value<'a>(
    index: &EmbeddedIndex,
    envelope: &EnvelopeRef<'a>,
    seq: SeqNo,
) -> Option<std::borrow::Cow<'a, [u8]>> {
    let attr = &index.attr;
    encoded_value(attr.attr_id, attr.first_seq, &attr.reader, envelope, seq)
}

impl BlockPropertyCollector for EmbeddedCollector {
    fn add(&mut self, entry: &CollectorEntry<'_>) {
        self.block_seq_max = self.block_seq_max.max(entry.seq);
        // Deletes carry no value; merge operands never reach a primary tree.
        if entry.kind != ValueKind::Put || self.indexes.is_empty() {
            return;
        }
        if let [index] = self.indexes.as_slice() {
            // One index (the usual case): its value is found while the envelope is validated.
            match EnvelopeRef::validated_attr_encoded(entry.value, index.attr.attr_id) {
                Ok(Some(encoded)) => {
                    if let Some(state) = self.states.first_mut() {
                        state.add(encoded);
                    }
                    return;
                }
                // Without the attribute in its envelope: a version newer than the index does
                // not carry it; an older one may (in its JSON: rare, decoded again below).
                Ok(None) if entry.seq > index.attr.first_seq => return,
                Ok(None) => {}
                Err(_) => {
                    self.block_unknown = true;
                    self.table_unknown = true;
                    return;
                }
            }
        }
        let Ok(envelope) = EnvelopeRef::decode(entry.value) else {
            self.block_unknown = true;
            self.table_unknown = true;
            return;
        };
        for (index, state) in self.indexes.iter().zip(self.states.iter_mut()) {
            if let Some(value) = collected_value(index, &envelope, entry.seq) {
                state.add(&value);
            }
        }
    }

    fn finish_block(&mut self, block: &FinishedBlock) -> Vec<u8> {
        let mut out = Vec::new();
        self.finish_block_into(block, &mut out);
        out
    }

    fn finish_block_into(&mut self, _block: &FinishedBlock, out: &mut Vec<u8>) {
        if self.indexes.is_empty() {
            return;
        }
        for state in &mut self.states {
            state.end_block();
        }
        out.reserve(16 + self.indexes.len() * 48);
        out.push(PROPERTY_FORMAT_VERSION);
        put_varint(out, self.block_seq_max);
        if self.block_unknown {
            put_varint(out, 0);
        } else {
            put_varint(out, self.indexes.len() as u64);
            for (index, state) in self.indexes.iter().zip(self.states.iter_mut()) {
                put_varint(out, u64::from(index.attr.attr_id));
                state.dedup_hashes();
                let exact = state.hashes.len() == 1
                    && state.block.min == state.block.max
                    && state.block.max.len() <= ZONE_VALUE_BYTES_MAX;
                if state.block.seen && !exact {
                    state.block.encode(out, FLAG_BLOOM);
                    let bits_per_key = index.attr.bloom_bits_per_key;
                    put_varint(out, bloom_bytes(state.hashes.len(), bits_per_key));
                    let probes =
                        append_bloom_probing(&state.hashes, bits_per_key, state.bloom_probes, out);
                    out.push(probes);
                } else {
                    state.block.encode(out, 0);
                }
            }
        }
        for state in &mut self.states {
            state.block.clear();
            state.hashes.clear();
        }
        self.block_seq_max = 0;
        self.block_unknown = false;
    }

    fn finish_table(&mut self) -> TableCollectorOutput {
        if self.indexes.is_empty() {
            return TableCollectorOutput::default();
        }
        for state in &mut self.states {
            state.table.settle();
        }
        let mut out = vec![PROPERTY_FORMAT_VERSION];
        if self.table_unknown {
            put_varint(&mut out, 0);
        } else {
            put_varint(&mut out, self.indexes.len() as u64);
            for (index, state) in self.indexes.iter().zip(&self.states) {
                put_varint(&mut out, u64::from(index.attr.attr_id));
                state.table.encode(&mut out, 0);
            }
        }
        TableCollectorOutput {
            table_property: out,
            meta_blocks: Vec::new(),
        }
    }
}

/// Installed once in the engine's default tree options; makes a collector for every table of
/// every tree, gathering the attributes the registry lists for that tree (none: empty bytes).
pub struct EmbeddedCollectorFactory {
    registry: Arc<super::EmbeddedRegistry>,
}

impl EmbeddedCollectorFactory {
    pub(crate) fn new(registry: Arc<super::EmbeddedRegistry>) -> EmbeddedCollectorFactory {
        EmbeddedCollectorFactory { registry }
    }
}

impl BlockPropertyCollectorFactory for EmbeddedCollectorFactory {
    fn name(&self) -> &str {
        COLLECTOR_NAME
    }

    fn create(&self, context: &TableContext) -> Box<dyn BlockPropertyCollector> {
        Box::new(EmbeddedCollector::new(
            self.registry.indexes_of(context.tree),
        ))
    }
}

// ---- decoding ------------------------------------------------------------------------------

/// A decoding failure: what and where (byte offset inside the property bytes).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PropertyCorruption {
    pub offset: usize,
    pub message: String,
}

struct Reader<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn fail<T>(&self, message: impl Into<String>) -> Result<T, PropertyCorruption> {
        Err(PropertyCorruption {
            offset: self.pos,
            message: message.into(),
        })
    }

    #[inline]
    fn byte(&mut self, what: &str) -> Result<u8, PropertyCorruption> {
        match self.bytes.get(self.pos) {
            Some(&b) => {
                self.pos += 1;
                Ok(b)
            }
            None => self.fail(format!("ends before the {what}")),
        }
    }

    #[inline]
    fn varint(&mut self, what: &str) -> Result<u64, PropertyCorruption> {
        // Most varints here (ids, lengths, probe counts) are one byte.
        if let Some(&byte) = self.bytes.get(self.pos) {
            if byte < 0x80 {
                self.pos += 1;
                return Ok(u64::from(byte));
            }
        }
        self.varint_multi_byte(what)
    }

    #[cold]
    fn varint_multi_byte(&mut self, what: &str) -> Result<u64, PropertyCorruption> {
        let mut value: u64 = 0;
        for shift in 0..10 {
            let byte = self.byte(what)?;
            let part = u64::from(byte & 0x7F);
            if shift == 9 && byte > 1 {
                return self.fail(format!("{what} varint overflows 64 bits"));
            }
            value |= part << (7 * shift);
            if byte & 0x80 == 0 {
                return Ok(value);
            }
        }
        self.fail(format!("{what} varint is longer than 10 bytes"))
    }

    fn bytes(&mut self, what: &str) -> Result<&'a [u8], PropertyCorruption> {
        let length = self.varint(what)?;
        let start = self.pos;
        match usize::try_from(length)
            .ok()
            .and_then(|l| start.checked_add(l))
            .filter(|&end| end <= self.bytes.len())
        {
            Some(end) => {
                self.pos = end;
                Ok(&self.bytes[start..end])
            }
            None => self.fail(format!(
                "{what} of {length} bytes runs past the end ({} bytes left)",
                self.bytes.len() - start
            )),
        }
    }
}

/// A zone map as stored (bounds possibly cut).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StoredZone<'a> {
    pub min: &'a [u8],
    pub max: &'a [u8],
    pub max_truncated: bool,
}

impl StoredZone<'_> {
    /// Whether some value `v` with `start <= v < end` (`end == None`: unbounded) may lie in
    /// `[min, true max]`.
    pub fn intersects(&self, start: &[u8], end: Option<&[u8]>) -> bool {
        // min is a lower bound of every value (a prefix of the true minimum is <= it).
        if end.is_some_and(|end| self.min >= end) {
            return false;
        }
        // The true maximum is <= max, or (cut) starts with max.
        start <= self.max || (self.max_truncated && start.starts_with(self.max))
    }
}

/// One attribute's record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AttrRecord<'a> {
    /// `None`: the block or table holds no value of the attribute.
    pub zone: Option<StoredZone<'a>>,
    /// `(filter bits, probes)`.
    pub bloom: Option<(&'a [u8], u8)>,
}

impl AttrRecord<'_> {
    /// Whether the block or table may hold a value in `[start, end)`; `point_hash` (a LOOKUP
    /// of exactly `start`) also consults the bloom filter.
    pub fn may_match(&self, start: &[u8], end: Option<&[u8]>, point_hash: Option<u64>) -> bool {
        let Some(zone) = self.zone else {
            return false;
        };
        if !zone.intersects(start, end) {
            return false;
        }
        match (self.bloom, point_hash) {
            (Some((filter, probes)), Some(h)) => bloom_may_contain(filter, probes, h),
            _ => true,
        }
    }
}

/// The largest sequence number a block property records, read without decoding the rest
/// (the whole record is checked when the block's filters are consulted).
pub fn block_seq_max(bytes: &[u8]) -> Result<SeqNo, PropertyCorruption> {
    if bytes.is_empty() {
        return Ok(SeqNo::MAX);
    }
    let mut reader = Reader { bytes, pos: 0 };
    let version = reader.byte("format version")?;
    if version != PROPERTY_FORMAT_VERSION {
        reader.pos = 0;
        return reader.fail(format!(
            "unknown embedded-index property version {version} (this build reads {PROPERTY_FORMAT_VERSION})"
        ));
    }
    reader.varint("block's largest sequence number")
}

/// Finds attribute `attr_id`'s record in the bytes of a block (`block == true`: they start
/// with the block's largest sequence number) or of a table. `Ok(None)`: the bytes do not
/// describe the attribute (empty bytes, or written before the index existed): read it.
/// Returns the block's largest sequence number too (0 for tables).
pub fn find_attr(
    bytes: &[u8],
    block: bool,
    attr_id: u32,
) -> Result<(SeqNo, Option<AttrRecord<'_>>), PropertyCorruption> {
    if bytes.is_empty() {
        return Ok((SeqNo::MAX, None));
    }
    let mut reader = Reader { bytes, pos: 0 };
    let version = reader.byte("format version")?;
    if version != PROPERTY_FORMAT_VERSION {
        reader.pos = 0;
        return reader.fail(format!(
            "unknown embedded-index property version {version} (this build reads {PROPERTY_FORMAT_VERSION})"
        ));
    }
    let seq_max = if block {
        reader.varint("block's largest sequence number")?
    } else {
        0
    };
    let count = reader.varint("attribute count")?;
    let mut found = None;
    let mut previous: Option<u64> = None;
    for _ in 0..count {
        let at = reader.pos;
        let id = reader.varint("attribute id")?;
        if id > u64::from(u32::MAX) || previous.is_some_and(|p| id <= p) {
            reader.pos = at;
            return reader.fail(format!(
                "attribute id {id} out of order or too large (after {previous:?})"
            ));
        }
        previous = Some(id);
        let flags_at = reader.pos;
        let flags = reader.byte("flags")?;
        if flags & !FLAGS_KNOWN != 0
            || (flags & FLAG_ZONE_MAP == 0 && flags & (FLAG_MAX_TRUNCATED | FLAG_BLOOM) != 0)
            || (!block && flags & FLAG_BLOOM != 0)
        {
            reader.pos = flags_at;
            return reader.fail(format!("bad flags 0x{flags:02X} for attribute {id}"));
        }
        let zone = if flags & FLAG_ZONE_MAP == 0 {
            None
        } else {
            let min = reader.bytes("zone-map minimum")?;
            let max = reader.bytes("zone-map maximum")?;
            if min > max {
                return reader.fail(format!("zone map of attribute {id} has min > max"));
            }
            Some(StoredZone {
                min,
                max,
                max_truncated: flags & FLAG_MAX_TRUNCATED != 0,
            })
        };
        let bloom = if flags & FLAG_BLOOM == 0 {
            None
        } else {
            let filter = reader.bytes("bloom filter")?;
            let probes_at = reader.pos;
            let probes = reader.byte("bloom probe count")?;
            if filter.is_empty() || !(1..=BLOOM_PROBES_MAX).contains(&u32::from(probes)) {
                reader.pos = probes_at;
                return reader.fail(format!(
                    "bloom filter of attribute {id}: {} bytes, {probes} probes",
                    filter.len()
                ));
            }
            Some((filter, probes))
        };
        if id == u64::from(attr_id) {
            found = Some(AttrRecord { zone, bloom });
        }
    }
    if reader.pos != bytes.len() {
        return reader.fail(format!(
            "{} bytes left after the last record",
            bytes.len() - reader.pos
        ));
    }
    Ok((seq_max, found))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::document::{DocumentParser, IndexedAttribute};
    use crate::embedded::{CollectedAttr, EmbeddedIndex};
    use crate::encoding::encode_value_to_vec;
    use crate::envelope::Envelope;
    use crate::path::AttrPath;
    use crate::value::AttrType;
    use crate::value::AttrValue;
    use sift_lsm::extension::BlockHandle;

    fn index(attr_id: u32, bits: u32) -> Arc<EmbeddedIndex> {
        Arc::new(EmbeddedIndex::new(CollectedAttr {
            attr_id,
            bloom_bits_per_key: bits,
            first_seq: 0,
            reader: DocumentParser::new(
                AttrPath::parse("id").unwrap(),
                vec![IndexedAttribute::new(
                    attr_id,
                    AttrPath::parse("v").unwrap(),
                    AttrType::Int,
                )],
            )
            .unwrap(),
        }))
    }

    fn put(collector: &mut EmbeddedCollector, pk: &[u8], seq: SeqNo, value: Option<i64>) {
        let envelope = Envelope {
            attrs: value.map(|v| (7, AttrValue::Int(v))).into_iter().collect(),
            doc: b"{}".to_vec(),
        }
        .encode();
        collector.add(&CollectorEntry {
            user_key: pk,
            seq,
            kind: ValueKind::Put,
            value: &envelope,
            block_offset: None,
        });
    }

    const BLOCK: FinishedBlock = FinishedBlock {
        ordinal: 0,
        handle: BlockHandle { offset: 0, size: 0 },
    };

    #[test]
    fn hash_golden_values() {
        // Computed by an independent implementation of the documented algorithm.
        assert_eq!(value_hash(b""), 0xefd0_1f60_ba99_2926);
        assert_eq!(value_hash(b"a"), 0x82a2_a958_a9be_ce5b);
        assert_eq!(bloom_probes(10), 7);
        assert_eq!(bloom_probes(1), 1);
        assert_eq!(bloom_probes(1000), 30);
    }

    #[test]
    fn golden_block_and_table_bytes() {
        let mut collector = EmbeddedCollector::new(vec![index(7, 1)]);
        put(&mut collector, b"a", 5, Some(1));
        put(&mut collector, b"b", 9, Some(2));
        collector.add(&CollectorEntry {
            user_key: b"c",
            seq: 12,
            kind: ValueKind::Delete,
            value: b"",
            block_offset: None,
        });
        let block = collector.finish_block(&BLOCK);
        let mut expected = vec![
            PROPERTY_FORMAT_VERSION,
            12,
            1,
            7,
            FLAG_ZONE_MAP | FLAG_BLOOM,
        ];
        expected.extend_from_slice(&[8, 0x80, 0, 0, 0, 0, 0, 0, 1]);
        expected.extend_from_slice(&[8, 0x80, 0, 0, 0, 0, 0, 0, 2]);
        let (filter, probes) = build_bloom(
            &{
                let mut h = vec![
                    value_hash(&[0x80, 0, 0, 0, 0, 0, 0, 1]),
                    value_hash(&[0x80, 0, 0, 0, 0, 0, 0, 2]),
                ];
                h.sort_unstable();
                h
            },
            1,
        );
        assert_eq!((filter.len(), probes), (8, 1));
        expected.push(8);
        expected.extend_from_slice(&filter);
        expected.push(1);
        assert_eq!(block, expected);
        assert_eq!(block[..5], GOLDEN_BLOCK_HEAD);
        assert_eq!(&block[block.len() - 10..], &GOLDEN_BLOOM_TAIL);

        // A block with one value: no bloom (the zone map is exact). A block without values.
        put(&mut collector, b"d", 20, Some(3));
        put(&mut collector, b"e", 21, Some(3));
        assert_eq!(
            collector.finish_block(&BLOCK),
            vec![
                1,
                21,
                1,
                7,
                FLAG_ZONE_MAP,
                8,
                0x80,
                0,
                0,
                0,
                0,
                0,
                0,
                3,
                8,
                0x80,
                0,
                0,
                0,
                0,
                0,
                0,
                3
            ]
        );
        put(&mut collector, b"f", 300, None);
        assert_eq!(collector.finish_block(&BLOCK), vec![1, 0xAC, 0x02, 1, 7, 0]);
        let table = collector.finish_table().table_property;
        assert_eq!(
            table,
            vec![
                1,
                1,
                7,
                FLAG_ZONE_MAP,
                8,
                0x80,
                0,
                0,
                0,
                0,
                0,
                0,
                1,
                8,
                0x80,
                0,
                0,
                0,
                0,
                0,
                0,
                3
            ]
        );
    }

    /// The first bytes of the golden block above, and its 8 bloom bytes + probe count, as
    /// literals: a change to the layout or to the hash fails here.
    const GOLDEN_BLOCK_HEAD: [u8; 5] = [1, 12, 1, 7, 0x05];
    const GOLDEN_BLOOM_TAIL: [u8; 10] = [8, 0, 0, 0, 0, 0, 33, 0, 0, 1];

    #[test]
    fn decoding_finds_records_and_tests_them() {
        let mut collector = EmbeddedCollector::new(vec![index(3, 10), index(7, 10)]);
        for i in 0..50 {
            put(
                &mut collector,
                format!("k{i}").as_bytes(),
                i,
                Some(i as i64 * 2),
            );
        }
        let block = collector.finish_block(&BLOCK);
        let (seq_max, record) = find_attr(&block, true, 7).unwrap();
        assert_eq!(seq_max, 49);
        let record = record.unwrap();
        for v in 0..100i64 {
            let encoded = encode_value_to_vec(&AttrValue::Int(v));
            let end = crate::encoding::prefix_successor(&encoded);
            let may = record.may_match(&encoded, end.as_deref(), Some(value_hash(&encoded)));
            if v % 2 == 0 {
                assert!(may, "value {v} must pass");
            }
        }
        let outside = encode_value_to_vec(&AttrValue::Int(1000));
        assert!(!record.may_match(&outside, None, None));
        // Attribute 3 has no values in any entry (the envelopes carry only 7).
        let (_, record3) = find_attr(&block, true, 3).unwrap();
        assert_eq!(record3.unwrap().zone, None);
        // An attribute the bytes do not mention is unknown.
        assert_eq!(find_attr(&block, true, 5).unwrap().1, None);
        assert_eq!(find_attr(&[], true, 7).unwrap().1, None);
    }

    #[test]
    fn every_truncation_and_byte_flip_is_an_error_or_harmless() {
        let mut collector = EmbeddedCollector::new(vec![index(7, 10)]);
        for i in 0..20 {
            put(
                &mut collector,
                format!("k{i}").as_bytes(),
                i,
                Some(i as i64),
            );
        }
        let block = collector.finish_block(&BLOCK);
        for cut in 1..block.len() {
            assert!(
                find_attr(&block[..cut], true, 7).is_err(),
                "truncation at {cut} accepted"
            );
        }
        let mut longer = block.clone();
        longer.push(0);
        assert!(find_attr(&longer, true, 7).is_err());
        let mut bad_version = block.clone();
        bad_version[0] = 9;
        assert_eq!(find_attr(&bad_version, true, 7).unwrap_err().offset, 0);
        for at in 0..block.len() {
            let mut flipped = block.clone();
            flipped[at] ^= 0xFF;
            let _ = find_attr(&flipped, true, 7); // never panics
        }
    }

    #[test]
    fn long_values_are_cut_and_still_match() {
        let long_a = format!("{}a", "x".repeat(100));
        let long_b = format!("{}b", "x".repeat(100));
        let enc = |s: &str| encode_value_to_vec(&AttrValue::String(s.to_string()));
        let mut zone = ZoneMap::default();
        zone.add(&enc(&long_a));
        zone.add(&enc(&long_b));
        let mut out = Vec::new();
        zone.encode(&mut out, 0);
        let mut bytes = vec![PROPERTY_FORMAT_VERSION, 1, 1];
        bytes.extend_from_slice(&out);
        let (_, record) = find_attr(&bytes, false, 1).unwrap();
        let record = record.unwrap();
        assert!(record.zone.unwrap().max_truncated);
        for s in [&long_a, &long_b] {
            let e = enc(s);
            let end = crate::encoding::prefix_successor(&e);
            assert!(record.may_match(&e, end.as_deref(), None));
        }
        let after = enc("y");
        assert!(!record.may_match(&after, None, None));
        let before = enc("w");
        assert!(!record.may_match(&before, Some(&enc("wz")), None));
    }

    #[test]
    fn one_word_filters_are_built_bit_for_bit_as_the_general_rule_says() {
        use rand::rngs::StdRng;
        use rand::{Rng, SeedableRng};
        let seed = 11;
        let mut rng = StdRng::seed_from_u64(seed);
        for bits_per_key in [1, 2, 5, 10, 20, 64] {
            for keys in 1..=8 {
                let hashes: Vec<u64> = (0..keys).map(|_| rng.gen()).collect();
                let (filter, probes) = build_bloom(&hashes, bits_per_key);
                // The rule of `build_bloom`, spelled out byte by byte.
                let bytes = bloom_bytes(hashes.len(), bits_per_key);
                let mut expected = vec![0u8; bytes as usize];
                for &h in &hashes {
                    for i in 0..bloom_probes(bits_per_key) {
                        let bit = probe_bit(h, i, bytes * 8);
                        expected[(bit / 8) as usize] |= 1 << (bit % 8);
                    }
                }
                assert_eq!(
                    filter, expected,
                    "bits {bits_per_key} keys {keys} seed {seed}"
                );
                assert_eq!(u32::from(probes), bloom_probes(bits_per_key));
            }
        }
    }

    #[test]
    fn block_hashes_are_deduplicated_as_a_set() {
        use rand::rngs::StdRng;
        use rand::{Rng, SeedableRng};
        let seed = 12;
        let mut rng = StdRng::seed_from_u64(seed);
        for length in 0..40 {
            let hashes: Vec<u64> = (0..length).map(|_| rng.gen_range(0..6u64)).collect();
            let mut state = AttrState {
                hashes: hashes.clone(),
                ..AttrState::default()
            };
            state.dedup_hashes();
            let mut got = state.hashes.clone();
            got.sort_unstable();
            let mut want = hashes;
            want.sort_unstable();
            want.dedup();
            assert_eq!(got, want, "length {length} seed {seed}");
        }
    }

    /// The zone map keeps the smallest and largest byte string of random values (short ones,
    /// zero bytes, shared prefixes and ties, so prefixes decide some comparisons and not
    /// others), as a brute-force min and max do.
    #[test]
    fn zone_map_bounds_are_the_brute_force_min_and_max() {
        use rand::rngs::StdRng;
        use rand::{Rng, SeedableRng};
        let seed = 0x20E_u64;
        let mut rng = StdRng::seed_from_u64(seed);
        for round in 0..3000 {
            let mut zone = ZoneMap::default();
            let mut values: Vec<Vec<u8>> = Vec::new();
            for _ in 0..rng.gen_range(1..12) {
                let length = rng.gen_range(0..12);
                let value: Vec<u8> = (0..length)
                    .map(|_| [0u8, 1, 0x7F, 0xFF][rng.gen_range(0..4)])
                    .collect();
                zone.add(&value);
                values.push(value);
            }
            let min = values.iter().min().unwrap();
            let max = values.iter().max().unwrap();
            zone.settle();
            assert_eq!(&zone.min, min, "seed {seed} round {round}: {values:?}");
            assert_eq!(&zone.max, max, "seed {seed} round {round}: {values:?}");
            assert_eq!(
                (zone.min_prefix, zone.max_prefix),
                (prefix_of(min), prefix_of(max))
            );
        }
    }

    /// Blocks of 8-byte values only (bounds kept as prefixes), of other lengths only, and
    /// mixed: each block's and the table's zone map are the brute-force min and max, and the
    /// hashes are those of the values.
    #[test]
    fn block_and_table_bounds_with_fixed_width_values_are_the_brute_force_ones() {
        use rand::rngs::StdRng;
        use rand::{Rng, SeedableRng};
        let seed = 0xF1_8ED_u64;
        let mut rng = StdRng::seed_from_u64(seed);
        for round in 0..500 {
            let mut state = AttrState::default();
            let mut table_values: Vec<Vec<u8>> = Vec::new();
            let mix = rng.gen_range(0..3);
            for _ in 0..rng.gen_range(1..6) {
                let mut values: Vec<Vec<u8>> = Vec::new();
                for _ in 0..rng.gen_range(0..10) {
                    let length = match mix {
                        0 => 8,
                        1 => rng.gen_range(0..8),
                        _ => [8, 8, 9, 7, 0, 12][rng.gen_range(0..6)],
                    };
                    let value: Vec<u8> = (0..length)
                        .map(|_| [0u8, 1, 0x80, 0xFF][rng.gen_range(0..4)])
                        .collect();
                    state.add(&value);
                    values.push(value);
                }
                state.end_block();
                let context = format!("seed {seed} round {round}: {values:?}");
                assert_eq!(state.block.seen, !values.is_empty(), "{context}");
                if let (Some(min), Some(max)) = (values.iter().min(), values.iter().max()) {
                    assert_eq!(&state.block.min, min, "{context}");
                    assert_eq!(&state.block.max, max, "{context}");
                }
                let hashes: Vec<u64> = values.iter().map(|v| value_hash(v)).collect();
                assert_eq!(state.hashes, hashes, "{context}");
                state.block.clear();
                state.hashes.clear();
                table_values.extend(values);
            }
            state.table.settle();
            let context = format!("seed {seed} round {round}: {table_values:?}");
            assert_eq!(state.table.seen, !table_values.is_empty(), "{context}");
            if let (Some(min), Some(max)) = (table_values.iter().min(), table_values.iter().max()) {
                assert_eq!(&state.table.min, min, "{context}");
                assert_eq!(&state.table.max, max, "{context}");
                assert_eq!(
                    (state.table.min_prefix, state.table.max_prefix),
                    (prefix_of(min), prefix_of(max)),
                    "{context}"
                );
            }
        }
    }

    /// `ZoneMap::encode` (the one-copy record of two 8-byte bounds included) writes the
    /// layout's record: flags, then each bound length-prefixed and cut to
    /// `ZONE_VALUE_BYTES_MAX` bytes.
    #[test]
    fn zone_map_records_are_the_layout_byte_for_byte() {
        use rand::rngs::StdRng;
        use rand::{Rng, SeedableRng};
        let seed = 0x20_E1C_u64;
        let mut rng = StdRng::seed_from_u64(seed);
        for round in 0..3000 {
            let mut zone = ZoneMap::default();
            for _ in 0..rng.gen_range(0..5) {
                let length = [8, 8, 0, 7, 9, 64, 65, 100][rng.gen_range(0..8)];
                let value: Vec<u8> = (0..length).map(|_| rng.gen()).collect();
                zone.add(&value);
            }
            zone.settle();
            let extra_flags = [0, FLAG_BLOOM][rng.gen_range(0..2)];
            let mut got = vec![0xAB];
            zone.encode(&mut got, extra_flags);
            let mut want = vec![0xAB];
            if zone.seen {
                let truncated = zone.max.len() > ZONE_VALUE_BYTES_MAX;
                want.push(
                    FLAG_ZONE_MAP | extra_flags | if truncated { FLAG_MAX_TRUNCATED } else { 0 },
                );
                for bound in [&zone.min, &zone.max] {
                    let cut = &bound[..bound.len().min(ZONE_VALUE_BYTES_MAX)];
                    put_varint(&mut want, cut.len() as u64);
                    want.extend_from_slice(cut);
                }
            } else {
                want.push(extra_flags);
            }
            assert_eq!(got, want, "seed {seed} round {round}");
        }
    }

    /// `value_hash` of 8-byte values (the unrolled case) is FNV-1a then `fmix64` as for any
    /// other length.
    #[test]
    fn value_hash_of_every_length_is_the_byte_loop() {
        use rand::rngs::StdRng;
        use rand::{Rng, SeedableRng};
        let seed = 0x4A5_u64;
        let mut rng = StdRng::seed_from_u64(seed);
        for length in 0..20 {
            let value: Vec<u8> = (0..length).map(|_| rng.gen()).collect();
            let mut h = FNV_OFFSET_BASIS;
            for &byte in &value {
                h ^= u64::from(byte);
                h = h.wrapping_mul(FNV_PRIME);
            }
            h ^= h >> 33;
            h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
            h ^= h >> 33;
            h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
            assert_eq!(
                value_hash(&value),
                h ^ (h >> 33),
                "seed {seed} length {length}"
            );
        }
    }

    /// The one-word and stack-word filters are byte for byte the filter the layout defines
    /// (`set_bloom_bits`), for every size around the word boundaries.
    #[test]
    fn word_built_blooms_equal_the_byte_built_ones() {
        use rand::rngs::StdRng;
        use rand::{Rng, SeedableRng};
        let seed = 0xB100_u64;
        let mut rng = StdRng::seed_from_u64(seed);
        for bits_per_key in [1, 3, 7, 10, 13, 20, 64, 100, 1000] {
            for keys in 0..80usize {
                let hashes: Vec<u64> = (0..keys).map(|_| rng.gen()).collect();
                let probes = bloom_probes(bits_per_key);
                let mut got = vec![0xAB];
                let returned = append_bloom_probing(&hashes, bits_per_key, probes, &mut got);
                let mut want = vec![0u8; bloom_bytes(keys, bits_per_key) as usize];
                set_bloom_bits(&hashes, probes, &mut want);
                assert_eq!(u32::from(returned), probes);
                assert_eq!(got[0], 0xAB, "bytes before the filter are kept");
                assert_eq!(
                    &got[1..],
                    want.as_slice(),
                    "seed {seed} keys {keys} bits per key {bits_per_key}"
                );
                assert!(hashes
                    .iter()
                    .all(|&h| bloom_may_contain(&got[1..], probes as u8, h)));
            }
        }
    }

    #[test]
    fn bloom_has_no_false_negatives_for_long_values() {
        let values: Vec<Vec<u8>> = (0..500)
            .map(|i| encode_value_to_vec(&AttrValue::String(format!("value number {i:08}"))))
            .collect();
        let hashes: Vec<u64> = values.iter().map(|v| value_hash(v)).collect();
        let (filter, probes) = build_bloom(&hashes, 10);
        assert!(values
            .iter()
            .all(|v| bloom_may_contain(&filter, probes, value_hash(v))));
        let false_positives = (0..10_000)
            .filter(|i| {
                let v = encode_value_to_vec(&AttrValue::String(format!("absent {i}")));
                bloom_may_contain(&filter, probes, value_hash(&v))
            })
            .count();
        assert!(false_positives < 300, "{false_positives} false positives");
    }
}
