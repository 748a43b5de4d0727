//! What the commands share (the keyspace, settings, counters) and what each connection
//! keeps (its id, name, protocol, authentication).

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use sift_resp::Protocol;

use crate::config::ServerConfig;
use crate::keyspace::Keyspace;
use crate::search::SearchIndexes;

/// Counters for INFO's `stats` and `clients` sections.
#[derive(Debug, Default)]
pub struct ServerStats {
    pub connected_clients: AtomicU64,
    pub total_connections_received: AtomicU64,
    pub rejected_connections: AtomicU64,
    pub total_commands_processed: AtomicU64,
    pub total_error_replies: AtomicU64,
    pub protocol_errors: AtomicU64,
    pub total_net_input_bytes: AtomicU64,
    pub total_net_output_bytes: AtomicU64,
    pub idle_disconnects: AtomicU64,
    pub reply_stall_disconnects: AtomicU64,
    pub fsync_errors: AtomicU64,
}

impl ServerStats {
    pub fn add(counter: &AtomicU64, amount: u64) {
        counter.fetch_add(amount, Ordering::Relaxed);
    }

    pub fn get(counter: &AtomicU64) -> u64 {
        counter.load(Ordering::Relaxed)
    }
}

/// What every connection's commands share.
#[derive(Debug)]
pub struct Shared {
    /// Shared with the search indexes' build threads.
    pub keyspace: Arc<Keyspace>,
    pub search: SearchIndexes,
    pub config: ServerConfig,
    pub stats: ServerStats,
    pub started: Instant,
    /// The port actually bound (differs from the configured one when that was 0).
    pub port: u16,
    /// Every command holds the shared side while it runs; EXEC holds the exclusive side, so no
    /// command of another client runs inside a transaction.
    pub transactions: parking_lot::RwLock<()>,
    next_client_id: AtomicU64,
}

impl Shared {
    pub fn new(
        keyspace: Arc<Keyspace>,
        search: SearchIndexes,
        config: ServerConfig,
        port: u16,
    ) -> Shared {
        Shared {
            keyspace,
            search,
            config,
            stats: ServerStats::default(),
            started: Instant::now(),
            port,
            transactions: parking_lot::RwLock::new(()),
            next_client_id: AtomicU64::new(1),
        }
    }

    pub fn new_client_id(&self) -> u64 {
        self.next_client_id.fetch_add(1, Ordering::Relaxed)
    }
}

/// One connection's state.
#[derive(Debug)]
pub struct Client {
    pub id: u64,
    pub address: SocketAddr,
    pub name: Option<Bytes>,
    pub library_name: Option<Bytes>,
    pub library_version: Option<Bytes>,
    pub protocol: Protocol,
    pub authenticated: bool,
    /// Set by QUIT: close after this reply.
    pub closing: bool,
    /// Between MULTI and EXEC/DISCARD: the queued commands.
    pub transaction: Option<Transaction>,
}

/// The commands queued by MULTI.
#[derive(Debug, Default)]
pub struct Transaction {
    /// In order, each with its name first.
    pub commands: Vec<Vec<Bytes>>,
    /// Their total size, bounded by the request limit.
    pub bytes: usize,
    /// Why EXEC must refuse (a queued command was unknown, had the wrong arity, or the queue
    /// grew too large).
    pub failed: Option<String>,
}

impl Client {
    pub fn new(id: u64, address: SocketAddr) -> Client {
        Client {
            id,
            address,
            name: None,
            library_name: None,
            library_version: None,
            protocol: Protocol::Resp2,
            authenticated: false,
            closing: false,
            transaction: None,
        }
    }

    /// Whether commands other than AUTH, HELLO and QUIT must be refused.
    pub fn needs_auth(&self, shared: &Shared) -> bool {
        shared.config.requirepass.is_some() && !self.authenticated
    }
}
