//! Concurrency: writer threads (puts, deletes, cross-tree batches on overlapping keys) race
//! reader threads (gets, iterators, snapshot reads) while small memtables keep flushes and
//! compactions running; then group commit with many synchronous writers.
//!
//! Every value names its writer, its counter and its key, so a reader can tell a value that
//! was really written from a torn or misplaced one. Seeded: a failure prints its seed, and
//! `SIFT_SEED=<n>` replays the per-thread operation streams (thread timing still varies).

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use sift_lsm::extension::{CompactionObserver, DroppedEntry, JobKind};
use sift_lsm::{Db, Options, ReadOptions, SeqNo, Tree, TreeOptions, WriteBatch, WriteOptions};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::atomic::{AtomicU32, AtomicU64};
use std::sync::{Arc, Barrier};
use std::time::Instant;

const TREES: [&str; 2] = ["default", "second"];
const KEYS: usize = 64;
/// Keys written only in pairs, one in each tree, by one batch with one value.
const PAIRS: usize = 8;
const WRITERS: usize = 4;
const READERS: usize = 3;
const OPS_PER_WRITER: usize = 6000;

fn seed() -> u64 {
    std::env::var("SIFT_SEED")
        .ok()
        .map_or(0xc0c0, |s| s.parse().expect("SIFT_SEED must be a number"))
}

fn key(i: usize) -> Vec<u8> {
    format!("key{i:03}").into_bytes()
}

fn pair_key(i: usize) -> Vec<u8> {
    format!("pair{i:02}").into_bytes()
}

/// `<key>|w<writer>|c<counter>|` plus padding: which key, which writer, which write.
fn value(key: &[u8], writer: usize, counter: usize, padding: usize) -> Vec<u8> {
    let mut v = key.to_vec();
    v.extend_from_slice(format!("|w{writer}|c{counter}|").as_bytes());
    v.extend(std::iter::repeat_n(b'.', padding));
    v
}

fn show(bytes: &[u8]) -> String {
    String::from_utf8_lossy(&bytes[..bytes.len().min(40)]).into_owned()
}

/// Logs every dropped entry of the data trees into tree `log`, so that flushes and
/// compactions commit writes through the write queue while writers stall.
struct DropLog {
    log: AtomicU32,
    reports: AtomicU64,
}

impl CompactionObserver for DropLog {
    fn on_drop(&self, _job: JobKind, entry: &DroppedEntry<'_>, emit: &mut WriteBatch) {
        let log = self.log.load(Ordering::SeqCst);
        if entry.tree == log {
            return;
        }
        self.reports.fetch_add(1, Ordering::Relaxed);
        let mut k = format!("{}/", entry.tree).into_bytes();
        k.extend_from_slice(entry.user_key);
        k.extend_from_slice(format!("/{:020}", entry.seq).as_bytes());
        emit.put_in(log, &k, b"");
    }
}

fn options() -> Options {
    Options {
        memtable_bytes_max: 32 << 10,
        l0_compaction_trigger: 2,
        l0_slowdown_trigger: 6,
        l0_stop_trigger: 10,
        level1_bytes_max: 64 << 10,
        level_size_ratio: 4,
        table_file_bytes_target: 16 << 10,
        block_bytes: 1024,
        block_cache_bytes: 1 << 20,
        ..Options::default()
    }
}

/// One entry a writer wrote: tree index, key, sequence number, value (`None`: delete).
type Written = (usize, Vec<u8>, SeqNo, Option<Vec<u8>>);

