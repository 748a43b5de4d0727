//! Named regression tests for the LevelDB++ pitfalls at the query level, for every index kind,
//! plus errors, read repair and crash-safe index building.

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

mod common;

use common::{open, small_options, CONFIGS};
use sift_index::{
    AttrType, AttrValue, Database, DatabaseOptions, IndexError, IndexKind, IndexSpec, IndexState,
    Maintenance,
};

fn setup(dir: &std::path::Path) -> Database {
    let mut options = small_options();
    // Keep every flushed file in L0 so versions stay in different L0 files.
    options.engine.l0_compaction_trigger = 100;
    options.engine.l0_slowdown_trigger = 200;
    options.engine.l0_stop_trigger = 300;
    setup_with(dir, options)
}

/// Collection `docs` with one index per configuration of `CONFIGS`, all on `n`.
fn setup_with(dir: &std::path::Path, options: DatabaseOptions) -> Database {
    let db = Database::open(dir, options).unwrap();
    db.create_collection("docs", "id").unwrap();
    for (name, kind, maintenance, read_repair) in CONFIGS {
        let spec = IndexSpec::new(name, "n", AttrType::Int, kind)
            .with_maintenance(maintenance)
            .with_read_repair(read_repair);
        db.create_index("docs", spec).unwrap();
    }
    db
}

