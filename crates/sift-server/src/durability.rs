//! `--fsync everysec`: a thread that syncs the write-ahead log once a second.

use std::sync::Arc;
use std::time::Duration;

use parking_lot::{Condvar, Mutex};

use crate::session::{ServerStats, Shared};

/// The syncer thread; stopping it syncs one last time.
#[derive(Debug)]
pub(crate) struct EverySecond {
    stop: Arc<(Mutex<bool>, Condvar)>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl EverySecond {
    pub(crate) fn start(shared: Arc<Shared>) -> std::io::Result<EverySecond> {
        let stop = Arc::new((Mutex::new(false), Condvar::new()));
        let signal = Arc::clone(&stop);
        let thread = std::thread::Builder::new()
            .name("sift-fsync".to_owned())
            .spawn(move || {
                let (stopped, wake) = &*signal;
                loop {
                    let done = {
                        let mut stopped = stopped.lock();
                        if !*stopped {
                            wake.wait_for(&mut stopped, Duration::from_secs(1));
                        }
                        *stopped
                    };
                    if let Err(error) = shared.keyspace.database().engine().sync_wal() {
                        ServerStats::add(&shared.stats.fsync_errors, 1);
                        tracing::error!(%error, "syncing the write-ahead log failed");
                    }
                    if done {
                        return;
                    }
                }
            })?;
        Ok(EverySecond {
            stop,
            thread: Some(thread),
        })
    }

    /// Stops the thread after a last sync.
    pub(crate) fn stop(mut self) {
        self.stop_and_join();
    }

    fn stop_and_join(&mut self) {
        let (stopped, wake) = &*self.stop;
        *stopped.lock() = true;
        wake.notify_all();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl Drop for EverySecond {
    fn drop(&mut self) {
        self.stop_and_join();
    }
}
