//! Experiment 4's thread sweep (LevelDB++ App. C.3, Figure 20): for each configuration and
//! each client-thread count (1–4), that many threads run the same top-10 LOOKUPs and top-10
//! RANGELOOKUPs on the configuration's UserID database (queries per second), and load a
//! twentieth of its documents into a fresh database (PUT throughput over the wall-clock time of the
//! load; the paper swept only queries), with verdicts on the paper's multi-threading findings.
//!
//! The numbers depend on the machine's cores (recorded with each verdict): with 2 cores, more
//! than 2× from threads is not possible whatever the engine does.

use crate::data::StudyAttribute;
use crate::engines::index::SiftIndexEngine;
use crate::experiments::{loaded_database, note_failure, round, Context};
use crate::results::{FigureInfo, Measurement, Verdict};
use crate::verdict::kind_of;
use sift_bench::index::runner::execute;
use sift_bench::index::{BenchError, IndexEngine};
use sift_workload::Operation;
use std::collections::BTreeMap;
use std::time::Instant;

const SOURCE: &str = "LevelDB++ App. C.3, Fig. 20";
/// Spearman's rank correlation at least this: the ranking is kept.
pub const RANKING_RHO_MIN: f64 = 0.8;
/// Median gain from 1 to the most threads below this: threads do not help much.
pub const GAIN_MAX: f64 = 1.5;

/// The queries each client thread runs.
pub struct SweepQueries<'a> {
    pub attribute: &'a StudyAttribute,
    pub lookups: &'a [Operation],
    pub ranges: &'a [Operation],
    pub range_selectivity: u64,
}

fn cores() -> usize {
    std::thread::available_parallelism().map_or(1, std::num::NonZero::get)
}

/// Runs `work(thread)` on `threads` scoped threads; returns the wall-clock seconds, or the
/// first error (`role` names the threads in the error of one that panicked).
fn on_threads(
    threads: usize,
    role: &str,
    work: impl Fn(usize) -> Result<(), BenchError> + Sync,
) -> Result<f64, BenchError> {
    let started = Instant::now();
    let outcomes = crate::experiments::on_threads(threads, role, work);
    let seconds = started.elapsed().as_secs_f64();
    outcomes.into_iter().collect::<Result<Vec<()>, _>>()?;
    Ok(seconds)
}

/// PUTs `documents` from `threads` threads (thread i takes documents i, i + threads, …, so
/// the load stays in arrival order); returns the wall-clock seconds.
fn threaded_load(
    engine: &SiftIndexEngine,
    documents: &[(u64, String)],
    threads: usize,
) -> Result<f64, BenchError> {
    on_threads(threads, "load", |thread| {
        for (id, json) in documents.iter().skip(thread).step_by(threads) {
            engine.put(*id, json)?;
        }
        Ok(())
    })
}

/// Every thread runs all `operations`, starting at a different offset; returns the
/// wall-clock seconds.
fn threaded_queries(
    engine: &SiftIndexEngine,
    operations: &[Operation],
    threads: usize,
) -> Result<f64, BenchError> {
    on_threads(threads, "query", |thread| {
        let offset = operations.len() * thread / threads;
        for operation in operations[offset..].iter().chain(&operations[..offset]) {
            execute(engine, operation)?;
        }
        Ok(())
    })
}

