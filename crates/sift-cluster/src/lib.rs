//! Sift's replicated regions: each region (a range of a collection's primary keys) is a raft
//! group of replicas on several nodes, run by openraft; Sift writes what the group stores —
//! the log ([`log_store`], in the node's Sift engine) and the state machine
//! ([`state_machine`], a Sift database with the region's collections and co-located indexes).
//!
//! Where this stands (issue 29, cluster part 1): one region, replicated on every node of the
//! cluster, each node its own process ([`node`], `sift node`) serving the `sift.cluster.Node`
//! gRPC service ([`rpc`], [`network::grpc`]) for raft traffic and clients; the routing client
//! ([`client`]) follows the leader and reports writes of unknown outcome instead of replaying
//! them; durable logs, leader failover, restart catch-up from the log or from a streamed
//! checkpoint, linearizable (read index or lease) and local reads; client histories checked
//! for linearizability ([`history`]). [`network::local`] runs replicas in one process with
//! injected faults. Collections' secondary indexes are created through the log and kept by
//! every replica (co-located); queries run on the leader ([`rpc::messages::Query`]). Not
//! yet: range partitioning with splits and the placement group, hybrid-logical-clock
//! timestamps, global indexes.

pub mod client;
pub mod history;
pub mod log_store;
pub mod network;
pub mod node;
pub mod replica;
pub mod rpc;
pub mod snapshot_file;
pub mod state_machine;
pub mod types;

pub use client::{ClientError, ClusterClient};
pub use node::{Node, NodeOptions};
pub use replica::{region_config, tuned_region_config, LogRetention, ReadConsistency, Replica};
pub use types::{Command, CommandResult, IndexDefinition, NodeId, Raft, RegionId, TypeConfig};

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
    /// The node could not start: its directory, its address, or joining the cluster.
    #[error("cannot start the node: {0}")]
    Node(String),
    /// openraft reported an error.
    #[error("raft: {0}")]
    Raft(String),
}
