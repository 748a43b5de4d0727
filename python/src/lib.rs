//! `sift_lsm._native`: the Python binding of Sift's index layer (`sift_index`), re-exported
//! by the `sift_lsm` package. Documented for Python users in `python/README.md`; the stubs in
//! `python/sift_lsm/_native.pyi` mirror the signatures here.
//!
//! - `database.rs`: `open`, `Database` and `Session`; `shared.rs`: the open database shared
//!   by everything made from it (engine calls run without the GIL) and a session's slot.
//! - `collection.rs`: `Collection` (documents, indexes, queries) and its iterators.
//! - `import.rs`: `Collection.import_jsonl`.
//! - `json.rs`: Python objects to JSON text and back; `values.rs`: keys, query values, boxes.
//! - `errors.rs`: the exception classes; `stats.rs`: `Database.stats()`.

mod collection;
mod database;
mod errors;
mod import;
mod json;
mod shared;
mod stats;
mod values;

use pyo3::prelude::*;

#[pymodule]
fn _native(module: &Bound<'_, PyModule>) -> PyResult<()> {
    module.add_function(wrap_pyfunction!(database::open, module)?)?;
    module.add_class::<database::Database>()?;
    module.add_class::<database::Session>()?;
    module.add_class::<collection::Collection>()?;
    module.add_class::<collection::HitIterator>()?;
    module.add_class::<collection::ScanIterator>()?;
    errors::register(module)?;
    module.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
