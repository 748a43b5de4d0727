//! `index.html`: one self-contained page (inline CSS and SVG, no scripts, no network) with the
//! run's machine and configuration, one section per experiment (what the paper measured and
//! found, what Sift measured, figures, tables, verdicts) and the recommendation table.
//!
//! Every figure listed in an experiment's `figures` is drawn here from its measurements, as
//! `<figure id="fig-{id}" class="plot">` holding one `<svg>`; each configuration has the same
//! colour in every plot (`ConfigurationInfo::colour`, grey for the no-index baseline).

use super::svg::{
    bar_chart, box_plot, escape, line_plot, Bar, BarGroup, BoxGroup, BoxStats, LegendEntry,
    Segment, Series,
};
use crate::study::experiments::ExperimentId;
use crate::study::results::{ExperimentResult, FigureInfo, Measurement, StudyResults};
use crate::study::{BASELINE, BASELINE_COLOUR};
use std::fmt::Write;

mod diff_index;

const STYLE: &str = "body{font-family:sans-serif;max-width:1100px;margin:24px auto;padding:0 16px;\
color:#222;line-height:1.45}h1{margin-bottom:4px}h2{border-bottom:2px solid #ddd;padding-bottom:4px;\
margin-top:40px}table{border-collapse:collapse;margin:10px 0;font-size:13px}td,th{border:1px solid #ccc;\
padding:3px 7px;text-align:right}th{background:#f3f3f3}td.text,th.text{text-align:left}\
.figures{display:flex;flex-wrap:wrap;gap:12px}figure.plot{margin:0;border:1px solid #e3e3e3;padding:4px}\
figcaption{font-size:12px;color:#555;max-width:680px}.reproduced{background:#d8f0d8}\
.differs{background:#fbe0c8}.not-measured{background:#e8e8e8}.badge{padding:1px 6px;border-radius:3px;\
font-weight:bold;font-size:12px}.swatch{display:inline-block;width:12px;height:12px;margin-right:4px;\
vertical-align:middle}.note{color:#8a4b00}details{margin:8px 0}";

/// The colour of a configuration in this run.
pub(super) fn colour(results: &StudyResults, configuration: &str) -> String {
    if configuration == BASELINE {
        return BASELINE_COLOUR.to_owned();
    }
    results
        .configuration
        .index_configurations
        .iter()
        .find(|c| c.name == configuration)
        .map_or_else(|| "#333333".to_owned(), |c| c.colour.clone())
}

/// Configurations measured in `measurements`, in the run's order (baseline first).
fn configurations_in(results: &StudyResults, measurements: &[Measurement]) -> Vec<String> {
    let mut names = Vec::new();
    if measurements.iter().any(|m| m.configuration == BASELINE) {
        names.push(BASELINE.to_owned());
    }
    for configuration in &results.configuration.index_configurations {
        if measurements
            .iter()
            .any(|m| m.configuration == configuration.name)
        {
            names.push(configuration.name.clone());
        }
    }
    names
}

fn legend(results: &StudyResults, names: &[String]) -> Vec<LegendEntry> {
    names
        .iter()
        .map(|name| LegendEntry {
            name: if name == BASELINE {
                "no index".to_owned()
            } else {
                name.clone()
            },
            colour: colour(results, name),
            light: false,
        })
        .collect()
}

fn slug(path: &str) -> String {
    path.chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect()
}

/// The value of the single measurement matching `predicate`.
fn value(measurements: &[Measurement], predicate: impl Fn(&Measurement) -> bool) -> Option<f64> {
    measurements.iter().find(|m| predicate(m)).map(|m| m.value)
}

fn five_numbers(
    results: &StudyResults,
    measurements: &[Measurement],
    name: &str,
    matches: &dyn Fn(&Measurement) -> bool,
) -> Option<BoxStats> {
    let get = |metric: &str| {
        value(measurements, |m| {
            m.configuration == name && m.metric == metric && m.repetition.is_none() && matches(m)
        })
    };
    Some(BoxStats {
        name: name.to_owned(),
        colour: colour(results, name),
        p5: get("latency_p5")?,
        p25: get("latency_p25")?,
        p50: get("latency_p50")?,
        p75: get("latency_p75")?,
        p95: get("latency_p95")?,
    })
}