fn writer(db: &Db, trees: &[Tree], id: usize, seed: u64) -> Vec<Written> {
    let mut rng = StdRng::seed_from_u64(seed ^ (id as u64 + 1).wrapping_mul(0x9e37_79b9));
    let mut written = Vec::new();
    let mut last_seq: SeqNo = 0;
    for counter in 0..OPS_PER_WRITER {
        let mut batch = WriteBatch::new();
        let mut ops: Vec<(usize, Vec<u8>, Option<Vec<u8>>)> = Vec::new();
        match rng.gen_range(0..100) {
            0..=59 => {
                let t = rng.gen_range(0..TREES.len());
                let k = key(rng.gen_range(0..KEYS));
                let v = value(&k, id, counter, rng.gen_range(0..100));
                batch.put(&trees[t], &k, &v);
                ops.push((t, k, Some(v)));
            }
            60..=74 => {
                let t = rng.gen_range(0..TREES.len());
                let k = key(rng.gen_range(0..KEYS));
                batch.delete(&trees[t], &k);
                ops.push((t, k, None));
            }
            75..=89 => {
                for _ in 0..rng.gen_range(2..6) {
                    let t = rng.gen_range(0..TREES.len());
                    let k = key(rng.gen_range(0..KEYS));
                    if rng.gen_bool(0.8) {
                        let v = value(&k, id, counter, rng.gen_range(0..50));
                        batch.put(&trees[t], &k, &v);
                        ops.push((t, k, Some(v)));
                    } else {
                        batch.delete(&trees[t], &k);
                        ops.push((t, k, None));
                    }
                }
            }
            _ => {
                // The same value under the same key in both trees, atomically.
                let k = pair_key(rng.gen_range(0..PAIRS));
                let v = value(&k, id, counter, 0);
                for (t, tree) in trees.iter().enumerate() {
                    batch.put(tree, &k, &v);
                    ops.push((t, k.clone(), Some(v.clone())));
                }
            }
        }
        let sync = rng.gen_bool(0.01);
        let first = db.write(batch, &WriteOptions { sync }).expect("write");
        assert!(
            first > last_seq,
            "writer {id}: sequence {first} after {last_seq}"
        );
        last_seq = first + ops.len() as u64 - 1;
        for (i, (t, k, v)) in ops.into_iter().enumerate() {
            written.push((t, k, first + i as u64, v));
        }
    }
    written
}

/// Checks a value's shape: it names the key it is stored under.
fn check_shape(tree: usize, key: &[u8], value: &[u8]) {
    let mut prefix = key.to_vec();
    prefix.push(b'|');
    assert!(
        value.starts_with(&prefix),
        "{}: key {} holds a value written for another key: {}",
        TREES[tree],
        show(key),
        show(value)
    );
}

/// The newest write of a key: its sequence number and value (`None`: delete).
type LastWrite = (SeqNo, Option<Vec<u8>>);

/// A synchronous put: key, sequence number, value.
type SyncWrite = (Vec<u8>, SeqNo, Vec<u8>);

/// Observations of one reader: (tree, key, value) it saw.
type Seen = Vec<(usize, Vec<u8>, Vec<u8>)>;

