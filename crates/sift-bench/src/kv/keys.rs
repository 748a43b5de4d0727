//! Key and value generation, db_bench style: keys are numbers written as zero-padded decimal
//! of a fixed width (so byte order is numeric order), random key numbers come from a seeded
//! generator per (seed, operation, thread), values are slices of a buffer of half-compressible
//! pseudo-random bytes.

use super::BenchError;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// Writes key numbers as fixed-width, zero-padded decimal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KeyFormat {
    key_bytes: usize,
}

/// Number of decimal digits of `number` (1 for 0).
pub fn decimal_digits(number: u64) -> usize {
    let mut digits = 1;
    let mut rest = number / 10;
    while rest > 0 {
        digits += 1;
        rest /= 10;
    }
    digits
}

impl KeyFormat {
    /// A format for key numbers `0..key_count`; fails when `key_bytes` cannot hold the largest
    /// one (a truncated key would break the one-number-one-key mapping).
    pub fn new(key_bytes: usize, key_count: u64) -> Result<KeyFormat, BenchError> {
        let largest = key_count.saturating_sub(1);
        let needed = decimal_digits(largest);
        if key_bytes < needed {
            return Err(BenchError::new(format!(
                "--key-bytes {key_bytes} is too small: key number {largest} needs {needed} digits"
            )));
        }
        Ok(KeyFormat { key_bytes })
    }

    pub fn key_bytes(&self) -> usize {
        self.key_bytes
    }

    /// Writes `number` into `key` (which must be `key_bytes` long), zero-padded on the left.
    /// Numbers wider than the key keep their low digits; `new` rules that out for `0..n`.
    pub fn write(&self, number: u64, key: &mut [u8]) {
        key.fill(b'0');
        let mut rest = number;
        for byte in key.iter_mut().rev() {
            *byte = b'0' + (rest % 10) as u8;
            rest /= 10;
            if rest == 0 {
                break;
            }
        }
    }

    /// A new buffer holding the key of `number`.
    pub fn key(&self, number: u64) -> Vec<u8> {
        let mut key = vec![0; self.key_bytes];
        self.write(number, &mut key);
        key
    }
}

