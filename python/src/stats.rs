//! What `Database.stats()` and `Collection.indexes()` report, as JSON built here and turned
//! into Python dicts by the JSON converter.

use pyo3::prelude::*;
use serde_json::{json, Map};
use sift_index::{Database, IndexRecord};

/// One index as `indexes()` and `stats()` describe it: the fields a user chose, and its
/// state. Serialised in this field order, which the Python dict keeps.
#[derive(serde::Serialize)]
struct IndexInfo<'a> {
    name: &'a str,
    path: &'a str,
    r#type: &'static str,
    kind: &'static str,
    maintenance: &'static str,
    unique: bool,
    state: &'static str,
}

impl<'a> IndexInfo<'a> {
    fn of(record: &'a IndexRecord) -> IndexInfo<'a> {
        IndexInfo {
            name: &record.name,
            path: &record.path,
            r#type: record.attr_type.name(),
            kind: record.kind.name(),
            maintenance: record.maintenance.name(),
            unique: record.unique,
            state: match record.state {
                sift_index::IndexState::Building => "building",
                sift_index::IndexState::Ready => "ready",
            },
        }
    }
}

/// An index record as a Python dict.
pub fn index_record_to_python<'py>(
    py: Python<'py>,
    record: &IndexRecord,
) -> PyResult<Bound<'py, PyAny>> {
    let json = serde_json::to_vec(&IndexInfo::of(record))
        .map_err(|error| crate::errors::Error::new_err(error.to_string()))?;
    crate::json::json_to_python(py, &json)
}

/// The JSON text of `Database.stats()`.
pub fn stats_json(database: &Database) -> String {
    let engine = database.engine().stats();
    let mut collections = Map::new();
    for info in database.collections() {
        collections.insert(
            info.record.name.clone(),
            json!({
                "primary_key": info.record.pk_path,
                "indexes": info.indexes.iter().map(IndexInfo::of).collect::<Vec<_>>(),
            }),
        );
    }
    let mut trees = Map::new();
    for tree in &engine.trees {
        trees.insert(
            tree.name.clone(),
            json!({
                "files_per_level": tree.levels.iter().map(|level| level.files).collect::<Vec<_>>(),
                "bytes_per_level": tree.levels.iter().map(|level| level.bytes).collect::<Vec<_>>(),
            }),
        );
    }
    let lag = database.async_index_stats();
    json!({
        "collections": collections,
        "engine": {
            "last_sequence": engine.last_sequence,
            "writes": engine.writes,
            "bytes_written": engine.bytes_written,
            "wal_bytes": engine.wal_bytes,
            "wal_syncs": engine.wal_syncs,
            "flushes": engine.flushes,
            "compactions": engine.compactions,
            "seek_compactions": engine.seek_compactions,
            "memtable_bytes": engine.memtable_bytes,
            "block_cache_bytes": engine.block_cache_bytes,
            "blocks_read_from_disk": engine.blocks_read_from_disk,
            "blocks_read_from_cache": engine.blocks_read_from_cache,
            "write_stalls": engine.write_stalls,
            "write_stall_us": engine.write_stall_micros,
            "write_slowdown_us": engine.write_slowdown_micros,
            "write_stop_memtables_us": engine.write_stop_memtables_micros,
            "write_stop_l0_us": engine.write_stop_l0_micros,
            "commit_lock_wait_us": engine.commit_lock_wait_micros,
            "background_errors": engine.background_errors,
            "trees": trees,
        },
        "async_index": {
            "queue_length": lag.queue_length,
            "oldest_pending_us": lag.oldest_pending_us,
            "updates_applied": lag.updates_applied,
            "failed_attempts": lag.failed_attempts,
            "last_error": lag.last_error,
            "persistent_failure": lag.persistent_failure,
        },
    })
    .to_string()
}

/// A list of the collection's index records as dicts.
pub fn records_to_python<'py>(
    py: Python<'py>,
    records: &[sift_index::IndexRecord],
) -> PyResult<Bound<'py, pyo3::types::PyList>> {
    let list = pyo3::types::PyList::empty(py);
    for record in records {
        list.append(index_record_to_python(py, record)?)?;
    }
    Ok(list)
}
