//! Opening a database: lock, manifest replay, WAL replay into L0 tables, a fresh manifest and
//! WAL, removal of files nothing refers to, and the background threads.

use crate::db::state::{DbInner, DbState, Reaper, SuperVersion, TableOpener, TreeInfo};
use crate::db::write::insert_into_memtable;
use crate::db::{Db, DEFAULT_TREE};
use crate::extension::{ChangeReason, TableReason};
use crate::iterator::InternalIterator;
use crate::key::{SeqNo, TreeId, SEQ_MAX};
use crate::memtable::{ChunkPool, Memtable};
use crate::options::{Options, WalRecovery};
use crate::snapshot::SnapshotList;
use crate::sstable::BlockCache;
use crate::stats::EngineCounters;
use crate::version::edit::VersionEdit;
use crate::version::set::{read_current, ManifestState, Version, VersionSet};
use crate::version::{parse_file_name, wal_file_name, FileKind, LOCK_FILE_NAME};
use crate::wal::{ControlRecord, LogReader, LogWriter};
use crate::write_batch::WriteBatch;
use crate::{Error, Result};
use arc_swap::ArcSwap;
use parking_lot::{Condvar, Mutex};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::Arc;

fn validate_options(options: &Options) -> Result<()> {
    let bad = |m: &str| Err(Error::InvalidArgument(m.to_owned()));
    if options.levels_max < 2 || options.levels_max > 16 {
        return bad("levels_max must be between 2 and 16");
    }
    if options.memtable_bytes_max < 4096 {
        return bad("memtable_bytes_max must be at least 4096");
    }
    if options.immutable_memtables_max == 0 {
        return bad("immutable_memtables_max must be at least 1");
    }
    if options.block_restart_interval == 0 || options.block_bytes < 64 {
        return bad("block_restart_interval must be at least 1 and block_bytes at least 64");
    }
    if options.l0_compaction_trigger == 0
        || options.l0_slowdown_trigger < options.l0_compaction_trigger
        || options.l0_stop_trigger < options.l0_slowdown_trigger
    {
        return bad("need 0 < l0_compaction_trigger <= l0_slowdown_trigger <= l0_stop_trigger");
    }
    if options.level_size_ratio < 2
        || options.level1_bytes_max == 0
        || options.table_file_bytes_target == 0
    {
        return bad("level_size_ratio must be at least 2; level1_bytes_max and table_file_bytes_target above 0");
    }
    if !(0..=19).contains(&options.background_thread_nice) {
        return bad(
            "background_thread_nice must be between 0 (unchanged) and 19 (lowest priority)",
        );
    }
    if let Some(cpus) = &options.background_thread_cpus {
        crate::cpu_affinity::validate_background_thread_cpus(cpus)?;
    }
    if !lengths_fit_u32(options.key_bytes_max, options.value_bytes_max) {
        return bad("key_bytes_max and value_bytes_max must fit the u32 length fields of memtable nodes and table blocks (below 4 GiB)");
    }
    Ok(())
}

/// Whether keys and values within the limits have lengths the memtable (`u32` key length of
/// `[tree id][user key][trailer]`) and table blocks (varint32 lengths) can store.
fn lengths_fit_u32(key_bytes_max: usize, value_bytes_max: usize) -> bool {
    let key_overhead_bytes = 4 + crate::key::TRAILER_BYTES;
    key_bytes_max
        .checked_add(key_overhead_bytes)
        .is_some_and(|bytes| u32::try_from(bytes).is_ok())
        && u32::try_from(value_bytes_max).is_ok()
}

