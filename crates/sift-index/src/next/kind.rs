//! `next` and `sst-local` behind the trait: a write records the new value in the index's map
//! of memtable writes (before the engine write); the secondary blocks are written by the
//! collector as tables are (`collector.rs`), so nothing is back-filled by a scan — creating the
//! index registers it, and the older tables get blocks online (`build.rs`).

use super::{NextIndexState, Registry};
use crate::error::Result;
use crate::kind::query::{Query, SearchOutput, SearchRequest};
use crate::kind::within::WithinRequest;
use crate::kind::write::{Change, WriteContext};
use crate::kind::{Collection, Index, SecondaryIndex};
use sift_lsm::{Db, TreeId};
use std::any::Any;
use std::sync::{Arc, OnceLock};

/// A `next` or `sst-local` index: its state lives in the registry (read by the collector, the
/// version listener and the compaction observer), by primary tree and index id.
pub(crate) struct Next {
    registry: Arc<Registry>,
    primary: TreeId,
    /// The registered state, kept so that a write reaches its memtable map without a registry
    /// lookup per document.
    state: OnceLock<Arc<NextIndexState>>,
}

impl std::fmt::Debug for Next {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Next")
            .field("primary", &self.primary)
            .finish_non_exhaustive()
    }
}

impl Next {
    /// Not registered yet: [`SecondaryIndex::build_without_scan`] registers it.
    pub(crate) fn new(registry: &Arc<Registry>, primary: TreeId) -> Next {
        Next {
            registry: Arc::clone(registry),
            primary,
            state: OnceLock::new(),
        }
    }
}

impl SecondaryIndex for Next {
    fn as_any(&self) -> &dyn Any {
        self
    }

    fn write(&self, _index: &Index, _cx: &mut WriteContext<'_>, change: &Change<'_>) -> Result<()> {
        // Recorded before the engine write, like the embedded map. Writes reach only ready
        // indexes, which are registered.
        if let (Some(state), Some(value)) = (self.state.get(), change.new_value) {
            state.memtable.insert(value, change.seq, change.pk);
        }
        Ok(())
    }

    fn backfills_by_scan(&self) -> bool {
        false
    }

    fn build_without_scan(
        &self,
        index: &Index,
        engine: &Db,
        collection: &Collection,
    ) -> Result<()> {
        let state =
            self.registry
                .register(engine, &collection.primary, &index.record, &index.reader)?;
        // Called once per index (at its creation, or when it is opened).
        let _ = self.state.set(state);
        Ok(())
    }

    fn search(&self, index: &Index, request: SearchRequest<'_>) -> Result<SearchOutput> {
        let limit = request.limit;
        let mut query = Query::new(request, index);
        let output = super::query::run(
            query.engine,
            &self.registry,
            query.collection,
            index,
            &query.start,
            query.end.as_deref(),
            limit,
            &query.read,
            &query.read_stats,
        )?;
        query.stats = output.stats;
        // Already newest first and within the limit (checked: else through the heap): no heap
        // pass and re-sort of every hit.
        let sorted = output.hits.windows(2).all(|w| w[0].seq >= w[1].seq);
        if sorted && limit.is_none_or(|k| output.hits.len() <= k) {
            let mut finished = query.finish();
            finished.hits = output.hits;
            return Ok(finished);
        }
        for hit in output.hits {
            query.top.push(hit);
        }
        Ok(query.finish())
    }

    fn within(&self, index: &Index, request: WithinRequest<'_>) -> Result<SearchOutput> {
        // Secondary blocks in the primary's tables, bounding rectangles.
        let result = super::query::within(
            request.engine,
            &self.registry,
            request.collection,
            index,
            &request.geo_box,
            request.limit,
        )?;
        Ok(SearchOutput {
            hits: result.hits,
            stats: result.stats,
            stale: Vec::new(),
        })
    }

    fn memory_bytes(&self, index: &Index) -> u64 {
        self.registry.memory_bytes(self.primary, index.record.id)
    }

    fn dropped(&self, index: &Index, _collection: &Collection) {
        self.registry.unregister(self.primary, index.record.id);
    }
}
