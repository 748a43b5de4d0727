//! A region's state machine: a Sift database (collections and their co-located indexes)
//! that applies the region's committed commands in log order.
//!
//! The last applied log id and the membership are stored in the same engine as the data
//! (tree `raft.applied`, which the index layer leaves alone), written after the entries they
//! cover. The engine's log is sequential, so after a crash the recorded position is never
//! ahead of the data: openraft re-applies the entries after it, and applying an entry again
//! leaves the state it left (puts replace, deletes of missing documents do nothing, and a
//! collection that exists is not created again).
//!
//! Snapshots are engine checkpoints (`sift_lsm::Db::checkpoint`: the tables hard-linked, a new
//! manifest) packed into a tar archive (`docs/format/region-snapshot.md`). The applied
//! position is taken with the checkpoint while no entry is being applied, so the snapshot's
//! log id names exactly the entries its data holds. Installing one unpacks it into a new
//! database directory under the region's data root, switches `ACTIVE` to it and reopens.

use crate::log_store::{decode, encode, io_error, open_tree};
use crate::snapshot_file::SnapshotArchive;
use crate::types::{Command, CommandResult, SnapshotData, TypeConfig};
use arc_swap::ArcSwap;
use futures_util::StreamExt;
use openraft::alias::{LogIdOf, SnapshotMetaOf, SnapshotOf, StoredMembershipOf};
use openraft::storage::{EntryResponder, RaftStateMachine};
use openraft::{EntryPayload, RaftSnapshotBuilder, StoredMembership};
use parking_lot::Mutex;
use serde::{Deserialize, Serialize};
use sift_index::{Database, DatabaseOptions, IndexError};
use sift_lsm::{Tree, WriteOptions};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The file under a region's data root naming its active database directory.
pub const ACTIVE_FILE: &str = "ACTIVE";

/// Name of the tree holding the applied position, in the region's engine.
pub const APPLIED_TREE: &str = "raft.applied";
const APPLIED_KEY: &[u8] = b"applied";

/// What the state machine has applied: the position and the membership it ended with.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
struct AppliedState {
    last_applied: Option<LogIdOf<TypeConfig>>,
    membership: StoredMembershipOf<TypeConfig>,
}

/// The database a state machine applies to, with the tree of its applied position.
struct Active {
    database: Arc<Database>,
    applied_tree: Tree,
    /// Its directory under the data root is `db-<generation>` (`database_dir_name`).
    generation: u64,
}

struct Inner {
    root: PathBuf,
    options: DatabaseOptions,
    active: ArcSwap<Active>,
    applied: Mutex<AppliedState>,
    /// Held by `apply` for a whole batch and by a snapshot while it checkpoints, so a
    /// snapshot's position is the one its data is at.
    apply_gate: tokio::sync::Mutex<()>,
    /// The last snapshot built or installed (sent to replicas that need one): its archive is
    /// a `snapshot-<n>.tar` file under the root, removed when a newer one replaces it.
    current: Mutex<Option<(SnapshotMetaOf<TypeConfig>, SnapshotArchive)>>,
}

/// A region replica's state machine. Clones share the database: the replica reads through
/// one while openraft applies through another.
#[derive(Clone)]
pub struct StateMachine {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for StateMachine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StateMachine")
            .field("root", &self.inner.root)
            .field("last_applied", &self.inner.applied.lock().last_applied)
            .finish_non_exhaustive()
    }
}

/// Whether a failed write is the command's fault (every replica refuses it the same way)
/// rather than the replica's (an I/O error, corruption), which must stop the replica.
fn is_rejection(error: &IndexError) -> bool {
    !matches!(
        error,
        IndexError::Engine(_)
            | IndexError::Io { .. }
            | IndexError::Internal(_)
            | IndexError::Corrupt { .. }
            | IndexError::CorruptCatalog { .. }
            | IndexError::CorruptDocument { .. }
            | IndexError::CorruptIndexEntry { .. }
            | IndexError::InconsistentIndex { .. }
            | IndexError::IndexingFailed { .. }
    )
}

