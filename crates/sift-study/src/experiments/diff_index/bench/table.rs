//! The printed report: a short table by default; `--detail` adds the forensic lines (machine
//! noise, other processes, service times, stalls and drains, lag histograms, per-repeat ratios).

use super::args::RateBasis;
use super::results::{LoadStep, Reads, Report, SchemeResult};
use super::targets::describe_unpaused;
use super::targets::ratio;
use super::targets::step_near;
use super::targets::HALF_LOAD_RULE;
use super::INDEXED_PATH;
use sift_bench::pinning::pinning_description;
use std::fmt::Write as _;

pub(crate) fn ms(us: f64) -> String {
    if us >= 10_000.0 {
        format!("{:.0}ms", us / 1e3)
    } else if us >= 1000.0 {
        format!("{:.1}ms", us / 1e3)
    } else {
        format!("{us:.1}")
    }
}

/// The report as text tables: the short tables, and with `detail` the forensic lines too.
pub fn format_report(report: &Report, detail: bool) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "# sift bench diff-index: {} documents of ~{} B, one {} index on `{}`, {} client(s), \
         open-loop steps of {} s, offered rates in % of {}; {}",
        report.documents,
        report.document_bytes,
        report.kind,
        INDEXED_PATH,
        report.clients,
        report.step_seconds,
        match report.rate_basis {
            RateBasis::Baseline => "the no-index saturation".to_owned(),
            RateBasis::Own => "each scheme's own sustained saturation".to_owned(),
        },
        pinning_description(
            report.background_cpus.as_deref(),
            report.client_cpus.as_deref()
        )
    );
    if detail {
        machine_lines(&mut out, report);
    }
    let _ = writeln!(out, "\n## saturation (closed loop)");
    saturation_table(&mut out, report);
    if detail {
        step_table_detailed(&mut out, report);
    } else {
        step_table_short(&mut out, report);
    }
    reads_table(&mut out, report, detail);
    if detail {
        lag_histograms(&mut out, report);
    }
    for (scheme, reason) in &report.skipped {
        let _ = writeln!(out, "# {scheme}: not measured ({reason})");
    }
    if !report.targets.is_empty() {
        targets(&mut out, report, detail);
    }
    out
}

/// Machine noise before and after the steps, and other processes' CPU time.
fn machine_lines(out: &mut String, report: &Report) {
    for (when, hiccups) in ["before", "after"].iter().zip(&report.platform_hiccups) {
        let _ = writeln!(
            out,
            "# machine noise {when} the steps: {}",
            hiccups.describe()
        );
    }
    if let Some(total) = report.other_processes_seconds {
        let busiest: Vec<String> = report
            .other_processes
            .iter()
            .map(|other| format!("{} {:.2} s", other.name, other.seconds))
            .collect();
        let _ = writeln!(
            out,
            "# other processes' CPU time during the steps: {total:.2} s in all{}{}",
            if busiest.is_empty() { "" } else { "; most: " },
            busiest.join(", ")
        );
    }
}

/// Closed-loop saturation per scheme.
fn saturation_table(out: &mut String, report: &Report) {
    let _ = writeln!(
        out,
        "{:<14} {:>12} {:>12} {:>10} {:>9} {:>9}",
        "scheme", "ack/s", "sustained/s", "drain ms", "p50 µs", "p99 µs"
    );
    for r in &report.results {
        let s = &r.saturation;
        let _ = writeln!(
            out,
            "{:<14} {:>12.0} {:>12.0} {:>10.1} {:>9.1} {:>9.1}",
            r.scheme,
            s.acknowledged_rate,
            s.sustained_rate,
            s.drain_ms,
            s.latency.p50_us,
            s.latency.p99_us
        );
    }
}

/// The exact-match and range reads of one scheme, each with its label.
fn read_rows(result: &SchemeResult) -> impl Iterator<Item = (String, &Reads)> {
    result
        .exact
        .iter()
        .map(|reads| ("exact match".to_owned(), reads))
        .chain(result.ranges.iter().map(|range| {
            (
                format!("range {}%", range.selectivity_ppm as f64 / 10_000.0),
                &range.reads,
            )
        }))
}

/// A step's index lag p50 and p99 as table cells ("-" for a synchronous scheme).
fn lag_cells(step: &LoadStep) -> (String, String) {
    step.lag
        .as_ref()
        .map_or(("-".to_owned(), "-".to_owned()), |lag| {
            (ms(lag.p50_us as f64), ms(lag.p99_us as f64))
        })
}

