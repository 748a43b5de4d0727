//! `sift-lsm`: the LSM-tree key-value engine under Sift.
//!
//! One database holds several named trees (like column families) that share one write-ahead
//! log, so a `WriteBatch` across trees is atomic. Every write gets a global sequence number,
//! returned to the caller and stored with the value. The engine knows nothing about secondary
//! indexes; `extension` lists the hooks the index layer plugs into. `ARCHITECTURE.md` at the
//! repository root says which module owns what.
//!
//! # Example
//!
//! ```
//! use sift_lsm::{Db, Options, ReadOptions, TreeOptions, WriteBatch, WriteOptions};
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let dir = tempfile::tempdir()?;
//! let db = Db::open(dir.path(), Options::default())?;
//! let users = db.default_tree();
//! let by_city = db.create_tree("by_city", TreeOptions::default())?;
//!
//! // One batch across two trees: both entries or neither.
//! let mut batch = WriteBatch::new();
//! batch.put(&users, b"u1", br#"{"city": "Lyon"}"#);
//! batch.put(&by_city, b"Lyon/u1", b"");
//! db.write(batch, &WriteOptions { sync: true })?;
//! assert!(db.get(&by_city, b"Lyon/u1")?.is_some());
//!
//! // A snapshot keeps seeing what it saw; a flush moves the memtable to an SSTable.
//! let snapshot = db.snapshot();
//! db.delete(&users, b"u1")?;
//! db.flush()?;
//! assert!(db.get(&users, b"u1")?.is_none());
//! let as_of = ReadOptions { snapshot: Some(snapshot), ..ReadOptions::default() };
//! let keys: Vec<Vec<u8>> = db
//!     .iter(&users, as_of)?
//!     .map(|entry| entry.map(|(key, _value, _seq)| key))
//!     .collect::<Result<_, _>>()?;
//! assert_eq!(keys, [b"u1".to_vec()]);
//! db.close()?;
//! # Ok(())
//! # }
//! ```

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