fn reader(db: &Db, trees: &[Tree], id: usize, seed: u64, stop: &AtomicBool) -> (Seen, usize) {
    let mut rng = StdRng::seed_from_u64(seed ^ (id as u64 + 100).wrapping_mul(0x5851_f42d));
    let mut seen: Seen = Vec::new();
    let mut operations = 0;
    while !stop.load(Ordering::Acquire) {
        operations += 1;
        let t = rng.gen_range(0..TREES.len());
        match rng.gen_range(0..100) {
            0..=49 => {
                let k = key(rng.gen_range(0..KEYS));
                if let Some(e) = db.get(&trees[t], &k).expect("get") {
                    check_shape(t, &k, &e.value);
                    assert!(e.seq <= db.latest_sequence() && e.seq > 0);
                    seen.push((t, k, e.value));
                }
            }
            50..=69 => {
                // A range scan: keys strictly ascending, every value well-formed.
                let lo = rng.gen_range(0..KEYS);
                let options = ReadOptions {
                    lower_bound: Some(key(lo)),
                    upper_bound: Some(key(lo + rng.gen_range(1..KEYS))),
                    ..ReadOptions::default()
                };
                let mut previous: Option<Vec<u8>> = None;
                for item in db.iter(&trees[t], options).expect("iter") {
                    let (k, v, _) = item.expect("scan");
                    if let Some(p) = &previous {
                        assert!(
                            *p < k,
                            "iterator keys out of order: {} then {}",
                            show(p),
                            show(&k)
                        );
                    }
                    check_shape(t, &k, &v);
                    seen.push((t, k.clone(), v));
                    previous = Some(k);
                }
            }
            70..=84 => {
                // Snapshot reads are stable: the same answers before and after more writes.
                let snapshot = db.snapshot();
                let options = ReadOptions {
                    snapshot: Some(snapshot.clone()),
                    ..ReadOptions::default()
                };
                let keys: Vec<Vec<u8>> = (0..8).map(|_| key(rng.gen_range(0..KEYS))).collect();
                let read = |db: &Db| -> Vec<Option<(Vec<u8>, SeqNo)>> {
                    keys.iter()
                        .map(|k| {
                            db.get_with(&trees[t], k, &options)
                                .expect("get")
                                .map(|e| (e.value, e.seq))
                        })
                        .collect()
                };
                let first = read(db);
                let first_scan: Vec<_> = db
                    .iter(&trees[t], options.clone())
                    .expect("iter")
                    .collect::<Result<_, _>>()
                    .expect("scan");
                std::thread::yield_now();
                let second = read(db);
                let second_scan: Vec<_> = db
                    .iter(&trees[t], options.clone())
                    .expect("iter")
                    .collect::<Result<_, _>>()
                    .expect("scan");
                assert_eq!(first, second, "snapshot gets changed");
                assert!(first_scan == second_scan, "snapshot scans changed");
                for (k, found) in keys.iter().zip(&first) {
                    if let Some((v, seq)) = found {
                        assert!(*seq <= snapshot.sequence());
                        check_shape(t, k, v);
                        seen.push((t, k.clone(), v.clone()));
                    }
                }
                for (k, v, seq) in first_scan {
                    assert!(seq <= snapshot.sequence());
                    seen.push((t, k, v));
                }
            }
            _ => {
                // Batches are atomic across trees: a snapshot sees both halves of a pair.
                let snapshot = db.snapshot();
                let options = ReadOptions {
                    snapshot: Some(snapshot),
                    ..ReadOptions::default()
                };
                let k = pair_key(rng.gen_range(0..PAIRS));
                let halves: Vec<Option<(Vec<u8>, SeqNo)>> = trees
                    .iter()
                    .map(|tree| {
                        db.get_with(tree, &k, &options)
                            .expect("get")
                            .map(|e| (e.value, e.seq))
                    })
                    .collect();
                match (&halves[0], &halves[1]) {
                    (None, None) => {}
                    (Some((v0, s0)), Some((v1, s1))) => {
                        assert_eq!(v0, v1, "the halves of {} differ", show(&k));
                        assert_eq!(
                            *s1,
                            s0 + 1,
                            "the halves of {} come from different batches",
                            show(&k)
                        );
                        for t in 0..TREES.len() {
                            seen.push((t, k.clone(), v0.clone()));
                        }
                    }
                    _ => panic!("a snapshot sees half of a batch: {halves:?}"),
                }
            }
        }
    }
    (seen, operations)
}

#[test]
fn concurrent_writers_and_readers_see_only_real_writes() {
    let seed = seed();
    let result = std::panic::catch_unwind(|| run_concurrent(seed));
    if let Err(e) = result {
        eprintln!("concurrency test failed with seed {seed}: replay with SIFT_SEED={seed}");
        std::panic::resume_unwind(e);
    }
}

