//! What the machine does to a benchmark, measured beside it so a noisy run says so: how much
//! of a spinning thread's time the machine takes away (`hiccup`, also `sift bench
//! machine-noise`), and which other processes used the CPU meanwhile (`other_cpu`), and how often the kernel switched a thread out
//! (`thread_context_switches`).

pub mod hiccup;
pub mod other_cpu;

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

#[cfg(test)]
mod tests {
    /// A thread that sleeps gives the CPU up, and the count says so.
    #[cfg(target_os = "linux")]
    #[test]
    fn a_sleeping_thread_counts_its_context_switches() {
        let before = super::thread_context_switches().unwrap();
        for _ in 0..3 {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        let after = super::thread_context_switches().unwrap();
        assert!(after >= before + 3, "{before} -> {after}");
    }
}
