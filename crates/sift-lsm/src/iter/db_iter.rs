//! `DbIterator`: the user-facing iterator over one tree at one snapshot.
//!
//! It turns the internal-key stream of a merged component stack into at most one entry per
//! user key: the newest version with sequence `<= sequence`, hiding deleted keys and folding
//! merge operands onto the value below them. Direction handling follows LevelDB's DBIter:
//! - going forward, `inner` is at an entry of the current user key (or just past them);
//! - going backward, `inner` is just before all entries of the current user key.

use crate::extension::MergeOperator;
use crate::iterator::InternalIterator;
use crate::key::{
    pack_trailer, parse_internal_key, user_key, SeqNo, ValueKind, KIND_FOR_SEEK, SEQ_MAX,
};
use crate::{Error, Result};
use std::any::Any;
use std::sync::Arc;

/// Fills `buffer` with the internal key `(user_key, seq, kind)`, reusing its allocation.
/// `KIND_FOR_SEEK` with `seq` gives the smallest internal key of `user_key` visible at `seq`.
fn fill_key(buffer: &mut Vec<u8>, user_key: &[u8], seq: SeqNo, kind: u8) {
    buffer.clear();
    buffer.extend_from_slice(user_key);
    buffer.extend_from_slice(&pack_trailer(seq, kind).to_le_bytes());
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Direction {
    Forward,
    Reverse,
}

/// What the backward scan has gathered so far for the key it is on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Gathered {
    /// Nothing visible (no entry yet, or the newest so far is a delete).
    Nothing,
    /// A put, whose value is in `saved_value`.
    Put,
    /// Merge operands in `operands` (oldest first) over `merge_base`.
    Merge,
}

/// An iterator over one tree's live keys at a snapshot, in key order.
pub struct DbIterator {
    inner: Box<dyn InternalIterator>,
    sequence: SeqNo,
    merge_operator: Option<Arc<dyn MergeOperator>>,
    tree_name: Arc<str>,
    /// Inclusive.
    lower_bound: Option<Vec<u8>>,
    /// Exclusive.
    upper_bound: Option<Vec<u8>>,
    direction: Direction,
    valid: bool,
    /// User key of the current entry.
    saved_key: Vec<u8>,
    /// Value of the current entry unless `value_in_inner`.
    saved_value: Vec<u8>,
    /// Going forward over a put, the value is read from `inner` without copying.
    value_in_inner: bool,
    current_seq: SeqNo,
    /// Reused buffers for merge folding.
    operands: Vec<Vec<u8>>,
    merge_base: Option<Vec<u8>>,
    /// Reused buffer for seek keys.
    seek_key: Vec<u8>,
    /// State of the `Iterator` implementation: whether any positioning happened, and whether
    /// the current entry was already returned.
    positioned: bool,
    current_yielded: bool,
    /// Dropped last: keeps alive what `inner` reads from (memtables, version, files).
    _keep_alive: Box<dyn Any + Send + Sync>,
}

impl DbIterator {
    /// An iterator over `inner` at `snapshot`.
    pub fn new(
        inner: Box<dyn InternalIterator>,
        sequence: SeqNo,
        merge_operator: Option<Arc<dyn MergeOperator>>,
        tree_name: Arc<str>,
        lower_bound: Option<Vec<u8>>,
        upper_bound: Option<Vec<u8>>,
        keep_alive: Box<dyn Any + Send + Sync>,
    ) -> Self {
        DbIterator {
            inner,
            sequence: sequence.min(SEQ_MAX),
            merge_operator,
            tree_name,
            lower_bound,
            upper_bound,
            direction: Direction::Forward,
            valid: false,
            saved_key: Vec::new(),
            saved_value: Vec::new(),
            value_in_inner: false,
            current_seq: 0,
            operands: Vec::new(),
            merge_base: None,
            seek_key: Vec::new(),
            positioned: false,
            current_yielded: false,
            _keep_alive: keep_alive,
        }
    }

