//! The memory kind behind the trait: writes update the maps once the batch committed,
//! queries take their candidates from the maps (before the snapshot, so it holds every version
//! they name) and validate them newest first.

use super::MemoryIndex;
use crate::error::Result;
use crate::kind::query::{Query, SearchOutput, SearchRequest};
use crate::kind::within::{key_bounds, Candidate, Within, WithinRequest};
use crate::kind::write::{Change, WriteContext};
use crate::kind::{Backfill, Index, SecondaryIndex};
use sift_lsm::SeqNo;
use std::any::Any;
use std::cmp::Reverse;

impl SecondaryIndex for MemoryIndex {
    fn as_any(&self) -> &dyn Any {
        self
    }

    fn needs_old_version(&self, _index: &Index) -> bool {
        false // the map knows each pk's current entry
    }

    fn write(&self, _index: &Index, cx: &mut WriteContext<'_>, change: &Change<'_>) -> Result<()> {
        cx.after_commit.push((
            change.position,
            change.pk.to_vec(),
            change.new_value.map(|value| (value.to_vec(), change.seq)),
        ));
        Ok(())
    }

    fn apply_committed(&self, pk: &[u8], value: Option<(&[u8], SeqNo)>) {
        self.set(pk, value);
    }

    fn backfill(
        &self,
        _index: &Index,
        _cx: &mut Backfill<'_>,
        pk: &[u8],
        value: &[u8],
        seq: SeqNo,
    ) -> Result<()> {
        self.set(pk, Some((value, seq)));
        Ok(())
    }

    fn search(&self, index: &Index, request: SearchRequest<'_>) -> Result<SearchOutput> {
        let candidates = self.candidates(&request.start, request.end.as_deref());
        let mut query = Query::new(request, index);
        query.run_memory(candidates)?;
        Ok(query.finish())
    }

    fn within(&self, index: &Index, request: WithinRequest<'_>) -> Result<SearchOutput> {
        let entries = request
            .ranges
            .iter()
            .flat_map(|&range| {
                let (start, end) = key_bounds(range);
                self.entries_in(&start, end.as_deref())
            })
            .collect::<Vec<_>>();
        let mut within = Within::new(&request, index);
        within.run_memory(entries)?;
        Ok(within.finish())
    }

    fn memory_bytes(&self, _index: &Index) -> u64 {
        MemoryIndex::memory_bytes(self)
    }
}

impl Query<'_> {
    /// Memory: the candidates come from the maps (read before the snapshot was taken, so the
    /// snapshot holds every version they name), newest first.
    fn run_memory(&mut self, mut candidates: Vec<(SeqNo, Vec<u8>)>) -> Result<()> {
        candidates.sort_by_key(|(seq, _)| Reverse(*seq));
        for (seq, pk) in candidates {
            self.stats.candidates_examined += 1;
            if !self.top.would_accept(seq) {
                break;
            }
            self.validate(&pk, &[], Some(seq))?;
        }
        Ok(())
    }
}

impl Within<'_> {
    /// Memory: the map's entries in the cover's ranges (read before the snapshot was taken),
    /// filtered by the box, validated newest first.
    fn run_memory(&mut self, entries: Vec<(Vec<u8>, Vec<u8>, SeqNo)>) -> Result<()> {
        let mut candidates = Vec::new();
        for (value, pk, seq) in entries {
            self.stats.candidates_examined += 1;
            if self.value_inside(&value)? {
                candidates.push(Candidate {
                    entry_seq: seq,
                    pk,
                    value,
                });
            }
        }
        candidates.sort_unstable_by_key(|candidate| Reverse(candidate.entry_seq));
        for candidate in candidates {
            if !self.would_accept(candidate.entry_seq) {
                break;
            }
            let seq = candidate.entry_seq;
            self.validate(&candidate, Some(seq))?;
        }
        Ok(())
    }
}
