//! `sift_lsm.Collection`: documents, indexes and queries of one collection, either directly
//! or through a session.

use crate::errors::{InvalidArgument, InvalidDocument};
use crate::json::{document_to_json, json_to_python, type_name, Decoder};
use crate::shared::{SessionSlot, Shared};
use crate::stats::records_to_python;
use crate::values::{geo_box, primary_key, query_value, range_bound, Bound as RangeEnd};
use parking_lot::Mutex;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyTuple};
use sift_index::{
    AttrType, AttrValue, Database as Engine, Hit, IndexError, IndexKind, IndexSpec, Maintenance,
    WriteOp,
};
use std::collections::VecDeque;
use std::sync::Arc;

/// Documents per engine batch in `put_many` and `import_jsonl` unless told otherwise.
const DEFAULT_CHUNK_DOCUMENTS: usize = 1000;

/// Documents read per page by `scan`.
const SCAN_PAGE_DOCUMENTS: usize = 256;

/// A collection of JSON documents keyed by one field, with its secondary indexes. Made by
/// `Database.collection(...)` or `Session.collection(...)`.
#[pyclass(module = "sift_lsm", frozen)]
pub struct Collection {
    shared: Arc<Shared>,
    name: String,
    primary_key: String,
    session: Option<Arc<SessionSlot>>,
}

impl Collection {
    pub fn new(
        shared: Arc<Shared>,
        name: String,
        primary_key: String,
        session: Option<Arc<SessionSlot>>,
    ) -> Collection {
        Collection {
            shared,
            name,
            primary_key,
            session,
        }
    }

    /// Writes `ops` as one batch, through the session if there is one.
    fn write_batch(&self, py: Python<'_>, ops: &[WriteOp<'_>]) -> PyResult<Vec<Option<u64>>> {
        let name = self.name.as_str();
        match &self.session {
            Some(slot) => self
                .shared
                .run_in_session(py, slot, move |session| session.write(name, ops)),
            None => self
                .shared
                .run(py, move |database| database.write(name, ops)),
        }
    }

    /// Writes `documents` as one batch. A refused batch's error says that nothing of it was
    /// stored and how much was before it; for a bad document it names which one
    /// (`describe(Some(position))`), otherwise the batch (`describe(None)`), keeping the
    /// error's class.
    fn write_documents(
        &self,
        py: Python<'_>,
        documents: &[Vec<u8>],
        describe: &dyn Fn(Option<usize>) -> String,
        stored_before: usize,
    ) -> PyResult<()> {
        let ops: Vec<WriteOp<'_>> = documents.iter().map(|json| WriteOp::Put(json)).collect();
        let Err(error) = self.write_batch(py, &ops) else {
            return Ok(());
        };
        let outcome = crate::import::batch_refused(stored_before);
        if !error.is_instance_of::<InvalidDocument>(py) {
            // Not a document's own fault (a unique value taken, a closed database, an
            // ended session): the batch is named, the class kept.
            let message = format!("{}: {}; {outcome}", describe(None), error.value(py));
            return Err(PyErr::from_type(error.get_type(py), message));
        }
        let name = self.name.as_str();
        let culprit = self.shared.run(py, move |database| {
            Ok(documents.iter().enumerate().find_map(|(position, json)| {
                database
                    .check_document(name, json)
                    .err()
                    .map(|error| (position, error))
            }))
        })?;
        let message = match culprit {
            Some((position, document_error)) => {
                format!("{}: {document_error}; {outcome}", describe(Some(position)))
            }
            None => format!("{}: {}; {outcome}", describe(None), error.value(py)),
        };
        Err(InvalidDocument::new_err(message))
    }

    /// `SessionExpired` if this collection belongs to a session that was ended.
    fn check_session(&self) -> PyResult<()> {
        match &self.session {
            Some(slot) => slot.handle().map(|_| ()),
            None => Ok(()),
        }
    }

    /// The type of index `index`, for converting query values.
    fn index_type(&self, py: Python<'_>, index: &str) -> PyResult<AttrType> {
        let collection = self.name.as_str();
        self.shared
            .run(py, move |database| database.index_type(collection, index))
    }

    /// Runs a LOOKUP or RANGE (`lo..=hi`) through the session if there is one.
    fn query(
        &self,
        py: Python<'_>,
        index: &str,
        lo: &AttrValue,
        hi: Option<&AttrValue>,
        limit: Option<usize>,
    ) -> PyResult<Vec<Hit>> {
        let collection = self.name.as_str();
        match &self.session {
            Some(slot) => self.shared.run_in_session(py, slot, move |session| {
                Ok(match hi {
                    None => session.lookup(collection, index, lo, limit)?.hits,
                    Some(hi) => session.range(collection, index, lo, hi, limit)?.hits,
                })
            }),
            None => self.shared.run(py, move |database| {
                Ok(match hi {
                    None => database.lookup(collection, index, lo, limit)?.hits,
                    Some(hi) => database.range(collection, index, lo, hi, limit)?.hits,
                })
            }),
        }
    }

    /// The hits of a `range` / `range_iter` call, its arguments as Python gave them.
    fn range_hits(
        &self,
        py: Python<'_>,
        index: &str,
        lo: &Bound<'_, PyAny>,
        hi: &Bound<'_, PyAny>,
        limit: Option<i64>,
    ) -> PyResult<Vec<Hit>> {
        let limit = checked_limit(limit)?;
        let attr_type = self.index_type(py, index)?;
        let lo = range_bound(lo, attr_type, index, RangeEnd::Low)?;
        let hi = range_bound(hi, attr_type, index, RangeEnd::High)?;
        self.query(py, index, &lo, Some(&hi), limit)
    }
}