/// The load steps: offered and achieved rates, latency from the scheduled time, and the index
/// lag of the asynchronous schemes.
fn step_table_short(out: &mut String, report: &Report) {
    let _ = writeln!(
        out,
        "\n## update latency against offered load (µs from the scheduled time; lag = base commit → \
         index update)"
    );
    let _ = writeln!(
        out,
        "{:<14} {:>6} {:>10} {:>10} {:>8} {:>8} {:>8} {:>9} {:>9}",
        "scheme", "load%", "offered/s", "done/s", "mean", "p50", "p99", "lag p50", "lag p99"
    );
    for r in &report.results {
        for step in &r.steps {
            let (lag50, lag99) = lag_cells(step);
            let _ = writeln!(
                out,
                "{:<14} {:>6.0} {:>10.0} {:>10.0} {:>8} {:>8} {:>8} {:>9} {:>9}",
                r.scheme,
                step.load_percent,
                step.offered_rate,
                step.achieved_rate,
                ms(step.latency.mean_us),
                ms(step.latency.p50_us),
                ms(step.latency.p99_us),
                lag50,
                lag99
            );
        }
    }
}

/// Every column of the load steps: service times, unissued updates, stalls and drains too.
fn step_table_detailed(out: &mut String, report: &Report) {
    let _ = writeln!(
        out,
        "\n## update latency against offered load (µs from the scheduled time; lag = base commit → \
         index update; stalls = engine write stalls; drains = flushes that waited for the update queue)"
    );
    let _ = writeln!(
        out,
        "{:<14} {:>6} {:>10} {:>10} {:>8} {:>8} {:>8} {:>8} {:>8} {:>9} {:>9} {:>9} {:>9} {:>8} {:>7} {:>9} {:>7} {:>9}",
        "scheme",
        "load%",
        "offered/s",
        "done/s",
        "n",
        "mean",
        "p50",
        "p90",
        "p99",
        "svc mean",
        "svc p50",
        "lag p50",
        "lag p99",
        "unissued",
        "stalls",
        "stall ms",
        "drains",
        "drain ms"
    );
    for r in &report.results {
        for step in &r.steps {
            let (lag50, lag99) = lag_cells(step);
            let _ = writeln!(
                out,
                "{:<14} {:>6.0} {:>10.0} {:>10.0} {:>8} {:>8} {:>8} {:>8} {:>8} {:>9} {:>9} {:>9} {:>9} {:>8} {:>7} {:>9.1} {:>7} {:>9.1}",
                r.scheme,
                step.load_percent,
                step.offered_rate,
                step.achieved_rate,
                step.latency.count,
                ms(step.latency.mean_us),
                ms(step.latency.p50_us),
                ms(step.latency.p90_us),
                ms(step.latency.p99_us),
                ms(step.service.mean_us),
                ms(step.service.p50_us),
                lag50,
                lag99,
                step.unissued,
                step.write_stalls,
                step.write_stall_ms,
                step.flush_drains,
                step.flush_drain_wait_ms
            );
        }
    }
}

/// Read latencies on the settled database; `detail` adds n, p90 and candidates and stale
/// entries per query.
fn reads_table(out: &mut String, report: &Report, detail: bool) {
    let _ = writeln!(out, "\n## reads (closed loop, settled database; µs)");
    if !detail {
        let _ = writeln!(
            out,
            "{:<14} {:<14} {:>8} {:>8} {:>10}",
            "scheme", "query", "p50", "p99", "hits/q"
        );
        for r in &report.results {
            for (query, reads) in read_rows(r) {
                let _ = writeln!(
                    out,
                    "{:<14} {:<14} {:>8} {:>8} {:>10.2}",
                    r.scheme,
                    query,
                    ms(reads.latency.p50_us),
                    ms(reads.latency.p99_us),
                    reads.hits_per_query
                );
            }
        }
        return;
    }
    let _ = writeln!(
        out,
        "{:<14} {:<14} {:>8} {:>8} {:>8} {:>8} {:>10} {:>10} {:>8}",
        "scheme", "query", "n", "p50", "p90", "p99", "hits/q", "cands/q", "stale/q"
    );
    for r in &report.results {
        for (query, reads) in read_rows(r) {
            let _ = writeln!(
                out,
                "{:<14} {:<14} {:>8} {:>8} {:>8} {:>8} {:>10.2} {:>10.2} {:>8.2}",
                r.scheme,
                query,
                reads.latency.count,
                ms(reads.latency.p50_us),
                ms(reads.latency.p90_us),
                ms(reads.latency.p99_us),
                reads.hits_per_query,
                reads.candidates_per_query,
                reads.stale_per_query
            );
        }
    }
}

/// Index lag histograms of the asynchronous schemes, per load step.
fn lag_histograms(out: &mut String, report: &Report) {
    let async_steps: Vec<_> = report
        .results
        .iter()
        .flat_map(|r| {
            r.steps
                .iter()
                .filter_map(move |s| s.lag.as_ref().map(|lag| (r, s, lag)))
        })
        .collect();
    if !async_steps.is_empty() {
        let _ = writeln!(
            out,
            "\n## index lag histograms (updates per log2 bucket, upper bound)"
        );
        for (r, step, lag) in async_steps {
            let buckets: Vec<String> = lag
                .histogram
                .iter()
                .map(|(bound, count)| format!("≤{}:{count}", ms(*bound as f64)))
                .collect();
            let _ = writeln!(
                out,
                "{:<14} {:>4.0}%  {}",
                r.scheme,
                step.load_percent,
                buckets.join(" ")
            );
        }
    }
}

