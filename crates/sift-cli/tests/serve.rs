//! `sift serve` as a user runs it: protected mode, SIGTERM, `kill -9` under pipelined
//! writes with `--fsync always` (every acknowledged document found through its search index
//! after the restart), `redis-cli` and redis-py against it.
//!
//! `SIFT_SERVE_KILLS` sets the number of kills (default 3). The `redis-cli` test needs Debian's
//! `redis-tools`; without it the test says so and passes, unless `SIFT_REQUIRE_REAL_CLIENTS=1`
//! (set by `.ci/run`, which installs it).

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

mod common;

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::sift;

/// A free loopback port (bound then released: another process could take it first, which
/// the start-up check reports).
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

struct Server {
    child: Child,
    port: u16,
}

impl Server {
    fn start(db: &Path, extra: &[&str]) -> Server {
        let port = free_port();
        let port_text = port.to_string();
        let mut args = vec!["serve", "--db", db.to_str().unwrap(), "--port", &port_text];
        args.extend_from_slice(extra);
        let child = Command::new(env!("CARGO_BIN_EXE_sift"))
            .args(&args)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start sift serve");
        let server = Server { child, port };
        let started = Instant::now();
        while started.elapsed() < Duration::from_mins(1) {
            if let Ok(mut stream) = TcpStream::connect(("127.0.0.1", port)) {
                stream.write_all(b"*1\r\n$4\r\nPING\r\n").unwrap();
                let mut answer = [0u8; 7];
                if stream.read_exact(&mut answer).is_ok() && &answer == b"+PONG\r\n" {
                    return server;
                }
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!("sift serve did not answer PING on port {port} within 60 s");
    }

    fn kill_9(mut self) {
        self.child.kill().unwrap();
        self.child.wait().unwrap();
    }
}

/// Sends pipelined requests and reads their replies.
struct Connection {
    stream: TcpStream,
    reader: BufReader<TcpStream>,
}

impl Connection {
    fn open(port: u16) -> Connection {
        let stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(30)))
            .unwrap();
        let reader = BufReader::new(stream.try_clone().unwrap());
        Connection { stream, reader }
    }

    fn send(&mut self, arguments: &[&[u8]]) -> std::io::Result<()> {
        let mut out = format!("*{}\r\n", arguments.len()).into_bytes();
        for argument in arguments {
            out.extend_from_slice(format!("${}\r\n", argument.len()).as_bytes());
            out.extend_from_slice(argument);
            out.extend_from_slice(b"\r\n");
        }
        self.stream.write_all(&out)
    }

    /// One reply line of a simple reply (`+`, `-`, `:`), or a bulk string's payload.
    fn reply(&mut self) -> std::io::Result<String> {
        let mut line = String::new();
        if self.reader.read_line(&mut line)? == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        let line = line.trim_end().to_owned();
        if let Some(length) = line.strip_prefix('$') {
            let length: i64 = length.parse().unwrap();
            if length < 0 {
                return Ok("(nil)".to_owned());
            }
            let mut payload = vec![0u8; length as usize + 2];
            self.reader.read_exact(&mut payload)?;
            payload.truncate(length as usize);
            return Ok(String::from_utf8(payload).unwrap());
        }
        Ok(line)
    }
}

#[test]
fn serve_refuses_to_listen_beyond_loopback_without_a_password() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let (ok, _, stderr) = sift(&[
        "serve",
        "--db",
        db.to_str().unwrap(),
        "--bind",
        "0.0.0.0",
        "--port",
        "0",
    ]);
    assert!(!ok, "must refuse");
    assert!(
        stderr.contains("--requirepass") && stderr.contains("protected mode"),
        "{stderr}"
    );
    let (ok, _, stderr) = sift(&[
        "serve",
        "--db",
        db.to_str().unwrap(),
        "--fsync",
        "sometimes",
    ]);
    assert!(!ok);
    assert!(stderr.contains("always, everysec, no"), "{stderr}");
}

