//! Fault injection through `FaultFileSystem`: failing writes, syncs, creates, reads, renames,
//! removes and directory syncs at random points, in the foreground and in background flushes
//! and compactions.
//!
//! Every operation must return `Ok` or an error (never panic, never hang: each scenario runs
//! under a timeout, and a panic hook catches panics in the engine's background threads). After
//! the faults are healed and the process crashes (or closes), the database must open and hold
//! every write acknowledged with `sync: true`; its state must be the state after some prefix of
//! the writes attempted, as in `tests/model.rs`. Some rounds end instead with `Db::resume`
//! after healing: if the background error was recoverable (or none was set) the database must
//! be healthy without a reopen — it holds every acknowledged write, takes new writes, and
//! reads equal the model — and the next rounds go on with it; if the error was fatal, `resume`
//! must say a reopen is needed, and the round ends with a close.
//!
//! `SIFT_SEED` replays one seed; `SIFT_FAULT_SEEDS` sets how many random seeds run.

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use sift_lsm::fs::{FaultFileSystem, FaultKind};
use sift_lsm::{Db, Error, Options, ReadOptions, Tree, TreeOptions, WriteBatch, WriteOptions};
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Once};
use std::time::Duration;

const TREE_NAMES: [&str; 3] = ["default", "left", "right"];
const SCENARIO_TIMEOUT: Duration = Duration::from_mins(1);

/// Panics seen in the engine's own threads (named `sift-*`): those never reach a test's
/// `catch_unwind`, so a hook counts them.
static BACKGROUND_PANICS: AtomicUsize = AtomicUsize::new(0);

fn watch_background_panics() {
    static INSTALL: Once = Once::new();
    INSTALL.call_once(|| {
        let default = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if std::thread::current()
                .name()
                .is_some_and(|n| n.starts_with("sift-"))
            {
                BACKGROUND_PANICS.fetch_add(1, Ordering::SeqCst);
            }
            default(info);
        }));
    });
}

/// Runs `scenario` in its own thread and fails if it panics or takes longer than the timeout.
fn run_with_timeout(name: &str, seed: u64, scenario: impl FnOnce() + Send + 'static) {
    watch_background_panics();
    let before = BACKGROUND_PANICS.load(Ordering::SeqCst);
    let (done, finished) = mpsc::channel();
    let handle = std::thread::Builder::new()
        .name(format!("scenario-{name}"))
        .spawn(move || {
            let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(scenario));
            let _ = done.send(result.is_ok());
        })
        .expect("spawn");
    match finished.recv_timeout(SCENARIO_TIMEOUT) {
        Ok(true) => {
            handle.join().expect("join");
        }
        Ok(false) => panic!("{name} failed with seed {seed}: replay with SIFT_SEED={seed}"),
        Err(mpsc::RecvTimeoutError::Timeout) => panic!(
            "{name} hung for {SCENARIO_TIMEOUT:?} with seed {seed}: replay with SIFT_SEED={seed}"
        ),
        Err(mpsc::RecvTimeoutError::Disconnected) => {
            panic!("{name} ended without a result with seed {seed}: replay with SIFT_SEED={seed}")
        }
    }
    let after = BACKGROUND_PANICS.load(Ordering::SeqCst);
    assert_eq!(
        before, after,
        "{name}: an engine thread panicked with seed {seed}"
    );
}

