//! LOOKUP and RANGE over a `deferred` composite index (the deferred kind's `search`, on
//! the shared query state of `kind/query.rs`).
//!
//! Keys are `value ‖ !seq ‖ pk` (see `deferred/mod.rs`); entries cancelled by a DELETE are never
//! seen (the engine hides them). Every other entry is validated against the primary: it is a
//! hit only if the pk's live version has the entry's sequence number, so a hit's sequence
//! number is its entry's. LOOKUP walks one value's entries newest first and stops after K
//! hits; RANGE gathers the range's entries (an index-only scan), then validates them newest
//! first until one cannot enter the top K.

use crate::deferred::split_deferred_key;
use crate::error::Result;
use crate::kind::query::Query;
use sift_lsm::{ReadOptions, SeqNo};

impl Query<'_> {
    pub(crate) fn run_deferred(&mut self) -> Result<()> {
        let tree = self.index.stand_alone_tree()?;
        let options = ReadOptions {
            lower_bound: Some(self.start.clone()),
            upper_bound: self.end.clone(),
            ..self.read.clone()
        };
        let attr_type = self.index.record.attr_type;
        let mut iter = self.engine.iter(tree, options)?;
        iter.seek(&self.start.clone())?;
        if self.point {
            while iter.valid() && !self.top.is_full() {
                self.stats.candidates_examined += 1;
                let key = iter.key();
                let (value_bytes, seq, pk) = split_deferred_key(key, attr_type)
                    .map_err(|e| self.corrupt("deferred key", &e))?;
                let value = key[..value_bytes].to_vec();
                self.validate(&pk, &value, Some(seq))?;
                iter.next()?;
            }
            return Ok(());
        }
        let mut candidates: Vec<(SeqNo, Vec<u8>, Vec<u8>)> = Vec::new();
        while iter.valid() {
            self.stats.candidates_examined += 1;
            let key = iter.key();
            let (value_bytes, seq, pk) =
                split_deferred_key(key, attr_type).map_err(|e| self.corrupt("deferred key", &e))?;
            candidates.push((seq, pk, key[..value_bytes].to_vec()));
            iter.next()?;
        }
        candidates.sort_unstable_by_key(|c| std::cmp::Reverse(c.0));
        for (seq, pk, value) in candidates {
            if !self.top.would_accept(seq) {
                break;
            }
            self.validate(&pk, &value, Some(seq))?;
        }
        Ok(())
    }
}
