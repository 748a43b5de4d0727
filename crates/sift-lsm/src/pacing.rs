//! Short, regular pauses of the engine's flush and compaction threads, so a foreground thread
//! never waits long behind them for a core (`Options::background_threads_yield_to_foreground`).
//!
//! Why: on a machine with few cores, a writer that the kernel preempts at a timer tick in
//! favour of a flush or compaction thread waits for that thread's whole time slice (a 4 ms
//! tick at 250 Hz), even under `SCHED_IDLE` and even while the other core is idle (measured
//! with `perf record -e sched:sched_switch`: 4 ms gaps of a runnable writer, the preempting
//! compaction thread on its core, the other core in its idle loop). A background thread that
//! sleeps briefly after every `BURST` of work leaves the run queue, so a writer queued behind
//! it gets the core back within `BURST`.

use std::cell::Cell;
use std::time::{Duration, Instant};

/// Work between two pauses.
pub(crate) const BURST: Duration = Duration::from_micros(500);
/// Requested length of a pause (the kernel's timer slack, 50 µs by default, comes on top:
/// about a tenth of the background thread's time).
pub(crate) const PAUSE: Duration = Duration::from_micros(10);
/// Calls to [`pace`] between two clock reads: a clock read costs about 20 ns, a table entry
/// written 100 ns or more.
const CALLS_PER_CLOCK_READ: u32 = 64;

struct Pacer {
    enabled: Cell<bool>,
    calls: Cell<u32>,
    burst_start: Cell<Option<Instant>>,
    pauses: Cell<u64>,
}

thread_local! {
    static PACER: Pacer = const {
        Pacer {
            enabled: Cell::new(false),
            calls: Cell::new(0),
            burst_start: Cell::new(None),
            pauses: Cell::new(0),
        }
    };
}

/// Makes [`pace`] pause the calling thread regularly.
pub(crate) fn enable_for_current_thread() {
    PACER.with(|pacer| {
        pacer.enabled.set(true);
        pacer.burst_start.set(None);
    });
}

/// Whether the calling thread called [`enable_for_current_thread`]: a caller that checks this
/// once skips [`pace`] (a thread-local read) per unit of work on a thread that never pauses.
pub(crate) fn enabled_for_current_thread() -> bool {
    PACER.with(|pacer| pacer.enabled.get())
}

/// Called once per unit of background work (a table entry written); sleeps for `PAUSE` once
/// the thread has worked for `BURST` since its last pause. Does nothing on a thread that did
/// not call [`enable_for_current_thread`].
pub(crate) fn pace() {
    PACER.with(|pacer| {
        if !pacer.enabled.get() {
            return;
        }
        let calls = pacer.calls.get().wrapping_add(1);
        pacer.calls.set(calls);
        if calls % CALLS_PER_CLOCK_READ != 0 {
            return;
        }
        let now = Instant::now();
        match pacer.burst_start.get() {
            Some(start) if now.duration_since(start) >= BURST => {
                std::thread::sleep(PAUSE);
                pacer.pauses.set(pacer.pauses.get() + 1);
                pacer.burst_start.set(Some(Instant::now()));
            }
            Some(_) => {}
            None => pacer.burst_start.set(Some(now)),
        }
    });
}

/// Pauses the calling thread has taken.
#[cfg(test)]
pub(crate) fn pauses_of_current_thread() -> u64 {
    PACER.with(|pacer| pacer.pauses.get())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_thread_pauses_after_each_burst_of_work_only_when_enabled() {
        std::thread::spawn(|| {
            let start = Instant::now();
            while start.elapsed() < BURST * 4 {
                pace();
            }
            assert_eq!(pauses_of_current_thread(), 0, "not enabled: never pauses");
            assert!(!enabled_for_current_thread());
            enable_for_current_thread();
            assert!(enabled_for_current_thread());
            // Enabled: pauses come (liveness), and never more than one per burst of work.
            let start = Instant::now();
            let deadline = start + Duration::from_secs(10);
            while pauses_of_current_thread() < 3 && Instant::now() < deadline {
                pace();
            }
            assert_eq!(pauses_of_current_thread(), 3);
            assert!(start.elapsed() >= BURST * 3, "{:?}", start.elapsed());
        })
        .join()
        .expect("pacing thread");
    }
}