/// `limit` as given by Python: None, or a count >= 0.
fn checked_limit(limit: Option<i64>) -> PyResult<Option<usize>> {
    match limit {
        Some(limit) if limit < 0 => Err(InvalidArgument::new_err(format!(
            "limit={limit} must be None or a count >= 0"
        ))),
        Some(limit) => Ok(Some(usize::try_from(limit).unwrap_or(usize::MAX))),
        None => Ok(None),
    }
}

/// A chunk size as given by Python: at least 1.
fn checked_chunk(chunk_size: i64) -> PyResult<usize> {
    if chunk_size < 1 {
        return Err(InvalidArgument::new_err(format!(
            "chunk_size={chunk_size} must be at least 1"
        )));
    }
    Ok(usize::try_from(chunk_size).unwrap_or(usize::MAX))
}

/// Query hits as Python objects: documents, or `(document, meta)` pairs.
pub fn hits_to_python<'py>(
    py: Python<'py>,
    hits: &[Hit],
    with_meta: bool,
) -> PyResult<Bound<'py, PyList>> {
    let list = PyList::empty(py);
    let decoder = Decoder::new(py);
    for hit in hits {
        list.append(hit_to_python(&decoder, hit, with_meta)?)?;
    }
    Ok(list)
}

fn hit_to_python<'py>(
    decoder: &Decoder<'py>,
    hit: &Hit,
    with_meta: bool,
) -> PyResult<Bound<'py, PyAny>> {
    let py = decoder.py();
    let document = decoder.decode(&hit.doc)?;
    if !with_meta {
        return Ok(document);
    }
    let meta = PyDict::new(py);
    meta.set_item("pk", String::from_utf8_lossy(&hit.pk))?;
    meta.set_item("seq", hit.seq)?;
    Ok(PyTuple::new(py, [document, meta.into_any()])?.into_any())
}

#[pymethods]
impl Collection {
    /// The collection's name.
    #[getter]
    fn name(&self) -> &str {
        &self.name
    }

    /// The path of the primary-key field.
    #[getter]
    fn primary_key(&self) -> &str {
        &self.primary_key
    }

    /// Stores `document` (a dict), replacing the document with the same primary key. An
    /// invalid document raises `InvalidDocument` and stores nothing.
    fn put(&self, py: Python<'_>, document: &Bound<'_, PyAny>) -> PyResult<()> {
        let json = document_to_json(document, "document")?;
        self.write_batch(py, &[WriteOp::Put(&json)])?;
        Ok(())
    }