fn attribute_paths(results: &StudyResults) -> Vec<String> {
    results
        .configuration
        .data
        .attributes
        .iter()
        .map(|a| a.path.clone())
        .collect()
}

/// Query cells of an attribute: (op, top-K, selectivity) in measurement order.
fn query_cells(measurements: &[Measurement], path: &str) -> Vec<(String, String, Option<u64>)> {
    let mut cells: Vec<(String, String, Option<u64>)> = Vec::new();
    for m in measurements {
        if m.attribute.as_deref() != Some(path) || m.metric != "latency_p50" {
            continue;
        }
        if let (Some(op), Some(top_k)) = (&m.op, &m.top_k) {
            let cell = (op.clone(), top_k.clone(), m.selectivity);
            if !cells.contains(&cell) {
                cells.push(cell);
            }
        }
    }
    cells
}

fn cell_label(cell: &(String, String, Option<u64>)) -> String {
    match cell.2 {
        Some(selectivity) => format!("sel {selectivity}, K {}", cell.1),
        None => format!("K {}", cell.1),
    }
}

fn short_op(op: &str) -> &str {
    if op == "RANGELOOKUP" {
        "RANGE"
    } else {
        op
    }
}

/// Draws figure `figure` of `experiment`.
fn figure_svg(
    results: &StudyResults,
    experiment: &ExperimentResult,
    figure: &FigureInfo,
) -> String {
    if experiment.id == ExperimentId::Next.id() {
        if let Some(svg) = super::next::figure_svg(results, experiment, figure) {
            return svg;
        }
    }
    if let Some(svg) = diff_index::figure(results, experiment, figure) {
        return svg;
    }
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
        return line_plot(title, "documents loaded", "PUT throughput (ops/s)", &series);
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
        return bar_chart(
            title,
            "size on disk (MiB)",
            "indexed attribute",
            &groups,
            &entries,
        );
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
        return box_plot(
            title,
            "GET latency (µs)",
            "database (p5, p25, median, p75, p95)",
            &groups,
            &legend(results, &names),
        );
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
            return box_plot(
                title,
                &format!("{op} latency (µs)"),
                "top-K (and selectivity); boxes p25–p75, whiskers p5–p95, line median",
                &groups,
                &legend(results, &names),
            );
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
        return bar_chart(
            title,
            "blocks read per query",
            "query (op, selectivity, top-K)",
            &groups,
            &legend(results, &names),
        );
    }
    if let Some(rest) = id.strip_prefix("mixed-") {
        if let Some((workload, what)) = rest.rsplit_once('-') {
            let (metric, op, scale, y_label) = match what {
                "io" => (
                    "bytes_written_cumulative",
                    "ALL".to_owned(),
                    1.0 / 1_048_576.0,
                    "bytes written so far (MiB)".to_owned(),
                ),
                other => (
                    "latency_mean",
                    other.to_ascii_uppercase(),
                    1.0,
                    format!(
                        "mean {} latency (µs)",
                        if other == "all" { "operation" } else { other }
                    ),
                ),
            };
            let series: Vec<Series> = names
                .iter()
                .map(|name| {
                    let mut points: Vec<(f64, f64)> = ms
                        .iter()
                        .filter(|m| {
                            m.configuration == *name
                                && m.metric == metric
                                && m.workload.as_deref() == Some(workload)
                                && m.op.as_deref() == Some(op.as_str())
                        })
                        .filter_map(|m| Some((f64::from(m.slice?), m.value * scale)))
                        .collect();
                    points.sort_by(|a, b| a.0.total_cmp(&b.0));
                    Series {
                        name: name.clone(),
                        colour: colour(results, name),
                        points,
                    }
                })
                .collect();
            return line_plot(
                title,
                "tenth of the run (operations done / total × 10)",
                &y_label,
                &series,
            );
        }
    }
    if let Some(what) = id.strip_prefix("bloom-") {
        let (metric, op, scale, y_label) = match what {
            "lookup" => (
                "latency_mean",
                Some("LOOKUP"),
                1.0,
                "mean top-10 LOOKUP latency (µs)",
            ),
            "get" => ("latency_mean", Some("GET"), 1.0, "mean GET latency (µs)"),
            _ => (
                "bytes_on_disk",
                None,
                1.0 / 1_048_576.0,
                "size on disk (MiB)",
            ),
        };
        let series: Vec<Series> = names
            .iter()
            .map(|name| {
                let mut points: Vec<(f64, f64)> = ms
                    .iter()
                    .filter(|m| {
                        m.configuration == *name
                            && m.metric == metric
                            && m.op.as_deref() == op
                            && m.compression.as_deref() == Some("snappy")
                    })
                    .filter_map(|m| Some((f64::from(m.bloom_bits_per_key?), m.value * scale)))
                    .collect();
                points.sort_by(|a, b| a.0.total_cmp(&b.0));
                Series {
                    name: name.clone(),
                    colour: colour(results, name),
                    points,
                }
            })
            .collect();
        return line_plot(title, "bloom filter bits per primary key", y_label, &series);
    }
    if let Some(what) = id.strip_prefix("compression-") {
        let default_bits = results
            .configuration
            .engine
            .get("bloom_bits_per_key")
            .and_then(serde_json::Value::as_u64)
            .map(|b| b as u32);
        let (metric, op, scale, y_label) = match what {
            "put" => (
                "put_latency_mean",
                Some("PUT"),
                1.0,
                "mean PUT latency (µs)",
            ),
            "lookup" => (
                "latency_p50",
                Some("LOOKUP"),
                1.0,
                "median top-10 LOOKUP latency (µs)",
            ),
            _ => (
                "bytes_on_disk",
                None,
                1.0 / 1_048_576.0,
                "size on disk (MiB)",
            ),
        };
        let groups: Vec<BarGroup> = names
            .iter()
            .map(|name| BarGroup {
                label: name.clone(),
                bars: ["snappy", "none"]
                    .iter()
                    .filter_map(|compression| {
                        let v = value(ms, |m| {
                            m.configuration == *name
                                && m.metric == metric
                                && m.op.as_deref() == op
                                && m.compression.as_deref() == Some(*compression)
                                && m.bloom_bits_per_key == default_bits
                        })?;
                        Some(Bar {
                            name: format!("{name} {compression}"),
                            segments: vec![Segment {
                                value: v * scale,
                                colour: colour(results, name),
                                light: *compression == "none",
                                label: y_label.to_owned(),
                            }],
                        })
                    })
                    .collect(),
            })
            .collect();
        let mut entries = legend(results, &names);
        entries.push(LegendEntry {
            name: "light: uncompressed".to_owned(),
            colour: "#777777".to_owned(),
            light: true,
        });
        return bar_chart(title, y_label, "configuration", &groups, &entries);
    }
    if let Some(what) = id.strip_prefix("threads-") {
        let (op, y_label) = match what {
            "put" => ("PUT", "PUT throughput (documents/s)"),
            "lookup" => ("LOOKUP", "top-10 LOOKUP throughput (queries/s)"),
            _ => ("RANGELOOKUP", "top-10 RANGELOOKUP throughput (queries/s)"),
        };
        let series: Vec<Series> = names
            .iter()
            .map(|name| {
                let mut points: Vec<(f64, f64)> = ms
                    .iter()
                    .filter(|m| {
                        m.configuration == *name
                            && m.metric == "throughput"
                            && m.op.as_deref() == Some(op)
                    })
                    .filter_map(|m| Some((f64::from(m.threads?), m.value)))
                    .collect();
                points.sort_by(|a, b| a.0.total_cmp(&b.0));
                Series {
                    name: name.clone(),
                    colour: colour(results, name),
                    points,
                }
            })
            .collect();
        return line_plot(title, "client threads", y_label, &series);
    }
    if id == "vinyl-rate" {
        // The two schemes always run, in or out of the run's configurations: take their names
        // from the measurements, and fall back to fixed colours so they differ.
        let mut schemes: Vec<String> = Vec::new();
        for m in ms {
            if !schemes.contains(&m.configuration) {
                schemes.push(m.configuration.clone());
            }
        }
        let series: Vec<Series> = schemes
            .iter()
            .enumerate()
            .map(|(position, name)| {
                let points: Vec<(f64, f64)> = ms
                    .iter()
                    .filter(|m| m.configuration == *name && m.metric == "statements_per_second")
                    .filter_map(|m| {
                        let end = value(ms, |other| {
                            other.configuration == m.configuration
                                && other.slice == m.slice
                                && other.metric == "interval_end"
                        })?;
                        Some((end, m.value))
                    })
                    .collect();
                let known = colour(results, name);
                Series {
                    name: name.clone(),
                    colour: if known == "#333333" {
                        ["#0072b2", "#d55e00"][position % 2].to_owned()
                    } else {
                        known
                    },
                    points,
                }
            })
            .collect();
        return line_plot(
            title,
            "seconds since the measurement started",
            "statements per second",
            &series,
        );
    }
    bar_chart(title, "", "", &[], &[])
}

