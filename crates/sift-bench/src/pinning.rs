//! Pinning a benchmark's threads to CPUs: the `--background-cpus` and `--client-cpus` options
//! of `sift bench kv`, `index` and `diff-index` (CPU lists as `taskset -c` takes them), their
//! checks, the pinning of a client thread, and how a report describes it.
//!
//! The engine's background threads are pinned by the engine itself (`background_thread_cpus`
//! of `sift_lsm::Options`); a benchmark pins every thread it starts to issue operations, with
//! the same kernel calls (`nix::sched`), so the peer engines' binary pins as `sift bench` does.

use crate::BenchError;
use std::collections::BTreeSet;

/// A CPU list in the kernel's format (`0-1,3`, as `taskset -c` takes): the CPUs in ascending
/// order, each once.
pub fn parse_cpus(text: &str) -> Result<Vec<usize>, String> {
    let bad =
        |part: &str| format!("CPU list {text:?}: {part:?} is not a CPU number or a range like 0-3");
    let mut cpus = BTreeSet::new();
    for part in text.split(',').map(str::trim) {
        let (first, last) = part.split_once('-').unwrap_or((part, part));
        let first: usize = first.trim().parse().map_err(|_| bad(part))?;
        let last: usize = last.trim().parse().map_err(|_| bad(part))?;
        if first > last {
            return Err(bad(part));
        }
        cpus.extend(first..=last);
    }
    Ok(cpus.into_iter().collect())
}

/// `cpus` in the kernel's list format, ranges collapsed ("0-3,6"); "none" when empty.
pub fn format_cpus(cpus: &[usize]) -> String {
    let sorted: BTreeSet<usize> = cpus.iter().copied().collect();
    let mut runs: Vec<(usize, usize)> = Vec::new();
    for cpu in sorted {
        match runs.last_mut() {
            Some((_, last)) if *last + 1 == cpu => *last = cpu,
            _ => runs.push((cpu, cpu)),
        }
    }
    if runs.is_empty() {
        return "none".to_owned();
    }
    runs.iter()
        .map(|&(first, last)| {
            if first == last {
                first.to_string()
            } else {
                format!("{first}-{last}")
            }
        })
        .collect::<Vec<_>>()
        .join(",")
}

/// The CPUs this process may run threads on: the union of the affinity masks of the calling
/// thread and of the main thread (whose mask is the one `taskset` gives the whole process).
/// Ascending; empty outside Linux or when neither mask can be read.
pub fn process_allowed_cpus() -> Vec<usize> {
    #[cfg(target_os = "linux")]
    {
        use nix::sched::{sched_getaffinity, CpuSet};
        use nix::unistd::{getpid, Pid};
        let mut allowed = BTreeSet::new();
        for thread in [Pid::from_raw(0), getpid()] {
            if let Ok(set) = sched_getaffinity(thread) {
                allowed
                    .extend((0..CpuSet::count()).filter(|&cpu| set.is_set(cpu).unwrap_or(false)));
            }
        }
        allowed.into_iter().collect()
    }
    #[cfg(not(target_os = "linux"))]
    {
        Vec::new()
    }
}

/// Checks, before anything runs, that every CPU of both lists is one this process may run
/// on (Linux; elsewhere pinning does nothing). The error names the option and the CPU.
pub fn check_allowed(
    background_cpus: Option<&[usize]>,
    client_cpus: Option<&[usize]>,
) -> Result<(), BenchError> {
    if cfg!(target_os = "linux") {
        let allowed = process_allowed_cpus();
        for (option, cpus) in [
            ("--background-cpus", background_cpus),
            ("--client-cpus", client_cpus),
        ] {
            if let Some(cpu) = cpus
                .unwrap_or_default()
                .iter()
                .find(|cpu| !allowed.contains(cpu))
            {
                return Err(BenchError::new(format!(
                    "{option}: CPU {cpu} is not one this process may run on (allowed: {})",
                    format_cpus(&allowed)
                )));
            }
        }
    }
    Ok(())
}

