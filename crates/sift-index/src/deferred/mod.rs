//! `deferred` maintenance of composite indexes (Vinyl's deferred DELETEs, Shpilevoy et al.,
//! §3): key layout, the compaction observer that turns versions dropped from a primary tree
//! into DELETEs of their index entries, the registry that tells the observer which indexes a
//! primary tree has, and the garbage report.
//!
//! Writes are blind: a put writes the primary entry and one index entry
//! `enc(value) ‖ !seq (8 bytes BE) ‖ encode_pk(pk)` per deferred index, with the sequence
//! number of the version; a delete writes only the primary tombstone. Nothing is read. Every
//! version that a flush or compaction of the primary drops (a put shadowed by a newer put or
//! delete) yields, through [`DeferredObserver`], an engine delete of exactly the key its index
//! entry has: the engine commits those deletes atomically with the job (and a job redone after
//! a crash emits them again, which is harmless), and the index tree's own compactions cancel
//! entry and delete where they meet, keeping the delete until the bottom level. Queries
//! validate each entry against the primary: it counts only if the pk's live version has the
//! entry's sequence number (`deferred/query.rs`).
//!
//! **In-memory fast path** (Tarantool's `vy_tx_handle_deferred_delete`): when the version a
//! write shadows is known without a disk read — it is in one of the primary's memtables (a
//! memory-only seek of each memtable, [`MemtableVersions`]), earlier in the same batch, or was
//! read anyway for a `sync-full` index of the collection — the write also deletes that
//! version's entries, in the same engine batch. On with `DatabaseOptions::deferred_fast_path`
//! (off by default: then writes read nothing at all). It is opt-in because it is not free: a
//! memtable search per write (as costly as one memtable insert), and one more memtable insert
//! per index for each shadowed version, whose DELETEs the observer will emit again anyway (see
//! below); `sift bench vinyl` measured 0.5-0.9× the throughput without it on the Vinyl
//! microbenchmark (scheme `deferred-fast-path`). It pays off where queries meet much garbage
//! (hot keys rewritten within a memtable's lifetime).
//! The observer still emits its DELETE when the primary later drops that version: the two
//! DELETEs have the same key, and a second DELETE is harmless, because
//! - an entry key `value ‖ !seq ‖ pk` is put at most once (by the write of version `seq`, or by
//!   the back-fill for that version, both under the write lock and before any write can shadow
//!   it), so every DELETE of it lands above its one put, and deleting a deleted key again
//!   leaves it deleted; the engine already requires observers' emits to be idempotent
//!   (a job redone after a crash emits them again);
//! - a fast-path DELETE only targets a version the same batch makes non-live, and commits
//!   atomically with it: readers at older snapshots do not see it, readers at newer ones no
//!   longer count the version anyway, and a crash keeps or loses both together;
//! - it costs little space: usually the entry and its fast-path DELETE are in the same
//!   memtable (the entry was written with its version, which is still in the active memtable),
//!   so the flush drops the entry and two DELETEs reach the tables instead of one entry and one
//!   DELETE; if the version was in a frozen memtable, entry and both DELETEs meet in
//!   compaction. Where the two DELETEs meet, compaction keeps only the newer. The index's
//!   garbage (entries not yet cancelled) no longer waits for the primary's flush.
//!
//! Skipping the observer's DELETE instead would need to know, at drop time, that the fast path
//! fired for that version; the observer does not see the shadowing version, and whether the
//! fast path fired depends on the memtable switches at write time and on this option in the
//! process that wrote it, so a wrong guess would leave an entry uncancelled forever.
//!
//! Before the catalog is loaded at open the observer does not know which trees are primaries
//! with deferred indexes (a compaction may start as soon as the engine is open). A small file
//! in the database directory ([`MARKER_FILE`], read before the engine opens) names the primary
//! trees that have (or had) deferred indexes; until the catalog is loaded, the observer
//! records every put dropped from those trees durably, in the engine's default tree under
//! [`PENDING_PREFIX`], with the job, and `Database::open` turns the records into deletes once
//! the catalog is loaded and every job running at that moment has committed
//! (`Db::wait_for_running_jobs`): a job that saw the catalog unloaded commits its records at
//! its end, possibly after the catalog is in, and later jobs no longer record anything.
//! Databases without deferred indexes write nothing at open.

mod kind;
mod query;

use crate::encoding::{decode_pk, decode_value};
use crate::envelope::EnvelopeRef;
use crate::error::{IndexError, Result};
use crate::kind::{Collection, Index};
pub(crate) use kind::DeferredComposite;
use parking_lot::RwLock;
use sift_lsm::extension::{CompactionObserver, ComponentView, DroppedEntry, JobKind};
use sift_lsm::{ComponentId, Db, ReadOptions, SeqNo, Tree, TreeId, ValueKind, WriteBatch};
use std::collections::{BTreeSet, HashMap};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