/// Opens the database in `dir` with its applied-position tree, and reads the position.
fn open_active(
    root: &Path,
    generation: u64,
    options: &DatabaseOptions,
) -> io::Result<(Active, AppliedState)> {
    let dir = root.join(database_dir_name(generation));
    let dir = dir.as_path();
    let database = Database::open(dir, options.clone()).map_err(|e| {
        io_error(
            &format!("cannot open the region database {}", dir.display()),
            e,
        )
    })?;
    let applied_tree = open_tree(database.engine(), APPLIED_TREE)
        .map_err(|e| io_error("cannot open the applied position", e))?;
    let applied = match database
        .engine()
        .get(&applied_tree, APPLIED_KEY)
        .map_err(|e| io_error("cannot read the applied position", e))?
    {
        Some(entry) => decode("applied position", &entry.value)?,
        None => AppliedState::default(),
    };
    let active = Active {
        database: Arc::new(database),
        applied_tree,
        generation,
    };
    Ok((active, applied))
}

/// Replaces `root/name` with `text`, durably (temp file, sync, rename, directory sync).
fn write_durably(root: &Path, name: &str, text: &str) -> io::Result<()> {
    let temp = root.join(format!("{name}.tmp"));
    {
        let mut file = std::fs::File::create(&temp)?;
        std::io::Write::write_all(&mut file, text.as_bytes())?;
        file.sync_all()?;
    }
    std::fs::rename(&temp, root.join(name))?;
    std::fs::File::open(root)?.sync_all()
}

/// The directory of database generation `generation` under a data root.
fn database_dir_name(generation: u64) -> String {
    format!("db-{generation}")
}

