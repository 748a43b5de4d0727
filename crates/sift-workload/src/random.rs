//! The generator's own pseudo-random source: xoshiro256++ seeded through SplitMix64.
//!
//! Written out here (instead of `rand::rngs::StdRng`) so that a seed produces the same documents
//! and operations forever, whatever version of `rand` the workspace moves to: benchmark data sets
//! are identified by their seed.

/// xoshiro256++ (Blackman and Vigna), 256 bits of state, period 2^256 - 1.
#[derive(Debug, Clone)]
pub struct Random {
    state: [u64; 4],
}

/// One SplitMix64 step: used to expand a 64-bit seed into independent states.
fn split_mix(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

impl Random {
    /// A source for `seed`; `stream` selects one of many independent sequences for the same seed
    /// (the tweet generator draws users, times, text and the other attributes from separate
    /// streams so that, for example, changing the text length leaves the user sequence as is).
    pub fn new(seed: u64, stream: u64) -> Self {
        let mut mixer = seed ^ stream.wrapping_mul(0xD1B5_4A32_D192_ED03);
        let mut state = [0u64; 4];
        for word in &mut state {
            *word = split_mix(&mut mixer);
        }
        // The all-zero state is the one fixed point of xoshiro; SplitMix never yields four zeros
        // in a row, but keep the guarantee explicit.
        if state == [0; 4] {
            state[0] = 1;
        }
        Self { state }
    }

    /// The next 64 uniformly random bits.
    pub fn next_u64(&mut self) -> u64 {
        let [s0, s1, s2, s3] = self.state;
        let result = s0.wrapping_add(s3).rotate_left(23).wrapping_add(s0);
        let t = s1 << 17;
        let mut next = [s0, s1, s2 ^ s0, s3 ^ s1];
        next[1] ^= next[2];
        next[0] ^= next[3];
        next[2] ^= t;
        next[3] = next[3].rotate_left(45);
        self.state = next;
        result
    }

    /// A uniform integer in `0..bound` (`bound` > 0), without modulo bias (Lemire's method).
    pub fn below(&mut self, bound: u64) -> u64 {
        debug_assert!(bound > 0);
        let bound = bound.max(1);
        let mut product = u128::from(self.next_u64()) * u128::from(bound);
        let mut low = product as u64;
        if low < bound {
            let threshold = bound.wrapping_neg() % bound;
            while low < threshold {
                product = u128::from(self.next_u64()) * u128::from(bound);
                low = product as u64;
            }
        }
        (product >> 64) as u64
    }

    /// A uniform integer in `low..=high` (`low <= high`).
    pub fn in_range(&mut self, low: u64, high: u64) -> u64 {
        let span = high.saturating_sub(low);
        if span == u64::MAX {
            return self.next_u64();
        }
        low + self.below(span + 1)
    }

    /// A uniform float in `[0, 1)` with 53 random bits.
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_same_sequence_and_streams_differ() {
        let mut a = Random::new(7, 0);
        let mut b = Random::new(7, 0);
        let mut c = Random::new(7, 1);
        let from_a: Vec<u64> = (0..16).map(|_| a.next_u64()).collect();
        let from_b: Vec<u64> = (0..16).map(|_| b.next_u64()).collect();
        let from_c: Vec<u64> = (0..16).map(|_| c.next_u64()).collect();
        assert_eq!(from_a, from_b);
        assert_ne!(from_a, from_c);
    }

    #[test]
    fn below_is_in_bounds_and_roughly_uniform() {
        let mut random = Random::new(1, 2);
        let mut counts = [0u32; 7];
        for _ in 0..70_000 {
            let value = random.below(7);
            counts[value as usize] += 1;
        }
        for count in counts {
            assert!((9_000..11_000).contains(&count), "{counts:?}");
        }
        for _ in 0..1000 {
            let value = random.in_range(5, 9);
            assert!((5..=9).contains(&value));
            let unit = random.unit();
            assert!((0.0..1.0).contains(&unit));
        }
        assert_eq!(random.in_range(3, 3), 3);
    }
}
