//! How one Redis key is stored: a JSON document in the collection `redis.keys`, keyed by the
//! field `k` (`docs/format/server-keyspace.md`).
//!
//! - a string: `{"k":KEY,"s":TEXT}`, or `{"k":KEY,"b":BASE64}` when it is not UTF-8;
//! - a hash: `{"k":KEY,"h":{FIELD:VALUE,…}}`, with the pairs that are not UTF-8 in
//!   `"hb":[[BASE64 FIELD,BASE64 VALUE],…]`;
//! - a JSON document: `{"k":KEY,"j":DOCUMENT}`, the document's text kept as the client sent it.
//!
//! Secondary indexes read hash fields at `h.FIELD` and JSON paths at `j.PATH`, so an index
//! over hashes never sees a JSON document's fields and the reverse.

use std::collections::BTreeMap;

use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine as _;
use bytes::Bytes;
use serde::Deserialize;
use serde_json::value::RawValue;

/// The collection every key lives in.
pub const KEYS_COLLECTION: &str = "redis.keys";
/// The primary-key field of its documents.
pub const KEY_FIELD: &str = "k";

/// A key's value, decoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Value {
    /// A string (binary-safe).
    String(Bytes),
    /// A hash: field → value, in field order.
    Hash(BTreeMap<Bytes, Bytes>),
    /// A JSON document's text, as stored.
    Json(String),
}

/// The names `TYPE` answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ValueType {
    /// `string`
    String,
    /// `hash`
    Hash,
    /// `ReJSON-RL`, RedisJSON's type name.
    Json,
}

impl ValueType {
    /// The name `TYPE` answers and `SCAN … TYPE` takes.
    pub fn name(self) -> &'static str {
        match self {
            ValueType::String => "string",
            ValueType::Hash => "hash",
            ValueType::Json => "ReJSON-RL",
        }
    }
}

impl Value {
    /// Its type.
    pub fn value_type(&self) -> ValueType {
        match self {
            Value::String(_) => ValueType::String,
            Value::Hash(_) => ValueType::Hash,
            Value::Json(_) => ValueType::Json,
        }
    }
}

#[derive(Deserialize)]
struct Stored<'a> {
    #[serde(borrow, default)]
    s: Option<std::borrow::Cow<'a, str>>,
    #[serde(default)]
    b: Option<String>,
    #[serde(default)]
    h: Option<BTreeMap<String, String>>,
    #[serde(default)]
    hb: Option<Vec<(String, String)>>,
    #[serde(borrow, default)]
    j: Option<&'a RawValue>,
}

/// A stored document that is not one of the shapes above: the database was written by
/// something else, or damaged.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the document stored for this key is not a Sift server record: {reason}")]
pub struct RecordError {
    /// What was wrong.
    pub reason: String,
}

/// The document that stores `value` under `key`. `key` must be UTF-8 (the caller checked).
pub fn encode(key: &str, value: &Value) -> Vec<u8> {
    let mut out = Vec::with_capacity(key.len() + 32);
    out.extend_from_slice(b"{\"k\":");
    push_json_string(&mut out, key);
    match value {
        Value::String(bytes) => {
            if let Ok(text) = std::str::from_utf8(bytes) {
                out.extend_from_slice(b",\"s\":");
                push_json_string(&mut out, text);
            } else {
                out.extend_from_slice(b",\"b\":\"");
                out.extend_from_slice(BASE64.encode(bytes).as_bytes());
                out.push(b'"');
            }
        }
        Value::Hash(fields) => {
            out.extend_from_slice(b",\"h\":{");
            let mut binary = Vec::new();
            let mut first = true;
            for (field, value) in fields {
                match (std::str::from_utf8(field), std::str::from_utf8(value)) {
                    (Ok(field), Ok(value)) => {
                        if !first {
                            out.push(b',');
                        }
                        first = false;
                        push_json_string(&mut out, field);
                        out.push(b':');
                        push_json_string(&mut out, value);
                    }
                    _ => binary.push((field, value)),
                }
            }
            out.push(b'}');
            if !binary.is_empty() {
                out.extend_from_slice(b",\"hb\":[");
                for (index, (field, value)) in binary.into_iter().enumerate() {
                    if index > 0 {
                        out.push(b',');
                    }
                    out.extend_from_slice(b"[\"");
                    out.extend_from_slice(BASE64.encode(field).as_bytes());
                    out.extend_from_slice(b"\",\"");
                    out.extend_from_slice(BASE64.encode(value).as_bytes());
                    out.extend_from_slice(b"\"]");
                }
                out.push(b']');
            }
        }
        Value::Json(text) => {
            out.extend_from_slice(b",\"j\":");
            out.extend_from_slice(text.as_bytes());
        }
    }
    out.push(b'}');
    out
}