/// Key prefix, in the engine's default tree, of versions dropped before the catalog was loaded.
pub const PENDING_PREFIX: &[u8] = b"sift.deferred-pending/";
/// The engine's default tree always has id 0 (checked at open).
pub(crate) const DEFAULT_TREE_ID: TreeId = 0;
/// Pending records handled per engine batch at open.
pub(crate) const PENDING_BATCH_RECORDS: usize = 256;
const SEQ_BYTES: usize = 8;
/// File in the database directory naming the primary trees with deferred indexes.
pub const MARKER_FILE: &str = "sift-deferred-primaries";
const MARKER_HEADER: &str = "sift deferred primaries v1";

/// The primary tree ids named by the marker file: empty if there is none, `None` if it cannot
/// be read or parsed (then every dropped put is recorded until the catalog is loaded).
pub(crate) fn read_marker(
    file_system: &dyn sift_lsm::fs::FileSystem,
    directory: &Path,
) -> Option<BTreeSet<TreeId>> {
    let path = directory.join(MARKER_FILE);
    if !file_system.exists(&path) {
        return Some(BTreeSet::new());
    }
    let bytes = file_system.read_all(&path).ok()?;
    let text = std::str::from_utf8(&bytes).ok()?;
    let mut lines = text.lines();
    if lines.next()? != MARKER_HEADER {
        return None;
    }
    lines.map(|line| line.parse::<TreeId>().ok()).collect()
}

/// Replaces the marker file (temporary file, sync, rename, directory sync).
pub(crate) fn write_marker(
    file_system: &dyn sift_lsm::fs::FileSystem,
    directory: &Path,
    primaries: &BTreeSet<TreeId>,
) -> Result<()> {
    let mut text = format!("{MARKER_HEADER}\n");
    for id in primaries {
        text.push_str(&id.to_string());
        text.push('\n');
    }
    let temporary = directory.join(format!("{MARKER_FILE}.tmp"));
    let mut file = file_system.create(&temporary)?;
    file.append(text.as_bytes())?;
    file.sync()?;
    drop(file);
    file_system.rename(&temporary, &directory.join(MARKER_FILE))?;
    file_system.sync_dir(directory)?;
    Ok(())
}

/// The index key of a deferred entry: `value ‖ !seq (BE) ‖ encode_pk(pk)`, so one value's
/// entries sort newest version first.
pub fn deferred_key(encoded_value: &[u8], seq: SeqNo, pk: &[u8]) -> Vec<u8> {
    let mut key = Vec::with_capacity(encoded_value.len() + SEQ_BYTES + pk.len() + 2);
    key.extend_from_slice(encoded_value);
    key.extend_from_slice(&(!seq).to_be_bytes());
    crate::encoding::encode_pk(pk, &mut key);
    key
}

/// Splits a deferred key into (bytes of the encoded value, sequence number, pk).
pub fn split_deferred_key(
    key: &[u8],
    attr_type: crate::value::AttrType,
) -> Result<(usize, SeqNo, Vec<u8>)> {
    let (_, value_bytes) = decode_value(key, attr_type)?;
    let seq_end = value_bytes + SEQ_BYTES;
    let seq_bytes: [u8; SEQ_BYTES] = key
        .get(value_bytes..seq_end)
        .and_then(|bytes| bytes.try_into().ok())
        .ok_or_else(|| IndexError::corrupt(value_bytes, "deferred key ends inside its sequence"))?;
    let (pk, pk_bytes) = decode_pk(&key[seq_end..]).map_err(|e| e.shift_offset(seq_end))?;
    if seq_end + pk_bytes != key.len() {
        return Err(IndexError::corrupt(
            seq_end + pk_bytes,
            "bytes after the primary key of a deferred key",
        ));
    }
    Ok((value_bytes, !u64::from_be_bytes(seq_bytes), pk))
}

fn pending_key(tree: TreeId, seq: SeqNo, pk: &[u8]) -> Vec<u8> {
    let mut key = PENDING_PREFIX.to_vec();
    key.extend_from_slice(&u64::from(tree).to_be_bytes());
    key.extend_from_slice(&seq.to_be_bytes());
    key.extend_from_slice(pk);
    key
}

pub(crate) fn split_pending_key(key: &[u8]) -> Option<(TreeId, SeqNo, &[u8])> {
    let rest = key.strip_prefix(PENDING_PREFIX)?;
    let tree = u64::from_be_bytes(rest.get(..8)?.try_into().ok()?);
    let seq = u64::from_be_bytes(rest.get(8..16)?.try_into().ok()?);
    Some((TreeId::try_from(tree).ok()?, seq, rest.get(16..)?))
}

