//! Randomized command streams against a live server, every reply compared with a model (a
//! `BTreeMap` of keys to strings, hashes and JSON documents), with restarts of the server
//! over the same database, RESP2 and RESP3 connections, and binary values.
//! `SIFT_SERVER_MODEL_OPERATIONS` lengthens the run; `SIFT_SEED` replays one.

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

mod common;

use std::collections::{BTreeMap, BTreeSet};

use common::{Reply, TestServer};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

#[derive(Debug, Clone, PartialEq)]
enum Model {
    String(Vec<u8>),
    Hash(BTreeMap<Vec<u8>, Vec<u8>>),
    /// The compact text JSON.GET answers.
    Json(String),
}

const WRONGTYPE: &str = "WRONGTYPE Operation against a key holding the wrong kind of value";

fn key(rng: &mut StdRng) -> Vec<u8> {
    let names = [
        "a", "b", "user:1", "user:2", "user:10", "doc:x", "h", "é", "k k", "[x]",
    ];
    if rng.gen_bool(0.7) {
        names[rng.gen_range(0..names.len())].as_bytes().to_vec()
    } else {
        format!("key:{}", rng.gen_range(0..30)).into_bytes()
    }
}

fn value(rng: &mut StdRng) -> Vec<u8> {
    match rng.gen_range(0..4) {
        0 => Vec::new(),
        1 => (0..rng.gen_range(1..6)).map(|_| rng.gen::<u8>()).collect(),
        _ => format!("v{}", rng.gen_range(0..1000)).into_bytes(),
    }
}

/// A JSON document: (what is sent, with spaces; what JSON.GET answers, compact).
fn json_document(rng: &mut StdRng) -> (String, String) {
    let n = rng.gen_range(-50..50);
    let name = ["x", "y \\\" z", "ü"][rng.gen_range(0..3)];
    let compact = format!(
        r#"{{"n":{n},"name":"{name}","tags":["t{}",2.5],"nested":{{"ok":true}}}}"#,
        rng.gen_range(0..9)
    );
    let spaced = compact.replace(",\"", ", \"").replace(":{", ": {");
    (spaced, compact)
}

fn model_get(model: &BTreeMap<Vec<u8>, Model>, key: &[u8]) -> Option<Model> {
    model.get(key).cloned()
}

