//! The FT.SEARCH query language Sift answers: `*`, or a conjunction of field clauses —
//! `@f:[lo hi]` (numbers, `(` for an exclusive end, `-inf`, `+inf`), `@f:{a | b}` (tags) and
//! `@f:[lon lat radius m|km|mi|ft]` (geo). Parentheses may group a conjunction. Everything
//! else (full-text terms, `|` between clauses, `-` negation, `~`, prefixes, fuzzy matching) is
//! refused with an error naming it: never answered wrongly.

use std::collections::HashMap;

use super::definition::{Definition, FieldType};

/// A parsed query.
#[derive(Debug, Clone, PartialEq)]
pub struct Query {
    /// All must hold; empty is `*` (every document of the index).
    pub clauses: Vec<Clause>,
}

/// One clause: a field of the schema (by position) and what it must hold.
#[derive(Debug, Clone, PartialEq)]
pub struct Clause {
    /// The field's position in the schema.
    pub field: usize,
    /// The condition.
    pub predicate: Predicate,
}

/// What a field must hold.
#[derive(Debug, Clone, PartialEq)]
pub enum Predicate {
    /// A number in a range.
    Range {
        /// Lower end.
        lo: f64,
        /// Whether `lo` itself matches.
        lo_inclusive: bool,
        /// Upper end.
        hi: f64,
        /// Whether `hi` itself matches.
        hi_inclusive: bool,
    },
    /// One of these tags (already case-folded as the field stores them).
    Tags(Vec<String>),
    /// A point within `meters` of a centre (great-circle distance).
    Radius {
        /// Centre longitude, degrees.
        lon: f64,
        /// Centre latitude, degrees.
        lat: f64,
        /// Radius in metres.
        meters: f64,
    },
}

impl Predicate {
    /// Whether `value` matches.
    pub fn matches(&self, value: &sift_index::AttrValue) -> bool {
        use sift_index::AttrValue;
        match (self, value) {
            (
                Predicate::Range {
                    lo,
                    lo_inclusive,
                    hi,
                    hi_inclusive,
                },
                AttrValue::Float(number),
            ) => {
                let above = if *lo_inclusive {
                    number >= lo
                } else {
                    number > lo
                };
                let below = if *hi_inclusive {
                    number <= hi
                } else {
                    number < hi
                };
                above && below
            }
            (Predicate::Tags(tags), AttrValue::String(tag)) => tags.iter().any(|t| t == tag),
            (Predicate::Radius { lon, lat, meters }, AttrValue::Geo { lon: x, lat: y }) => {
                super::geo::distance_meters(*lon, *lat, *x, *y) <= *meters
            }
            _ => false,
        }
    }
}

/// The parameters of `PARAMS n name value …` (referred to as `$name`).
pub type Params = HashMap<String, String>;

/// Largest number of clauses in one query.
pub const MAX_CLAUSES: usize = 64;
/// Largest number of tags in one `{…}`.
pub const MAX_TAGS: usize = 1024;

/// Parses `text` against `definition`'s schema.
pub fn parse(text: &str, definition: &Definition, params: &Params) -> Result<Query, String> {
    let mut parser = Parser {
        text,
        position: 0,
        definition,
        params,
    };
    parser.query()
}

struct Parser<'a> {
    text: &'a str,
    position: usize,
    definition: &'a Definition,
    params: &'a Params,
}

