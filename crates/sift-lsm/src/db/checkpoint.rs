//! Checkpoints: a consistent copy of the database in another directory, made of hard links to
//! its table files (copies where links are impossible) and a new manifest describing them.
//!
//! The memtables are flushed first, so the tables hold every write acknowledged before the
//! call; the checkpoint is the database as of its last flush (writes that race with the call
//! may or may not be in it, as with any snapshot taken while writes go on). It has no
//! write-ahead log: opening it starts a new one. Table files are immutable, so a link is a
//! copy that costs nothing; the files stay alive while the checkpoint is made because the
//! manifest state copied under the lock holds them (`FileMetaData` reaps a file only when the
//! last reference to an obsolete one goes).

use super::state::DbInner;
use crate::version::set::VersionSet;
use crate::version::{table_file_name, FileReaper};
use crate::{Error, Result};
use std::path::Path;
use std::sync::Arc;

/// Files of a checkpoint's manifest are never reaped by it: it is closed at once.
struct KeepFiles;

impl FileReaper for KeepFiles {
    fn reap(&self, _file_number: u64) {}
}

impl DbInner {
    /// Writes a checkpoint into `dir`, which must not exist (its parent must).
    pub(crate) fn checkpoint(&self, dir: &Path) -> Result<()> {
        if self.fs.exists(dir) {
            return Err(Error::InvalidArgument(format!(
                "checkpoint directory {} already exists",
                dir.display()
            )));
        }
        let mut state = {
            let state = self.state.lock();
            state.versions.state.clone()
        };
        // Every write-ahead log is left out: recovery of the checkpoint replays none.
        state.log_number = state.next_file_number;
        self.fs.create_dir_all(dir)?;
        for file in state.files.values().flatten().flatten() {
            let name = table_file_name(file.number);
            self.fs
                .link_or_copy(&self.dir.join(&name), &dir.join(&name))?;
        }
        self.fs.sync_dir(dir)?;
        let levels_max = self.options.levels_max;
        let versions = VersionSet::create(
            dir,
            Arc::clone(&self.fs),
            state,
            levels_max,
            Arc::new(KeepFiles),
        )?;
        drop(versions);
        Ok(())
    }
}
