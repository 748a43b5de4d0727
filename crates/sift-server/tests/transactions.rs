//! MULTI / EXEC / DISCARD: queued commands, errors that abort, and isolation from other
//! clients (no other client's command runs inside a transaction).

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

mod common;

use common::{Client, Reply, TestServer};

fn ok() -> Reply {
    Reply::Status("OK".into())
}

fn queued() -> Reply {
    Reply::Status("QUEUED".into())
}

#[test]
fn queued_commands_run_at_exec_and_errors_abort_the_transaction() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path(), |_| {});
    let mut client = server.client();
    assert_eq!(
        client.words("EXEC"),
        Reply::Error("ERR EXEC without MULTI".into())
    );
    assert_eq!(
        client.words("DISCARD"),
        Reply::Error("ERR DISCARD without MULTI".into())
    );
    assert_eq!(client.words("MULTI"), ok());
    assert_eq!(
        client.words("MULTI"),
        Reply::Error("ERR MULTI calls can not be nested".into())
    );
    assert_eq!(client.words("SET a 1"), queued());
    assert_eq!(client.words("HSET h f v"), queued());
    assert_eq!(client.words("GET a"), queued());
    assert_eq!(client.words("GET h"), queued());
    // Nothing has run yet.
    let mut other = server.client();
    assert_eq!(other.words("EXISTS a h"), Reply::Integer(0));
    let Reply::Array(replies) = client.words("EXEC") else {
        panic!("EXEC answers an array")
    };
    assert_eq!(replies[..3], [ok(), Reply::Integer(1), Reply::bulk("1")]);
    assert!(
        replies[3].text().starts_with("WRONGTYPE"),
        "{:?}",
        replies[3]
    );
    assert_eq!(other.words("EXISTS a h"), Reply::Integer(2));

    // An unknown command or a wrong arity while queueing: EXEC runs nothing.
    assert_eq!(client.words("MULTI"), ok());
    assert_eq!(client.words("SET b 1"), queued());
    assert!(matches!(client.words("NOSUCH x"), Reply::Error(_)));
    assert!(matches!(client.words("GET"), Reply::Error(_)));
    let aborted = client.words("EXEC");
    assert!(aborted.text().starts_with("EXECABORT"), "{aborted:?}");
    assert_eq!(client.words("EXISTS b"), Reply::Integer(0));

    // DISCARD drops the queue; WATCH is refused, never silently ignored.
    assert_eq!(client.words("MULTI"), ok());
    assert_eq!(client.words("SET c 1"), queued());
    assert_eq!(client.words("DISCARD"), ok());
    assert_eq!(client.words("EXISTS c"), Reply::Integer(0));
    assert!(client
        .words("WATCH a")
        .text()
        .contains("does not support WATCH"));
    assert_eq!(client.words("UNWATCH"), ok());
    drop((client, other));
    server.stop();
}

#[test]
fn no_other_client_sees_a_transaction_half_done() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path(), |_| {});
    let address = server.address;
    let rounds = 400;
    let writer = std::thread::spawn(move || {
        let mut client = Client::connect(address);
        for round in 0..rounds {
            let value = format!("v{round}");
            let mut pipeline = Client::encode(&[b"MULTI"]);
            pipeline.extend(Client::encode(&[b"SET", b"x", value.as_bytes()]));
            pipeline.extend(Client::encode(&[b"HSET", b"y", b"f", value.as_bytes()]));
            pipeline.extend(Client::encode(&[b"SET", b"z", value.as_bytes()]));
            pipeline.extend(Client::encode(&[b"EXEC"]));
            client.send_raw(&pipeline);
            for _ in 0..4 {
                client.read_reply().expect("a reply");
            }
            let exec = client.read_reply().expect("EXEC's reply");
            assert!(
                matches!(exec, Reply::Array(ref items) if items.len() == 3),
                "{exec:?}"
            );
        }
    });
    let mut reader = server.client();
    let mut checks = 0;
    while !writer.is_finished() || checks == 0 {
        let mut pipeline = Client::encode(&[b"GET", b"x"]);
        pipeline.extend(Client::encode(&[b"HGET", b"y", b"f"]));
        pipeline.extend(Client::encode(&[b"GET", b"z"]));
        reader.send_raw(&pipeline);
        let seen: Vec<Reply> = (0..3)
            .map(|_| reader.read_reply().expect("a reply"))
            .collect();
        // Each read is its own command; between them the writer may commit a whole
        // transaction, so x <= y <= z in write order, and never a later x with an earlier z.
        let round = |reply: &Reply| match reply {
            Reply::Null => -1,
            other => other.text()[1..].parse::<i64>().unwrap(),
        };
        let (x, y, z) = (round(&seen[0]), round(&seen[1]), round(&seen[2]));
        assert!(
            x <= y && y <= z,
            "saw x={x} y={y} z={z}: a transaction was interleaved"
        );
        checks += 1;
    }
    writer.join().unwrap();
    // Inside one transaction the reads see one state.
    let mut pipeline = Client::encode(&[b"MULTI"]);
    pipeline.extend(Client::encode(&[b"GET", b"x"]));
    pipeline.extend(Client::encode(&[b"GET", b"z"]));
    pipeline.extend(Client::encode(&[b"EXEC"]));
    reader.send_raw(&pipeline);
    for _ in 0..3 {
        reader.read_reply();
    }
    let last = format!("v{}", rounds - 1);
    assert_eq!(
        reader.read_reply(),
        Some(Reply::Array(vec![Reply::bulk(&last), Reply::bulk(&last)]))
    );
    drop(reader);
    server.stop();
}