impl StateMachine {
    /// The state machine of the region whose data lives under `root` (created if missing):
    /// the database in the directory `ACTIVE` names, `db-0` at first.
    pub fn open(root: &Path, options: DatabaseOptions) -> io::Result<StateMachine> {
        std::fs::create_dir_all(root)
            .map_err(|e| io_error(&format!("cannot create {}", root.display()), e))?;
        let active_path = root.join(ACTIVE_FILE);
        let generation = match std::fs::read_to_string(&active_path) {
            Ok(text) => text
                .trim()
                .strip_prefix("db-")
                .and_then(|n| n.parse::<u64>().ok())
                .ok_or_else(|| {
                    io::Error::new(
                        io::ErrorKind::InvalidData,
                        format!(
                            "{}: not a database name (db-<n>): {text:?}",
                            active_path.display()
                        ),
                    )
                })?,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                write_durably(root, ACTIVE_FILE, &format!("{}\n", database_dir_name(0)))?;
                0
            }
            Err(e) => return Err(io_error("cannot read the active database name", e)),
        };
        let (active, applied) = open_active(root, generation, &options)?;
        // Snapshot archives of an earlier run (built, received, or half-written) are not
        // used again: a replica builds a new one when a follower needs it.
        for entry in std::fs::read_dir(root)
            .map_err(|e| io_error(&format!("cannot list {}", root.display()), e))?
            .flatten()
        {
            if entry.file_name().to_str().is_some_and(is_snapshot_file) {
                let _ = std::fs::remove_file(entry.path());
            }
        }
        Ok(StateMachine {
            inner: Arc::new(Inner {
                root: root.to_path_buf(),
                options,
                active: ArcSwap::from_pointee(active),
                applied: Mutex::new(applied),
                apply_gate: tokio::sync::Mutex::new(()),
                current: Mutex::new(None),
            }),
        })
    }

    /// The database the region's commands are applied to (for reads). A snapshot install
    /// replaces it: hold the handle for one operation, not for ever.
    pub fn database(&self) -> Arc<Database> {
        Arc::clone(&self.inner.active.load().database)
    }

    /// Whether this is the last handle on the state machine (openraft has let go of it).
    pub fn is_sole_handle(&self) -> bool {
        Arc::strong_count(&self.inner) == 1
    }

    /// The last applied log id.
    pub fn last_applied(&self) -> Option<LogIdOf<TypeConfig>> {
        self.inner.applied.lock().last_applied
    }

    /// One atomic write if every document is valid; otherwise each document alone, so that
    /// the valid ones are stored and the others rejected — the same on every replica.
    fn apply_put_many(
        database: &Database,
        collection: &str,
        documents: &[Vec<u8>],
    ) -> io::Result<CommandResult> {
        let operations: Vec<sift_index::WriteOp<'_>> = documents
            .iter()
            .map(|document| sift_index::WriteOp::Put(document))
            .collect();
        match database.write(collection, &operations) {
            Ok(_) => {
                return Ok(CommandResult::Batch {
                    written: documents.len() as u64,
                    rejected: Vec::new(),
                })
            }
            Err(e) if !is_rejection(&e) => {
                return Err(io_error("cannot apply a batch of documents", e))
            }
            Err(_) => {}
        }
        let mut written = 0;
        let mut rejected = Vec::new();
        for (position, document) in documents.iter().enumerate() {
            match database.put(collection, document) {
                Ok(_) => written += 1,
                Err(e) if is_rejection(&e) => {
                    rejected.push((u32::try_from(position).unwrap_or(u32::MAX), e.to_string()));
                }
                Err(e) => return Err(io_error("cannot apply a batch of documents", e)),
            }
        }
        Ok(CommandResult::Batch { written, rejected })
    }

    fn apply_command(database: &Database, command: &Command) -> io::Result<CommandResult> {
        let outcome = match command {
            Command::CreateCollection { name, pk_path } => {
                match database.create_collection(name, pk_path) {
                    Ok(_) => Ok(CommandResult::Applied),
                    Err(IndexError::AlreadyExists { .. }) => {
                        let same = database
                            .collection(name)
                            .is_ok_and(|info| info.record.pk_path == *pk_path);
                        return Ok(if same {
                            CommandResult::Applied
                        } else {
                            CommandResult::Rejected {
                                reason: format!(
                                    "collection {name:?} exists with another primary-key path"
                                ),
                            }
                        });
                    }
                    Err(e) => Err(e),
                }
            }
            Command::Put {
                collection,
                document,
            } => database
                .put(collection, document)
                .map(|sequence| CommandResult::Written { sequence }),
            Command::Delete { collection, pk } => {
                database
                    .delete(collection, pk)
                    .map(|written| match written {
                        Some(sequence) => CommandResult::Written { sequence },
                        None => CommandResult::NotFound,
                    })
            }
            Command::CreateIndex {
                collection,
                definition,
            } => {
                let spec = match definition.to_spec() {
                    Ok(spec) => spec,
                    Err(reason) => return Ok(CommandResult::Rejected { reason }),
                };
                match database.create_index(collection, spec.clone()) {
                    Ok(_) => Ok(CommandResult::Applied),
                    // Applied again (a replay after a crash), or asked twice: the same index
                    // is no error; another one under that name is.
                    Err(IndexError::AlreadyExists { .. }) => {
                        let same = database.collection(collection).is_ok_and(|info| {
                            info.indexes.iter().any(|index| {
                                index.name == spec.name
                                    && index.path == spec.path
                                    && index.attr_type == spec.attr_type
                                    && index.kind == spec.kind
                            })
                        });
                        return Ok(if same {
                            CommandResult::Applied
                        } else {
                            CommandResult::Rejected {
                                reason: format!(
                                    "collection {collection:?} has another index named {:?}",
                                    spec.name
                                ),
                            }
                        });
                    }
                    Err(e) => Err(e),
                }
            }
            Command::PutMany {
                collection,
                documents,
            } => return Self::apply_put_many(database, collection, documents),
            Command::DropIndex { collection, name } => {
                match database.drop_index(collection, name) {
                    Ok(()) => Ok(CommandResult::Applied),
                    Err(IndexError::UnknownIndex { .. }) => return Ok(CommandResult::NotFound),
                    Err(e) => Err(e),
                }
            }
        };
        match outcome {
            Ok(result) => Ok(result),
            Err(e) if is_rejection(&e) => Ok(CommandResult::Rejected {
                reason: e.to_string(),
            }),
            Err(e) => Err(io_error("cannot apply a command", e)),
        }
    }

    fn save_applied(active: &Active, state: &AppliedState) -> io::Result<()> {
        let bytes = encode("applied position", state)?;
        let engine = active.database.engine();
        let mut batch = sift_lsm::WriteBatch::new();
        batch.put(&active.applied_tree, APPLIED_KEY, &bytes);
        // Not synced: the raft log is the durable record; after a crash the entries after a
        // lost position are applied again.
        engine
            .write(batch, &WriteOptions { sync: false })
            .map(drop)
            .map_err(|e| io_error("cannot save the applied position", e))
    }

    /// Builds a snapshot: a checkpoint of the active database, archived to a file.
    async fn build(&self) -> io::Result<SnapshotOf<TypeConfig, SnapshotData>> {
        let building = self.inner.root.join("snapshot.building");
        if building.exists() {
            std::fs::remove_dir_all(&building)
                .map_err(|e| io_error("cannot clear an unfinished snapshot", e))?;
        }
        let applied = {
            let _gate = self.inner.apply_gate.lock().await;
            let active = self.inner.active.load_full();
            active
                .database
                .engine()
                .checkpoint(&building)
                .map_err(|e| io_error("cannot checkpoint the region database", e))?;
            self.inner.applied.lock().clone()
        };
        let path = self.inner.root.join(snapshot_file_name());
        let archived = archive(&building, &path);
        std::fs::remove_dir_all(&building)
            .map_err(|e| io_error("cannot remove the checkpoint", e))?;
        archived.map_err(|e| io_error("cannot archive the checkpoint", e))?;
        let snapshot = SnapshotArchive::open(&path)
            .map_err(|e| io_error(&format!("cannot open {}", path.display()), e))?;
        let meta = SnapshotMetaOf::<TypeConfig> {
            last_log_id: applied.last_applied,
            last_membership: applied.membership,
        };
        self.replace_current(meta.clone(), snapshot.clone());
        Ok(SnapshotOf::<TypeConfig, SnapshotData> { meta, snapshot })
    }

    /// Makes `snapshot` the one sent to replicas that need one; removes the previous file
    /// (readers that opened it keep reading it).
    fn replace_current(&self, meta: SnapshotMetaOf<TypeConfig>, snapshot: SnapshotArchive) {
        let previous = self.inner.current.lock().replace((meta, snapshot));
        if let Some((_, previous)) = previous {
            if previous.path().starts_with(&self.inner.root) {
                let _ = std::fs::remove_file(previous.path());
            }
        }
    }
}

