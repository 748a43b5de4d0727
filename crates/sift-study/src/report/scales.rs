//! The report's scale sections of an experiment: each claim's verdict and deciding numbers at
//! every size of the sweep, and the engine settings and level shape of every database the
//! queries met.

use crate::figure::format_cell;
use crate::figure::svg::escape;
use crate::results::{ExperimentResult, ScaleRun};
use std::fmt::Write;

/// Deciding numbers shown per size (all of them are in results.json).
const NUMBERS_SHOWN: usize = 6;

fn size_heading(run: &ScaleRun) -> String {
    format!(
        "{} {} ({:.0}%)",
        run.documents,
        run.unit,
        run.fraction * 100.0
    )
}

/// The verdicts at every size, with how each changes with size; empty with one size.
pub fn verdicts_across_sizes(experiment: &ExperimentResult) -> String {
    if experiment.scales.len() < 2 || experiment.verdicts.is_empty() {
        return String::new();
    }
    let mut out = String::from(
        "<h3>Verdicts at every size</h3><p>The same claims checked by the same rules on \
         databases of each size (engine settings scaled with the data, below). The last column \
         says whether a verdict holds regardless of scale.</p><table class=\"scales\"><tr>\
         <th class=\"text\">claim</th>",
    );
    for run in &experiment.scales {
        let _ = write!(
            out,
            "<th class=\"text\">{}</th>",
            escape(&size_heading(run))
        );
    }
    out.push_str("<th class=\"text\">across sizes</th></tr>");
    for verdict in &experiment.verdicts {
        let _ = write!(
            out,
            "<tr><td class=\"text\">{}</td>",
            escape(&verdict.claim)
        );
        for run in &experiment.scales {
            match run.verdicts.iter().find(|v| v.claim == verdict.claim) {
                Some(at_size) => {
                    let mut numbers: Vec<String> = at_size
                        .numbers
                        .iter()
                        .take(NUMBERS_SHOWN)
                        .map(|(name, value)| format!("{name} {}", format_cell(*value)))
                        .collect();
                    if at_size.numbers.len() > NUMBERS_SHOWN {
                        numbers.push(format!(
                            "… {} more in results.json",
                            at_size.numbers.len() - NUMBERS_SHOWN
                        ));
                    }
                    let _ = write!(
                        out,
                        "<td class=\"text\"><span class=\"badge {}\">{}</span><br><small>{}</small></td>",
                        escape(&at_size.outcome),
                        escape(&at_size.outcome.replace('-', " ")),
                        escape(&numbers.join("; "))
                    );
                }
                None => out.push_str(
                    "<td class=\"text\"><span class=\"badge not-measured\">not run</span></td>",
                ),
            }
        }
        let _ = write!(
            out,
            "<td class=\"text\">{}</td></tr>",
            escape(verdict.across_sizes.as_deref().unwrap_or(""))
        );
    }
    out.push_str("</table>");
    out
}

fn engine_line(run: &ScaleRun) -> String {
    let bytes = |key: &str| {
        run.engine
            .get(key)
            .and_then(serde_json::Value::as_u64)
            .map_or_else(|| "?".to_owned(), |b| format!("{} KiB", b >> 10))
    };
    format!(
        "{}: memtable {}, level 1 {}, table files {}, bloom {} bits per key, {}; {:.1} s",
        size_heading(run),
        bytes("memtable_bytes"),
        bytes("level1_bytes"),
        bytes("table_file_bytes"),
        run.engine
            .get("bloom_bits_per_key")
            .and_then(serde_json::Value::as_u64)
            .unwrap_or(0),
        run.engine
            .get("compression")
            .and_then(serde_json::Value::as_str)
            .unwrap_or("?"),
        run.duration_s
    )
}

/// Files per level as `L0 2 · L1 4 · L2 31`.
pub fn level_text(files: &[usize]) -> String {
    files
        .iter()
        .enumerate()
        .map(|(level, count)| format!("L{level} {count}"))
        .collect::<Vec<_>>()
        .join(" · ")
}

/// The engine settings of every size and the level shape of every database measured.
pub fn engine_and_shapes(experiment: &ExperimentResult) -> String {
    if experiment.scales.is_empty() {
        return String::new();
    }
    let mut out = String::from(
        "<details><summary>Engine settings and the LSM-trees the queries met (table files per \
         level of every database, after its load settled)</summary><ul>",
    );
    for run in &experiment.scales {
        let _ = write!(out, "<li>{}</li>", escape(&engine_line(run)));
    }
    out.push_str("</ul>");
    for run in &experiment.scales {
        if run.shapes.is_empty() {
            continue;
        }
        let _ = write!(
            out,
            "<table><tr><th class=\"text\" colspan=\"2\">{}</th></tr><tr><th \
             class=\"text\">database</th><th class=\"text\">files per level</th></tr>",
            escape(&size_heading(run))
        );
        for shape in &run.shapes {
            let trees: Vec<String> = shape
                .trees
                .iter()
                .filter(|(_, files)| files.iter().any(|&count| count > 0))
                .map(|(tree, files)| format!("{tree}: {}", level_text(files)))
                .collect();
            let _ = write!(
                out,
                "<tr><td class=\"text\">{}</td><td class=\"text\">{}</td></tr>",
                escape(&shape.database),
                escape(&trees.join("; "))
            );
        }
        out.push_str("</table>");
    }
    out.push_str("</details>");
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::{DatabaseShape, Verdict};
    use std::collections::BTreeMap;

    fn verdict(outcome: &str, across: Option<&str>) -> Verdict {
        Verdict {
            claim: "Lazy beats Composite".to_owned(),
            source: "LevelDB++".to_owned(),
            outcome: outcome.to_owned(),
            evidence: String::new(),
            numbers: BTreeMap::from([("lazy µs".to_owned(), 12.5)]),
            across_sizes: across.map(str::to_owned),
        }
    }

    #[test]
    fn shows_each_size_and_the_summary() {
        let run = |documents, fraction, outcome: &str| ScaleRun {
            fraction,
            documents,
            unit: "documents".to_owned(),
            engine: BTreeMap::from([("memtable_bytes".to_owned(), serde_json::json!(1 << 20))]),
            duration_s: 1.0,
            status: "measured".to_owned(),
            verdicts: vec![verdict(outcome, None)],
            shapes: vec![DatabaseShape {
                database: "lazy on user.id".to_owned(),
                trees: BTreeMap::from([("data".to_owned(), vec![2, 4, 31])]),
            }],
        };
        let mut experiment =
            crate::experiments::new_result(crate::experiments::ExperimentId::Static, "", "");
        experiment.verdicts = vec![verdict(
            "reproduced",
            Some("reproduced from 200 documents on"),
        )];
        experiment.scales = vec![run(20, 0.1, "differs"), run(200, 1.0, "reproduced")];
        let table = verdicts_across_sizes(&experiment);
        assert!(table.contains("20 documents (10%)") && table.contains("200 documents (100%)"));
        assert!(table.contains("badge differs") && table.contains("badge reproduced"));
        assert!(table.contains("reproduced from 200 documents on"));
        assert!(table.contains("lazy µs 12.5"));
        let shapes = engine_and_shapes(&experiment);
        assert!(shapes.contains("memtable 1024 KiB"));
        assert!(shapes.contains("data: L0 2 · L1 4 · L2 31"));
        experiment.scales.truncate(1);
        assert!(
            verdicts_across_sizes(&experiment).is_empty(),
            "one size: no table"
        );
    }
}
