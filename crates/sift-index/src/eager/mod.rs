//! The `eager` index kind (LevelDB++ Stand-alone Eager index): one posting list per value in
//! the index's own tree, newest first, read-modify-written by every write under the database's
//! write lock (so no update is lost). A `sync-full` write also removes the pk from its old
//! value's list; unique eager indexes check the new value's list (`kind/unique.rs`).
//! LOOKUP reads one list; RANGE merges the range's lists through the top K (Algorithm 2).

use crate::error::Result;
use crate::kind::query::{Query, SearchOutput, SearchRequest};
use crate::kind::write::{Change, WriteContext};
use crate::kind::{Backfill, Index, SecondaryIndex};
use crate::postings::{decode_postings, encode_postings, Posting};
use sift_lsm::{ReadOptions, SeqNo, Tree};
use std::any::Any;

/// An eager index's tree.
#[derive(Debug)]
pub(crate) struct Eager {
    tree: Tree,
}

impl Eager {
    pub(crate) fn new(tree: Tree) -> Eager {
        Eager { tree }
    }

    /// Reads `value`'s list into the batch's lists, once per batch.
    fn load(&self, cx: &mut WriteContext<'_>, position: usize, value: &[u8]) -> Result<()> {
        if let std::collections::btree_map::Entry::Vacant(slot) =
            cx.posting_lists.entry((position, value.to_vec()))
        {
            let list = match cx.engine.get(&self.tree, value)? {
                Some(entry) => decode_postings(&entry.value)?,
                None => Vec::new(),
            };
            slot.insert(list);
        }
        Ok(())
    }
}

impl SecondaryIndex for Eager {
    fn as_any(&self) -> &dyn Any {
        self
    }

    fn tree(&self) -> Option<&Tree> {
        Some(&self.tree)
    }

    fn write(&self, index: &Index, cx: &mut WriteContext<'_>, change: &Change<'_>) -> Result<()> {
        let position = change.position;
        let pk = change.pk;
        // The old version is read for `sync-full` (and for a delete): its posting goes.
        let old_value = change.old_value.map(|(value, _)| value);
        if let Some(old_value) = old_value {
            self.load(cx, position, old_value)?;
        }
        if let Some(new_value) = change.new_value {
            self.load(cx, position, new_value)?;
        }
        if let (true, Some(new_value)) = (index.record.unique, change.new_value) {
            let taken = cx
                .posting_lists
                .get(&(position, new_value.to_vec()))
                .is_some_and(|list| list.iter().any(|p| p.pk != pk));
            if taken {
                return Err(crate::kind::unique::violation(&index.record, new_value));
            }
        }
        if let Some(old_value) = old_value {
            if let Some(list) = cx.posting_lists.get_mut(&(position, old_value.to_vec())) {
                list.retain(|posting| posting.pk != pk);
            }
        }
        if let Some(new_value) = change.new_value {
            if let Some(list) = cx.posting_lists.get_mut(&(position, new_value.to_vec())) {
                list.retain(|posting| posting.pk != pk);
                list.insert(0, Posting::add(pk, change.seq));
            }
        }
        Ok(())
    }

    fn finish_batch(
        &self,
        _index: &Index,
        position: usize,
        cx: &mut WriteContext<'_>,
    ) -> Result<()> {
        let start = (position, Vec::new());
        let end = (position + 1, Vec::new());
        for ((_, value), list) in cx.posting_lists.range(start..end) {
            if list.is_empty() {
                cx.batch.delete(&self.tree, value);
            } else {
                cx.batch.put(&self.tree, value, &encode_postings(list));
            }
        }
        Ok(())
    }

    fn backfill(
        &self,
        _index: &Index,
        cx: &mut Backfill<'_>,
        pk: &[u8],
        value: &[u8],
        seq: SeqNo,
    ) -> Result<()> {
        cx.gather_posting(value, pk, seq);
        Ok(())
    }

    fn finish_backfill(&self, _index: &Index, cx: &mut Backfill<'_>) -> Result<()> {
        cx.write_lists(&self.tree)
    }

    fn search(&self, index: &Index, request: SearchRequest<'_>) -> Result<SearchOutput> {
        let mut query = Query::new(request, index);
        query.run_eager(&self.tree)?;
        Ok(query.finish())
    }
}

impl Query<'_> {
    /// Postings of one list, newest first: validated until one cannot enter the top K.
    pub(crate) fn take_list(&mut self, value: &[u8], list: &[Posting]) -> Result<()> {
        for posting in list.iter().filter(|p| !p.remove) {
            self.stats.candidates_examined += 1;
            if !self.top.would_accept(posting.seq) {
                break;
            }
            self.validate(&posting.pk, value, Some(posting.seq))?;
        }
        Ok(())
    }

    /// Eager (Algorithm 2): LOOKUP reads one list; RANGE scans the lists of the range and
    /// merges them through the top-K heap.
    fn run_eager(&mut self, tree: &Tree) -> Result<()> {
        if self.point {
            if let Some(entry) = self.engine.get_with(tree, &self.start, &self.read)? {
                let list =
                    decode_postings(&entry.value).map_err(|e| self.corrupt("posting list", &e))?;
                let value = self.start.clone();
                self.take_list(&value, &list)?;
            }
            return Ok(());
        }
        let options = ReadOptions {
            lower_bound: Some(self.start.clone()),
            upper_bound: self.end.clone(),
            ..self.read.clone()
        };
        let mut iter = self.engine.iter(tree, options)?;
        iter.seek(&self.start.clone())?;
        while iter.valid() {
            let value = iter.key().to_vec();
            let list =
                decode_postings(iter.value()).map_err(|e| self.corrupt("posting list", &e))?;
            self.take_list(&value, &list)?;
            iter.next()?;
        }
        Ok(())
    }
}
