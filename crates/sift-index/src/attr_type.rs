//! The five attribute types. A leaf: the error type names them, and values are built on them.

use std::fmt;
use std::str::FromStr;

/// The declared type of an indexed attribute. The discriminant is the type byte stored in
/// envelopes (see `docs/format/index-encodings.md`).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "lowercase")]
#[repr(u8)]
pub enum AttrType {
    /// A signed 64-bit integer.
    Int = 1,
    /// A 64-bit float other than NaN.
    Float = 2,
    /// UTF-8 text of at most `MAX_STRING_VALUE_BYTES`.
    String = 3,
    /// An instant in milliseconds since the Unix epoch (RFC 3339 text in JSON).
    Time = 4,
    /// A point `[lon, lat]` in degrees.
    Geo = 5,
}

impl AttrType {
    /// Every type, in type-byte order.
    pub const ALL: [AttrType; 5] = [
        AttrType::Int,
        AttrType::Float,
        AttrType::String,
        AttrType::Time,
        AttrType::Geo,
    ];

    /// The byte that identifies this type in an envelope.
    pub fn type_byte(self) -> u8 {
        self as u8
    }

    /// The type an envelope's type byte names, if any.
    pub fn from_type_byte(byte: u8) -> Option<AttrType> {
        AttrType::ALL.into_iter().find(|t| t.type_byte() == byte)
    }

    /// The name used in specs, the CLI and messages.
    pub fn name(self) -> &'static str {
        match self {
            AttrType::Int => "int",
            AttrType::Float => "float",
            AttrType::String => "string",
            AttrType::Time => "time",
            AttrType::Geo => "geo",
        }
    }
}

impl fmt::Display for AttrType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A type name that is none of the five ([`AttrType`]'s `FromStr`); becomes
/// `IndexError::InvalidSchema`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownAttrType(pub String);

impl fmt::Display for UnknownAttrType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "unknown attribute type `{}` (expected int, float, string, time or geo)",
            self.0
        )
    }
}

impl std::error::Error for UnknownAttrType {}

impl FromStr for AttrType {
    type Err = UnknownAttrType;

    fn from_str(text: &str) -> std::result::Result<AttrType, UnknownAttrType> {
        AttrType::ALL
            .into_iter()
            .find(|t| t.name() == text)
            .ok_or_else(|| UnknownAttrType(text.to_string()))
    }
}
