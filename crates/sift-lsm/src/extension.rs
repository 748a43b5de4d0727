//! Extension points: the hooks the secondary-index layer plugs into.
//!
//! The engine knows nothing about secondary indexes. It offers:
//! - block property collectors (`BlockPropertyCollector`): per data block and per table bytes,
//!   plus extra named meta blocks, written into every SSTable of a tree;
//! - block filters (`BlockFilter`): scans skip tables and blocks whose properties do not match;
//! - compaction observers (`CompactionObserver`): see every entry a flush or compaction drops
//!   and may emit writes into other trees, visible atomically with that job's version edit;
//! - merge operators (`MergeOperator`);
//! - version listeners (`VersionListener`): told which files each flush and compaction added
//!   and removed, in order, starting with the files present at open.
//!
//! A trap, explained at length in Pebble's `sstable/block_property.go`: a block skipped because
//! its properties do not match may hold the newest version of a key. A scan that skips it can
//! then surface an older version (or a deleted key) as if it were current. Whoever filters on
//! values must validate what it finds against the newest version (see
//! `Db::newer_version_exists_above`).

use crate::key::{SeqNo, TreeId, ValueKind};
use crate::write_batch::WriteBatch;
use std::sync::Arc;

/// One entry as a collector sees it while a table is built.
#[derive(Debug, Clone, Copy)]
pub struct CollectorEntry<'a> {
    /// The user key.
    pub user_key: &'a [u8],
    /// The entry's sequence number.
    pub seq: SeqNo,
    /// Put, delete or merge.
    pub kind: ValueKind,
    /// The value (empty for a delete).
    pub value: &'a [u8],
    /// Where the entry starts inside its (uncompressed) data block, when the table builder
    /// knows it (`None` for entries fed to a collector from elsewhere): a reader that keeps it
    /// can take the entry out of the block without seeking ([`crate::sstable::Table::mapped_entry_value`]).
    pub block_offset: Option<u32>,
}

/// Why a table is being written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TableReason {
    /// A memtable flush.
    Flush,
    /// A compaction.
    Compaction,
}

/// Where the table being built will live.
#[derive(Debug, Clone)]
pub struct TableContext {
    /// The tree.
    pub tree: TreeId,
    /// The tree's name.
    pub tree_name: Arc<str>,
    /// The level the table is written for.
    pub level: usize,
    /// The table's file number.
    pub file_number: u64,
    /// Why the table is written.
    pub reason: TableReason,
}

/// A data block that was just finished.
#[derive(Debug, Clone, Copy)]
pub struct FinishedBlock {
    /// Position of the block in the table, from 0.
    pub ordinal: u32,
    /// Where the block is in the file.
    pub handle: BlockHandle,
}

/// What a collector stores for a finished table.
#[derive(Debug, Default, Clone)]
pub struct TableCollectorOutput {
    /// Stored in the table's properties block and copied into the manifest's file metadata, so
    /// it is available without opening the file (file-level zone maps).
    pub table_property: Vec<u8>,
    /// Extra named meta blocks, readable later with `Db::table_meta_block`. Names are scoped to
    /// the collector.
    pub meta_blocks: Vec<(String, Vec<u8>)>,
}

/// Sees every entry added to an SSTable of its tree, in key order.
pub trait BlockPropertyCollector: Send {
    /// Sees one entry of the table, in order.
    fn add(&mut self, entry: &CollectorEntry<'_>);
    /// The current data block is complete; returns the bytes stored with it (may be empty).
    fn finish_block(&mut self, block: &FinishedBlock) -> Vec<u8>;
    /// [`BlockPropertyCollector::finish_block`], appending the bytes to `out` (empty when
    /// called; the table builder reuses it, so a collector that writes here allocates nothing
    /// per block). What the builder calls; by default a copy of `finish_block`'s bytes.
    fn finish_block_into(&mut self, block: &FinishedBlock, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.finish_block(block));
    }
    /// The table is complete.
    fn finish_table(&mut self) -> TableCollectorOutput;
}

