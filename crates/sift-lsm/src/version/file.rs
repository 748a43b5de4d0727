//! Metadata of one SSTable, as recorded in the manifest, plus the runtime state that keeps the
//! file alive while any version, snapshot or iterator still refers to it.

use crate::extension::Properties;
use crate::key::{user_key, SeqNo};
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::{Arc, OnceLock};

/// Receives the numbers of files that became obsolete and are no longer referenced.
pub trait FileReaper: Send + Sync {
    fn reap(&self, file_number: u64);
}

/// What the manifest records of a table, with its runtime state.
pub struct FileMetaData {
    /// The file number.
    pub number: u64,
    /// The file's size.
    pub file_bytes: u64,
    /// Smallest and largest internal keys in the file.
    pub smallest: Vec<u8>,
    /// Largest internal key.
    pub largest: Vec<u8>,
    /// Smallest sequence number in the file.
    pub seq_min: SeqNo,
    /// Largest sequence number in the file.
    pub seq_max: SeqNo,
    /// Entries in the file.
    pub entries: u64,
    /// Tombstones among them.
    pub deletions: u64,
    /// Per-table properties of the block property collectors (collector names and bytes),
    /// copied from the table into the manifest so they can be read without opening the file.
    pub property_names: Vec<String>,
    /// Table properties of the collectors, in the order of `property_names`.
    pub property_values: Vec<Vec<u8>>,

    /// Set while a compaction has this file as input.
    pub(crate) being_compacted: AtomicBool,
    /// Reads this file may still cost before it is compacted (`Options::seek_compaction`):
    /// charged once by each point read that consulted it and then had to consult another
    /// file. Never persisted; a reopened or moved file starts afresh.
    allowed_seeks: AtomicI64,
    /// Set when a version edit removed the file; the last reference dropping then deletes it.
    obsolete: AtomicBool,
    reaper: OnceLock<Arc<dyn FileReaper>>,
    /// The opened table, kept while the file is live (no separate table cache).
    pub(crate) table: OnceLock<Arc<crate::sstable::Table>>,
}

impl FileMetaData {
    /// The metadata of a table just written.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        number: u64,
        file_bytes: u64,
        smallest: Vec<u8>,
        largest: Vec<u8>,
        seq_min: SeqNo,
        seq_max: SeqNo,
        entries: u64,
        deletions: u64,
        property_names: Vec<String>,
        property_values: Vec<Vec<u8>>,
    ) -> Self {
        FileMetaData {
            number,
            file_bytes,
            smallest,
            largest,
            seq_min,
            seq_max,
            entries,
            deletions,
            property_names,
            property_values,
            being_compacted: AtomicBool::new(false),
            allowed_seeks: AtomicI64::new(seek_allowance(file_bytes)),
            obsolete: AtomicBool::new(false),
            reaper: OnceLock::new(),
            table: OnceLock::new(),
        }
    }

    /// The user key of `smallest`.
    pub fn smallest_user_key(&self) -> &[u8] {
        user_key(&self.smallest)
    }
    /// The user key of `largest`.
    pub fn largest_user_key(&self) -> &[u8] {
        user_key(&self.largest)
    }

    /// The table-level collector properties.
    pub fn properties(&self) -> Properties<'_> {
        Properties::new(&self.property_names, &self.property_values)
    }

    /// Whether `key` lies within the file's user-key range.
    pub fn covers_user_key(&self, key: &[u8]) -> bool {
        self.smallest_user_key() <= key && key <= self.largest_user_key()
    }

    /// Whether the file's user-key range intersects `[start, end]` (`None` = unbounded).
    pub fn overlaps(&self, start: Option<&[u8]>, end: Option<&[u8]>) -> bool {
        let before = end.is_some_and(|e| self.smallest_user_key() > e);
        let after = start.is_some_and(|s| self.largest_user_key() < s);
        !before && !after
    }

    /// Charges one wasted read to this file; true for the charge that spends the last of its
    /// allowance (once per file). A spent file is not charged again: readers of a file that
    /// waits for its compaction (or cannot have one: the deepest level) only read the counter.
    pub(crate) fn charge_seek(&self) -> bool {
        !self.seeks_spent() && self.allowed_seeks.fetch_sub(1, Ordering::Relaxed) == 1
    }

    /// Whether reads have spent this file's allowance, so it is due a compaction.
    pub(crate) fn seeks_spent(&self) -> bool {
        self.allowed_seeks.load(Ordering::Relaxed) <= 0
    }

    /// Whether a compaction holds the file as input.
    pub fn is_being_compacted(&self) -> bool {
        self.being_compacted.load(Ordering::Acquire)
    }

    /// Marks the file for deletion once the last reference is gone.
    pub(crate) fn mark_obsolete(&self, reaper: Arc<dyn FileReaper>) {
        let _ = self.reaper.set(reaper);
        self.obsolete.store(true, Ordering::Release);
    }
}