/// Mixes the run seed, an operation identifier and a thread index into one RNG seed
/// (splitmix64 finaliser), so each (operation, thread) gets its own reproducible stream.
pub fn stream_seed(seed: u64, operation_id: u64, thread_index: u64) -> u64 {
    let mut z = seed
        ^ operation_id.wrapping_mul(0x9E37_79B9_7F4A_7C15)
        ^ thread_index.wrapping_mul(0xD1B5_4A32_D192_ED03);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Uniformly random key numbers in `0..key_count`, reproducible from the seed.
#[derive(Debug)]
pub struct RandomKeys {
    rng: StdRng,
    key_count: u64,
}

impl RandomKeys {
    pub fn new(seed: u64, key_count: u64) -> RandomKeys {
        RandomKeys {
            rng: StdRng::seed_from_u64(seed),
            key_count: key_count.max(1),
        }
    }

    pub fn next_number(&mut self) -> u64 {
        self.rng.gen_range(0..self.key_count)
    }
}

/// db_bench's compression ratio: each 100-byte piece of the value buffer is 50 random
/// printable bytes repeated, so block compressors shrink values to about half.
const COMPRESSIBLE_PIECE_BYTES: usize = 100;
const RANDOM_BYTES_PER_PIECE: usize = 50;
const VALUE_BUFFER_BYTES_MIN: usize = 1 << 20;

/// Hands out values as consecutive slices of a pre-generated buffer (db_bench's
/// `RandomGenerator`), so generating a value costs nothing measurable.
#[derive(Debug)]
pub struct ValueGenerator {
    buffer: Vec<u8>,
    position: usize,
}

impl ValueGenerator {
    pub fn new(seed: u64, value_bytes: usize) -> ValueGenerator {
        let mut rng = StdRng::seed_from_u64(seed);
        let buffer_bytes = VALUE_BUFFER_BYTES_MIN.max(value_bytes);
        let mut buffer = Vec::with_capacity(buffer_bytes + COMPRESSIBLE_PIECE_BYTES);
        let mut random_part = [0_u8; RANDOM_BYTES_PER_PIECE];
        while buffer.len() < buffer_bytes {
            for byte in &mut random_part {
                *byte = rng.gen_range(b' '..=b'~');
            }
            let mut piece_bytes = 0;
            while piece_bytes < COMPRESSIBLE_PIECE_BYTES {
                let take = RANDOM_BYTES_PER_PIECE.min(COMPRESSIBLE_PIECE_BYTES - piece_bytes);
                buffer.extend_from_slice(&random_part[..take]);
                piece_bytes += take;
            }
        }
        buffer.truncate(buffer_bytes);
        ValueGenerator {
            buffer,
            position: 0,
        }
    }

    /// The next value of `value_bytes` bytes.
    pub fn next_value(&mut self, value_bytes: usize) -> &[u8] {
        if self.position + value_bytes > self.buffer.len() {
            self.position = 0;
        }
        let start = self.position;
        self.position += value_bytes;
        &self.buffer[start..start + value_bytes]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_fixed_width_zero_padded_decimal() {
        let format = KeyFormat::new(16, 1_000_000).unwrap();
        assert_eq!(format.key(0), b"0000000000000000");
        assert_eq!(format.key(42), b"0000000000000042");
        assert_eq!(format.key(999_999), b"0000000000999999");
        let exact = KeyFormat::new(3, 1000).unwrap();
        assert_eq!(exact.key(999), b"999");
        assert_eq!(exact.key(7), b"007");
        let wide = KeyFormat::new(24, 10).unwrap();
        assert_eq!(wide.key(u64::MAX), b"000018446744073709551615");
    }

    #[test]
    fn key_format_rejects_keys_too_short_for_the_count() {
        assert!(KeyFormat::new(3, 1001).is_err());
        assert!(KeyFormat::new(3, 1000).is_ok());
        assert!(KeyFormat::new(0, 1).is_err());
        assert!(KeyFormat::new(1, 1).is_ok());
        assert_eq!(decimal_digits(0), 1);
        assert_eq!(decimal_digits(9), 1);
        assert_eq!(decimal_digits(10), 2);
        assert_eq!(decimal_digits(u64::MAX), 20);
    }

    #[test]
    fn key_byte_order_is_numeric_order() {
        let seed = 0x5EED_0001;
        let format = KeyFormat::new(12, 1_000_000_000_000).unwrap();
        let mut rng = StdRng::seed_from_u64(seed);
        for _ in 0..10_000 {
            let a = rng.gen_range(0..1_000_000_000_000_u64);
            // Small gaps too, where carries and padding matter most.
            let b = if rng.gen_bool(0.5) {
                rng.gen_range(0..1_000_000_000_000_u64)
            } else {
                (a + rng.gen_range(0..20)).min(999_999_999_999)
            };
            assert_eq!(
                format.key(a).cmp(&format.key(b)),
                a.cmp(&b),
                "seed {seed}: {a} vs {b}"
            );
        }
    }

    #[test]
    fn random_keys_are_deterministic_by_seed_and_in_range() {
        let draw = |seed| {
            let mut keys = RandomKeys::new(seed, 1000);
            (0..500).map(|_| keys.next_number()).collect::<Vec<_>>()
        };
        assert_eq!(draw(7), draw(7));
        assert_ne!(draw(7), draw(8));
        assert!(draw(9).iter().all(|&k| k < 1000));
        // Uniform enough to reach both ends of the range.
        let mut keys = RandomKeys::new(1, 10);
        let mut seen = [false; 10];
        for _ in 0..1000 {
            seen[keys.next_number() as usize] = true;
        }
        assert!(seen.iter().all(|&s| s));
    }

    #[test]
    fn stream_seeds_differ_by_operation_and_thread() {
        let base = stream_seed(301, 1, 0);
        assert_eq!(base, stream_seed(301, 1, 0));
        assert_ne!(base, stream_seed(301, 2, 0));
        assert_ne!(base, stream_seed(301, 1, 1));
        assert_ne!(base, stream_seed(302, 1, 0));
        assert_ne!(stream_seed(0, 0, 1), stream_seed(0, 1, 0));
    }

    #[test]
    fn values_are_half_compressible_and_deterministic() {
        let mut generator = ValueGenerator::new(3, 100);
        let first = generator.next_value(100).to_vec();
        assert_eq!(first.len(), 100);
        assert_eq!(
            first[..50],
            first[50..],
            "each 100-byte piece repeats its random half"
        );
        assert!(first.iter().all(|b| (b' '..=b'~').contains(b)));
        let second = generator.next_value(100).to_vec();
        assert_ne!(first, second);
        let mut again = ValueGenerator::new(3, 100);
        assert_eq!(again.next_value(100), &first[..]);
        let mut other = ValueGenerator::new(4, 100);
        assert_ne!(other.next_value(100), &first[..]);
    }

    #[test]
    fn value_generator_wraps_and_serves_large_values() {
        let mut generator = ValueGenerator::new(5, 3 << 20);
        for _ in 0..5 {
            assert_eq!(generator.next_value(3 << 20).len(), 3 << 20);
        }
        let mut small = ValueGenerator::new(5, 1000);
        let first = small.next_value(1000).to_vec();
        // 1048 whole values fit in the 1 MiB buffer; the 1049th wraps.
        for _ in 1..(VALUE_BUFFER_BYTES_MIN / 1000) {
            small.next_value(1000);
        }
        // Wrapped to the start of the buffer.
        assert_eq!(small.next_value(1000), &first[..]);
        assert!(small.next_value(0).is_empty());
    }
}
