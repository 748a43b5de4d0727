//! Model equivalence for `within` on geo attributes indexed by `next` (R-tree global index)
//! and `sst-local`: every query answers exactly like a brute-force box filter over a BTreeMap
//! model (same documents, same order, edges inside), through puts, updates, deletes, batches,
//! flushes, compactions, reopens and index creation on existing data; after every step the
//! R-tree of each `next` index must describe exactly the secondary blocks of the live files.
//! Both validation strategies and both block cuts (size only, 2-D value-aware δ) run. Plus
//! corruption of geo secondary meta blocks, and the R-tree's pruning. `SIFT_MODEL_STEPS`
//! lengthens the run, `SIFT_SEED` replays one.

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

mod common;

use common::{open, seed, small_options, steps, SeedGuard};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use sift_index::{
    AttrType, Database, GeoBox, IndexError, IndexKind, IndexSpec, SplitDelta, Validation, WriteOp,
};
use sift_lsm::ReadOptions;
use std::collections::BTreeMap;

#[derive(Debug, Clone)]
struct ModelDoc {
    seq: u64,
    doc: Vec<u8>,
    loc: Option<(f64, f64)>,
}

common::impl_model_version!(ModelDoc);

type Model = BTreeMap<Vec<u8>, ModelDoc>;

const PKS: u32 = 60;

/// Cluster centres far apart, so a δ split has gaps to split at.
const CLUSTERS: [(f64, f64); 4] = [(-120.0, 35.0), (10.0, 50.0), (139.5, -35.0), (0.0, 0.0)];
/// Grid step inside a cluster (exact in binary, so boxes can share edges with points).
const GRID: f64 = 0.25;

/// (name, kind, validation, δ in degrees)
const CONFIGS: [(&str, IndexKind, Validation, Option<f64>); 4] = [
    ("next_memo", IndexKind::Next, Validation::Memo, None),
    (
        "next_lite_delta",
        IndexKind::Next,
        Validation::GetLite,
        Some(1.0),
    ),
    (
        "local_memo_delta",
        IndexKind::SstLocal,
        Validation::Memo,
        Some(0.5),
    ),
    ("local_lite", IndexKind::SstLocal, Validation::GetLite, None),
];

fn random_point(rng: &mut StdRng) -> (f64, f64) {
    match rng.gen_range(0..20) {
        // Anywhere, including the world's edges.
        0 => (rng.gen_range(-180.0..=180.0), rng.gen_range(-90.0..=90.0)),
        1 => (
            [-180.0, 180.0][rng.gen_range(0..2)],
            [-90.0, 90.0, 0.0][rng.gen_range(0..3)],
        ),
        _ => {
            let (lon, lat) = CLUSTERS[rng.gen_range(0..CLUSTERS.len())];
            (
                lon + f64::from(rng.gen_range(-8..=8)) * GRID,
                lat + f64::from(rng.gen_range(-8..=8)) * GRID,
            )
        }
    }
}

fn random_box(rng: &mut StdRng) -> GeoBox {
    match rng.gen_range(0..12) {
        0 => GeoBox::new(-180.0, -90.0, 180.0, 90.0).unwrap(),
        1 => {
            // A single point (often one that documents hold).
            let (lon, lat) = random_point(rng);
            GeoBox::new(lon, lat, lon, lat).unwrap()
        }
        2 => {
            let (a, b): (f64, f64) = (rng.gen_range(-180.0..=180.0), rng.gen_range(-180.0..=180.0));
            let (c, d): (f64, f64) = (rng.gen_range(-90.0..=90.0), rng.gen_range(-90.0..=90.0));
            GeoBox::new(a.min(b), c.min(d), a.max(b), c.max(d)).unwrap()
        }
        _ => {
            // Grid-aligned inside a cluster: documents lie on its edges and corners.
            let (lon, lat) = CLUSTERS[rng.gen_range(0..CLUSTERS.len())];
            let mut axis = |centre: f64| {
                let a = centre + f64::from(rng.gen_range(-9..=9)) * GRID;
                let b = centre + f64::from(rng.gen_range(-9..=9)) * GRID;
                (a.min(b), a.max(b))
            };
            let (min_lon, max_lon) = axis(lon);
            let (min_lat, max_lat) = axis(lat);
            GeoBox::new(min_lon, min_lat, max_lon, max_lat).unwrap()
        }
    }
}

