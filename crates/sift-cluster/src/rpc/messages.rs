//! What travels between nodes and from clients to nodes: one type per request and reply of
//! the `sift.cluster.Node` service (spec: docs/format/cluster-rpc.md). Raft's own messages are
//! openraft's serde types, wrapped with the region they are for.

use crate::types::{Command, CommandResult, NodeId, RegionId, TypeConfig};
use crate::ReadConsistency;
use openraft::alias::{SnapshotMetaOf, VoteOf};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, SnapshotResponse, VoteRequest, VoteResponse,
};
use serde::{Deserialize, Serialize};

/// Why a node did not carry out a request. Every variant is an answer a client or a peer can
/// act on: go to another node, retry later, or fix the request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
#[non_exhaustive]
pub enum NodeError {
    /// The node holds no replica of this region.
    #[error("node {node} has no replica of region {region}")]
    NoSuchRegion { node: NodeId, region: RegionId },
    /// Only the region's leader serves this; the leader this node knows of, with its address.
    #[error("node {node} does not lead region {region} (leader: {})", describe_leader(*.leader, .leader_address.as_deref()))]
    NotLeader {
        node: NodeId,
        region: RegionId,
        leader: Option<NodeId>,
        leader_address: Option<String>,
    },
    /// The replica cannot serve now (stopping, or its storage failed): try another node.
    #[error("node {node}, region {region}: unavailable: {reason}")]
    Unavailable {
        node: NodeId,
        region: RegionId,
        reason: String,
    },
    /// The request itself is wrong; retrying it will not help.
    #[error("bad request: {0}")]
    BadRequest(String),
}

fn describe_leader(leader: Option<NodeId>, address: Option<&str>) -> String {
    match (leader, address) {
        (Some(leader), Some(address)) => format!("node {leader} at {address}"),
        (Some(leader), None) => format!("node {leader}"),
        _ => "unknown".to_string(),
    }
}

/// Raft append (and heartbeat) for one region.
#[derive(Debug, Serialize, Deserialize)]
pub struct AppendRequest {
    pub region: RegionId,
    pub request: AppendEntriesRequest<TypeConfig>,
}
pub type AppendReply = Result<AppendEntriesResponse<TypeConfig>, NodeError>;

/// Raft vote or pre-vote for one region.
#[derive(Debug, Serialize, Deserialize)]
pub struct VoteCall {
    pub region: RegionId,
    /// A pre-vote asks whether the voter would grant the vote, changing nothing.
    pub pre_vote: bool,
    pub request: VoteRequest<TypeConfig>,
}
pub type VoteReply = Result<VoteResponse<TypeConfig>, NodeError>;

/// What the first chunk of a snapshot stream carries besides data.
#[derive(Debug, Serialize, Deserialize)]
pub struct SnapshotHeader {
    pub region: RegionId,
    /// The sender's vote: a follower refuses a snapshot from a stale leader.
    pub vote: VoteOf<TypeConfig>,
    pub meta: SnapshotMetaOf<TypeConfig>,
    /// Bytes of the whole archive, to check the stream was not cut short.
    pub total_bytes: u64,
}

/// One message of a snapshot stream: the first has the header, every one a slice of the
/// archive, in order.
#[derive(Debug, Serialize, Deserialize)]
pub struct SnapshotChunk {
    pub header: Option<SnapshotHeader>,
    pub data: Vec<u8>,
}
pub type SnapshotReply = Result<SnapshotResponse<TypeConfig>, NodeError>;

/// A client's write to a region; the node must lead it.
#[derive(Debug, Serialize, Deserialize)]
pub struct WriteRequest {
    pub region: RegionId,
    pub command: Command,
}
pub type WriteReply = Result<CommandResult, NodeError>;

/// A client's read of one document.
#[derive(Debug, Serialize, Deserialize)]
pub struct ReadRequest {
    pub region: RegionId,
    pub collection: String,
    pub pk: Vec<u8>,
    pub consistency: ReadConsistency,
}

/// A document as a read returns it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Document {
    pub pk: Vec<u8>,
    /// The JSON text as written.
    pub json: Vec<u8>,
}
pub type ReadReply = Result<Option<Document>, NodeError>;

/// A secondary-index query, its values written as `sift lookup / range / within` take them
/// (parsed on the node with the index's type).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Query {
    /// Documents whose indexed attribute equals `value`.
    Lookup { value: String },
    /// Documents whose indexed attribute is within `[from, to]`.
    Range { from: String, to: String },
    /// Documents whose geo attribute lies in `bbox` (`min_lon,min_lat,max_lon,max_lat`).
    Within { bbox: String },
}

/// A client's query of one index of a collection: the newest `limit` matches.
#[derive(Debug, Serialize, Deserialize)]
pub struct QueryRequest {
    pub region: RegionId,
    pub collection: String,
    pub index: String,
    pub query: Query,
    /// At most [`QUERY_LIMIT_MAX`] (a larger limit is refused).
    pub limit: u32,
    pub consistency: ReadConsistency,
}

/// The most documents one query returns: bounds the answer a node builds for one call.
pub const QUERY_LIMIT_MAX: u32 = 10_000;

/// Matching documents, newest first.
pub type QueryReply = Result<Vec<Document>, NodeError>;

/// A node asks a region's leader to make it a voter (a learner first, caught up, then a
/// voter). Asking again once it is one changes nothing.
#[derive(Debug, Serialize, Deserialize)]
pub struct JoinRequest {
    pub region: RegionId,
    pub node: NodeId,
    pub address: String,
}
pub type JoinReply = Result<(), NodeError>;

#[derive(Debug, Serialize, Deserialize)]
pub struct StatusRequest {}

/// A node's view of itself and of the regions it replicates.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct NodeStatus {
    pub node: NodeId,
    pub address: String,
    pub regions: Vec<RegionStatus>,
}
pub type StatusReply = NodeStatus;

/// One replica as its node sees it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RegionStatus {
    pub region: RegionId,
    /// `leader`, `follower`, `candidate`, `learner` or `shutdown`.
    pub role: String,
    pub term: u64,
    pub leader: Option<NodeId>,
    pub last_log_index: Option<u64>,
    pub applied_index: Option<u64>,
    pub snapshot_index: Option<u64>,
    /// `(node, address, voter)` for every member.
    pub members: Vec<(NodeId, String, bool)>,
    /// On the leader: how far each member's log matches (`None`: not known yet).
    pub matched: Vec<(NodeId, Option<u64>)>,
    /// Bytes of the region's data files on this node.
    pub data_bytes: u64,
}