    /// Stores every document of `documents` (any iterable of dicts), `chunk_size` per atomic
    /// batch; returns how many were stored. A bad document raises before its batch is
    /// written: the batches before it are stored, its own batch is not.
    #[pyo3(signature = (documents, *, chunk_size=DEFAULT_CHUNK_DOCUMENTS as i64))]
    fn put_many(
        &self,
        py: Python<'_>,
        documents: &Bound<'_, PyAny>,
        chunk_size: i64,
    ) -> PyResult<usize> {
        let chunk_size = checked_chunk(chunk_size)?;
        let mut stored = 0usize;
        let mut chunk: Vec<Vec<u8>> = Vec::with_capacity(chunk_size.min(65_536));
        let iterator = documents.try_iter().map_err(|_| {
            InvalidDocument::new_err(format!(
                "put_many takes an iterable of dicts, found {}",
                type_name(documents)
            ))
        })?;
        let write = |chunk: &[Vec<u8>], stored: usize| {
            let describe = |position: Option<usize>| match position {
                Some(position) => format!("document {} of put_many", stored + position),
                None => format!(
                    "documents {stored} to {} of put_many",
                    stored + chunk.len() - 1
                ),
            };
            self.write_documents(py, chunk, &describe, stored)
        };
        for document in iterator {
            let document = document?;
            let position = stored + chunk.len();
            let json = document_to_json(&document, &format!("document {position} of put_many"))
                .map_err(|error| {
                    let message = error.value(py).to_string();
                    InvalidDocument::new_err(format!(
                        "{message}; {}",
                        crate::import::batch_refused(stored)
                    ))
                })?;
            chunk.push(json);
            if chunk.len() == chunk_size {
                write(&chunk, stored)?;
                stored += chunk.len();
                chunk.clear();
            }
        }
        if !chunk.is_empty() {
            write(&chunk, stored)?;
            stored += chunk.len();
        }
        Ok(stored)
    }

