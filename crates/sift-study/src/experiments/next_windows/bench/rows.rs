//! The printed rows of `sift bench index --next-suite` (a table, or JSON lines).

use super::measure::mean;
use super::measure::percentile;
use super::measure::sorted;
use super::measure::CaseResult;
use super::plan::QueryOp;
use crate::experiments::round;
use serde::Serialize;

/// One printed measurement of the suite (`--json`: one object per line). Fields that do not
/// apply are `null`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct WindowRow {
    pub suite: String,
    /// `kind[:maintenance]` or `none`.
    pub configuration: String,
    /// Indexed/queried attribute paths (`+`-joined for PUT and SIZE rows with two indexes).
    pub attribute: Option<String>,
    pub distribution: String,
    /// δ of next / sst-local (`null`: no value-aware split).
    pub split_delta: Option<f64>,
    /// PUT, SIZE, MEMORY (during the load: the global index, and all the index holds in memory),
    /// RANGE, WITHIN, LOOKUP, NOTE.
    pub op: String,
    /// small, medium, large.
    pub window: Option<String>,
    pub window_width: Option<f64>,
    /// values (score), ms (created_at), degrees (geo: side of the square).
    pub window_unit: Option<String>,
    /// Documents loaded (PUT, SIZE, MEMORY) or queries measured.
    pub n: u64,
    pub ops_per_sec: Option<f64>,
    pub mean_us: Option<f64>,
    pub p50_us: Option<f64>,
    pub p95_us: Option<f64>,
    pub hits_per_op: Option<f64>,
    pub blocks_per_op: Option<f64>,
    pub data_bytes: Option<u64>,
    pub index_bytes: Option<u64>,
    pub index_memory_bytes: Option<u64>,
    pub global_index_bytes: Option<u64>,
    pub global_index_entries: Option<u64>,
    /// Global index memory as a percentage of the data tree on disk.
    pub global_index_percent_of_data: Option<f64>,
    pub note: Option<String>,
}

/// The rows of a case.
pub fn rows(result: &CaseResult) -> Vec<WindowRow> {
    let case = &result.case;
    let paths = result
        .targets
        .iter()
        .map(|t| t.path())
        .collect::<Vec<_>>()
        .join("+");
    let template = WindowRow {
        suite: case.suite.name().to_owned(),
        configuration: case.configuration.clone(),
        attribute: (!paths.is_empty()).then_some(paths),
        distribution: case.distribution.to_string(),
        split_delta: case.split_delta,
        op: String::new(),
        window: None,
        window_width: None,
        window_unit: None,
        n: 0,
        ops_per_sec: None,
        mean_us: None,
        p50_us: None,
        p95_us: None,
        hits_per_op: None,
        blocks_per_op: None,
        data_bytes: None,
        index_bytes: None,
        index_memory_bytes: None,
        global_index_bytes: None,
        global_index_entries: None,
        global_index_percent_of_data: None,
        note: None,
    };
    let mut out = Vec::new();
    if let Some(note) = &result.note {
        out.push(WindowRow {
            op: "NOTE".to_owned(),
            note: Some(note.clone()),
            ..template.clone()
        });
    }
    let percent = |global: Option<u64>, data: u64| {
        global
            .filter(|_| data > 0)
            .map(|g| round(100.0 * g as f64 / data as f64, 4))
    };
    if let Some(load) = &result.load {
        let sorted = sorted(&load.latencies_us);
        out.push(WindowRow {
            op: "PUT".to_owned(),
            n: load.documents,
            ops_per_sec: Some(round(load.ops_per_sec(), 1)),
            mean_us: Some(round(mean(&load.latencies_us), 3)),
            p50_us: Some(round(percentile(&sorted, 0.5), 3)),
            p95_us: Some(round(percentile(&sorted, 0.95), 3)),
            ..template.clone()
        });
    }
    for point in &result.memory_curve {
        out.push(WindowRow {
            op: "MEMORY".to_owned(),
            n: point.documents,
            data_bytes: Some(point.data_bytes),
            index_memory_bytes: Some(point.index_memory_bytes),
            global_index_bytes: Some(point.global_index_bytes),
            global_index_percent_of_data: percent(Some(point.global_index_bytes), point.data_bytes),
            ..template.clone()
        });
    }
    if let Some(size) = &result.size {
        out.push(WindowRow {
            op: "SIZE".to_owned(),
            n: result.load.as_ref().map_or(0, |l| l.documents),
            data_bytes: Some(size.data_bytes),
            index_bytes: Some(size.index_bytes),
            index_memory_bytes: Some(size.index_memory_bytes),
            global_index_bytes: size.global_index_bytes,
            global_index_entries: size.global_index_entries,
            global_index_percent_of_data: percent(size.global_index_bytes, size.data_bytes),
            ..template.clone()
        });
    }
    for cell in &result.cells {
        let sorted = sorted(&cell.latencies_us);
        let is_window = cell.spec.op == QueryOp::Window;
        out.push(WindowRow {
            attribute: Some(cell.spec.target.path().to_owned()),
            op: cell.spec.op_name().to_owned(),
            window: cell.spec.window.map(str::to_owned),
            window_width: is_window.then_some(cell.width),
            window_unit: is_window.then(|| cell.spec.target.width_unit().to_owned()),
            n: cell.latencies_us.len() as u64,
            mean_us: Some(round(mean(&cell.latencies_us), 3)),
            p50_us: Some(round(percentile(&sorted, 0.5), 3)),
            p95_us: Some(round(percentile(&sorted, 0.95), 3)),
            hits_per_op: Some(round(cell.hits_per_query, 2)),
            blocks_per_op: Some(round(cell.blocks_per_query, 2)),
            ..template.clone()
        });
    }
    out
}

