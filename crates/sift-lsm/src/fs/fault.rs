//! An in-memory file system for crash and fault-injection tests.
//!
//! Each file keeps its bytes and how many of them were synced. [`FaultFileSystem::crash`]
//! simulates power loss: unsynced bytes vanish and namespace changes (create, rename, remove) not
//! made durable by `sync_dir` of their directory are undone. Faults can be injected per kind of
//! operation, after a count, always, or at random with a seed, and test helpers corrupt, truncate
//! and inspect files. Directories themselves are durable as soon as they are created.

use super::{FileLock, FileSystem, RandomAccessFile, WritableFile};
use crate::{Error, Result};
use parking_lot::Mutex;
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Like the real file system's writer, appends are gathered until this many bytes or a flush.
const WRITE_BUFFER_BYTES: usize = 64 * 1024;

/// The kinds of operation faults can be injected into.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FaultKind {
    /// `WritableFile::append` (a failed append adds nothing).
    Write,
    /// `WritableFile::sync` (buffered bytes reach the file, but are not made durable).
    Sync,
    /// `FileSystem::create`.
    Create,
    /// `RandomAccessFile::read_at` and `FileSystem::read_all`.
    Read,
    /// `FileSystem::rename`.
    Rename,
    /// `FileSystem::remove`.
    Remove,
    /// `FileSystem::sync_dir`.
    SyncDir,
}

impl FaultKind {
    /// Every kind of fault.
    pub const ALL: [FaultKind; 7] = [
        FaultKind::Write,
        FaultKind::Sync,
        FaultKind::Create,
        FaultKind::Read,
        FaultKind::Rename,
        FaultKind::Remove,
        FaultKind::SyncDir,
    ];

    fn index(self) -> usize {
        self as usize
    }
}

/// A small deterministic generator, so the library needs no `rand` dependency.
#[derive(Debug, Clone)]
struct SplitMix64(u64);

impl SplitMix64 {
    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `[0, 1)`.
    fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Uniform in `0..=max`.
    fn up_to(&mut self, max: u64) -> u64 {
        match max.checked_add(1) {
            Some(bound) => self.next_u64() % bound,
            None => self.next_u64(),
        }
    }
}

#[derive(Debug)]
enum Rule {
    Never,
    /// Lets `remaining` operations pass, fails the next one, and then every later one if
    /// `persistent`, else none.
    After {
        remaining: u64,
        persistent: bool,
    },
    Random {
        probability: f64,
        generator: SplitMix64,
    },
}

#[derive(Debug)]
struct KindState {
    operations: u64,
    rule: Rule,
    /// When set, the rule applies only to files whose name contains this (other operations
    /// of the kind pass, and do not count towards the rule).
    file_name_filter: Option<String>,
}

#[derive(Debug, Default)]
struct FileData {
    bytes: Vec<u8>,
    /// Bytes that survive a crash: a prefix, because files only grow by appends.
    synced_len: usize,
}

type Inode = Arc<Mutex<FileData>>;

#[derive(Debug)]
struct State {
    /// Bumped by every crash; handles from an older generation refuse to work.
    generation: u64,
    /// The namespace as the running process sees it.
    live: BTreeMap<PathBuf, Inode>,
    /// The namespace a crash returns to: updated per directory by `sync_dir`.
    durable: BTreeMap<PathBuf, Inode>,
    directories: BTreeSet<PathBuf>,
    kinds: Vec<KindState>,
    /// Held locks, each with the token of the `FileLock` that releases it.
    locks: HashMap<PathBuf, u64>,
    next_lock_token: u64,
}

fn not_found(path: &Path) -> Error {
    Error::io(
        path,
        io::Error::new(
            io::ErrorKind::NotFound,
            "no such file (in-memory file system)",
        ),
    )
}

fn stale_handle(path: &Path) -> Error {
    Error::io(
        path,
        io::Error::other(
            "handle predates a simulated crash (clone the FaultFileSystem again after crash())",
        ),
    )
}

fn parent_of(path: &Path) -> &Path {
    path.parent().unwrap_or(Path::new(""))
}

impl State {
    fn new() -> Self {
        State {
            generation: 0,
            live: BTreeMap::new(),
            durable: BTreeMap::new(),
            directories: BTreeSet::new(),
            kinds: FaultKind::ALL
                .iter()
                .map(|_| KindState {
                    operations: 0,
                    rule: Rule::Never,
                    file_name_filter: None,
                })
                .collect(),
            locks: HashMap::new(),
            next_lock_token: 0,
        }
    }

    fn check_generation(&self, generation: u64, path: &Path) -> Result<()> {
        if generation == self.generation {
            Ok(())
        } else {
            Err(stale_handle(path))
        }
    }