#[derive(Default)]
pub(crate) struct RegistryState {
    /// False until `Database::open` has loaded the catalog.
    loaded: bool,
    /// Before `loaded`: the primaries whose dropped puts are recorded (`None`: all).
    recorded_before_load: Option<BTreeSet<TreeId>>,
    /// What the marker file names now.
    marker: BTreeSet<TreeId>,
    /// Primary tree id → its ready deferred indexes.
    pub(crate) by_primary: HashMap<TreeId, Vec<Arc<Index>>>,
}

/// Which deferred indexes each primary tree has; shared by `Database` (which replaces it at
/// every catalog change, under its write lock) and the compaction observer.
#[derive(Default)]
pub(crate) struct DeferredRegistry {
    pub(crate) state: RwLock<RegistryState>,
    pub(crate) deletes_emitted: AtomicU64,
    /// Dropped versions whose envelope did not decode (no delete could be emitted).
    pub(crate) undecodable_versions: AtomicU64,
    /// Versions recorded before the catalog was loaded and turned into deletes at open.
    pub(crate) pending_applied: AtomicU64,
    /// On: writes delete the entries of a shadowed version found in memory
    /// (`DatabaseOptions::deferred_fast_path`).
    fast_path_on: AtomicBool,
    /// DELETEs written by the in-memory fast path since open.
    pub(crate) fast_path_deletes: AtomicU64,
}

impl DeferredRegistry {
    /// A registry for a database whose marker file says `marker` (see [`read_marker`]).
    pub(crate) fn new(marker: Option<BTreeSet<TreeId>>) -> DeferredRegistry {
        let registry = DeferredRegistry::default();
        {
            let mut state = registry.state.write();
            state.marker = marker.clone().unwrap_or_default();
            state.recorded_before_load = marker;
        }
        registry
    }

    /// Turns the in-memory fast path on or off (`DatabaseOptions::deferred_fast_path`).
    pub(crate) fn set_fast_path(&self, on: bool) {
        self.fast_path_on.store(on, Ordering::Relaxed);
    }

    pub(crate) fn fast_path(&self) -> bool {
        self.fast_path_on.load(Ordering::Relaxed)
    }

    /// Counts the fast-path DELETEs of a committed write.
    pub(crate) fn fast_path_deletes_written(&self, deletes: u64) {
        self.fast_path_deletes.fetch_add(deletes, Ordering::Relaxed);
    }

    /// The primaries the marker file must name: those with deferred indexes, plus `extra`.
    /// `None` if the file already names exactly these (or, with `extra`, a superset).
    pub(crate) fn marker_update(&self, extra: Option<TreeId>) -> Option<BTreeSet<TreeId>> {
        let state = self.state.read();
        if let Some(id) = extra {
            return (!state.marker.contains(&id)).then(|| {
                let mut wanted = state.marker.clone();
                wanted.insert(id);
                wanted
            });
        }
        let wanted: BTreeSet<TreeId> = state.by_primary.keys().copied().collect();
        (wanted != state.marker).then_some(wanted)
    }

    pub(crate) fn marker_written(&self, primaries: BTreeSet<TreeId>) {
        self.state.write().marker = primaries;
    }

    /// Installs the deferred indexes of `collections` and marks the catalog loaded.
    pub(crate) fn replace<'a>(&self, collections: impl Iterator<Item = &'a Arc<Collection>>) {
        let mut by_primary: HashMap<TreeId, Vec<Arc<Index>>> = HashMap::new();
        for collection in collections {
            let deferred: Vec<Arc<Index>> = collection
                .indexes
                .iter()
                .filter(|index| is_deferred(index))
                .cloned()
                .collect();
            if !deferred.is_empty() {
                by_primary.insert(collection.primary.id(), deferred);
            }
        }
        let mut state = self.state.write();
        state.by_primary = by_primary;
        state.loaded = true;
    }

    pub(crate) fn emit_deletes(
        &self,
        indexes: &[Arc<Index>],
        pk: &[u8],
        seq: SeqNo,
        envelope: &[u8],
        emit: &mut WriteBatch,
    ) {
        let Ok(envelope) = EnvelopeRef::decode(envelope) else {
            self.undecodable_versions.fetch_add(1, Ordering::Relaxed);
            return;
        };
        for index in indexes {
            let (Some(tree), Some(value)) =
                (index.kind.tree(), index.encoded_value(&envelope, seq))
            else {
                continue;
            };
            emit.delete(tree, &deferred_key(&value, seq, pk));
            self.deletes_emitted.fetch_add(1, Ordering::Relaxed);
        }
    }
}

pub(crate) fn is_deferred(index: &Index) -> bool {
    index.record.maintenance == crate::catalog::Maintenance::Deferred
}

/// The compaction observer installed by `Database::open`.
pub(crate) struct DeferredObserver {
    pub(crate) registry: Arc<DeferredRegistry>,
}

