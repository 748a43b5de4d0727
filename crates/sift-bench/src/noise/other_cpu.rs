//! CPU time that other processes' threads used while a bench ran: what else competed for the
//! machine. In traced runs of `bench diff-index` the client was preempted by kernel threads
//! (`kdamond.0`, DAMON's reclaim; `rcu_preempt`; `kworker`s doing writeback) and by other
//! programs; this names them in every report, so a noisy run says what the noise was.
//!
//! Read from `/proc/<pid>/task/<tid>/stat` through the `procfs` crate (Linux only): each
//! thread's user and system time, sampled before and after, this process left out.

use serde::Serialize;
use std::collections::HashMap;

/// One process or kernel thread name and the CPU time its threads used.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct OtherCpu {
    /// The thread name (`comm`), e.g. `kdamond.0` or `kworker/u8:2`.
    pub name: String,
    pub seconds: f64,
}

/// CPU ticks used so far by every thread of every other process, by (pid, tid).
#[derive(Debug, Clone, Default)]
pub struct ThreadTimes {
    ticks: HashMap<(u32, u32), (String, u64)>,
    ticks_per_second: u64,
}

impl ThreadTimes {
    /// The current times, or `None` where `/proc` cannot tell (not Linux).
    pub fn sample() -> Option<ThreadTimes> {
        #[cfg(target_os = "linux")]
        {
            let ticks_per_second = procfs::ticks_per_second();
            if ticks_per_second == 0 {
                return None;
            }
            let own = std::process::id();
            let mut ticks = HashMap::new();
            // Processes and threads come and go meanwhile: what cannot be read is skipped.
            for process in procfs::process::all_processes().ok()?.flatten() {
                let Ok(pid) = u32::try_from(process.pid) else {
                    continue;
                };
                if pid == own {
                    continue;
                }
                let Ok(tasks) = process.tasks() else {
                    continue;
                };
                for task in tasks.flatten() {
                    let (Ok(tid), Ok(stat)) = (u32::try_from(task.tid), task.stat()) else {
                        continue;
                    };
                    ticks.insert((pid, tid), (stat.comm, stat.utime + stat.stime));
                }
            }
            Some(ThreadTimes {
                ticks,
                ticks_per_second,
            })
        }
        #[cfg(not(target_os = "linux"))]
        {
            None
        }
    }

    /// The `count` names whose threads used the most CPU between `before` and `self`, most
    /// first, and the total of all threads. A thread that started meanwhile counts whole; one
    /// that ended meanwhile is not seen.
    pub fn busiest_since(&self, before: &ThreadTimes, count: usize) -> (Vec<OtherCpu>, f64) {
        let mut by_name: HashMap<&str, u64> = HashMap::new();
        for (thread, (name, ticks)) in &self.ticks {
            let earlier = before.ticks.get(thread).map_or(0, |(_, ticks)| *ticks);
            let used = ticks.saturating_sub(earlier);
            if used > 0 {
                *by_name.entry(name.as_str()).or_default() += used;
            }
        }
        let per_second = self.ticks_per_second.max(1) as f64;
        let total = by_name.values().sum::<u64>() as f64 / per_second;
        let mut names: Vec<(&str, u64)> = by_name.into_iter().collect();
        names.sort_unstable_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
        let busiest = names
            .into_iter()
            .take(count)
            .map(|(name, ticks)| OtherCpu {
                name: name.to_owned(),
                seconds: ticks as f64 / per_second,
            })
            .collect();
        (busiest, total)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_busiest_names_are_summed_over_threads_and_sorted() {
        let times = |entries: &[((u32, u32), &str, u64)]| ThreadTimes {
            ticks: entries
                .iter()
                .map(|(thread, name, ticks)| (*thread, ((*name).to_owned(), *ticks)))
                .collect(),
            ticks_per_second: 100,
        };
        let before = times(&[
            ((1, 1), "kdamond.0", 500),
            ((2, 2), "worker", 10),
            ((2, 3), "worker", 10),
            ((9, 9), "gone", 40),
        ]);
        let after = times(&[
            ((1, 1), "kdamond.0", 530),
            ((2, 2), "worker", 30),
            ((2, 3), "worker", 35),
            ((7, 7), "new", 5),
            ((8, 8), "idle", 0),
        ]);
        let (busiest, total) = after.busiest_since(&before, 2);
        assert_eq!(
            busiest,
            vec![
                OtherCpu {
                    name: "worker".to_owned(),
                    seconds: 0.45
                },
                OtherCpu {
                    name: "kdamond.0".to_owned(),
                    seconds: 0.3
                },
            ]
        );
        assert!((total - 0.8).abs() < 1e-9, "{total}");
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn a_busy_process_is_seen_and_this_process_is_not() {
        // A shell under a name of its own spins in a child process while this one spins too.
        let dir = tempfile::tempdir().expect("temporary directory");
        let shell = dir.path().join("sift-spin-test");
        std::fs::copy("/bin/sh", &shell).expect("copy /bin/sh");
        let before = ThreadTimes::sample().expect("/proc is readable");
        let mut child = std::process::Command::new(&shell)
            .args(["-c", "while :; do :; done"])
            .spawn()
            .expect("the shell runs");
        let spin_until = std::time::Instant::now() + std::time::Duration::from_millis(600);
        while std::time::Instant::now() < spin_until {
            std::hint::spin_loop();
        }
        let after = ThreadTimes::sample().expect("/proc is readable");
        child.kill().expect("kill the shell");
        child.wait().expect("reap the shell");
        let (busiest, total) = after.busiest_since(&before, usize::MAX);
        let spun = busiest
            .iter()
            .find(|other| other.name == "sift-spin-test")
            .map_or(0.0, |other| other.seconds);
        // 600 ms of spinning; a busy test machine still gives it a few ticks.
        assert!(
            spun >= 0.02,
            "the spinning shell used {spun} s: {busiest:?}"
        );
        assert!(total >= spun);
        assert!(
            !after
                .ticks
                .keys()
                .any(|(pid, _)| *pid == std::process::id()),
            "this process's threads were sampled"
        );
    }
}