    /// Counts one operation of `kind` and fails it if a rule says so.
    fn operation(&mut self, kind: FaultKind, path: &Path) -> Result<()> {
        let state = &mut self.kinds[kind.index()];
        state.operations += 1;
        let number = state.operations;
        if let Some(filter) = &state.file_name_filter {
            let name = path.file_name().map(|n| n.to_string_lossy());
            if !name.is_some_and(|n| n.contains(filter.as_str())) {
                return Ok(());
            }
        }
        let (fail, expired) = match &mut state.rule {
            Rule::Never => (false, false),
            Rule::After {
                remaining,
                persistent,
            } => {
                if *remaining == 0 {
                    (true, !*persistent)
                } else {
                    *remaining -= 1;
                    (false, false)
                }
            }
            Rule::Random {
                probability,
                generator,
            } => (generator.next_f64() < *probability, false),
        };
        if expired {
            state.rule = Rule::Never;
        }
        if fail {
            return Err(Error::io(
                path,
                io::Error::other(format!(
                    "injected fault: {kind:?} operation #{number} on {}",
                    path.display()
                )),
            ));
        }
        Ok(())
    }

    fn directory_exists(&self, dir: &Path) -> bool {
        dir.as_os_str().is_empty() || dir == Path::new("/") || self.directories.contains(dir)
    }

    fn check_parent(&self, path: &Path) -> Result<()> {
        let parent = parent_of(path);
        if self.directory_exists(parent) {
            Ok(())
        } else {
            Err(Error::io(
                path,
                io::Error::new(
                    io::ErrorKind::NotFound,
                    format!("directory {} does not exist", parent.display()),
                ),
            ))
        }
    }

    fn names_in(&self, dir: &Path) -> Vec<String> {
        let files = self.live.keys();
        let directories = self.directories.iter();
        let mut names: Vec<String> = files
            .chain(directories)
            .filter(|path| path.parent() == Some(dir))
            .filter_map(|path| path.file_name())
            .map(|name| name.to_string_lossy().into_owned())
            .collect();
        names.sort_unstable();
        names.dedup();
        names
    }

    fn crash(&mut self, mut torn_writes: Option<SplitMix64>) {
        self.generation += 1;
        self.locks.clear();
        self.live = self.durable.clone();
        // A file may be durable under two names (a rename durable in one directory only).
        let mut seen = HashSet::new();
        for inode in self.durable.values() {
            if !seen.insert(Arc::as_ptr(inode)) {
                continue;
            }
            let mut data = inode.lock();
            let unsynced = data.bytes.len().saturating_sub(data.synced_len);
            let kept = match &mut torn_writes {
                Some(generator) => generator.up_to(unsynced as u64) as usize,
                None => 0,
            };
            let len = data.synced_len + kept;
            data.bytes.truncate(len);
        }
    }
}

/// An in-memory [`FileSystem`] with crash simulation and fault injection. Clones share the
/// files; a clone made before [`crash`](Self::crash) (other than the handle `crash` was called
/// on) is stale afterwards and every file-system operation on it fails, the way a crashed
/// process can no longer touch the disk.
pub struct FaultFileSystem {
    shared: Arc<Mutex<State>>,
    generation: AtomicU64,
}

impl Clone for FaultFileSystem {
    fn clone(&self) -> Self {
        FaultFileSystem {
            shared: Arc::clone(&self.shared),
            generation: AtomicU64::new(self.generation.load(Ordering::SeqCst)),
        }
    }
}

impl Default for FaultFileSystem {
    fn default() -> Self {
        Self::new()
    }
}

impl std::fmt::Debug for FaultFileSystem {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let state = self.shared.lock();
        formatter
            .debug_struct("FaultFileSystem")
            .field("files", &state.live.len())
            .field("generation", &state.generation)
            .finish_non_exhaustive()
    }
}

impl FaultFileSystem {
    /// A fault file system over the real one, with no fault armed.
    pub fn new() -> Self {
        FaultFileSystem {
            shared: Arc::new(Mutex::new(State::new())),
            generation: AtomicU64::new(0),
        }
    }

    fn generation(&self) -> u64 {
        self.generation.load(Ordering::SeqCst)
    }