/// A new file name for a snapshot archive under a data root (unique within the process's
/// life and across restarts: the leftovers of earlier runs are removed at open).
fn snapshot_file_name() -> String {
    static COUNTER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let count = COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    format!("snapshot-{nanos}-{count}.tar")
}

/// Whether `name` is a snapshot archive or a partial one (removed at open: a replica's
/// current snapshot is not kept across restarts).
fn is_snapshot_file(name: &str) -> bool {
    name.starts_with("snapshot-") || name.starts_with("snapshot.receiving-")
}

/// Packs the files of checkpoint directory `dir` into a tar archive at `path` (written to a
/// temporary name, synced, then renamed).
fn archive(dir: &Path, path: &Path) -> io::Result<()> {
    let temporary = path.with_extension("tar.partial");
    let file = std::fs::File::create(&temporary)?;
    let mut builder = tar::Builder::new(io::BufWriter::new(file));
    let mut names: Vec<_> = std::fs::read_dir(dir)?
        .map(|entry| entry.map(|e| e.file_name()))
        .collect::<io::Result<_>>()?;
    names.sort();
    for name in names {
        builder.append_path_with_name(dir.join(&name), &name)?;
    }
    let file = builder
        .into_inner()?
        .into_inner()
        .map_err(io::IntoInnerError::into_error)?;
    file.sync_all()?;
    std::fs::rename(&temporary, path)
}

/// Unpacks a snapshot archive into the new directory `dir`: plain files only, no paths.
fn unpack<R: io::Read>(reader: R, dir: &Path) -> io::Result<()> {
    std::fs::create_dir_all(dir)?;
    let mut archive = tar::Archive::new(reader);
    for entry in archive.entries()? {
        let mut entry = entry?;
        let path = entry.path()?.into_owned();
        let name = match (path.file_name(), path.components().count()) {
            (Some(name), 1) if entry.header().entry_type().is_file() => name.to_owned(),
            _ => {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!(
                        "snapshot archive entry {} is not a plain file name",
                        path.display()
                    ),
                ))
            }
        };
        let mut file = std::fs::File::create(dir.join(&name))?;
        io::copy(&mut entry, &mut file)?;
        file.sync_all()?;
    }
    std::fs::File::open(dir)?.sync_all()
}

