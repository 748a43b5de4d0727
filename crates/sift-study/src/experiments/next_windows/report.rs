//! The figures and tables of experiment 5 (NEXT §6) in `index.html`: window latencies as box
//! plots, the δ sweep, the skew comparison, the global index against the data and the
//! two-index runs, drawn from the experiment's measurements (`experiments::next_windows`).

use crate::experiments::next_windows::{series_name, window_label, Pick};
use crate::figure::svg::{
    bar_chart, box_plot, line_plot, Bar, BarGroup, BoxGroup, BoxStats, LegendEntry,
};
use crate::figure::svg::{Segment, Series};
use crate::figure::{colour, opt, pivot_table};
use crate::results::{ExperimentResult, FigureInfo, Measurement, StudyResults};
use crate::verdict::kind_of;

const WINDOWS: [&str; 3] = ["small", "medium", "large"];

/// Configurations of `suite` in the run's colour order, then any others as they appear.
fn names(results: &StudyResults, ms: &[Measurement], suite: &str) -> Vec<String> {
    let present: Vec<&Measurement> = ms
        .iter()
        .filter(|m| m.suite.as_deref() == Some(suite) && m.configuration != "none")
        .collect();
    let mut out: Vec<String> = results
        .configuration
        .index_configurations
        .iter()
        .filter(|c| present.iter().any(|m| m.configuration == c.name))
        .map(|c| c.name.clone())
        .collect();
    for m in present {
        if !out.contains(&m.configuration) {
            out.push(m.configuration.clone());
        }
    }
    out
}

fn legend(results: &StudyResults, names: &[String]) -> Vec<LegendEntry> {
    names
        .iter()
        .map(|name| LegendEntry {
            name: name.clone(),
            colour: colour(results, name),
            light: false,
        })
        .collect()
}

fn value(ms: &[Measurement], pick: Pick<'_>, configuration: &str) -> Option<f64> {
    ms.iter()
        .find(|m| m.configuration == configuration && pick.matches(m))
        .map(|m| m.value)
}

fn windows_box_plot(
    results: &StudyResults,
    ms: &[Measurement],
    title: &str,
    suite: &str,
    attribute: &str,
) -> String {
    let names = names(results, ms, suite);
    let groups: Vec<BoxGroup> = WINDOWS
        .iter()
        .map(|window| BoxGroup {
            label: window_label(window),
            boxes: names
                .iter()
                .filter_map(|name| {
                    let get = |metric: &str| {
                        value(
                            ms,
                            Pick {
                                metric,
                                suite,
                                attribute: Some(attribute),
                                window: Some(window),
                                op: Some("RANGELOOKUP"),
                                ..Pick::default()
                            },
                            name,
                        )
                    };
                    Some(BoxStats {
                        name: name.clone(),
                        colour: colour(results, name),
                        p5: get("latency_p5")?,
                        p25: get("latency_p25")?,
                        p50: get("latency_p50")?,
                        p75: get("latency_p75")?,
                        p95: get("latency_p95")?,
                    })
                })
                .collect(),
        })
        .filter(|group| !group.boxes.is_empty())
        .collect();
    box_plot(
        title,
        "latency per query (µs)",
        "window (fraction of the value domain / side of the square)",
        &groups,
        &legend(results, &names),
    )
}

fn delta_label(delta: Option<f64>) -> String {
    delta.map_or_else(|| "no split".to_owned(), |d| format!("δ {d:e}"))
}

/// δ values of the sweep: no split first, then from the largest δ down.
fn deltas(ms: &[Measurement]) -> Vec<Option<f64>> {
    let mut out: Vec<Option<f64>> = Vec::new();
    for m in ms.iter().filter(|m| m.suite.as_deref() == Some("delta")) {
        if !out.contains(&m.split_delta) {
            out.push(m.split_delta);
        }
    }
    out.sort_by(|a, b| match (a, b) {
        (None, None) => std::cmp::Ordering::Equal,
        (None, Some(_)) => std::cmp::Ordering::Less,
        (Some(_), None) => std::cmp::Ordering::Greater,
        (Some(a), Some(b)) => b.total_cmp(a),
    });
    out
}

fn bar(name: &str, colour: String, light: bool, value: f64, label: &str) -> Bar {
    Bar {
        name: name.to_owned(),
        segments: vec![Segment {
            value,
            colour,
            light,
            label: label.to_owned(),
        }],
    }
}

