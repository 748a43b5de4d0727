//! Online creation of `next` and `sst-local` indexes, continued: the blocks built online for
//! tables written before the index are the collector's own (every entry with its value's
//! checksum and its place in its data block, so queries read it in place), and a build that
//! was interrupted resumes in the background at the next open, with writes, flushes,
//! compactions and model-checked queries going on, and stops cleanly when the database is
//! dropped or closed. `SIFT_SEED` replays a run.

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

mod common;

use common::{seed, small_options, SeedGuard};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use sift_index::format::{decode_secondary_block, CHECKSUMMED_SECONDARY_TAG};
use sift_index::{
    AttrType, AttrValue, BackfillProgress, Database, DatabaseOptions, IndexBuildStatus,
    IndexBuildsAtOpen, IndexKind, IndexSpec, Validation,
};
use sift_lsm::fs::{FaultFileSystem, FaultKind};
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::Arc;
use std::time::{Duration, Instant};

#[derive(Debug, Clone)]
struct ModelDoc {
    seq: u64,
    doc: Vec<u8>,
    n: i64,
}

common::impl_model_version!(ModelDoc);

type Model = BTreeMap<Vec<u8>, ModelDoc>;

const PKS: u32 = 400;
const VALUES: i64 = 50;

/// (name, kind, validation): both kinds, both validations.
const INDEXES: [(&str, IndexKind, Validation); 2] = [
    ("next_n", IndexKind::Next, Validation::GetLite),
    ("local_n", IndexKind::SstLocal, Validation::Memo),
];

fn spec(name: &str, kind: IndexKind, validation: Validation) -> IndexSpec {
    IndexSpec::new(name, "n", AttrType::Int, kind).with_validation(validation)
}

fn options(at_open: IndexBuildsAtOpen) -> DatabaseOptions {
    let mut options = small_options();
    options.index_builds_at_open = at_open;
    options
}

fn put_pk(db: &Database, model: &mut Model, rng: &mut StdRng, pk: u32) {
    let n = rng.gen_range(0..VALUES);
    let doc = serde_json::json!({
        "id": format!("pk{pk:03}"),
        "n": n,
        "pad": "x".repeat(rng.gen_range(0..80)),
    });
    let json = serde_json::to_vec(&doc).unwrap();
    let seq = db.put("docs", &json).unwrap();
    model.insert(
        format!("pk{pk:03}").into_bytes(),
        ModelDoc { seq, doc: json, n },
    );
}

fn write_some(db: &Database, model: &mut Model, rng: &mut StdRng) {
    for _ in 0..rng.gen_range(1..20) {
        if rng.gen_bool(0.85) {
            let pk = rng.gen_range(0..PKS);
            put_pk(db, model, rng, pk);
        } else {
            let pk = format!("pk{:03}", rng.gen_range(0..PKS)).into_bytes();
            let result = db.delete("docs", &pk).unwrap();
            assert_eq!(result.is_some(), model.remove(&pk).is_some());
        }
    }
}

/// Writes, then sometimes a flush or a full compaction.
fn write_and_maybe_reshape(db: &Database, model: &mut Model, rng: &mut StdRng) {
    write_some(db, model, rng);
    match rng.gen_range(0..10) {
        0..=2 => db.flush().unwrap(),
        3 => db.compact_all().unwrap(),
        _ => {}
    }
}

/// Ten rounds of [`check`].
fn check_many(db: &Database, model: &Model, rng: &mut StdRng, what: &str) {
    for _ in 0..10 {
        check(db, model, rng, what);
    }
}

/// A random range query on every index, compared with a brute-force filter of the model.
fn check(db: &Database, model: &Model, rng: &mut StdRng, what: &str) {
    for (name, ..) in INDEXES {
        let limit = [Some(1), Some(5), None][rng.gen_range(0..3)];
        let lo = rng.gen_range(0..VALUES);
        let hi = lo + rng.gen_range(0..8);
        let got = db
            .range(
                "docs",
                name,
                &AttrValue::Int(lo),
                &AttrValue::Int(hi),
                limit,
            )
            .unwrap();
        let got: Vec<_> = got
            .hits
            .iter()
            .map(|hit| (hit.pk.clone(), hit.seq, hit.doc.clone()))
            .collect();
        let want = common::newest_first(model, |d| lo <= d.n && d.n <= hi, limit);
        assert!(
            got == want,
            "{what}: {name} range {lo}..={hi} limit {limit:?}: got {:?}, want {:?}",
            common::show_hits(&got),
            common::show_hits(&want)
        );
    }
}

/// Fills the collection until its tables span level 0 and deeper levels.
fn fill(db: &Database, model: &mut Model, rng: &mut StdRng) {
    for round in 0..6 {
        for _ in 0..150 {
            let pk = rng.gen_range(0..PKS);
            put_pk(db, model, rng, pk);
        }
        db.flush().unwrap();
        if round == 3 {
            db.compact_all().unwrap();
        }
    }
    db.engine().wait_for_background_work().unwrap();
}

