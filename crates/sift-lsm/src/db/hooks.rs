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
        // A synced write is logged under the commit lock but synced after it is released
        // (`sync_log_unlocked`): queued writers then never wait for this fsync.
        let committed = self.commit_locked(&mut wal, &mut batches, false, None);
        let log = wal.as_ref().map(|writer| writer.path().to_path_buf());
        EngineCounters::add(&self.counters.unqueued_commits, 1);
        EngineCounters::add_micros_since(&self.counters.unqueued_commit_micros, held);
        // Handed straight to a waiting writer: a worker that writes again at once must not
        // take the lock back before the writers queued behind it (parking_lot lets a thread
        // barge in for up to half a millisecond otherwise).
        parking_lot::MutexGuard::unlock_fair(wal);
        let first = committed?.first().copied().unwrap_or(0);
        if sync {
            EngineCounters::add(&self.counters.unqueued_commit_syncs, 1);
            if let Some(log) = log {
                self.sync_log_unlocked(&log)?;
            }
        }
        Ok(first)
    }

    /// Makes durable what was logged to `log` so far, without the commit lock. If `log` is no
    /// longer the active log, the memtable switch that closed it synced it before the next
    /// log got any write (and it is only deleted once its writes are in synced tables); if it
    /// is, it is synced through a handle of its own while writers go on appending. A failure
    /// stops writes, as a failed sync under the lock does.
    fn sync_log_unlocked(&self, log: &std::path::Path) -> Result<()> {
        let synced = if self.fs.exists(log) {
            self.fs.sync_file(log)
        } else {
            Ok(true)
        };
        let result = match synced {
            Ok(true) => Ok(()),
            Ok(false) => {
                // The file system cannot sync by path: sync through the writer, under the lock.
                let mut wal = self.wal.lock();
                match wal.as_mut() {
                    Some(writer) if writer.path() == log => writer.sync(),
                    _ => Ok(()),
                }
            }
            // Removed meanwhile: its writes are in synced tables.
            Err(_) if !self.fs.exists(log) => Ok(()),
            Err(e) => Err(e),
        };
        if result.is_ok() {
            EngineCounters::add(&self.counters.wal_syncs, 1);
        }
        if let Err(e) = &result {
            let mut state = self.state.lock();
            self.set_bg_error(&mut state, e);
        }
        result
    }
}
