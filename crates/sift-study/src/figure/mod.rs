//! What the experiments' report sections draw with: the plots (`svg`), each configuration's
//! colour and legend entry, selections of measurements, and the pivoted tables under the
//! figures. Below both `experiments` (whose `report.rs` files use it) and `report` (the page).

pub mod svg;

use crate::results::{Measurement, StudyResults};
use crate::{BASELINE, BASELINE_COLOUR};
use std::fmt::Write;
use svg::{escape, BoxStats, LegendEntry};

/// The colour of a configuration in this run.
pub(crate) fn colour(results: &StudyResults, configuration: &str) -> String {
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
pub(crate) fn configurations_in(
    results: &StudyResults,
    measurements: &[Measurement],
) -> Vec<String> {
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

pub(crate) fn legend(results: &StudyResults, names: &[String]) -> Vec<LegendEntry> {
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

pub(crate) fn slug(path: &str) -> String {
    path.chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect()
}

/// The value of the single measurement matching `predicate`.
pub(crate) fn value(
    measurements: &[Measurement],
    predicate: impl Fn(&Measurement) -> bool,
) -> Option<f64> {
    measurements.iter().find(|m| predicate(m)).map(|m| m.value)
}

pub(crate) fn five_numbers(
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

pub(crate) fn attribute_paths(results: &StudyResults) -> Vec<String> {
    results
        .configuration
        .data
        .attributes
        .iter()
        .map(|a| a.path.clone())
        .collect()
}

/// Query cells of an attribute: (op, top-K, selectivity) in measurement order.
pub(crate) fn query_cells(
    measurements: &[Measurement],
    path: &str,
) -> Vec<(String, String, Option<u64>)> {
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

pub(crate) fn cell_label(cell: &(String, String, Option<u64>)) -> String {
    match cell.2 {
        Some(selectivity) => format!("sel {selectivity}, K {}", cell.1),
        None => format!("K {}", cell.1),
    }
}

pub(crate) fn short_op(op: &str) -> &str {
    if op == "RANGELOOKUP" {
        "RANGE"
    } else {
        op
    }
}

/// A table pivoted from measurements: rows keyed by `key`, one column per (header, predicate).
#[allow(clippy::type_complexity)]
pub(crate) fn pivot_table(
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

pub(crate) fn format_cell(value: f64) -> String {
    if value.abs() >= 1000.0 {
        format!("{value:.0}")
    } else if value.abs() >= 10.0 {
        format!("{value:.1}")
    } else {
        format!("{value:.2}")
    }
}

pub(crate) fn opt(text: Option<&String>) -> String {
    text.cloned().unwrap_or_else(|| "–".to_owned())
}