/// Live tables of the collection without blocks for `index` (checking, on the way, that the
/// stored blocks of the others are what the collector makes of their entries).
fn unindexed(db: &Database, index: &str) -> usize {
    db.engine().wait_for_background_work().unwrap();
    db.check_secondary_blocks("docs", index)
        .unwrap_or_else(|e| panic!("{index}: {e}"))
        .files_unindexed
}

/// Like [`unindexed`], without waiting for background work (which fails while the engine
/// stops writes).
fn unindexed_now(db: &Database, index: &str) -> usize {
    db.check_secondary_blocks("docs", index)
        .unwrap_or_else(|e| panic!("{index}: {e}"))
        .files_unindexed
}

/// The secondary blocks in the collection's side tree (built online), per index.
fn side_blocks(db: &Database) -> usize {
    let info = db.collection("docs").unwrap();
    let side_name = format!("{}.next", info.record.primary_tree_name());
    let side = db.engine().tree(&side_name).expect("the side tree exists");
    let mut iter = db
        .engine()
        .iter(&side, sift_lsm::ReadOptions::default())
        .unwrap();
    iter.seek_to_first().unwrap();
    let mut blocks = 0;
    while iter.valid() {
        let name = String::from_utf8_lossy(&iter.key()[8..]).to_string();
        for index in &info.indexes {
            // "s.<attribute>.<block>": the secondary blocks of this index.
            if !name.starts_with(&format!("s.{}.", index.attr_id)) {
                continue;
            }
            let bytes = iter.value();
            assert_eq!(
                bytes[1], CHECKSUMMED_SECONDARY_TAG,
                "{name}: a block built online without checksums"
            );
            let entries = decode_secondary_block(bytes, index.attr_id).unwrap();
            assert!(!entries.is_empty());
            for entry in entries {
                assert!(entry.value_checksum.is_some(), "{name}: {entry:?}");
                assert!(
                    entry.entry_offset.is_some(),
                    "{name}: an entry built online does not say where it is in its data block: \
                     {entry:?}"
                );
            }
            blocks += 1;
        }
        iter.next().unwrap();
    }
    blocks
}

/// Blocks built online for tables written without the index are those a flush writes (same
/// encoder, same entry offsets and checksums, byte for byte), and queries read their entries
/// in place, not through a verified read of the whole data block.
#[test]
fn online_built_blocks_are_the_collectors_and_are_read_in_place() {
    let seed = seed();
    let _guard = SeedGuard(seed);
    let mut rng = StdRng::seed_from_u64(seed);
    let dir = tempfile::tempdir().unwrap();
    let mut options = options(IndexBuildsAtOpen::Leave);
    // No compaction of its own: the tables written before the index stay (with blocks built
    // online) next to those flushed after it (with the collector's blocks).
    options.engine.l0_compaction_trigger = 16;
    options.engine.level1_bytes_max = 16 << 20;
    // Nor one that the checks' reads would trigger.
    options.engine.seek_compaction = false;
    let db = Database::open(dir.path(), options).unwrap();
    db.create_collection("docs", "id").unwrap();
    let mut model = Model::new();
    // Every pk once: no candidate is stale, so each hit is either validated by a primary
    // read or taken from its data block.
    let mut pks: Vec<u32> = (0..PKS).collect();
    for round in 0..4 {
        for _ in 0..PKS / 4 {
            let pk = pks.swap_remove(rng.gen_range(0..pks.len()));
            put_pk(&db, &mut model, &mut rng, pk);
        }
        db.flush().unwrap();
        if round == 1 {
            db.compact_all().unwrap();
        }
    }
    db.engine().wait_for_background_work().unwrap();
    for (name, kind, validation) in INDEXES {
        db.create_index("docs", spec(name, kind, validation))
            .unwrap();
        let report = db.check_secondary_blocks("docs", name).unwrap();
        assert!(
            report.files_built_online > 0,
            "seed {seed}: {name}: {report:?}"
        );
        assert_eq!(report.files_unindexed, 0, "seed {seed}: {name}: {report:?}");
    }
    assert!(
        side_blocks(&db) > 0,
        "seed {seed}: no block was built online"
    );
    // Every table was written without the index: every hit from a table comes from a block
    // built online.
    for (name, ..) in INDEXES {
        let result = db
            .range(
                "docs",
                name,
                &AttrValue::Int(0),
                &AttrValue::Int(VALUES),
                None,
            )
            .unwrap();
        let hits = result.hits.len() as u64;
        let want = common::newest_first(&model, |_| true, None);
        assert_eq!(hits, want.len() as u64, "seed {seed}: {name}");
        let stats = &result.stats;
        assert_eq!(stats.stale_entries, 0, "seed {seed}: {name}: {stats:?}");
        assert_eq!(
            stats.entries_read_in_place + stats.validations,
            hits,
            "seed {seed}: {name}: each hit is read in place or validated by a primary read: \
             {stats:?}"
        );
        assert!(
            stats.entries_read_in_place * 2 > hits,
            "seed {seed}: {name}: most hits should be read in place from blocks built online: \
             {stats:?}"
        );
    }
    // Tables written with the index present: their blocks and the online ones agree with
    // what the collector makes of each table's entries.
    for _ in 0..3 {
        write_some(&db, &mut model, &mut rng);
        db.flush().unwrap();
    }
    for (name, ..) in INDEXES {
        db.engine().wait_for_background_work().unwrap();
        let report = db.check_secondary_blocks("docs", name).unwrap();
        assert!(
            report.files_in_tables > 0,
            "seed {seed}: {name}: {report:?}"
        );
        assert!(
            report.files_built_online > 0,
            "seed {seed}: {name}: {report:?}"
        );
    }
    for _ in 0..20 {
        check(&db, &model, &mut rng, &format!("seed {seed}"));
    }
}