/// Pins the calling client thread to `cpus` (if any; Linux, elsewhere nothing happens). An
/// empty list, a CPU the kernel's mask cannot name or a set the kernel refuses is an error
/// that leaves the thread as it was.
pub fn pin_client(cpus: Option<&[usize]>) -> Result<(), BenchError> {
    let Some(cpus) = cpus else {
        return Ok(());
    };
    if cpus.is_empty() {
        return Err(BenchError::new("--client-cpus: an empty list of CPUs"));
    }
    #[cfg(target_os = "linux")]
    {
        use nix::sched::{sched_setaffinity, CpuSet};
        let mut set = CpuSet::new();
        for &cpu in cpus {
            set.set(cpu).map_err(|_| {
                BenchError::new(format!(
                    "--client-cpus: CPU {cpu} is beyond what the kernel's mask can name ({})",
                    CpuSet::count()
                ))
            })?;
        }
        sched_setaffinity(nix::unistd::Pid::from_raw(0), &set).map_err(|e| {
            BenchError::new(format!(
                "--client-cpus: the kernel refused CPUs {}: {e}",
                format_cpus(cpus)
            ))
        })?;
    }
    Ok(())
}

/// Where the threads ran, for a run's header line.
pub fn pinning_description(
    background_cpus: Option<&[usize]>,
    client_cpus: Option<&[usize]>,
) -> String {
    let on = |cpus: Option<&[usize]>| {
        cpus.map_or_else(
            || "any CPU".to_owned(),
            |cpus| format!("CPUs {}", format_cpus(cpus)),
        )
    };
    format!(
        "background threads on {}, clients on {}",
        on(background_cpus),
        on(client_cpus)
    )
}

/// The calling thread's CPUs as the kernel lists them (`Cpus_allowed_list` of Linux
/// `/proc`), or `None` where `/proc` cannot tell: what a test or a report checks a pinning by.
pub fn current_thread_cpu_list() -> Option<String> {
    cpu_list_in("/proc/thread-self/status")
}

/// The CPUs of this process's thread `thread_id` (Linux), as `current_thread_cpu_list`.
pub fn thread_cpu_list(thread_id: i64) -> Option<String> {
    cpu_list_in(&format!("/proc/self/task/{thread_id}/status"))
}

fn cpu_list_in(status_path: &str) -> Option<String> {
    std::fs::read_to_string(status_path)
        .ok()?
        .lines()
        .find_map(|line| line.strip_prefix("Cpus_allowed_list:"))
        .map(|list| list.trim().to_owned())
}

/// What tests of the benchmarks' pinning share (here and in `sift-study`).
pub mod test_support {
    /// The (background, client) CPU lists of parsed arguments or of a configuration.
    pub type CpuLists = (Option<Vec<usize>>, Option<Vec<usize>>);

    /// Parses arguments (an error: refused by the parser) into the lists they carry and
    /// those of the checked configuration (or its error).
    pub type ParseAndConfigure<'a> =
        dyn Fn(&[&str]) -> Result<(CpuLists, Result<CpuLists, String>), String> + 'a;

    /// Checks a benchmark's `--background-cpus` and `--client-cpus`: the lists parse as
    /// `taskset -c` takes them and reach the configuration; a CPU this process may not use
    /// is refused, naming the option and the CPU. Panics on the first that does not hold.
    #[allow(clippy::unwrap_used)]
    pub fn check_cpu_options(parse_and_configure: &ParseAndConfigure<'_>) {
        let (parsed, _) =
            parse_and_configure(&["--background-cpus", "4,1-2", "--client-cpus", "0"]).unwrap();
        assert_eq!(parsed, (Some(vec![1, 2, 4]), Some(vec![0])));
        let (unset, configured) = parse_and_configure(&[]).unwrap();
        assert_eq!(unset, (None, None));
        assert_eq!(configured, Ok((None, None)));
        for bad in [["--client-cpus", "x"], ["--background-cpus", "3-1"]] {
            assert!(parse_and_configure(&bad).is_err(), "{bad:?}");
        }
        let allowed = super::process_allowed_cpus();
        let first = allowed[0].to_string();
        let (_, configured) =
            parse_and_configure(&["--background-cpus", &first, "--client-cpus", &first]).unwrap();
        assert_eq!(
            configured,
            Ok((Some(vec![allowed[0]]), Some(vec![allowed[0]])))
        );
        if cfg!(target_os = "linux") {
            for option in ["--background-cpus", "--client-cpus"] {
                let (_, configured) = parse_and_configure(&[option, "4096"]).unwrap();
                let error = configured.unwrap_err();
                assert!(
                    error.starts_with(&format!("{option}: CPU 4096 ")),
                    "{error}"
                );
            }
        }
    }

