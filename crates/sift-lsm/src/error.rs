//! The one error type of the engine.

use std::path::PathBuf;

/// Everything that can go wrong in `sift-lsm`.
///
/// Corruption always names the file and the byte offset where the damage was found, so that an
/// operator can look at it; the engine never panics on bytes read from disk.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// An operating-system I/O error, with the file it concerned.
    #[error("I/O error on {path}: {source}")]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The operating system's error.
        #[source]
        source: std::io::Error,
    },

    /// Bytes on disk do not decode or fail their checksum.
    #[error("corruption in {file} at offset {offset}: {message}")]
    Corruption {
        /// The damaged file.
        file: PathBuf,
        /// Where in it the damage was found, in bytes.
        offset: u64,
        /// What does not decode.
        message: String,
    },

    /// A caller passed something the engine does not accept (key too long, empty tree name, ...).
    #[error("invalid argument: {0}")]
    InvalidArgument(String),

    /// No tree of that name exists (or it was dropped).
    #[error("tree not found: {0:?}")]
    TreeNotFound(String),

    /// `create_tree` with a name already in use.
    #[error("tree already exists: {0:?}")]
    TreeExists(String),

    /// Another process (or another `Db` in this process) holds the directory's LOCK file.
    #[error("database {path} is locked by another process or handle ({detail})")]
    Locked {
        /// The database directory.
        path: PathBuf,
        /// What happened.
        detail: String,
    },

    /// The directory holds no database and `create_if_missing` is off, or holds one and
    /// `error_if_exists` is on.
    #[error("cannot open database at {path}: {detail}")]
    OpenRefused {
        /// The database directory.
        path: PathBuf,
        /// What happened.
        detail: String,
    },

    /// A merge operator failed or none is configured for a tree that holds merge operands.
    #[error("merge failed in tree {tree:?}: {detail}")]
    Merge {
        /// The tree's name.
        tree: String,
        /// What happened.
        detail: String,
    },

    /// The database was closed, or a background error made it read-only.
    #[error("database is closed or stopped after a background error: {0}")]
    Closed(String),
}

/// The engine's results.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// An I/O error on `path`.
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Error::Io {
            path: path.into(),
            source,
        }
    }

    /// Damage in `file` at `offset`.
    pub fn corruption(file: impl Into<PathBuf>, offset: u64, message: impl Into<String>) -> Self {
        Error::Corruption {
            file: file.into(),
            offset,
            message: message.into(),
        }
    }

    /// Whether this is [`Error::Corruption`].
    pub fn is_corruption(&self) -> bool {
        matches!(self, Error::Corruption { .. })
    }

    /// A copy of this error for reporting to several waiters (I/O errors keep kind and text).
    pub fn duplicate(&self) -> Error {
        match self {
            Error::Io { path, source } => Error::Io {
                path: path.clone(),
                source: std::io::Error::new(source.kind(), source.to_string()),
            },
            Error::Corruption {
                file,
                offset,
                message,
            } => Error::Corruption {
                file: file.clone(),
                offset: *offset,
                message: message.clone(),
            },
            Error::InvalidArgument(s) => Error::InvalidArgument(s.clone()),
            Error::TreeNotFound(s) => Error::TreeNotFound(s.clone()),
            Error::TreeExists(s) => Error::TreeExists(s.clone()),
            Error::Locked { path, detail } => Error::Locked {
                path: path.clone(),
                detail: detail.clone(),
            },
            Error::OpenRefused { path, detail } => Error::OpenRefused {
                path: path.clone(),
                detail: detail.clone(),
            },
            Error::Merge { tree, detail } => Error::Merge {
                tree: tree.clone(),
                detail: detail.clone(),
            },
            Error::Closed(s) => Error::Closed(s.clone()),
        }
    }
}
