//! Damaged files and bad input.
//!
//! Bytes are flipped in every kind of file of a database built on `FaultFileSystem` (a table's
//! data blocks, its index and meta blocks and footer, WAL records in the middle and at the tail,
//! the manifest, CURRENT). Opening or reading must then fail with `Error::Corruption` naming the
//! damaged file and an offset at or before the damage, or succeed with exactly the model's data:
//! never a panic, never wrong data. A torn WAL tail opens and loses only the torn write; damage
//! in the middle of a WAL fails the open unless `WalRecovery::SalvageCorrupted` is asked for.
//!
//! Then bad input at the API: oversized keys and values, bad tree names and handles, a second
//! open of a locked directory, refused opens — each a clear error that loses nothing stored.
//!
//! `SIFT_SEED` replays the randomized tests.

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use sift_lsm::fs::FaultFileSystem;
use sift_lsm::LogReader;
use sift_lsm::{
    Compression, Db, Error, Options, ReadOptions, Tree, TreeOptions, WalRecovery, WriteBatch,
    WriteOptions,
};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

const TREE_NAMES: [&str; 2] = ["default", "other"];

type Model = BTreeMap<(usize, Vec<u8>), Vec<u8>>;

fn seed() -> u64 {
    match std::env::var("SIFT_SEED") {
        Ok(s) => s.parse().expect("SIFT_SEED must be a number"),
        Err(_) => rand::random(),
    }
}

/// Runs `test` with a seed, printing the seed if it fails.
fn seeded(name: &str, test: impl FnOnce(u64)) {
    let seed = seed();
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| test(seed)));
    if let Err(e) = result {
        eprintln!("{name} failed with seed {seed}: replay with SIFT_SEED={seed}");
        std::panic::resume_unwind(e);
    }
}

/// Background compaction off, so that opening a damaged database changes no table.
fn options(fs: &FaultFileSystem) -> Options {
    Options {
        file_system: Arc::new(fs.clone()),
        memtable_bytes_max: 16 << 10,
        table_file_bytes_target: 8 << 10,
        l0_compaction_trigger: 50,
        l0_slowdown_trigger: 50,
        l0_stop_trigger: 60,
        block_bytes: 512,
        block_cache_bytes: 0,
        ..Options::default()
    }
}

fn open_trees(db: &Db) -> Vec<Tree> {
    TREE_NAMES
        .iter()
        .map(|name| {
            db.tree(name)
                .or_else(|_| db.create_tree(name, TreeOptions::default()))
                .expect("tree")
        })
        .collect()
}

fn value_for(i: usize, rng: &mut StdRng) -> Vec<u8> {
    let len = rng.gen_range(8..120);
    format!("value{i:05}-")
        .bytes()
        .cycle()
        .take(len.max(11))
        .collect()
}

/// A database with tables on L1 and L0 and a few records in the WAL; returns the model.
fn build(fs: &FaultFileSystem, dir: &Path, rng: &mut StdRng, compression: Compression) -> Model {
    let db = Db::open(
        dir,
        Options {
            compression,
            ..options(fs)
        },
    )
    .expect("open");
    let trees = open_trees(&db);
    let mut model = Model::new();
    let write = |db: &Db, i: usize, rng: &mut StdRng, model: &mut Model| {
        let t = rng.gen_range(0..trees.len());
        let key = format!("key{:05}", rng.gen_range(0..800)).into_bytes();
        let mut batch = WriteBatch::new();
        if rng.gen_bool(0.1) {
            batch.delete(&trees[t], &key);
            model.remove(&(t, key));
        } else {
            let value = value_for(i, rng);
            batch.put(&trees[t], &key, &value);
            model.insert((t, key), value);
        }
        db.write(
            batch,
            &WriteOptions {
                sync: i.is_multiple_of(50),
            },
        )
        .expect("write");
    };
    for i in 0..600 {
        write(&db, i, rng, &mut model);
    }
    for tree in &trees {
        db.compact_range(tree, None, None).expect("compact");
    }
    for i in 600..900 {
        write(&db, i, rng, &mut model);
    }
    db.flush().expect("flush");
    for i in 900..930 {
        write(&db, i, rng, &mut model);
    }
    db.close().expect("close");
    model
}

fn files_of_kind(fs: &FaultFileSystem, dir: &Path, suffix: &str) -> Vec<PathBuf> {
    fs.file_names(dir)
        .into_iter()
        .filter(|n| n.ends_with(suffix) || (suffix == "MANIFEST" && n.starts_with("MANIFEST-")))
        .map(|n| dir.join(n))
        .collect()
}

