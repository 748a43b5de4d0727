//! Attribute paths: where an indexed attribute (or the primary key) sits inside a document.
//!
//! Two spellings: dotted (`user.id`; no escapes, so a key containing `.` needs the other form)
//! and JSON Pointer (`/user/id`, RFC 6901, with `~0` for `~` and `~1` for `/`). Both name the
//! same path, and paths compare by their segments. A segment that is a canonical decimal
//! number (`0`, `12`, not `012`) also indexes into arrays.

use std::fmt;
use std::hash::{Hash, Hasher};
use std::str::FromStr;

use serde_json::Value;

use crate::error::{IndexError, Result, MAX_ATTRIBUTE_PATH_BYTES, MAX_ATTRIBUTE_PATH_SEGMENTS};

/// A path to an attribute: `a.b.c` or JSON Pointer `/a/b/c`.
#[derive(Debug, Clone)]
pub struct AttrPath {
    /// The text as given, for messages.
    text: String,
    segments: Vec<String>,
}

impl AttrPath {
    /// Parses either form, within the path limits.
    pub fn parse(text: &str) -> Result<AttrPath> {
        let invalid = |reason: String| IndexError::InvalidPath {
            path: text.to_string(),
            reason,
        };
        if text.is_empty() {
            return Err(invalid("the path is empty".to_string()));
        }
        if text.len() > MAX_ATTRIBUTE_PATH_BYTES {
            return Err(invalid(format!(
                "{} bytes long; the limit is {MAX_ATTRIBUTE_PATH_BYTES} bytes",
                text.len()
            )));
        }
        let segments: Vec<String> = if let Some(pointer) = text.strip_prefix('/') {
            pointer
                .split('/')
                .enumerate()
                .map(|(index, raw)| {
                    unescape_pointer_segment(raw)
                        .map_err(|reason| invalid(format!("segment {}: {reason}", index + 1)))
                })
                .collect::<Result<_>>()?
        } else {
            text.split('.').map(str::to_string).collect()
        };
        if let Some(index) = segments.iter().position(String::is_empty) {
            return Err(invalid(format!(
                "segment {} is empty (a path is `a.b` or `/a/b`, without empty parts)",
                index + 1
            )));
        }
        if segments.len() > MAX_ATTRIBUTE_PATH_SEGMENTS {
            return Err(invalid(format!(
                "{} segments; the limit is {MAX_ATTRIBUTE_PATH_SEGMENTS}",
                segments.len()
            )));
        }
        Ok(AttrPath {
            text: text.to_string(),
            segments,
        })
    }

    /// The path as it was given.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// The object keys, outermost first.
    pub fn segments(&self) -> &[String] {
        &self.segments
    }

    /// The path of these object keys, whatever text they hold (a key with `.` or `/` too),
    /// within the path limits; it reads as its JSON Pointer form.
    pub fn from_segments<S: AsRef<str>>(segments: &[S]) -> Result<AttrPath> {
        AttrPath::parse(&pointer_of(segments))
    }

    /// The canonical JSON Pointer form (`/user/id`), with `~` and `/` escaped.
    pub fn to_pointer(&self) -> String {
        pointer_of(&self.segments)
    }

    /// The value at this path, or `None` if some segment is missing (or steps into a scalar).
    pub fn lookup<'a>(&self, document: &'a Value) -> Option<&'a Value> {
        self.segments
            .iter()
            .try_fold(document, |current, segment| match current {
                Value::Object(fields) => fields.get(segment.as_str()),
                Value::Array(items) => array_index(segment).and_then(|index| items.get(index)),
                _ => None,
            })
    }
}

/// `/a/b` for segments `a`, `b`, with `~` and `/` escaped (RFC 6901).
fn pointer_of<S: AsRef<str>>(segments: &[S]) -> String {
    let mut pointer = String::new();
    for segment in segments {
        pointer.push('/');
        pointer.push_str(&segment.as_ref().replace('~', "~0").replace('/', "~1"));
    }
    pointer
}

fn unescape_pointer_segment(raw: &str) -> std::result::Result<String, String> {
    if !raw.contains('~') {
        return Ok(raw.to_string());
    }
    let mut out = String::with_capacity(raw.len());
    let mut chars = raw.chars();
    while let Some(c) = chars.next() {
        if c == '~' {
            match chars.next() {
                Some('0') => out.push('~'),
                Some('1') => out.push('/'),
                _ => {
                    return Err(
                        "`~` must be followed by 0 or 1 (`~0` is `~`, `~1` is `/`)".to_string()
                    )
                }
            }
        } else {
            out.push(c);
        }
    }
    Ok(out)
}

