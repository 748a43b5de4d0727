//! Read repair: stale index entries a query met, deleted once re-checked under the write lock.

use super::{corrupt_document, Database};
use crate::catalog::IndexKind;
use crate::collection::{Collection, Index};
use crate::encoding::encode_pk;
use crate::envelope::EnvelopeRef;
use crate::error::Result;
use crate::postings::{encode_postings, Posting};
use sift_lsm::WriteBatch;

impl Database {
    /// Writes read-repair deletions. `check` is re-run under the write lock against the
    /// latest state, so a repair never removes an entry a concurrent write made valid again.
    pub(crate) fn repair(
        &self,
        collection: &Collection,
        index: &Index,
        stale: Vec<crate::query::StaleEntry>,
    ) -> Result<u64> {
        let _guard = self.lock_writes();
        let tree = index.stand_alone_tree()?;
        let mut batch = WriteBatch::new();
        for entry in stale {
            match index.record.kind {
                IndexKind::Composite => {
                    let still_valid = match self.engine.get(&collection.primary, &entry.pk)? {
                        Some(live) => {
                            let envelope = EnvelopeRef::decode(&live.value).map_err(|e| {
                                corrupt_document(&collection.record.name, &entry.pk, &e)
                            })?;
                            index.encoded_value(&envelope, live.seq).as_deref()
                                == Some(entry.value.as_slice())
                        }
                        None => false,
                    };
                    if !still_valid {
                        let mut key = entry.value.clone();
                        encode_pk(&entry.pk, &mut key);
                        batch.delete(tree, &key);
                    }
                }
                IndexKind::Lazy => {
                    // A posting whose version is not live is stale for good.
                    batch.merge(
                        tree,
                        &entry.value,
                        &encode_postings(&[Posting::remove(&entry.pk, entry.seq)]),
                    );
                }
                IndexKind::Eager
                | IndexKind::Memory
                | IndexKind::SstLocal
                | IndexKind::Next
                | IndexKind::Embedded => {}
            }
        }
        let repaired = batch.len() as u64;
        if repaired > 0 {
            self.engine.write(batch, &self.write_options)?;
        }
        Ok(repaired)
    }
}
