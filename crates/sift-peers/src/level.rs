//! LevelDB (Debian's libleveldb, C API of leveldb/c.h, linked with -lleveldb) behind the
//! benchmark's `Engine` trait, configured like Sift where LevelDB allows: WAL on (synced only
//! with `--sync`), 4 KiB blocks, a 10 bits/key bloom filter, an LRU block cache of
//! `--cache-bytes`, 64 MiB write buffer. LevelDB has no LZ4 and keeps its own compaction
//! shape (10 MiB L1, 2 MiB files).

use sift_bench::kv::settings;
use sift_bench::kv::{BenchError, CompressionKind, Engine, EngineCounters, KvConfig};
use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::path::Path;
use std::time::{Duration, Instant};

/// The part of leveldb/c.h (LevelDB 1.23) the benchmark uses.
#[allow(non_camel_case_types)]
mod ffi {
    use std::ffi::{c_char, c_int, c_void};

    #[repr(C)]
    pub struct leveldb_t {
        _opaque: [u8; 0],
    }
    #[repr(C)]
    pub struct leveldb_cache_t {
        _opaque: [u8; 0],
    }
    #[repr(C)]
    pub struct leveldb_filterpolicy_t {
        _opaque: [u8; 0],
    }
    #[repr(C)]
    pub struct leveldb_iterator_t {
        _opaque: [u8; 0],
    }
    #[repr(C)]
    pub struct leveldb_options_t {
        _opaque: [u8; 0],
    }
    #[repr(C)]
    pub struct leveldb_readoptions_t {
        _opaque: [u8; 0],
    }
    #[repr(C)]
    pub struct leveldb_writeoptions_t {
        _opaque: [u8; 0],
    }

    pub const LEVELDB_NO_COMPRESSION: c_int = 0;
    pub const LEVELDB_SNAPPY_COMPRESSION: c_int = 1;

    #[link(name = "leveldb")]
    extern "C" {
        pub fn leveldb_open(
            options: *const leveldb_options_t,
            name: *const c_char,
            errptr: *mut *mut c_char,
        ) -> *mut leveldb_t;
        pub fn leveldb_close(db: *mut leveldb_t);
        pub fn leveldb_put(
            db: *mut leveldb_t,
            options: *const leveldb_writeoptions_t,
            key: *const c_char,
            keylen: usize,
            val: *const c_char,
            vallen: usize,
            errptr: *mut *mut c_char,
        );
        pub fn leveldb_get(
            db: *mut leveldb_t,
            options: *const leveldb_readoptions_t,
            key: *const c_char,
            keylen: usize,
            vallen: *mut usize,
            errptr: *mut *mut c_char,
        ) -> *mut c_char;
        pub fn leveldb_create_iterator(
            db: *mut leveldb_t,
            options: *const leveldb_readoptions_t,
        ) -> *mut leveldb_iterator_t;
        pub fn leveldb_property_value(db: *mut leveldb_t, propname: *const c_char) -> *mut c_char;
        pub fn leveldb_compact_range(
            db: *mut leveldb_t,
            start_key: *const c_char,
            start_key_len: usize,
            limit_key: *const c_char,
            limit_key_len: usize,
        );

        pub fn leveldb_iter_destroy(iterator: *mut leveldb_iterator_t);
        pub fn leveldb_iter_valid(iterator: *const leveldb_iterator_t) -> u8;
        pub fn leveldb_iter_seek_to_first(iterator: *mut leveldb_iterator_t);
        pub fn leveldb_iter_seek(iterator: *mut leveldb_iterator_t, k: *const c_char, klen: usize);
        pub fn leveldb_iter_next(iterator: *mut leveldb_iterator_t);
        pub fn leveldb_iter_key(
            iterator: *const leveldb_iterator_t,
            klen: *mut usize,
        ) -> *const c_char;
        pub fn leveldb_iter_value(
            iterator: *const leveldb_iterator_t,
            vlen: *mut usize,
        ) -> *const c_char;
        pub fn leveldb_iter_get_error(
            iterator: *const leveldb_iterator_t,
            errptr: *mut *mut c_char,
        );

        pub fn leveldb_options_create() -> *mut leveldb_options_t;
        pub fn leveldb_options_destroy(options: *mut leveldb_options_t);
        pub fn leveldb_options_set_filter_policy(
            options: *mut leveldb_options_t,
            policy: *mut leveldb_filterpolicy_t,
        );
        pub fn leveldb_options_set_create_if_missing(options: *mut leveldb_options_t, value: u8);
        pub fn leveldb_options_set_write_buffer_size(options: *mut leveldb_options_t, size: usize);
        pub fn leveldb_options_set_cache(
            options: *mut leveldb_options_t,
            cache: *mut leveldb_cache_t,
        );
        pub fn leveldb_options_set_block_size(options: *mut leveldb_options_t, size: usize);
        pub fn leveldb_options_set_compression(options: *mut leveldb_options_t, value: c_int);

        pub fn leveldb_filterpolicy_create_bloom(
            bits_per_key: c_int,
        ) -> *mut leveldb_filterpolicy_t;
        pub fn leveldb_filterpolicy_destroy(policy: *mut leveldb_filterpolicy_t);

        pub fn leveldb_readoptions_create() -> *mut leveldb_readoptions_t;
        pub fn leveldb_readoptions_destroy(options: *mut leveldb_readoptions_t);
        pub fn leveldb_writeoptions_create() -> *mut leveldb_writeoptions_t;
        pub fn leveldb_writeoptions_destroy(options: *mut leveldb_writeoptions_t);
        pub fn leveldb_writeoptions_set_sync(options: *mut leveldb_writeoptions_t, value: u8);

        pub fn leveldb_cache_create_lru(capacity: usize) -> *mut leveldb_cache_t;
        pub fn leveldb_cache_destroy(cache: *mut leveldb_cache_t);

        pub fn leveldb_free(ptr: *mut c_void);
    }
}

