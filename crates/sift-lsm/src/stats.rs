//! Counters: engine-wide (`EngineCounters`, snapshotted into `Stats`) and per operation
//! (`ReadStats`, passed in `ReadOptions`).

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// I/O done by one read operation (a get, an iterator's whole life, a component scan).
#[derive(Debug, Default)]
pub struct ReadStats {
    /// Blocks read from the file.
    pub blocks_read_from_disk: AtomicU64,
    /// Blocks found in the block cache.
    pub blocks_read_from_cache: AtomicU64,
    /// Bytes read from files.
    pub bytes_read_from_disk: AtomicU64,
    /// Blocks skipped by a block filter or a bloom filter.
    pub blocks_skipped: AtomicU64,
    /// Tables a filter ruled out.
    pub tables_skipped: AtomicU64,
}

impl ReadStats {
    /// Blocks read, from the files and the cache.
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
    pub seek_compactions: AtomicU64,
    /// Indexed by output level.
    pub compaction_bytes_read: [AtomicU64; LEVELS_TRACKED],
    pub compaction_bytes_written: [AtomicU64; LEVELS_TRACKED],
    pub write_stall_micros: AtomicU64,
    pub write_stalls: AtomicU64,
    pub write_slowdowns: AtomicU64,
    /// `write_stall_micros` by cause: L0 slowdown sleeps, stops for a full set of immutable
    /// memtables (flushes behind), stops at the L0 stop trigger (compactions behind).
    pub write_slowdown_micros: AtomicU64,
    pub write_stop_memtables_micros: AtomicU64,
    pub write_stop_l0_micros: AtomicU64,
    /// Time write leaders waited for the state lock (memtable switch, full-memtable checks).
    pub write_state_lock_wait_micros: AtomicU64,
    /// Memtable switches by writers, and their total time (old log sync and swap included).
    pub memtable_switches: AtomicU64,
    pub memtable_switch_micros: AtomicU64,
    /// Time queued (user) write leaders waited for the commit lock held by another committer
    /// (an unthrottled or internal write), and how many such waits.
    pub commit_lock_waits: AtomicU64,
    pub commit_lock_wait_micros: AtomicU64,
    /// Time unthrottled and internal writes held the commit lock, and the log syncs among them.
    pub unqueued_commits: AtomicU64,
    pub unqueued_commit_micros: AtomicU64,
    pub unqueued_commit_syncs: AtomicU64,
    /// Unlogged inserts (`Db::insert_unlogged_at_sequence`) done without the commit lock, their
    /// entries, and the calls refused (the caller wrote through the log instead).
    pub unlogged_inserts: AtomicU64,
    pub unlogged_insert_entries: AtomicU64,
    pub unlogged_insert_refusals: AtomicU64,
    /// Time memtable switches spent syncing the log they closed (part of the switch time).
    /// Zero since switches leave that sync to the presync thread (see `closed_wal_syncs`).
    pub memtable_switch_wal_sync_micros: AtomicU64,
    /// Background errors (the engine went from healthy to stopping writes), retries of the
    /// failed work after a recoverable one, and recoveries (writes work again without a
    /// reopen); see `Db::resume`.
    pub background_errors: AtomicU64,
    pub background_error_retries: AtomicU64,
    pub background_error_recoveries: AtomicU64,
    /// Manifest records written and the time spent writing and syncing them.
    pub manifest_writes: AtomicU64,
    pub manifest_write_micros: AtomicU64,
    /// Logs closed by a memtable switch and synced afterwards by the WAL presync thread (off
    /// the commit lock), and the time those syncs took.
    pub closed_wal_syncs: AtomicU64,
    pub closed_wal_sync_micros: AtomicU64,
    /// Closed logs a synced write had to sync itself, under the commit lock, and that time.
    pub closed_wal_syncs_by_writers: AtomicU64,
    pub closed_wal_sync_by_writer_micros: AtomicU64,
    /// Closed logs never synced because their memtable was flushed first.
    pub closed_wal_syncs_skipped: AtomicU64,
    /// Times the WAL presync thread reserved disk blocks ahead of the active log.
    pub wal_preallocations: AtomicU64,
    /// Spare logs given disk blocks at their creation, before any append.
    pub wal_preallocations_at_creation: AtomicU64,
    /// Records and log bytes recovery dropped at the last open because an older log was cut
    /// short by a crash before it was synced (they hold only writes made without sync).
    pub wal_recovery_dropped_records: AtomicU64,
    pub wal_recovery_dropped_bytes: AtomicU64,
    /// Background threads (the engine's and those of layers on top) the kernel refused to
    /// pin to `Options::background_thread_cpus`: they run on every CPU the process may use.
    pub background_thread_pin_failures: AtomicU64,
}

