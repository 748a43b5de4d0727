//! Model equivalence: every index kind × maintenance answers every query exactly like a
//! brute-force filter over a BTreeMap model, through puts, updates (changing and keeping the
//! value), deletes, batches, bad input, flushes, compactions, reopens, and index creation and
//! drop on existing data. `SIFT_MODEL_STEPS` lengthens the run, `SIFT_SEED` replays one.

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

mod common;

use common::{open, seed, steps, SeedGuard, CONFIGS, STRINGS};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use sift_index::{AttrType, AttrValue, Database, IndexSpec, WriteOp};
use std::collections::BTreeMap;

#[derive(Debug, Clone)]
struct ModelDoc {
    seq: u64,
    doc: Vec<u8>,
    n: Option<i64>,
    s: Option<String>,
}

common::impl_model_version!(ModelDoc);

type Model = BTreeMap<Vec<u8>, ModelDoc>;

const PKS: u32 = 40;
const INT_VALUES: i64 = 8;

fn random_doc(rng: &mut StdRng, pk: u32) -> (Vec<u8>, Option<i64>, Option<String>) {
    let n = (rng.gen_range(0..10) > 0).then(|| rng.gen_range(-2..INT_VALUES - 2));
    let s = (rng.gen_range(0..8) > 0).then(|| STRINGS[rng.gen_range(0..STRINGS.len())].to_string());
    let mut doc =
        serde_json::json!({ "id": format!("pk{pk:02}"), "pad": "x".repeat(rng.gen_range(0..120)) });
    if let Some(n) = n {
        doc["n"] = serde_json::json!(n);
    } else if rng.gen_bool(0.5) {
        doc["n"] = serde_json::Value::Null;
    }
    if let Some(s) = &s {
        doc["s"] = serde_json::json!(s);
    }
    (serde_json::to_vec(&doc).unwrap(), n, s)
}

fn create_indexes(db: &Database, prefix: &str) {
    for (name, kind, maintenance, read_repair) in CONFIGS {
        for (attr, path, attr_type) in [("n", "n", AttrType::Int), ("s", "/s", AttrType::String)] {
            let spec = IndexSpec::new(&format!("{prefix}{name}_{attr}"), path, attr_type, kind)
                .with_maintenance(maintenance)
                .with_read_repair(read_repair);
            db.create_index("docs", spec).unwrap();
        }
    }
}

fn expected(
    model: &Model,
    matches: impl Fn(&ModelDoc) -> bool,
    limit: Option<usize>,
) -> Vec<(Vec<u8>, u64, Vec<u8>)> {
    common::newest_first(model, matches, limit)
}

fn check_all(db: &Database, model: &Model, rng: &mut StdRng, prefixes: &[&str], step: usize) {
    for prefix in prefixes {
        for (name, ..) in CONFIGS {
            for limit in [Some(1), Some(3), Some(10), None] {
                // Int attribute: a point lookup and a range.
                let index = format!("{prefix}{name}_n");
                let v = rng.gen_range(-3..INT_VALUES - 1);
                let got = db
                    .lookup("docs", &index, &AttrValue::Int(v), limit)
                    .unwrap();
                let want = expected(model, |d| d.n == Some(v), limit);
                compare(
                    &got.hits,
                    &want,
                    &format!("step {step}: {index} lookup {v} limit {limit:?}"),
                );
                let lo = rng.gen_range(-3..INT_VALUES);
                let hi = lo + rng.gen_range(0..4);
                let got = db
                    .range(
                        "docs",
                        &index,
                        &AttrValue::Int(lo),
                        &AttrValue::Int(hi),
                        limit,
                    )
                    .unwrap();
                let want = expected(model, |d| d.n.is_some_and(|n| lo <= n && n <= hi), limit);
                compare(
                    &got.hits,
                    &want,
                    &format!("step {step}: {index} range {lo}..={hi} limit {limit:?}"),
                );
                // String attribute.
                let index = format!("{prefix}{name}_s");
                let v = STRINGS[rng.gen_range(0..STRINGS.len())];
                let got = db
                    .lookup("docs", &index, &AttrValue::String(v.to_string()), limit)
                    .unwrap();
                let want = expected(model, |d| d.s.as_deref() == Some(v), limit);
                compare(
                    &got.hits,
                    &want,
                    &format!("step {step}: {index} lookup {v:?} limit {limit:?}"),
                );
                let mut bounds = [
                    STRINGS[rng.gen_range(0..STRINGS.len())],
                    STRINGS[rng.gen_range(0..STRINGS.len())],
                ];
                bounds.sort_unstable();
                let [lo, hi] = bounds;
                let got = db
                    .range(
                        "docs",
                        &index,
                        &AttrValue::String(lo.to_string()),
                        &AttrValue::String(hi.to_string()),
                        limit,
                    )
                    .unwrap();
                let want = expected(
                    model,
                    |d| d.s.as_deref().is_some_and(|s| lo <= s && s <= hi),
                    limit,
                );
                compare(
                    &got.hits,
                    &want,
                    &format!("step {step}: {index} range {lo:?}..={hi:?} limit {limit:?}"),
                );
            }
        }
    }
}

