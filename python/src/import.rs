//! `Collection.import_jsonl`: a file of JSON lines loaded in atomic batches, read and written
//! without the GIL, with progress and Ctrl-C checked between batches.

use crate::errors::{InvalidArgument, InvalidDocument};
use pyo3::exceptions::{PyFileNotFoundError, PyOSError, PyPermissionError};
use pyo3::prelude::*;
use pyo3::types::PyBool;
use sift_index::MAX_DOCUMENT_BYTES;
use std::fs::File;
use std::io::{BufRead, BufReader, Read};
use std::path::Path;
use std::time::{Duration, Instant};

/// Longest line read: a document at the limit, its line end and surrounding blanks.
const LINE_BYTES_MAX: usize = MAX_DOCUMENT_BYTES + 64;

/// How often `progress=True` rewrites its stderr line.
const PROGRESS_INTERVAL: Duration = Duration::from_millis(250);

/// What a refused batch of `put_many` or `import_jsonl` left stored, for its error.
pub fn batch_refused(stored_before: usize) -> String {
    format!("nothing of its batch was stored ({stored_before} documents before the batch were)")
}

/// Writes one batch: `(py, documents, describe(Some(position) or None for the batch),
/// documents stored before)`.
pub type WriteDocuments<'a> =
    dyn FnMut(Python<'_>, &[Vec<u8>], &dyn Fn(Option<usize>) -> String, usize) -> PyResult<()> + 'a;

/// What `progress=` asked for.
enum Progress<'py> {
    Silent,
    Stderr { last: Instant },
    Callback(Bound<'py, PyAny>),
}

impl<'py> Progress<'py> {
    fn new(progress: Option<&Bound<'py, PyAny>>) -> PyResult<Progress<'py>> {
        let Some(progress) = progress else {
            return Ok(Progress::Silent);
        };
        if progress.is_none() {
            return Ok(Progress::Silent);
        }
        if progress.is_instance_of::<PyBool>() {
            return Ok(if progress.is_truthy()? {
                Progress::Stderr {
                    last: Instant::now(),
                }
            } else {
                Progress::Silent
            });
        }
        if progress.is_callable() {
            return Ok(Progress::Callback(progress.clone()));
        }
        Err(InvalidArgument::new_err(
            "progress= takes True, False, None or a callable(documents, bytes_read, bytes_total)",
        ))
    }

    fn report(
        &mut self,
        py: Python<'_>,
        documents: usize,
        bytes_read: u64,
        bytes_total: u64,
        done: bool,
    ) -> PyResult<()> {
        match self {
            Progress::Stderr { last } => {
                if done || last.elapsed() >= PROGRESS_INTERVAL {
                    *last = Instant::now();
                    let percent = if bytes_total == 0 {
                        100.0
                    } else {
                        bytes_read as f64 * 100.0 / bytes_total as f64
                    };
                    let end = if done { "\n" } else { "" };
                    let line = format!(
                        "\rimported {documents} documents ({percent:.1} % of the file){end}"
                    );
                    // Through sys.stderr, so notebooks show it; a closed stderr is not the
                    // import's failure.
                    if let Ok(stderr) = py.import("sys").and_then(|sys| sys.getattr("stderr")) {
                        let _ = stderr.call_method1("write", (line,));
                        let _ = stderr.call_method0("flush");
                    }
                }
            }
            // After each batch only: the last batch's report is the final one.
            Progress::Callback(callback) if !done => {
                callback.call1((documents, bytes_read, bytes_total))?;
            }
            Progress::Silent | Progress::Callback(_) => {}
        }
        Ok(())
    }
}

fn open_error(path: &Path, error: &std::io::Error) -> PyErr {
    let message = format!("{}: {error}", path.display());
    match error.kind() {
        std::io::ErrorKind::NotFound => PyFileNotFoundError::new_err(message),
        std::io::ErrorKind::PermissionDenied => PyPermissionError::new_err(message),
        _ => PyOSError::new_err(message),
    }
}

/// One batch read from the file: documents and their line numbers, or the first line too
/// long to be a document (its number and why).
struct Batch {
    documents: Vec<Vec<u8>>,
    lines: Vec<u64>,
    bad_line: Option<(u64, String)>,
}

/// Loads `path` in batches of `chunk_size` documents through `write`; returns how many.
pub fn import_jsonl(
    py: Python<'_>,
    path: &Path,
    chunk_size: usize,
    progress: Option<&Bound<'_, PyAny>>,
    write: &mut WriteDocuments<'_>,
) -> PyResult<usize> {
    let mut progress = Progress::new(progress)?;
    let file = File::open(path).map_err(|error| open_error(path, &error))?;
    let bytes_total = file.metadata().map_or(0, |metadata| metadata.len());
    let mut reader = BufReader::with_capacity(1 << 20, file);
    let mut line_number = 0u64;
    let mut bytes_read = 0u64;
    let mut stored = 0usize;
    let display = path.display().to_string();
    loop {
        let batch = py.detach(|| -> std::io::Result<Batch> {
            let mut batch = Batch {
                documents: Vec::with_capacity(chunk_size.min(65_536)),
                lines: Vec::with_capacity(chunk_size.min(65_536)),
                bad_line: None,
            };
            let mut line = Vec::new();
            while batch.documents.len() < chunk_size {
                line.clear();
                // A line is read up to one byte past the document limit, never whole: a file
                // without newlines must not be loaded into memory to be refused.
                let read = (&mut reader)
                    .take(LINE_BYTES_MAX as u64 + 1)
                    .read_until(b'\n', &mut line)?;
                if read == 0 {
                    break;
                }
                bytes_read += read as u64;
                line_number += 1;
                if line.len() > LINE_BYTES_MAX && line.last() != Some(&b'\n') {
                    batch.bad_line = Some((
                        line_number,
                        format!("longer than the {MAX_DOCUMENT_BYTES}-byte document limit"),
                    ));
                    break;
                }
                let text = line.trim_ascii();
                if text.is_empty() {
                    continue;
                }
                batch.documents.push(text.to_vec());
                batch.lines.push(line_number);
            }
            Ok(batch)
        });
        let batch = batch.map_err(|error| open_error(path, &error))?;
        if let Some((line, reason)) = batch.bad_line {
            return Err(InvalidDocument::new_err(format!(
                "{display} line {line}: {reason}; {}",
                batch_refused(stored)
            )));
        }
        if batch.documents.is_empty() {
            break;
        }
        let lines = &batch.lines;
        let describe = |position: Option<usize>| match position {
            Some(position) => format!("{display} line {}", lines[position]),
            None => format!(
                "{display} lines {} to {}",
                lines.first().copied().unwrap_or(0),
                lines.last().copied().unwrap_or(0)
            ),
        };
        write(py, &batch.documents, &describe, stored)?;
        stored += batch.documents.len();
        progress.report(py, stored, bytes_read, bytes_total, false)?;
        py.check_signals()?;
    }
    progress.report(py, stored, bytes_read, bytes_total, true)?;
    Ok(stored)
}
