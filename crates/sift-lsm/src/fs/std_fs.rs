//! The real file system: buffered appends, positional reads (optionally O_DIRECT through an
//! aligned bounce buffer), directory sync, and the LOCK file (a POSIX record lock plus a
//! registry of the paths this process holds).

use super::{FileLock, FileSystem, RandomAccessFile, WritableFile};
use crate::{Error, Result};
use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};

/// Appends smaller than this are gathered in memory, so small WAL records cost no system call.
const WRITE_BUFFER_BYTES: usize = 64 * 1024;

/// Offset, length and memory alignment of O_DIRECT reads. Every common logical block size
/// (512, 4096) divides it; a device that needs more refuses the read with EINVAL and the file
/// falls back to buffered reads.
const DIRECT_IO_ALIGNMENT_BYTES: usize = 4096;

/// `sync_data_hint` writes back a file only up to a multiple of this, below its length. The
/// appender's next `write` goes into the page cache's last folio (ext4 uses folios of up to the
/// size of one `write`, so up to `WRITE_BUFFER_BYTES` for the WAL); a folio under writeback
/// makes that `write` wait for the device (stable pages, or the folio lock), which is what an
/// `fdatasync` of the whole file did to the WAL writer, under the commit lock, for up to 2.7 ms
/// at a time (seen with `perf sched`). Pages whole below the length are never written again.
const SYNC_HINT_ALIGNMENT_BYTES: u64 = 4 * WRITE_BUFFER_BYTES as u64;

/// The end of the range `sync_data_hint` writes back for a file of `length_bytes`: the last
/// multiple of `SYNC_HINT_ALIGNMENT_BYTES` at least that far below the length, so the folio the
/// appender writes into next is left alone.
fn sync_hint_end_bytes(length_bytes: u64) -> u64 {
    length_bytes.saturating_sub(SYNC_HINT_ALIGNMENT_BYTES) / SYNC_HINT_ALIGNMENT_BYTES
        * SYNC_HINT_ALIGNMENT_BYTES
}

/// The operating system's file system; the default `Options::file_system`.
#[derive(Debug, Default, Clone, Copy)]
pub struct StdFileSystem;

impl StdFileSystem {
    /// Like [`FileSystem::open`], but returns the concrete file, which tells whether O_DIRECT
    /// reads are in effect.
    pub fn open_random_access(&self, path: &Path, direct: bool) -> Result<StdRandomAccessFile> {
        StdRandomAccessFile::open(path, direct, open_direct)
    }
}

fn open_direct(path: &Path) -> io::Result<File> {
    OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECT)
        .open(path)
}

fn open_buffered(path: &Path) -> io::Result<File> {
    File::open(path)
}

/// The O_DIRECT refusal of file systems that cannot do it (tmpfs on older kernels, some
/// network and FUSE file systems), at open or at the first read.
fn is_direct_io_refusal(error: &io::Error) -> bool {
    error.raw_os_error() == Some(libc::EINVAL)
}

impl FileSystem for StdFileSystem {
    fn create(&self, path: &Path) -> Result<Box<dyn WritableFile>> {
        let file = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .open(path)
            .map_err(|e| Error::io(path, e))?;
        Ok(Box::new(StdWritableFile {
            file,
            path: path.to_path_buf(),
            buffer: Vec::with_capacity(WRITE_BUFFER_BYTES),
            len: 0,
            failed: false,
        }))
    }

    fn open(&self, path: &Path, direct: bool) -> Result<Arc<dyn RandomAccessFile>> {
        Ok(Arc::new(self.open_random_access(path, direct)?))
    }

    fn open_mapped(&self, path: &Path) -> Result<Arc<dyn RandomAccessFile>> {
        Ok(Arc::new(MappedFile::open(path)?))
    }

    fn read_all(&self, path: &Path) -> Result<Vec<u8>> {
        std::fs::read(path).map_err(|e| Error::io(path, e))
    }

    fn rename(&self, from: &Path, to: &Path) -> Result<()> {
        std::fs::rename(from, to).map_err(|e| {
            Error::io(
                from,
                io::Error::new(e.kind(), format!("rename to {}: {e}", to.display())),
            )
        })
    }

    fn remove(&self, path: &Path) -> Result<()> {
        std::fs::remove_file(path).map_err(|e| Error::io(path, e))
    }

    fn exists(&self, path: &Path) -> bool {
        path.exists()
    }

    fn create_dir_all(&self, path: &Path) -> Result<()> {
        std::fs::create_dir_all(path).map_err(|e| Error::io(path, e))
    }

