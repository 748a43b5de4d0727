//! Real process crashes: the test re-executes its own binary as a writer child, kills it with
//! SIGKILL at a random moment, reopens the database and checks that every acknowledged batch
//! survived, that no batch is half visible, and that the recovered state is exactly the state
//! after some prefix of the batches.
//!
//! The child runs `crash_child_writer` with `SIFT_CRASH_CHILD_DIR` set. It continues from
//! whatever batch the recovered database ends at, so later iterations recover databases that
//! were themselves recovered (or were killed while recovering).
//!
//! `SIFT_SEED` replays a run; `SIFT_CRASH_ITERATIONS` sets the number of kills.

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use sift_lsm::{Db, Options, ReadOptions, Tree, TreeOptions, WriteBatch, WriteOptions};
use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const CHILD_DIR_ENV: &str = "SIFT_CRASH_CHILD_DIR";
const CHILD_TEST_NAME: &str = "crash_child_writer";
const ACK_FILE_NAME: &str = "acknowledged";
const TREE_NAMES: [&str; 2] = ["a", "b"];
/// The key holding the number of the last batch applied, in both trees.
const LAST_KEY: &[u8] = b"~last";
/// A child that is never killed stops by itself after this long.
const CHILD_LIFETIME_MAX: Duration = Duration::from_mins(2);

/// Small memtables and tables so that flushes and compactions run during every child's life.
fn options() -> Options {
    Options {
        memtable_bytes_max: 16 << 10,
        table_file_bytes_target: 8 << 10,
        l0_compaction_trigger: 2,
        l0_slowdown_trigger: 8,
        l0_stop_trigger: 12,
        level1_bytes_max: 32 << 10,
        level_size_ratio: 4,
        block_bytes: 512,
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

/// The operations of batch `i` on one tree; the same for both trees except the values, so a
/// batch visible in one tree and not the other is caught.
#[derive(Debug)]
enum Op {
    Put(Vec<u8>, Vec<u8>),
    Delete(Vec<u8>),
}

fn batch_ops(i: u64, tree: usize) -> Vec<Op> {
    let value = |salt: u64| -> Vec<u8> {
        let len = 20 + ((i * 37 + salt * 11) % 180) as usize;
        let fill = format!("{tree}:{i}:{salt}|");
        fill.bytes().cycle().take(len).collect()
    };
    let mut ops = vec![
        Op::Put(format!("b{i:08}").into_bytes(), value(0)),
        // A small set of hot keys overwritten again and again.
        Op::Put(format!("hot{:02}", i % 23).into_bytes(), value(1)),
    ];
    if i.is_multiple_of(3) && i >= 7 {
        ops.push(Op::Delete(format!("b{:08}", i - 7).into_bytes()));
    }
    if i.is_multiple_of(5) {
        ops.push(Op::Delete(format!("hot{:02}", (i / 5) % 23).into_bytes()));
    }
    ops.push(Op::Put(LAST_KEY.to_vec(), i.to_string().into_bytes()));
    ops
}

type TreeModel = BTreeMap<Vec<u8>, Vec<u8>>;

fn apply_batch(models: &mut [TreeModel], i: u64) {
    for (tree, model) in models.iter_mut().enumerate() {
        for op in batch_ops(i, tree) {
            match op {
                Op::Put(k, v) => {
                    model.insert(k, v);
                }
                Op::Delete(k) => {
                    model.remove(&k);
                }
            }
        }
    }
}

fn scan(db: &Db, tree: &Tree) -> TreeModel {
    let mut iter = db.iter(tree, ReadOptions::default()).expect("iter");
    iter.seek_to_first().expect("seek");
    let mut out = TreeModel::new();
    while iter.valid() {
        out.insert(iter.key().to_vec(), iter.value().to_vec());
        iter.next().expect("next");
    }
    out
}

/// The number of the last batch applied, as recorded in one tree.
fn last_batch(model: &TreeModel) -> Option<u64> {
    model.get(LAST_KEY).map(|v| {
        std::str::from_utf8(v)
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| panic!("{LAST_KEY:?} holds {v:?}, not a batch number"))
    })
}

/// The writer. Does nothing unless started by `crash_kill_loop_recovers_acknowledged_batches`.
#[test]
fn crash_child_writer() {
    let Some(dir) = std::env::var_os(CHILD_DIR_ENV) else {
        return;
    };
    let dir = PathBuf::from(dir);
    let db_dir = dir.join("db");
    let db = Db::open(&db_dir, options()).expect("child: open");
    let trees = open_trees(&db);
    let first = last_batch(&scan(&db, &trees[0])).map_or(0, |last| last + 1);
    let mut acknowledged = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.join(ACK_FILE_NAME))
        .expect("child: ack file");
    let started = Instant::now();
    for i in first.. {
        if started.elapsed() > CHILD_LIFETIME_MAX {
            break;
        }
        let mut batch = WriteBatch::new();
        for (t, tree) in trees.iter().enumerate() {
            for op in batch_ops(i, t) {
                match op {
                    Op::Put(k, v) => batch.put(tree, &k, &v),
                    Op::Delete(k) => batch.delete(tree, &k),
                }
            }
        }
        db.write(batch, &WriteOptions { sync: true })
            .unwrap_or_else(|e| panic!("child: write of batch {i} failed: {e}"));
        // One write(2) per line: a SIGKILL cannot tear it and the page cache keeps it, so the
        // file needs no fsync (the test kills processes, not machines).
        acknowledged
            .write_all(format!("{i}\n").as_bytes())
            .expect("child: ack");
    }
}

