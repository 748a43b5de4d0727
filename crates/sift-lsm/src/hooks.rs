//! Flush listeners: a hook the flush thread calls before it writes a frozen memtable, for
//! layers that keep in-memory work derived from the memtable's writes and must finish it
//! while those writes can still be recovered from the write-ahead log (Diff-Index §5.3:
//! drain the asynchronous index-update queue before each flush, so the WAL is the only log).
//!
//! A listener may block the flush. Whatever it waits for must not wait for that flush in turn:
//! writes made meanwhile go through `Db::write_unthrottled`, which never waits for room in the
//! memtable (user writes do, and the room they wait for is what this flush frees).

use crate::key::SeqNo;

/// The frozen memtable about to be written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FlushInfo {
    /// Number of the write-ahead log that holds the memtable's writes (deleted once the flush
    /// is installed and no older memtable needs it).
    pub wal_number: u64,
    /// Every write in the memtable has a sequence number `<=` this (the highest number handed
    /// out when the hook was called: an upper bound, not the memtable's exact maximum).
    pub sequence_upper_bound: SeqNo,
}

/// Called by the flush thread before each flush of a frozen memtable (not for the logs
/// replayed at open, which are written to tables before any listener's owner can run).
pub trait FlushListener: Send + Sync {
    /// Called before the flush; may block it.
    fn before_flush(&self, info: &FlushInfo);

    /// Called by the flush thread once that flush is installed: its tables are in the
    /// version and its memtable is gone (`Db::flushed_through` covers it). Not called for a
    /// flush that failed. Should not block: the next flush waits for it.
    fn after_flush(&self, _info: &FlushInfo) {}
}

/// What [`Db::background_error`](crate::Db::background_error) reports: the error that stopped
/// writes, and whether a retry can clear it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BackgroundErrorStatus {
    /// The failure, as writes report it.
    pub message: String,
    /// An I/O error of a flush, compaction or manifest write: retried after a backoff and by
    /// `Db::resume`. Otherwise fatal (corruption, a failed write-ahead log write or sync):
    /// only a reopen recovers.
    pub recoverable: bool,
    /// Retries that failed since the error was set.
    pub retries_failed: u32,
}

/// Told when the engine recovers from a recoverable background error without a reopen (an
/// automatic retry or `Db::resume` succeeded: writes work again), for layers that keep work of
/// their own waiting for a healthy engine (the index layer's online builds retry then).
pub trait RecoveryListener: Send + Sync {
    /// Called once per recovery, by the thread that recovered (the flush thread or the caller
    /// of `Db::resume`), with no engine lock held. Should not block: `Db::resume` returns after
    /// it.
    fn after_recovery(&self);
}