#[test]
fn serve_stops_cleanly_on_sigterm_and_keeps_its_data() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let mut server = Server::start(&db, &["--fsync", "no"]);
    let mut connection = Connection::open(server.port);
    connection.send(&[b"SET", b"greeting", b"hello"]).unwrap();
    assert_eq!(connection.reply().unwrap(), "+OK");
    let status = send_sigterm(server.child.id());
    assert_eq!(status, 0, "kill -TERM");
    let started = Instant::now();
    let exit = loop {
        if let Some(exit) = server.child.try_wait().unwrap() {
            break exit;
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "no exit 30 s after SIGTERM"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(exit.success(), "exit status after SIGTERM: {exit:?}");
    let mut log = String::new();
    server
        .child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut log)
        .unwrap();
    assert!(log.contains("database closed"), "{log}");
    let server = Server::start(&db, &[]);
    let mut connection = Connection::open(server.port);
    connection.send(&[b"GET", b"greeting"]).unwrap();
    assert_eq!(connection.reply().unwrap(), "hello");
    server.kill_9();
}

/// Sends SIGTERM to the child, as `kill` or a service manager would.
fn send_sigterm(pid: u32) -> i32 {
    let pid = libc::pid_t::try_from(pid).expect("a pid fits pid_t");
    // SAFETY: kill(2) takes two integers and touches no memory of ours; `pid` is our own
    // child, which has not been waited for, so the pid cannot have been reused.
    unsafe { libc::kill(pid, libc::SIGTERM) }
}

/// The request that writes `value` at `key` (its type is in the key's first letter) and the
/// request that reads it back as the same text.
fn write_request(key: &str, value: &str) -> Vec<Vec<u8>> {
    let words: Vec<String> = match &key[..1] {
        "s" => vec!["SET".into(), key.into(), value.into()],
        "h" => vec!["HSET".into(), key.into(), "field".into(), value.into()],
        _ => vec![
            "JSON.SET".into(),
            key.into(),
            "$".into(),
            format!("{{\"v\":\"{value}\"}}"),
        ],
    };
    words.into_iter().map(String::into_bytes).collect()
}

fn read_back(connection: &mut Connection, key: &str) -> String {
    let reply = match &key[..1] {
        "s" => connection
            .send(&[b"GET", key.as_bytes()])
            .and_then(|()| connection.reply()),
        "h" => connection
            .send(&[b"HGET", key.as_bytes(), b"field"])
            .and_then(|()| connection.reply()),
        _ => connection
            .send(&[b"JSON.GET", key.as_bytes(), b"$.v"])
            .and_then(|()| connection.reply()),
    }
    .unwrap();
    // JSON.GET $.v answers ["value"].
    reply
        .trim_start_matches("[\"")
        .trim_end_matches("\"]")
        .to_owned()
}