impl EngineCounters {
    pub fn add(counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Relaxed);
    }

    /// Adds the microseconds since `start`.
    pub fn add_micros_since(counter: &AtomicU64, start: std::time::Instant) {
        counter.fetch_add(
            u64::try_from(start.elapsed().as_micros()).unwrap_or(u64::MAX),
            Relaxed,
        );
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
    /// Blocks read from files.
    pub blocks_read_from_disk: u64,
    /// Blocks found in the block cache.
    pub blocks_read_from_cache: u64,
    /// Bytes read from files.
    pub bytes_read_from_disk: u64,
    /// Bytes written to tables.
    pub bytes_written: u64,
    /// Bytes appended to write-ahead logs.
    pub wal_bytes: u64,
    /// Syncs of write-ahead logs.
    pub wal_syncs: u64,
    /// Write batches committed.
    pub writes: u64,
    /// Commit groups (batches logged together).
    pub write_groups: u64,
    /// Memtable flushes.
    pub flushes: u64,
    /// Bytes flushes wrote.
    pub flush_bytes_written: u64,
    /// Compactions run.
    pub compactions: u64,
    /// Of `compactions`: those run because point reads spent a file's seek allowance
    /// (`Options::seek_compaction`).
    pub seek_compactions: u64,
    /// Bytes compactions read, per input level.
    pub compaction_bytes_read_per_level: Vec<u64>,
    /// Bytes compactions wrote, per output level.
    pub compaction_bytes_written_per_level: Vec<u64>,
    /// Time writes waited in stalls, in microseconds.
    pub write_stall_micros: u64,
    /// Writes that stalled.
    pub write_stalls: u64,
    /// Writes slowed down.
    pub write_slowdowns: u64,
    /// Of `write_stall_micros`: the 1 ms sleeps of writes slowed down at the L0 slowdown
    /// trigger.
    pub write_slowdown_micros: u64,
    /// Of `write_stall_micros`: writes stopped because `immutable_memtables_max` memtables
    /// wait for their flush.
    pub write_stop_memtables_micros: u64,
    /// Of `write_stall_micros`: writes stopped at the L0 stop trigger.
    pub write_stop_l0_micros: u64,
    /// Time writers waited for the write state lock, in microseconds.
    pub write_state_lock_wait_micros: u64,
    /// Memtable switches.
    pub memtable_switches: u64,
    /// Time spent switching memtables, in microseconds.
    pub memtable_switch_micros: u64,
    /// Writers that waited for the commit lock.
    pub commit_lock_waits: u64,
    /// Their wait, in microseconds.
    pub commit_lock_wait_micros: u64,
    /// Commits made without joining a group.
    pub unqueued_commits: u64,
    /// Their time, in microseconds.
    pub unqueued_commit_micros: u64,
    /// Of them, synced.
    pub unqueued_commit_syncs: u64,
    /// Unlogged memtable inserts.
    pub unlogged_inserts: u64,
    /// Entries they inserted.
    pub unlogged_insert_entries: u64,
    /// Unlogged inserts refused.
    pub unlogged_insert_refusals: u64,
    /// Time switches spent syncing the old log, in microseconds.
    pub memtable_switch_wal_sync_micros: u64,
    /// Background errors, retries after a recoverable one, and recoveries (see
    /// `Db::resume`).
    pub background_errors: u64,
    /// Retries after recoverable background errors.
    pub background_error_retries: u64,
    /// Recoveries from them.
    pub background_error_recoveries: u64,
    /// Manifest records written.
    pub manifest_writes: u64,
    /// Their time, in microseconds.
    pub manifest_write_micros: u64,
    /// Syncs of closed logs.
    pub closed_wal_syncs: u64,
    /// Their time, in microseconds.
    pub closed_wal_sync_micros: u64,
    /// Of them, made by writers.
    pub closed_wal_syncs_by_writers: u64,
    /// Their time, in microseconds.
    pub closed_wal_sync_by_writer_micros: u64,
    /// Closed-log syncs found unnecessary.
    pub closed_wal_syncs_skipped: u64,
    /// Times the WAL presync thread reserved disk blocks ahead of the active log (0 where the
    /// file system cannot).
    pub wal_preallocations: u64,
    /// Spare logs given disk blocks for a whole memtable at their creation, by the flush
    /// thread before any append (0 where the file system cannot).
    pub wal_preallocations_at_creation: u64,
    /// Log records recovery dropped.
    pub wal_recovery_dropped_records: u64,
    /// Log bytes recovery dropped.
    pub wal_recovery_dropped_bytes: u64,
    /// Background threads that could not be pinned to their CPUs.
    pub background_thread_pin_failures: u64,
    /// Bytes in memtables.
    pub memtable_bytes: u64,
    /// Memtables waiting for their flush.
    pub immutable_memtables: usize,
    /// Bytes of arena chunks of flushed memtables held for the next memtables.
    pub memtable_chunk_pool_bytes: u64,
    /// Arena chunks a memtable took from that pool instead of the allocator.
    pub memtable_chunks_reused: u64,
    /// Arena chunks of dropped memtables returned to the allocator (the pool was full, or the
    /// chunk held one large value).
    pub memtable_chunks_freed: u64,
    /// Bytes in the block cache.
    pub block_cache_bytes: u64,
    /// The last sequence number given.
    pub last_sequence: u64,
    /// Per tree: files and bytes per level.
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
            seek_compactions: self.seek_compactions.load(Relaxed),
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
            write_slowdown_micros: self.write_slowdown_micros.load(Relaxed),
            write_stop_memtables_micros: self.write_stop_memtables_micros.load(Relaxed),
            write_stop_l0_micros: self.write_stop_l0_micros.load(Relaxed),
            write_state_lock_wait_micros: self.write_state_lock_wait_micros.load(Relaxed),
            memtable_switches: self.memtable_switches.load(Relaxed),
            memtable_switch_micros: self.memtable_switch_micros.load(Relaxed),
            commit_lock_waits: self.commit_lock_waits.load(Relaxed),
            commit_lock_wait_micros: self.commit_lock_wait_micros.load(Relaxed),
            unqueued_commits: self.unqueued_commits.load(Relaxed),
            unqueued_commit_micros: self.unqueued_commit_micros.load(Relaxed),
            memtable_switch_wal_sync_micros: self.memtable_switch_wal_sync_micros.load(Relaxed),
            unqueued_commit_syncs: self.unqueued_commit_syncs.load(Relaxed),
            unlogged_inserts: self.unlogged_inserts.load(Relaxed),
            unlogged_insert_entries: self.unlogged_insert_entries.load(Relaxed),
            unlogged_insert_refusals: self.unlogged_insert_refusals.load(Relaxed),
            background_errors: self.background_errors.load(Relaxed),
            background_error_retries: self.background_error_retries.load(Relaxed),
            background_error_recoveries: self.background_error_recoveries.load(Relaxed),
            manifest_writes: self.manifest_writes.load(Relaxed),
            manifest_write_micros: self.manifest_write_micros.load(Relaxed),
            closed_wal_syncs: self.closed_wal_syncs.load(Relaxed),
            closed_wal_sync_micros: self.closed_wal_sync_micros.load(Relaxed),
            closed_wal_syncs_by_writers: self.closed_wal_syncs_by_writers.load(Relaxed),
            closed_wal_sync_by_writer_micros: self.closed_wal_sync_by_writer_micros.load(Relaxed),
            closed_wal_syncs_skipped: self.closed_wal_syncs_skipped.load(Relaxed),
            wal_preallocations: self.wal_preallocations.load(Relaxed),
            wal_preallocations_at_creation: self.wal_preallocations_at_creation.load(Relaxed),
            wal_recovery_dropped_records: self.wal_recovery_dropped_records.load(Relaxed),
            wal_recovery_dropped_bytes: self.wal_recovery_dropped_bytes.load(Relaxed),
            background_thread_pin_failures: self.background_thread_pin_failures.load(Relaxed),
            ..Stats::default()
        }
    }
}
