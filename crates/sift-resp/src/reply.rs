//! Replies, written in RESP2 or RESP3 by `redis-protocol`'s encoders.

use bytes::{Bytes, BytesMut};
use redis_protocol::bytes_utils::Str;
use redis_protocol::resp2::types::BytesFrame as Frame2;
use redis_protocol::resp3::types::{
    BytesFrame as Frame3, FrameMap, FrameSet, VerbatimStringFormat,
};

/// The protocol a connection speaks: RESP2 until the client switches with `HELLO 3`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Protocol {
    /// Redis 2 to 5's protocol, every client's default.
    #[default]
    Resp2,
    /// Redis 6's protocol, with maps, sets, doubles, booleans and one null.
    Resp3,
}

impl Protocol {
    /// 2 or 3, as `HELLO` reports it.
    pub fn version(self) -> i64 {
        match self {
            Protocol::Resp2 => 2,
            Protocol::Resp3 => 3,
        }
    }
}

/// What a command answers.
#[derive(Debug, Clone, PartialEq)]
pub enum Reply {
    /// `+OK`-style status text (no CR or LF in it).
    Status(String),
    /// An error: the text starts with its code (`ERR`, `WRONGTYPE`, `NOAUTH`, …).
    Error(String),
    /// A signed integer.
    Integer(i64),
    /// A binary-safe string.
    Bulk(Bytes),
    /// The null string (`$-1` in RESP2), e.g. `GET` of a missing key.
    Null,
    /// An array.
    Array(Vec<Reply>),
    /// A map (RESP2: an array of key, value, key, value, …). Keys keep their order.
    Map(Vec<(Reply, Reply)>),
    /// A set (RESP2: an array).
    Set(Vec<Reply>),
    /// A double (RESP2: its shortest decimal text as a bulk string).
    Double(f64),
    /// A boolean (RESP2: the integer 1 or 0).
    Boolean(bool),
    /// Text to show as is, like `INFO`'s (RESP2: a bulk string).
    Verbatim(String),
}

impl Reply {
    /// `+OK`.
    pub fn ok() -> Reply {
        Reply::Status("OK".to_owned())
    }

    /// An error reply with the text as given (it must start with an error code).
    pub fn error(text: impl Into<String>) -> Reply {
        Reply::Error(text.into())
    }

    /// A bulk string of `bytes`.
    pub fn bulk(bytes: impl Into<Bytes>) -> Reply {
        Reply::Bulk(bytes.into())
    }

    /// Whether this is an error reply.
    pub fn is_error(&self) -> bool {
        matches!(self, Reply::Error(_))
    }
}

/// Appends `reply` to `out` in `protocol`.
pub fn encode_reply(reply: &Reply, protocol: Protocol, out: &mut BytesMut) {
    // The encoders fail only on frames a server never builds (streamed or `HELLO` frames).
    let written = match protocol {
        Protocol::Resp2 => {
            redis_protocol::resp2::encode::extend_encode(out, &frame2(reply), false).is_ok()
        }
        Protocol::Resp3 => {
            redis_protocol::resp3::encode::complete::extend_encode(out, &frame3(reply), false)
                .is_ok()
        }
    };
    debug_assert!(written, "a reply frame could not be encoded: {reply:?}");
}

/// Error text on one line: a CR or LF inside would end the frame early.
fn one_line(text: &str) -> String {
    text.replace(['\r', '\n'], " ")
}

fn frame2(reply: &Reply) -> Frame2 {
    match reply {
        Reply::Status(text) => Frame2::SimpleString(Bytes::from(one_line(text))),
        Reply::Error(text) => Frame2::Error(Str::from(one_line(text))),
        Reply::Integer(value) => Frame2::Integer(*value),
        Reply::Bulk(bytes) => Frame2::BulkString(bytes.clone()),
        Reply::Null => Frame2::Null,
        Reply::Array(items) | Reply::Set(items) => {
            Frame2::Array(items.iter().map(frame2).collect())
        }
        Reply::Map(pairs) => Frame2::Array(
            pairs
                .iter()
                .flat_map(|(key, value)| [frame2(key), frame2(value)])
                .collect(),
        ),
        Reply::Double(value) => Frame2::BulkString(Bytes::from(format_double(*value))),
        Reply::Boolean(value) => Frame2::Integer(i64::from(*value)),
        Reply::Verbatim(text) => Frame2::BulkString(Bytes::from(text.clone())),
    }
}