    /// Whether it is at an entry.
    pub fn valid(&self) -> bool {
        self.valid
    }

    /// The current user key. Empty when not valid.
    pub fn key(&self) -> &[u8] {
        if self.valid {
            &self.saved_key
        } else {
            &[]
        }
    }

    /// The current value. Empty when not valid.
    pub fn value(&self) -> &[u8] {
        if !self.valid {
            &[]
        } else if self.value_in_inner {
            self.inner.value()
        } else {
            &self.saved_value
        }
    }

    /// The sequence number of the visible version (for merges: of the newest operand).
    pub fn seq(&self) -> SeqNo {
        self.current_seq
    }

    /// Moves to the first key.
    pub fn seek_to_first(&mut self) -> Result<()> {
        self.start_positioning();
        if self.lower_bound.is_some() {
            return self.seek_clamped(&[]);
        }
        let result = self.inner.seek_to_first();
        let result = result.and_then(|()| self.find_next_user_entry());
        self.finish(result)
    }

    /// Moves to the last key.
    pub fn seek_to_last(&mut self) -> Result<()> {
        self.start_positioning();
        let result = match &self.upper_bound {
            Some(upper) => {
                // The smallest internal key of `upper`: everything before it is below the bound.
                fill_key(&mut self.seek_key, upper, SEQ_MAX, KIND_FOR_SEEK);
                self.inner.seek_for_prev(&self.seek_key)
            }
            None => self.inner.seek_to_last(),
        };
        let result = result.and_then(|()| self.find_prev_user_entry());
        self.finish(result)
    }

    /// Positions at the first visible key `>= user_key` (and within the bounds).
    pub fn seek(&mut self, user_key: &[u8]) -> Result<()> {
        self.start_positioning();
        self.seek_clamped(user_key)
    }

    /// Seeks forward to `max(user_key, lower_bound)`.
    fn seek_clamped(&mut self, user_key: &[u8]) -> Result<()> {
        // Taken out and put back so the target can borrow it while `self` is mutated.
        let lower_bound = self.lower_bound.take();
        let target = match &lower_bound {
            Some(lower) if lower.as_slice() > user_key => lower.as_slice(),
            _ => user_key,
        };
        let result = self.seek_forward_to(target);
        self.lower_bound = lower_bound;
        result
    }

    /// Positions at the last visible key `<= user_key` (and within the bounds).
    pub fn seek_for_prev(&mut self, user_key: &[u8]) -> Result<()> {
        self.start_positioning();
        if self
            .lower_bound
            .as_ref()
            .is_some_and(|lower| user_key < lower.as_slice())
        {
            self.valid = false;
            self.direction = Direction::Reverse;
            return Ok(());
        }
        match &self.upper_bound {
            Some(upper) if user_key >= upper.as_slice() => {
                fill_key(&mut self.seek_key, upper, SEQ_MAX, KIND_FOR_SEEK);
            }
            // The largest internal key of `user_key`: its oldest possible version.
            _ => fill_key(&mut self.seek_key, user_key, 0, ValueKind::Delete as u8),
        }
        let result = self.inner.seek_for_prev(&self.seek_key);
        let result = result.and_then(|()| self.find_prev_user_entry());
        self.finish(result)
    }

    /// Moves to the next visible key. Does nothing when not valid. (The name is the engine's
    /// cursor API; the std `Iterator` impl below builds on it.)
    #[allow(clippy::should_implement_trait)]
    pub fn next(&mut self) -> Result<()> {
        self.current_yielded = false;
        if !self.valid {
            return Ok(());
        }
        let result = self.step_forward();
        self.finish(result)
    }

    /// Moves to the previous visible key. Does nothing when not valid.
    pub fn prev(&mut self) -> Result<()> {
        self.current_yielded = false;
        if !self.valid {
            return Ok(());
        }
        let result = self.step_backward();
        self.finish(result)
    }

    fn start_positioning(&mut self) {
        self.positioned = true;
        self.current_yielded = false;
    }

