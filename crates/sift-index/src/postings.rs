//! Posting lists of the `eager` and `lazy` index kinds, and the merge operator that combines
//! `lazy` fragments.
//!
//! A list (or fragment) is `count: varint64 | posting*`, each posting
//! `kind: u8 | pk_len: varint64 | pk | seq: varint64`, kind 0 = add, 1 = remove. An add says
//! "the document version `seq` of `pk` carried this value"; a remove cancels exactly the add with
//! the same `(pk, seq)` (it is written by sync-full maintenance and by read repair). Lists are
//! kept newest first (by `seq`). Layout: `docs/format/index-encodings.md`.

use crate::error::{IndexError, Result};
use sift_lsm::extension::MergeOperator;
use sift_lsm::extension::{put_varint64, Decoder};
use sift_lsm::SeqNo;
use std::collections::{HashMap, HashSet};

pub const POSTING_ADD: u8 = 0;
pub const POSTING_REMOVE: u8 = 1;

/// The name the merge operator is registered under (stable across restarts).
pub const POSTING_MERGE_OPERATOR_NAME: &str = "sift.postings.v1";

/// One posting: a document version filed under a value, or the removal of one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Posting {
    /// The document's primary key.
    pub pk: Vec<u8>,
    /// The version's sequence number.
    pub seq: SeqNo,
    /// A removal (lazy fragments), not an addition.
    pub remove: bool,
}

impl Posting {
    /// `pk`'s version `seq` carries the value.
    pub fn add(pk: &[u8], seq: SeqNo) -> Posting {
        Posting {
            pk: pk.to_vec(),
            seq,
            remove: false,
        }
    }
    /// `pk`'s version `seq` no longer counts.
    pub fn remove(pk: &[u8], seq: SeqNo) -> Posting {
        Posting {
            pk: pk.to_vec(),
            seq,
            remove: true,
        }
    }
}

/// A posting list's stored bytes.
pub fn encode_postings(postings: &[Posting]) -> Vec<u8> {
    let mut out = Vec::with_capacity(1 + postings.len() * 16);
    put_varint64(&mut out, postings.len() as u64);
    for posting in postings {
        out.push(if posting.remove {
            POSTING_REMOVE
        } else {
            POSTING_ADD
        });
        put_varint64(&mut out, posting.pk.len() as u64);
        out.extend_from_slice(&posting.pk);
        put_varint64(&mut out, posting.seq);
    }
    out
}

/// The postings of stored bytes, in order.
pub fn decode_postings(bytes: &[u8]) -> Result<Vec<Posting>> {
    let mut decoder = Decoder::new(bytes);
    let count = decoder
        .varint64()
        .ok_or_else(|| IndexError::corrupt(0, "posting list: bad count varint"))?;
    // Each posting takes at least 3 bytes, so a larger count is corrupt (and not allocated).
    if count > bytes.len() as u64 {
        return Err(IndexError::corrupt(
            0,
            format!(
                "posting list claims {count} postings in {} bytes",
                bytes.len()
            ),
        ));
    }
    let mut postings = Vec::with_capacity(count as usize);
    for index in 0..count {
        let at = decoder.position();
        let bad = |what: &str| IndexError::corrupt(at, format!("posting {index}: {what}"));
        let kind = decoder.u8().ok_or_else(|| bad("missing kind byte"))?;
        let remove = match kind {
            POSTING_ADD => false,
            POSTING_REMOVE => true,
            other => return Err(bad(&format!("unknown kind byte {other}"))),
        };
        let pk_len = decoder.varint64().ok_or_else(|| bad("bad pk length"))?;
        let pk = usize::try_from(pk_len)
            .ok()
            .and_then(|n| decoder.bytes(n))
            .ok_or_else(|| bad("pk runs past the end"))?;
        let seq = decoder
            .varint64()
            .ok_or_else(|| bad("bad sequence number"))?;
        postings.push(Posting {
            pk: pk.to_vec(),
            seq,
            remove,
        });
    }
    if !decoder.is_empty() {
        return Err(IndexError::corrupt(
            decoder.position(),
            "bytes after the last posting",
        ));
    }
    Ok(postings)
}

/// One posting borrowed from the encoded list (no allocation).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PostingRef<'a> {
    pub pk: &'a [u8],
    pub seq: SeqNo,
    pub remove: bool,
}

/// Postings of an encoded list in stored order, borrowing each pk: the allocation-free form of
/// [`decode_postings`], with the same corruption errors and offsets. After the last posting it
/// yields one error if bytes are left over; after any error it yields nothing more. A reader
/// that stops early leaves the unread rest unchecked.
pub struct PostingIter<'a> {
    decoder: Decoder<'a>,
    total: u64,
    index: u64,
    done: bool,
}