fn iterations() -> usize {
    std::env::var("SIFT_CRASH_ITERATIONS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(30)
}

fn seed() -> u64 {
    match std::env::var("SIFT_SEED") {
        Ok(s) => s.parse().expect("SIFT_SEED must be a number"),
        Err(_) => rand::random(),
    }
}

/// The highest batch number the child acknowledged so far.
fn acknowledged_max(dir: &Path) -> Option<u64> {
    let text = std::fs::read_to_string(dir.join(ACK_FILE_NAME)).unwrap_or_default();
    text.lines().filter_map(|l| l.parse::<u64>().ok()).max()
}

/// Checks the reopened database against the model of batches `0..=k`, where `k` is the last
/// batch it holds; extends `models` (the state after `applied` batches) to match. Returns `k`.
fn verify(db_dir: &Path, models: &mut [TreeModel], applied: &mut u64) -> Option<u64> {
    let db = Db::open(db_dir, options()).expect("parent: reopen after kill");
    let trees = open_trees(&db);
    let states: Vec<TreeModel> = trees.iter().map(|t| scan(&db, t)).collect();
    let last: Vec<Option<u64>> = states.iter().map(last_batch).collect();
    assert!(
        last.iter().all(|l| *l == last[0]),
        "trees disagree on the last batch: {last:?} (a batch is half visible)"
    );
    let last = last[0];
    let wanted = last.map_or(0, |k| k + 1);
    assert!(
        wanted >= *applied,
        "recovered state ends at batch {last:?}, but batches 0..{applied} were recovered before"
    );
    while *applied < wanted {
        apply_batch(models, *applied);
        *applied += 1;
    }
    for (t, (got, want)) in states.iter().zip(models.iter()).enumerate() {
        if got != want {
            let difference = got
                .iter()
                .zip(want.iter())
                .find(|(g, w)| g != w)
                .map(|(g, w)| {
                    format!(
                        "got {:?}, expected {:?}",
                        String::from_utf8_lossy(g.0),
                        String::from_utf8_lossy(w.0)
                    )
                });
            panic!(
                "tree {}: recovered state ({} keys) is not the state after batches 0..={last:?} \
                 ({} keys); first difference: {difference:?}",
                TREE_NAMES[t],
                got.len(),
                want.len()
            );
        }
    }
    // Point reads agree with the scan (they take a different path through the tables).
    for (t, tree) in trees.iter().enumerate() {
        for (k, v) in models[t].iter().take(50) {
            let got = db.get(tree, k).expect("get").map(|e| e.value);
            assert_eq!(
                got.as_ref(),
                Some(v),
                "get {:?}",
                String::from_utf8_lossy(k)
            );
        }
    }
    db.close().expect("parent: close");
    last
}

fn run(seed: u64) {
    let mut rng = StdRng::seed_from_u64(seed);
    let dir = tempfile::tempdir().expect("temp dir");
    let db_dir = dir.path().join("db");
    let executable = std::env::current_exe().expect("current_exe");
    let mut models = vec![TreeModel::new(); TREE_NAMES.len()];
    let mut applied = 0u64;
    let mut kills_while_writing = 0;
    for iteration in 0..iterations() {
        let stderr_path = dir.path().join("child.stderr");
        let stderr = std::fs::File::create(&stderr_path).expect("stderr file");
        let mut child = Command::new(&executable)
            .args([
                CHILD_TEST_NAME,
                "--exact",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(CHILD_DIR_ENV, dir.path())
            .stdout(Stdio::null())
            .stderr(stderr)
            .spawn()
            .expect("spawn child");
        // Mostly long enough for many batches, flushes and compactions; sometimes so short
        // that the child dies while opening (recovering) the database.
        let delay_ms = if rng.gen_bool(0.15) {
            rng.gen_range(0..15)
        } else {
            rng.gen_range(30..300)
        };
        std::thread::sleep(Duration::from_millis(delay_ms));
        if let Some(status) = child.try_wait().expect("try_wait") {
            let stderr = std::fs::read_to_string(&stderr_path).unwrap_or_default();
            panic!("iteration {iteration}: the child exited by itself ({status}):\n{stderr}");
        }
        child.kill().expect("SIGKILL");
        child.wait().expect("wait");
        let acknowledged = acknowledged_max(dir.path());
        let before = applied;
        let last = verify(&db_dir, &mut models, &mut applied);
        if let Some(acked) = acknowledged {
            assert!(
                last.is_some_and(|k| k >= acked),
                "iteration {iteration}: batch {acked} was acknowledged but the database ends at \
                 {last:?}"
            );
        }
        if applied > before {
            kills_while_writing += 1;
        }
    }
    // The run must have exercised flushes and compactions, not just WAL replay.
    let db = Db::open(&db_dir, options()).expect("final open");
    let stats = db.stats();
    let deep_files: usize = stats
        .trees
        .iter()
        .flat_map(|t| t.levels.iter().skip(1))
        .map(|l| l.files)
        .sum();
    drop(db);
    assert!(
        applied < 2000 || deep_files > 0,
        "{applied} batches but no table below L0: {stats:?}"
    );
    eprintln!(
        "crash test: {} iterations, {kills_while_writing} killed while writing, {applied} batches",
        iterations()
    );
    assert!(
        iterations() < 5 || kills_while_writing * 2 >= iterations(),
        "most children should get to write before being killed ({kills_while_writing})"
    );
}

#[test]
fn crash_kill_loop_recovers_acknowledged_batches() {
    if std::env::var_os(CHILD_DIR_ENV).is_some() {
        return; // inside a child
    }
    let seed = seed();
    eprintln!("crash test seed {seed} (replay with SIFT_SEED={seed})");
    let result = std::panic::catch_unwind(|| run(seed));
    if let Err(e) = result {
        eprintln!("crash test failed with seed {seed}: replay with SIFT_SEED={seed}");
        std::panic::resume_unwind(e);
    }
}
