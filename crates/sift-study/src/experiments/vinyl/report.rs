//! The report section of experiment 6: its figures and its table of measurements.

use crate::figure::svg::{line_plot, Series};
use crate::figure::{colour, pivot_table, value};
use crate::results::{ExperimentResult, FigureInfo, Measurement, StudyResults};

/// The figure `figure` of this experiment; `None` if it is not one of its figures.
pub(crate) fn figure(
    results: &StudyResults,
    experiment: &ExperimentResult,
    figure: &FigureInfo,
) -> Option<String> {
    let ms = &experiment.measurements;
    let title = figure.title.as_str();
    let id = figure.id.as_str();
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
        return Some(line_plot(
            title,
            "seconds since the measurement started",
            "statements per second",
            &series,
        ));
    }
    None
}

/// The table of its measurements under the figures.
pub(crate) fn tables(experiment: &ExperimentResult) -> String {
    let ms = &experiment.measurements;
    let whole = |m: &Measurement| m.slice.is_none() && m.repetition.is_none();
    pivot_table(
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
    )
}
