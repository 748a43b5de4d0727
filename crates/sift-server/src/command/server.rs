//! COMMAND, INFO, DBSIZE, FLUSHDB, FLUSHALL.

use bytes::Bytes;
use sift_resp::Reply;

use super::{is, keyspace_error, syntax_error, table, truncated, Command};
use crate::session::{Client, Shared};

pub(super) fn commands() -> Vec<Command> {
    vec![
        Command::reads(
            "server",
            "command",
            -1,
            "Details about the commands: COMMAND, COUNT, DOCS, INFO, LIST.",
            command_command,
        ),
        Command::reads(
            "server",
            "info",
            -1,
            "Server, clients, stats, keyspace and Sift engine information.",
            info,
        ),
        Command::reads(
            "server",
            "dbsize",
            1,
            "The number of keys (kept exactly, O(1)).",
            dbsize,
        ),
        Command::writes(
            "server",
            "flushdb",
            -1,
            "Deletes every key (ASYNC and SYNC both run synchronously).",
            flushdb,
        ),
        Command::writes(
            "server",
            "flushall",
            -1,
            "Deletes every key (Sift has one database).",
            flushdb,
        ),
    ]
}

fn dbsize(shared: &Shared, _: &mut Client, _: &[Bytes]) -> Reply {
    Reply::Integer(shared.keyspace.len() as i64)
}

fn flushdb(shared: &Shared, _: &mut Client, arguments: &[Bytes]) -> Reply {
    match &arguments[1..] {
        [] => {}
        [mode] if is(mode, "ASYNC") || is(mode, "SYNC") => {}
        _ => return syntax_error(),
    }
    match shared.keyspace.flush_all() {
        Ok(deleted) => {
            tracing::info!(deleted, "FLUSHDB");
            Reply::ok()
        }
        Err(error) => keyspace_error(error),
    }
}

fn info(shared: &Shared, _: &mut Client, arguments: &[Bytes]) -> Reply {
    let sections: Vec<String> = arguments[1..]
        .iter()
        .map(|section| String::from_utf8_lossy(section).to_lowercase())
        .collect();
    Reply::Verbatim(crate::info::render(shared, &sections))
}

/// Redis's COMMAND reply entry for one command: name, arity, flags, first key, last key,
/// step, ACL categories, tips, key specifications, subcommands.
fn command_info(command: &Command) -> Reply {
    let flag = |name: &str| Reply::Status(name.to_owned());
    let mut flags = vec![flag(if command.write { "write" } else { "readonly" })];
    if command.no_auth {
        flags.push(flag("no_auth"));
    }
    let keyed = matches!(command.group, "string" | "hash" | "generic" | "json");
    let (first, last) = if keyed {
        (1, if command.arity < 0 { -1 } else { 1 })
    } else {
        (0, 0)
    };
    Reply::Array(vec![
        Reply::bulk(command.name),
        Reply::Integer(command.arity),
        Reply::Set(flags),
        Reply::Integer(first),
        Reply::Integer(last),
        Reply::Integer(i64::from(keyed)),
        Reply::Set(vec![Reply::Status(format!("@{}", command.group))]),
        Reply::Array(Vec::new()),
        Reply::Array(Vec::new()),
        Reply::Array(Vec::new()),
    ])
}

fn command_docs(command: &Command) -> Reply {
    let text = |value: &str| Reply::bulk(value.to_owned());
    Reply::Map(vec![
        (text("summary"), text(command.summary)),
        (text("since"), text("1.0.0")),
        (text("group"), text(command.group)),
    ])
}

fn command_command(_: &Shared, _: &mut Client, arguments: &[Bytes]) -> Reply {
    let Some(subcommand) = arguments.get(1) else {
        return Reply::Array(table().iter().map(command_info).collect());
    };
    let named = || {
        arguments[2..]
            .iter()
            .map(|name| (name, super::lookup(name)))
            .collect::<Vec<_>>()
    };
    if is(subcommand, "COUNT") && arguments.len() == 2 {
        Reply::Integer(table().len() as i64)
    } else if is(subcommand, "LIST") && arguments.len() == 2 {
        Reply::Array(
            table()
                .iter()
                .map(|command| Reply::bulk(command.name))
                .collect(),
        )
    } else if is(subcommand, "INFO") {
        if arguments.len() == 2 {
            return Reply::Array(table().iter().map(command_info).collect());
        }
        Reply::Array(
            named()
                .into_iter()
                .map(|(_, command)| command.map_or(Reply::Null, command_info))
                .collect(),
        )
    } else if is(subcommand, "DOCS") {
        let pairs = if arguments.len() == 2 {
            table()
                .iter()
                .map(|command| (Reply::bulk(command.name), command_docs(command)))
                .collect()
        } else {
            named()
                .into_iter()
                .filter_map(|(name, command)| {
                    command.map(|command| (Reply::Bulk(name.clone()), command_docs(command)))
                })
                .collect()
        };
        Reply::Map(pairs)
    } else {
        Reply::error(format!(
            "ERR unknown subcommand or wrong number of arguments for '{}'. Try COMMAND HELP.",
            truncated(subcommand)
        ))
    }
}
