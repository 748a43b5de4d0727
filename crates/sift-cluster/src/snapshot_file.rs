//! A region snapshot as a file: the archive (`docs/format/region-snapshot.md`) written to disk
//! once, then read in place — by the transport, a slice at a time, and by the install, as a
//! stream — so a snapshot costs disk, not memory, however large the region.

use std::fs::File;
use std::io::{self, Read};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// An immutable archive on disk. The open file keeps it readable even after a newer
/// snapshot replaces its name; clones share the file.
#[derive(Debug, Clone)]
pub struct SnapshotArchive {
    file: Arc<File>,
    bytes: u64,
    /// Where it was when opened (to link it as a replica's current snapshot).
    path: PathBuf,
}

impl SnapshotArchive {
    /// Opens the archive at `path`.
    pub fn open(path: &Path) -> io::Result<SnapshotArchive> {
        let file = File::open(path)?;
        let bytes = file.metadata()?.len();
        Ok(SnapshotArchive {
            file: Arc::new(file),
            bytes,
            path: path.to_path_buf(),
        })
    }

    /// The archive's size in bytes.
    pub fn len(&self) -> u64 {
        self.bytes
    }

    pub fn is_empty(&self) -> bool {
        self.bytes == 0
    }

    /// Where the archive was opened from.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The open file's metadata (to tell whether its path still names it).
    pub fn metadata(&self) -> io::Result<std::fs::Metadata> {
        self.file.metadata()
    }

    /// Up to `length` bytes from `offset` (fewer only at the end).
    pub fn read_slice(&self, offset: u64, length: usize) -> io::Result<Vec<u8>> {
        let available = self.bytes.saturating_sub(offset);
        let length = length.min(usize::try_from(available).unwrap_or(usize::MAX));
        let mut buffer = vec![0; length];
        self.file.read_exact_at(&mut buffer, offset)?;
        Ok(buffer)
    }

    /// A reader of the whole archive from its start (independent of other readers).
    pub fn reader(&self) -> ArchiveReader<'_> {
        ArchiveReader {
            archive: self,
            offset: 0,
        }
    }
}

/// Reads a [`SnapshotArchive`] front to back.
#[derive(Debug)]
pub struct ArchiveReader<'a> {
    archive: &'a SnapshotArchive,
    offset: u64,
}

impl Read for ArchiveReader<'_> {
    fn read(&mut self, buffer: &mut [u8]) -> io::Result<usize> {
        let read = self.archive.file.read_at(buffer, self.offset)?;
        self.offset += read as u64;
        Ok(read)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slices_and_the_reader_give_the_file_back_and_outlive_its_name() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let path = dir.path().join("a.tar");
        let content: Vec<u8> = (0..10_000u32).map(|i| (i % 251) as u8).collect();
        std::fs::write(&path, &content).unwrap_or_else(|e| panic!("{e}"));
        let archive = SnapshotArchive::open(&path).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(archive.len(), 10_000);
        // Replaced under its name (removed, a new file written): the open archive still
        // reads its own bytes.
        std::fs::remove_file(&path).unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(&path, b"other").unwrap_or_else(|e| panic!("{e}"));
        let mut sliced = Vec::new();
        for offset in (0..10_000).step_by(4096) {
            sliced.extend(
                archive
                    .read_slice(offset, 4096)
                    .unwrap_or_else(|e| panic!("{e}")),
            );
        }
        assert_eq!(sliced, content);
        assert!(archive
            .read_slice(10_000, 4096)
            .unwrap_or_else(|e| panic!("{e}"))
            .is_empty());
        let mut read = Vec::new();
        archive
            .reader()
            .read_to_end(&mut read)
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(read, content);
    }
}
