//! The JSON paths Sift's JSON.GET and JSON.MGET understand, and reading them out of a stored
//! document's text without changing its key order (RedisJSON keeps insertion order).
//!
//! Supported: the root (`$`, `.`), and chains of member names and array indexes —
//! `$.a.b`, `$.a[0]`, `$["a b"]`, and the legacy forms `.a.b` and `a.b`. A `$` path answers a
//! JSON array of its matches (empty when nothing matches); a legacy path answers the value
//! itself, and a missing value is an error. Wildcards, recursive descent, filters and slices
//! are refused with an error naming the path, never answered wrongly.

use std::collections::BTreeMap;

use serde_json::value::RawValue;

/// One step of a path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// An object member.
    Member(String),
    /// An array element (negative counts from the end, as in RedisJSON).
    Index(i64),
}

/// A parsed path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JsonPath {
    /// `$`-style (answers an array of matches) or legacy (answers the value).
    pub dollar: bool,
    /// The steps from the root.
    pub steps: Vec<Step>,
}

impl JsonPath {
    /// Whether the path is the root.
    pub fn is_root(&self) -> bool {
        self.steps.is_empty()
    }
}

/// Parses `text`, or says what is not supported.
pub fn parse(text: &str) -> Result<JsonPath, String> {
    let unsupported = || {
        format!(
            "Sift does not support the JSON path '{text}' (only $, member names and array \
             indexes: $.a.b, $.a[0], $[\"a b\"])"
        )
    };
    let (dollar, mut rest) = match text.strip_prefix('$') {
        Some(rest) => (true, rest),
        None => (false, text.strip_prefix('.').unwrap_or(text)),
    };
    if !dollar && rest.is_empty() {
        return Ok(JsonPath {
            dollar,
            steps: Vec::new(),
        });
    }
    let mut steps = Vec::new();
    let mut first = !dollar;
    while !rest.is_empty() {
        if let Some(after) = rest.strip_prefix('[') {
            let close = after.find(']').ok_or_else(unsupported)?;
            let inside = &after[..close];
            rest = &after[close + 1..];
            if let Some(quoted) = inside
                .strip_prefix('"')
                .and_then(|inner| inner.strip_suffix('"'))
                .or_else(|| {
                    inside
                        .strip_prefix('\'')
                        .and_then(|inner| inner.strip_suffix('\''))
                })
            {
                if quoted.contains(['"', '\'', '\\']) {
                    return Err(unsupported());
                }
                steps.push(Step::Member(quoted.to_owned()));
            } else {
                let index: i64 = inside.trim().parse().map_err(|_| unsupported())?;
                steps.push(Step::Index(index));
            }
        } else {
            let body = if first {
                rest
            } else {
                rest.strip_prefix('.').ok_or_else(unsupported)?
            };
            if body.starts_with('.') {
                return Err(unsupported());
            }
            let end = body.find(['.', '[']).unwrap_or(body.len());
            let name = &body[..end];
            let valid = !name.is_empty()
                && name
                    .chars()
                    .all(|c| c.is_alphanumeric() || c == '_' || c == '-' || c == '$');
            if !valid {
                return Err(unsupported());
            }
            steps.push(Step::Member(name.to_owned()));
            rest = &body[end..];
        }
        first = false;
    }
    Ok(JsonPath { dollar, steps })
}

/// The text of the value at `path` in `document`, or `None` if there is none.
pub fn select<'a>(document: &'a str, path: &JsonPath) -> Option<&'a str> {
    let mut current: &'a RawValue = serde_json::from_str(document).ok()?;
    for step in &path.steps {
        current = match step {
            Step::Member(name) => {
                let members: BTreeMap<String, &'a RawValue> =
                    serde_json::from_str(current.get()).ok()?;
                members.get(name).copied()?
            }
            Step::Index(index) => {
                let elements: Vec<&'a RawValue> = serde_json::from_str(current.get()).ok()?;
                let position = if *index < 0 {
                    elements.len() as i64 + index
                } else {
                    *index
                };
                *elements.get(usize::try_from(position).ok()?)?
            }
        };
    }
    Some(current.get())
}

/// `text` (valid JSON) without whitespace outside strings: RedisJSON's compact output, with
/// the document's own member order and number spelling.
pub fn minify(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut in_string = false;
    let mut escaped = false;
    for c in text.chars() {
        if in_string {
            out.push(c);
            if escaped {
                escaped = false;
            } else if c == '\\' {
                escaped = true;
            } else if c == '"' {
                in_string = false;
            }
        } else if c == '"' {
            in_string = true;
            out.push(c);
        } else if !c.is_whitespace() {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn steps(text: &str) -> Vec<Step> {
        parse(text).expect("supported").steps
    }

    #[test]
    fn supported_paths_parse_and_the_rest_are_refused() {
        assert!(parse("$").expect("root").is_root());
        assert!(parse(".").expect("root").is_root());
        assert_eq!(
            steps("$.a.b"),
            [Step::Member("a".into()), Step::Member("b".into())]
        );
        assert_eq!(steps(".a[2]"), [Step::Member("a".into()), Step::Index(2)]);
        assert_eq!(
            steps("a.b"),
            [Step::Member("a".into()), Step::Member("b".into())]
        );
        assert_eq!(
            steps("$[\"a b\"][-1]"),
            [Step::Member("a b".into()), Step::Index(-1)]
        );
        for refused in [
            "$..a",
            "$.*",
            "$.a[*]",
            "$.a[?(@.b)]",
            "$.a[0:2]",
            "$a",
            "$.",
            "a..b",
        ] {
            let error = parse(refused).expect_err(refused);
            assert!(error.contains(refused), "{error}");
        }
    }

    #[test]
    fn values_are_selected_with_their_own_text() {
        let document = r#"{"z": 1, "a": {"list": [10, {"x": "y"}], "n": 2.50}}"#;
        let at = |path: &str| select(document, &parse(path).expect("path"));
        assert_eq!(at("$"), Some(document));
        assert_eq!(at("$.a.n"), Some("2.50"));
        assert_eq!(at("$.a.list[1].x"), Some("\"y\""));
        assert_eq!(at("$.a.list[-2]"), Some("10"));
        assert_eq!(at("$.a.list[5]"), None);
        assert_eq!(at("$.missing"), None);
        assert_eq!(at("$.z.deeper"), None);
    }

    #[test]
    fn minify_keeps_member_order_and_string_contents() {
        assert_eq!(
            minify("{ \"b\" : [1, 2],\n \"a\" : \"x y \\\" z\" }"),
            "{\"b\":[1,2],\"a\":\"x y \\\" z\"}"
        );
    }
}
