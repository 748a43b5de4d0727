//! The update memo of one collection (NEXT §3.3): `pk → newest sequence number` for the
//! documents that may have more than one version in the primary tree, with a count of their
//! obsolete versions, pruned as flushes and compactions drop those versions.
//!
//! Meaning (the invariant queries rely on): the memo starts empty at `base` (the sequence
//! number when it was created, at open or index creation). For a pk absent from the memo, no
//! version written after `base` other than the pk's newest still exists. So a candidate version
//! with sequence number `> base` whose pk is absent is the live version; a pk present is live
//! only in its `newest` version. Candidates at or below `base` are not covered (the memo is not
//! rebuilt at open) and are validated another way (GetLite).
//!
//! Why the count is safe: when a write finds the pk absent but an older version possibly
//! present (the engine's memory-only GetLite check, bloom filters included), the entry starts
//! at 1 obsolete version; every later write adds 1. Drops of versions written after `base`
//! subtract 1; drops of older versions are ignored. So the count is never below the number of
//! post-`base` obsolete versions still on disk, and an entry is removed only when none is left.
//! Over-counting (a bloom false positive, an older pre-`base` version) only keeps an entry
//! longer.
//!
//! Timing: the write path updates the memo *before* the engine write (a query at an older
//! snapshot sees `newest` above its snapshot and falls back to GetLite), and undoes it if the
//! write fails. Drops are reported while a job runs, long before its result is installed, so
//! they are queued and applied when the listener reports the job's version change; and every
//! application bumps `epoch`, so a query that started earlier (and may still read the dropped
//! versions through its older view) stops trusting absences.

use parking_lot::Mutex;
use sift_lsm::extension::{DropReason, JobKind};
use sift_lsm::SeqNo;
use std::collections::HashMap;

/// Bookkeeping bytes charged per memo entry on top of the key (hash slot, struct).
const ENTRY_OVERHEAD_BYTES: usize = 64;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct MemoEntry {
    pub newest: SeqNo,
    /// Obsolete versions (written after `base`) that may still be on disk, at least.
    pub obsolete: u64,
}

/// What the memo says about a candidate version.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum MemoAnswer {
    Live,
    Stale,
    /// The memo cannot tell (newest above the snapshot, version at or below `base`, or the
    /// memo was pruned since the query started): validate another way.
    Unknown,
}

/// A change the write path made, for undoing it if the engine write fails.
pub(crate) struct MemoUndo {
    pk: Vec<u8>,
    previous: Option<MemoEntry>,
}

#[derive(Debug, Default)]
struct State {
    entries: HashMap<Vec<u8>, MemoEntry>,
    key_bytes: usize,
    epoch: u64,
    /// Drops reported by running jobs, not yet installed: (job key, pk, seq, reason).
    queued: Vec<(JobKey, Vec<u8>, SeqNo, DropReason)>,
}

/// Which job a queued drop came from, to apply it when that job's version change arrives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum JobKey {
    Flush,
    Compaction {
        input_level: usize,
        output_level: usize,
    },
}

impl From<JobKind> for JobKey {
    fn from(job: JobKind) -> JobKey {
        match job {
            JobKind::Flush => JobKey::Flush,
            JobKind::Compaction {
                input_level,
                output_level,
            } => JobKey::Compaction {
                input_level,
                output_level,
            },
        }
    }
}

#[derive(Debug)]
pub(crate) struct UpdateMemo {
    base: SeqNo,
    state: Mutex<State>,
}

impl UpdateMemo {
    pub fn new(base: SeqNo) -> UpdateMemo {
        UpdateMemo {
            base,
            state: Mutex::new(State::default()),
        }
    }

    pub fn epoch(&self) -> u64 {
        self.state.lock().epoch
    }

    /// Records a write of `pk` at `seq` (a put or a delete) before it is applied.
    /// `older_may_exist` is asked only if the memo does not know the pk.
    pub fn record_write(
        &self,
        pk: &[u8],
        seq: SeqNo,
        older_may_exist: impl FnOnce() -> bool,
    ) -> Option<MemoUndo> {
        let known = self.state.lock().entries.get(pk).copied();
        if known.is_none() && !older_may_exist() {
            return None;
        }
        let mut state = self.state.lock();
        let previous = state.entries.get(pk).copied();
        if previous.is_none() {
            state.key_bytes += pk.len();
        }
        let entry = MemoEntry {
            newest: seq,
            obsolete: previous.map_or(1, |entry| entry.obsolete + 1),
        };
        state.entries.insert(pk.to_vec(), entry);
        Some(MemoUndo {
            pk: pk.to_vec(),
            previous,
        })
    }

