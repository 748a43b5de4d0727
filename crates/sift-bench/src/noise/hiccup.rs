//! How much of a running thread's time the machine itself takes away.
//!
//! One thread reads the clock in a tight loop; every interval between two consecutive reads
//! longer than [`GAP_FLOOR`] is time the thread did not run (an interrupt, another task, or the
//! hypervisor running another guest on this virtual CPU). On an idle machine a spinning thread
//! should lose well under 1 % of its time in gaps of a few microseconds; virtual machines on
//! busy hosts lose several percent, in gaps of milliseconds.
//!
//! Why a latency benchmark reports it: an open-loop client that loses the core for `g` seconds
//! delays every update scheduled meanwhile, adding about `rate × g² / 2` to the summed latency.
//! A few gaps of 10 ms in a 1.5 s step therefore raise the step's mean latency by tens of
//! microseconds, whatever the engine does, and a ratio of two such means says more about where
//! the gaps fell than about the engine. The meter is run before and after a measurement, with
//! nothing else of the benchmark running, so its figures describe the machine alone.

use serde::Serialize;
use std::time::{Duration, Instant};

/// Intervals between two clock reads up to this long count as running (a clock read and the
/// loop take well under a microsecond; a timer interrupt that is handled at once takes a few).
pub const GAP_FLOOR: Duration = Duration::from_micros(20);

/// Gaps from this length on are counted separately: they are what moves a mean latency.
pub const LONG_GAP: Duration = Duration::from_millis(1);

/// What one run of the meter saw.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize)]
pub struct Hiccups {
    pub seconds: f64,
    /// Gaps longer than [`GAP_FLOOR`], and their total as a share of the run.
    pub gaps: u64,
    pub lost_percent: f64,
    /// Gaps of [`LONG_GAP`] or more, per second of the run.
    pub long_gaps_per_second: f64,
    pub max_gap_ms: f64,
    /// `Σ gap²` per second of the run, in ms²/s: a client offered `r` updates per second gets
    /// about `r × this / 2000` µs added to its mean latency by these gaps alone.
    pub squared_gap_ms2_per_second: f64,
}

impl Hiccups {
    /// The mean latency, in µs, that gaps like these add to an open-loop client that would
    /// otherwise never wait, at any rate: a gap of g seconds delays the r·g updates scheduled
    /// in it by g/2 on average, r·g²/2 seconds of latency spread over the r updates of each
    /// second. With g in ms: Σg² [ms²/s] · 1e-6 [s²/ms²] / 2 · 1e6 [µs/s] = Σg² / 2 µs.
    pub fn added_mean_latency_us(&self) -> f64 {
        self.squared_gap_ms2_per_second / 2.0
    }

    /// One line for a report header.
    pub fn describe(&self) -> String {
        format!(
            "a spinning thread lost {:.2} % of {:.1} s in {} gaps over {} µs ({:.1} per second over {} ms, \
             longest {:.2} ms), which alone adds about {:.1} µs to an open-loop client's mean latency",
            self.lost_percent,
            self.seconds,
            self.gaps,
            GAP_FLOOR.as_micros(),
            self.long_gaps_per_second,
            LONG_GAP.as_millis(),
            self.max_gap_ms,
            self.added_mean_latency_us(),
        )
    }
}

/// `sift bench machine-noise`.
#[derive(Debug, Clone, clap::Args)]
pub struct MachineNoiseArgs {
    /// Seconds per run of the meter.
    #[arg(long, default_value_t = 5.0)]
    pub seconds: f64,
    /// Runs, one after another.
    #[arg(long, default_value_t = 3)]
    pub runs: u32,
}

/// Runs the meter `args.runs` times on the calling thread and prints one line per run.
pub fn run(args: &MachineNoiseArgs, out: &mut dyn std::io::Write) -> std::io::Result<Vec<Hiccups>> {
    if !(args.seconds.is_finite() && args.seconds > 0.0 && args.seconds <= 3600.0) {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("--seconds must be in (0, 3600], got {}", args.seconds),
        ));
    }
    let mut runs = Vec::new();
    for run in 1..=args.runs {
        let hiccups = measure(Duration::from_secs_f64(args.seconds));
        writeln!(out, "run {run}: {}", hiccups.describe())?;
        runs.push(hiccups);
    }
    Ok(runs)
}

