//! A network peer is bad input too: fuzzed and hostile RESP, clients that never read,
//! too many clients, idle clients, wrong passwords. The server answers or disconnects the
//! offender, keeps serving everyone else, and its memory stays bounded.

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use common::{Client, Reply, TestServer};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// Resident memory of this process (the server runs in it), in bytes.
fn resident_bytes() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").expect("statm");
    let pages: u64 = statm.split_whitespace().nth(1).unwrap().parse().unwrap();
    pages * 4096
}

/// Reads until the server closes the connection (or 10 s pass); returns what was read.
fn read_until_closed(stream: &mut TcpStream) -> Vec<u8> {
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut out = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        match stream.read(&mut chunk) {
            Ok(0) | Err(_) => return out,
            Ok(read) => out.extend_from_slice(&chunk[..read]),
        }
    }
}

fn assert_healthy(server: &TestServer) {
    let mut client = server.client();
    assert_eq!(client.words("PING"), Reply::Status("PONG".into()));
    assert_eq!(client.words("SET health ok"), Reply::Status("OK".into()));
    assert_eq!(client.words("GET health"), Reply::bulk("ok"));
}

#[test]
fn framing_errors_are_answered_then_the_connection_closes() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path(), |config| {
        config.request_limits.bulk_bytes_max = 1 << 20;
    });
    let cases: [(&[u8], &str); 5] = [
        (b"*1\r\n$2000000\r\n", "invalid bulk length"),
        (b"*1\r\n+PING\r\n", "expected '$', got '+'"),
        (b"*x\r\n", "invalid multibulk length"),
        (b"*1\r\n$4\r\nPINGxx", "not terminated by CRLF"),
        (b"ECHO \"unclosed\r\n", "unbalanced quotes"),
    ];
    for (wire, message) in cases {
        let mut stream = TcpStream::connect(server.address).unwrap();
        stream.write_all(wire).unwrap();
        let answer = String::from_utf8_lossy(&read_until_closed(&mut stream)).into_owned();
        assert!(
            answer.starts_with("-ERR Protocol error") && answer.contains(message),
            "{:?} answered {answer:?}",
            String::from_utf8_lossy(wire)
        );
    }
    // A header line that never ends is refused once it passes 64 KiB.
    let mut stream = TcpStream::connect(server.address).unwrap();
    let mut line = b"*1\r\n$".to_vec();
    line.extend(std::iter::repeat_n(b'9', 70 * 1024));
    stream.write_all(&line).unwrap();
    let answer = String::from_utf8_lossy(&read_until_closed(&mut stream)).into_owned();
    assert!(answer.contains("too big bulk count string"), "{answer:?}");
    assert_healthy(&server);
}

#[test]
fn random_and_truncated_frames_never_take_the_server_down() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path(), |config| {
        config.request_limits.bulk_bytes_max = 1 << 20;
    });
    let seed: u64 = std::env::var("SIFT_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(5);
    let mut rng = StdRng::seed_from_u64(seed);
    let valid = Client::encode(&[b"HSET", b"fuzz", b"field", b"value"]);
    for round in 0..300 {
        let mut wire = Vec::new();
        for _ in 0..rng.gen_range(1..4) {
            match rng.gen_range(0..5) {
                0 => wire.extend_from_slice(&valid),
                1 => wire.extend_from_slice(&valid[..rng.gen_range(0..valid.len())]),
                2 => wire.extend((0..rng.gen_range(1..200)).map(|_| rng.gen::<u8>())),
                3 => wire.extend_from_slice(
                    format!("*{}\r\n${}\r\n", rng.gen_range(-3..5), rng.gen::<i64>()).as_bytes(),
                ),
                _ => {
                    let mut mutated = valid.clone();
                    let at = rng.gen_range(0..mutated.len());
                    mutated[at] = rng.gen();
                    wire.extend_from_slice(&mutated);
                }
            }
        }
        let mut stream = TcpStream::connect(server.address).unwrap();
        stream
            .set_write_timeout(Some(Duration::from_secs(5)))
            .unwrap();
        let _ = stream.write_all(&wire);
        if rng.gen_bool(0.5) {
            // Leave it half-sent and go away.
            drop(stream);
        } else {
            let _ = stream.shutdown(std::net::Shutdown::Write);
            let _ = read_until_closed(&mut stream);
        }
        if round % 50 == 0 {
            assert_healthy(&server);
        }
    }
    assert_healthy(&server);
    let mut client = server.client();
    let reply = client.words("TYPE fuzz");
    assert!(
        matches!(reply, Reply::Status(ref t) if t == "hash" || t == "none"),
        "{reply:?}"
    );
}

#[test]
fn claimed_lengths_do_not_allocate_memory_before_the_bytes_arrive() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path(), |_| {});
    let before = resident_bytes();
    // 200 connections each claiming a 500 MiB bulk (under the 512 MiB limit) and a million
    // arguments, sending a few bytes of it, and holding on.
    let mut held = Vec::new();
    for index in 0..200 {
        let mut stream = TcpStream::connect(server.address).unwrap();
        let wire = if index % 2 == 0 {
            format!("*2\r\n$3\r\nSET\r\n${}\r\nabc", 500 << 20)
        } else {
            "*1000000\r\n$3\r\nGET\r\n$1\r\nk\r\n".to_owned()
        };
        stream.write_all(wire.as_bytes()).unwrap();
        held.push(stream);
    }
    std::thread::sleep(Duration::from_millis(500));
    assert_healthy(&server);
    let grown = resident_bytes().saturating_sub(before);
    assert!(
        grown < 64 << 20,
        "200 connections claiming 50 GB in all grew the process by {grown} bytes"
    );
    drop(held);
}

