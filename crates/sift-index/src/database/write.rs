//! The write path: documents parsed outside the write lock, then one engine batch per write
//! over the primary tree and every synchronously maintained index (`Database::build_batch`).

use super::{corrupt_document, Database, WriteOp};
use crate::deferred::is_deferred;
use crate::envelope::EnvelopeRef;
use crate::error::{IndexError, Result};
use crate::kind::write::{AfterCommit, Change, WriteContext};
use crate::kind::Collection;
use sift_lsm::{SeqNo, WriteBatch};
use std::collections::HashMap;
use std::sync::Arc;

/// What `build_batch` gathers for the layers that act around the commit.
#[derive(Default)]
struct AroundCommit {
    /// (pk, seq, an older version surely exists) for the update memo of `next` indexes.
    memo_writes: Vec<(Vec<u8>, SeqNo, bool)>,
    /// DELETEs the deferred fast path put in the batch (counted once it commits).
    deferred_fast_path_deletes: u64,
}

/// The sequence number of a single put, from its write's results.
pub(crate) fn put_seq(written: &[Option<SeqNo>]) -> Result<SeqNo> {
    first_seq(written)
        .ok_or_else(|| IndexError::Internal("a put returned no sequence number".into()))
}

/// The first write's sequence number (`None`: a delete of a missing document).
pub(crate) fn first_seq(written: &[Option<SeqNo>]) -> Option<SeqNo> {
    written.first().copied().flatten()
}

/// A parsed write, ready to apply.
enum Prepared {
    Put { pk: Vec<u8>, envelope: Vec<u8> },
    Delete { pk: Vec<u8> },
}

impl Database {
    /// Stores a JSON document (replacing the one with the same primary key); returns the
    /// sequence number of the stored version.
    pub fn put(&self, collection: &str, json: &[u8]) -> Result<SeqNo> {
        put_seq(&self.write(collection, &[WriteOp::Put(json)])?)
    }

    /// Deletes a document; `None` if there was none. In a collection with a `deferred` index
    /// and no index that needs the old version, deletes are blind: a tombstone is written and
    /// its sequence number returned whether or not the document existed.
    pub fn delete(&self, collection: &str, pk: &[u8]) -> Result<Option<SeqNo>> {
        Ok(first_seq(&self.write(collection, &[WriteOp::Delete(pk)])?))
    }