/// Runs the sweep for every known configuration; failures become notes. The queries run on
/// the configuration's database of `documents` (experiment 1's when it ran, loaded and kept
/// here otherwise); each load throughput point loads `load_documents` into a fresh database.
pub fn run(
    context: &Context<'_>,
    documents: &[(u64, String)],
    load_documents: &[(u64, String)],
    queries: &SweepQueries<'_>,
    notes: &mut Vec<String>,
) -> Result<Vec<Measurement>, BenchError> {
    let configurations = context.known_configurations();
    let counts = &context.sizes.thread_counts;
    let mut out = Vec::new();
    context.progress.phase(
        "thread sweep (load and queries)",
        (configurations.len() * counts.len() * 2) as u64,
        "runs",
    );
    for configuration in &configurations {
        let name = configuration.name();
        let slot = queries
            .attribute
            .slot(&configuration.kind, configuration.maintenance.as_deref());
        let measured = (|| -> Result<Vec<Measurement>, BenchError> {
            let path = loaded_database(context, &name, std::slice::from_ref(&slot), documents)?;
            let engine = SiftIndexEngine::open_slots_shared(
                &path,
                context.engine.database_options(),
                context.data.primary_key(),
                std::slice::from_ref(&slot),
            )?;
            let mut found = Vec::new();
            let swept = (|| -> Result<(), BenchError> {
                for &threads in counts {
                    let workers = threads.max(1) as usize;
                    for (op, operations, selectivity) in [
                        ("LOOKUP", queries.lookups, None),
                        (
                            "RANGELOOKUP",
                            queries.ranges,
                            Some(queries.range_selectivity),
                        ),
                    ] {
                        if operations.is_empty() {
                            continue;
                        }
                        // Warm-up: a tenth of the queries, one thread.
                        for operation in &operations[..operations.len().div_ceil(10)] {
                            execute(&engine, operation)?;
                        }
                        let seconds = threaded_queries(&engine, operations, workers)?;
                        let total = operations.len() * workers;
                        found.push(Measurement {
                            configuration: name.clone(),
                            threads: Some(threads.max(1)),
                            op: Some(op.to_owned()),
                            attribute: Some(queries.attribute.path.clone()),
                            top_k: Some("10".to_owned()),
                            selectivity,
                            metric: "throughput".to_owned(),
                            unit: "ops/s".to_owned(),
                            value: round(total as f64 / seconds.max(1e-9), 1),
                            count: Some(total as u64),
                            ..Measurement::default()
                        });
                    }
                    context.progress.advance(1);
                    context.check_interrupt()?;
                }
                Ok(())
            })();
            let closed = Box::new(engine).close();
            swept?;
            closed?;
            for &threads in counts {
                let dir = context.fresh_dir(&name)?;
                let engine = SiftIndexEngine::open_slots_shared(
                    dir.path(),
                    context.engine.database_options(),
                    context.data.primary_key(),
                    std::slice::from_ref(&slot),
                )?;
                let loaded = threaded_load(&engine, load_documents, threads.max(1) as usize);
                let closed = Box::new(engine).close();
                let load_s = loaded?;
                closed?;
                found.push(Measurement {
                    configuration: name.clone(),
                    threads: Some(threads.max(1)),
                    op: Some("PUT".to_owned()),
                    metric: "throughput".to_owned(),
                    unit: "ops/s".to_owned(),
                    value: round(load_documents.len() as f64 / load_s.max(1e-9), 1),
                    count: Some(load_documents.len() as u64),
                    ..Measurement::default()
                });
                context.progress.advance(1);
                context.check_interrupt()?;
            }
            Ok(found)
        })();
        match measured {
            Ok(mut found) => out.append(&mut found),
            Err(error) => {
                context.check_interrupt()?;
                note_failure(notes, &format!("{name} thread sweep"), &error);
            }
        }
    }
    context.progress.phase_done();
    Ok(out)
}

/// The figures of the sweep.
pub fn figures(path: &str) -> Vec<FigureInfo> {
    let cores = cores();
    [
        (
            "threads-put",
            format!("Load throughput (PUT ops/s) by client threads ({cores} CPU cores)"),
        ),
        (
            "threads-lookup",
            format!(
                "Top-10 LOOKUP throughput on {path} (queries/s) by client threads ({cores} CPU \
                 cores)"
            ),
        ),
        (
            "threads-range",
            format!(
                "Top-10 RANGELOOKUP throughput on {path} (queries/s) by client threads ({cores} \
                 CPU cores)"
            ),
        ),
    ]
    .into_iter()
    .map(|(id, title)| FigureInfo {
        id: id.to_owned(),
        title,
    })
    .collect()
}

/// Throughput of `op` per configuration at `threads`.
fn throughput(measurements: &[Measurement], op: &str, threads: u32) -> BTreeMap<String, f64> {
    measurements
        .iter()
        .filter(|m| {
            m.metric == "throughput" && m.op.as_deref() == Some(op) && m.threads == Some(threads)
        })
        .map(|m| (m.configuration.clone(), m.value))
        .collect()
}

/// Ranks (1 = highest) with ties sharing their mean rank.
fn ranks(values: &[f64]) -> Vec<f64> {
    let mut order: Vec<usize> = (0..values.len()).collect();
    order.sort_by(|&a, &b| values[b].total_cmp(&values[a]));
    let mut ranks = vec![0.0; values.len()];
    let mut start = 0;
    while start < order.len() {
        let mut end = start;
        while end + 1 < order.len()
            && values[order[end + 1]]
                .total_cmp(&values[order[start]])
                .is_eq()
        {
            end += 1;
        }
        let mean = (start + end) as f64 / 2.0 + 1.0;
        for &position in &order[start..=end] {
            ranks[position] = mean;
        }
        start = end + 1;
    }
    ranks
}

