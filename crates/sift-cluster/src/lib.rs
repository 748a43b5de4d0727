//! Sift's replicated regions: each region (a range of a collection's primary keys) is a raft
//! group of replicas on several nodes, run by openraft; Sift writes what the group stores —
//! the log ([`log_store`], in the node's Sift engine) and the state machine
//! ([`state_machine`], a Sift database with the region's collections and co-located indexes).
//!
//! Where this stands (issue 29, cluster part 1): one region replicated on three replicas in
//! one process ([`network::local`]), with durable logs, leader failover, restart catch-up
//! from the log, snapshots (engine checkpoints, archived whole in memory) for replicas whose
//! entries were purged, and linearizable (read index or lease) and local reads. Not yet: gRPC
//! between processes and streamed snapshots, range partitioning with splits and the placement
//! group, the routing client, hybrid-logical-clock timestamps, and the `sift cluster` commands.

pub mod log_store;
pub mod network;
pub mod replica;
pub mod state_machine;
pub mod types;

pub use replica::{region_config, ReadConsistency, Replica};
pub use types::{Command, CommandResult, NodeId, Raft, RegionId, TypeConfig};

/// What can go wrong running a replica.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The raft configuration was refused.
    #[error("invalid raft configuration: {0}")]
    Config(String),
    /// The log or the applied position could not be read or written.
    #[error("replica storage failed: {0}")]
    Storage(std::io::Error),
    /// The region's database could not be opened.
    #[error("cannot open the region database at {path}: {detail}")]
    Data { path: String, detail: String },
    /// This replica is not the region's leader; `leader` is the one it knows of.
    #[error("not the leader of region {region} (leader: {leader:?})")]
    NotLeader {
        region: RegionId,
        leader: Option<NodeId>,
    },
    /// The replica's database refused a read.
    #[error("read failed: {0}")]
    Read(String),
    /// openraft reported an error.
    #[error("raft: {0}")]
    Raft(String),
}