/// A table pivoted from measurements: rows keyed by `key`, one column per (header, predicate).
#[allow(clippy::type_complexity)]
pub(super) fn pivot_table(
    measurements: &[Measurement],
    key_headers: &[&str],
    key: &dyn Fn(&Measurement) -> Option<Vec<String>>,
    columns: &[(&str, &dyn Fn(&Measurement) -> bool, f64)],
) -> String {
    let mut rows: Vec<(Vec<String>, Vec<Option<f64>>)> = Vec::new();
    for m in measurements {
        let Some(k) = key(m) else { continue };
        for (position, (_, predicate, scale)) in columns.iter().enumerate() {
            if predicate(m) {
                let row = if let Some(index) = rows.iter().position(|(existing, _)| *existing == k)
                {
                    index
                } else {
                    rows.push((k.clone(), vec![None; columns.len()]));
                    rows.len() - 1
                };
                rows[row].1[position] = Some(m.value * scale);
            }
        }
    }
    if rows.is_empty() {
        return "<p>No measurements.</p>".to_owned();
    }
    let mut out = String::from("<table><tr>");
    for header in key_headers {
        let _ = write!(out, "<th class=\"text\">{}</th>", escape(header));
    }
    for (header, _, _) in columns {
        let _ = write!(out, "<th>{}</th>", escape(header));
    }
    out.push_str("</tr>");
    for (k, values) in rows {
        out.push_str("<tr>");
        for cell in k {
            let _ = write!(out, "<td class=\"text\">{}</td>", escape(&cell));
        }
        for v in values {
            let _ = write!(
                out,
                "<td>{}</td>",
                v.map_or_else(|| "–".to_owned(), format_cell)
            );
        }
        out.push_str("</tr>");
    }
    out.push_str("</table>");
    out
}

