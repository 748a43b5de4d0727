//! A server in the test process and a blocking RESP client for it.

#![allow(dead_code, clippy::expect_used, clippy::unwrap_used, clippy::panic)]

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::time::Duration;

use redis_protocol::resp2::decode::decode as decode2;
use redis_protocol::resp2::types::OwnedFrame as Frame2;
use redis_protocol::resp3::decode::complete::decode as decode3;
use redis_protocol::resp3::types::OwnedFrame as Frame3;
use sift_server::{RunningServer, ServerConfig};

/// A server running on its own tokio runtime.
pub struct TestServer {
    pub address: SocketAddr,
    runtime: Option<tokio::runtime::Runtime>,
    server: Option<RunningServer>,
}

impl TestServer {
    /// Starts a server on a free loopback port over `dir`, with `adjust` applied to the
    /// default settings.
    pub fn start(dir: &Path, adjust: impl FnOnce(&mut ServerConfig)) -> TestServer {
        let mut config = ServerConfig::new(dir);
        config.port = 0;
        config.worker_threads = 2;
        adjust(&mut config);
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(config.worker_threads)
            .enable_all()
            .build()
            .expect("runtime");
        let server = runtime
            .block_on(sift_server::start(config))
            .expect("server starts");
        TestServer {
            address: server.address(),
            runtime: Some(runtime),
            server: Some(server),
        }
    }

    /// A connected client.
    pub fn client(&self) -> Client {
        Client::connect(self.address)
    }

    /// Stops the server cleanly (the database is closed when this returns).
    pub fn stop(mut self) {
        self.stop_inner();
    }

    fn stop_inner(&mut self) {
        if let (Some(runtime), Some(server)) = (self.runtime.take(), self.server.take()) {
            server.shutdown();
            runtime.block_on(server.wait()).expect("clean shutdown");
        }
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            self.stop_inner();
        }
    }
}

/// A reply, whichever protocol it came in.
#[derive(Debug, Clone, PartialEq)]
pub enum Reply {
    Status(String),
    Error(String),
    Integer(i64),
    Bulk(Vec<u8>),
    Null,
    Array(Vec<Reply>),
    Map(Vec<(Reply, Reply)>),
    Double(f64),
    Boolean(bool),
    Verbatim(String),
}

impl Reply {
    pub fn bulk(text: &str) -> Reply {
        Reply::Bulk(text.as_bytes().to_vec())
    }

    pub fn text(&self) -> String {
        match self {
            Reply::Status(text) | Reply::Error(text) | Reply::Verbatim(text) => text.clone(),
            Reply::Bulk(bytes) => String::from_utf8_lossy(bytes).into_owned(),
            other => format!("{other:?}"),
        }
    }
}

fn from2(frame: Frame2) -> Reply {
    match frame {
        Frame2::SimpleString(bytes) => Reply::Status(String::from_utf8(bytes).unwrap()),
        Frame2::Error(text) => Reply::Error(text),
        Frame2::Integer(value) => Reply::Integer(value),
        Frame2::BulkString(bytes) => Reply::Bulk(bytes),
        Frame2::Array(items) => Reply::Array(items.into_iter().map(from2).collect()),
        Frame2::Null => Reply::Null,
    }
}

fn from3(frame: Frame3) -> Reply {
    match frame {
        Frame3::SimpleString { data, .. } => Reply::Status(String::from_utf8(data).unwrap()),
        Frame3::SimpleError { data, .. } => Reply::Error(data),
        Frame3::Number { data, .. } => Reply::Integer(data),
        Frame3::BlobString { data, .. } => Reply::Bulk(data),
        Frame3::Null => Reply::Null,
        Frame3::Array { data, .. } => Reply::Array(data.into_iter().map(from3).collect()),
        Frame3::Set { data, .. } => Reply::Array(data.into_iter().map(from3).collect()),
        Frame3::Map { data, .. } => {
            // redis-protocol's decoder does not keep the wire order of a map; a map is
            // unordered anyway, so the tests compare maps sorted by key.
            let mut pairs: Vec<(Reply, Reply)> = data
                .into_iter()
                .map(|(k, v)| (from3(k), from3(v)))
                .collect();
            pairs.sort_by_key(|(key, _)| format!("{key:?}"));
            Reply::Map(pairs)
        }
        Frame3::Double { data, .. } => Reply::Double(data),
        Frame3::Boolean { data, .. } => Reply::Boolean(data),
        Frame3::VerbatimString { data, .. } => Reply::Verbatim(String::from_utf8(data).unwrap()),
        other => panic!("unexpected frame {other:?}"),
    }
}

/// A blocking client speaking RESP2 (or RESP3 after `HELLO 3`).
pub struct Client {
    pub stream: TcpStream,
    buffer: Vec<u8>,
    pub resp3: bool,
}

impl Client {
    pub fn connect(address: SocketAddr) -> Client {
        let stream = TcpStream::connect(address).expect("connect");
        stream
            .set_read_timeout(Some(Duration::from_secs(30)))
            .unwrap();
        stream.set_nodelay(true).unwrap();
        Client {
            stream,
            buffer: Vec::new(),
            resp3: false,
        }
    }

    /// The request's bytes as a client library sends them.
    pub fn encode(arguments: &[&[u8]]) -> Vec<u8> {
        let mut out = format!("*{}\r\n", arguments.len()).into_bytes();
        for argument in arguments {
            out.extend_from_slice(format!("${}\r\n", argument.len()).as_bytes());
            out.extend_from_slice(argument);
            out.extend_from_slice(b"\r\n");
        }
        out
    }

    pub fn send_raw(&mut self, bytes: &[u8]) {
        self.stream.write_all(bytes).expect("send");
    }

    /// The next reply, or `None` if the server closed the connection.
    pub fn read_reply(&mut self) -> Option<Reply> {
        loop {
            if !self.buffer.is_empty() {
                let decoded = if self.resp3 {
                    decode3(&self.buffer)
                        .expect("a valid reply")
                        .map(|(frame, used)| (from3(frame), used))
                } else {
                    decode2(&self.buffer)
                        .expect("a valid reply")
                        .map(|(frame, used)| (from2(frame), used))
                };
                if let Some((reply, used)) = decoded {
                    self.buffer.drain(..used);
                    return Some(reply);
                }
            }
            let mut chunk = [0u8; 16 * 1024];
            match self.stream.read(&mut chunk) {
                Ok(0) | Err(_) => return None,
                Ok(read) => self.buffer.extend_from_slice(&chunk[..read]),
            }
        }
    }

    pub fn command(&mut self, arguments: &[&[u8]]) -> Reply {
        self.send_raw(&Self::encode(arguments));
        self.read_reply().expect("a reply")
    }

    /// A command given as words.
    pub fn words(&mut self, line: &str) -> Reply {
        let words: Vec<&[u8]> = line.split(' ').map(str::as_bytes).collect();
        self.command(&words)
    }
}
