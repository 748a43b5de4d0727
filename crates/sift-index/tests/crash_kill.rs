//! Crash-kills of a writer process, for every index kind × maintenance of `common::CONFIGS`.
//!
//! The test binary re-executes itself as a child (`SIFT_CRASH_CHILD` selects the child's job)
//! that writes with `sync_writes` on and reports each acknowledged write on stdout; the parent
//! SIGKILLs it at a random moment, reopens the database and checks that the recovered documents
//! are a prefix of the issued writes containing every acknowledged one, and that every index
//! query (LOOKUP and RANGE, several values and limits) equals brute force over the recovered
//! documents. A second test kills the child during `create_index` back-fills on existing data.
//! `SIFT_CRASH_ITERATIONS` sets the number of kills per test, `SIFT_SEED` replays a run.

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

mod common;

use common::{seed, small_options, SeedGuard, CONFIGS, STRINGS};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use sift_index::{
    AttrType, AttrValue, Database, DatabaseOptions, IndexSpec, MemoryIndexOrigin, WriteOp,
};
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, Command, Stdio};

/// Selects the child's job: `writer` or `backfill`.
const CHILD_ENV: &str = "SIFT_CRASH_CHILD";
const CHILD_DIR_ENV: &str = "SIFT_CRASH_DIR";
const CHILD_SEED_ENV: &str = "SIFT_CRASH_CHILD_SEED";
const PKS: u32 = 40;
const INT_VALUES: i64 = 8;
const BATCHES_PER_ITERATION: usize = 150;
const BACKFILL_DOCUMENTS: u32 = 1500;

