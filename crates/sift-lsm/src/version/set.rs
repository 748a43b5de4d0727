//! Versions and the version set.
//!
//! A `Version` is an immutable picture of which files make up each level of each tree. Every
//! flush, compaction and tree creation or drop is a `VersionEdit`, appended to the manifest and
//! then applied to produce the next `Version`; readers hold an `Arc<Version>` so the files they
//! read stay alive until they are done.

use crate::edit_apply::apply_edit_to_state;
use crate::fs::FileSystem;
use crate::key::{compare_internal_keys, SeqNo, TreeId};
use crate::version::edit::{NewFile, VersionEdit};
use crate::version::{manifest_file_name, FileMetaData, FileReaper, CURRENT_FILE_NAME};
use crate::wal::LogWriter;
use crate::{Error, Result};
use parking_lot::Mutex;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The files of one tree, per level. L0 is ordered newest first (overlapping files); deeper
/// levels are sorted by smallest key and do not overlap.
#[derive(Debug, Clone, Default)]
pub struct TreeVersion {
    pub levels: Vec<Vec<Arc<FileMetaData>>>,
}

impl TreeVersion {
    /// Files of `level` whose key range intersects `[start, end]`.
    pub fn overlapping(
        &self,
        level: usize,
        start: Option<&[u8]>,
        end: Option<&[u8]>,
    ) -> Vec<Arc<FileMetaData>> {
        self.levels
            .get(level)
            .map(|files| {
                files
                    .iter()
                    .filter(|f| f.overlaps(start, end))
                    .cloned()
                    .collect()
            })
            .unwrap_or_default()
    }

    /// In a sorted level (1 and deeper), the one file that may hold `user_key`.
    pub fn file_for_key(&self, level: usize, user_key: &[u8]) -> Option<&Arc<FileMetaData>> {
        let files = self.levels.get(level)?;
        let i = files.partition_point(|f| f.largest_user_key() < user_key);
        files.get(i).filter(|f| f.smallest_user_key() <= user_key)
    }

    pub fn all_files(&self) -> impl Iterator<Item = (usize, &Arc<FileMetaData>)> {
        self.levels
            .iter()
            .enumerate()
            .flat_map(|(level, files)| files.iter().map(move |f| (level, f)))
    }
}

/// An immutable picture of the database's files.
#[derive(Debug, Clone, Default)]
pub struct Version {
    pub trees: BTreeMap<TreeId, TreeVersion>,
}

impl Version {
    pub fn tree(&self, id: TreeId) -> Option<&TreeVersion> {
        self.trees.get(&id)
    }
}

/// Everything the manifest records, as replayed.
#[derive(Debug, Clone, Default)]
pub struct ManifestState {
    pub log_number: u64,
    pub next_file_number: u64,
    pub last_sequence: SeqNo,
    pub next_tree_id: TreeId,
    pub trees: BTreeMap<TreeId, String>,
    pub files: BTreeMap<TreeId, Vec<Vec<Arc<FileMetaData>>>>,
    pub compaction_pointers: BTreeMap<(TreeId, usize), Vec<u8>>,
}

impl ManifestState {
    /// Applies one edit; errors name the manifest and the record offset.
    pub fn apply(
        &mut self,
        edit: &VersionEdit,
        levels_max: usize,
        file: &Path,
        offset: u64,
    ) -> Result<()> {
        apply_edit_to_state(self, edit, levels_max, file, offset)
    }

    /// The edit that recreates this whole state (first record of a new manifest).
    pub fn snapshot_edit(&self) -> VersionEdit {
        let mut edit = VersionEdit {
            log_number: Some(self.log_number),
            next_file_number: Some(self.next_file_number),
            last_sequence: Some(self.last_sequence),
            next_tree_id: Some(self.next_tree_id),
            ..VersionEdit::default()
        };
        for (id, name) in &self.trees {
            edit.trees_created.push((*id, name.clone()));
        }
        for ((tree, level), key) in &self.compaction_pointers {
            edit.compaction_pointers.push((*tree, *level, key.clone()));
        }
        for (tree, levels) in &self.files {
            for (level, files) in levels.iter().enumerate() {
                for f in files {
                    edit.new_files.push((*tree, level, NewFile::from_meta(f)));
                }
            }
        }
        edit
    }

