//! Sessions: read-your-writes over `async-session` indexes (Diff-Index §3.3, §5.2).
//!
//! A [`Session`] writes through the ordinary (asynchronous) write path and also keeps, in a
//! private overlay, the value each `async-session` index should file its documents under: pk
//! → (sequence number of the session's latest write, encoded value per index). A session
//! query runs the ordinary query and adds the overlay's documents whose value matches — each
//! checked against the live primary version, like every candidate, so the primary decides
//! (a newer write by another session wins). Overlay entries whose update is applied (their
//! sequence number is at or below the indexed watermark) are dropped.
//!
//! A session unused for `session_idle_timeout` expires: its overlay is dropped and every call
//! fails with [`IndexError::SessionExpired`]. A session whose overlay would exceed
//! `session_overlay_bytes_max` drops it and answers with eventual consistency (said in each
//! result) until all its writes are indexed; then it reads its writes again.

use crate::async_index::sessions::live_sessions;
use crate::async_index::sessions::{IndexValues, OverlayEntry, SessionInner, SessionState};
use crate::async_index::AsyncCore;
use crate::catalog::Maintenance;
use crate::database::{first_seq, put_seq, Database, WriteOp};
use crate::encoding::{checked_range_bounds, value_bounds};
use crate::envelope::EnvelopeRef;
use crate::error::{IndexError, Result};
use crate::kind::query::{Hit, QueryResult, QueryStats};
use crate::kind::{Collection, Index};
use crate::value::AttrValue;
use parking_lot::Mutex;
use sift_lsm::SeqNo;
use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};
use std::time::Instant;

/// Bytes an overlay entry costs besides its key and values (map slot, bookkeeping).
const OVERLAY_ENTRY_OVERHEAD_BYTES: usize = 64;

/// What a session query guarantees.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SessionConsistency {
    /// The results reflect every write this session made (and every write indexed).
    ReadYourWrites,
    /// The index is asynchronous and not tracked (an `async-simple` index, or a session whose
    /// overlay outgrew its memory cap): recent writes, this session's included, may be missing.
    Eventual,
}

/// A session query's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionQueryResult {
    /// Newest first.
    pub hits: Vec<Hit>,
    /// What the index query did.
    pub stats: QueryStats,
    /// Whether the answer includes every write of the session.
    pub consistency: SessionConsistency,
    /// Hits that came from the overlay, not from the index.
    pub overlay_hits: u64,
}

/// A client session (Diff-Index's `get_session`). `Send` and `Sync`; drop it (or call
/// [`Session::end`]) to release its overlay.
#[derive(Debug)]
pub struct Session<'db> {
    database: &'db Database,
    state: Arc<SessionState>,
}

fn session_indexes(collection: &Collection) -> Vec<&Arc<Index>> {
    collection
        .indexes
        .iter()
        .filter(|index| index.record.maintenance == Maintenance::AsyncSession)
        .collect()
}