fn file_len(fs: &FaultFileSystem, path: &Path) -> u64 {
    fs.file_bytes(path).expect("file exists").len() as u64
}

/// Checks an error: it must be corruption in `damaged` at an offset not after `flipped`.
fn check_corruption(error: &Error, damaged: &Path, flipped: u64, file_bytes: u64, context: &str) {
    match error {
        Error::Corruption { file, offset, .. } => {
            assert_eq!(
                file, damaged,
                "{context}: corruption names the wrong file: {error}"
            );
            assert!(
                *offset <= flipped && *offset < file_bytes,
                "{context}: corruption at offset {offset}, but the damage is at {flipped} \
                 ({file_bytes}-byte file): {error}"
            );
        }
        other => panic!(
            "{context}: expected corruption in {}, got {other:?}",
            damaged.display()
        ),
    }
}

/// Opens and reads everything. Every failure must be corruption in `damaged` and every value
/// read must be the model's. Returns how many operations reported corruption.
fn read_everything(
    fs: &FaultFileSystem,
    dir: &Path,
    model: &Model,
    damaged: &Path,
    flipped: u64,
    context: &str,
) -> usize {
    let file_bytes = file_len(fs, damaged);
    let db = match Db::open(dir, options(fs)) {
        Ok(db) => db,
        Err(e) => {
            check_corruption(
                &e,
                damaged,
                flipped,
                file_bytes,
                &format!("{context}: open"),
            );
            return 1;
        }
    };
    let trees = open_trees(&db);
    let mut corruptions = 0;
    for (t, tree) in trees.iter().enumerate() {
        let scanned = (|| {
            let mut iter = db.iter(tree, ReadOptions::default())?;
            iter.seek_to_first()?;
            let mut out = Vec::new();
            while iter.valid() {
                out.push((iter.key().to_vec(), iter.value().to_vec()));
                iter.next()?;
            }
            Ok::<_, Error>(out)
        })();
        match scanned {
            Ok(got) => {
                let want: Vec<(Vec<u8>, Vec<u8>)> = model
                    .iter()
                    .filter(|((mt, _), _)| *mt == t)
                    .map(|((_, k), v)| (k.clone(), v.clone()))
                    .collect();
                assert!(
                    got == want,
                    "{context}: a scan of {} succeeded with wrong data ({} entries, expected {})",
                    TREE_NAMES[t],
                    got.len(),
                    want.len()
                );
            }
            Err(e) => {
                check_corruption(
                    &e,
                    damaged,
                    flipped,
                    file_bytes,
                    &format!("{context}: scan"),
                );
                corruptions += 1;
            }
        }
    }
    for (t, tree) in trees.iter().enumerate() {
        for i in 0..800 {
            let key = format!("key{i:05}").into_bytes();
            match db.get(tree, &key) {
                Ok(got) => assert_eq!(
                    got.map(|e| e.value).as_ref(),
                    model.get(&(t, key.clone())),
                    "{context}: get {:?} succeeded with wrong data",
                    String::from_utf8_lossy(&key)
                ),
                Err(e) => {
                    check_corruption(&e, damaged, flipped, file_bytes, &format!("{context}: get"));
                    corruptions += 1;
                }
            }
        }
    }
    corruptions
}

/// Flips bytes all over table files (data blocks, index and meta blocks, footer): every flip
/// is detected by a full read, and no read returns wrong data.
#[test]
fn corruption_table_bytes_are_detected_everywhere() {
    seeded("corruption_table_bytes", |seed| {
        let mut rng = StdRng::seed_from_u64(seed);
        let dir = Path::new("/table-flips");
        let mut regions = BTreeMap::<&str, usize>::new();
        for round in 0..36 {
            let fs = FaultFileSystem::new();
            let compression = [Compression::None, Compression::Snappy, Compression::Lz4][round % 3];
            let model = build(&fs, dir, &mut rng, compression);
            let tables = files_of_kind(&fs, dir, ".sst");
            assert!(tables.len() >= 2, "expected several tables: {tables:?}");
            let table = tables[rng.gen_range(0..tables.len())].clone();
            let len = file_len(&fs, &table);
            // The footer is the last 48 bytes; index, properties and metaindex blocks sit just
            // before it, data blocks start at 0.
            let (region, offset) = match round % 4 {
                0 => ("footer", len - rng.gen_range(1..=48)),
                1 => (
                    "index and meta blocks",
                    len - 48 - rng.gen_range(1..=len.min(400) / 2),
                ),
                _ => ("data block", rng.gen_range(0..len / 2)),
            };
            *regions.entry(region).or_default() += 1;
            let xor = 1u8 << rng.gen_range(0..8);
            fs.corrupt(&table, offset, xor).expect("corrupt");
            let context = format!("{region} byte {offset} of {} ^ {xor:#x}", table.display());
            let corruptions = read_everything(&fs, dir, &model, &table, offset, &context);
            assert!(corruptions > 0, "{context}: the damage went unnoticed");
        }
        eprintln!("table flips by region: {regions:?}");
    });
}

