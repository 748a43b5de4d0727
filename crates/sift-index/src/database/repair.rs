//! Read repair: stale index entries a query met, deleted once re-checked under the write lock.

use super::Database;
use crate::error::Result;
use crate::kind::query::StaleEntry;
use crate::kind::{Collection, Index};
use sift_lsm::WriteBatch;

impl Database {
    /// Writes read-repair deletions. Each kind re-checks its entries under the write lock
    /// against the latest state, so a repair never removes an entry a concurrent write made
    /// valid again.
    pub(crate) fn repair(
        &self,
        collection: &Collection,
        index: &Index,
        stale: Vec<StaleEntry>,
    ) -> Result<u64> {
        let _guard = self.lock_writes();
        let mut batch = WriteBatch::new();
        for entry in &stale {
            index
                .kind
                .repair(index, &self.engine, collection, &mut batch, entry)?;
        }
        let repaired = batch.len() as u64;
        if repaired > 0 {
            self.engine.write(batch, &self.write_options)?;
        }
        Ok(repaired)
    }
}
