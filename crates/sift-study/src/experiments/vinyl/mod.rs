//! Experiment 6 (Vinyl: Shpilevoy, Osipov, Volkanov, "Deferred secondary index update with
//! LSM-trees", §5.1, Figure 7, Table 1): the deferred-update microbenchmark, scaled down. It
//! runs `sift bench vinyl` ([`crate::experiments::vinyl::bench::run_scheme`]) for `composite:deferred` and
//! `composite:sync-full` — one collection, four non-unique composite indexes, client threads
//! sending batches of replaces and deletes — and records statements per second per interval
//! (the paper's requests per second over time), their mean, median and maximum, and the
//! verdict on the paper's ~5× claim.
//!
//! The two schemes always run as `composite:*` (the paper's setup), whatever `--configs` says.

pub mod bench;
pub mod report;

use super::{new_result, note_failure, round, Context, ExperimentId};
use crate::results::{ExperimentResult, FigureInfo, Measurement, Verdict};
use bench::{run_scheme, VinylArgs, VinylInterval, VinylResult};
use sift_bench::index::BenchError;
use sift_index::Maintenance;
use std::collections::BTreeMap;
use std::sync::atomic::Ordering;

pub const PAPER: &str = "The Vinyl paper patched Tarantool's LSM engine so that replaces and \
deletes do not read the old tuple to delete its secondary-index entries (the deletion is \
deferred to compaction). Its microbenchmark: one space with an unsigned primary key and four \
non-unique secondary indexes, 4 clients sending batches of 1–500 statements (half replaces, \
half deletes, keys uniform in 1..1,000,000, ~50-byte tuples), 128 MB memory level, on a 4-core \
i7 with an Apple SSD. Table 1: deferred averaged 112,343 requests/s against 21,681 for the \
simple (sync-full) update (5.2×; median 114,772 vs 20,097, 5.7×). The gain comes from the \
hidden reads of old tuples that miss memory and go to disk: the result is disk-bound.";

/// The paper's claim checked here.
pub const CLAIM: &str =
    "Deferred maintenance gives about 5× more requests per second with four secondary indexes";
const SOURCE: &str = "Vinyl §5.1, Table 1, Fig. 7";
/// Table 1's averages.
const PAPER_DEFERRED_RATE: f64 = 112_343.0;
const PAPER_SYNC_FULL_RATE: f64 = 21_681.0;
/// Reproduced when deferred's mean rate is at least this multiple of sync-full's: half the
/// paper's 5.2× (a fixed rule, stated in the evidence).
pub const REPRODUCED_RATIO_MIN: f64 = 2.6;

const SCHEMES: [Maintenance; 2] = [Maintenance::Deferred, Maintenance::SyncFull];

fn configuration_name(maintenance: Maintenance) -> String {
    format!("composite:{}", maintenance.name())
}

fn setting_text(args: &VinylArgs) -> String {
    if args.disk_bound {
        "disk-bound: tables read with O_DIRECT through a 1 MiB block cache".to_owned()
    } else {
        "page-cache-bound: tables read through the OS page cache (no O_DIRECT), so a hidden \
         read that misses the memtable costs a memory copy, not a disk read"
            .to_owned()
    }
}

pub fn run(context: &Context<'_>) -> Result<ExperimentResult, BenchError> {
    let sizes = context.sizes;
    let cores = std::thread::available_parallelism().map_or(1, std::num::NonZero::get);
    let mut args = VinylArgs {
        keys: sizes.vinyl_keys.max(1),
        preload: None,
        threads: sizes.vinyl_threads.max(1),
        batch_max: sizes.vinyl_batch_max.max(1),
        seconds: sizes.vinyl_seconds,
        interval_seconds: sizes.vinyl_interval_seconds,
        maintenance: SCHEMES.iter().map(|m| m.name().to_owned()).collect(),
        disk_bound: sizes.vinyl_disk_bound,
        cache_bytes: None,
        memtable_bytes: Some(context.engine.memtable_bytes),
        db: None,
        seed: 7,
        json: false,
    };
    run_schemes(context, &mut args, cores, Vec::new())
}

/// Runs both schemes; a disk-bound run that fails (O_DIRECT is not available on every file
/// system, e.g. tmpfs) is repeated for both schemes through the page cache, and said so.
fn run_schemes(
    context: &Context<'_>,
    args: &mut VinylArgs,
    cores: usize,
    mut notes: Vec<String>,
) -> Result<ExperimentResult, BenchError> {
    let mut results = Vec::new();
    for maintenance in SCHEMES {
        let name = configuration_name(maintenance);
        match run_one(context, args, maintenance, &name) {
            Ok(result) => results.push(result),
            Err(error) if args.disk_bound && !context.interrupted.load(Ordering::SeqCst) => {
                notes.push(format!(
                    "{name}: the disk-bound run failed ({error}); both schemes ran through the \
                     page cache instead"
                ));
                args.disk_bound = false;
                return run_schemes(context, args, cores, notes);
            }
            Err(error) => {
                context.check_interrupt()?;
                note_failure(&mut notes, &name, &error);
            }
        }
    }
    Ok(finish(args, cores, &results, notes))
}