/// Record offsets of a log file (WAL or manifest), read with the engine's own reader.
fn record_offsets(fs: &FaultFileSystem, path: &Path) -> Vec<(u64, usize)> {
    let bytes = fs.file_bytes(path).expect("log exists");
    let mut reader = LogReader::new(bytes, path.to_path_buf(), WalRecovery::TolerateTornTail);
    let mut out = Vec::new();
    while let Some((offset, payload)) = reader.read_record().expect("intact log") {
        out.push((offset, payload.len()));
    }
    out
}

/// A database whose only data is `count` batches in one WAL (each batch one key `w{i}`), the
/// last `unsynced` of them not synced. Returns the WAL path and the keys' values.
fn wal_only_database(
    fs: &FaultFileSystem,
    dir: &Path,
    count: usize,
    unsynced: usize,
    value_bytes: usize,
) -> (PathBuf, Vec<Vec<u8>>) {
    let db = Db::open(
        dir,
        Options {
            memtable_bytes_max: 64 << 20,
            ..options(fs)
        },
    )
    .expect("open");
    let tree = db.default_tree();
    let mut values = Vec::new();
    for i in 0..count {
        let value: Vec<u8> = format!("{i:05}|")
            .bytes()
            .cycle()
            .take(value_bytes)
            .collect();
        let mut batch = WriteBatch::new();
        batch.put(&tree, format!("w{i:05}").as_bytes(), &value);
        db.write(
            batch,
            &WriteOptions {
                sync: i + unsynced < count,
            },
        )
        .expect("write");
        values.push(value);
    }
    // A crash, not a close: the unsynced batches stay unsynced (the file keeps their bytes
    // until the test decides what a crash leaves of them).
    drop(db);
    let wals: Vec<PathBuf> = files_of_kind(fs, dir, ".wal")
        .into_iter()
        .filter(|p| file_len(fs, p) > 0)
        .collect();
    assert_eq!(wals.len(), 1, "expected one WAL with data: {wals:?}");
    (wals[0].clone(), values)
}

fn wal_keys_present(db: &Db, values: &[Vec<u8>]) -> Vec<bool> {
    let tree = db.default_tree();
    values
        .iter()
        .enumerate()
        .map(
            |(i, value)| match db.get(&tree, format!("w{i:05}").as_bytes()).expect("get") {
                Some(e) => {
                    assert_eq!(&e.value, value, "w{i:05} has a wrong value");
                    true
                }
                None => false,
            },
        )
        .collect()
}

/// A record torn in the middle at the end of the WAL is a write that never finished: the
/// database opens without it, keeps everything before it, and stays usable across reopens.
#[test]
fn corruption_wal_torn_tail_opens_and_keeps_acknowledged_writes() {
    let fs = FaultFileSystem::new();
    let dir = Path::new("/torn-tail");
    let (wal, values) = wal_only_database(&fs, dir, 40, 1, 300);
    let records = record_offsets(&fs, &wal);
    let (last_offset, last_bytes) = *records.last().expect("records");
    // Cut in the middle of the last record (header kept, payload half gone).
    let cut = last_offset + 7 + last_bytes as u64 / 2;
    fs.truncate(&wal, cut).expect("truncate");
    let db = Db::open(dir, options(&fs)).expect("a torn tail must open");
    let present = wal_keys_present(&db, &values);
    assert!(present[..39].iter().all(|p| *p), "synced writes lost");
    assert!(!present[39], "the torn record cannot be recovered");
    db.put(&db.default_tree(), b"after", b"torn tail")
        .expect("write after recovery");
    db.close().expect("close");
    // Reopen twice more: the recovered state is stable and the torn log is not replayed again.
    for _ in 0..2 {
        let db = Db::open(dir, options(&fs)).expect("reopen after torn tail");
        let present = wal_keys_present(&db, &values);
        assert_eq!(present.iter().filter(|p| **p).count(), 39);
        assert_eq!(
            db.get(&db.default_tree(), b"after")
                .expect("get")
                .map(|e| e.value),
            Some(b"torn tail".to_vec())
        );
        db.close().expect("close");
    }
}