fn run(seed: u64, operations: usize) {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut rng = StdRng::seed_from_u64(seed);
    let mut server = TestServer::start(dir.path(), |_| {});
    let mut client = server.client();
    let mut model: BTreeMap<Vec<u8>, Model> = BTreeMap::new();
    for step in 0..operations {
        let context = format!("seed {seed}, step {step}");
        match rng.gen_range(0..100) {
            0..=11 => {
                let (k, v) = (key(&mut rng), value(&mut rng));
                let option = ["", "NX", "XX", "GET"][rng.gen_range(0..4)];
                let mut arguments: Vec<&[u8]> = vec![b"SET", &k, &v];
                if !option.is_empty() {
                    arguments.push(option.as_bytes());
                }
                let current = model_get(&model, &k);
                let expected = match (option, &current) {
                    ("NX", Some(_)) | ("XX" | "GET", None) => Reply::Null,
                    ("GET", Some(Model::String(old))) => Reply::Bulk(old.clone()),
                    ("GET", Some(_)) => Reply::Error(WRONGTYPE.into()),
                    _ => Reply::Status("OK".into()),
                };
                let stores = !matches!(expected, Reply::Error(_))
                    && !matches!((option, &current), ("NX", Some(_)) | ("XX", None));
                assert_eq!(
                    client.command(&arguments),
                    expected,
                    "{context}: SET {option}"
                );
                if stores {
                    model.insert(k, Model::String(v));
                }
            }
            12..=21 => {
                let k = key(&mut rng);
                let expected = match model_get(&model, &k) {
                    Some(Model::String(v)) => Reply::Bulk(v),
                    Some(_) => Reply::Error(WRONGTYPE.into()),
                    None => Reply::Null,
                };
                assert_eq!(client.command(&[b"GET", &k]), expected, "{context}: GET");
            }
            22..=27 => {
                let keys: Vec<Vec<u8>> = (0..rng.gen_range(1..4)).map(|_| key(&mut rng)).collect();
                let distinct: BTreeSet<&Vec<u8>> = keys.iter().collect();
                let existing = distinct.iter().filter(|k| model.contains_key(**k)).count();
                let mut arguments: Vec<&[u8]> =
                    vec![if rng.gen_bool(0.5) { b"DEL" } else { b"UNLINK" }];
                arguments.extend(keys.iter().map(Vec::as_slice));
                assert_eq!(
                    client.command(&arguments),
                    Reply::Integer(existing as i64),
                    "{context}: DEL"
                );
                for k in &keys {
                    model.remove(k);
                }
            }
            28..=31 => {
                let keys: Vec<Vec<u8>> = (0..rng.gen_range(1..4)).map(|_| key(&mut rng)).collect();
                let count = keys.iter().filter(|k| model.contains_key(*k)).count();
                let mut arguments: Vec<&[u8]> = vec![b"EXISTS"];
                arguments.extend(keys.iter().map(Vec::as_slice));
                assert_eq!(
                    client.command(&arguments),
                    Reply::Integer(count as i64),
                    "{context}: EXISTS"
                );
                let mut arguments: Vec<&[u8]> = vec![b"MGET"];
                arguments.extend(keys.iter().map(Vec::as_slice));
                let expected = keys
                    .iter()
                    .map(|k| match model.get(k) {
                        Some(Model::String(v)) => Reply::Bulk(v.clone()),
                        _ => Reply::Null,
                    })
                    .collect();
                assert_eq!(
                    client.command(&arguments),
                    Reply::Array(expected),
                    "{context}: MGET"
                );
            }
            32..=35 => {
                let k = key(&mut rng);
                let expected = match model.get(&k) {
                    Some(Model::String(_)) => "string",
                    Some(Model::Hash(_)) => "hash",
                    Some(Model::Json(_)) => "ReJSON-RL",
                    None => "none",
                };
                assert_eq!(
                    client.command(&[b"TYPE", &k]),
                    Reply::Status(expected.into()),
                    "{context}: TYPE"
                );
            }
            36..=47 => {
                let k = key(&mut rng);
                let pairs: Vec<(Vec<u8>, Vec<u8>)> = (0..rng.gen_range(1..4))
                    .map(|_| {
                        (
                            format!("f{}", rng.gen_range(0..6)).into_bytes(),
                            value(&mut rng),
                        )
                    })
                    .collect();
                let mut arguments: Vec<&[u8]> = vec![b"HSET", &k];
                for (f, v) in &pairs {
                    arguments.push(f);
                    arguments.push(v);
                }
                let reply = client.command(&arguments);
                match model.get(&k).cloned() {
                    Some(Model::Hash(mut fields)) => {
                        let added = pairs
                            .iter()
                            .filter(|(f, v)| fields.insert(f.clone(), v.clone()).is_none())
                            .count();
                        assert_eq!(reply, Reply::Integer(added as i64), "{context}: HSET");
                        model.insert(k, Model::Hash(fields));
                    }
                    Some(_) => assert_eq!(reply, Reply::Error(WRONGTYPE.into()), "{context}: HSET"),
                    None => {
                        let fields: BTreeMap<Vec<u8>, Vec<u8>> = pairs.into_iter().collect();
                        assert_eq!(
                            reply,
                            Reply::Integer(fields.len() as i64),
                            "{context}: HSET new"
                        );
                        model.insert(k, Model::Hash(fields));
                    }
                }
            }
            48..=55 => {
                let k = key(&mut rng);
                let field = format!("f{}", rng.gen_range(0..6)).into_bytes();
                let current = model.get(&k).cloned();
                let hget = client.command(&[b"HGET", &k, &field]);
                let hlen = client.command(&[b"HLEN", &k]);
                let hgetall = client.command(&[b"HGETALL", &k]);
                match current {
                    Some(Model::Hash(fields)) => {
                        assert_eq!(
                            hget,
                            fields.get(&field).cloned().map_or(Reply::Null, Reply::Bulk),
                            "{context}: HGET"
                        );
                        assert_eq!(hlen, Reply::Integer(fields.len() as i64), "{context}: HLEN");
                        let pairs: Vec<(Reply, Reply)> = fields
                            .iter()
                            .map(|(f, v)| (Reply::Bulk(f.clone()), Reply::Bulk(v.clone())))
                            .collect();
                        let expected = if client.resp3 {
                            let mut pairs = pairs;
                            pairs.sort_by_key(|(key, _)| format!("{key:?}"));
                            Reply::Map(pairs)
                        } else {
                            Reply::Array(pairs.into_iter().flat_map(|(f, v)| [f, v]).collect())
                        };
                        assert_eq!(hgetall, expected, "{context}: HGETALL");
                    }
                    Some(_) => {
                        for reply in [hget, hlen, hgetall] {
                            assert_eq!(
                                reply,
                                Reply::Error(WRONGTYPE.into()),
                                "{context}: hash read of another type"
                            );
                        }
                    }
                    None => {
                        assert_eq!(hget, Reply::Null, "{context}");
                        assert_eq!(hlen, Reply::Integer(0), "{context}");
                        let empty = if client.resp3 {
                            Reply::Map(Vec::new())
                        } else {
                            Reply::Array(Vec::new())
                        };
                        assert_eq!(hgetall, empty, "{context}");
                    }
                }
            }
            56..=60 => {
                let k = key(&mut rng);
                let fields: Vec<Vec<u8>> = (0..rng.gen_range(1..3))
                    .map(|_| format!("f{}", rng.gen_range(0..6)).into_bytes())
                    .collect();
                let mut arguments: Vec<&[u8]> = vec![b"HDEL", &k];
                arguments.extend(fields.iter().map(Vec::as_slice));
                let reply = client.command(&arguments);
                match model.get(&k).cloned() {
                    Some(Model::Hash(mut current)) => {
                        let removed = fields
                            .iter()
                            .filter(|f| current.remove(*f).is_some())
                            .count();
                        assert_eq!(reply, Reply::Integer(removed as i64), "{context}: HDEL");
                        if current.is_empty() {
                            model.remove(&k);
                        } else {
                            model.insert(k, Model::Hash(current));
                        }
                    }
                    Some(_) => assert_eq!(reply, Reply::Error(WRONGTYPE.into()), "{context}: HDEL"),
                    None => assert_eq!(reply, Reply::Integer(0), "{context}: HDEL missing"),
                }
            }
            61..=70 => {
                let k = key(&mut rng);
                let (sent, compact) = json_document(&mut rng);
                let flag = ["", "NX", "XX"][rng.gen_range(0..3)];
                let mut arguments: Vec<&[u8]> = vec![b"JSON.SET", &k, b"$", sent.as_bytes()];
                if !flag.is_empty() {
                    arguments.push(flag.as_bytes());
                }
                let reply = client.command(&arguments);
                match (model.get(&k), flag) {
                    (Some(Model::String(_) | Model::Hash(_)), _) => {
                        assert_eq!(reply, Reply::Error(WRONGTYPE.into()), "{context}");
                    }
                    (Some(_), "NX") | (None, "XX") => {
                        assert_eq!(reply, Reply::Null, "{context}: JSON.SET {flag}");
                    }
                    _ => {
                        assert_eq!(reply, Reply::Status("OK".into()), "{context}: JSON.SET");
                        model.insert(k, Model::Json(compact));
                    }
                }
            }
            71..=78 => {
                let k = key(&mut rng);
                let root = client.command(&[b"JSON.GET", &k]);
                let n = client.command(&[b"JSON.GET", &k, b"$.n"]);
                let tag = client.command(&[b"JSON.GET", &k, b".tags[0]"]);
                match model.get(&k) {
                    Some(Model::Json(compact)) => {
                        assert_eq!(root, Reply::bulk(compact), "{context}: JSON.GET");
                        let document: serde_json::Value = serde_json::from_str(compact).unwrap();
                        assert_eq!(
                            n,
                            Reply::Bulk(format!("[{}]", document["n"]).into_bytes()),
                            "{context}: JSON.GET $.n"
                        );
                        assert_eq!(
                            tag,
                            Reply::Bulk(document["tags"][0].to_string().into_bytes()),
                            "{context}: .tags[0]"
                        );
                    }
                    Some(_) => assert_eq!(root, Reply::Error(WRONGTYPE.into()), "{context}"),
                    None => assert_eq!(
                        (root, n, tag),
                        (Reply::Null, Reply::Null, Reply::Null),
                        "{context}"
                    ),
                }
            }
            79..=82 => {
                let k = key(&mut rng);
                let reply = client.command(&[b"JSON.DEL", &k, b"$"]);
                match model.get(&k) {
                    Some(Model::Json(_)) => {
                        assert_eq!(reply, Reply::Integer(1), "{context}: JSON.DEL");
                        model.remove(&k);
                    }
                    Some(_) => {
                        assert_eq!(reply, Reply::Error(WRONGTYPE.into()), "{context}: JSON.DEL");
                    }
                    None => assert_eq!(reply, Reply::Integer(0), "{context}: JSON.DEL missing"),
                }
            }
            83..=86 => {
                assert_eq!(
                    client.command(&[b"DBSIZE"]),
                    Reply::Integer(model.len() as i64),
                    "{context}: DBSIZE"
                );
                let pattern = ["*", "user:*", "key:1*", "?", "[ab]", "*x*"][rng.gen_range(0..6)];
                let expected: BTreeSet<Vec<u8>> = model
                    .keys()
                    .filter(|k| glob(pattern.as_bytes(), k))
                    .cloned()
                    .collect();
                let count = rng.gen_range(1..8).to_string();
                let mut cursor = b"0".to_vec();
                let mut seen = Vec::new();
                loop {
                    let reply = client.command(&[
                        b"SCAN",
                        &cursor,
                        b"MATCH",
                        pattern.as_bytes(),
                        b"COUNT",
                        count.as_bytes(),
                    ]);
                    let Reply::Array(parts) = reply else {
                        panic!("{context}: SCAN reply {reply:?}")
                    };
                    let [Reply::Bulk(next), Reply::Array(keys)] = parts.as_slice() else {
                        panic!("{context}: SCAN shape")
                    };
                    seen.extend(keys.iter().map(|k| match k {
                        Reply::Bulk(k) => k.clone(),
                        other => panic!("{other:?}"),
                    }));
                    if next == b"0" {
                        break;
                    }
                    cursor.clone_from(next);
                }
                let seen_set: BTreeSet<Vec<u8>> = seen.iter().cloned().collect();
                assert_eq!(
                    seen_set.len(),
                    seen.len(),
                    "{context}: SCAN returned a key twice"
                );
                assert_eq!(seen_set, expected, "{context}: SCAN MATCH {pattern}");
                let Reply::Array(keys) = client.command(&[b"KEYS", pattern.as_bytes()]) else {
                    panic!("KEYS")
                };
                let keys: BTreeSet<Vec<u8>> = keys
                    .into_iter()
                    .map(|k| match k {
                        Reply::Bulk(k) => k,
                        other => panic!("{other:?}"),
                    })
                    .collect();
                assert_eq!(keys, expected, "{context}: KEYS {pattern}");
            }
            87..=89 => {
                // A new connection, in either protocol.
                client = server.client();
                if rng.gen_bool(0.5) {
                    // The reply to HELLO 3 is already in RESP3.
                    client.resp3 = true;
                    let reply = client.command(&[b"HELLO", b"3"]);
                    assert!(
                        matches!(reply, Reply::Map(_)),
                        "{context}: HELLO 3 {reply:?}"
                    );
                }
            }
            90..=91 => {
                drop(client);
                server.stop();
                server = TestServer::start(dir.path(), |_| {});
                client = server.client();
                assert_eq!(
                    client.command(&[b"DBSIZE"]),
                    Reply::Integer(model.len() as i64),
                    "{context}: DBSIZE after restart"
                );
            }
            92..=94 if rng.gen_bool(0.7) => {
                // A pipeline of plain SETs (stored as one batch), with repeated keys and an
                // unstorable one among them; then the count must still be exact.
                let mut wire = Vec::new();
                let mut expected = Vec::new();
                for _ in 0..rng.gen_range(2..12) {
                    let k = if rng.gen_bool(0.1) {
                        Vec::new()
                    } else {
                        key(&mut rng)
                    };
                    let v = value(&mut rng);
                    wire.extend_from_slice(&common::Client::encode(&[b"SET", &k, &v]));
                    if k.is_empty() {
                        expected.push(Reply::Error("ERR Sift does not store the empty key".into()));
                    } else {
                        expected.push(Reply::Status("OK".into()));
                        model.insert(k, Model::String(v));
                    }
                }
                client.send_raw(&wire);
                for (index, expected) in expected.into_iter().enumerate() {
                    assert_eq!(
                        client.read_reply(),
                        Some(expected),
                        "{context}: pipelined SET {index}"
                    );
                }
                assert_eq!(
                    client.command(&[b"DBSIZE"]),
                    Reply::Integer(model.len() as i64),
                    "{context}: DBSIZE after a pipeline"
                );
            }
            92 => {
                if rng.gen_bool(0.2) {
                    assert_eq!(
                        client.command(&[b"FLUSHDB"]),
                        Reply::Status("OK".into()),
                        "{context}"
                    );
                    model.clear();
                }
            }
            _ => {
                // Full check: every key's value.
                for (k, expected) in &model {
                    match expected {
                        Model::String(v) => assert_eq!(
                            client.command(&[b"GET", k]),
                            Reply::Bulk(v.clone()),
                            "{context}: full check"
                        ),
                        Model::Hash(fields) => assert_eq!(
                            client.command(&[b"HLEN", k]),
                            Reply::Integer(fields.len() as i64),
                            "{context}"
                        ),
                        Model::Json(compact) => assert_eq!(
                            client.command(&[b"JSON.GET", k]),
                            Reply::bulk(compact),
                            "{context}"
                        ),
                    }
                }
            }
        }
    }
    server.stop();
}

