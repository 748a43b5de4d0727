//! Errors of the index layer, and the documented size limits they enforce.
//!
//! Every message names what was wrong (the attribute path, the expected type, what was found),
//! so a CLI can print it as is.

use crate::attr_type::{AttrType, UnknownAttrType};

/// Longest indexed string value, in UTF-8 bytes. Longer strings are rejected (or left unindexed,
/// depending on the parser's policy) because they would make huge index keys.
pub const MAX_STRING_VALUE_BYTES: usize = 1024;

/// Longest primary key, in bytes (a string key's UTF-8, an integer key's decimal text).
pub const MAX_PRIMARY_KEY_BYTES: usize = 1024;

/// Largest document accepted by the parser, in bytes of JSON text.
pub const MAX_DOCUMENT_BYTES: usize = 16 * 1024 * 1024;

/// Longest attribute path text, in bytes.
pub const MAX_ATTRIBUTE_PATH_BYTES: usize = 1024;

/// Most segments in one attribute path (`a.b.c` has three).
pub const MAX_ATTRIBUTE_PATH_SEGMENTS: usize = 32;

pub type Result<T, E = IndexError> = std::result::Result<T, E>;

#[non_exhaustive]
#[derive(Debug, thiserror::Error)]
pub enum IndexError {
    #[error("invalid JSON at line {line}, column {column}: {message}")]
    InvalidJson {
        line: usize,
        column: usize,
        message: String,
    },

    #[error("document must be a JSON object, found {found}")]
    NotAnObject { found: String },

    #[error("document has no primary key field `{field}`")]
    MissingPrimaryKey { field: String },

    #[error("primary key field `{field}` must be a non-empty string or an integer, found {found}")]
    InvalidPrimaryKey { field: String, found: String },

    #[error(
        "primary key of field `{field}` is {length_bytes} bytes; the limit is {limit_bytes} bytes"
    )]
    PrimaryKeyTooLong {
        field: String,
        length_bytes: usize,
        limit_bytes: usize,
    },

    #[error("document is {length_bytes} bytes; the limit is {limit_bytes} bytes")]
    DocumentTooLarge {
        length_bytes: usize,
        limit_bytes: usize,
    },

    #[error("attribute `{path}` must be of type {expected}, found {found}")]
    WrongType {
        path: String,
        expected: AttrType,
        found: String,
    },

    #[error("{context}: NaN is not a valid float value")]
    NotANumber { context: String },

    #[error(
        "attribute `{path}` is a string of {length_bytes} bytes; the limit is {limit_bytes} bytes"
    )]
    StringTooLong {
        path: String,
        length_bytes: usize,
        limit_bytes: usize,
    },

    #[error("bad attribute path `{path}`: {reason}")]
    InvalidPath { path: String, reason: String },

    #[error("{context}: bad time {found}: {reason} (expected an RFC 3339 timestamp such as 2020-01-01T00:00:00Z, or integer epoch milliseconds)")]
    InvalidTime {
        context: String,
        found: String,
        reason: String,
    },

    #[error("{context}: bad geo point {found}: {reason} (expected [lon, lat] with lon in -180..=180 and lat in -90..=90)")]
    InvalidGeo {
        context: String,
        found: String,
        reason: String,
    },

    #[error("bad {expected} value `{text}`: {reason}")]
    InvalidValue {
        expected: AttrType,
        text: String,
        reason: String,
    },

    #[error("empty range: lower bound {lo} is greater than upper bound {hi}")]
    ReversedRange { lo: String, hi: String },

    #[error("range bounds differ in type: {lo_type} and {hi_type}")]
    MixedRangeTypes {
        lo_type: AttrType,
        hi_type: AttrType,
    },

    #[error("bad index schema: {reason}")]
    InvalidSchema { reason: String },

    #[error("corrupt encoded bytes at offset {offset}: {message}")]
    Corrupt { offset: usize, message: String },

    #[error("storage engine: {0}")]
    Engine(#[from] sift_lsm::Error),

    #[error("unknown collection `{name}`")]
    UnknownCollection { name: String },

    #[error("collection `{collection}` has no index `{name}`")]
    UnknownIndex { collection: String, name: String },

    #[error("{what} `{name}` already exists")]
    AlreadyExists { what: &'static str, name: String },

    #[error("bad index definition `{name}`: {reason}")]
    InvalidIndexSpec { name: String, reason: String },

    #[error("index `{index}` holds {found} values; the query gave a {given} value")]
    QueryTypeMismatch {
        index: String,
        found: AttrType,
        given: AttrType,
    },

    #[error("unique index `{index}` already holds the value {value} for another document; nothing was written")]
    UniqueViolation { index: String, value: String },
    #[error("bad bounding box {found}: {reason} (expected min_lon,min_lat,max_lon,max_lat: finite degrees, longitudes in -180..=180, latitudes in -90..=90, each min <= its max)")]
    InvalidGeoBox { found: String, reason: String },

    #[error("index `{index}` cannot answer this query: {reason}")]
    UnsupportedQuery { index: String, reason: String },

    #[error("catalog record `{key}` is corrupt: {message}")]
    CorruptCatalog { key: String, message: String },

    #[error("internal invariant broken: {0}")]
    Internal(String),

    #[error("asynchronous index maintenance keeps failing ({attempts} attempts so far, still retrying): {message}")]
    IndexingFailed { attempts: u32, message: String },

    #[error("the session expired after {idle_seconds} seconds without use; start a new session")]
    SessionExpired { idle_seconds: u64 },
}

impl From<UnknownAttrType> for IndexError {
    fn from(error: UnknownAttrType) -> IndexError {
        IndexError::InvalidSchema {
            reason: error.to_string(),
        }
    }
}

impl IndexError {
    pub(crate) fn corrupt(offset: usize, message: impl Into<String>) -> IndexError {
        IndexError::Corrupt {
            offset,
            message: message.into(),
        }
    }

    /// Adds `base` to the offset of a `Corrupt` error (for errors from a nested decoder that
    /// only knew offsets inside its own slice); other errors pass through unchanged.
    pub(crate) fn shift_offset(self, base: usize) -> IndexError {
        match self {
            IndexError::Corrupt { offset, message } => IndexError::Corrupt {
                offset: offset + base,
                message,
            },
            other => other,
        }
    }
}
