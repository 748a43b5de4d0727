//! One CSV file per experiment (`{id}.csv`): every measurement as a row, the columns of
//! `results::Measurement` (empty cells where a label does not apply).

use crate::results::{ExperimentResult, Measurement};

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

fn row(experiment: &str, m: &Measurement) -> Vec<String> {
    let text = |value: &Option<String>| value.clone().unwrap_or_default();
    let number = |value: Option<u64>| value.map(|v| v.to_string()).unwrap_or_default();
    vec![
        experiment.to_owned(),
        m.configuration.clone(),
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
        m.metric.clone(),
        m.unit.clone(),
        m.value.to_string(),
        number(m.count),
        number(m.threads.map(u64::from)),
        text(&m.suite),
        text(&m.window),
        text(&m.distribution),
        m.split_delta.map(|d| d.to_string()).unwrap_or_default(),
    ]
}

/// The CSV text of one experiment (quoted by the `csv` crate where a cell needs it).
pub fn experiment_csv(experiment: &ExperimentResult) -> String {
    let mut writer = csv::Writer::from_writer(Vec::new());
    let written = writer.write_record(HEADER).and_then(|()| {
        experiment
            .measurements
            .iter()
            .try_for_each(|m| writer.write_record(row(&experiment.id, m)))
    });
    // Writing to memory fails only if a record has the wrong number of cells, which `row`
    // and `HEADER` rule out (a test checks it).
    debug_assert!(written.is_ok(), "{written:?}");
    let bytes = writer.into_inner().unwrap_or_default();
    String::from_utf8(bytes).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_have_one_cell_per_column_and_quote_commas() {
        let m = Measurement {
            attribute: Some("a,b".to_owned()),
            configuration: "x\"y".to_owned(),
            slice: Some(3),
            ..Measurement::new("lazy:sync-insert", "put_throughput", "ops/s", 12.5)
        };
        assert_eq!(row("static", &m).len(), HEADER.len());
        let experiment = ExperimentResult {
            id: "static".to_owned(),
            number: 1,
            title: String::new(),
            status: "measured".to_owned(),
            note: String::new(),
            paper: String::new(),
            method: String::new(),
            duration_s: 0.0,
            measurements: vec![m],
            verdicts: Vec::new(),
            figures: Vec::new(),
            scales: Vec::new(),
        };
        let text = experiment_csv(&experiment);
        let mut lines = text.lines();
        assert_eq!(lines.next(), Some(HEADER.join(",").as_str()));
        let line = lines.next().unwrap_or_default();
        assert!(line.starts_with("static,\"x\"\"y\",\"a,b\","), "{line}");
        assert!(line.contains(",put_throughput,ops/s,12.5,"), "{line}");
        assert_eq!(lines.next(), None);
    }
}
