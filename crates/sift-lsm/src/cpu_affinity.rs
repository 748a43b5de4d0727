//! Pinning threads to CPUs (Linux `sched_setaffinity` through `nix::sched`; a no-op elsewhere). The engine's
//! background threads follow `Options::background_thread_cpus`; the index layer pins its own
//! background threads through `Db::enter_background_thread`, which uses the same function.

use crate::{Error, Result};

/// The CPUs this process may run threads on: the union of the affinity masks of the calling
/// thread and of the main thread (whose mask is the one `taskset` gives the whole process).
/// The union, because a database may be opened from a thread already pinned to the
/// foreground CPUs and still place its background threads on the others. Ascending; empty
/// outside Linux or when neither mask can be read.
pub fn process_allowed_cpus() -> Vec<usize> {
    #[cfg(target_os = "linux")]
    {
        use nix::sched::{sched_getaffinity, CpuSet};
        use nix::unistd::{getpid, Pid};
        let mut allowed = std::collections::BTreeSet::new();
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

/// Pins the calling thread to `cpus`: from now on the scheduler runs it only on those CPUs.
/// Linux only; elsewhere it does nothing and succeeds. An empty list, a CPU beyond what the
/// kernel's mask can name, or a set the kernel refuses (no CPU of it allowed to this process)
/// is an error that leaves the thread's affinity unchanged.
pub fn pin_current_thread_to_cpus(cpus: &[usize]) -> Result<()> {
    if cpus.is_empty() {
        return Err(Error::InvalidArgument(
            "cannot pin a thread to an empty list of CPUs".into(),
        ));
    }
    #[cfg(target_os = "linux")]
    {
        use nix::sched::{sched_setaffinity, CpuSet};
        let mut set = CpuSet::new();
        for &cpu in cpus {
            set.set(cpu).map_err(|_| {
                Error::InvalidArgument(format!(
                    "cannot pin a thread to CPU {cpu}: CPU numbers stop at {}",
                    CpuSet::count() - 1
                ))
            })?;
        }
        sched_setaffinity(nix::unistd::Pid::from_raw(0), &set).map_err(|errno| {
            Error::InvalidArgument(format!(
                "the kernel refused to pin a thread to CPUs {}: {errno}",
                format_cpu_list(cpus)
            ))
        })?;
    }
    Ok(())
}

/// Checks `Options::background_thread_cpus` before anything is opened: not empty, and (on
/// Linux) every CPU one this process may run on.
pub(crate) fn validate_background_thread_cpus(cpus: &[usize]) -> Result<()> {
    if cpus.is_empty() {
        return Err(Error::InvalidArgument(
            "background_thread_cpus is an empty list; leave it unset to keep background threads on every CPU".into(),
        ));
    }
    #[cfg(target_os = "linux")]
    {
        let allowed = process_allowed_cpus();
        if let Some(&cpu) = cpus.iter().find(|cpu| !allowed.contains(cpu)) {
            return Err(Error::InvalidArgument(format!(
                "background_thread_cpus: CPU {cpu} is not one this process may run on (allowed: {})",
                format_cpu_list(&allowed)
            )));
        }
    }
    Ok(())
}

/// `cpus` in the kernel's list format, ranges collapsed ("0-3,6"); "none" when empty.
pub(crate) fn format_cpu_list(cpus: &[usize]) -> String {
    let mut sorted = cpus.to_vec();
    sorted.sort_unstable();
    sorted.dedup();
    let mut parts = Vec::new();
    let mut index = 0;
    while index < sorted.len() {
        let first = sorted[index];
        let mut last = first;
        while index + 1 < sorted.len() && sorted[index + 1] == last + 1 {
            index += 1;
            last = sorted[index];
        }
        parts.push(if first == last {
            first.to_string()
        } else {
            format!("{first}-{last}")
        });
        index += 1;
    }
    if parts.is_empty() {
        "none".into()
    } else {
        parts.join(",")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_lists_format_in_the_kernel_format() {
        assert_eq!(format_cpu_list(&[6, 0, 1, 2, 3, 3]), "0-3,6");
        assert_eq!(format_cpu_list(&[1, 3]), "1,3");
        assert_eq!(format_cpu_list(&[]), "none");
    }

    #[test]
    fn an_empty_list_is_refused() {
        assert!(matches!(
            validate_background_thread_cpus(&[]),
            Err(Error::InvalidArgument(m)) if m.contains("empty")
        ));
        assert!(matches!(
            pin_current_thread_to_cpus(&[]),
            Err(Error::InvalidArgument(_))
        ));
    }

    /// A pinned thread's `Cpus_allowed_list` (Linux `/proc`) is the set it was pinned to; a
    /// CPU the kernel cannot name is refused and leaves the thread as it was.
    #[cfg(target_os = "linux")]
    #[test]
    fn a_pinned_thread_runs_only_on_its_cpus() {
        std::thread::spawn(|| {
            let allowed = process_allowed_cpus();
            assert!(!allowed.is_empty());
            let own = || {
                let id = nix::unistd::gettid();
                let status = std::fs::read_to_string(format!("/proc/self/task/{id}/status"))
                    .unwrap_or_default();
                status
                    .lines()
                    .find_map(|line| line.strip_prefix("Cpus_allowed_list:"))
                    .map(|list| list.trim().to_owned())
            };
            let before = own();
            assert!(matches!(
                pin_current_thread_to_cpus(&[allowed[0], 4096]),
                Err(Error::InvalidArgument(m)) if m.contains("4096")
            ));
            assert_eq!(own(), before);
            assert!(pin_current_thread_to_cpus(&allowed[..1]).is_ok());
            assert_eq!(own(), Some(allowed[0].to_string()));
        })
        .join()
        .expect("pinning thread");
    }
}
