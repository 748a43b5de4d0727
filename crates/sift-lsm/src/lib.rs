//! `sift-lsm`: the LSM-tree key-value engine under Sift.
//!
//! One database holds several named trees (like column families) that share one write-ahead
//! log, so a `WriteBatch` across trees is atomic. Every write gets a global sequence number,
//! returned to the caller and stored with the value. The engine knows nothing about secondary
//! indexes; `extension` lists the hooks the index layer plugs into. `ARCHITECTURE.md` at the
//! repository root says which module owns what.

#![deny(clippy::unwrap_used, clippy::expect_used)]

pub mod coding;
pub mod compaction;
pub mod cpu_affinity;
pub mod db;
mod edit_apply;
mod error;
pub mod extension;
pub mod fs;
pub mod hooks;
pub mod iter;
pub mod iterator;
pub mod key;
pub mod memtable;
pub mod options;
mod pacing;
pub mod snapshot;
pub mod sstable;
pub mod stats;
pub mod version;
pub mod wal;
pub mod write_batch;

pub use cpu_affinity::pin_current_thread_to_cpus;
pub use db::{
    BackgroundThreadRegistration, ComponentId, Db, Entry, NewerVersion, Tree, UnloggedInsert,
    UnloggedRefusal, DEFAULT_TREE,
};
pub use error::{Error, Result};
pub use key::{SeqNo, TreeId, ValueKind};
pub use options::{Compression, Options, ReadOptions, TreeOptions, WalRecovery, WriteOptions};
pub use snapshot::{Snapshot, VersionRetention};
pub use stats::{ReadStats, Stats};
pub use write_batch::WriteBatch;
