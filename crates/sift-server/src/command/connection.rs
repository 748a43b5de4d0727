//! PING, ECHO, HELLO, AUTH, SELECT, QUIT, CLIENT.

use bytes::Bytes;
use sift_resp::{Protocol, Reply};

use super::{is, parse_integer, syntax_error, truncated, wrong_arity, Command};
use crate::session::{Client, Shared};

pub(super) fn commands() -> Vec<Command> {
    vec![
        Command::reads(
            "connection",
            "ping",
            -1,
            "Returns the server's liveliness response.",
            ping,
        ),
        Command::reads("connection", "echo", 2, "Returns the given string.", echo),
        Command::reads(
            "connection",
            "hello",
            -1,
            "Handshakes with the server: protocol, authentication, name.",
            hello,
        )
        .before_auth(),
        Command::reads(
            "connection",
            "auth",
            -2,
            "Authenticates the connection.",
            auth,
        )
        .before_auth(),
        Command::reads(
            "connection",
            "select",
            2,
            "Changes the selected database (Sift has only database 0).",
            select,
        ),
        Command::reads("connection", "quit", -1, "Closes the connection.", quit).before_auth(),
        Command::reads(
            "connection",
            "client",
            -2,
            "Connection management: ID, SETNAME, GETNAME, SETINFO.",
            client,
        ),
    ]
}

fn ping(_: &Shared, _: &mut Client, arguments: &[Bytes]) -> Reply {
    match arguments {
        [_] => Reply::Status("PONG".to_owned()),
        [_, message] => Reply::Bulk(message.clone()),
        _ => wrong_arity("ping"),
    }
}

fn echo(_: &Shared, _: &mut Client, arguments: &[Bytes]) -> Reply {
    Reply::Bulk(arguments[1].clone())
}

fn quit(_: &Shared, client: &mut Client, _: &[Bytes]) -> Reply {
    client.closing = true;
    Reply::ok()
}

fn select(_: &Shared, _: &mut Client, arguments: &[Bytes]) -> Reply {
    match parse_integer(&arguments[1]) {
        Some(0) => Reply::ok(),
        Some(_) => Reply::error("ERR DB index is out of range"),
        None => super::not_an_integer(),
    }
}

/// Checks a password for `username` (only `default` exists), marking the client
/// authenticated on success.
fn check_password(
    shared: &Shared,
    client: &mut Client,
    username: &[u8],
    password: &[u8],
) -> Option<Reply> {
    let Some(expected) = shared.config.requirepass.as_deref() else {
        return Some(Reply::error(
            "ERR AUTH <password> called without any password configured for the default user. \
             Are you sure your configuration is correct?",
        ));
    };
    // Compared in constant time: the time taken says nothing about how much of it was right.
    let matches = username == b"default" && constant_time_equal(password, expected.as_bytes());
    if !matches {
        tracing::warn!(client = client.id, address = %client.address, "authentication failed");
        return Some(Reply::error(
            "WRONGPASS invalid username-password pair or user is disabled.",
        ));
    }
    client.authenticated = true;
    None
}

fn constant_time_equal(a: &[u8], b: &[u8]) -> bool {
    let mut difference = a.len() ^ b.len();
    for (index, &byte) in a.iter().enumerate() {
        difference |= usize::from(byte ^ b.get(index % b.len().max(1)).copied().unwrap_or(0));
    }
    difference == 0
}

fn auth(shared: &Shared, client: &mut Client, arguments: &[Bytes]) -> Reply {
    let (username, password) = match arguments {
        [_, password] => (&b"default"[..], password),
        [_, username, password] => (username.as_ref(), password),
        _ => return syntax_error(),
    };
    check_password(shared, client, username, password).unwrap_or_else(Reply::ok)
}

