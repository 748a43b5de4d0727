//! Pinning threads to CPUs (Linux `sched_setaffinity`; a no-op elsewhere). The engine's
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
        // SAFETY: getpid takes no arguments and touches no memory of ours.
        let main_thread = unsafe { libc::getpid() };
        let mut allowed = std::collections::BTreeSet::new();
        for thread in [0, main_thread] {
            if let Some(cpus) = thread_allowed_cpus(thread) {
                allowed.extend(cpus);
            }
        }
        allowed.into_iter().collect()
    }
    #[cfg(not(target_os = "linux"))]
    {
        Vec::new()
    }
}

/// The CPUs in thread `thread`'s affinity mask (0: the calling thread), or `None` if the
/// kernel refuses to tell.
#[cfg(target_os = "linux")]
fn thread_allowed_cpus(thread: libc::pid_t) -> Option<Vec<usize>> {
    // SAFETY: an all-zero `cpu_set_t` is a valid empty set; the kernel writes at most
    // `size_of::<cpu_set_t>()` bytes into it, and `CPU_ISSET` reads within it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(thread, std::mem::size_of::<libc::cpu_set_t>(), &raw mut set)
            != 0
        {
            return None;
        }
        Some(
            (0..cpu_set_capacity())
                .filter(|&cpu| libc::CPU_ISSET(cpu, &set))
                .collect(),
        )
    }
}

/// CPUs a `cpu_set_t` can name (1024 with glibc).
#[cfg(target_os = "linux")]
fn cpu_set_capacity() -> usize {
    8 * std::mem::size_of::<libc::cpu_set_t>()
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
        if let Some(&cpu) = cpus.iter().find(|&&cpu| cpu >= cpu_set_capacity()) {
            return Err(Error::InvalidArgument(format!(
                "cannot pin a thread to CPU {cpu}: CPU numbers stop at {}",
                cpu_set_capacity() - 1
            )));
        }
        // SAFETY: an all-zero `cpu_set_t` is a valid empty set; `CPU_SET` writes within it
        // (every CPU is below its capacity, checked above), and the kernel only reads it.
        let refused = unsafe {
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            for &cpu in cpus {
                libc::CPU_SET(cpu, &mut set);
            }
            libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &raw const set) != 0
        };
        if refused {
            return Err(Error::InvalidArgument(format!(
                "the kernel refused to pin a thread to CPUs {}: {}",
                format_cpu_list(cpus),
                std::io::Error::last_os_error()
            )));
        }
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
pub fn format_cpu_list(cpus: &[usize]) -> String {
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

/// Parses a CPU list in the kernel's format ("0-3,6", as `taskset -c` takes): the CPUs in
/// ascending order, each once.
pub fn parse_cpu_list(text: &str) -> Result<Vec<usize>> {
    let bad = |part: &str| {
        Error::InvalidArgument(format!(
            "CPU list {text:?}: {part:?} is not a CPU number or a range like 0-3"
        ))
    };
    let mut cpus = std::collections::BTreeSet::new();
    for part in text.split(',').map(str::trim) {
        let (first, last) = match part.split_once('-') {
            Some((first, last)) => (first.trim(), last.trim()),
            None => (part, part),
        };
        let first: usize = first.parse().map_err(|_| bad(part))?;
        let last: usize = last.parse().map_err(|_| bad(part))?;
        if first > last {
            return Err(bad(part));
        }
        cpus.extend(first..=last);
    }
    Ok(cpus.into_iter().collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_lists_parse_and_format_in_the_kernel_format() {
        assert_eq!(parse_cpu_list("0").ok(), Some(vec![0]));
        assert_eq!(parse_cpu_list("3,0-1, 5-6").ok(), Some(vec![0, 1, 3, 5, 6]));
        assert_eq!(parse_cpu_list("1,1,0-1").ok(), Some(vec![0, 1]));
        for bad in ["", "a", "3-1", "1-", "-1", "0,,1"] {
            assert!(
                matches!(parse_cpu_list(bad), Err(Error::InvalidArgument(m)) if m.contains(bad)),
                "{bad:?} accepted"
            );
        }
        assert_eq!(format_cpu_list(&[6, 0, 1, 2, 3, 3]), "0-3,6");
        assert_eq!(format_cpu_list(&[1, 3]), "1,3");
        assert_eq!(format_cpu_list(&[]), "none");
        // Formatting then parsing gives the set back.
        for cpus in [vec![0], vec![0, 2, 3, 4, 9], vec![1, 2, 7, 8]] {
            assert_eq!(parse_cpu_list(&format_cpu_list(&cpus)).ok(), Some(cpus));
        }
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
                // SAFETY: gettid takes no arguments and touches no memory of ours.
                let id = unsafe { libc::syscall(libc::SYS_gettid) };
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
