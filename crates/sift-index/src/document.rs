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

use crate::conversion::ValueConversion;
use crate::envelope::{put_attr, Envelope, ENVELOPE_MAGIC, ENVELOPE_VERSION};
use crate::error::{IndexError, Result, MAX_DOCUMENT_BYTES, MAX_PRIMARY_KEY_BYTES};
use crate::path::AttrPath;
use crate::projection::{Kept, PathTrie};
use crate::value::{describe_json, AttrType, AttrValue};

/// Envelope bytes reserved per attribute (an int or time record takes 11).
const ENCODED_ATTR_BYTES_TYPICAL: usize = 16;

/// Attributes left out under [`TypeMismatchPolicy::StoreUnindexed`], with the reason.
type Unindexed = Vec<(u32, IndexError)>;

/// One indexed attribute as the parser sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IndexedAttribute {
    /// The id stored in envelopes (unique per collection).
    pub id: u32,
    /// Where the attribute is in a document.
    pub path: AttrPath,
    /// The type its index declares.
    pub attr_type: AttrType,
    /// How its JSON value becomes the index value.
    pub conversion: ValueConversion,
    /// Only documents whose primary key starts with one of these carry it (empty: all).
    pub key_prefixes: Vec<Vec<u8>>,
}

impl IndexedAttribute {
    /// The attribute `id` at `path`, read as `attr_type` reads JSON, in every document.
    pub fn new(id: u32, path: AttrPath, attr_type: AttrType) -> IndexedAttribute {
        IndexedAttribute {
            id,
            path,
            attr_type,
            conversion: ValueConversion::Json,
            key_prefixes: Vec::new(),
        }
    }

    /// The same attribute converted by `conversion`, in the documents whose primary key
    /// starts with one of `key_prefixes` (empty: all).
    pub fn with_source(
        mut self,
        conversion: ValueConversion,
        key_prefixes: &[String],
    ) -> IndexedAttribute {
        self.conversion = conversion;
        self.key_prefixes = key_prefixes
            .iter()
            .map(|prefix| prefix.as_bytes().to_vec())
            .collect();
        self
    }

    /// Whether documents with primary key `pk` carry this attribute.
    pub fn covers_key(&self, pk: &[u8]) -> bool {
        self.key_prefixes.is_empty()
            || self
                .key_prefixes
                .iter()
                .any(|prefix| pk.starts_with(prefix))
    }
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

/// A document as the write path stores it.
#[derive(Debug)]
pub struct ParsedDocument {
    /// A string key's UTF-8 bytes or an integer key's decimal text.
    pub pk: Vec<u8>,
    /// The indexed attributes, pre-encoded, with the JSON.
    pub envelope: Envelope,
    /// Attributes left out under [`TypeMismatchPolicy::StoreUnindexed`], with the reason.
    pub unindexed: Vec<(u32, IndexError)>,
}

/// Parses and validates the documents of one collection: primary key, indexed attributes, limits.
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

    /// What to do with an attribute of the wrong type.
    pub fn with_type_mismatch_policy(mut self, policy: TypeMismatchPolicy) -> DocumentParser {
        self.on_type_mismatch = policy;
        self
    }

    /// The primary key's path.
    pub fn pk_path(&self) -> &AttrPath {
        &self.pk_path
    }

    /// The attributes, sorted by id.
    pub fn attributes(&self) -> &[IndexedAttribute] {
        &self.attributes
    }

    /// The policy for attributes of the wrong type.
    pub fn type_mismatch_policy(&self) -> TypeMismatchPolicy {
        self.on_type_mismatch
    }

    /// Parses and checks one document. On error nothing about the document is usable; the
    /// error names what was wrong.
    pub fn parse(&self, json: &[u8]) -> Result<ParsedDocument> {
        let mut attrs = Vec::with_capacity(self.attributes.len());
        let (pk, unindexed) = self.parse_visiting(json, |id, value| attrs.push((id, value)))?;
        Ok(ParsedDocument {
            pk,
            envelope: Envelope {
                attrs,
                doc: json.to_vec(),
            },
            unindexed,
        })
    }

