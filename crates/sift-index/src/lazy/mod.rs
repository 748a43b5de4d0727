//! The `lazy` index kind (LevelDB++ Stand-alone Lazy index): a write merges one posting
//! fragment into its value's key (the engine's merge operator, `postings.rs`), no read; a
//! `sync-full` write also merges a remove for the old value. Queries walk the tree component by
//! component, newest first (Algorithms 3 and 6): LOOKUP in `point.rs`, RANGE here.

pub(crate) mod point;

use crate::catalog::Maintenance;
use crate::error::Result;
use crate::kind::query::{Query, SearchOutput, SearchRequest, StaleEntry};
use crate::kind::write::{Change, WriteContext};
use crate::kind::{Backfill, Collection, Index, SecondaryIndex};
use crate::postings::{encode_postings, Posting, PostingMergeOperator};
use point::{ComponentFragments, RemovedPostings};
use sift_lsm::{Db, SeqNo, Tree, TreeOptions, WriteBatch};
use std::any::Any;
use std::collections::HashSet;
use std::sync::Arc;

/// A lazy index's tree.
#[derive(Debug)]
pub(crate) struct Lazy {
    tree: Tree,
}

impl Lazy {
    /// Options of a new lazy tree: the posting merge operator (also installed as the engine's
    /// default at open, see `lib.rs`).
    pub(crate) fn tree_options() -> TreeOptions {
        TreeOptions {
            merge_operator: Some(Arc::new(PostingMergeOperator)),
            ..TreeOptions::default()
        }
    }

    pub(crate) fn new(tree: Tree) -> Lazy {
        Lazy { tree }
    }
}

impl SecondaryIndex for Lazy {
    fn as_any(&self) -> &dyn Any {
        self
    }

    fn tree(&self) -> Option<&Tree> {
        Some(&self.tree)
    }

    fn write(&self, index: &Index, cx: &mut WriteContext<'_>, change: &Change<'_>) -> Result<()> {
        if index.record.maintenance == Maintenance::SyncFull {
            if let Some((old_value, old_seq)) = change.old_value {
                cx.batch.merge(
                    &self.tree,
                    old_value,
                    &encode_postings(&[Posting::remove(change.pk, old_seq)]),
                );
            }
        }
        if let Some(new_value) = change.new_value {
            cx.batch.merge(
                &self.tree,
                new_value,
                &encode_postings(&[Posting::add(change.pk, change.seq)]),
            );
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
        if query.point {
            query.run_lazy_point()?;
        } else {
            query.run_lazy()?;
        }
        Ok(query.finish())
    }

    fn repair(
        &self,
        _index: &Index,
        _engine: &Db,
        _collection: &Collection,
        batch: &mut WriteBatch,
        entry: &StaleEntry,
    ) -> Result<()> {
        // A posting whose version is not live is stale for good.
        batch.merge(
            &self.tree,
            &entry.value,
            &encode_postings(&[Posting::remove(&entry.pk, entry.seq)]),
        );
        Ok(())
    }
}

impl Query<'_> {
    /// Lazy (Algorithms 3 and 6): component by component, newest first. A fragment's postings
    /// are older than the fragment's own sequence number, and for one key every fragment of a
    /// component is newer than every fragment below it. So a LOOKUP stops after the first
    /// component at which K valid hits are known; a RANGE (several keys) stops once the K-th
    /// hit is newer than every table left to read.
    pub(crate) fn run_lazy(&mut self) -> Result<()> {
        let tree = self.index.stand_alone_tree()?;
        let view = self.engine.components(tree, &self.read)?;
        let ids = view.ids();
        let mut removed = RemovedPostings::default();
        // Keys whose base (a full list or a delete) was met: nothing below them counts.
        let mut based: HashSet<Vec<u8>> = HashSet::new();
        let mut fragments = ComponentFragments::default();
        for (position, id) in ids.iter().enumerate() {
            self.stats.components_read += 1;
            self.collect_fragments(&view, *id, &mut based, &mut fragments)?;
            self.take_lists(*id, &fragments, &mut removed)?;
            if !self.top.is_full() {
                continue;
            }
            let newest_left = self.newest_seq_in(&view, &ids[position + 1..]);
            if self.top.min_seq().is_some_and(|min| newest_left <= min) {
                break;
            }
        }
        Ok(())
    }
}