    /// Every row of a run pinned to `cpu` (background and clients) says so in its JSON.
    #[allow(clippy::unwrap_used)]
    pub fn assert_rows_report_pinning<Row: serde::Serialize>(rows: &[Row], cpu: usize) {
        assert!(!rows.is_empty());
        for row in rows {
            let json = serde_json::to_value(row).unwrap();
            assert_eq!(json["background_cpus"], serde_json::json!([cpu]), "{json}");
            assert_eq!(json["client_cpus"], serde_json::json!([cpu]), "{json}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_lists_parse_and_format_in_the_kernel_format() {
        assert_eq!(parse_cpus("0"), Ok(vec![0]));
        assert_eq!(parse_cpus("3,0-1, 5-6"), Ok(vec![0, 1, 3, 5, 6]));
        assert_eq!(parse_cpus("1,1,0-1"), Ok(vec![0, 1]));
        for bad in ["", "a", "3-1", "1-", "-1", "0,,1"] {
            assert!(
                parse_cpus(bad).is_err_and(|message| message.contains(&format!("{bad:?}"))),
                "{bad:?} accepted"
            );
        }
        assert_eq!(format_cpus(&[6, 0, 1, 2, 3, 3]), "0-3,6");
        assert_eq!(format_cpus(&[1, 3]), "1,3");
        assert_eq!(format_cpus(&[]), "none");
        for cpus in [vec![0], vec![0, 2, 3, 4, 9], vec![1, 2, 7, 8]] {
            assert_eq!(parse_cpus(&format_cpus(&cpus)), Ok(cpus));
        }
    }

    /// A pinned client thread's `Cpus_allowed_list` is the set it was pinned to; a CPU the
    /// kernel cannot name is refused and leaves the thread as it was.
    #[cfg(target_os = "linux")]
    #[test]
    fn a_pinned_client_runs_only_on_its_cpus() {
        std::thread::spawn(|| {
            let allowed = process_allowed_cpus();
            let before = current_thread_cpu_list();
            let error = pin_client(Some(&[allowed[0], 4096])).unwrap_err();
            assert!(error.message().contains("4096"), "{error}");
            assert!(pin_client(Some(&[])).is_err());
            assert_eq!(current_thread_cpu_list(), before);
            pin_client(Some(&allowed[..1])).unwrap();
            assert_eq!(current_thread_cpu_list(), Some(allowed[0].to_string()));
        })
        .join()
        .unwrap();
    }

    #[test]
    fn cpus_outside_the_allowed_set_are_refused_naming_the_option_and_the_cpu() {
        let allowed = process_allowed_cpus();
        assert!(check_allowed(Some(&allowed[..1]), Some(&allowed[..1])).is_ok());
        assert!(check_allowed(None, None).is_ok());
        if cfg!(target_os = "linux") {
            let background = check_allowed(Some(&[allowed[0], 4096]), None).unwrap_err();
            assert!(
                background
                    .message()
                    .starts_with("--background-cpus: CPU 4096 "),
                "{background}"
            );
            let client = check_allowed(None, Some(&[4096])).unwrap_err();
            assert!(
                client.message().starts_with("--client-cpus: CPU 4096 "),
                "{client}"
            );
        }
        assert_eq!(
            pinning_description(None, Some(&[0, 1, 2, 5])),
            "background threads on any CPU, clients on CPUs 0-2,5"
        );
    }
}
