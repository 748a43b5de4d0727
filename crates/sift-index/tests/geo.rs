//! Spatial model test: `within` on `memory` and `composite` geo indexes (every maintenance)
//! answers exactly like a brute-force box filter over a BTreeMap model — same documents, same
//! order — through puts, moves, same-point rewrites, deletes, batches, flushes, compactions,
//! reopens (clean and not), with points on box edges, at the poles and the antimeridian, and
//! degenerate boxes. Also: the errors of geo queries, and the tweet generator's coordinates.
//! `SIFT_MODEL_STEPS` lengthens the run, `SIFT_SEED` replays one.

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

mod common;

use common::{open, seed, steps, SeedGuard, CONFIGS};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use sift_index::{
    AttrType, AttrValue, Database, GeoBox, IndexError, IndexKind, IndexSpec, WriteOp,
};
use std::collections::BTreeMap;

#[derive(Debug, Clone)]
struct ModelDoc {
    seq: u64,
    doc: Vec<u8>,
    point: Option<(f64, f64)>,
}

type Model = BTreeMap<Vec<u8>, ModelDoc>;
/// A document's JSON and its point.
type GeoDoc = (Vec<u8>, Option<(f64, f64)>);

const PKS: u32 = 60;

/// Coordinates drawn mostly from a coarse grid (so points fall exactly on box edges and share
/// quadtree cells), sometimes the extremes, sometimes anything.
fn coordinate(rng: &mut StdRng, limit: f64) -> f64 {
    match rng.gen_range(0..10) {
        0 => limit * if rng.gen_bool(0.5) { 1.0 } else { -1.0 },
        1 => rng.gen_range(-limit..=limit),
        2 => 0.0,
        _ => f64::from(rng.gen_range(-8..=8)) * 0.25,
    }
}

fn point(rng: &mut StdRng) -> (f64, f64) {
    (coordinate(rng, 180.0), coordinate(rng, 90.0))
}

fn random_doc(rng: &mut StdRng, pk: u32) -> (Vec<u8>, Option<(f64, f64)>) {
    let mut doc = serde_json::json!({ "id": format!("pk{pk:02}"), "n": rng.gen_range(0..3) });
    let point = (rng.gen_range(0..8) > 0).then(|| point(rng));
    match point {
        Some((lon, lat)) => doc["loc"] = serde_json::json!([lon, lat]),
        None if rng.gen_bool(0.5) => doc["loc"] = serde_json::Value::Null,
        None => {}
    }
    (serde_json::to_vec(&doc).unwrap(), point)
}

fn random_box(rng: &mut StdRng, model: &Model) -> GeoBox {
    match rng.gen_range(0..8) {
        0 => GeoBox::new(-180.0, -90.0, 180.0, 90.0).unwrap(),
        1 => {
            // Degenerate: exactly one stored point (or the origin), or a line through it.
            let (lon, lat) = model
                .values()
                .filter_map(|doc| doc.point)
                .nth(rng.gen_range(0..model.len().max(1)))
                .unwrap_or((0.0, 0.0));
            match rng.gen_range(0..3) {
                0 => GeoBox::new(lon, lat, lon, lat).unwrap(),
                1 => GeoBox::new(lon, -90.0, lon, 90.0).unwrap(),
                _ => GeoBox::new(-180.0, lat, 180.0, lat).unwrap(),
            }
        }
        _ => {
            let (a, c) = point(rng);
            let (b, d) = point(rng);
            GeoBox::new(a.min(b), c.min(d), a.max(b), c.max(d)).unwrap()
        }
    }
}

fn geo_configs() -> Vec<(&'static str, IndexKind, sift_index::Maintenance, bool)> {
    CONFIGS
        .into_iter()
        .filter(|(_, kind, ..)| matches!(kind, IndexKind::Composite | IndexKind::Memory))
        .collect()
}

fn create_indexes(db: &Database) {
    for (name, kind, maintenance, read_repair) in CONFIGS {
        let spec = IndexSpec::new(&format!("geo_{name}"), "loc", AttrType::Geo, kind)
            .with_maintenance(maintenance)
            .with_read_repair(read_repair);
        db.create_index("docs", spec).unwrap();
    }
    db.create_index(
        "docs",
        IndexSpec::new("n", "n", AttrType::Int, IndexKind::Composite),
    )
    .unwrap();
}

fn expected(model: &Model, geo_box: &GeoBox, limit: Option<usize>) -> Vec<(Vec<u8>, u64)> {
    let mut hits: Vec<(Vec<u8>, u64)> = model
        .iter()
        .filter(|(_, doc)| {
            doc.point
                .is_some_and(|(lon, lat)| geo_box.contains(lon, lat))
        })
        .map(|(pk, doc)| (pk.clone(), doc.seq))
        .collect();
    hits.sort_by_key(|hit| std::cmp::Reverse(hit.1));
    hits.truncate(limit.unwrap_or(usize::MAX));
    hits
}

