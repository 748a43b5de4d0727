//! What the write path hands a kind for each document write ([`Change`]) and what the kinds of
//! one batch share while it is built ([`WriteContext`]).

use super::unique::UniqueClaims;
use crate::envelope::EnvelopeRef;
use crate::postings::Posting;
use sift_lsm::{Db, SeqNo, WriteBatch};
use std::collections::BTreeMap;

/// (index position, pk, new live value and seq), applied once the batch committed.
pub(crate) type AfterCommit = (usize, Vec<u8>, Option<(Vec<u8>, SeqNo)>);

/// One batch being built, under the database's write lock and the engine's commit lock.
pub(crate) struct WriteContext<'a> {
    pub(crate) engine: &'a Db,
    pub(crate) batch: WriteBatch,
    /// Unique indexes: who holds each value, as the batch changes it.
    pub(crate) unique_claims: UniqueClaims,
    /// Eager: (index position, encoded value) → the value's posting list, read once and
    /// written whole by `finish_batch`.
    pub(crate) posting_lists: BTreeMap<(usize, Vec<u8>), Vec<Posting>>,
    /// Memory: new values applied after the commit.
    pub(crate) after_commit: Vec<AfterCommit>,
    /// DELETEs the deferred fast path put in the batch (counted once it commits).
    pub(crate) deferred_fast_path_deletes: u64,
}

impl<'a> WriteContext<'a> {
    pub(crate) fn new(engine: &'a Db, batch: WriteBatch) -> WriteContext<'a> {
        WriteContext {
            engine,
            batch,
            unique_claims: UniqueClaims::default(),
            posting_lists: BTreeMap::new(),
            after_commit: Vec::new(),
            deferred_fast_path_deletes: 0,
        }
    }
}

/// One document write, as one index sees it.
pub(crate) struct Change<'a> {
    /// The index's place in its collection.
    pub(crate) position: usize,
    pub(crate) pk: &'a [u8],
    /// The sequence number the new version (or tombstone) gets.
    pub(crate) seq: SeqNo,
    /// The replaced version's encoded value and sequence number, if it was read and carries
    /// one ([`super::SecondaryIndex::needs_old_version`]).
    pub(crate) old_value: Option<(&'a [u8], SeqNo)>,
    /// The new version's encoded value (`None`: a delete, or no value).
    pub(crate) new_value: Option<&'a [u8]>,
    /// The deferred fast path: the version this write shadows, when known without a disk read.
    pub(crate) shadowed: Option<(&'a EnvelopeRef<'a>, SeqNo)>,
}