impl Parser<'_> {
    fn rest(&self) -> &str {
        &self.text[self.position..]
    }

    fn skip_space(&mut self) {
        let trimmed = self.rest().trim_start();
        self.position = self.text.len() - trimmed.len();
    }

    fn near(&self) -> String {
        let rest = self.rest();
        let end = rest
            .char_indices()
            .nth(24)
            .map_or(rest.len(), |(index, _)| index);
        format!(
            "Syntax error at offset {} near '{}'",
            self.position,
            &rest[..end]
        )
    }

    fn query(&mut self) -> Result<Query, String> {
        self.skip_space();
        if self.rest().trim_end() == "*" {
            return Ok(Query {
                clauses: Vec::new(),
            });
        }
        if self.rest().is_empty() {
            return Err("Syntax error: the query is empty (use * for every document)".to_owned());
        }
        let mut clauses = Vec::new();
        let mut depth = 0usize;
        loop {
            self.skip_space();
            let Some(next) = self.rest().chars().next() else {
                break;
            };
            match next {
                '(' => {
                    depth += 1;
                    self.position += 1;
                }
                ')' => {
                    if depth == 0 {
                        return Err(self.near());
                    }
                    depth -= 1;
                    self.position += 1;
                }
                '@' => {
                    clauses.push(self.clause()?);
                    if clauses.len() > MAX_CLAUSES {
                        return Err(format!(
                            "Sift answers at most {MAX_CLAUSES} clauses in one query"
                        ));
                    }
                }
                '|' => return Err(self.unsupported("'|' between clauses (a union)")),
                '-' => return Err(self.unsupported("'-' (negation)")),
                '~' => return Err(self.unsupported("'~' (optional clauses)")),
                '*' => return Err(self.unsupported("'*' inside a query (only '*' alone)")),
                _ => {
                    return Err(self.unsupported(
                        "full-text terms (Sift indexes NUMERIC, TAG and GEO fields: query them \
                         with @field:[…] or @field:{…})",
                    ))
                }
            }
        }
        if depth != 0 {
            return Err(format!(
                "Syntax error at offset {}: unbalanced '('",
                self.text.len()
            ));
        }
        Ok(Query { clauses })
    }

    fn unsupported(&self, what: &str) -> String {
        format!(
            "Sift does not support {what}, at offset {} of the query",
            self.position
        )
    }

    fn clause(&mut self) -> Result<Clause, String> {
        let start = self.position;
        self.position += 1; // '@'
        let name_end = self
            .rest()
            .find(|c: char| c == ':' || c.is_whitespace())
            .map_or(self.text.len(), |end| self.position + end);
        let name = unescape(&self.text[self.position..name_end]);
        self.position = name_end;
        if !self.rest().starts_with(':') {
            self.position = start;
            return Err(self.near());
        }
        self.position += 1;
        self.skip_space();
        let Some((field, schema_field)) = self.definition.field(&name) else {
            return Err(format!("Unknown field '{name}' at offset {start}"));
        };
        let (open, close) = match self.rest().chars().next() {
            Some('[') => ('[', ']'),
            Some('{') => ('{', '}'),
            _ => {
                return Err(self.unsupported(
                    "full-text matching of a field (use @field:[…] for NUMERIC and GEO, \
                     @field:{…} for TAG)",
                ))
            }
        };
        let body_start = self.position + 1;
        let body_end = find_unescaped(&self.text[body_start..], close)
            .map(|end| body_start + end)
            .ok_or_else(|| {
                format!(
                    "Syntax error at offset {}: missing '{close}'",
                    self.position
                )
            })?;
        let body = &self.text[body_start..body_end];
        self.position = body_end + 1;
        let predicate = match (&schema_field.search_type, open) {
            (FieldType::Numeric, '[') => self.range(body)?,
            (FieldType::Geo, '[') => self.radius(body)?,
            (FieldType::Tag { case_sensitive, .. }, '{') => self.tags(body, *case_sensitive)?,
            (search_type, _) => {
                let form = match search_type {
                    FieldType::Tag { .. } => "@f:{tag | tag}",
                    FieldType::Numeric => "@f:[lo hi]",
                    FieldType::Geo => "@f:[lon lat radius unit]",
                };
                return Err(format!(
                    "Syntax error at offset {start}: '{name}' is a {} field; query it as {form}",
                    search_type.name()
                ));
            }
        };
        Ok(Clause { field, predicate })
    }

    fn parameter<'v>(&'v self, token: &'v str) -> Result<&'v str, String> {
        match token.strip_prefix('$') {
            Some(name) => self
                .params
                .get(name)
                .map(String::as_str)
                .ok_or_else(|| format!("No such parameter `{name}`")),
            None => Ok(token),
        }
    }

    fn range(&self, body: &str) -> Result<Predicate, String> {
        let tokens: Vec<&str> = body.split_whitespace().collect();
        let [lo, hi] = tokens.as_slice() else {
            return Err(format!(
                "Syntax error: a numeric range is [lo hi], got [{body}]"
            ));
        };
        let (lo, lo_inclusive) = bound(self.parameter(lo)?)?;
        let (hi, hi_inclusive) = bound(self.parameter(hi)?)?;
        Ok(Predicate::Range {
            lo,
            lo_inclusive,
            hi,
            hi_inclusive,
        })
    }

    fn radius(&self, body: &str) -> Result<Predicate, String> {
        let tokens: Vec<&str> = body.split_whitespace().collect();
        let [lon, lat, radius, unit] = tokens.as_slice() else {
            return Err(format!(
                "Syntax error: a geo filter is [lon lat radius m|km|mi|ft], got [{body}]"
            ));
        };
        let number = |token: &str, what: &str| -> Result<f64, String> {
            self.parameter(token)?
                .parse::<f64>()
                .ok()
                .filter(|value| value.is_finite())
                .ok_or_else(|| format!("Syntax error: bad {what} '{token}' in a geo filter"))
        };
        let lon = number(lon, "longitude")?;
        let lat = number(lat, "latitude")?;
        let radius = number(radius, "radius")?;
        if !(-180.0..=180.0).contains(&lon) || !(-85.051_128_78..=85.051_128_78).contains(&lat) {
            return Err(format!("Invalid geo coordinates {lon},{lat}"));
        }
        if radius < 0.0 {
            return Err("Syntax error: a geo radius must not be negative".to_owned());
        }
        let unit = self.parameter(unit)?;
        let meters = radius
            * super::geo::unit_meters(unit).ok_or_else(|| {
                format!("Syntax error: unknown geo unit '{unit}' (m, km, mi or ft)")
            })?;
        Ok(Predicate::Radius { lon, lat, meters })
    }

    fn tags(&self, body: &str, case_sensitive: bool) -> Result<Predicate, String> {
        let mut tags = Vec::new();
        for raw in split_unescaped(body, '|') {
            let raw = raw.trim();
            let raw = self.parameter(raw)?;
            let raw = raw
                .strip_prefix('"')
                .and_then(|inner| inner.strip_suffix('"'))
                .unwrap_or(raw);
            if ends_with_unescaped(raw, '*') {
                return Err(
                    "Sift does not support tag prefix or wildcard matching ('*' in a tag)"
                        .to_owned(),
                );
            }
            let tag = unescape(raw);
            let tag = tag.trim();
            if tag.is_empty() {
                return Err(format!("Syntax error: empty tag in {{{body}}}"));
            }
            tags.push(if case_sensitive {
                tag.to_owned()
            } else {
                tag.to_lowercase()
            });
            if tags.len() > MAX_TAGS {
                return Err(format!(
                    "Sift answers at most {MAX_TAGS} tags in one clause"
                ));
            }
        }
        tags.sort();
        tags.dedup();
        Ok(Predicate::Tags(tags))
    }
}