/// Draws figure `figure` of experiment 5, or `None` when the id is not one of its figures.
pub(crate) fn figure(
    results: &StudyResults,
    experiment: &ExperimentResult,
    figure: &FigureInfo,
) -> Option<String> {
    let ms = &experiment.measurements;
    let title = figure.title.as_str();
    let next_colour = || {
        names(results, ms, "delta")
            .first()
            .map_or_else(|| colour(results, "next"), |name| colour(results, name))
    };
    Some(match figure.id.as_str() {
        "next-windows-score" => {
            windows_box_plot(results, ms, title, "windows", &super::score_path(ms))
        }
        "next-windows-geo" => windows_box_plot(results, ms, title, "geo", "place.coordinates"),
        "next-delta" => {
            let groups: Vec<BarGroup> = deltas(ms)
                .into_iter()
                .map(|delta| BarGroup {
                    label: delta_label(delta),
                    bars: ["small", "medium"]
                        .iter()
                        .filter_map(|window| {
                            let v = ms.iter().find(|m| {
                                Pick {
                                    metric: "latency_p50",
                                    suite: "delta",
                                    window: Some(window),
                                    split_delta: Some(delta),
                                    ..Pick::default()
                                }
                                .matches(m)
                            })?;
                            Some(bar(
                                &format!("{} {window}", series_name(v)),
                                next_colour(),
                                *window == "small",
                                v.value,
                                "median latency (µs)",
                            ))
                        })
                        .collect(),
                })
                .collect();
            let legend = [
                LegendEntry {
                    name: "small window (light)".to_owned(),
                    colour: next_colour(),
                    light: true,
                },
                LegendEntry {
                    name: "medium window".to_owned(),
                    colour: next_colour(),
                    light: false,
                },
            ];
            bar_chart(
                title,
                "median latency per query (µs)",
                "δ of the value-aware split (score units)",
                &groups,
                &legend,
            )
        }
        "next-delta-memory" => {
            let groups: Vec<BarGroup> = deltas(ms)
                .into_iter()
                .filter_map(|delta| {
                    let v = ms.iter().find(|m| {
                        Pick {
                            metric: "global_index_bytes",
                            suite: "delta",
                            split_delta: Some(delta),
                            ..Pick::default()
                        }
                        .matches(m)
                    })?;
                    Some(BarGroup {
                        label: delta_label(delta),
                        bars: vec![bar(
                            &series_name(v),
                            next_colour(),
                            false,
                            v.value / 1024.0,
                            "global index (KiB)",
                        )],
                    })
                })
                .collect();
            let legend = [LegendEntry {
                name: "next".to_owned(),
                colour: next_colour(),
                light: false,
            }];
            bar_chart(
                title,
                "global index (KiB)",
                "δ of the value-aware split (score units)",
                &groups,
                &legend,
            )
        }
        "next-skew" => {
            let names = names(results, ms, "skew");
            let mut distributions: Vec<String> = Vec::new();
            for m in ms.iter().filter(|m| m.suite.as_deref() == Some("skew")) {
                if let Some(d) = &m.distribution {
                    if !distributions.contains(d) {
                        distributions.push(d.clone());
                    }
                }
            }
            let groups: Vec<BarGroup> = distributions
                .iter()
                .map(|distribution| BarGroup {
                    label: distribution.clone(),
                    bars: ms
                        .iter()
                        .filter(|m| {
                            Pick {
                                metric: "latency_p50",
                                suite: "skew",
                                window: Some("medium"),
                                distribution: Some(distribution),
                                ..Pick::default()
                            }
                            .matches(m)
                        })
                        .map(|m| {
                            bar(
                                &series_name(m),
                                colour(results, &m.configuration),
                                m.split_delta.is_some(),
                                m.value,
                                "median latency (µs)",
                            )
                        })
                        .collect(),
                })
                .collect();
            bar_chart(
                title,
                "median latency per query (µs)",
                "distribution of score",
                &groups,
                &legend(results, &names),
            )
        }
        "next-memory" => {
            let series: Vec<Series> = names(results, ms, "windows")
                .into_iter()
                .filter(|name| kind_of(name) == "next")
                .map(|name| {
                    let at = |metric: &str, slice: Option<u32>| {
                        ms.iter()
                            .find(|m| {
                                m.configuration == name
                                    && m.suite.as_deref() == Some("windows")
                                    && m.metric == metric
                                    && m.slice == slice
                            })
                            .map(|m| m.value)
                    };
                    let points = (1..=64)
                        .filter_map(|slice| {
                            Some((
                                at("data_bytes_on_disk", Some(slice))? / 1_048_576.0,
                                at("global_index_bytes", Some(slice))? / 1024.0,
                            ))
                        })
                        .collect();
                    Series {
                        colour: colour(results, &name),
                        name,
                        points,
                    }
                })
                .collect();
            line_plot(
                title,
                "data tree on disk (MiB)",
                "global index (KiB)",
                &series,
            )
        }
        "next-two-indexes" => {
            let names = names(results, ms, "two-indexes");
            let score = super::score_path(ms);
            let second = ms
                .iter()
                .filter(|m| m.suite.as_deref() == Some("two-indexes"))
                .filter_map(|m| m.attribute.clone())
                .find(|a| *a != score && !a.contains('+'))
                .unwrap_or_else(|| "place.coordinates".to_owned());
            let metric_groups: [(String, Pick<'_>); 3] = [
                (
                    "mean PUT".to_owned(),
                    Pick {
                        metric: "put_latency_mean",
                        suite: "two-indexes",
                        ..Pick::default()
                    },
                ),
                (
                    format!("medium window on {score}"),
                    Pick {
                        metric: "latency_p50",
                        suite: "two-indexes",
                        attribute: Some(score.as_str()),
                        window: Some("medium"),
                        ..Pick::default()
                    },
                ),
                (
                    format!("medium window on {second}"),
                    Pick {
                        metric: "latency_p50",
                        suite: "two-indexes",
                        attribute: Some(second.as_str()),
                        window: Some("medium"),
                        ..Pick::default()
                    },
                ),
            ];
            let groups: Vec<BarGroup> = metric_groups
                .iter()
                .map(|(label, pick)| BarGroup {
                    label: label.clone(),
                    bars: names
                        .iter()
                        .filter_map(|name| {
                            Some(bar(
                                name,
                                colour(results, name),
                                false,
                                value(ms, *pick, name)?,
                                label,
                            ))
                        })
                        .collect(),
                })
                .collect();
            bar_chart(
                title,
                "µs (PUT: mean; windows: median)",
                "measurement",
                &groups,
                &legend(results, &names),
            )
        }
        _ => return None,
    })
}

fn delta_text(m: &Measurement) -> String {
    m.split_delta
        .map_or_else(|| "none".to_owned(), |d| format!("{d:e}"))
}

/// The tables of experiment 5: loads and sizes, then every query cell.
pub(crate) fn tables(experiment: &ExperimentResult) -> String {
    let ms = &experiment.measurements;
    let whole = |m: &Measurement| m.slice.is_none() && m.repetition.is_none();
    pivot_table(
        ms,
        &["suite", "configuration", "indexed", "distribution", "δ"],
        &|m| {
            (whole(m) && m.window.is_none() && m.op.as_deref() != Some("LOOKUP")).then(|| {
                vec![
                    opt(m.suite.as_ref()),
                    m.configuration.clone(),
                    opt(m.attribute.as_ref()),
                    opt(m.distribution.as_ref()),
                    delta_text(m),
                ]
            })
        },
        &[
            ("PUT mean µs", &|m| m.metric == "put_latency_mean", 1.0),
            ("PUT ops/s", &|m| m.metric == "put_throughput", 1.0),
            (
                "data MiB",
                &|m| m.metric == "bytes_on_disk" && m.tree.as_deref() == Some("data"),
                1.0 / 1_048_576.0,
            ),
            (
                "index trees MiB",
                &|m| m.metric == "bytes_on_disk" && m.tree.as_deref() == Some("index"),
                1.0 / 1_048_576.0,
            ),
            (
                "index memory KiB",
                &|m| m.metric == "index_memory_bytes",
                1.0 / 1024.0,
            ),
            (
                "global index KiB",
                &|m| m.metric == "global_index_bytes",
                1.0 / 1024.0,
            ),
            (
                "global entries",
                &|m| m.metric == "global_index_entries",
                1.0,
            ),
            (
                "global % of data",
                &|m| m.metric == "global_index_percent_of_data",
                1.0,
            ),
        ],
    ) + &pivot_table(
        ms,
        &[
            "suite",
            "configuration",
            "attribute",
            "distribution",
            "δ",
            "query",
        ],
        &|m| {
            (whole(m) && matches!(m.op.as_deref(), Some("RANGELOOKUP" | "LOOKUP"))).then(|| {
                vec![
                    opt(m.suite.as_ref()),
                    m.configuration.clone(),
                    opt(m.attribute.as_ref()),
                    opt(m.distribution.as_ref()),
                    delta_text(m),
                    match &m.window {
                        Some(window) => format!("{window} window"),
                        None => "point LOOKUP".to_owned(),
                    },
                ]
            })
        },
        &[
            ("p50 µs", &|m| m.metric == "latency_p50", 1.0),
            ("p95 µs", &|m| m.metric == "latency_p95", 1.0),
            ("mean µs", &|m| m.metric == "latency_mean", 1.0),
            ("hits/query", &|m| m.metric == "hits_per_query", 1.0),
            (
                "blocks/query",
                &|m| m.metric == "blocks_read_per_query",
                1.0,
            ),
        ],
    )
}
