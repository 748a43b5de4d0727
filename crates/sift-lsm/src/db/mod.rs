//! `Db`: the public engine API.

use crate::key::{SeqNo, TreeId};
use crate::options::{Options, ReadOptions, TreeOptions, WriteOptions};
use crate::snapshot::Snapshot;
use crate::stats::Stats;
use crate::write_batch::WriteBatch;
use crate::Result;
use std::path::Path;
use std::sync::Arc;

/// A handle on a named tree. Cheap to clone. Using it after the tree was dropped gives
/// `Error::TreeNotFound`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Tree {
    id: TreeId,
    name: Arc<str>,
}

impl Tree {
    pub(crate) fn new(id: TreeId, name: Arc<str>) -> Self {
        Tree { id, name }
    }
    pub fn id(&self) -> TreeId {
        self.id
    }
    pub fn name(&self) -> &str {
        &self.name
    }
}

/// The name of the tree every database has.
pub const DEFAULT_TREE: &str = "default";

/// A value and the sequence number of the write that stored it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub value: Vec<u8>,
    pub seq: SeqNo,
}

/// One component of a tree in level-by-level reads, newest first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ComponentId {
    /// The active memtable.
    Memtable,
    /// A frozen memtable waiting for flush; 0 is the newest.
    ImmutableMemtable(usize),
    /// One L0 file (by file number); L0 files come newest first.
    Level0File(u64),
    /// A sorted level, 1 and deeper.
    Level(usize),
}

/// Answer of `newer_version_exists_above`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NewerVersion {
    /// No component above holds the key with a higher sequence number.
    No,
    /// A memtable above holds a newer version (certain).
    Yes,
    /// A table above may hold it (its bloom filter and key range pass); only a data-block read
    /// can tell.
    Maybe,
}

/// The database. `Send + Sync`: share it between threads by reference or `Arc`.
pub struct Db {
    _private: (),
}

impl Db {
    /// Opens (or creates) the database in `path`.
    pub fn open(path: impl AsRef<Path>, options: Options) -> Result<Db> {
        let _ = (path, options);
        todo!("db core")
    }
    /// Waits for background work, flushes nothing, releases the LOCK.
    pub fn close(self) -> Result<()> {
        todo!()
    }
    pub fn default_tree(&self) -> Tree {
        todo!()
    }
    pub fn create_tree(&self, name: &str, options: TreeOptions) -> Result<Tree> {
        let _ = (name, options);
        todo!()
    }
    pub fn tree(&self, name: &str) -> Result<Tree> {
        let _ = name;
        todo!()
    }
    pub fn drop_tree(&self, name: &str) -> Result<()> {
        let _ = name;
        todo!()
    }
    pub fn tree_names(&self) -> Vec<String> {
        todo!()
    }
    /// Returns the sequence number given to the write.
    pub fn put(&self, tree: &Tree, key: &[u8], value: &[u8]) -> Result<SeqNo> {
        let _ = (tree, key, value);
        todo!()
    }
    pub fn delete(&self, tree: &Tree, key: &[u8]) -> Result<SeqNo> {
        let _ = (tree, key);
        todo!()
    }
    pub fn merge(&self, tree: &Tree, key: &[u8], operand: &[u8]) -> Result<SeqNo> {
        let _ = (tree, key, operand);
        todo!()
    }
    /// Applies the batch atomically; returns the sequence number of its first entry (entry `i`
    /// gets `first + i`).
    pub fn write(&self, batch: WriteBatch, options: &WriteOptions) -> Result<SeqNo> {
        let _ = (batch, options);
        todo!()
    }
    pub fn get(&self, tree: &Tree, key: &[u8]) -> Result<Option<Entry>> {
        self.get_with(tree, key, &ReadOptions::default())
    }
    pub fn get_with(&self, tree: &Tree, key: &[u8], options: &ReadOptions) -> Result<Option<Entry>> {
        let _ = (tree, key, options);
        todo!()
    }
    pub fn snapshot(&self) -> Snapshot {
        todo!()
    }
    /// The newest sequence number visible to reads.
    pub fn latest_sequence(&self) -> SeqNo {
        todo!()
    }
    pub fn iter(&self, tree: &Tree, options: ReadOptions) -> Result<crate::iter::DbIterator> {
        let _ = (tree, options);
        todo!()
    }
    /// Freezes the active memtable and waits until everything written before the call is in
    /// SSTables.
    pub fn flush(&self) -> Result<()> {
        todo!()
    }
    /// Compacts every file of `tree` overlapping `[start, end]` down to the bottom level.
    pub fn compact_range(&self, tree: &Tree, start: Option<&[u8]>, end: Option<&[u8]>) -> Result<()> {
        let _ = (tree, start, end);
        todo!()
    }
    /// Blocks until no flush or compaction is pending or running.
    pub fn wait_for_background_work(&self) -> Result<()> {
        todo!()
    }
    pub fn stats(&self) -> Stats {
        todo!()
    }
}