#[test]
fn kill_9_with_fsync_always_loses_no_acknowledged_write() {
    let kills: usize = std::env::var("SIFT_SERVE_KILLS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(3);
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    // key → its value as of the last check (None: absent).
    let mut expected: BTreeMap<String, Option<String>> = BTreeMap::new();
    let mut counter = 0u64;
    for kill in 0..=kills {
        let server = Server::start(&db, &["--fsync", "always"]);
        let mut check = Connection::open(server.port);
        if kill == 0 {
            // Search indexes over the hashes and the JSON documents: after every kill, each
            // acknowledged document must be found through them.
            for create in [
                &[
                    "FT.CREATE",
                    "kh",
                    "ON",
                    "HASH",
                    "PREFIX",
                    "1",
                    "h",
                    "SCHEMA",
                    "field",
                    "TAG",
                ][..],
                &[
                    "FT.CREATE",
                    "kj",
                    "ON",
                    "JSON",
                    "PREFIX",
                    "1",
                    "j",
                    "SCHEMA",
                    "$.v",
                    "AS",
                    "v",
                    "TAG",
                ],
            ] {
                let arguments: Vec<&[u8]> = create.iter().map(|word| word.as_bytes()).collect();
                check.send(&arguments).unwrap();
                assert_eq!(check.reply().unwrap(), "+OK");
            }
        }
        for (key, value) in &expected {
            let found = read_back(&mut check, key);
            let found = (found != "(nil)").then_some(found);
            assert_eq!(&found, value, "restart {kill}: key {key}");
            if let Some(value) = value {
                assert_indexed(&mut check, key, value, kill);
            }
        }
        if kill == kills {
            server.kill_9();
            break;
        }
        // A pipelining writer until the kill: batches of 20, replies read after each batch.
        let port = server.port;
        let writer = std::thread::spawn(move || {
            let mut connection = Connection::open(port);
            let mut acknowledged: Vec<(String, String)> = Vec::new();
            loop {
                let batch: Vec<(String, String)> = (0..20)
                    .map(|_| {
                        counter += 1;
                        let key = format!(
                            "{}{}",
                            ["s", "h", "j"][(counter % 3) as usize],
                            counter % 300
                        );
                        (key, format!("v{counter}"))
                    })
                    .collect();
                for (key, value) in &batch {
                    let request = write_request(key, value);
                    let arguments: Vec<&[u8]> = request.iter().map(Vec::as_slice).collect();
                    if connection.send(&arguments).is_err() {
                        return (acknowledged, batch, counter);
                    }
                }
                for (index, (key, value)) in batch.iter().enumerate() {
                    match connection.reply() {
                        Ok(reply) if reply == "+OK" || reply.starts_with(':') => {
                            acknowledged.push((key.clone(), value.clone()));
                        }
                        Ok(reply) => panic!("unexpected reply {reply}"),
                        Err(_) => return (acknowledged, batch[index..].to_vec(), counter),
                    }
                }
            }
        });
        std::thread::sleep(Duration::from_millis(300 + 400 * (kill as u64 % 3)));
        server.kill_9();
        let (acknowledged, in_flight, next_counter) = writer.join().unwrap();
        assert!(
            !acknowledged.is_empty(),
            "kill {kill}: no write was acknowledged before the kill"
        );
        counter = next_counter;
        // After the restart each key holds its last acknowledged value, or a value sent after it
        // whose reply the kill cut off (it may have been applied, or not).
        let mut allowed: BTreeMap<String, Vec<Option<String>>> = BTreeMap::new();
        for (key, value) in &expected {
            allowed.entry(key.clone()).or_default().push(value.clone());
        }
        for (key, value) in acknowledged {
            allowed.insert(key, vec![Some(value)]);
        }
        for (key, value) in in_flight {
            allowed
                .entry(key)
                .or_insert_with(|| vec![None])
                .push(Some(value));
        }
        let server = Server::start(&db, &["--fsync", "always"]);
        let mut check = Connection::open(server.port);
        for (key, values) in allowed {
            let found = read_back(&mut check, &key);
            let found = (found != "(nil)").then_some(found);
            assert!(
                values.contains(&found),
                "after kill {kill}: key {key} holds {found:?}, expected one of {values:?}"
            );
            if let Some(value) = &found {
                assert_indexed(&mut check, &key, value, kill);
            }
            expected.insert(key, found);
        }
        server.kill_9();
    }
}

/// A hash (`h…`) or JSON (`j…`) key holding `value` is the one hit of its search index's tag
/// query (every value is written once, so no other key holds it).
fn assert_indexed(connection: &mut Connection, key: &str, value: &str, kill: usize) {
    let (index, query) = match &key[..1] {
        "h" => ("kh", format!("@field:{{{value}}}")),
        "j" => ("kj", format!("@v:{{{value}}}")),
        _ => return,
    };
    connection
        .send(&[
            b"FT.SEARCH",
            index.as_bytes(),
            query.as_bytes(),
            b"NOCONTENT",
        ])
        .unwrap();
    let header = connection.reply().unwrap();
    let total = connection.reply().unwrap();
    let hits: Vec<String> = (0..header.trim_start_matches('*').parse::<usize>().unwrap() - 1)
        .map(|_| connection.reply().unwrap())
        .collect();
    assert_eq!(
        (total.as_str(), hits),
        (":1", vec![key.to_owned()]),
        "after kill {kill}: {key} = {value} through index {index}"
    );
}

/// A real client is missing: a failure under `SIFT_REQUIRE_REAL_CLIENTS=1` (CI installs them),
/// otherwise a visible skip.
fn skip_unless_required(why: &str) {
    let required = std::env::var("SIFT_REQUIRE_REAL_CLIENTS").is_ok_and(|v| v == "1");
    assert!(!required, "{why}");
    eprintln!("SKIPPED: {why}");
}

#[test]
fn redis_cli_talks_to_sift_serve() {
    if Command::new("redis-cli").arg("--version").output().is_err() {
        skip_unless_required("redis-cli is not installed (apt-get install redis-tools)");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(&dir.path().join("db"), &[]);
    let port = server.port.to_string();
    let cli = |args: &[&str]| -> String {
        let out = Command::new("redis-cli")
            .args(["-p", &port])
            .args(args)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "redis-cli {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).trim_end().to_owned()
    };
    assert_eq!(cli(&["PING"]), "PONG");
    assert_eq!(cli(&["SET", "user:1", "Ada"]), "OK");
    assert_eq!(cli(&["GET", "user:1"]), "Ada");
    assert_eq!(cli(&["HSET", "h:1", "name", "Grace", "born", "1906"]), "2");
    assert_eq!(cli(&["HGET", "h:1", "born"]), "1906");
    assert_eq!(cli(&["HGETALL", "h:1"]), "born\n1906\nname\nGrace");
    assert_eq!(
        cli(&[
            "JSON.SET",
            "doc:1",
            "$",
            r#"{"name": "Lin", "langs": ["rust", "c"]}"#
        ]),
        "OK"
    );
    assert_eq!(
        cli(&["JSON.GET", "doc:1"]),
        r#"{"name":"Lin","langs":["rust","c"]}"#
    );
    assert_eq!(cli(&["JSON.GET", "doc:1", "$.langs[1]"]), r#"["c"]"#);
    assert_eq!(cli(&["TYPE", "doc:1"]), "ReJSON-RL");
    assert_eq!(cli(&["DBSIZE"]), "3");
    let mut scanned: Vec<String> = cli(&["--scan", "--pattern", "*:1"])
        .lines()
        .map(str::to_owned)
        .collect();
    scanned.sort();
    assert_eq!(scanned, ["doc:1", "h:1", "user:1"]);
    assert_eq!(cli(&["DEL", "user:1", "nope"]), "1");
    assert_eq!(cli(&["GET", "user:1"]), "");
    assert!(cli(&["INFO", "server"]).contains("redis_version:"));
    assert!(cli(&["HGET", "doc:1", "x"]).contains("WRONGTYPE"));
    // Interactive mode: redis-cli fetches COMMAND DOCS at start, then reads commands.
    let mut interactive = Command::new("redis-cli")
        .args(["-p", &port])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    interactive
        .stdin
        .take()
        .unwrap()
        .write_all(b"ECHO hello\nDBSIZE\n")
        .unwrap();
    let out = interactive.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("hello") && text.contains('2'), "{text}");
    server.kill_9();
}

/// A virtual environment with redis-py in `target/`, made once; `None` if it cannot be made.
/// Made under a process-wide once-lock: two tests creating the same venv at once each saw
/// the other's half-made environment (CI on 84d3bde: `No module named 'redis'`).
fn redis_py_python() -> Option<std::path::PathBuf> {
    static PYTHON: std::sync::OnceLock<Option<std::path::PathBuf>> = std::sync::OnceLock::new();
    PYTHON.get_or_init(make_redis_py_venv).clone()
}

fn make_redis_py_venv() -> Option<std::path::PathBuf> {
    let venv = Path::new(env!("CARGO_TARGET_TMPDIR")).join("redis-py-venv");
    let python = venv.join("bin/python");
    let ready = |python: &Path| {
        Command::new(python)
            .args(["-c", "import redis"])
            .status()
            .is_ok_and(|s| s.success())
    };
    if ready(&python) {
        return Some(python);
    }
    let made = Command::new("python3")
        .args(["-m", "venv"])
        .arg(&venv)
        .status()
        .is_ok_and(|s| s.success());
    let installed = made
        && Command::new(venv.join("bin/pip"))
            .args(["install", "--quiet", "redis>=5"])
            .status()
            .is_ok_and(|s| s.success());
    (installed && ready(&python)).then_some(python)
}

/// Runs `tests/redis_py/<script>` with seeds 1 and 2, each against a fresh server, with the
/// operation count from `operations_variable` (else `default_operations`).
fn run_redis_py_script(script: &str, operations_variable: &str, default_operations: &str) {
    let Some(python) = redis_py_python() else {
        skip_unless_required(
            "redis-py could not be installed (python3 -m venv, pip install redis)",
        );
        return;
    };
    let operations =
        std::env::var(operations_variable).unwrap_or_else(|_| default_operations.to_owned());
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/redis_py")
        .join(script);
    for seed in ["1", "2"] {
        let dir = tempfile::tempdir().unwrap();
        let server = Server::start(&dir.path().join("db"), &[]);
        let out = Command::new(&python)
            .arg(&path)
            .args([&server.port.to_string(), seed, &operations])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "redis-py {script}, seed {seed}:\n{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        server.kill_9();
    }
}

#[test]
fn redis_py_helpers_agree_with_a_model() {
    run_redis_py_script("model.py", "SIFT_SERVER_MODEL_OPERATIONS", "2000");
}

#[test]
fn redis_py_search_helpers_agree_with_a_model() {
    run_redis_py_script("search.py", "SIFT_SEARCH_MODEL_OPERATIONS", "600");
}