/// Spins for `duration` on the calling thread and measures its gaps.
pub fn measure(duration: Duration) -> Hiccups {
    measure_with(duration, |_| {})
}

/// [`measure`], calling `between_reads` with the time elapsed so far before each clock read
/// (tests use it to stop the thread for a known time).
fn measure_with(duration: Duration, mut between_reads: impl FnMut(Duration)) -> Hiccups {
    let start = Instant::now();
    let mut previous = start;
    let mut gaps = 0u64;
    let mut lost = Duration::ZERO;
    let mut long_gaps = 0u64;
    let mut max_gap = Duration::ZERO;
    let mut squared_ms2 = 0.0f64;
    loop {
        between_reads(previous.saturating_duration_since(start));
        let now = Instant::now();
        let gap = now.saturating_duration_since(previous);
        if gap > GAP_FLOOR {
            gaps += 1;
            lost += gap;
            if gap >= LONG_GAP {
                long_gaps += 1;
            }
            max_gap = max_gap.max(gap);
            let gap_ms = gap.as_secs_f64() * 1e3;
            squared_ms2 += gap_ms * gap_ms;
        }
        previous = now;
        if now.saturating_duration_since(start) >= duration {
            break;
        }
    }
    let seconds = previous
        .saturating_duration_since(start)
        .as_secs_f64()
        .max(1e-9);
    Hiccups {
        seconds,
        gaps,
        lost_percent: lost.as_secs_f64() / seconds * 100.0,
        long_gaps_per_second: long_gaps as f64 / seconds,
        max_gap_ms: max_gap.as_secs_f64() * 1e3,
        squared_gap_ms2_per_second: squared_ms2 / seconds,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stop_of_the_thread_is_measured_as_a_gap() {
        let stop = Duration::from_millis(30);
        let mut stopped = false;
        let hiccups = measure_with(Duration::from_millis(80), |elapsed| {
            if !stopped && elapsed > Duration::from_millis(10) {
                stopped = true;
                std::thread::sleep(stop);
            }
        });
        assert!(stopped);
        assert!(hiccups.max_gap_ms >= 30.0, "{hiccups:?}");
        assert!(
            hiccups.long_gaps_per_second * hiccups.seconds >= 1.0 - 1e-9,
            "{hiccups:?}"
        );
        assert!(hiccups.gaps >= 1);
        // 30 ms of an 80 ms run, at least.
        assert!(
            hiccups.lost_percent >= 30.0 / 80.0 * 100.0 * 0.99,
            "{hiccups:?}"
        );
        assert!(
            hiccups.squared_gap_ms2_per_second * hiccups.seconds >= 30.0 * 30.0,
            "{hiccups:?}"
        );
    }

    #[test]
    fn the_added_mean_latency_follows_the_squared_gaps() {
        // One 10 ms gap per second. With r updates per second, the r·0.01 scheduled inside the
        // gap wait 5 ms on average: r·0.01·5 ms of latency per second, over r updates, is
        // 0.05 ms = 50 µs per update, whatever r is.
        let hiccups = Hiccups {
            squared_gap_ms2_per_second: 100.0,
            ..Hiccups::default()
        };
        let added = hiccups.added_mean_latency_us();
        assert!((added - 50.0).abs() < 1e-9, "{added}");
    }

    #[test]
    fn the_meter_runs_for_the_asked_time_and_its_shares_are_consistent() {
        let hiccups = measure(Duration::from_millis(50));
        assert!(hiccups.seconds >= 0.05);
        assert!(hiccups.seconds < 5.0);
        assert!((0.0..=100.0).contains(&hiccups.lost_percent));
        // The longest gap cannot exceed the total lost time.
        assert!(hiccups.max_gap_ms <= hiccups.lost_percent / 100.0 * hiccups.seconds * 1e3 + 1e-9);
        if hiccups.gaps == 0 {
            assert!(hiccups.max_gap_ms == 0.0 && hiccups.squared_gap_ms2_per_second == 0.0);
        }
    }
}
