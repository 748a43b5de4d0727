//! The compaction iterator: decides, entry by entry, what a flush or compaction writes out.
//!
//! It reads all inputs of a job merged in internal-key order and yields the entries to write.
//! For each user key it walks the versions newest first and splits them into snapshot
//! *stripes*: a version with sequence `s` belongs to the stripe of the smallest live snapshot
//! `>= s`, or to the top stripe (the latest state) if there is none. Every reader sees, per
//! stripe, at most the newest version plus whatever merge operands stack on top of it, so:
//!
//! - the newest Put of a stripe is kept, every older version in that stripe is dropped
//!   (`DropReason::Shadowed`);
//! - the newest Delete of a stripe is kept, unless no snapshot is older than it and no older
//!   version can exist below the output level (`DropReason::TombstoneAtBottom`);
//! - a run of merge operands at the top of a stripe is folded onto the Put/Delete under it in
//!   the same stripe, or onto nothing when the key's versions end and nothing can be below;
//!   otherwise the operands are partially merged if the operator can, or kept as they are.
//!   Folding never crosses a stripe boundary.
//!
//! Sequence numbers are user-visible in Sift and are never rewritten: a merge result carries
//! the sequence number of the newest operand it folds. Every dropped entry is reported to every
//! compaction observer exactly once, in input order; folded entries are combined, not dropped,
//! and are not reported.
//!
//! A version retention floor `f` (`CompactionParams::retain_above`, see
//! [`crate::snapshot::VersionRetention`]) reads as a snapshot at `f` plus one at every sequence
//! number above it: each version above `f` is a stripe of its own, so it is kept as it is.
//!
//! The iterator streams: it buffers only the pending merge operands of the current stripe.

use std::collections::VecDeque;
use std::sync::Arc;

use crate::extension::{CompactionObserver, DropReason, DroppedEntry, JobKind, MergeOperator};
use crate::iterator::InternalIterator;
use crate::key::{make_internal_key, parse_internal_key, SeqNo, TreeId, ValueKind};
use crate::write_batch::WriteBatch;
use crate::{Error, Result};

/// Everything the compaction iterator needs to know about the job.
pub struct CompactionParams<'a> {
    pub tree: TreeId,
    pub tree_name: Arc<str>,
    /// Sequence numbers of live snapshots, ascending (sorted and deduplicated again by `new`).
    pub snapshots: Vec<SeqNo>,
    /// Keep every version above this sequence number, and the newest at or below it.
    pub retain_above: Option<SeqNo>,
    /// Whether older versions of `user_key` may exist in levels below the output (for
    /// flushes: always true). Called at most once per user key.
    pub key_may_exist_below: &'a dyn Fn(&[u8]) -> bool,
    pub merge_operator: Option<Arc<dyn MergeOperator>>,
    pub observers: &'a [Arc<dyn CompactionObserver>],
    pub job: JobKind,
}

/// What a job did with its input.
///
/// Accounting identity once the iterator is exhausted:
/// `entries_in = entries_out - merge_results + dropped_shadowed + dropped_tombstones
///  + merged_operands + merge_bases_folded`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CompactionCounts {
    /// Entries read from the input.
    pub entries_in: u64,
    /// Entries handed out by `next_entry` so far.
    pub entries_out: u64,
    /// Entries dropped because a newer version in the same stripe hides them.
    pub dropped_shadowed: u64,
    /// Tombstones dropped at the bottom of the tree.
    pub dropped_tombstones: u64,
    /// Merge operands folded into a full or partial merge result.
    pub merged_operands: u64,
    /// Puts and Deletes that merge operands were folded onto.
    pub merge_bases_folded: u64,
    /// Entries written that are the result of a full or partial merge.
    pub merge_results: u64,
}

/// Where the walk through the current stripe of the current user key stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum StripeState {
    /// No version of this stripe seen yet.
    Empty,
    /// Only merge operands seen so far (collected in `KeyState::operands`).
    Merging,
    /// The stripe's newest Put/Delete (or a fold result) is decided; the rest is shadowed.
    Covered,
}

/// The user key being processed.
struct KeyState {
    user_key: Vec<u8>,
    /// Sequence number of the previous version of this key, to check the input order.
    last_seq: SeqNo,
    /// See `Core::stripe_of`.
    stripe: u64,
    state: StripeState,
    /// Pending merge operands of the current stripe, newest first.
    operands: Vec<(SeqNo, Vec<u8>)>,
    /// Cached answer of `key_may_exist_below` for this key.
    may_exist_below: Option<bool>,
}

/// Everything except the input, so that the input's current key and value can be borrowed
/// while the state changes.
struct Core<'a> {
    params: CompactionParams<'a>,
    key: KeyState,
    has_key: bool,
    ready: VecDeque<(Vec<u8>, Vec<u8>)>,
    emitted: WriteBatch,
    counts: CompactionCounts,
}

/// Yields the entries a flush or compaction writes, in internal-key order.
pub struct CompactionIterator<'a> {
    input: Box<dyn InternalIterator + 'a>,
    core: Core<'a>,
    started: bool,
    finished: bool,
    /// After an error the iterator stays failed and returns a copy of it.
    failed: Option<Error>,
}

impl<'a> CompactionIterator<'a> {
    /// `input` is all inputs of the job merged in internal-key order; the iterator positions it
    /// with `seek_to_first` on the first call to `next_entry`.
    pub fn new(input: Box<dyn InternalIterator + 'a>, mut params: CompactionParams<'a>) -> Self {
        if let Some(floor) = params.retain_above {
            params.snapshots.push(floor);
        }
        params.snapshots.sort_unstable();
        params.snapshots.dedup();
        CompactionIterator {
            input,
            core: Core {
                params,
                key: KeyState {
                    user_key: Vec::new(),
                    last_seq: 0,
                    stripe: 0,
                    state: StripeState::Empty,
                    operands: Vec::new(),
                    may_exist_below: None,
                },
                has_key: false,
                ready: VecDeque::new(),
                emitted: WriteBatch::new(),
                counts: CompactionCounts::default(),
            },
            started: false,
            finished: false,
            failed: None,
        }
    }