/// Power loss with torn unsynced writes, many times: every synced write survives and the
/// unsynced ones that survive are a prefix.
#[test]
fn corruption_wal_torn_writes_keep_synced_prefix() {
    seeded("corruption_wal_torn_writes", |seed| {
        let mut rng = StdRng::seed_from_u64(seed);
        for round in 0..20 {
            let fs = FaultFileSystem::new();
            let dir = Path::new("/torn-writes");
            let unsynced = rng.gen_range(1..10);
            // Values of up to 40 KiB make records span WAL blocks (fragmented records).
            let value_bytes = [50, 3000, 40_000][round % 3];
            let (_, values) = wal_only_database(&fs, dir, 20, unsynced, value_bytes);
            fs.crash_with_torn_writes(rng.gen());
            let db = Db::open(dir, options(&fs)).expect("open after torn writes");
            let present = wal_keys_present(&db, &values);
            let synced = 20 - unsynced;
            assert!(present[..synced].iter().all(|p| *p), "synced writes lost");
            assert!(
                present.windows(2).all(|w| w[0] || !w[1]),
                "surviving writes are not a prefix: {present:?}"
            );
        }
    });
}

/// Damage to a record in the middle of the WAL fails the open with corruption at that record;
/// `SalvageCorrupted` opens and keeps every record that checks out.
#[test]
fn corruption_wal_mid_log_fails_open_and_salvage_keeps_the_rest() {
    seeded("corruption_wal_mid_log", |seed| {
        let mut rng = StdRng::seed_from_u64(seed);
        for round in 0..12 {
            let fs = FaultFileSystem::new();
            let dir = Path::new("/mid-wal");
            let value_bytes = [100, 5000][round % 2];
            let (wal, values) = wal_only_database(&fs, dir, 30, 0, value_bytes);
            let records = record_offsets(&fs, &wal);
            assert_eq!(records.len(), 30);
            let victim = rng.gen_range(2..25);
            let (offset, bytes) = records[victim];
            // Anywhere in the record: header (checksum, length, type) or payload.
            let flipped = offset + rng.gen_range(0..7 + bytes as u64);
            fs.corrupt(&wal, flipped, 1 << rng.gen_range(0..8))
                .expect("corrupt");
            let context = format!("record {victim} at {offset}, byte {flipped} flipped");
            match Db::open(dir, options(&fs)) {
                Err(e) => {
                    check_corruption(&e, &wal, flipped, file_len(&fs, &wal), &context);
                    if let Error::Corruption {
                        offset: reported, ..
                    } = e
                    {
                        assert_eq!(reported, offset, "{context}: should name the record");
                    }
                }
                Ok(_) => panic!("{context}: a damaged record in the middle of the WAL opened"),
            }
            let db = Db::open(
                dir,
                Options {
                    wal_recovery: WalRecovery::SalvageCorrupted,
                    ..options(&fs)
                },
            )
            .unwrap_or_else(|e| panic!("{context}: salvage must open: {e}"));
            let present = wal_keys_present(&db, &values);
            let missing: Vec<usize> = (0..30).filter(|i| !present[*i]).collect();
            assert_eq!(
                missing,
                vec![victim],
                "{context}: salvage kept the wrong records"
            );
            db.close().expect("close");
            // The salvaged state is now in tables: a normal open works and keeps it.
            let db = Db::open(dir, options(&fs)).expect("open after salvage");
            assert_eq!(wal_keys_present(&db, &values), present);
        }
    });
}

