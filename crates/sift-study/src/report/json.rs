//! `results.json`: the whole `StudyResults`, pretty-printed, written atomically (a temporary
//! file renamed over the old one, so an interrupted write never leaves half a file).

use crate::results::StudyResults;
use sift_bench::index::BenchError;
use std::path::Path;

pub fn to_json(results: &StudyResults) -> Result<String, BenchError> {
    serde_json::to_string_pretty(results)
        .map_err(|e| BenchError::new(format!("cannot encode results.json: {e}")))
}

/// Writes `text` to `path` through a temporary file in the same directory.
pub fn write_atomically(path: &Path, text: &str) -> Result<(), BenchError> {
    let temporary = path.with_extension("partial");
    std::fs::write(&temporary, text)
        .and_then(|()| std::fs::rename(&temporary, path))
        .map_err(|e| BenchError::new(format!("cannot write {}: {e}", path.display())))
}
