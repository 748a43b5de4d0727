//! Databases that one experiment loaded and later experiments measure again.
//!
//! Experiment 1 times the load of every configuration and attribute; experiment 2 queries
//! those same databases, experiment 3 starts its three mixed workloads from copies of the
//! UserID ones, and experiment 4 compares its uncompressed loads with them. Loading each once
//! is most of what lets the quick preset run ten times more documents in the same five
//! minutes. A database is kept closed and settled (flushed, compactions and asynchronous
//! index updates done), so whoever opens it next meets the tree the load left.

use crate::engines::index::IndexSlot;
use crate::presets::EngineSettings;
use sift_bench::index::BenchError;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// What a kept database holds: the first `documents` of the study's data, loaded with
/// `settings` into a database with one index per slot (none: the baseline).
#[derive(Debug, Clone, PartialEq)]
pub struct LoadKey {
    pub settings: EngineSettings,
    pub documents: u64,
    pub slots: Vec<IndexSlot>,
}

/// What the loading experiment measured that a later one compares with.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct LoadSummary {
    /// Mean PUT latency of the timed load; `None` when the load was not timed.
    pub put_latency_mean_us: Option<f64>,
}

struct Kept {
    key: LoadKey,
    dir: tempfile::TempDir,
    summary: LoadSummary,
}

/// The databases kept during one run of the study (removed with the run's work directory).
#[derive(Default)]
pub struct SharedDatabases {
    kept: Mutex<Vec<Kept>>,
}

impl SharedDatabases {
    pub fn new() -> SharedDatabases {
        SharedDatabases::default()
    }

    /// Keeps the closed, settled database in `dir`, loaded as `key`; replaces one kept
    /// under the same key.
    pub fn keep(&self, key: LoadKey, dir: tempfile::TempDir, summary: LoadSummary) {
        let mut kept = self.lock();
        kept.retain(|entry| entry.key != key);
        kept.push(Kept { key, dir, summary });
    }

    /// The directory of the database kept as `key`, and what its load measured.
    pub fn find(&self, key: &LoadKey) -> Option<(PathBuf, LoadSummary)> {
        self.lock()
            .iter()
            .find(|entry| &entry.key == key)
            .map(|entry| (entry.dir.path().to_path_buf(), entry.summary))
    }

