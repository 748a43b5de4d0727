//! Helpers shared by the iterator tests: seeds, random multi-version data, a concatenating
//! merge operator, and a checker that drives an internal iterator with random moves against a
//! sorted vector.

use crate::extension::MergeOperator;
use crate::iterator::InternalIterator;
use crate::key::{compare_internal_keys, make_internal_key, make_seek_key, SeqNo, ValueKind};
use rand::rngs::StdRng;
use rand::Rng;

pub type Entries = Vec<(Vec<u8>, Vec<u8>)>;

/// The seed for a randomized test: `SIFT_SEED` if set, else a fresh random one.
pub fn seed() -> u64 {
    std::env::var("SIFT_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| rand::thread_rng().gen())
}

/// Joins the existing value and the operands with ','.
pub struct ConcatMerge;

impl MergeOperator for ConcatMerge {
    fn name(&self) -> &'static str {
        "concat"
    }
    fn full_merge(
        &self,
        _key: &[u8],
        existing: Option<&[u8]>,
        operands: &[&[u8]],
    ) -> Result<Vec<u8>, String> {
        Ok(existing
            .into_iter()
            .chain(operands.iter().copied())
            .collect::<Vec<_>>()
            .join(&b","[..]))
    }
}

/// User key number `i` of the key space; key 0 is the empty key.
pub fn user_key_of(i: usize) -> Vec<u8> {
    if i == 0 {
        Vec::new()
    } else {
        format!("k{i:03}").into_bytes()
    }
}

/// `count` versions over `key_space` user keys with unique sequence numbers `1..=count`,
/// sorted by internal key. Values name their sequence number.
pub fn random_versions(rng: &mut StdRng, key_space: usize, count: u64) -> Entries {
    let mut entries: Entries = (1..=count)
        .map(|seq| {
            let key = user_key_of(rng.gen_range(0..key_space));
            let kind = match rng.gen_range(0..10) {
                0..=4 => ValueKind::Put,
                5..=6 => ValueKind::Delete,
                _ => ValueKind::Merge,
            };
            let value = if kind == ValueKind::Delete {
                Vec::new()
            } else {
                format!("v{seq}").into_bytes()
            };
            (make_internal_key(&key, seq, kind), value)
        })
        .collect();
    entries.sort_by(|a, b| compare_internal_keys(&a.0, &b.0));
    entries
}

/// Deals `entries` at random among `children` lists, each staying sorted.
pub fn split_randomly(rng: &mut StdRng, entries: &Entries, children: usize) -> Vec<Entries> {
    let mut parts = vec![Vec::new(); children];
    for entry in entries {
        parts[rng.gen_range(0..children)].push(entry.clone());
    }
    parts
}

/// A random internal key near the data: any user key of the space (or just past it), any
/// sequence number, sometimes the largest internal key of the user key.
pub fn random_target(rng: &mut StdRng, key_space: usize, max_seq: SeqNo) -> Vec<u8> {
    let key = user_key_of(rng.gen_range(0..=key_space));
    if rng.gen_bool(0.1) {
        make_internal_key(&key, 0, ValueKind::Delete)
    } else {
        make_seek_key(&key, rng.gen_range(0..=max_seq + 1))
    }
}

/// Drives `iterator` with `steps` random moves and compares every position with `expected`.
pub fn check_internal_iterator(
    rng: &mut StdRng,
    iterator: &mut dyn InternalIterator,
    expected: &Entries,
    key_space: usize,
    steps: usize,
    context: &str,
) {
    let max_seq = expected.len() as SeqNo;
    // `expected.len()` means invalid.
    let mut position = expected.len();
    for step in 0..steps {
        let op = rng.gen_range(0..6);
        let target = random_target(rng, key_space, max_seq);
        match op {
            0 => {
                iterator.seek_to_first().unwrap();
                position = 0;
            }
            1 => {
                iterator.seek_to_last().unwrap();
                position = expected.len().saturating_sub(1);
            }
            2 => {
                iterator.seek(&target).unwrap();
                position =
                    expected.partition_point(|(k, _)| compare_internal_keys(k, &target).is_lt());
            }
            3 => {
                iterator.seek_for_prev(&target).unwrap();
                let count =
                    expected.partition_point(|(k, _)| compare_internal_keys(k, &target).is_le());
                position = count.checked_sub(1).unwrap_or(expected.len());
            }
            4 if position < expected.len() => {
                iterator.next().unwrap();
                position += 1;
            }
            5 if position < expected.len() => {
                iterator.prev().unwrap();
                position = position.checked_sub(1).unwrap_or(expected.len());
            }
            _ => continue,
        }
        let want = expected.get(position);
        let got = iterator
            .valid()
            .then(|| (iterator.key().to_vec(), iterator.value().to_vec()));
        assert_eq!(got.as_ref(), want, "{context}: step {step} op {op}");
    }
}