fn random_doc(rng: &mut StdRng, pk: u32) -> (Vec<u8>, Option<(f64, f64)>) {
    let loc = (rng.gen_range(0..10) > 0).then(|| random_point(rng));
    let mut doc =
        serde_json::json!({ "id": format!("pk{pk:02}"), "pad": "x".repeat(rng.gen_range(0..120)) });
    if let Some((lon, lat)) = loc {
        doc["loc"] = serde_json::json!([lon, lat]);
    } else if rng.gen_bool(0.5) {
        doc["loc"] = serde_json::Value::Null;
    }
    (serde_json::to_vec(&doc).unwrap(), loc)
}

fn spec(name: &str, config: usize) -> IndexSpec {
    let (_, kind, validation, delta) = CONFIGS[config];
    let mut spec = IndexSpec::new(name, "loc", AttrType::Geo, kind).with_validation(validation);
    if let Some(delta) = delta {
        spec = spec.with_split_delta(SplitDelta::new(delta).unwrap());
    }
    spec
}

fn create_indexes(db: &Database, prefix: &str) {
    for (position, (name, ..)) in CONFIGS.iter().enumerate() {
        db.create_index("docs", spec(&format!("{prefix}{name}"), position))
            .unwrap();
    }
}

fn check_all(db: &Database, model: &Model, rng: &mut StdRng, prefixes: &[&str], step: usize) {
    for prefix in prefixes {
        for (name, ..) in CONFIGS {
            let index = format!("{prefix}{name}");
            for _ in 0..2 {
                let limit = [Some(1), Some(3), Some(10), None][rng.gen_range(0..4)];
                let geo_box = random_box(rng);
                let got = db.within("docs", &index, &geo_box, limit).unwrap();
                let want = common::newest_first(
                    model,
                    |d| d.loc.is_some_and(|(lon, lat)| geo_box.contains(lon, lat)),
                    limit,
                );
                let got: Vec<(Vec<u8>, u64, Vec<u8>)> = got
                    .hits
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
                    "step {step}: {index} within {geo_box} limit {limit:?}: got {:?}, want {:?}",
                    show(&got),
                    show(&want)
                );
            }
        }
    }
}

/// The R-tree of every `next` index describes exactly the live files' secondary blocks.
/// Returns how many live files have secondary blocks (summed over the indexes).
fn check_global_indexes(db: &Database, prefixes: &[&str], step: usize) -> usize {
    db.engine().wait_for_background_work().unwrap();
    let mut indexed_files = 0;
    for prefix in prefixes {
        for (name, kind, ..) in CONFIGS {
            if kind != IndexKind::Next {
                continue;
            }
            let index = format!("{prefix}{name}");
            let report = db
                .check_global_index("docs", &index)
                .unwrap_or_else(|e| panic!("step {step}: {index}: {e}"));
            indexed_files += report.files_indexed;
        }
    }
    indexed_files
}

fn put_doc(db: &Database, model: &mut Model, rng: &mut StdRng, pk: u32) {
    let (json, loc) = random_doc(rng, pk);
    let seq = db.put("docs", &json).unwrap();
    model.insert(
        format!("pk{pk:02}").into_bytes(),
        ModelDoc {
            seq,
            doc: json,
            loc,
        },
    );
}

