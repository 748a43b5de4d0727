//! Queries: a document by primary key, LOOKUP, RANGE and WITHIN. Each checks its arguments,
//! then hands the query to the index's kind.

use super::Database;
use crate::encoding::{checked_range_bounds, value_bounds};
use crate::envelope::EnvelopeRef;
use crate::error::{IndexError, Result};
use crate::geo::{zorder_cover, GeoBox, MAX_KEY_RANGES};
use crate::kind::query::{Hit, QueryResult, SearchOutput, SearchRequest};
use crate::kind::within::WithinRequest;
use crate::kind::{Collection, Index};
use crate::value::{AttrType, AttrValue};
use sift_lsm::ReadOptions;

impl Database {
    /// The live version of one document.
    pub fn get(&self, collection: &str, pk: &[u8]) -> Result<Option<Hit>> {
        let collection = self.collection_arc(collection)?;
        let Some(entry) = self.engine.get(&collection.primary, pk)? else {
            return Ok(None);
        };
        let envelope =
            EnvelopeRef::decode(&entry.value).map_err(|e| collection.corrupt_document(pk, &e))?;
        Ok(Some(Hit {
            pk: pk.to_vec(),
            seq: entry.seq,
            doc: envelope.doc().to_vec(),
        }))
    }

    /// A page of a full scan: the live documents with primary key `>= from`, in key order, at
    /// most `limit`, read from one snapshot. The next page starts just after the last key
    /// returned (its bytes with a 0 byte appended).
    pub fn scan(&self, collection: &str, from: &[u8], limit: usize) -> Result<Vec<Hit>> {
        let collection = self.collection_arc(collection)?;
        let options = ReadOptions {
            lower_bound: Some(from.to_vec()),
            // A scan passes over the collection once: it should not evict the hot blocks.
            skip_cache_fill: true,
            ..ReadOptions::default()
        };
        let mut iter = self.engine.iter(&collection.primary, options)?;
        iter.seek(from)?;
        let mut hits = Vec::with_capacity(limit.min(1024));
        while iter.valid() && hits.len() < limit {
            let pk = iter.key();
            let envelope = EnvelopeRef::decode(iter.value())
                .map_err(|e| collection.corrupt_document(pk, &e))?;
            hits.push(Hit {
                pk: pk.to_vec(),
                seq: iter.seq(),
                doc: envelope.doc().to_vec(),
            });
            iter.next()?;
        }
        Ok(hits)
    }

    /// LOOKUP(index, value, K): the documents whose attribute equals `value`, newest first,
    /// at most `limit` of them (`None`: all).
    pub fn lookup(
        &self,
        collection: &str,
        index: &str,
        value: &AttrValue,
        limit: Option<usize>,
    ) -> Result<QueryResult> {
        let collection = self.collection_arc(collection)?;
        let index = collection.index(index)?;
        reject_geo_index(index, "lookup")?;
        check_type(index, value)?;
        self.run_query(&collection, index, value_bounds(value), true, limit)
    }

    /// RANGELOOKUP(index, lo, hi, K): documents with `lo <= attribute <= hi`, newest first.
    pub fn range(
        &self,
        collection: &str,
        index: &str,
        lo: &AttrValue,
        hi: &AttrValue,
        limit: Option<usize>,
    ) -> Result<QueryResult> {
        let collection = self.collection_arc(collection)?;
        let index = collection.index(index)?;
        reject_geo_index(index, "range")?;
        check_type(index, lo)?;
        check_type(index, hi)?;
        let bounds = checked_range_bounds(lo, hi)?;
        self.run_query(&collection, index, bounds, false, limit)
    }

    fn run_query(
        &self,
        collection: &Collection,
        index: &Index,
        (start, end): (Vec<u8>, Option<Vec<u8>>),
        point: bool,
        limit: Option<usize>,
    ) -> Result<QueryResult> {
        if limit == Some(0) {
            return Ok(QueryResult::default());
        }
        let output = index.kind.search(
            index,
            SearchRequest {
                engine: &self.engine,
                collection,
                start,
                end,
                point,
                limit,
            },
        )?;
        self.finish_query(collection, index, output)
    }

    /// Read repair of the stale entries a query met, then the result.
    fn finish_query(
        &self,
        collection: &Collection,
        index: &Index,
        output: SearchOutput,
    ) -> Result<QueryResult> {
        let SearchOutput {
            hits,
            mut stats,
            stale,
        } = output;
        if !stale.is_empty() {
            stats.entries_repaired = self.repair(collection, index, stale)?;
        }
        Ok(QueryResult { hits, stats })
    }
}

impl Database {
    /// Documents whose `geo` attribute (indexed by `index`) lies inside `geo_box`, edges
    /// included, newest first by live sequence number, at most `limit` of them (`None`: all).
    /// Supported by `memory`, `composite`, `next` and `sst-local` indexes on a geo attribute.
    pub fn within(
        &self,
        collection: &str,
        index: &str,
        geo_box: &GeoBox,
        limit: Option<usize>,
    ) -> Result<QueryResult> {
        let collection = self.collection_arc(collection)?;
        let index = collection.index(index)?;
        if index.record.attr_type != AttrType::Geo {
            return Err(IndexError::UnsupportedQuery {
                index: index.record.name.clone(),
                reason: format!(
                    "`within` needs an index on a geo attribute; this one holds {} values \
                     (use `lookup` or `range`)",
                    index.record.attr_type
                ),
            });
        }
        // `limit == Some(0)` still goes to the kind: one that does not support `within` says so.
        let output = index.kind.within(
            index,
            WithinRequest {
                engine: &self.engine,
                collection: &collection,
                geo_box: *geo_box,
                ranges: zorder_cover(geo_box, MAX_KEY_RANGES),
                limit,
            },
        )?;
        self.finish_query(&collection, index, output)
    }
}

fn check_type(index: &Index, value: &AttrValue) -> Result<()> {
    if value.attr_type() == index.record.attr_type {
        Ok(())
    } else {
        Err(IndexError::QueryTypeMismatch {
            index: index.record.name.clone(),
            found: index.record.attr_type,
            given: value.attr_type(),
        })
    }
}

/// The error for `lookup`/`range` on a geo index.
pub(crate) fn reject_geo_index(index: &Index, operation: &str) -> Result<()> {
    if index.record.attr_type == AttrType::Geo {
        return Err(IndexError::UnsupportedQuery {
            index: index.record.name.clone(),
            reason: format!(
                "`{operation}` does not apply to geo values; query a geo index by bounding box \
                 with `within` (CLI: sift within --bbox min_lon,min_lat,max_lon,max_lat)"
            ),
        });
    }
    Ok(())
}