    /// The document with primary key `key` (a str, or an int for integer keys), or None.
    fn get<'py>(
        &self,
        py: Python<'py>,
        key: &Bound<'py, PyAny>,
    ) -> PyResult<Option<Bound<'py, PyAny>>> {
        let pk = primary_key(key)?;
        let collection = self.name.as_str();
        let hit = match &self.session {
            Some(slot) => self
                .shared
                .run_in_session(py, slot, |session| session.get(collection, &pk))?,
            None => self
                .shared
                .run(py, |database| database.get(collection, &pk))?,
        };
        hit.map(|hit| json_to_python(py, &hit.doc)).transpose()
    }

    /// Deletes the document with primary key `key`; whether there was one.
    fn delete(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<bool> {
        let pk = primary_key(key)?;
        let written = self.write_batch(py, &[WriteOp::Delete(&pk)])?;
        Ok(written.first().copied().flatten().is_some())
    }

    /// Whether a document with primary key `key` exists.
    fn __contains__(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<bool> {
        Ok(self.get(py, key)?.is_some())
    }

    /// Creates the index `name` over the attribute at `path` (`user.id`), of `type` (int,
    /// float, string, time, geo) and `kind` (composite, eager, lazy, memory, embedded,
    /// sst-local, next), maintained by `maintenance` (sync-full, sync-insert, deferred,
    /// async-simple, async-session; the kind's default if None). Existing documents are
    /// indexed before it returns. Returns the index's description.
    #[pyo3(signature = (name, *, path, r#type, kind="composite", maintenance=None, unique=false))]
    #[allow(clippy::too_many_arguments)] // Python's keyword arguments
    fn create_index<'py>(
        &self,
        py: Python<'py>,
        name: String,
        path: String,
        r#type: &str,
        kind: &str,
        maintenance: Option<&str>,
        unique: bool,
    ) -> PyResult<Bound<'py, PyAny>> {
        let attr_type: AttrType =
            r#type
                .parse()
                .map_err(|error: sift_index::UnknownAttrType| {
                    InvalidArgument::new_err(format!("index `{name}`: {error}"))
                })?;
        let kind: IndexKind = kind.parse().map_err(|error: String| {
            InvalidArgument::new_err(format!("index `{name}`: {error}"))
        })?;
        let mut spec = IndexSpec::new(&name, &path, attr_type, kind).with_unique(unique);
        if let Some(maintenance) = maintenance {
            let maintenance: Maintenance = maintenance.parse().map_err(|error: String| {
                InvalidArgument::new_err(format!("index `{name}`: {error}"))
            })?;
            spec = spec.with_maintenance(maintenance);
        }
        self.check_session()?;
        let collection = self.name.as_str();
        let record = self.shared.run(py, move |database| {
            let failures_of_this_index = |status: sift_index::IndexBuildStatus| {
                status
                    .failures
                    .into_iter()
                    .filter(|failure| failure.collection == collection && failure.index == name)
                    .collect::<Vec<_>>()
            };
            let failed_before = failures_of_this_index(database.index_build_status()).len();
            let record = database.create_index(collection, spec)?;
            if record.kind.builds_online() {
                // A build that met a recoverable error goes on in the background (the index
                // answers exactly meanwhile); one that failed for good is reported here.
                let failures = failures_of_this_index(database.wait_for_index_builds());
                if let Some(failure) = failures.get(failed_before) {
                    return Err(IndexError::Internal(format!(
                        "index `{}` was created, but building its blocks failed: {}",
                        record.name, failure.message
                    )));
                }
            }
            Ok(record)
        })?;
        crate::stats::index_record_to_python(py, &record)
    }

    /// Drops the index `name`.
    fn drop_index(&self, py: Python<'_>, name: String) -> PyResult<()> {
        self.check_session()?;
        let collection = self.name.as_str();
        self.shared
            .run(py, move |database| database.drop_index(collection, &name))
    }

    /// The collection's indexes, as dicts (name, path, type, kind, maintenance, unique,
    /// state).
    fn indexes<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        self.check_session()?;
        let collection = self.name.as_str();
        let records = self.shared.run(py, move |database| {
            Ok(database.collection(collection)?.indexes)
        })?;
        records_to_python(py, &records)
    }

    /// LOOKUP: the documents whose indexed attribute equals `value`, newest first, at most
    /// `limit`. `with_meta=True` returns `(document, {"pk", "seq"})` pairs.
    #[pyo3(signature = (index, value, limit=None, *, with_meta=false))]
    fn lookup<'py>(
        &self,
        py: Python<'py>,
        index: &str,
        value: &Bound<'py, PyAny>,
        limit: Option<i64>,
        with_meta: bool,
    ) -> PyResult<Bound<'py, PyList>> {
        let limit = checked_limit(limit)?;
        let attr_type = self.index_type(py, index)?;
        let value = query_value(value, attr_type, index)?;
        let hits = self.query(py, index, &value, None, limit)?;
        hits_to_python(py, &hits, with_meta)
    }

    /// RANGE: the documents whose indexed attribute is in `lo..=hi` (None: unbounded on that
    /// side, except the high end of a string index), newest first, at most `limit`.
    #[pyo3(signature = (index, lo, hi, limit=None, *, with_meta=false))]
    fn range<'py>(
        &self,
        py: Python<'py>,
        index: &str,
        lo: &Bound<'py, PyAny>,
        hi: &Bound<'py, PyAny>,
        limit: Option<i64>,
        with_meta: bool,
    ) -> PyResult<Bound<'py, PyList>> {
        let hits = self.range_hits(py, index, lo, hi, limit)?;
        hits_to_python(py, &hits, with_meta)
    }

    /// `range` as an iterator: the answer is computed at once and held as compact JSON
    /// text; each document becomes a Python object only when the iterator reaches it.
    #[pyo3(signature = (index, lo, hi, limit=None, *, with_meta=false))]
    fn range_iter(
        &self,
        py: Python<'_>,
        index: &str,
        lo: &Bound<'_, PyAny>,
        hi: &Bound<'_, PyAny>,
        limit: Option<i64>,
        with_meta: bool,
    ) -> PyResult<HitIterator> {
        let hits = self.range_hits(py, index, lo, hi, limit)?;
        Ok(HitIterator {
            hits: Mutex::new(hits.into_iter().collect()),
            with_meta,
        })
    }

    /// WITHIN: the documents whose geo attribute lies in `bbox` = (min_lon, min_lat,
    /// max_lon, max_lat), newest first, at most `limit`. Through a session, writes not yet
    /// applied to an asynchronous index are not seen.
    #[pyo3(signature = (index, bbox, limit=None, *, with_meta=false))]
    fn within<'py>(
        &self,
        py: Python<'py>,
        index: &str,
        bbox: &Bound<'py, PyAny>,
        limit: Option<i64>,
        with_meta: bool,
    ) -> PyResult<Bound<'py, PyList>> {
        self.check_session()?;
        let limit = checked_limit(limit)?;
        let geo_box = geo_box(bbox)?;
        let collection = self.name.as_str();
        let hits = self.shared.run(py, move |database| {
            Ok(database.within(collection, index, &geo_box, limit)?.hits)
        })?;
        hits_to_python(py, &hits, with_meta)
    }

    /// Every document in primary-key order (bytes of the key's text), read a page at a time;
    /// from the first key >= `start` if given.
    #[pyo3(signature = (start=None))]
    fn scan(&self, start: Option<&Bound<'_, PyAny>>) -> PyResult<ScanIterator> {
        self.check_session()?;
        let from = start.map(primary_key).transpose()?.unwrap_or_default();
        Ok(ScanIterator {
            shared: Arc::clone(&self.shared),
            collection: self.name.clone(),
            state: Mutex::new(ScanState {
                next_from: Some(from),
                page: VecDeque::new(),
            }),
        })
    }

    /// Loads a file of JSON documents, one per line (blank lines skipped), `chunk_size` per
    /// atomic batch; returns how many were stored. `progress=True` reports on stderr; a
    /// callable gets `(documents, bytes_read, bytes_total)` after each batch. A bad line
    /// raises, naming its line number: the batches before it are stored, its own is not.
    #[pyo3(signature = (path, *, progress=None, chunk_size=DEFAULT_CHUNK_DOCUMENTS as i64))]
    fn import_jsonl(
        &self,
        py: Python<'_>,
        path: std::path::PathBuf,
        progress: Option<&Bound<'_, PyAny>>,
        chunk_size: i64,
    ) -> PyResult<usize> {
        let chunk_size = checked_chunk(chunk_size)?;
        crate::import::import_jsonl(
            py,
            &path,
            chunk_size,
            progress,
            &mut |py, documents, describe, stored| {
                self.write_documents(py, documents, describe, stored)
            },
        )
    }

    fn __repr__(&self) -> String {
        format!(
            "<sift_lsm.Collection {:?} keyed by {:?}{}>",
            self.name,
            self.primary_key,
            if self.session.is_some() {
                " (in a session)"
            } else {
                ""
            }
        )
    }
}

