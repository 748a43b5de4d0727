//! The state of client sessions (`async-session` maintenance), kept by the asynchronous core
//! for statistics and expiry sweeps; the `Session` handle itself is `crate::session`.

use super::AsyncCore;
use parking_lot::Mutex;
use sift_lsm::SeqNo;
use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

/// (index id, encoded value) of each `async-session` index of a collection.
pub(crate) type IndexValues = Vec<(u64, Option<Vec<u8>>)>;

/// (collection, pk) of an overlay entry.
pub(crate) type OverlayKey = (Arc<str>, Vec<u8>);

#[derive(Debug)]
pub(crate) struct OverlayEntry {
    pub(crate) seq: SeqNo,
    pub(crate) values: IndexValues,
    pub(crate) bytes: usize,
}

#[derive(Debug)]
pub(crate) struct SessionInner {
    pub(crate) last_used: Instant,
    pub(crate) expired: bool,
    /// (collection, pk) -> the session's latest write of the document.
    pub(crate) overlay: HashMap<(Arc<str>, Vec<u8>), OverlayEntry>,
    /// The overlay's writes in the order made: (sequence number, key). Pruning pops from the
    /// front, so a write does not scan the whole overlay; a key written again has a newer
    /// entry further back (the older one is skipped when popped).
    pub(crate) overlay_order: VecDeque<(SeqNo, OverlayKey)>,
    pub(crate) overlay_bytes: usize,
    /// Set when the overlay outgrew its cap: eventual until every write `<=` this is indexed.
    pub(crate) fallback_until: Option<SeqNo>,
}

/// A session's state, registered with the database for statistics and expiry sweeps.
#[derive(Debug)]
pub(crate) struct SessionState {
    pub(crate) id: u64,
    pub(crate) idle_timeout: Duration,
    pub(crate) overlay_bytes_max: usize,
    pub(crate) inner: Mutex<SessionInner>,
}

impl SessionState {
    /// Expires the session if it sat idle too long. Returns whether it is expired.
    pub(crate) fn expire_if_idle(&self, inner: &mut SessionInner) -> bool {
        if !inner.expired && inner.last_used.elapsed() > self.idle_timeout {
            inner.expired = true;
            inner.overlay = HashMap::new();
            inner.overlay_order = VecDeque::new();
            inner.overlay_bytes = 0;
        }
        inner.expired
    }
}

/// (live sessions, overlay bytes); forgets dropped sessions and expires idle ones.
pub(crate) fn live_sessions(core: &AsyncCore) -> (u64, u64) {
    let mut sessions = core.sessions.lock();
    sessions.retain(|weak| weak.strong_count() > 0);
    let mut live = 0;
    let mut bytes = 0;
    for state in sessions.iter().filter_map(Weak::upgrade) {
        let mut inner = state.inner.lock();
        if !state.expire_if_idle(&mut inner) {
            live += 1;
            bytes += inner.overlay_bytes as u64;
        }
    }
    (live, bytes)
}