impl CompactionObserver for DeferredObserver {
    fn on_drop(&self, _job: JobKind, entry: &DroppedEntry<'_>, emit: &mut WriteBatch) {
        // Only a put has index entries; a dropped tombstone had none.
        if entry.kind != ValueKind::Put {
            return;
        }
        let state = self.registry.state.read();
        if !state.loaded {
            let recorded = state
                .recorded_before_load
                .as_ref()
                .is_none_or(|primaries| primaries.contains(&entry.tree));
            if recorded && entry.tree != DEFAULT_TREE_ID {
                emit.put_in(
                    DEFAULT_TREE_ID,
                    &pending_key(entry.tree, entry.seq, entry.user_key),
                    entry.value,
                );
            }
            return;
        }
        if let Some(indexes) = state.by_primary.get(&entry.tree) {
            self.registry
                .emit_deletes(indexes, entry.user_key, entry.seq, entry.value, emit);
        }
    }
}

/// The newest version of a key in one tree's memtables, read from memory only: the fast
/// path's read. One view serves a whole batch (built under the write lock, so no write of the
/// primary can come between the view and the commit).
pub(crate) struct MemtableVersions {
    view: ComponentView,
    memtables: Vec<ComponentId>,
}

/// What the memtables say about a key.
pub(crate) enum MemtableVersion {
    /// No version in any memtable: the live version, if any, is in a table (its DELETE is
    /// left to the observer).
    Absent,
    /// The newest version is a tombstone (or a merge operand, which primaries never hold).
    NotLive,
    /// The newest version is this put: (envelope, sequence number). It is the live version,
    /// since every primary version in a table is older than every one in a memtable.
    Live(Vec<u8>, SeqNo),
}

impl MemtableVersions {
    pub(crate) fn new(engine: &Db, tree: &Tree) -> Result<MemtableVersions> {
        let view = engine.components(tree, &ReadOptions::default())?;
        let memtables = view
            .ids()
            .into_iter()
            .filter(|id| {
                matches!(
                    id,
                    ComponentId::Memtable | ComponentId::ImmutableMemtable(_)
                )
            })
            .collect();
        Ok(MemtableVersions { view, memtables })
    }

    /// The live version of `key` if it is in a memtable, reading through `view` (made on first
    /// use, for the rest of the batch).
    pub(crate) fn live(
        view: &mut Option<MemtableVersions>,
        engine: &Db,
        tree: &Tree,
        key: &[u8],
    ) -> Result<Option<(Vec<u8>, SeqNo)>> {
        let versions = match view {
            Some(versions) => versions,
            None => view.insert(MemtableVersions::new(engine, tree)?),
        };
        Ok(match versions.newest(key)? {
            MemtableVersion::Live(envelope, seq) => Some((envelope, seq)),
            MemtableVersion::Absent | MemtableVersion::NotLive => None,
        })
    }

    /// Memtables newest first; the first that holds `key` has its newest version.
    pub(crate) fn newest(&self, key: &[u8]) -> Result<MemtableVersion> {
        for id in &self.memtables {
            let mut iter = self.view.iter(*id)?;
            iter.seek(key)?;
            if iter.valid() && iter.user_key() == key {
                return Ok(match iter.kind() {
                    ValueKind::Put => MemtableVersion::Live(iter.value().to_vec(), iter.seq()),
                    ValueKind::Delete | ValueKind::Merge => MemtableVersion::NotLive,
                });
            }
        }
        Ok(MemtableVersion::Absent)
    }
}

/// What a deferred index holds beyond its live entries.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DeferredGarbage {
    /// Entries a scan of the index tree sees (not cancelled by a DELETE).
    pub index_entries: u64,
    /// Documents whose live version carries a value: each has exactly one valid entry.
    pub live_entries: u64,
    /// `index_entries - live_entries`: entries of dead versions whose DELETE has not been
    /// emitted yet (the version is still in the primary, shadowed but not compacted away).
    pub garbage_entries: u64,
    /// Entries stored in the index tree's tables (file metadata, no I/O): live entries,
    /// garbage, cancelled entries not yet compacted away, and DELETEs.
    pub stored_entries: u64,
    /// DELETEs stored in the index tree's tables (file metadata).
    pub stored_tombstones: u64,
    /// DELETEs the observer emitted since open, over every deferred index.
    pub deletes_emitted: u64,
    /// Dropped versions recorded before the catalog was loaded and handled at open, since open.
    pub pending_versions_applied: u64,
    /// Dropped versions whose stored envelope did not decode, since open (their entries stay
    /// as garbage; queries still validate them away).
    pub undecodable_versions: u64,
    /// DELETEs written by the in-memory fast path since open, over every deferred index.
    pub fast_path_deletes: u64,
}