    fn list(&self, dir: &Path) -> Result<Vec<String>> {
        let mut names = Vec::new();
        for entry in std::fs::read_dir(dir).map_err(|e| Error::io(dir, e))? {
            let entry = entry.map_err(|e| Error::io(dir, e))?;
            // The engine names its files in ASCII; a name that is not UTF-8 is not one of ours.
            if let Ok(name) = entry.file_name().into_string() {
                names.push(name);
            }
        }
        names.sort_unstable();
        Ok(names)
    }

    fn sync_dir(&self, dir: &Path) -> Result<()> {
        let directory = File::open(dir).map_err(|e| Error::io(dir, e))?;
        directory.sync_all().map_err(|e| Error::io(dir, e))
    }

    #[cfg(target_os = "linux")]
    fn sync_data_hint(&self, path: &Path) {
        let Ok(file) = File::open(path) else {
            return;
        };
        let Ok(length) = file.metadata().map(|m| m.len()) else {
            return;
        };
        let end = sync_hint_end_bytes(length);
        let Ok(end) = libc::off64_t::try_from(end) else {
            return;
        };
        if end == 0 {
            return;
        }
        // SAFETY: `sync_file_range` on a descriptor `file` owns for the whole call; no memory
        // is passed.
        let _ = unsafe {
            libc::sync_file_range(
                file.as_raw_fd(),
                0,
                end,
                libc::SYNC_FILE_RANGE_WAIT_BEFORE
                    | libc::SYNC_FILE_RANGE_WRITE
                    | libc::SYNC_FILE_RANGE_WAIT_AFTER,
            )
        };
    }

    #[cfg(not(target_os = "linux"))]
    fn sync_data_hint(&self, path: &Path) {
        // fdatasync through a second descriptor writes the file's dirty pages too.
        if let Ok(file) = File::open(path) {
            let _ = file.sync_data();
        }
    }

    #[cfg(target_os = "linux")]
    fn preallocate_hint(&self, path: &Path, end_bytes: u64) -> bool {
        let Ok(file) = OpenOptions::new().write(true).open(path) else {
            return false;
        };
        let Ok(end) = libc::off_t::try_from(end_bytes) else {
            return false;
        };
        // KEEP_SIZE: the length stays what was appended, so readers (and the recovery, which
        // reads a log to its length) see no preallocated bytes.
        // SAFETY: `fallocate` on a descriptor `file` owns for the whole call; no memory is
        // passed.
        let status =
            unsafe { libc::fallocate(file.as_raw_fd(), libc::FALLOC_FL_KEEP_SIZE, 0, end) };
        status == 0
    }

    fn lock(&self, path: &Path) -> Result<Box<dyn FileLock>> {
        // A POSIX record lock (`fcntl`), not `flock`: an `flock` belongs to the open file
        // description, which a child process spawned by any thread shares until it execs, so
        // `drop(db); Db::open(path)` failed with `Locked` whenever another thread was spawning a
        // process at that moment. A record lock belongs to this process alone; since it does
        // not exclude the process itself, the paths held here are also kept in a registry.
        let held_key = held_lock_key(path);
        let mut held = held_locks()
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if held.contains(&held_key) {
            return Err(Error::Locked {
                path: path.to_path_buf(),
                detail: "another open handle in this process holds this LOCK file".to_string(),
            });
        }
        // Opened only once the registry says this process holds no lock on it: closing any
        // descriptor of the file would release a record lock this process holds.
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)
            .map_err(|e| Error::io(path, e))?;
        // SAFETY: an all-zero `flock` is a valid value of this plain C struct.
        let mut request: libc::flock = unsafe { std::mem::zeroed() };
        request.l_type = libc::F_WRLCK as libc::c_short;
        request.l_whence = libc::SEEK_SET as libc::c_short;
        // `l_start` and `l_len` 0: the whole file, however long it grows.
        // SAFETY: `fcntl(F_SETLK)` reads the `flock` struct, which outlives the call; the
        // descriptor belongs to `file`, which is alive for the whole call.
        let status = unsafe { libc::fcntl(file.as_raw_fd(), libc::F_SETLK, &request) };
        if status != 0 {
            let error = io::Error::last_os_error();
            let code = error.raw_os_error();
            if code == Some(libc::EAGAIN) || code == Some(libc::EACCES) {
                return Err(Error::Locked {
                    path: path.to_path_buf(),
                    detail: "another process holds a lock on this LOCK file".to_string(),
                });
            }
            return Err(Error::io(path, error));
        }
        held.insert(held_key.clone());
        Ok(Box::new(StdFileLock {
            file: Some(file),
            held_key,
        }))
    }

    fn file_size(&self, path: &Path) -> Result<u64> {
        std::fs::metadata(path)
            .map(|metadata| metadata.len())
            .map_err(|e| Error::io(path, e))
    }

    fn link_or_copy(&self, from: &Path, to: &Path) -> Result<()> {
        if std::fs::hard_link(from, to).is_ok() {
            return Ok(());
        }
        // Another file system (EXDEV) or one without links: a copy, made durable.
        std::fs::copy(from, to).map_err(|e| Error::io(to, e))?;
        std::fs::File::open(to)
            .and_then(|file| file.sync_all())
            .map_err(|e| Error::io(to, e))
    }
}