fn frame3(reply: &Reply) -> Frame3 {
    match reply {
        Reply::Status(text) => Frame3::SimpleString {
            data: Bytes::from(one_line(text)),
            attributes: None,
        },
        Reply::Error(text) => Frame3::SimpleError {
            data: Str::from(one_line(text)),
            attributes: None,
        },
        Reply::Integer(value) => Frame3::Number {
            data: *value,
            attributes: None,
        },
        Reply::Bulk(bytes) => Frame3::BlobString {
            data: bytes.clone(),
            attributes: None,
        },
        Reply::Null => Frame3::Null,
        Reply::Array(items) => Frame3::Array {
            data: items.iter().map(frame3).collect(),
            attributes: None,
        },
        Reply::Set(items) => {
            let mut data = FrameSet::default();
            for item in items {
                data.insert(frame3(item));
            }
            Frame3::Set {
                data,
                attributes: None,
            }
        }
        Reply::Map(pairs) => {
            let mut data = FrameMap::default();
            for (key, value) in pairs {
                data.insert(frame3(key), frame3(value));
            }
            Frame3::Map {
                data,
                attributes: None,
            }
        }
        Reply::Double(value) => Frame3::Double {
            data: *value,
            attributes: None,
        },
        Reply::Boolean(value) => Frame3::Boolean {
            data: *value,
            attributes: None,
        },
        Reply::Verbatim(text) => Frame3::VerbatimString {
            data: Bytes::from(text.clone()),
            format: VerbatimStringFormat::Text,
            attributes: None,
        },
    }
}

/// A double as Redis writes it for RESP2: `inf`, `-inf`, or the shortest text that reads
/// back as the same value.
fn format_double(value: f64) -> String {
    if value.is_infinite() {
        if value > 0.0 { "inf" } else { "-inf" }.to_owned()
    } else {
        value.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wire(reply: &Reply, protocol: Protocol) -> String {
        let mut out = BytesMut::new();
        encode_reply(reply, protocol, &mut out);
        String::from_utf8(out.to_vec()).expect("text replies")
    }

    #[test]
    fn resp3_shapes_are_written_as_redis_writes_them_to_resp2_clients() {
        let map = Reply::Map(vec![
            (Reply::bulk("server"), Reply::bulk("sift")),
            (Reply::bulk("proto"), Reply::Integer(2)),
        ]);
        assert_eq!(
            wire(&map, Protocol::Resp2),
            "*4\r\n$6\r\nserver\r\n$4\r\nsift\r\n$5\r\nproto\r\n:2\r\n"
        );
        assert_eq!(
            wire(&map, Protocol::Resp3),
            "%2\r\n$6\r\nserver\r\n$4\r\nsift\r\n$5\r\nproto\r\n:2\r\n"
        );
        assert_eq!(wire(&Reply::Null, Protocol::Resp2), "$-1\r\n");
        assert_eq!(wire(&Reply::Null, Protocol::Resp3), "_\r\n");
        assert_eq!(wire(&Reply::Double(1.5), Protocol::Resp2), "$3\r\n1.5\r\n");
        assert_eq!(wire(&Reply::Double(1.5), Protocol::Resp3), ",1.5\r\n");
        assert_eq!(wire(&Reply::Boolean(true), Protocol::Resp2), ":1\r\n");
        assert_eq!(wire(&Reply::Boolean(false), Protocol::Resp3), "#f\r\n");
    }

    #[test]
    fn error_and_status_text_cannot_break_the_frame() {
        assert_eq!(
            wire(&Reply::error("ERR bad\r\nthing"), Protocol::Resp2),
            "-ERR bad  thing\r\n"
        );
        assert_eq!(wire(&Reply::ok(), Protocol::Resp3), "+OK\r\n");
    }
}
