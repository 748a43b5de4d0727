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
    Int = 1,
    Float = 2,
    String = 3,
    Time = 4,
    Geo = 5,
}

impl AttrType {
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

    pub fn from_type_byte(byte: u8) -> Option<AttrType> {
        AttrType::ALL.into_iter().find(|t| t.type_byte() == byte)
    }

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
