//! Time the machine takes from a benchmark client that paces itself: the client's spin wait
//! for an operation's scheduled time, and its engine calls that ran long without a context
//! switch. `sift bench diff-index` reports both per load step, beside [`super::hiccup`]'s
//! figures for the machine alone.

use std::time::{Duration, Instant};

/// A client's stretch without the CPU this long, while it only waited for an update's time,
/// marks its step as hit by a machine pause (see [`SpinGaps`]).
pub const HOST_PAUSE: Duration = Duration::from_millis(5);

/// Time the machine took from a client, seen two ways.
///
/// While the client spins, waiting for the next update's time: the longest interval between two
/// consecutive clock reads. No engine call is inside such an interval, so a long one is time
/// the machine took from the client (another task, an interrupt, or the hypervisor running
/// another guest on this virtual CPU; `perf` showed pauses of 10-40 ms with the client in
/// `clock_gettime` and no context switch), the kind [`sift_bench::noise::hiccup`] measures before and after
/// the steps.
///
/// Inside an engine call: a call of [`HOST_PAUSE`] or longer during which the client's thread
/// was never switched out (its context-switch count, read before the wait for the update's
/// time and again after such a call, did not move). The count is read only when the client is
/// ahead of schedule, so the reads never delay an update; a call that started behind schedule
/// is not judged. Every engine wait (a lock, a condition, I/O) parks the thread after
/// at most a short spin (the commit lock spins 200 µs), which counts a switch; so such a call
/// ran its whole time as the guest saw it. An engine call computes for microseconds, so what
/// remains is time the hypervisor took, or kernel work done on the thread (memory reclaim, say).
/// A call during which the thread was switched out (or whose wait before it slept) is not
/// counted: its time stays in the latencies like any engine wait.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct SpinGaps {
    pub longest: Duration,
    /// Intervals of [`HOST_PAUSE`] or longer.
    pub pauses: u64,
    /// Engine calls of [`HOST_PAUSE`] or longer without a context switch, and the longest.
    pub unswitched_calls: u64,
    pub longest_unswitched_call: Duration,
}

impl SpinGaps {
    pub fn note(&mut self, gap: Duration) {
        self.longest = self.longest.max(gap);
        if gap >= HOST_PAUSE {
            self.pauses += 1;
        }
    }

    /// An engine call that took `service`; `before` is the thread's context-switch count read
    /// before the wait for the call's time (`None`: not read), and `after` reads it now. It is
    /// called only for a call long enough to judge, so a short call costs no system call.
    pub fn note_call(
        &mut self,
        service: Duration,
        before: Option<u64>,
        after: impl FnOnce() -> Option<u64>,
    ) {
        if service < HOST_PAUSE {
            return;
        }
        if let (Some(before), Some(after)) = (before, before.and_then(|_| after())) {
            if after == before {
                self.unswitched_calls += 1;
                self.longest_unswitched_call = self.longest_unswitched_call.max(service);
            }
        }
    }

    pub fn merge(&mut self, other: SpinGaps) {
        self.longest = self.longest.max(other.longest);
        self.pauses += other.pauses;
        self.unswitched_calls += other.unswitched_calls;
        self.longest_unswitched_call = self
            .longest_unswitched_call
            .max(other.longest_unswitched_call);
    }

    pub fn hit(&self) -> bool {
        self.pauses > 0 || self.unswitched_calls > 0
    }
}

/// Waits until `at`: sleeps while far from it, then spins, so updates start on time even at
/// tens of thousands per second (a yield could hand the core to another process for
/// milliseconds on a busy machine). Notes the gaps between the spin's clock reads in `gaps`.
pub fn wait_until(at: Instant, gaps: &mut SpinGaps) {
    wait_until_with(at, gaps, |_| {});
}

