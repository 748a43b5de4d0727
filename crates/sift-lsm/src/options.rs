//! Options for a database, its trees, reads and writes.

use crate::extension::{
    BlockFilter, BlockPropertyCollectorFactory, CompactionObserver, MergeOperator, VersionListener,
};
use crate::fs::{FileSystem, StdFileSystem};
use crate::hooks::{FlushListener, RecoveryListener};
use crate::snapshot::Snapshot;
use crate::stats::ReadStats;
use std::collections::HashMap;
use std::sync::Arc;

/// Block compression. The numeric values are written in every block trailer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[repr(u8)]
pub enum Compression {
    /// Blocks stored as they are.
    #[default]
    None = 0,
    /// Snappy-compressed blocks.
    Snappy = 1,
    /// LZ4-compressed blocks.
    Lz4 = 2,
}

impl Compression {
    /// The compression a stored byte names, if any.
    pub fn from_u8(v: u8) -> Option<Self> {
        match v {
            0 => Some(Compression::None),
            1 => Some(Compression::Snappy),
            2 => Some(Compression::Lz4),
            _ => None,
        }
    }
}

impl std::str::FromStr for Compression {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "none" => Ok(Compression::None),
            "snappy" => Ok(Compression::Snappy),
            "lz4" => Ok(Compression::Lz4),
            other => Err(format!(
                "unknown compression {other:?} (expected none, snappy or lz4)"
            )),
        }
    }
}

/// What WAL recovery does with a damaged record that is followed by valid ones.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum WalRecovery {
    /// A damaged or torn record at the very end of the last log is a write that never finished
    /// and is dropped; damage anywhere else fails `open` with `Error::Corruption`.
    #[default]
    TolerateTornTail,
    /// Skip damaged records wherever they are and keep every record that still checks out.
    /// Acknowledged writes inside the damaged region are lost; use only to rescue data.
    SalvageCorrupted,
}

/// Per-tree behaviour that is code, not data: given again at every open.
#[derive(Clone, Default)]
pub struct TreeOptions {
    /// Combines merge operands (none: merges are refused).
    pub merge_operator: Option<Arc<dyn MergeOperator>>,
    /// Collectors run over every table of the tree.
    pub block_property_collectors: Vec<Arc<dyn BlockPropertyCollectorFactory>>,
}

impl std::fmt::Debug for TreeOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TreeOptions")
            .field(
                "merge_operator",
                &self.merge_operator.as_ref().map(|m| m.name().to_owned()),
            )
            .field(
                "block_property_collectors",
                &self
                    .block_property_collectors
                    .iter()
                    .map(|c| c.name().to_owned())
                    .collect::<Vec<_>>(),
            )
            .finish()
    }
}

/// How a database is opened and run.
#[derive(Clone)]
pub struct Options {
    /// Create the database if the directory holds none.
    pub create_if_missing: bool,
    /// Refuse to open an existing database.
    pub error_if_exists: bool,
    /// Where the files live.
    pub file_system: Arc<dyn FileSystem>,

    /// Size at which the active memtable is frozen and queued for flush.
    pub memtable_bytes_max: usize,
    /// Bytes of arena chunks of flushed memtables kept for the next memtables instead of
    /// being freed (`Stats::memtable_chunk_pool_bytes`; why: `memtable/chunk_pool.rs`).
    /// `None`: twice `memtable_bytes_max`, enough that no chunk is freed while writes go on.
    /// `Some(0)`: none kept, every chunk is freed with its memtable.
    pub memtable_chunk_pool_bytes_max: Option<usize>,
    /// Frozen memtables waiting for flush before writers stall.
    pub immutable_memtables_max: usize,