/// Flips in the manifest: damage to a record followed by others fails the open with
/// corruption naming the manifest; no open ever shows wrong data.
#[test]
fn corruption_manifest_bytes_are_detected() {
    seeded("corruption_manifest", |seed| {
        let mut rng = StdRng::seed_from_u64(seed);
        let dir = Path::new("/manifest-flips");
        for round in 0..16 {
            let fs = FaultFileSystem::new();
            let model = build(&fs, dir, &mut rng, Compression::None);
            let manifests = files_of_kind(&fs, dir, "MANIFEST");
            assert_eq!(manifests.len(), 1, "{manifests:?}");
            let manifest = manifests[0].clone();
            let records = record_offsets(&fs, &manifest);
            assert!(records.len() >= 3, "expected several manifest records");
            // Every record but the last: damage with valid records after it.
            let index = if round % 4 == 3 {
                records.len() - 1
            } else {
                rng.gen_range(0..records.len() - 1)
            };
            let (offset, bytes) = records[index];
            let mut flipped = offset + rng.gen_range(0..7 + bytes as u64);
            if index == records.len() - 1 && (flipped == offset + 4 || flipped == offset + 5) {
                // A last record whose length field now points past the end of the file looks
                // exactly like a torn append (as in LevelDB and RocksDB): not tested here.
                flipped = offset + 6;
            }
            fs.corrupt(&manifest, flipped, 1 << rng.gen_range(0..8))
                .expect("corrupt");
            let context = format!(
                "manifest record {index} of {} at {offset}, byte {flipped} flipped",
                records.len()
            );
            let corruptions = read_everything(&fs, dir, &model, &manifest, flipped, &context);
            assert!(corruptions > 0, "{context}: the damage went unnoticed");
        }
    });
}

/// Every byte of CURRENT, flipped: the open fails with corruption naming CURRENT.
#[test]
fn corruption_current_bytes_are_detected() {
    let mut rng = StdRng::seed_from_u64(1);
    let dir = Path::new("/current-flips");
    let fs = FaultFileSystem::new();
    let model = build(&fs, dir, &mut rng, Compression::None);
    let current = dir.join("CURRENT");
    let len = file_len(&fs, &current);
    for offset in 0..len {
        for xor in [0x01, 0x20, 0x80] {
            fs.corrupt(&current, offset, xor).expect("corrupt");
            let context = format!("CURRENT byte {offset} ^ {xor:#x}");
            match Db::open(dir, options(&fs)) {
                Err(e) => check_corruption(&e, &current, offset, len, &context),
                Ok(_) => panic!("{context}: opened"),
            }
            fs.corrupt(&current, offset, xor).expect("restore");
        }
    }
    // Undamaged again, it opens with everything.
    let corruptions = read_everything(&fs, dir, &model, &current, 0, "restored CURRENT");
    assert_eq!(corruptions, 0);
}

/// A database for the bad-input tests, with some data to check nothing is lost.
fn small_database(fs: &FaultFileSystem, dir: &Path) -> (Db, Vec<Tree>) {
    let db = Db::open(
        dir,
        Options {
            key_bytes_max: 64,
            value_bytes_max: 1024,
            ..options(fs)
        },
    )
    .expect("open");
    let trees = open_trees(&db);
    for i in 0..50 {
        db.put(&trees[i % 2], format!("keep{i:02}").as_bytes(), b"kept")
            .expect("put");
    }
    (db, trees)
}

fn assert_data_kept(db: &Db, trees: &[Tree], context: &str) {
    for i in 0..50 {
        let got = db
            .get(&trees[i % 2], format!("keep{i:02}").as_bytes())
            .expect("get")
            .map(|e| e.value);
        assert_eq!(got, Some(b"kept".to_vec()), "{context}: keep{i:02} lost");
    }
}

fn assert_invalid_argument(result: sift_lsm::Result<impl std::fmt::Debug>, needle: &str) {
    match result {
        Err(Error::InvalidArgument(message)) => assert!(
            message.contains(needle),
            "the message should mention {needle:?}: {message}"
        ),
        other => panic!("expected InvalidArgument about {needle:?}, got {other:?}"),
    }
}