/// Puts the archive at `path`: a hard link to its file if that still holds this archive
/// (same size, same file), else a copy of its bytes.
fn link_or_copy(archive: &SnapshotArchive, path: &Path) -> io::Result<()> {
    use std::os::unix::fs::MetadataExt;
    let same_file =
        |a: &std::fs::Metadata, b: &std::fs::Metadata| a.dev() == b.dev() && a.ino() == b.ino();
    if let (Ok(on_disk), Ok(opened)) = (std::fs::metadata(archive.path()), archive.metadata()) {
        if same_file(&on_disk, &opened) && std::fs::hard_link(archive.path(), path).is_ok() {
            return Ok(());
        }
    }
    let temporary = path.with_extension("tar.partial");
    let mut file = std::fs::File::create(&temporary)?;
    io::copy(&mut archive.reader(), &mut file)?;
    file.sync_all()?;
    std::fs::rename(&temporary, path)
}

/// Builds a region snapshot when openraft asks for one.
#[derive(Debug)]
pub struct SnapshotBuilder {
    state_machine: StateMachine,
}

impl RaftSnapshotBuilder<TypeConfig> for SnapshotBuilder {
    type SnapshotData = SnapshotData;

    async fn build_snapshot(&mut self) -> Result<SnapshotOf<TypeConfig, SnapshotData>, io::Error> {
        self.state_machine.build().await
    }
}

impl RaftStateMachine<TypeConfig> for StateMachine {
    type SnapshotData = SnapshotData;
    type SnapshotBuilder = SnapshotBuilder;

    async fn applied_state(
        &mut self,
    ) -> Result<(Option<LogIdOf<TypeConfig>>, StoredMembershipOf<TypeConfig>), io::Error> {
        let applied = self.inner.applied.lock();
        Ok((applied.last_applied, applied.membership.clone()))
    }

    async fn apply<Strm>(&mut self, mut entries: Strm) -> Result<(), io::Error>
    where
        Strm: futures_util::Stream<Item = Result<EntryResponder<TypeConfig>, io::Error>>
            + Unpin
            + openraft::OptionalSend,
    {
        let _gate = self.inner.apply_gate.lock().await;
        let active = self.inner.active.load_full();
        let mut state = self.inner.applied.lock().clone();
        let mut responses = Vec::new();
        while let Some(item) = entries.next().await {
            let (entry, responder) = item?;
            let result = match &entry.payload {
                EntryPayload::Blank => CommandResult::Applied,
                EntryPayload::Normal(command) => Self::apply_command(&active.database, command)?,
                EntryPayload::Membership(membership) => {
                    state.membership =
                        StoredMembership::new(Some(entry.log_id), membership.clone());
                    CommandResult::Applied
                }
            };
            state.last_applied = Some(entry.log_id);
            if let Some(responder) = responder {
                responses.push((responder, result));
            }
        }
        Self::save_applied(&active, &state)?;
        *self.inner.applied.lock() = state;
        // Answered once the position covering them is written (in the engine's log order).
        for (responder, result) in responses {
            responder.send(result);
        }
        Ok(())
    }

    async fn get_snapshot_builder(&mut self) -> Self::SnapshotBuilder {
        SnapshotBuilder {
            state_machine: self.clone(),
        }
    }