    /// Undoes writes recorded for an engine write that failed (latest first).
    pub fn undo(&self, undo: Vec<MemoUndo>) {
        let mut state = self.state.lock();
        for change in undo.into_iter().rev() {
            match change.previous {
                Some(entry) => {
                    state.entries.insert(change.pk, entry);
                }
                None => {
                    if state.entries.remove(&change.pk).is_some() {
                        state.key_bytes -= change.pk.len();
                    }
                }
            }
        }
    }

    /// What the memo says about version `seq` of `pk` for a query at `snapshot` that started
    /// at memo epoch `epoch`.
    pub fn answer(&self, pk: &[u8], seq: SeqNo, snapshot: SeqNo, epoch: u64) -> MemoAnswer {
        let state = self.state.lock();
        match state.entries.get(pk) {
            Some(entry) if entry.newest <= snapshot => {
                if entry.newest == seq {
                    MemoAnswer::Live
                } else {
                    MemoAnswer::Stale
                }
            }
            None if seq > self.base && state.epoch == epoch => MemoAnswer::Live,
            Some(_) | None => MemoAnswer::Unknown,
        }
    }

    /// A flush or compaction dropped a version (reported while the job runs).
    pub fn queue_drop(&self, job: JobKind, pk: &[u8], seq: SeqNo, reason: DropReason) {
        if seq <= self.base {
            return; // versions older than the memo are not counted
        }
        let mut state = self.state.lock();
        if state.entries.contains_key(pk) {
            state.queued.push((job.into(), pk.to_vec(), seq, reason));
        }
    }

    /// The job `key` installed its result: apply its queued drops.
    pub fn apply_drops(&self, key: JobKey) {
        let mut state = self.state.lock();
        if !state.queued.iter().any(|(k, ..)| *k == key) {
            return;
        }
        let queued = std::mem::take(&mut state.queued);
        let mut removed_any = false;
        for (job, pk, seq, reason) in queued {
            if job != key {
                state.queued.push((job, pk, seq, reason));
                continue;
            }
            let Some(entry) = state.entries.get_mut(&pk) else {
                continue;
            };
            let remove = if reason == DropReason::TombstoneAtBottom && seq == entry.newest {
                true // the tombstone was the last version
            } else if seq < entry.newest {
                entry.obsolete = entry.obsolete.saturating_sub(1);
                entry.obsolete == 0
            } else {
                false
            };
            if remove {
                state.entries.remove(&pk);
                state.key_bytes -= pk.len();
                removed_any = true;
            }
        }
        if removed_any {
            state.epoch += 1;
        }
    }

    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.state.lock().entries.len()
    }

    pub fn memory_bytes(&self) -> usize {
        let state = self.state.lock();
        state.key_bytes + state.entries.len() * ENTRY_OVERHEAD_BYTES
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn absent_means_live_only_above_base_and_in_the_same_epoch() {
        let memo = UpdateMemo::new(10);
        assert_eq!(memo.answer(b"a", 11, 20, 0), MemoAnswer::Live);
        assert_eq!(memo.answer(b"a", 9, 20, 0), MemoAnswer::Unknown);
        assert!(memo.record_write(b"a", 12, || false).is_none());
        let undo = memo.record_write(b"a", 13, || true);
        assert!(undo.is_some());
        assert_eq!(memo.answer(b"a", 12, 20, 0), MemoAnswer::Stale);
        assert_eq!(memo.answer(b"a", 13, 20, 0), MemoAnswer::Live);
        // A query at a snapshot below the newest write cannot use the entry.
        assert_eq!(memo.answer(b"a", 12, 12, 0), MemoAnswer::Unknown);
        // Dropping the obsolete version 12 empties the entry once the job is installed.
        let job = JobKind::Flush;
        memo.queue_drop(job, b"a", 12, DropReason::Shadowed);
        assert_eq!(memo.len(), 1);
        memo.apply_drops(JobKey::Compaction {
            input_level: 0,
            output_level: 1,
        });
        assert_eq!(memo.len(), 1, "another job's installation applies nothing");
        memo.apply_drops(JobKey::Flush);
        assert_eq!(memo.len(), 0);
        assert_eq!(memo.epoch(), 1);
        // An older query no longer trusts absences.
        assert_eq!(memo.answer(b"a", 13, 20, 0), MemoAnswer::Unknown);
        assert_eq!(memo.answer(b"a", 13, 20, 1), MemoAnswer::Live);
    }

    #[test]
    fn undo_restores_the_previous_state() {
        let memo = UpdateMemo::new(0);
        let first = memo.record_write(b"k", 5, || true);
        let second = memo.record_write(b"k", 6, || true);
        memo.undo(second.into_iter().collect());
        assert_eq!(memo.answer(b"k", 5, 9, 0), MemoAnswer::Live);
        memo.undo(first.into_iter().collect());
        assert_eq!(memo.len(), 0);
        assert_eq!(memo.memory_bytes(), 0);
    }
}
