//! Unique secondary indexes: the write-time check that a value belongs to no other live
//! document, and the duplicate check run before a unique index is created.
//!
//! Checking needs a read of the index, so unique indexes are `sync-full` (their entries are
//! exactly the live versions' values): `composite` reads the value's key range, `eager` its
//! posting list (already read by the write). The check runs inside the batch builder, under
//! the database-wide write mutex, so two writers racing for one value are serialised and
//! exactly one wins. Within one batch, earlier writes are seen through [`UniqueClaims`]: a
//! value released earlier in the batch may be taken, a value taken earlier may not.

use super::collection::encoded_value;
use super::{Collection, Index};
use crate::catalog::IndexRecord;
use crate::encoding::{decode_pk, decode_value, prefix_successor};
use crate::envelope::EnvelopeRef;
use crate::error::{IndexError, Result};
use crate::path::AttrPath;
use sift_lsm::{Db, ReadOptions};
use std::collections::HashMap;

/// The error for a write giving `index` the encoded value `value`.
pub(crate) fn violation(record: &IndexRecord, value: &[u8]) -> IndexError {
    let shown = decode_value(value, record.attr_type).map_or_else(
        |_| format!("{value:02X?}"),
        |(decoded, _)| decoded.to_string(),
    );
    IndexError::UniqueViolation {
        index: record.name.clone(),
        value: shown,
    }
}

/// A pk other than `pk` that holds `value` in a sync-full composite index tree.
fn composite_holder(
    engine: &Db,
    index: &Index,
    value: &[u8],
    pk: &[u8],
) -> Result<Option<Vec<u8>>> {
    let tree = index.stand_alone_tree()?;
    let mut iter = engine.iter(
        tree,
        ReadOptions {
            lower_bound: Some(value.to_vec()),
            upper_bound: prefix_successor(value),
            ..ReadOptions::default()
        },
    )?;
    iter.seek(value)?;
    while iter.valid() {
        let key = iter.key();
        let (holder, _) = decode_pk(key.get(value.len()..).unwrap_or_default()).map_err(|e| {
            IndexError::CorruptIndexEntry {
                collection: index.record.collection.clone(),
                index: index.record.name.clone(),
                what: "composite key".to_string(),
                message: e.to_string(),
            }
        })?;
        if holder != pk {
            return Ok(Some(holder));
        }
        iter.next()?;
    }
    Ok(None)
}

/// Who holds each value of each unique composite index, as changed by the writes of the batch
/// being built (index position, encoded value) → holder (`None`: released).
#[derive(Default)]
pub(crate) struct UniqueClaims {
    holders: HashMap<(usize, Vec<u8>), Option<Vec<u8>>>,
}

impl UniqueClaims {
    /// Checks that `pk` may move from `old_value` to `new_value` in the unique composite index
    /// at `position`, and records the move.
    pub(crate) fn claim_composite(
        &mut self,
        engine: &Db,
        position: usize,
        index: &Index,
        pk: &[u8],
        old_value: Option<&[u8]>,
        new_value: Option<&[u8]>,
    ) -> Result<()> {
        if let Some(new) = new_value {
            if old_value != Some(new) {
                let holder = match self.holders.get(&(position, new.to_vec())) {
                    Some(holder) => holder.clone(),
                    None => composite_holder(engine, index, new, pk)?,
                };
                if holder.is_some_and(|holder| holder != pk) {
                    return Err(violation(&index.record, new));
                }
            }
        }
        if let Some(old) = old_value {
            if new_value != Some(old) {
                self.holders.insert((position, old.to_vec()), None);
            }
        }
        if let Some(new) = new_value {
            self.holders
                .insert((position, new.to_vec()), Some(pk.to_vec()));
        }
        Ok(())
    }
}

/// Fails if two documents of `collection` have the same value for `index` (run before a
/// unique index is created, under the write mutex, so nothing is left behind on failure).
/// Keeps every value in memory once.
pub(crate) fn check_no_duplicates(
    engine: &Db,
    collection: &Collection,
    record: &IndexRecord,
    path: &AttrPath,
) -> Result<()> {
    let reader = super::collection::attribute_reader(record, path, &collection.record.pk_path)?;
    let mut holders: HashMap<Vec<u8>, Vec<u8>> = HashMap::new();
    let mut iter = engine.iter(&collection.primary, ReadOptions::default())?;
    iter.seek_to_first()?;
    while iter.valid() {
        let envelope = EnvelopeRef::decode(iter.value())
            .map_err(|e| collection.corrupt_document(iter.key(), &e))?;
        if let Some(value) = encoded_value(
            record.attr_id,
            record.first_seq,
            &reader,
            &envelope,
            iter.seq(),
        ) {
            if let Some(other) = holders.insert(value.to_vec(), iter.key().to_vec()) {
                let shown = match violation(record, &value) {
                    IndexError::UniqueViolation { value, .. } => value,
                    other => other.to_string(),
                };
                return Err(IndexError::InvalidIndexSpec {
                    name: record.name.clone(),
                    reason: format!(
                        "cannot be unique: documents {:?} and {:?} both have the value {shown}",
                        String::from_utf8_lossy(&other),
                        String::from_utf8_lossy(iter.key())
                    ),
                });
            }
        }
        iter.next()?;
    }
    Ok(())
}