/// Hits of a `range_iter`, turned into Python objects one at a time.
#[pyclass(module = "sift_lsm", frozen)]
pub struct HitIterator {
    hits: Mutex<VecDeque<Hit>>,
    with_meta: bool,
}

#[pymethods]
impl HitIterator {
    fn __iter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    fn __next__<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyAny>>> {
        let hit = self.hits.lock().pop_front();
        hit.map(|hit| hit_to_python(&Decoder::new(py), &hit, self.with_meta))
            .transpose()
    }

    /// Hits not yet returned.
    fn __length_hint__(&self) -> usize {
        self.hits.lock().len()
    }
}

struct ScanState {
    /// Where the next page starts; None once the scan is done.
    next_from: Option<Vec<u8>>,
    page: VecDeque<Hit>,
}

/// The documents of `Collection.scan`, read a page at a time (each page one snapshot).
#[pyclass(module = "sift_lsm", frozen)]
pub struct ScanIterator {
    shared: Arc<Shared>,
    collection: String,
    state: Mutex<ScanState>,
}

#[pymethods]
impl ScanIterator {
    fn __iter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    fn __next__<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyAny>>> {
        // The state's lock is only ever held briefly with the GIL held, never across the
        // engine call (which releases the GIL): a thread waiting for the lock with the GIL
        // would otherwise deadlock with one waiting for the GIL with the lock.
        loop {
            let next = {
                let mut state = self.state.lock();
                match state.page.pop_front() {
                    Some(hit) => Ok(hit),
                    None => Err(state.next_from.take()),
                }
            };
            let from = match next {
                Ok(hit) => return json_to_python(py, &hit.doc).map(Some),
                Err(None) => return Ok(None),
                Err(Some(from)) => from,
            };
            let collection = self.collection.as_str();
            let page = self.shared.run(py, |database: &Engine| {
                database.scan(collection, &from, SCAN_PAGE_DOCUMENTS)
            })?;
            let mut state = self.state.lock();
            if page.len() == SCAN_PAGE_DOCUMENTS {
                if let Some(last) = page.last() {
                    let mut next = last.pk.clone();
                    next.push(0);
                    state.next_from = Some(next);
                }
            }
            state.page.extend(page);
        }
    }
}
