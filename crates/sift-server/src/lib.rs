//! `sift serve`: Sift behind the Redis protocol, so any Redis client reaches it.
//!
//! - `config.rs` — the settings and the protected-mode check; `server.rs` — start, accept,
//!   shut down; `connection.rs` — one client's read/run/reply loop with its memory bounds;
//!   `durability.rs` — the once-a-second log sync.
//! - `command/` — the command table (`mod.rs`) and one file per group: connection, server,
//!   keys, strings, hashes, JSON, search.
//! - `keyspace/` — every key as a document of the collection `redis.keys`
//!   (`docs/format/server-keyspace.md`), key locks, SCAN cursors, glob patterns.
//! - `search/` — RediSearch-style indexes: definitions, the query language, exact execution
//!   over one Sift index per field (`command/search.rs` has the FT.* commands).
//!
//! Requests and replies are `sift-resp`'s; the database is `sift-index`'s public API.

#![forbid(unsafe_code)]

mod command;
mod config;
mod connection;
mod durability;
mod info;
mod json_path;
mod keyspace;
mod search;
mod server;
mod session;

pub use config::{FsyncPolicy, ServerConfig};
pub use server::{run, start, RunningServer, ServerError};
pub use sift_resp::RequestLimits;
