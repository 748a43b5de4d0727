//! A region's raft log and vote, stored in a node's Sift engine (`docs/format/raft-log.md`).
//!
//! One engine per node holds the logs of all its regions: region `r` has the trees
//! `raft.region.<r>.log` (key: the entry's index, 8 bytes big-endian, so key order is log
//! order; value: the entry, postcard-encoded) and `raft.region.<r>.meta` (the vote, the
//! committed log id and the last purged log id). Appends, truncations, purges and votes are
//! written with a synced WAL write before openraft hears they are done: an acknowledged
//! append survives a crash of the machine, as raft requires.

use crate::types::{RegionId, TypeConfig};
use openraft::alias::{EntryOf, LogIdOf, VoteOf};
use openraft::entry::RaftEntry;
use openraft::storage::{IOFlushed, RaftLogStorage};
use openraft::{LogState, RaftLogReader};
use serde::de::DeserializeOwned;
use serde::Serialize;
use sift_lsm::{Db, ReadOptions, Tree, TreeOptions, WriteBatch, WriteOptions};
use std::fmt::Debug;
use std::io;
use std::ops::{Bound, RangeBounds};
use std::sync::Arc;

const VOTE_KEY: &[u8] = b"vote";
const COMMITTED_KEY: &[u8] = b"committed";
const PURGED_KEY: &[u8] = b"purged";

/// The names of region `region`'s log and meta trees.
pub fn log_tree_names(region: RegionId) -> (String, String) {
    (
        format!("raft.region.{region}.log"),
        format!("raft.region.{region}.meta"),
    )
}

/// Opens the tree `name`, creating it if it does not exist.
pub(crate) fn open_tree(db: &Db, name: &str) -> sift_lsm::Result<Tree> {
    match db.tree(name) {
        Ok(tree) => Ok(tree),
        Err(sift_lsm::Error::TreeNotFound(_)) => db.create_tree(name, TreeOptions::default()),
        Err(e) => Err(e),
    }
}

/// An engine error as the I/O error openraft's storage traits carry.
pub(crate) fn io_error(what: &str, error: impl std::fmt::Display) -> io::Error {
    io::Error::other(format!("{what}: {error}"))
}

pub(crate) fn encode<T: Serialize>(what: &str, value: &T) -> io::Result<Vec<u8>> {
    postcard::to_stdvec(value).map_err(|e| io_error(&format!("cannot encode {what}"), e))
}

pub(crate) fn decode<T: DeserializeOwned>(what: &str, bytes: &[u8]) -> io::Result<T> {
    postcard::from_bytes(bytes).map_err(|e| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("corrupt {what} ({} bytes): {e}", bytes.len()),
        )
    })
}

/// The key of log index `index`.
fn index_key(index: u64) -> [u8; 8] {
    index.to_be_bytes()
}

fn key_index(key: &[u8]) -> io::Result<u64> {
    let bytes: [u8; 8] = key.try_into().map_err(|_| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("corrupt raft log key {key:02x?}: not 8 bytes"),
        )
    })?;
    Ok(u64::from_be_bytes(bytes))
}

/// A region's log storage. Clones share the same trees (the log reader is a clone).
#[derive(Clone)]
pub struct LogStore {
    db: Arc<Db>,
    region: RegionId,
    log: Tree,
    meta: Tree,
    /// Shared by this region's clones only: counts them, so that a replica can wait until
    /// openraft has let go of its log store while other regions go on using the engine.
    handles: Arc<()>,
}

impl Debug for LogStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LogStore")
            .field("region", &self.region)
            .finish_non_exhaustive()
    }
}

impl LogStore {
    /// The log of `region` in the node's log engine `db` (its trees are created if missing).
    pub fn open(db: Arc<Db>, region: RegionId) -> io::Result<LogStore> {
        let (log_name, meta_name) = log_tree_names(region);
        let log = open_tree(&db, &log_name).map_err(|e| io_error("cannot open the raft log", e))?;
        let meta =
            open_tree(&db, &meta_name).map_err(|e| io_error("cannot open the raft meta", e))?;
        Ok(LogStore {
            db,
            region,
            log,
            meta,
            handles: Arc::new(()),
        })
    }

