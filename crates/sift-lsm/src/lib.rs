//! `sift-lsm`: the LSM-tree key-value engine under Sift.
//!
//! One database holds several named trees (like column families) that share one write-ahead
//! log, so a `WriteBatch` across trees is atomic. Every write gets a global sequence number,
//! returned to the caller and stored with the value. The engine knows nothing about secondary
//! indexes; `extension` lists the hooks the index layer plugs into. `ARCHITECTURE.md` at the
//! repository root says which module owns what.

#![deny(clippy::unwrap_used, clippy::expect_used)]
#![deny(missing_docs)]

mod coding;
mod compaction;
mod cpu_affinity;
mod db;
mod edit_apply;
mod error;
pub mod extension;
pub mod fs;
mod hooks;
mod iter;
mod iterator;
mod key;
mod memtable;
mod options;
mod pacing;
mod snapshot;
mod sstable;
mod stats;
mod version;
mod wal;
mod write_batch;

pub use cpu_affinity::{pin_current_thread_to_cpus, process_allowed_cpus};
pub use db::lower_current_thread_priority;
pub use db::{
    BackgroundThreadRegistration, ComponentId, Db, Entry, NewerVersion, Tree, UnloggedInsert,
    UnloggedRefusal, DEFAULT_TREE,
};
pub use error::{Error, Result};
pub use iter::DbIterator;
pub use key::{SeqNo, TreeId, ValueKind};
pub use options::{Compression, Options, ReadOptions, TreeOptions, WalRecovery, WriteOptions};
pub use snapshot::{Snapshot, VersionRetention};
pub use stats::{ReadStats, Stats};
/// The log reader, for tests that damage a log at its record boundaries.
#[doc(hidden)]
pub use wal::LogReader;
pub use write_batch::WriteBatch;