    pub fn version(&self, levels_max: usize) -> Version {
        let mut trees = BTreeMap::new();
        for id in self.trees.keys() {
            let levels = self
                .files
                .get(id)
                .cloned()
                .unwrap_or_else(|| vec![Vec::new(); levels_max]);
            trees.insert(*id, TreeVersion { levels });
        }
        Version { trees }
    }
}

/// Sorts a level the way `TreeVersion` requires.
pub fn sort_level(level: usize, files: &mut [Arc<FileMetaData>]) {
    if level == 0 {
        files.sort_by(|a, b| b.seq_max.cmp(&a.seq_max).then(b.number.cmp(&a.number)));
    } else {
        files.sort_by(|a, b| compare_internal_keys(&a.smallest, &b.smallest));
    }
}

/// Default for `Options::manifest_bytes_max`.
pub const MANIFEST_BYTES_MAX: u64 = 64 << 20;

/// The manifest writer plus the state it describes.
pub struct VersionSet {
    dir: PathBuf,
    fs: Arc<dyn FileSystem>,
    pub state: ManifestState,
    /// Shared with a [`PreparedEdit`], which writes to it without the engine's state lock.
    manifest: Arc<Mutex<LogWriter>>,
    /// Set once a manifest record may have been appended without being made durable (a failed
    /// append or sync, a panic while writing, CURRENT not switched to a new manifest). The
    /// manifest may then end in a record that is not in the state, or not be the one CURRENT
    /// names: no later edit may be appended after it. Shared with [`PreparedEdit`].
    write_failure: Arc<Mutex<Option<String>>>,
    pub manifest_number: u64,
    levels_max: usize,
    reaper: Arc<dyn FileReaper>,
    /// The manifest is rewritten from the current state when it grows beyond this.
    pub manifest_bytes_max: u64,
}

impl VersionSet {
    /// Writes a new manifest holding `state` as one snapshot edit, points CURRENT at it and
    /// syncs everything.
    pub fn create(
        dir: &Path,
        fs: Arc<dyn FileSystem>,
        mut state: ManifestState,
        levels_max: usize,
        reaper: Arc<dyn FileReaper>,
    ) -> Result<VersionSet> {
        let manifest_number = state.next_file_number;
        state.next_file_number += 1;
        let path = dir.join(manifest_file_name(manifest_number));
        let file = fs.create(&path)?;
        let mut manifest = LogWriter::new(file, path);
        manifest.add_record(&state.snapshot_edit().encode())?;
        manifest.sync()?;
        set_current(dir, fs.as_ref(), manifest_number)?;
        Ok(VersionSet {
            dir: dir.to_path_buf(),
            fs,
            state,
            manifest: Arc::new(Mutex::new(manifest)),
            write_failure: Arc::new(Mutex::new(None)),
            manifest_number,
            levels_max,
            reaper,
            manifest_bytes_max: MANIFEST_BYTES_MAX,
        })
    }

    pub fn new_file_number(&mut self) -> u64 {
        let n = self.state.next_file_number;
        self.state.next_file_number += 1;
        n
    }

    /// Appends `edit` to the manifest (synced), then applies it to the state. Files the edit
    /// removes are marked obsolete: they are deleted once no version refers to them.
    pub fn log_and_apply(&mut self, edit: &mut VersionEdit) -> Result<()> {
        let prepared = self.prepare(edit)?;
        prepared.write()?;
        self.install(prepared, edit);
        Ok(())
    }

