//! The figures and tables of experiment 7 (Diff-Index): latency against offered load per
//! scheme, the lag histograms of the asynchronous schemes, read latency by selectivity.
//! Measurement labels: see `super` (`experiments/diff_index/mod.rs`).

use crate::figure::svg::{
    bar_chart, box_plot, line_plot, Bar, BarGroup, BoxGroup, BoxStats, LegendEntry, Segment, Series,
};
use crate::figure::{colour, opt, pivot_table, value};
use crate::results::{ExperimentResult, FigureInfo, Measurement, StudyResults};
use crate::BASELINE;

/// Colours of schemes the run's configuration list does not name (async-session is not a
/// default configuration of the study).
fn scheme_colour(results: &StudyResults, name: &str) -> String {
    let given = colour(results, name);
    if given != "#333333" {
        return given;
    }
    match name {
        "composite:sync-full" => "#1f77b4",
        "composite:sync-insert" => "#ff7f0e",
        "composite:async-simple" => "#2ca02c",
        "composite:async-session" => "#9467bd",
        _ => "#333333",
    }
    .to_owned()
}

fn label(name: &str) -> String {
    if name == BASELINE {
        "no index".to_owned()
    } else {
        name.to_owned()
    }
}

/// Configurations in the order measured (no index first).
fn names(measurements: &[Measurement]) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    for m in measurements {
        if !names.contains(&m.configuration) {
            names.push(m.configuration.clone());
        }
    }
    names.sort_by_key(|name| name != BASELINE);
    names
}

fn legend(results: &StudyResults, names: &[String]) -> Vec<LegendEntry> {
    names
        .iter()
        .map(|name| LegendEntry {
            name: label(name),
            colour: scheme_colour(results, name),
            light: false,
        })
        .collect()
}

fn update_value(ms: &[Measurement], name: &str, metric: &str, slice: Option<u32>) -> Option<f64> {
    value(ms, |m| {
        m.configuration == name
            && m.metric == metric
            && m.slice == slice
            && m.op.as_deref() == Some("UPDATE")
    })
}

fn five_numbers(
    results: &StudyResults,
    ms: &[Measurement],
    name: &str,
    op: &str,
    selectivity: Option<u64>,
) -> Option<BoxStats> {
    let get = |metric: &str| {
        value(ms, |m| {
            m.configuration == name
                && m.metric == metric
                && m.op.as_deref() == Some(op)
                && m.selectivity == selectivity
        })
    };
    Some(BoxStats {
        name: label(name),
        colour: scheme_colour(results, name),
        p5: get("latency_p5")?,
        p25: get("latency_p25")?,
        p50: get("latency_p50")?,
        p75: get("latency_p75")?,
        p95: get("latency_p95")?,
    })
}

/// Shades of one hue for the load steps of a lag histogram, light (low load) to dark.
fn step_colour(position: usize, steps: usize) -> String {
    let t = if steps > 1 {
        position as f64 / (steps - 1) as f64
    } else {
        1.0
    };
    let channel = |light: f64, dark: f64| (light + (dark - light) * t).round() as u8;
    format!(
        "#{:02x}{:02x}{:02x}",
        channel(160.0, 20.0),
        channel(200.0, 60.0),
        channel(240.0, 120.0)
    )
}

fn lag_label(bound_us: f64) -> String {
    if bound_us >= 1e6 {
        format!("≤{:.0} s", bound_us / 1e6)
    } else if bound_us >= 1e3 {
        format!("≤{:.0} ms", bound_us / 1e3)
    } else {
        format!("≤{bound_us:.0} µs")
    }
}

