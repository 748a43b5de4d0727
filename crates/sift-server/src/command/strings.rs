//! GET, SET, MGET.

use bytes::Bytes;
use sift_resp::Reply;

use super::{is, keyspace_error, reply_of, syntax_error, truncated, Command};
use crate::keyspace::{KeyspaceError, Update, Value};
use crate::session::{Client, Shared};

pub(super) fn commands() -> Vec<Command> {
    vec![
        Command::reads("string", "get", 2, "The string value of a key.", get),
        Command::writes(
            "string",
            "set",
            -3,
            "Sets a key to a string: SET key value [NX | XX] [GET] (no expiry).",
            set,
        ),
        Command::reads(
            "string",
            "mget",
            -2,
            "The string values of keys (nil for missing keys and other types).",
            mget,
        ),
    ]
}

fn get(shared: &Shared, _: &mut Client, arguments: &[Bytes]) -> Reply {
    match shared.keyspace.get(&arguments[1]) {
        Ok(Some(Value::String(bytes))) => Reply::Bulk(bytes),
        Ok(Some(_)) => keyspace_error(KeyspaceError::WrongType),
        Ok(None) => Reply::Null,
        Err(error) => keyspace_error(error),
    }
}

fn mget(shared: &Shared, _: &mut Client, arguments: &[Bytes]) -> Reply {
    let mut values = Vec::with_capacity(arguments.len() - 1);
    for key in &arguments[1..] {
        match shared.keyspace.get(key) {
            Ok(Some(Value::String(bytes))) => values.push(Reply::Bulk(bytes)),
            Ok(_) => values.push(Reply::Null),
            Err(error) => return keyspace_error(error),
        }
    }
    Reply::Array(values)
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Condition {
    Always,
    IfMissing,
    IfExists,
}

fn set(shared: &Shared, _: &mut Client, arguments: &[Bytes]) -> Reply {
    let mut condition = Condition::Always;
    let mut return_old = false;
    for option in &arguments[3..] {
        if is(option, "NX") && condition == Condition::Always {
            condition = Condition::IfMissing;
        } else if is(option, "XX") && condition == Condition::Always {
            condition = Condition::IfExists;
        } else if is(option, "GET") {
            return_old = true;
        } else if ["EX", "PX", "EXAT", "PXAT", "KEEPTTL"]
            .iter()
            .any(|expiry| is(option, expiry))
        {
            return Reply::error(format!(
                "ERR Sift does not support key expiry ({}) yet",
                truncated(option).to_uppercase()
            ));
        } else {
            return syntax_error();
        }
    }
    let value = Value::String(arguments[2].clone());
    reply_of(shared.keyspace.update(&arguments[1], |current| {
        let old = match (&current, return_old) {
            (Some(Value::String(bytes)), true) => Reply::Bulk(bytes.clone()),
            (Some(_), true) => return Err(KeyspaceError::WrongType),
            (None, true) => Reply::Null,
            (_, false) => Reply::ok(),
        };
        let allowed = match condition {
            Condition::Always => true,
            Condition::IfMissing => current.is_none(),
            Condition::IfExists => current.is_some(),
        };
        if !allowed {
            return Ok((Update::Keep, if return_old { old } else { Reply::Null }));
        }
        Ok((Update::Put(value), old))
    }))
}

/// Whether a request is a plain `SET key value` (no option): such requests, when a client
/// pipelines several, are stored as one engine batch ([`set_many`]).
pub(crate) fn is_plain_set(arguments: &[Bytes]) -> bool {
    arguments.len() == 3 && is(&arguments[0], "SET")
}

/// The replies of consecutive plain SETs, stored as one batch.
pub(crate) fn set_many(shared: &Shared, requests: &[&[Bytes]]) -> Vec<Reply> {
    let _shared_side = shared.transactions.read();
    let entries: Vec<(&[u8], Value)> = requests
        .iter()
        .map(|arguments| (arguments[1].as_ref(), Value::String(arguments[2].clone())))
        .collect();
    match shared.keyspace.put_many(&entries) {
        Ok(outcomes) => outcomes
            .into_iter()
            .map(|outcome| outcome.map_or_else(keyspace_error, |()| Reply::ok()))
            .collect(),
        Err(error) => {
            let reply = keyspace_error(error);
            vec![reply; requests.len()]
        }
    }
}
