//! FT.* against a brute-force model: random hashes and JSON documents under several prefixes,
//! search indexes created before and after the data (back-filled), over every Sift index kind,
//! dropped and re-created, the server restarted; every FT.SEARCH answer (total, order, page,
//! content) compared with a filter over a `BTreeMap` of what was acknowledged.
//! `SIFT_SEARCH_MODEL_OPERATIONS` lengthens the run; `SIFT_SEED` replays one.

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

mod common;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use common::{Client, Reply, TestServer};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

#[derive(Debug, Clone, PartialEq)]
enum Doc {
    Hash(BTreeMap<String, String>),
    /// Compact JSON text, as sent and as FT.SEARCH answers it.
    Json(String),
    Text(String),
}

/// A stored key: its value and when it was last written (newest first = highest stamp).
#[derive(Debug, Clone)]
struct Stored {
    doc: Doc,
    stamp: u64,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Type {
    Numeric,
    Tag { case_sensitive: bool },
    Geo,
}

#[derive(Debug, Clone)]
struct Field {
    /// Hash field name, or JSON member name (path `$.NAME`).
    member: &'static str,
    alias: &'static str,
    value_type: Type,
}

#[derive(Debug, Clone)]
struct Index {
    name: &'static str,
    json: bool,
    prefixes: Vec<&'static str>,
    fields: Vec<Field>,
}

#[derive(Debug, Clone, PartialEq)]
enum Value {
    Number(f64),
    Tag(String),
    Point(f64, f64),
}

fn schema(json: bool) -> Vec<Field> {
    let case_sensitive = !json;
    vec![
        Field {
            member: "price",
            alias: if json { "p" } else { "price" },
            value_type: Type::Numeric,
        },
        Field {
            member: "color",
            alias: "color",
            value_type: Type::Tag { case_sensitive },
        },
        Field {
            member: "place",
            alias: "place",
            value_type: Type::Geo,
        },
    ]
}

fn indexes() -> Vec<Index> {
    vec![
        Index {
            name: "hashes",
            json: false,
            prefixes: vec!["p:", "q:"],
            fields: schema(false),
        },
        Index {
            name: "documents",
            json: true,
            prefixes: vec!["j:"],
            fields: schema(true),
        },
        Index {
            name: "everything",
            json: false,
            prefixes: vec![],
            fields: vec![Field {
                member: "price",
                alias: "price",
                value_type: Type::Numeric,
            }],
        },
    ]
}

/// A field's value as the index reads it: `None` absent, `Some(Err)` unreadable.
fn read(field: &Field, json: bool, doc: &Doc) -> Option<Result<Value, ()>> {
    let raw: serde_json::Value = match (doc, json) {
        (Doc::Hash(fields), false) => serde_json::Value::String(fields.get(field.member)?.clone()),
        (Doc::Json(text), true) => {
            let parsed: serde_json::Value = serde_json::from_str(text).unwrap();
            parsed.get(field.member)?.clone()
        }
        _ => return None,
    };
    if raw.is_null() {
        return None;
    }
    Some(match (field.value_type, &raw) {
        (Type::Numeric, serde_json::Value::Number(n)) => Ok(Value::Number(n.as_f64().unwrap())),
        (Type::Numeric, serde_json::Value::String(text)) if !json => text
            .trim()
            .parse::<f64>()
            .ok()
            .filter(|n| !n.is_nan())
            .map(Value::Number)
            .ok_or(()),
        (Type::Tag { case_sensitive }, serde_json::Value::String(text)) => {
            let tag = text.trim();
            if tag.contains(',') {
                Err(())
            } else if case_sensitive {
                Ok(Value::Tag(tag.to_owned()))
            } else {
                Ok(Value::Tag(tag.to_lowercase()))
            }
        }
        (Type::Geo, serde_json::Value::String(text)) => {
            let parts: Vec<f64> = text.split(',').filter_map(|p| p.parse().ok()).collect();
            match parts.as_slice() {
                [lon, lat] if lon.abs() <= 180.0 && lat.abs() <= 85.05 => {
                    Ok(Value::Point(*lon, *lat))
                }
                _ => Err(()),
            }
        }
        _ => Err(()),
    })
}

fn of_type(index: &Index, doc: &Doc) -> bool {
    matches!(
        (doc, index.json),
        (Doc::Hash(_), false) | (Doc::Json(_), true)
    )
}

fn covers(index: &Index, key: &str) -> bool {
    index.prefixes.is_empty() || index.prefixes.iter().any(|p| key.starts_with(p))
}

/// The values of a member of `index`, or `None` if `doc` is not one.
fn member(index: &Index, key: &str, doc: &Doc) -> Option<Vec<Option<Value>>> {
    if !covers(index, key) || !of_type(index, doc) {
        return None;
    }
    let mut values = Vec::new();
    for field in &index.fields {
        match read(field, index.json, doc) {
            None => values.push(None),
            Some(Ok(value)) => values.push(Some(value)),
            Some(Err(())) => return None,
        }
    }
    Some(values)
}

/// Whether writing `doc` at `key` is refused by a ready index.
fn refused(ready: &[Index], key: &str, doc: &Doc) -> bool {
    ready.iter().any(|index| {
        covers(index, key)
            && of_type(index, doc)
            && index
                .fields
                .iter()
                .any(|field| matches!(read(field, index.json, doc), Some(Err(()))))
    })
}

fn haversine(lon1: f64, lat1: f64, lon2: f64, lat2: f64) -> f64 {
    let r = 6_372_797.560_856_f64;
    let (p1, p2) = (lat1.to_radians(), lat2.to_radians());
    let dp = p2 - p1;
    let dl = (lon2 - lon1).to_radians();
    let a = (dp / 2.0).sin().powi(2) + p1.cos() * p2.cos() * (dl / 2.0).sin().powi(2);
    2.0 * r * a.sqrt().asin()
}

#[derive(Debug, Clone)]
enum Predicate {
    Range(f64, bool, f64, bool),
    Tags(Vec<String>),
    Radius(f64, f64, f64),
}

fn holds(predicate: &Predicate, value: &Value) -> bool {
    match (predicate, value) {
        (Predicate::Range(lo, lo_in, hi, hi_in), Value::Number(n)) => {
            (if *lo_in { n >= lo } else { n > lo }) && (if *hi_in { n <= hi } else { n < hi })
        }
        (Predicate::Tags(tags), Value::Tag(tag)) => tags.contains(tag),
        (Predicate::Radius(lon, lat, meters), Value::Point(x, y)) => {
            haversine(*lon, *lat, *x, *y) <= *meters
        }
        _ => false,
    }
}

fn number_text(rng: &mut StdRng) -> String {
    match rng.gen_range(0..10) {
        0 => "-inf".to_owned(),
        1 => format!("({}", rng.gen_range(-5..60)),
        _ => format!("{}", rng.gen_range(-5..60)),
    }
}

fn parse_bound(text: &str) -> (f64, bool) {
    let (body, inclusive) = match text.strip_prefix('(') {
        Some(body) => (body, false),
        None => (text, true),
    };
    let value = match body {
        "-inf" => f64::NEG_INFINITY,
        "+inf" => f64::INFINITY,
        number => number.parse().unwrap(),
    };
    (value, inclusive)
}

const TAGS: [&str; 6] = ["Red", "red", "BLUE", " green ", "blue", "x y"];

/// A random query: its text and its clauses as (field position, predicate).
fn random_query(rng: &mut StdRng, index: &Index) -> (String, Vec<(usize, Predicate)>) {
    if rng.gen_bool(0.15) {
        return ("*".to_owned(), Vec::new());
    }
    let mut parts = Vec::new();
    let mut clauses = Vec::new();
    for _ in 0..rng.gen_range(1..=2) {
        let position = rng.gen_range(0..index.fields.len());
        let field = &index.fields[position];
        match field.value_type {
            Type::Numeric => {
                let lo = number_text(rng);
                let hi = if rng.gen_bool(0.2) {
                    "+inf".to_owned()
                } else {
                    number_text(rng).replace("-inf", "+inf")
                };
                let (lo_value, lo_in) = parse_bound(&lo);
                let (hi_value, hi_in) = parse_bound(&hi);
                parts.push(format!("@{}:[{lo} {hi}]", field.alias));
                clauses.push((position, Predicate::Range(lo_value, lo_in, hi_value, hi_in)));
            }
            Type::Tag { case_sensitive } => {
                let count = rng.gen_range(1..=2);
                let chosen: Vec<&str> = (0..count)
                    .map(|_| TAGS[rng.gen_range(0..TAGS.len())])
                    .collect();
                let written: Vec<String> = chosen
                    .iter()
                    .map(|tag| tag.trim().replace(' ', "\\ "))
                    .collect();
                parts.push(format!("@{}:{{{}}}", field.alias, written.join(" | ")));
                let tags = chosen
                    .iter()
                    .map(|tag| {
                        if case_sensitive {
                            tag.trim().to_owned()
                        } else {
                            tag.trim().to_lowercase()
                        }
                    })
                    .collect();
                clauses.push((position, Predicate::Tags(tags)));
            }
            Type::Geo => {
                let lon = 2.0 + rng.gen_range(0.0..1.0);
                let lat = 48.5 + rng.gen_range(0.0..1.0);
                let km = rng.gen_range(1.0..60.0);
                parts.push(format!("@{}:[{lon} {lat} {km} km]", field.alias));
                clauses.push((position, Predicate::Radius(lon, lat, km * 1000.0)));
            }
        }
    }
    let text = if rng.gen_bool(0.2) {
        format!("({})", parts.join(" "))
    } else {
        parts.join(" ")
    };
    (text, clauses)
}

fn random_hash(rng: &mut StdRng, valid: bool) -> BTreeMap<String, String> {
    let mut fields = BTreeMap::new();
    if rng.gen_bool(0.9) {
        let price = if !valid && rng.gen_bool(0.3) {
            "cheap".to_owned()
        } else if rng.gen_bool(0.3) {
            format!(" {}.5 ", rng.gen_range(0..50))
        } else {
            rng.gen_range(0..50).to_string()
        };
        fields.insert("price".to_owned(), price);
    }
    if rng.gen_bool(0.8) {
        let color = if !valid && rng.gen_bool(0.3) {
            "red,blue".to_owned()
        } else {
            TAGS[rng.gen_range(0..TAGS.len())].to_owned()
        };
        fields.insert("color".to_owned(), color);
    }
    if rng.gen_bool(0.7) {
        let place = if !valid && rng.gen_bool(0.3) {
            "somewhere".to_owned()
        } else {
            format!(
                "{:.5},{:.5}",
                2.0 + rng.gen_range(0.0..1.0),
                48.5 + rng.gen_range(0.0..1.0)
            )
        };
        fields.insert("place".to_owned(), place);
    }
    if rng.gen_bool(0.3) {
        fields.insert("other".to_owned(), format!("o{}", rng.gen_range(0..9)));
    }
    fields
}

fn random_json(rng: &mut StdRng, valid: bool) -> String {
    let mut members = Vec::new();
    if rng.gen_bool(0.9) {
        if !valid && rng.gen_bool(0.3) {
            members.push(r#""price":"12""#.to_owned());
        } else if rng.gen_bool(0.1) {
            members.push(r#""price":null"#.to_owned());
        } else {
            members.push(format!(r#""price":{}"#, rng.gen_range(0..50)));
        }
    }
    if rng.gen_bool(0.8) {
        let tag = TAGS[rng.gen_range(0..TAGS.len())];
        members.push(format!(r#""color":"{tag}""#));
    }
    if rng.gen_bool(0.7) {
        members.push(format!(
            r#""place":"{:.5},{:.5}""#,
            2.0 + rng.gen_range(0.0..1.0),
            48.5 + rng.gen_range(0.0..1.0)
        ));
    }
    members.push(format!(r#""n":[1,{{"x":{}}}]"#, rng.gen_range(0..5)));
    format!("{{{}}}", members.join(","))
}

fn random_key(rng: &mut StdRng) -> String {
    let prefix = ["p:", "q:", "j:", "z:"][rng.gen_range(0..4)];
    format!("{prefix}{}", rng.gen_range(0..25))
}

/// Kinds that can serve each type, with a maintenance scheme that keeps answers exact.
fn random_technique(rng: &mut StdRng, field_type: Type) -> Option<(&'static str, &'static str)> {
    let all: &[(&str, &str)] = match field_type {
        Type::Geo => &[
            ("composite", "sync-full"),
            ("composite", "sync-insert"),
            ("memory", "sync-full"),
            ("next", "sync-insert"),
            ("sst-local", "sync-insert"),
        ],
        _ => &[
            ("composite", "sync-full"),
            ("composite", "sync-insert"),
            ("composite", "deferred"),
            ("eager", "sync-full"),
            ("lazy", "sync-insert"),
            ("memory", "sync-full"),
            ("next", "sync-insert"),
            ("sst-local", "sync-insert"),
            ("embedded", "sync-insert"),
        ],
    };
    if rng.gen_bool(0.3) {
        None
    } else {
        Some(all[rng.gen_range(0..all.len())])
    }
}

fn create_arguments(rng: &mut StdRng, index: &Index) -> Vec<String> {
    let mut words: Vec<String> = vec!["FT.CREATE".into(), index.name.into()];
    words.extend(["ON".into(), if index.json { "JSON" } else { "HASH" }.into()]);
    if !index.prefixes.is_empty() {
        words.push("PREFIX".into());
        words.push(index.prefixes.len().to_string());
        words.extend(index.prefixes.iter().map(ToString::to_string));
    }
    words.extend(["SCORE".into(), "1.0".into(), "SCHEMA".into()]);
    for field in &index.fields {
        if index.json {
            words.extend([
                format!("$.{}", field.member),
                "AS".into(),
                field.alias.into(),
            ]);
        } else {
            words.push(field.member.into());
        }
        match field.value_type {
            Type::Numeric => words.push("NUMERIC".into()),
            Type::Tag { case_sensitive } => {
                words.extend(["TAG".into(), "SEPARATOR".into(), ",".into()]);
                if case_sensitive {
                    words.push("CASESENSITIVE".into());
                }
            }
            Type::Geo => words.push("GEO".into()),
        }
        if rng.gen_bool(0.3) {
            words.push("SORTABLE".into());
        }
        if let Some((kind, maintenance)) = random_technique(rng, field.value_type) {
            words.extend([
                "SIFT.KIND".into(),
                kind.into(),
                "SIFT.MAINTENANCE".into(),
                maintenance.into(),
            ]);
        }
    }
    words
}

fn send(client: &mut Client, words: &[String]) -> Reply {
    let arguments: Vec<&[u8]> = words.iter().map(String::as_bytes).collect();
    client.command(&arguments)
}

/// FT.INFO of `name` (RESP2: a flat list of names and values).
fn info(client: &mut Client, name: &str) -> Vec<Reply> {
    match send(client, &["FT.INFO".into(), name.into()]) {
        Reply::Array(items) => items,
        other => panic!("FT.INFO {name}: {other:?}"),
    }
}

/// The value of `field` in an FT.INFO reply.
fn info_field(items: &[Reply], field: &str) -> Option<Reply> {
    items
        .chunks(2)
        .find(|pair| pair[0] == Reply::bulk(field))
        .map(|pair| pair[1].clone())
}

/// Waits until FT.INFO says the index is built.
fn wait_built(client: &mut Client, name: &str) {
    let started = Instant::now();
    loop {
        let items = info(client, name);
        if info_field(&items, "indexing") == Some(Reply::Integer(0)) {
            let failed = info_field(&items, "sift_build_error");
            assert!(failed.is_none(), "build of {name} failed: {items:?}");
            return;
        }
        assert!(
            started.elapsed() < Duration::from_mins(2),
            "{name} still indexing"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

struct Run {
    rng: StdRng,
    model: BTreeMap<String, Stored>,
    /// Indexes that exist, with whether FT.CREATE has finished building them.
    existing: Vec<Index>,
    stamp: u64,
    seed: u64,
}

impl Run {
    fn write(&mut self, client: &mut Client, step: usize) {
        let key = random_key(&mut self.rng);
        let valid = self.rng.gen_bool(0.85);
        let context = format!("seed {} step {step}", self.seed);
        let current = self.model.get(&key).cloned();
        match self.rng.gen_range(0..10) {
            0..=3 => {
                let fields = random_hash(&mut self.rng, valid);
                if fields.is_empty() {
                    return;
                }
                let mut merged = match &current {
                    Some(Stored {
                        doc: Doc::Hash(old),
                        ..
                    }) => old.clone(),
                    Some(_) => {
                        let mut words: Vec<String> = vec!["HSET".into(), key.clone()];
                        for (f, v) in &fields {
                            words.extend([f.clone(), v.clone()]);
                        }
                        let reply = send(client, &words);
                        assert!(
                            reply.text().starts_with("WRONGTYPE"),
                            "{context}: {reply:?}"
                        );
                        return;
                    }
                    None => BTreeMap::new(),
                };
                merged.extend(fields.clone());
                let mut words: Vec<String> = vec!["HSET".into(), key.clone()];
                for (f, v) in &fields {
                    words.extend([f.clone(), v.clone()]);
                }
                let reply = send(client, &words);
                let doc = Doc::Hash(merged);
                if refused(&self.existing, &key, &doc) {
                    assert!(
                        reply.text().contains("refused the value"),
                        "{context}: HSET {key} {fields:?} should be refused: {reply:?}"
                    );
                } else {
                    assert!(
                        matches!(reply, Reply::Integer(_)),
                        "{context}: HSET {key} {fields:?}: {reply:?}"
                    );
                    self.stamp += 1;
                    self.model.insert(
                        key,
                        Stored {
                            doc,
                            stamp: self.stamp,
                        },
                    );
                }
            }
            4 => {
                let Some(Stored {
                    doc: Doc::Hash(old),
                    ..
                }) = &current
                else {
                    return;
                };
                let field = ["price", "color", "place", "other"][self.rng.gen_range(0..4)];
                let reply = send(client, &["HDEL".into(), key.clone(), field.into()]);
                let mut fields = old.clone();
                if fields.remove(field).is_none() {
                    assert_eq!(reply, Reply::Integer(0), "{context}");
                    return;
                }
                if !fields.is_empty() && refused(&self.existing, &key, &Doc::Hash(fields.clone())) {
                    // What is left still holds a value an index cannot read (the key was
                    // written before the index existed): the write is refused too.
                    assert!(
                        reply.text().contains("refused the value"),
                        "{context}: {reply:?}"
                    );
                    return;
                }
                assert_eq!(reply, Reply::Integer(1), "{context}");
                if fields.is_empty() {
                    self.model.remove(&key);
                } else {
                    self.stamp += 1;
                    self.model.insert(
                        key,
                        Stored {
                            doc: Doc::Hash(fields),
                            stamp: self.stamp,
                        },
                    );
                }
            }
            5..=7 => {
                let text = random_json(&mut self.rng, valid);
                let reply = send(
                    client,
                    &["JSON.SET".into(), key.clone(), "$".into(), text.clone()],
                );
                if matches!(
                    current,
                    Some(Stored {
                        doc: Doc::Hash(_) | Doc::Text(_),
                        ..
                    })
                ) {
                    assert!(
                        reply.text().starts_with("WRONGTYPE"),
                        "{context}: {reply:?}"
                    );
                    return;
                }
                let doc = Doc::Json(text);
                if refused(&self.existing, &key, &doc) {
                    assert!(
                        reply.text().contains("refused the value"),
                        "{context}: JSON.SET {key} should be refused: {reply:?}"
                    );
                } else {
                    assert_eq!(reply, Reply::Status("OK".into()), "{context}");
                    self.stamp += 1;
                    self.model.insert(
                        key,
                        Stored {
                            doc,
                            stamp: self.stamp,
                        },
                    );
                }
            }
            8 => {
                let reply = send(client, &["DEL".into(), key.clone()]);
                assert_eq!(
                    reply,
                    Reply::Integer(i64::from(self.model.remove(&key).is_some())),
                    "{context}"
                );
            }
            _ => {
                let text = format!("s{}", self.rng.gen_range(0..9));
                let reply = send(client, &["SET".into(), key.clone(), text.clone()]);
                assert_eq!(reply, Reply::Status("OK".into()), "{context}");
                self.stamp += 1;
                self.model.insert(
                    key,
                    Stored {
                        doc: Doc::Text(text),
                        stamp: self.stamp,
                    },
                );
            }
        }
    }

    fn search(&mut self, client: &mut Client, index: &Index, step: usize) {
        let (query, clauses) = random_query(&mut self.rng, index);
        let mut words: Vec<String> = vec!["FT.SEARCH".into(), index.name.into(), query.clone()];
        let no_content = self.rng.gen_bool(0.3);
        if no_content {
            words.push("NOCONTENT".into());
        }
        let sort = if self.rng.gen_bool(0.3) {
            let ascending = self.rng.gen_bool(0.5);
            words.extend([
                "SORTBY".into(),
                index.fields[0].alias.into(),
                if ascending { "ASC" } else { "DESC" }.into(),
            ]);
            Some(ascending)
        } else {
            None
        };
        let (offset, count) = if self.rng.gen_bool(0.5) {
            (0, 10)
        } else {
            (self.rng.gen_range(0..5), self.rng.gen_range(0..40))
        };
        if (offset, count) != (0, 10) || self.rng.gen_bool(0.3) {
            words.extend(["LIMIT".into(), offset.to_string(), count.to_string()]);
        }
        if self.rng.gen_bool(0.5) {
            words.extend(["DIALECT".into(), "2".into()]);
        }
        // Expected: members matching every clause, in order.
        let mut expected: Vec<(String, u64, Vec<Option<Value>>, Doc)> = self
            .model
            .iter()
            .filter_map(|(key, stored)| {
                let values = member(index, key, &stored.doc)?;
                let all = clauses.iter().all(|(position, predicate)| {
                    values[*position]
                        .as_ref()
                        .is_some_and(|value| holds(predicate, value))
                });
                all.then(|| (key.clone(), stored.stamp, values, stored.doc.clone()))
            })
            .collect();
        expected.sort_by(|a, b| {
            let by_value = match sort {
                None => std::cmp::Ordering::Equal,
                Some(ascending) => match (&a.2[0], &b.2[0]) {
                    (Some(Value::Number(x)), Some(Value::Number(y))) => {
                        let ordering = x.partial_cmp(y).unwrap();
                        if ascending {
                            ordering
                        } else {
                            ordering.reverse()
                        }
                    }
                    (Some(_), None) => std::cmp::Ordering::Less,
                    (None, Some(_)) => std::cmp::Ordering::Greater,
                    _ => std::cmp::Ordering::Equal,
                },
            };
            by_value.then(b.1.cmp(&a.1))
        });
        let reply = send(client, &words);
        let context = format!("seed {} step {step}: {words:?}", self.seed);
        let Reply::Array(items) = reply else {
            panic!("{context}: {reply:?}");
        };
        assert_eq!(
            items[0],
            Reply::Integer(expected.len() as i64),
            "{context}: total; expected {:?}",
            expected.iter().map(|e| &e.0).collect::<Vec<_>>()
        );
        let page: Vec<_> = expected.iter().skip(offset).take(count).collect();
        let mut wanted = vec![items[0].clone()];
        if count > 0 {
            for (key, _, _, doc) in page {
                wanted.push(Reply::bulk(key));
                if !no_content {
                    wanted.push(Reply::Array(match doc {
                        Doc::Hash(fields) => fields
                            .iter()
                            .flat_map(|(f, v)| [Reply::bulk(f), Reply::bulk(v)])
                            .collect(),
                        Doc::Json(text) => vec![Reply::bulk("$"), Reply::bulk(text)],
                        Doc::Text(_) => unreachable!(),
                    }));
                }
            }
        }
        assert_eq!(Reply::Array(items), Reply::Array(wanted), "{context}");
    }
}

/// Flushes every few dozen writes, so the SSTable-based kinds (next, sst-local, embedded) and
/// compactions (deferred) take part.
fn small_memtable(config: &mut sift_server::ServerConfig) {
    config.memtable_bytes_max = Some(16 * 1024);
}

#[test]
fn ft_search_answers_match_a_brute_force_model_across_builds_drops_and_restarts() {
    let seed = std::env::var("SIFT_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(rand::random::<u64>);
    let operations: usize = std::env::var("SIFT_SEARCH_MODEL_OPERATIONS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1500);
    eprintln!("SIFT_SEED={seed}");
    let dir = tempfile::tempdir().unwrap();
    let mut server = TestServer::start(dir.path(), small_memtable);
    let mut client = server.client();
    let mut run = Run {
        rng: StdRng::seed_from_u64(seed),
        model: BTreeMap::new(),
        existing: Vec::new(),
        stamp: 0,
        seed,
    };
    let all = indexes();
    for step in 0..operations {
        let choice = run.rng.gen_range(0..100);
        if choice < 55 {
            run.write(&mut client, step);
        } else if choice < 90 {
            if run.existing.is_empty() {
                continue;
            }
            let index = run.existing[run.rng.gen_range(0..run.existing.len())].clone();
            run.search(&mut client, &index, step);
        } else if choice < 95 {
            let index = all[run.rng.gen_range(0..all.len())].clone();
            if run.existing.iter().any(|e| e.name == index.name) {
                let dropped = send(&mut client, &["FT.DROPINDEX".into(), index.name.into()]);
                assert_eq!(
                    dropped,
                    Reply::Status("OK".into()),
                    "seed {seed} step {step}"
                );
                run.existing.retain(|e| e.name != index.name);
                let again = send(
                    &mut client,
                    &["FT.SEARCH".into(), index.name.into(), "*".into()],
                );
                assert!(again.text().contains("no such index"), "{again:?}");
            } else {
                let words = create_arguments(&mut run.rng, &index);
                let created = send(&mut client, &words);
                assert_eq!(
                    created,
                    Reply::Status("OK".into()),
                    "seed {seed} step {step}: {words:?}"
                );
                // Queries while it builds are answered by a scan, exactly.
                run.search(&mut client, &index, step);
                wait_built(&mut client, index.name);
                run.existing.push(index);
            }
        } else if choice < 97 {
            drop(client);
            server.stop();
            server = TestServer::start(dir.path(), small_memtable);
            client = server.client();
            for index in run.existing.clone() {
                wait_built(&mut client, index.name);
            }
            let listed = send(&mut client, &["FT._LIST".into()]);
            let Reply::Array(mut names) = listed else {
                panic!("{listed:?}")
            };
            names.sort_by_key(Reply::text);
            let mut expected: Vec<Reply> =
                run.existing.iter().map(|e| Reply::bulk(e.name)).collect();
            expected.sort_by_key(Reply::text);
            assert_eq!(
                names, expected,
                "seed {seed} step {step}: FT._LIST after restart"
            );
        } else {
            for index in run.existing.clone() {
                let items = info(&mut client, index.name);
                let number = |name: &str| info_field(&items, name);
                let members = run
                    .model
                    .iter()
                    .filter(|(key, stored)| member(&index, key, &stored.doc).is_some())
                    .count();
                let failures = run
                    .model
                    .iter()
                    .filter(|(key, stored)| {
                        covers(&index, key)
                            && of_type(&index, &stored.doc)
                            && member(&index, key, &stored.doc).is_none()
                    })
                    .count();
                assert_eq!(
                    number("num_docs"),
                    Some(Reply::Integer(members as i64)),
                    "seed {seed} step {step}"
                );
                assert_eq!(
                    number("hash_indexing_failures"),
                    Some(Reply::Integer(failures as i64)),
                    "seed {seed} step {step}"
                );
            }
        }
    }
    drop(client);
    server.stop();
}

#[test]
fn ft_commands_refuse_what_sift_does_not_support_and_answer_redis_error_texts() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path(), |_| {});
    let mut client = server.client();
    let created = client.words("FT.CREATE idx ON HASH PREFIX 1 doc: SCHEMA n NUMERIC t TAG g GEO");
    assert_eq!(created, Reply::Status("OK".into()));
    for (line, expected) in [
        ("FT.CREATE idx SCHEMA n NUMERIC", "Index already exists"),
        (
            "FT.CREATE other SCHEMA body TEXT",
            "does not support TEXT fields",
        ),
        (
            "FT.CREATE other SCHEMA n NUMERIC n TAG",
            "Duplicate field in schema - n",
        ),
        ("FT.CREATE other ON HASH SCORE 1", "No schema found"),
        (
            "FT.CREATE other ON JSON SCHEMA $[\"\"] AS a NUMERIC",
            "Invalid field",
        ),
        // A count option as the last word (once an overflow in the count check).
        ("FT.CREATE other ON HASH PREFIX", "Bad arguments for PREFIX"),
        (
            "FT.CREATE other ON HASH STOPWORDS",
            "Bad arguments for STOPWORDS",
        ),
        ("FT.SEARCH idx * RETURN", "Bad arguments for RETURN"),
        ("FT.SEARCH idx * PARAMS 3 a b", "Bad arguments for PARAMS"),
        ("FT.SEARCH idx * RETURN 3 n", "Bad arguments for RETURN"),
        ("FT.SEARCH idx * FILTER n 1", "FILTER needs"),
        ("FT.SEARCH idx * GEOFILTER g 1 2 3", "GEOFILTER needs"),
        (
            "FT.CREATE other SCHEMA g GEO SIFT.MAINTENANCE deferred",
            "deferred",
        ),
        (
            "FT.CREATE other SKIPINITIALSCAN SCHEMA n NUMERIC",
            "SKIPINITIALSCAN",
        ),
        (
            "FT.CREATE other SCHEMA n NUMERIC SIFT.KIND btree",
            "unknown index kind",
        ),
        (
            "FT.CREATE other SCHEMA g GEO SIFT.KIND lazy",
            "cannot answer geo queries",
        ),
        (
            "FT.CREATE other SCHEMA n NUMERIC SIFT.KIND eager SIFT.MAINTENANCE sync-insert",
            "eager index is maintained sync-full",
        ),
        (
            "FT.CREATE other ON JSON SCHEMA $.a[0] AS a NUMERIC",
            "array elements",
        ),
        ("FT.SEARCH nosuch *", "nosuch: no such index"),
        ("FT.SEARCH idx hello", "full-text terms"),
        ("FT.SEARCH idx * WITHSCORES", "WITHSCORES"),
        ("FT.SEARCH idx * SORTBY g", "cannot sort by the GEO field"),
        ("FT.SEARCH idx * SORTBY nosuch", "not loaded nor in schema"),
        (
            "FT.SEARCH idx * LIMIT 0 2000000",
            "LIMIT exceeds maximum of 1000000",
        ),
        ("FT.SEARCH idx @n:{x}", "NUMERIC field"),
        ("FT.INFO nosuch", "Unknown Index name"),
        ("FT.DROPINDEX nosuch", "Unknown Index name"),
    ] {
        let reply = client.words(line);
        assert!(
            matches!(&reply, Reply::Error(text) if text.contains(expected)),
            "{line}: {reply:?}"
        );
    }
    // A refused write stores nothing.
    let refused = client.words("HSET doc:1 n many t ok");
    assert!(refused.text().contains("refused the value"), "{refused:?}");
    assert_eq!(client.words("EXISTS doc:1"), Reply::Integer(0));
    // Outside the prefix, anything goes.
    assert_eq!(client.words("HSET other:1 n many"), Reply::Integer(1));
    // RESP3: RediSearch 2.8's map.
    assert_eq!(client.words("HSET doc:2 n 5 t Blue"), Reply::Integer(2));
    client.send_raw(&Client::encode(&[b"HELLO", b"3"]));
    client.resp3 = true;
    assert!(matches!(client.read_reply(), Some(Reply::Map(_))));
    let reply = client.words("FT.SEARCH idx @t:{blue}");
    let Reply::Map(pairs) = reply else {
        panic!("{reply:?}")
    };
    let get = |name: &str| {
        pairs
            .iter()
            .find(|(k, _)| *k == Reply::bulk(name))
            .map(|(_, v)| v.clone())
    };
    assert_eq!(get("total_results"), Some(Reply::Integer(1)));
    let Some(Reply::Array(results)) = get("results") else {
        panic!("{pairs:?}")
    };
    let Reply::Map(hit) = &results[0] else {
        panic!("{results:?}")
    };
    assert!(
        hit.contains(&(Reply::bulk("id"), Reply::bulk("doc:2"))),
        "{hit:?}"
    );
    drop(client);
    server.stop();
}

#[test]
fn an_index_created_on_existing_data_reports_its_progress_and_answers_exactly_meanwhile() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path(), small_memtable);
    let mut client = server.client();
    let documents = 20_000u32;
    // Pipelined writes: one engine batch per run of plain SETs does not apply to HSET, so
    // send them in pipelined groups to keep the load quick.
    for start in (0..documents).step_by(500) {
        let mut requests = Vec::new();
        for i in start..(start + 500).min(documents) {
            let (key, price) = (format!("doc:{i}"), (i % 100).to_string());
            let color = ["red", "blue"][i as usize % 2];
            requests.extend(Client::encode(&[
                b"HSET",
                key.as_bytes(),
                b"price",
                price.as_bytes(),
                b"color",
                color.as_bytes(),
            ]));
        }
        client.send_raw(&requests);
        for _ in start..(start + 500).min(documents) {
            assert_eq!(client.read_reply(), Some(Reply::Integer(2)));
        }
    }
    // Two fields, built one after the other: progress must not step back between them.
    let created =
        client.words("FT.CREATE idx ON HASH PREFIX 1 doc: SCHEMA price NUMERIC color TAG");
    assert_eq!(created, Reply::Status("OK".into()));
    let mut last_fraction = 0.0f64;
    let mut polls_while_indexing = 0;
    loop {
        // Exact whatever the build's state: 200 documents have each price.
        let reply = client.command(&[b"FT.SEARCH", b"idx", b"@price:[7 7]", b"LIMIT", b"0", b"0"]);
        let Reply::Array(items) = reply else {
            panic!("FT.SEARCH failed: {reply:?}");
        };
        assert_eq!(items, [Reply::Integer(200)]);
        let items = info(&mut client, "idx");
        let value = |name: &str| info_field(&items, name).unwrap();
        let fraction: f64 = value("percent_indexed").text().parse().unwrap();
        assert!(
            (0.0..=1.0).contains(&fraction) && fraction >= last_fraction,
            "percent_indexed went from {last_fraction} to {fraction}"
        );
        last_fraction = fraction;
        if value("indexing") == Reply::Integer(0) {
            eprintln!("{polls_while_indexing} polls while indexing");
            assert!((fraction - 1.0).abs() < f64::EPSILON, "{fraction}");
            assert_eq!(value("num_docs"), Reply::Integer(i64::from(documents)));
            break;
        }
        polls_while_indexing += 1;
    }
    drop(client);
    server.stop();
}

#[test]
fn a_query_of_several_tags_never_misses_a_key_that_moves_between_them() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path(), |_| {});
    let mut client = server.client();
    let keys = 200;
    for i in 0..keys {
        let key = format!("m:{i}");
        assert_eq!(
            client.command(&[b"HSET", key.as_bytes(), b"t", b"a"]),
            Reply::Integer(1)
        );
    }
    assert_eq!(
        client.words("FT.CREATE idx ON HASH PREFIX 1 m: SCHEMA t TAG"),
        Reply::Status("OK".into())
    );
    wait_built(&mut client, "idx");
    let address = server.address;
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let writer_stop = std::sync::Arc::clone(&stop);
    // Every key always holds tag a or b; the writer moves them back and forth.
    let writer = std::thread::spawn(move || {
        let mut writer = Client::connect(address);
        let mut round = 0usize;
        while !writer_stop.load(std::sync::atomic::Ordering::Relaxed) {
            let key = format!("m:{}", round % keys);
            let tag: &[u8] = if (round / keys).is_multiple_of(2) {
                b"b"
            } else {
                b"a"
            };
            assert_eq!(
                writer.command(&[b"HSET", key.as_bytes(), b"t", tag]),
                Reply::Integer(0)
            );
            round += 1;
        }
    });
    for _ in 0..300 {
        let reply = client.command(&[b"FT.SEARCH", b"idx", b"@t:{a | b}", b"LIMIT", b"0", b"0"]);
        assert_eq!(reply, Reply::Array(vec![Reply::Integer(keys as i64)]));
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    writer.join().unwrap();
    drop(client);
    server.stop();
}
