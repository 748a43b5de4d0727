//! The report section of experiments 1 and 2: its figures and its table of measurements.

use crate::figure::svg::{
    bar_chart, box_plot, line_plot, Bar, BarGroup, BoxGroup, BoxStats, LegendEntry, Segment, Series,
};
use crate::figure::{
    attribute_paths, cell_label, colour, configurations_in, five_numbers, legend, opt, pivot_table,
    query_cells, short_op, slug, value,
};
use crate::results::{ExperimentResult, FigureInfo, Measurement, StudyResults};
use crate::BASELINE;

/// The figure `figure` of this experiment; `None` if it is not one of its figures.
pub(crate) fn figure(
    results: &StudyResults,
    experiment: &ExperimentResult,
    figure: &FigureInfo,
) -> Option<String> {
    let ms = &experiment.measurements;
    let names = configurations_in(results, ms);
    let title = figure.title.as_str();
    let id = figure.id.as_str();
    let paths = attribute_paths(results);
    let path_of = |prefix: &str| {
        paths
            .iter()
            .find(|p| id == format!("{prefix}{}", slug(p)))
            .cloned()
    };
    if let Some(path) = path_of("static-put-") {
        let series: Vec<Series> = names
            .iter()
            .map(|name| {
                let mut points: Vec<(f64, f64)> = ms
                    .iter()
                    .filter(|m| {
                        m.configuration == *name
                            && m.metric == "put_throughput"
                            && m.slice.is_some()
                            && (name == BASELINE || m.attribute.as_deref() == Some(path.as_str()))
                    })
                    .filter_map(|m| {
                        let loaded = value(ms, |other| {
                            other.configuration == m.configuration
                                && other.attribute == m.attribute
                                && other.slice == m.slice
                                && other.metric == "documents_loaded"
                        })?;
                        Some((loaded, m.value))
                    })
                    .collect();
                points.sort_by(|a, b| a.0.total_cmp(&b.0));
                Series {
                    name: if name == BASELINE {
                        "no index".to_owned()
                    } else {
                        name.clone()
                    },
                    colour: colour(results, name),
                    points,
                }
            })
            .collect();
        return Some(line_plot(
            title,
            "documents loaded",
            "PUT throughput (ops/s)",
            &series,
        ));
    }
    if id == "static-size" {
        let mut groups = Vec::new();
        let bar = |name: &str, path: Option<&str>| -> Option<Bar> {
            let size = |tree: &str| {
                value(ms, |m| {
                    m.configuration == name
                        && m.metric == "bytes_on_disk"
                        && m.tree.as_deref() == Some(tree)
                        && m.attribute.as_deref() == path
                })
            };
            let data = size("data")?;
            let index = size("index").unwrap_or(0.0) + size("other").unwrap_or(0.0);
            let c = colour(results, name);
            Some(Bar {
                name: name.to_owned(),
                segments: vec![
                    Segment {
                        value: data / 1_048_576.0,
                        colour: c.clone(),
                        light: true,
                        label: "data tree (MiB)".to_owned(),
                    },
                    Segment {
                        value: index / 1_048_576.0,
                        colour: c,
                        light: false,
                        label: "index trees and catalog (MiB)".to_owned(),
                    },
                ],
            })
        };
        if let Some(baseline) = bar(BASELINE, None) {
            groups.push(BarGroup {
                label: "no index".to_owned(),
                bars: vec![baseline],
            });
        }
        for path in &paths {
            let bars: Vec<Bar> = names
                .iter()
                .filter(|n| n.as_str() != BASELINE)
                .filter_map(|n| bar(n, Some(path)))
                .collect();
            if !bars.is_empty() {
                groups.push(BarGroup {
                    label: format!("index on {path}"),
                    bars,
                });
            }
        }
        let mut entries = legend(results, &names);
        entries.push(LegendEntry {
            name: "light: data tree, solid: index".to_owned(),
            colour: "#777777".to_owned(),
            light: true,
        });
        return Some(bar_chart(
            title,
            "size on disk (MiB)",
            "indexed attribute",
            &groups,
            &entries,
        ));
    }
    if id == "static-get" {
        let mut groups = Vec::new();
        if let Some(b) = five_numbers(results, ms, BASELINE, &|m| {
            m.op.as_deref() == Some("GET") && m.attribute.is_none()
        }) {
            groups.push(BoxGroup {
                label: "no index".to_owned(),
                boxes: vec![b],
            });
        }
        for path in &paths {
            let boxes: Vec<BoxStats> = names
                .iter()
                .filter_map(|n| {
                    five_numbers(results, ms, n, &|m| {
                        m.op.as_deref() == Some("GET") && m.attribute.as_deref() == Some(path)
                    })
                })
                .collect();
            if !boxes.is_empty() {
                groups.push(BoxGroup {
                    label: format!("index on {path}"),
                    boxes,
                });
            }
        }
        return Some(box_plot(
            title,
            "GET latency (µs)",
            "database (p5, p25, median, p75, p95)",
            &groups,
            &legend(results, &names),
        ));
    }
    for (prefix, op) in [
        ("queries-lookup-", "LOOKUP"),
        ("queries-range-", "RANGELOOKUP"),
    ] {
        if let Some(path) = path_of(prefix) {
            let groups: Vec<BoxGroup> = query_cells(ms, &path)
                .into_iter()
                .filter(|cell| cell.0 == op)
                .map(|cell| BoxGroup {
                    label: cell_label(&cell),
                    boxes: names
                        .iter()
                        .filter_map(|n| {
                            five_numbers(results, ms, n, &|m| {
                                m.attribute.as_deref() == Some(path.as_str())
                                    && m.op.as_deref() == Some(op)
                                    && m.top_k.as_deref() == Some(cell.1.as_str())
                                    && m.selectivity == cell.2
                            })
                        })
                        .collect(),
                })
                .collect();
            return Some(box_plot(
                title,
                &format!("{op} latency (µs)"),
                "top-K (and selectivity); boxes p25–p75, whiskers p5–p95, line median",
                &groups,
                &legend(results, &names),
            ));
        }
    }
    if let Some(path) = path_of("queries-blocks-") {
        let groups: Vec<BarGroup> = query_cells(ms, &path)
            .into_iter()
            .map(|cell| BarGroup {
                label: format!("{} {}", short_op(&cell.0), cell_label(&cell)),
                bars: names
                    .iter()
                    .filter_map(|n| {
                        let blocks = value(ms, |m| {
                            m.configuration == *n
                                && m.metric == "blocks_read_per_query"
                                && m.attribute.as_deref() == Some(path.as_str())
                                && m.op.as_deref() == Some(cell.0.as_str())
                                && m.top_k.as_deref() == Some(cell.1.as_str())
                                && m.selectivity == cell.2
                        })?;
                        Some(Bar {
                            name: n.clone(),
                            segments: vec![Segment {
                                value: blocks,
                                colour: colour(results, n),
                                light: false,
                                label: "blocks per query".to_owned(),
                            }],
                        })
                    })
                    .collect(),
            })
            .collect();
        return Some(bar_chart(
            title,
            "blocks read per query",
            "query (op, selectivity, top-K)",
            &groups,
            &legend(results, &names),
        ));
    }
    None
}