    /// How many databases are kept.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Kept>> {
        // A panic while holding the lock leaves the list itself consistent.
        self.kept
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// A database about to be measured: the one kept under its key, or a fresh directory to load
/// it into (and keep afterwards, with [`Loading::keep`]).
pub struct Loading {
    key: LoadKey,
    path: PathBuf,
    fresh: Option<tempfile::TempDir>,
    /// What the kept database's load measured; the loader fills it for a fresh one.
    pub summary: LoadSummary,
}

impl Loading {
    /// The database kept as `key` when `reuse` and there is one, else a fresh directory
    /// from `fresh_dir`.
    pub fn new(
        shared: &SharedDatabases,
        key: LoadKey,
        reuse: bool,
        fresh_dir: impl FnOnce() -> Result<tempfile::TempDir, BenchError>,
    ) -> Result<Loading, BenchError> {
        if reuse {
            if let Some((path, summary)) = shared.find(&key) {
                return Ok(Loading {
                    key,
                    path,
                    fresh: None,
                    summary,
                });
            }
        }
        let dir = fresh_dir()?;
        Ok(Loading {
            key,
            path: dir.path().to_path_buf(),
            fresh: Some(dir),
            summary: LoadSummary::default(),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Whether the database still has to be loaded.
    pub fn is_fresh(&self) -> bool {
        self.fresh.is_some()
    }

    /// Keeps a freshly loaded (closed, settled) database for the next experiments; a kept one
    /// stays kept.
    pub fn keep(self, shared: &SharedDatabases) {
        if let Some(dir) = self.fresh {
            shared.keep(self.key, dir, self.summary);
        }
    }
}

/// Copies the closed database in `from` into the empty directory `to`: table files are
/// hard-linked where the file system allows (they are never written after creation, and each
/// copy deletes only its own link when it compacts them away), everything else is copied.
pub fn copy_database(from: &Path, to: &Path) -> Result<(), BenchError> {
    let failed = |what: &str, path: &Path, error: std::io::Error| {
        BenchError::new(format!(
            "copying the database {}: cannot {what} {}: {error}",
            from.display(),
            path.display()
        ))
    };
    std::fs::create_dir_all(to).map_err(|e| failed("create", to, e))?;
    let entries = std::fs::read_dir(from).map_err(|e| failed("list", from, e))?;
    for entry in entries {
        let entry = entry.map_err(|e| failed("list", from, e))?;
        let source = entry.path();
        let target = to.join(entry.file_name());
        let file_type = entry.file_type().map_err(|e| failed("stat", &source, e))?;
        if file_type.is_dir() {
            copy_database(&source, &target)?;
        } else if source
            .extension()
            .is_some_and(|extension| extension == "sst")
        {
            if std::fs::hard_link(&source, &target).is_err() {
                std::fs::copy(&source, &target).map_err(|e| failed("copy", &source, e))?;
            }
        } else {
            std::fs::copy(&source, &target).map_err(|e| failed("copy", &source, e))?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use sift_workload::Attribute;

    fn key(documents: u64) -> LoadKey {
        LoadKey {
            settings: crate::presets::engine_for(1 << 20),
            documents,
            slots: vec![IndexSlot {
                attribute: Attribute::UserId,
                path: "user.id".to_owned(),
                attr_type: sift_index::AttrType::Int,
                kind: "lazy".to_owned(),
                maintenance: None,
            }],
        }
    }

    #[test]
    fn finds_only_what_was_kept_under_the_same_key() {
        let shared = SharedDatabases::new();
        assert!(shared.find(&key(10)).is_none());
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().to_path_buf();
        let summary = LoadSummary {
            put_latency_mean_us: Some(3.5),
        };
        shared.keep(key(10), dir, summary);
        assert_eq!(shared.find(&key(10)), Some((path.clone(), summary)));
        assert!(shared.find(&key(11)).is_none(), "another document count");
        let replacement = tempfile::tempdir().unwrap();
        shared.keep(key(10), replacement, LoadSummary::default());
        assert_eq!(shared.len(), 1);
        assert!(!path.exists(), "the replaced database is removed");
    }

    #[test]
    fn a_loading_reuses_what_is_kept_and_keeps_what_it_loads() {
        let shared = SharedDatabases::new();
        let fresh = || tempfile::tempdir().map_err(|e| BenchError::new(e.to_string()));
        let mut loading = Loading::new(&shared, key(10), true, fresh).unwrap();
        assert!(loading.is_fresh(), "nothing kept yet");
        loading.summary.put_latency_mean_us = Some(2.0);
        let path = loading.path().to_path_buf();
        loading.keep(&shared);
        let again = Loading::new(&shared, key(10), true, fresh).unwrap();
        assert!(!again.is_fresh());
        assert_eq!(again.path(), path);
        assert_eq!(again.summary.put_latency_mean_us, Some(2.0));
        again.keep(&shared);
        assert_eq!(shared.len(), 1, "keeping a kept database adds nothing");
        let timed = Loading::new(&shared, key(10), false, fresh).unwrap();
        assert!(timed.is_fresh(), "a timed load never reuses");
        assert_ne!(timed.path(), path);
    }

    #[test]
    fn copies_link_tables_and_copy_the_rest() {
        let from = tempfile::tempdir().unwrap();
        std::fs::write(from.path().join("000007.sst"), b"table").unwrap();
        std::fs::write(from.path().join("MANIFEST-000002"), b"manifest").unwrap();
        std::fs::create_dir(from.path().join("sub")).unwrap();
        std::fs::write(from.path().join("sub").join("000009.sst"), b"t2").unwrap();
        let to = tempfile::tempdir().unwrap();
        let target = to.path().join("copy");
        copy_database(from.path(), &target).unwrap();
        assert_eq!(std::fs::read(target.join("000007.sst")).unwrap(), b"table");
        assert_eq!(std::fs::read(target.join("sub/000009.sst")).unwrap(), b"t2");
        // The manifest is a copy: writing the copy's leaves the original as it was.
        std::fs::write(target.join("MANIFEST-000002"), b"changed").unwrap();
        assert_eq!(
            std::fs::read(from.path().join("MANIFEST-000002")).unwrap(),
            b"manifest"
        );
        // Removing a linked table from the copy leaves the original's.
        std::fs::remove_file(target.join("000007.sst")).unwrap();
        assert!(from.path().join("000007.sst").exists());
        assert!(copy_database(&from.path().join("missing"), &to.path().join("x")).is_err());
    }
}
