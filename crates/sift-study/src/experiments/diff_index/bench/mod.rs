//! The Diff-Index experiments (Tan et al., EDBT'14 §8), run by `sift bench diff-index` and by
//! experiment 7 of the study: one collection of ~`document_bytes` documents with one secondary
//! index on an integer attribute (`price`, uniform in `0..VALUE_DOMAIN`), measured under each
//! maintenance scheme (`none`, `sync-full`, `sync-insert`, `async-simple`, `async-session`):
//!
//! - **saturation**: closed-loop updates (a replace of an existing document with a new indexed
//!   value) as fast as the clients can issue them; for asynchronous schemes the rate counts the
//!   time to drain the update queue afterwards, so it is the rate the index can sustain;
//! - **update latency against offered load**: open loop at fixed rates (percentages of the
//!   no-index saturation, or of each scheme's own): every update has a scheduled time and its
//!   latency runs from that time, so a stalled update also delays (and is charged to) the ones
//!   scheduled behind it — no coordinated omission;
//! - **index lag** of the asynchronous schemes per load step (base commit → index update
//!   committed, from the engine's histogram, `Database::async_index_stats`);
//! - **reads**, closed loop on the settled database: exact-match LOOKUPs of a live value and
//!   RANGELOOKUPs whose width selects 0.0001 % … 0.1 % of the documents.
//!
//! Writes of `async-session` go through one session per client, and its reads through a
//! session, so the overlay's cost is measured.

mod args;
mod load;
mod results;
mod table;
mod targets;

use args::machine_noise;
pub use args::{DiffIndexArgs, RateBasis, Scheme, Settings};
use load::measure;
use load::Bench;
use load::Progress;
use load::OTHER_PROCESSES_LISTED;
pub use results::{
    HalfLoad, Lag, Latency, LoadStep, RangeReads, Reads, Report, Saturation, SchemeResult,
    TargetCheck,
};
use sift_bench::kv::BenchError;
use sift_bench::noise::other_cpu::ThreadTimes;
use std::io::Write;
use std::path::Path;
pub use table::format_report;
pub use targets::{check_targets, HALF_LOAD_RULE, TARGETS};

pub const COLLECTION: &str = "items";

/// The indexed attribute (and the index's name).
pub const INDEXED_PATH: &str = "price";

/// Indexed values are uniform in `0..VALUE_DOMAIN`, so a range `VALUE_DOMAIN / 10^6` values
/// wide selects one document in a million: a RANGELOOKUP's width in values is its selectivity
/// in parts per million.
pub const VALUE_DOMAIN: u32 = 1_000_000;

const PRELOAD_BATCH_DOCUMENTS: u64 = 1000;

fn index_error(what: &str) -> impl Fn(sift_index::IndexError) -> BenchError + '_ {
    move |e| BenchError::new(format!("{what}: {e}"))
}