    /// The first step of [`VersionSet::log_and_apply`]: checks `edit` against the state and
    /// encodes its manifest record. Between this call and [`VersionSet::install`] the caller
    /// must let no other edit be prepared or installed (the engine keeps one manifest writer
    /// at a time); file numbers may still be taken.
    pub fn prepare(&mut self, edit: &mut VersionEdit) -> Result<PreparedEdit> {
        if let Some(failure) = &*self.write_failure.lock() {
            return Err(Error::Closed(format!(
                "version edit refused: an earlier manifest write failed ({failure}); \
                 reopen the database"
            )));
        }
        edit.next_file_number = Some(self.state.next_file_number);
        if edit.last_sequence.is_none() {
            edit.last_sequence = Some(self.state.last_sequence);
        }
        // Apply to a copy first: an edit that does not fit the state is refused before it
        // reaches the manifest, where it would make every later open fail.
        let path = self.manifest.lock().path().to_path_buf();
        let mut next = self.state.clone();
        next.apply(edit, self.levels_max, &path, 0).map_err(|e| {
            Error::InvalidArgument(format!("version edit refused, manifest unchanged: {e}"))
        })?;
        Ok(PreparedEdit {
            next,
            encoded: edit.encode(),
            manifest: Arc::clone(&self.manifest),
            write_failure: Arc::clone(&self.write_failure),
        })
    }

    /// Whether a manifest write failed: every later edit is refused until the database is
    /// reopened.
    pub fn write_failed(&self) -> bool {
        self.write_failure.lock().is_some()
    }

    /// The last step of [`VersionSet::log_and_apply`], once `prepared` is written: makes its
    /// state current.
    pub fn install(&mut self, prepared: PreparedEdit, edit: &VersionEdit) {
        let removed: Vec<Arc<FileMetaData>> = self.files_removed_by(edit);
        let mut next = prepared.next;
        // File numbers taken while the record was written are not in it, like every number
        // taken after the latest edit: the next edit records them.
        next.next_file_number = next.next_file_number.max(self.state.next_file_number);
        self.state = next;
        if let Some(last) = edit.last_sequence {
            self.state.last_sequence = self.state.last_sequence.max(last);
        }
        for f in removed {
            f.mark_obsolete(Arc::clone(&self.reaper));
        }
        let manifest_bytes = self.manifest.lock().file_bytes();
        if manifest_bytes > self.manifest_bytes_max {
            // The edit is installed (its record is durable in the current manifest) whatever
            // happens to the roll: a roll that fails before CURRENT is touched leaves the
            // current manifest in use (the next install tries again); one that fails while
            // switching CURRENT records a write failure, so the next edit is refused until
            // `recover_manifest` rolls again. Reporting the failure here instead would leave
            // the edit in this state but not in the engine's version, and a retried job would
            // then apply it twice.
            let _ = self.roll_manifest();
        }
    }

    /// After a failed manifest write (see `write_failed`): starts a fresh manifest holding
    /// the state as one snapshot edit, points CURRENT at it, and accepts edits again. The old
    /// manifest may end in part of a record, or in a whole record that was never installed
    /// (its sync failed): nothing is appended after it, and once CURRENT names the new one, it
    /// is removed. The failed edit is not in the state (`install` never ran for it), so it is
    /// in neither manifest and the job that made it can run again. `last_sequence` is raised
    /// to `allocated_sequence` first (as every edit records it). On failure edits stay refused.
    pub fn recover_manifest(&mut self, allocated_sequence: SeqNo) -> Result<()> {
        if !self.write_failed() {
            return Ok(());
        }
        self.state.last_sequence = self.state.last_sequence.max(allocated_sequence);
        self.roll_manifest()?;
        *self.write_failure.lock() = None;
        Ok(())
    }

    /// Starts a new manifest holding the current state as one edit, so the manifest does not
    /// grow without bound over a long-running process.
    fn roll_manifest(&mut self) -> Result<()> {
        let number = self.new_file_number();
        let path = self.dir.join(manifest_file_name(number));
        let written = (|| {
            let file = self.fs.create(&path)?;
            let mut manifest = LogWriter::new(file, path.clone());
            manifest.add_record(&self.state.snapshot_edit().encode())?;
            manifest.sync()?;
            Ok::<LogWriter, Error>(manifest)
        })();
        let manifest = match written {
            Ok(manifest) => manifest,
            Err(e) => {
                // CURRENT still names the current manifest; this one is never used (or swept
                // by the next open if the removal fails).
                let _ = self.fs.remove(&path);
                return Err(e);
            }
        };
        if let Err(e) = set_current(&self.dir, self.fs.as_ref(), number) {
            // CURRENT may already name the new manifest, which later edits would not reach.
            record_failure(&self.write_failure, e.to_string());
            return Err(e);
        }
        let old = self.dir.join(manifest_file_name(self.manifest_number));
        self.manifest = Arc::new(Mutex::new(manifest));
        self.manifest_number = number;
        // The old manifest is no longer named by CURRENT; a failure to remove it is harmless
        // (the next open removes it).
        let _ = self.fs.remove(&old);
        Ok(())
    }