fn format_cell(value: f64) -> String {
    if value.abs() >= 1000.0 {
        format!("{value:.0}")
    } else if value.abs() >= 10.0 {
        format!("{value:.1}")
    } else {
        format!("{value:.2}")
    }
}

pub(super) fn opt(text: Option<&String>) -> String {
    text.cloned().unwrap_or_else(|| "–".to_owned())
}

fn experiment_tables(experiment: &ExperimentResult) -> String {
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
        "mixed" => {
            pivot_table(
                ms,
                &["configuration", "workload"],
                &|m| whole(m).then(|| vec![m.configuration.clone(), opt(m.workload.as_ref())]),
                &[
                    (
                        "all ops mean µs",
                        &|m| m.op.as_deref() == Some("ALL") && m.metric == "latency_mean",
                        1.0,
                    ),
                    (
                        "PUT µs",
                        &|m| m.op.as_deref() == Some("PUT") && m.metric == "latency_mean",
                        1.0,
                    ),
                    (
                        "GET µs",
                        &|m| m.op.as_deref() == Some("GET") && m.metric == "latency_mean",
                        1.0,
                    ),
                    (
                        "LOOKUP µs",
                        &|m| m.op.as_deref() == Some("LOOKUP") && m.metric == "latency_mean",
                        1.0,
                    ),
                    (
                        "UPDATE µs",
                        &|m| m.op.as_deref() == Some("UPDATE") && m.metric == "latency_mean",
                        1.0,
                    ),
                ],
            ) + &pivot_table(
                ms,
                &["configuration", "workload"],
                &|m| {
                    (m.slice == Some(10))
                        .then(|| vec![m.configuration.clone(), opt(m.workload.as_ref())])
                },
                &[
                    (
                        "MiB written (whole run)",
                        &|m| m.metric == "bytes_written_cumulative",
                        1.0 / 1_048_576.0,
                    ),
                    (
                        "blocks read (whole run)",
                        &|m| m.metric == "blocks_read_cumulative",
                        1.0,
                    ),
                ],
            )
        }
        "bloom-compression" => {
            thread_table(ms)
                + &pivot_table(
                    ms,
                    &["configuration", "bits/key", "compression"],
                    &|m| {
                        Some(vec![
                            m.configuration.clone(),
                            m.bloom_bits_per_key
                                .map_or_else(|| "–".to_owned(), |b| b.to_string()),
                            opt(m.compression.as_ref()),
                        ])
                    },
                    &[
                        (
                            "size MiB",
                            &|m| m.metric == "bytes_on_disk",
                            1.0 / 1_048_576.0,
                        ),
                        ("PUT mean µs", &|m| m.metric == "put_latency_mean", 1.0),
                        (
                            "GET mean µs",
                            &|m| m.metric == "latency_mean" && m.op.as_deref() == Some("GET"),
                            1.0,
                        ),
                        (
                            "LOOKUP mean µs",
                            &|m| m.metric == "latency_mean" && m.op.as_deref() == Some("LOOKUP"),
                            1.0,
                        ),
                        (
                            "LOOKUP p50 µs",
                            &|m| m.metric == "latency_p50" && m.op.as_deref() == Some("LOOKUP"),
                            1.0,
                        ),
                        (
                            "blocks/LOOKUP",
                            &|m| {
                                m.metric == "blocks_read_per_query"
                                    && m.op.as_deref() == Some("LOOKUP")
                            },
                            1.0,
                        ),
                        (
                            "RANGE p50 µs",
                            &|m| {
                                m.metric == "latency_p50" && m.op.as_deref() == Some("RANGELOOKUP")
                            },
                            1.0,
                        ),
                    ],
                )
        }
        "vinyl" => pivot_table(
            ms,
            &["configuration"],
            &|m| whole(m).then(|| vec![m.configuration.clone()]),
            &[
                (
                    "mean statements/s",
                    &|m| m.metric == "statements_per_second_mean",
                    1.0,
                ),
                (
                    "median statements/s",
                    &|m| m.metric == "statements_per_second_median",
                    1.0,
                ),
                (
                    "max statements/s",
                    &|m| m.metric == "statements_per_second_max",
                    1.0,
                ),
                ("statements", &|m| m.metric == "statements", 1.0),
            ],
        ),
        "next" => super::next::tables(experiment),
        "diff-index" => diff_index::tables(experiment),
        _ => String::new(),
    }
}

