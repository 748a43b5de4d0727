//! RESP (the Redis serialization protocol) for `sift serve`: requests in, replies out.
//!
//! - [`RequestDecoder`] turns a client's bytes into [`Request`]s. A request is either a RESP
//!   array of bulk strings (what every client library sends) or an inline command (a line of
//!   words, what `telnet` and `nc` users type). Before a request is handed to the
//!   `redis-protocol` decoder, its headers are checked against [`RequestLimits`]: argument
//!   count, bulk length, header line length, total request size. Nothing is allocated on the
//!   strength of a claimed length; a request only occupies the bytes that actually arrived,
//!   and never more than the limits allow.
//! - [`Reply`] is what a command answers; [`encode_reply`] writes it in the connection's
//!   [`Protocol`] (RESP2 until the client sends `HELLO 3`), through `redis-protocol`'s
//!   encoders. RESP3-only shapes (maps, sets, doubles, booleans, verbatim strings) are
//!   written the way Redis writes them to a RESP2 client.
//!
//! The wire format and the limits are specified in `docs/format/resp.md`.

#![forbid(unsafe_code)]
#![deny(missing_docs)]

mod error;
mod inline;
mod limits;
mod reply;
mod request;

pub use error::ProtocolError;
pub use limits::RequestLimits;
pub use reply::{encode_reply, Protocol, Reply};
pub use request::{Request, RequestDecoder};