    /// A counter of this region's log store handles (every clone, and this one): its strong
    /// count, less the ones the caller holds, is how many are still in use.
    pub fn handles(&self) -> Arc<()> {
        Arc::clone(&self.handles)
    }

    fn read_meta<T: DeserializeOwned>(&self, key: &[u8]) -> io::Result<Option<T>> {
        let found = self
            .db
            .get(&self.meta, key)
            .map_err(|e| io_error("cannot read the raft meta", e))?;
        found
            .map(|entry| decode(&String::from_utf8_lossy(key), &entry.value))
            .transpose()
    }

    /// Writes `batch` with a synced WAL write on a blocking thread (an fdatasync must not
    /// stall the runtime's workers).
    async fn write_synced(&self, batch: WriteBatch, what: &'static str) -> io::Result<()> {
        let db = Arc::clone(&self.db);
        tokio::task::spawn_blocking(move || db.write(batch, &WriteOptions { sync: true }))
            .await
            .map_err(|e| io_error(what, e))?
            .map(drop)
            .map_err(|e| io_error(what, e))
    }

    /// Entries with index in `range`, in order.
    fn entries_in(&self, range: impl RangeBounds<u64>) -> io::Result<Vec<EntryOf<TypeConfig>>> {
        let start = match range.start_bound() {
            Bound::Included(&i) => Some(i),
            Bound::Excluded(&i) => i.checked_add(1),
            Bound::Unbounded => Some(0),
        };
        let Some(start) = start else {
            return Ok(Vec::new());
        };
        let end = match range.end_bound() {
            Bound::Included(&i) => i.checked_add(1),
            Bound::Excluded(&i) => Some(i),
            Bound::Unbounded => None,
        };
        if end.is_some_and(|end| end <= start) {
            return Ok(Vec::new());
        }
        let mut entries = Vec::new();
        self.for_each_stored(start, end, |key, value| {
            let index = key_index(key)?;
            let entry: EntryOf<TypeConfig> = decode("raft log entry", value)?;
            if entry.index() != index {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!(
                        "corrupt raft log of region {}: entry {} stored under index {index}",
                        self.region,
                        entry.index()
                    ),
                ));
            }
            entries.push(entry);
            Ok(())
        })?;
        Ok(entries)
    }

    /// The last entry's log id, if the log holds any entry.
    fn last_log_id(&self) -> io::Result<Option<LogIdOf<TypeConfig>>> {
        let mut iter = self
            .db
            .iter(&self.log, ReadOptions::default())
            .map_err(|e| io_error("cannot read the raft log", e))?;
        iter.seek_to_last()
            .map_err(|e| io_error("cannot read the raft log", e))?;
        if !iter.valid() {
            return Ok(None);
        }
        let entry: EntryOf<TypeConfig> = decode("raft log entry", iter.value())?;
        Ok(Some(entry.log_id()))
    }

    /// Calls `visit` with the key and value of every stored entry with index `>= start` (and
    /// `< end`, if given), in index order.
    fn for_each_stored(
        &self,
        start: u64,
        end: Option<u64>,
        mut visit: impl FnMut(&[u8], &[u8]) -> io::Result<()>,
    ) -> io::Result<()> {
        let options = ReadOptions {
            lower_bound: Some(index_key(start).to_vec()),
            upper_bound: end.map(|end| index_key(end).to_vec()),
            ..ReadOptions::default()
        };
        let failed = |e| io_error("cannot read the raft log", e);
        let mut iter = self.db.iter(&self.log, options).map_err(failed)?;
        iter.seek_to_first().map_err(failed)?;
        while iter.valid() {
            visit(iter.key(), iter.value())?;
            iter.next().map_err(failed)?;
        }
        Ok(())
    }

    /// Adds deletes of every entry with index `>= from` (and `<= to`, if given) to `batch`.
    fn delete_entries(&self, batch: &mut WriteBatch, from: u64, to: Option<u64>) -> io::Result<()> {
        let end = to.and_then(|to| to.checked_add(1));
        self.for_each_stored(from, end, |key, _| {
            batch.delete(&self.log, key);
            Ok(())
        })
    }
}