/// The payload of the panic that stands for a process dying in the middle of a build.
struct Interrupted;

/// Creates the indexes, each build interrupted after `files` tables (a panic out of the
/// progress callback, which runs without locks: as if the process had died there).
fn create_interrupted(db: &Database, files: u64, seed: u64) {
    for (name, kind, validation) in INDEXES {
        let mut built = 0;
        let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            db.create_index_with_progress("docs", spec(name, kind, validation), &mut |p| {
                if !p.finished {
                    built += 1;
                    if built == files {
                        std::panic::resume_unwind(Box::new(Interrupted));
                    }
                }
            })
        }));
        assert!(
            outcome.is_err(),
            "seed {seed}: {name}: the build ended before {files} files"
        );
        assert!(
            unindexed(db, name) > 0,
            "seed {seed}: {name}: nothing left to build"
        );
    }
}

fn open_with_progress(
    path: &Path,
    progress: impl Fn(&BackfillProgress) + Send + Sync + 'static,
) -> Database {
    let mut options = options(IndexBuildsAtOpen::Resume);
    options.progress = Some(Arc::new(progress));
    Database::open(path, options).unwrap()
}

/// A database in `path` holding `fill`'s documents, with both indexes created and each build
/// interrupted after `files` tables.
fn interrupted_database(
    path: &Path,
    model: &mut Model,
    rng: &mut StdRng,
    files: u64,
    seed: u64,
) -> Database {
    let db = Database::open(path, options(IndexBuildsAtOpen::Resume)).unwrap();
    db.create_collection("docs", "id").unwrap();
    fill(&db, model, rng);
    create_interrupted(&db, files, seed);
    db
}

/// Opens `path`, resuming the interrupted builds, which then wait after each table until the
/// test lets them go on: the receiver hears of each table, and a message on the sender lets
/// the build go on (once the sender is dropped, it no longer waits).
fn open_stepped(path: &Path) -> (Database, mpsc::Receiver<()>, mpsc::Sender<()>) {
    let (file_done, files_done) = mpsc::channel::<()>();
    let (go_on, go) = mpsc::channel::<()>();
    let go = parking_lot::Mutex::new(go);
    let db = open_with_progress(path, move |progress| {
        if !progress.finished {
            let _ = file_done.send(());
            // The test works meanwhile; it may also have stopped waiting (a failure).
            let _ = go.lock().recv_timeout(Duration::from_secs(10));
        }
    });
    (db, files_done, go_on)
}

/// A build interrupted after a few tables resumes at the next open, in the background. Between
/// every table of the resumed build (the progress callback waits for the test), the test
/// writes, flushes or compacts, and checks every index against the model; at the end every
/// live table is indexed.
#[test]
fn an_interrupted_build_resumes_at_open() {
    let seed = seed();
    let _guard = SeedGuard(seed);
    let mut rng = StdRng::seed_from_u64(seed);
    let dir = tempfile::tempdir().unwrap();
    let mut model = Model::new();
    {
        let db = interrupted_database(dir.path(), &mut model, &mut rng, 2, seed);
        for _ in 0..5 {
            check(&db, &model, &mut rng, &format!("seed {seed}: interrupted"));
        }
    }
    // Not resumed when told so.
    {
        let db = Database::open(dir.path(), options(IndexBuildsAtOpen::Leave)).unwrap();
        assert_eq!(db.index_build_status(), IndexBuildStatus::default());
        for (name, ..) in INDEXES {
            assert!(unindexed(&db, name) > 0, "seed {seed}: {name}");
        }
        db.close().unwrap();
    }
    let (db, files_done, go_on) = open_stepped(dir.path());
    let mut between_files = 0;
    loop {
        match files_done.recv_timeout(Duration::from_millis(50)) {
            Ok(()) => {
                between_files += 1;
                let what = format!("seed {seed}: resumed build, after file {between_files}");
                write_and_maybe_reshape(&db, &mut model, &mut rng);
                check(&db, &model, &mut rng, &what);
                go_on.send(()).unwrap();
            }
            Err(_) if !db.index_build_status().running => break,
            Err(_) => {}
        }
    }
    let status = db.wait_for_index_builds();
    assert!(status.failures.is_empty(), "seed {seed}: {status:?}");
    let mut names: Vec<(String, String)> = INDEXES
        .iter()
        .map(|(name, ..)| ("docs".to_string(), (*name).to_string()))
        .collect();
    names.sort();
    let sorted = |mut list: Vec<(String, String)>| {
        list.sort();
        list
    };
    assert_eq!(
        sorted(status.resumed.clone()),
        names,
        "seed {seed}: {status:?}"
    );
    assert_eq!(
        sorted(status.finished.clone()),
        names,
        "seed {seed}: {status:?}"
    );
    assert!(!status.running);
    assert_eq!(status.files_built, between_files, "seed {seed}: {status:?}");
    assert!(between_files > 0, "seed {seed}: nothing was resumed");
    for (name, ..) in INDEXES {
        assert_eq!(
            unindexed(&db, name),
            0,
            "seed {seed}: {name} after the resumed build"
        );
    }
    let report = db.check_global_index("docs", "next_n").unwrap();
    assert_eq!(report.files_unindexed, 0, "seed {seed}: {report:?}");
    check_many(
        &db,
        &model,
        &mut rng,
        &format!("seed {seed}: after the resumed build"),
    );
    db.close().unwrap();
    // Tables written at open before the catalog is loaded (the flush of the replayed WAL, a
    // compaction) lack the blocks too: the open after a complete build indexes them as well.
    let db = Database::open(dir.path(), options(IndexBuildsAtOpen::Resume)).unwrap();
    let status = db.wait_for_index_builds();
    assert!(status.failures.is_empty(), "seed {seed}: {status:?}");
    for (name, ..) in INDEXES {
        assert_eq!(
            unindexed(&db, name),
            0,
            "seed {seed}: {name} after a reopen"
        );
    }
    check(&db, &model, &mut rng, &format!("seed {seed}: reopened"));
}

