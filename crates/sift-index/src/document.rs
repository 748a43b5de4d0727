//! Write-time document parsing: JSON text → primary key + envelope of typed attribute values.
//!
//! This is the one place a document's JSON is parsed. Rules: the document must be a JSON
//! object within [`MAX_DOCUMENT_BYTES`]; the primary key is a non-empty string (its UTF-8) or an
//! integer (its decimal text, so the string `"42"` and the integer `42` are the same key) within
//! [`MAX_PRIMARY_KEY_BYTES`]; an indexed attribute that is missing or JSON `null` is absent (the
//! document is not indexed under it); an attribute whose value does not convert to the declared
//! type (wrong JSON type, bad time, bad geo point, over-long string) rejects the document, or,
//! with [`TypeMismatchPolicy::StoreUnindexed`], leaves that attribute out of the envelope.
//!
//! Integer primary keys order as their decimal text, not as numbers: `"10000" < "100000" <
//! "10001"`. Ids of different widths therefore interleave in the primary tree. Time-ordered
//! integer ids (snowflake ids, `base + counter`) should have equal width so key order stays
//! creation order; otherwise a time range spreads over every table and block, and zone maps
//! or NEXT's per-block ranges on a time attribute stop pruning. (The tweet generator uses
//! 16-digit ids for this reason.)

use serde_json::Value;

use crate::envelope::Envelope;
use crate::error::{IndexError, Result, MAX_DOCUMENT_BYTES, MAX_PRIMARY_KEY_BYTES};
use crate::path::AttrPath;
use crate::projection::PathTrie;
use crate::value::{describe_json, AttrType, AttrValue};

/// One indexed attribute as the parser sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IndexedAttribute {
    /// The id stored in envelopes (unique per collection).
    pub id: u32,
    pub path: AttrPath,
    pub attr_type: AttrType,
}

/// What to do with an attribute whose value does not fit its declared type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TypeMismatchPolicy {
    /// Reject the whole write with the error (the default).
    #[default]
    Reject,
    /// Store the document without that attribute (it is not indexed under it) and report the
    /// error in [`ParsedDocument::unindexed`].
    StoreUnindexed,
}

#[derive(Debug)]
pub struct ParsedDocument {
    /// A string key's UTF-8 bytes or an integer key's decimal text.
    pub pk: Vec<u8>,
    pub envelope: Envelope,
    /// Attributes left out under [`TypeMismatchPolicy::StoreUnindexed`], with the reason.
    pub unindexed: Vec<(u32, IndexError)>,
}

#[derive(Debug, Clone)]
pub struct DocumentParser {
    pk_path: AttrPath,
    /// Sorted by id, ids unique.
    attributes: Vec<IndexedAttribute>,
    on_type_mismatch: TypeMismatchPolicy,
    /// The primary key's and attributes' paths: only those parts of a document are parsed
    /// into values.
    projection: PathTrie,
}

impl DocumentParser {
    /// A parser for documents keyed by the field at `pk_path` (usually a top-level name such as
    /// `tweet_id`) carrying `attributes`. Attribute ids must be unique.
    pub fn new(pk_path: AttrPath, mut attributes: Vec<IndexedAttribute>) -> Result<DocumentParser> {
        attributes.sort_by_key(|attribute| attribute.id);
        if let Some(pair) = attributes.windows(2).find(|pair| pair[0].id == pair[1].id) {
            return Err(IndexError::InvalidSchema {
                reason: format!(
                    "attribute id {} is used by both `{}` and `{}`",
                    pair[0].id, pair[0].path, pair[1].path
                ),
            });
        }
        let projection = PathTrie::new(
            std::iter::once(&pk_path).chain(attributes.iter().map(|attribute| &attribute.path)),
        );
        Ok(DocumentParser {
            pk_path,
            attributes,
            on_type_mismatch: TypeMismatchPolicy::Reject,
            projection,
        })
    }

    pub fn with_type_mismatch_policy(mut self, policy: TypeMismatchPolicy) -> DocumentParser {
        self.on_type_mismatch = policy;
        self
    }

    pub fn pk_path(&self) -> &AttrPath {
        &self.pk_path
    }

    /// The attributes, sorted by id.
    pub fn attributes(&self) -> &[IndexedAttribute] {
        &self.attributes
    }

    pub fn type_mismatch_policy(&self) -> TypeMismatchPolicy {
        self.on_type_mismatch
    }