fn write_batch(db: &Database, model: &mut Model, rng: &mut StdRng) {
    let mut jsons = Vec::new();
    let mut kinds = Vec::new();
    for _ in 0..rng.gen_range(1..6) {
        let pk = rng.gen_range(0..PKS / 4); // repeats within a batch
        if rng.gen_bool(0.7) {
            let (json, loc) = random_doc(rng, pk);
            jsons.push(json);
            kinds.push((pk, Some(loc)));
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
            Some(loc) => {
                model.insert(
                    key,
                    ModelDoc {
                        seq: result.unwrap(),
                        doc: json.clone(),
                        loc,
                    },
                );
            }
            None => assert_eq!(result.is_some(), model.remove(&key).is_some()),
        }
    }
}

#[test]
fn geo_next_and_sst_local_match_the_model() {
    let seed = seed();
    let _guard = SeedGuard(seed);
    let mut rng = StdRng::seed_from_u64(seed);
    let dir = tempfile::tempdir().unwrap();
    let mut db = open(dir.path());
    db.create_collection("docs", "id").unwrap();
    // Documents written before the first indexes: their tables are scanned until rewritten.
    let mut model = Model::new();
    for pk in 0..PKS / 2 {
        put_doc(&db, &mut model, &mut rng, pk);
    }
    db.flush().unwrap();
    create_indexes(&db, "");
    let total_steps = steps(200);
    let mut late_created = false;
    let mut indexed_files = 0;
    for step in 0..total_steps {
        match rng.gen_range(0..100) {
            0..=54 => {
                let pk = rng.gen_range(0..PKS);
                put_doc(&db, &mut model, &mut rng, pk);
            }
            55..=62 => {
                // Rewrite an existing document with the same point.
                if let Some((pk, doc)) = common::random_entry(&model, &mut rng) {
                    let seq = db.put("docs", &doc.doc).unwrap();
                    model.insert(pk, ModelDoc { seq, ..doc });
                }
            }
            63..=74 => {
                let pk = format!("pk{:02}", rng.gen_range(0..PKS)).into_bytes();
                let result = db.delete("docs", &pk).unwrap();
                assert_eq!(
                    result.is_some(),
                    model.remove(&pk).is_some(),
                    "step {step}: delete result"
                );
            }
            75..=82 => write_batch(&db, &mut model, &mut rng),
            83..=88 => db.flush().unwrap(),
            89..=91 => db.compact_all().unwrap(),
            92..=95 => {
                drop(db);
                db = open(dir.path());
            }
            _ => {
                if late_created {
                    // Drop one late index and create it again on the current data.
                    let config = rng.gen_range(0..CONFIGS.len());
                    let index = format!("late_{}", CONFIGS[config].0);
                    db.drop_index("docs", &index).unwrap();
                    db.create_index("docs", spec(&index, config)).unwrap();
                } else {
                    create_indexes(&db, "late_");
                    late_created = true;
                }
            }
        }
        let prefixes: &[&str] = if late_created { &["", "late_"] } else { &[""] };
        check_all(&db, &model, &mut rng, prefixes, step);
        indexed_files += check_global_indexes(&db, prefixes, step);
    }
    assert!(
        indexed_files > 0,
        "the run should have written tables with secondary blocks"
    );
}

/// Points exactly on a box's edges and corners are inside, from the memtable and from tables.
#[test]
fn box_edges_are_inside() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path());
    db.create_collection("docs", "id").unwrap();
    for (name, kind) in [("next", IndexKind::Next), ("local", IndexKind::SstLocal)] {
        db.create_index("docs", IndexSpec::new(name, "loc", AttrType::Geo, kind))
            .unwrap();
    }
    let points = [
        (1.0, 2.0),
        (3.0, 4.0),
        (1.0, 4.0),
        (3.0, 2.0),
        (2.0, 2.0),
        (1.0, 3.0),
        (0.999_999, 3.0),
        (2.0, 4.000_001),
    ];
    for (i, (lon, lat)) in points.iter().enumerate() {
        db.put(
            "docs",
            format!(r#"{{"id": "p{i}", "loc": [{lon}, {lat}]}}"#).as_bytes(),
        )
        .unwrap();
    }
    let geo_box = GeoBox::new(1.0, 2.0, 3.0, 4.0).unwrap();
    for flushed in [false, true] {
        if flushed {
            db.flush().unwrap();
            db.engine().wait_for_background_work().unwrap();
        }
        for index in ["next", "local"] {
            let mut pks: Vec<String> = db
                .within("docs", index, &geo_box, None)
                .unwrap()
                .hits
                .iter()
                .map(|hit| String::from_utf8(hit.pk.clone()).unwrap())
                .collect();
            pks.sort();
            assert_eq!(
                pks,
                ["p0", "p1", "p2", "p3", "p4", "p5"],
                "{index} flushed {flushed}"
            );
        }
    }
    let report = db.check_global_index("docs", "next").unwrap();
    assert_eq!(report.files_indexed, 1);
}