/// The targets: each scheme's update latency relative to no index at half of its own
/// saturation load; with `detail`, the half-load table, per-repeat ratios and machine pauses.
fn targets(out: &mut String, report: &Report, detail: bool) {
    let _ = writeln!(
        out,
        "\n## targets (issue 5): update latency relative to no index at half of saturation load"
    );
    let _ = writeln!(out, "# rule: {HALF_LOAD_RULE}");
    if !detail {
        for t in &report.targets {
            let _ = writeln!(
                out,
                "{:<14} at 50% of its own saturation ({:.0}/s): mean {:.2}×, p50 {:.2}×, p99 \
                     {:.2}× no index (target ≤ {}× on mean and p50): {}",
                t.scheme,
                t.offered_rate,
                t.mean_ratio,
                t.p50_ratio,
                t.p99_ratio,
                t.limit,
                if t.met { "met" } else { "missed" }
            );
        }
        let _ = writeln!(
            out,
            "# --detail: per-repeat ratios, machine pauses, service times"
        );
        return;
    }
    let _ = writeln!(
        out,
        "{:<14} {:>10} {:>10} {:>7} {:>17} {:>17} {:>17} {:>17} {:>7} {:>7}",
        "scheme",
        "own sat/s",
        "offered/s",
        "repeats",
        "mean (none) µs",
        "p50 (none) µs",
        "p99 (none) µs",
        "svc mean (none)",
        "stalls",
        "drains"
    );
    for r in &report.results {
        let Some(half) = &r.half_load else { continue };
        let pair = |ours: f64, theirs: f64| format!("{} ({})", ms(ours), ms(theirs));
        let _ = writeln!(
            out,
            "{:<14} {:>10.0} {:>10.0} {:>7} {:>17} {:>17} {:>17} {:>17} {:>7} {:>7}",
            r.scheme,
            half.saturation_rate,
            half.offered_rate,
            half.repeats,
            pair(half.latency.mean_us, half.baseline_latency.mean_us),
            pair(half.latency.p50_us, half.baseline_latency.p50_us),
            pair(half.latency.p99_us, half.baseline_latency.p99_us),
            pair(half.service.mean_us, half.baseline_service.mean_us),
            format!("{}/{}", half.write_stalls, half.baseline_write_stalls),
            half.flush_drains
        );
    }
    for t in &report.targets {
        let spread = report
            .results
            .iter()
            .find(|r| r.scheme == t.scheme)
            .and_then(|r| r.half_load.as_ref())
            .map(|half| {
                half.repeat_means_us
                    .iter()
                    .map(|(ours, theirs)| format!("{:.2}×", ratio(*ours, *theirs)))
                    .collect::<Vec<_>>()
                    .join(" ")
            })
            .unwrap_or_default();
        let _ = writeln!(
            out,
            "{:<14} at 50% of its own saturation ({:.0}/s): mean {:.2}×, p50 {:.2}×, p99 {:.2}× \
                 (target ≤ {}× on mean and p50): {}; service time mean {:.2}×, p50 {:.2}×; mean \
                 ratio per repeat: {spread}; mean above no index: {:+.1} µs",
            t.scheme,
            t.offered_rate,
            t.mean_ratio,
            t.p50_ratio,
            t.p99_ratio,
            t.limit,
            if t.met { "met" } else { "missed" },
            t.service_mean_ratio,
            t.service_p50_ratio,
            t.mean_above_baseline_us
        );
        if let Some(half) = report
            .results
            .iter()
            .find(|r| r.scheme == t.scheme)
            .and_then(|r| r.half_load.as_ref())
        {
            let _ = writeln!(out, "# {}", describe_unpaused(t.scheme.as_str(), half));
        }
    }
    // The table's own step nearest 50%, for reference: with the baseline basis a scheme
    // slower than no index may be overloaded there, which is why the targets use the rule.
    if let Some(baseline) = report.results.iter().find(|r| r.scheme == "none") {
        for t in &report.targets {
            let Some(result) = report.results.iter().find(|r| r.scheme == t.scheme) else {
                continue;
            };
            if let (Some(step), Some(base)) = (step_near(result, 50.0), step_near(baseline, 50.0)) {
                let _ = writeln!(
                    out,
                    "# for reference, the table's {:.0}% step ({:.0}/s offered, {:.0}/s done): \
                         {} mean {:.2}×, p50 {:.2}× no index (not the target rule)",
                    step.load_percent,
                    step.offered_rate,
                    step.achieved_rate,
                    t.scheme,
                    ratio(step.latency.mean_us, base.latency.mean_us),
                    ratio(step.latency.p50_us, base.latency.p50_us)
                );
            }
        }
    }
}