/// Takes a malloc()-ed error message from LevelDB (freeing it).
fn take_error(context: &str, error: *mut c_char) -> Result<(), BenchError> {
    if error.is_null() {
        return Ok(());
    }
    // SAFETY: LevelDB sets `error` to a malloc()-ed, NUL-terminated message.
    let message = unsafe { CStr::from_ptr(error) }
        .to_string_lossy()
        .into_owned();
    // SAFETY: the message came from LevelDB's malloc and is freed once.
    unsafe { ffi::leveldb_free(error.cast::<c_void>()) };
    Err(BenchError::new(format!("leveldb: {context}: {message}")))
}

/// A LevelDB database and the objects it uses, destroyed in the right order on drop.
pub struct LevelDbEngine {
    db: *mut ffi::leveldb_t,
    options: *mut ffi::leveldb_options_t,
    cache: *mut ffi::leveldb_cache_t,
    filter_policy: *mut ffi::leveldb_filterpolicy_t,
    read_options: *mut ffi::leveldb_readoptions_t,
    write_options: *mut ffi::leveldb_writeoptions_t,
}

// SAFETY: a LevelDB database is safe for concurrent use from several threads without external
// synchronization (LevelDB's documented contract). The options objects are only read after
// `open`, and all pointers stay valid until `drop`.
unsafe impl Send for LevelDbEngine {}
// SAFETY: as above.
unsafe impl Sync for LevelDbEngine {}

/// Closes an iterator when it goes out of scope.
struct IteratorGuard(*mut ffi::leveldb_iterator_t);

impl Drop for IteratorGuard {
    fn drop(&mut self) {
        // SAFETY: the iterator was created by leveldb_create_iterator and is destroyed once,
        // before the database (the engine outlives every guard it creates).
        unsafe { ffi::leveldb_iter_destroy(self.0) };
    }
}

impl IteratorGuard {
    fn valid(&self) -> bool {
        // SAFETY: valid iterator pointer (see Drop).
        unsafe { ffi::leveldb_iter_valid(self.0) != 0 }
    }

    /// The current key, borrowed until the iterator moves. Requires `valid()`.
    fn key(&self) -> &[u8] {
        let mut key_bytes = 0_usize;
        // SAFETY: the iterator is valid; LevelDB returns a pointer to `key_bytes` bytes that
        // stay valid until the iterator moves, which needs the guard that this borrows.
        unsafe {
            let key = ffi::leveldb_iter_key(self.0, &raw mut key_bytes);
            std::slice::from_raw_parts(key.cast::<u8>(), key_bytes)
        }
    }

    /// Key plus value length of the current entry. Requires `valid()`.
    fn entry_bytes(&self) -> usize {
        let mut key_bytes = 0_usize;
        let mut value_bytes = 0_usize;
        // SAFETY: the iterator is valid; LevelDB writes the lengths and returns pointers into
        // its own buffers, which the benchmark does not keep.
        unsafe {
            ffi::leveldb_iter_key(self.0, &raw mut key_bytes);
            ffi::leveldb_iter_value(self.0, &raw mut value_bytes);
        }
        key_bytes + value_bytes
    }

