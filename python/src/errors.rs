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

/// Defines each subclass of `Error` and `register`, which adds `Error` and them to the module:
/// every class is named once.
macro_rules! subclasses_of_error {
    ($($name:ident: $doc:literal,)*) => {
        $(create_exception!(sift_lsm, $name, Error, $doc);)*

        /// Registers the exception classes on the module.
        pub fn register(module: &Bound<'_, PyModule>) -> PyResult<()> {
            let py = module.py();
            module.add("Error", py.get_type::<Error>())?;
            $(module.add(stringify!($name), py.get_type::<$name>())?;)*
            Ok(())
        }
    };
}

subclasses_of_error! {
    InvalidDocument: "A document (or a value in it) cannot be stored; nothing was written.",
    UniqueViolation: "A unique index already holds the value for another document; nothing was written.",
    CollectionNotFound: "No collection of that name.",
    IndexNotFound: "The collection has no index of that name.",
    AlreadyExists: "A collection or index of that name exists already.",
    InvalidArgument: "A bad argument: an index definition, a query value or bounds, a box, a limit.",
    Corruption: "Stored data failed a check; the message names the file and offset or the record.",
    DatabaseClosed: "The database was closed (or stopped after a background error).",
    DatabaseLocked: "Another process or handle has the database open.",
    StorageError: "An I/O error of the storage engine.",
    SessionExpired: "The session sat idle past its timeout, or was ended; start a new one.",
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