impl Session<'_> {
    /// The session's id (unique per database).
    pub fn id(&self) -> u64 {
        self.state.id
    }

    /// Fails if the session expired; otherwise marks it used now.
    fn touch(&self) -> Result<()> {
        let mut inner = self.state.inner.lock();
        if self.state.expire_if_idle(&mut inner) {
            return Err(IndexError::SessionExpired {
                idle_seconds: self.state.idle_timeout.as_secs(),
            });
        }
        inner.last_used = Instant::now();
        Ok(())
    }

    /// The sequence number through which asynchronous index updates are applied now.
    fn indexed_watermark(&self) -> SeqNo {
        let visible = self.database.engine.latest_sequence();
        self.database.async_index.core.indexed_through(visible)
    }

    /// Drops overlay entries whose update is applied through `indexed`; ends a fallback
    /// whose writes all are.
    fn prune(inner: &mut SessionInner, indexed: SeqNo) {
        if inner.fallback_until.is_some_and(|until| until <= indexed) {
            inner.fallback_until = None;
        }
        while inner
            .overlay_order
            .front()
            .is_some_and(|(seq, _)| *seq <= indexed)
        {
            let Some((seq, key)) = inner.overlay_order.pop_front() else {
                break;
            };
            if inner
                .overlay
                .get(&key)
                .is_some_and(|entry| entry.seq == seq)
            {
                if let Some(entry) = inner.overlay.remove(&key) {
                    inner.overlay_bytes -= entry.bytes;
                }
            }
        }
    }

    /// [`Database::put`](crate::Database::put), remembered for the session's reads.
    pub fn put(&self, collection: &str, json: &[u8]) -> Result<SeqNo> {
        put_seq(&self.write(collection, &[WriteOp::Put(json)])?)
    }

    /// [`Database::delete`](crate::Database::delete), remembered for the session's reads.
    pub fn delete(&self, collection: &str, pk: &[u8]) -> Result<Option<SeqNo>> {
        Ok(first_seq(&self.write(collection, &[WriteOp::Delete(pk)])?))
    }

    /// [`Database::write`](crate::Database::write) through the session: the written versions join the overlay.
    pub fn write(&self, collection_name: &str, ops: &[WriteOp<'_>]) -> Result<Vec<Option<SeqNo>>> {
        self.touch()?;
        let collection = self.database.collection_arc(collection_name)?;
        let indexes = session_indexes(&collection);
        // What each write files under in each tracked index (parsed before writing, as the
        // write does; a document the write rejects fails the whole call anyway).
        let mut tracked: Vec<(Vec<u8>, IndexValues)> = Vec::new();
        if !indexes.is_empty() {
            for op in ops {
                tracked.push(match op {
                    WriteOp::Put(json) => {
                        let parsed = collection.parser.parse(json)?;
                        let bytes = parsed.envelope.encode();
                        let envelope = EnvelopeRef::decode(&bytes)?;
                        let values = indexes
                            .iter()
                            .map(|index| {
                                (
                                    index.record.id,
                                    envelope
                                        .attr_encoded(index.record.attr_id)
                                        .map(<[u8]>::to_vec),
                                )
                            })
                            .collect();
                        (parsed.pk, values)
                    }
                    WriteOp::Delete(pk) => (
                        pk.to_vec(),
                        indexes
                            .iter()
                            .map(|index| (index.record.id, None))
                            .collect(),
                    ),
                });
            }
        }
        let results = self.database.write(collection_name, ops)?;
        if tracked.is_empty() {
            return Ok(results);
        }
        let mut inner = self.state.inner.lock();
        Self::prune(&mut inner, self.indexed_watermark());
        let name: Arc<str> = Arc::from(collection_name);
        for ((pk, values), seq) in tracked.into_iter().zip(&results) {
            let Some(seq) = *seq else { continue };
            if let Some(until) = &mut inner.fallback_until {
                *until = (*until).max(seq);
                continue;
            }
            let bytes = OVERLAY_ENTRY_OVERHEAD_BYTES
                + pk.len()
                + values
                    .iter()
                    .map(|(_, v)| 8 + v.as_ref().map_or(0, Vec::len))
                    .sum::<usize>();
            let key = (Arc::clone(&name), pk);
            let replaced = inner.overlay.get(&key).map_or(0, |old| old.bytes);
            if inner.overlay_bytes - replaced + bytes > self.state.overlay_bytes_max {
                // Too much to track: forget it all and read eventually until it is indexed.
                let newest = inner.overlay.values().map(|e| e.seq).max().unwrap_or(0);
                inner.overlay = HashMap::new();
                inner.overlay_order = VecDeque::new();
                inner.overlay_bytes = 0;
                inner.fallback_until = Some(newest.max(seq));
                continue;
            }
            inner.overlay_bytes = inner.overlay_bytes - replaced + bytes;
            inner.overlay_order.push_back((seq, key.clone()));
            inner
                .overlay
                .insert(key, OverlayEntry { seq, values, bytes });
        }
        Ok(results)
    }

    /// The live version of a document (the primary is always current).
    pub fn get(&self, collection: &str, pk: &[u8]) -> Result<Option<Hit>> {
        self.touch()?;
        self.database.get(collection, pk)
    }

    /// [`Database::lookup`](crate::Database::lookup) that sees this session's writes.
    pub fn lookup(
        &self,
        collection: &str,
        index: &str,
        value: &AttrValue,
        limit: Option<usize>,
    ) -> Result<SessionQueryResult> {
        self.touch()?;
        // Taken before the query's snapshot: an overlay entry may only be dropped if its
        // update is in the index the query read (one applied during the query is not).
        let indexed = self.indexed_watermark();
        let result = self.database.lookup(collection, index, value, limit)?;
        self.merge(
            collection,
            index,
            value_bounds(value),
            limit,
            result,
            indexed,
        )
    }

    /// [`Database::range`](crate::Database::range) that sees this session's writes.
    pub fn range(
        &self,
        collection: &str,
        index: &str,
        lo: &AttrValue,
        hi: &AttrValue,
        limit: Option<usize>,
    ) -> Result<SessionQueryResult> {
        self.touch()?;
        let indexed = self.indexed_watermark();
        let result = self.database.range(collection, index, lo, hi, limit)?;
        self.merge(
            collection,
            index,
            checked_range_bounds(lo, hi)?,
            limit,
            result,
            indexed,
        )
    }

    /// Adds the overlay's matching documents (validated against the primary) to `result`.
    fn merge(
        &self,
        collection_name: &str,
        index_name: &str,
        (start, end): (Vec<u8>, Option<Vec<u8>>),
        limit: Option<usize>,
        result: QueryResult,
        indexed_before_query: SeqNo,
    ) -> Result<SessionQueryResult> {
        let collection = self.database.collection_arc(collection_name)?;
        let index = collection.index(index_name)?;
        let in_range = |v: &[u8]| v >= start.as_slice() && end.as_deref().is_none_or(|end| v < end);
        let QueryResult { mut hits, stats } = result;
        let (consistency, candidates) = {
            let mut inner = self.state.inner.lock();
            Self::prune(&mut inner, indexed_before_query);
            match index.record.maintenance {
                Maintenance::AsyncSession if inner.fallback_until.is_none() => {}
                Maintenance::AsyncSession | Maintenance::AsyncSimple => {
                    return Ok(SessionQueryResult {
                        hits,
                        stats,
                        consistency: SessionConsistency::Eventual,
                        overlay_hits: 0,
                    })
                }
                Maintenance::SyncFull | Maintenance::SyncInsert | Maintenance::Deferred => {
                    return Ok(SessionQueryResult {
                        hits,
                        stats,
                        consistency: SessionConsistency::ReadYourWrites,
                        overlay_hits: 0,
                    })
                }
            }
            let present: HashSet<&[u8]> = hits.iter().map(|hit| hit.pk.as_slice()).collect();
            let candidates: Vec<Vec<u8>> = inner
                .overlay
                .iter()
                .filter(|((c, pk), entry)| {
                    &**c == collection_name
                        && !present.contains(pk.as_slice())
                        && entry.values.iter().any(|(id, value)| {
                            *id == index.record.id && value.as_deref().is_some_and(in_range)
                        })
                })
                .map(|((_, pk), _)| pk.clone())
                .collect();
            (SessionConsistency::ReadYourWrites, candidates)
        };
        let mut overlay_hits = 0;
        for pk in candidates {
            let Some(live) = self.database.engine.get(&collection.primary, &pk)? else {
                continue;
            };
            let envelope = EnvelopeRef::decode(&live.value)?;
            if index
                .encoded_value(&envelope, live.seq)
                .is_some_and(|v| in_range(&v))
            {
                overlay_hits += 1;
                hits.push(Hit {
                    pk,
                    seq: live.seq,
                    doc: envelope.doc().to_vec(),
                });
            }
        }
        hits.sort_by_key(|hit| std::cmp::Reverse(hit.seq));
        if let Some(limit) = limit {
            hits.truncate(limit);
        }
        Ok(SessionQueryResult {
            hits,
            stats,
            consistency,
            overlay_hits,
        })
    }

    /// Whether queries on `async-session` indexes currently read this session's writes.
    pub fn consistency(&self) -> SessionConsistency {
        let mut inner = self.state.inner.lock();
        Self::prune(&mut inner, self.indexed_watermark());
        if inner.fallback_until.is_some() {
            SessionConsistency::Eventual
        } else {
            SessionConsistency::ReadYourWrites
        }
    }

    /// Memory held by the overlay (approximate), in bytes.
    pub fn overlay_bytes(&self) -> usize {
        self.state.inner.lock().overlay_bytes
    }

    /// Ends the session, releasing its overlay.
    pub fn end(self) {}

    /// A handle that keeps this session alive without borrowing the database, for owners
    /// that cannot hold a borrow across calls (a language binding, a server connection).
    /// [`Database::attach_session`] turns it back into a `Session`.
    pub fn handle(&self) -> SessionHandle {
        SessionHandle {
            state: Arc::clone(&self.state),
            owner: Arc::downgrade(&self.database.async_index.core),
        }
    }
}