fn seeds(count: usize) -> Vec<u64> {
    if let Ok(s) = std::env::var("SIFT_SEED") {
        return vec![s.parse().expect("SIFT_SEED must be a number")];
    }
    let count = std::env::var("SIFT_FAULT_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(count);
    let base: u64 = rand::random();
    (0..count as u64).map(|i| base.wrapping_add(i)).collect()
}

type Model = BTreeMap<(usize, Vec<u8>), Vec<u8>>;

#[derive(Debug, Clone)]
enum Op {
    Put(usize, Vec<u8>, Vec<u8>),
    Delete(usize, Vec<u8>),
}

fn apply(model: &mut Model, ops: &[Op]) {
    for op in ops {
        match op {
            Op::Put(t, k, v) => {
                model.insert((*t, k.clone()), v.clone());
            }
            Op::Delete(t, k) => {
                model.remove(&(*t, k.clone()));
            }
        }
    }
}

fn small_options(fs: &FaultFileSystem) -> Options {
    Options {
        file_system: Arc::new(fs.clone()),
        memtable_bytes_max: 8 << 10,
        table_file_bytes_target: 4 << 10,
        l0_compaction_trigger: 2,
        l0_slowdown_trigger: 6,
        l0_stop_trigger: 10,
        level1_bytes_max: 16 << 10,
        level_size_ratio: 4,
        block_bytes: 256,
        block_cache_bytes: 64 << 10,
        ..Options::default()
    }
}

fn open_trees(db: &Db) -> sift_lsm::Result<Vec<Tree>> {
    TREE_NAMES
        .iter()
        .map(|name| {
            db.tree(name)
                .or_else(|_| db.create_tree(name, TreeOptions::default()))
        })
        .collect()
}

fn scan(db: &Db, tree: &Tree) -> sift_lsm::Result<Vec<(Vec<u8>, Vec<u8>)>> {
    let mut iter = db.iter(tree, ReadOptions::default())?;
    iter.seek_to_first()?;
    let mut out = Vec::new();
    while iter.valid() {
        out.push((iter.key().to_vec(), iter.value().to_vec()));
        iter.next()?;
    }
    Ok(out)
}

fn read_all(db: &Db, trees: &[Tree]) -> Model {
    let mut model = Model::new();
    for (t, tree) in trees.iter().enumerate() {
        for (k, v) in scan(db, tree).expect("scan after reopen") {
            model.insert((t, k), v);
        }
    }
    model
}

fn expected_in_tree(model: &Model, tree: usize) -> Vec<(Vec<u8>, Vec<u8>)> {
    model
        .iter()
        .filter(|((t, _), _)| *t == tree)
        .map(|((_, k), v)| (k.clone(), v.clone()))
        .collect()
}

/// How a round of faults ends.
#[derive(Debug, Clone, Copy)]
enum Ending {
    /// Power loss: unsynced data and directory changes vanish.
    Crash,
    /// Power loss keeping a random part of each file's unsynced bytes (torn writes).
    TornCrash,
    /// The process closes the database after the faults are healed.
    Close,
    /// `Db::resume` after the faults are healed, then more writes on the same handle (a
    /// close if the error was fatal).
    Resume,
}

struct Harness {
    rng: StdRng,
    fs: FaultFileSystem,
    dir: &'static Path,
    db: Option<Db>,
    trees: Vec<Tree>,
    /// Every acknowledged write.
    model: Model,
    /// The state at the last write acknowledged with sync, and the acknowledged writes since.
    durable: Model,
    since_durable: Vec<Vec<Op>>,
    /// A write that failed: it may or may not have reached the log. Writes stop after one.
    uncertain: Option<Vec<Op>>,
    errors_seen: usize,
    /// Rounds that ended with a successful `resume`, and those of them that recovered from a
    /// background error (without a reopen).
    resumed: usize,
    resumed_from_errors: usize,
    /// Rounds whose `resume` reported a fatal error (a reopen followed).
    resume_refused: usize,
    /// The last write error, for messages.
    last_write_error: Option<String>,
}

impl Harness {
    fn new(seed: u64) -> Self {
        let mut h = Harness {
            rng: StdRng::seed_from_u64(seed),
            fs: FaultFileSystem::new(),
            dir: Path::new("/faults-db"),
            db: None,
            trees: Vec::new(),
            model: Model::new(),
            durable: Model::new(),
            since_durable: Vec::new(),
            uncertain: None,
            errors_seen: 0,
            resumed: 0,
            resumed_from_errors: 0,
            resume_refused: 0,
            last_write_error: None,
        };
        h.open();
        h
    }

    fn db(&self) -> &Db {
        self.db.as_ref().expect("open")
    }

    fn open(&mut self) {
        let db = Db::open(self.dir, small_options(&self.fs)).expect("open after healing");
        self.trees = open_trees(&db).expect("trees after healing");
        self.db = Some(db);
    }

    fn key(&mut self) -> Vec<u8> {
        format!("key{:04}", self.rng.gen_range(0..400)).into_bytes()
    }

    fn random_batch(&mut self) -> Vec<Op> {
        let n = self.rng.gen_range(1..6);
        (0..n)
            .map(|_| {
                let tree = self.rng.gen_range(0..TREE_NAMES.len());
                let key = self.key();
                if self.rng.gen_bool(0.2) {
                    Op::Delete(tree, key)
                } else {
                    let len = self.rng.gen_range(10..300);
                    let fill = self.rng.gen_range(b'a'..=b'z');
                    Op::Put(tree, key, vec![fill; len])
                }
            })
            .collect()
    }

    /// Writes one batch; returns false once a write has failed.
    fn write(&mut self) -> bool {
        if self.uncertain.is_some() {
            return false;
        }
        let ops = self.random_batch();
        let sync = self.rng.gen_bool(0.3);
        let mut batch = WriteBatch::new();
        for op in &ops {
            match op {
                Op::Put(t, k, v) => batch.put(&self.trees[*t], k, v),
                Op::Delete(t, k) => batch.delete(&self.trees[*t], k),
            }
        }
        match self.db().write(batch, &WriteOptions { sync }) {
            Ok(_) => {
                apply(&mut self.model, &ops);
                if sync {
                    self.durable = self.model.clone();
                    self.since_durable.clear();
                } else {
                    self.since_durable.push(ops);
                }
                true
            }
            Err(e) => {
                assert!(
                    !e.is_corruption(),
                    "an injected I/O fault must not surface as corruption: {e}"
                );
                self.last_write_error = Some(e.to_string());
                self.errors_seen += 1;
                self.uncertain = Some(ops);
                false
            }
        }
    }

    /// A read that succeeds must return exactly the acknowledged state.
    fn check_get(&mut self) {
        let t = self.rng.gen_range(0..TREE_NAMES.len());
        let key = self.key();
        match self.db().get(&self.trees[t], &key) {
            Ok(got) => assert_eq!(
                got.map(|e| e.value),
                self.model.get(&(t, key.clone())).cloned(),
                "get {:?} in {} under faults",
                String::from_utf8_lossy(&key),
                TREE_NAMES[t]
            ),
            Err(e) => {
                assert!(!e.is_corruption(), "read fault reported as corruption: {e}");
                self.errors_seen += 1;
            }
        }
    }

    fn check_scan(&mut self) {
        let t = self.rng.gen_range(0..TREE_NAMES.len());
        match scan(self.db(), &self.trees[t]) {
            Ok(got) => assert!(
                got == expected_in_tree(&self.model, t),
                "scan of {} under faults differs from the model",
                TREE_NAMES[t]
            ),
            Err(e) => {
                assert!(!e.is_corruption(), "read fault reported as corruption: {e}");
                self.errors_seen += 1;
            }
        }
    }

    fn background_step(&mut self) {
        let result = match self.rng.gen_range(0..3) {
            0 => self.db().flush(),
            1 => {
                let t = self.rng.gen_range(0..TREE_NAMES.len());
                let tree = self.trees[t].clone();
                self.db().compact_range(&tree, None, None)
            }
            _ => self.db().wait_for_background_work(),
        };
        if let Err(e) = result {
            assert!(
                !e.is_corruption(),
                "an injected fault surfaced as corruption: {e}"
            );
            self.errors_seen += 1;
        }
    }

    fn arm_faults(&mut self) {
        let kinds = [
            FaultKind::Write,
            FaultKind::Sync,
            FaultKind::Create,
            FaultKind::Read,
            FaultKind::Rename,
            FaultKind::Remove,
            FaultKind::SyncDir,
        ];
        let count = self.rng.gen_range(1..3);
        for _ in 0..count {
            let kind = kinds[self.rng.gen_range(0..kinds.len())];
            match self.rng.gen_range(0..3) {
                0 => {
                    let after = self.fs.operations(kind) + self.rng.gen_range(0..40);
                    let after = after - self.fs.operations(kind);
                    self.fs.fail_after(kind, after);
                }
                1 => {
                    let after = self.rng.gen_range(0..60);
                    self.fs.fail_from(kind, after);
                }
                _ => {
                    let probability = self.rng.gen_range(0.01..0.2);
                    let seed = self.rng.gen();
                    self.fs.fail_randomly(kind, probability, seed);
                }
            }
        }
    }

    /// One round: faults armed, operations until the first failed write (or enough steps),
    /// faults healed, crash or close, reopen and check.
    fn round(&mut self) {
        self.arm_faults();
        for _ in 0..self.rng.gen_range(20..200) {
            match self.rng.gen_range(0..10) {
                0..=4 => {
                    if !self.write() && self.rng.gen_bool(0.3) {
                        break;
                    }
                }
                5 | 6 => self.check_get(),
                7 => self.check_scan(),
                _ => self.background_step(),
            }
        }
        self.fs.heal();
        let mut ending = match self.rng.gen_range(0..4) {
            0 => Ending::Crash,
            1 => Ending::TornCrash,
            2 => Ending::Close,
            _ => Ending::Resume,
        };
        if let Ending::Resume = ending {
            let recoveries_before = self.db().stats().background_error_recoveries;
            match self.db().resume() {
                Ok(()) => {
                    self.resumed += 1;
                    if self.db().stats().background_error_recoveries > recoveries_before {
                        self.resumed_from_errors += 1;
                    }
                    self.continue_after_resume();
                    return;
                }
                Err(e) => {
                    // Faults are healed: a retry of recoverable work cannot fail again.
                    assert!(!e.is_corruption(), "resume reported corruption: {e}");
                    assert!(
                        e.to_string().contains("reopen"),
                        "resume failed with faults healed without asking for a reopen: {e}"
                    );
                    self.resume_refused += 1;
                    ending = Ending::Close;
                }
            }
        }
        match ending {
            Ending::Crash => {
                self.fs.crash();
                drop(self.db.take());
            }
            Ending::TornCrash => {
                self.fs.crash_with_torn_writes(self.rng.gen());
                drop(self.db.take());
            }
            Ending::Close | Ending::Resume => {
                // Closing may fail (a WAL that failed once cannot be synced); it must not panic.
                let _ = self.db.take().expect("open").close();
            }
        }
        self.open();
        if std::env::var_os("SIFT_TRACE").is_some() {
            eprintln!(
                "round: {ending:?} durable={} unsynced={} uncertain={} errors={}",
                self.durable.len(),
                self.since_durable.len(),
                self.uncertain.is_some(),
                self.errors_seen
            );
        }
        self.check_recovered(ending);
    }

    /// After a successful `resume`, on the same handle: the database holds every acknowledged
    /// write (and the failed one, if it got in), takes new writes, and reads equal the model;
    /// a flush then makes everything durable, so the next round's crash may lose nothing
    /// written so far.
    fn continue_after_resume(&mut self) {
        let actual = read_all(self.db(), &self.trees);
        let mut candidates = vec![self.model.clone()];
        if let Some(ops) = &self.uncertain {
            let mut candidate = self.model.clone();
            apply(&mut candidate, ops);
            candidates.push(candidate);
        }
        let Some(found) = candidates.iter().position(|c| *c == actual) else {
            panic!(
                "after resume the database ({} keys) does not hold exactly the acknowledged \
                 writes ({} keys; uncertain write: {})",
                actual.len(),
                self.model.len(),
                self.uncertain.is_some()
            );
        };
        self.model = candidates.swap_remove(found);
        self.uncertain = None;
        for _ in 0..self.rng.gen_range(10..60) {
            assert!(
                self.write(),
                "a write failed after a successful resume: {:?}",
                self.last_write_error
            );
        }
        let actual = read_all(self.db(), &self.trees);
        assert!(
            actual == self.model,
            "after resume and more writes the database differs from the model"
        );
        self.db().flush().expect("flush after a successful resume");
        self.durable = self.model.clone();
        self.since_durable.clear();
    }

    /// The recovered state must be the durable state plus a prefix of the writes acknowledged
    /// without sync (and, at the end, possibly the write that failed). With no crash, nothing
    /// acknowledged may be missing.
    fn check_recovered(&mut self, ending: Ending) {
        let actual = read_all(self.db(), &self.trees);
        let mut candidates = Vec::new();
        match ending {
            Ending::Crash | Ending::TornCrash => {
                let mut candidate = self.durable.clone();
                candidates.push(candidate.clone());
                for ops in &self.since_durable {
                    apply(&mut candidate, ops);
                    candidates.push(candidate.clone());
                }
            }
            Ending::Close | Ending::Resume => candidates.push(self.model.clone()),
        }
        if let Some(ops) = &self.uncertain {
            let mut candidate = self.model.clone();
            apply(&mut candidate, ops);
            candidates.push(candidate);
        }
        let Some(found) = candidates.iter().rposition(|c| *c == actual) else {
            let missing = self
                .durable
                .iter()
                .find(|(k, v)| actual.get(k) != Some(v))
                .map(|((t, k), _)| format!("{}:{}", TREE_NAMES[*t], String::from_utf8_lossy(k)));
            panic!(
                "after {ending:?} the database ({} keys) matches no prefix of the acknowledged \
                 writes ({} durable keys, {} unsynced batches, uncertain write: {}); first \
                 durable key missing or wrong: {missing:?}",
                actual.len(),
                self.durable.len(),
                self.since_durable.len(),
                self.uncertain.is_some(),
            );
        };
        self.model = candidates.swap_remove(found);
        self.durable = self.model.clone();
        self.since_durable.clear();
        self.uncertain = None;
        // Point reads agree with the scan.
        for ((t, k), v) in self.model.iter().take(40) {
            let got = self.db().get(&self.trees[*t], k).expect("get after reopen");
            assert_eq!(got.map(|e| e.value).as_ref(), Some(v));
        }
    }
}

#[test]
fn faults_random_injection_keeps_synced_writes() {
    let mut errors = 0;
    let (mut resumed, mut resumed_from_errors, mut resume_refused) = (0, 0, 0);
    for seed in seeds(10) {
        let (sender, receiver) = mpsc::channel();
        run_with_timeout("faults_random_injection", seed, move || {
            let mut h = Harness::new(seed);
            for _ in 0..12 {
                h.round();
            }
            let _ = sender.send((
                h.errors_seen,
                h.resumed,
                h.resumed_from_errors,
                h.resume_refused,
            ));
        });
        let (e, r, f, x) = receiver.recv().unwrap_or((0, 0, 0, 0));
        errors += e;
        resumed += r;
        resumed_from_errors += f;
        resume_refused += x;
    }
    eprintln!(
        "random fault injection: {errors} operations failed; {resumed} rounds resumed without \
         a reopen ({resumed_from_errors} of them after a background error), {resume_refused} \
         refused (fatal error)"
    );
    assert!(errors > 0, "no injected fault ever surfaced as an error");
    if std::env::var_os("SIFT_SEED").is_none() {
        assert!(
            resumed_from_errors > 0,
            "no round recovered from a background error without a reopen"
        );
    }
}

/// Writes `count` batches (synced every `sync_every`), returning the model.
fn fill(db: &Db, trees: &[Tree], rng: &mut StdRng, count: usize, model: &mut Model) {
    for i in 0..count {
        let t = rng.gen_range(0..trees.len());
        let key = format!("fill{:05}", rng.gen_range(0..3000)).into_bytes();
        let value = vec![b'a' + (i % 26) as u8; rng.gen_range(50..400)];
        let mut batch = WriteBatch::new();
        batch.put(&trees[t], &key, &value);
        db.write(batch, &WriteOptions { sync: i % 10 == 9 })
            .expect("write before faults");
        model.insert((t, key), value);
    }
}

fn assert_reads_match(db: &Db, trees: &[Tree], model: &Model, context: &str) {
    for (t, tree) in trees.iter().enumerate() {
        let got = scan(db, tree).unwrap_or_else(|e| panic!("{context}: scan failed: {e}"));
        assert!(
            got == expected_in_tree(model, t),
            "{context}: scan of {} differs from the model",
            TREE_NAMES[t]
        );
    }
    for ((t, k), v) in model.iter().step_by(7) {
        let got = db
            .get(&trees[*t], k)
            .unwrap_or_else(|e| panic!("{context}: get failed: {e}"));
        assert_eq!(got.map(|e| e.value).as_ref(), Some(v), "{context}");
    }
}

fn assert_writes_refused(db: &Db, trees: &[Tree]) {
    match db.put(&trees[0], b"after-failure", b"x") {
        Err(Error::Closed(message)) => assert!(
            message.contains("background error") && message.contains("injected fault"),
            "the refusal should say why: {message}"
        ),
        other => panic!("a write after a background failure must be refused, got {other:?}"),
    }
}

/// `small_options` without automatic retries after a background error: the tests that use it
/// look at the stopped database after healing, and then recover it with `Db::resume` or a
/// reopen.
fn options_without_retries(fs: &FaultFileSystem) -> Options {
    Options {
        background_error_retry_interval_max_millis: 0,
        ..small_options(fs)
    }
}

/// Disk full while a flush writes its table: the flush fails, later writes are refused with a
/// clear `Error::Closed`, reads keep working (from the memtables); with automatic retries off
/// writes stay refused after healing, until `Db::resume` makes them work again, and a reopen
/// (after a crash or a close) recovers it all.
#[test]
fn faults_disk_full_during_flush_stops_writes_and_recovers() {
    for seed in seeds(2) {
        run_with_timeout("disk_full_during_flush", seed, move || {
            let mut rng = StdRng::seed_from_u64(seed);
            let fs = FaultFileSystem::new();
            let dir = Path::new("/flush-full");
            let db = Db::open(dir, options_without_retries(&fs)).expect("open");
            let trees = open_trees(&db).expect("trees");
            let mut model = Model::new();
            fill(&db, &trees, &mut rng, 60, &mut model);
            db.flush().expect("flush before faults");
            fill(&db, &trees, &mut rng, 20, &mut model);
            // Make the unsynced part durable so a crash after healing loses nothing.
            let mut batch = WriteBatch::new();
            batch.put(&trees[1], b"synced-marker", b"1");
            db.write(batch, &WriteOptions { sync: true }).expect("sync");
            model.insert((1, b"synced-marker".to_vec()), b"1".to_vec());

            // Disk full: every append fails from now on (table files and the WAL alike).
            fs.fail_always(FaultKind::Write);
            match db.flush() {
                Err(Error::Closed(message)) => assert!(
                    message.contains("injected fault"),
                    "flush error should carry the cause: {message}"
                ),
                other => panic!("flush on a full disk must fail with Closed, got {other:?}"),
            }
            assert_writes_refused(&db, &trees);
            fs.heal();
            // Still refused after the disk has room again, until resumed.
            assert_writes_refused(&db, &trees);
            assert_reads_match(&db, &trees, &model, "reads after a failed flush");
            db.resume().expect("resume after the disk has room again");
            let mut batch = WriteBatch::new();
            batch.put(&trees[2], b"after-resume", b"ok");
            db.write(batch, &WriteOptions { sync: true })
                .expect("writes work again after resume");
            model.insert((2, b"after-resume".to_vec()), b"ok".to_vec());
            db.flush().expect("flush after resume");
            assert_reads_match(&db, &trees, &model, "reads after resume");
            if rng.gen_bool(0.5) {
                fs.crash();
                drop(db);
            } else {
                let _ = db.close();
            }
            let db = Db::open(dir, small_options(&fs)).expect("reopen after failed flush");
            let trees = open_trees(&db).expect("trees");
            assert_reads_match(&db, &trees, &model, "after reopen");
            db.put(&trees[0], b"after-reopen", b"ok")
                .expect("writes work again after reopen");
            db.flush().expect("flush after reopen");
        });
    }
}

/// Disk full while a compaction writes its outputs: the compaction fails, later writes are
/// refused, reads keep working from the old files, and a reopen recovers everything.
#[test]
fn faults_disk_full_during_compaction_stops_writes_and_recovers() {
    for seed in seeds(2) {
        run_with_timeout("disk_full_during_compaction", seed, move || {
            let mut rng = StdRng::seed_from_u64(seed);
            let fs = FaultFileSystem::new();
            let dir = Path::new("/compaction-full");
            // Compaction only when asked for. Each open takes a fresh handle: handles made
            // before a simulated crash are dead.
            let options = |fs: &FaultFileSystem| Options {
                l0_compaction_trigger: 100,
                l0_slowdown_trigger: 100,
                l0_stop_trigger: 100,
                ..small_options(fs)
            };
            let db = Db::open(dir, options(&fs)).expect("open");
            let trees = open_trees(&db).expect("trees");
            let mut model = Model::new();
            for _ in 0..4 {
                fill(&db, &trees, &mut rng, 40, &mut model);
                db.flush().expect("flush");
            }
            let l0_files: usize = db
                .stats()
                .trees
                .iter()
                .map(|t| t.levels.first().map_or(0, |l| l.files))
                .sum();
            assert!(l0_files >= 4, "expected several L0 files, got {l0_files}");

            // Creating output tables fails (disk full at the first file, or later).
            fs.fail_from(FaultKind::Create, rng.gen_range(0..2));
            let tree = trees[rng.gen_range(0..trees.len())].clone();
            let result = db.compact_range(&tree, None, None);
            assert!(result.is_err(), "compaction with no space must fail");
            let error = result.err().map(|e| e.to_string()).unwrap_or_default();
            assert!(
                error.contains("injected fault"),
                "compaction error should carry the cause: {error}"
            );
            fs.heal();
            assert_reads_match(&db, &trees, &model, "reads after a failed compaction");
            // Writes may go on (a failed manual compaction changes nothing) or be refused with
            // Closed, but never be lost.
            match db.write(
                {
                    let mut b = WriteBatch::new();
                    b.put(&trees[2], b"late", b"write");
                    b
                },
                &WriteOptions { sync: true },
            ) {
                Ok(_) => {
                    model.insert((2, b"late".to_vec()), b"write".to_vec());
                }
                Err(Error::Closed(_)) => {}
                Err(e) => panic!("unexpected write error after a failed compaction: {e}"),
            }
            if rng.gen_bool(0.5) {
                fs.crash();
                drop(db);
            } else {
                let _ = db.close();
            }
            let db = Db::open(dir, options(&fs)).expect("reopen after failed compaction");
            let trees = open_trees(&db).expect("trees");
            assert_reads_match(&db, &trees, &model, "after reopen");
            db.compact_range(&trees[0], None, None)
                .expect("compaction works after reopen");
            assert_reads_match(&db, &trees, &model, "after compaction");
        });
    }
}

/// A background compaction (not a manual one) failing on a full disk stops writes with a
/// clear `Error::Closed`; reads keep working, and a reopen recovers everything.
#[test]
fn faults_background_compaction_failure_stops_writes() {
    for seed in seeds(2) {
        run_with_timeout("background_compaction_failure", seed, move || {
            let mut rng = StdRng::seed_from_u64(seed);
            let fs = FaultFileSystem::new();
            let dir = Path::new("/bg-compaction");
            let db = Db::open(dir, options_without_retries(&fs)).expect("open");
            let trees = open_trees(&db).expect("trees");
            let mut model = Model::new();
            // One tree only, so that each flush creates exactly one table.
            let mut put = |db: &Db, model: &mut Model, count: usize| {
                for _ in 0..count {
                    let key = format!("k{:04}", rng.gen_range(0..1000)).into_bytes();
                    let value = vec![b'a' + rng.gen_range(0..26u8); 60];
                    db.put(&trees[1], &key, &value).expect("put");
                    model.insert((1, key), value);
                }
            };
            put(&db, &mut model, 40);
            db.flush().expect("first flush");
            db.wait_for_background_work().expect("settle");
            put(&db, &mut model, 40);
            // The flush's new WAL and its table may be created; the compaction that the second
            // L0 table triggers (l0_compaction_trigger is 2) finds the disk full.
            fs.fail_from(FaultKind::Create, 2);
            // Under load the compaction can fail while this flush still waits; reporting the
            // background failure there is right too, as long as it carries the cause.
            match db.flush() {
                Ok(()) => {}
                Err(Error::Closed(message)) => assert!(
                    message.contains("injected fault"),
                    "the error should carry the cause: {message}"
                ),
                Err(other) => panic!("second flush: unexpected error {other:?}"),
            }
            match db.wait_for_background_work() {
                Err(Error::Closed(message)) => assert!(
                    message.contains("injected fault"),
                    "the error should carry the cause: {message}"
                ),
                other => panic!("the background compaction should have failed, got {other:?}"),
            }
            assert_writes_refused(&db, &trees);
            fs.heal();
            assert_reads_match(&db, &trees, &model, "reads after background failure");
            if rng.gen_bool(0.5) {
                fs.crash();
                drop(db);
            } else {
                let _ = db.close();
            }
            let db = Db::open(dir, small_options(&fs)).expect("reopen");
            let trees = open_trees(&db).expect("trees");
            assert_reads_match(&db, &trees, &model, "after reopen");
            db.wait_for_background_work()
                .expect("the compaction succeeds after reopen");
            assert_reads_match(&db, &trees, &model, "after compaction");
        });
    }
}

/// The `.wal` files of a database directory, oldest first, with their sizes.
fn wal_files(fs: &FaultFileSystem, dir: &Path) -> Vec<(String, u64)> {
    fs.file_names(dir)
        .into_iter()
        .filter(|n| n.ends_with(".wal"))
        .map(|n| {
            let size = fs.file_bytes(&dir.join(&n)).map_or(0, |b| b.len() as u64);
            (n, size)
        })
        .collect()
}

/// Regression: a memtable switch creates the next WAL (and syncs the directory) before it
/// syncs the current one. When that sync fails, the switch is abandoned but the new, empty WAL
/// stays on disk. After power loss tears the unsynced tail of the older log, recovery saw
/// "damage followed by newer logs" and refused to open (`Error::Corruption`), though the only
/// newer log held nothing: the damage is a torn tail. Automatic retries are off: a retry of
/// the failed flush after healing would flush the older log's writes and delete it.
#[test]
fn faults_failed_wal_switch_then_torn_tail_still_opens() {
    let fs = FaultFileSystem::new();
    let dir = Path::new("/failed-switch");
    let options = Options {
        background_error_retry_interval_max_millis: 0,
        ..small_options(&fs)
    };
    let db = Db::open(dir, options).expect("open");
    let trees = open_trees(&db).expect("trees");
    let mut model = Model::new();
    let mut batch = WriteBatch::new();
    batch.put(&trees[0], b"synced", b"durable");
    db.write(batch, &WriteOptions { sync: true })
        .expect("synced write");
    model.insert((0, b"synced".to_vec()), b"durable".to_vec());
    for i in 0..5 {
        // Acknowledged but not synced: may be lost, nothing more.
        db.put(&trees[1], format!("unsynced{i}").as_bytes(), &[b'u'; 100])
            .expect("unsynced write");
    }
    fs.fail_always(FaultKind::Sync);
    assert!(
        db.flush().is_err(),
        "the switch must fail when the old WAL cannot be synced"
    );
    // Close before healing: a flush of the switched-out memtable that began before the sync
    // failed could otherwise finish after the heal, make the older log's writes durable in a
    // table and delete that log, leaving no torn tail to test.
    let _ = db.close();
    fs.heal();
    let wals = wal_files(&fs, dir);
    assert!(
        wals.len() >= 2 && wals.last().is_some_and(|(_, size)| *size == 0),
        "expected an empty WAL left by the failed switch: {wals:?}"
    );
    // Power loss tore the last unsynced record of the older log (cut it directly, so the
    // test does not depend on where a simulated torn write ends).
    let (older, size) = wals
        .iter()
        .rev()
        .find(|(_, size)| *size > 0)
        .cloned()
        .expect("a WAL with data");
    fs.truncate(&dir.join(&older), size - 40).expect("tear");
    let db = Db::open(dir, small_options(&fs)).expect("a torn tail followed by empty logs opens");
    let trees = open_trees(&db).expect("trees");
    assert_eq!(
        db.get(&trees[0], b"synced").expect("get").map(|e| e.value),
        Some(b"durable".to_vec())
    );
    // Whatever survived of the unsynced writes is a prefix of them.
    let survivors: Vec<bool> = (0..5)
        .map(|i| {
            db.get(&trees[1], format!("unsynced{i}").as_bytes())
                .expect("get")
                .is_some()
        })
        .collect();
    assert!(
        survivors.windows(2).all(|w| w[0] || !w[1]),
        "surviving unsynced writes must be a prefix: {survivors:?}"
    );
}

/// Several threads commit synced writes (so the write path forms groups) while writes, syncs
/// and file creations fail at random: after healing and a crash, every acknowledged write is
/// there with its value, and nothing appears that was never written.
#[test]
fn faults_concurrent_synced_writers_lose_nothing_acknowledged() {
    for seed in seeds(3) {
        run_with_timeout("concurrent_writers", seed, move || {
            let mut rng = StdRng::seed_from_u64(seed);
            let fs = FaultFileSystem::new();
            let dir = Path::new("/concurrent-faults");
            let db = Arc::new(Db::open(dir, small_options(&fs)).expect("open"));
            let trees = open_trees(&db).expect("trees");
            for kind in [FaultKind::Write, FaultKind::Sync, FaultKind::Create] {
                if rng.gen_bool(0.6) {
                    fs.fail_randomly(kind, rng.gen_range(0.0005..0.01), rng.gen());
                }
            }
            let writers: Vec<_> = (0..4)
                .map(|thread| {
                    let db = Arc::clone(&db);
                    let trees = trees.clone();
                    std::thread::spawn(move || {
                        let mut outcomes = Vec::new();
                        for i in 0..250 {
                            let t = i % trees.len();
                            let key = format!("t{thread}-{i:04}").into_bytes();
                            let value = vec![b'a' + (i % 26) as u8; 20 + i % 200];
                            let mut batch = WriteBatch::new();
                            batch.put(&trees[t], &key, &value);
                            let acked = db.write(batch, &WriteOptions { sync: true }).is_ok();
                            outcomes.push((t, key, value, acked));
                        }
                        outcomes
                    })
                })
                .collect();
            let outcomes: Vec<_> = writers
                .into_iter()
                .flat_map(|w| w.join().expect("writer thread"))
                .collect();
            let acked = outcomes.iter().filter(|o| o.3).count();
            if std::env::var_os("SIFT_TRACE").is_some() {
                eprintln!(
                    "concurrent writers: {acked} of {} acknowledged",
                    outcomes.len()
                );
            }
            fs.heal();
            if rng.gen_bool(0.5) {
                fs.crash();
            } else {
                fs.crash_with_torn_writes(rng.gen());
            }
            drop(db);
            let db = Db::open(dir, small_options(&fs)).expect("reopen");
            let trees = open_trees(&db).expect("trees");
            let actual = read_all(&db, &trees);
            let mut attempted = Model::new();
            for (t, key, value, acked) in &outcomes {
                attempted.insert((*t, key.clone()), value.clone());
                if *acked {
                    assert_eq!(
                        actual.get(&(*t, key.clone())),
                        Some(value),
                        "acknowledged synced write {} lost",
                        String::from_utf8_lossy(key)
                    );
                }
            }
            for (key, value) in &actual {
                assert_eq!(
                    attempted.get(key),
                    Some(value),
                    "{key:?} was never written with this value"
                );
            }
        });
    }
}

/// `Db::sync_wal` makes every write acknowledged before it durable, whether its record is in
/// a log closed by a memtable switch or in the active log (`sift serve --fsync everysec`
/// calls it once a second). Without the call the unsynced records are cut by the crash.
#[test]
fn faults_sync_wal_makes_earlier_unsynced_writes_survive_power_loss() {
    for seed in seeds(2) {
        run_with_timeout("sync_wal", seed, move || {
            let mut rng = StdRng::seed_from_u64(seed);
            let fs = FaultFileSystem::new();
            let dir = Path::new("/sync-wal");
            let db = Db::open(dir, small_options(&fs)).expect("open");
            let trees = open_trees(&db).expect("trees");
            let mut model = Model::new();
            // About 90 KB of records over 8 KiB memtables: many switches, many closed logs.
            for i in 0..400 {
                let t = rng.gen_range(0..trees.len());
                let key = format!("unsynced{:05}", rng.gen_range(0..3000)).into_bytes();
                let value = vec![b'a' + (i % 26) as u8; rng.gen_range(50..400)];
                let mut batch = WriteBatch::new();
                batch.put(&trees[t], &key, &value);
                db.write(batch, &WriteOptions::default())
                    .expect("unsynced write");
                model.insert((t, key), value);
            }
            db.sync_wal().expect("sync_wal");
            fs.crash();
            drop(db);
            let db = Db::open(dir, small_options(&fs)).expect("reopen after power loss");
            let trees = open_trees(&db).expect("trees");
            assert_reads_match(&db, &trees, &model, "after power loss following sync_wal");
        });
    }
}