fn run_concurrent(seed: u64) {
    let started = Instant::now();
    let dir = tempfile::tempdir().expect("tempdir");
    let observer = Arc::new(DropLog {
        log: AtomicU32::new(u32::MAX),
        reports: AtomicU64::new(0),
    });
    let with_observer = Options {
        compaction_observers: vec![Arc::clone(&observer) as Arc<dyn CompactionObserver>],
        ..options()
    };
    let db = Db::open(dir.path(), with_observer).expect("open");
    let log = db
        .create_tree("log", TreeOptions::default())
        .expect("log tree");
    observer.log.store(log.id(), Ordering::SeqCst);
    let trees: Vec<Tree> = TREES
        .iter()
        .map(|n| {
            db.tree(n)
                .or_else(|_| db.create_tree(n, TreeOptions::default()))
        })
        .collect::<Result<_, _>>()
        .expect("trees");
    let stop = AtomicBool::new(false);
    let start = Barrier::new(WRITERS + READERS);
    let (written, seen) = std::thread::scope(|scope| {
        let writers: Vec<_> = (0..WRITERS)
            .map(|id| {
                let (db, trees, start) = (&db, &trees, &start);
                scope.spawn(move || {
                    start.wait();
                    writer(db, trees, id, seed)
                })
            })
            .collect();
        let readers: Vec<_> = (0..READERS)
            .map(|id| {
                let (db, trees, start, stop) = (&db, &trees, &start, &stop);
                scope.spawn(move || {
                    start.wait();
                    reader(db, trees, id, seed, stop)
                })
            })
            .collect();
        let written: Vec<Vec<Written>> = writers
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|e| std::panic::resume_unwind(e)))
            .collect();
        stop.store(true, Ordering::Release);
        let seen: Vec<(Seen, usize)> = readers
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|e| std::panic::resume_unwind(e)))
            .collect();
        (written, seen)
    });

    // Sequence numbers are unique across all writers.
    let mut seqs = HashSet::new();
    for (t, k, seq, _) in written.iter().flatten() {
        assert!(
            seqs.insert(*seq),
            "sequence {seq} given twice ({} {})",
            TREES[*t],
            show(k)
        );
    }
    // Every value a reader saw was written under that key by some writer.
    let values: HashSet<(usize, &[u8], &[u8])> = written
        .iter()
        .flatten()
        .filter_map(|(t, k, _, v)| v.as_deref().map(|v| (*t, k.as_slice(), v)))
        .collect();
    let mut observations = 0;
    for (reader_seen, _) in &seen {
        for (t, k, v) in reader_seen {
            assert!(
                values.contains(&(*t, k.as_slice(), v.as_slice())),
                "a reader saw {} under {} in {}, which no writer wrote there",
                show(v),
                show(k),
                TREES[*t]
            );
            observations += 1;
        }
    }
    // The final state is the write with the highest sequence number of each key.
    db.wait_for_background_work().expect("wait");
    let mut last: HashMap<(usize, Vec<u8>), LastWrite> = HashMap::new();
    for (t, k, seq, v) in written.iter().flatten() {
        let entry = last.entry((*t, k.clone())).or_insert((0, None));
        if *seq > entry.0 {
            *entry = (*seq, v.clone());
        }
    }
    let check_final = |db: &Db, trees: &[Tree], context: &str| {
        for (t, tree) in trees.iter().enumerate() {
            let mut expected = BTreeMap::new();
            for ((lt, k), (seq, v)) in &last {
                if *lt != t {
                    continue;
                }
                let got = db.get(tree, k).expect("get").map(|e| (e.seq, e.value));
                let want = v.clone().map(|v| (*seq, v));
                assert_eq!(got, want, "{context}: final {} in {}", show(k), TREES[t]);
                if let Some(v) = v {
                    expected.insert(k.clone(), (v.clone(), *seq));
                }
            }
            let scanned: BTreeMap<Vec<u8>, (Vec<u8>, SeqNo)> = db
                .iter(tree, ReadOptions::default())
                .expect("iter")
                .map(|item| item.map(|(k, v, s)| (k, (v, s))))
                .collect::<Result<_, _>>()
                .expect("scan");
            assert!(scanned == expected, "{context}: final scan of {}", TREES[t]);
        }
    };
    check_final(&db, &trees, "after the writers");
    let logged = db.iter(&log, ReadOptions::default()).expect("iter").count() as u64;
    assert_eq!(
        logged,
        observer.reports.load(Ordering::Relaxed),
        "every drop's emitted write is visible"
    );
    assert!(logged > 0, "drops were reported");
    let stats = db.stats();
    let reader_operations: usize = seen.iter().map(|(_, n)| n).sum();
    eprintln!(
        "concurrency: {} writes in {} groups, {} flushes, {} compactions, {} stalls; {reader_operations} reader operations, {observations} values checked; {:?}",
        stats.writes,
        stats.write_groups,
        stats.flushes,
        stats.compactions,
        stats.write_stalls,
        started.elapsed()
    );
    assert_eq!(
        stats.write_stall_micros,
        stats.write_slowdown_micros
            + stats.write_stop_memtables_micros
            + stats.write_stop_l0_micros,
        "every stalled microsecond has its cause"
    );
    assert!(
        stats.flushes > 5,
        "flushes ran during the test: {}",
        stats.flushes
    );
    assert!(stats.compactions > 0, "compactions ran during the test");
    assert!(reader_operations > 100, "readers ran: {reader_operations}");
    db.close().expect("close");
    let db = Db::open(dir.path(), options()).expect("reopen");
    let trees: Vec<Tree> = TREES.iter().map(|n| db.tree(n).expect("tree")).collect();
    check_final(&db, &trees, "after reopening");
}