/// An append-only file with a user-space write buffer.
struct StdWritableFile {
    file: File,
    path: PathBuf,
    buffer: Vec<u8>,
    len: u64,
    /// Set after a failed write or sync: what reached the disk is then unknown (a partial write,
    /// or dirty pages the kernel dropped after a failed fsync), so the handle refuses further use.
    failed: bool,
}

impl StdWritableFile {
    fn check_not_failed(&self) -> Result<()> {
        if self.failed {
            return Err(Error::io(
                &self.path,
                io::Error::other("an earlier write or sync on this file failed"),
            ));
        }
        Ok(())
    }

    fn write_through(&mut self, data: &[u8]) -> Result<()> {
        if let Err(e) = self.file.write_all(data) {
            self.failed = true;
            return Err(Error::io(&self.path, e));
        }
        Ok(())
    }

    fn flush_buffer(&mut self) -> Result<()> {
        if self.buffer.is_empty() {
            return Ok(());
        }
        let buffer = std::mem::take(&mut self.buffer);
        let result = self.write_through(&buffer);
        self.buffer = buffer;
        self.buffer.clear();
        result
    }
}

impl WritableFile for StdWritableFile {
    fn append(&mut self, data: &[u8]) -> Result<()> {
        self.check_not_failed()?;
        if self.buffer.len() + data.len() > WRITE_BUFFER_BYTES {
            self.flush_buffer()?;
        }
        if data.len() >= WRITE_BUFFER_BYTES {
            self.write_through(data)?;
        } else {
            self.buffer.extend_from_slice(data);
        }
        self.len += data.len() as u64;
        Ok(())
    }

    fn flush(&mut self) -> Result<()> {
        self.check_not_failed()?;
        self.flush_buffer()
    }

    fn sync(&mut self) -> Result<()> {
        self.flush()?;
        if let Err(e) = self.file.sync_data() {
            self.failed = true;
            return Err(Error::io(&self.path, e));
        }
        Ok(())
    }

    fn len(&self) -> u64 {
        self.len
    }
}

impl Drop for StdWritableFile {
    fn drop(&mut self) {
        // Best effort, like closing a stdio stream: bytes appended but never flushed still reach
        // the operating system. Callers that need to know about errors flush or sync first.
        if !self.failed {
            let _ = self.flush_buffer();
        }
    }
}

/// A file read at arbitrary offsets, with O_DIRECT when asked for and supported.
pub struct StdRandomAccessFile {
    path: PathBuf,
    size: u64,
    /// Opened with O_DIRECT when direct reads were asked for and the open succeeded.
    direct_file: Option<File>,
    /// The buffered descriptor: opened at once when direct reads were not asked for or the
    /// open refused them, later if a direct read is refused.
    buffered_file: OnceLock<File>,
    direct_refused: AtomicBool,
}

impl StdRandomAccessFile {
    fn open(
        path: &Path,
        direct: bool,
        open_direct: impl FnOnce(&Path) -> io::Result<File>,
    ) -> Result<Self> {
        let direct_file = if direct {
            match open_direct(path) {
                Ok(file) => Some(file),
                Err(e) if is_direct_io_refusal(&e) => None,
                Err(e) => return Err(Error::io(path, e)),
            }
        } else {
            None
        };
        let buffered_file = OnceLock::new();
        let metadata = if let Some(file) = &direct_file {
            file.metadata()
        } else {
            let file = open_buffered(path).map_err(|e| Error::io(path, e))?;
            let metadata = file.metadata();
            let _ = buffered_file.set(file);
            metadata
        };
        let size = metadata.map_err(|e| Error::io(path, e))?.len();
        Ok(StdRandomAccessFile {
            path: path.to_path_buf(),
            size,
            direct_file,
            buffered_file,
            direct_refused: AtomicBool::new(false),
        })
    }

    /// Whether reads bypass the page cache: O_DIRECT was asked for, the open accepted it, and no
    /// read has been refused since.
    pub fn direct_io_active(&self) -> bool {
        self.direct_file.is_some() && !self.direct_refused.load(Ordering::Relaxed)
    }