    /// After an error the iterator is invalid.
    fn finish(&mut self, result: Result<()>) -> Result<()> {
        if result.is_err() {
            self.valid = false;
        }
        result
    }

    fn seek_forward_to(&mut self, target: &[u8]) -> Result<()> {
        if self
            .upper_bound
            .as_ref()
            .is_some_and(|upper| target >= upper.as_slice())
        {
            self.valid = false;
            self.direction = Direction::Forward;
            return Ok(());
        }
        // Lands directly on the newest version visible at `sequence`.
        fill_key(&mut self.seek_key, target, self.sequence, KIND_FOR_SEEK);
        let result = self.inner.seek(&self.seek_key);
        let result = result.and_then(|()| self.find_next_user_entry());
        self.finish(result)
    }

    fn step_forward(&mut self) -> Result<()> {
        if self.direction == Direction::Reverse {
            // `inner` is before the entries of `saved_key`; jump to the oldest possible version
            // of it, which is at or just before the first entry of the next key.
            fill_key(
                &mut self.seek_key,
                &self.saved_key,
                0,
                ValueKind::Delete as u8,
            );
            self.inner.seek(&self.seek_key)?;
            self.direction = Direction::Forward;
        }
        self.skip_entries_of_saved_key()?;
        self.find_next_user_entry()
    }

    fn step_backward(&mut self) -> Result<()> {
        if self.direction == Direction::Forward {
            // The last entry whose user key is below `saved_key`.
            fill_key(&mut self.seek_key, &self.saved_key, SEQ_MAX, KIND_FOR_SEEK);
            self.inner.seek_for_prev(&self.seek_key)?;
            self.direction = Direction::Reverse;
        }
        self.find_prev_user_entry()
    }

    fn skip_entries_of_saved_key(&mut self) -> Result<()> {
        while self.inner.valid() && user_key(self.inner.key()) == self.saved_key.as_slice() {
            self.inner.next()?;
        }
        Ok(())
    }

    fn malformed_key_error(&self) -> Error {
        Error::corruption(
            format!("<iterator over tree {}>", self.tree_name),
            0,
            format!("malformed internal key {:02x?}", self.inner.key()),
        )
    }

    /// Going forward from an entry of a new user key, finds the next visible entry.
    fn find_next_user_entry(&mut self) -> Result<()> {
        self.direction = Direction::Forward;
        self.valid = false;
        while self.inner.valid() {
            let Some(parsed) = parse_internal_key(self.inner.key()) else {
                return Err(self.malformed_key_error());
            };
            if self
                .upper_bound
                .as_ref()
                .is_some_and(|upper| parsed.user_key >= upper.as_slice())
            {
                return Ok(());
            }
            if parsed.seq > self.sequence {
                self.inner.next()?;
                continue;
            }
            // The first visible entry of a user key is its newest visible version.
            self.saved_key.clear();
            self.saved_key.extend_from_slice(parsed.user_key);
            self.current_seq = parsed.seq;
            match parsed.kind {
                ValueKind::Delete => self.skip_entries_of_saved_key()?,
                ValueKind::Put => {
                    self.value_in_inner = true;
                    self.valid = true;
                    return Ok(());
                }
                ValueKind::Merge => {
                    self.gather_merge_forward()?;
                    self.fold_merge()?;
                    self.value_in_inner = false;
                    self.valid = true;
                    return Ok(());
                }
            }
        }
        Ok(())
    }

    /// `inner` is at the newest visible merge operand of `saved_key`: collects the operands
    /// and the put below them (stopping at a delete), leaving `inner` past what it read.
    fn gather_merge_forward(&mut self) -> Result<()> {
        self.operands.clear();
        self.merge_base = None;
        self.operands.push(self.inner.value().to_vec());
        self.inner.next()?;
        while self.inner.valid() {
            let Some(parsed) = parse_internal_key(self.inner.key()) else {
                return Err(self.malformed_key_error());
            };
            if parsed.user_key != self.saved_key.as_slice() {
                break;
            }
            match parsed.kind {
                ValueKind::Merge => self.operands.push(self.inner.value().to_vec()),
                ValueKind::Put => {
                    self.merge_base = Some(self.inner.value().to_vec());
                    break;
                }
                ValueKind::Delete => break,
            }
            self.inner.next()?;
        }
        // Gathered newest first; the operator wants them oldest first.
        self.operands.reverse();
        Ok(())
    }