    /// The next entry to write as owned `(internal key, value)`, in internal-key order; `None`
    /// at the end. Errors: the input's, a failed `full_merge` (`Error::Merge`), or input that is
    /// not in internal-key order (`Error::Corruption`). After an error every call fails.
    pub fn next_entry(&mut self) -> Result<Option<(Vec<u8>, Vec<u8>)>> {
        if let Some(error) = &self.failed {
            return Err(error.duplicate());
        }
        match self.advance() {
            Ok(entry) => Ok(entry),
            Err(error) => {
                self.failed = Some(error.duplicate());
                Err(error)
            }
        }
    }

    /// Entries observers emitted and not taken yet.
    pub fn emitted_len(&self) -> usize {
        self.core.emitted.len()
    }

    /// Takes the writes observers emitted so far.
    pub fn emitted(&mut self) -> WriteBatch {
        std::mem::take(&mut self.core.emitted)
    }

    #[cfg(test)]
    pub fn counts(&self) -> CompactionCounts {
        self.core.counts
    }

    fn advance(&mut self) -> Result<Option<(Vec<u8>, Vec<u8>)>> {
        loop {
            if let Some(entry) = self.core.ready.pop_front() {
                self.core.counts.entries_out += 1;
                return Ok(Some(entry));
            }
            if self.finished {
                return Ok(None);
            }
            if !self.started {
                self.input.seek_to_first()?;
                self.started = true;
            }
            if self.input.valid() {
                self.core.process(self.input.key(), self.input.value())?;
                self.input.next()?;
            } else {
                self.core.finish_key()?;
                self.finished = true;
            }
        }
    }
}

