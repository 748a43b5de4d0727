//! `sift_lsm.Database` and `sift_lsm.Session`: an open database shared by every object made
//! from it (`shared.rs`), and read-your-writes sessions. Objects are `frozen` (no `&mut
//! self`), so they can be shared between threads.

use crate::collection::Collection;
use crate::errors::{to_python, CollectionNotFound, InvalidArgument};
use crate::json::json_to_python;
use crate::shared::{SessionSlot, Shared};
use pyo3::prelude::*;
use pyo3::types::PyDict;
use sift_index::{AttrPath, Database as Engine, DatabaseOptions};
use std::sync::Arc;
use std::time::Duration;

/// Timeouts longer than this (a century) wait without a deadline.
const MAX_TIMEOUT_SECONDS: f64 = 100.0 * 365.25 * 24.0 * 3600.0;

/// An open Sift database: a directory of collections of JSON documents and their secondary
/// indexes. Use it as a context manager, or call `close()`.
#[pyclass(module = "sift_lsm", frozen)]
pub struct Database {
    shared: Arc<Shared>,
}

/// Opens (creating if missing) the database in directory `path`.
///
/// `memtable_bytes` and `block_cache_bytes` size the engine's write buffer and block cache;
/// `sync_writes=True` makes every write durable (fdatasync of the log) before it returns.
#[pyfunction]
#[pyo3(signature = (path, *, memtable_bytes=None, block_cache_bytes=None, sync_writes=false))]
pub fn open(
    py: Python<'_>,
    path: std::path::PathBuf,
    memtable_bytes: Option<u64>,
    block_cache_bytes: Option<u64>,
    sync_writes: bool,
) -> PyResult<Database> {
    let mut options = DatabaseOptions::default();
    if let Some(bytes) = memtable_bytes {
        if bytes < 4096 {
            return Err(InvalidArgument::new_err(format!(
                "memtable_bytes={bytes} is too small (at least 4096)"
            )));
        }
        options.engine.memtable_bytes_max = bytes as usize;
    }
    if let Some(bytes) = block_cache_bytes {
        options.engine.block_cache_bytes = bytes as usize;
    }
    options.sync_writes = sync_writes;
    let display = path.display().to_string();
    let database = py
        .detach(|| Engine::open(&path, options))
        .map_err(|error| to_python(&error))?;
    Ok(Database {
        shared: Arc::new(Shared::new(database, display)),
    })
}

#[pymethods]
impl Database {
    /// The collection `name`. If it does not exist it is created, keyed by the field
    /// `primary_key` (required then); if it exists, a `primary_key` that differs is an error.
    #[pyo3(signature = (name, primary_key=None))]
    fn collection(
        &self,
        py: Python<'_>,
        name: String,
        primary_key: Option<String>,
    ) -> PyResult<Collection> {
        let requested = primary_key.clone();
        let lookup_name = name.clone();
        let found = self.shared.run(py, move |database| {
            match database.collection(&lookup_name) {
                Ok(info) => Ok(Some(info.record.pk_path)),
                Err(sift_index::IndexError::UnknownCollection { .. }) => match requested {
                    Some(pk) => match database.create_collection(&lookup_name, &pk) {
                        Ok(info) => Ok(Some(info.record.pk_path)),
                        // Another thread created it meanwhile.
                        Err(sift_index::IndexError::AlreadyExists { .. }) => database
                            .collection(&lookup_name)
                            .map(|info| Some(info.record.pk_path)),
                        Err(error) => Err(error),
                    },
                    None => Ok(None),
                },
                Err(error) => Err(error),
            }
        })?;
        let Some(pk_path) = found else {
            return Err(CollectionNotFound::new_err(format!(
                "unknown collection `{name}`: pass primary_key=\"field\" to create it"
            )));
        };
        if let Some(requested) = primary_key {
            let same = match (AttrPath::parse(&requested), AttrPath::parse(&pk_path)) {
                (Ok(a), Ok(b)) => a.segments() == b.segments(),
                _ => requested == pk_path,
            };
            if !same {
                return Err(InvalidArgument::new_err(format!(
                    "collection `{name}` is keyed by `{pk_path}`, not `{requested}`"
                )));
            }
        }
        Ok(Collection::new(
            Arc::clone(&self.shared),
            name,
            pk_path,
            None,
        ))
    }

    /// The names of the collections, sorted.
    fn collections(&self, py: Python<'_>) -> PyResult<Vec<String>> {
        let mut names = self.shared.run(py, |database| {
            Ok(database
                .collections()
                .into_iter()
                .map(|info| info.record.name)
                .collect::<Vec<_>>())
        })?;
        names.sort();
        Ok(names)
    }