/// Draws `figure` if it belongs to this experiment.
pub(crate) fn figure(
    results: &StudyResults,
    experiment: &ExperimentResult,
    figure: &FigureInfo,
) -> Option<String> {
    let id = figure.id.strip_prefix("diff-index-")?;
    let ms = &experiment.measurements;
    let names = names(ms);
    let title = figure.title.as_str();
    if let Some(statistic) = id.strip_prefix("update-") {
        let metric = format!("latency_{statistic}");
        let series: Vec<Series> = names
            .iter()
            .map(|name| {
                let mut points: Vec<(f64, f64)> = ms
                    .iter()
                    .filter(|m| m.configuration == *name && m.metric == metric && m.slice.is_some())
                    .filter_map(|m| {
                        Some((update_value(ms, name, "offered_rate", m.slice)?, m.value))
                    })
                    .collect();
                points.sort_by(|a, b| a.0.total_cmp(&b.0));
                Series {
                    name: label(name),
                    colour: scheme_colour(results, name),
                    points,
                }
            })
            .filter(|series| !series.points.is_empty())
            .collect();
        return Some(line_plot(
            title,
            "offered load (updates/s, open loop)",
            &format!("{statistic} update latency (µs)"),
            &series,
        ));
    }
    if let Some(maintenance) = id.strip_prefix("lag-") {
        let name = format!("composite:{maintenance}");
        let mut slices: Vec<u32> = ms
            .iter()
            .filter(|m| m.configuration == name && m.metric == "index_lag_bucket")
            .filter_map(|m| m.slice)
            .collect();
        slices.sort_unstable();
        slices.dedup();
        let mut bounds: Vec<f64> = ms
            .iter()
            .filter(|m| m.configuration == name && m.metric == "index_lag_bucket")
            .map(|m| m.value)
            .collect();
        bounds.sort_by(f64::total_cmp);
        bounds.dedup();
        let step_name = |slice: u32| {
            update_value(ms, &name, "offered_load_percent", Some(slice))
                .map_or_else(|| format!("step {slice}"), |p| format!("{p}% load"))
        };
        let totals: Vec<f64> = slices
            .iter()
            .map(|slice| {
                ms.iter()
                    .filter(|m| {
                        m.configuration == name
                            && m.metric == "index_lag_bucket"
                            && m.slice == Some(*slice)
                    })
                    .map(|m| m.count.unwrap_or(0) as f64)
                    .sum()
            })
            .collect();
        let groups: Vec<BarGroup> = bounds
            .iter()
            .map(|bound| BarGroup {
                label: lag_label(*bound),
                bars: slices
                    .iter()
                    .zip(&totals)
                    .enumerate()
                    .map(|(position, (slice, total))| {
                        let count = ms
                            .iter()
                            .find(|m| {
                                m.configuration == name
                                    && m.metric == "index_lag_bucket"
                                    && m.slice == Some(*slice)
                                    && (m.value - *bound).abs() < 0.5
                            })
                            .and_then(|m| m.count)
                            .unwrap_or(0) as f64;
                        Bar {
                            name: step_name(*slice),
                            segments: vec![Segment {
                                value: 100.0 * count / total.max(1.0),
                                colour: step_colour(position, slices.len()),
                                light: false,
                                label: "share of the step's updates (%)".to_owned(),
                            }],
                        }
                    })
                    .collect(),
            })
            .collect();
        let entries: Vec<LegendEntry> = slices
            .iter()
            .enumerate()
            .map(|(position, slice)| LegendEntry {
                name: step_name(*slice),
                colour: step_colour(position, slices.len()),
                light: false,
            })
            .collect();
        return Some(bar_chart(
            title,
            "share of updates (%)",
            "index lag (upper bound of the log2 bucket)",
            &groups,
            &entries,
        ));
    }
    let indexed: Vec<String> = names.iter().filter(|n| *n != BASELINE).cloned().collect();
    if id == "lookup" {
        let group = BoxGroup {
            label: "exact match".to_owned(),
            boxes: indexed
                .iter()
                .filter_map(|name| five_numbers(results, ms, name, "LOOKUP", None))
                .collect(),
        };
        return Some(box_plot(
            title,
            "LOOKUP latency (µs)",
            "boxes p25–p75, whiskers p5–p95, line median",
            &[group],
            &legend(results, &indexed),
        ));
    }
    if id == "range" {
        let mut widths: Vec<u64> = ms
            .iter()
            .filter(|m| m.op.as_deref() == Some("RANGELOOKUP"))
            .filter_map(|m| m.selectivity)
            .collect();
        widths.sort_unstable();
        widths.dedup();
        let groups: Vec<BoxGroup> = widths
            .iter()
            .map(|width| BoxGroup {
                label: format!("{}%", *width as f64 / 10_000.0),
                boxes: indexed
                    .iter()
                    .filter_map(|name| five_numbers(results, ms, name, "RANGELOOKUP", Some(*width)))
                    .collect(),
            })
            .collect();
        return Some(box_plot(
            title,
            "RANGELOOKUP latency (µs)",
            "selectivity (share of the documents); boxes p25–p75, whiskers p5–p95",
            &groups,
            &legend(results, &indexed),
        ));
    }
    None
}

/// The experiment's tables: saturation and load steps per scheme, then reads.
pub(crate) fn tables(experiment: &ExperimentResult) -> String {
    let ms = &experiment.measurements;
    let update = |m: &Measurement| m.op.as_deref() == Some("UPDATE");
    let saturation = pivot_table(
        ms,
        &["configuration"],
        &|m| (update(m) && m.slice.is_none()).then(|| vec![m.configuration.clone()]),
        &[
            (
                "sustained updates/s",
                &|m| m.metric == "saturation_throughput",
                1.0,
            ),
            (
                "acknowledged updates/s",
                &|m| m.metric == "acknowledged_throughput",
                1.0,
            ),
        ],
    );
    let steps = pivot_table(
        ms,
        &["configuration", "load step"],
        &|m| {
            (update(m) && m.slice.is_some()).then(|| {
                vec![
                    m.configuration.clone(),
                    m.slice.map_or_else(String::new, |s| s.to_string()),
                ]
            })
        },
        &[
            ("load %", &|m| m.metric == "offered_load_percent", 1.0),
            ("offered/s", &|m| m.metric == "offered_rate", 1.0),
            ("done/s", &|m| m.metric == "achieved_rate", 1.0),
            ("mean µs", &|m| m.metric == "latency_mean", 1.0),
            ("p50 µs", &|m| m.metric == "latency_p50", 1.0),
            ("p90 µs", &|m| m.metric == "latency_p90", 1.0),
            ("p99 µs", &|m| m.metric == "latency_p99", 1.0),
            (
                "service mean µs",
                &|m| m.metric == "service_latency_mean",
                1.0,
            ),
            ("lag p50 ms", &|m| m.metric == "index_lag_p50", 1e-3),
            ("lag p99 ms", &|m| m.metric == "index_lag_p99", 1e-3),
        ],
    );
    let reads = pivot_table(
        ms,
        &["configuration", "op", "selectivity"],
        &|m| {
            (!update(m)).then(|| {
                vec![
                    m.configuration.clone(),
                    opt(m.op.as_ref()),
                    m.selectivity
                        .map_or_else(|| "–".to_owned(), |w| format!("{}%", w as f64 / 10_000.0)),
                ]
            })
        },
        &[
            ("p50 µs", &|m| m.metric == "latency_p50", 1.0),
            ("p95 µs", &|m| m.metric == "latency_p95", 1.0),
            ("p99 µs", &|m| m.metric == "latency_p99", 1.0),
            ("hits/query", &|m| m.metric == "hits_per_query", 1.0),
            (
                "stale entries/query",
                &|m| m.metric == "stale_entries_per_query",
                1.0,
            ),
        ],
    );
    saturation + &steps + &reads
}
