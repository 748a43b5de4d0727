//! The file-system abstraction: every byte the engine reads or writes goes through it, so tests
//! can inject failures and simulate crashes that lose unsynced data.

mod fault;
mod std_fs;

pub use fault::{FaultFileSystem, FaultKind};
pub use std_fs::{StdFileSystem, StdRandomAccessFile};

use crate::Result;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// A file opened for appending.
pub trait WritableFile: Send + Sync {
    /// Appends `data` at the end.
    fn append(&mut self, data: &[u8]) -> Result<()>;
    /// Pushes buffered bytes to the operating system (not necessarily to stable storage).
    fn flush(&mut self) -> Result<()>;
    /// Makes everything appended so far durable (fdatasync).
    fn sync(&mut self) -> Result<()>;
    /// Bytes appended so far.
    fn len(&self) -> u64;
    /// Whether the file has no bytes.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A file read at arbitrary offsets, shared between threads.
pub trait RandomAccessFile: Send + Sync {
    /// Reads exactly `len` bytes at `offset`; a short read is an error naming the file.
    fn read_at(&self, offset: u64, len: usize) -> Result<Vec<u8>>;
    /// The file's size in bytes.
    fn size(&self) -> u64;
    /// The file's path.
    fn path(&self) -> &Path;
    /// The whole file as memory, when it is memory-mapped: readers may then use its bytes in
    /// place instead of copying them. The bytes live as long as the file handle.
    fn mapped(&self) -> Option<&[u8]> {
        None
    }
    /// A hint: map the file's pages that are already in the operating system's page cache
    /// into this process now, so later reads of a memory-mapped file take no page faults.
    /// Never reads the file from disk. The default does nothing.
    fn prefault(&self) {}
}

/// Held while a database directory is open; dropping it releases the lock.
pub trait FileLock: Send + Sync {}

/// Where the engine's files live: the real file system, or one that injects faults.
pub trait FileSystem: Send + Sync {
    /// Creates (truncating) a file for appending.
    fn create(&self, path: &Path) -> Result<Box<dyn WritableFile>>;
    /// Opens an existing file for random reads. `direct` asks for O_DIRECT reads, bypassing
    /// the operating system's page cache; file systems that cannot do it read normally.
    fn open(&self, path: &Path, direct: bool) -> Result<Arc<dyn RandomAccessFile>>;
    /// Opens an immutable file (an SSTable) for random reads through a memory map, so reads of
    /// cached pages cost a copy instead of a system call. File systems without maps open it
    /// normally. The file must not be truncated while open (SSTables never are).
    fn open_mapped(&self, path: &Path) -> Result<Arc<dyn RandomAccessFile>> {
        self.open(path, false)
    }
    /// Reads a whole file (WAL, manifest, CURRENT).
    fn read_all(&self, path: &Path) -> Result<Vec<u8>>;
    /// Atomically replaces `to` with `from`.
    fn rename(&self, from: &Path, to: &Path) -> Result<()>;
    /// Removes a file.
    fn remove(&self, path: &Path) -> Result<()>;
    /// Whether a file or directory exists.
    fn exists(&self, path: &Path) -> bool;
    /// Creates a directory and its parents.
    fn create_dir_all(&self, path: &Path) -> Result<()>;
    /// File names (not paths) in a directory.
    fn list(&self, dir: &Path) -> Result<Vec<String>>;
    /// Makes a directory's entries (creations, renames, removals) durable.
    fn sync_dir(&self, dir: &Path) -> Result<()>;
    /// A hint: write the data of the file at `path`, which another handle is appending to, to
    /// storage now, so that handle's next `sync` has little left to do. It may leave the tail
    /// alone, so as not to make the appender's next write wait for this writeback. Guarantees
    /// nothing (durability still comes from `WritableFile::sync`); failures are ignored. The
    /// default does nothing.
    fn sync_data_hint(&self, _path: &Path) {}
    /// A hint: reserve disk blocks for the file at `path`, which another handle is appending
    /// to, up to `end_bytes`, without changing its length, so appends up to there allocate
    /// nothing. Returns whether it did; failures (and file systems that cannot) return false.
    /// The default does nothing.
    fn preallocate_hint(&self, _path: &Path, _end_bytes: u64) -> bool {
        false
    }
    /// Takes an exclusive lock on `path`, creating it; `Error::Locked` if someone holds it.
    fn lock(&self, path: &Path) -> Result<Box<dyn FileLock>>;
    /// A file's size in bytes.
    fn file_size(&self, path: &Path) -> Result<u64>;
    /// Makes `to` name the same immutable file as `from` (checkpoints of tables): a hard link
    /// where the file system allows, else a synced copy. The default copies.
    fn link_or_copy(&self, from: &Path, to: &Path) -> Result<()> {
        let bytes = self.read_all(from)?;
        let mut file = self.create(to)?;
        file.append(&bytes)?;
        file.sync()
    }
}

/// The path of a file inside a database directory.
pub fn join(dir: &Path, name: &str) -> PathBuf {
    dir.join(name)
}