    /// Parses and checks one document. On error nothing about the document is usable; the
    /// error names what was wrong.
    pub fn parse(&self, json: &[u8]) -> Result<ParsedDocument> {
        if json.len() > MAX_DOCUMENT_BYTES {
            return Err(IndexError::DocumentTooLarge {
                length_bytes: json.len(),
                limit_bytes: MAX_DOCUMENT_BYTES,
            });
        }
        // The value at each path: the primary key's first, then the attributes' in order (on
        // the stack for a few paths).
        const INLINE_PATHS: usize = 4;
        let count = self.projection.path_count();
        let mut inline: [Option<Value>; INLINE_PATHS] = Default::default();
        let mut heap: Vec<Option<Value>>;
        let values: &mut [Option<Value>] = if count <= INLINE_PATHS {
            &mut inline[..count]
        } else {
            heap = vec![None; count];
            &mut heap
        };
        let root = self
            .projection
            .parse_paths_into(json, values)
            .map_err(|e| invalid_json(&e))?;
        if let Some(document) = root {
            return Err(IndexError::NotAnObject {
                found: describe_json(&document),
            });
        }
        let pk = self.primary_key_at(values.first().and_then(Option::as_ref))?;
        let mut attrs = Vec::with_capacity(self.attributes.len());
        let mut unindexed = Vec::new();
        for (attribute, value) in self.attributes.iter().zip(values.iter().skip(1)) {
            let Some(json_value) = value else {
                continue;
            };
            if json_value.is_null() {
                continue;
            }
            match AttrValue::from_json(json_value, attribute.attr_type, attribute.path.as_str()) {
                Ok(value) => attrs.push((attribute.id, value)),
                Err(error) => match self.on_type_mismatch {
                    TypeMismatchPolicy::Reject => return Err(error),
                    TypeMismatchPolicy::StoreUnindexed => unindexed.push((attribute.id, error)),
                },
            }
        }
        Ok(ParsedDocument {
            pk,
            envelope: Envelope {
                attrs,
                doc: json.to_vec(),
            },
            unindexed,
        })
    }

    /// The primary key bytes of a parsed document.
    pub fn primary_key(&self, document: &Value) -> Result<Vec<u8>> {
        self.primary_key_at(self.pk_path.lookup(document))
    }

    /// The primary key bytes given the value at the primary key's path.
    fn primary_key_at(&self, value: Option<&Value>) -> Result<Vec<u8>> {
        let field = || self.pk_path.as_str().to_string();
        let value = value.ok_or_else(|| IndexError::MissingPrimaryKey { field: field() })?;
        let pk = match value {
            Value::String(text) if !text.is_empty() => text.as_bytes().to_vec(),
            Value::Number(number) if number.is_i64() || number.is_u64() => {
                number.to_string().into_bytes()
            }
            other => {
                return Err(IndexError::InvalidPrimaryKey {
                    field: field(),
                    found: describe_json(other),
                })
            }
        };
        if pk.len() > MAX_PRIMARY_KEY_BYTES {
            return Err(IndexError::PrimaryKeyTooLong {
                field: field(),
                length_bytes: pk.len(),
                limit_bytes: MAX_PRIMARY_KEY_BYTES,
            });
        }
        Ok(pk)
    }
}

fn invalid_json(error: &serde_json::Error) -> IndexError {
    let (line, column) = (error.line(), error.column());
    let full = error.to_string();
    let suffix = format!(" at line {line} column {column}");
    let message = full.strip_suffix(&suffix).unwrap_or(&full).to_string();
    IndexError::InvalidJson {
        line,
        column,
        message,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parser() -> DocumentParser {
        DocumentParser::new(
            AttrPath::parse("id").unwrap(),
            vec![
                IndexedAttribute {
                    id: 2,
                    path: AttrPath::parse("user.id").unwrap(),
                    attr_type: AttrType::Int,
                },
                IndexedAttribute {
                    id: 1,
                    path: AttrPath::parse("/created").unwrap(),
                    attr_type: AttrType::Time,
                },
            ],
        )
        .unwrap()
    }

    #[test]
    fn parses_pk_and_attributes() {
        let json = br#"{"id": "t1", "user": {"id": 7}, "created": "2020-01-01T00:00:00Z"}"#;
        let parsed = parser().parse(json).unwrap();
        assert_eq!(parsed.pk, b"t1");
        assert_eq!(
            parsed.envelope.attrs,
            vec![
                (1, AttrValue::Time(1_577_836_800_000)),
                (2, AttrValue::Int(7))
            ]
        );
        assert_eq!(parsed.envelope.doc, json);
        let parsed = parser().parse(br#"{"id": -12}"#).unwrap();
        assert_eq!(parsed.pk, b"-12");
        assert!(parsed.envelope.attrs.is_empty());
    }

    #[test]
    fn duplicate_ids_rejected() {
        let attribute = IndexedAttribute {
            id: 1,
            path: AttrPath::parse("a").unwrap(),
            attr_type: AttrType::Int,
        };
        let err = DocumentParser::new(
            AttrPath::parse("id").unwrap(),
            vec![attribute.clone(), attribute],
        )
        .unwrap_err();
        assert!(matches!(err, IndexError::InvalidSchema { .. }));
    }
}
