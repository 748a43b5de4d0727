//! Unique secondary indexes: a write giving a value that another live document holds is
//! rejected whole with `UniqueViolation`; values released (by an update or a delete, also
//! earlier in the same batch) can be taken; concurrent writers racing for one value: exactly
//! one wins; creation on duplicated data fails and leaves nothing behind; unique indexes that
//! are not sync-full are refused. Randomized parts are seeded (`SIFT_SEED`).

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

mod common;

use common::{open, seed, SeedGuard};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use sift_index::{
    AttrType, AttrValue, Database, IndexError, IndexKind, IndexSpec, Maintenance, WriteOp,
};
use std::collections::BTreeMap;
use std::sync::{Arc, Barrier};

const KINDS: [IndexKind; 2] = [IndexKind::Composite, IndexKind::Eager];

fn doc(pk: &str, email: Option<&str>) -> Vec<u8> {
    let mut doc = serde_json::json!({ "id": pk });
    if let Some(email) = email {
        doc["email"] = serde_json::json!(email);
    }
    serde_json::to_vec(&doc).unwrap()
}

fn setup(kind: IndexKind) -> (tempfile::TempDir, Database) {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path());
    db.create_collection("users", "id").unwrap();
    let spec = IndexSpec::new("email", "email", AttrType::String, kind).with_unique(true);
    let record = db.create_index("users", spec).unwrap();
    assert!(record.unique);
    assert_eq!(record.maintenance, Maintenance::SyncFull);
    (dir, db)
}

fn holders(db: &Database, email: &str) -> Vec<String> {
    db.lookup(
        "users",
        "email",
        &AttrValue::String(email.to_string()),
        None,
    )
    .unwrap()
    .hits
    .into_iter()
    .map(|hit| String::from_utf8(hit.pk).unwrap())
    .collect()
}

fn is_violation(error: &IndexError, value: &str) -> bool {
    matches!(error, IndexError::UniqueViolation { index, value: shown }
        if index == "email" && shown.contains(value))
}

#[test]
fn a_taken_value_is_rejected_and_nothing_is_written() {
    for kind in KINDS {
        let (_dir, db) = setup(kind);
        db.put("users", &doc("a", Some("x@example.com"))).unwrap();
        let error = db
            .put("users", &doc("b", Some("x@example.com")))
            .unwrap_err();
        assert!(is_violation(&error, "x@example.com"), "{kind}: {error}");
        assert!(
            error.to_string().contains("unique index `email`"),
            "{error}"
        );
        assert!(db.get("users", b"b").unwrap().is_none(), "{kind}");
        // The holder may rewrite its own value.
        db.put("users", &doc("a", Some("x@example.com"))).unwrap();
        // A batch whose second write conflicts is rejected whole.
        let first = doc("c", Some("c@example.com"));
        let second = doc("d", Some("x@example.com"));
        let error = db
            .write("users", &[WriteOp::Put(&first), WriteOp::Put(&second)])
            .unwrap_err();
        assert!(is_violation(&error, "x@example.com"), "{kind}: {error}");
        assert!(db.get("users", b"c").unwrap().is_none(), "{kind}");
        // Two documents of one batch taking the same free value: rejected whole.
        let e1 = doc("e", Some("same@example.com"));
        let e2 = doc("f", Some("same@example.com"));
        let error = db
            .write("users", &[WriteOp::Put(&e1), WriteOp::Put(&e2)])
            .unwrap_err();
        assert!(is_violation(&error, "same@example.com"), "{kind}: {error}");
        assert!(db.get("users", b"e").unwrap().is_none(), "{kind}");
        assert!(holders(&db, "same@example.com").is_empty(), "{kind}");
        // Released earlier in the same batch (by an update, then by a delete): may be taken.
        let a_moves = doc("a", Some("new@example.com"));
        let g_takes = doc("g", Some("x@example.com"));
        db.write("users", &[WriteOp::Put(&a_moves), WriteOp::Put(&g_takes)])
            .unwrap();
        assert_eq!(holders(&db, "x@example.com"), vec!["g"], "{kind}");
        let h_takes = doc("h", Some("new@example.com"));
        db.write("users", &[WriteOp::Delete(b"a"), WriteOp::Put(&h_takes)])
            .unwrap();
        assert_eq!(holders(&db, "new@example.com"), vec!["h"], "{kind}");
        // Documents without the attribute never conflict.
        db.put("users", &doc("i", None)).unwrap();
        db.put("users", &doc("j", None)).unwrap();
    }
}

#[test]
fn concurrent_writers_racing_for_one_value_exactly_one_wins() {
    for kind in KINDS {
        let (_dir, db) = setup(kind);
        let db = Arc::new(db);
        for round in 0..20 {
            let value = format!("race{round}@example.com");
            let writers = 4;
            let barrier = Arc::new(Barrier::new(writers));
            let threads: Vec<_> = (0..writers)
                .map(|writer| {
                    let db = Arc::clone(&db);
                    let barrier = Arc::clone(&barrier);
                    let value = value.clone();
                    std::thread::spawn(move || {
                        let pk = format!("r{round}w{writer}");
                        barrier.wait();
                        db.put("users", &doc(&pk, Some(&value))).map(|_| pk)
                    })
                })
                .collect();
            let mut winners = Vec::new();
            for thread in threads {
                match thread.join().unwrap() {
                    Ok(pk) => winners.push(pk),
                    Err(error) => assert!(is_violation(&error, &value), "{kind}: {error}"),
                }
            }
            assert_eq!(
                winners.len(),
                1,
                "{kind} round {round}: winners {winners:?}"
            );
            assert_eq!(holders(&db, &value), winners, "{kind} round {round}");
            for writer in 0..writers {
                let pk = format!("r{round}w{writer}");
                let stored = db.get("users", pk.as_bytes()).unwrap().is_some();
                assert_eq!(stored, winners.contains(&pk), "{kind} round {round} {pk}");
            }
        }
    }
}