/// Experiment 4's thread sweep: throughput per configuration and client threads.
fn thread_table(ms: &[Measurement]) -> String {
    if !ms.iter().any(|m| m.threads.is_some()) {
        return String::new();
    }
    pivot_table(
        ms,
        &["configuration", "client threads"],
        &|m| {
            m.threads
                .map(|threads| vec![m.configuration.clone(), threads.to_string()])
        },
        &[
            (
                "PUT ops/s",
                &|m| m.metric == "throughput" && m.op.as_deref() == Some("PUT"),
                1.0,
            ),
            (
                "LOOKUP top-10 queries/s",
                &|m| m.metric == "throughput" && m.op.as_deref() == Some("LOOKUP"),
                1.0,
            ),
            (
                "RANGELOOKUP top-10 queries/s",
                &|m| m.metric == "throughput" && m.op.as_deref() == Some("RANGELOOKUP"),
                1.0,
            ),
        ],
    )
}

fn verdict_table(experiment: &ExperimentResult) -> String {
    if experiment.verdicts.is_empty() {
        return String::new();
    }
    let mut out = String::from(
        "<table class=\"verdicts\"><tr><th class=\"text\">claim</th><th class=\"text\">source</th>\
         <th class=\"text\">verdict</th><th class=\"text\">deciding numbers</th></tr>",
    );
    for v in &experiment.verdicts {
        let _ = write!(
            out,
            "<tr><td class=\"text\">{}</td><td class=\"text\">{}</td><td class=\"text\"><span class=\"badge {}\">{}</span></td><td class=\"text\">{}</td></tr>",
            escape(&v.claim),
            escape(&v.source),
            escape(&v.outcome),
            escape(&v.outcome.replace('-', " ")),
            escape(&v.evidence)
        );
    }
    out.push_str("</table>");
    out
}