#[test]
fn synchronous_writers_share_groups() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = Db::open(dir.path(), options()).expect("open");
    let tree = db.default_tree();
    const THREADS: usize = 8;
    const WRITES: usize = 60;
    let start = Barrier::new(THREADS);
    let began = Instant::now();
    let results: Vec<Vec<SyncWrite>> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..THREADS)
            .map(|id| {
                let (db, tree, start) = (&db, &tree, &start);
                scope.spawn(move || {
                    start.wait();
                    let mut out = Vec::new();
                    let mut last = 0;
                    for i in 0..WRITES {
                        let k = key((id * WRITES + i) % KEYS);
                        let v = value(&k, id, i, 10);
                        let mut batch = WriteBatch::new();
                        batch.put(tree, &k, &v);
                        let seq = db
                            .write(batch, &WriteOptions { sync: true })
                            .expect("write");
                        assert!(seq > last);
                        last = seq;
                        out.push((k, seq, v));
                    }
                    out
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|e| std::panic::resume_unwind(e)))
            .collect()
    });
    let elapsed = began.elapsed();
    let mut last: HashMap<Vec<u8>, (SeqNo, Vec<u8>)> = HashMap::new();
    let mut seqs = HashSet::new();
    for (k, seq, v) in results.into_iter().flatten() {
        assert!(seqs.insert(seq), "sequence {seq} given twice");
        let entry = last.entry(k).or_insert((0, Vec::new()));
        if seq > entry.0 {
            *entry = (seq, v);
        }
    }
    assert_eq!(seqs.len(), THREADS * WRITES);
    for (k, (seq, v)) in &last {
        let got = db.get(&tree, k).expect("get").expect("written");
        assert_eq!((got.seq, &got.value), (*seq, v));
    }
    let stats = db.stats();
    eprintln!(
        "group commit: {} writes in {} groups with {} WAL syncs, {elapsed:?}",
        stats.writes, stats.write_groups, stats.wal_syncs
    );
    assert_eq!(stats.writes, (THREADS * WRITES) as u64);
    assert!(stats.write_groups <= stats.writes);
    assert!(
        stats.wal_syncs <= stats.write_groups,
        "one sync per group at most"
    );
    // Every writer waited for a sync: whoever arrived meanwhile joined the next group.
    assert!(
        stats.write_groups < stats.writes,
        "no two of {THREADS} synchronous writers ever shared a group"
    );
}

/// `Db::write_sequenced` writes carry their own sequence number in their values; they race
/// plain writers and a compaction observer whose emitted writes also take sequence numbers.
/// Every sequenced entry must have been given exactly the number its builder saw, and a
/// failing builder must write nothing.
#[test]
fn sequenced_writes_know_their_sequence_numbers() {
    let dir = tempfile::tempdir().expect("tempdir");
    let observer = Arc::new(DropLog {
        log: AtomicU32::new(u32::MAX),
        reports: AtomicU64::new(0),
    });
    let mut opts = options();
    opts.compaction_observers = vec![Arc::clone(&observer) as Arc<dyn CompactionObserver>];
    let db = Db::open(dir.path(), opts).expect("open");
    let data = db.default_tree();
    let log = db.create_tree("log", TreeOptions::default()).expect("log");
    observer.log.store(log.id(), Ordering::SeqCst);
    const THREADS: usize = 4;
    const WRITES: usize = 1500;
    let start = Barrier::new(THREADS);
    let written: Vec<Vec<(Vec<u8>, SeqNo)>> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..THREADS)
            .map(|id| {
                let (db, data, start) = (&db, &data, &start);
                scope.spawn(move || {
                    start.wait();
                    let mut out = Vec::new();
                    for i in 0..WRITES {
                        let k = key((id * WRITES + i) % KEYS);
                        if id % 2 == 0 {
                            // Plain writes with padding, so memtables fill and jobs run.
                            db.put(data, &k, &value(&k, id, i, 200)).expect("put");
                            continue;
                        }
                        let sk = format!("seq-{id}-{i}").into_bytes();
                        if i % 97 == 0 {
                            let failed = db.write_sequenced(&WriteOptions::default(), |_first| {
                                let mut batch = WriteBatch::new();
                                batch.put(data, &sk, b"must not exist");
                                Err::<WriteBatch, sift_lsm::Error>(
                                    sift_lsm::Error::InvalidArgument("builder refuses".into()),
                                )
                            });
                            assert!(failed.is_err());
                            continue;
                        }
                        let first = db
                            .write_sequenced(&WriteOptions::default(), |first| {
                                let mut batch = WriteBatch::new();
                                batch.put(data, &sk, &first.to_be_bytes());
                                batch.put(data, &k, &(first + 1).to_be_bytes());
                                Ok::<_, sift_lsm::Error>(batch)
                            })
                            .expect("sequenced write");
                        out.push((sk, first));
                    }
                    out
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|e| std::panic::resume_unwind(e)))
            .collect()
    });
    db.wait_for_background_work().expect("background work");
    assert!(
        observer.reports.load(Ordering::Relaxed) > 0,
        "the observer emitted writes during the run"
    );
    let mut count = 0;
    for (sk, first) in written.into_iter().flatten() {
        let got = db
            .get(&data, &sk)
            .expect("get")
            .expect("sequenced write present");
        assert_eq!(got.seq, first, "entry sequence of {}", show(&sk));
        assert_eq!(got.value, first.to_be_bytes(), "value of {}", show(&sk));
        count += 1;
    }
    assert!(count > 0);
    for id in (1..THREADS).step_by(2) {
        for i in (0..WRITES).step_by(97) {
            let sk = format!("seq-{id}-{i}").into_bytes();
            assert!(
                db.get(&data, &sk).expect("get").is_none(),
                "failed builder wrote"
            );
        }
    }
}