/// [`wait_until`], calling `between_reads` with the time left before each spin's clock read
/// (tests use it to take the thread away for a known time).
pub fn wait_until_with(at: Instant, gaps: &mut SpinGaps, mut between_reads: impl FnMut(Duration)) {
    // The previous read of the spin; none after a sleep, which is no lost time.
    let mut previous: Option<Instant> = None;
    loop {
        let now = Instant::now();
        if let Some(previous) = previous {
            gaps.note(now.saturating_duration_since(previous));
        }
        if now >= at {
            return;
        }
        let left = at - now;
        if left > Duration::from_millis(1) {
            std::thread::sleep(left.saturating_sub(Duration::from_micros(500)));
            previous = None;
        } else {
            std::hint::spin_loop();
            between_reads(left);
            previous = Some(now);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pause_while_waiting_is_noted_and_a_sleep_is_not() {
        let pause = HOST_PAUSE + Duration::from_millis(1);
        // Under 1 ms ahead, so the wait spins at once (no sleep to overshoot the time); tried
        // again if the thread lost the core for that long before its first read.
        let mut gaps = SpinGaps::default();
        let mut paused = false;
        for _ in 0..100 {
            gaps = SpinGaps::default();
            wait_until_with(
                Instant::now() + Duration::from_micros(900),
                &mut gaps,
                |_left| {
                    if !paused {
                        paused = true;
                        std::thread::sleep(pause);
                    }
                },
            );
            if paused {
                break;
            }
        }
        assert!(paused, "the wait never spun");
        assert!(gaps.longest >= pause, "{gaps:?}");
        assert_eq!(gaps.pauses, 1, "{gaps:?}");
        assert!(gaps.hit());
        // A wait of 20 ms sleeps about 19.5 of them: no gap of that length is noted.
        let mut quiet = SpinGaps::default();
        wait_until(Instant::now() + Duration::from_millis(20), &mut quiet);
        assert!(quiet.longest < Duration::from_millis(15), "{quiet:?}");
        let mut both = gaps;
        both.merge(quiet);
        assert_eq!(both.longest, gaps.longest.max(quiet.longest));
        assert_eq!(both.pauses, gaps.pauses + quiet.pauses);
    }

    #[test]
    fn only_long_calls_without_a_context_switch_are_counted_as_pauses() {
        let long = HOST_PAUSE + Duration::from_millis(1);
        let mut gaps = SpinGaps::default();
        gaps.note_call(Duration::from_millis(1), Some(7), || Some(7));
        assert_eq!(gaps.unswitched_calls, 0, "a short call is no pause");
        gaps.note_call(long, Some(7), || Some(8));
        assert_eq!(
            gaps.unswitched_calls, 0,
            "the thread was switched out: an engine wait"
        );
        gaps.note_call(long, None, || Some(8));
        // The count is read again only for a long call whose first count is known.
        gaps.note_call(Duration::from_millis(1), Some(7), || {
            panic!("read after a short call")
        });
        gaps.note_call(long, None, || panic!("read without a first count"));
        assert_eq!(gaps.unswitched_calls, 0, "unknown counts decide nothing");
        assert!(!gaps.hit());
        gaps.note_call(long, Some(8), || Some(8));
        assert_eq!(gaps.unswitched_calls, 1);
        assert_eq!(gaps.longest_unswitched_call, long);
        assert!(gaps.hit());
        let mut merged = SpinGaps::default();
        merged.merge(gaps);
        merged.merge(gaps);
        assert_eq!(merged.unswitched_calls, 2);
        assert_eq!(merged.longest_unswitched_call, long);
        assert_eq!(merged.pauses, 0);
    }

    /// What the detection rests on: a thread that sleeps is switched out (so an engine wait is
    /// never taken for a pause), and one that only computes is not, unless preempted.
    #[cfg(target_os = "linux")]
    #[test]
    fn a_sleep_moves_the_context_switch_count_and_a_short_spin_usually_does_not() {
        let before = super::super::thread_context_switches();
        std::thread::sleep(Duration::from_millis(2));
        let after = super::super::thread_context_switches();
        assert!(before.is_some() && after > before, "{before:?} {after:?}");
        // 200 µs of spinning: a preemption can land in it on a busy machine, so try again.
        let unswitched = (0..50).any(|_| {
            let before = super::super::thread_context_switches();
            let started = Instant::now();
            while started.elapsed() < Duration::from_micros(200) {
                std::hint::spin_loop();
            }
            super::super::thread_context_switches() == before
        });
        assert!(unswitched, "every spin was switched out");
    }
}