impl RaftLogReader<TypeConfig> for LogStore {
    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + Debug + openraft::OptionalSend>(
        &mut self,
        range: RB,
    ) -> Result<Vec<EntryOf<TypeConfig>>, io::Error> {
        self.entries_in(range)
    }

    async fn read_vote(&mut self) -> Result<Option<VoteOf<TypeConfig>>, io::Error> {
        self.read_meta(VOTE_KEY)
    }
}

impl RaftLogStorage<TypeConfig> for LogStore {
    type LogReader = LogStore;

    async fn get_log_state(&mut self) -> Result<LogState<TypeConfig>, io::Error> {
        let purged: Option<LogIdOf<TypeConfig>> = self.read_meta(PURGED_KEY)?;
        let last = self.last_log_id()?.or(purged);
        Ok(LogState {
            last_purged_log_id: purged,
            last_log_id: last,
        })
    }

    async fn get_log_reader(&mut self) -> Self::LogReader {
        self.clone()
    }

    async fn save_vote(&mut self, vote: &VoteOf<TypeConfig>) -> Result<(), io::Error> {
        let mut batch = WriteBatch::new();
        batch.put(&self.meta, VOTE_KEY, &encode("vote", vote)?);
        self.write_synced(batch, "cannot save the vote").await
    }

    async fn save_committed(
        &mut self,
        committed: Option<LogIdOf<TypeConfig>>,
    ) -> Result<(), io::Error> {
        // Not synced: a committed id lost in a crash is learned again from the leader.
        let mut batch = WriteBatch::new();
        match committed {
            Some(id) => batch.put(&self.meta, COMMITTED_KEY, &encode("committed log id", &id)?),
            None => batch.delete(&self.meta, COMMITTED_KEY),
        }
        self.db
            .write(batch, &WriteOptions { sync: false })
            .map(drop)
            .map_err(|e| io_error("cannot save the committed log id", e))
    }

    async fn read_committed(&mut self) -> Result<Option<LogIdOf<TypeConfig>>, io::Error> {
        self.read_meta(COMMITTED_KEY)
    }

    async fn append<I>(
        &mut self,
        entries: I,
        callback: IOFlushed<TypeConfig>,
    ) -> Result<(), io::Error>
    where
        I: IntoIterator<Item = EntryOf<TypeConfig>> + openraft::OptionalSend,
        I::IntoIter: openraft::OptionalSend,
    {
        let mut batch = WriteBatch::new();
        for entry in entries {
            let bytes = encode("raft log entry", &entry)?;
            batch.put(&self.log, &index_key(entry.index()), &bytes);
        }
        let written = self
            .write_synced(batch, "cannot append to the raft log")
            .await;
        match written {
            Ok(()) => {
                callback.io_completed(Ok(()));
                Ok(())
            }
            Err(e) => {
                callback.io_completed(Err(io::Error::new(e.kind(), e.to_string())));
                Err(e)
            }
        }
    }

    async fn truncate_after(
        &mut self,
        last_log_id: Option<LogIdOf<TypeConfig>>,
    ) -> Result<(), io::Error> {
        let from = last_log_id.map_or(0, |id| id.index() + 1);
        let mut batch = WriteBatch::new();
        self.delete_entries(&mut batch, from, None)?;
        if batch.is_empty() {
            return Ok(());
        }
        self.write_synced(batch, "cannot truncate the raft log")
            .await
    }

    async fn purge(&mut self, log_id: LogIdOf<TypeConfig>) -> Result<(), io::Error> {
        let mut batch = WriteBatch::new();
        self.delete_entries(&mut batch, 0, Some(log_id.index()))?;
        batch.put(&self.meta, PURGED_KEY, &encode("purged log id", &log_id)?);
        self.write_synced(batch, "cannot purge the raft log").await
    }
}