    /// [`DocumentParser::parse`] straight to what is stored: the primary key and the encoded
    /// envelope (`parse(json)`'s `pk` and `envelope.encode()`), the attributes written as they
    /// are converted and the JSON copied once (the write path's form: no attribute list and
    /// no second copy of the document per write).
    pub fn parse_stored(&self, json: &[u8]) -> Result<(Vec<u8>, Vec<u8>)> {
        /// The attribute count is written before the attributes as one byte, patched after.
        const ONE_BYTE_COUNT_MAX: usize = 0x7F;
        if self.attributes.len() > ONE_BYTE_COUNT_MAX {
            let parsed = self.parse(json)?;
            return Ok((parsed.pk, parsed.envelope.encode()));
        }
        let mut envelope =
            Vec::with_capacity(json.len() + 3 + self.attributes.len() * ENCODED_ATTR_BYTES_TYPICAL);
        envelope.extend_from_slice(&[ENVELOPE_MAGIC, ENVELOPE_VERSION, 0]);
        let mut count = 0u8;
        let (pk, _) = self.parse_visiting(json, |id, value| {
            put_attr(&mut envelope, id, &value);
            count += 1;
        })?;
        envelope[2] = count;
        envelope.extend_from_slice(json);
        Ok((pk, envelope))
    }