fn section(out: &mut String, results: &StudyResults, experiment: &ExperimentResult) {
    let _ = write!(
        out,
        "<section id=\"experiment-{}\"><h2>{}. {}</h2>",
        escape(&experiment.id),
        experiment.number,
        escape(&experiment.title)
    );
    let _ = write!(
        out,
        "<p><b>Status:</b> <span class=\"badge {}\">{}</span>{}</p>",
        if experiment.status == "not-measured" {
            "not-measured"
        } else if experiment.status == "partial" {
            "differs"
        } else {
            "reproduced"
        },
        escape(&experiment.status),
        if experiment.duration_s > 0.0 {
            format!(" in {:.1} s", experiment.duration_s)
        } else {
            String::new()
        }
    );
    if !experiment.note.is_empty() {
        let _ = write!(out, "<p class=\"note\">{}</p>", escape(&experiment.note));
    }
    let _ = write!(
        out,
        "<h3>What the paper measured and found</h3><p>{}</p><h3>What Sift measured</h3><p>{}</p>",
        escape(&experiment.paper),
        escape(&experiment.method)
    );
    if !experiment.figures.is_empty() {
        out.push_str("<div class=\"figures\">");
        for figure in &experiment.figures {
            let _ = write!(
                out,
                "<figure id=\"fig-{}\" class=\"plot\">{}<figcaption>{}</figcaption></figure>",
                escape(&figure.id),
                figure_svg(results, experiment, figure),
                escape(&figure.title)
            );
        }
        out.push_str("</div>");
    }
    let tables = experiment_tables(experiment);
    if !tables.is_empty() {
        let _ = write!(
            out,
            "<details open><summary>Table of measurements (every number is in results.json and {}.csv)</summary>{tables}</details>",
            escape(&experiment.id)
        );
    }
    if !experiment.verdicts.is_empty() {
        out.push_str("<h3>Verdicts from this run</h3>");
        out.push_str(&verdict_table(experiment));
    }
    out.push_str("</section>");
}

fn recommendations(out: &mut String, results: &StudyResults) {
    out.push_str(
        "<section id=\"recommendations\"><h2>Recommendations</h2><p>For each attribute and \
         workload, the configuration with the lowest cost on this machine — the LevelDB++ \
         paper's Figure 2 made quantitative. Every row applies the cost model that <code>sift \
         advise --workload FILE</code> applies to your workload (docs/advise.md): the Table 7b \
         operation mix (or one query shape) times the mean latencies of experiments 1–3 measured \
         on that attribute; where experiment 3 ran the mix, the row also says what it measured. \
         No constraint (uniqueness, read-your-writes) is applied here; <code>sift advise</code> \
         applies them.</p>",
    );
    if results.recommendations.is_empty() {
        out.push_str("<p>Not measured: run experiments 1–3.</p></section>");
        return;
    }
    out.push_str(
        "<table><tr><th class=\"text\">attribute</th><th class=\"text\">workload</th>\
         <th class=\"text\">choose</th><th>µs/op</th><th class=\"text\">runner-up</th><th>µs/op</th>\
         <th class=\"text\">why</th><th class=\"text\">basis</th></tr>",
    );
    for r in &results.recommendations {
        let chosen = r.best.as_deref().map_or_else(
            || "not measured".to_owned(),
            |b| {
                format!(
                    "<span class=\"swatch\" style=\"background:{}\"></span>{}",
                    colour(results, b),
                    escape(b)
                )
            },
        );
        let _ = write!(
            out,
            "<tr><td class=\"text\">{}</td><td class=\"text\">{}</td><td class=\"text\">{chosen}</td><td>{}</td><td class=\"text\">{}</td><td>{}</td><td class=\"text\">{}</td><td class=\"text\">{}</td></tr>",
            escape(&r.attribute),
            escape(&r.workload),
            r.cost_us_per_op.map_or_else(|| "–".to_owned(), format_cell),
            escape(r.runner_up.as_deref().unwrap_or("–")),
            r.runner_up_cost_us_per_op.map_or_else(|| "–".to_owned(), format_cell),
            escape(&r.why),
            escape(&r.basis)
        );
    }
    out.push_str("</table></section>");
}

