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

/// This layer's results.
pub type Result<T, E = IndexError> = std::result::Result<T, E>;

/// Everything that can go wrong in the index layer. Errors caused by input name the input and
/// leave what is stored unchanged.
#[non_exhaustive]
#[derive(Debug, thiserror::Error)]
pub enum IndexError {
    /// The document is not valid JSON.
    #[error("invalid JSON at line {line}, column {column}: {message}")]
    InvalidJson {
        /// Line of the error, from 1.
        line: usize,
        /// Column of the error, from 1.
        column: usize,
        /// What is wrong.
        message: String,
    },

    /// The document is JSON but not an object.
    #[error("document must be a JSON object, found {found}")]
    NotAnObject {
        /// What was found instead.
        found: String,
    },

    /// The document lacks its collection's primary key field.
    #[error("document has no primary key field `{field}`")]
    MissingPrimaryKey {
        /// The primary key field's path.
        field: String,
    },

    /// The primary key field holds something other than a non-empty string or an integer.
    #[error("primary key field `{field}` must be a non-empty string or an integer, found {found}")]
    InvalidPrimaryKey {
        /// The primary key field's path.
        field: String,
        /// What was found instead.
        found: String,
    },

    /// The primary key is longer than `MAX_PRIMARY_KEY_BYTES`.
    #[error(
        "primary key of field `{field}` is {length_bytes} bytes; the limit is {limit_bytes} bytes"
    )]
    PrimaryKeyTooLong {
        /// The primary key field's path.
        field: String,
        /// The length found, in bytes.
        length_bytes: usize,
        /// The limit, in bytes.
        limit_bytes: usize,
    },

    /// The document is larger than `MAX_DOCUMENT_BYTES`.
    #[error("document is {length_bytes} bytes; the limit is {limit_bytes} bytes")]
    DocumentTooLarge {
        /// The length found, in bytes.
        length_bytes: usize,
        /// The limit, in bytes.
        limit_bytes: usize,
    },

    /// An indexed attribute holds a value of another type than its index declares.
    #[error("attribute `{path}` must be of type {expected}, found {found}")]
    WrongType {
        /// The attribute path.
        path: String,
        /// The type the index declares.
        expected: AttrType,
        /// What the document holds instead.
        found: String,
    },

    /// A float value is NaN.
    #[error("{context}: NaN is not a valid float value")]
    NotANumber {
        /// Which value or argument it was.
        context: String,
    },

    /// A string value is longer than `MAX_STRING_VALUE_BYTES`.
    #[error(
        "attribute `{path}` is a string of {length_bytes} bytes; the limit is {limit_bytes} bytes"
    )]
    StringTooLong {
        /// The attribute path.
        path: String,
        /// The length found, in bytes.
        length_bytes: usize,
        /// The limit, in bytes.
        limit_bytes: usize,
    },

    /// An attribute path does not parse or exceeds the path limits.
    #[error("bad attribute path `{path}`: {reason}")]
    InvalidPath {
        /// The attribute path.
        path: String,
        /// Why it was refused.
        reason: String,
    },

    /// A time value is neither RFC 3339 text nor integer epoch milliseconds.
    #[error("{context}: bad time {found}: {reason} (expected an RFC 3339 timestamp such as 2020-01-01T00:00:00Z, or integer epoch milliseconds)")]
    InvalidTime {
        /// Which value or argument it was.
        context: String,
        /// What was found instead.
        found: String,
        /// Why it was refused.
        reason: String,
    },

    /// A geo value is not `[lon, lat]` in range.
    #[error("{context}: bad geo point {found}: {reason} (expected [lon, lat] with lon in -180..=180 and lat in -90..=90)")]
    InvalidGeo {
        /// Which value or argument it was.
        context: String,
        /// What was found instead.
        found: String,
        /// Why it was refused.
        reason: String,
    },

    /// Query text does not parse as a value of the index's type.
    #[error("bad {expected} value `{text}`: {reason}")]
    InvalidValue {
        /// The type the index declares.
        expected: AttrType,
        /// The text given.
        text: String,
        /// Why it was refused.
        reason: String,
    },

    /// A range's lower bound is above its upper bound.
    #[error("empty range: lower bound {lo} is greater than upper bound {hi}")]
    ReversedRange {
        /// The lower bound given.
        lo: String,
        /// The upper bound given.
        hi: String,
    },

    /// A range's bounds have different types.
    #[error("range bounds differ in type: {lo_type} and {hi_type}")]
    MixedRangeTypes {
        /// Type of the lower bound.
        lo_type: AttrType,
        /// Type of the upper bound.
        hi_type: AttrType,
    },

    /// A schema element (attribute type name, pk path) is not one this layer knows.
    #[error("bad index schema: {reason}")]
    InvalidSchema {
        /// Why it was refused.
        reason: String,
    },

    /// Encoded bytes do not decode (damage, or bytes from another format).
    #[error("corrupt encoded bytes at offset {offset}: {message}")]
    Corrupt {
        /// Byte offset of the damage in the decoded input.
        offset: usize,
        /// What is wrong.
        message: String,
    },

    /// An error of the storage engine underneath.
    #[error("storage engine: {0}")]
    Engine(#[from] sift_lsm::Error),

    /// No collection has this name.
    #[error("unknown collection `{name}`")]
    UnknownCollection {
        /// The name given.
        name: String,
    },

    /// The collection has no index of this name.
    #[error("collection `{collection}` has no index `{name}`")]
    UnknownIndex {
        /// The collection's name.
        collection: String,
        /// The name given.
        name: String,
    },

    /// A collection or index of this name exists already.
    #[error("{what} `{name}` already exists")]
    AlreadyExists {
        /// What exists: `collection` or `index`.
        what: &'static str,
        /// The name given.
        name: String,
    },

    /// An index definition is not valid (kind, maintenance and options that do not combine).
    #[error("bad index definition `{name}`: {reason}")]
    InvalidIndexSpec {
        /// The name given.
        name: String,
        /// Why it was refused.
        reason: String,
    },

    /// A query value's type is not the index's type.
    #[error("index `{index}` holds {found} values; the query gave a {given} value")]
    QueryTypeMismatch {
        /// The index's name.
        index: String,
        /// The type the index holds.
        found: AttrType,
        /// The type of the value the query gave.
        given: AttrType,
    },

    /// A write would give a unique index's value to a second live document.
    #[error("unique index `{index}` already holds the value {value} for another document; nothing was written")]
    UniqueViolation {
        /// The index's name.
        index: String,
        /// The value, as text.
        value: String,
    },

    /// A bounding box is not valid.
    #[error("bad bounding box {found}: {reason} (expected min_lon,min_lat,max_lon,max_lat: finite degrees, longitudes in -180..=180, latitudes in -90..=90, each min <= its max)")]
    InvalidGeoBox {
        /// The box as given.
        found: String,
        /// Why it was refused.
        reason: String,
    },

    /// The index's kind cannot answer this query.
    #[error("index `{index}` cannot answer this query: {reason}")]
    UnsupportedQuery {
        /// The index's name.
        index: String,
        /// Why it was refused.
        reason: String,
    },

    /// A catalog record does not decode.
    #[error("catalog record `{key}` is corrupt: {message}")]
    CorruptCatalog {
        /// The catalog key of the record.
        key: String,
        /// What is wrong.
        message: String,
    },

    /// A stored document version does not decode (damage on disk, or a bug that wrote it).
    #[error("stored document {pk:?} of collection `{collection}` is corrupt: {message}")]
    CorruptDocument {
        /// The collection's name.
        collection: String,
        /// The document's primary key (lossy UTF-8).
        pk: String,
        /// What is wrong.
        message: String,
    },

    /// An index entry (composite key, posting list, secondary block entry) does not decode.
    /// Dropping and re-creating the index rebuilds it from the documents.
    #[error("index `{index}` of collection `{collection}`: corrupt {what}: {message}")]
    CorruptIndexEntry {
        /// The collection's name.
        collection: String,
        /// The index's name.
        index: String,
        /// Which part failed to decode (`composite key`, `posting list`, ...).
        what: String,
        /// What is wrong.
        message: String,
    },

    /// A consistency check (`check_global_index`, `check_secondary_blocks`) found an index
    /// that does not match the engine's files.
    #[error("index `{index}` is inconsistent: {message}")]
    InconsistentIndex {
        /// The index's name.
        index: String,
        /// What is wrong.
        message: String,
    },

    /// The operating system refused something the layer needs (a thread, a file).
    #[error("{context}: {source}")]
    Io {
        /// What the layer was trying to do.
        context: String,
        /// The operating system's error.
        #[source]
        source: std::io::Error,
    },

    /// A broken invariant of this layer: a bug, never bad input.
    #[error("internal invariant broken: {0}")]
    Internal(String),

    /// Asynchronous maintenance keeps failing; it goes on retrying.
    #[error("asynchronous index maintenance keeps failing ({attempts} attempts so far, still retrying): {message}")]
    IndexingFailed {
        /// Failed attempts so far.
        attempts: u32,
        /// What is wrong.
        message: String,
    },

    /// The session sat idle longer than its timeout.
    #[error("the session expired after {idle_seconds} seconds without use; start a new session")]
    SessionExpired {
        /// The idle timeout, in seconds.
        idle_seconds: u64,
    },

    /// A session handle was attached to a database other than the one that started it.
    #[error("session {id} belongs to another database")]
    ForeignSession {
        /// The session's id.
        id: u64,
    },
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