    /// Locks the state after checking this handle is not stale.
    fn state(&self, path: &Path) -> Result<parking_lot::MutexGuard<'_, State>> {
        let state = self.shared.lock();
        state.check_generation(self.generation(), path)?;
        Ok(state)
    }

    /// Simulates power loss: every file is cut to its synced length and the namespace returns to
    /// what the last `sync_dir` of each directory made durable. Locks are released; open files
    /// and other handles cloned before the crash fail from now on.
    pub fn crash(&self) {
        self.crash_inner(None);
    }

    /// Like [`crash`](Self::crash), but each file keeps a random prefix (chosen by `seed`) of
    /// its unsynced bytes, as a torn write would.
    pub fn crash_with_torn_writes(&self, seed: u64) {
        self.crash_inner(Some(SplitMix64(seed)));
    }

    fn crash_inner(&self, torn_writes: Option<SplitMix64>) {
        let mut state = self.shared.lock();
        state.crash(torn_writes);
        self.generation.store(state.generation, Ordering::SeqCst);
    }

    fn set_rule(&self, kind: FaultKind, rule: Rule) {
        let mut state = self.shared.lock();
        let kind_state = &mut state.kinds[kind.index()];
        kind_state.rule = rule;
        kind_state.file_name_filter = None;
    }

    /// Like [`fail_from`](Self::fail_from), but only for files whose name contains
    /// `file_name_part` (say `.sst` or `MANIFEST`): operations on other files pass and are
    /// not counted in `operations`' budget (they still count in [`operations`](Self::operations)).
    pub fn fail_from_files(&self, kind: FaultKind, operations: u64, file_name_part: &str) {
        let mut state = self.shared.lock();
        let kind_state = &mut state.kinds[kind.index()];
        kind_state.rule = Rule::After {
            remaining: operations,
            persistent: true,
        };
        kind_state.file_name_filter = Some(file_name_part.to_owned());
    }

    /// Lets `operations` operations of `kind` pass, fails the next one, then heals.
    pub fn fail_after(&self, kind: FaultKind, operations: u64) {
        self.set_rule(
            kind,
            Rule::After {
                remaining: operations,
                persistent: false,
            },
        );
    }

    /// Lets `operations` operations of `kind` pass, then fails every later one until healed.
    pub fn fail_from(&self, kind: FaultKind, operations: u64) {
        self.set_rule(
            kind,
            Rule::After {
                remaining: operations,
                persistent: true,
            },
        );
    }

    /// Fails every operation of `kind` until healed.
    pub fn fail_always(&self, kind: FaultKind) {
        self.fail_from(kind, 0);
    }

    /// Fails each operation of `kind` with `probability`, reproducibly for a `seed`.
    pub fn fail_randomly(&self, kind: FaultKind, probability: f64, seed: u64) {
        self.set_rule(
            kind,
            Rule::Random {
                probability,
                generator: SplitMix64(seed),
            },
        );
    }

    /// Removes every fault rule.
    pub fn heal(&self) {
        let mut state = self.shared.lock();
        for kind in &mut state.kinds {
            kind.rule = Rule::Never;
            kind.file_name_filter = None;
        }
    }

    /// Operations of `kind` attempted so far (failed ones included).
    pub fn operations(&self, kind: FaultKind) -> u64 {
        self.shared.lock().kinds[kind.index()].operations
    }

    fn with_file<T>(&self, path: &Path, f: impl FnOnce(&mut FileData) -> Result<T>) -> Result<T> {
        let state = self.shared.lock();
        let inode = state.live.get(path).ok_or_else(|| not_found(path))?;
        let mut data = inode.lock();
        f(&mut data)
    }

    /// Flips bits of the byte at `offset` (XOR with `xor`), on disk: the change survives crashes
    /// when the byte was synced.
    pub fn corrupt(&self, path: &Path, offset: u64, xor: u8) -> Result<()> {
        self.with_file(path, |data| {
            let len = data.bytes.len();
            let byte = usize::try_from(offset)
                .ok()
                .and_then(|index| data.bytes.get_mut(index))
                .ok_or_else(|| {
                    Error::io(
                        path,
                        io::Error::new(
                            io::ErrorKind::InvalidInput,
                            format!("cannot corrupt offset {offset} of a {len}-byte file"),
                        ),
                    )
                })?;
            *byte ^= xor;
            Ok(())
        })
    }

    /// Cuts (or zero-extends) a file to `len` bytes. The synced length shrinks with it; added
    /// zeros count as unsynced.
    pub fn truncate(&self, path: &Path, len: u64) -> Result<()> {
        self.with_file(path, |data| {
            let len = usize::try_from(len).map_err(|_| {
                Error::io(
                    path,
                    io::Error::new(io::ErrorKind::InvalidInput, "length too large"),
                )
            })?;
            data.bytes.resize(len, 0);
            data.synced_len = data.synced_len.min(len);
            Ok(())
        })
    }

    /// Names of the files and directories in `dir` as the running process sees them, sorted;
    /// empty if `dir` does not exist.
    pub fn file_names(&self, dir: &Path) -> Vec<String> {
        self.shared.lock().names_in(dir)
    }

    /// A file's flushed bytes (not those still in a writer's buffer).
    pub fn file_bytes(&self, path: &Path) -> Option<Vec<u8>> {
        let state = self.shared.lock();
        state.live.get(path).map(|inode| inode.lock().bytes.clone())
    }

    /// How many of a file's bytes would survive a crash.
    pub fn synced_len(&self, path: &Path) -> Option<u64> {
        let state = self.shared.lock();
        state
            .live
            .get(path)
            .map(|inode| inode.lock().synced_len as u64)
    }
}