/// Random puts, deletes and batches against a model that enforces uniqueness the same way.
#[test]
fn unique_matches_the_model() {
    let seed = seed();
    let _guard = SeedGuard(seed);
    let mut rng = StdRng::seed_from_u64(seed);
    for kind in KINDS {
        let (dir, mut db) = setup(kind);
        let mut model: BTreeMap<String, Option<String>> = BTreeMap::new();
        for step in 0..300 {
            let count = rng.gen_range(1..4);
            let mut ops: Vec<(String, Option<Option<String>>)> = Vec::new();
            for _ in 0..count {
                let pk = format!("p{}", rng.gen_range(0..12));
                if rng.gen_range(0..5) == 0 {
                    ops.push((pk, None));
                } else {
                    let email =
                        (rng.gen_range(0..6) > 0).then(|| format!("v{}", rng.gen_range(0..8)));
                    ops.push((pk, Some(email)));
                }
            }
            // The model applies the batch in order and rejects it if any value collides.
            let mut next = model.clone();
            let mut ok = true;
            for (pk, op) in &ops {
                match op {
                    None => {
                        next.remove(pk);
                    }
                    Some(email) => {
                        if let Some(email) = email {
                            if next
                                .iter()
                                .any(|(other, e)| other != pk && e.as_ref() == Some(email))
                            {
                                ok = false;
                            }
                        }
                        next.insert(pk.clone(), email.clone());
                    }
                }
            }
            let docs: Vec<Vec<u8>> = ops
                .iter()
                .map(|(pk, op)| match op {
                    Some(email) => doc(pk, email.as_deref()),
                    None => pk.clone().into_bytes(),
                })
                .collect();
            let write_ops: Vec<WriteOp<'_>> = ops
                .iter()
                .zip(&docs)
                .map(|((_, op), bytes)| match op {
                    Some(_) => WriteOp::Put(bytes),
                    None => WriteOp::Delete(bytes),
                })
                .collect();
            let result = db.write("users", &write_ops);
            assert_eq!(
                result.is_ok(),
                ok,
                "{kind} step {step}: {ops:?} → {result:?}"
            );
            if ok {
                model = next;
            }
            if step % 50 == 49 {
                db.flush().unwrap();
                drop(db);
                db = open(dir.path());
            }
            for v in 0..8 {
                let value = format!("v{v}");
                let want: Vec<String> = model
                    .iter()
                    .filter(|(_, e)| e.as_deref() == Some(value.as_str()))
                    .map(|(pk, _)| pk.clone())
                    .collect();
                assert_eq!(holders(&db, &value), want, "{kind} step {step} {value}");
            }
        }
    }
}

#[test]
fn creating_a_unique_index_on_duplicates_fails_and_leaves_nothing() {
    for kind in KINDS {
        let dir = tempfile::tempdir().unwrap();
        let db = open(dir.path());
        db.create_collection("users", "id").unwrap();
        db.put("users", &doc("a", Some("dup@example.com"))).unwrap();
        db.put("users", &doc("b", Some("dup@example.com"))).unwrap();
        let trees_before = db.engine().tree_names().len();
        let spec = IndexSpec::new("email", "email", AttrType::String, kind).with_unique(true);
        let error = db.create_index("users", spec.clone()).unwrap_err();
        let message = error.to_string();
        assert!(
            message.contains("dup@example.com") && message.contains("unique"),
            "{message}"
        );
        assert!(db.collection("users").unwrap().indexes.is_empty());
        assert_eq!(db.engine().tree_names().len(), trees_before);
        drop(db);
        let db = open(dir.path());
        assert!(db.collection("users").unwrap().indexes.is_empty());
        // Once the duplicate is gone, the same index can be created.
        db.delete("users", b"b").unwrap();
        db.create_index("users", spec).unwrap();
        assert_eq!(holders(&db, "dup@example.com"), vec!["a"]);
    }
}

#[test]
fn unique_indexes_that_cannot_check_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path());
    db.create_collection("users", "id").unwrap();
    let refused = [
        (IndexKind::Composite, Some(Maintenance::Deferred)),
        (IndexKind::Composite, Some(Maintenance::SyncInsert)),
        (IndexKind::Lazy, Some(Maintenance::SyncFull)),
        (IndexKind::Lazy, None),
        (IndexKind::Memory, None),
    ];
    for (kind, maintenance) in refused {
        let mut spec = IndexSpec::new("email", "email", AttrType::String, kind).with_unique(true);
        if let Some(maintenance) = maintenance {
            spec = spec.with_maintenance(maintenance);
        }
        let error = db.create_index("users", spec).unwrap_err();
        assert!(
            matches!(error, IndexError::InvalidIndexSpec { .. }),
            "{kind} {maintenance:?}: {error}"
        );
    }
    let error = db
        .create_index(
            "users",
            IndexSpec::new("email", "email", AttrType::String, IndexKind::Composite)
                .with_unique(true)
                .with_maintenance(Maintenance::Deferred),
        )
        .unwrap_err();
    assert!(error.to_string().contains("sync-full"), "{error}");
    assert!(db.collection("users").unwrap().indexes.is_empty());
}
