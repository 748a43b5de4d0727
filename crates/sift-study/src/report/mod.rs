//! The study's output folder: `index.html` ([`html`], plots from [`svg`]), `results.json`
//! ([`json`]) and one CSV per experiment ([`csv`]).

pub mod csv;
pub mod html;
pub mod json;
pub mod scales;

use crate::results::StudyResults;
use sift_bench::index::BenchError;
use std::path::Path;

/// Writes every file of the report into `out` (all rewritten, so the folder always matches
/// `results`).
pub fn write_all(out: &Path, results: &StudyResults) -> Result<(), BenchError> {
    json::write_atomically(&out.join("results.json"), &json::to_json(results)?)?;
    for experiment in &results.experiments {
        json::write_atomically(
            &out.join(format!("{}.csv", experiment.id)),
            &csv::experiment_csv(experiment),
        )?;
    }
    json::write_atomically(&out.join("index.html"), &html::render(results))
}