impl Db {
    pub(crate) fn open_impl(path: &Path, options: Options) -> Result<Db> {
        validate_options(&options)?;
        let fs = Arc::clone(&options.file_system);
        let dir = path.to_path_buf();
        let has_current = fs.exists(&dir.join(crate::version::CURRENT_FILE_NAME));
        if !has_current && !options.create_if_missing {
            return Err(Error::OpenRefused {
                path: dir,
                detail: "no database here and create_if_missing is off".into(),
            });
        }
        if has_current && options.error_if_exists {
            return Err(Error::OpenRefused {
                path: dir,
                detail: "a database exists here and error_if_exists is on".into(),
            });
        }
        fs.create_dir_all(&dir)?;
        let lock = fs.lock(&dir.join(LOCK_FILE_NAME))?;

        let reaper = Arc::new(Reaper {
            dir: dir.clone(),
            fs: Arc::clone(&fs),
            failures: AtomicU64::new(0),
        });
        let levels_max = options.levels_max;
        let mut state = if has_current {
            replay_manifest(&dir, &options)?
        } else {
            let mut s = ManifestState {
                next_file_number: 1,
                next_tree_id: 1,
                ..ManifestState::default()
            };
            s.trees.insert(0, DEFAULT_TREE.to_owned());
            s.files.insert(0, vec![Vec::new(); levels_max]);
            s
        };

        // Every file number seen on disk is taken, even if the manifest never recorded it.
        let names = fs.list(&dir)?;
        let mut wals = BTreeSet::new();
        for name in &names {
            match parse_file_name(name) {
                Some(FileKind::Table(n) | FileKind::Manifest(n)) => {
                    state.next_file_number = state.next_file_number.max(n + 1);
                }
                Some(FileKind::Wal(n)) => {
                    state.next_file_number = state.next_file_number.max(n + 1);
                    if n >= state.log_number {
                        wals.insert(n);
                    }
                }
                _ => {}
            }
        }

        let counters = Arc::new(EngineCounters::default());
        let block_cache = (options.block_cache_bytes > 0)
            .then(|| Arc::new(BlockCache::new(options.block_cache_bytes)));
        let tables = Arc::new(TableOpener {
            dir: dir.clone(),
            fs: Arc::clone(&fs),
            direct_reads: options.use_direct_reads,
            mmap_reads: options.use_mmap_reads,
            block_cache: block_cache.clone(),
            counters: Arc::clone(&counters),
        });
        let trees = tree_map(&state, &options);

        // The manifest state is final except for the WAL replay: build a provisional inner to
        // reuse the table writer, then replay.
        let mut provisional_versions =
            VersionSet::create(&dir, Arc::clone(&fs), state, levels_max, reaper.clone())?;
        provisional_versions.manifest_bytes_max = options.manifest_bytes_max;
        let version = Arc::new(provisional_versions.version());
        // By default two memtables' worth: a flushed memtable's chunks come back while the
        // active one is still taking those of the memtable flushed before it; with one
        // memtable's worth the pool overflowed, and the flush thread freed the surplus, the
        // very contention the pool is for.
        let memtable_chunks = Arc::new(ChunkPool::new(
            options
                .memtable_chunk_pool_bytes_max
                .unwrap_or(options.memtable_bytes_max.saturating_mul(2)),
        ));
        let mem = Arc::new(Memtable::new(0));
        let inner = Arc::new(DbInner {
            dir: dir.clone(),
            fs: Arc::clone(&fs),
            state: Mutex::new(DbState {
                versions: provisional_versions,
                mem: Arc::clone(&mem),
                imms: Vec::new(),
                version: Arc::clone(&version),
                trees: Arc::clone(&trees),
                files_epoch: 0,
                bg_error: None,
                recovering: false,
                flush_attempted: None,
                failed_job_files: Vec::new(),
                background_attempts: std::collections::BTreeSet::new(),
                next_background_attempt: 0,
                shutting_down: false,
                compactions_running: 0,
                flush_running: false,
                manual_compactions: 0,
                compactions_paused: usize::from(options.compactions_paused_at_open),
                running_jobs: std::collections::BTreeSet::new(),
                next_job_ticket: 0,
                manifest_writing: false,
            }),
            bg_cv: Condvar::new(),
            super_version: ArcSwap::from_pointee(SuperVersion {
                mem,
                imms: Vec::new(),
                version,
                trees: Arc::clone(&trees),
                files_epoch: 0,
            }),
            visible_sequence: AtomicU64::new(0),
            allocated_sequence: AtomicU64::new(0),
            write_queue: crate::db::write::WriteQueue::default(),
            wal: Mutex::new(None),
            spare_wal: Mutex::new(None),
            wal_reserved_ends: Mutex::new(Vec::new()),
            memtable_chunks,
            background_thread_ids: Mutex::new(Vec::new()),
            instance: {
                static NEXT_INSTANCE: std::sync::atomic::AtomicU64 =
                    std::sync::atomic::AtomicU64::new(1);
                NEXT_INSTANCE.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
            },
            writes_stopped: AtomicBool::new(false),
            wal_presync_due: Mutex::new(false),
            wal_presync_cv: Condvar::new(),
            wal_presyncs: AtomicU64::new(0),
            closed_logs: Mutex::new(Vec::new()),
            previous_log_due: Mutex::new(None),
            synced_log_markers: Mutex::new(Vec::new()),
            synced_log_markers_due: AtomicBool::new(false),
            snapshots: Arc::new(SnapshotList::default()),
            block_cache,
            counters,
            tables,
            closed: AtomicBool::new(false),
            directory_lock: Mutex::new(Some(lock)),
            options,
        });

        // Recovered tables join the manifest in one edit with the new log number, so a crash
        // during recovery leaves them unreferenced (removed next time) rather than doubled.
        let mut edit = VersionEdit::default();
        let last_sequence = inner.replay_wals(&wals, &mut edit)?;
        {
            let mut state = inner.state.lock();
            let wal_number = state.versions.new_file_number();
            let wal_path = dir.join(wal_file_name(wal_number));
            let file = fs.create(&wal_path)?;
            *inner.wal.lock() = Some(LogWriter::new(file, wal_path));
            let newest_in_tables = state
                .version
                .trees
                .values()
                .flat_map(|tv| tv.all_files().map(|(_, f)| f.seq_max))
                .chain(edit.new_files.iter().map(|(_, _, f)| f.seq_max))
                .max()
                .unwrap_or(0);
            let last = state
                .versions
                .state
                .last_sequence
                .max(last_sequence)
                .max(newest_in_tables);
            state.mem = Arc::new(inner.new_memtable(wal_number, last + 1));
            edit.log_number = Some(wal_number);
            edit.last_sequence = Some(last);
            state.versions.log_and_apply(&mut edit)?;
            EngineCounters::add(&inner.counters.manifest_writes, 1);
            state.version = Arc::new(state.versions.version());
            // Listeners learn the starting files, as if each had just been added: change 1,
            // or change 0 (nothing) for a database without files.
            let mut change = crate::db::flush::diff_versions(
                &Version::default(),
                &state.version,
                ChangeReason::Open,
                0,
            );
            if !inner.options.version_listeners.is_empty() && !change.added.is_empty() {
                state.files_epoch = 1;
                change.files_epoch = 1;
            }
            inner.install_super_version(&state);
            inner
                .visible_sequence
                .store(last, std::sync::atomic::Ordering::Release);
            inner
                .allocated_sequence
                .store(last, std::sync::atomic::Ordering::Release);
            fs.sync_dir(&dir)?;
            remove_unreferenced_files(&inner, &state, wal_number)?;
            for listener in &inner.options.version_listeners {
                listener.on_version_change(&change);
            }
        }
        Db::start(inner)
    }
}