fn run_one(
    context: &Context<'_>,
    args: &VinylArgs,
    maintenance: Maintenance,
    name: &str,
) -> Result<VinylResult, BenchError> {
    let dir = context.fresh_dir(name)?;
    let intervals = (args.seconds / args.interval_seconds.max(0.1))
        .ceil()
        .max(1.0) as u64;
    context.progress.phase(
        &format!(
            "{name}: {} keys preloaded, then {} s of {} threads",
            args.keys, args.seconds, args.threads
        ),
        intervals,
        "intervals",
    );
    let mut on_interval = |_interval: VinylInterval| -> Result<bool, BenchError> {
        context.progress.advance(1);
        Ok(!context.interrupted.load(Ordering::SeqCst))
    };
    let result = run_scheme(
        args,
        &crate::experiments::vinyl::bench::Scheme::plain(maintenance),
        &dir.path().join("db"),
        &mut on_interval,
    );
    context.progress.phase_done();
    context.check_interrupt()?;
    result
}

fn finish(
    args: &VinylArgs,
    cores: usize,
    results: &[VinylResult],
    notes: Vec<String>,
) -> ExperimentResult {
    let mut result = new_result(
        ExperimentId::Vinyl,
        PAPER,
        &format!(
            "Sift ran `sift bench vinyl` scaled down, once per scheme on a fresh database: \
             composite:deferred and composite:sync-full, four non-unique composite indexes \
             (f2–f5), keys 1..{} all preloaded, then {} s of {} client threads (on {cores} \
             cores) sending batches of 1–{} statements (half replaces, half deletes), ~50-byte \
             documents, memtable {} KiB, {}. Statements per second are sampled every {} s.",
            args.keys,
            args.seconds,
            args.threads,
            args.batch_max,
            args.memtable_bytes.unwrap_or_default() >> 10,
            setting_text(args),
            args.interval_seconds
        ),
    );
    let threads = u32::try_from(args.threads).ok();
    for run in results {
        let configuration = format!("composite:{}", run.maintenance);
        let template = Measurement {
            threads,
            ..Measurement::new(&configuration, "", "", 0.0)
        };
        for (position, (rate, end)) in run
            .interval_rates
            .iter()
            .zip(&run.interval_end_s)
            .enumerate()
        {
            let slice = u32::try_from(position + 1).ok();
            result.measurements.push(Measurement {
                metric: "statements_per_second".to_owned(),
                unit: "statements/s".to_owned(),
                value: round(*rate, 1),
                slice,
                ..template.clone()
            });
            result.measurements.push(Measurement {
                metric: "interval_end".to_owned(),
                unit: "s".to_owned(),
                value: round(*end, 3),
                slice,
                ..template.clone()
            });
        }
        for (metric, value) in [
            ("statements_per_second_mean", run.average_rate),
            ("statements_per_second_median", run.median_rate),
            ("statements_per_second_max", run.max_rate),
        ] {
            result.measurements.push(Measurement {
                metric: metric.to_owned(),
                unit: "statements/s".to_owned(),
                value: round(value, 1),
                count: Some(run.interval_rates.len() as u64),
                ..template.clone()
            });
        }
        result.measurements.push(Measurement {
            metric: "statements".to_owned(),
            unit: "statements".to_owned(),
            value: run.statements as f64,
            ..template.clone()
        });
    }
    result.figures.push(FigureInfo {
        id: "vinyl-rate".to_owned(),
        title: format!(
            "Statements per second over time, four secondary indexes, {} threads ({})",
            args.threads,
            if args.disk_bound {
                "disk-bound"
            } else {
                "page cache"
            }
        ),
    });
    result.verdicts = vec![vinyl_verdict(&result.measurements, args, cores)];
    if results.len() < SCHEMES.len() || !notes.is_empty() {
        let status = if results.is_empty() {
            "not-measured"
        } else {
            "partial"
        };
        status.clone_into(&mut result.status);
        result.note = notes.join("; ");
    }
    result
}

fn summary(measurements: &[Measurement], configuration: &str, metric: &str) -> Option<f64> {
    measurements
        .iter()
        .find(|m| m.configuration == configuration && m.metric == metric && m.slice.is_none())
        .map(|m| m.value)
}

