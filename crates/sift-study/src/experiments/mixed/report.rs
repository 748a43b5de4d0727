//! The report section of experiment 3: its figures and its table of measurements.

use crate::figure::svg::{line_plot, Series};
use crate::figure::{colour, configurations_in, opt, pivot_table};
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
            return Some(line_plot(
                title,
                "tenth of the run (operations done / total × 10)",
                &y_label,
                &series,
            ));
        }
    }
    None
}

/// The table of its measurements under the figures.
pub(crate) fn tables(experiment: &ExperimentResult) -> String {
    let ms = &experiment.measurements;
    let whole = |m: &Measurement| m.slice.is_none() && m.repetition.is_none();
    {
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
}