/// Runs every scheme of `settings` in subdirectories of `parent` (which must not hold them).
pub fn run_all(
    settings: &Settings,
    parent: &Path,
    progress: Progress<'_>,
) -> Result<Report, BenchError> {
    let mut order: Vec<Scheme> = Vec::new();
    for scheme in &settings.schemes {
        if !order.contains(scheme) {
            order.push(*scheme);
        }
    }
    // The no-index database first: with the baseline basis its saturation sets every rate;
    // it is measured (saturation only) even when `none` is not asked for.
    // It is also the other side of every target comparison.
    order.sort_by_key(|s| *s != Scheme::NoIndex);
    let needs_baseline = settings.rate_basis == RateBasis::Baseline
        || (settings.target_repeats > 0
            && TARGETS.iter().any(|(scheme, _)| order.contains(scheme)));
    let baseline_only = needs_baseline && order.first() != Some(&Scheme::NoIndex);
    if baseline_only {
        order.insert(0, Scheme::NoIndex);
    }
    let mut benches = Vec::new();
    let mut skipped = Vec::new();
    for (position, scheme) in order.into_iter().enumerate() {
        let dir = parent.join(scheme.name());
        if dir.exists() {
            return Err(BenchError::new(format!(
                "{} exists: give an empty --db",
                dir.display()
            )));
        }
        match Bench::open(settings, scheme, &dir, progress) {
            Ok(mut bench) => {
                bench.measured = !(baseline_only && position == 0);
                benches.push(bench);
            }
            Err(error) if error.message().starts_with("create index") => {
                skipped.push((scheme.name().to_owned(), error.message().to_owned()));
                let _ = std::fs::remove_dir_all(&dir);
            }
            Err(error) => return Err(error),
        }
    }
    let client_cpus = settings.client_cpus.as_deref();
    let mut platform_hiccups = vec![machine_noise(client_cpus)?];
    let others_before = ThreadTimes::sample();
    let measured = measure(settings, &benches, progress);
    let others = others_before
        .zip(ThreadTimes::sample())
        .map(|(before, after)| after.busiest_since(&before, OTHER_PROCESSES_LISTED));
    platform_hiccups.push(machine_noise(client_cpus)?);
    let mut closed = Ok(());
    for bench in benches {
        let dir = bench.database.engine().path().to_path_buf();
        if let Err(error) = bench.database.close() {
            closed = Err(BenchError::new(format!("close: {error}")));
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
    let (results, baseline_saturation_rate) = measured?;
    closed?;
    let targets = check_targets(&results);
    Ok(Report {
        documents: settings.documents,
        document_bytes: settings.document_bytes,
        kind: settings.kind.name().to_owned(),
        clients: settings.clients,
        rate_basis: settings.rate_basis,
        step_seconds: settings.step_seconds,
        background_cpus: settings.options.engine.background_thread_cpus.clone(),
        client_cpus: settings.client_cpus.clone(),
        baseline_saturation_rate,
        results,
        skipped,
        targets,
        platform_hiccups,
        other_processes_seconds: others.as_ref().map(|(_, total)| *total),
        other_processes: others.map(|(busiest, _)| busiest).unwrap_or_default(),
    })
}

/// `sift bench diff-index`.
pub fn run(args: &DiffIndexArgs, out: &mut dyn Write) -> Result<Report, BenchError> {
    let settings = Settings::from_args(args)?;
    let (parent, _temporary) = if let Some(path) = &args.db {
        (path.clone(), None)
    } else {
        let current = std::env::current_dir()
            .map_err(|e| BenchError::new(format!("cannot read the current directory: {e}")))?;
        let temporary = tempfile::Builder::new()
            .prefix("sift-bench-diff-index-")
            .tempdir_in(current)
            .map_err(|e| BenchError::new(format!("cannot create a temporary directory: {e}")))?;
        (temporary.path().to_path_buf(), Some(temporary))
    };
    let quiet = args.json;
    let mut progress = |message: &str| -> Result<(), BenchError> {
        if !quiet {
            eprintln!("# {message}");
        }
        Ok(())
    };
    let report = run_all(&settings, &parent, &mut progress)?;
    let text = if args.json {
        serde_json::to_string(&report).map_err(|e| BenchError::new(e.to_string()))? + "\n"
    } else {
        format_report(&report, args.detail)
    };
    out.write_all(text.as_bytes())
        .map_err(|e| BenchError::new(e.to_string()))?;
    Ok(report)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::load::HICCUP_METER_DURATION;
    use super::*;

    #[test]
    fn lag_between_snapshots_subtracts_buckets() {
        let before = vec![(8, 2), (16, 1)];
        let after = vec![(8, 5), (16, 1), (1024, 1)];
        let lag = Lag::between(&before, &after);
        assert_eq!(lag.histogram, vec![(8, 3), (1024, 1)]);
        assert_eq!(lag.updates, 4);
        assert_eq!((lag.p50_us, lag.p99_us, lag.max_bucket_us), (8, 1024, 1024));
    }

    #[test]
    fn latency_percentiles_are_exact() {
        let mut values: Vec<f64> = (1..=100).map(f64::from).collect();
        let latency = Latency::of(&mut values);
        assert_eq!(
            (latency.p50_us, latency.p90_us, latency.p99_us),
            (50.0, 90.0, 99.0)
        );
        assert!((latency.mean_us - 50.5).abs() < 1e-9);
    }

    /// A run of a few tenths of a second over 300 documents, every scheme.
    fn tiny_args(dir: &Path) -> DiffIndexArgs {
        DiffIndexArgs {
            documents: 300,
            document_bytes: 120,
            kind: "composite".into(),
            schemes: Scheme::ALL.iter().map(|s| s.name().to_owned()).collect(),
            saturation_seconds: 0.1,
            loads: vec![25.0, 50.0],
            rate_basis: RateBasis::Baseline,
            step_seconds: 0.1,
            target_repeats: 1,
            clients: 1,
            exact_reads: 20,
            range_reads: 5,
            selectivities: vec![0.1, 10.0],
            memtable_bytes: 32 << 10,
            cache_bytes: None,
            async_workers: None,
            async_worker_nice: None,
            background_nice: None,
            background_yield: false,
            background_cpus: None,
            client_cpus: None,
            sync: false,
            db: Some(dir.to_path_buf()),
            seed: 3,
            json: false,
            detail: false,
        }
    }

    /// The pinning asked for is applied (a CPU the process may not use is refused up front),
    /// printed in the header line and stored in the JSON report.
    #[test]
    fn pinning_is_validated_printed_and_reported() {
        let dir = tempfile::tempdir().unwrap();
        let mut args = tiny_args(dir.path());
        args.client_cpus = Some(vec![4096]);
        let refused = Settings::from_args(&args).map(|_| ()).unwrap_err();
        if cfg!(target_os = "linux") {
            assert!(refused.message().contains("CPU 4096"), "{refused:?}");
        }
        let first_allowed = sift_lsm::process_allowed_cpus()
            .first()
            .copied()
            .unwrap_or(0);
        args.schemes = vec!["none".into(), "sync-insert".into()];
        args.background_cpus = Some(vec![first_allowed]);
        args.client_cpus = Some(vec![first_allowed]);
        args.json = true;
        let mut out = Vec::new();
        let report = run(&args, &mut out).unwrap();
        assert_eq!(report.background_cpus, Some(vec![first_allowed]));
        assert_eq!(report.client_cpus, Some(vec![first_allowed]));
        let json: serde_json::Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(json["background_cpus"], serde_json::json!([first_allowed]));
        assert_eq!(json["client_cpus"], serde_json::json!([first_allowed]));
        let header = format_report(&report, false);
        let header = header.lines().next().unwrap();
        assert!(
            header.ends_with(&format!(
                "background threads on CPUs {first_allowed}, clients on CPUs {first_allowed}"
            )),
            "{header}"
        );
    }

    /// The CPU-list flags as a user types them (clap checks the parsed type only at parse
    /// time: a mismatch panics there, not at compile time).
    #[test]
    fn cpu_list_flags_parse_from_the_command_line() {
        #[derive(clap::Parser)]
        struct Command {
            #[command(flatten)]
            args: DiffIndexArgs,
        }
        let parsed = <Command as clap::Parser>::try_parse_from([
            "diff-index",
            "--background-cpus",
            "1-2,4",
            "--client-cpus",
            "0",
        ])
        .unwrap();
        assert_eq!(parsed.args.background_cpus, Some(vec![1, 2, 4]));
        assert_eq!(parsed.args.client_cpus, Some(vec![0]));
        let unset = <Command as clap::Parser>::try_parse_from(["diff-index"]).unwrap();
        assert_eq!(unset.args.background_cpus, None);
        assert!(
            <Command as clap::Parser>::try_parse_from(["diff-index", "--client-cpus", "x"])
                .is_err()
        );
    }

    /// Time taken from a client while it spins for the next update's time is noted as a
    /// machine pause; the sleep while far from that time is not.
    #[test]
    fn a_tiny_run_measures_every_scheme() {
        let dir = tempfile::tempdir().unwrap();
        let args = tiny_args(dir.path());
        let mut out = Vec::new();
        let report = run(&args, &mut out).unwrap();
        assert_eq!(report.results.len(), 5, "{report:?}");
        let baseline = report.baseline_saturation_rate.unwrap();
        for result in &report.results {
            assert!(result.saturation.updates > 0, "{result:?}");
            assert_eq!(result.steps.len(), 2);
            // Every scheme is offered the same rates (percentages of the no-index saturation).
            assert!((result.steps[1].offered_rate - baseline * 0.5).abs() < 1e-6);
            assert!(result.steps.iter().all(|s| s.latency.count == s.scheduled));
            assert_eq!(
                result.steps[0].lag.is_some(),
                result.scheme.starts_with("async")
            );
            if result.scheme == "none" {
                assert!(result.exact.is_none());
            } else {
                // Every lookup asks for a live value: at least the document itself matches.
                let exact = result.exact.as_ref().unwrap();
                assert!(exact.hits_per_query >= 1.0, "{result:?}");
                // A 10% range over 300 documents finds about 30.
                let wide = &result.ranges[1];
                assert!(wide.reads.hits_per_query > 5.0, "{result:?}");
            }
        }
        for result in report
            .results
            .iter()
            .filter(|r| r.scheme.starts_with("async"))
        {
            let lag: u64 = result
                .steps
                .iter()
                .map(|s| s.lag.as_ref().unwrap().updates)
                .sum();
            let scheduled: u64 = result.steps.iter().map(|s| s.scheduled).sum();
            assert_eq!(
                lag, scheduled,
                "every update of a step is lagged once: {result:?}"
            );
        }
        assert_eq!(report.targets.len(), 2);
        for target in &report.targets {
            // Half of the scheme's own saturation, offered to both sides.
            let result = report
                .results
                .iter()
                .find(|r| r.scheme == target.scheme)
                .unwrap();
            let half = result.half_load.as_ref().unwrap();
            assert!((half.offered_rate - result.saturation.sustained_rate / 2.0).abs() < 1e-6);
            assert_eq!(half.latency.count, half.baseline_latency.count, "{half:?}");
            assert!(half.latency.count > 0);
            assert_eq!(half.repeat_means_us.len(), 1);
            assert_eq!(half.repeat_client_gaps_ms.len(), 1);
            assert_eq!(half.repeat_unswitched_calls.len(), 1);
            // Both sides of a repeat are kept or dropped together.
            assert!(half.unpaused_repeats <= half.repeats);
            if half.unpaused_repeats == half.repeats {
                assert_eq!(half.unpaused_latency, half.latency);
                assert_eq!(half.unpaused_baseline_latency, half.baseline_latency);
            } else {
                assert!(half.unpaused_latency.count < half.latency.count, "{half:?}");
            }
            let above = half.latency.mean_us - half.baseline_latency.mean_us;
            assert!((target.mean_above_baseline_us - above).abs() < 1e-9);
        }
        // The machine's noise, before and after the steps, each run for its full second.
        assert_eq!(report.platform_hiccups.len(), 2);
        assert!(report
            .platform_hiccups
            .iter()
            .all(|h| h.seconds >= HICCUP_METER_DURATION.as_secs_f64()));
        // Other processes' CPU time is read on Linux, and then reported.
        if cfg!(target_os = "linux") {
            let total = report.other_processes_seconds.expect("read from /proc");
            let listed: f64 = report.other_processes.iter().map(|o| o.seconds).sum();
            assert!(listed <= total + 1e-9, "{:?}", report.other_processes);
            assert!(report.other_processes.len() <= OTHER_PROCESSES_LISTED);
        }
        assert!(report
            .results
            .iter()
            .filter(|r| r.half_load.is_some())
            .all(|r| r.scheme == "sync-insert" || r.scheme == "async-simple"));
        let text = String::from_utf8(out).unwrap();
        // The default output is the short table: no forensic lines.
        assert!(
            text.contains("async-session")
                && text.contains("targets")
                && text.contains("OWN sustained")
                && !text.contains("machine noise before the steps")
                && !text.contains("longest client gap while only waiting")
                && !text.contains("svc mean"),
            "{text}"
        );
        let detailed = format_report(&report, true);
        assert!(
            detailed.contains("machine noise before the steps")
                && detailed.contains("mean above no index")
                && detailed.contains("longest client gap while only waiting")
                && detailed.contains("svc mean")
                && (report.other_processes_seconds.is_none()
                    || detailed.contains("other processes' CPU time during the steps")),
            "{detailed}"
        );
        assert!(detailed.len() > text.len());
    }
}
