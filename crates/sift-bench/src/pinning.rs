//! Pinning a benchmark's threads to CPUs: the `--background-cpus` and `--client-cpus` options
//! of `sift bench kv`, `index` and `diff-index` (CPU lists as `taskset -c` takes them), their
//! checks, the pinning of a client thread, and how a report describes it.
//!
//! The engine's background threads are pinned by the engine itself (`background_thread_cpus`
//! of `sift_lsm::Options`); a benchmark pins every thread it starts to issue operations. The
//! affinity calls are Sift's (`sift_lsm::cpu_affinity`): a build without the Sift engine (the
//! peer engines' binary) refuses both options.

use crate::kv::BenchError;

/// Why a build without the Sift engine cannot pin.
#[cfg(not(feature = "sift"))]
const WITHOUT_SIFT: &str =
    "this build has no Sift engine, whose affinity calls the benchmarks use (use `sift bench`)";

/// A CPU list in the kernel's format (`0-1,3`), for `--background-cpus` and `--client-cpus`.
pub fn parse_cpus(text: &str) -> Result<Vec<usize>, String> {
    #[cfg(feature = "sift")]
    {
        sift_lsm::cpu_affinity::parse_cpu_list(text).map_err(|e| e.to_string())
    }
    #[cfg(not(feature = "sift"))]
    {
        Err(format!(
            "cannot pin threads to CPUs {text:?}: {WITHOUT_SIFT}"
        ))
    }
}

/// `cpus` in the kernel's list format, ranges collapsed ("0-3,6").
pub fn format_cpus(cpus: &[usize]) -> String {
    #[cfg(feature = "sift")]
    {
        sift_lsm::cpu_affinity::format_cpu_list(cpus)
    }
    #[cfg(not(feature = "sift"))]
    {
        // Never reached with a list: `parse_cpus` refuses every one in this build.
        cpus.iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join(",")
    }
}

/// Checks, before anything runs, that every CPU of both lists is one this process may run
/// on (Linux; elsewhere pinning does nothing). The error names the option and the CPU.
pub fn check_allowed(
    background_cpus: Option<&[usize]>,
    client_cpus: Option<&[usize]>,
) -> Result<(), BenchError> {
    #[cfg(feature = "sift")]
    if cfg!(target_os = "linux") {
        let allowed = sift_lsm::cpu_affinity::process_allowed_cpus();
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
    #[cfg(not(feature = "sift"))]
    let _ = (background_cpus, client_cpus);
    Ok(())
}

/// Pins the calling client thread to `cpus` (if any).
pub fn pin_client(cpus: Option<&[usize]>) -> Result<(), BenchError> {
    match cpus {
        #[cfg(feature = "sift")]
        Some(cpus) => sift_lsm::pin_current_thread_to_cpus(cpus)
            .map_err(|e| BenchError::new(format!("--client-cpus: {e}"))),
        #[cfg(not(feature = "sift"))]
        Some(_) => Err(BenchError::new(format!("--client-cpus: {WITHOUT_SIFT}"))),
        None => Ok(()),
    }
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

/// The calling thread's CPUs as the kernel lists them (`Cpus_allowed_list` of Linux `/proc`),
/// for tests that check where a thread ran.
#[cfg(test)]
pub(crate) fn current_thread_cpu_list() -> Option<String> {
    std::fs::read_to_string("/proc/thread-self/status")
        .ok()?
        .lines()
        .find_map(|line| line.strip_prefix("Cpus_allowed_list:"))
        .map(|list| list.trim().to_owned())
}

#[cfg(all(test, feature = "sift"))]
mod tests {
    use super::*;

    #[test]
    fn cpus_outside_the_allowed_set_are_refused_naming_the_option_and_the_cpu() {
        let allowed = sift_lsm::cpu_affinity::process_allowed_cpus();
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
