//! The raft type configuration of a region, and the commands its log carries.

use serde::{Deserialize, Serialize};

/// What a region's log entries ask its state machine to do. Every command is deterministic
/// given the state it applies to, so replicas that apply the same log hold the same data, and
/// applying a prefix of the log again after a crash leaves the same state.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Command {
    /// Creates a collection (nothing happens if it exists with the same primary-key path).
    CreateCollection { name: String, pk_path: String },
    /// Stores a JSON document, replacing the one with its primary key.
    Put {
        collection: String,
        document: Vec<u8>,
    },
    /// Deletes the document with this primary key.
    Delete { collection: String, pk: Vec<u8> },
}

/// Short, for raft's logs: names the collection and the sizes, never the document.
impl std::fmt::Display for Command {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Command::CreateCollection { name, pk_path } => {
                write!(f, "create collection {name:?} (pk {pk_path})")
            }
            Command::Put {
                collection,
                document,
            } => write!(f, "put into {collection:?} ({} bytes)", document.len()),
            Command::Delete { collection, pk } => {
                write!(f, "delete from {collection:?} (pk {} bytes)", pk.len())
            }
        }
    }
}

/// What applying a command gave. Rejections are part of the replicated outcome: every replica
/// rejects the same command the same way (a bad document, a missing collection).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub enum CommandResult {
    /// Membership entries and blank entries.
    #[default]
    Applied,
    /// A document was stored, or deleted, at this sequence number of the replica's engine
    /// (replicas number their versions independently).
    Written { sequence: u64 },
    /// A delete found no document.
    NotFound,
    /// The command was refused; the text says why.
    Rejected { reason: String },
}

openraft::declare_raft_types!(
    /// A region's raft types: node ids are `u64`, nodes are addresses (`BasicNode`).
    pub TypeConfig:
        D = Command,
        R = CommandResult,
);

/// A node's id in the cluster.
pub type NodeId = u64;
/// A region's id: one raft group per region.
pub type RegionId = u64;
/// One replica's raft handle.
pub type Raft = openraft::Raft<TypeConfig, crate::state_machine::StateMachine>;
/// Snapshot bytes as the state machine builds and installs them.
pub type SnapshotData = std::io::Cursor<Vec<u8>>;