#[test]
fn corruption_oversized_keys_and_values_are_refused_atomically() {
    let fs = FaultFileSystem::new();
    let dir = Path::new("/bad-sizes");
    let (db, trees) = small_database(&fs, dir);
    let before = db.latest_sequence();
    assert_invalid_argument(db.put(&trees[0], &[b'k'; 65], b"v"), "key_bytes_max");
    assert_invalid_argument(db.put(&trees[0], b"k", &[b'v'; 1025]), "value_bytes_max");
    assert_invalid_argument(db.merge(&trees[0], &[b'k'; 100], b"v"), "key_bytes_max");
    // One bad entry refuses the whole batch: the good entries are not applied either.
    let mut batch = WriteBatch::new();
    batch.put(&trees[0], b"good", b"v");
    batch.delete(&trees[1], b"keep00");
    batch.put(&trees[1], b"bad", &[b'v'; 2000]);
    assert_invalid_argument(
        db.write(batch, &WriteOptions { sync: true }),
        "value_bytes_max",
    );
    assert_eq!(
        db.latest_sequence(),
        before,
        "a refused write used sequence numbers"
    );
    assert_eq!(db.get(&trees[0], b"good").expect("get"), None);
    // Limits are inclusive.
    db.put(&trees[0], &[b'k'; 64], &[b'v'; 1024])
        .expect("a key and value at the limits are fine");
    assert_data_kept(&db, &trees, "after oversized writes");
    db.close().expect("close");
    let db = Db::open(dir, options(&fs)).expect("reopen");
    let trees = open_trees(&db);
    assert_data_kept(&db, &trees, "after reopen");
    assert_eq!(db.get(&trees[0], b"good").expect("get"), None);
}

#[test]
fn corruption_bad_tree_names_and_handles_are_refused() {
    let fs = FaultFileSystem::new();
    let dir = Path::new("/bad-trees");
    let (db, trees) = small_database(&fs, dir);
    assert_invalid_argument(db.create_tree("", TreeOptions::default()), "tree names");
    assert_invalid_argument(
        db.create_tree(&"n".repeat(256), TreeOptions::default()),
        "tree names",
    );
    assert!(matches!(
        db.create_tree("other", TreeOptions::default()),
        Err(Error::TreeExists(name)) if name == "other"
    ));
    assert_invalid_argument(db.drop_tree("default"), "default tree");
    assert!(matches!(
        db.drop_tree("missing"),
        Err(Error::TreeNotFound(_))
    ));
    assert!(matches!(db.tree("missing"), Err(Error::TreeNotFound(_))));

    // A handle from another database names a tree id this one does not have.
    let other_fs = FaultFileSystem::new();
    let other = Db::open("/elsewhere", options(&other_fs)).expect("open other");
    let mut foreign = None;
    for i in 0..4 {
        foreign = Some(
            other
                .create_tree(&format!("t{i}"), TreeOptions::default())
                .expect("create"),
        );
    }
    let foreign = foreign.expect("tree");
    assert!(matches!(
        db.put(&foreign, b"k", b"v"),
        Err(Error::TreeNotFound(_))
    ));
    assert!(matches!(
        db.get(&foreign, b"k"),
        Err(Error::TreeNotFound(_))
    ));
    assert!(matches!(
        db.iter(&foreign, ReadOptions::default()),
        Err(Error::TreeNotFound(_))
    ));

    // A dropped tree's handle is refused everywhere, and a batch touching it applies nothing.
    let doomed = db
        .create_tree("doomed", TreeOptions::default())
        .expect("create");
    db.put(&doomed, b"k", b"v").expect("put");
    db.drop_tree("doomed").expect("drop");
    assert!(matches!(
        db.put(&doomed, b"k", b"v"),
        Err(Error::TreeNotFound(_))
    ));
    assert!(matches!(db.get(&doomed, b"k"), Err(Error::TreeNotFound(_))));
    assert!(matches!(
        db.compact_range(&doomed, None, None),
        Err(Error::TreeNotFound(_))
    ));
    let mut batch = WriteBatch::new();
    batch.put(&trees[0], b"with-dropped", b"v");
    batch.put(&doomed, b"k", b"v");
    assert!(matches!(
        db.write(batch, &WriteOptions::default()),
        Err(Error::TreeNotFound(_))
    ));
    assert_eq!(db.get(&trees[0], b"with-dropped").expect("get"), None);
    assert_data_kept(&db, &trees, "after bad tree operations");
    db.close().expect("close");
    let db = Db::open(dir, options(&fs)).expect("reopen");
    let trees = open_trees(&db);
    assert_data_kept(&db, &trees, "after reopen");
    assert!(db.tree("doomed").is_err(), "a dropped tree came back");
}

