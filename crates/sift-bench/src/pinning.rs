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
        sift_lsm::parse_cpu_list(text).map_err(|e| e.to_string())
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
        sift_lsm::format_cpu_list(cpus)
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
        let allowed = sift_lsm::process_allowed_cpus();
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

/// What tests of the benchmarks' pinning share.
#[cfg(test)]
pub(crate) mod test_support {
    /// The calling thread's CPUs as the kernel lists them (`Cpus_allowed_list` of Linux
    /// `/proc`), for tests that check where a thread ran.
    pub(crate) fn current_thread_cpu_list() -> Option<String> {
        cpu_list_in("/proc/thread-self/status")
    }

    /// The CPUs of this process's thread `thread_id` (Linux), as `current_thread_cpu_list`.
    #[cfg(feature = "sift")]
    pub(crate) fn thread_cpu_list(thread_id: i64) -> Option<String> {
        cpu_list_in(&format!("/proc/self/task/{thread_id}/status"))
    }

    fn cpu_list_in(status_path: &str) -> Option<String> {
        std::fs::read_to_string(status_path)
            .ok()?
            .lines()
            .find_map(|line| line.strip_prefix("Cpus_allowed_list:"))
            .map(|list| list.trim().to_owned())
    }

    /// The (background, client) CPU lists of parsed arguments or of a configuration.
    #[cfg(feature = "sift")]
    pub(crate) type CpuLists = (Option<Vec<usize>>, Option<Vec<usize>>);

    /// Parses arguments (an error: refused by the parser) into the lists they carry and
    /// those of the checked configuration (or its error).
    #[cfg(feature = "sift")]
    pub(crate) type ParseAndConfigure<'a> =
        dyn Fn(&[&str]) -> Result<(CpuLists, Result<CpuLists, String>), String> + 'a;

    /// Checks a benchmark's `--background-cpus` and `--client-cpus`: the lists parse as
    /// `taskset -c` takes them and reach the configuration; a CPU this process may not use
    /// is refused, naming the option and the CPU.
    #[cfg(feature = "sift")]
    pub(crate) fn check_cpu_options(parse_and_configure: &ParseAndConfigure<'_>) {
        let (parsed, _) =
            parse_and_configure(&["--background-cpus", "4,1-2", "--client-cpus", "0"]).unwrap();
        assert_eq!(parsed, (Some(vec![1, 2, 4]), Some(vec![0])));
        let (unset, configured) = parse_and_configure(&[]).unwrap();
        assert_eq!(unset, (None, None));
        assert_eq!(configured, Ok((None, None)));
        for bad in [["--client-cpus", "x"], ["--background-cpus", "3-1"]] {
            assert!(parse_and_configure(&bad).is_err(), "{bad:?}");
        }
        let allowed = sift_lsm::process_allowed_cpus();
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
    #[cfg(feature = "sift")]
    pub(crate) fn assert_rows_report_pinning<Row: serde::Serialize>(rows: &[Row], cpu: usize) {
        assert!(!rows.is_empty());
        for row in rows {
            let json = serde_json::to_value(row).unwrap();
            assert_eq!(json["background_cpus"], serde_json::json!([cpu]), "{json}");
            assert_eq!(json["client_cpus"], serde_json::json!([cpu]), "{json}");
        }
    }
}

#[cfg(all(test, feature = "sift"))]
mod tests {
    use super::*;

    #[test]
    fn cpus_outside_the_allowed_set_are_refused_naming_the_option_and_the_cpu() {
        let allowed = sift_lsm::process_allowed_cpus();
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
