//! Model test: long randomized sequences of operations checked step by step against a
//! `BTreeMap` model, with flushes, compactions, snapshots, reopens and simulated power loss.
//!
//! Seeded and reproducible: a failure prints its seed; `SIFT_SEED=<n>` replays it and
//! `SIFT_MODEL_STEPS=<n>` sets the number of steps per seed (default short).

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use sift_lsm::extension::MergeOperator;
use sift_lsm::fs::FaultFileSystem;
use sift_lsm::{
    Compression, Db, Options, ReadOptions, Snapshot, Tree, TreeOptions, WriteBatch, WriteOptions,
};
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

type Model = BTreeMap<(usize, Vec<u8>), Vec<u8>>;

/// Appends operands with ',' (to an existing value if any).
struct Append;

impl MergeOperator for Append {
    fn name(&self) -> &'static str {
        "append"
    }
    fn full_merge(
        &self,
        _key: &[u8],
        existing: Option<&[u8]>,
        operands: &[&[u8]],
    ) -> Result<Vec<u8>, String> {
        let mut out = existing.map(<[u8]>::to_vec).unwrap_or_default();
        for op in operands {
            if !out.is_empty() {
                out.push(b',');
            }
            out.extend_from_slice(op);
        }
        Ok(out)
    }
    fn partial_merge(&self, _key: &[u8], operands: &[&[u8]]) -> Option<Vec<u8>> {
        Some(operands.join(&b","[..]))
    }
}

const TREES: [&str; 3] = ["default", "alpha", "merged"];

#[derive(Clone, Debug)]
enum Op {
    Put(usize, Vec<u8>, Vec<u8>),
    Delete(usize, Vec<u8>),
    Merge(usize, Vec<u8>, Vec<u8>),
}

fn apply(model: &mut Model, op: &Op) {
    match op {
        Op::Put(t, k, v) => {
            model.insert((*t, k.clone()), v.clone());
        }
        Op::Delete(t, k) => {
            model.remove(&(*t, k.clone()));
        }
        Op::Merge(t, k, v) => {
            let entry = model.entry((*t, k.clone())).or_default();
            if !entry.is_empty() {
                entry.push(b',');
            }
            entry.extend_from_slice(v);
        }
    }
}

/// Compares two key-value listings and reports the first difference readably.
fn assert_same(got: &[(Vec<u8>, Vec<u8>)], want: &[(Vec<u8>, Vec<u8>)], context: &str) {
    if got == want {
        return;
    }
    let show = |e: Option<&(Vec<u8>, Vec<u8>)>| {
        e.map(|(k, v)| {
            format!(
                "{:?} => {} bytes {:?}",
                String::from_utf8_lossy(k),
                v.len(),
                String::from_utf8_lossy(&v[..v.len().min(24)])
            )
        })
    };
    let i = got
        .iter()
        .zip(want)
        .position(|(g, w)| g != w)
        .unwrap_or(got.len().min(want.len()));
    panic!(
        "{context}: {} entries, expected {}; first difference at {i}: got {:?}, expected {:?}",
        got.len(),
        want.len(),
        show(got.get(i)),
        show(want.get(i))
    );
}

fn options(fs: &FaultFileSystem, rng: &mut StdRng) -> Options {
    let mut tree_options = std::collections::HashMap::new();
    tree_options.insert(
        "merged".to_owned(),
        TreeOptions {
            merge_operator: Some(Arc::new(Append)),
            ..TreeOptions::default()
        },
    );
    Options {
        file_system: Arc::new(fs.clone()),
        memtable_bytes_max: rng.gen_range(4 << 10..32 << 10),
        l0_compaction_trigger: rng.gen_range(2..5),
        l0_slowdown_trigger: 8,
        l0_stop_trigger: 12,
        level1_bytes_max: 32 << 10,
        level_size_ratio: 4,
        table_file_bytes_target: rng.gen_range(4 << 10..16 << 10),
        block_bytes: [128, 512, 4096][rng.gen_range(0..3)],
        block_restart_interval: rng.gen_range(1..17),
        bloom_bits_per_key: [0, 10][rng.gen_range(0..2)],
        compression: [Compression::None, Compression::Snappy, Compression::Lz4]
            [rng.gen_range(0..3)],
        block_cache_bytes: [0, 1 << 20][rng.gen_range(0..2)],
        compaction_threads: rng.gen_range(1..4),
        compaction_prefer_tombstones: rng.gen_bool(0.5),
        tree_options,
        ..Options::default()
    }
}

