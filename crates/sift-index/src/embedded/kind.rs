//! The embedded kind behind the trait: a write records the new value in the map of recent
//! writes (before the engine write, see `memtable.rs`); nothing is back-filled; queries walk the
//! primary tree (`query.rs`).

use super::{start, CollectedAttr, EmbeddedIndex, EmbeddedRegistry};
use crate::catalog::IndexRecord;
use crate::document::DocumentParser;
use crate::error::Result;
use crate::kind::query::{Query, SearchOutput, SearchRequest};
use crate::kind::write::{Change, WriteContext};
use crate::kind::{Collection, Index, SecondaryIndex};
use sift_lsm::{Db, SeqNo};
use std::any::Any;
use std::sync::Arc;

/// An embedded index: its map of recent writes and what the collector gathers, and the
/// registry the collector and the flush listener read.
#[derive(Debug)]
pub(crate) struct Embedded {
    state: Arc<EmbeddedIndex>,
    registry: Arc<EmbeddedRegistry>,
}

impl Embedded {
    /// Not yet collected nor filled: [`SecondaryIndex::build_without_scan`] starts it.
    pub(crate) fn new(
        record: &IndexRecord,
        reader: &DocumentParser,
        registry: &Arc<EmbeddedRegistry>,
    ) -> Embedded {
        Embedded {
            state: Arc::new(EmbeddedIndex::new(CollectedAttr {
                attr_id: record.attr_id,
                bloom_bits_per_key: record.bloom_bits_per_key(),
                first_seq: record.first_seq,
                reader: reader.clone(),
            })),
            registry: Arc::clone(registry),
        }
    }
}

impl SecondaryIndex for Embedded {
    fn as_any(&self) -> &dyn Any {
        self
    }

    fn needs_old_version(&self, _index: &Index) -> bool {
        false // nothing to remove: queries validate every candidate
    }

    fn write(&self, _index: &Index, _cx: &mut WriteContext<'_>, change: &Change<'_>) -> Result<()> {
        if let Some(value) = change.new_value {
            self.state.map.insert(value, change.seq, change.pk);
        }
        Ok(())
    }

    fn forget_uncommitted(&self, through: SeqNo) {
        self.state.map.prune_through(through);
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
        // Tables without the collector's bytes for the attribute are scanned by queries; the
        // memtables are read into the map.
        start(
            engine,
            &self.registry,
            &collection.primary,
            index,
            &self.state,
        )
    }

    fn search(&self, index: &Index, request: SearchRequest<'_>) -> Result<SearchOutput> {
        let mut query = Query::new(request, index);
        super::query::run(super::query::Request {
            engine: query.engine,
            collection: query.collection,
            index,
            embedded: &self.state,
            start: &query.start,
            end: query.end.as_deref(),
            point: query.point,
            read: &query.read,
            top: &mut query.top,
            stats: &mut query.stats,
        })?;
        Ok(query.finish())
    }

    fn memory_bytes(&self, _index: &Index) -> u64 {
        self.state.map.memory_bytes()
    }

    fn dropped(&self, index: &Index, collection: &Collection) {
        self.registry
            .unregister(collection.primary.id(), index.record.attr_id);
    }
}