impl FileSystem for FaultFileSystem {
    fn create(&self, path: &Path) -> Result<Box<dyn WritableFile>> {
        let mut state = self.state(path)?;
        state.check_parent(path)?;
        state.operation(FaultKind::Create, path)?;
        // Truncation of an existing file is taken to be durable at once: the harsher case.
        let inode = if let Some(inode) = state.live.get(path) {
            let mut data = inode.lock();
            data.bytes.clear();
            data.synced_len = 0;
            Arc::clone(inode)
        } else {
            let inode = Inode::default();
            state.live.insert(path.to_path_buf(), Arc::clone(&inode));
            inode
        };
        Ok(Box::new(FaultWritableFile {
            shared: Arc::clone(&self.shared),
            generation: self.generation(),
            path: path.to_path_buf(),
            inode,
            buffer: Vec::new(),
            len: 0,
            failed: false,
        }))
    }

    fn open(&self, path: &Path, _direct: bool) -> Result<Arc<dyn RandomAccessFile>> {
        let state = self.state(path)?;
        let inode = state.live.get(path).ok_or_else(|| not_found(path))?;
        let size = inode.lock().bytes.len() as u64;
        Ok(Arc::new(FaultRandomAccessFile {
            shared: Arc::clone(&self.shared),
            generation: self.generation(),
            path: path.to_path_buf(),
            inode: Arc::clone(inode),
            size,
        }))
    }

    fn read_all(&self, path: &Path) -> Result<Vec<u8>> {
        let mut state = self.state(path)?;
        let inode = state
            .live
            .get(path)
            .cloned()
            .ok_or_else(|| not_found(path))?;
        state.operation(FaultKind::Read, path)?;
        let bytes = inode.lock().bytes.clone();
        Ok(bytes)
    }

    fn rename(&self, from: &Path, to: &Path) -> Result<()> {
        let mut state = self.state(from)?;
        if !state.live.contains_key(from) {
            return Err(not_found(from));
        }
        state.check_parent(to)?;
        state.operation(FaultKind::Rename, from)?;
        if let Some(inode) = state.live.remove(from) {
            state.live.insert(to.to_path_buf(), inode);
        }
        Ok(())
    }

    fn remove(&self, path: &Path) -> Result<()> {
        let mut state = self.state(path)?;
        if !state.live.contains_key(path) {
            return Err(not_found(path));
        }
        state.operation(FaultKind::Remove, path)?;
        state.live.remove(path);
        Ok(())
    }

    fn exists(&self, path: &Path) -> bool {
        match self.state(path) {
            Ok(state) => state.live.contains_key(path) || state.directory_exists(path),
            Err(_) => false,
        }
    }

    fn create_dir_all(&self, path: &Path) -> Result<()> {
        let mut state = self.state(path)?;
        if state.live.contains_key(path) {
            return Err(Error::io(
                path,
                io::Error::new(io::ErrorKind::AlreadyExists, "a file has this name"),
            ));
        }
        for ancestor in path.ancestors() {
            if !state.directory_exists(ancestor) {
                state.directories.insert(ancestor.to_path_buf());
            }
        }
        Ok(())
    }

    fn list(&self, dir: &Path) -> Result<Vec<String>> {
        let state = self.state(dir)?;
        if !state.directory_exists(dir) {
            return Err(not_found(dir));
        }
        Ok(state.names_in(dir))
    }

    fn sync_dir(&self, dir: &Path) -> Result<()> {
        let mut state = self.state(dir)?;
        if !state.directory_exists(dir) {
            return Err(not_found(dir));
        }
        state.operation(FaultKind::SyncDir, dir)?;
        state.durable.retain(|path, _| parent_of(path) != dir);
        let entries: Vec<(PathBuf, Inode)> = state
            .live
            .iter()
            .filter(|(path, _)| parent_of(path) == dir)
            .map(|(path, inode)| (path.clone(), Arc::clone(inode)))
            .collect();
        state.durable.extend(entries);
        Ok(())
    }

    fn lock(&self, path: &Path) -> Result<Box<dyn FileLock>> {
        let mut state = self.state(path)?;
        if state.locks.contains_key(path) {
            return Err(Error::Locked {
                path: path.to_path_buf(),
                detail: "another handle on this in-memory file system holds the lock".to_string(),
            });
        }
        if !state.live.contains_key(path) {
            state.check_parent(path)?;
            state.live.insert(path.to_path_buf(), Inode::default());
        }
        state.next_lock_token += 1;
        let token = state.next_lock_token;
        state.locks.insert(path.to_path_buf(), token);
        Ok(Box::new(FaultFileLock {
            shared: Arc::clone(&self.shared),
            path: path.to_path_buf(),
            token,
        }))
    }

