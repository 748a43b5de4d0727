//! `within` on `next` and `sst-local` geo indexes: box edges are inside, the R-tree prunes the
//! blocks of other clusters, corrupt geo secondary meta blocks are reported. (Model
//! equivalence for every kind and type, geo included, is in `tests/model/`.)

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

mod common;

use common::{open, small_options};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use sift_index::{AttrType, Database, GeoBox, IndexError, IndexKind, IndexSpec, SplitDelta};
use sift_lsm::ReadOptions;

/// Cluster centres far apart, so a δ split has gaps to split at.
const CLUSTERS: [(f64, f64); 4] = [(-120.0, 35.0), (10.0, 50.0), (139.5, -35.0), (0.0, 0.0)];
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