    fn status(&self, context: &str) -> Result<(), BenchError> {
        let mut error: *mut c_char = std::ptr::null_mut();
        // SAFETY: valid iterator; `error` starts NULL as the C API requires.
        unsafe { ffi::leveldb_iter_get_error(self.0, &raw mut error) };
        take_error(context, error)
    }
}

impl LevelDbEngine {
    pub fn open(config: &KvConfig, path: &Path) -> Result<Box<dyn Engine>, BenchError> {
        let compression = match config.compression {
            CompressionKind::None => ffi::LEVELDB_NO_COMPRESSION,
            CompressionKind::Snappy => ffi::LEVELDB_SNAPPY_COMPRESSION,
            CompressionKind::Lz4 => {
                return Err(BenchError::new(
                    "leveldb does not support lz4 compression (use none or snappy)",
                ))
            }
        };
        let name = CString::new(path.as_os_str().as_encoded_bytes()).map_err(|_| {
            BenchError::new(format!(
                "leveldb: path {} contains a NUL byte",
                path.display()
            ))
        })?;
        // SAFETY: plain constructor calls; every object is owned by the engine built below
        // and destroyed in its Drop (also when open fails).
        let mut engine = unsafe {
            LevelDbEngine {
                db: std::ptr::null_mut(),
                options: ffi::leveldb_options_create(),
                cache: ffi::leveldb_cache_create_lru(config.cache_bytes),
                filter_policy: ffi::leveldb_filterpolicy_create_bloom(
                    settings::BLOOM_BITS_PER_KEY as c_int,
                ),
                read_options: ffi::leveldb_readoptions_create(),
                write_options: ffi::leveldb_writeoptions_create(),
            }
        };
        let mut error: *mut c_char = std::ptr::null_mut();
        // SAFETY: all pointers were just created and are non-NULL; `name` outlives the call.
        unsafe {
            ffi::leveldb_options_set_create_if_missing(engine.options, 1);
            ffi::leveldb_options_set_write_buffer_size(
                engine.options,
                settings::WRITE_BUFFER_BYTES,
            );
            ffi::leveldb_options_set_block_size(engine.options, settings::BLOCK_BYTES);
            ffi::leveldb_options_set_cache(engine.options, engine.cache);
            ffi::leveldb_options_set_filter_policy(engine.options, engine.filter_policy);
            ffi::leveldb_options_set_compression(engine.options, compression);
            ffi::leveldb_writeoptions_set_sync(engine.write_options, u8::from(config.sync));
            engine.db = ffi::leveldb_open(engine.options, name.as_ptr(), &raw mut error);
        }
        take_error(&format!("cannot open {}", path.display()), error)?;
        if engine.db.is_null() {
            return Err(BenchError::new(format!(
                "leveldb: cannot open {}",
                path.display()
            )));
        }
        Ok(Box::new(engine))
    }

    fn iterator(&self) -> IteratorGuard {
        // SAFETY: open database and read options.
        IteratorGuard(unsafe { ffi::leveldb_create_iterator(self.db, self.read_options) })
    }

    fn property(&self, name: &str) -> Option<String> {
        let name = CString::new(name).ok()?;
        // SAFETY: open database; `name` is NUL-terminated and outlives the call.
        let value = unsafe { ffi::leveldb_property_value(self.db, name.as_ptr()) };
        if value.is_null() {
            return None;
        }
        // SAFETY: a malloc()-ed NUL-terminated string, freed once below.
        let text = unsafe { CStr::from_ptr(value) }
            .to_string_lossy()
            .into_owned();
        // SAFETY: as above.
        unsafe { ffi::leveldb_free(value.cast::<c_void>()) };
        Some(text)
    }
}

/// Bytes per level from LevelDB's "leveldb.sstables" property (`--- level N ---` headers,
/// then one ` number:bytes[smallest .. largest]` line per file). Index = level.
pub fn level_bytes_and_files(sstables: &str) -> Vec<(u64, u64)> {
    let mut levels: Vec<(u64, u64)> = Vec::new();
    for line in sstables.lines() {
        if let Some(rest) = line.strip_prefix("--- level ") {
            if rest
                .trim_end_matches(" ---")
                .trim()
                .parse::<usize>()
                .is_ok()
            {
                levels.push((0, 0));
            }
        } else if let Some(level) = levels.last_mut() {
            let bytes = line
                .trim_start()
                .split_once(':')
                .and_then(|(_, rest)| rest.split('[').next())
                .and_then(|bytes| bytes.trim().parse::<u64>().ok());
            if let Some(bytes) = bytes {
                level.0 += bytes;
                level.1 += 1;
            }
        }
    }
    levels
}