    fn buffered(&self) -> io::Result<&File> {
        if let Some(file) = self.buffered_file.get() {
            return Ok(file);
        }
        let file = open_buffered(&self.path)?;
        // Another thread may have won the race; either descriptor reads the same file.
        let _ = self.buffered_file.set(file);
        self.buffered_file
            .get()
            .ok_or_else(|| io::Error::other("buffered descriptor vanished"))
    }

    fn fall_back_to_buffered(&self) {
        self.direct_refused.store(true, Ordering::Relaxed);
    }

    fn short_read(&self, offset: u64, len: usize) -> io::Error {
        let actual = self
            .buffered()
            .and_then(File::metadata)
            .map_or_else(|_| "unknown".to_string(), |m| m.len().to_string());
        io::Error::new(
            io::ErrorKind::UnexpectedEof,
            format!("short read: {len} bytes at offset {offset}, but the file has {actual} bytes"),
        )
    }

    fn read_buffered(&self, offset: u64, len: usize) -> io::Result<Vec<u8>> {
        let mut data = vec![0; len];
        match self.buffered()?.read_exact_at(&mut data, offset) {
            Ok(()) => Ok(data),
            Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => Err(self.short_read(offset, len)),
            Err(e) => Err(e),
        }
    }

    /// Reads the aligned span covering `offset..offset + len` into an aligned bounce buffer and
    /// copies the requested range out. The span may run past the end of the file; the kernel
    /// then returns fewer bytes, which is fine as long as the requested range is covered.
    fn read_direct(&self, file: &File, offset: u64, len: usize) -> io::Result<Vec<u8>> {
        let alignment = DIRECT_IO_ALIGNMENT_BYTES as u64;
        let end = offset
            .checked_add(len as u64)
            .ok_or_else(|| self.short_read(offset, len))?;
        let aligned_start = offset / alignment * alignment;
        let aligned_end = end
            .div_ceil(alignment)
            .checked_mul(alignment)
            .ok_or_else(|| self.short_read(offset, len))?;
        let span = usize::try_from(aligned_end - aligned_start)
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "read too large"))?;
        let mut bounce = AlignedBuffer::new(span);
        let buffer = bounce.as_mut_slice();
        let needed = (end - aligned_start) as usize;
        let mut filled = 0;
        while filled < needed {
            match file.read_at(&mut buffer[filled..], aligned_start + filled as u64) {
                Ok(0) => break,
                Ok(read) => {
                    filled += read;
                    // A read that ends off alignment reached the end of the file; another
                    // O_DIRECT read from there would be refused.
                    if filled % DIRECT_IO_ALIGNMENT_BYTES != 0 {
                        break;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        if filled < needed {
            return Err(self.short_read(offset, len));
        }
        let start_in_buffer = (offset - aligned_start) as usize;
        Ok(buffer[start_in_buffer..start_in_buffer + len].to_vec())
    }
}

impl RandomAccessFile for StdRandomAccessFile {
    fn read_at(&self, offset: u64, len: usize) -> Result<Vec<u8>> {
        if len == 0 {
            return Ok(Vec::new());
        }
        // Offsets the kernel rejects with EINVAL would look like an O_DIRECT refusal.
        let in_range = offset
            .checked_add(len as u64)
            .is_some_and(|end| i64::try_from(end).is_ok());
        if !in_range {
            return Err(Error::io(&self.path, self.short_read(offset, len)));
        }
        if let Some(file) = &self.direct_file {
            if !self.direct_refused.load(Ordering::Relaxed) {
                match self.read_direct(file, offset, len) {
                    Err(e) if is_direct_io_refusal(&e) => self.fall_back_to_buffered(),
                    result => return result.map_err(|e| Error::io(&self.path, e)),
                }
            }
        }
        self.read_buffered(offset, len)
            .map_err(|e| Error::io(&self.path, e))
    }

    fn size(&self) -> u64 {
        self.size
    }

    fn path(&self) -> &Path {
        &self.path
    }
}

/// A zeroed byte buffer whose start is aligned for O_DIRECT. It over-allocates by one alignment
/// unit and starts at the first aligned address inside, which needs no unsafe code.
struct AlignedBuffer {
    storage: Vec<u8>,
    start: usize,
    len: usize,
}

impl AlignedBuffer {
    fn new(len: usize) -> Self {
        let storage = vec![0; len + DIRECT_IO_ALIGNMENT_BYTES];
        let misalignment = storage.as_ptr() as usize % DIRECT_IO_ALIGNMENT_BYTES;
        let start = (DIRECT_IO_ALIGNMENT_BYTES - misalignment) % DIRECT_IO_ALIGNMENT_BYTES;
        AlignedBuffer {
            storage,
            start,
            len,
        }
    }

    fn as_mut_slice(&mut self) -> &mut [u8] {
        &mut self.storage[self.start..self.start + self.len]
    }
}

/// The paths of the LOCK files this process holds (see `StdFileSystem::lock`).
fn held_locks() -> &'static std::sync::Mutex<std::collections::BTreeSet<PathBuf>> {
    static HELD: OnceLock<std::sync::Mutex<std::collections::BTreeSet<PathBuf>>> = OnceLock::new();
    HELD.get_or_init(Default::default)
}

/// The registry key of a LOCK file: its directory resolved (symbolic links, relative paths),
/// so two spellings of one directory are one key.
fn held_lock_key(path: &Path) -> PathBuf {
    let resolved = path
        .parent()
        .map(|dir| {
            if dir.as_os_str().is_empty() {
                Path::new(".")
            } else {
                dir
            }
        })
        .and_then(|dir| std::fs::canonicalize(dir).ok());
    match (resolved, path.file_name()) {
        (Some(dir), Some(name)) => dir.join(name),
        _ => path.to_path_buf(),
    }
}

/// Holds the LOCK file's descriptor; closing it releases the record lock.
struct StdFileLock {
    /// `None` once dropped.
    file: Option<File>,
    held_key: PathBuf,
}

impl FileLock for StdFileLock {}

impl Drop for StdFileLock {
    fn drop(&mut self) {
        let mut held = held_locks()
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        // Closing the descriptor releases the record lock; only then may another handle of
        // this process open the file (its close would otherwise release this lock).
        drop(self.file.take());
        held.remove(&self.held_key);
    }
}

/// A read-only memory map of an immutable file.
pub struct MappedFile {
    path: PathBuf,
    map: Option<memmap2::Mmap>,
}

impl MappedFile {
    pub fn open(path: &Path) -> Result<Self> {
        let file = File::open(path).map_err(|e| Error::io(path, e))?;
        let size = file.metadata().map_err(|e| Error::io(path, e))?.len();
        // An empty file cannot be mapped; it has nothing to read either.
        let map = if size == 0 {
            None
        } else {
            // SAFETY: the engine maps only SSTables, which are never modified or truncated
            // after they are written (they are only deleted, which leaves the mapping valid).
            Some(unsafe { memmap2::Mmap::map(&file) }.map_err(|e| Error::io(path, e))?)
        };
        Ok(MappedFile {
            path: path.to_path_buf(),
            map,
        })
    }
}

impl RandomAccessFile for MappedFile {
    fn read_at(&self, offset: u64, len: usize) -> Result<Vec<u8>> {
        let bytes: &[u8] = self.map.as_deref().unwrap_or(&[]);
        let range = usize::try_from(offset)
            .ok()
            .and_then(|start| Some(start..start.checked_add(len)?))
            .filter(|r| r.end <= bytes.len());
        match range {
            Some(r) => Ok(bytes[r].to_vec()),
            None => Err(Error::io(
                &self.path,
                io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    format!(
                        "read of {len} bytes at offset {offset} past the end of the file ({} bytes)",
                        bytes.len()
                    ),
                ),
            )),
        }
    }
    fn size(&self) -> u64 {
        self.map.as_ref().map_or(0, |m| m.len() as u64)
    }
    fn mapped(&self) -> Option<&[u8]> {
        Some(self.map.as_deref().unwrap_or(&[]))
    }
    fn path(&self) -> &Path {
        &self.path
    }
    fn prefault(&self) {
        if let Some(map) = &self.map {
            prefault_if_cached(map);
        }
    }
}