fn tree_map(state: &ManifestState, options: &Options) -> Arc<BTreeMap<TreeId, Arc<TreeInfo>>> {
    Arc::new(
        state
            .trees
            .iter()
            .map(|(id, name)| {
                let tree_options = options
                    .tree_options
                    .get(name)
                    .cloned()
                    .unwrap_or_else(|| options.default_tree_options.clone());
                (
                    *id,
                    Arc::new(TreeInfo {
                        id: *id,
                        name: Arc::from(name.as_str()),
                        options: tree_options,
                    }),
                )
            })
            .collect(),
    )
}

fn replay_manifest(dir: &Path, options: &Options) -> Result<ManifestState> {
    let fs = &options.file_system;
    let name = read_current(dir, fs.as_ref())?;
    let path = dir.join(&name);
    if !fs.exists(&path) {
        return Err(Error::corruption(
            dir.join(crate::version::CURRENT_FILE_NAME),
            0,
            format!("CURRENT names {name}, which does not exist"),
        ));
    }
    let bytes = fs.read_all(&path)?;
    let mut reader = LogReader::new(bytes.clone(), path.clone(), WalRecovery::TolerateTornTail);
    let mut state = ManifestState::default();
    let mut records = 0;
    while let Some((offset, record)) = reader.read_record()? {
        let edit = VersionEdit::decode(&record, &path, offset)?;
        state.apply(&edit, options.levels_max, &path, offset)?;
        records += 1;
    }
    if records == 0 {
        return Err(Error::corruption(
            &path,
            0,
            "manifest holds no complete record",
        ));
    }
    if options.wal_recovery == WalRecovery::TolerateTornTail {
        let damaged_at = bytes.len() as u64 - reader.dropped_tail_bytes();
        check_manifest_tail(&bytes, damaged_at as usize, &path)?;
    }
    // Tables are synced into the directory before an edit names them, so a missing one means
    // damage: report it now rather than as an I/O error on some later read.
    let present: BTreeSet<String> = fs.list(dir)?.into_iter().collect();
    for (tree, levels) in &state.files {
        for file in levels.iter().flatten() {
            let table = crate::version::table_file_name(file.number);
            if !present.contains(&table) {
                return Err(Error::corruption(
                    &path,
                    0,
                    format!(
                        "the manifest lists table {table} of tree {tree}, which does not exist"
                    ),
                ));
            }
        }
    }
    Ok(state)
}

