//! The deferred scheme's composite index behind the trait: blind writes of
//! `value ‖ !seq ‖ pk` keys; the replaced version's entry is cancelled later, by the DELETE the
//! primary's flush or compaction emits when it drops that version (`mod.rs`), or at once by
//! the fast path when the version is known without a disk read.

use super::deferred_key;
use crate::error::{IndexError, Result};
use crate::kind::query::{Query, SearchOutput, SearchRequest};
use crate::kind::within::WithinRequest;
use crate::kind::write::{Change, WriteContext};
use crate::kind::{Backfill, Index, SecondaryIndex};
use sift_lsm::{SeqNo, Tree};
use std::any::Any;

/// A deferred composite index's tree.
#[derive(Debug)]
pub(crate) struct DeferredComposite {
    tree: Tree,
}

impl DeferredComposite {
    /// The index over `tree` (created with `Composite::tree_options`).
    pub(crate) fn new(
        tree: Tree,
        seq_registry: &crate::composite::seq::CompositeSeqRegistry,
    ) -> DeferredComposite {
        seq_registry.register(tree.id());
        DeferredComposite { tree }
    }
}

impl SecondaryIndex for DeferredComposite {
    fn as_any(&self) -> &dyn Any {
        self
    }

    fn tree(&self) -> Option<&Tree> {
        Some(&self.tree)
    }

    fn write(&self, index: &Index, cx: &mut WriteContext<'_>, change: &Change<'_>) -> Result<()> {
        if let Some((envelope, old_seq)) = change.shadowed {
            if let Some(old_value) = index.encoded_value(envelope, old_seq) {
                cx.batch
                    .delete(&self.tree, &deferred_key(&old_value, old_seq, change.pk));
                cx.deferred_fast_path_deletes += 1;
            }
        }
        if let Some(new_value) = change.new_value {
            cx.batch.put(
                &self.tree,
                &deferred_key(new_value, change.seq, change.pk),
                b"",
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
        cx.put(&self.tree, &deferred_key(value, seq, pk), b"")
    }

    fn search(&self, index: &Index, request: SearchRequest<'_>) -> Result<SearchOutput> {
        let mut query = Query::new(request, index);
        query.run_deferred()?;
        Ok(query.finish())
    }

    fn within(&self, index: &Index, _request: WithinRequest<'_>) -> Result<SearchOutput> {
        Err(IndexError::UnsupportedQuery {
            index: index.record.name.clone(),
            reason: "`within` does not read deferred composite indexes yet (their keys carry a \
                     sequence number between value and pk); use `lookup` or `range`, or a \
                     sync-full / sync-insert composite index"
                .to_string(),
        })
    }
}