#[test]
fn corruption_refused_opens_leave_the_database_intact() {
    let fs = FaultFileSystem::new();
    let dir = Path::new("/refused-opens");
    let (db, trees) = small_database(&fs, dir);
    // Second open of an open directory.
    match Db::open(dir, options(&fs)) {
        Err(Error::Locked { path, .. }) => assert!(path.starts_with(dir), "{path:?}"),
        other => panic!("a second open must be refused with Locked, got {other:?}"),
    }
    assert_data_kept(&db, &trees, "after a refused second open");
    db.put(&trees[0], b"still", b"writable")
        .expect("the first handle still writes");
    db.close().expect("close");

    // error_if_exists on an existing database.
    match Db::open(
        dir,
        Options {
            error_if_exists: true,
            ..options(&fs)
        },
    ) {
        Err(Error::OpenRefused { path, detail }) => {
            assert_eq!(path, dir);
            assert!(detail.contains("error_if_exists"), "{detail}");
        }
        other => panic!("expected OpenRefused, got {other:?}"),
    }
    // create_if_missing off on an empty directory, and on a missing one.
    for empty in ["/empty-dir", "/no-such-dir"] {
        let empty = Path::new(empty);
        if empty.ends_with("empty-dir") {
            use sift_lsm::fs::FileSystem;
            fs.create_dir_all(empty).expect("mkdir");
        }
        match Db::open(
            empty,
            Options {
                create_if_missing: false,
                ..options(&fs)
            },
        ) {
            Err(Error::OpenRefused { path, detail }) => {
                assert_eq!(path, empty);
                assert!(detail.contains("create_if_missing"), "{detail}");
            }
            other => panic!("expected OpenRefused for {empty:?}, got {other:?}"),
        }
        assert!(
            fs.file_names(empty).is_empty(),
            "a refused open left files in {empty:?}"
        );
    }
    let db = Db::open(
        dir,
        Options {
            create_if_missing: false,
            ..options(&fs)
        },
    )
    .expect("an existing database opens without create_if_missing");
    let trees = open_trees(&db);
    assert_data_kept(&db, &trees, "after refused opens");
    assert_eq!(
        db.get(&trees[0], b"still").expect("get").map(|e| e.value),
        Some(b"writable".to_vec())
    );
}

/// The lock also holds between handles on the real file system, and a closed database can be
/// reopened.
#[test]
fn corruption_second_open_on_real_files_is_locked() {
    let dir = tempfile::tempdir().expect("temp dir");
    let db = Db::open(dir.path(), Options::default()).expect("open");
    db.put(&db.default_tree(), b"k", b"v").expect("put");
    match Db::open(dir.path(), Options::default()) {
        Err(Error::Locked { .. }) => {}
        other => panic!("expected Locked, got {other:?}"),
    }
    db.close().expect("close");
    let db = Db::open(dir.path(), Options::default()).expect("reopen after close");
    assert_eq!(
        db.get(&db.default_tree(), b"k")
            .expect("get")
            .map(|e| e.value),
        Some(b"v".to_vec())
    );
}

/// Regression: a complete last manifest record failing its checksum was dropped as a torn
/// tail. The dropped edit was a flush whose WAL had already been deleted, so the database
/// opened without that data (and removed the flushed table as unreferenced): silent data loss.
/// It is now `Error::Corruption` in the manifest at the record's offset.
#[test]
fn corruption_manifest_last_record_flip_is_not_a_torn_tail() {
    let fs = FaultFileSystem::new();
    let dir = Path::new("/manifest-tail");
    let db = Db::open(dir, options(&fs)).expect("open");
    let tree = db.default_tree();
    for i in 0..100 {
        db.put(&tree, format!("k{i:03}").as_bytes(), &[b'v'; 50])
            .expect("put");
    }
    // The flush's edit is the last manifest record; the WAL it replaces is deleted.
    db.flush().expect("flush");
    db.close().expect("close");
    let manifest = files_of_kind(&fs, dir, "MANIFEST").remove(0);
    let (offset, bytes) = *record_offsets(&fs, &manifest).last().expect("records");
    let tables_before = files_of_kind(&fs, dir, ".sst");
    fs.corrupt(&manifest, offset + 7 + bytes as u64 / 2, 0x10)
        .expect("corrupt");
    match Db::open(dir, options(&fs)) {
        Err(Error::Corruption {
            file,
            offset: reported,
            message,
        }) => {
            assert_eq!(file, manifest);
            assert_eq!(reported, offset, "{message}");
        }
        Err(e) => panic!("expected corruption, got {e}"),
        Ok(_) => panic!("opened with the last manifest edit silently dropped"),
    }
    assert_eq!(
        files_of_kind(&fs, dir, ".sst"),
        tables_before,
        "a refused open must not delete tables"
    );
}