/// Makes one collector per table. The name identifies the collector's bytes in the files; it
/// must stay stable across restarts.
pub trait BlockPropertyCollectorFactory: Send + Sync {
    /// A stable name, stored in tables (collectors) or checked at open (merge operators).
    fn name(&self) -> &str;
    /// A collector for one table being written.
    fn create(&self, context: &TableContext) -> Box<dyn BlockPropertyCollector>;
}

/// Collected properties (of a block or of a table), looked up by collector name.
#[derive(Debug, Clone, Copy)]
pub struct Properties<'a> {
    names: &'a [String],
    values: PropertyValues<'a>,
}

/// Where the collectors' bytes are.
#[derive(Debug, Clone, Copy)]
enum PropertyValues<'a> {
    /// One vector per collector.
    Vectors(&'a [Vec<u8>]),
    /// `bytes[start..end]` per collector: a table's block properties share one buffer, so
    /// opening a table costs no allocation per block.
    Ranges {
        bytes: &'a [u8],
        ranges: &'a [(usize, usize)],
    },
}

impl<'a> PropertyValues<'a> {
    fn get(self, i: usize) -> Option<&'a [u8]> {
        match self {
            PropertyValues::Vectors(values) => values.get(i).map(Vec::as_slice),
            PropertyValues::Ranges { bytes, ranges } => {
                let &(start, end) = ranges.get(i)?;
                bytes.get(start..end)
            }
        }
    }
}

impl<'a> Properties<'a> {
    /// `names[i]` is the collector whose bytes are `values[i]`.
    pub fn new(names: &'a [String], values: &'a [Vec<u8>]) -> Self {
        Properties {
            names,
            values: PropertyValues::Vectors(values),
        }
    }
    /// `names[i]` is the collector whose bytes are `bytes[ranges[i].0..ranges[i].1]` (a range
    /// outside `bytes` reads as absent).
    pub fn from_ranges(names: &'a [String], bytes: &'a [u8], ranges: &'a [(usize, usize)]) -> Self {
        Properties {
            names,
            values: PropertyValues::Ranges { bytes, ranges },
        }
    }
    /// The property the collector named `collector` wrote.
    pub fn get(&self, collector: &str) -> Option<&'a [u8]> {
        let i = self.names.iter().position(|n| n == collector)?;
        self.values.get(i)
    }
    /// Every (collector name, property), in table order.
    pub fn iter(&self) -> impl Iterator<Item = (&'a str, &'a [u8])> + 'a {
        let values = self.values;
        self.names
            .iter()
            .enumerate()
            .map_while(move |(i, name)| Some((name.as_str(), values.get(i)?)))
    }
}

/// Decides which tables and blocks a scan reads. Returning `false` skips them unread.
pub trait BlockFilter: Send + Sync {
    /// Table-level properties, from the manifest (no file I/O).
    fn table_may_match(&self, properties: &Properties<'_>) -> bool;
    /// Whether a block (or table) with these properties may hold a match; `false` skips it.
    fn block_may_match(&self, properties: &Properties<'_>) -> bool;
}

/// Why a flush or compaction dropped an entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DropReason {
    /// A newer version of the key (put or delete) hides it from every snapshot.
    Shadowed,
    /// A tombstone that reached the bottom of the tree and no snapshot needs.
    TombstoneAtBottom,
}

/// An entry a job drops.
#[derive(Debug, Clone, Copy)]
pub struct DroppedEntry<'a> {
    /// The tree.
    pub tree: TreeId,
    /// The user key.
    pub user_key: &'a [u8],
    /// The entry's sequence number.
    pub seq: SeqNo,
    /// Put, delete or merge.
    pub kind: ValueKind,
    /// The value (empty for a delete).
    pub value: &'a [u8],
    /// Why the entry is dropped.
    pub reason: DropReason,
}

/// Which job dropped entries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JobKind {
    /// A memtable flush.
    Flush,
    /// A compaction from `input_level` into `output_level`.
    Compaction {
        /// The level read.
        input_level: usize,
        /// The level written.
        output_level: usize,
    },
}

/// Emitted writes a compaction commits as soon as it has this many, while it runs, rather than
/// all at the end with its edit: a large compaction of a primary tree with deferred indexes
/// emits millions of deletes, and committing them at once held the commit lock — every writer —
/// for seconds (`sift bench vinyl --disk-bound`: a whole second without a statement). A piece
/// holds it for a millisecond or two, and the job's memtable inserts spread over its run.
pub const EMITTED_PIECE_ENTRIES: usize = 4096;