impl Drop for FileMetaData {
    fn drop(&mut self) {
        if self.obsolete.load(Ordering::Acquire) {
            if let Some(reaper) = self.reaper.get() {
                reaper.reap(self.number);
            }
        }
    }
}

impl std::fmt::Debug for FileMetaData {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FileMetaData")
            .field("number", &self.number)
            .field("file_bytes", &self.file_bytes)
            .field(
                "smallest",
                &String::from_utf8_lossy(self.smallest_user_key()),
            )
            .field("largest", &String::from_utf8_lossy(self.largest_user_key()))
            .field("seq", &(self.seq_min..=self.seq_max))
            .field("entries", &self.entries)
            .finish_non_exhaustive()
    }
}

/// Wasted reads a file of `file_bytes` may cost before it is compacted. LevelDB's rule: one
/// read (a seek: ~10 ms on the disks it was written for) costs about what compacting 40 KB
/// does, so a file that costs one wasted read per 16 KB of its size (conservative) is cheaper
/// compacted than read; at least 100, so that small files are not compacted for a few reads.
pub(crate) fn seek_allowance(file_bytes: u64) -> i64 {
    i64::try_from(file_bytes / SEEK_ALLOWANCE_BYTES_PER_SEEK)
        .unwrap_or(i64::MAX)
        .max(SEEK_ALLOWANCE_MIN)
}

pub(crate) const SEEK_ALLOWANCE_BYTES_PER_SEEK: u64 = 16 << 10;
pub(crate) const SEEK_ALLOWANCE_MIN: i64 = 100;

/// File names inside a database directory.
pub fn table_file_name(number: u64) -> String {
    format!("{number:06}.sst")
}
pub fn wal_file_name(number: u64) -> String {
    format!("{number:06}.wal")
}
pub fn manifest_file_name(number: u64) -> String {
    format!("MANIFEST-{number:06}")
}
pub const CURRENT_FILE_NAME: &str = "CURRENT";
pub const LOCK_FILE_NAME: &str = "LOCK";

/// What kind of file a directory entry is, by its name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileKind {
    Table(u64),
    Wal(u64),
    Manifest(u64),
    Current,
    Lock,
    Temp,
}

pub fn parse_file_name(name: &str) -> Option<FileKind> {
    if name == CURRENT_FILE_NAME {
        return Some(FileKind::Current);
    }
    if name == LOCK_FILE_NAME {
        return Some(FileKind::Lock);
    }
    if name.ends_with(".tmp") {
        return Some(FileKind::Temp);
    }
    if let Some(n) = name.strip_prefix("MANIFEST-") {
        return n.parse().ok().map(FileKind::Manifest);
    }
    if let Some(n) = name.strip_suffix(".sst") {
        return n.parse().ok().map(FileKind::Table);
    }
    if let Some(n) = name.strip_suffix(".wal") {
        return n.parse().ok().map(FileKind::Wal);
    }
    None
}