/// The table of its measurements under the figures.
pub(crate) fn tables(experiment: &ExperimentResult) -> String {
    let ms = &experiment.measurements;
    let whole = |m: &Measurement| m.slice.is_none() && m.repetition.is_none();
    match experiment.id.as_str() {
        "static" => pivot_table(
            ms,
            &["configuration", "indexed attribute"],
            &|m| whole(m).then(|| vec![m.configuration.clone(), opt(m.attribute.as_ref())]),
            &[
                ("PUT mean µs", &|m| m.metric == "put_latency_mean", 1.0),
                ("PUT p99 µs", &|m| m.metric == "put_latency_p99", 1.0),
                ("PUT ops/s", &|m| m.metric == "put_throughput", 1.0),
                (
                    "data MiB",
                    &|m| m.metric == "bytes_on_disk" && m.tree.as_deref() == Some("data"),
                    1.0 / 1_048_576.0,
                ),
                (
                    "index MiB",
                    &|m| m.metric == "bytes_on_disk" && m.tree.as_deref() == Some("index"),
                    1.0 / 1_048_576.0,
                ),
                (
                    "write amplification",
                    &|m| m.metric == "write_amplification",
                    1.0,
                ),
                ("settle s", &|m| m.metric == "settle_time", 1.0),
                (
                    "GET p50 µs",
                    &|m| m.metric == "latency_p50" && m.op.as_deref() == Some("GET"),
                    1.0,
                ),
                (
                    "GET p95 µs",
                    &|m| m.metric == "latency_p95" && m.op.as_deref() == Some("GET"),
                    1.0,
                ),
            ],
        ),
        "queries" => pivot_table(
            ms,
            &["configuration", "attribute", "op", "top-K", "selectivity"],
            &|m| {
                whole(m).then(|| {
                    vec![
                        m.configuration.clone(),
                        opt(m.attribute.as_ref()),
                        opt(m.op.as_ref()),
                        opt(m.top_k.as_ref()),
                        m.selectivity
                            .map_or_else(|| "–".to_owned(), |s| s.to_string()),
                    ]
                })
            },
            &[
                ("p5 µs", &|m| m.metric == "latency_p5", 1.0),
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
        ),
        _ => String::new(),
    }
}