fn iterations() -> usize {
    std::env::var("SIFT_CRASH_ITERATIONS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(4)
}

fn options() -> DatabaseOptions {
    let mut options = small_options();
    options.sync_writes = true;
    options
}

// ---- documents and writes --------------------------------------------------------------------

/// One write of a batch: a document (pk, JSON) or a delete of a pk.
#[derive(Debug, Clone)]
enum Op {
    Put(String, Vec<u8>),
    Delete(String),
}

fn random_doc(rng: &mut StdRng, pk: &str) -> Vec<u8> {
    let mut doc = serde_json::json!({ "id": pk, "pad": "x".repeat(rng.gen_range(0..100)), "r": rng.gen::<u32>() });
    if rng.gen_range(0..10) > 0 {
        doc["n"] = serde_json::json!(rng.gen_range(-2..INT_VALUES - 2));
    }
    if rng.gen_range(0..8) > 0 {
        doc["s"] = serde_json::json!(STRINGS[rng.gen_range(0..STRINGS.len())]);
    }
    serde_json::to_vec(&doc).unwrap()
}

/// The batches one child issues, in order; the parent generates the same from the seed.
fn issued_batches(seed: u64) -> Vec<Vec<Op>> {
    let mut rng = StdRng::seed_from_u64(seed);
    (0..BATCHES_PER_ITERATION)
        .map(|_| {
            let size = if rng.gen_range(0..8) == 0 {
                rng.gen_range(2..4)
            } else {
                1
            };
            (0..size)
                .map(|_| {
                    let pk = format!("pk{:02}", rng.gen_range(0..PKS));
                    if rng.gen_range(0..5) == 0 {
                        Op::Delete(pk)
                    } else {
                        let doc = random_doc(&mut rng, &pk);
                        Op::Put(pk, doc)
                    }
                })
                .collect()
        })
        .collect()
}

fn index_specs() -> Vec<IndexSpec> {
    let mut specs = Vec::new();
    for (name, kind, maintenance, read_repair) in CONFIGS {
        for (attr, path, attr_type) in [("n", "n", AttrType::Int), ("s", "s", AttrType::String)] {
            specs.push(
                IndexSpec::new(&format!("{name}_{attr}"), path, attr_type, kind)
                    .with_maintenance(maintenance)
                    .with_read_repair(read_repair),
            );
        }
    }
    specs
}

// ---- the child -------------------------------------------------------------------------------

fn say(line: &str) {
    let mut out = std::io::stdout().lock();
    writeln!(out, "{line}").unwrap();
    out.flush().unwrap();
}

/// Opens the database (creating what is missing) and writes the seeded batches, printing
/// `ACK {batch} {seq|-},...` after each acknowledged one.
fn child_writer(dir: &Path, seed: u64) {
    let db = Database::open(dir, options()).unwrap();
    if db.collection("docs").is_err() {
        db.create_collection("docs", "id").unwrap();
    }
    let existing: Vec<String> = db
        .collection("docs")
        .unwrap()
        .indexes
        .into_iter()
        .map(|index| index.name)
        .collect();
    for spec in index_specs() {
        if !existing.contains(&spec.name) {
            db.create_index("docs", spec).unwrap();
        }
    }
    say("READY");
    for (number, batch) in issued_batches(seed).iter().enumerate() {
        let ops: Vec<WriteOp<'_>> = batch
            .iter()
            .map(|op| match op {
                Op::Put(_, doc) => WriteOp::Put(doc),
                Op::Delete(pk) => WriteOp::Delete(pk.as_bytes()),
            })
            .collect();
        let seqs = db.write("docs", &ops).unwrap();
        let seqs: Vec<String> = seqs
            .iter()
            .map(|seq| seq.map_or("-".to_string(), |seq| seq.to_string()))
            .collect();
        say(&format!("ACK {number} {}", seqs.join(",")));
    }
    say("DONE");
    // Wait to be killed (the parent may choose a moment after the last write).
    std::thread::sleep(std::time::Duration::from_secs(30));
}

/// Creates every index on the existing documents, printing progress lines during back-fills
/// and `CREATED {name}` after each.
fn child_backfill(dir: &Path) {
    let mut options = options();
    options.progress = Some(std::sync::Arc::new(
        |progress: &sift_index::BackfillProgress| {
            say(&format!("OPEN-PROGRESS {}", progress.index));
        },
    ));
    let db = Database::open(dir, options).unwrap();
    say("READY");
    for spec in index_specs() {
        let name = spec.name.clone();
        db.create_index_with_progress("docs", spec, &mut |progress| {
            say(&format!(
                "PROGRESS {} {}",
                progress.index, progress.documents_done
            ));
        })
        .unwrap();
        say(&format!("CREATED {name}"));
    }
    say("DONE");
    std::thread::sleep(std::time::Duration::from_secs(30));
}

/// Runs the child job if this process is a child; never returns then.
fn run_child_if_asked(job: &str) {
    let Ok(asked) = std::env::var(CHILD_ENV) else {
        return;
    };
    assert_eq!(asked, job, "child started for another test");
    let dir = std::env::var(CHILD_DIR_ENV).unwrap();
    let seed: u64 = std::env::var(CHILD_SEED_ENV).unwrap().parse().unwrap();
    match job {
        "writer" => child_writer(Path::new(&dir), seed),
        _ => child_backfill(Path::new(&dir)),
    }
    std::process::exit(0);
}

// ---- the parent ------------------------------------------------------------------------------

/// Kills the child if the parent panics while it runs.
struct ChildGuard(Child);

impl Drop for ChildGuard {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn spawn_child(test_name: &str, job: &str, dir: &Path, seed: u64) -> ChildGuard {
    let child = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", test_name, "--nocapture", "--test-threads=1"])
        .env(CHILD_ENV, job)
        .env(CHILD_DIR_ENV, dir)
        .env(CHILD_SEED_ENV, seed.to_string())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    ChildGuard(child)
}

/// Reads the child's stdout line by line; after `kill_after` lines that satisfy `counts`
/// (and a random pause of up to `pause_us`), SIGKILLs it; returns every line it printed.
fn run_and_kill(
    guard: &mut ChildGuard,
    rng: &mut StdRng,
    counts: impl Fn(&str) -> bool,
    kill_after: usize,
    pause_us: u64,
) -> Vec<String> {
    let stdout = guard.0.stdout.take().unwrap();
    let mut lines = Vec::new();
    let mut reader = BufReader::new(stdout);
    let mut counted = 0;
    let mut killed = false;
    let mut line = String::new();
    loop {
        line.clear();
        if reader.read_line(&mut line).unwrap() == 0 {
            break;
        }
        let text = line.trim_end().to_string();
        if !killed && (counts(&text) || text == "READY" || text == "DONE") {
            if counts(&text) {
                counted += 1;
            }
            if counted >= kill_after || text == "DONE" {
                std::thread::sleep(std::time::Duration::from_micros(
                    rng.gen_range(0..=pause_us),
                ));
                guard.0.kill().unwrap(); // SIGKILL on Unix
                killed = true;
            }
        }
        lines.push(text);
    }
    let status = guard.0.wait().unwrap();
    assert!(
        killed || status.success(),
        "child ended on its own with {status}; output: {lines:?}"
    );
    assert!(
        lines.iter().any(|line| line == "READY") || killed,
        "child never got ready: {lines:?}"
    );
    lines
}

/// A live document as recovered: seq, JSON, int and string attributes.
#[derive(Debug, Clone, PartialEq)]
struct Recovered {
    seq: u64,
    doc: Vec<u8>,
    n: Option<i64>,
    s: Option<String>,
}

type Documents = BTreeMap<String, Recovered>;

/// The live documents among pks `pk00 .. pk{count-1}` (the only ones the tests write).
fn read_documents(db: &Database, count: u32) -> Documents {
    let mut documents = Documents::new();
    for pk in 0..count {
        let pk = format!("pk{pk:02}");
        if let Some(hit) = db.get("docs", pk.as_bytes()).unwrap() {
            let json: serde_json::Value = serde_json::from_slice(&hit.doc).unwrap();
            documents.insert(
                pk,
                Recovered {
                    seq: hit.seq,
                    n: json["n"].as_i64(),
                    s: json["s"].as_str().map(str::to_string),
                    doc: hit.doc,
                },
            );
        }
    }
    documents
}

/// Document contents (pk → JSON) after applying `batches` to `base`.
fn replay(base: &BTreeMap<String, Vec<u8>>, batches: &[Vec<Op>]) -> BTreeMap<String, Vec<u8>> {
    let mut state = base.clone();
    for op in batches.iter().flatten() {
        match op {
            Op::Put(pk, doc) => {
                state.insert(pk.clone(), doc.clone());
            }
            Op::Delete(pk) => {
                state.remove(pk);
            }
        }
    }
    state
}

fn expected(
    documents: &Documents,
    keep: impl Fn(&Recovered) -> bool,
    limit: Option<usize>,
) -> Vec<(Vec<u8>, u64, Vec<u8>)> {
    let mut hits: Vec<(Vec<u8>, u64, Vec<u8>)> = documents
        .iter()
        .filter(|(_, doc)| keep(doc))
        .map(|(pk, doc)| (pk.clone().into_bytes(), doc.seq, doc.doc.clone()))
        .collect();
    hits.sort_by_key(|hit| std::cmp::Reverse(hit.1));
    hits.truncate(limit.unwrap_or(usize::MAX));
    hits
}

fn hits(result: sift_index::QueryResult) -> Vec<(Vec<u8>, u64, Vec<u8>)> {
    result
        .hits
        .into_iter()
        .map(|hit| (hit.pk, hit.seq, hit.doc))
        .collect()
}

/// Every query of every listed index equals brute force over `documents`.
fn check_indexes(
    db: &Database,
    documents: &Documents,
    indexes: &[String],
    limits: &[Option<usize>],
    what: &str,
) {
    for index in indexes {
        for &limit in limits {
            if index.ends_with("_n") {
                for v in -3..INT_VALUES - 1 {
                    let got = hits(db.lookup("docs", index, &AttrValue::Int(v), limit).unwrap());
                    let want = expected(documents, |d| d.n == Some(v), limit);
                    assert!(got == want, "{what}: {index} lookup {v} limit {limit:?}");
                }
                for (lo, hi) in [(-2, 0), (0, 3), (-5, 10), (4, 4)] {
                    let got = hits(
                        db.range(
                            "docs",
                            index,
                            &AttrValue::Int(lo),
                            &AttrValue::Int(hi),
                            limit,
                        )
                        .unwrap(),
                    );
                    let want = expected(
                        documents,
                        |d| d.n.is_some_and(|n| lo <= n && n <= hi),
                        limit,
                    );
                    assert!(
                        got == want,
                        "{what}: {index} range {lo}..={hi} limit {limit:?}"
                    );
                }
            } else {
                for v in STRINGS {
                    let got = hits(
                        db.lookup("docs", index, &AttrValue::String(v.into()), limit)
                            .unwrap(),
                    );
                    let want = expected(documents, |d| d.s.as_deref() == Some(v), limit);
                    assert!(got == want, "{what}: {index} lookup {v:?} limit {limit:?}");
                }
                for (lo, hi) in [("", "b"), ("ab", "b\u{0}"), ("b", "zz")] {
                    let got = hits(
                        db.range(
                            "docs",
                            index,
                            &AttrValue::String(lo.into()),
                            &AttrValue::String(hi.into()),
                            limit,
                        )
                        .unwrap(),
                    );
                    let want = expected(
                        documents,
                        |d| d.s.as_deref().is_some_and(|s| lo <= s && s <= hi),
                        limit,
                    );
                    assert!(
                        got == want,
                        "{what}: {index} range {lo:?}..={hi:?} limit {limit:?}"
                    );
                }
            }
        }
    }
}

/// Parses `ACK {batch} {seq|-},...`.
fn parse_ack(line: &str) -> Option<(usize, Vec<Option<u64>>)> {
    let mut words = line.strip_prefix("ACK ")?.split(' ');
    let batch = words.next()?.parse().ok()?;
    let seqs = words
        .next()?
        .split(',')
        .map(|seq| seq.parse().ok())
        .collect();
    Some((batch, seqs))
}

#[test]
fn writer_killed_at_random_moments() {
    run_child_if_asked("writer");
    let seed = seed();
    let _guard = SeedGuard(seed);
    let mut rng = StdRng::seed_from_u64(seed);
    let dir = tempfile::tempdir().unwrap();
    let mut index_names: Vec<String> = index_specs().into_iter().map(|spec| spec.name).collect();
    index_names.sort();
    // Document contents after the previous iteration's recovery.
    let mut base: BTreeMap<String, Vec<u8>> = BTreeMap::new();
    for iteration in 0..iterations() {
        let child_seed = seed ^ (iteration as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        let batches = issued_batches(child_seed);
        let mut child = spawn_child(
            "writer_killed_at_random_moments",
            "writer",
            dir.path(),
            child_seed,
        );
        let kill_after = rng.gen_range(0..=BATCHES_PER_ITERATION);
        let lines = run_and_kill(
            &mut child,
            &mut rng,
            |line| line.starts_with("ACK "),
            kill_after,
            3000,
        );
        let acks: Vec<(usize, Vec<Option<u64>>)> =
            lines.iter().filter_map(|line| parse_ack(line)).collect();
        for (position, (batch, seqs)) in acks.iter().enumerate() {
            assert_eq!(*batch, position, "iteration {iteration}: acks in order");
            assert_eq!(seqs.len(), batches[*batch].len());
        }
        let what = format!("iteration {iteration} (killed after {} acks)", acks.len());

        let db = Database::open(dir.path(), options()).unwrap();
        let documents = read_documents(&db, PKS);
        let contents: BTreeMap<String, Vec<u8>> = documents
            .iter()
            .map(|(pk, doc)| (pk.clone(), doc.doc.clone()))
            .collect();
        // At most one batch was in flight (the child writes one at a time): the recovered
        // state is the acknowledged prefix, or that plus the next batch.
        let acknowledged = acks.len();
        let applied = (acknowledged..=(acknowledged + 1).min(batches.len()))
            .find(|&count| replay(&base, &batches[..count]) == contents)
            .unwrap_or_else(|| {
                panic!(
                    "{what}: recovered documents are not the acknowledged prefix (+ at most one \
                     batch) of the issued writes"
                )
            });
        // Every acknowledged write's version is there with the acknowledged sequence number,
        // unless a later write of the same pk replaced it.
        // pk -> sequence number of its last put (None: that put was not acknowledged).
        let mut last_put: BTreeMap<&str, Option<u64>> = BTreeMap::new();
        for (number, batch) in batches[..applied].iter().enumerate() {
            for (position, op) in batch.iter().enumerate() {
                match op {
                    Op::Put(pk, _) => {
                        let seq = acks.get(number).and_then(|(_, seqs)| seqs[position]);
                        last_put.insert(pk, seq);
                    }
                    Op::Delete(pk) => {
                        last_put.remove(pk.as_str());
                    }
                }
            }
        }
        for (pk, seq) in &last_put {
            if let Some(seq) = seq {
                assert_eq!(
                    documents.get(*pk).map(|doc| doc.seq),
                    Some(*seq),
                    "{what}: acknowledged version of {pk}"
                );
            }
        }
        let mut ready: Vec<String> = db
            .collection("docs")
            .map(|info| info.indexes.into_iter().map(|index| index.name).collect())
            .unwrap_or_default();
        ready.sort();
        if lines.iter().any(|line| line == "READY") {
            assert_eq!(
                ready, index_names,
                "{what}: every index exists and is ready"
            );
        }
        for name in ready.iter().filter(|name| name.starts_with("memory")) {
            // The child never closes cleanly: no snapshot, so a scan rebuilt the index.
            assert!(
                matches!(
                    db.memory_index_origin("docs", name).unwrap(),
                    Some(MemoryIndexOrigin::Rebuilt { .. })
                ),
                "{what}: {name} should have been rebuilt"
            );
        }
        check_indexes(
            &db,
            &documents,
            &ready,
            &[Some(1), Some(3), Some(10), None],
            &what,
        );
        drop(db); // not a clean close: memory indexes are rebuilt by the next open, as after a crash
        base = contents;
    }
}

#[test]
fn create_index_killed_during_backfill() {
    run_child_if_asked("backfill");
    let seed = seed();
    let _guard = SeedGuard(seed);
    let mut rng = StdRng::seed_from_u64(seed);
    let specs = index_specs();
    for iteration in 0..iterations() {
        let dir = tempfile::tempdir().unwrap();
        {
            let db = Database::open(dir.path(), small_options()).unwrap();
            db.create_collection("docs", "id").unwrap();
            let docs: Vec<Vec<u8>> = (0..BACKFILL_DOCUMENTS)
                .map(|pk| random_doc(&mut rng, &format!("pk{pk:02}")))
                .collect();
            for chunk in docs.chunks(500) {
                let ops: Vec<WriteOp<'_>> = chunk.iter().map(|doc| WriteOp::Put(doc)).collect();
                db.write("docs", &ops).unwrap();
            }
            db.close().unwrap();
        }
        let mut child = spawn_child(
            "create_index_killed_during_backfill",
            "backfill",
            dir.path(),
            0,
        );
        // Progress lines come every 1000 documents of each back-fill; killing right after one
        // lands in the middle of that back-fill.
        let progress_lines = specs.len() * (BACKFILL_DOCUMENTS as usize / 1000 + 1);
        let kill_after = rng.gen_range(1..=progress_lines);
        let lines = run_and_kill(
            &mut child,
            &mut rng,
            |line| line.starts_with("PROGRESS "),
            kill_after,
            500,
        );
        let created: Vec<&str> = lines
            .iter()
            .filter_map(|line| line.strip_prefix("CREATED "))
            .collect();
        let what = format!(
            "iteration {iteration} (killed after {} indexes)",
            created.len()
        );

        let resumed = std::sync::Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
        let mut options = options();
        let seen = std::sync::Arc::clone(&resumed);
        options.progress = Some(std::sync::Arc::new(
            move |progress: &sift_index::BackfillProgress| {
                if progress.finished {
                    seen.lock().unwrap().push(progress.index.clone());
                }
            },
        ));
        let db = Database::open(dir.path(), options).unwrap();
        let documents = read_documents(&db, BACKFILL_DOCUMENTS);
        assert_eq!(documents.len(), BACKFILL_DOCUMENTS as usize, "{what}");
        let present: Vec<String> = db
            .collection("docs")
            .unwrap()
            .indexes
            .into_iter()
            .map(|index| index.name)
            .collect();
        for name in &created {
            assert!(
                present.iter().any(|p| p == name),
                "{what}: created index {name} lost"
            );
        }
        // The index whose back-fill the kill interrupted is absent (its record never made it),
        // was back-filled again at open, or had just been recorded ready. No other is present.
        let in_flight = specs.get(created.len()).map(|spec| spec.name.as_str());
        for name in &present {
            if !created.contains(&name.as_str()) {
                assert_eq!(
                    Some(name.as_str()),
                    in_flight,
                    "{what}: unexpected index {name}"
                );
            }
        }
        if let Some(name) = in_flight {
            let record_state = present.iter().any(|p| p == name);
            eprintln!(
                "{what}: in-flight index {name} present after reopen: {record_state}, \
                 back-filled again at open: {}",
                resumed.lock().unwrap().iter().any(|r| r == name)
            );
        }
        check_indexes(&db, &documents, &present, &[Some(3), None], &what);
        for spec in &specs {
            if !present.contains(&spec.name) {
                db.create_index("docs", spec.clone()).unwrap();
            }
        }
        let all: Vec<String> = specs.iter().map(|spec| spec.name.clone()).collect();
        check_indexes(
            &db,
            &documents,
            &all,
            &[Some(10), None],
            &format!("{what}, all created"),
        );
    }
}