    fn file_size(&self, path: &Path) -> Result<u64> {
        let state = self.state(path)?;
        let inode = state.live.get(path).ok_or_else(|| not_found(path))?;
        let len = inode.lock().bytes.len() as u64;
        Ok(len)
    }
}

struct FaultWritableFile {
    shared: Arc<Mutex<State>>,
    generation: u64,
    path: PathBuf,
    inode: Inode,
    buffer: Vec<u8>,
    len: u64,
    /// Set after a failed append or sync, as in the real file system's writer.
    failed: bool,
}

impl FaultWritableFile {
    fn check_usable(&self, state: &State) -> Result<()> {
        state.check_generation(self.generation, &self.path)?;
        if self.failed {
            return Err(Error::io(
                &self.path,
                io::Error::other("an earlier write or sync on this file failed"),
            ));
        }
        Ok(())
    }

    fn move_buffer_to_file(&mut self) {
        self.inode.lock().bytes.append(&mut self.buffer);
    }
}

impl WritableFile for FaultWritableFile {
    fn append(&mut self, data: &[u8]) -> Result<()> {
        let shared = Arc::clone(&self.shared);
        let mut state = shared.lock();
        self.check_usable(&state)?;
        if let Err(e) = state.operation(FaultKind::Write, &self.path) {
            self.failed = true;
            return Err(e);
        }
        self.buffer.extend_from_slice(data);
        self.len += data.len() as u64;
        if self.buffer.len() >= WRITE_BUFFER_BYTES {
            self.move_buffer_to_file();
        }
        Ok(())
    }

    fn flush(&mut self) -> Result<()> {
        let shared = Arc::clone(&self.shared);
        let state = shared.lock();
        self.check_usable(&state)?;
        self.move_buffer_to_file();
        Ok(())
    }

    fn sync(&mut self) -> Result<()> {
        let shared = Arc::clone(&self.shared);
        let mut state = shared.lock();
        self.check_usable(&state)?;
        self.move_buffer_to_file();
        if let Err(e) = state.operation(FaultKind::Sync, &self.path) {
            self.failed = true;
            return Err(e);
        }
        let mut data = self.inode.lock();
        data.synced_len = data.bytes.len();
        Ok(())
    }

    fn len(&self) -> u64 {
        self.len
    }
}

impl Drop for FaultWritableFile {
    fn drop(&mut self) {
        // Mirrors the real writer, which hands buffered bytes to the OS when dropped.
        let shared = Arc::clone(&self.shared);
        let state = shared.lock();
        if self.check_usable(&state).is_ok() {
            self.move_buffer_to_file();
        }
    }
}

struct FaultRandomAccessFile {
    shared: Arc<Mutex<State>>,
    generation: u64,
    path: PathBuf,
    inode: Inode,
    size: u64,
}

impl RandomAccessFile for FaultRandomAccessFile {
    fn read_at(&self, offset: u64, len: usize) -> Result<Vec<u8>> {
        let mut state = self.shared.lock();
        state.check_generation(self.generation, &self.path)?;
        state.operation(FaultKind::Read, &self.path)?;
        let data = self.inode.lock();
        let range = usize::try_from(offset)
            .ok()
            .and_then(|start| Some(start..start.checked_add(len)?))
            .filter(|range| range.end <= data.bytes.len());
        match range {
            Some(range) => Ok(data.bytes[range].to_vec()),
            None => Err(Error::io(
                &self.path,
                io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    format!(
                        "short read: {len} bytes at offset {offset}, but the file has {} bytes",
                        data.bytes.len()
                    ),
                ),
            )),
        }
    }

    fn size(&self) -> u64 {
        self.size
    }

    fn path(&self) -> &Path {
        &self.path
    }
}

struct FaultFileLock {
    shared: Arc<Mutex<State>>,
    path: PathBuf,
    token: u64,
}

impl FileLock for FaultFileLock {}