struct Harness {
    rng: StdRng,
    fs: FaultFileSystem,
    dir: &'static Path,
    db: Option<Db>,
    trees: Vec<Tree>,
    /// State including every acknowledged write.
    model: Model,
    /// State at the last synced write, and the acknowledged writes since (each a batch).
    durable: Model,
    since_durable: Vec<Vec<Op>>,
    snapshots: Vec<(Snapshot, Model)>,
    opts: Options,
    /// Background work seen over all incarnations, so the test can show it exercised them.
    flushes: u64,
    compactions: u64,
}

impl Harness {
    fn new(seed: u64) -> Self {
        let mut rng = StdRng::seed_from_u64(seed);
        let fs = FaultFileSystem::new();
        let opts = options(&fs, &mut rng);
        let mut h = Harness {
            rng,
            fs,
            dir: Path::new("/model-db"),
            db: None,
            trees: Vec::new(),
            model: Model::new(),
            durable: Model::new(),
            since_durable: Vec::new(),
            snapshots: Vec::new(),
            opts,
            flushes: 0,
            compactions: 0,
        };
        h.open();
        h
    }

    fn db(&self) -> &Db {
        self.db.as_ref().expect("open")
    }

    fn open(&mut self) {
        // Handles made before a simulated crash are dead; every open takes a fresh one.
        self.opts.file_system = Arc::new(self.fs.clone());
        let db = Db::open(self.dir, self.opts.clone()).expect("open");
        self.trees = TREES
            .iter()
            .map(|name| {
                db.tree(name).or_else(|_| {
                    let tree_options = self
                        .opts
                        .tree_options
                        .get(*name)
                        .cloned()
                        .unwrap_or_default();
                    db.create_tree(name, tree_options)
                })
            })
            .collect::<Result<_, _>>()
            .expect("trees");
        self.db = Some(db);
    }

    fn key(&mut self) -> Vec<u8> {
        let n = self.rng.gen_range(0..200u32);
        // Varied lengths, shared prefixes, and the empty key.
        match n {
            0 => Vec::new(),
            1..=150 => format!("key{:04}", n * 7 % 150).into_bytes(),
            _ => format!("k{n}").repeat(1 + n as usize % 3).into_bytes(),
        }
    }

    fn value(&mut self) -> Vec<u8> {
        let len = if self.rng.gen_bool(0.05) {
            self.rng.gen_range(500..3000)
        } else {
            self.rng.gen_range(0..40)
        };
        (0..len)
            .map(|i| b'a' + ((i * 7 + len) % 26) as u8)
            .collect()
    }

    fn random_op(&mut self) -> Op {
        let tree = self.rng.gen_range(0..TREES.len());
        let key = self.key();
        if tree == 2 && self.rng.gen_bool(0.6) {
            let v = format!("m{}", self.rng.gen_range(0..100)).into_bytes();
            return Op::Merge(tree, key, v);
        }
        if self.rng.gen_bool(0.25) {
            Op::Delete(tree, key)
        } else {
            let v = self.value();
            Op::Put(tree, key, v)
        }
    }

    fn write(&mut self, ops: Vec<Op>) {
        let sync = self.rng.gen_bool(0.1);
        if std::env::var_os("SIFT_TRACE").is_some() {
            eprintln!("  write sync={sync} {ops:?}");
        }
        let mut batch = WriteBatch::new();
        for op in &ops {
            match op {
                Op::Put(t, k, v) => batch.put(&self.trees[*t], k, v),
                Op::Delete(t, k) => batch.delete(&self.trees[*t], k),
                Op::Merge(t, k, v) => batch.merge(&self.trees[*t], k, v),
            }
        }
        let before = self.db().latest_sequence();
        let seq = self
            .db()
            .write(batch, &WriteOptions { sync })
            .expect("write");
        assert!(
            seq > before,
            "sequence numbers must increase: {seq} after {before}"
        );
        for op in &ops {
            apply(&mut self.model, op);
        }
        if sync {
            self.durable = self.model.clone();
            self.since_durable.clear();
        } else {
            self.since_durable.push(ops);
        }
    }