/// Sees every entry that a flush or compaction drops.
///
/// Writes put into `emit` are applied with fresh sequence numbers. A flush commits them with
/// its version edit, visible together; a compaction commits them in pieces of
/// [`EMITTED_PIECE_ENTRIES`] while it runs (each visible when committed, possibly before the
/// edit — or without it, if the job then fails) and the rest with its edit. All are durable
/// before the edit is recorded: if the process dies after the log write but before the edit
/// is recorded, the job runs again after restart and emits again. So emitted writes must be
/// idempotent (a second delete of the same key is) and harmless ahead of the edit: deleting
/// what only entries the job drops made reachable is (the dropped entries are visible to no
/// reader).
/// Merge operands folded together are not reported: they are combined, not discarded.
pub trait CompactionObserver: Send + Sync {
    /// Sees one dropped entry; writes put in `emit` commit with the job.
    fn on_drop(&self, job: JobKind, entry: &DroppedEntry<'_>, emit: &mut WriteBatch);
}

/// Combines merge operands. Operands are given oldest first.
pub trait MergeOperator: Send + Sync {
    /// A stable name, stored in tables (collectors) or checked at open (merge operators).
    fn name(&self) -> &str;
    /// Folds `operands` onto `existing` (absent if the key had no value or was deleted).
    fn full_merge(
        &self,
        key: &[u8],
        existing: Option<&[u8]>,
        operands: &[&[u8]],
    ) -> std::result::Result<Vec<u8>, String>;
    /// Combines adjacent operands into one, if the operator can; `None` keeps them apart.
    fn partial_merge(&self, _key: &[u8], _operands: &[&[u8]]) -> Option<Vec<u8>> {
        None
    }
}

/// Why the version changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChangeReason {
    /// The files present when the database was opened.
    Open,
    /// A memtable flush.
    Flush,
    /// A compaction.
    Compaction,
    /// A file moved to the next level without rewriting.
    TrivialMove,
    /// The tree was dropped: all its files go.
    DropTree,
}

/// A file added to or removed from a level of a tree.
#[derive(Debug, Clone)]
pub struct FileChange {
    /// The tree.
    pub tree: TreeId,
    /// Its level.
    pub level: usize,
    /// The file.
    pub file: Arc<FileMetaData>,
}

/// Files a flush or compaction added and removed (or the files present at open).
#[derive(Debug, Clone)]
pub struct VersionChange {
    /// What made the change.
    pub reason: ChangeReason,
    /// Files added.
    pub added: Vec<FileChange>,
    /// Files removed.
    pub removed: Vec<FileChange>,
    /// The number of this change: 1 for the first change told to the listeners since open
    /// (at open itself when the database has files), one more for each change after it. A
    /// [`crate::db::ComponentView`] whose `files_epoch()` equals it shows exactly the files
    /// as they are after this change (and before the next), so a listener that records the
    /// epoch it has applied can tell whether its state matches a reader's view.
    pub files_epoch: u64,
}

/// Told of every version change, in order, while the change is being installed (so a listener
/// that keeps an in-memory index stays exactly in step). Must be quick and must not call back
/// into the database's write path.
pub trait VersionListener: Send + Sync {
    /// Told about each change, in order, once it is installed.
    fn on_version_change(&self, change: &VersionChange);
}

// What an extension reads of the engine's files, keys and encodings: the index layer's block
// property collectors, version listeners and queries use these directly.
pub use crate::coding::{
    put_fixed32, put_fixed64, put_length_prefixed, put_varint32, put_varint64, varint_length,
    Decoder,
};
pub use crate::db::ComponentView;
pub use crate::hooks::{FlushInfo, FlushListener, RecoveryListener};
pub use crate::iterator::InternalIterator;
pub use crate::key::{compare_internal_keys, make_seek_key, parse_internal_key, user_key, SEQ_MAX};
pub use crate::sstable::{BlockHandle, DataBlock, ReadContext, Table};
pub use crate::version::{table_file_name, FileMetaData};