impl Core<'_> {
    /// The stripe of a version: index of the smallest snapshot `>= seq`, or the top stripe
    /// (`snapshots.len()`); above a retention floor, a stripe per sequence number (numbers
    /// past the top stripe; sequence numbers stay far below `u64::MAX`).
    fn stripe_of(&self, seq: SeqNo) -> u64 {
        let snapshots = &self.params.snapshots;
        if self.params.retain_above.is_some_and(|floor| seq > floor) {
            return (snapshots.len() as u64 + 1).saturating_add(seq);
        }
        snapshots.partition_point(|&snapshot| snapshot < seq) as u64
    }

    fn input_corruption(&self, message: &str) -> Error {
        // The merged input does not know which file an entry came from; the offset is the
        // entry's position in the merged input.
        Error::corruption(
            format!("<compaction input of tree {}>", self.params.tree_name),
            self.counts.entries_in.saturating_sub(1),
            format!("{message} (offset is the entry's position in the merged compaction input)"),
        )
    }

    fn process(&mut self, internal_key: &[u8], value: &[u8]) -> Result<()> {
        self.counts.entries_in += 1;
        let parsed = parse_internal_key(internal_key)
            .ok_or_else(|| self.input_corruption("unparseable internal key"))?;
        let seq = parsed.seq;
        let stripe = self.stripe_of(seq);
        if !self.has_key || parsed.user_key != self.key.user_key.as_slice() {
            if self.has_key && parsed.user_key < self.key.user_key.as_slice() {
                return Err(self.input_corruption("user keys out of order"));
            }
            self.finish_key()?;
            self.key.user_key.clear();
            self.key.user_key.extend_from_slice(parsed.user_key);
            self.key.may_exist_below = None;
            self.key.stripe = stripe;
            self.key.state = StripeState::Empty;
            self.has_key = true;
        } else {
            if seq >= self.key.last_seq {
                return Err(self
                    .input_corruption("versions of a user key not in descending sequence order"));
            }
            if stripe != self.key.stripe {
                // Never fold across a stripe boundary: the snapshot between them must keep
                // seeing the older stripe's state.
                self.flush_operands(false)?;
                self.key.stripe = stripe;
                self.key.state = StripeState::Empty;
            }
        }
        self.key.last_seq = seq;

        match (self.key.state, parsed.kind) {
            (StripeState::Covered, kind) => {
                self.report(seq, kind, value, DropReason::Shadowed);
            }
            (StripeState::Empty, base_kind @ (ValueKind::Put | ValueKind::Delete)) => {
                self.keep_base(stripe, seq, base_kind, value);
            }
            (StripeState::Empty | StripeState::Merging, ValueKind::Merge) => {
                self.key.operands.push((seq, value.to_vec()));
                self.key.state = StripeState::Merging;
            }
            (StripeState::Merging, base_kind) => {
                // A Put or Delete under merge operands of the same stripe: fold them.
                if let Some(operator) = self.params.merge_operator.clone() {
                    let existing = (base_kind == ValueKind::Put).then_some(value);
                    self.full_merge(operator.as_ref(), existing)?;
                    self.counts.merge_bases_folded += 1;
                    self.key.state = StripeState::Covered;
                } else {
                    // No operator: nothing can be folded. The operands stay as they are and
                    // the base is treated like the newest Put/Delete of the stripe (operands
                    // over a Delete read the same as operands over nothing).
                    self.flush_operands(false)?;
                    self.keep_base(stripe, seq, base_kind, value);
                }
            }
        }
        Ok(())
    }

    /// The newest Put or Delete of a stripe that is not folded into a merge: kept, except a
    /// tombstone that no reader needs. Everything older in the stripe is then shadowed.
    fn keep_base(&mut self, stripe: u64, seq: SeqNo, kind: ValueKind, value: &[u8]) {
        // Bottom-most stripe: no snapshot is older than the tombstone, so every reader that
        // could see an older version also sees the tombstone.
        if kind == ValueKind::Delete && stripe == 0 && !self.may_exist_below() {
            self.report(seq, kind, value, DropReason::TombstoneAtBottom);
        } else {
            self.output(seq, kind, value.to_vec());
        }
        self.key.state = StripeState::Covered;
    }

    /// The current user key has no more versions in the input.
    fn finish_key(&mut self) -> Result<()> {
        if self.has_key {
            self.flush_operands(true)?;
            self.has_key = false;
        }
        Ok(())
    }

    /// Writes the pending operands of the current stripe, which have no Put/Delete under them
    /// in that stripe. `key_ended`: no older version of the key exists in the input at all.
    fn flush_operands(&mut self, key_ended: bool) -> Result<()> {
        if self.key.operands.is_empty() {
            return Ok(());
        }
        let Some(operator) = self.params.merge_operator.clone() else {
            self.output_operands_unchanged();
            return Ok(());
        };
        if key_ended && !self.may_exist_below() {
            return self.full_merge(operator.as_ref(), None);
        }
        if self.key.operands.len() >= 2 {
            let oldest_first: Vec<&[u8]> = self
                .key
                .operands
                .iter()
                .rev()
                .map(|(_, operand)| operand.as_slice())
                .collect();
            if let Some(combined) = operator.partial_merge(&self.key.user_key, &oldest_first) {
                let newest_seq = self.key.operands[0].0;
                self.counts.merged_operands += self.key.operands.len() as u64;
                self.counts.merge_results += 1;
                self.key.operands.clear();
                self.output(newest_seq, ValueKind::Merge, combined);
                return Ok(());
            }
        }
        self.output_operands_unchanged();
        Ok(())
    }

    fn output_operands_unchanged(&mut self) {
        let operands = std::mem::take(&mut self.key.operands);
        for (seq, operand) in operands {
            self.output(seq, ValueKind::Merge, operand);
        }
    }

    /// Folds the pending operands onto `existing` and outputs a Put with the newest operand's
    /// sequence number.
    fn full_merge(&mut self, operator: &dyn MergeOperator, existing: Option<&[u8]>) -> Result<()> {
        let oldest_first: Vec<&[u8]> = self
            .key
            .operands
            .iter()
            .rev()
            .map(|(_, operand)| operand.as_slice())
            .collect();
        let merged = operator
            .full_merge(&self.key.user_key, existing, &oldest_first)
            .map_err(|detail| Error::Merge {
                tree: self.params.tree_name.to_string(),
                detail,
            })?;
        let newest_seq = self.key.operands.first().map_or(0, |(seq, _)| *seq);
        self.counts.merged_operands += self.key.operands.len() as u64;
        self.counts.merge_results += 1;
        self.key.operands.clear();
        self.output(newest_seq, ValueKind::Put, merged);
        Ok(())
    }

    fn may_exist_below(&mut self) -> bool {
        if let Some(answer) = self.key.may_exist_below {
            return answer;
        }
        let answer = (self.params.key_may_exist_below)(&self.key.user_key);
        self.key.may_exist_below = Some(answer);
        answer
    }

    fn output(&mut self, seq: SeqNo, kind: ValueKind, value: Vec<u8>) {
        self.ready
            .push_back((make_internal_key(&self.key.user_key, seq, kind), value));
    }

    fn report(&mut self, seq: SeqNo, kind: ValueKind, value: &[u8], reason: DropReason) {
        match reason {
            DropReason::Shadowed => self.counts.dropped_shadowed += 1,
            DropReason::TombstoneAtBottom => self.counts.dropped_tombstones += 1,
        }
        let entry = DroppedEntry {
            tree: self.params.tree,
            user_key: &self.key.user_key,
            seq,
            kind,
            value,
            reason,
        };
        for observer in self.params.observers {
            observer.on_drop(self.params.job, &entry, &mut self.emitted);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::iterator::VecIterator;
    use crate::key::{compare_internal_keys, SEQ_MAX};
    use parking_lot::Mutex;
    use rand::rngs::StdRng;
    use rand::seq::SliceRandom;
    use rand::{Rng, SeedableRng};
    use std::collections::{BTreeMap, BTreeSet};

    const TREE: TreeId = 3;

    /// Concatenates operands (after the existing value, if any) with ','. Associative, so a
    /// partial merge followed by a full merge gives the same bytes as one full merge.
    struct ConcatOperator {
        partial: bool,
    }

    impl MergeOperator for ConcatOperator {
        fn name(&self) -> &'static str {
            "concat"
        }
        fn full_merge(
            &self,
            _key: &[u8],
            existing: Option<&[u8]>,
            operands: &[&[u8]],
        ) -> std::result::Result<Vec<u8>, String> {
            if operands.iter().any(|operand| *operand == b"fail") {
                return Err("operand 'fail' refused".to_string());
            }
            let mut parts: Vec<&[u8]> = existing.into_iter().collect();
            parts.extend_from_slice(operands);
            Ok(parts.join(&b","[..]))
        }
        fn partial_merge(&self, _key: &[u8], operands: &[&[u8]]) -> Option<Vec<u8>> {
            self.partial.then(|| operands.join(&b","[..]))
        }
    }

    fn concat(partial: bool) -> Arc<dyn MergeOperator> {
        Arc::new(ConcatOperator { partial })
    }

    #[derive(Debug, Clone, PartialEq, Eq)]
    struct Reported {
        tree: TreeId,
        user_key: Vec<u8>,
        seq: SeqNo,
        kind: ValueKind,
        value: Vec<u8>,
        reason: DropReason,
    }

    /// Records every drop and emits `put(emit_tree, user_key, seq)` for it.
    struct RecordingObserver {
        emit_tree: TreeId,
        seen: Mutex<Vec<Reported>>,
    }

    impl CompactionObserver for RecordingObserver {
        fn on_drop(&self, _job: JobKind, entry: &DroppedEntry<'_>, emit: &mut WriteBatch) {
            self.seen.lock().push(Reported {
                tree: entry.tree,
                user_key: entry.user_key.to_vec(),
                seq: entry.seq,
                kind: entry.kind,
                value: entry.value.to_vec(),
                reason: entry.reason,
            });
            emit.put_in(self.emit_tree, entry.user_key, &entry.seq.to_le_bytes());
        }
    }

    #[derive(Debug, Clone, PartialEq, Eq)]
    struct Version {
        user_key: Vec<u8>,
        seq: SeqNo,
        kind: ValueKind,
        value: Vec<u8>,
    }

    fn version(user_key: &[u8], seq: SeqNo, kind: ValueKind, value: &str) -> Version {
        Version {
            user_key: user_key.to_vec(),
            seq,
            kind,
            value: value.as_bytes().to_vec(),
        }
    }

    fn decode(entry: &(Vec<u8>, Vec<u8>)) -> Version {
        let parsed = parse_internal_key(&entry.0).expect("output keys parse");
        Version {
            user_key: parsed.user_key.to_vec(),
            seq: parsed.seq,
            kind: parsed.kind,
            value: entry.1.clone(),
        }
    }

    struct Outcome {
        output: Vec<Version>,
        raw_output: Vec<(Vec<u8>, Vec<u8>)>,
        emitted: WriteBatch,
        emitted_again: WriteBatch,
        counts: CompactionCounts,
        /// One list per observer.
        reports: Vec<Vec<Reported>>,
    }

    fn run(
        input: &[Version],
        snapshots: &[SeqNo],
        below: &dyn Fn(&[u8]) -> bool,
        merge_operator: Option<Arc<dyn MergeOperator>>,
        observer_count: usize,
    ) -> Result<Outcome> {
        run_retaining(
            input,
            snapshots,
            None,
            below,
            merge_operator,
            observer_count,
        )
    }

    fn run_retaining(
        input: &[Version],
        snapshots: &[SeqNo],
        retain_above: Option<SeqNo>,
        below: &dyn Fn(&[u8]) -> bool,
        merge_operator: Option<Arc<dyn MergeOperator>>,
        observer_count: usize,
    ) -> Result<Outcome> {
        let mut entries: Vec<(Vec<u8>, Vec<u8>)> = input
            .iter()
            .map(|v| {
                (
                    make_internal_key(&v.user_key, v.seq, v.kind),
                    v.value.clone(),
                )
            })
            .collect();
        entries.sort_by(|a, b| compare_internal_keys(&a.0, &b.0));
        let recorders: Vec<Arc<RecordingObserver>> = (0..observer_count)
            .map(|i| {
                Arc::new(RecordingObserver {
                    emit_tree: 100 + i as TreeId,
                    seen: Mutex::new(Vec::new()),
                })
            })
            .collect();
        let observers: Vec<Arc<dyn CompactionObserver>> = recorders
            .iter()
            .map(|r| Arc::clone(r) as Arc<dyn CompactionObserver>)
            .collect();
        let mut iterator = CompactionIterator::new(
            Box::new(VecIterator::new(entries)),
            CompactionParams {
                tree: TREE,
                tree_name: Arc::from("test-tree"),
                snapshots: snapshots.to_vec(),
                retain_above,
                key_may_exist_below: below,
                merge_operator,
                observers: &observers,
                job: JobKind::Compaction {
                    input_level: 1,
                    output_level: 2,
                },
            },
        );
        let mut raw_output = Vec::new();
        while let Some(entry) = iterator.next_entry()? {
            raw_output.push(entry);
        }
        // Exhausted stays exhausted.
        assert!(iterator.next_entry()?.is_none());
        let emitted = iterator.emitted();
        let emitted_again = iterator.emitted();
        Ok(Outcome {
            output: raw_output.iter().map(decode).collect(),
            raw_output,
            emitted,
            emitted_again,
            counts: iterator.counts(),
            reports: recorders.iter().map(|r| r.seen.lock().clone()).collect(),
        })
    }

    /// The reference reader: the value of a key at `at`, given its versions newest first.
    /// Merge operands resolve with the concatenating operator; Delete and "no more versions"
    /// both mean no base value.
    fn read_at(versions: &[(SeqNo, ValueKind, Vec<u8>)], at: SeqNo) -> Option<Vec<u8>> {
        let operator = ConcatOperator { partial: false };
        let fold = |existing: Option<&[u8]>, newest_first: &[&[u8]]| {
            let oldest_first: Vec<&[u8]> = newest_first.iter().rev().copied().collect();
            operator
                .full_merge(b"", existing, &oldest_first)
                .expect("reference merge")
        };
        let mut operands: Vec<&[u8]> = Vec::new();
        for (_, kind, value) in versions.iter().filter(|(seq, _, _)| *seq <= at) {
            match kind {
                ValueKind::Merge => operands.push(value),
                ValueKind::Put if operands.is_empty() => return Some(value.clone()),
                ValueKind::Put => return Some(fold(Some(value), &operands)),
                ValueKind::Delete if operands.is_empty() => return None,
                ValueKind::Delete => return Some(fold(None, &operands)),
            }
        }
        (!operands.is_empty()).then(|| fold(None, &operands))
    }

    fn versions_of(entries: &[Version], user_key: &[u8]) -> Vec<(SeqNo, ValueKind, Vec<u8>)> {
        let mut versions: Vec<_> = entries
            .iter()
            .filter(|v| v.user_key == user_key)
            .map(|v| (v.seq, v.kind, v.value.clone()))
            .collect();
        versions.sort_by_key(|v| std::cmp::Reverse(v.0));
        versions
    }

    fn stripe_of(snapshots: &[SeqNo], seq: SeqNo) -> usize {
        snapshots.partition_point(|&s| s < seq)
    }

    fn model_check_seed(seed: u64) {
        let mut rng = StdRng::seed_from_u64(seed);
        let all_keys: [&[u8]; 4] = [b"", b"a", b"ab", b"b"];
        let mut seq_pool: Vec<SeqNo> = (1..=40).collect();
        seq_pool.shuffle(&mut rng);
        // Vary the mix per seed so that some runs are all merges, some all deletes, ...
        let weights = [
            rng.gen_range(0..4u32),
            rng.gen_range(0..4u32),
            rng.gen_range(1..5u32),
        ];
        let total: u32 = weights.iter().sum();
        let mut input = Vec::new();
        for key in all_keys {
            if !rng.gen_bool(0.75) {
                continue;
            }
            for _ in 0..rng.gen_range(1..=8) {
                let seq = seq_pool.pop().expect("pool is large enough");
                let pick = rng.gen_range(0..total);
                let (kind, value) = if pick < weights[0] {
                    (ValueKind::Put, format!("p{seq}"))
                } else if pick < weights[0] + weights[1] {
                    (ValueKind::Delete, String::new())
                } else {
                    (ValueKind::Merge, format!("m{seq}"))
                };
                input.push(version(key, seq, kind, &value));
            }
        }
        let mut snapshots: Vec<SeqNo> = (0..rng.gen_range(0..=4))
            .map(|_| rng.gen_range(1..=42))
            .collect();
        snapshots.sort_unstable();
        snapshots.dedup();
        let below_keys: BTreeSet<Vec<u8>> = all_keys
            .iter()
            .filter(|_| rng.gen_bool(0.5))
            .map(|k| k.to_vec())
            .collect();
        let below_calls = Mutex::new(Vec::<Vec<u8>>::new());
        let below = |key: &[u8]| {
            below_calls.lock().push(key.to_vec());
            below_keys.contains(key)
        };
        let operator_mode = rng.gen_range(0..3);
        let operator = match operator_mode {
            0 => None,
            1 => Some(concat(false)),
            _ => Some(concat(true)),
        };
        let has_operator = operator.is_some();
        let observer_count = rng.gen_range(0..=3);
        let context = format!(
            "input {input:?}\nsnapshots {snapshots:?}\nkeys with versions below {below_keys:?}\n\
             operator mode {operator_mode}"
        );
        let outcome = run(&input, &snapshots, &below, operator, observer_count)
            .unwrap_or_else(|e| panic!("iterator failed: {e}\n{context}"));
        let output = &outcome.output;
        let context = format!("{context}\noutput {output:?}");

        // key_may_exist_below is asked at most once per user key.
        let calls = below_calls.lock().clone();
        let distinct: BTreeSet<_> = calls.iter().cloned().collect();
        assert_eq!(
            calls.len(),
            distinct.len(),
            "repeated below calls\n{context}"
        );

        // (2) Sorted, no duplicate internal keys, sequence numbers only come from the input
        // and only change meaning (kind/value) for merge results.
        for pair in outcome.raw_output.windows(2) {
            assert!(
                compare_internal_keys(&pair[0].0, &pair[1].0).is_lt(),
                "output not strictly increasing\n{context}"
            );
        }
        let input_by_id: BTreeMap<(Vec<u8>, SeqNo), &Version> = input
            .iter()
            .map(|v| ((v.user_key.clone(), v.seq), v))
            .collect();
        let mut passthrough = BTreeSet::new();
        let mut merge_results: BTreeMap<(Vec<u8>, SeqNo), ValueKind> = BTreeMap::new();
        for out in output {
            let id = (out.user_key.clone(), out.seq);
            let source = input_by_id.get(&id).unwrap_or_else(|| {
                panic!("output {out:?} has a sequence not in the input\n{context}")
            });
            if *source == out {
                passthrough.insert(id);
            } else {
                assert!(
                    has_operator
                        && source.kind == ValueKind::Merge
                        && out.kind != ValueKind::Delete,
                    "output {out:?} rewrites input {source:?}\n{context}"
                );
                merge_results.insert(id, out.kind);
            }
        }

        // (1) Every snapshot and the latest state read the same from input and output, with
        // and without older versions stacked under them when the key may have some below.
        let mut read_points = snapshots.clone();
        read_points.push(SEQ_MAX);
        for key in all_keys {
            let input_versions = versions_of(&input, key);
            let output_versions = versions_of(output, key);
            let stacks: Vec<Option<(SeqNo, ValueKind, Vec<u8>)>> = if below_keys.contains(key) {
                vec![
                    None,
                    Some((0, ValueKind::Put, b"below".to_vec())),
                    Some((0, ValueKind::Delete, Vec::new())),
                    Some((0, ValueKind::Merge, b"mbelow".to_vec())),
                ]
            } else {
                vec![None]
            };
            for stack in stacks {
                let mut stacked_input = input_versions.clone();
                let mut stacked_output = output_versions.clone();
                stacked_input.extend(stack.clone());
                stacked_output.extend(stack.clone());
                for &at in &read_points {
                    assert_eq!(
                        read_at(&stacked_input, at),
                        read_at(&stacked_output, at),
                        "key {key:?} read at {at} with {stack:?} below differs\n{context}"
                    );
                }
            }
        }

        // (5) Counters.
        let counts = outcome.counts;
        assert_eq!(counts.entries_in, input.len() as u64, "{context}");
        assert_eq!(counts.entries_out, output.len() as u64, "{context}");
        assert_eq!(
            counts.merge_results,
            merge_results.len() as u64,
            "{context}"
        );
        assert_eq!(
            counts.entries_in,
            counts.entries_out - counts.merge_results
                + counts.dropped_shadowed
                + counts.dropped_tombstones
                + counts.merged_operands
                + counts.merge_bases_folded,
            "accounting identity {counts:?}\n{context}"
        );
        if !has_operator {
            assert_eq!(
                counts.merged_operands + counts.merge_bases_folded,
                0,
                "{context}"
            );
        }

        // (6) Nothing redundant survives: per stripe at most one Put/Delete and nothing
        // under it; with an operator no operand sits on a base of its stripe; with partial
        // merge at most one operand per stripe; no tombstone at the bottom when nothing is
        // below; a stripe of only operands at the end of a key is fully merged.
        for key in all_keys {
            let may_be_below = below_keys.contains(key);
            let mut groups: BTreeMap<usize, Vec<(SeqNo, ValueKind, Vec<u8>)>> = BTreeMap::new();
            for v in versions_of(output, key) {
                groups
                    .entry(stripe_of(&snapshots, v.0))
                    .or_default()
                    .push(v);
            }
            for (stripe, group) in &groups {
                let bases = group.iter().filter(|v| v.1 != ValueKind::Merge).count();
                assert!(
                    bases <= 1,
                    "stripe {stripe} of {key:?} keeps {bases} bases\n{context}"
                );
                if bases == 1 {
                    assert_ne!(
                        group.last().map(|v| v.1),
                        Some(ValueKind::Merge),
                        "{context}"
                    );
                    if has_operator {
                        assert_eq!(group.len(), 1, "unfolded operands, {key:?}\n{context}");
                    }
                }
                if operator_mode == 2 {
                    let merges = group.iter().filter(|v| v.1 == ValueKind::Merge).count();
                    assert!(merges <= 1, "partial merge not applied, {key:?}\n{context}");
                }
                if *stripe == 0 && !may_be_below {
                    assert!(
                        group.iter().all(|v| v.1 != ValueKind::Delete),
                        "bottom tombstone kept for {key:?}\n{context}"
                    );
                }
            }
            let input_versions = versions_of(&input, key);
            if let Some(oldest) = input_versions.last() {
                let last_stripe = stripe_of(&snapshots, oldest.0);
                let all_merges = input_versions
                    .iter()
                    .filter(|v| stripe_of(&snapshots, v.0) == last_stripe)
                    .all(|v| v.1 == ValueKind::Merge);
                if all_merges && has_operator && !may_be_below {
                    let group = groups.get(&last_stripe).cloned().unwrap_or_default();
                    assert!(
                        group.len() == 1 && group[0].1 == ValueKind::Put,
                        "trailing operands of {key:?} not fully merged\n{context}"
                    );
                }
            }
        }

        if observer_count == 0 {
            assert!(outcome.emitted.is_empty(), "{context}");
            return;
        }

        // (3) Observers: all see the same drops, in input order, each an input entry that is
        // neither written nor folded; the rest of the input not written is legitimately
        // folded.
        let reported = &outcome.reports[0];
        for other in &outcome.reports[1..] {
            assert_eq!(other, reported, "observers saw different drops\n{context}");
        }
        let context = format!("{context}\nreported {reported:?}");
        for pair in reported.windows(2) {
            let a = make_internal_key(&pair[0].user_key, pair[0].seq, pair[0].kind);
            let b = make_internal_key(&pair[1].user_key, pair[1].seq, pair[1].kind);
            assert!(
                compare_internal_keys(&a, &b).is_lt(),
                "reports out of order\n{context}"
            );
        }
        let mut reported_ids = BTreeSet::new();
        for report in reported {
            let id = (report.user_key.clone(), report.seq);
            let source = input_by_id
                .get(&id)
                .unwrap_or_else(|| panic!("reported {report:?} is not an input entry\n{context}"));
            assert_eq!(report.tree, TREE, "{context}");
            assert_eq!(
                (report.kind, &report.value),
                (source.kind, &source.value),
                "{context}"
            );
            assert!(
                !passthrough.contains(&id),
                "{report:?} both written and dropped\n{context}"
            );
            assert!(
                !merge_results.contains_key(&id),
                "{report:?} dropped and merged\n{context}"
            );
            assert!(
                reported_ids.insert(id),
                "{report:?} reported twice\n{context}"
            );
            match report.reason {
                DropReason::TombstoneAtBottom => {
                    assert_eq!(report.kind, ValueKind::Delete, "{context}");
                    assert_eq!(stripe_of(&snapshots, report.seq), 0, "{context}");
                    assert!(!below_keys.contains(&report.user_key), "{context}");
                }
                DropReason::Shadowed => {
                    let stripe = stripe_of(&snapshots, report.seq);
                    assert!(
                        input.iter().any(|v| v.user_key == report.user_key
                            && v.seq > report.seq
                            && stripe_of(&snapshots, v.seq) == stripe),
                        "{report:?} shadowed by nothing\n{context}"
                    );
                }
            }
        }
        assert_eq!(
            counts.dropped_shadowed + counts.dropped_tombstones,
            reported.len() as u64,
            "{context}"
        );
        let mut folded = 0u64;
        for v in &input {
            let id = (v.user_key.clone(), v.seq);
            if passthrough.contains(&id) || reported_ids.contains(&id) {
                continue;
            }
            folded += 1;
            // A folded entry sits in a run of operands (same key, same stripe) topped by a
            // merge result; a Put/Delete can only be the base of a full merge (a Put result).
            let stripe = stripe_of(&snapshots, v.seq);
            let justified = merge_results.iter().any(|((key, seq), kind)| {
                key == &v.user_key
                    && *seq >= v.seq
                    && stripe_of(&snapshots, *seq) == stripe
                    && (v.kind == ValueKind::Merge || (*seq > v.seq && *kind == ValueKind::Put))
                    && input.iter().all(|w| {
                        w.user_key != v.user_key
                            || w.seq <= v.seq
                            || w.seq > *seq
                            || w.kind == ValueKind::Merge
                    })
            });
            assert!(
                justified,
                "{v:?} vanished: not written, reported or folded\n{context}"
            );
        }
        assert_eq!(
            folded,
            counts.merged_operands + counts.merge_bases_folded,
            "{context}"
        );

        // (4) The emitted batch holds exactly what the observers emitted, in order, once.
        let emitted: Vec<(ValueKind, TreeId, Vec<u8>, Vec<u8>)> = outcome
            .emitted
            .iter()
            .map(|e| {
                let e = e.expect("emitted batch decodes");
                (e.kind, e.tree, e.key.to_vec(), e.value.to_vec())
            })
            .collect();
        let expected: Vec<(ValueKind, TreeId, Vec<u8>, Vec<u8>)> = reported
            .iter()
            .flat_map(|r| {
                (0..observer_count).map(move |i| {
                    (
                        ValueKind::Put,
                        100 + i as TreeId,
                        r.user_key.clone(),
                        r.seq.to_le_bytes().to_vec(),
                    )
                })
            })
            .collect();
        assert_eq!(emitted, expected, "{context}");
        assert!(
            outcome.emitted_again.is_empty(),
            "emitted() must take the writes"
        );
    }

    #[test]
    fn model_check_against_reference_reader() {
        let seeds: Vec<u64> = if let Ok(seed) = std::env::var("SIFT_SEED") {
            vec![seed.parse().expect("SIFT_SEED is a u64")]
        } else {
            let steps: u64 = std::env::var("SIFT_MODEL_STEPS")
                .ok()
                .and_then(|s| s.parse().ok())
                .unwrap_or(20_000);
            (0..steps).collect()
        };
        for seed in seeds {
            let result = std::panic::catch_unwind(|| model_check_seed(seed));
            if let Err(panic) = result {
                eprintln!("compaction iterator model check failed at seed {seed}; replay with SIFT_SEED={seed}");
                std::panic::resume_unwind(panic);
            }
        }
    }

    /// A retention floor reads exactly like a snapshot at the floor plus one at every sequence
    /// number above it (the definition in the module documentation): same output, same drops
    /// reported, same counts, over random inputs of puts, deletes and merges.
    #[test]
    fn retention_floor_equals_a_snapshot_at_every_sequence_above_it() {
        for seed in 0..2_000u64 {
            let mut rng = StdRng::seed_from_u64(seed);
            let mut seq_pool: Vec<SeqNo> = (1..=30).collect();
            seq_pool.shuffle(&mut rng);
            let mut input = Vec::new();
            for key in [&b"a"[..], b"b", b"c"] {
                for _ in 0..rng.gen_range(0..=7) {
                    let seq = seq_pool.pop().expect("pool is large enough");
                    let (kind, value) = match rng.gen_range(0..3) {
                        0 => (ValueKind::Put, format!("p{seq}")),
                        1 => (ValueKind::Delete, String::new()),
                        _ => (ValueKind::Merge, format!("m{seq}")),
                    };
                    input.push(version(key, seq, kind, &value));
                }
            }
            let snapshots: Vec<SeqNo> = (0..rng.gen_range(0..=2))
                .map(|_| rng.gen_range(1..=31))
                .collect();
            let floor = rng.gen_range(0..=31);
            let below = rng.gen_bool(0.5);
            let operator = rng.gen_bool(0.5).then(|| concat(rng.gen_bool(0.5)));
            let mut expanded = snapshots.clone();
            expanded.push(floor);
            expanded.extend(input.iter().map(|v| v.seq).filter(|seq| *seq > floor));
            let context =
                format!("seed {seed} floor {floor} snapshots {snapshots:?} input {input:?}");
            let retained = run_retaining(
                &input,
                &snapshots,
                Some(floor),
                &|_| below,
                operator.clone(),
                1,
            )
            .unwrap_or_else(|e| panic!("{context}: {e}"));
            let reference = run(&input, &expanded, &|_| below, operator, 1)
                .unwrap_or_else(|e| panic!("{context}: {e}"));
            assert_eq!(retained.raw_output, reference.raw_output, "{context}");
            assert_eq!(retained.reports, reference.reports, "{context}");
            assert_eq!(retained.counts, reference.counts, "{context}");
            // Nothing above the floor is dropped (the oldest operand of a key may still be
            // merged onto nothing, which reads the same).
            for v in input.iter().filter(|v| v.seq > floor) {
                assert!(
                    retained
                        .output
                        .iter()
                        .any(|out| out.user_key == v.user_key && out.seq == v.seq),
                    "{context}: {v:?} dropped"
                );
            }
        }
    }

    /// Runs with one observer and returns (output, reports).
    fn simple(
        input: &[Version],
        snapshots: &[SeqNo],
        may_exist_below: bool,
        merge_operator: Option<Arc<dyn MergeOperator>>,
    ) -> (Vec<Version>, Vec<Reported>) {
        let outcome = run(input, snapshots, &|_| may_exist_below, merge_operator, 1)
            .expect("compaction iterator succeeds");
        (outcome.output, outcome.reports[0].clone())
    }

    fn reported(v: &Version, reason: DropReason) -> Reported {
        Reported {
            tree: TREE,
            user_key: v.user_key.clone(),
            seq: v.seq,
            kind: v.kind,
            value: v.value.clone(),
            reason,
        }
    }

    #[test]
    fn tombstone_above_put_with_snapshot_between_keeps_both() {
        let input = [
            version(b"k", 10, ValueKind::Delete, ""),
            version(b"k", 5, ValueKind::Put, "old"),
        ];
        let (output, reports) = simple(&input, &[7], false, None);
        assert_eq!(output, input.to_vec());
        assert!(reports.is_empty());
    }

    #[test]
    fn tombstone_at_bottom_without_snapshot_drops_both_and_reports_both() {
        let input = [
            version(b"k", 10, ValueKind::Delete, ""),
            version(b"k", 5, ValueKind::Put, "old"),
            version(b"other", 4, ValueKind::Put, "stays"),
        ];
        let (output, reports) = simple(&input, &[], false, None);
        assert_eq!(output, vec![input[2].clone()]);
        assert_eq!(
            reports,
            vec![
                reported(&input[0], DropReason::TombstoneAtBottom),
                reported(&input[1], DropReason::Shadowed),
            ]
        );
    }

    #[test]
    fn tombstone_is_kept_while_older_versions_may_exist_below() {
        let input = [
            version(b"k", 10, ValueKind::Delete, ""),
            version(b"k", 5, ValueKind::Put, "old"),
        ];
        let (output, reports) = simple(&input, &[], true, None);
        assert_eq!(output, vec![input[0].clone()]);
        assert_eq!(reports, vec![reported(&input[1], DropReason::Shadowed)]);
    }

    #[test]
    fn snapshot_equal_to_a_sequence_keeps_that_version() {
        let input = [
            version(b"k", 7, ValueKind::Put, "new"),
            version(b"k", 5, ValueKind::Put, "old"),
        ];
        // The snapshot at 5 sees the version at 5; the one at 6 too; the one at 7 does not.
        assert_eq!(simple(&input, &[5], false, None).0, input.to_vec());
        assert_eq!(simple(&input, &[6], false, None).0, input.to_vec());
        let (output, reports) = simple(&input, &[7], false, None);
        assert_eq!(output, vec![input[0].clone()]);
        assert_eq!(reports, vec![reported(&input[1], DropReason::Shadowed)]);
    }

    #[test]
    fn merge_chain_split_by_snapshot_is_folded_only_within_stripes() {
        let input = [
            version(b"k", 9, ValueKind::Merge, "m9"),
            version(b"k", 8, ValueKind::Merge, "m8"),
            // snapshot 7
            version(b"k", 6, ValueKind::Merge, "m6"),
            version(b"k", 4, ValueKind::Put, "p4"),
            version(b"k", 2, ValueKind::Put, "p2"),
        ];
        let (output, reports) = simple(&input, &[7], true, Some(concat(true)));
        assert_eq!(
            output,
            vec![
                version(b"k", 9, ValueKind::Merge, "m8,m9"),
                version(b"k", 6, ValueKind::Put, "p4,m6"),
            ]
        );
        assert_eq!(reports, vec![reported(&input[4], DropReason::Shadowed)]);

        // Without partial merge the top stripe's operands stay as they are.
        let (output, _) = simple(&input, &[7], true, Some(concat(false)));
        assert_eq!(
            output,
            vec![
                input[0].clone(),
                input[1].clone(),
                version(b"k", 6, ValueKind::Put, "p4,m6"),
            ]
        );
    }

    #[test]
    fn merge_over_delete_folds_onto_nothing_and_reports_nothing_folded() {
        let input = [
            version(b"k", 9, ValueKind::Merge, "m9"),
            version(b"k", 8, ValueKind::Merge, "m8"),
            version(b"k", 5, ValueKind::Delete, ""),
            version(b"k", 3, ValueKind::Put, "p3"),
        ];
        let (output, reports) = simple(&input, &[], true, Some(concat(false)));
        assert_eq!(output, vec![version(b"k", 9, ValueKind::Put, "m8,m9")]);
        assert_eq!(reports, vec![reported(&input[3], DropReason::Shadowed)]);
    }

    #[test]
    fn trailing_operands_fold_onto_nothing_only_when_nothing_is_below() {
        let input = [
            version(b"k", 3, ValueKind::Merge, "m3"),
            version(b"k", 2, ValueKind::Merge, "m2"),
        ];
        let (output, reports) = simple(&input, &[], false, Some(concat(false)));
        assert_eq!(output, vec![version(b"k", 3, ValueKind::Put, "m2,m3")]);
        assert!(reports.is_empty());
        let (output, _) = simple(&input, &[], true, Some(concat(false)));
        assert_eq!(output, input.to_vec());
        let (output, _) = simple(&input, &[], true, Some(concat(true)));
        assert_eq!(output, vec![version(b"k", 3, ValueKind::Merge, "m2,m3")]);
    }

    #[test]
    fn operands_without_an_operator_are_kept_with_their_base() {
        let input = [
            version(b"k", 9, ValueKind::Merge, "m9"),
            version(b"k", 5, ValueKind::Delete, ""),
            version(b"k", 3, ValueKind::Put, "p3"),
        ];
        let (output, reports) = simple(&input, &[], true, None);
        assert_eq!(output, input[..2].to_vec());
        assert_eq!(reports, vec![reported(&input[2], DropReason::Shadowed)]);
        // With nothing below, the tombstone under the operands is not needed either.
        let (output, reports) = simple(&input, &[], false, None);
        assert_eq!(output, input[..1].to_vec());
        assert_eq!(
            reports,
            vec![
                reported(&input[1], DropReason::TombstoneAtBottom),
                reported(&input[2], DropReason::Shadowed),
            ]
        );
    }

    #[test]
    fn failing_full_merge_is_a_merge_error_and_the_iterator_stays_failed() {
        let input = [
            version(b"k", 9, ValueKind::Merge, "fail"),
            version(b"k", 5, ValueKind::Put, "p5"),
        ];
        let entries: Vec<_> = input
            .iter()
            .map(|v| {
                (
                    make_internal_key(&v.user_key, v.seq, v.kind),
                    v.value.clone(),
                )
            })
            .collect();
        let no_observers: Vec<Arc<dyn CompactionObserver>> = Vec::new();
        let mut iterator = CompactionIterator::new(
            Box::new(VecIterator::new(entries)),
            CompactionParams {
                tree: TREE,
                tree_name: Arc::from("t"),
                snapshots: Vec::new(),
                retain_above: None,
                key_may_exist_below: &|_| true,
                merge_operator: Some(concat(false)),
                observers: &no_observers,
                job: JobKind::Flush,
            },
        );
        let error = iterator.next_entry().expect_err("merge must fail");
        assert!(
            matches!(&error, Error::Merge { tree, detail } if tree == "t" && detail.contains("fail")),
            "{error}"
        );
        assert!(matches!(iterator.next_entry(), Err(Error::Merge { .. })));
    }

    #[test]
    fn out_of_order_input_is_corruption_not_silent_loss() {
        let cases: [Vec<(Vec<u8>, Vec<u8>)>; 3] = [
            // Versions of one key ascending.
            vec![
                (make_internal_key(b"k", 3, ValueKind::Put), b"a".to_vec()),
                (make_internal_key(b"k", 5, ValueKind::Put), b"b".to_vec()),
            ],
            // User keys descending.
            vec![
                (make_internal_key(b"z", 3, ValueKind::Put), b"a".to_vec()),
                (make_internal_key(b"a", 5, ValueKind::Put), b"b".to_vec()),
            ],
            // A key too short to hold a trailer.
            vec![(b"short".to_vec(), b"a".to_vec())],
        ];
        for entries in cases {
            let no_observers: Vec<Arc<dyn CompactionObserver>> = Vec::new();
            let mut iterator = CompactionIterator::new(
                Box::new(VecIterator::new(entries)),
                CompactionParams {
                    tree: TREE,
                    tree_name: Arc::from("t"),
                    snapshots: Vec::new(),
                    retain_above: None,
                    key_may_exist_below: &|_| true,
                    merge_operator: None,
                    observers: &no_observers,
                    job: JobKind::Flush,
                },
            );
            let mut result = Ok(None);
            for _ in 0..3 {
                result = iterator.next_entry();
                if !matches!(result, Ok(Some(_))) {
                    break;
                }
            }
            assert!(result.is_err_and(|e| e.is_corruption()));
        }
    }

    #[test]
    fn observer_emits_are_collected_and_taken() {
        let input = [
            version(b"a", 4, ValueKind::Put, "new"),
            version(b"a", 2, ValueKind::Put, "old"),
            version(b"b", 3, ValueKind::Delete, ""),
        ];
        let outcome = run(&input, &[], &|_| false, None, 2).expect("runs");
        assert_eq!(outcome.output, vec![input[0].clone()]);
        let emitted: Vec<_> = outcome
            .emitted
            .iter()
            .map(|e| {
                let e = e.expect("decodes");
                (e.tree, e.key.to_vec(), e.value.to_vec())
            })
            .collect();
        assert_eq!(
            emitted,
            vec![
                (100, b"a".to_vec(), 2u64.to_le_bytes().to_vec()),
                (101, b"a".to_vec(), 2u64.to_le_bytes().to_vec()),
                (100, b"b".to_vec(), 3u64.to_le_bytes().to_vec()),
                (101, b"b".to_vec(), 3u64.to_le_bytes().to_vec()),
            ]
        );
        assert!(outcome.emitted_again.is_empty());
        assert_eq!(
            outcome.counts,
            CompactionCounts {
                entries_in: 3,
                entries_out: 1,
                dropped_shadowed: 1,
                dropped_tombstones: 1,
                merged_operands: 0,
                merge_bases_folded: 0,
                merge_results: 0,
            }
        );
    }
}