/// Whether LevelDB 1.23 would schedule a size-triggered compaction for this shape: 4 or more
/// L0 files, or level L (1..=5) above 10 MiB * 10^(L-1) (the last level has no limit).
pub fn compaction_needed(levels: &[(u64, u64)]) -> bool {
    const L0_COMPACTION_TRIGGER: u64 = 4;
    /// LevelDB's kNumLevels - 1: the bottom level is never compacted for size.
    const LAST_LEVEL: usize = 6;
    let mut level_bytes_max: u64 = 10 * 1_048_576;
    for (level, &(bytes, files)) in levels.iter().enumerate() {
        if level == 0 {
            if files >= L0_COMPACTION_TRIGGER {
                return true;
            }
            continue;
        }
        if level < LAST_LEVEL && bytes > level_bytes_max {
            return true;
        }
        level_bytes_max = level_bytes_max.saturating_mul(10);
    }
    false
}

impl Engine for LevelDbEngine {
    fn put(&self, key: &[u8], value: &[u8]) -> Result<(), BenchError> {
        let mut error: *mut c_char = std::ptr::null_mut();
        // SAFETY: open database; key and value slices are valid for the call.
        unsafe {
            ffi::leveldb_put(
                self.db,
                self.write_options,
                key.as_ptr().cast::<c_char>(),
                key.len(),
                value.as_ptr().cast::<c_char>(),
                value.len(),
                &raw mut error,
            );
        }
        take_error("put failed", error)
    }

    fn get(&self, key: &[u8]) -> Result<Option<usize>, BenchError> {
        let mut error: *mut c_char = std::ptr::null_mut();
        let mut value_bytes = 0_usize;
        // SAFETY: open database; key slice valid for the call.
        let value = unsafe {
            ffi::leveldb_get(
                self.db,
                self.read_options,
                key.as_ptr().cast::<c_char>(),
                key.len(),
                &raw mut value_bytes,
                &raw mut error,
            )
        };
        take_error("get failed", error)?;
        if value.is_null() {
            return Ok(None);
        }
        // SAFETY: a malloc()-ed copy of the value, freed once.
        unsafe { ffi::leveldb_free(value.cast::<c_void>()) };
        Ok(Some(value_bytes))
    }

    fn seek_and_read_one(&self, key: &[u8]) -> Result<Option<usize>, BenchError> {
        let iterator = self.iterator();
        // SAFETY: valid iterator; key slice valid for the call.
        unsafe { ffi::leveldb_iter_seek(iterator.0, key.as_ptr().cast::<c_char>(), key.len()) };
        iterator.status("seek failed")?;
        Ok(iterator.valid().then(|| iterator.entry_bytes()))
    }

    fn scan(
        &self,
        start: Option<&[u8]>,
        end: Option<&[u8]>,
        on_entry: &mut dyn FnMut(usize),
    ) -> Result<u64, BenchError> {
        let iterator = self.iterator();
        // SAFETY: valid iterator; start slice valid for the call.
        unsafe {
            match start {
                Some(start) => {
                    ffi::leveldb_iter_seek(
                        iterator.0,
                        start.as_ptr().cast::<c_char>(),
                        start.len(),
                    );
                }
                None => ffi::leveldb_iter_seek_to_first(iterator.0),
            }
        }
        let mut entries = 0;
        while iterator.valid() {
            if end.is_some_and(|end| iterator.key() >= end) {
                break;
            }
            on_entry(iterator.entry_bytes());
            entries += 1;
            // SAFETY: valid iterator positioned at an entry.
            unsafe { ffi::leveldb_iter_next(iterator.0) };
        }
        iterator.status("scan failed")?;
        Ok(entries)
    }

    /// LevelDB has no flush call; compacting a range past every key flushes the memtable and
    /// compacts nothing else.
    fn flush(&self) -> Result<(), BenchError> {
        let past_every_key = [0xff_u8; 64];
        // SAFETY: open database; the key buffer is valid for the call.
        unsafe {
            ffi::leveldb_compact_range(
                self.db,
                past_every_key.as_ptr().cast::<c_char>(),
                past_every_key.len(),
                past_every_key.as_ptr().cast::<c_char>(),
                past_every_key.len(),
            );
        }
        Ok(())
    }