    /// Folds `operands` (oldest first) onto `merge_base` into `saved_value`.
    fn fold_merge(&mut self) -> Result<()> {
        let Some(operator) = &self.merge_operator else {
            return Err(Error::Merge {
                tree: self.tree_name.to_string(),
                detail: format!(
                    "key {:02x?} has merge operands but the tree has no merge operator",
                    self.saved_key
                ),
            });
        };
        let operands: Vec<&[u8]> = self.operands.iter().map(Vec::as_slice).collect();
        match operator.full_merge(&self.saved_key, self.merge_base.as_deref(), &operands) {
            Ok(value) => {
                self.saved_value = value;
                Ok(())
            }
            Err(detail) => Err(Error::Merge {
                tree: self.tree_name.to_string(),
                detail: format!("merge operator {:?} failed: {detail}", operator.name()),
            }),
        }
    }

    /// Going backward from just before the entries of the previous position, finds the
    /// previous visible user key. Entries of one user key arrive oldest first.
    fn find_prev_user_entry(&mut self) -> Result<()> {
        self.direction = Direction::Reverse;
        self.valid = false;
        let mut gathered = Gathered::Nothing;
        while self.inner.valid() {
            let Some(parsed) = parse_internal_key(self.inner.key()) else {
                return Err(self.malformed_key_error());
            };
            if parsed.seq <= self.sequence {
                if gathered != Gathered::Nothing && parsed.user_key < self.saved_key.as_slice() {
                    // Every entry of `saved_key` has been seen.
                    break;
                }
                if gathered == Gathered::Nothing
                    && self
                        .lower_bound
                        .as_ref()
                        .is_some_and(|lower| parsed.user_key < lower.as_slice())
                {
                    break;
                }
                match parsed.kind {
                    ValueKind::Delete => gathered = Gathered::Nothing,
                    ValueKind::Put => {
                        self.saved_value.clear();
                        self.saved_value.extend_from_slice(self.inner.value());
                        gathered = Gathered::Put;
                    }
                    ValueKind::Merge => {
                        match gathered {
                            Gathered::Nothing => {
                                self.operands.clear();
                                self.merge_base = None;
                            }
                            Gathered::Put => {
                                self.operands.clear();
                                self.merge_base = Some(std::mem::take(&mut self.saved_value));
                            }
                            Gathered::Merge => {}
                        }
                        self.operands.push(self.inner.value().to_vec());
                        gathered = Gathered::Merge;
                    }
                }
                if parsed.user_key != self.saved_key.as_slice() {
                    self.saved_key.clear();
                    self.saved_key.extend_from_slice(parsed.user_key);
                }
                self.current_seq = parsed.seq;
            }
            self.inner.prev()?;
        }
        match gathered {
            Gathered::Nothing => return Ok(()),
            Gathered::Put => {}
            Gathered::Merge => self.fold_merge()?,
        }
        self.value_in_inner = false;
        self.valid = true;
        Ok(())
    }
}

impl Iterator for DbIterator {
    type Item = Result<(Vec<u8>, Vec<u8>, SeqNo)>;

    /// Yields the current entry, then moves forward; starts at the first entry if the iterator
    /// was never positioned.
    fn next(&mut self) -> Option<Self::Item> {
        if !self.positioned {
            if let Err(error) = self.seek_to_first() {
                return Some(Err(error));
            }
        } else if self.current_yielded {
            if let Err(error) = DbIterator::next(self) {
                return Some(Err(error));
            }
        }
        if !self.valid {
            return None;
        }
        self.current_yielded = true;
        Some(Ok((
            self.key().to_vec(),
            self.value().to_vec(),
            self.current_seq,
        )))
    }
}