#[test]
fn a_client_that_never_reads_is_not_buffered_for_and_is_disconnected() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path(), |config| {
        config.reply_stall_timeout = Duration::from_secs(2);
    });
    let mut setup = server.client();
    let big = vec![b'x'; 1 << 20];
    assert_eq!(
        setup.command(&[b"SET", b"big", &big]),
        Reply::Status("OK".into())
    );
    let before = resident_bytes();
    // Ask for the 1 MiB value 2,000 times (2 GB of replies) and never read.
    let mut greedy = TcpStream::connect(server.address).unwrap();
    greedy
        .set_write_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let request = Client::encode(&[b"GET", b"big"]);
    let mut sent = 0;
    for _ in 0..2000 {
        if greedy.write_all(&request).is_err() {
            break;
        }
        sent += 1;
    }
    assert!(sent > 0);
    // Others are served meanwhile.
    assert_healthy(&server);
    let grown = resident_bytes().saturating_sub(before);
    assert!(
        grown < 256 << 20,
        "a client that does not read grew the server by {grown} bytes"
    );
    // After the stall timeout the server has let go of it.
    let started = Instant::now();
    let mut info = String::new();
    while started.elapsed() < Duration::from_secs(20) {
        info = setup.words("INFO stats").text();
        if info.contains("sift_reply_stall_disconnects:1") {
            break;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    assert!(info.contains("sift_reply_stall_disconnects:1"), "{info}");
}

#[test]
fn passwords_clients_and_idle_timeouts_are_enforced() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path(), |config| {
        config.requirepass = Some("s3cret".to_owned());
        config.maxclients = 3;
        config.idle_timeout = Some(Duration::from_secs(1));
    });
    let mut client = server.client();
    assert_eq!(
        client.words("GET k"),
        Reply::Error("NOAUTH Authentication required.".into())
    );
    assert_eq!(
        client.words("NOSUCHCOMMAND"),
        Reply::Error("NOAUTH Authentication required.".into())
    );
    assert_eq!(
        client.words("AUTH wrong"),
        Reply::Error("WRONGPASS invalid username-password pair or user is disabled.".into())
    );
    assert_eq!(
        client.words("AUTH default s3cret"),
        Reply::Status("OK".into())
    );
    assert_eq!(client.words("SET k v"), Reply::Status("OK".into()));
    let mut resp3 = server.client();
    resp3.resp3 = true;
    let hello = resp3.words("HELLO 3 AUTH default s3cret SETNAME tester");
    let Reply::Map(fields) = hello else {
        panic!("HELLO 3 answers a map: {hello:?}")
    };
    assert!(fields.contains(&(Reply::bulk("proto"), Reply::Integer(3))));
    assert_eq!(resp3.words("CLIENT GETNAME"), Reply::bulk("tester"));
    assert_eq!(resp3.words("GET k"), Reply::bulk("v"));
    // The third client fits; a fourth is refused.
    let mut third = server.client();
    assert_eq!(third.words("AUTH s3cret"), Reply::Status("OK".into()));
    let mut fourth = TcpStream::connect(server.address).unwrap();
    let answer = String::from_utf8_lossy(&read_until_closed(&mut fourth)).into_owned();
    assert_eq!(answer, "-ERR max number of clients reached\r\n");
    // Idle clients are disconnected after the timeout.
    std::thread::sleep(Duration::from_millis(2500));
    assert_eq!(client.read_reply(), None, "an idle client is disconnected");
    let mut fresh = server.client();
    assert_eq!(fresh.words("AUTH s3cret"), Reply::Status("OK".into()));
    assert!(fresh
        .words("INFO stats")
        .text()
        .contains("sift_idle_disconnects:"));
}

#[test]
fn errors_name_the_problem_and_store_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(dir.path(), |_| {});
    let mut client = server.client();
    let reply = client.words("JSON.SET doc $ {\"a\":");
    assert!(reply.text().starts_with("ERR invalid JSON"), "{reply:?}");
    assert_eq!(client.words("EXISTS doc"), Reply::Integer(0));
    let refusals: [(&[&[u8]], &str); 8] = [
        (&[b"SET", b"\xff", b"v"], "ERR Sift keys must be UTF-8 text"),
        (
            &[b"SET", b"", b"v"],
            "ERR Sift does not store the empty key",
        ),
        (
            &[b"SET", b"k", b"v", b"EX", b"10"],
            "ERR Sift does not support key expiry (EX) yet",
        ),
        (&[b"GET"], "ERR wrong number of arguments for 'get' command"),
        (
            &[b"FROB", b"a", b"b"],
            "ERR unknown command 'FROB', with args beginning with: 'a' 'b' ",
        ),
        (
            &[b"HSET", b"h", b"f"],
            "ERR wrong number of arguments for 'hset' command",
        ),
        (&[b"SELECT", b"1"], "ERR DB index is out of range"),
        (
            &[b"CLIENT", b"NOPE"],
            "ERR unknown subcommand 'NOPE'. Try CLIENT HELP.",
        ),
    ];
    for (request, expected) in refusals {
        assert_eq!(
            client.command(request),
            Reply::Error(expected.to_owned()),
            "{request:?}"
        );
    }
    // An unsupported path is an error whether or not the key exists.
    assert!(client
        .words("JSON.GET missing $..a")
        .text()
        .contains("does not support the JSON path"));
    assert_eq!(
        client.words("JSON.SET d $ {\"a\":1}"),
        Reply::Status("OK".into())
    );
    assert!(client
        .words("JSON.GET d $..a")
        .text()
        .contains("does not support the JSON path '$..a'"));
    assert!(client
        .words("JSON.SET d $.a 2")
        .text()
        .contains("root path"));
    assert_eq!(client.words("DBSIZE"), Reply::Integer(1));
}