/// Header of the human-readable table (units in the column names).
pub fn table_header() -> String {
    format!(
        "{:<11} {:<22} {:<26} {:<9} {:>8} {:<6} {:<6} {:>10} {:>8} {:>10} {:>10} {:>10} {:>10} {:>9}",
        "suite",
        "configuration",
        "attribute",
        "distrib.",
        "δ",
        "op",
        "window",
        "width",
        "n",
        "ops/s",
        "mean us",
        "p50 us",
        "p95 us",
        "hits/op",
    ) + &format!(" {:>10}", "blocks/op")
}

/// One row of the table; SIZE and MEMORY rows print sizes instead of latencies.
pub fn table_row(row: &WindowRow) -> String {
    let text = |value: Option<String>| value.unwrap_or_else(|| "-".to_owned());
    let number = |value: Option<f64>, decimals: usize| {
        value.map_or_else(|| "-".to_owned(), |v| format!("{v:.decimals$}"))
    };
    let head = format!(
        "{:<11} {:<22} {:<26} {:<9} {:>8} {:<6} {:<6}",
        row.suite,
        row.configuration,
        text(row.attribute.clone()),
        row.distribution,
        row.split_delta
            .map_or_else(|| "none".to_owned(), |d| format!("{d:e}")),
        row.op,
        text(row.window.clone()),
    );
    let mib = |bytes: Option<u64>| number(bytes.map(|b| b as f64 / 1_048_576.0), 2);
    let kib = |bytes: Option<u64>| number(bytes.map(|b| b as f64 / 1024.0), 1);
    match row.op.as_str() {
        "NOTE" => format!("{head} {}", text(row.note.clone())),
        "SIZE" | "MEMORY" => format!(
            "{head} {:>10} {:>8} data {} MiB, index trees {} MiB, index memory {} KiB, global index {} KiB ({} entries) = {}% of data",
            "",
            row.n,
            mib(row.data_bytes),
            mib(row.index_bytes),
            kib(row.index_memory_bytes),
            kib(row.global_index_bytes),
            row.global_index_entries
                .map_or_else(|| "-".to_owned(), |e| e.to_string()),
            number(row.global_index_percent_of_data, 3),
        ),
        _ => format!(
            "{head} {:>10} {:>8} {:>10} {:>10} {:>10} {:>10} {:>9} {:>10}",
            row.window_width.map_or_else(
                || "-".to_owned(),
                |w| format!("{w}{}", if row.window_unit.as_deref() == Some("degrees") { "°" } else { "" })
            ),
            row.n,
            number(row.ops_per_sec, 0),
            number(row.mean_us, 1),
            number(row.p50_us, 1),
            number(row.p95_us, 1),
            number(row.hits_per_op, 1),
            number(row.blocks_per_op, 1),
        ),
    }
}
