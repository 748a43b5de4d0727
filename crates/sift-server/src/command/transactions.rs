//! MULTI, EXEC, DISCARD (what redis-py's default `pipeline()` sends), and WATCH refused.
//! Between MULTI and EXEC a client's commands are queued, checked for name and arity only;
//! EXEC runs them in order while no other client's command runs (every other command holds
//! the shared side of `Shared::transactions`, EXEC the exclusive side), as Redis does. There is
//! no rollback: a command that fails inside EXEC leaves the others' effects, as in Redis.

use bytes::Bytes;
use sift_resp::Reply;

use super::{lookup, Command};
use crate::session::{Client, Shared, Transaction};

pub(super) fn commands() -> Vec<Command> {
    vec![
        Command::reads(
            "transactions",
            "multi",
            1,
            "Starts a transaction: the next commands are queued until EXEC.",
            multi,
        ),
        Command::reads(
            "transactions",
            "exec",
            1,
            "Runs the queued commands in order, with no other client's command in between.",
            exec,
        ),
        Command::reads(
            "transactions",
            "discard",
            1,
            "Drops the queued commands.",
            discard,
        ),
        Command::reads(
            "transactions",
            "watch",
            -2,
            "Not supported yet (answers an error).",
            watch,
        ),
        Command::reads(
            "transactions",
            "unwatch",
            1,
            "Forgets watched keys (there are none: WATCH is not supported).",
            unwatch,
        ),
    ]
}

/// Commands that run at once inside MULTI instead of being queued.
pub(super) fn runs_inside_multi(name: &str) -> bool {
    matches!(name, "exec" | "discard" | "multi" | "watch" | "quit")
}

fn multi(_: &Shared, client: &mut Client, _: &[Bytes]) -> Reply {
    if client.transaction.is_some() {
        return Reply::error("ERR MULTI calls can not be nested");
    }
    client.transaction = Some(Transaction::default());
    Reply::ok()
}

fn exec(shared: &Shared, client: &mut Client, _: &[Bytes]) -> Reply {
    let Some(transaction) = client.transaction.take() else {
        return Reply::error("ERR EXEC without MULTI");
    };
    if let Some(reason) = transaction.failed {
        return Reply::error(format!(
            "EXECABORT Transaction discarded because of previous errors: {reason}"
        ));
    }
    let _exclusive = shared.transactions.write();
    let mut replies = Vec::with_capacity(transaction.commands.len());
    for arguments in &transaction.commands {
        // Checked when queued.
        let reply = match lookup(&arguments[0]) {
            Some(command) => (command.handler)(shared, client, arguments),
            None => super::unknown_command(arguments),
        };
        replies.push(reply);
    }
    Reply::Array(replies)
}

fn discard(_: &Shared, client: &mut Client, _: &[Bytes]) -> Reply {
    if client.transaction.take().is_none() {
        return Reply::error("ERR DISCARD without MULTI");
    }
    Reply::ok()
}

fn watch(_: &Shared, client: &mut Client, _: &[Bytes]) -> Reply {
    if client.transaction.is_some() {
        return Reply::error("ERR WATCH inside MULTI is not allowed");
    }
    Reply::error(
        "ERR Sift does not support WATCH yet (optimistic locking); MULTI/EXEC runs without it",
    )
}

fn unwatch(_: &Shared, _: &mut Client, _: &[Bytes]) -> Reply {
    Reply::ok()
}
