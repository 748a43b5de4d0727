//! RedisJSON's JSON.SET, JSON.GET, JSON.DEL, JSON.MGET, on whole documents (JSON.SET and
//! JSON.DEL at the root; JSON.GET and JSON.MGET at any supported path, `json_path.rs`).

use bytes::Bytes;
use serde_json::value::RawValue;
use sift_resp::Reply;

use super::{is, keyspace_error, reply_of, syntax_error, truncated, Command};
use crate::json_path::{self, JsonPath};
use crate::keyspace::{KeyspaceError, Update, Value};
use crate::session::{Client, Shared};

pub(super) fn commands() -> Vec<Command> {
    vec![
        Command::writes(
            "json",
            "json.set",
            -4,
            "Stores a JSON document at the root: JSON.SET key $ json [NX | XX].",
            json_set,
        ),
        Command::reads(
            "json",
            "json.get",
            -2,
            "Values of a JSON document at paths: JSON.GET key [path ...].",
            json_get,
        ),
        Command::writes(
            "json",
            "json.del",
            -2,
            "Deletes a JSON document (root path only).",
            json_del,
        ),
        Command::reads(
            "json",
            "json.mget",
            -3,
            "The value at one path of several documents: JSON.MGET key [key ...] path.",
            json_mget,
        ),
    ]
}

fn path_of(argument: &[u8]) -> Result<JsonPath, Reply> {
    let text = std::str::from_utf8(argument)
        .map_err(|_| Reply::error("ERR the JSON path is not UTF-8"))?;
    json_path::parse(text).map_err(|reason| Reply::error(format!("ERR {reason}")))
}

fn json_set(shared: &Shared, _: &mut Client, arguments: &[Bytes]) -> Reply {
    let path = match path_of(&arguments[2]) {
        Ok(path) => path,
        Err(reply) => return reply,
    };
    let (if_missing, if_exists) = match &arguments[4..] {
        [] => (false, false),
        [flag] if is(flag, "NX") => (true, false),
        [flag] if is(flag, "XX") => (false, true),
        _ => return syntax_error(),
    };
    if !path.is_root() {
        return Reply::error(format!(
            "ERR Sift stores whole JSON documents: JSON.SET takes the root path ($), not '{}'",
            truncated(&arguments[2])
        ));
    }
    // Checked as one JSON value before anything is stored: invalid JSON stores nothing.
    let document = match std::str::from_utf8(&arguments[3])
        .map_err(|e| e.to_string())
        .and_then(|text| serde_json::from_str::<&RawValue>(text).map_err(|e| e.to_string()))
    {
        Ok(raw) => raw.get().to_owned(),
        Err(reason) => return Reply::error(format!("ERR invalid JSON: {reason}")),
    };
    reply_of(shared.keyspace.update(&arguments[1], |current| {
        match &current {
            Some(Value::Json(_)) | None => {}
            Some(_) => return Err(KeyspaceError::WrongType),
        }
        if (if_missing && current.is_some()) || (if_exists && current.is_none()) {
            return Ok((Update::Keep, Reply::Null));
        }
        Ok((Update::Put(Value::Json(document)), Reply::ok()))
    }))
}

/// The text JSON.GET answers for `path` in `document`: `$` paths an array of matches,
/// legacy paths the value (an error when it is missing).
fn render(document: &str, path: &JsonPath, path_text: &[u8]) -> Result<String, Reply> {
    let selected = json_path::select(document, path);
    if path.dollar {
        return Ok(match selected {
            Some(value) => format!("[{}]", json_path::minify(value)),
            None => "[]".to_owned(),
        });
    }
    selected.map(json_path::minify).ok_or_else(|| {
        Reply::error(format!(
            "ERR Path '{}' does not exist",
            truncated(path_text)
        ))
    })
}

fn json_get(shared: &Shared, _: &mut Client, arguments: &[Bytes]) -> Reply {
    let mut paths = Vec::new();
    let mut rest = &arguments[2..];
    while let Some(argument) = rest.first() {
        if ["INDENT", "NEWLINE", "SPACE"]
            .iter()
            .any(|option| is(argument, option))
        {
            return Reply::error(format!(
                "ERR Sift does not support JSON.GET's {} option (replies are compact)",
                truncated(argument).to_uppercase()
            ));
        }
        if is(argument, "NOESCAPE") {
            rest = &rest[1..];
            continue;
        }
        match path_of(argument) {
            Ok(path) => paths.push((path, argument.clone())),
            Err(reply) => return reply,
        }
        rest = &rest[1..];
    }
    let document = match shared.keyspace.get(&arguments[1]) {
        Ok(Some(Value::Json(document))) => document,
        Ok(Some(_)) => return keyspace_error(KeyspaceError::WrongType),
        Ok(None) => return Reply::Null,
        Err(error) => return keyspace_error(error),
    };
    let text = match paths.as_slice() {
        [] => json_path::minify(&document),
        [(path, text)] => match render(&document, path, text) {
            Ok(text) => text,
            Err(reply) => return reply,
        },
        many => {
            // Several paths: an object from each path to its answer.
            let mut members = Vec::with_capacity(many.len());
            for (path, text) in many {
                match render(&document, path, text) {
                    Ok(value) => {
                        let name = serde_json::to_string(&String::from_utf8_lossy(text))
                            .unwrap_or_default();
                        members.push(format!("{name}:{value}"));
                    }
                    Err(reply) => return reply,
                }
            }
            format!("{{{}}}", members.join(","))
        }
    };
    Reply::bulk(text)
}

fn json_del(shared: &Shared, _: &mut Client, arguments: &[Bytes]) -> Reply {
    if arguments.len() > 3 {
        return super::wrong_arity("json.del");
    }
    if let Some(path) = arguments.get(2) {
        match path_of(path) {
            Ok(parsed) if parsed.is_root() => {}
            Ok(_) => {
                return Reply::error(format!(
                "ERR Sift deletes whole JSON documents: JSON.DEL takes the root path ($), not '{}'",
                truncated(path)
            ))
            }
            Err(reply) => return reply,
        }
    }
    reply_of(
        shared
            .keyspace
            .update(&arguments[1], |current| match current {
                Some(Value::Json(_)) => Ok((Update::Delete, Reply::Integer(1))),
                Some(_) => Err(KeyspaceError::WrongType),
                None => Ok((Update::Keep, Reply::Integer(0))),
            }),
    )
}

fn json_mget(shared: &Shared, _: &mut Client, arguments: &[Bytes]) -> Reply {
    let Some((path_text, keys)) = arguments[1..].split_last() else {
        return super::wrong_arity("json.mget");
    };
    let path = match path_of(path_text) {
        Ok(path) => path,
        Err(reply) => return reply,
    };
    let mut answers = Vec::with_capacity(keys.len());
    for key in keys {
        match shared.keyspace.get(key) {
            Ok(Some(Value::Json(document))) => match render(&document, &path, path_text) {
                Ok(text) => answers.push(Reply::bulk(text)),
                // A legacy path missing in one document: nil for it, as RedisJSON answers.
                Err(_) => answers.push(Reply::Null),
            },
            Ok(_) => answers.push(Reply::Null),
            Err(error) => return keyspace_error(error),
        }
    }
    Reply::Array(answers)
}