    /// L0 files that trigger a compaction into L1.
    pub l0_compaction_trigger: usize,
    /// L0 files at which each write is delayed by 1 ms.
    pub l0_slowdown_trigger: usize,
    /// L0 files at which writes wait for compaction.
    pub l0_stop_trigger: usize,
    /// Levels per tree, L0 included.
    pub levels_max: usize,
    /// Target size of L1; each deeper level is `level_size_ratio` times larger.
    pub level1_bytes_max: u64,
    /// Each level is this many times larger than the one above.
    pub level_size_ratio: u64,
    /// Compact a file that point reads keep consulting in vain (LevelDB's seek compaction):
    /// each get that consults a table file and then has to consult another charges the
    /// first; a file charged once per 16 KB of its size (at least 100 times) is compacted into
    /// the next level when no size-triggered compaction is due. Read-heavy phases thus reduce
    /// the files a read consults (`Stats::seek_compactions` counts these compactions).
    pub seek_compaction: bool,
    /// Compaction output files are cut at this size.
    pub table_file_bytes_target: u64,
    /// Background compaction threads.
    pub compaction_threads: usize,
    /// Nice value (0–19) the flush and compaction threads lower themselves to when they start
    /// (Linux; elsewhere ignored). 0 leaves them at the caller's priority. A positive value
    /// makes the scheduler run a waking client thread before background work on a busy
    /// machine, which shortens the pauses a foreground write or read sees while a flush or a
    /// compaction holds a core; background work then only uses CPU the foreground leaves idle.
    pub background_thread_nice: i32,
    /// Keep flushes and compactions from delaying foreground threads by a scheduler time slice
    /// on a machine with few cores: the flush and compaction threads pause for about 60 µs
    /// after every 500 µs of table writing, and compaction threads run under Linux's
    /// `SCHED_IDLE` policy (elsewhere only the pauses apply). Measured on a 2-core machine
    /// (`sift bench diff-index`, a writer at half its saturation rate): without it a
    /// preempted writer waited up to a 4 ms tick behind a compaction, many times a second.
    /// Costs background throughput (about a tenth); not the default, because a foreground
    /// that keeps every core busy then leaves compactions only what the pauses give them, and
    /// L0 grows until the write slowdown and stop triggers throttle it.
    pub background_threads_yield_to_foreground: bool,
    /// CPUs the engine's background threads (flush, compactions, WAL presync) and the index
    /// layer's (asynchronous index workers, online index builds) are pinned to as they start,
    /// in the kernel's numbering (`taskset -c`); `None` (the default) leaves them on every CPU
    /// the process may use. Linux only (`sched_setaffinity`); a no-op elsewhere. Helps on a
    /// machine whose foreground threads are pinned to the other CPUs: a background thread then
    /// never preempts a writer or a reader on its core (measured on a 2-core machine with
    /// `sift bench diff-index`: a preempted writer waited for whole scheduler ticks behind a
    /// compaction or an index worker). Open refuses an empty list and a CPU the process may
    /// not run on (see `cpu_affinity::process_allowed_cpus`); a thread the kernel refuses to
    /// pin later runs unpinned and is counted in `Stats::background_thread_pin_failures`.
    pub background_thread_cpus: Option<Vec<usize>>,
    /// When a level (1 and deeper) is compacted, start from its file with the most tombstones
    /// if at least half of that file's entries are tombstones, instead of the next file in
    /// round-robin order: pushes deletes down to the entries they cancel sooner (for trees that
    /// receive many deletes of keys written long ago, such as deferred secondary indexes).
    pub compaction_prefer_tombstones: bool,
    /// Open with automatic compactions paused until `Db::resume_compactions`: a layer on top
    /// can then register what compactions must keep (snapshots, version retentions) from
    /// state it reads after open, before any compaction runs. Writes stall at
    /// `l0_stop_trigger` while compactions are paused; flushes and manual compactions run.
    pub compactions_paused_at_open: bool,

    /// Uncompressed data block size target.
    pub block_bytes: usize,
    /// Keys between restart points in data blocks.
    pub block_restart_interval: usize,
    /// Bits per key of each table's primary-key bloom filter; 0 writes no filter.
    pub bloom_bits_per_key: u32,
    /// How data blocks are compressed.
    pub compression: Compression,
    /// Capacity of the shared block cache; 0 disables it (every block read goes to the file).
    pub block_cache_bytes: usize,
    /// Read SSTables with O_DIRECT, bypassing the page cache (for measuring real disk reads).
    /// Takes precedence over `use_mmap_reads`.
    pub use_direct_reads: bool,
    /// Read SSTables through memory maps (as LevelDB does on 64-bit systems): a block already
    /// in the page cache costs a copy, not a system call.
    pub use_mmap_reads: bool,

    /// What recovery does with a damaged log.
    pub wal_recovery: WalRecovery,
    /// The manifest is rewritten from the current state when it grows beyond this.
    pub manifest_bytes_max: u64,
    /// The longest wait, in milliseconds, between two automatic retries after a recoverable
    /// background error (an I/O error while a flush or compaction writes its tables or the
    /// manifest; see `Db::resume`). The first retry comes 100 ms after the failure (or this,
    /// if smaller), and each failed retry doubles the wait up to this. Zero turns automatic
    /// retries off: only `Db::resume` retries.
    pub background_error_retry_interval_max_millis: u64,

    /// Longest key accepted, in bytes.
    pub key_bytes_max: usize,
    /// Longest value accepted, in bytes.
    pub value_bytes_max: usize,