impl std::fmt::Debug for DbIterator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DbIterator")
            .field("tree", &self.tree_name)
            .field("sequence", &self.sequence)
            .field("valid", &self.valid)
            .field("key", &String::from_utf8_lossy(self.key()))
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::iter::test_support::{
        random_versions, seed, split_randomly, user_key_of, ConcatMerge, Entries,
    };
    use crate::iter::MergingIterator;
    use crate::iterator::VecIterator;
    use crate::key::make_internal_key;
    use crate::memtable::Memtable;
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};
    use std::collections::BTreeMap;

    /// What a user sees: key -> (value, seq), computed by brute force from all versions.
    fn model_at(data: &Entries, snapshot: SeqNo) -> BTreeMap<Vec<u8>, (Vec<u8>, SeqNo)> {
        type Versions = Vec<(SeqNo, ValueKind, Vec<u8>)>;
        let mut versions: BTreeMap<Vec<u8>, Versions> = BTreeMap::new();
        for (ikey, value) in data {
            let parsed = parse_internal_key(ikey).unwrap();
            if parsed.seq <= snapshot {
                versions.entry(parsed.user_key.to_vec()).or_default().push((
                    parsed.seq,
                    parsed.kind,
                    value.clone(),
                ));
            }
        }
        let mut visible = BTreeMap::new();
        for (key, mut list) in versions {
            list.sort_by_key(|version| std::cmp::Reverse(version.0));
            let newest_seq = list[0].0;
            let mut operands = Vec::new();
            let mut base = None;
            for (_, kind, value) in &list {
                match kind {
                    ValueKind::Merge => operands.push(value.clone()),
                    ValueKind::Put => {
                        base = Some(value.clone());
                        break;
                    }
                    ValueKind::Delete => break,
                }
            }
            let value = if operands.is_empty() {
                match base {
                    Some(value) => value,
                    None => continue,
                }
            } else {
                operands.reverse();
                base.into_iter()
                    .chain(operands)
                    .collect::<Vec<_>>()
                    .join(&b","[..])
            };
            visible.insert(key, (value, newest_seq));
        }
        visible
    }

    fn db_iterator(
        parts: Vec<Entries>,
        snapshot: SeqNo,
        merge_operator: Option<Arc<dyn MergeOperator>>,
        lower: Option<Vec<u8>>,
        upper: Option<Vec<u8>>,
    ) -> DbIterator {
        let mut parts = parts.into_iter();
        let mut children: Vec<Box<dyn InternalIterator>> = Vec::new();
        // The first (newest) component is a memtable holding tree 1, next to noise in the
        // neighbouring trees that must stay invisible.
        if let Some(first) = parts.next() {
            let memtable = Arc::new(Memtable::new(1));
            for (ikey, value) in &first {
                let parsed = parse_internal_key(ikey).unwrap();
                memtable.add(1, parsed.seq, parsed.kind, parsed.user_key, value);
                memtable.add(0, parsed.seq, ValueKind::Put, parsed.user_key, b"noise");
                memtable.add(2, parsed.seq, ValueKind::Put, b"", b"noise");
            }
            children.push(Box::new(memtable.iter(1)));
        }
        children.extend(parts.map(|p| Box::new(VecIterator::new(p)) as Box<dyn InternalIterator>));
        DbIterator::new(
            Box::new(MergingIterator::new(children)),
            snapshot,
            merge_operator,
            Arc::from("test"),
            lower,
            upper,
            Box::new(()),
        )
    }

    type Visible = Vec<(Vec<u8>, Vec<u8>, SeqNo)>;

    fn current(iterator: &DbIterator) -> Option<(Vec<u8>, Vec<u8>, SeqNo)> {
        iterator.valid().then(|| {
            (
                iterator.key().to_vec(),
                iterator.value().to_vec(),
                iterator.seq(),
            )
        })
    }

    #[test]
    fn matches_model_under_random_moves_with_and_without_bounds() {
        let seed = seed();
        println!("db iterator test seed {seed} (replay with SIFT_SEED={seed})");
        let mut rng = StdRng::seed_from_u64(seed);
        for trial in 0..150 {
            let key_space = rng.gen_range(1..40);
            let count = rng.gen_range(0..250);
            let data = random_versions(&mut rng, key_space, count);
            let children = rng.gen_range(1..=6);
            let parts = split_randomly(&mut rng, &data, children);
            let snapshot = rng.gen_range(0..=count + 1);
            let bound = |rng: &mut StdRng| {
                rng.gen_bool(0.4)
                    .then(|| user_key_of(rng.gen_range(0..=key_space)))
            };
            let (lower, upper) = (bound(&mut rng), bound(&mut rng));
            let expected: Visible = model_at(&data, snapshot)
                .into_iter()
                .filter(|(k, _)| {
                    lower.as_ref().is_none_or(|l| k >= l) && upper.as_ref().is_none_or(|u| k < u)
                })
                .map(|(k, (v, s))| (k, v, s))
                .collect();
            let merge: Arc<dyn MergeOperator> = Arc::new(ConcatMerge);
            let context = format!(
                "seed {seed} trial {trial} snapshot {snapshot} bounds {lower:?}..{upper:?}"
            );

            // The std `Iterator` from a fresh iterator yields everything.
            let iterator = db_iterator(
                parts.clone(),
                snapshot,
                Some(Arc::clone(&merge)),
                lower.clone(),
                upper.clone(),
            );
            let all: Visible = iterator.map(Result::unwrap).collect();
            assert_eq!(all, expected, "{context}");

            let mut iterator = db_iterator(parts, snapshot, Some(merge), lower, upper);
            // `expected.len()` means invalid.
            let mut position = expected.len();
            for step in 0..300 {
                let op = rng.gen_range(0..7);
                let target = user_key_of(rng.gen_range(0..=key_space));
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
                        position = expected.partition_point(|(k, _, _)| *k < target);
                    }
                    3 => {
                        iterator.seek_for_prev(&target).unwrap();
                        let count = expected.partition_point(|(k, _, _)| *k <= target);
                        position = count.checked_sub(1).unwrap_or(expected.len());
                    }
                    4 | 5 if position < expected.len() => {
                        iterator.next().unwrap();
                        position += 1;
                    }
                    6 if position < expected.len() => {
                        iterator.prev().unwrap();
                        position = position.checked_sub(1).unwrap_or(expected.len());
                    }
                    _ => continue,
                }
                assert_eq!(
                    current(&iterator),
                    expected.get(position).cloned(),
                    "{context} step {step} op {op} target {target:?}"
                );
            }

            // The std `Iterator` continues forward from the current position.
            iterator.seek_to_last().unwrap();
            iterator.prev().unwrap();
            let rest: Visible = iterator.by_ref().map(Result::unwrap).collect();
            // With fewer than two entries `prev` leaves the iterator invalid: nothing follows.
            let want = expected
                .len()
                .checked_sub(2)
                .map_or(Vec::new(), |from| expected[from..].to_vec());
            assert_eq!(rest, want, "{context}");
        }
    }

    fn single(entries: &[(&[u8], SeqNo, ValueKind, &[u8])]) -> Entries {
        let mut data: Entries = entries
            .iter()
            .map(|(k, s, kind, v)| (make_internal_key(k, *s, *kind), v.to_vec()))
            .collect();
        data.sort_by(|a, b| crate::key::compare_internal_keys(&a.0, &b.0));
        data
    }

    #[test]
    fn merge_without_operator_is_an_error() {
        let data = single(&[
            (b"a", 1, ValueKind::Put, b"x"),
            (b"b", 2, ValueKind::Merge, b"m"),
        ]);
        let mut iterator = db_iterator(vec![data.clone()], SEQ_MAX, None, None, None);
        iterator.seek_to_first().unwrap();
        assert_eq!(iterator.key(), b"a");
        let error = iterator.next().unwrap_err();
        assert!(
            matches!(&error, Error::Merge { tree, .. } if tree == "test"),
            "{error}"
        );
        assert!(!iterator.valid());
        let error = iterator.seek_to_last().unwrap_err();
        assert!(matches!(error, Error::Merge { .. }), "{error}");
        // Before the merge operand existed, there is nothing to merge.
        let mut iterator = db_iterator(vec![data], 1, None, None, None);
        let all: Vec<_> = iterator.by_ref().collect::<Result<_>>().unwrap();
        assert_eq!(all, vec![(b"a".to_vec(), b"x".to_vec(), 1)]);
    }

    struct RefusingMerge;
    impl MergeOperator for RefusingMerge {
        fn name(&self) -> &'static str {
            "refusing"
        }
        fn full_merge(
            &self,
            _key: &[u8],
            _existing: Option<&[u8]>,
            _operands: &[&[u8]],
        ) -> Result<Vec<u8>, String> {
            Err("operand out of range".to_owned())
        }
    }

    #[test]
    fn failing_merge_operator_is_an_error_and_iteration_stops() {
        let data = single(&[(b"a", 1, ValueKind::Merge, b"m")]);
        let mut iterator = db_iterator(
            vec![data],
            SEQ_MAX,
            Some(Arc::new(RefusingMerge)),
            None,
            None,
        );
        // Inherent `next` shadows the std method; call the std one explicitly.
        let first = Iterator::next(&mut iterator).unwrap();
        let error = first.unwrap_err();
        assert!(
            error.to_string().contains("operand out of range"),
            "{error}"
        );
        assert!(Iterator::next(&mut iterator).is_none());
    }

    #[test]
    fn malformed_internal_key_is_corruption() {
        // Too short to hold a trailer; behind an empty memtable (which cannot hold it).
        let data = vec![(b"ab".to_vec(), b"v".to_vec())];
        let mut iterator = db_iterator(vec![Vec::new(), data], SEQ_MAX, None, None, None);
        let error = iterator.seek_to_first().unwrap_err();
        assert!(error.is_corruption(), "{error}");
        assert!(!iterator.valid());
    }

    #[test]
    fn merges_fold_onto_put_and_stop_at_delete() {
        let data = single(&[
            (b"a", 1, ValueKind::Put, b"base"),
            (b"a", 2, ValueKind::Merge, b"m1"),
            (b"a", 3, ValueKind::Merge, b"m2"),
            (b"b", 4, ValueKind::Put, b"old"),
            (b"b", 5, ValueKind::Delete, b""),
            (b"b", 6, ValueKind::Merge, b"fresh"),
            (b"c", 7, ValueKind::Put, b"gone"),
            (b"c", 8, ValueKind::Delete, b""),
        ]);
        let merge: Option<Arc<dyn MergeOperator>> = Some(Arc::new(ConcatMerge));
        let want: Visible = vec![
            (b"a".to_vec(), b"base,m1,m2".to_vec(), 3),
            (b"b".to_vec(), b"fresh".to_vec(), 6),
        ];
        let mut iterator = db_iterator(vec![data.clone()], SEQ_MAX, merge.clone(), None, None);
        let forward: Visible = iterator.by_ref().collect::<Result<_>>().unwrap();
        assert_eq!(forward, want);
        let mut backward = Vec::new();
        iterator.seek_to_last().unwrap();
        while let Some(entry) = current(&iterator) {
            backward.push(entry);
            iterator.prev().unwrap();
        }
        backward.reverse();
        assert_eq!(backward, want);
        let mut iterator = db_iterator(vec![data], 5, merge, None, None);
        let at_five: Visible = iterator.by_ref().collect::<Result<_>>().unwrap();
        // At snapshot 5, "b" is deleted and "c" does not exist yet.
        assert_eq!(at_five, vec![(b"a".to_vec(), b"base,m1,m2".to_vec(), 3)]);
    }
}