/// A canonical array index: decimal digits without a leading zero (except `0` itself).
pub(crate) fn array_index(segment: &str) -> Option<usize> {
    let canonical = !segment.is_empty()
        && segment.bytes().all(|b| b.is_ascii_digit())
        && (segment == "0" || !segment.starts_with('0'));
    if canonical {
        segment.parse().ok()
    } else {
        None
    }
}

impl FromStr for AttrPath {
    type Err = IndexError;

    fn from_str(text: &str) -> Result<AttrPath> {
        AttrPath::parse(text)
    }
}

impl fmt::Display for AttrPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

impl PartialEq for AttrPath {
    fn eq(&self, other: &AttrPath) -> bool {
        self.segments == other.segments
    }
}

impl Eq for AttrPath {}

impl Hash for AttrPath {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.segments.hash(state);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_path_from_any_keys_reads_those_keys() {
        let path = AttrPath::from_segments(&["h", "price/usd.x~1"]).expect("valid keys");
        assert_eq!(path.segments(), ["h", "price/usd.x~1"]);
        assert_eq!(path.as_str(), "/h/price~1usd.x~01");
        let document = json!({"h": {"price/usd.x~1": 7, "price": {"usd": 1}}});
        assert_eq!(path.lookup(&document), Some(&json!(7)));
        assert!(AttrPath::from_segments(&["h", ""]).is_err());
    }

    #[test]
    fn both_spellings_name_the_same_path() {
        let dotted = AttrPath::parse("user.id").unwrap();
        let pointer = AttrPath::parse("/user/id").unwrap();
        assert_eq!(dotted, pointer);
        assert_eq!(dotted.segments(), ["user", "id"]);
        assert_eq!(dotted.to_pointer(), "/user/id");
        assert_eq!(dotted.to_string(), "user.id");
    }

    #[test]
    fn pointer_escapes() {
        let path = AttrPath::parse("/a~1b/c~0d/e.f").unwrap();
        assert_eq!(path.segments(), ["a/b", "c~d", "e.f"]);
        assert_eq!(path.to_pointer(), "/a~1b/c~0d/e.f");
        assert_eq!(AttrPath::parse(&path.to_pointer()).unwrap(), path);
    }

    #[test]
    fn bad_paths() {
        for bad in [
            "", "/", ".", "a.", ".a", "a..b", "/a//b", "/a/", "/a~", "/a~2", "//",
        ] {
            let err = AttrPath::parse(bad).unwrap_err();
            assert!(
                matches!(err, IndexError::InvalidPath { .. }),
                "{bad}: {err}"
            );
        }
        let deep = vec!["a"; MAX_ATTRIBUTE_PATH_SEGMENTS + 1].join(".");
        assert!(AttrPath::parse(&deep).is_err());
        let long = "a".repeat(MAX_ATTRIBUTE_PATH_BYTES + 1);
        assert!(AttrPath::parse(&long).is_err());
    }

    #[test]
    fn lookup_objects_and_arrays() {
        let doc = json!({"user": {"id": 7, "tags": ["x", "y"]}, "a.b": 1, "n": null});
        assert_eq!(
            AttrPath::parse("user.id").unwrap().lookup(&doc),
            Some(&json!(7))
        );
        assert_eq!(
            AttrPath::parse("/user/tags/1").unwrap().lookup(&doc),
            Some(&json!("y"))
        );
        assert_eq!(AttrPath::parse("/user/tags/01").unwrap().lookup(&doc), None);
        assert_eq!(AttrPath::parse("/user/tags/2").unwrap().lookup(&doc), None);
        assert_eq!(
            AttrPath::parse("/a.b").unwrap().lookup(&doc),
            Some(&json!(1))
        );
        assert_eq!(AttrPath::parse("a.b").unwrap().lookup(&doc), None);
        assert_eq!(AttrPath::parse("user.id.x").unwrap().lookup(&doc), None);
        assert_eq!(
            AttrPath::parse("n").unwrap().lookup(&doc),
            Some(&Value::Null)
        );
    }
}
