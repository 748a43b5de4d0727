//! The `composite` index kind (LevelDB++ Stand-alone Composite index): one key
//! `enc(value) ‖ encode_pk(pk)` per indexed version in the index's own tree, empty values
//! (`sync-full`, `sync-insert`) or the version's sequence number (asynchronous maintenance).
//! A `sync-full` write deletes the replaced version's key; `sync-insert` leaves it for
//! queries to find stale. Tables of the tree record each block's largest sequence number
//! (`seq.rs`), so a LOOKUP reads a value's blocks newest first (`bounded.rs`, `query.rs`).
//! The `deferred` scheme's composite index is its own kind (`deferred/`).

pub(crate) mod bounded;
mod query;
pub mod seq;

use crate::catalog::{IndexRecord, Maintenance};
use crate::encoding::encode_pk;
use crate::envelope::EnvelopeRef;
use crate::error::Result;
use crate::kind::query::{Query, SearchOutput, SearchRequest, StaleEntry};
use crate::kind::within::{Within, WithinRequest};
use crate::kind::write::{Change, WriteContext};
use crate::kind::{Backfill, Collection, Index, SecondaryIndex};
use seq::{CompositeSeqCollectorFactory, CompositeSeqRegistry};
use sift_lsm::{Db, SeqNo, Tree, TreeOptions, WriteBatch};
use std::any::Any;
use std::sync::Arc;

/// A composite index's tree.
#[derive(Debug)]
pub(crate) struct Composite {
    tree: Tree,
}

impl Composite {
    /// Options of a new composite tree (also the deferred scheme's): its tables record each
    /// block's largest sequence number.
    pub(crate) fn tree_options(seq_registry: &Arc<CompositeSeqRegistry>) -> TreeOptions {
        let mut options = TreeOptions::default();
        options
            .block_property_collectors
            .push(Arc::new(CompositeSeqCollectorFactory::new(Arc::clone(
                seq_registry,
            ))));
        options
    }

    /// The index over `tree`, registered for sequence bounds before anything is written to it.
    pub(crate) fn new(tree: Tree, seq_registry: &CompositeSeqRegistry) -> Composite {
        seq_registry.register(tree.id());
        Composite { tree }
    }
}

/// `value ‖ encode_pk(pk)`.
pub(crate) fn composite_key(value: &[u8], pk: &[u8]) -> Vec<u8> {
    let mut key = Vec::with_capacity(value.len() + pk.len() + 2);
    key.extend_from_slice(value);
    encode_pk(pk, &mut key);
    key
}

/// The entry's value: empty, or (asynchronous maintenance) the sequence number of the version
/// it indexes (`async_index`).
pub(crate) fn entry_value(record: &IndexRecord, seq: SeqNo) -> Vec<u8> {
    if record.maintenance.is_async() {
        seq.to_be_bytes().to_vec()
    } else {
        Vec::new()
    }
}

impl SecondaryIndex for Composite {
    fn as_any(&self) -> &dyn Any {
        self
    }

    fn tree(&self) -> Option<&Tree> {
        Some(&self.tree)
    }

    fn write(&self, index: &Index, cx: &mut WriteContext<'_>, change: &Change<'_>) -> Result<()> {
        let old_value = change.old_value.map(|(value, _)| value);
        if index.record.unique {
            cx.unique_claims.claim_composite(
                cx.engine,
                change.position,
                index,
                change.pk,
                old_value,
                change.new_value,
            )?;
        }
        if index.record.maintenance == Maintenance::SyncFull {
            if let Some(old_value) = old_value {
                if change.new_value != Some(old_value) {
                    cx.batch
                        .delete(&self.tree, &composite_key(old_value, change.pk));
                }
            }
        }
        if let Some(new_value) = change.new_value {
            cx.batch
                .put(&self.tree, &composite_key(new_value, change.pk), b"");
        }
        Ok(())
    }

    fn backfill(
        &self,
        index: &Index,
        cx: &mut Backfill<'_>,
        pk: &[u8],
        value: &[u8],
        seq: SeqNo,
    ) -> Result<()> {
        cx.put(
            &self.tree,
            &composite_key(value, pk),
            &entry_value(&index.record, seq),
        )
    }

    fn search(&self, index: &Index, request: SearchRequest<'_>) -> Result<SearchOutput> {
        let mut query = Query::new(request, index);
        if query.point {
            query.run_composite_point()?;
        } else {
            query.run_composite()?;
        }
        Ok(query.finish())
    }

    fn within(&self, index: &Index, request: WithinRequest<'_>) -> Result<SearchOutput> {
        let mut within = Within::new(&request, index);
        within.run_composite(&request.ranges)?;
        Ok(within.finish())
    }

    fn repair(
        &self,
        index: &Index,
        engine: &Db,
        collection: &Collection,
        batch: &mut WriteBatch,
        entry: &StaleEntry,
    ) -> Result<()> {
        let still_valid = match engine.get(&collection.primary, &entry.pk)? {
            Some(live) => {
                let envelope = EnvelopeRef::decode(&live.value)
                    .map_err(|e| collection.corrupt_document(&entry.pk, &e))?;
                index.encoded_value(&envelope, live.seq).as_deref() == Some(entry.value.as_slice())
            }
            None => false,
        };
        if !still_valid {
            batch.delete(&self.tree, &composite_key(&entry.value, &entry.pk));
        }
        Ok(())
    }
}