    async fn install_snapshot(
        &mut self,
        meta: &SnapshotMetaOf<TypeConfig>,
        snapshot: Self::SnapshotData,
    ) -> Result<(), io::Error> {
        let _gate = self.inner.apply_gate.lock().await;
        let old = self.inner.active.load_full();
        let generation = old.generation + 1;
        let dir = self.inner.root.join(database_dir_name(generation));
        if dir.exists() {
            std::fs::remove_dir_all(&dir)
                .map_err(|e| io_error("cannot clear an unfinished snapshot install", e))?;
        }
        unpack(snapshot.reader(), &dir).map_err(|e| io_error("cannot unpack the snapshot", e))?;
        let (active, applied) = open_active(&self.inner.root, generation, &self.inner.options)?;
        // The checkpoint's own position must be the one the leader says it holds.
        if applied.last_applied != meta.last_log_id {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!(
                    "snapshot data is at {:?}, its metadata says {:?}",
                    applied.last_applied, meta.last_log_id
                ),
            ));
        }
        let name = database_dir_name(generation);
        write_durably(&self.inner.root, ACTIVE_FILE, &format!("{name}\n"))?;
        self.inner.active.store(Arc::new(active));
        *self.inner.applied.lock() = AppliedState {
            last_applied: meta.last_log_id,
            membership: meta.last_membership.clone(),
        };
        // Kept as this replica's current snapshot, to pass on: linked where the file system
        // allows (the archive is immutable), copied otherwise.
        let kept = self.inner.root.join(snapshot_file_name());
        link_or_copy(&snapshot, &kept)
            .and_then(|()| SnapshotArchive::open(&kept))
            .map(|archive| self.replace_current(meta.clone(), archive))
            .map_err(|e| io_error("cannot keep the installed snapshot", e))?;
        // The old database closes when its last reader lets go; its directory goes now (open
        // files stay readable until then).
        let old_dir = self.inner.root.join(database_dir_name(old.generation));
        drop(old);
        if old_dir.exists() {
            std::fs::remove_dir_all(&old_dir)
                .map_err(|e| io_error("cannot remove the replaced database", e))?;
        }
        Ok(())
    }

    async fn get_current_snapshot(
        &mut self,
    ) -> Result<Option<SnapshotOf<TypeConfig, Self::SnapshotData>>, io::Error> {
        Ok(self
            .inner
            .current
            .lock()
            .clone()
            .map(|(meta, snapshot)| SnapshotOf::<TypeConfig, SnapshotData> { meta, snapshot }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An archive with one entry whose raw name is `name` (bypassing the builder's checks, as
    /// a damaged or hostile peer could).
    fn archive_with(name: &[u8], entry_type: tar::EntryType) -> Vec<u8> {
        let mut header = tar::Header::new_ustar();
        header.as_old_mut().name[..name.len()].copy_from_slice(name);
        header.set_entry_type(entry_type);
        header.set_size(4);
        header.set_mode(0o644);
        header.set_cksum();
        let mut builder = tar::Builder::new(Vec::new());
        builder.append(&header, &b"data"[..]).unwrap();
        builder.into_inner().unwrap()
    }

    #[test]
    fn unpack_refuses_entries_that_are_not_plain_file_names() {
        let dir = tempfile::tempdir().unwrap();
        for (name, kind) in [
            (&b"../escape"[..], tar::EntryType::Regular),
            (b"/etc/passwd", tar::EntryType::Regular),
            (b"sub/file", tar::EntryType::Regular),
            (b"link", tar::EntryType::Symlink),
        ] {
            let target = dir.path().join("unpacked");
            let error = unpack(&archive_with(name, kind)[..], &target).unwrap_err();
            assert!(
                error.to_string().contains("not a plain file name"),
                "{}: {error}",
                String::from_utf8_lossy(name)
            );
            assert!(!dir.path().join("escape").exists());
            std::fs::remove_dir_all(&target).unwrap();
        }
        let target = dir.path().join("fine");
        unpack(
            &archive_with(b"000001.sst", tar::EntryType::Regular)[..],
            &target,
        )
        .unwrap();
        assert_eq!(std::fs::read(target.join("000001.sst")).unwrap(), b"data");
    }

    #[test]
    fn a_damaged_active_file_is_an_error_naming_it_and_nothing_is_created() {
        let root = tempfile::tempdir().unwrap();
        for text in ["garbage\n", "db-\n", "db-../x\n", "db-1x\n"] {
            std::fs::write(root.path().join(ACTIVE_FILE), text).unwrap();
            let error = StateMachine::open(root.path(), DatabaseOptions::default()).unwrap_err();
            let message = error.to_string();
            assert!(
                message.contains("ACTIVE") && message.contains("not a database name"),
                "{text:?}: {message}"
            );
            assert_eq!(
                std::fs::read_dir(root.path()).unwrap().count(),
                1,
                "{text:?}"
            );
        }
    }
}
