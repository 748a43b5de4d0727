//! Write-time JSON parsing that keeps only what the write path reads.
//!
//! A document is parsed once, at write, for its primary key and indexed attributes. Building a
//! full `serde_json::Value` allocates every string, number and map of the document, and most of
//! it is never looked at. A [`PathTrie`] of the paths the parser needs drives the parse instead:
//! members on a path are kept (a path's last member whole), everything else is checked for
//! syntax and skipped. The result is a `Value` holding the same values on those paths as a full
//! parse would, so the lookups and type checks that follow are unchanged; on any other input
//! the answer (a syntax error, or a root that is not an object) is the same as well.

use crate::path::AttrPath;
use serde::de::{DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;
use serde_json::{Map, Number, Value};
use std::borrow::Cow;
use std::collections::BTreeMap;
use std::fmt;

/// The members to keep, as a tree of path segments.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct PathTrie {
    /// A path ends here: keep the whole value.
    whole: bool,
    children: BTreeMap<String, PathTrie>,
}

impl PathTrie {
    pub(crate) fn new<'a>(paths: impl IntoIterator<Item = &'a AttrPath>) -> PathTrie {
        let mut root = PathTrie::default();
        for path in paths {
            let mut node = &mut root;
            for segment in path.segments() {
                node = node.children.entry(segment.clone()).or_default();
            }
            node.whole = true;
        }
        root
    }

    /// Parses `json` (which must be UTF-8: checked here, as skipped strings are not otherwise
    /// checked) keeping only the members on the trie's paths.
    pub(crate) fn parse(&self, json: &[u8]) -> serde_json::Result<Value> {
        if let Err(error) = std::str::from_utf8(json) {
            // Let serde_json describe it (with line and column) by parsing the text in full.
            serde_json::from_slice::<IgnoredAny>(json)?;
            return Err(serde::de::Error::custom(format!(
                "invalid UTF-8 at byte {}",
                error.valid_up_to()
            )));
        }
        let mut deserializer = serde_json::Deserializer::from_slice(json);
        let value = Node(self).deserialize(&mut deserializer)?;
        deserializer.end()?;
        Ok(value)
    }
}

struct Node<'t>(&'t PathTrie);

impl<'de> DeserializeSeed<'de> for Node<'_> {
    type Value = Value;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        if self.0.whole {
            Value::deserialize(deserializer)
        } else {
            deserializer.deserialize_any(self)
        }
    }
}

/// A member name, borrowed from the input when it has no escapes.
struct Key<'de>(Cow<'de, str>);

impl<'de> Deserialize<'de> for Key<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct KeyVisitor;
        impl<'de> Visitor<'de> for KeyVisitor {
            type Value = Key<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a member name")
            }
            fn visit_borrowed_str<E>(self, text: &'de str) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Borrowed(text)))
            }
            fn visit_str<E>(self, text: &str) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Owned(text.to_string())))
            }
            fn visit_string<E>(self, text: String) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Owned(text)))
            }
        }
        deserializer.deserialize_str(KeyVisitor)
    }
}

impl<'de> Visitor<'de> for Node<'_> {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_bool<E>(self, value: bool) -> Result<Value, E> {
        Ok(Value::Bool(value))
    }
    fn visit_i64<E>(self, value: i64) -> Result<Value, E> {
        Ok(Value::Number(value.into()))
    }
    fn visit_u64<E>(self, value: u64) -> Result<Value, E> {
        Ok(Value::Number(value.into()))
    }
    fn visit_f64<E>(self, value: f64) -> Result<Value, E> {
        Ok(Number::from_f64(value).map_or(Value::Null, Value::Number))
    }
    fn visit_str<E>(self, value: &str) -> Result<Value, E> {
        Ok(Value::String(value.to_string()))
    }
    fn visit_string<E>(self, value: String) -> Result<Value, E> {
        Ok(Value::String(value))
    }
    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    /// A path through an array (`/tags/1`): the array is kept whole; lookups index it.
    fn visit_seq<A: SeqAccess<'de>>(self, mut items: A) -> Result<Value, A::Error> {
        let mut kept = Vec::new();
        while let Some(item) = items.next_element::<Value>()? {
            kept.push(item);
        }
        Ok(Value::Array(kept))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut members: A) -> Result<Value, A::Error> {
        let mut kept = Map::new();
        while let Some(Key(name)) = members.next_key::<Key<'de>>()? {
            match self.0.children.get(name.as_ref()) {
                // A repeated name keeps its last value, as a full parse does.
                Some(child) => {
                    let value = members.next_value_seed(Node(child))?;
                    kept.insert(name.into_owned(), value);
                }
                None => {
                    members.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(Value::Object(kept))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn trie(paths: &[&str]) -> PathTrie {
        let paths: Vec<AttrPath> = paths.iter().map(|p| AttrPath::parse(p).unwrap()).collect();
        PathTrie::new(paths.iter())
    }

    #[test]
    fn keeps_exactly_the_values_on_the_paths() {
        let paths = ["id", "user.id", "/user/tags/1", "place.coordinates", "a\"b"];
        let text = r#"{"id": "x\"1", "body": "long text", "user": {"id": -7, "name": "n",
            "tags": ["p", "q"]}, "place": {"coordinates": [1.5, -2.25], "kind": "city"},
            "a\"b": {"deep": [1, {"x": null}]}, "id": 42}"#;
        let full: Value = serde_json::from_str(text).unwrap();
        let pruned = trie(&paths).parse(text.as_bytes()).unwrap();
        for path in paths {
            let path = AttrPath::parse(path).unwrap();
            assert_eq!(path.lookup(&pruned), path.lookup(&full), "{path}");
        }
        assert_eq!(
            pruned["id"],
            json!(42),
            "a repeated name keeps its last value"
        );
        assert!(
            pruned["user"].get("name").is_none(),
            "unneeded members are dropped"
        );
        assert!(pruned.get("body").is_none());
    }

    #[test]
    fn rejects_what_a_full_parse_rejects() {
        let t = trie(&["id"]);
        for bad in [
            &b"{\"id\": 1, \"x\": [1, 2,]}"[..],
            b"{\"id\": 1, \"x\": tru}",
            b"{\"id\": 1} trailing",
            b"{\"id\": 1, \"x\": \"\xff\"}",
            b"{\"id\": 1, \"x\": \"\\u12\"}",
            b"",
        ] {
            assert!(serde_json::from_slice::<Value>(bad).is_err());
            assert!(t.parse(bad).is_err(), "{}", String::from_utf8_lossy(bad));
        }
    }

    #[test]
    fn a_root_that_is_not_an_object_is_kept_for_the_error_message() {
        let t = trie(&["id"]);
        assert_eq!(t.parse(b"[1, 2]").unwrap(), json!([1, 2]));
        assert_eq!(t.parse(b"\"text\"").unwrap(), json!("text"));
        assert_eq!(t.parse(b"3.5").unwrap(), json!(3.5));
        assert_eq!(t.parse(b"null").unwrap(), Value::Null);
    }
}
