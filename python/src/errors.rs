//! The exception hierarchy: `sift_lsm.Error` and one subclass per kind of failure a caller
//! handles differently. Each carries the engine's own message.

use pyo3::create_exception;
use pyo3::exceptions::PyException;
use pyo3::prelude::*;
use sift_index::IndexError;

create_exception!(
    sift_lsm,
    Error,
    PyException,
    "Base class of every error Sift raises."
);
create_exception!(
    sift_lsm,
    InvalidDocument,
    Error,
    "A document (or a value in it) cannot be stored; nothing was written."
);
create_exception!(
    sift_lsm,
    UniqueViolation,
    Error,
    "A unique index already holds the value for another document; nothing was written."
);
create_exception!(
    sift_lsm,
    CollectionNotFound,
    Error,
    "No collection of that name."
);
create_exception!(
    sift_lsm,
    IndexNotFound,
    Error,
    "The collection has no index of that name."
);
create_exception!(
    sift_lsm,
    AlreadyExists,
    Error,
    "A collection or index of that name exists already."
);
create_exception!(
    sift_lsm,
    InvalidArgument,
    Error,
    "A bad argument: an index definition, a query value or bounds, a box, a limit."
);
create_exception!(
    sift_lsm,
    Corruption,
    Error,
    "Stored data failed a check; the message names the file and offset or the record."
);
create_exception!(
    sift_lsm,
    DatabaseClosed,
    Error,
    "The database was closed (or stopped after a background error)."
);
create_exception!(
    sift_lsm,
    DatabaseLocked,
    Error,
    "Another process or handle has the database open."
);
create_exception!(
    sift_lsm,
    StorageError,
    Error,
    "An I/O error of the storage engine."
);
create_exception!(
    sift_lsm,
    SessionExpired,
    Error,
    "The session sat idle past its timeout, or was ended; start a new one."
);

/// Registers the exception classes on the module.
pub fn register(module: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = module.py();
    module.add("Error", py.get_type::<Error>())?;
    module.add("InvalidDocument", py.get_type::<InvalidDocument>())?;
    module.add("UniqueViolation", py.get_type::<UniqueViolation>())?;
    module.add("CollectionNotFound", py.get_type::<CollectionNotFound>())?;
    module.add("IndexNotFound", py.get_type::<IndexNotFound>())?;
    module.add("AlreadyExists", py.get_type::<AlreadyExists>())?;
    module.add("InvalidArgument", py.get_type::<InvalidArgument>())?;
    module.add("Corruption", py.get_type::<Corruption>())?;
    module.add("DatabaseClosed", py.get_type::<DatabaseClosed>())?;
    module.add("DatabaseLocked", py.get_type::<DatabaseLocked>())?;
    module.add("StorageError", py.get_type::<StorageError>())?;
    module.add("SessionExpired", py.get_type::<SessionExpired>())?;
    Ok(())
}

/// The Python exception for an error of the index layer.
pub fn to_python(error: &IndexError) -> PyErr {
    let message = error.to_string();
    match error {
        IndexError::InvalidJson { .. }
        | IndexError::NotAnObject { .. }
        | IndexError::MissingPrimaryKey { .. }
        | IndexError::InvalidPrimaryKey { .. }
        | IndexError::PrimaryKeyTooLong { .. }
        | IndexError::DocumentTooLarge { .. }
        | IndexError::WrongType { .. }
        | IndexError::NotANumber { .. }
        | IndexError::StringTooLong { .. }
        | IndexError::InvalidTime { .. }
        | IndexError::InvalidGeo { .. } => InvalidDocument::new_err(message),
        IndexError::UniqueViolation { .. } => UniqueViolation::new_err(message),
        IndexError::UnknownCollection { .. } => CollectionNotFound::new_err(message),
        IndexError::UnknownIndex { .. } => IndexNotFound::new_err(message),
        IndexError::AlreadyExists { .. } => AlreadyExists::new_err(message),
        IndexError::InvalidPath { .. }
        | IndexError::InvalidValue { .. }
        | IndexError::ReversedRange { .. }
        | IndexError::MixedRangeTypes { .. }
        | IndexError::InvalidSchema { .. }
        | IndexError::InvalidIndexSpec { .. }
        | IndexError::QueryTypeMismatch { .. }
        | IndexError::InvalidGeoBox { .. }
        | IndexError::UnsupportedQuery { .. }
        | IndexError::ForeignSession { .. } => InvalidArgument::new_err(message),
        IndexError::Corrupt { .. }
        | IndexError::CorruptCatalog { .. }
        | IndexError::CorruptDocument { .. }
        | IndexError::CorruptIndexEntry { .. }
        | IndexError::InconsistentIndex { .. } => Corruption::new_err(message),
        IndexError::Io { .. } => StorageError::new_err(message),
        IndexError::SessionExpired { .. } => SessionExpired::new_err(message),
        IndexError::Engine(engine) => engine_error(engine, message),
        _ => Error::new_err(message),
    }
}

fn engine_error(error: &sift_lsm::Error, message: String) -> PyErr {
    match error {
        sift_lsm::Error::Corruption { .. } => Corruption::new_err(message),
        sift_lsm::Error::Closed(_) => DatabaseClosed::new_err(message),
        sift_lsm::Error::Locked { .. } => DatabaseLocked::new_err(message),
        sift_lsm::Error::Io { .. } => StorageError::new_err(message),
        sift_lsm::Error::InvalidArgument(_) => InvalidArgument::new_err(message),
        _ => Error::new_err(message),
    }
}