/// The resumed build runs freely while the test writes, flushes, compacts and checks every
/// index against the model: answers are exact throughout.
#[test]
fn writes_and_compactions_race_a_resumed_build() {
    let seed = seed();
    let _guard = SeedGuard(seed);
    let mut rng = StdRng::seed_from_u64(seed);
    let dir = tempfile::tempdir().unwrap();
    let mut model = Model::new();
    drop(interrupted_database(
        dir.path(),
        &mut model,
        &mut rng,
        1,
        seed,
    ));
    // A short pause per table so that the build overlaps the test's work.
    let db = open_with_progress(dir.path(), |_| std::thread::sleep(Duration::from_millis(3)));
    let mut rounds = 0;
    let mut rounds_while_running = 0;
    while rounds < 10 || db.index_build_status().running {
        let running = db.index_build_status().running;
        write_and_maybe_reshape(&db, &mut model, &mut rng);
        check(
            &db,
            &model,
            &mut rng,
            &format!("seed {seed}: race round {rounds}"),
        );
        rounds += 1;
        rounds_while_running += u32::from(running);
        assert!(
            rounds < 10_000,
            "seed {seed}: the resumed build does not end"
        );
    }
    let status = db.wait_for_index_builds();
    assert!(status.failures.is_empty(), "seed {seed}: {status:?}");
    assert_eq!(
        status.finished.len(),
        INDEXES.len(),
        "seed {seed}: {status:?}"
    );
    assert!(status.files_built > 0, "seed {seed}: {status:?}");
    eprintln!("seed {seed}: {rounds_while_running} of {rounds} rounds ran during the build");
    for (name, ..) in INDEXES {
        assert_eq!(unindexed(&db, name), 0, "seed {seed}: {name}");
    }
    check_many(
        &db,
        &model,
        &mut rng,
        &format!("seed {seed}: after the race"),
    );
}

/// Dropping or closing the database while a resumed build runs stops and joins its thread
/// (the progress callback, which the thread holds, is released), without an error; the
/// next open resumes what is left.
#[test]
fn drop_and_close_stop_a_resumed_build() {
    let seed = seed();
    let _guard = SeedGuard(seed);
    let mut rng = StdRng::seed_from_u64(seed);
    let dir = tempfile::tempdir().unwrap();
    let mut model = Model::new();
    drop(interrupted_database(
        dir.path(),
        &mut model,
        &mut rng,
        1,
        seed,
    ));
    let files_built = Arc::new(AtomicU64::new(0));
    for close in [false, true] {
        let (file_done, files_done) = mpsc::channel::<()>();
        let (go_on, go) = mpsc::channel::<()>();
        let go = parking_lot::Mutex::new(go);
        let counter = Arc::clone(&files_built);
        let db = open_with_progress(dir.path(), move |progress| {
            if !progress.finished {
                counter.fetch_add(1, Ordering::Relaxed);
                let _ = file_done.send(());
                let _ = go.lock().recv_timeout(Duration::from_secs(10));
            }
        });
        // The build is waiting after its first table: stop the database meanwhile.
        files_done
            .recv_timeout(Duration::from_secs(30))
            .expect("the build resumes");
        let started = Instant::now();
        let stopper = std::thread::spawn(move || {
            if close {
                db.close().unwrap();
            } else {
                drop(db);
            }
        });
        std::thread::sleep(Duration::from_millis(100));
        // Let the build go on; it stops at its next data block.
        let mut files_after_stop = 0;
        loop {
            let _ = go_on.send(());
            match files_done.recv_timeout(Duration::from_secs(30)) {
                Ok(()) => files_after_stop += 1,
                // The callback is gone with the database: the thread ended.
                Err(mpsc::RecvTimeoutError::Disconnected) => break,
                Err(mpsc::RecvTimeoutError::Timeout) => panic!("seed {seed}: the build hangs"),
            }
        }
        stopper.join().unwrap();
        eprintln!(
            "seed {seed}: close {close}: stopped in {:?}, {files_after_stop} files after the stop",
            started.elapsed()
        );
    }
    let db = Database::open(dir.path(), options(IndexBuildsAtOpen::Resume)).unwrap();
    let status = db.wait_for_index_builds();
    assert!(status.failures.is_empty(), "seed {seed}: {status:?}");
    for (name, ..) in INDEXES {
        assert_eq!(unindexed(&db, name), 0, "seed {seed}: {name}");
    }
    assert!(files_built.load(Ordering::Relaxed) >= 2, "seed {seed}");
    check_many(
        &db,
        &model,
        &mut rng,
        &format!("seed {seed}: after the stops"),
    );
}

