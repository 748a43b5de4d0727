//! What the decoder fuzz targets share (in `sift-lsm`: `sstable/fuzz.rs`, `wal/fuzz.rs`,
//! `version/fuzz.rs`; in `sift-index`: `fuzz.rs`): inputs that are arbitrary bytes or a valid
//! encoding damaged a few times, and the number of cases to run. On the stable toolchain the targets run as property tests: proptest shrinks a
//! failing input and records its seed in `proptest-regressions/`, which every later run
//! replays first, so a crash found once stays a regression test. `SIFT_FUZZ_CASES` runs more
//! cases than the default (CI's bounded run).

#![forbid(unsafe_code)]

use proptest::prelude::*;

/// Cases per target: `SIFT_FUZZ_CASES`, or 2,048 (well under a second per target in release).
pub fn cases() -> u32 {
    std::env::var("SIFT_FUZZ_CASES")
        .ok()
        .and_then(|cases| cases.parse().ok())
        .unwrap_or(2048)
}

/// The proptest configuration of every fuzz target.
pub fn config() -> ProptestConfig {
    ProptestConfig {
        cases: cases(),
        // Shrinking a decoder input rarely needs long; keep a failure's report quick.
        max_shrink_iters: 2048,
        ..ProptestConfig::default()
    }
}

/// One damage to a byte string.
#[derive(Debug, Clone)]
pub enum Damage {
    /// Flips bit `bit % 8` of byte `at % len`.
    FlipBit { at: usize, bit: u8 },
    /// Sets byte `at % len` to `value`.
    SetByte { at: usize, value: u8 },
    /// Keeps the first `at % (len + 1)` bytes.
    Truncate { at: usize },
    /// Inserts `value` before byte `at % (len + 1)`.
    Insert { at: usize, value: u8 },
    /// Removes byte `at % len`.
    Remove { at: usize },
    /// Sets the 4 bytes at `at % len` to a little-endian `value` (lengths, counts, offsets).
    SetWord { at: usize, value: u32 },
}

impl Damage {
    pub fn apply(&self, bytes: &mut Vec<u8>) {
        let len = bytes.len();
        match *self {
            Damage::FlipBit { at, bit } if len > 0 => bytes[at % len] ^= 1 << (bit % 8),
            Damage::SetByte { at, value } if len > 0 => bytes[at % len] = value,
            Damage::Truncate { at } => bytes.truncate(at % (len + 1)),
            Damage::Insert { at, value } => bytes.insert(at % (len + 1), value),
            Damage::Remove { at } if len > 0 => {
                bytes.remove(at % len);
            }
            Damage::SetWord { at, value } if len > 0 => {
                for (i, byte) in value.to_le_bytes().into_iter().enumerate() {
                    if let Some(slot) = bytes.get_mut(at % len + i) {
                        *slot = byte;
                    }
                }
            }
            _ => {}
        }
    }
}

fn damage() -> impl Strategy<Value = Damage> {
    prop_oneof![
        (any::<usize>(), any::<u8>()).prop_map(|(at, bit)| Damage::FlipBit { at, bit }),
        (any::<usize>(), any::<u8>()).prop_map(|(at, value)| Damage::SetByte { at, value }),
        any::<usize>().prop_map(|at| Damage::Truncate { at }),
        (any::<usize>(), any::<u8>()).prop_map(|(at, value)| Damage::Insert { at, value }),
        any::<usize>().prop_map(|at| Damage::Remove { at }),
        (any::<usize>(), any::<u32>()).prop_map(|(at, value)| Damage::SetWord { at, value }),
    ]
}

/// Arbitrary bytes (up to `max_bytes`), or one of the valid `corpus` encodings with one to
/// four damages: the second reaches past the first checks of a decoder, where the bugs are.
pub fn input(corpus: Vec<Vec<u8>>, max_bytes: usize) -> impl Strategy<Value = Vec<u8>> {
    let count = corpus.len().max(1);
    prop_oneof![
        1 => prop::collection::vec(any::<u8>(), 0..max_bytes),
        3 => (0..count, prop::collection::vec(damage(), 1..5)).prop_map(move |(pick, damages)| {
            let mut bytes = corpus.get(pick).cloned().unwrap_or_default();
            for damage in &damages {
                damage.apply(&mut bytes);
            }
            bytes
        }),
    ]
}