fn hello(shared: &Shared, client: &mut Client, arguments: &[Bytes]) -> Reply {
    let mut protocol = client.protocol;
    let mut rest = &arguments[1..];
    if let Some(version) = rest.first() {
        protocol = match parse_integer(version) {
            Some(2) => Protocol::Resp2,
            Some(3) => Protocol::Resp3,
            Some(_) => return Reply::error("NOPROTO unsupported protocol version"),
            None => return Reply::error("ERR Protocol version is not an integer or out of range"),
        };
        rest = &rest[1..];
    }
    let mut name = None;
    while let Some(option) = rest.first() {
        if is(option, "AUTH") && rest.len() >= 3 {
            if let Some(refusal) = check_password(shared, client, &rest[1], &rest[2]) {
                return refusal;
            }
            rest = &rest[3..];
        } else if is(option, "SETNAME") && rest.len() >= 2 {
            name = Some(rest[1].clone());
            rest = &rest[2..];
        } else {
            return Reply::error(format!(
                "ERR Syntax error in HELLO option '{}'",
                truncated(option)
            ));
        }
    }
    if client.needs_auth(shared) {
        return Reply::error(
            "NOAUTH HELLO must be called with the client already authenticated, otherwise the \
             HELLO <proto> AUTH <user> <pass> option can be used to authenticate the client and \
             select the RESP protocol version at the same time",
        );
    }
    if name.is_some() {
        client.name = name;
    }
    // The reply is already in the new protocol, as in Redis.
    client.protocol = protocol;
    let text = |value: &str| Reply::bulk(value.to_owned());
    Reply::Map(vec![
        (text("server"), text("redis")),
        (text("version"), text(crate::info::REDIS_COMPATIBLE_VERSION)),
        (text("proto"), Reply::Integer(protocol.version())),
        (text("id"), Reply::Integer(client.id as i64)),
        (text("mode"), text("standalone")),
        (text("role"), text("master")),
        (text("modules"), Reply::Array(Vec::new())),
        (text("sift_version"), text(env!("CARGO_PKG_VERSION"))),
    ])
}

fn client(_: &Shared, client: &mut Client, arguments: &[Bytes]) -> Reply {
    let subcommand = &arguments[1];
    let arity = |count: usize| arguments.len() == count;
    if is(subcommand, "ID") && arity(2) {
        Reply::Integer(client.id as i64)
    } else if is(subcommand, "GETNAME") && arity(2) {
        client.name.clone().map_or(Reply::Null, Reply::Bulk)
    } else if is(subcommand, "SETNAME") && arity(3) {
        let name = &arguments[2];
        if name.iter().any(|&byte| byte <= b' ' || byte > b'~') {
            return Reply::error(
                "ERR Client names cannot contain spaces, newlines or special characters.",
            );
        }
        client.name = (!name.is_empty()).then(|| name.clone());
        Reply::ok()
    } else if is(subcommand, "SETINFO") && arity(4) {
        let value = arguments[3].clone();
        if is(&arguments[2], "LIB-NAME") {
            client.library_name = Some(value);
        } else if is(&arguments[2], "LIB-VER") {
            client.library_version = Some(value);
        } else {
            return Reply::error(format!(
                "ERR Unrecognized option '{}'",
                truncated(&arguments[2])
            ));
        }
        Reply::ok()
    } else if ["ID", "GETNAME", "SETNAME", "SETINFO"]
        .iter()
        .any(|known| is(subcommand, known))
    {
        Reply::error(format!(
            "ERR wrong number of arguments for 'client|{}' command",
            truncated(subcommand).to_lowercase()
        ))
    } else {
        Reply::error(format!(
            "ERR unknown subcommand '{}'. Try CLIENT HELP.",
            truncated(subcommand)
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::constant_time_equal;

    #[test]
    fn passwords_compare_equal_only_when_equal() {
        assert!(constant_time_equal(b"secret", b"secret"));
        assert!(!constant_time_equal(b"secret", b"secreT"));
        assert!(!constant_time_equal(b"secret", b"secret2"));
        assert!(!constant_time_equal(b"", b"x"));
        assert!(constant_time_equal(b"", b""));
    }
}