fn check(db: &Database, model: &Model, rng: &mut StdRng, step: usize) {
    for _ in 0..3 {
        let geo_box = random_box(rng, model);
        for limit in [Some(1), Some(3), None] {
            let want = expected(model, &geo_box, limit);
            for (name, ..) in geo_configs() {
                let index = format!("geo_{name}");
                let result = db.within("docs", &index, &geo_box, limit).unwrap();
                let got: Vec<(Vec<u8>, u64)> = result
                    .hits
                    .iter()
                    .map(|hit| (hit.pk.clone(), hit.seq))
                    .collect();
                let show = |hits: &[(Vec<u8>, u64)]| {
                    hits.iter()
                        .map(|(pk, seq)| format!("{}@{seq}", String::from_utf8_lossy(pk)))
                        .collect::<Vec<_>>()
                };
                assert!(
                    got == want,
                    "step {step}: {index} within {geo_box} limit {limit:?}: got {:?}, want {:?} \
                     (points wanted: {:?})",
                    show(&got),
                    show(&want),
                    want.iter()
                        .map(|(pk, _)| model[pk].point)
                        .collect::<Vec<_>>()
                );
                for hit in &result.hits {
                    assert_eq!(hit.doc, model[&hit.pk].doc, "step {step}: {index} document");
                }
            }
        }
    }
}

#[test]
fn within_matches_the_model() {
    let seed = seed();
    let _guard = SeedGuard(seed);
    let mut rng = StdRng::seed_from_u64(seed);
    let dir = tempfile::tempdir().unwrap();
    let mut db = open(dir.path());
    db.create_collection("docs", "id").unwrap();
    create_indexes(&db);
    let mut model = Model::new();
    for step in 0..steps(300) {
        match rng.gen_range(0..100) {
            0..=54 => {
                let pk = rng.gen_range(0..PKS);
                let (json, point) = random_doc(&mut rng, pk);
                let seq = db.put("docs", &json).unwrap();
                model.insert(
                    format!("pk{pk:02}").into_bytes(),
                    ModelDoc {
                        seq,
                        doc: json,
                        point,
                    },
                );
            }
            55..=62 => {
                // Same document again: same point, new version.
                if let Some((pk, doc)) = model
                    .iter()
                    .nth(rng.gen_range(0..model.len().max(1)))
                    .map(|(pk, doc)| (pk.clone(), doc.clone()))
                {
                    let seq = db.put("docs", &doc.doc).unwrap();
                    model.insert(pk, ModelDoc { seq, ..doc });
                }
            }
            63..=74 => {
                let pk = format!("pk{:02}", rng.gen_range(0..PKS)).into_bytes();
                let deleted = db.delete("docs", &pk).unwrap();
                assert_eq!(deleted.is_some(), model.remove(&pk).is_some());
            }
            75..=82 => {
                let writes: Vec<(u32, Option<GeoDoc>)> = (0..rng.gen_range(1..5))
                    .map(|_| {
                        let pk = rng.gen_range(0..PKS / 4);
                        let put = rng.gen_bool(0.7).then(|| random_doc(&mut rng, pk));
                        (pk, put)
                    })
                    .collect();
                let pk_texts: Vec<Vec<u8>> = writes
                    .iter()
                    .map(|(pk, _)| format!("pk{pk:02}").into_bytes())
                    .collect();
                let ops: Vec<WriteOp<'_>> = writes
                    .iter()
                    .zip(&pk_texts)
                    .map(|((_, put), pk)| match put {
                        Some((json, _)) => WriteOp::Put(json),
                        None => WriteOp::Delete(pk),
                    })
                    .collect();
                let results = db.write("docs", &ops).unwrap();
                for (((_, put), pk), result) in writes.iter().zip(&pk_texts).zip(results) {
                    match put {
                        Some((json, point)) => {
                            model.insert(
                                pk.clone(),
                                ModelDoc {
                                    seq: result.unwrap(),
                                    doc: json.clone(),
                                    point: *point,
                                },
                            );
                        }
                        None => assert_eq!(result.is_some(), model.remove(pk).is_some()),
                    }
                }
            }
            83..=85 => {
                // Bad geo values are rejected and change nothing.
                let bad = [
                    r#"{"id": "pk01", "loc": [181, 0]}"#,
                    r#"{"id": "pk01", "loc": [0, -90.5]}"#,
                    r#"{"id": "pk01", "loc": [1]}"#,
                    r#"{"id": "pk01", "loc": "here"}"#,
                ];
                let json = bad[rng.gen_range(0..bad.len())];
                assert!(db.put("docs", json.as_bytes()).is_err(), "{json}");
            }
            86..=89 => db.flush().unwrap(),
            90..=92 => db.compact_all().unwrap(),
            93..=95 => {
                // Reopen: after a clean close (memory indexes from snapshots) or not (rebuilt).
                if rng.gen_bool(0.5) {
                    db.close().unwrap();
                } else {
                    drop(db);
                }
                db = open(dir.path());
            }
            _ => {}
        }
        check(&db, &model, &mut rng, step);
    }
}