/// Spearman's rank correlation of two equally long series (Pearson's on the ranks).
pub fn spearman(first: &[f64], second: &[f64]) -> f64 {
    let (a, b) = (ranks(first), ranks(second));
    let n = a.len() as f64;
    let (mean_a, mean_b) = (a.iter().sum::<f64>() / n, b.iter().sum::<f64>() / n);
    let mut covariance = 0.0;
    let mut variance_a = 0.0;
    let mut variance_b = 0.0;
    for (x, y) in a.iter().zip(&b) {
        covariance += (x - mean_a) * (y - mean_b);
        variance_a += (x - mean_a).powi(2);
        variance_b += (y - mean_b).powi(2);
    }
    if variance_a == 0.0 || variance_b == 0.0 {
        return 1.0;
    }
    covariance / (variance_a * variance_b).sqrt()
}

fn verdict(claim: &str, outcome: &str, evidence: String, numbers: &[(String, f64)]) -> Verdict {
    crate::verdict::verdict(claim, SOURCE, outcome, evidence, numbers)
}

/// The paper's multi-threading findings checked against the sweep; `cores` is stated.
pub fn thread_verdicts(measurements: &[Measurement], cores: usize) -> Vec<Verdict> {
    let mut counts: Vec<u32> = measurements.iter().filter_map(|m| m.threads).collect();
    counts.sort_unstable();
    counts.dedup();
    let (Some(&fewest), Some(&most)) = (counts.first(), counts.last()) else {
        return [
            "Index variants keep their ranking with more threads",
            "More threads do not increase query throughput much",
            "Stand-alone indexes have slightly higher throughput than Embedded at high concurrency",
        ]
        .iter()
        .map(|claim| {
            verdict(
                claim,
                "not-measured",
                "the thread sweep did not run".to_owned(),
                &[],
            )
        })
        .collect();
    };
    let machine = format!(
        "this machine has {cores} CPU cores, so {most} threads can give at most {}× one thread's \
         throughput",
        cores.min(most as usize)
    );
    let mut verdicts = Vec::new();
    let low = throughput(measurements, "LOOKUP", fewest);
    let high = throughput(measurements, "LOOKUP", most);
    let common: Vec<&String> = low.keys().filter(|name| high.contains_key(*name)).collect();
    {
        let claim = "Index variants keep their ranking with more threads (top-10 LOOKUP \
                     throughput)";
        if common.len() < 2 || fewest == most {
            verdicts.push(verdict(
                claim,
                "not-measured",
                "two configurations and two thread counts are needed".to_owned(),
                &[],
            ));
        } else {
            let a: Vec<f64> = common.iter().map(|name| low[*name]).collect();
            let b: Vec<f64> = common.iter().map(|name| high[*name]).collect();
            let rho = spearman(&a, &b);
            let order = |values: &BTreeMap<String, f64>| {
                let mut ranked: Vec<(&String, f64)> =
                    common.iter().map(|name| (*name, values[*name])).collect();
                ranked.sort_by(|x, y| y.1.total_cmp(&x.1));
                ranked
                    .iter()
                    .map(|(name, _)| name.as_str())
                    .collect::<Vec<_>>()
                    .join(" > ")
            };
            verdicts.push(verdict(
                claim,
                if rho >= RANKING_RHO_MIN {
                    "reproduced"
                } else {
                    "differs"
                },
                format!(
                    "Spearman's rank correlation of LOOKUP throughput at {fewest} and {most} \
                     threads: {rho:.2} (rule: at least {RANKING_RHO_MIN}); {fewest} thread(s): {}; \
                     {most} threads: {}",
                    order(&low),
                    order(&high)
                ),
                &[("spearman rho".to_owned(), rho)],
            ));
        }
    }
    {
        let claim = "More threads do not increase query throughput much";
        let gains: Vec<(String, f64)> = common
            .iter()
            .map(|name| ((*name).clone(), high[*name] / low[*name].max(1e-9)))
            .collect();
        if gains.is_empty() || fewest == most {
            verdicts.push(verdict(
                claim,
                "not-measured",
                "two thread counts are needed".to_owned(),
                &[],
            ));
        } else {
            let mut sorted: Vec<f64> = gains.iter().map(|(_, gain)| *gain).collect();
            sorted.sort_by(f64::total_cmp);
            let median = sorted[sorted.len() / 2];
            let mut numbers = gains.clone();
            numbers.push(("median gain".to_owned(), median));
            numbers.push(("cores".to_owned(), cores as f64));
            verdicts.push(verdict(
                claim,
                if median < GAIN_MAX {
                    "reproduced"
                } else {
                    "differs"
                },
                format!(
                    "top-10 LOOKUP throughput at {most} threads / at {fewest}: median {median:.2}× \
                     over configurations (rule: below {GAIN_MAX}×); {machine}"
                ),
                &numbers,
            ));
        }
    }
    {
        let claim =
            "Stand-alone indexes have slightly higher throughput than Embedded at high concurrency";
        let best = |kinds: &[&str]| {
            high.iter()
                .filter(|(name, _)| kinds.contains(&kind_of(name)))
                .max_by(|a, b| a.1.total_cmp(b.1))
                .map(|(name, value)| (name.clone(), *value))
        };
        match (best(&["composite", "lazy", "eager"]), best(&["embedded"])) {
            (Some((stand_alone, a)), Some((embedded, b))) => verdicts.push(verdict(
                claim,
                if a > b { "reproduced" } else { "differs" },
                format!(
                    "top-10 LOOKUP throughput at {most} threads: best stand-alone {stand_alone} \
                     {a:.0}/s vs {embedded} {b:.0}/s; {machine}"
                ),
                &[(stand_alone, a), (embedded, b)],
            )),
            _ => verdicts.push(verdict(
                claim,
                "not-measured",
                "a stand-alone kind and embedded are needed".to_owned(),
                &[],
            )),
        }
    }
    verdicts
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lookup(configuration: &str, threads: u32, value: f64) -> Measurement {
        Measurement {
            op: Some("LOOKUP".to_owned()),
            threads: Some(threads),
            ..Measurement::new(configuration, "throughput", "ops/s", value)
        }
    }

    #[test]
    fn spearman_of_known_orders() {
        assert!((spearman(&[1.0, 2.0, 3.0], &[10.0, 20.0, 30.0]) - 1.0).abs() < 1e-9);
        assert!((spearman(&[1.0, 2.0, 3.0], &[30.0, 20.0, 10.0]) + 1.0).abs() < 1e-9);
        assert_eq!(ranks(&[5.0, 7.0, 5.0]), vec![2.5, 1.0, 2.5]);
    }

    #[test]
    fn verdicts_follow_the_numbers() {
        let kept = vec![
            lookup("composite:sync-full", 1, 1000.0),
            lookup("lazy:sync-insert", 1, 2000.0),
            lookup("embedded", 1, 500.0),
            lookup("composite:sync-full", 4, 1200.0),
            lookup("lazy:sync-insert", 4, 2600.0),
            lookup("embedded", 4, 600.0),
        ];
        let verdicts = thread_verdicts(&kept, 2);
        assert_eq!(verdicts.len(), 3);
        assert_eq!(
            verdicts[0].outcome, "reproduced",
            "{}",
            verdicts[0].evidence
        );
        assert_eq!(
            verdicts[1].outcome, "reproduced",
            "{}",
            verdicts[1].evidence
        );
        assert!(verdicts[1].evidence.contains("2 CPU cores"));
        assert!((verdicts[1].numbers["median gain"] - 1.2).abs() < 1e-9);
        assert_eq!(verdicts[2].outcome, "reproduced");
        assert!((verdicts[2].numbers["lazy:sync-insert"] - 2600.0).abs() < 1e-9);
        // Reversed ranking, 3× gains, embedded fastest.
        let changed = vec![
            lookup("composite:sync-full", 1, 1000.0),
            lookup("lazy:sync-insert", 1, 2000.0),
            lookup("embedded", 1, 500.0),
            lookup("composite:sync-full", 4, 3000.0),
            lookup("lazy:sync-insert", 4, 1500.0),
            lookup("embedded", 4, 9000.0),
        ];
        let verdicts = thread_verdicts(&changed, 2);
        assert!(
            verdicts.iter().all(|v| v.outcome == "differs"),
            "{verdicts:#?}"
        );
        assert!(thread_verdicts(&[], 2)
            .iter()
            .all(|v| v.outcome == "not-measured"));
    }
}