/// The value a stored document holds.
pub fn decode(document: &[u8]) -> Result<Value, RecordError> {
    let error = |reason: String| RecordError { reason };
    let stored: Stored<'_> =
        serde_json::from_slice(document).map_err(|e| error(format!("not JSON: {e}")))?;
    let base64 = |text: &str| {
        BASE64
            .decode(text)
            .map(Bytes::from)
            .map_err(|e| error(format!("bad base64: {e}")))
    };
    match stored {
        Stored {
            s: Some(text),
            b: None,
            h: None,
            hb: None,
            j: None,
        } => Ok(Value::String(Bytes::from(text.into_owned()))),
        Stored {
            s: None,
            b: Some(text),
            h: None,
            hb: None,
            j: None,
        } => Ok(Value::String(base64(&text)?)),
        Stored {
            s: None,
            b: None,
            h: Some(fields),
            hb,
            j: None,
        } => {
            let mut hash: BTreeMap<Bytes, Bytes> = fields
                .into_iter()
                .map(|(field, value)| (Bytes::from(field), Bytes::from(value)))
                .collect();
            for (field, value) in hb.unwrap_or_default() {
                hash.insert(base64(&field)?, base64(&value)?);
            }
            Ok(Value::Hash(hash))
        }
        Stored {
            s: None,
            b: None,
            h: None,
            hb: None,
            j: Some(raw),
        } => Ok(Value::Json(raw.get().to_owned())),
        _ => Err(error("expected exactly one of s, b, h or j".to_owned())),
    }
}

fn push_json_string(out: &mut Vec<u8>, text: &str) {
    // Writing a &str to a Vec cannot fail.
    let _ = serde_json::to_writer(&mut *out, text);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip(value: Value) {
        let document = encode("user:1 \"quoted\"", &value);
        let parsed: serde_json::Value = serde_json::from_slice(&document).expect("valid JSON");
        assert_eq!(parsed["k"], "user:1 \"quoted\"");
        assert_eq!(decode(&document), Ok(value));
    }

    #[test]
    fn every_shape_decodes_to_what_was_encoded() {
        round_trip(Value::String(Bytes::from_static(
            b"plain \xe2\x82\xac text",
        )));
        round_trip(Value::String(Bytes::from_static(b"\xff\x00binary")));
        round_trip(Value::String(Bytes::new()));
        let mut hash = BTreeMap::new();
        hash.insert(Bytes::from_static(b"name"), Bytes::from_static(b"Ada"));
        hash.insert(Bytes::from_static(b"blob"), Bytes::from_static(b"\xfe\xff"));
        hash.insert(Bytes::from_static(b"\xc3"), Bytes::from_static(b"x"));
        round_trip(Value::Hash(hash));
        round_trip(Value::Hash(BTreeMap::new()));
        round_trip(Value::Json(r#"{"b": [1, 2.5, "x"], "a": null}"#.to_owned()));
        round_trip(Value::Json("42".to_owned()));
    }

    #[test]
    fn documents_of_other_shapes_are_errors_not_panics() {
        for document in [
            &b"{}"[..],
            b"[1]",
            b"{\"s\":\"a\",\"j\":1}",
            b"{\"b\":\"%%\"}",
            b"nope",
        ] {
            assert!(
                decode(document).is_err(),
                "{}",
                String::from_utf8_lossy(document)
            );
        }
    }
}
