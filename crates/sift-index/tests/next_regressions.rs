//! `next` and `sst-local` regressions: concurrent writers and queries stay exact, corrupt
//! secondary meta blocks and corrupt documents in data blocks are reported. (Model equivalence
//! for every kind is in `tests/model/`.) `SIFT_SEED` replays one.

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

mod common;

use common::{open, seed, small_options, SeedGuard, STRINGS};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use sift_index::{
    AttrType, AttrValue, Database, IndexError, IndexKind, IndexSpec, SplitDelta, Validation,
};
use sift_lsm::ReadOptions;
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

const PKS: u32 = 60;
const INT_VALUES: i64 = 40;

/// (name, kind, validation, δ)
const CONFIGS: [(&str, IndexKind, Validation, Option<f64>); 4] = [
    ("next_memo", IndexKind::Next, Validation::Memo, None),
    (
        "next_lite_delta",
        IndexKind::Next,
        Validation::GetLite,
        Some(2.0),
    ),
    (
        "local_memo_delta",
        IndexKind::SstLocal,
        Validation::Memo,
        Some(1.0),
    ),
    ("local_lite", IndexKind::SstLocal, Validation::GetLite, None),
];

fn random_doc(rng: &mut StdRng, pk: u32) -> (Vec<u8>, Option<i64>, Option<String>) {
    let n = (rng.gen_range(0..10) > 0).then(|| {
        // Clustered values with gaps, so the value-aware split has something to split.
        let cluster = rng.gen_range(0..4) * 10;
        cluster + rng.gen_range(-2..3)
    });
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

fn spec(name: &str, path: &str, attr_type: AttrType, config: usize) -> IndexSpec {
    let (_, kind, validation, delta) = CONFIGS[config];
    let mut spec = IndexSpec::new(name, path, attr_type, kind).with_validation(validation);
    if let Some(delta) = delta {
        spec = spec.with_split_delta(SplitDelta::new(delta).unwrap());
    }
    spec
}

fn create_indexes(db: &Database, prefix: &str) {
    for (position, (name, ..)) in CONFIGS.iter().enumerate() {
        db.create_index(
            "docs",
            spec(&format!("{prefix}{name}_n"), "n", AttrType::Int, position),
        )
        .unwrap();
        db.create_index(
            "docs",
            spec(
                &format!("{prefix}{name}_s"),
                "/s",
                AttrType::String,
                position,
            ),
        )
        .unwrap();
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
            let limit = [Some(1), Some(3), Some(10), None][rng.gen_range(0..4)];
            let index = format!("{prefix}{name}_n");
            let v = rng.gen_range(-3..INT_VALUES);
            let got = db
                .lookup("docs", &index, &AttrValue::Int(v), limit)
                .unwrap();
            let want = expected(model, |d| d.n == Some(v), limit);
            common::compare(
                &got.hits,
                &want,
                &format!("step {step}: {index} lookup {v} limit {limit:?}"),
            );
            let lo = rng.gen_range(-3..INT_VALUES);
            let hi = lo + rng.gen_range(0..15);
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
            common::compare(
                &got.hits,
                &want,
                &format!("step {step}: {index} range {lo}..={hi} limit {limit:?}"),
            );
            let index = format!("{prefix}{name}_s");
            let v = STRINGS[rng.gen_range(0..STRINGS.len())];
            let got = db
                .lookup("docs", &index, &AttrValue::String(v.to_string()), limit)
                .unwrap();
            let want = expected(model, |d| d.s.as_deref() == Some(v), limit);
            common::compare(
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
            common::compare(
                &got.hits,
                &want,
                &format!("step {step}: {index} range {lo:?}..={hi:?} limit {limit:?}"),
            );
        }
    }
}

/// The global index of every `next` index describes exactly the live files' secondary blocks.
/// Returns how many live files have secondary blocks (summed over the indexes).
fn check_global_indexes(db: &Database, prefixes: &[&str], step: usize) -> usize {
    db.engine().wait_for_background_work().unwrap();
    let mut indexed_files = 0;
    for prefix in prefixes {
        for (name, kind, ..) in CONFIGS {
            if kind != IndexKind::Next {
                continue;
            }
            for attr in ["n", "s"] {
                let index = format!("{prefix}{name}_{attr}");
                let report = db
                    .check_global_index("docs", &index)
                    .unwrap_or_else(|e| panic!("step {step}: {index}: {e}"));
                indexed_files += report.files_indexed;
            }
        }
    }
    indexed_files
}

/// Writers race with queries, flushes and compactions: every answer is plausible (in range,
/// no document twice, newest first), and once writes stop every index answers exactly.
#[test]
fn concurrent_writes_and_queries_stay_exact() {
    let seed = seed();
    let _guard = SeedGuard(seed);
    let dir = tempfile::tempdir().unwrap();
    let db = std::sync::Arc::new(open(dir.path()));
    db.create_collection("docs", "id").unwrap();
    create_indexes(&db, "");
    let writers: Vec<_> = (0..2u64)
        .map(|w| {
            let db = std::sync::Arc::clone(&db);
            std::thread::spawn(move || {
                let mut rng = StdRng::seed_from_u64(seed ^ w);
                for i in 0..300 {
                    let pk = rng.gen_range(0..PKS);
                    let (json, ..) = random_doc(&mut rng, pk);
                    db.put("docs", &json).unwrap();
                    if i % 7 == 0 {
                        db.delete("docs", format!("pk{pk:02}").as_bytes()).unwrap();
                    }
                    if i % 100 == 0 {
                        db.flush().unwrap();
                    }
                }
            })
        })
        .collect();
    let mut rng = StdRng::seed_from_u64(seed);
    while !writers.iter().all(std::thread::JoinHandle::is_finished) {
        for (name, ..) in CONFIGS {
            let index = format!("{name}_n");
            let lo = rng.gen_range(-3..INT_VALUES);
            let result = db
                .range(
                    "docs",
                    &index,
                    &AttrValue::Int(lo),
                    &AttrValue::Int(lo + 10),
                    None,
                )
                .unwrap();
            let mut pks: Vec<&Vec<u8>> = result.hits.iter().map(|h| &h.pk).collect();
            let count = pks.len();
            pks.sort();
            pks.dedup();
            assert_eq!(pks.len(), count, "{index}: a document returned twice");
            assert!(
                result.hits.windows(2).all(|w| w[0].seq > w[1].seq),
                "{index}: not newest first"
            );
            for hit in &result.hits {
                let value: serde_json::Value = serde_json::from_slice(&hit.doc).unwrap();
                let n = value["n"].as_i64().unwrap();
                assert!((lo..=lo + 10).contains(&n), "{index}: {n} out of range");
            }
        }
    }
    for writer in writers {
        writer.join().unwrap();
    }
    let mut model = Model::new();
    for pk in 0..PKS {
        let key = format!("pk{pk:02}").into_bytes();
        if let Some(hit) = db.get("docs", &key).unwrap() {
            let value: serde_json::Value = serde_json::from_slice(&hit.doc).unwrap();
            model.insert(
                key,
                ModelDoc {
                    seq: hit.seq,
                    doc: hit.doc.clone(),
                    n: value["n"].as_i64(),
                    s: value["s"].as_str().map(str::to_string),
                },
            );
        }
    }
    let mut rng = StdRng::seed_from_u64(seed);
    for _ in 0..5 {
        check_all(&db, &model, &mut rng, &[""], 0);
    }
    check_global_indexes(&db, &[""], 0);
}

/// Damaged secondary meta blocks (a secondary block, a directory) are reported as corruption
/// naming the file, never as missing or wrong results.
#[test]
fn corrupt_secondary_blocks_are_reported() {
    for (kind, block) in [
        (IndexKind::Next, "s"),
        (IndexKind::SstLocal, "s"),
        (IndexKind::SstLocal, "d"),
        (IndexKind::Next, "d"),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let db = Database::open(dir.path(), small_options()).unwrap();
        db.create_collection("docs", "id").unwrap();
        let record = db
            .create_index("docs", IndexSpec::new("by_n", "n", AttrType::Int, kind))
            .unwrap();
        for i in 0..50 {
            db.put("docs", format!(r#"{{"id": "k{i:02}", "n": 7}}"#).as_bytes())
                .unwrap();
        }
        db.flush().unwrap();
        db.engine().wait_for_background_work().unwrap();
        let primary = db
            .engine()
            .tree(&db.collection("docs").unwrap().record.primary_tree_name())
            .unwrap();
        let view = db
            .engine()
            .components(&primary, &ReadOptions::default())
            .unwrap();
        let file = view.files(0).into_iter().next().expect("one L0 table");
        let name = if block == "s" {
            format!("s.{}.0", record.attr_id)
        } else {
            format!("d.{}", record.attr_id)
        };
        let handle = view
            .table(&file)
            .unwrap()
            .meta_block_handle("sift.next", &name)
            .expect("the table has the meta block");
        drop(view);
        let file_name = format!("{:06}.sst", file.number);
        let path = dir.path().join(&file_name);
        let mut bytes = std::fs::read(&path).unwrap();
        let at = usize::try_from(handle.offset + handle.size / 2).unwrap();
        bytes[at] ^= 0x5A;
        std::fs::write(&path, &bytes).unwrap();
        // `next` has read the directory already; a damaged one shows at the next open.
        let db = if kind == IndexKind::Next && block == "d" {
            drop(db);
            match Database::open(dir.path(), small_options()) {
                Err(IndexError::Engine(e)) => {
                    assert!(e.is_corruption(), "{kind} {block}: {e}");
                    assert!(e.to_string().contains(&file_name), "names the file: {e}");
                    continue;
                }
                Err(other) => panic!("{kind} {block}: unexpected error {other}"),
                Ok(db) => db,
            }
        } else {
            db
        };
        match db.lookup("docs", "by_n", &AttrValue::Int(7), None) {
            Err(IndexError::Engine(e)) => {
                assert!(e.is_corruption(), "{kind} {block}: {e}");
                assert!(
                    e.to_string().contains(&file_name),
                    "{kind} {block}: the error names the file: {e}"
                );
            }
            Err(other) => panic!("{kind} {block}: unexpected error {other}"),
            Ok(result) => panic!(
                "{kind} {block}: a corrupt block gave {} hits instead of an error",
                result.hits.len()
            ),
        }
    }
}

/// A damaged document in a data block: `next` takes a value out of a data block without the
/// block's checksum (its secondary entry carries the value's own), so damage to the value a
/// query returns must still be reported as corruption naming the file, never returned.
#[test]
fn corrupt_document_in_a_data_block_is_reported() {
    for kind in [IndexKind::Next, IndexKind::SstLocal] {
        let dir = tempfile::tempdir().unwrap();
        let db = Database::open(dir.path(), small_options()).unwrap();
        db.create_collection("docs", "id").unwrap();
        db.create_index("docs", IndexSpec::new("by_n", "n", AttrType::Int, kind))
            .unwrap();
        for i in 0..50 {
            let doc = format!(
                r#"{{"id": "k{i:02}", "n": {}, "text": "marker-{i:02}"}}"#,
                i % 2
            );
            db.put("docs", doc.as_bytes()).unwrap();
        }
        db.flush().unwrap();
        db.engine().wait_for_background_work().unwrap();
        // Warm the query path (directories, global index) before the damage.
        let before = db.lookup("docs", "by_n", &AttrValue::Int(1), None).unwrap();
        assert_eq!(before.hits.len(), 25, "{kind}");
        let mut damaged = None;
        for entry in std::fs::read_dir(dir.path()).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_some_and(|e| e == "sst") {
                let mut bytes = std::fs::read(&path).unwrap();
                let marker = b"marker-17";
                if let Some(at) = bytes.windows(marker.len()).position(|w| w == marker) {
                    bytes[at + 7] ^= 0x01; // "marker-07" would be another document's text
                    std::fs::write(&path, &bytes).unwrap();
                    damaged = Some(path.file_name().unwrap().to_string_lossy().into_owned());
                }
            }
        }
        let file_name = damaged.expect("the document is in a table");
        match db.lookup("docs", "by_n", &AttrValue::Int(1), None) {
            Err(IndexError::Engine(e)) => {
                assert!(e.is_corruption(), "{kind}: {e}");
                assert!(
                    e.to_string().contains(&file_name),
                    "{kind}: names the file: {e}"
                );
            }
            Err(other) => panic!("{kind}: unexpected error {other}"),
            Ok(result) => panic!(
                "{kind}: a damaged document gave {} hits instead of an error",
                result.hits.len()
            ),
        }
    }
}