    /// The parse shared by [`DocumentParser::parse`] and [`DocumentParser::parse_stored`]:
    /// checks the document, returns its primary key and the attributes left unindexed, and
    /// gives each indexed attribute's value to `visit` in increasing id order.
    fn parse_visiting(
        &self,
        json: &[u8],
        mut visit: impl FnMut(u32, AttrValue),
    ) -> Result<(Vec<u8>, Unindexed)> {
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
        let mut inline: [Option<Kept<'_>>; INLINE_PATHS] = Default::default();
        let mut heap: Vec<Option<Kept<'_>>>;
        let values: &mut [Option<Kept<'_>>] = if count <= INLINE_PATHS {
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
        let mut unindexed = Vec::new();
        for (attribute, value) in self.attributes.iter().zip(values.iter().skip(1)) {
            let Some(json_value) = value else {
                continue;
            };
            if !attribute.covers_key(&pk) {
                continue;
            }
            if json_value.is_null() {
                continue;
            }
            match attr_value(json_value, attribute) {
                Ok(value) => visit(attribute.id, value),
                Err(error) => match self.on_type_mismatch {
                    TypeMismatchPolicy::Reject => return Err(error),
                    TypeMismatchPolicy::StoreUnindexed => unindexed.push((attribute.id, error)),
                },
            }
        }
        Ok((pk, unindexed))
    }

    /// The primary key bytes of a parsed document.
    pub fn primary_key(&self, document: &Value) -> Result<Vec<u8>> {
        self.primary_key_value(self.pk_path.lookup(document))
    }

    /// The primary key bytes given what the parse kept at the primary key's path.
    fn primary_key_at(&self, value: Option<&Kept<'_>>) -> Result<Vec<u8>> {
        match value {
            Some(Kept::Str(text)) if !text.is_empty() && text.len() <= MAX_PRIMARY_KEY_BYTES => {
                Ok(text.as_bytes().to_vec())
            }
            // `Number`'s text of an integer is its decimal text.
            Some(Kept::Unsigned(number)) => {
                self.checked_primary_key(number.to_string().into_bytes())
            }
            Some(Kept::Signed(number)) => self.checked_primary_key(number.to_string().into_bytes()),
            Some(Kept::Value(value)) => self.primary_key_value(Some(value)),
            Some(kept) => self.primary_key_value(Some(&kept.to_value())),
            None => self.primary_key_value(None),
        }
    }

    /// The primary key bytes given the value at the primary key's path.
    fn primary_key_value(&self, value: Option<&Value>) -> Result<Vec<u8>> {
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
        self.checked_primary_key(pk)
    }

    /// `pk`, or the error for a key over [`MAX_PRIMARY_KEY_BYTES`].
    fn checked_primary_key(&self, pk: Vec<u8>) -> Result<Vec<u8>> {
        if pk.len() > MAX_PRIMARY_KEY_BYTES {
            return Err(IndexError::PrimaryKeyTooLong {
                field: self.pk_path.as_str().to_string(),
                length_bytes: pk.len(),
                limit_bytes: MAX_PRIMARY_KEY_BYTES,
            });
        }
        Ok(pk)
    }
}

/// `AttrValue::from_json` of what the parse kept: a borrowed string that is a valid time is
/// converted without building a `String` first; everything else goes through `from_json`
/// (same values, same errors).
#[inline]
fn attr_value(kept: &Kept<'_>, attribute: &IndexedAttribute) -> Result<AttrValue> {
    let path = attribute.path.as_str();
    if !attribute.conversion.is_json() {
        return attribute
            .conversion
            .convert(&kept.to_value(), attribute.attr_type, path);
    }
    match kept {
        // An integer for an int or time attribute (an id, epoch milliseconds): `from_json`'s
        // answer, without its call (or a `Value`).
        Kept::Unsigned(number) => match (attribute.attr_type, i64::try_from(*number)) {
            (AttrType::Int, Ok(value)) => Ok(AttrValue::Int(value)),
            (AttrType::Time, Ok(value)) => Ok(AttrValue::Time(value)),
            _ => AttrValue::from_json(&kept.to_value(), attribute.attr_type, path),
        },
        Kept::Signed(number) => match attribute.attr_type {
            AttrType::Int => Ok(AttrValue::Int(*number)),
            AttrType::Time => Ok(AttrValue::Time(*number)),
            _ => AttrValue::from_json(&kept.to_value(), attribute.attr_type, path),
        },
        Kept::Value(json @ Value::Number(number)) => match (attribute.attr_type, number.as_i64()) {
            (AttrType::Int, Some(value)) => Ok(AttrValue::Int(value)),
            (AttrType::Time, Some(value)) => Ok(AttrValue::Time(value)),
            _ => AttrValue::from_json(json, attribute.attr_type, path),
        },
        Kept::Value(json) => AttrValue::from_json(json, attribute.attr_type, path),
        Kept::Str(text) => {
            if attribute.attr_type == AttrType::Time {
                if let Ok(epoch_ms) = crate::time::parse_rfc3339_ms(text) {
                    return Ok(AttrValue::Time(epoch_ms));
                }
            }
            AttrValue::from_json(&kept.to_value(), attribute.attr_type, path)
        }
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
                IndexedAttribute::new(2, AttrPath::parse("user.id").unwrap(), AttrType::Int),
                IndexedAttribute::new(1, AttrPath::parse("/created").unwrap(), AttrType::Time),
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

    /// Integers kept without a `Value` (`Kept::Unsigned`, `Kept::Signed`) give the primary key,
    /// attribute values and errors that the full parse's `Value` gives through
    /// `primary_key` and `AttrValue::from_json`: every integer width and sign, `-0`, values
    /// past `i64`, floats, and nested and null values where an integer is expected.
    #[test]
    fn integers_match_the_conversion_of_a_full_parse() {
        let numbers = [
            "0",
            "7",
            "-7",
            "-0",
            "9223372036854775807",
            "9223372036854775808",
            "18446744073709551615",
            "18446744073709551616",
            "-9223372036854775808",
            "-9223372036854775809",
            "1.5",
            "1e3",
            "-2E-2",
            "null",
            "{\"id\": 1}",
            "[1]",
            "\"12\"",
        ];
        let path = AttrPath::parse("user.id").unwrap();
        for attr_type in [
            AttrType::Int,
            AttrType::Time,
            AttrType::Float,
            AttrType::String,
        ] {
            let parser = DocumentParser::new(
                AttrPath::parse("id").unwrap(),
                vec![IndexedAttribute::new(3, path.clone(), attr_type)],
            )
            .unwrap();
            for (pk, value) in numbers.iter().zip(numbers.iter().rev()) {
                let text = format!(r#"{{"id": {pk}, "user": {{"id": {value}, "n": 1}}}}"#);
                let full: Value = serde_json::from_str(&text).unwrap();
                let want = parser.primary_key(&full).and_then(|pk| {
                    let attrs = match path.lookup(&full) {
                        Some(json) if !json.is_null() => {
                            vec![(3, AttrValue::from_json(json, attr_type, path.as_str())?)]
                        }
                        _ => Vec::new(),
                    };
                    Ok((pk, attrs))
                });
                let got = parser
                    .parse(text.as_bytes())
                    .map(|parsed| (parsed.pk, parsed.envelope.attrs));
                assert_eq!(
                    format!("{got:?}"),
                    format!("{want:?}"),
                    "{attr_type:?}: {text}"
                );
            }
        }
    }

    /// `parse_stored` gives `parse`'s primary key and encoded envelope, or the same error, for
    /// documents with and without each attribute, nulls, wrong types, bad times, bad keys and
    /// bad JSON, under both type-mismatch policies and with no attribute at all.
    #[test]
    fn parse_stored_is_parse_then_encode() {
        use rand::{Rng, SeedableRng};
        let seed = 0xD0C_u64;
        let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
        let parsers = [
            parser(),
            parser().with_type_mismatch_policy(TypeMismatchPolicy::StoreUnindexed),
            DocumentParser::new(AttrPath::parse("id").unwrap(), Vec::new()).unwrap(),
        ];
        let ids = ["\"t1\"", "42", "-3", "\"\"", "1.5", "null", "[1]"];
        let users = [
            "{\"id\": 7}",
            "{\"id\": \"x\"}",
            "{\"id\": null}",
            "{}",
            "3",
            "{\"id\": 1e3}",
        ];
        let times = [
            "\"2020-01-01T00:00:00Z\"",
            "\"2020-01-01T00:00:00.250Z\"",
            "\"2020-02-30T00:00:00Z\"",
            "1577836800000",
            "null",
            "true",
        ];
        let mut compared_ok = 0;
        for round in 0..2000 {
            let mut members = Vec::new();
            if rng.gen_bool(0.9) {
                members.push(format!("\"id\": {}", ids[rng.gen_range(0..ids.len())]));
            }
            if rng.gen_bool(0.7) {
                members.push(format!(
                    "\"user\": {}",
                    users[rng.gen_range(0..users.len())]
                ));
            }
            if rng.gen_bool(0.7) {
                members.push(format!(
                    "\"created\": {}",
                    times[rng.gen_range(0..times.len())]
                ));
            }
            let mut json = format!("{{{}}}", members.join(", ")).into_bytes();
            if rng.gen_bool(0.05) {
                json.pop(); // no longer JSON
            }
            for parser in &parsers {
                let expected = parser
                    .parse(&json)
                    .map(|parsed| (parsed.pk, parsed.envelope.encode()));
                match (parser.parse_stored(&json), expected) {
                    (Ok(got), Ok(want)) => {
                        assert_eq!(got, want, "seed {seed} round {round}");
                        compared_ok += 1;
                    }
                    (Err(got), Err(want)) => {
                        assert_eq!(got.to_string(), want.to_string(), "seed {seed}");
                    }
                    (got, want) => panic!("seed {seed} round {round}: {got:?} vs {want:?}"),
                }
            }
        }
        assert!(
            compared_ok > 1000,
            "only {compared_ok} documents were accepted"
        );
    }

    /// A primary key and the attributes, by id.
    type PkAndAttrs = (Vec<u8>, Vec<(u32, AttrValue)>);

    /// The general path, written out: a full `Value` parse, `lookup`, `primary_key` and
    /// `AttrValue::from_json` per attribute. `None` when the text is not JSON (the error texts
    /// of the two parsers differ there).
    fn reference_parse(parser: &DocumentParser, json: &[u8]) -> Option<Result<PkAndAttrs>> {
        let document: Value = serde_json::from_slice(json).ok()?;
        if !document.is_object() {
            return Some(Err(IndexError::NotAnObject {
                found: describe_json(&document),
            }));
        }
        let pk = match parser.primary_key(&document) {
            Ok(pk) => pk,
            Err(error) => return Some(Err(error)),
        };
        let mut attrs = Vec::new();
        for attribute in parser.attributes() {
            let Some(value) = attribute.path.lookup(&document) else {
                continue;
            };
            if value.is_null() {
                continue;
            }
            match AttrValue::from_json(value, attribute.attr_type, attribute.path.as_str()) {
                Ok(value) => attrs.push((attribute.id, value)),
                Err(error) => match parser.type_mismatch_policy() {
                    TypeMismatchPolicy::Reject => return Some(Err(error)),
                    TypeMismatchPolicy::StoreUnindexed => {}
                },
            }
        }
        Some(Ok((pk, attrs)))
    }

    /// `parse` (borrowed strings converted without a `String`, the RFC 3339 fast path) gives
    /// what the general path gives — the same primary key and attributes or the same error —
    /// for strings with and without escapes at every attribute type and at the primary key.
    #[test]
    fn parse_matches_the_general_path() {
        use rand::{Rng, SeedableRng};
        let seed = 0x57_2176_u64;
        let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
        let attributes = |attr_types: [AttrType; 4]| {
            ["t", "s", "u.name", "/n"]
                .iter()
                .zip(attr_types)
                .enumerate()
                .map(|(i, (path, attr_type))| {
                    IndexedAttribute::new(i as u32 + 1, AttrPath::parse(path).unwrap(), attr_type)
                })
                .collect::<Vec<_>>()
        };
        let typed = [
            AttrType::Time,
            AttrType::String,
            AttrType::String,
            AttrType::Int,
        ];
        let swapped = [
            AttrType::String,
            AttrType::Time,
            AttrType::Time,
            AttrType::Float,
        ];
        let parsers = [
            DocumentParser::new(AttrPath::parse("id").unwrap(), attributes(typed)).unwrap(),
            DocumentParser::new(AttrPath::parse("id").unwrap(), attributes(swapped))
                .unwrap()
                .with_type_mismatch_policy(TypeMismatchPolicy::StoreUnindexed),
            DocumentParser::new(AttrPath::parse("u.name").unwrap(), attributes(typed)).unwrap(),
        ];
        let long = format!(
            "\"{}\"",
            "x".repeat(crate::error::MAX_STRING_VALUE_BYTES + 1)
        );
        let values = [
            "\"2020-01-01T00:00:00Z\"",
            "\"2020-01-01T00:00:00.250Z\"",
            "\"2024-02-29T23:59:59.999+05:30\"",
            "\"2020-01-01T00:00:00\\u005A\"",
            "\"2020-02-30T00:00:00Z\"",
            "\"2020-01-01 00:00:00Z\"",
            "\"not a time\"",
            "\"\"",
            "\"plain\"",
            "\"tab\\there\"",
            "\"caf\u{e9}\"",
            long.as_str(),
            "1577836800000",
            "-7",
            "-1577836800000",
            "18446744073709551615",
            "1e3",
            "2.5",
            "null",
            "true",
            "[\"2020-01-01T00:00:00Z\"]",
            "{\"name\": \"x\"}",
        ];
        let pick = |rng: &mut rand::rngs::StdRng| values[rng.gen_range(0..values.len())];
        let mut accepted = 0;
        let mut rejected = 0;
        for round in 0..3000 {
            let mut members = Vec::new();
            if rng.gen_bool(0.9) {
                members.push(format!("\"id\": {}", pick(&mut rng)));
            }
            for name in ["t", "s", "n"] {
                if rng.gen_bool(0.8) {
                    members.push(format!("\"{name}\": {}", pick(&mut rng)));
                }
            }
            if rng.gen_bool(0.8) {
                members.push(format!("\"u\": {{\"name\": {}}}", pick(&mut rng)));
            }
            let json = format!("{{{}}}", members.join(", ")).into_bytes();
            for (which, parser) in parsers.iter().enumerate() {
                let Some(want) = reference_parse(parser, &json) else {
                    assert!(parser.parse(&json).is_err(), "seed {seed} round {round}");
                    continue;
                };
                let got = parser
                    .parse(&json)
                    .map(|parsed| (parsed.pk, parsed.envelope.attrs));
                let text = String::from_utf8_lossy(&json);
                match (got, want) {
                    (Ok(got), Ok(want)) => {
                        assert_eq!(
                            got, want,
                            "seed {seed} round {round} parser {which}: {text}"
                        );
                        accepted += 1;
                    }
                    (Err(got), Err(want)) => {
                        assert_eq!(got.to_string(), want.to_string(), "seed {seed}: {text}");
                        rejected += 1;
                    }
                    (got, want) => {
                        panic!(
                            "seed {seed} round {round} parser {which}: {got:?} vs {want:?}: {text}"
                        )
                    }
                }
            }
        }
        assert!(
            accepted > 500 && rejected > 500,
            "seed {seed}: {accepted} accepted, {rejected} rejected"
        );
    }

    #[test]
    fn duplicate_ids_rejected() {
        let attribute = IndexedAttribute::new(1, AttrPath::parse("a").unwrap(), AttrType::Int);
        let err = DocumentParser::new(
            AttrPath::parse("id").unwrap(),
            vec![attribute.clone(), attribute],
        )
        .unwrap_err();
        assert!(matches!(err, IndexError::InvalidSchema { .. }));
    }
}