    /// LevelDB exposes no pending-work state. Waits until no size-triggered compaction is due
    /// (from "leveldb.sstables") and the table set has not changed for one second, which
    /// also lets an in-flight memtable flush finish.
    fn wait_for_background_work(&self) -> Result<(), BenchError> {
        const QUIET_FOR: Duration = Duration::from_secs(1);
        let mut last_shape = String::new();
        let mut quiet_since = Instant::now();
        loop {
            let shape = self.property("leveldb.sstables").unwrap_or_default();
            if shape != last_shape || compaction_needed(&level_bytes_and_files(&shape)) {
                last_shape = shape;
                quiet_since = Instant::now();
            } else if quiet_since.elapsed() >= QUIET_FOR {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// LevelDB keeps no I/O counters; rows carry `process_write_bytes` instead.
    fn counters(&self) -> EngineCounters {
        EngineCounters::default()
    }

    fn close(self: Box<Self>) -> Result<(), BenchError> {
        drop(self);
        Ok(())
    }
}

impl Drop for LevelDbEngine {
    fn drop(&mut self) {
        // SAFETY: each object was created once by LevelDB and is destroyed once, the database
        // first (it uses the options, cache and filter policy until closed). NULL `db` means
        // open failed.
        unsafe {
            if !self.db.is_null() {
                ffi::leveldb_close(self.db);
            }
            ffi::leveldb_options_destroy(self.options);
            ffi::leveldb_cache_destroy(self.cache);
            ffi::leveldb_filterpolicy_destroy(self.filter_policy);
            ffi::leveldb_readoptions_destroy(self.read_options);
            ffi::leveldb_writeoptions_destroy(self.write_options);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_sstables_property() {
        let text = "--- level 0 ---\n 7:1000['a' @ 1 : 1 .. 'b' @ 2 : 1]\n 9:2000['c' @ 3 : 1 .. \
                    'd' @ 4 : 1]\n--- level 1 ---\n--- level 2 ---\n 5:12345['a' @ 5 : 1 .. 'z' \
                    @ 6 : 1]\n";
        let levels = level_bytes_and_files(text);
        assert_eq!(levels, [(3000, 2), (0, 0), (12345, 1)]);
        assert!(!compaction_needed(&levels));
    }

    #[test]
    fn compaction_rules() {
        assert!(compaction_needed(&[(0, 4)]));
        assert!(!compaction_needed(&[(0, 3), (10 * 1_048_576, 5)]));
        assert!(compaction_needed(&[(0, 3), (10 * 1_048_576 + 1, 5)]));
        assert!(compaction_needed(&[
            (0, 0),
            (0, 0),
            (100 * 1_048_576 + 1, 50)
        ]));
        let mut seven = vec![(0, 0); 7];
        seven[6] = (u64::MAX / 2, 1_000);
        assert!(!compaction_needed(&seven), "the last level has no limit");
    }

    #[test]
    fn open_put_get_scan_and_close() {
        let dir =
            std::env::temp_dir().join(format!("sift-peer-leveldb-test-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let config = KvConfig {
            operations: vec![],
            key_count: 100,
            key_bytes: 8,
            value_bytes: 10,
            threads: 1,
            cache_bytes: 1 << 20,
            compression: CompressionKind::Snappy,
            sync: false,
            seed: 1,
            background_cpus: None,
            client_cpus: None,
        };
        let engine = LevelDbEngine::open(&config, &dir).unwrap();
        engine.put(b"k2", b"value-two").unwrap();
        engine.put(b"k1", b"v1").unwrap();
        assert_eq!(engine.get(b"k1").unwrap(), Some(2));
        assert_eq!(engine.get(b"k3").unwrap(), None);
        assert_eq!(engine.seek_and_read_one(b"k10").unwrap(), Some(2 + 9));
        assert_eq!(engine.seek_and_read_one(b"k3").unwrap(), None);
        let mut sizes = Vec::new();
        assert_eq!(engine.scan(None, None, &mut |b| sizes.push(b)).unwrap(), 2);
        assert_eq!(sizes, [4, 11]);
        sizes.clear();
        assert_eq!(
            engine
                .scan(Some(b"k15"), None, &mut |b| sizes.push(b))
                .unwrap(),
            1
        );
        assert_eq!(
            engine
                .scan(None, Some(b"k2"), &mut |b| sizes.push(b))
                .unwrap(),
            1
        );
        assert_eq!(
            engine
                .scan(Some(b"k1"), Some(b"k1"), &mut |b| sizes.push(b))
                .unwrap(),
            0
        );
        assert_eq!(sizes, [11, 4]);
        engine.flush().unwrap();
        assert_eq!(engine.get(b"k2").unwrap(), Some(9));
        engine.close().unwrap();
        let mut lz4 = config.clone();
        lz4.compression = CompressionKind::Lz4;
        assert!(LevelDbEngine::open(&lz4, &dir).is_err());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