/// Every manifest record is synced before anything acts on it, so a crash can only leave an
/// incomplete last record. A last record whose fragments are all there but one fails its
/// checksum (or has an impossible length) was damaged after it was written: dropping it as a
/// torn tail would silently forget an edit whose effects (removed logs and tables) are already
/// on disk. A length field damaged to point past the end of the file is indistinguishable from
/// a torn append and is still taken as one.
fn check_manifest_tail(bytes: &[u8], damaged_at: usize, path: &Path) -> Result<()> {
    use crate::wal::{fragment_crc, BLOCK_BYTES, HEADER_BYTES};
    let mut position = damaged_at;
    loop {
        let left_in_block = BLOCK_BYTES - position % BLOCK_BYTES;
        if left_in_block < HEADER_BYTES {
            position += left_in_block;
            continue;
        }
        let Some(header) = bytes.get(position..position + HEADER_BYTES) else {
            return Ok(()); // the file ends inside a header: torn
        };
        let length = usize::from(u16::from_le_bytes([header[4], header[5]]));
        if length > left_in_block - HEADER_BYTES {
            return Err(Error::corruption(
                path,
                damaged_at as u64,
                format!("last manifest record: fragment at {position} claims {length} bytes, more than its block holds"),
            ));
        }
        let start = position + HEADER_BYTES;
        let Some(payload) = bytes.get(start..start + length) else {
            return Ok(()); // the file ends inside the payload: torn
        };
        let stored = u32::from_le_bytes([header[0], header[1], header[2], header[3]]);
        if stored != fragment_crc(header[6], payload) {
            return Err(Error::corruption(
                path,
                damaged_at as u64,
                format!("last manifest record is complete but its fragment at {position} fails its checksum"),
            ));
        }
        position = start + length;
    }
}

impl DbInner {
    /// Replays the logs into memtables, writing each to L0 when full and at the end. Returns
    /// the highest sequence number found.
    ///
    /// A memtable switch does not wait for the log it closes to be synced, so a crash can cut
    /// that log short while a newer one already holds records. The newer log then starts
    /// with a `PreviousLog` record naming the older log's length: if the older log's valid
    /// records end before that length and no later log records (`LogSynced`) that it was
    /// synced, the crash came before that sync, the newer logs hold only writes made without
    /// sync, and replay stops at the cut so the recovered state is a prefix of the writes.
    /// With the `LogSynced` record, the damage happened after the sync: corruption.
    fn replay_wals(self: &Arc<Self>, wals: &BTreeSet<u64>, edit: &mut VersionEdit) -> Result<u64> {
        let mut last = 0;
        let numbers: Vec<u64> = wals.iter().copied().collect();
        let tolerate = self.options.wal_recovery == WalRecovery::TolerateTornTail;
        // Where each log read so far ends: (path, offset just past its last valid record).
        let mut ends: BTreeMap<u64, (PathBuf, u64)> = BTreeMap::new();
        // A log that ended in damage, and the error that damage is if a log written before
        // `PreviousLog` records existed follows it with records (such a log was only written
        // once the one before it was fully synced).
        let mut pending_damage: Option<(u64, Error)> = None;
        let mut dropping = false;
        let (mut dropped_records, mut dropped_bytes) = (0u64, 0u64);
        for (index, number) in numbers.iter().copied().enumerate() {
            let path = self.dir.join(wal_file_name(number));
            let bytes = self.fs.read_all(&path)?;
            if dropping {
                dropped_bytes += bytes.len() as u64;
                dropped_records += count_batch_records(bytes, &path);
                continue;
            }
            let file_bytes = bytes.len() as u64;
            let mut reader = LogReader::new(bytes, path.clone(), self.options.wal_recovery);
            let mut mem = self.new_memtable(number, SeqNo::MAX);
            let mut first = true;
            while let Some((offset, record)) = reader.read_record()? {
                let control = ControlRecord::decode(&record, &path, offset)?;
                if std::mem::take(&mut first) {
                    let previous = match control {
                        Some(ControlRecord::PreviousLog { number, bytes }) => Some((number, bytes)),
                        _ => None,
                    };
                    if let Some((damaged, error)) = pending_damage.take() {
                        let judged_below = previous.is_some_and(|(p, _)| p == damaged);
                        if tolerate && !judged_below {
                            return Err(error);
                        }
                    }
                    if let Some((previous, previous_bytes)) = previous {
                        if let Some((previous_path, valid_bytes)) = ends.get(&previous) {
                            if *valid_bytes < previous_bytes {
                                match self.find_synced_marker(previous, &numbers[index..])? {
                                    Some((marker_path, marker_offset)) if tolerate => {
                                        return Err(Error::corruption(
                                            previous_path,
                                            *valid_bytes,
                                            format!(
                                                "log {previous} holds valid records only up to \
                                                 offset {valid_bytes} of {previous_bytes}, but \
                                                 {} records at offset {marker_offset} that it was \
                                                 synced complete",
                                                marker_path.display()
                                            ),
                                        ));
                                    }
                                    // Salvaging: the damage is skipped like any other.
                                    Some(_) => {}
                                    None => {
                                        dropping = true;
                                        break;
                                    }
                                }
                            }
                        }
                    }
                }
                if control.is_some() {
                    continue;
                }
                let batch = WriteBatch::decode(&record, &path, offset)?;
                // Sequence numbers start at 1 and stay at most `SEQ_MAX`; a batch outside that
                // (its checksum valid) would overflow the sum or make every later write fail.
                let batch_last = batch
                    .sequence()
                    .checked_add(batch.len() as u64)
                    .and_then(|end| end.checked_sub(1))
                    .filter(|&batch_last| batch.sequence() >= 1 && batch_last <= SEQ_MAX)
                    .ok_or_else(|| {
                        Error::corruption(
                            &path,
                            offset,
                            format!(
                                "write batch of {} entries at sequence {} is outside 1..={SEQ_MAX}",
                                batch.len(),
                                batch.sequence()
                            ),
                        )
                    })?;
                insert_into_memtable(&mem, &batch);
                last = last.max(batch_last);
                if mem.approximate_bytes() >= self.options.memtable_bytes_max {
                    self.flush_recovered(mem, edit)?;
                    mem = self.new_memtable(number, SeqNo::MAX);
                }
            }
            if dropping {
                dropped_bytes += file_bytes;
                dropped_records += count_batch_records(self.fs.read_all(&path)?, &path);
                continue;
            }
            ends.insert(number, (path.clone(), reader.valid_bytes()));
            if reader.dropped_tail_bytes() > 0 {
                pending_damage = Some((
                    number,
                    Error::corruption(
                        &path,
                        reader.valid_bytes(),
                        format!(
                            "log {number} ends in {} damaged bytes but newer logs follow it",
                            reader.dropped_tail_bytes()
                        ),
                    ),
                ));
            }
            if !mem.is_empty() {
                self.flush_recovered(mem, edit)?;
            }
        }
        EngineCounters::add(&self.counters.wal_recovery_dropped_records, dropped_records);
        EngineCounters::add(&self.counters.wal_recovery_dropped_bytes, dropped_bytes);
        Ok(last)
    }

