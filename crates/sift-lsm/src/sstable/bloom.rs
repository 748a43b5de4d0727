//! The per-table bloom filter on user keys: cache-line blocked, xxh3-hashed, double hashing
//! inside one 512-bit line, so a lookup touches a single cache line.
//!
//! Layout: `lines × 64 bytes` of bits, then one byte with the probe count `k`.
//! For a key with `h = xxh3_64(user_key)`: line = `((h >> 32) * lines) >> 32`;
//! `a = h as u32`, `delta = a.rotate_left(16) | 1`; probe `i` (0..k) sets/tests bit
//! `(a + i * delta) >> 23` (u32 wrapping arithmetic: the top 9 bits) of that line, bit `b`
//! being bit `b % 8` of byte `b / 8`.

use xxhash_rust::xxh3::xxh3_64;

/// Bytes per filter line (one cache line).
pub const BLOOM_LINE_BYTES: usize = 64;
/// Probe bit positions are the top 9 bits of a u32: 0..512.
const PROBE_SHIFT: u32 = 23;
pub const BLOOM_PROBES_MAX: u32 = 30;

/// The probe count for `bits_per_key`: `round(bits_per_key × ln 2)` clamped to [1, 30].
pub fn probes_for(bits_per_key: u32) -> u32 {
    let k = (f64::from(bits_per_key) * std::f64::consts::LN_2).round() as u32;
    k.clamp(1, BLOOM_PROBES_MAX)
}

#[inline]
fn hash_key(user_key: &[u8]) -> u64 {
    xxh3_64(user_key)
}

/// `(line, a, delta)` for a hash. The line uses the high half of the hash, the probes the
/// low half.
#[inline]
fn locate(hash: u64, lines: u64) -> (usize, u32, u32) {
    let line = ((hash >> 32) * lines) >> 32;
    let a = hash as u32;
    (line as usize, a, a.rotate_left(16) | 1)
}

/// Hashes per segment of a `BloomBuilder` (64 KiB).
const HASHES_PER_SEGMENT: usize = 8192;

/// Collects key hashes while a table is built.
///
/// The hashes are kept in fixed-size segments, not one growing vector: growing a vector of a
/// big table's hashes copies it inside `realloc`, which holds the malloc arena's lock for the
/// whole copy, and a writer sharing that arena waits (see `memtable/chunk_pool.rs`).
pub struct BloomBuilder {
    bits_per_key: u32,
    /// Every segment but the last holds `HASHES_PER_SEGMENT` hashes.
    segments: Vec<Vec<u64>>,
}

impl BloomBuilder {
    pub fn new(bits_per_key: u32) -> Self {
        BloomBuilder {
            bits_per_key,
            segments: Vec::new(),
        }
    }

    /// Adds a user key; the caller skips repeats of the same user key.
    pub fn add_key(&mut self, user_key: &[u8]) {
        let hash = hash_key(user_key);
        match self.segments.last_mut() {
            Some(segment) if segment.len() < HASHES_PER_SEGMENT => segment.push(hash),
            _ => {
                let mut segment = Vec::with_capacity(HASHES_PER_SEGMENT);
                segment.push(hash);
                self.segments.push(segment);
            }
        }
    }

    /// The encoded filter.
    pub fn finish(&self) -> Vec<u8> {
        let keys = self.segments.iter().map(Vec::len).sum::<usize>();
        let bits = (keys as u64).saturating_mul(u64::from(self.bits_per_key));
        let lines = bits
            .div_ceil(BLOOM_LINE_BYTES as u64 * 8)
            .clamp(1, u64::from(u32::MAX));
        let probes = probes_for(self.bits_per_key);
        let mut out = vec![0u8; lines as usize * BLOOM_LINE_BYTES + 1];
        for &hash in self.segments.iter().flatten() {
            let (line, a, delta) = locate(hash, lines);
            let base = line * BLOOM_LINE_BYTES;
            for i in 0..probes {
                let bit = a.wrapping_add(i.wrapping_mul(delta)) >> PROBE_SHIFT;
                out[base + (bit / 8) as usize] |= 1 << (bit % 8);
            }
        }
        out[lines as usize * BLOOM_LINE_BYTES] = probes as u8;
        out
    }
}

/// A decoded filter.
pub struct BloomFilter {
    bits: Vec<u8>,
    lines: u64,
    probes: u32,
}

impl BloomFilter {
    /// `None` if the bytes are not a well-formed filter.
    pub fn decode(mut bytes: Vec<u8>) -> Option<BloomFilter> {
        let probes = u32::from(bytes.pop()?);
        if bytes.is_empty()
            || !bytes.len().is_multiple_of(BLOOM_LINE_BYTES)
            || !(1..=BLOOM_PROBES_MAX).contains(&probes)
        {
            return None;
        }
        let lines = (bytes.len() / BLOOM_LINE_BYTES) as u64;
        if lines > u64::from(u32::MAX) {
            return None;
        }
        Some(BloomFilter {
            bits: bytes,
            lines,
            probes,
        })
    }

    /// False means the key is certainly absent.
    #[inline]
    pub fn may_contain(&self, user_key: &[u8]) -> bool {
        let (line, a, delta) = locate(hash_key(user_key), self.lines);
        let base = line * BLOOM_LINE_BYTES;
        let Some(bits) = self.bits.get(base..base + BLOOM_LINE_BYTES) else {
            return true;
        };
        (0..self.probes).all(|i| {
            let bit = a.wrapping_add(i.wrapping_mul(delta)) >> PROBE_SHIFT;
            bits[(bit / 8) as usize] & (1 << (bit % 8)) != 0
        })
    }

    pub fn size_bytes(&self) -> usize {
        self.bits.len() + 1
    }
}
