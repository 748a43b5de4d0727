//! Lazy LOOKUP of a heavy value: the point path stops reading a newest-first list once the
//! top K is settled, and its hits equal a brute-force filter over a model of the collection; a
//! stored list that breaks the format's newest-first order is reported as corrupt where the
//! stream meets the break. Lazy RANGE, which reads its components through the same code, is
//! checked against the model too.

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

mod common;

use common::small_options;
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use sift_index::format::encode_value_to_vec;
use sift_index::format::{encode_postings, Posting};
use sift_index::{AttrType, AttrValue, Database, IndexKind, IndexSpec, Maintenance, WriteOp};
use std::collections::BTreeMap;

const HEAVY: i64 = 7;
const INDEXES: [&str; 2] = ["lazy", "lazy_repair"];

/// pk → (value, seq of the live version).
type Model = BTreeMap<String, (i64, u64)>;

fn doc(pk: &str, n: i64) -> Vec<u8> {
    format!(r#"{{"id": "{pk}", "n": {n}}}"#).into_bytes()
}

/// The database and the names of its index trees.
fn setup(dir: &std::path::Path) -> (Database, Vec<String>) {
    let db = Database::open(dir, small_options()).unwrap();
    db.create_collection("docs", "id").unwrap();
    let mut trees = Vec::new();
    for name in INDEXES {
        let spec = IndexSpec::new(name, "n", AttrType::Int, IndexKind::Lazy)
            .with_read_repair(name.ends_with("repair"));
        let record = db.create_index("docs", spec).unwrap();
        trees.push(record.tree.unwrap());
    }
    (db, trees)
}

/// Writes, updates (moving documents off and onto the heavy value) and deletes; returns the
/// model and every (pk, seq) version that ever carried the heavy value.
fn load(db: &Database, rng: &mut StdRng, writes: usize) -> (Model, Vec<(String, u64)>) {
    let mut model = Model::new();
    let mut heavy_versions = Vec::new();
    for _ in 0..writes {
        let pk = format!("p{:04}", rng.gen_range(0..1500));
        if rng.gen_bool(0.05) {
            if db.delete("docs", pk.as_bytes()).unwrap().is_some() {
                model.remove(&pk);
            }
            continue;
        }
        let n = if rng.gen_bool(0.6) {
            HEAVY
        } else {
            rng.gen_range(0..20)
        };
        let seq = db.put("docs", &doc(&pk, n)).unwrap();
        if n == HEAVY {
            heavy_versions.push((pk.clone(), seq));
        }
        model.insert(pk, (n, seq));
    }
    (model, heavy_versions)
}

fn expected(model: &Model, limit: Option<usize>) -> Vec<(String, u64)> {
    let mut hits: Vec<(String, u64)> = model
        .iter()
        .filter(|(_, (n, _))| *n == HEAVY)
        .map(|(pk, (_, seq))| (pk.clone(), *seq))
        .collect();
    hits.sort_by_key(|(_, seq)| std::cmp::Reverse(*seq));
    hits.truncate(limit.unwrap_or(usize::MAX));
    hits
}

/// Every index, limits 1, 10 and none, twice (read repair runs after the first), against the
/// model; returns the postings examined by the top-10 LOOKUP of the first index.
fn check(db: &Database, model: &Model, seed: u64, what: &str) -> u64 {
    let mut examined_top10 = 0;
    for _ in 0..2 {
        for name in INDEXES {
            for limit in [Some(1), Some(10), None] {
                let result = db
                    .lookup("docs", name, &AttrValue::Int(HEAVY), limit)
                    .unwrap();
                let got: Vec<(String, u64)> = result
                    .hits
                    .iter()
                    .map(|hit| (String::from_utf8(hit.pk.clone()).unwrap(), hit.seq))
                    .collect();
                assert_eq!(
                    got,
                    expected(model, limit),
                    "seed {seed}, {what}, index {name}, limit {limit:?}"
                );
                if name == INDEXES[0] && limit == Some(10) {
                    examined_top10 = result.stats.candidates_examined;
                }
            }
        }
    }
    examined_top10
}

/// A database loaded with 4000 writes from `seed`, its model, and the number of live documents
/// holding the heavy value (asserted to be over 300, so a top-10 reads a fraction of them).
fn loaded_with_a_heavy_value(seed: u64) -> (tempfile::TempDir, Database, Model, u64) {
    let mut rng = StdRng::seed_from_u64(seed);
    let dir = tempfile::tempdir().unwrap();
    let (db, _) = setup(dir.path());
    let (model, _) = load(&db, &mut rng, 4000);
    let live_heavy = expected(&model, None).len() as u64;
    assert!(
        live_heavy > 300,
        "seed {seed}: a heavy value ({live_heavy})"
    );
    (dir, db, model, live_heavy)
}

#[test]
fn heavy_value_in_a_fully_compacted_tree_matches_brute_force() {
    let seed = 0x1a23_u64.wrapping_add(3);
    let (_dir, db, model, live_heavy) = loaded_with_a_heavy_value(seed);
    db.flush().unwrap();
    db.compact_all().unwrap();
    assert!(
        db.engine()
            .stats()
            .trees
            .iter()
            .all(|tree| tree.levels[0].files == 0),
        "seed {seed}: everything compacted out of L0"
    );
    let examined = check(&db, &model, seed, "compacted");
    // The newest-first list is read only from its head (stale postings may precede hits).
    assert!(
        examined < live_heavy / 2,
        "seed {seed}: top-10 examined {examined} of {live_heavy} live postings"
    );
}

/// Lazy RANGE against the model, before and after a full compaction, for limits 1, 10 and
/// none: hits are the live documents in `[lo, hi]`, newest first. A top-10 RANGE of the heavy
/// value in the compacted tree (one list) examines postings only until the top K cannot accept
/// one, not every posting of the component.
#[test]
fn range_matches_brute_force_and_examines_only_what_the_top_k_needs() {
    let seed = 0x1a23_u64.wrapping_add(7);
    let (_dir, db, model, live_heavy) = loaded_with_a_heavy_value(seed);
    for compacted in [false, true] {
        if compacted {
            db.flush().unwrap();
            db.compact_all().unwrap();
        }
        for (lo, hi) in [(HEAVY, HEAVY), (HEAVY - 2, HEAVY + 3), (0, 19)] {
            for name in INDEXES {
                for limit in [Some(1), Some(10), None] {
                    let result = db
                        .range(
                            "docs",
                            name,
                            &AttrValue::Int(lo),
                            &AttrValue::Int(hi),
                            limit,
                        )
                        .unwrap();
                    let got: Vec<(String, u64)> = result
                        .hits
                        .iter()
                        .map(|hit| (String::from_utf8(hit.pk.clone()).unwrap(), hit.seq))
                        .collect();
                    let mut want: Vec<(String, u64)> = model
                        .iter()
                        .filter(|(_, (n, _))| (lo..=hi).contains(n))
                        .map(|(pk, (_, seq))| (pk.clone(), *seq))
                        .collect();
                    want.sort_by_key(|(_, seq)| std::cmp::Reverse(*seq));
                    want.truncate(limit.unwrap_or(usize::MAX));
                    let what = format!(
                        "seed {seed}, compacted {compacted}, [{lo}, {hi}], {name}, limit {limit:?}"
                    );
                    assert_eq!(got, want, "{what}");
                    if compacted && lo == hi && limit == Some(10) {
                        let examined = result.stats.candidates_examined;
                        assert!(
                            examined < live_heavy / 2,
                            "{what}: examined {examined} of {live_heavy} live postings"
                        );
                    }
                }
            }
        }
    }
}

/// Lists that break the format's order (written straight into the index tree, bypassing the
/// index layer): a LOOKUP that reads the list to the break reports corruption naming the order,
/// in the memtable and in an L0 file; the database keeps answering other values.
#[test]
fn list_not_newest_first_is_reported_as_corrupt() {
    let seed = 0x1a23_u64.wrapping_add(4);
    let mut rng = StdRng::seed_from_u64(seed);
    let dir = tempfile::tempdir().unwrap();
    let (db, trees) = setup(dir.path());
    let (model, heavy_versions) = load(&db, &mut rng, 3000);
    db.flush().unwrap();
    db.compact_all().unwrap();
    let live = expected(&model, None);
    let mut shuffled: Vec<Posting> = heavy_versions
        .iter()
        .map(|(pk, seq)| Posting::add(pk.as_bytes(), *seq))
        .collect();
    shuffled.shuffle(&mut rng);
    assert!(
        shuffled.windows(2).any(|pair| pair[0].seq < pair[1].seq),
        "seed {seed}: the list is not newest first"
    );
    // Newest first but for the newest posting, moved to the very end.
    let mut newest_last: Vec<Posting> = live
        .iter()
        .map(|(pk, seq)| Posting::add(pk.as_bytes(), *seq))
        .collect();
    let newest = newest_last.remove(0);
    newest_last.push(newest);
    let key = encode_value_to_vec(&AttrValue::Int(HEAVY));
    let other = (0..20).find(|n| *n != HEAVY).unwrap();
    for (shape, list) in [("shuffled", &shuffled), ("newest last", &newest_last)] {
        for name in &trees {
            let tree = db.engine().tree(name).unwrap();
            db.engine()
                .put(&tree, &key, &encode_postings(list))
                .unwrap();
        }
        for place in ["memtable", "L0 file"] {
            if place == "L0 file" {
                db.flush().unwrap();
            }
            for name in INDEXES {
                let error = db
                    .lookup("docs", name, &AttrValue::Int(HEAVY), None)
                    .expect_err("an unordered list must not be answered");
                assert!(
                    error.to_string().contains("not newest first"),
                    "seed {seed}, {shape}, {place}, {name}: {error}"
                );
                let result = db
                    .lookup("docs", name, &AttrValue::Int(other), None)
                    .unwrap();
                let expected_other = model.values().filter(|(n, _)| *n == other).count();
                assert_eq!(result.hits.len(), expected_other, "seed {seed}, {shape}");
            }
        }
    }
}

#[test]
fn remove_listed_after_its_add_cancels_it() {
    let seed = 0x1a23_u64.wrapping_add(5);
    let mut rng = StdRng::seed_from_u64(seed);
    let dir = tempfile::tempdir().unwrap();
    let (db, trees) = setup(dir.path());
    let (mut model, heavy_versions) = load(&db, &mut rng, 2000);
    // A newest-first list of every heavy version where the newest live one is followed by a
    // remove of itself (a list puts removes after the adds of the same seq): the streamed
    // path must know the remove before it validates the add.
    let (newest_pk, newest_seq) = expected(&model, Some(1)).remove(0);
    let mut list: Vec<Posting> = heavy_versions
        .iter()
        .map(|(pk, seq)| Posting::add(pk.as_bytes(), *seq))
        .collect();
    list.sort_by_key(|posting| std::cmp::Reverse(posting.seq));
    let at = list
        .iter()
        .position(|posting| posting.seq == newest_seq)
        .unwrap();
    list.insert(at + 1, Posting::remove(newest_pk.as_bytes(), newest_seq));
    let key = encode_value_to_vec(&AttrValue::Int(HEAVY));
    for name in &trees {
        let tree = db.engine().tree(name).unwrap();
        db.engine()
            .put(&tree, &key, &encode_postings(&list))
            .unwrap();
    }
    db.flush().unwrap();
    db.compact_all().unwrap();
    // The index no longer lists that document under the value.
    model.remove(&newest_pk);
    check(&db, &model, seed, "remove after its add");
}

/// A document version of the model test.
#[derive(Clone, Debug)]
struct ModelDoc {
    value: i64,
    seq: u64,
    doc: Vec<u8>,
}

common::impl_model_version!(ModelDoc);

/// (name, maintenance, read repair) of the indexes of the model test; the last is created
/// (back-filled) part-way through.
const MODEL_INDEXES: [(&str, Maintenance, bool); 4] = [
    ("lazy_insert", Maintenance::SyncInsert, false),
    ("lazy_repair", Maintenance::SyncInsert, true),
    ("lazy_full", Maintenance::SyncFull, false),
    ("lazy_late", Maintenance::SyncInsert, true),
];

const MODEL_VALUES: i64 = 6;

/// One op of a batch: the value and JSON of a put, or `None` for a delete.
type PlannedPut = Option<(i64, Vec<u8>)>;

fn model_value(rng: &mut StdRng) -> i64 {
    // Value 0 is heavy, so its lists are long and top-K streams stop early.
    if rng.gen_bool(0.5) {
        0
    } else {
        rng.gen_range(1..MODEL_VALUES)
    }
}

fn model_doc(pk: &str, value: i64, rng: &mut StdRng) -> Vec<u8> {
    let pad = "x".repeat(rng.gen_range(0..40));
    format!(r#"{{"id": "{pk}", "n": {value}, "pad": "{pad}"}}"#).into_bytes()
}

/// Creates (back-fills) one index; returns its tree's name.
fn create_model_index(
    db: &Database,
    (name, maintenance, repair): (&str, Maintenance, bool),
) -> String {
    let spec = IndexSpec::new(name, "n", AttrType::Int, IndexKind::Lazy)
        .with_maintenance(maintenance)
        .with_read_repair(repair);
    db.create_index("docs", spec).unwrap().tree.unwrap()
}

/// Every live index, one value (or all), limits 0, 1, 2, 10 and none, against the model.
fn check_model(
    db: &Database,
    model: &BTreeMap<Vec<u8>, ModelDoc>,
    indexes: usize,
    values: &[i64],
    context: &str,
) {
    for &value in values {
        for &(name, ..) in &MODEL_INDEXES[..indexes] {
            for limit in [Some(0), Some(1), Some(2), Some(10), None] {
                let result = db
                    .lookup("docs", name, &AttrValue::Int(value), limit)
                    .unwrap();
                let got: Vec<(Vec<u8>, u64, Vec<u8>)> = result
                    .hits
                    .into_iter()
                    .map(|hit| (hit.pk, hit.seq, hit.doc))
                    .collect();
                let want = common::newest_first(model, |doc| doc.value == value, limit);
                assert_eq!(
                    got, want,
                    "{context}: index {name}, value {value}, limit {limit:?}"
                );
            }
        }
    }
}

fn handle(db: Option<&Database>) -> &Database {
    db.unwrap()
}

/// Random puts (new pks and re-puts of old ones), deletes, batches, flushes, partial and full
/// compactions, reopens and held snapshots on lazy indexes (sync-insert with and without read
/// repair, sync-full, and one back-filled part-way); every LOOKUP equals a brute-force filter
/// over a BTreeMap model.
#[test]
fn lazy_lookup_model() {
    let seed = common::seed();
    let _guard = common::SeedGuard(seed);
    let steps = common::steps(1500);
    let mut rng = StdRng::seed_from_u64(seed);
    let dir = tempfile::tempdir().unwrap();
    let mut db = Some(Database::open(dir.path(), small_options()).unwrap());
    handle(db.as_ref()).create_collection("docs", "id").unwrap();
    let mut trees: Vec<String> = MODEL_INDEXES[..3]
        .iter()
        .map(|spec| create_model_index(handle(db.as_ref()), *spec))
        .collect();
    let mut indexes = 3;
    let mut model: BTreeMap<Vec<u8>, ModelDoc> = BTreeMap::new();
    let mut snapshots = Vec::new();
    let all_values: Vec<i64> = (0..MODEL_VALUES).collect();
    for step in 0..steps {
        let context = format!("seed {seed}, step {step}");
        if indexes == 3 && step == steps / 3 {
            trees.push(create_model_index(handle(db.as_ref()), MODEL_INDEXES[3]));
            indexes = 4;
            check_model(handle(db.as_ref()), &model, indexes, &all_values, &context);
        }
        let database = handle(db.as_ref());
        match rng.gen_range(0..100) {
            0..=54 => {
                // A new or old pk; old pks move between values or get a new version.
                let pk = format!("p{:03}", rng.gen_range(0..120));
                let value = model_value(&mut rng);
                let json = model_doc(&pk, value, &mut rng);
                let seq = database.put("docs", &json).unwrap();
                model.insert(
                    pk.into_bytes(),
                    ModelDoc {
                        value,
                        seq,
                        doc: json,
                    },
                );
            }
            55..=64 => {
                let pk = if rng.gen_bool(0.8) {
                    common::random_entry(&model, &mut rng).map(|(pk, _)| pk)
                } else {
                    None
                }
                .unwrap_or_else(|| format!("p{:03}", rng.gen_range(0..120)).into_bytes());
                let deleted = database.delete("docs", &pk).unwrap();
                assert_eq!(
                    deleted.is_some(),
                    model.remove(&pk).is_some(),
                    "{context}: delete"
                );
            }
            65..=71 => {
                // A batch, possibly naming one pk several times.
                let count = rng.gen_range(2..6);
                let mut planned: Vec<(String, PlannedPut)> = Vec::new();
                for _ in 0..count {
                    let pk = format!("p{:03}", rng.gen_range(0..30));
                    if rng.gen_bool(0.2) {
                        planned.push((pk, None));
                    } else {
                        let value = model_value(&mut rng);
                        let json = model_doc(&pk, value, &mut rng);
                        planned.push((pk, Some((value, json))));
                    }
                }
                let ops: Vec<WriteOp<'_>> = planned
                    .iter()
                    .map(|(pk, put)| match put {
                        Some((_, json)) => WriteOp::Put(json),
                        None => WriteOp::Delete(pk.as_bytes()),
                    })
                    .collect();
                let results = database.write("docs", &ops).unwrap();
                // The last op of each pk decides its state; the batch gives ops their own seqs.
                let mut last: BTreeMap<String, (PlannedPut, Option<u64>)> = BTreeMap::new();
                for ((pk, put), result) in planned.into_iter().zip(results) {
                    if put.is_some() {
                        assert!(result.is_some(), "{context}: a put has a seq");
                    }
                    last.insert(pk, (put, result));
                }
                for (pk, (put, result)) in last {
                    match put {
                        Some((value, doc)) => {
                            let seq = result.unwrap();
                            model.insert(pk.into_bytes(), ModelDoc { value, seq, doc });
                        }
                        None => {
                            model.remove(pk.as_bytes());
                        }
                    }
                }
            }
            72..=77 => database.flush().unwrap(),
            78..=81 => {
                // Partial: one index tree, the keys between two values.
                let tree_name = &trees[rng.gen_range(0..trees.len())];
                let tree = database.engine().tree(tree_name).unwrap();
                let mut bounds = [
                    rng.gen_range(0..MODEL_VALUES),
                    rng.gen_range(0..MODEL_VALUES),
                ];
                bounds.sort_unstable();
                let low = encode_value_to_vec(&AttrValue::Int(bounds[0]));
                let high = encode_value_to_vec(&AttrValue::Int(bounds[1]));
                database
                    .engine()
                    .compact_range(&tree, Some(&low), Some(&high))
                    .unwrap();
            }
            82..=83 => database.compact_all().unwrap(),
            84..=85 => {
                snapshots.clear();
                db.take().unwrap().close().unwrap();
                db = Some(Database::open(dir.path(), small_options()).unwrap());
            }
            86..=89 => {
                if snapshots.len() < 3 && rng.gen_bool(0.6) {
                    snapshots.push(database.engine().snapshot());
                } else if !snapshots.is_empty() {
                    let at = rng.gen_range(0..snapshots.len());
                    snapshots.remove(at);
                }
            }
            _ => {
                let value = if rng.gen_bool(0.6) {
                    0
                } else {
                    rng.gen_range(0..MODEL_VALUES)
                };
                check_model(database, &model, indexes, &[value], &context);
            }
        }
    }
    let context = format!("seed {seed}, end");
    check_model(handle(db.as_ref()), &model, indexes, &all_values, &context);
    snapshots.clear();
    handle(db.as_ref()).compact_all().unwrap();
    check_model(handle(db.as_ref()), &model, indexes, &all_values, &context);
    db.take().unwrap().close().unwrap();
    let db = Database::open(dir.path(), small_options()).unwrap();
    check_model(&db, &model, indexes, &all_values, &context);
}

/// Malformed list bytes in the index tree make a LOOKUP fail with a corruption error naming
/// the component and the offset inside the fragment, never panic: as a single list (memtable,
/// L0 file) and as one of several fragments of a component.
#[test]
fn malformed_lists_are_corruption_errors() {
    let good = encode_postings(&[Posting::add(b"p0001", 3), Posting::add(b"p0002", 2)]);
    let mut bad_kind = good.clone();
    bad_kind[1] = 9;
    let mut trailing = good.clone();
    trailing.push(0);
    let cut = good[..good.len() - 2].to_vec();
    let huge_count = vec![0xFF, 0xFF, 0x03, 0, 1, b'a', 1];
    // Newest first up to the last posting, whose pk runs past the end.
    let mut late_cut = encode_postings(&[
        Posting::add(b"p0001", 9),
        Posting::add(b"p0002", 8),
        Posting::add(b"p0003", 7),
    ]);
    let len = late_cut.len();
    late_cut[len - 7] = 40;
    let cases: [(&str, Vec<u8>); 6] = [
        ("bad kind", bad_kind),
        ("trailing byte", trailing),
        ("cut", cut),
        ("huge count", huge_count),
        ("late cut", late_cut),
        ("empty", Vec::new()),
    ];
    let key = encode_value_to_vec(&AttrValue::Int(HEAVY));
    for (what, bytes) in cases {
        for flush in [false, true] {
            let dir = tempfile::tempdir().unwrap();
            let (db, trees) = setup(dir.path());
            for pk in ["p0001", "p0002", "p0003"] {
                db.put("docs", &doc(pk, HEAVY)).unwrap();
            }
            db.flush().unwrap();
            db.compact_all().unwrap();
            let tree = db.engine().tree(&trees[0]).unwrap();
            db.engine().put(&tree, &key, &bytes).unwrap();
            if flush {
                db.flush().unwrap();
            } else {
                // A second fragment above the bad list: the component's general path.
                let fragment = encode_postings(&[Posting::add(b"p0003", 1)]);
                db.engine().merge(&tree, &key, &fragment).unwrap();
            }
            let heavy = AttrValue::Int(HEAVY);
            for limit in [Some(1), Some(10), None] {
                // LOOKUP, and RANGE (which reads components through the same code).
                let errors = [
                    db.lookup("docs", INDEXES[0], &heavy, limit),
                    db.range("docs", INDEXES[0], &heavy, &heavy, limit),
                ];
                for (query, result) in ["lookup", "range"].into_iter().zip(errors) {
                    let error = result.expect_err(what).to_string();
                    let component = if flush { "Level0File" } else { "Memtable" };
                    assert!(
                        error.contains("corrupt posting fragment in")
                            && error.contains(component)
                            && error.contains("offset"),
                        "{what}, {query}, flush {flush}, limit {limit:?}: {error}"
                    );
                }
            }
        }
    }
}