/// Glob matching as the documentation describes it (the test's own reading).
fn glob(pattern: &[u8], text: &[u8]) -> bool {
    match pattern.split_first() {
        None => text.is_empty(),
        Some((b'*', rest)) => (0..=text.len()).any(|skip| glob(rest, &text[skip..])),
        Some((b'?', rest)) => !text.is_empty() && glob(rest, &text[1..]),
        Some((b'[', rest)) => {
            let close = rest.iter().position(|&b| b == b']').expect("closed class");
            !text.is_empty()
                && rest[..close].contains(&text[0])
                && glob(&rest[close + 1..], &text[1..])
        }
        Some((&byte, rest)) => text.first() == Some(&byte) && glob(rest, &text[1..]),
    }
}

#[test]
fn model_command_streams_match_a_btreemap_across_restarts() {
    let operations = std::env::var("SIFT_SERVER_MODEL_OPERATIONS")
        .ok()
        .and_then(|text| text.parse().ok())
        .unwrap_or(3000);
    let seeds: Vec<u64> = match std::env::var("SIFT_SEED")
        .ok()
        .and_then(|text| text.parse().ok())
    {
        Some(seed) => vec![seed],
        None => vec![1, 2],
    };
    for seed in seeds {
        run(seed, operations);
    }
}