    /// Options of trees found at open, by name; trees not listed get `default_tree_options`.
    pub tree_options: HashMap<String, TreeOptions>,
    /// Options of trees created without their own.
    pub default_tree_options: TreeOptions,
    /// Told about every entry flushes and compactions drop.
    pub compaction_observers: Vec<Arc<dyn CompactionObserver>>,
    /// Told about every change of the files.
    pub version_listeners: Vec<Arc<dyn VersionListener>>,
    /// Called before each flush of a frozen memtable (see `hooks.rs`).
    pub flush_listeners: Vec<Arc<dyn FlushListener>>,
    /// Told after each recovery from a recoverable background error (see `hooks.rs`).
    pub recovery_listeners: Vec<Arc<dyn RecoveryListener>>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            create_if_missing: true,
            error_if_exists: false,
            file_system: Arc::new(StdFileSystem),
            memtable_bytes_max: 64 << 20,
            memtable_chunk_pool_bytes_max: None,
            immutable_memtables_max: 2,
            l0_compaction_trigger: 4,
            l0_slowdown_trigger: 20,
            l0_stop_trigger: 36,
            levels_max: 7,
            level1_bytes_max: 256 << 20,
            level_size_ratio: 10,
            seek_compaction: true,
            table_file_bytes_target: 64 << 20,
            compaction_threads: 1,
            background_thread_nice: 0,
            background_threads_yield_to_foreground: false,
            background_thread_cpus: None,
            compaction_prefer_tombstones: false,
            compactions_paused_at_open: false,
            block_bytes: 4096,
            block_restart_interval: 16,
            bloom_bits_per_key: 10,
            compression: Compression::None,
            block_cache_bytes: 32 << 20,
            use_direct_reads: false,
            use_mmap_reads: true,
            wal_recovery: WalRecovery::TolerateTornTail,
            manifest_bytes_max: crate::version::set::MANIFEST_BYTES_MAX,
            background_error_retry_interval_max_millis: 10_000,
            key_bytes_max: 64 << 10,
            value_bytes_max: 64 << 20,
            tree_options: HashMap::new(),
            default_tree_options: TreeOptions::default(),
            compaction_observers: Vec::new(),
            version_listeners: Vec::new(),
            flush_listeners: Vec::new(),
            recovery_listeners: Vec::new(),
        }
    }
}

impl std::fmt::Debug for Options {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Options")
            .field("memtable_bytes_max", &self.memtable_bytes_max)
            .field(
                "memtable_chunk_pool_bytes_max",
                &self.memtable_chunk_pool_bytes_max,
            )
            .field("l0_compaction_trigger", &self.l0_compaction_trigger)
            .field("level1_bytes_max", &self.level1_bytes_max)
            .field("level_size_ratio", &self.level_size_ratio)
            .field("seek_compaction", &self.seek_compaction)
            .field("table_file_bytes_target", &self.table_file_bytes_target)
            .field("block_bytes", &self.block_bytes)
            .field("bloom_bits_per_key", &self.bloom_bits_per_key)
            .field("compression", &self.compression)
            .field("block_cache_bytes", &self.block_cache_bytes)
            .field("use_direct_reads", &self.use_direct_reads)
            .finish_non_exhaustive()
    }
}

/// How one write is made durable.
#[derive(Debug, Clone, Copy, Default)]
pub struct WriteOptions {
    /// fdatasync the WAL before acknowledging.
    pub sync: bool,
}

/// How one read sees the database.
#[derive(Clone, Default)]
pub struct ReadOptions {
    /// Read as of this snapshot; `None` reads the latest committed state.
    pub snapshot: Option<Snapshot>,
    /// Inclusive lower bound on user keys for iterators.
    pub lower_bound: Option<Vec<u8>>,
    /// Exclusive upper bound on user keys for iterators.
    pub upper_bound: Option<Vec<u8>>,
    /// Put blocks read into the block cache (off for scans that should not evict hot data).
    pub skip_cache_fill: bool,
    /// Skip tables and blocks by their collected properties (see the trap in `extension.rs`).
    pub block_filter: Option<Arc<dyn BlockFilter>>,
    /// Counts the I/O of this one operation.
    pub read_stats: Option<Arc<ReadStats>>,
}

impl std::fmt::Debug for ReadOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReadOptions")
            .field("snapshot", &self.snapshot.as_ref().map(Snapshot::sequence))
            .field("lower_bound", &self.lower_bound)
            .field("upper_bound", &self.upper_bound)
            .field("block_filter", &self.block_filter.is_some())
            .finish_non_exhaustive()
    }
}
