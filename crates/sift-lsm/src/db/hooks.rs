//! Engine entry points for layers that do background work tied to flushes (see `hooks.rs`):
//! reads at an explicit sequence number and writes that never wait for a flush.

use crate::db::state::DbInner;
use crate::db::{Db, Entry};
use crate::key::SeqNo;
use crate::options::{ReadOptions, WriteOptions};
use crate::stats::EngineCounters;
use crate::write_batch::WriteBatch;
use crate::{Error, Result};

impl Db {
    /// Reads `key` as of sequence number `seq` without registering a snapshot. Only versions
    /// that no flush or compaction could have dropped are certain to be found: the caller must
    /// know that the version visible at `seq` is still stored (for instance because a newer
    /// version of the key is still in a memtable and its flush waits for a `FlushListener`).
    pub fn get_at(&self, tree: &crate::Tree, key: &[u8], seq: SeqNo) -> Result<Option<Entry>> {
        self.inner.get_at(tree, key, seq, &ReadOptions::default())
    }

    /// Applies the batch atomically like `write`, but without queueing behind other writers
    /// and without waiting for room in the memtable, L0 slowdowns or stops: the active memtable
    /// may grow past `memtable_bytes_max` until the next ordinary write freezes it. For writes
    /// that a `FlushListener` waits for; anything else should use `write`.
    pub fn write_unthrottled(&self, batch: WriteBatch, options: &WriteOptions) -> Result<SeqNo> {
        self.inner.write_unthrottled(batch, options.sync)
    }
}

impl DbInner {
    fn write_unthrottled(&self, batch: WriteBatch, sync: bool) -> Result<SeqNo> {
        self.check_open()?;
        self.validate_batch(&batch)?;
        if batch.is_empty() {
            return Ok(self.latest_sequence());
        }
        if self
            .writes_stopped
            .load(std::sync::atomic::Ordering::Acquire)
        {
            let state = self.state.lock();
            if let Some(e) = &state.bg_error {
                return Err(Error::Closed(format!(
                    "writes stopped after a background error: {e}"
                )));
            }
            if state.shutting_down {
                return Err(Error::Closed("the database is closing".into()));
            }
        }
        let mut wal = self.wal.lock();
        let held = std::time::Instant::now();
        let mut batches = [batch];
        // A synced write syncs its log under the commit lock, before it is published: a write
        // that a reader can see, or that is acknowledged, is durable. (Syncing through another
        // descriptor after releasing the lock could miss a writeback error already reported to
        // the writer's descriptor, and would publish the write before it is durable.)
        let committed = self.commit_locked(&mut wal, &mut batches, sync, None);
        EngineCounters::add(&self.counters.unqueued_commits, 1);
        EngineCounters::add_micros_since(&self.counters.unqueued_commit_micros, held);
        if sync {
            EngineCounters::add(&self.counters.unqueued_commit_syncs, 1);
        }
        // Handed straight to a waiting writer: a worker that writes again at once must not
        // take the lock back before the writers queued behind it (parking_lot lets a thread
        // barge in for up to half a millisecond otherwise).
        parking_lot::MutexGuard::unlock_fair(wal);
        Ok(committed?.first().copied().unwrap_or(0))
    }
}