/// A range end: a number, `-inf`, `+inf`/`inf`, with `(` for exclusive.
fn bound(token: &str) -> Result<(f64, bool), String> {
    let (text, inclusive) = match token.strip_prefix('(') {
        Some(rest) => (rest, false),
        None => (token, true),
    };
    let value = match text.to_ascii_lowercase().as_str() {
        "-inf" => f64::NEG_INFINITY,
        "+inf" | "inf" => f64::INFINITY,
        number => number
            .parse::<f64>()
            .ok()
            .filter(|value| !value.is_nan())
            .ok_or_else(|| format!("Syntax error: '{token}' is not a number"))?,
    };
    Ok((value, inclusive))
}

/// Removes backslash escapes (`\,` → `,`).
fn unescape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c == '\\' {
            if let Some(escaped) = chars.next() {
                out.push(escaped);
            }
        } else {
            out.push(c);
        }
    }
    out
}

fn find_unescaped(text: &str, wanted: char) -> Option<usize> {
    let mut escaped = false;
    for (index, c) in text.char_indices() {
        if escaped {
            escaped = false;
        } else if c == '\\' {
            escaped = true;
        } else if c == wanted {
            return Some(index);
        }
    }
    None
}

fn split_unescaped(text: &str, separator: char) -> Vec<&str> {
    let mut parts = Vec::new();
    let mut rest = text;
    while let Some(index) = find_unescaped(rest, separator) {
        parts.push(&rest[..index]);
        rest = &rest[index + separator.len_utf8()..];
    }
    parts.push(rest);
    parts
}