/// The whole page.
pub fn render(results: &StudyResults) -> String {
    let mut out = String::new();
    let machine = &results.machine;
    let configuration = &results.configuration;
    let _ = write!(
        out,
        "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>Sift comparative \
         study</title><style>{STYLE}</style></head><body><h1>Sift comparative study</h1>\
         <p>Secondary-index configurations of Sift measured against the findings of LevelDB++ \
         (SIGMOD'18), NEXT (SIGMOD'25), Vinyl and Diff-Index. Preset <b>{}</b>, seed {}, {} \
         data, run {} on {} CPUs, {} {}, rustc {}, sift {} (commit {}).</p>",
        escape(&configuration.preset),
        configuration.seed,
        escape(&match &configuration.data.path {
            Some(path) => format!("{} ({path})", configuration.data.source),
            None => configuration.data.source.clone(),
        }),
        escape(&machine.date_utc),
        machine.cpu_count,
        escape(&machine.os),
        escape(&machine.arch),
        escape(machine.rustc_version.as_deref().unwrap_or("unknown")),
        escape(&machine.sift_version),
        escape(machine.git_commit.as_deref().unwrap_or("unknown"))
    );
    out.push_str("<h3>Index configurations</h3><table><tr><th class=\"text\">configuration</th><th class=\"text\">colour</th><th class=\"text\">status</th></tr>");
    let _ = write!(
        out,
        "<tr><td class=\"text\">no index (baseline)</td><td class=\"text\"><span class=\"swatch\" style=\"background:{BASELINE_COLOUR}\"></span>{BASELINE_COLOUR}</td><td class=\"text\">experiment 1 only</td></tr>"
    );
    for c in &configuration.index_configurations {
        let _ = write!(
            out,
            "<tr><td class=\"text\">{}</td><td class=\"text\"><span class=\"swatch\" style=\"background:{}\"></span>{}</td><td class=\"text\">{}</td></tr>",
            escape(&c.name),
            escape(&c.colour),
            escape(&c.colour),
            if c.known {
                "measured".to_owned()
            } else {
                escape(&c.note)
            }
        );
    }
    out.push_str("</table>");
    out.push_str("<h3>Scaled down from the paper</h3><ul>");
    for note in &configuration.scaled_down {
        let _ = write!(out, "<li>{}</li>", escape(note));
    }
    out.push_str("</ul>");
    let count = |outcome: &str| {
        results
            .experiments
            .iter()
            .flat_map(|e| &e.verdicts)
            .filter(|v| v.outcome == outcome)
            .count()
    };
    let _ = write!(
        out,
        "<p><b>Verdicts:</b> <span class=\"badge reproduced\">{} reproduced</span> \
         <span class=\"badge differs\">{} differ</span> <span class=\"badge not-measured\">{} not \
         measured</span></p><h3>Contents</h3><ol>",
        count("reproduced"),
        count("differs"),
        count("not-measured")
    );
    for id in ExperimentId::ALL {
        let _ = write!(
            out,
            "<li><a href=\"#experiment-{}\">{}</a></li>",
            id.id(),
            escape(id.title())
        );
    }
    out.push_str("<li><a href=\"#recommendations\">Recommendations</a></li></ol>");
    for id in ExperimentId::ALL {
        match results.experiments.iter().find(|e| e.id == id.id()) {
            Some(experiment) => section(&mut out, results, experiment),
            None => {
                let _ = write!(
                    out,
                    "<section id=\"experiment-{}\"><h2>{}. {}</h2><p><span class=\"badge \
                     not-measured\">not run</span> Not part of this report: run <code>sift study \
                     --only {}</code> with the same options to add it.</p></section>",
                    id.id(),
                    id.number(),
                    escape(id.title()),
                    id.id()
                );
            }
        }
    }
    recommendations(&mut out, results);
    out.push_str(
        "<p style=\"color:#777;font-size:12px\">Files: results.json (every measurement with \
         units, the configuration and the machine; schema docs/study-results.schema.json), one \
         CSV per experiment. Latencies are the time inside Sift's call (document generation not \
         included).</p></body></html>\n",
    );
    out
}
