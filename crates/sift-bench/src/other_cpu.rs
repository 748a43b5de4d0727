//! CPU time that other processes' threads used while a bench ran: what else competed for the
//! machine. In traced runs of `bench diff-index` the client was preempted by kernel threads
//! (`kdamond.0`, DAMON's reclaim; `rcu_preempt`; `kworker`s doing writeback) and by other
//! programs; this names them in every report, so a noisy run says what the noise was.
//!
//! Read from `/proc/<pid>/task/<tid>/stat` (Linux only): each thread's user and system time,
//! sampled before and after, this process left out.

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
            // SAFETY: sysconf only reads a configuration value.
            let ticks_per_second = u64::try_from(unsafe { libc::sysconf(libc::_SC_CLK_TCK) })
                .ok()
                .filter(|ticks| *ticks > 0)?;
            let own = std::process::id();
            let mut ticks = HashMap::new();
            // Processes and threads come and go meanwhile: what cannot be read is skipped.
            for (pid, process) in numbered_entries(std::path::Path::new("/proc")) {
                if pid == own {
                    continue;
                }
                for (tid, task) in numbered_entries(&process.join("task")) {
                    let Ok(stat) = std::fs::read_to_string(task.join("stat")) else {
                        continue;
                    };
                    if let Some(entry) = parse_stat(&stat) {
                        ticks.insert((pid, tid), entry);
                    }
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

/// The entries of `dir` named by a number (processes in `/proc`, threads in its `task`), with
/// their paths; none if `dir` cannot be read.
#[cfg(target_os = "linux")]
fn numbered_entries(dir: &std::path::Path) -> impl Iterator<Item = (u32, std::path::PathBuf)> {
    std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|entry| {
            let number = entry.file_name().to_str()?.parse().ok()?;
            Some((number, entry.path()))
        })
}

/// `(comm, utime + stime)` from a `/proc/.../stat` line. The name may hold spaces and
/// parentheses, so the fields are counted from its last `)`.
fn parse_stat(stat: &str) -> Option<(String, u64)> {
    let open = stat.find('(')?;
    let close = stat.rfind(')')?;
    let name = stat.get(open + 1..close)?.to_owned();
    // After the name: state (field 3) … utime (14), stime (15).
    let mut fields = stat.get(close + 1..)?.split_whitespace();
    let utime: u64 = fields.nth(11)?.parse().ok()?;
    let stime: u64 = fields.next()?.parse().ok()?;
    Some((name, utime + stime))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_lines_are_parsed_from_the_last_parenthesis() {
        let line = "4242 (odd) name (x) S 1 4242 4242 0 -1 4194560 1200 0 3 0 157 43 0 0 20 0 1 0 \
                    88 1000 10 18446744073709551615";
        assert_eq!(parse_stat(line), Some(("odd) name (x".to_owned(), 200)));
        let kernel = "31 (kdamond.0) S 2 0 0 0 -1 2129984 0 0 0 0 0 1234 0 0 20 0 1 0 60 0 0";
        assert_eq!(parse_stat(kernel), Some(("kdamond.0".to_owned(), 1234)));
        assert_eq!(parse_stat("12 (short) S 1 2 3"), None);
        assert_eq!(parse_stat("no parentheses at all"), None);
    }

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