impl<'a> PostingIter<'a> {
    /// Reads the count; fails as [`decode_postings`] does on a bad or oversized count.
    pub fn new(bytes: &'a [u8]) -> Result<PostingIter<'a>> {
        let mut decoder = Decoder::new(bytes);
        let total = decoder
            .varint64()
            .ok_or_else(|| IndexError::corrupt(0, "posting list: bad count varint"))?;
        if total > bytes.len() as u64 {
            return Err(IndexError::corrupt(
                0,
                format!(
                    "posting list claims {total} postings in {} bytes",
                    bytes.len()
                ),
            ));
        }
        Ok(PostingIter {
            decoder,
            total,
            index: 0,
            done: false,
        })
    }

    /// Bytes of the list read so far (the offset of the next posting).
    pub fn offset(&self) -> usize {
        self.decoder.position()
    }

    fn read_one(&mut self) -> Result<PostingRef<'a>> {
        let at = self.decoder.position();
        let index = self.index;
        let bad = |what: &str| IndexError::corrupt(at, format!("posting {index}: {what}"));
        let kind = self.decoder.u8().ok_or_else(|| bad("missing kind byte"))?;
        let remove = match kind {
            POSTING_ADD => false,
            POSTING_REMOVE => true,
            other => return Err(bad(&format!("unknown kind byte {other}"))),
        };
        let pk_len = self
            .decoder
            .varint64()
            .ok_or_else(|| bad("bad pk length"))?;
        let pk = usize::try_from(pk_len)
            .ok()
            .and_then(|n| self.decoder.bytes(n))
            .ok_or_else(|| bad("pk runs past the end"))?;
        let seq = self
            .decoder
            .varint64()
            .ok_or_else(|| bad("bad sequence number"))?;
        Ok(PostingRef { pk, seq, remove })
    }
}

impl<'a> Iterator for PostingIter<'a> {
    type Item = Result<PostingRef<'a>>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        if self.index == self.total {
            self.done = true;
            if self.decoder.is_empty() {
                return None;
            }
            return Some(Err(IndexError::corrupt(
                self.decoder.position(),
                "bytes after the last posting",
            )));
        }
        let posting = self.read_one();
        self.index += 1;
        if posting.is_err() {
            self.done = true;
        }
        Some(posting)
    }
}

/// Combines fragments (oldest first) into one list, newest first: a remove cancels the add with
/// the same `(pk, seq)`; of several adds of one pk only the newest stays (an older version of a
/// document is stale whatever lies below). `keep_removes`: removes that cancelled nothing are
/// kept, because the add they target may sit in an older component not part of this merge.
pub fn combine(fragments: &[Vec<Posting>], keep_removes: bool) -> Vec<Posting> {
    let removes: HashSet<(&[u8], SeqNo)> = fragments
        .iter()
        .flatten()
        .filter(|p| p.remove)
        .map(|p| (p.pk.as_slice(), p.seq))
        .collect();
    let mut newest_add: HashMap<&[u8], SeqNo> = HashMap::new();
    let mut cancelled: HashSet<(&[u8], SeqNo)> = HashSet::new();
    for posting in fragments.iter().flatten().filter(|p| !p.remove) {
        let key = (posting.pk.as_slice(), posting.seq);
        if removes.contains(&key) {
            cancelled.insert(key);
            continue;
        }
        let entry = newest_add.entry(posting.pk.as_slice()).or_insert(0);
        *entry = (*entry).max(posting.seq);
    }
    let mut out: Vec<Posting> = newest_add
        .into_iter()
        .map(|(pk, seq)| Posting::add(pk, seq))
        .collect();
    if keep_removes {
        out.extend(
            removes
                .into_iter()
                .filter(|key| !cancelled.contains(key))
                .map(|(pk, seq)| Posting::remove(pk, seq)),
        );
    }
    // Newest first; removes after adds of the same seq; pk breaks ties (deterministic bytes).
    out.sort_by(|a, b| {
        b.seq
            .cmp(&a.seq)
            .then(a.remove.cmp(&b.remove))
            .then_with(|| a.pk.cmp(&b.pk))
    });
    out
}

/// The merge operator of `lazy` index trees.
#[derive(Debug, Default)]
pub struct PostingMergeOperator;

impl MergeOperator for PostingMergeOperator {
    fn name(&self) -> &str {
        POSTING_MERGE_OPERATOR_NAME
    }

    fn full_merge(
        &self,
        _key: &[u8],
        existing: Option<&[u8]>,
        operands: &[&[u8]],
    ) -> std::result::Result<Vec<u8>, String> {
        let mut fragments = Vec::with_capacity(operands.len() + 1);
        if let Some(existing) = existing {
            fragments.push(decode_postings(existing).map_err(|e| e.to_string())?);
        }
        for operand in operands {
            fragments.push(decode_postings(operand).map_err(|e| e.to_string())?);
        }
        // Nothing lies below a full merge, so unmatched removes can go.
        Ok(encode_postings(&combine(&fragments, false)))
    }

