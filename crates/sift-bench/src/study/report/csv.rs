//! One CSV file per experiment (`{id}.csv`): every measurement as a row, the columns of
//! `results::Measurement` (empty cells where a label does not apply).

use crate::study::results::{ExperimentResult, Measurement};

pub const HEADER: [&str; 21] = [
    "experiment",
    "configuration",
    "attribute",
    "op",
    "workload",
    "top_k",
    "selectivity",
    "slice",
    "repetition",
    "tree",
    "bloom_bits_per_key",
    "compression",
    "metric",
    "unit",
    "value",
    "count",
    "threads",
    "suite",
    "window",
    "distribution",
    "split_delta",
];

/// Quotes a field when it holds a comma, a quote or a line break.
pub fn field(text: &str) -> String {
    if text.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", text.replace('"', "\"\""))
    } else {
        text.to_owned()
    }
}

fn row(experiment: &str, m: &Measurement) -> String {
    let text = |value: &Option<String>| value.as_deref().map(field).unwrap_or_default();
    let number = |value: Option<u64>| value.map(|v| v.to_string()).unwrap_or_default();
    [
        field(experiment),
        field(&m.configuration),
        text(&m.attribute),
        text(&m.op),
        text(&m.workload),
        text(&m.top_k),
        number(m.selectivity),
        number(m.slice.map(u64::from)),
        number(m.repetition.map(u64::from)),
        text(&m.tree),
        number(m.bloom_bits_per_key.map(u64::from)),
        text(&m.compression),
        field(&m.metric),
        field(&m.unit),
        m.value.to_string(),
        number(m.count),
        number(m.threads.map(u64::from)),
        text(&m.suite),
        text(&m.window),
        text(&m.distribution),
        m.split_delta.map(|d| d.to_string()).unwrap_or_default(),
    ]
    .join(",")
}

/// The CSV text of one experiment.
pub fn experiment_csv(experiment: &ExperimentResult) -> String {
    let mut out = HEADER.join(",");
    out.push('\n');
    for m in &experiment.measurements {
        out.push_str(&row(&experiment.id, m));
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_have_one_cell_per_column_and_quote_commas() {
        let m = Measurement {
            attribute: Some("a,b".to_owned()),
            slice: Some(3),
            ..Measurement::new("lazy:sync-insert", "put_throughput", "ops/s", 12.5)
        };
        let line = row("static", &m);
        assert!(line.contains("\"a,b\""));
        assert!(line.starts_with("static,lazy:sync-insert,"));
        assert!(line.contains(",put_throughput,ops/s,12.5,"));
        assert_eq!(field("x\"y"), "\"x\"\"y\"");
    }
}
