//! Recovery from a recoverable background error (see `BackgroundError`): the retry the flush
//! thread runs after a backoff, and `Db::resume`.

use crate::db::state::{DbInner, DbState};
use crate::stats::EngineCounters;
use crate::{Error, Result};
use parking_lot::MutexGuard;
use std::collections::BTreeSet;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

impl DbInner {
    /// Retries the work whose failure set a recoverable background error, in the calling
    /// thread; on success clears the error and lets writes in again. `Ok(())` if the engine is
    /// healthy afterwards (also when no error was set). A failed retry keeps the error (with
    /// its cause updated and the next automatic retry pushed back) and returns the retry's
    /// error; a fatal error returns `Error::Closed` asking for a reopen. If another recovery is
    /// running, waits for it and reports its outcome.
    pub(crate) fn recover(self: &Arc<Self>) -> Result<()> {
        let mut state = self.state.lock();
        // The flushes and compactions running now may have hit the error being recovered
        // from without having recorded it yet: their outcome counts. (While an error is set
        // none starts, so this waits for no job started after the call.)
        let horizon = state.next_background_attempt;
        while !state.shutting_down
            && state
                .background_attempts
                .first()
                .is_some_and(|attempt| *attempt < horizon)
        {
            self.bg_cv.wait(&mut state);
        }
        let mut waited_for_other = false;
        loop {
            if state.shutting_down {
                return Err(Error::Closed("the database is closing".into()));
            }
            let Some(error) = &state.bg_error else {
                return Ok(());
            };
            if !error.recoverable {
                return Err(reopen_needed(error));
            }
            if waited_for_other && !state.recovering {
                // The other recovery failed; its error stands.
                return Err(Error::Closed(format!(
                    "writes stopped after a background error: {error}"
                )));
            }
            if state.recovering {
                waited_for_other = true;
            } else if !state.flush_running
                && state.compactions_running == 0
                && !state.manifest_writing
            {
                // No job runs now, and none starts while the error is set.
                break;
            }
            self.bg_cv.wait(&mut state);
        }
        state.recovering = true;
        EngineCounters::add(&self.counters.background_error_retries, 1);
        let outcome = self.retry_failed_work(&mut state);
        state.recovering = false;
        let mut recovered_now = false;
        let result = match outcome {
            Ok(()) => {
                if state.bg_error.as_ref().is_some_and(|e| e.recoverable) {
                    state.bg_error = None;
                    self.writes_stopped
                        .store(state.shutting_down, Ordering::Release);
                    EngineCounters::add(&self.counters.background_error_recoveries, 1);
                    recovered_now = true;
                    Ok(())
                } else {
                    // Something fatal happened meanwhile (a log write failed under the
                    // retried job's commit).
                    Err(state.bg_error.as_ref().map_or_else(
                        || Error::Closed("writes stopped after a background error".into()),
                        reopen_needed,
                    ))
                }
            }
            Err(e) if state.shutting_down => Err(e),
            Err(e) => {
                let recoverable = Self::job_error_is_recoverable(&state, &e);
                match &mut state.bg_error {
                    Some(existing) if existing.recoverable && recoverable => {
                        existing.message = e.to_string();
                        existing.retries_failed = existing.retries_failed.saturating_add(1);
                        existing.retry_at =
                            Instant::now() + self.retry_delay(existing.retries_failed);
                    }
                    _ => self.set_bg_error(&mut state, &e),
                }
                Err(e)
            }
        };
        self.bg_cv.notify_all();
        drop(state);
        if recovered_now {
            for listener in &self.options.recovery_listeners {
                listener.after_recovery();
            }
        }
        result
    }

    /// The retry itself, with the state locked on entry and exit (unlocked while a job
    /// runs): roll to a fresh manifest if a manifest write failed, remove the tables of
    /// failed attempts, then run the failed flush again, or else a compaction if one is due.
    fn retry_failed_work(self: &Arc<Self>, state: &mut MutexGuard<'_, DbState>) -> Result<()> {
        if state.versions.write_failed() {
            let allocated = self.allocated_sequence.load(Ordering::Acquire);
            state.versions.recover_manifest(allocated)?;
            EngineCounters::add(&self.counters.manifest_writes, 1);
        }
        // Now no manifest CURRENT names can refer to them (a failed edit never reached the
        // state, and the manifest is the one written from the state, or one no write of which
        // failed); the live version is checked anyway.
        let live: BTreeSet<u64> = state
            .version
            .trees
            .values()
            .flat_map(|tree| tree.all_files().map(|(_, f)| f.number))
            .collect();
        let orphans: Vec<u64> = std::mem::take(&mut state.failed_job_files)
            .into_iter()
            .filter(|n| !live.contains(n))
            .collect();
        MutexGuard::unlocked(state, || {
            for number in orphans {
                // A failure leaves it for the next open's sweep of unreferenced files.
                let _ = self.fs.remove(&self.table_path(number));
            }
        });
        let oldest = state.imms.last().map(|m| m.wal_number());
        let flush_failed = state
            .flush_attempted
            .is_some_and(|(attempted, _)| Some(attempted) == oldest);
        if flush_failed {
            state.flush_running = true;
            let flushed = MutexGuard::unlocked(state, || self.flush_oldest_memtable());
            state.flush_running = false;
            self.bg_cv.notify_all();
            return flushed.map(|_| ());
        }
        if state.compactions_paused > 0 {
            return Ok(());
        }
        let Some(compaction) = self.pick_compaction(state) else {
            return Ok(());
        };
        compaction.mark(true);
        state.compactions_running += 1;
        let compacted = MutexGuard::unlocked(state, || self.run_compaction(&compaction));
        compaction.mark(false);
        state.compactions_running -= 1;
        self.bg_cv.notify_all();
        compacted
    }
}

/// The answer to a recovery from a fatal background error.
fn reopen_needed(error: &crate::db::state::BackgroundError) -> Error {
    Error::Closed(format!(
        "writes stopped after a background error that needs a reopen: {error}"
    ))
}