/// Least share of a file's pages that must be in the page cache for `prefault` to map them
/// all: populating the mapping of a file mostly on disk would read it.
#[cfg(target_os = "linux")]
const PREFAULT_RESIDENT_PERCENT_MIN: usize = 90;

/// Maps every page of `map` into the process if nearly all are in the page cache. Without
/// this, each first read of a 64 KiB window of a mapped table takes a page fault (microseconds,
/// more than the rest of a point read).
#[cfg(target_os = "linux")]
fn prefault_if_cached(map: &memmap2::Mmap) {
    // SAFETY: `sysconf` has no preconditions.
    let page_bytes = usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).unwrap_or(4096);
    let pages = map.len().div_ceil(page_bytes.max(1));
    let mut resident = vec![0u8; pages];
    // SAFETY: `map` is a live mapping of `map.len()` bytes starting at a page boundary, and
    // `resident` has one byte per page of it, as mincore requires.
    let status = unsafe {
        libc::mincore(
            map.as_ptr().cast_mut().cast(),
            map.len(),
            resident.as_mut_ptr(),
        )
    };
    if status != 0 {
        return;
    }
    let cached = resident.iter().filter(|byte| **byte & 1 == 1).count();
    if cached * 100 >= pages * PREFAULT_RESIDENT_PERCENT_MIN {
        // A hint only: kernels before 5.14 do not know the advice.
        let _ = map.advise(memmap2::Advice::PopulateRead);
    }
}

