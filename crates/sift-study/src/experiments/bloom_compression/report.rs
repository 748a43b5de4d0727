//! The report section of experiment 4 (the bloom and compression sweeps and the client-thread sweep): its figures and its table of measurements.

use crate::figure::svg::{bar_chart, line_plot, Bar, BarGroup, LegendEntry, Segment, Series};
use crate::figure::{colour, configurations_in, legend, opt, pivot_table, value};
use crate::results::{ExperimentResult, FigureInfo, Measurement, StudyResults};

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
        return Some(line_plot(
            title,
            "bloom filter bits per primary key",
            y_label,
            &series,
        ));
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
        return Some(bar_chart(
            title,
            y_label,
            "configuration",
            &groups,
            &entries,
        ));
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
        return Some(line_plot(title, "client threads", y_label, &series));
    }
    None
}

/// The table of its measurements under the figures.
pub(crate) fn tables(experiment: &ExperimentResult) -> String {
    let ms = &experiment.measurements;
    {
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
                            m.metric == "blocks_read_per_query" && m.op.as_deref() == Some("LOOKUP")
                        },
                        1.0,
                    ),
                    (
                        "RANGE p50 µs",
                        &|m| m.metric == "latency_p50" && m.op.as_deref() == Some("RANGELOOKUP"),
                        1.0,
                    ),
                ],
            )
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