#[test]
fn geo_query_errors_are_clear() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path());
    db.create_collection("docs", "id").unwrap();
    create_indexes(&db);
    db.put("docs", br#"{"id": "a", "n": 1, "loc": [1, 2]}"#)
        .unwrap();
    let whole = GeoBox::new(-180.0, -90.0, 180.0, 90.0).unwrap();
    let message = |error: IndexError| error.to_string();
    for (name, kind, ..) in CONFIGS {
        let index = format!("geo_{name}");
        let point = AttrValue::geo(1.0, 2.0).unwrap();
        let lookup = message(db.lookup("docs", &index, &point, None).unwrap_err());
        assert!(lookup.contains("within"), "{lookup}");
        let range = message(db.range("docs", &index, &point, &point, None).unwrap_err());
        assert!(range.contains("within"), "{range}");
        let within = db.within("docs", &index, &whole, None);
        match kind {
            IndexKind::Composite | IndexKind::Memory => {
                assert_eq!(within.unwrap().hits.len(), 1, "{index}");
            }
            _ => {
                let error = message(within.unwrap_err());
                assert!(
                    error.contains(&format!("not supported by kind {kind}")),
                    "{index}: {error}"
                );
            }
        }
    }
    let not_geo = message(db.within("docs", "n", &whole, None).unwrap_err());
    assert!(
        not_geo.contains("geo attribute") && not_geo.contains("int"),
        "{not_geo}"
    );
    let unknown = message(db.within("docs", "nope", &whole, None).unwrap_err());
    assert!(unknown.contains("no index `nope`"), "{unknown}");
    assert!(db
        .within("docs", "geo_memory", &whole, Some(0))
        .unwrap()
        .hits
        .is_empty());
}

#[test]
fn tweet_coordinates_match_brute_force() {
    let seed = seed();
    let _guard = SeedGuard(seed);
    let mut rng = StdRng::seed_from_u64(seed);
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path());
    db.create_collection("tweets", "tweet_id").unwrap();
    for (name, kind) in [
        ("memory", IndexKind::Memory),
        ("composite", IndexKind::Composite),
    ] {
        db.create_index(
            "tweets",
            IndexSpec::new(name, "place.coordinates", AttrType::Geo, kind),
        )
        .unwrap();
    }
    let mut generator = sift_workload::tweet::TweetGenerator::new(
        sift_workload::tweet::TweetConfig::for_tweets(3000, seed),
    )
    .unwrap();
    let mut stored: Vec<(u64, u64, f64, f64)> = Vec::new(); // (seq, tweet id, lon, lat)
    for _ in 0..3000 {
        let tweet = generator.next_tweet();
        let seq = db.put("tweets", tweet.json.as_bytes()).unwrap();
        stored.push((
            seq,
            tweet.fields.tweet_id,
            tweet.fields.longitude,
            tweet.fields.latitude,
        ));
    }
    db.flush().unwrap();
    let mut boxes = vec![
        GeoBox::new(-74.1, 40.6, -73.8, 40.9).unwrap(), // around New York City
        GeoBox::new(-79.762, 40.496, -71.856, 45.016).unwrap(), // the whole state
        GeoBox::new(-77.7, 43.1, -77.5, 43.2).unwrap(), // Rochester
    ];
    for _ in 0..5 {
        // A box whose corners are stored points: both lie exactly on its edges.
        let (_, _, lon_a, lat_a) = stored[rng.gen_range(0..stored.len())];
        let (_, _, lon_b, lat_b) = stored[rng.gen_range(0..stored.len())];
        boxes.push(
            GeoBox::new(
                lon_a.min(lon_b),
                lat_a.min(lat_b),
                lon_a.max(lon_b),
                lat_a.max(lat_b),
            )
            .unwrap(),
        );
    }
    for geo_box in boxes {
        let mut want: Vec<(u64, Vec<u8>)> = stored
            .iter()
            .filter(|(_, _, lon, lat)| geo_box.contains(*lon, *lat))
            .map(|(seq, id, _, _)| (*seq, id.to_string().into_bytes()))
            .collect();
        want.sort_by_key(|hit| std::cmp::Reverse(hit.0));
        for limit in [Some(10), None] {
            let want: Vec<(u64, Vec<u8>)> = want
                .iter()
                .take(limit.unwrap_or(usize::MAX))
                .cloned()
                .collect();
            for index in ["memory", "composite"] {
                let got: Vec<(u64, Vec<u8>)> = db
                    .within("tweets", index, &geo_box, limit)
                    .unwrap()
                    .hits
                    .into_iter()
                    .map(|hit| (hit.seq, hit.pk))
                    .collect();
                assert!(got == want, "{index} within {geo_box} limit {limit:?}");
            }
        }
    }
}