    /// The first `LogSynced` record for log `number` in the logs `numbers`: (path, offset).
    /// Damage in those logs is looked past: any trace of the marker counts.
    fn find_synced_marker(&self, number: u64, numbers: &[u64]) -> Result<Option<(PathBuf, u64)>> {
        for later in numbers {
            let path = self.dir.join(wal_file_name(*later));
            let bytes = self.fs.read_all(&path)?;
            let mut reader = LogReader::new(bytes, path.clone(), WalRecovery::SalvageCorrupted);
            while let Ok(Some((offset, record))) = reader.read_record() {
                if let Ok(Some(ControlRecord::LogSynced { number: synced, .. })) =
                    ControlRecord::decode(&record, &path, offset)
                {
                    if synced == number {
                        return Ok(Some((path, offset)));
                    }
                }
            }
        }
        Ok(None)
    }

    /// A memtable for the records of log `number` on the database's chunk pool, whose writes get
    /// sequence numbers from `sequence_floor` on (`SeqNo::MAX`: not known, as for the logs
    /// replayed at open; see `Memtable::with_sequence_floor`).
    pub(crate) fn new_memtable(&self, number: u64, sequence_floor: SeqNo) -> Memtable {
        Memtable::with_chunk_pool(
            number,
            sequence_floor,
            Some(Arc::clone(&self.memtable_chunks)),
        )
    }

    /// Writes a recovered memtable to L0 tables, adding them to `edit`.
    fn flush_recovered(self: &Arc<Self>, mem: Memtable, edit: &mut VersionEdit) -> Result<()> {
        let mem = Arc::new(mem);
        let trees = Arc::clone(&self.state.lock().trees);
        for tree_id in mem.trees() {
            let Some(tree) = trees.get(&tree_id) else {
                continue;
            };
            let number = self.state.lock().versions.new_file_number();
            let mut input = mem.iter(tree_id);
            input.seek_to_first()?;
            // Every version is written as it is: a version dropped here would be reported to
            // no compaction observer (they see it when these tables are compacted), and its
            // drop may never have been reported before the restart.
            if let Some(f) =
                self.write_table(tree, 0, TableReason::Flush, number, &mut |builder| {
                    while input.valid() {
                        builder.add(input.key(), input.value())?;
                        input.next()?;
                    }
                    Ok(true)
                })?
            {
                edit.new_files.push((tree_id, 0, f));
            }
        }
        self.fs.sync_dir(&self.dir)
    }
}

/// The write-batch records (control records not counted) readable in a log, for the report
/// of what recovery dropped.
fn count_batch_records(bytes: Vec<u8>, path: &Path) -> u64 {
    let mut reader = LogReader::new(bytes, path.to_path_buf(), WalRecovery::SalvageCorrupted);
    let mut records = 0;
    while let Ok(Some((offset, record))) = reader.read_record() {
        if matches!(ControlRecord::decode(&record, path, offset), Ok(None)) {
            records += 1;
        }
    }
    records
}

