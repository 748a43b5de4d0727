//! HSET, HGET, HMGET, HGETALL, HDEL, HLEN.

use std::collections::BTreeMap;

use bytes::Bytes;
use sift_resp::Reply;

use super::{keyspace_error, reply_of, wrong_arity, Command};
use crate::keyspace::{KeyspaceError, Update, Value};
use crate::session::{Client, Shared};

pub(super) fn commands() -> Vec<Command> {
    vec![
        Command::writes(
            "hash",
            "hset",
            -4,
            "Sets fields of a hash; returns how many were new.",
            hset,
        ),
        Command::reads("hash", "hget", 3, "The value of a hash field.", hget),
        Command::reads("hash", "hmget", -3, "The values of hash fields.", hmget),
        Command::reads(
            "hash",
            "hgetall",
            2,
            "Every field and value of a hash.",
            hgetall,
        ),
        Command::writes(
            "hash",
            "hdel",
            -3,
            "Deletes hash fields; returns how many existed.",
            hdel,
        ),
        Command::reads("hash", "hlen", 2, "The number of fields of a hash.", hlen),
    ]
}

/// The hash at `key` (empty if missing), or WRONGTYPE.
fn read_hash(shared: &Shared, key: &[u8]) -> Result<BTreeMap<Bytes, Bytes>, KeyspaceError> {
    match shared.keyspace.get(key)? {
        Some(Value::Hash(fields)) => Ok(fields),
        Some(_) => Err(KeyspaceError::WrongType),
        None => Ok(BTreeMap::new()),
    }
}

fn hset(shared: &Shared, _: &mut Client, arguments: &[Bytes]) -> Reply {
    if !arguments.len().is_multiple_of(2) {
        return wrong_arity("hset");
    }
    reply_of(shared.keyspace.update(&arguments[1], |current| {
        let mut fields = match current {
            Some(Value::Hash(fields)) => fields,
            Some(_) => return Err(KeyspaceError::WrongType),
            None => BTreeMap::new(),
        };
        let mut added = 0;
        for pair in arguments[2..].chunks(2) {
            if fields.insert(pair[0].clone(), pair[1].clone()).is_none() {
                added += 1;
            }
        }
        Ok((Update::Put(Value::Hash(fields)), Reply::Integer(added)))
    }))
}

fn hget(shared: &Shared, _: &mut Client, arguments: &[Bytes]) -> Reply {
    match read_hash(shared, &arguments[1]) {
        Ok(fields) => fields
            .get(&arguments[2])
            .cloned()
            .map_or(Reply::Null, Reply::Bulk),
        Err(error) => keyspace_error(error),
    }
}

fn hmget(shared: &Shared, _: &mut Client, arguments: &[Bytes]) -> Reply {
    match read_hash(shared, &arguments[1]) {
        Ok(fields) => Reply::Array(
            arguments[2..]
                .iter()
                .map(|field| fields.get(field).cloned().map_or(Reply::Null, Reply::Bulk))
                .collect(),
        ),
        Err(error) => keyspace_error(error),
    }
}

fn hgetall(shared: &Shared, _: &mut Client, arguments: &[Bytes]) -> Reply {
    match read_hash(shared, &arguments[1]) {
        Ok(fields) => Reply::Map(
            fields
                .into_iter()
                .map(|(field, value)| (Reply::Bulk(field), Reply::Bulk(value)))
                .collect(),
        ),
        Err(error) => keyspace_error(error),
    }
}

fn hdel(shared: &Shared, _: &mut Client, arguments: &[Bytes]) -> Reply {
    reply_of(shared.keyspace.update(&arguments[1], |current| {
        let mut fields = match current {
            Some(Value::Hash(fields)) => fields,
            Some(_) => return Err(KeyspaceError::WrongType),
            None => return Ok((Update::Keep, Reply::Integer(0))),
        };
        let removed = arguments[2..]
            .iter()
            .filter(|field| fields.remove(*field).is_some())
            .count();
        let update = if removed == 0 {
            Update::Keep
        } else if fields.is_empty() {
            // Redis deletes a hash with its last field.
            Update::Delete
        } else {
            Update::Put(Value::Hash(fields))
        };
        Ok((update, Reply::Integer(removed as i64)))
    }))
}

fn hlen(shared: &Shared, _: &mut Client, arguments: &[Bytes]) -> Reply {
    match read_hash(shared, &arguments[1]) {
        Ok(fields) => Reply::Integer(fields.len() as i64),
        Err(error) => keyspace_error(error),
    }
}
