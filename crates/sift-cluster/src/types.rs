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
    /// Creates a secondary index and back-fills it (nothing happens if an index of that name
    /// exists with the same path, type and kind).
    CreateIndex {
        collection: String,
        definition: IndexDefinition,
    },
    /// Drops a secondary index and its data.
    DropIndex { collection: String, name: String },
    /// Stores JSON documents in order (a later one replaces an earlier one with its primary
    /// key): all at once if every one is valid, else each valid one, the others rejected.
    PutMany {
        collection: String,
        documents: Vec<Vec<u8>>,
    },
}

/// A secondary index as `sift index create` describes it, in the same words (`int`,
/// `composite`, `sync-insert`, ...): parsed when the command is applied, so a bad word is a
/// replicated rejection naming it.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct IndexDefinition {
    pub name: String,
    /// Attribute path (`user.id` or `/user/id`).
    pub path: String,
    /// `int`, `float`, `string`, `time` or `geo`.
    pub attr_type: String,
    /// `composite`, `eager`, `lazy`, `memory`, `embedded`, `sst-local` or `next`.
    pub kind: String,
    /// `sync-full`, `sync-insert`, `deferred`, ... (`None`: the kind's default).
    pub maintenance: Option<String>,
    pub read_repair: bool,
    pub unique: bool,
    /// `sst-local` / `next`: the split δ, as `sift index create --delta` takes it.
    pub split_delta: Option<String>,
    /// `sst-local` / `next`: `memo` or `get-lite`.
    pub validation: Option<String>,
    /// `embedded`: bloom bits per value.
    pub bloom_bits_per_key: Option<u32>,
}

impl IndexDefinition {
    /// The index layer's spec, or what is wrong with the definition.
    pub fn to_spec(&self) -> Result<sift_index::IndexSpec, String> {
        fn parsed<T: std::str::FromStr>(what: &str, text: &str) -> Result<T, String>
        where
            T::Err: std::fmt::Display,
        {
            text.parse::<T>()
                .map_err(|e| format!("index {what} {text:?}: {e}"))
        }
        let mut spec = sift_index::IndexSpec::new(
            &self.name,
            &self.path,
            parsed("type", &self.attr_type)?,
            parsed("kind", &self.kind)?,
        )
        .with_read_repair(self.read_repair)
        .with_unique(self.unique);
        if let Some(maintenance) = &self.maintenance {
            spec = spec.with_maintenance(parsed("maintenance", maintenance)?);
        }
        if let Some(delta) = &self.split_delta {
            spec = spec.with_split_delta(parsed("split delta", delta)?);
        }
        if let Some(validation) = &self.validation {
            spec = spec.with_validation(parsed("validation", validation)?);
        }
        if let Some(bits) = self.bloom_bits_per_key {
            spec = spec.with_bloom_bits_per_key(bits);
        }
        Ok(spec)
    }
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
            Command::CreateIndex {
                collection,
                definition,
            } => write!(f, "create index {:?} on {collection:?}", definition.name),
            Command::DropIndex { collection, name } => {
                write!(f, "drop index {name:?} of {collection:?}")
            }
            Command::PutMany {
                collection,
                documents,
            } => write!(f, "put {} documents into {collection:?}", documents.len()),
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
    /// A `PutMany`: how many documents were stored, and which were refused (their position
    /// in the batch) and why.
    Batch {
        written: u64,
        rejected: Vec<(u32, String)>,
    },
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
/// A snapshot as the state machine builds and installs it: an archive file.
pub type SnapshotData = crate::snapshot_file::SnapshotArchive;
