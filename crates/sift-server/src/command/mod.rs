//! The command table and dispatch: name lookup, arity, authentication, then the handler.
//! One file per command group, like Redis's `t_string.c`, `t_hash.c`, ….

mod connection;
mod hashes;
mod json;
mod keys;
mod search;
mod server;
mod strings;
mod transactions;

pub(crate) use strings::{is_plain_set, set_many};

use bytes::Bytes;
use sift_resp::Reply;

use sift_index::IndexError;

use crate::keyspace::KeyspaceError;
use crate::session::{Client, Shared};

/// A command's implementation: the arguments include the command name at index 0.
pub(crate) type Handler = fn(&Shared, &mut Client, &[Bytes]) -> Reply;

/// One command of the table.
pub(crate) struct Command {
    /// Lowercase, as `COMMAND` lists it.
    pub name: &'static str,
    /// Redis's convention: `n` exactly n arguments with the name, `-n` at least n.
    pub arity: i64,
    /// Changes data.
    pub write: bool,
    /// Allowed before authentication.
    pub no_auth: bool,
    /// Redis's command group (`COMMAND DOCS`).
    pub group: &'static str,
    /// One line for `COMMAND DOCS`.
    pub summary: &'static str,
    pub handler: Handler,
}

impl Command {
    /// A command that only reads.
    pub(crate) fn reads(
        group: &'static str,
        name: &'static str,
        arity: i64,
        summary: &'static str,
        handler: Handler,
    ) -> Command {
        Command {
            name,
            arity,
            write: false,
            no_auth: false,
            group,
            summary,
            handler,
        }
    }

    /// A command that changes data.
    pub(crate) fn writes(
        group: &'static str,
        name: &'static str,
        arity: i64,
        summary: &'static str,
        handler: Handler,
    ) -> Command {
        Command {
            write: true,
            ..Command::reads(group, name, arity, summary, handler)
        }
    }

    /// Allowed before the client authenticates.
    pub(crate) fn before_auth(self) -> Command {
        Command {
            no_auth: true,
            ..self
        }
    }
}

/// Every command Sift serves, by group.
pub(crate) fn table() -> &'static [Command] {
    static TABLE: std::sync::OnceLock<Vec<Command>> = std::sync::OnceLock::new();
    TABLE.get_or_init(|| {
        let mut table = Vec::new();
        table.extend(connection::commands());
        table.extend(server::commands());
        table.extend(keys::commands());
        table.extend(strings::commands());
        table.extend(hashes::commands());
        table.extend(json::commands());
        table.extend(search::commands());
        table.extend(transactions::commands());
        table
    })
}

/// The command named `name` (any case).
pub(crate) fn lookup(name: &[u8]) -> Option<&'static Command> {
    table()
        .iter()
        .find(|command| name.eq_ignore_ascii_case(command.name.as_bytes()))
}

/// Runs one request and returns its reply.
pub(crate) fn execute(shared: &Shared, client: &mut Client, arguments: &[Bytes]) -> Reply {
    let name = &arguments[0];
    let command = lookup(name);
    let needs_auth = client.needs_auth(shared);
    if needs_auth && !command.is_some_and(|command| command.no_auth) {
        return Reply::error("NOAUTH Authentication required.");
    }
    let Some(command) = command else {
        return refused_in_transaction(client, unknown_command(arguments));
    };
    let count = arguments.len() as i64;
    if (command.arity > 0 && count != command.arity)
        || (command.arity < 0 && count < -command.arity)
    {
        return refused_in_transaction(client, wrong_arity(command.name));
    }
    if let Some(transaction) = &mut client.transaction {
        if !transactions::runs_inside_multi(command.name) {
            let bytes: usize = arguments.iter().map(|argument| argument.len() + 16).sum();
            transaction.bytes = transaction.bytes.saturating_add(bytes);
            if transaction.bytes > shared.config.request_limits.request_bytes_max {
                let reply = Reply::error(format!(
                    "ERR the transaction holds more than {} bytes of queued commands",
                    shared.config.request_limits.request_bytes_max
                ));
                return refused_in_transaction(client, reply);
            }
            transaction.commands.push(arguments.to_vec());
            return Reply::Status("QUEUED".to_owned());
        }
    }
    if command.name == "exec" {
        // Takes the exclusive side itself.
        return (command.handler)(shared, client, arguments);
    }
    let _shared_side = shared.transactions.read();
    (command.handler)(shared, client, arguments)
}