/// The verdict on [`CLAIM`] from the measurements: deferred's mean statements per second over
/// sync-full's, against [`REPRODUCED_RATIO_MIN`].
pub fn vinyl_verdict(measurements: &[Measurement], args: &VinylArgs, cores: usize) -> Verdict {
    let deferred = configuration_name(Maintenance::Deferred);
    let sync_full = configuration_name(Maintenance::SyncFull);
    let mean = |name: &str| summary(measurements, name, "statements_per_second_mean");
    let median = |name: &str| summary(measurements, name, "statements_per_second_median");
    let paper_ratio = PAPER_DEFERRED_RATE / PAPER_SYNC_FULL_RATE;
    let (Some(deferred_mean), Some(sync_mean)) = (mean(&deferred), mean(&sync_full)) else {
        return Verdict {
            claim: CLAIM.to_owned(),
            source: SOURCE.to_owned(),
            outcome: "not-measured".to_owned(),
            evidence: "deferred and sync-full were not both measured in this run".to_owned(),
            numbers: BTreeMap::new(),
            across_sizes: None,
        };
    };
    let ratio = deferred_mean / sync_mean.max(1e-9);
    let median_ratio = match (median(&deferred), median(&sync_full)) {
        (Some(a), Some(b)) => a / b.max(1e-9),
        _ => f64::NAN,
    };
    let reproduced = ratio >= REPRODUCED_RATIO_MIN;
    let mut numbers = BTreeMap::new();
    for (name, value) in [
        (format!("{deferred} mean statements/s"), deferred_mean),
        (format!("{sync_full} mean statements/s"), sync_mean),
        ("ratio of means".to_owned(), ratio),
        ("ratio of medians".to_owned(), median_ratio),
        ("paper ratio of means".to_owned(), paper_ratio),
        ("keys".to_owned(), args.keys as f64),
        ("threads".to_owned(), args.threads as f64),
        ("cores".to_owned(), cores as f64),
    ] {
        if value.is_finite() {
            numbers.insert(name, round(value, 3));
        }
    }
    Verdict {
        claim: CLAIM.to_owned(),
        source: SOURCE.to_owned(),
        outcome: if reproduced { "reproduced" } else { "differs" }.to_owned(),
        evidence: format!(
            "mean statements/s: {deferred} {deferred_mean:.0} vs {sync_full} {sync_mean:.0} = \
             {ratio:.2}× (medians: {median_ratio:.2}×); the paper measured {PAPER_DEFERRED_RATE:.0} \
             vs {PAPER_SYNC_FULL_RATE:.0} = {paper_ratio:.1}× with 1,000,000 keys, disk-bound on \
             an SSD. This run: {} keys, {} threads on {cores} cores, {}. Rule: reproduced when \
             the ratio is at least {REPRODUCED_RATIO_MIN}× (half the paper's).",
            args.keys,
            args.threads,
            setting_text(args)
        ),
        numbers,
        across_sizes: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(disk_bound: bool) -> VinylArgs {
        VinylArgs {
            keys: 1000,
            preload: None,
            threads: 4,
            batch_max: 100,
            seconds: 1.0,
            interval_seconds: 0.1,
            maintenance: Vec::new(),
            disk_bound,
            cache_bytes: None,
            memtable_bytes: Some(1 << 20),
            db: None,
            seed: 7,
            json: false,
        }
    }

    fn rate(configuration: &str, mean: f64, median: f64) -> Vec<Measurement> {
        vec![
            Measurement::new(
                configuration,
                "statements_per_second_mean",
                "statements/s",
                mean,
            ),
            Measurement::new(
                configuration,
                "statements_per_second_median",
                "statements/s",
                median,
            ),
            // An interval value must not be taken for the summary.
            Measurement {
                slice: Some(1),
                ..Measurement::new(configuration, "statements_per_second_mean", "x", 1.0)
            },
        ]
    }

    #[test]
    fn verdict_follows_the_ratio_and_states_the_setting() {
        let mut five = rate("composite:deferred", 50_000.0, 52_000.0);
        five.extend(rate("composite:sync-full", 10_000.0, 9_000.0));
        let verdict = vinyl_verdict(&five, &args(false), 2);
        assert_eq!(verdict.outcome, "reproduced", "{}", verdict.evidence);
        assert!((verdict.numbers["ratio of means"] - 5.0).abs() < 1e-9);
        assert!(verdict.evidence.contains("page-cache-bound"));
        assert!(verdict.evidence.contains("disk-bound on an SSD"));
        let mut small = rate("composite:deferred", 12_000.0, 12_000.0);
        small.extend(rate("composite:sync-full", 10_000.0, 10_000.0));
        let verdict = vinyl_verdict(&small, &args(true), 2);
        assert_eq!(verdict.outcome, "differs");
        assert!(verdict.evidence.contains("1.20×"), "{}", verdict.evidence);
        assert!(verdict.evidence.contains("O_DIRECT"));
        let alone = rate("composite:deferred", 1.0, 1.0);
        assert_eq!(
            vinyl_verdict(&alone, &args(false), 2).outcome,
            "not-measured"
        );
    }
}