    fn files_removed_by(&self, edit: &VersionEdit) -> Vec<Arc<FileMetaData>> {
        let mut out = Vec::new();
        for (tree, level, number) in &edit.deleted_files {
            // A file moved to another level (trivial move) stays on disk.
            if edit.new_files.iter().any(|(_, _, f)| f.number == *number) {
                continue;
            }
            if let Some(f) = self
                .state
                .files
                .get(tree)
                .and_then(|levels| levels.get(*level))
                .and_then(|files| files.iter().find(|f| f.number == *number))
            {
                out.push(Arc::clone(f));
            }
        }
        for tree in &edit.trees_dropped {
            if let Some(levels) = self.state.files.get(tree) {
                out.extend(levels.iter().flatten().cloned());
            }
        }
        out
    }

    pub fn version(&self) -> Version {
        self.state.version(self.levels_max)
    }
}

/// An edit checked and encoded by [`VersionSet::prepare`], whose record can be written and
/// synced without holding whatever guards the version set.
pub struct PreparedEdit {
    next: ManifestState,
    encoded: Vec<u8>,
    manifest: Arc<Mutex<LogWriter>>,
    write_failure: Arc<Mutex<Option<String>>>,
}

impl PreparedEdit {
    /// Appends the record to the manifest and syncs it. On failure (or a panic) the version
    /// set refuses every later edit: the record may be in the manifest without being durable.
    pub fn write(&self) -> Result<()> {
        let _on_panic = RecordFailureOnPanic(&self.write_failure);
        let mut manifest = self.manifest.lock();
        let written = manifest
            .add_record(&self.encoded)
            .and_then(|()| manifest.sync());
        if let Err(e) = &written {
            record_failure(&self.write_failure, e.to_string());
        }
        written
    }
}

/// Keeps the first failure: it is the one that explains the state of the manifest.
fn record_failure(write_failure: &Mutex<Option<String>>, failure: String) {
    write_failure.lock().get_or_insert(failure);
}

/// Records a failure if the manifest write unwinds.
struct RecordFailureOnPanic<'a>(&'a Mutex<Option<String>>);

impl Drop for RecordFailureOnPanic<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            record_failure(self.0, "a manifest write panicked".to_owned());
        }
    }
}

/// Points CURRENT at `MANIFEST-<number>` atomically: temp file, sync, rename, sync directory.
pub fn set_current(dir: &Path, fs: &dyn FileSystem, manifest_number: u64) -> Result<()> {
    let tmp = dir.join("CURRENT.tmp");
    let mut file = fs.create(&tmp)?;
    file.append(format!("{}\n", manifest_file_name(manifest_number)).as_bytes())?;
    file.sync()?;
    drop(file);
    fs.rename(&tmp, &dir.join(CURRENT_FILE_NAME))?;
    fs.sync_dir(dir)
}

/// Reads CURRENT and returns the manifest file name it names.
pub fn read_current(dir: &Path, fs: &dyn FileSystem) -> Result<String> {
    let path = dir.join(CURRENT_FILE_NAME);
    let bytes = fs.read_all(&path)?;
    let text = std::str::from_utf8(&bytes)
        .map_err(|_| Error::corruption(&path, 0, "CURRENT is not UTF-8"))?;
    let name = text
        .strip_suffix('\n')
        .ok_or_else(|| Error::corruption(&path, 0, "CURRENT does not end with a newline"))?;
    if !name.starts_with("MANIFEST-") || name.contains('/') {
        return Err(Error::corruption(
            &path,
            0,
            format!("CURRENT names {name:?}, not a manifest"),
        ));
    }
    Ok(name.to_owned())
}