fn ends_with_unescaped(text: &str, wanted: char) -> bool {
    let Some(before) = text.strip_suffix(wanted) else {
        return false;
    };
    let backslashes = before.chars().rev().take_while(|c| *c == '\\').count();
    backslashes % 2 == 0
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::search::definition::{identifier_segments, Field, KeyType};

    fn schema() -> Definition {
        let field = |name: &str, search_type: FieldType| Field {
            identifier: name.to_owned(),
            alias: name.to_owned(),
            search_type,
            sortable: false,
            kind: sift_index::IndexKind::Composite,
            maintenance: sift_index::Maintenance::SyncFull,
            sift_index: format!("ft.1.{name}"),
            segments: identifier_segments(name, KeyType::Hash).expect("valid"),
            path: std::sync::OnceLock::new(),
        };
        Definition {
            name: "idx".to_owned(),
            id: 1,
            on: KeyType::Hash,
            prefixes: Vec::new(),
            fields: vec![
                field("price", FieldType::Numeric),
                field(
                    "color",
                    FieldType::Tag {
                        separator: ',',
                        case_sensitive: false,
                    },
                ),
                field("place", FieldType::Geo),
            ],
        }
    }

    fn parsed(text: &str) -> Result<Query, String> {
        let mut params = Params::new();
        params.insert("low".to_owned(), "5".to_owned());
        parse(text, &schema(), &params)
    }

    #[test]
    fn clauses_parse_as_redisearch_writes_them() {
        assert_eq!(parsed(" * ").expect("star").clauses, []);
        let query =
            parsed("(@price:[(5 +inf] @color:{ Red | dark\\ blue }) @place:[2.35 48.86 10 km]")
                .expect("valid");
        assert_eq!(
            query.clauses,
            [
                Clause {
                    field: 0,
                    predicate: Predicate::Range {
                        lo: 5.0,
                        lo_inclusive: false,
                        hi: f64::INFINITY,
                        hi_inclusive: true
                    }
                },
                Clause {
                    field: 1,
                    predicate: Predicate::Tags(vec!["dark blue".into(), "red".into()])
                },
                Clause {
                    field: 2,
                    predicate: Predicate::Radius {
                        lon: 2.35,
                        lat: 48.86,
                        meters: 10_000.0
                    }
                },
            ]
        );
        assert_eq!(
            parsed("@price:[$low (10]").expect("params").clauses[0].predicate,
            Predicate::Range {
                lo: 5.0,
                lo_inclusive: true,
                hi: 10.0,
                hi_inclusive: false
            }
        );
    }

    #[test]
    fn everything_outside_the_subset_is_an_error_naming_it() {
        for (query, expected) in [
            ("hello", "full-text"),
            ("@price:[1 2] | @price:[5 6]", "union"),
            ("-@color:{red}", "negation"),
            ("@color:{re*}", "wildcard"),
            ("@nosuch:[1 2]", "Unknown field 'nosuch'"),
            ("@color:[1 2]", "TAG field"),
            ("@price:{1}", "NUMERIC field"),
            ("@price:[1]", "[lo hi]"),
            ("@price:[1 x]", "not a number"),
            ("@price:[1 2", "missing ']'"),
            ("(@price:[1 2]", "unbalanced"),
            ("@place:[1 2 3 parsecs]", "unknown geo unit"),
            ("@place:[1 95 3 km]", "Invalid geo"),
            ("@price:[$nope 2]", "No such parameter"),
            ("", "empty"),
        ] {
            let error = parsed(query).expect_err(query);
            assert!(error.contains(expected), "{query}: {error}");
        }
    }
}