impl Drop for FaultFileLock {
    fn drop(&mut self) {
        let mut state = self.shared.lock();
        // After a crash the lock may belong to a newer holder; leave that one alone.
        if state.locks.get(&self.path) == Some(&self.token) {
            state.locks.remove(&self.path);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};

    fn setup() -> (FaultFileSystem, PathBuf) {
        let fs = FaultFileSystem::new();
        let dir = PathBuf::from("/db");
        fs.create_dir_all(&dir).unwrap();
        (fs, dir)
    }

    fn write_durably(fs: &FaultFileSystem, path: &Path, data: &[u8]) {
        let mut file = fs.create(path).unwrap();
        file.append(data).unwrap();
        file.sync().unwrap();
        fs.sync_dir(parent_of(path)).unwrap();
    }

    #[test]
    fn crash_drops_unsynced_bytes_and_keeps_synced_ones() {
        let (fs, dir) = setup();
        let path = dir.join("wal");
        let mut file = fs.create(&path).unwrap();
        fs.sync_dir(&dir).unwrap();
        file.append(b"abc").unwrap();
        // Unflushed bytes are not in the file yet, as with the real writer.
        assert_eq!(fs.file_bytes(&path).unwrap(), b"");
        file.sync().unwrap();
        file.append(b"def").unwrap();
        file.flush().unwrap();
        assert_eq!(file.len(), 6);
        assert_eq!(fs.file_bytes(&path).unwrap(), b"abcdef");
        assert_eq!(fs.synced_len(&path), Some(3));

        fs.crash();
        assert_eq!(fs.file_bytes(&path).unwrap(), b"abc");
        // The old writer belongs to the crashed process.
        assert!(file.append(b"ghi").is_err());
        drop(file);
        assert_eq!(fs.file_bytes(&path).unwrap(), b"abc");
        assert_eq!(fs.read_all(&path).unwrap(), b"abc");
    }

    #[test]
    fn drop_flushes_buffered_bytes() {
        let (fs, dir) = setup();
        let path = dir.join("f");
        let mut file = fs.create(&path).unwrap();
        file.append(b"xyz").unwrap();
        drop(file);
        assert_eq!(fs.file_bytes(&path).unwrap(), b"xyz");
        assert_eq!(fs.synced_len(&path), Some(0));
    }

    #[test]
    fn torn_writes_keep_a_prefix_of_the_unsynced_bytes() {
        let seed = 0x5eed;
        let mut rng = StdRng::seed_from_u64(seed);
        let mut saw_partial = false;
        for round in 0..50 {
            let (fs, dir) = setup();
            let path = dir.join("wal");
            let mut file = fs.create(&path).unwrap();
            fs.sync_dir(&dir).unwrap();
            // Model: every byte written, and how many of them were synced.
            let mut written = Vec::new();
            let mut synced = 0;
            for _ in 0..rng.gen_range(1..20) {
                let chunk: Vec<u8> = (0..rng.gen_range(0..100)).map(|_| rng.gen()).collect();
                file.append(&chunk).unwrap();
                written.extend_from_slice(&chunk);
                match rng.gen_range(0..3) {
                    0 => {
                        file.sync().unwrap();
                        synced = written.len();
                    }
                    1 => file.flush().unwrap(),
                    _ => {}
                }
            }
            file.flush().unwrap();
            fs.crash_with_torn_writes(rng.gen());
            let after = fs.file_bytes(&path).unwrap();
            assert!(
                after.len() >= synced && written.starts_with(&after),
                "seed {seed} round {round}: {} bytes kept, {synced} synced, {} written",
                after.len(),
                written.len()
            );
            saw_partial |= after.len() > synced && after.len() < written.len();
        }
        assert!(
            saw_partial,
            "seed {seed}: no torn write kept a partial tail"
        );
    }

    #[test]
    fn crash_undoes_namespace_changes_not_followed_by_sync_dir() {
        let (fs, dir) = setup();
        let kept = dir.join("kept");
        let renamed = dir.join("renamed");
        let removed = dir.join("removed");
        write_durably(&fs, &kept, b"k");
        write_durably(&fs, &removed, b"r");

        // Synced bytes, but the directory entry was never made durable.
        let mut file = fs.create(&dir.join("new")).unwrap();
        file.append(b"n").unwrap();
        file.sync().unwrap();
        fs.rename(&kept, &renamed).unwrap();
        fs.remove(&removed).unwrap();
        assert_eq!(fs.list(&dir).unwrap(), vec!["new", "renamed"]);

        fs.crash();
        assert_eq!(fs.list(&dir).unwrap(), vec!["kept", "removed"]);
        assert_eq!(fs.file_bytes(&kept).unwrap(), b"k");
        assert_eq!(fs.file_bytes(&removed).unwrap(), b"r");

        // The same changes followed by sync_dir survive.
        write_durably(&fs, &dir.join("new"), b"n");
        fs.rename(&kept, &renamed).unwrap();
        fs.remove(&removed).unwrap();
        fs.sync_dir(&dir).unwrap();
        fs.crash();
        assert_eq!(fs.list(&dir).unwrap(), vec!["new", "renamed"]);
        assert_eq!(fs.file_bytes(&renamed).unwrap(), b"k");
        assert_eq!(fs.file_bytes(&dir.join("new")).unwrap(), b"n");
    }

    #[test]
    fn sync_dir_only_covers_its_own_directory() {
        let (fs, dir) = setup();
        let other = dir.join("sub");
        fs.create_dir_all(&other).unwrap();
        write_durably(&fs, &dir.join("a"), b"a");
        let mut file = fs.create(&other.join("b")).unwrap();
        file.sync().unwrap();
        fs.sync_dir(&dir).unwrap();
        fs.crash();
        assert_eq!(fs.file_names(&dir), vec!["a", "sub"]);
        assert!(fs.file_names(&other).is_empty());
    }

    #[test]
    fn handles_cloned_before_a_crash_go_stale() {
        let (fs, dir) = setup();
        let path = dir.join("f");
        write_durably(&fs, &path, b"data");
        let old = fs.clone();
        let reader = old.open(&path, true).unwrap();
        let lock = old.lock(&dir.join("LOCK")).unwrap();
        fs.crash();
        assert!(reader.read_at(0, 4).is_err());
        assert!(old.create(&dir.join("g")).is_err());
        assert!(!old.exists(&path));
        // The crash released the lock; the stale lock's drop must not release the new one.
        let new_lock = fs.lock(&dir.join("LOCK")).unwrap();
        drop(lock);
        assert!(matches!(
            fs.lock(&dir.join("LOCK")),
            Err(Error::Locked { .. })
        ));
        drop(new_lock);
        let fresh = fs.clone();
        assert_eq!(
            fresh.open(&path, false).unwrap().read_at(1, 3).unwrap(),
            b"ata"
        );
    }

    #[test]
    fn fail_after_fails_exactly_the_next_operation() {
        let (fs, dir) = setup();
        let path = dir.join("f");
        let mut file = fs.create(&path).unwrap();
        fs.fail_after(FaultKind::Write, 3);
        for _ in 0..3 {
            file.append(b"x").unwrap();
        }
        file.flush().unwrap();
        let error = file.append(b"y").unwrap_err();
        assert!(error.to_string().contains("injected fault"), "{error}");
        assert_eq!(fs.operations(FaultKind::Write), 4);
        // The failed writer stays failed, like the real one; a new one works again.
        assert!(file.append(b"z").is_err());
        drop(file);
        assert_eq!(fs.file_bytes(&path).unwrap(), b"xxx");
        let mut file = fs.create(&path).unwrap();
        file.append(b"z").unwrap();

        for (kind, run) in [
            (FaultKind::Rename, 0),
            (FaultKind::Remove, 1),
            (FaultKind::SyncDir, 2),
            (FaultKind::Create, 3),
        ] {
            fs.fail_after(kind, 1);
            let before = fs.operations(kind);
            let target = dir.join(format!("t{run}"));
            let other = dir.join(format!("u{run}"));
            let mut outcomes = Vec::new();
            for attempt in 0..3 {
                let result = match kind {
                    FaultKind::Rename => {
                        if attempt == 0 {
                            drop(fs.create(&target));
                        }
                        let (from, to) = if fs.exists(&target) {
                            (&target, &other)
                        } else {
                            (&other, &target)
                        };
                        fs.rename(from, to)
                    }
                    FaultKind::Remove => {
                        drop(fs.create(&target));
                        fs.remove(&target)
                    }
                    FaultKind::SyncDir => fs.sync_dir(&dir),
                    _ => fs.create(&target).map(drop),
                };
                outcomes.push(result.is_ok());
            }
            assert_eq!(outcomes, vec![true, false, true], "{kind:?}");
            assert_eq!(fs.operations(kind), before + 3, "{kind:?}");
        }
    }

    #[test]
    fn sync_and_read_faults() {
        let (fs, dir) = setup();
        let path = dir.join("f");
        write_durably(&fs, &path, b"0123456789");
        let reader = fs.open(&path, false).unwrap();
        fs.fail_after(FaultKind::Read, 0);
        assert!(reader.read_at(0, 1).is_err());
        assert_eq!(reader.read_at(2, 3).unwrap(), b"234");
        fs.fail_always(FaultKind::Read);
        assert!(fs.read_all(&path).is_err());
        assert!(reader.read_at(0, 1).is_err());
        fs.heal();
        assert_eq!(fs.read_all(&path).unwrap(), b"0123456789");

        let mut file = fs.create(&dir.join("g")).unwrap();
        file.append(b"abc").unwrap();
        fs.fail_always(FaultKind::Sync);
        assert!(file.sync().is_err());
        // The bytes reached the file but are not durable.
        assert_eq!(fs.file_bytes(&dir.join("g")).unwrap(), b"abc");
        assert_eq!(fs.synced_len(&dir.join("g")), Some(0));
        fs.heal();
        assert!(
            file.sync().is_err(),
            "a writer whose sync failed stays failed"
        );

        fs.fail_from(FaultKind::Create, 1);
        assert!(fs.create(&dir.join("h1")).is_ok());
        assert!(fs.create(&dir.join("h2")).is_err());
        assert!(fs.create(&dir.join("h3")).is_err());
        fs.heal();
        assert!(fs.create(&dir.join("h4")).is_ok());
    }

    #[test]
    fn random_faults_are_reproducible() {
        let pattern = |probability: f64, seed: u64| -> Vec<bool> {
            let (fs, dir) = setup();
            fs.fail_randomly(FaultKind::SyncDir, probability, seed);
            (0..1000).map(|_| fs.sync_dir(&dir).is_err()).collect()
        };
        let first = pattern(0.3, 42);
        assert_eq!(first, pattern(0.3, 42));
        assert_ne!(first, pattern(0.3, 43));
        let failures = first.iter().filter(|failed| **failed).count();
        assert!((200..400).contains(&failures), "{failures} failures");
        assert!(pattern(0.0, 1).iter().all(|failed| !failed));
        assert!(pattern(1.0, 1).iter().all(|failed| *failed));
    }

    #[test]
    fn corrupt_and_truncate_change_the_bytes() {
        let (fs, dir) = setup();
        let path = dir.join("table");
        write_durably(&fs, &path, b"hello");
        fs.corrupt(&path, 1, 0x20).unwrap();
        assert_eq!(fs.file_bytes(&path).unwrap(), b"hEllo");
        assert!(fs.corrupt(&path, 5, 1).is_err());
        assert!(fs.corrupt(&dir.join("absent"), 0, 1).is_err());
        fs.crash();
        assert_eq!(fs.file_bytes(&path).unwrap(), b"hEllo");

        fs.truncate(&path, 2).unwrap();
        assert_eq!(fs.read_all(&path).unwrap(), b"hE");
        assert_eq!(fs.file_size(&path).unwrap(), 2);
        assert_eq!(fs.synced_len(&path), Some(2));
        fs.truncate(&path, 4).unwrap();
        assert_eq!(fs.file_bytes(&path).unwrap(), b"hE\0\0");
    }

    #[test]
    fn reads_past_the_end_name_the_file() {
        let (fs, dir) = setup();
        let path = dir.join("f");
        write_durably(&fs, &path, b"0123456789");
        let reader = fs.open(&path, true).unwrap();
        assert_eq!(reader.size(), 10);
        assert_eq!(reader.path(), path);
        assert_eq!(reader.read_at(7, 3).unwrap(), b"789");
        match reader.read_at(8, 3) {
            Err(Error::Io { path: p, source }) => {
                assert_eq!(p, path);
                assert_eq!(source.kind(), io::ErrorKind::UnexpectedEof);
                assert!(source.to_string().contains("offset 8"), "{source}");
            }
            other => panic!("unexpected {other:?}"),
        }
        assert!(reader.read_at(u64::MAX, 1).is_err());
    }

    #[test]
    fn namespace_rules() {
        let (fs, dir) = setup();
        assert!(fs.create(Path::new("/missing/f")).is_err());
        assert!(fs.list(Path::new("/missing")).is_err());
        assert!(fs.open(&dir.join("absent"), false).is_err());
        assert!(fs.remove(&dir.join("absent")).is_err());
        assert!(fs.rename(&dir.join("absent"), &dir.join("b")).is_err());
        assert!(fs.file_size(&dir.join("absent")).is_err());
        write_durably(&fs, &dir.join("a"), b"aa");
        write_durably(&fs, &dir.join("b"), b"b");
        fs.rename(&dir.join("a"), &dir.join("b")).unwrap();
        assert_eq!(fs.list(&dir).unwrap(), vec!["b"]);
        assert_eq!(fs.read_all(&dir.join("b")).unwrap(), b"aa");
        assert!(fs.exists(&dir));
        assert!(fs.exists(&dir.join("b")));
        assert!(!fs.exists(&dir.join("a")));
        assert_eq!(fs.list(Path::new("/")).unwrap(), vec!["db"]);
    }

    #[test]
    fn lock_is_exclusive_until_dropped() {
        let (fs, dir) = setup();
        let path = dir.join("LOCK");
        let first = fs.lock(&path).unwrap();
        assert!(fs.exists(&path));
        match fs.clone().lock(&path) {
            Err(Error::Locked { path: locked, .. }) => assert_eq!(locked, path),
            Err(other) => panic!("unexpected error {other:?}"),
            Ok(_) => panic!("second lock succeeded"),
        }
        drop(first);
        let _again = fs.lock(&path).unwrap();
    }
}
