//! Sift's secondary-index layer. This part holds the foundations every index kind builds on:
//! typed attribute values ([`value`]), memcomparable encodings and composite keys
//! ([`encoding`]), attribute paths ([`path`]), the stored document envelope ([`envelope`]) and
//! the write-time document parser ([`document`]). Byte layouts: `docs/format/index-encodings.md`.

pub mod document;
pub mod encoding;
pub mod envelope;
pub mod error;
pub mod path;
mod time;
pub mod value;

pub use document::{DocumentParser, IndexedAttribute, ParsedDocument, TypeMismatchPolicy};
pub use encoding::{
    checked_range_bounds, composite_key, decode_pk, decode_value, encode_pk, encode_value,
    range_bounds, split_composite_key, value_bounds, value_prefix, zorder, zorder_cell, GeoCell,
};
pub use envelope::{Envelope, EnvelopeRef, RawAttr};
pub use error::{
    IndexError, Result, MAX_ATTRIBUTE_PATH_BYTES, MAX_ATTRIBUTE_PATH_SEGMENTS, MAX_DOCUMENT_BYTES,
    MAX_PRIMARY_KEY_BYTES, MAX_STRING_VALUE_BYTES,
};
pub use path::AttrPath;
pub use value::{AttrType, AttrValue};