/// A sequenced batch that passed `Db::check_batch` is not checked again by its commit, but one
/// changed after the check is: an entry for a missing tree added then is refused.
#[test]
fn a_batch_changed_after_its_check_is_checked_again() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = Db::open(dir.path(), options()).expect("open");
    let data = db.default_tree();
    let before = db.latest_sequence();
    let refused = db.write_sequenced(&WriteOptions::default(), |_first| {
        let mut batch = WriteBatch::new();
        batch.put(&data, b"k", b"v");
        db.check_batch(&mut batch)?;
        batch.put_in(u32::MAX - 1, b"k", b"v");
        Ok::<_, sift_lsm::Error>(batch)
    });
    assert!(
        matches!(refused, Err(sift_lsm::Error::TreeNotFound(_))),
        "{refused:?}"
    );
    assert_eq!(db.latest_sequence(), before);
    assert_eq!(db.get(&data, b"k").expect("get"), None);
    let first = db
        .write_sequenced(&WriteOptions::default(), |_first| {
            let mut batch = WriteBatch::new();
            batch.put(&data, b"k", b"v");
            db.check_batch(&mut batch)?;
            Ok::<_, sift_lsm::Error>(batch)
        })
        .expect("a checked batch commits");
    assert_eq!(first, before + 1);
    assert_eq!(
        db.get(&data, b"k").expect("get").map(|e| e.value),
        Some(b"v".to_vec())
    );
}

/// A batch checked by one database is checked again by another's commit: a tree that exists
/// only in the first is refused by the second.
#[test]
fn a_batch_checked_by_another_database_is_checked_again() {
    let dir_a = tempfile::tempdir().expect("tempdir");
    let dir_b = tempfile::tempdir().expect("tempdir");
    let db_a = Db::open(dir_a.path(), options()).expect("open a");
    let db_b = Db::open(dir_b.path(), options()).expect("open b");
    let only_in_a = db_a
        .create_tree("only-in-a", TreeOptions::default())
        .expect("create tree");
    assert!(db_b.tree("only-in-a").is_err());
    let before = db_b.latest_sequence();
    let refused = db_b.write_sequenced(&WriteOptions::default(), |_first| {
        let mut batch = WriteBatch::new();
        batch.put(&only_in_a, b"k", b"v");
        db_a.check_batch(&mut batch)?;
        Ok::<_, sift_lsm::Error>(batch)
    });
    assert!(
        matches!(refused, Err(sift_lsm::Error::TreeNotFound(_))),
        "{refused:?}"
    );
    assert_eq!(db_b.latest_sequence(), before);
}