/// A session detached from the borrow of its database ([`Session::handle`]). Its overlay
/// lives as long as any handle or `Session` of it does.
#[derive(Debug, Clone)]
pub struct SessionHandle {
    state: Arc<SessionState>,
    /// The database's asynchronous-index core: its allocation outlives the database while a
    /// handle holds this, so no other database can have the same address.
    owner: Weak<AsyncCore>,
}

impl SessionHandle {
    /// The session's id (unique per database).
    pub fn id(&self) -> u64 {
        self.state.id
    }
}

#[allow(dead_code)]
fn assert_send_sync() {
    fn check<T: Send + Sync>() {}
    check::<Session<'static>>();
}

impl Database {
    /// Starts a session: its queries see its own writes on `async-session` indexes.
    pub fn session(&self) -> Session<'_> {
        let core = &self.async_index.core;
        let state = Arc::new(SessionState {
            id: core.next_session_id.fetch_add(1, Ordering::Relaxed),
            idle_timeout: core.options.session_idle_timeout,
            overlay_bytes_max: core.options.session_overlay_bytes_max,
            inner: Mutex::new(SessionInner {
                last_used: Instant::now(),
                expired: false,
                overlay: HashMap::new(),
                overlay_order: VecDeque::new(),
                overlay_bytes: 0,
                fallback_until: None,
            }),
        });
        live_sessions(core);
        core.sessions.lock().push(Arc::downgrade(&state));
        Session {
            database: self,
            state,
        }
    }

    /// The session `handle` was taken from, for this database's calls. A handle of another
    /// database's session is refused: its overlay describes another database's documents.
    /// One pointer comparison, not a search of the live sessions: a binding attaches its
    /// session on every call.
    pub fn attach_session(&self, handle: &SessionHandle) -> Result<Session<'_>> {
        if !std::ptr::eq(handle.owner.as_ptr(), Arc::as_ptr(&self.async_index.core)) {
            return Err(IndexError::ForeignSession {
                id: handle.state.id,
            });
        }
        Ok(Session {
            database: self,
            state: Arc::clone(&handle.state),
        })
    }
}