fn compare(got: &[sift_index::Hit], want: &[(Vec<u8>, u64, Vec<u8>)], what: &str) {
    let got: Vec<(Vec<u8>, u64, Vec<u8>)> = got
        .iter()
        .map(|hit| (hit.pk.clone(), hit.seq, hit.doc.clone()))
        .collect();
    let show = |hits: &[(Vec<u8>, u64, Vec<u8>)]| {
        hits.iter()
            .map(|(pk, seq, _)| format!("{}@{seq}", String::from_utf8_lossy(pk)))
            .collect::<Vec<_>>()
    };
    assert!(
        got == want,
        "{what}: got {:?}, want {:?}",
        show(&got),
        show(want)
    );
}

#[test]
fn every_kind_matches_the_model() {
    let seed = seed();
    let _guard = SeedGuard(seed);
    let mut rng = StdRng::seed_from_u64(seed);
    let dir = tempfile::tempdir().unwrap();
    let mut db = open(dir.path());
    db.create_collection("docs", "id").unwrap();
    create_indexes(&db, "");
    let mut model = Model::new();
    let total_steps = steps(250);
    let mut late_created = false;
    for step in 0..total_steps {
        let roll = rng.gen_range(0..100);
        match roll {
            0..=54 => {
                let pk = rng.gen_range(0..PKS);
                let (json, n, s) = random_doc(&mut rng, pk);
                let seq = db.put("docs", &json).unwrap();
                model.insert(
                    format!("pk{pk:02}").into_bytes(),
                    ModelDoc {
                        seq,
                        doc: json,
                        n,
                        s,
                    },
                );
            }
            55..=62 => {
                // Rewrite an existing document with the same values.
                if let Some((pk, doc)) = common::random_entry(&model, &mut rng) {
                    let seq = db.put("docs", &doc.doc).unwrap();
                    model.insert(pk, ModelDoc { seq, ..doc });
                }
            }
            63..=76 => {
                let pk = format!("pk{:02}", rng.gen_range(0..PKS)).into_bytes();
                let result = db.delete("docs", &pk).unwrap();
                assert_eq!(
                    result.is_some(),
                    model.remove(&pk).is_some(),
                    "step {step}: delete result"
                );
            }
            77..=84 => {
                let mut jsons = Vec::new();
                let mut kinds = Vec::new();
                for _ in 0..rng.gen_range(1..5) {
                    let pk = rng.gen_range(0..PKS / 4); // small range: repeats within a batch
                    if rng.gen_bool(0.7) {
                        let (json, n, s) = random_doc(&mut rng, pk);
                        jsons.push(json);
                        kinds.push((pk, Some((n, s))));
                    } else {
                        jsons.push(format!("pk{pk:02}").into_bytes());
                        kinds.push((pk, None));
                    }
                }
                let ops: Vec<WriteOp<'_>> = jsons
                    .iter()
                    .zip(&kinds)
                    .map(|(bytes, (_, kind))| {
                        if kind.is_some() {
                            WriteOp::Put(bytes)
                        } else {
                            WriteOp::Delete(bytes)
                        }
                    })
                    .collect();
                let results = db.write("docs", &ops).unwrap();
                for ((json, (pk, kind)), result) in jsons.iter().zip(kinds).zip(results) {
                    let key = format!("pk{pk:02}").into_bytes();
                    match kind {
                        Some((n, s)) => {
                            model.insert(
                                key,
                                ModelDoc {
                                    seq: result.unwrap(),
                                    doc: json.clone(),
                                    n,
                                    s,
                                },
                            );
                        }
                        None => assert_eq!(result.is_some(), model.remove(&key).is_some()),
                    }
                }
            }
            85..=87 => {
                // Bad input changes nothing.
                let bad: &[&[u8]] = &[
                    b"{\"id\": \"pk01\", \"n\": ",
                    b"[1]",
                    br#"{"id": "pk01", "n": "seven"}"#,
                    br#"{"n": 1}"#,
                ];
                let json = bad[rng.gen_range(0..bad.len())];
                assert!(db.put("docs", json).is_err());
                let (good, ..) = random_doc(&mut rng, 1);
                assert!(db
                    .write("docs", &[WriteOp::Put(&good), WriteOp::Put(json)])
                    .is_err());
            }
            88..=91 => db.flush().unwrap(),
            92..=93 => db.compact_all().unwrap(),
            94..=96 => {
                drop(db);
                db = open(dir.path());
            }
            _ => {
                if late_created {
                    // Drop one late index and build it again on the current data.
                    let (name, kind, maintenance, read_repair) =
                        CONFIGS[rng.gen_range(0..CONFIGS.len())];
                    let index = format!("late_{name}_n");
                    db.drop_index("docs", &index).unwrap();
                    let spec = IndexSpec::new(&index, "n", AttrType::Int, kind)
                        .with_maintenance(maintenance)
                        .with_read_repair(read_repair);
                    db.create_index("docs", spec).unwrap();
                } else {
                    create_indexes(&db, "late_");
                    late_created = true;
                }
            }
        }
        let prefixes: &[&str] = if late_created { &["", "late_"] } else { &[""] };
        check_all(&db, &model, &mut rng, prefixes, step);
    }
    let files: usize = db
        .engine()
        .stats()
        .trees
        .iter()
        .flat_map(|tree| tree.levels.iter().map(|level| level.files))
        .sum();
    assert!(files > 0, "the run should have written tables");
}