fn doc(pk: &str, n: i64) -> Vec<u8> {
    format!(r#"{{"id": "{pk}", "n": {n}}}"#).into_bytes()
}

fn pks(db: &Database, index: &str, n: i64, limit: Option<usize>) -> Vec<(String, u64)> {
    db.lookup("docs", index, &AttrValue::Int(n), limit)
        .unwrap()
        .hits
        .into_iter()
        .map(|hit| (String::from_utf8(hit.pk).unwrap(), hit.seq))
        .collect()
}

#[test]
fn stale_version_in_an_older_l0_file_is_not_returned() {
    let dir = tempfile::tempdir().unwrap();
    let db = setup(dir.path());
    db.put("docs", &doc("a", 1)).unwrap();
    db.flush().unwrap();
    let seq = db.put("docs", &doc("a", 2)).unwrap();
    db.flush().unwrap();
    assert!(db
        .engine()
        .stats()
        .trees
        .iter()
        .any(|t| t.levels[0].files >= 2));
    for (name, ..) in CONFIGS {
        assert_eq!(pks(&db, name, 1, None), vec![], "{name}: old value");
        assert_eq!(
            pks(&db, name, 1, Some(1)),
            vec![],
            "{name}: old value top-1"
        );
        assert_eq!(pks(&db, name, 2, None), vec![("a".into(), seq)], "{name}");
        let range = db
            .range("docs", name, &AttrValue::Int(0), &AttrValue::Int(5), None)
            .unwrap();
        assert_eq!(range.hits.len(), 1, "{name}: range lists the document once");
        assert_eq!(range.hits[0].seq, seq, "{name}");
    }
}

#[test]
fn document_rewritten_with_the_same_value_is_listed_once() {
    let dir = tempfile::tempdir().unwrap();
    let db = setup(dir.path());
    db.put("docs", &doc("a", 1)).unwrap();
    db.flush().unwrap();
    db.put("docs", &doc("a", 1)).unwrap();
    let newest = db.put("docs", &doc("a", 1)).unwrap();
    for (name, ..) in CONFIGS {
        assert_eq!(
            pks(&db, name, 1, None),
            vec![("a".into(), newest)],
            "{name}"
        );
        let range = db
            .range(
                "docs",
                name,
                &AttrValue::Int(1),
                &AttrValue::Int(1),
                Some(10),
            )
            .unwrap();
        assert_eq!(range.hits.len(), 1, "{name}");
    }
}

#[test]
fn stale_entries_do_not_count_toward_k() {
    let dir = tempfile::tempdir().unwrap();
    let db = setup(dir.path());
    let b = db.put("docs", &doc("b", 1)).unwrap();
    db.put("docs", &doc("a", 1)).unwrap();
    db.flush().unwrap();
    // The newest index entry for 1 (a's) is now stale.
    db.put("docs", &doc("a", 2)).unwrap();
    for (name, ..) in CONFIGS {
        assert_eq!(pks(&db, name, 1, Some(1)), vec![("b".into(), b)], "{name}");
    }
}

#[test]
fn results_are_newest_first_not_heap_or_key_order() {
    let dir = tempfile::tempdir().unwrap();
    let db = setup(dir.path());
    let mut seqs = Vec::new();
    for (i, pk) in ["e", "a", "d", "b", "c"].iter().enumerate() {
        seqs.push((pk.to_string(), db.put("docs", &doc(pk, 7)).unwrap()));
        if i == 2 {
            db.flush().unwrap();
        }
    }
    seqs.reverse();
    for (name, ..) in CONFIGS {
        assert_eq!(pks(&db, name, 7, None), seqs, "{name}");
        assert_eq!(pks(&db, name, 7, Some(3)), seqs[..3].to_vec(), "{name}");
    }
}

#[test]
fn deleted_documents_are_not_returned() {
    let dir = tempfile::tempdir().unwrap();
    let db = setup(dir.path());
    db.put("docs", &doc("a", 1)).unwrap();
    let b = db.put("docs", &doc("b", 1)).unwrap();
    db.flush().unwrap();
    assert!(db.delete("docs", b"a").unwrap().is_some());
    assert_eq!(db.delete("docs", b"missing").unwrap(), None);
    for (name, ..) in CONFIGS {
        assert_eq!(pks(&db, name, 1, Some(1)), vec![("b".into(), b)], "{name}");
    }
}

#[test]
fn errors_name_what_was_wrong_and_change_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let db = setup(dir.path());
    db.put("docs", &doc("a", 1)).unwrap();
    let before = db.engine().latest_sequence();
    let err = db
        .range(
            "docs",
            "eager_full",
            &AttrValue::Int(9),
            &AttrValue::Int(3),
            None,
        )
        .unwrap_err();
    let message = err.to_string();
    assert!(message.contains('9') && message.contains('3'), "{message}");
    assert!(matches!(
        db.lookup("nope", "eager_full", &AttrValue::Int(1), None),
        Err(IndexError::UnknownCollection { .. })
    ));
    assert!(matches!(
        db.lookup("docs", "nope", &AttrValue::Int(1), None),
        Err(IndexError::UnknownIndex { .. })
    ));
    assert!(matches!(
        db.lookup("docs", "eager_full", &AttrValue::String("1".into()), None),
        Err(IndexError::QueryTypeMismatch { .. })
    ));
    let err = db.put("docs", br#"{"id": "b", "n": "x"}"#).unwrap_err();
    assert!(err.to_string().contains("`n`"), "{err}");
    assert!(db.put("docs", b"not json").is_err());
    assert!(db.put("docs", br#"{"n": 1}"#).is_err());
    assert!(matches!(
        db.create_index(
            "docs",
            IndexSpec::new("x", "n", AttrType::Int, IndexKind::Eager)
                .with_maintenance(Maintenance::SyncInsert)
        ),
        Err(IndexError::InvalidIndexSpec { .. })
    ));
    assert!(matches!(
        db.create_index(
            "docs",
            IndexSpec::new("lazy_insert", "n", AttrType::Int, IndexKind::Lazy)
        ),
        Err(IndexError::AlreadyExists { .. })
    ));
    assert_eq!(db.engine().latest_sequence(), before, "nothing was written");
    assert!(db.get("docs", b"b").unwrap().is_none());
}

#[test]
fn read_repair_deletes_stale_entries_it_meets() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path());
    db.create_collection("docs", "id").unwrap();
    for (name, kind) in [("c", IndexKind::Composite), ("l", IndexKind::Lazy)] {
        db.create_index(
            "docs",
            IndexSpec::new(name, "n", AttrType::Int, kind).with_read_repair(true),
        )
        .unwrap();
    }
    for i in 0..5 {
        db.put("docs", &doc(&format!("p{i}"), 1)).unwrap();
    }
    for i in 0..5 {
        db.put("docs", &doc(&format!("p{i}"), 2)).unwrap();
    }
    for name in ["c", "l"] {
        let first = db.lookup("docs", name, &AttrValue::Int(1), None).unwrap();
        assert!(first.hits.is_empty());
        assert_eq!(first.stats.stale_entries, 5, "{name}");
        assert_eq!(first.stats.entries_repaired, 5, "{name}");
        let second = db.lookup("docs", name, &AttrValue::Int(1), None).unwrap();
        assert_eq!(
            second.stats.stale_entries, 0,
            "{name}: repaired entries are gone"
        );
        assert_eq!(second.stats.candidates_examined, 0, "{name}");
        let hits = db
            .lookup("docs", name, &AttrValue::Int(2), None)
            .unwrap()
            .hits;
        assert_eq!(hits.len(), 5, "{name}: valid entries stay");
    }
}

#[test]
fn an_index_left_building_is_rebuilt_at_open_and_drop_removes_its_tree() {
    let dir = tempfile::tempdir().unwrap();
    {
        let db = open(dir.path());
        db.create_collection("docs", "id").unwrap();
        for i in 0..300 {
            db.put("docs", &doc(&format!("p{i:03}"), i % 7)).unwrap();
        }
        let mut reports = Vec::new();
        let record = db
            .create_index_with_progress(
                "docs",
                IndexSpec::new("l", "n", AttrType::Int, IndexKind::Lazy),
                &mut |p| reports.push(p.clone()),
            )
            .unwrap();
        assert_eq!(record.state, IndexState::Ready);
        assert!(reports.last().unwrap().finished);
        assert_eq!(reports.last().unwrap().documents_done, 300);
        // Simulate a crash in the middle of the back-fill: the record says `building` and the
        // tree holds a partial (here: bogus) list.
        let mut building = record.clone();
        building.state = IndexState::Building;
        let catalog = db.engine().tree("sift.catalog").unwrap();
        let mut key = b"index/docs".to_vec();
        key.push(0);
        key.extend_from_slice(b"l");
        db.engine()
            .put(&catalog, &key, &serde_json::to_vec(&building).unwrap())
            .unwrap();
        let tree = db.engine().tree(record.tree.as_deref().unwrap()).unwrap();
        db.engine()
            .put(
                &tree,
                &sift_index::format::encode_value_to_vec(&AttrValue::Int(100)),
                b"junk",
            )
            .unwrap();
        db.close().unwrap();
    }
    let reports = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let sink = std::sync::Arc::clone(&reports);
    let options = DatabaseOptions {
        progress: Some(std::sync::Arc::new(
            move |p: &sift_index::BackfillProgress| {
                sink.lock().unwrap().push(p.clone());
            },
        )),
        ..small_options()
    };
    let db = Database::open(dir.path(), options).unwrap();
    assert!(
        reports.lock().unwrap().last().unwrap().finished,
        "rebuilt at open"
    );
    let info = db.collection("docs").unwrap();
    assert_eq!(info.indexes[0].state, IndexState::Ready);
    let hits = db
        .lookup("docs", "l", &AttrValue::Int(3), None)
        .unwrap()
        .hits;
    assert_eq!(hits.len(), (0..300).filter(|i| i % 7 == 3).count());
    assert!(db
        .lookup("docs", "l", &AttrValue::Int(100), None)
        .unwrap()
        .hits
        .is_empty());
    let tree_name = info.indexes[0].tree.clone().unwrap();
    db.drop_index("docs", "l").unwrap();
    assert!(db.engine().tree(&tree_name).is_err());
    assert!(matches!(
        db.lookup("docs", "l", &AttrValue::Int(3), None),
        Err(IndexError::UnknownIndex { .. })
    ));
}

#[test]
fn memory_index_reports_memory_and_is_rebuilt_after_reopen() {
    let dir = tempfile::tempdir().unwrap();
    {
        let db = open(dir.path());
        db.create_collection("docs", "id").unwrap();
        db.create_index(
            "docs",
            IndexSpec::new("m", "n", AttrType::Int, IndexKind::Memory),
        )
        .unwrap();
        for i in 0..100 {
            db.put("docs", &doc(&format!("p{i:03}"), i % 5)).unwrap();
        }
        assert!(db.memory_bytes("docs", "m").unwrap() > 100 * 8);
    }
    let db = open(dir.path());
    assert!(db.memory_bytes("docs", "m").unwrap() > 100 * 8);
    let hits = db
        .lookup("docs", "m", &AttrValue::Int(2), Some(3))
        .unwrap()
        .hits;
    let pks: Vec<_> = hits
        .iter()
        .map(|h| String::from_utf8(h.pk.clone()).unwrap())
        .collect();
    assert_eq!(pks, vec!["p097", "p092", "p087"]);
}

/// A composite top-K LOOKUP used to validate (read the primary for) every entry of the value,
/// because keys come in pk order: with pks increasing over time, each entry looked newer than
/// the K-th hit so far. Candidates are now validated newest entry first, stopping at the first
/// that cannot enter the top K. Counted, not timed: validations for a top-10 over 300
/// documents of one value must stay near 10.
#[test]
fn composite_top_k_validates_only_what_can_enter_the_top_k() {
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(dir.path(), small_options()).unwrap();
    db.create_collection("docs", "id").unwrap();
    db.create_index(
        "docs",
        IndexSpec::new("by_n", "n", AttrType::Int, IndexKind::Composite),
    )
    .unwrap();
    for i in 0..300 {
        db.put("docs", &doc(&format!("pk{i:04}"), 7)).unwrap();
    }
    db.flush().unwrap();
    let result = db
        .lookup("docs", "by_n", &AttrValue::Int(7), Some(10))
        .unwrap();
    let got: Vec<String> = result
        .hits
        .iter()
        .map(|h| String::from_utf8(h.pk.clone()).unwrap())
        .collect();
    let expected: Vec<String> = (290..300).rev().map(|i| format!("pk{i:04}")).collect();
    assert_eq!(got, expected, "newest ten, newest first");
    // A LOOKUP reads components newest first and stops once no older one can hold a newer
    // hit, so it may examine fewer than all 300 entries.
    assert!((10..=300).contains(&result.stats.candidates_examined));
    assert!(
        result.stats.validations <= 11,
        "validated {} candidates for a top-10",
        result.stats.validations
    );
}

/// Writes that take sequence numbers outside the index layer (here: straight into the engine,
/// as compaction observers and background index workers do) once made the layer's predicted
/// sequence numbers wrong; postings must still name the version they index.
#[test]
fn engine_writes_between_index_writes_do_not_break_postings() {
    let dir = tempfile::tempdir().unwrap();
    let db = setup(dir.path());
    let side = db
        .engine()
        .create_tree("side", sift_lsm::TreeOptions::default())
        .unwrap();
    let mut latest = Vec::new();
    for i in 0..40i64 {
        db.engine().put(&side, b"k", &i.to_be_bytes()).unwrap();
        let pk = format!("p{}", i % 7);
        let seq = db.put("docs", &doc(&pk, i % 3)).unwrap();
        latest.retain(|(p, _, _): &(String, u64, i64)| *p != pk);
        latest.push((pk, seq, i % 3));
    }
    for n in 0..3 {
        let mut want: Vec<(String, u64)> = latest
            .iter()
            .filter(|(_, _, v)| *v == n)
            .map(|(p, s, _)| (p.clone(), *s))
            .collect();
        want.sort_by_key(|entry| std::cmp::Reverse(entry.1));
        for (name, ..) in CONFIGS {
            assert_eq!(pks(&db, name, n, None), want, "{name}: value {n}");
        }
    }
}

/// Composite LOOKUPs read components newest first and stop early; a key met in a newer
/// component shadows its entries below. Versions of documents moved between values and back,
/// rewritten with the same value, and deleted, spread over many L0 files and levels: every
/// limit's result equals the brute-force answer.
#[test]
fn composite_lookups_walking_components_match_brute_force() {
    use rand::{Rng, SeedableRng};
    let seed = rand::random::<u64>();
    eprintln!("seed {seed}");
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    for mixed_levels in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        let db = if mixed_levels {
            setup_with(dir.path(), small_options())
        } else {
            setup(dir.path())
        };
        // pk -> (value, seq) of the live version.
        let mut model: std::collections::BTreeMap<String, (i64, u64)> =
            std::collections::BTreeMap::new();
        for step in 0..600 {
            let pk = format!("p{:03}", rng.gen_range(0..60));
            if rng.gen_bool(0.1) {
                db.delete("docs", pk.as_bytes()).unwrap();
                model.remove(&pk);
            } else {
                let value = rng.gen_range(0..3);
                db.put("docs", &doc(&pk, value)).unwrap();
                let seq = db.get("docs", pk.as_bytes()).unwrap().unwrap().seq;
                model.insert(pk, (value, seq));
            }
            if rng.gen_bool(0.05) {
                db.flush().unwrap();
            }
            if step % 50 != 49 {
                continue;
            }
            for (name, kind, _, _) in CONFIGS {
                if kind != IndexKind::Composite {
                    continue;
                }
                for value in 0..3 {
                    let mut expected: Vec<(String, u64)> = model
                        .iter()
                        .filter(|(_, (v, _))| *v == value)
                        .map(|(pk, (_, seq))| (pk.clone(), *seq))
                        .collect();
                    expected.sort_by_key(|(_, seq)| std::cmp::Reverse(*seq));
                    for limit in [Some(1), Some(3), Some(10), None] {
                        let want: Vec<_> = expected
                            .iter()
                            .take(limit.unwrap_or(usize::MAX))
                            .cloned()
                            .collect();
                        assert_eq!(
                            pks(&db, name, value, limit),
                            want,
                            "seed {seed}, step {step}, index {name}, value {value}, limit {limit:?}"
                        );
                    }
                }
            }
        }
    }
}