    fn partial_merge(&self, _key: &[u8], operands: &[&[u8]]) -> Option<Vec<u8>> {
        let fragments: Vec<Vec<Posting>> = operands
            .iter()
            .map(|operand| decode_postings(operand))
            .collect::<Result<_>>()
            .ok()?;
        Some(encode_postings(&combine(&fragments, true)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_corruption() {
        let list = vec![Posting::add(b"a", 7), Posting::remove(b"\0b", 3)];
        let bytes = encode_postings(&list);
        assert_eq!(decode_postings(&bytes).unwrap(), list);
        assert!(decode_postings(&bytes[..bytes.len() - 1]).is_err());
        let mut trailing = bytes.clone();
        trailing.push(0);
        assert!(decode_postings(&trailing).is_err());
        assert!(decode_postings(&[0xFF, 0xFF, 0xFF, 0xFF, 0x0F]).is_err());
    }

    /// The borrowing iterator agrees with `decode_postings` (postings, or the same error with
    /// the same offset) on valid lists, truncations, flipped bytes and random bytes.
    #[test]
    fn borrowing_iterator_matches_decode_postings() {
        use rand::rngs::StdRng;
        use rand::{Rng, SeedableRng};
        fn through_iterator(bytes: &[u8]) -> Result<Vec<Posting>> {
            PostingIter::new(bytes)?
                .map(|posting| {
                    posting.map(|p| Posting {
                        pk: p.pk.to_vec(),
                        seq: p.seq,
                        remove: p.remove,
                    })
                })
                .collect()
        }
        fn check(bytes: &[u8], seed: u64) {
            let expected = decode_postings(bytes).map_err(|e| e.to_string());
            let got = through_iterator(bytes).map_err(|e| e.to_string());
            assert_eq!(got, expected, "seed {seed}, bytes {bytes:?}");
        }
        let seed = 0x5eed_0003;
        let mut rng = StdRng::seed_from_u64(seed);
        for round in 0..2000 {
            let count = rng.gen_range(0..8);
            let list: Vec<Posting> = (0..count)
                .map(|_| {
                    let pk: Vec<u8> = (0..rng.gen_range(0..6)).map(|_| rng.gen()).collect();
                    let bits = rng.gen_range(1..60);
                    let seq = rng.gen_range(0..1u64 << bits);
                    Posting {
                        pk,
                        seq,
                        remove: rng.gen_bool(0.3),
                    }
                })
                .collect();
            let bytes = encode_postings(&list);
            check(&bytes, seed + round);
            assert_eq!(through_iterator(&bytes).unwrap(), list, "seed {seed}");
            let cut = rng.gen_range(0..bytes.len());
            check(&bytes[..cut], seed + round);
            let mut flipped = bytes.clone();
            let at = rng.gen_range(0..flipped.len());
            flipped[at] = rng.gen();
            check(&flipped, seed + round);
            let mut trailing = bytes.clone();
            trailing.push(rng.gen());
            check(&trailing, seed + round);
            let random: Vec<u8> = (0..rng.gen_range(0..24)).map(|_| rng.gen()).collect();
            check(&random, seed + round);
        }
    }

    /// What the lazy LOOKUP's stream relies on (`lazy/point.rs`): every list the merge
    /// operator writes, full or partial, is newest first, with the removes of a seq after its
    /// adds — whatever order its operands came in.
    #[test]
    fn merge_operator_writes_lists_newest_first() {
        use rand::rngs::StdRng;
        use rand::{Rng, SeedableRng};
        let seed = 0x5eed_0004;
        let mut rng = StdRng::seed_from_u64(seed);
        let operator = PostingMergeOperator;
        for round in 0..500 {
            let operands: Vec<Vec<u8>> = (0..rng.gen_range(1..6))
                .map(|_| {
                    let list: Vec<Posting> = (0..rng.gen_range(0..8))
                        .map(|_| {
                            let pk = [rng.gen_range(b'a'..b'f')];
                            let seq = rng.gen_range(0..12);
                            if rng.gen_bool(0.3) {
                                Posting::remove(&pk, seq)
                            } else {
                                Posting::add(&pk, seq)
                            }
                        })
                        .collect();
                    encode_postings(&list) // any order: operands come from anywhere
                })
                .collect();
            let refs: Vec<&[u8]> = operands.iter().map(Vec::as_slice).collect();
            let existing = rng.gen_bool(0.5).then(|| refs[0]);
            let full = operator.full_merge(b"k", existing, &refs[1..]).unwrap();
            let partial = operator.partial_merge(b"k", &refs).unwrap();
            for merged in [full, partial] {
                let postings = decode_postings(&merged).unwrap();
                for pair in postings.windows(2) {
                    let (a, b) = (&pair[0], &pair[1]);
                    assert!(
                        a.seq > b.seq || (a.seq == b.seq && (!a.remove || b.remove)),
                        "seed {seed} round {round}: {postings:?}"
                    );
                }
            }
        }
    }

    #[test]
    fn combine_cancels_dedupes_and_orders() {
        let older = vec![Posting::add(b"a", 1), Posting::add(b"b", 2)];
        let newer = vec![
            Posting::remove(b"b", 2),
            Posting::add(b"a", 5),
            Posting::remove(b"z", 9),
        ];
        let merged = combine(&[older.clone(), newer.clone()], true);
        assert_eq!(
            merged,
            vec![Posting::remove(b"z", 9), Posting::add(b"a", 5)]
        );
        let merged = combine(&[older, newer], false);
        assert_eq!(merged, vec![Posting::add(b"a", 5)]);
    }
}