/// How a failed build is made to go on once the disk is healthy again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Healing {
    /// Retries are timed (the engine's `background_error_retry_interval_max_millis` is 200):
    /// the engine retries its failed work, and the build its own, by themselves.
    Automatic,
    /// No timed retries (the option is zero): nothing goes on until a resume.
    Resume,
}

/// Options on `file_system`, with tables that stay where they are (no compaction of its
/// own: several tables are left to build after the first) and retries as `healing` says.
fn fault_options(
    file_system: &FaultFileSystem,
    at_open: IndexBuildsAtOpen,
    healing: Healing,
) -> DatabaseOptions {
    let mut options = options(at_open);
    options.engine.file_system = Arc::new(file_system.clone());
    options.engine.l0_compaction_trigger = 16;
    options.engine.level1_bytes_max = 16 << 20;
    // Nor one that the checks' reads would trigger (which would build what the test leaves).
    options.engine.seek_compaction = false;
    options.engine.background_error_retry_interval_max_millis = match healing {
        Healing::Automatic => 200,
        Healing::Resume => 0,
    };
    options
}

/// Polls the build status until the background builds end (30 seconds at most).
fn wait_until_built(db: &Database, what: &str) -> IndexBuildStatus {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let status = db.index_build_status();
        if !status.running {
            return db.wait_for_index_builds();
        }
        assert!(
            Instant::now() < deadline,
            "{what}: the build does not end: {status:?}"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// A build that waits to retry after a recoverable failure: nothing fatal, the error kept.
fn assert_pending(status: &IndexBuildStatus, what: &str) {
    assert!(
        status.running && status.retry_pending,
        "{what}: no retry pending: {status:?}"
    );
    assert!(status.failures.is_empty(), "{what}: {status:?}");
    let error = status.last_error.as_ref().expect("the failure is kept");
    assert!(
        error.collection == "docs" && INDEXES.iter().any(|(name, ..)| error.index == *name),
        "{what}: {status:?}"
    );
    assert!(
        error.message.contains("injected fault"),
        "{what}: the error does not name the cause: {status:?}"
    );
}

/// After the build: every live table indexed, the global index exactly the live files'
/// blocks, answers exact, writes working.
fn assert_built(db: &Database, model: &mut Model, rng: &mut StdRng, what: &str) {
    for (name, ..) in INDEXES {
        assert_eq!(unindexed(db, name), 0, "{what}: {name}");
    }
    let report = db.check_global_index("docs", "next_n").unwrap();
    assert_eq!(report.files_unindexed, 0, "{what}: {report:?}");
    check_many(db, model, rng, what);
    write_and_maybe_reshape(db, model, rng);
    check_many(db, model, rng, &format!("{what}, after more writes"));
}

/// `create_index` of a `next` index on a collection with data fails part-way: after its first
/// table, a flush fails (its table cannot be created), so the engine stops writes with a
/// recoverable background error and the build's next write of blocks is refused. The index
/// is created anyway and the build goes on in the background: it waits (the error and a
/// pending retry in the status) while the fault lasts, and once the disk is healed it
/// finishes without a reopen — when the engine's automatic retry recovers, or when
/// `Db::resume` does. Answers equal brute force over the model before, during and after.
fn online_build_fails_on_stopped_writes(healing: Healing) {
    let seed = seed();
    let _guard = SeedGuard(seed);
    let mut rng = StdRng::seed_from_u64(seed);
    let file_system = FaultFileSystem::new();
    let path = Path::new("/db");
    let db = Database::open(
        path,
        fault_options(&file_system, IndexBuildsAtOpen::Leave, healing),
    )
    .unwrap();
    db.create_collection("docs", "id").unwrap();
    let mut model = Model::new();
    fill(&db, &mut model, &mut rng);
    let (name, kind, validation) = INDEXES[1];
    db.create_index("docs", spec(name, kind, validation))
        .unwrap();
    let what = format!("seed {seed}, {healing:?}");
    let mut files = 0;
    db.create_index_with_progress(
        "docs",
        spec("next_n", IndexKind::Next, Validation::GetLite),
        &mut |progress| {
            if progress.finished {
                return;
            }
            files += 1;
            if files > 1 {
                return;
            }
            write_some(&db, &mut model, &mut rng);
            check(&db, &model, &mut rng, &format!("{what}: during the build"));
            file_system.fail_from_files(FaultKind::Create, 0, ".sst");
            assert!(db.flush().is_err(), "{what}: the flush did not fail");
            let engine_error = db.engine().background_error();
            assert!(
                engine_error.as_ref().is_some_and(|e| e.recoverable),
                "{what}: {engine_error:?}"
            );
            check(
                &db,
                &model,
                &mut rng,
                &format!("{what}: while the engine refuses writes"),
            );
        },
    )
    .unwrap_or_else(|e| panic!("{what}: a recoverable failure is not returned: {e}"));
    let status = db.index_build_status();
    assert_pending(&status, &format!("{what}: after create_index"));
    assert_eq!(
        status.resumed,
        vec![("docs".to_string(), "next_n".to_string())]
    );
    assert!(
        status
            .last_error
            .as_ref()
            .is_some_and(|e| e.message.contains("writes stopped")),
        "{what}: {status:?}"
    );
    assert!(
        unindexed_now(&db, "next_n") > 0,
        "{what}: nothing left to build"
    );
    check_many(&db, &model, &mut rng, &format!("{what}: build pending"));
    // Nothing is built while the fault lasts (the engine's retries fail meanwhile).
    std::thread::sleep(Duration::from_millis(300));
    let status = db.index_build_status();
    assert_pending(&status, &format!("{what}: while the fault lasts"));
    assert_eq!(status.retries, 0, "{what}: retried into a refusing engine");
    file_system.heal();
    if healing == Healing::Resume {
        // No timed retries: the build waits for the engine's recovery.
        std::thread::sleep(Duration::from_millis(300));
        assert_pending(
            &db.index_build_status(),
            &format!("{what}: healed, before resume"),
        );
        assert!(unindexed_now(&db, "next_n") > 0, "{what}");
        check_many(
            &db,
            &model,
            &mut rng,
            &format!("{what}: healed, before resume"),
        );
        db.engine().resume().unwrap();
    }
    let status = wait_until_built(&db, &what);
    assert!(status.failures.is_empty(), "{what}: {status:?}");
    assert!(!status.retry_pending, "{what}: {status:?}");
    assert_eq!(status.finished, status.resumed, "{what}: {status:?}");
    assert!(
        status.retries >= 1 && status.attempts >= 2,
        "{what}: {status:?}"
    );
    assert!(status.files_built > 0, "{what}: {status:?}");
    assert_built(
        &db,
        &mut model,
        &mut rng,
        &format!("{what}: after the retry"),
    );
    db.close().unwrap();
    let db = Database::open(
        path,
        fault_options(&file_system, IndexBuildsAtOpen::Resume, healing),
    )
    .unwrap();
    let status = db.wait_for_index_builds();
    assert!(status.failures.is_empty(), "{what}: {status:?}");
    assert_built(&db, &mut model, &mut rng, &format!("{what}: reopened"));
}

#[test]
fn an_online_build_refused_by_a_stopped_engine_finishes_after_its_automatic_recovery() {
    online_build_fails_on_stopped_writes(Healing::Automatic);
}

#[test]
fn an_online_build_refused_by_a_stopped_engine_finishes_after_resume() {
    online_build_fails_on_stopped_writes(Healing::Resume);
}

/// A database in `path` (on `file_system`) holding `fill`'s documents, with both indexes
/// created and each build interrupted after its first table.
fn interrupted_on(
    file_system: &FaultFileSystem,
    path: &Path,
    model: &mut Model,
    rng: &mut StdRng,
    seed: u64,
) {
    let db = Database::open(
        path,
        fault_options(file_system, IndexBuildsAtOpen::Leave, Healing::Automatic),
    )
    .unwrap();
    db.create_collection("docs", "id").unwrap();
    fill(&db, model, rng);
    create_interrupted(&db, 1, seed);
    db.close().unwrap();
}

/// Opens `path`, resuming the interrupted builds; the disk stops answering reads once the
/// first table is built, so the build fails reading the next one.
fn open_failing_reads(file_system: &FaultFileSystem, path: &Path, healing: Healing) -> Database {
    let mut options = fault_options(file_system, IndexBuildsAtOpen::Resume, healing);
    let failing = file_system.clone();
    let armed = AtomicBool::new(true);
    options.progress = Some(Arc::new(move |progress: &BackfillProgress| {
        if !progress.finished && armed.swap(false, Ordering::SeqCst) {
            failing.fail_always(FaultKind::Read);
        }
    }));
    Database::open(path, options).unwrap()
}

/// A build resumed at open fails reading a table (the engine itself stays healthy): it waits
/// to retry, with the error in the status, and retries after a backoff (failing again while
/// the fault lasts); once the disk is healed it finishes without a reopen, by itself or at
/// `Database::resume` (no timed retries). Answers are exact before and after.
fn resumed_build_fails_on_reads(healing: Healing) {
    let seed = seed();
    let _guard = SeedGuard(seed);
    let mut rng = StdRng::seed_from_u64(seed);
    let file_system = FaultFileSystem::new();
    let path = Path::new("/db");
    let mut model = Model::new();
    interrupted_on(&file_system, path, &mut model, &mut rng, seed);
    let what = format!("seed {seed}, {healing:?}");
    let db = open_failing_reads(&file_system, path, healing);
    let status = db.wait_for_index_builds();
    assert_pending(&status, &format!("{what}: reads failing"));
    assert_eq!(status.files_built, 1, "{what}: {status:?}");
    if healing == Healing::Automatic {
        // Retried after a backoff, and failing again while the fault lasts.
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            // Waiting again after its second retry failed (not in the middle of an attempt).
            let status = db.index_build_status();
            if status.retries >= 2 && status.retry_pending {
                assert_pending(&status, &format!("{what}: retries failing"));
                break;
            }
            assert!(Instant::now() < deadline, "{what}: no retry: {status:?}");
            std::thread::sleep(Duration::from_millis(5));
        }
        file_system.heal();
    } else {
        file_system.heal();
        std::thread::sleep(Duration::from_millis(300));
        let status = db.index_build_status();
        assert_pending(&status, &format!("{what}: healed, before resume"));
        assert_eq!(
            status.retries, 0,
            "{what}: retried without timed retries: {status:?}"
        );
        check_many(
            &db,
            &model,
            &mut rng,
            &format!("{what}: healed, before resume"),
        );
        db.resume().unwrap();
    }
    let status = wait_until_built(&db, &what);
    assert!(status.failures.is_empty(), "{what}: {status:?}");
    assert!(
        !status.retry_pending && status.retries >= 1,
        "{what}: {status:?}"
    );
    let mut finished = status.finished.clone();
    finished.sort();
    assert_eq!(
        finished,
        vec![
            ("docs".to_string(), "local_n".to_string()),
            ("docs".to_string(), "next_n".to_string())
        ],
        "{what}: {status:?}"
    );
    assert_built(
        &db,
        &mut model,
        &mut rng,
        &format!("{what}: after the retry"),
    );
}

#[test]
fn a_resumed_build_failing_on_reads_retries_after_a_backoff() {
    resumed_build_fails_on_reads(Healing::Automatic);
}

#[test]
fn a_resumed_build_failing_on_reads_retries_at_resume() {
    resumed_build_fails_on_reads(Healing::Resume);
}

/// Closing or dropping the database while a build waits to retry (no timed retries: it would
/// wait for ever) returns at once, and the next open finishes the build.
#[test]
fn close_and_drop_during_a_pending_retry_return_promptly() {
    let seed = seed();
    let _guard = SeedGuard(seed);
    let mut rng = StdRng::seed_from_u64(seed);
    let file_system = FaultFileSystem::new();
    let path = Path::new("/db");
    let mut model = Model::new();
    interrupted_on(&file_system, path, &mut model, &mut rng, seed);
    for close in [false, true] {
        let what = format!("seed {seed}, close {close}");
        let db = open_failing_reads(&file_system, path, Healing::Resume);
        let status = db.wait_for_index_builds();
        assert_pending(&status, &what);
        file_system.heal();
        check_many(&db, &model, &mut rng, &format!("{what}: pending"));
        let (done, stopped) = mpsc::channel();
        let started = Instant::now();
        std::thread::spawn(move || {
            if close {
                db.close().unwrap();
            } else {
                drop(db);
            }
            let _ = done.send(());
        });
        stopped
            .recv_timeout(Duration::from_secs(10))
            .unwrap_or_else(|_| panic!("{what}: the stop waits for the pending retry"));
        eprintln!("{what}: stopped in {:?}", started.elapsed());
    }
    let db = Database::open(
        path,
        fault_options(&file_system, IndexBuildsAtOpen::Resume, Healing::Resume),
    )
    .unwrap();
    let status = db.wait_for_index_builds();
    assert!(
        status.failures.is_empty() && !status.running && status.retries == 0,
        "seed {seed}: {status:?}"
    );
    assert_eq!(
        status.finished.len(),
        INDEXES.len(),
        "seed {seed}: {status:?}"
    );
    assert_built(&db, &mut model, &mut rng, &format!("seed {seed}: reopened"));
}

/// A build whose write of blocks fails in the write-ahead log stops the engine with a fatal
/// error: the build is not retried (no pending retry, no retry counted, even with timed
/// retries on and after `Database::resume`), the failure says a reopen is needed, and the
/// reopen finishes the build.
#[test]
fn a_fatal_failure_is_not_retried() {
    let seed = seed();
    let _guard = SeedGuard(seed);
    let mut rng = StdRng::seed_from_u64(seed);
    let file_system = FaultFileSystem::new();
    let path = Path::new("/db");
    let mut model = Model::new();
    interrupted_on(&file_system, path, &mut model, &mut rng, seed);
    let mut options = fault_options(&file_system, IndexBuildsAtOpen::Resume, Healing::Automatic);
    let failing = file_system.clone();
    let armed = AtomicBool::new(true);
    options.progress = Some(Arc::new(move |progress: &BackfillProgress| {
        if !progress.finished && armed.swap(false, Ordering::SeqCst) {
            failing.fail_from_files(FaultKind::Write, 0, ".wal");
        }
    }));
    let db = Database::open(path, options).unwrap();
    let status = db.wait_for_index_builds();
    file_system.heal();
    assert!(
        !status.running && !status.retry_pending,
        "seed {seed}: {status:?}"
    );
    assert!(!status.failures.is_empty(), "seed {seed}: {status:?}");
    for failure in &status.failures {
        assert!(
            failure.message.contains("not retried") && failure.message.contains("reopen"),
            "seed {seed}: the failure does not say a reopen is needed: {status:?}"
        );
    }
    assert!(db.resume().is_err(), "seed {seed}");
    std::thread::sleep(Duration::from_millis(300));
    let later = db.index_build_status();
    assert_eq!(later.retries, 0, "seed {seed}: {later:?}");
    assert_eq!(later.attempts, status.attempts, "seed {seed}: {later:?}");
    check_many(
        &db,
        &model,
        &mut rng,
        &format!("seed {seed}: after a fatal failure"),
    );
    drop(db);
    let db = Database::open(
        path,
        fault_options(&file_system, IndexBuildsAtOpen::Resume, Healing::Automatic),
    )
    .unwrap();
    // The failed write was not acknowledged: whatever the reopen finds of it, it is a block
    // of the build, not a document.
    let status = db.wait_for_index_builds();
    assert!(status.failures.is_empty(), "seed {seed}: {status:?}");
    assert_built(&db, &mut model, &mut rng, &format!("seed {seed}: reopened"));
}

/// The names of `db`'s running background threads.
fn background_thread_names(db: &Database) -> Vec<String> {
    db.engine()
        .background_thread_ids()
        .into_iter()
        .map(|(name, _)| name)
        .collect()
}

/// The threads that live as long as a database opened with `options`: the engine's own and
/// the index workers.
fn long_lived_thread_names(options: &DatabaseOptions) -> Vec<String> {
    let mut names = vec!["sift-flush".to_string(), "sift-wal-presync".to_string()];
    names
        .extend((0..options.engine.compaction_threads.max(1)).map(|i| format!("sift-compact-{i}")));
    names.extend((0..options.async_index.workers.max(1)).map(|i| format!("sift-index-async-{i}")));
    names
}

/// The thread of a resumed build is listed among the engine's background threads while it
/// runs and leaves the list when it ends; the index workers and the engine's own threads,
/// which live as long as the database, stay listed.
#[test]
fn the_build_thread_leaves_the_background_thread_list_when_it_ends() {
    let seed = seed();
    let _guard = SeedGuard(seed);
    let mut rng = StdRng::seed_from_u64(seed);
    let dir = tempfile::tempdir().unwrap();
    let mut model = Model::new();
    drop(interrupted_database(
        dir.path(),
        &mut model,
        &mut rng,
        1,
        seed,
    ));
    // The build waits after its first table until the test has looked.
    let (db, files_done, go_on) = open_stepped(dir.path());
    files_done
        .recv_timeout(Duration::from_secs(10))
        .expect("the resumed build reports its first table");
    // The build thread entered the list before it reported its table. The others enter it
    // as they start, which may be after the open returned (the engine's threads too), so
    // wait for every one of them: otherwise a thread listed late would look like a change.
    let long_lived = long_lived_thread_names(&options(IndexBuildsAtOpen::Resume));
    let all_listed = |names: &[String]| long_lived.iter().all(|name| names.contains(name));
    let deadline = Instant::now() + Duration::from_secs(10);
    while !all_listed(&background_thread_names(&db)) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    let during = background_thread_names(&db);
    assert!(all_listed(&during), "seed {seed}: {during:?}");
    assert_eq!(
        during
            .iter()
            .filter(|name| *name == "sift-index-build")
            .count(),
        1,
        "seed {seed}: {during:?}"
    );
    // No more waiting: the build runs to its end, and `wait_for_index_builds` joins it.
    drop(go_on);
    let status = db.wait_for_index_builds();
    assert!(status.failures.is_empty(), "seed {seed}: {status:?}");
    assert_eq!(
        status.finished.len(),
        INDEXES.len(),
        "seed {seed}: {status:?}"
    );
    // Exactly the build thread left: everything else is still listed, in the same order.
    let after = background_thread_names(&db);
    let during_without_build: Vec<String> = during
        .iter()
        .filter(|name| *name != "sift-index-build")
        .cloned()
        .collect();
    assert_eq!(
        after, during_without_build,
        "seed {seed}: during the build {during:?}"
    );
    db.close().unwrap();
}
