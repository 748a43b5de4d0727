//! Lazy LOOKUP of a heavy value: the point path stops reading a newest-first list once the
//! top K is settled, and takes lists that are not newest first through its general path; in
//! both cases its hits equal a brute-force filter over a model of the collection.

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

mod common;

use common::small_options;
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use sift_index::encoding::encode_value_to_vec;
use sift_index::postings::{encode_postings, Posting};
use sift_index::{AttrType, AttrValue, Database, IndexKind, IndexSpec};
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

#[test]
fn heavy_value_in_a_fully_compacted_tree_matches_brute_force() {
    let seed = 0x1a23_u64.wrapping_add(3);
    let mut rng = StdRng::seed_from_u64(seed);
    let dir = tempfile::tempdir().unwrap();
    let (db, _) = setup(dir.path());
    let (model, _) = load(&db, &mut rng, 4000);
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
    let live_heavy = expected(&model, None).len() as u64;
    assert!(
        live_heavy > 300,
        "seed {seed}: a heavy value ({live_heavy})"
    );
    let examined = check(&db, &model, seed, "compacted");
    // The newest-first list is read only from its head (stale postings may precede hits).
    assert!(
        examined < live_heavy / 2,
        "seed {seed}: top-10 examined {examined} of {live_heavy} live postings"
    );
}

#[test]
fn list_not_newest_first_matches_brute_force() {
    let seed = 0x1a23_u64.wrapping_add(4);
    let mut rng = StdRng::seed_from_u64(seed);
    let dir = tempfile::tempdir().unwrap();
    let (db, trees) = setup(dir.path());
    let (model, heavy_versions) = load(&db, &mut rng, 3000);
    db.flush().unwrap();
    db.compact_all().unwrap();
    // Replace each heavy list by a base list holding every version that ever carried the value
    // (live and stale), shuffled, plus a remove of a version that never existed.
    let mut list: Vec<Posting> = heavy_versions
        .iter()
        .map(|(pk, seq)| Posting::add(pk.as_bytes(), *seq))
        .collect();
    list.push(Posting::remove(b"nobody", 3));
    list.shuffle(&mut rng);
    assert!(
        list.windows(2).any(|pair| pair[0].seq < pair[1].seq),
        "seed {seed}: the list is not newest first"
    );
    let key = encode_value_to_vec(&AttrValue::Int(HEAVY));
    for name in &trees {
        let tree = db.engine().tree(name).unwrap();
        db.engine()
            .put(&tree, &key, &encode_postings(&list))
            .unwrap();
    }
    check(&db, &model, seed, "unsorted list in the memtable");
    db.flush().unwrap();
    check(&db, &model, seed, "unsorted list in an L0 file");
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
