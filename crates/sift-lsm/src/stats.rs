//! Counters: engine-wide (`EngineCounters`, snapshotted into `Stats`) and per operation
//! (`ReadStats`, passed in `ReadOptions`).

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// I/O done by one read operation (a get, an iterator's whole life, a component scan).
#[derive(Debug, Default)]
pub struct ReadStats {
    pub blocks_read_from_disk: AtomicU64,
    pub blocks_read_from_cache: AtomicU64,
    pub bytes_read_from_disk: AtomicU64,
    /// Blocks skipped by a block filter or a bloom filter.
    pub blocks_skipped: AtomicU64,
    pub tables_skipped: AtomicU64,
}

impl ReadStats {
    pub fn blocks_read(&self) -> u64 {
        self.blocks_read_from_disk.load(Relaxed) + self.blocks_read_from_cache.load(Relaxed)
    }
}

pub const LEVELS_TRACKED: usize = 8;

/// Engine-wide counters, updated with relaxed atomics on the hot paths.
#[derive(Debug, Default)]
pub struct EngineCounters {
    pub blocks_read_from_disk: AtomicU64,
    pub blocks_read_from_cache: AtomicU64,
    pub bytes_read_from_disk: AtomicU64,
    pub bytes_written: AtomicU64,
    pub wal_bytes: AtomicU64,
    pub wal_syncs: AtomicU64,
    pub write_groups: AtomicU64,
    pub writes: AtomicU64,
    pub flushes: AtomicU64,
    pub flush_bytes_written: AtomicU64,
    pub compactions: AtomicU64,
    /// Indexed by output level.
    pub compaction_bytes_read: [AtomicU64; LEVELS_TRACKED],
    pub compaction_bytes_written: [AtomicU64; LEVELS_TRACKED],
    pub write_stall_micros: AtomicU64,
    pub write_stalls: AtomicU64,
    pub write_slowdowns: AtomicU64,
}

impl EngineCounters {
    pub fn add(counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Relaxed);
    }
}

/// Files and bytes of one level of one tree.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LevelStats {
    pub files: usize,
    pub bytes: u64,
}

#[derive(Debug, Clone, Default)]
pub struct TreeStats {
    pub name: String,
    pub levels: Vec<LevelStats>,
}

/// A snapshot of the counters, returned by `Db::stats`.
#[derive(Debug, Clone, Default)]
pub struct Stats {
    pub blocks_read_from_disk: u64,
    pub blocks_read_from_cache: u64,
    pub bytes_read_from_disk: u64,
    pub bytes_written: u64,
    pub wal_bytes: u64,
    pub wal_syncs: u64,
    pub writes: u64,
    pub write_groups: u64,
    pub flushes: u64,
    pub flush_bytes_written: u64,
    pub compactions: u64,
    pub compaction_bytes_read_per_level: Vec<u64>,
    pub compaction_bytes_written_per_level: Vec<u64>,
    pub write_stall_micros: u64,
    pub write_stalls: u64,
    pub write_slowdowns: u64,
    pub memtable_bytes: u64,
    pub immutable_memtables: usize,
    pub block_cache_bytes: u64,
    pub last_sequence: u64,
    pub trees: Vec<TreeStats>,
}

impl EngineCounters {
    /// Copies the counters into a `Stats` (the caller fills the rest).
    pub fn snapshot(&self) -> Stats {
        Stats {
            blocks_read_from_disk: self.blocks_read_from_disk.load(Relaxed),
            blocks_read_from_cache: self.blocks_read_from_cache.load(Relaxed),
            bytes_read_from_disk: self.bytes_read_from_disk.load(Relaxed),
            bytes_written: self.bytes_written.load(Relaxed),
            wal_bytes: self.wal_bytes.load(Relaxed),
            wal_syncs: self.wal_syncs.load(Relaxed),
            writes: self.writes.load(Relaxed),
            write_groups: self.write_groups.load(Relaxed),
            flushes: self.flushes.load(Relaxed),
            flush_bytes_written: self.flush_bytes_written.load(Relaxed),
            compactions: self.compactions.load(Relaxed),
            compaction_bytes_read_per_level: self
                .compaction_bytes_read
                .iter()
                .map(|c| c.load(Relaxed))
                .collect(),
            compaction_bytes_written_per_level: self
                .compaction_bytes_written
                .iter()
                .map(|c| c.load(Relaxed))
                .collect(),
            write_stall_micros: self.write_stall_micros.load(Relaxed),
            write_stalls: self.write_stalls.load(Relaxed),
            write_slowdowns: self.write_slowdowns.load(Relaxed),
            ..Stats::default()
        }
    }
}