    fn check_get(&mut self) {
        let tree = self.rng.gen_range(0..TREES.len());
        let key = self.key();
        let got = self
            .db()
            .get(&self.trees[tree], &key)
            .expect("get")
            .map(|e| e.value);
        assert_eq!(
            got,
            self.model.get(&(tree, key.clone())).cloned(),
            "get {:?} in {}",
            String::from_utf8_lossy(&key),
            TREES[tree]
        );
    }

    fn scan(db: &Db, tree: &Tree, options: ReadOptions, reverse: bool) -> Vec<(Vec<u8>, Vec<u8>)> {
        let mut iter = db.iter(tree, options).expect("iter");
        let mut out = Vec::new();
        if reverse {
            iter.seek_to_last().expect("seek");
        } else {
            iter.seek_to_first().expect("seek");
        }
        while iter.valid() {
            out.push((iter.key().to_vec(), iter.value().to_vec()));
            if reverse {
                iter.prev().expect("prev");
            } else {
                iter.next().expect("next");
            }
        }
        if reverse {
            out.reverse();
        }
        out
    }

    fn expected(
        model: &Model,
        tree: usize,
        lo: Option<&[u8]>,
        hi: Option<&[u8]>,
    ) -> Vec<(Vec<u8>, Vec<u8>)> {
        model
            .iter()
            .filter(|((t, k), _)| {
                *t == tree
                    && lo.is_none_or(|l| k.as_slice() >= l)
                    && hi.is_none_or(|h| k.as_slice() < h)
            })
            .map(|((_, k), v)| (k.clone(), v.clone()))
            .collect()
    }

    fn check_scan(&mut self) {
        let tree = self.rng.gen_range(0..TREES.len());
        let (lo, hi) = if self.rng.gen_bool(0.5) {
            let a = self.key();
            let b = self.key();
            let (a, b) = if a <= b { (a, b) } else { (b, a) };
            (Some(a), Some(b))
        } else {
            (None, None)
        };
        let reverse = self.rng.gen_bool(0.5);
        let (options, model) = if !self.snapshots.is_empty() && self.rng.gen_bool(0.3) {
            let i = self.rng.gen_range(0..self.snapshots.len());
            let (s, m) = &self.snapshots[i];
            (
                ReadOptions {
                    snapshot: Some(s.clone()),
                    ..ReadOptions::default()
                },
                m.clone(),
            )
        } else {
            (ReadOptions::default(), self.model.clone())
        };
        let options = ReadOptions {
            lower_bound: lo.clone(),
            upper_bound: hi.clone(),
            ..options
        };
        let got = Self::scan(self.db(), &self.trees[tree], options, reverse);
        let want = Self::expected(&model, tree, lo.as_deref(), hi.as_deref());
        assert_same(
            &got,
            &want,
            &format!(
                "scan of {} reverse={reverse} bounds={lo:?}..{hi:?}",
                TREES[tree]
            ),
        );
    }

    fn check_snapshot_gets(&mut self) {
        if self.snapshots.is_empty() {
            return;
        }
        let i = self.rng.gen_range(0..self.snapshots.len());
        let tree = self.rng.gen_range(0..TREES.len());
        let key = self.key();
        let (snapshot, model) = &self.snapshots[i];
        let options = ReadOptions {
            snapshot: Some(snapshot.clone()),
            ..ReadOptions::default()
        };
        let got = self
            .db()
            .get_with(&self.trees[tree], &key, &options)
            .expect("get")
            .map(|e| e.value);
        assert_eq!(
            got,
            model.get(&(tree, key.clone())).cloned(),
            "snapshot get"
        );
    }

    fn check_all(&self) {
        for (t, tree) in self.trees.iter().enumerate() {
            let got = Self::scan(self.db(), tree, ReadOptions::default(), false);
            assert_same(
                &got,
                &Self::expected(&self.model, t, None, None),
                &format!("full scan of {}", TREES[t]),
            );
        }
    }

    fn count_background_work(&mut self) {
        let stats = self.db().stats();
        self.flushes += stats.flushes;
        self.compactions += stats.compactions;
    }