    /// A session: collections taken from it (`session.collection(name)`) read their own
    /// writes on `async-session` indexes. Use it as a context manager, or call `end()`.
    fn session(&self, py: Python<'_>) -> PyResult<Session> {
        let handle = self
            .shared
            .run(py, |database| Ok(database.session().handle()))?;
        Ok(Session {
            shared: Arc::clone(&self.shared),
            slot: Arc::new(SessionSlot::new(handle)),
        })
    }

    /// Waits until asynchronous indexes have applied every write made so far. Returns
    /// False if `timeout` (seconds) passed first; with no timeout, waits as long as needed.
    #[pyo3(signature = (timeout=None))]
    fn wait_until_indexed(&self, py: Python<'_>, timeout: Option<f64>) -> PyResult<bool> {
        let timeout = match timeout {
            Some(seconds) if !(seconds.is_finite() && seconds >= 0.0) => {
                return Err(InvalidArgument::new_err(format!(
                    "timeout={seconds} must be a finite number of seconds >= 0"
                )))
            }
            // Beyond a century is "as long as needed" (and keeps deadlines representable).
            Some(seconds) if seconds > MAX_TIMEOUT_SECONDS => None,
            Some(seconds) => Some(Duration::from_secs_f64(seconds)),
            None => None,
        };
        self.shared
            .run(py, move |database| database.wait_until_indexed_for(timeout))
    }

    /// Writes the memtables to files (what a restart would otherwise replay from the log).
    fn flush(&self, py: Python<'_>) -> PyResult<()> {
        self.shared.run(py, Engine::flush)
    }

    /// Compacts every tree fully (slow on large databases; for benchmarks and tests).
    fn compact(&self, py: Python<'_>) -> PyResult<()> {
        self.shared.run(py, Engine::compact_all)
    }

    /// Engine and index statistics: counters, files per level, asynchronous index lag, and
    /// each collection's indexes.
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let json = self
            .shared
            .run(py, |database| Ok(crate::stats::stats_json(database)))?;
        let value = json_to_python(py, json.as_bytes())?;
        Ok(value.cast_into::<PyDict>()?)
    }

    /// Closes the database: waits for calls in progress in other threads, stops background
    /// work and syncs. Every later call raises `DatabaseClosed`. Closing twice is allowed.
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        self.shared.close(py)
    }

    /// Whether `close()` was called.
    #[getter]
    fn closed(&self, py: Python<'_>) -> bool {
        self.shared.is_closed(py)
    }

    /// The directory given to `open`.
    #[getter]
    fn path(&self) -> &str {
        self.shared.path()
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    #[pyo3(signature = (*_args))]
    fn __exit__(&self, py: Python<'_>, _args: &Bound<'_, pyo3::types::PyTuple>) -> PyResult<bool> {
        self.close(py)?;
        Ok(false)
    }

    fn __repr__(&self, py: Python<'_>) -> String {
        let state = if self.closed(py) { "closed" } else { "open" };
        format!("<sift_lsm.Database {:?} ({state})>", self.shared.path())
    }
}

/// A client session (Diff-Index's read-your-writes): its collections' queries see the
/// session's own writes on `async-session` indexes before the background workers apply them.
#[pyclass(module = "sift_lsm", frozen)]
pub struct Session {
    shared: Arc<Shared>,
    slot: Arc<SessionSlot>,
}

#[pymethods]
impl Session {
    /// The collection `name` (which must exist), reading and writing through this session.
    fn collection(&self, py: Python<'_>, name: String) -> PyResult<Collection> {
        self.slot.handle()?;
        let lookup_name = name.clone();
        let pk_path = self.shared.run(py, move |database| {
            database
                .collection(&lookup_name)
                .map(|info| info.record.pk_path)
        })?;
        Ok(Collection::new(
            Arc::clone(&self.shared),
            name,
            pk_path,
            Some(Arc::clone(&self.slot)),
        ))
    }

    /// Whether the session's queries currently read its own writes (`"read-your-writes"`),
    /// or fell back to `"eventual"` because its overlay outgrew its memory cap.
    #[getter]
    fn consistency(&self, py: Python<'_>) -> PyResult<&'static str> {
        self.shared.run_in_session(py, &self.slot, |session| {
            Ok(consistency_name(session.consistency()))
        })
    }

    /// Ends the session, releasing its overlay; later calls through it raise `SessionExpired`.
    fn end(&self) {
        self.slot.end();
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    #[pyo3(signature = (*_args))]
    fn __exit__(&self, _args: &Bound<'_, pyo3::types::PyTuple>) -> bool {
        self.end();
        false
    }
}

/// The name of a session query's consistency.
pub fn consistency_name(consistency: sift_index::SessionConsistency) -> &'static str {
    match consistency {
        sift_index::SessionConsistency::ReadYourWrites => "read-your-writes",
        sift_index::SessionConsistency::Eventual => "eventual",
    }
}