/// Removes tables no tree refers to, logs older than `log_number`, old manifests and temp
/// files: leftovers of crashed flushes and compactions.
fn remove_unreferenced_files(inner: &DbInner, state: &DbState, log_number: u64) -> Result<()> {
    let live: BTreeSet<u64> = state
        .version
        .trees
        .values()
        .flat_map(|tv| tv.all_files().map(|(_, f)| f.number))
        .collect();
    for name in inner.fs.list(&inner.dir)? {
        let remove = match parse_file_name(&name) {
            Some(FileKind::Table(n)) => !live.contains(&n),
            Some(FileKind::Wal(n)) => n < log_number,
            Some(FileKind::Manifest(n)) => n != state.versions.manifest_number,
            Some(FileKind::Temp) => true,
            _ => false,
        };
        if remove {
            let _ = inner.fs.remove(&inner.dir.join(&name));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn limits_beyond_memtable_and_table_length_fields_are_refused() {
        let fits = |key, value| super::lengths_fit_u32(key, value);
        assert!(fits(64 << 10, 64 << 20));
        assert!(fits(u32::MAX as usize - 12, u32::MAX as usize));
        assert!(!fits(u32::MAX as usize - 11, 0));
        assert!(!fits(0, u32::MAX as usize + 1));
        assert!(!fits(usize::MAX, 0));
        let options = crate::Options {
            key_bytes_max: 8 << 30,
            ..crate::Options::default()
        };
        assert!(matches!(
            super::validate_options(&options),
            Err(crate::Error::InvalidArgument(message)) if message.contains("key_bytes_max")
        ));
    }

    #[test]
    fn background_thread_nice_outside_0_to_19_is_refused_by_name() {
        for nice in [-1, 20] {
            let options = crate::Options {
                background_thread_nice: nice,
                ..crate::Options::default()
            };
            assert!(matches!(
                super::validate_options(&options),
                Err(crate::Error::InvalidArgument(message)) if message.contains("background_thread_nice")
            ));
        }
    }

    /// One of `db`'s background threads' `/proc/self/task/<id>/<file>`, by thread name: by id,
    /// because other tests of this process have threads of the same names.
    #[cfg(target_os = "linux")]
    fn background_thread_file(db: &crate::Db, name: &str, file: &str) -> Option<String> {
        let id = db
            .inner
            .background_thread_ids
            .lock()
            .iter()
            .find(|(thread_name, _)| thread_name == name)
            .map(|(_, id)| *id)?;
        std::fs::read_to_string(format!("/proc/self/task/{id}/{file}")).ok()
    }

    /// A background thread's nice value: field 19 of its `stat` (after the parenthesised
    /// name, which has no spaces here).
    #[cfg(target_os = "linux")]
    fn nice_of(db: &crate::Db, name: &str) -> Option<i64> {
        let stat = background_thread_file(db, name, "stat")?;
        let after_name = &stat[stat.rfind(')')? + 2..];
        after_name.split(' ').nth(16)?.parse().ok()
    }

    /// A background thread's scheduling policy (0 normal, 5 `SCHED_IDLE`).
    #[cfg(target_os = "linux")]
    fn policy_of(db: &crate::Db, name: &str) -> Option<i64> {
        let sched = background_thread_file(db, name, "sched")?;
        let line = sched.lines().find(|line| line.starts_with("policy"))?;
        line.split(':').nth(1)?.trim().parse().ok()
    }

    /// Waits (up to 10 s) until `done`: the threads set their priority as they start.
    #[cfg(target_os = "linux")]
    fn wait_for(mut done: impl FnMut() -> bool) {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while !done() && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
    }

    /// The flush and compaction threads run at the configured nice value, the WAL presync
    /// thread (whose fsyncs writers wait for) at the caller's.
    #[cfg(target_os = "linux")]
    #[test]
    fn background_threads_lower_their_priority_to_the_configured_nice() {
        let dir = tempfile::tempdir().expect("temporary directory");
        let options = crate::Options {
            background_thread_nice: 7,
            ..crate::Options::default()
        };
        // The threads start at the opening thread's nice value (tests may run niced) and only
        // ever lower their priority.
        // SAFETY: plain integer arguments; a thread id names the calling thread.
        let caller = i64::from(unsafe {
            libc::getpriority(
                libc::PRIO_PROCESS,
                crate::db::current_thread_id() as libc::id_t,
            )
        });
        let lowered = caller.max(7);
        let db = crate::Db::open(dir.path(), options).expect("open");
        // The WAL presync thread too may not have registered yet.
        wait_for(|| {
            nice_of(&db, "sift-compact-0") == Some(lowered)
                && nice_of(&db, "sift-flush") == Some(lowered)
                && nice_of(&db, "sift-wal-presync").is_some()
        });
        assert_eq!(nice_of(&db, "sift-flush"), Some(lowered));
        assert_eq!(nice_of(&db, "sift-compact-0"), Some(lowered));
        assert_eq!(nice_of(&db, "sift-wal-presync"), Some(caller));
        db.close().expect("close");
    }

    /// With `background_threads_yield_to_foreground`, compaction threads run under
    /// `SCHED_IDLE`; the flush thread (writers stall behind it) and the WAL presync thread
    /// (writers wait for its fsyncs) keep the normal policy. Without it, none moves.
    #[cfg(target_os = "linux")]
    #[test]
    fn yielding_to_the_foreground_moves_only_compaction_threads_to_the_idle_policy() {
        for yield_to_foreground in [false, true] {
            let dir = tempfile::tempdir().expect("temporary directory");
            let options = crate::Options {
                background_threads_yield_to_foreground: yield_to_foreground,
                ..crate::Options::default()
            };
            let db = crate::Db::open(dir.path(), options).expect("open");
            let expected_compaction = if yield_to_foreground { 5 } else { 0 };
            wait_for(|| {
                policy_of(&db, "sift-compact-0") == Some(expected_compaction)
                    && policy_of(&db, "sift-flush").is_some()
                    && policy_of(&db, "sift-wal-presync").is_some()
            });
            assert_eq!(policy_of(&db, "sift-compact-0"), Some(expected_compaction));
            assert_eq!(policy_of(&db, "sift-flush"), Some(0));
            assert_eq!(policy_of(&db, "sift-wal-presync"), Some(0));
            db.close().expect("close");
        }
    }

    /// A background thread's `Cpus_allowed_list` (Linux `/proc`), as the kernel formats it.
    #[cfg(target_os = "linux")]
    fn cpus_of(db: &crate::Db, name: &str) -> Option<String> {
        let status = background_thread_file(db, name, "status")?;
        status
            .lines()
            .find_map(|line| line.strip_prefix("Cpus_allowed_list:"))
            .map(|list| list.trim().to_owned())
    }

    const ENGINE_THREADS: [&str; 3] = ["sift-flush", "sift-wal-presync", "sift-compact-0"];

    /// With `background_thread_cpus`, every engine thread runs only on the listed CPUs;
    /// without it, each keeps the set it inherits from the opening thread.
    #[cfg(target_os = "linux")]
    #[test]
    fn background_threads_are_pinned_to_the_configured_cpus_only_when_asked() {
        let first_allowed = crate::cpu_affinity::process_allowed_cpus()[0];
        // The opening thread's own set, which the threads inherit when unpinned.
        let opener = std::fs::read_to_string("/proc/thread-self/status")
            .expect("own status")
            .lines()
            .find_map(|line| line.strip_prefix("Cpus_allowed_list:"))
            .map(|list| list.trim().to_owned())
            .expect("Cpus_allowed_list");
        for pinned in [true, false] {
            let dir = tempfile::tempdir().expect("temporary directory");
            let options = crate::Options {
                background_thread_cpus: pinned.then(|| vec![first_allowed]),
                ..crate::Options::default()
            };
            let expected = if pinned {
                first_allowed.to_string()
            } else {
                opener.clone()
            };
            let db = crate::Db::open(dir.path(), options).expect("open");
            wait_for(|| {
                ENGINE_THREADS
                    .iter()
                    .all(|name| cpus_of(&db, name).as_ref() == Some(&expected))
            });
            for name in ENGINE_THREADS {
                assert_eq!(
                    cpus_of(&db, name).as_deref(),
                    Some(expected.as_str()),
                    "{name}, pinned: {pinned}"
                );
            }
            assert_eq!(db.stats().background_thread_pin_failures, 0);
            db.close().expect("close");
        }
    }

    /// A thread that entered as a background thread is listed while it runs and leaves the
    /// list when its registration goes (at its end); the engine's own threads stay listed.
    #[cfg(target_os = "linux")]
    #[test]
    fn a_background_thread_leaves_the_list_when_it_ends() {
        let dir = tempfile::tempdir().expect("temporary directory");
        let db = crate::Db::open(dir.path(), crate::Options::default()).expect("open");
        let names = |db: &crate::Db| -> Vec<String> {
            db.background_thread_ids()
                .into_iter()
                .map(|(name, _)| name)
                .collect()
        };
        wait_for(|| {
            ENGINE_THREADS
                .iter()
                .all(|name| names(&db).iter().any(|n| n == name))
        });
        let (entered, listed) = std::sync::mpsc::channel();
        let (finish, finished) = std::sync::mpsc::channel::<()>();
        std::thread::scope(|scope| {
            let db = &db;
            std::thread::Builder::new()
                .name("test-one-off".into())
                .spawn_scoped(scope, move || {
                    let _registration = db.enter_background_thread();
                    entered.send(()).expect("send");
                    let _ = finished.recv();
                })
                .expect("spawn");
            listed.recv().expect("the thread entered");
            assert_eq!(
                names(db).iter().filter(|n| *n == "test-one-off").count(),
                1,
                "{:?}",
                names(db)
            );
            finish.send(()).expect("send");
        });
        let after = names(&db);
        assert!(!after.iter().any(|n| n == "test-one-off"), "{after:?}");
        for name in ENGINE_THREADS {
            assert!(after.iter().any(|n| n == name), "{name} missing: {after:?}");
        }
        db.close().expect("close");
    }

    /// A CPU the process may not run on (or an empty list) is refused at open, naming it and
    /// the allowed set, before anything is created or changed.
    #[cfg(target_os = "linux")]
    #[test]
    fn background_thread_cpus_outside_the_allowed_set_are_refused_at_open() {
        let allowed = crate::cpu_affinity::process_allowed_cpus();
        let allowed_list = crate::cpu_affinity::format_cpu_list(&allowed);
        let bad = |cpus: Vec<usize>| crate::Options {
            background_thread_cpus: Some(cpus),
            ..crate::Options::default()
        };
        let parent = tempfile::tempdir().expect("temporary directory");
        // No database yet: nothing is created.
        let fresh = parent.path().join("fresh");
        for cpus in [vec![4096], vec![allowed[0], 4096], Vec::new()] {
            let refused = crate::Db::open(&fresh, bad(cpus.clone()));
            let Err(crate::Error::InvalidArgument(message)) = refused else {
                panic!("{cpus:?} accepted: {refused:?}");
            };
            assert!(message.contains("background_thread_cpus"), "{message}");
            if !cpus.is_empty() {
                assert!(message.contains("CPU 4096"), "{message}");
                assert!(message.contains(&allowed_list), "{message}");
            }
            assert!(!fresh.exists(), "{cpus:?} created {}", fresh.display());
        }
        // An existing database is left as it was: same files, same contents.
        let existing = parent.path().join("existing");
        let db = crate::Db::open(&existing, crate::Options::default()).expect("create");
        db.put(&db.default_tree(), b"key", b"value").expect("put");
        db.close().expect("close");
        let files = || {
            let mut names: Vec<_> = std::fs::read_dir(&existing)
                .expect("list")
                .map(|entry| {
                    let entry = entry.expect("entry");
                    let bytes = std::fs::read(entry.path()).expect("read");
                    (entry.file_name(), bytes)
                })
                .collect();
            names.sort();
            names
        };
        let before = files();
        assert!(matches!(
            crate::Db::open(&existing, bad(vec![4096])),
            Err(crate::Error::InvalidArgument(message)) if message.contains("CPU 4096")
        ));
        assert_eq!(files(), before);
        let db = crate::Db::open(&existing, crate::Options::default()).expect("reopen");
        assert_eq!(
            db.get(&db.default_tree(), b"key")
                .expect("get")
                .map(|entry| entry.value),
            Some(b"value".to_vec())
        );
        db.close().expect("close");
    }

    /// Paced flushes and compactions (which sleep inside table builds) write the same data:
    /// every key survives many flushes, compactions into deeper levels, and a reopen.
    #[test]
    fn paced_flushes_and_compactions_keep_every_key() {
        let dir = tempfile::tempdir().expect("temporary directory");
        let options = || crate::Options {
            background_threads_yield_to_foreground: true,
            memtable_bytes_max: 64 << 10,
            table_file_bytes_target: 64 << 10,
            level1_bytes_max: 256 << 10,
            ..crate::Options::default()
        };
        let key = |i: u32| format!("key{:08}", i.wrapping_mul(2_654_435_761) % 1_000_000);
        let db = crate::Db::open(dir.path(), options()).expect("open");
        let tree = db.default_tree();
        let mut model = std::collections::BTreeMap::new();
        for round in 0..4u32 {
            for i in 0..6_000u32 {
                let value = format!("value {round} {i} {}", "x".repeat(40));
                db.put(&tree, key(i).as_bytes(), value.as_bytes())
                    .expect("put");
                model.insert(key(i), value);
            }
            db.flush().expect("flush");
        }
        db.compact_range(&tree, None, None).expect("compact");
        let stats = db.stats();
        assert!(stats.flushes >= 4, "{stats:?}");
        assert!(stats.compactions >= 1, "{stats:?}");
        db.close().expect("close");
        let db = crate::Db::open(dir.path(), options()).expect("reopen");
        let tree = db.default_tree();
        for (key, value) in &model {
            let found = db.get(&tree, key.as_bytes()).expect("get");
            assert_eq!(
                found.map(|entry| entry.value),
                Some(value.as_bytes().to_vec()),
                "{key}"
            );
        }
        db.close().expect("close");
    }
}