    fn reopen(&mut self) {
        self.count_background_work();
        self.snapshots.clear();
        self.db.take().expect("open").close().expect("close");
        self.durable = self.model.clone();
        self.since_durable.clear();
        self.open();
        self.check_all();
    }

    /// Power loss: unsynced bytes vanish. The recovered state must be the state after some
    /// prefix of the acknowledged writes that includes every synced one.
    fn crash(&mut self) {
        self.count_background_work();
        self.snapshots.clear();
        self.fs.crash();
        drop(self.db.take());
        self.open();
        let mut candidate = self.durable.clone();
        let mut candidates = vec![candidate.clone()];
        for ops in &self.since_durable {
            for op in ops {
                apply(&mut candidate, op);
            }
            candidates.push(candidate.clone());
        }
        let mut actual = Model::new();
        for (t, tree) in self.trees.iter().enumerate() {
            for (k, v) in Self::scan(self.db(), tree, ReadOptions::default(), false) {
                actual.insert((t, k), v);
            }
        }
        let Some(prefix) = candidates.iter().rposition(|c| *c == actual) else {
            panic!(
                "after a crash the database matches no prefix of the acknowledged writes ({} unsynced batches)",
                self.since_durable.len()
            );
        };
        self.model = candidates.swap_remove(prefix);
        self.durable = self.model.clone();
        self.since_durable.clear();
    }

    fn step(&mut self) {
        let choice = self.rng.gen_range(0..1000);
        if std::env::var_os("SIFT_TRACE").is_some() {
            eprintln!("step {choice} seq={}", self.db().latest_sequence());
        }
        match choice {
            0..=399 => {
                let op = self.random_op();
                self.write(vec![op]);
            }
            400..=499 => {
                let n = self.rng.gen_range(1..8);
                let ops = (0..n).map(|_| self.random_op()).collect();
                self.write(ops);
            }
            500..=649 => self.check_get(),
            650..=719 => self.check_scan(),
            720..=759 => self.check_snapshot_gets(),
            760..=789 => {
                if self.snapshots.len() < 4 {
                    let s = self.db().snapshot();
                    self.snapshots.push((s, self.model.clone()));
                } else {
                    let i = self.rng.gen_range(0..self.snapshots.len());
                    self.snapshots.swap_remove(i);
                }
            }
            790..=849 => self.db().flush().expect("flush"),
            850..=879 => {
                let tree = self.rng.gen_range(0..TREES.len());
                let (a, b) = (self.key(), self.key());
                let (a, b) = if a <= b { (a, b) } else { (b, a) };
                let t = self.trees[tree].clone();
                if self.rng.gen_bool(0.5) {
                    self.db()
                        .compact_range(&t, Some(&a), Some(&b))
                        .expect("compact");
                } else {
                    self.db().compact_range(&t, None, None).expect("compact");
                }
            }
            880..=899 => self.db().wait_for_background_work().expect("wait"),
            900..=919 => self.reopen(),
            920..=939 => self.crash(),
            _ => self.check_all(),
        }
    }
}

fn seeds() -> Vec<u64> {
    if let Ok(s) = std::env::var("SIFT_SEED") {
        return vec![s.parse().expect("SIFT_SEED must be a number")];
    }
    let base: u64 = rand::random();
    (0..4).map(|i| base.wrapping_add(i)).collect()
}

fn steps() -> usize {
    std::env::var("SIFT_MODEL_STEPS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1500)
}

#[test]
fn model_randomized_operations_match_btreemap() {
    for seed in seeds() {
        let result = std::panic::catch_unwind(|| {
            let mut h = Harness::new(seed);
            for _ in 0..steps() {
                h.step();
            }
            h.check_all();
            h.reopen();
            h.count_background_work();
            if steps() >= 1000 {
                assert!(
                    h.flushes > 0 && h.compactions > 0,
                    "no background work: {} flushes, {} compactions",
                    h.flushes,
                    h.compactions
                );
            }
        });
        if let Err(e) = result {
            eprintln!("model test failed with seed {seed}: replay with SIFT_SEED={seed}");
            std::panic::resume_unwind(e);
        }
    }
}