    /// Applies the writes atomically, in order (one engine batch). Returns each write's
    /// sequence number (`None` for a delete of a missing document, unless deletes are blind:
    /// see [`Database::delete`](crate::Database::delete)). If any document is bad, or a unique index would get a value
    /// another live document holds (`IndexError::UniqueViolation`), nothing is written.
    pub fn write(&self, collection_name: &str, ops: &[WriteOp<'_>]) -> Result<Vec<Option<SeqNo>>> {
        let mut collection = self.collection_arc(collection_name)?;
        let mut prepared = Self::prepare(&collection, ops)?;
        let _guard = self.lock_writes();
        let current = self.collection_arc(collection_name)?;
        if !Arc::ptr_eq(&current, &collection) {
            // The indexes changed while we parsed: parse again with the current attributes.
            collection = current;
            prepared = Self::prepare(&collection, ops)?;
        }
        self.apply_locked(&collection, prepared)
    }

    /// Checks `json` as a put into `collection` would, without writing: the primary key it
    /// would be stored under, or the error the put would return (a unique index's check
    /// aside: that one depends on the documents stored when the write happens). For callers
    /// that must say which document of a refused batch was bad.
    pub fn check_document(&self, collection: &str, json: &[u8]) -> Result<Vec<u8>> {
        let collection = self.collection_arc(collection)?;
        collection.parser.parse_stored(json).map(|(pk, _)| pk)
    }

    fn prepare(collection: &Collection, ops: &[WriteOp<'_>]) -> Result<Vec<Prepared>> {
        ops.iter()
            .map(|op| match op {
                WriteOp::Put(json) => {
                    let (pk, envelope) = collection.parser.parse_stored(json)?;
                    Ok(Prepared::Put { pk, envelope })
                }
                WriteOp::Delete(pk) => {
                    if pk.is_empty() || pk.len() > crate::error::MAX_PRIMARY_KEY_BYTES {
                        return Err(IndexError::InvalidPrimaryKey {
                            field: collection.record.pk_path.clone(),
                            found: format!("a key of {} bytes", pk.len()),
                        });
                    }
                    Ok(Prepared::Delete { pk: pk.to_vec() })
                }
            })
            .collect()
    }

    fn apply_locked(
        &self,
        collection: &Collection,
        prepared: Vec<Prepared>,
    ) -> Result<Vec<Option<SeqNo>>> {
        let mut results = Vec::with_capacity(prepared.len());
        let mut after_commit: Vec<AfterCommit> = Vec::new();
        let mut queued: Option<(SeqNo, SeqNo)> = None;
        // The batch is built for the first sequence number the engine will give it, under the
        // engine's commit lock: postings and memory entries carry their version's number.
        let memo_tree = collection.primary.id();
        let mut memo_undo = None;
        let mut attempted_last: Option<SeqNo> = None;
        let mut fast_path_deletes = 0;
        let has_async = collection
            .indexes
            .iter()
            .any(|index| index.record.maintenance.is_async());
        let written = self.engine.write_sequenced(&self.write_options, |base| {
            // (pk, seq, an older version surely exists) for the update memo of `next` indexes.
            let mut around = AroundCommit::default();
            let mut batch = self.build_batch(
                collection,
                prepared,
                base,
                &mut results,
                &mut after_commit,
                &mut around,
            )?;
            if !batch.is_empty() {
                attempted_last = Some(base + batch.len() as u64 - 1);
            }
            let AroundCommit {
                memo_writes,
                deferred_fast_path_deletes,
            } = around;
            fast_path_deletes = deferred_fast_path_deletes;
            if !batch.is_empty() && !memo_writes.is_empty() {
                // The memo learns of the writes before they become visible (see
                // `next/memo.rs`); undone below if the commit fails.
                memo_undo = Some(self.next.record_writes(
                    memo_tree,
                    &memo_writes,
                    &mut |pk: &[u8]| {
                        self.engine
                            .newer_version_exists_above(
                                &collection.primary,
                                pk,
                                0,
                                sift_lsm::ComponentId::Level(usize::MAX),
                            )
                            .map_or(true, |answer| answer != sift_lsm::NewerVersion::No)
                    },
                ));
            }
            if has_async && !batch.is_empty() {
                // A batch the commit refuses must not leave queued updates that another
                // write's sequence numbers could make look committed (the memo and the
                // embedded maps are undone instead). Checked here, the commit does not check
                // it again.
                self.engine.check_batch(&mut batch)?;
                // Queued before the sequence numbers are published (see `async_index`).
                queued = Some((base, base + batch.len() as u64));
                // The primary's entries of the batch are the documents to index.
                self.async_index.enqueue(
                    &collection.record.name,
                    collection.primary.id(),
                    &batch,
                    base,
                );
            }
            Ok::<_, IndexError>(batch)
        });
        if let Err(error) = written {
            if let Some((first, last)) = queued {
                self.async_index.cancel(first, last);
            }
            if let Some(undo) = memo_undo {
                self.next.undo_writes(memo_tree, undo);
            }
            // The embedded maps may hold versions that were never written (their sequence
            // numbers may go to other writes): distrust them, so queries scan the memtables
            // until a flush.
            if let Some(last) = attempted_last {
                self.next
                    .distrust_memtable_maps(memo_tree, last.max(self.engine.latest_sequence()));
                for index in &collection.indexes {
                    index
                        .kind
                        .forget_uncommitted(last.max(self.engine.latest_sequence()));
                }
            }
            return Err(error);
        }
        if queued.is_some() {
            self.async_index.committed();
        }
        self.deferred.fast_path_deletes_written(fast_path_deletes);
        for (position, pk, value) in after_commit {
            collection.indexes[position]
                .kind
                .apply_committed(&pk, value.as_ref().map(|(v, seq)| (v.as_slice(), *seq)));
        }
        Ok(results)
    }

    /// The engine batch of `prepared` if its first entry gets sequence number `base`; fills
    /// `results` (each write's sequence number) and `after_commit`.
    fn build_batch(
        &self,
        collection: &Collection,
        prepared: Vec<Prepared>,
        base: SeqNo,
        results: &mut Vec<Option<SeqNo>>,
        after_commit: &mut Vec<AfterCommit>,
        around: &mut AroundCommit,
    ) -> Result<WriteBatch> {
        let name = &collection.record.name;
        let needs_old = collection
            .indexes
            .iter()
            .any(|index| index.kind.needs_old_version(index));
        // Deferred indexes make deletes blind when no index needs the old version: a tombstone
        // is written (and a sequence number returned) whether or not the document existed.
        let blind_deletes = !needs_old && collection.indexes.iter().any(|i| is_deferred(i));
        // The deferred fast path: DELETEs of a shadowed version known without a disk read.
        let deferred_fast_path =
            self.deferred.fast_path() && collection.indexes.iter().any(|i| is_deferred(i));
        let mut memtables: Option<crate::deferred::MemtableVersions> = None;
        // Room for the primary entries (index entries, if any, grow it): no reallocation per
        // entry of a batch of puts.
        const ENTRY_OVERHEAD_BYTES: usize = 16;
        let primary_bytes = prepared
            .iter()
            .map(|op| match op {
                Prepared::Put { pk, envelope } => pk.len() + envelope.len() + ENTRY_OVERHEAD_BYTES,
                Prepared::Delete { pk } => pk.len() + ENTRY_OVERHEAD_BYTES,
            })
            .sum();
        let mut cx = WriteContext::new(&self.engine, WriteBatch::with_capacity(primary_bytes));
        // Versions written earlier in this batch, so a second write of a pk sees the first.
        let mut pending: HashMap<Vec<u8>, Option<(Vec<u8>, SeqNo)>> = HashMap::new();
        let memo_tree = collection.primary.id();
        let track_memo = self.next.has_memo(memo_tree);
        for op in prepared {
            let (pk, new_envelope) = match op {
                Prepared::Put { pk, envelope } => (pk, Some(envelope)),
                Prepared::Delete { pk } => (pk, None),
            };
            let old_read = needs_old || (new_envelope.is_none() && !blind_deletes);
            let old = if old_read {
                match pending.get(&pk) {
                    Some(version) => version.clone(),
                    None => self
                        .engine
                        .get(&collection.primary, &pk)?
                        .map(|entry| (entry.value, entry.seq)),
                }
            } else {
                None
            };
            if new_envelope.is_none() && old.is_none() && !blind_deletes {
                results.push(None);
                continue;
            }
            let old_envelope = match &old {
                Some((bytes, seq)) => Some((
                    EnvelopeRef::decode(bytes).map_err(|e| corrupt_document(name, &pk, &e))?,
                    *seq,
                )),
                None => None,
            };
            // The version this write shadows, for the deferred fast path when `old` was not read:
            // from this batch, or from the primary's memtables (memory only).
            let fast_old = if !deferred_fast_path || old_read {
                None
            } else if let Some(version) = pending.get(&pk) {
                version.clone()
            } else {
                crate::deferred::MemtableVersions::live(
                    &mut memtables,
                    &self.engine,
                    &collection.primary,
                    &pk,
                )?
            };
            let fast_old_envelope = match &fast_old {
                Some((bytes, seq)) => Some((
                    EnvelopeRef::decode(bytes).map_err(|e| corrupt_document(name, &pk, &e))?,
                    *seq,
                )),
                None => None,
            };
            let shadowed = if !deferred_fast_path {
                None
            } else if old_read {
                old_envelope.as_ref()
            } else {
                fast_old_envelope.as_ref()
            };
            let seq = base + cx.batch.len() as u64;
            if track_memo {
                let surely_older = old.is_some() || pending.get(&pk).is_some_and(Option::is_some);
                around.memo_writes.push((pk.clone(), seq, surely_older));
            }
            match &new_envelope {
                Some(bytes) => cx.batch.put(&collection.primary, &pk, bytes),
                None => cx.batch.delete(&collection.primary, &pk),
            }
            let new_ref = match &new_envelope {
                Some(bytes) => {
                    Some(EnvelopeRef::decode(bytes).map_err(|e| corrupt_document(name, &pk, &e))?)
                }
                None => None,
            };
            for (position, index) in collection.indexes.iter().enumerate() {
                if index.record.maintenance.is_async() {
                    continue; // applied by the workers (`async_index`)
                }
                let old_value = old_envelope.as_ref().and_then(|(envelope, old_seq)| {
                    index
                        .encoded_value(envelope, *old_seq)
                        .map(|v| (v, *old_seq))
                });
                let new_value = new_ref
                    .as_ref()
                    .and_then(|envelope| index.encoded_value(envelope, seq));
                let change = Change {
                    position,
                    pk: &pk,
                    seq,
                    old_value: old_value.as_ref().map(|(v, s)| (v.as_ref(), *s)),
                    new_value: new_value.as_deref(),
                    shadowed: shadowed.map(|(envelope, seq)| (envelope, *seq)),
                };
                index.kind.write(index, &mut cx, &change)?;
            }
            results.push(Some(seq));
            pending.insert(pk, new_envelope.map(|bytes| (bytes, seq)));
        }
        for (position, index) in collection.indexes.iter().enumerate() {
            if !index.record.maintenance.is_async() {
                index.kind.finish_batch(index, position, &mut cx)?;
            }
        }
        around.deferred_fast_path_deletes = cx.deferred_fast_path_deletes;
        after_commit.append(&mut cx.after_commit);
        Ok(cx.batch)
    }
}