/// The R-tree sends a small box to few secondary blocks: with four far clusters and δ, a box
/// inside one cluster reads a fraction of the blocks.
#[test]
fn rtree_prunes_blocks_of_other_clusters() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path());
    db.create_collection("docs", "id").unwrap();
    db.create_index(
        "docs",
        IndexSpec::new("by_loc", "loc", AttrType::Geo, IndexKind::Next)
            .with_split_delta(SplitDelta::new(1.0).unwrap()),
    )
    .unwrap();
    let mut rng = StdRng::seed_from_u64(7);
    let mut inside = 0;
    let geo_box = GeoBox::new(9.5, 49.5, 10.5, 50.5).unwrap();
    for i in 0..2000 {
        let (lon, lat) = CLUSTERS[i % CLUSTERS.len()];
        let (lon, lat) = (
            lon + rng.gen_range(-2.0..2.0),
            lat + rng.gen_range(-2.0..2.0),
        );
        inside += usize::from(geo_box.contains(lon, lat));
        db.put(
            "docs",
            format!(r#"{{"id": "k{i:04}", "loc": [{lon}, {lat}]}}"#).as_bytes(),
        )
        .unwrap();
    }
    db.flush().unwrap();
    db.compact_all().unwrap();
    db.engine().wait_for_background_work().unwrap();
    let report = db.check_global_index("docs", "by_loc").unwrap();
    let result = db.within("docs", "by_loc", &geo_box, None).unwrap();
    assert_eq!(result.hits.len(), inside);
    assert!(
        report.blocks >= 8,
        "expected several secondary blocks, got {report:?}"
    );
    // Secondary blocks plus data blocks read; far less than every secondary block of the
    // four clusters plus the data blocks of the hits.
    assert!(
        result.stats.candidates_examined < 2000 / 3,
        "examined {} candidates for {inside} hits ({report:?})",
        result.stats.candidates_examined
    );
}

/// Damaged geo secondary meta blocks (a secondary block, a directory) are reported as
/// corruption naming the file, never as missing or wrong results.
#[test]
fn corrupt_geo_secondary_blocks_are_reported() {
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
            .create_index("docs", IndexSpec::new("by_loc", "loc", AttrType::Geo, kind))
            .unwrap();
        for i in 0..50 {
            db.put(
                "docs",
                format!(r#"{{"id": "k{i:02}", "loc": [10.5, -20.25]}}"#).as_bytes(),
            )
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
        let geo_box = GeoBox::new(10.0, -21.0, 11.0, -20.0).unwrap();
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
        match db.within("docs", "by_loc", &geo_box, None) {
            Err(IndexError::Engine(e)) => {
                assert!(e.is_corruption(), "{kind} {block}: {e}");
                assert!(
                    e.to_string().contains(&file_name),
                    "{kind} {block}: the error names the file: {e}"
                );
                match &e {
                    sift_lsm::Error::Corruption { offset, .. } => assert_eq!(
                        *offset, handle.offset,
                        "{kind} {block}: the offset is the damaged block's"
                    ),
                    other => panic!("{kind} {block}: not a corruption error: {other}"),
                }
            }
            Err(other) => panic!("{kind} {block}: unexpected error {other}"),
            Ok(result) => panic!(
                "{kind} {block}: a corrupt block gave {} hits instead of an error",
                result.hits.len()
            ),
        }
    }
}
