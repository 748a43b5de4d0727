//! DEL, UNLINK, EXISTS, TYPE, SCAN, KEYS.

use bytes::Bytes;
use sift_resp::Reply;

use super::{is, keyspace_error, parse_integer, reply_of, syntax_error, Command};
use crate::keyspace::glob::{glob_match, literal_prefix};
use crate::keyspace::ValueType;
use crate::session::{Client, Shared};

/// Keys examined per page while KEYS walks the keyspace.
const KEYS_PAGE: usize = 4096;

pub(super) fn commands() -> Vec<Command> {
    vec![
        Command::writes(
            "generic",
            "del",
            -2,
            "Deletes keys; returns how many existed.",
            del,
        ),
        Command::writes(
            "generic",
            "unlink",
            -2,
            "Deletes keys (as DEL: Sift frees space in compactions anyway).",
            del,
        ),
        Command::reads(
            "generic",
            "exists",
            -2,
            "Counts the given keys that exist.",
            exists,
        ),
        Command::reads(
            "generic",
            "type",
            2,
            "The type of the value at a key.",
            type_command,
        ),
        Command::reads(
            "generic",
            "scan",
            -2,
            "Iterates the keys: SCAN cursor [MATCH pattern] [COUNT n] [TYPE type].",
            scan,
        ),
        Command::reads(
            "generic",
            "keys",
            2,
            "Every key matching a pattern (reads the whole keyspace; prefer SCAN).",
            keys,
        ),
    ]
}

fn del(shared: &Shared, _: &mut Client, arguments: &[Bytes]) -> Reply {
    reply_of(
        shared
            .keyspace
            .delete_many(&arguments[1..])
            .map(Reply::Integer),
    )
}

fn exists(shared: &Shared, _: &mut Client, arguments: &[Bytes]) -> Reply {
    let mut count = 0;
    for key in &arguments[1..] {
        match shared.keyspace.contains(key) {
            Ok(true) => count += 1,
            Ok(false) => {}
            Err(error) => return keyspace_error(error),
        }
    }
    Reply::Integer(count)
}

fn type_command(shared: &Shared, _: &mut Client, arguments: &[Bytes]) -> Reply {
    match shared.keyspace.get(&arguments[1]) {
        Ok(Some(value)) => Reply::Status(value.value_type().name().to_owned()),
        Ok(None) => Reply::Status("none".to_owned()),
        Err(error) => keyspace_error(error),
    }
}

fn type_named(name: &[u8]) -> Option<ValueType> {
    [ValueType::String, ValueType::Hash, ValueType::Json]
        .into_iter()
        .find(|value_type| name.eq_ignore_ascii_case(value_type.name().as_bytes()))
}

fn scan(shared: &Shared, _: &mut Client, arguments: &[Bytes]) -> Reply {
    let cursor = match std::str::from_utf8(&arguments[1])
        .ok()
        .and_then(|text| text.parse::<u64>().ok())
    {
        Some(cursor) => cursor,
        None => return Reply::error("ERR invalid cursor"),
    };
    let mut pattern: Option<&[u8]> = None;
    let mut count = 10usize;
    let mut wanted_type: Option<Option<ValueType>> = None;
    for option in arguments[2..].chunks(2) {
        match option {
            [name, value] if is(name, "MATCH") => pattern = Some(value),
            [name, value] if is(name, "COUNT") => match parse_integer(value) {
                Some(value) if value >= 1 => count = value as usize,
                Some(_) => return syntax_error(),
                None => return super::not_an_integer(),
            },
            // An unknown type matches nothing, as in Redis.
            [name, value] if is(name, "TYPE") => wanted_type = Some(type_named(value)),
            _ => return syntax_error(),
        }
    }
    let prefix = pattern.map(literal_prefix).unwrap_or_default();
    let from = if cursor == 0 {
        prefix.clone()
    } else {
        match shared.keyspace.cursors().take(cursor) {
            Some(position) => position,
            None => return Reply::error(
                "ERR invalid cursor (unknown or expired: Sift remembers the latest 100000 cursors)",
            ),
        }
    };
    let (page, mut next) = match shared.keyspace.scan(&from, count.min(100_000)) {
        Ok(page) => page,
        Err(error) => return keyspace_error(error),
    };
    let mut keys = Vec::new();
    for (key, value_type) in page {
        if !key.starts_with(&prefix) {
            // Past every key the pattern can match.
            next = None;
            break;
        }
        let type_matches = match wanted_type {
            None => true,
            Some(wanted) => wanted == Some(value_type),
        };
        if type_matches && pattern.is_none_or(|pattern| glob_match(pattern, &key)) {
            keys.push(Reply::Bulk(key));
        }
    }
    let next_cursor = next.map_or(0, |position| shared.keyspace.cursors().save(position));
    Reply::Array(vec![
        Reply::bulk(next_cursor.to_string()),
        Reply::Array(keys),
    ])
}

fn keys(shared: &Shared, _: &mut Client, arguments: &[Bytes]) -> Reply {
    let pattern = &arguments[1];
    let prefix = literal_prefix(pattern);
    let mut from = prefix.clone();
    let mut matched = Vec::new();
    loop {
        let (page, next) = match shared.keyspace.scan(&from, KEYS_PAGE) {
            Ok(page) => page,
            Err(error) => return keyspace_error(error),
        };
        for (key, _) in page {
            if !key.starts_with(&prefix) {
                return Reply::Array(matched);
            }
            if glob_match(pattern, &key) {
                matched.push(Reply::Bulk(key));
            }
        }
        match next {
            Some(position) => from = position,
            None => return Reply::Array(matched),
        }
    }
}
