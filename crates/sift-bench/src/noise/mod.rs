//! What the machine does to a benchmark, measured beside it so a noisy run says so: how much
//! of a spinning thread's time the machine takes away (`hiccup`, also `sift bench
//! machine-noise`), and which other processes used the CPU meanwhile (`other_cpu`), and how often the kernel switched a thread out
//! (`thread_context_switches`).

pub mod hiccup;
pub mod other_cpu;
pub mod spin_gaps;

/// Context switches of the calling thread so far, voluntary and involuntary (`None` where they
/// cannot be read).
pub fn thread_context_switches() -> Option<u64> {
    #[cfg(target_os = "linux")]
    {
        use nix::sys::resource::{getrusage, UsageWho};
        let usage = getrusage(UsageWho::RUSAGE_THREAD).ok()?;
        let voluntary = u64::try_from(usage.voluntary_context_switches()).ok()?;
        let involuntary = u64::try_from(usage.involuntary_context_switches()).ok()?;
        Some(voluntary + involuntary)
    }
    #[cfg(not(target_os = "linux"))]
    {
        None
    }
}