/// An error for a command given inside MULTI also dooms the transaction (EXECABORT).
fn refused_in_transaction(client: &mut Client, reply: Reply) -> Reply {
    if let (Some(transaction), Reply::Error(text)) = (&mut client.transaction, &reply) {
        transaction.failed.get_or_insert_with(|| text.clone());
    }
    reply
}

fn unknown_command(arguments: &[Bytes]) -> Reply {
    let mut quoted = String::new();
    for argument in arguments[1..].iter().take(16) {
        quoted.push('\'');
        quoted.push_str(&truncated(argument));
        quoted.push_str("' ");
    }
    Reply::error(format!(
        "ERR unknown command '{}', with args beginning with: {quoted}",
        truncated(&arguments[0])
    ))
}

/// At most 128 bytes of an argument, as text, for an error message.
pub(crate) fn truncated(argument: &[u8]) -> String {
    String::from_utf8_lossy(&argument[..argument.len().min(128)]).into_owned()
}

pub(crate) fn wrong_arity(name: &str) -> Reply {
    Reply::error(format!(
        "ERR wrong number of arguments for '{name}' command"
    ))
}

pub(crate) fn syntax_error() -> Reply {
    Reply::error("ERR syntax error")
}

pub(crate) fn not_an_integer() -> Reply {
    Reply::error("ERR value is not an integer or out of range")
}

/// An integer argument as Redis parses one.
pub(crate) fn parse_integer(argument: &[u8]) -> Option<i64> {
    let text = std::str::from_utf8(argument).ok()?;
    if text.starts_with('+') || (text.len() > 1 && text.starts_with('0')) || text.starts_with("-0")
    {
        return None;
    }
    text.parse().ok()
}

/// Whether `argument` is `word`, ignoring case.
pub(crate) fn is(argument: &[u8], word: &str) -> bool {
    argument.eq_ignore_ascii_case(word.as_bytes())
}

/// The reply for a keyspace error. Storage failures are logged: the client gets their
/// message, never a panic or a dropped connection.
pub(crate) fn keyspace_error(error: KeyspaceError) -> Reply {
    match error {
        KeyspaceError::WrongType => Reply::error(error.to_string()),
        KeyspaceError::Database(
            rejected @ (IndexError::InvalidValue { .. }
            | IndexError::WrongType { .. }
            | IndexError::NotANumber { .. }
            | IndexError::StringTooLong { .. }
            | IndexError::InvalidGeo { .. }),
        ) => Reply::error(format!(
            "ERR a search index covering this key refused the value, and nothing was stored \
             (Sift indexes every covered field or refuses the write): {rejected}"
        )),
        KeyspaceError::Database(database) => {
            tracing::error!(error = %database, "storage error");
            Reply::error(format!("ERR storage error: {database}"))
        }
        other => Reply::error(format!("ERR {other}")),
    }
}

/// `Result<Reply, KeyspaceError>` → the reply either way.
pub(crate) fn reply_of(result: Result<Reply, KeyspaceError>) -> Reply {
    result.unwrap_or_else(keyspace_error)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_command_is_found_in_any_case_and_names_are_unique() {
        let names: Vec<&str> = table().iter().map(|command| command.name).collect();
        let mut unique = names.clone();
        unique.sort_unstable();
        unique.dedup();
        assert_eq!(unique.len(), names.len(), "duplicate command names");
        for name in names {
            assert!(lookup(name.to_uppercase().as_bytes()).is_some(), "{name}");
            assert_eq!(name, name.to_lowercase(), "names are lowercase");
        }
    }

    #[test]
    fn integers_parse_as_redis_parses_them() {
        assert_eq!(parse_integer(b"42"), Some(42));
        assert_eq!(parse_integer(b"-7"), Some(-7));
        assert_eq!(parse_integer(b"0"), Some(0));
        for bad in [
            &b"+1"[..],
            b"01",
            b"-0",
            b"1.0",
            b" 1",
            b"",
            b"99999999999999999999",
        ] {
            assert_eq!(parse_integer(bad), None, "{}", String::from_utf8_lossy(bad));
        }
    }
}