#[cfg(not(target_os = "linux"))]
fn prefault_if_cached(_map: &memmap2::Mmap) {}

#[cfg(test)]
mod tests {
    #[test]
    fn mapped_reads_match_the_file_and_refuse_reads_past_the_end() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("mapped.sst");
        let data: Vec<u8> = (0..10_000u32).map(|i| (i * 31 % 251) as u8).collect();
        std::fs::write(&path, &data).expect("write");
        let file = StdFileSystem.open_mapped(&path).expect("map");
        assert_eq!(file.size(), 10_000);
        for (offset, len) in [(0usize, 1usize), (4095, 2), (9_000, 1_000), (123, 4_567)] {
            let got = file.read_at(offset as u64, len).expect("read");
            assert_eq!(got, &data[offset..offset + len]);
        }
        let err = file.read_at(9_999, 2).expect_err("past the end");
        assert!(err.to_string().contains("mapped.sst"), "{err}");
        std::fs::write(dir.path().join("empty"), b"").expect("write");
        let empty = StdFileSystem
            .open_mapped(&dir.path().join("empty"))
            .expect("map empty");
        assert_eq!(empty.size(), 0);
        assert!(empty.read_at(0, 1).is_err());
    }

    use super::*;
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};

    fn temp_dir() -> tempfile::TempDir {
        tempfile::tempdir().unwrap()
    }

    fn write_file(path: &Path, data: &[u8]) {
        let mut file = StdFileSystem.create(path).unwrap();
        file.append(data).unwrap();
        file.sync().unwrap();
    }

    fn pattern(len: usize, seed: u64) -> Vec<u8> {
        let mut rng = StdRng::seed_from_u64(seed);
        (0..len).map(|_| rng.gen()).collect()
    }

    #[test]
    fn buffered_appends_round_trip() {
        let dir = temp_dir();
        let path = dir.path().join("data");
        let fs = StdFileSystem;
        let mut file = fs.create(&path).unwrap();
        let mut expected = Vec::new();
        // Small appends stay in the buffer, a big one bypasses it.
        for chunk in [
            pattern(10, 1),
            pattern(70_000, 2),
            pattern(5, 3),
            pattern(WRITE_BUFFER_BYTES - 3, 4),
        ] {
            file.append(&chunk).unwrap();
            expected.extend_from_slice(&chunk);
            assert_eq!(file.len(), expected.len() as u64);
        }
        assert!(fs.file_size(&path).unwrap() < expected.len() as u64);
        file.flush().unwrap();
        assert_eq!(fs.file_size(&path).unwrap(), expected.len() as u64);
        file.append(b"tail").unwrap();
        expected.extend_from_slice(b"tail");
        file.sync().unwrap();
        assert_eq!(fs.read_all(&path).unwrap(), expected);

        let reader = fs.open(&path, false).unwrap();
        assert_eq!(reader.size(), expected.len() as u64);
        assert_eq!(reader.path(), path);
        assert_eq!(reader.read_at(9, 20).unwrap(), &expected[9..29]);
        assert_eq!(reader.read_at(0, expected.len()).unwrap(), expected);
        assert!(reader.read_at(5, 0).unwrap().is_empty());
    }

    #[test]
    fn preallocation_reserves_blocks_and_keeps_the_length() {
        use std::os::unix::fs::MetadataExt;
        let dir = temp_dir();
        let path = dir.path().join("log");
        let fs = StdFileSystem;
        let mut file = fs.create(&path).unwrap();
        let head = pattern(1000, 13);
        file.append(&head).unwrap();
        file.flush().unwrap();
        let reserved = fs.preallocate_hint(&path, 4 << 20);
        assert_eq!(fs.file_size(&path).unwrap(), 1000);
        if reserved {
            let blocks_bytes = std::fs::metadata(&path).unwrap().blocks() * 512;
            assert!(blocks_bytes >= 4 << 20, "{blocks_bytes} bytes of blocks");
        }
        // Appends continue at the length, and read back without the reserved space.
        let tail = pattern(70_000, 14);
        file.append(&tail).unwrap();
        file.sync().unwrap();
        let mut expected = head;
        expected.extend_from_slice(&tail);
        assert_eq!(fs.read_all(&path).unwrap(), expected);
        assert!(!fs.preallocate_hint(&dir.path().join("absent"), 1 << 20));
    }

    /// The sync hint writes back whole aligned spans at least one span below the length (the
    /// tail, where an appender writes next, is left alone), and changes nothing a reader sees.
    #[test]
    fn the_sync_hint_leaves_the_tail_and_keeps_the_contents() {
        let span = SYNC_HINT_ALIGNMENT_BYTES;
        assert!(span >= WRITE_BUFFER_BYTES as u64);
        for length in [
            0,
            1,
            span - 1,
            span,
            span + 1,
            2 * span - 1,
            2 * span,
            5 * span + 7,
        ] {
            let end = sync_hint_end_bytes(length);
            assert_eq!(end % span, 0, "length {length}");
            assert!(end + span <= length.max(span), "length {length}: end {end}");
            assert!(
                end + 2 * span > length,
                "length {length}: end {end} leaves too much"
            );
        }
        let dir = temp_dir();
        let path = dir.path().join("log");
        let fs = StdFileSystem;
        let mut file = fs.create(&path).unwrap();
        let head = pattern(3 * span as usize + 100, 15);
        file.append(&head).unwrap();
        file.flush().unwrap();
        fs.sync_data_hint(&path);
        fs.sync_data_hint(&dir.path().join("absent"));
        let tail = pattern(1000, 16);
        file.append(&tail).unwrap();
        file.sync().unwrap();
        let mut expected = head;
        expected.extend_from_slice(&tail);
        assert_eq!(fs.read_all(&path).unwrap(), expected);
    }

    #[test]
    fn drop_flushes_buffered_bytes() {
        let dir = temp_dir();
        let path = dir.path().join("data");
        let mut file = StdFileSystem.create(&path).unwrap();
        file.append(b"unflushed").unwrap();
        drop(file);
        assert_eq!(StdFileSystem.read_all(&path).unwrap(), b"unflushed");
    }

    #[test]
    fn short_read_names_file_and_offset() {
        let dir = temp_dir();
        let path = dir.path().join("short");
        write_file(&path, &pattern(100, 5));
        for direct in [false, true] {
            let reader = StdFileSystem.open(&path, direct).unwrap();
            let error = reader.read_at(90, 20).unwrap_err();
            match &error {
                Error::Io {
                    path: error_path,
                    source,
                } => {
                    assert_eq!(error_path, &path);
                    assert_eq!(source.kind(), io::ErrorKind::UnexpectedEof);
                    assert!(source.to_string().contains("offset 90"), "{source}");
                }
                other => panic!("unexpected error {other:?}"),
            }
            assert!(reader.read_at(u64::MAX - 2, 10).is_err());
        }
    }

    fn check_random_reads(reader: &dyn RandomAccessFile, data: &[u8], seed: u64) {
        let mut rng = StdRng::seed_from_u64(seed);
        let mut cases = vec![
            (0, data.len()),
            (data.len() as u64 - 1, 1),
            (4095, 2),
            (4096, 4096),
            (data.len() as u64 - 100, 100),
        ];
        for _ in 0..200 {
            let offset = rng.gen_range(0..data.len());
            let len = rng.gen_range(1..=(data.len() - offset).min(20_000));
            cases.push((offset as u64, len));
        }
        for (offset, len) in cases {
            let start = offset as usize;
            assert_eq!(
                reader.read_at(offset, len).unwrap(),
                &data[start..start + len],
                "seed {seed} offset {offset} len {len}"
            );
        }
        let past_end = reader.read_at(data.len() as u64 - 10, 11).unwrap_err();
        assert!(matches!(past_end, Error::Io { .. }));
    }

    #[test]
    fn direct_reads_at_unaligned_offsets_and_near_end() {
        let dir = temp_dir();
        let path = dir.path().join("direct");
        // Not a multiple of the alignment, so the last aligned read comes back short.
        let data = pattern(3 * 4096 * 7 + 1234, 6);
        write_file(&path, &data);
        let reader = StdFileSystem.open_random_access(&path, true).unwrap();
        // tempdir is on ext4 here; elsewhere the fallback keeps the test meaningful.
        let direct_active = reader.direct_io_active();
        check_random_reads(&reader, &data, 7);
        assert_eq!(reader.direct_io_active(), direct_active);

        let buffered = StdFileSystem.open_random_access(&path, false).unwrap();
        assert!(!buffered.direct_io_active());
        check_random_reads(&buffered, &data, 8);
    }

    #[test]
    fn direct_io_refused_at_open_falls_back() {
        let dir = temp_dir();
        let path = dir.path().join("refused");
        let data = pattern(10_000, 9);
        write_file(&path, &data);
        let refuse = |_: &Path| Err(io::Error::from_raw_os_error(libc::EINVAL));
        let reader = StdRandomAccessFile::open(&path, true, refuse).unwrap();
        assert!(!reader.direct_io_active());
        check_random_reads(&reader, &data, 10);

        // Other open errors are reported, not hidden by the fallback.
        let denied = |_: &Path| Err(io::Error::from_raw_os_error(libc::EACCES));
        assert!(StdRandomAccessFile::open(&path, true, denied).is_err());
    }

    #[test]
    fn direct_io_refused_at_read_falls_back() {
        let dir = temp_dir();
        let path = dir.path().join("refused_later");
        let data = pattern(9000, 11);
        write_file(&path, &data);
        let reader = StdRandomAccessFile::open(&path, true, open_direct).unwrap();
        reader.fall_back_to_buffered();
        assert!(!reader.direct_io_active());
        check_random_reads(&reader, &data, 12);
    }

    #[test]
    fn missing_file_errors_name_the_path() {
        let dir = temp_dir();
        let path = dir.path().join("absent");
        for direct in [false, true] {
            match StdFileSystem.open(&path, direct) {
                Err(Error::Io { path: p, source }) => {
                    assert_eq!(p, path);
                    assert_eq!(source.kind(), io::ErrorKind::NotFound);
                }
                Err(other) => panic!("unexpected error {other:?}"),
                Ok(_) => panic!("opened a missing file"),
            }
        }
        assert!(StdFileSystem.read_all(&path).is_err());
        assert!(StdFileSystem.remove(&path).is_err());
        assert!(StdFileSystem.file_size(&path).is_err());
    }

    #[test]
    fn namespace_operations() {
        let dir = temp_dir();
        let fs = StdFileSystem;
        let sub = dir.path().join("a/b");
        fs.create_dir_all(&sub).unwrap();
        write_file(&sub.join("z"), b"zz");
        write_file(&sub.join("x"), b"x");
        assert_eq!(fs.list(&sub).unwrap(), vec!["x", "z"]);
        fs.rename(&sub.join("z"), &sub.join("x")).unwrap();
        assert_eq!(fs.list(&sub).unwrap(), vec!["x"]);
        assert_eq!(fs.read_all(&sub.join("x")).unwrap(), b"zz");
        assert!(fs.exists(&sub.join("x")));
        assert!(!fs.exists(&sub.join("z")));
        fs.sync_dir(&sub).unwrap();
        fs.remove(&sub.join("x")).unwrap();
        assert!(fs.list(&sub).unwrap().is_empty());
        assert!(fs.rename(&sub.join("x"), &sub.join("y")).is_err());
    }

    #[test]
    fn lock_is_exclusive_until_dropped() {
        let dir = temp_dir();
        let path = dir.path().join("LOCK");
        let first = StdFileSystem.lock(&path).unwrap();
        match StdFileSystem.lock(&path) {
            Err(Error::Locked {
                path: locked,
                detail,
            }) => {
                assert_eq!(locked, path);
                assert!(detail.contains("in this process"), "{detail}");
            }
            Err(other) => panic!("unexpected error {other:?}"),
            Ok(_) => panic!("second lock succeeded"),
        }
        drop(first);
        let _again = StdFileSystem.lock(&path).unwrap();
        // Another spelling of the same path is the same lock.
        let spelled = dir.path().join(".").join("LOCK");
        assert!(matches!(
            StdFileSystem.lock(&spelled),
            Err(Error::Locked { .. })
        ));
    }

    /// Regression: with `flock`, a child process forked by any thread shared the lock's open
    /// file description until it exec'd or exited, so dropping the lock did not release it
    /// and an immediate reopen failed with `Locked` (seen as a flaky reopen in test binaries
    /// that spawn child processes). The child here lives 300 ms after the fork: the lock must
    /// be free as soon as this process drops it.
    #[test]
    fn a_dropped_lock_is_free_while_a_forked_child_still_lives() {
        let dir = temp_dir();
        let path = dir.path().join("LOCK");
        let lock = StdFileSystem.lock(&path).unwrap();
        // SAFETY: the child only calls async-signal-safe functions (`usleep`, `_exit`) before
        // exiting, as required after `fork` in a multi-threaded process.
        let child = unsafe { libc::fork() };
        if child == 0 {
            // SAFETY: see above.
            unsafe {
                libc::usleep(300_000);
                libc::_exit(0);
            }
        }
        assert!(child > 0, "fork failed: {}", io::Error::last_os_error());
        drop(lock);
        let again = StdFileSystem.lock(&path);
        let mut status = 0;
        // SAFETY: waits for the child forked above; `status` outlives the call.
        let waited = unsafe { libc::waitpid(child, &raw mut status, 0) };
        assert_eq!(waited, child);
        assert!(
            again.is_ok(),
            "the lock stayed held by the forked child: {:?}",
            again.err()
        );
    }
}
