//! Partial indexes (primary-key prefixes) with converted values (numbers, tags and points kept
//! as text, as `sift serve` stores Redis hashes), over every configuration of the model test:
//! documents written before the index (back-fill and the JSON fallback) and after it, replaces
//! and deletes, flushes and a reopen, every answer compared with a brute-force filter.

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

#[path = "model/configs.rs"]
#[allow(dead_code)]
mod configs;

use std::collections::BTreeMap;

use configs::{Attribute, CONFIGS};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use sift_index::{
    AttrType, AttrValue, Database, DatabaseOptions, GeoBox, IndexKind, ValueConversion,
};

const COLLECTION: &str = "c";
const PREFIXES: [&str; 2] = ["user:", "vip:"];

/// A document's id and its `price` field as JSON text.
fn document(id: &str, price: &str) -> String {
    format!(r#"{{"id":"{id}","price":{price}}}"#)
}

/// A price as the document holds it: text or a number; keys outside the prefixes may hold
/// text that is no number at all (they are not indexed, so it must not matter).
fn price(rng: &mut StdRng, covered: bool) -> (String, Option<f64>) {
    let value = f64::from(rng.gen_range(-20..80)) / 2.0;
    match rng.gen_range(0..4) {
        0 => (format!("{value}"), Some(value)),
        1 | 2 => (format!("\" {value} \""), Some(value)),
        _ if !covered => ("\"n/a\"".to_owned(), None),
        _ => (format!("\"{value}\""), Some(value)),
    }
}

/// Live documents: id → (price, write order).
type Model = BTreeMap<String, (Option<f64>, u64)>;

fn expected(model: &Model, lo: f64, hi: f64) -> Vec<String> {
    let mut hits: Vec<(&String, u64)> = model
        .iter()
        .filter(|(id, _)| PREFIXES.iter().any(|prefix| id.starts_with(prefix)))
        .filter_map(|(id, (price, order))| {
            price
                .filter(|p| (lo..=hi).contains(p))
                .map(|_| (id, *order))
        })
        .collect();
    hits.sort_by_key(|hit| std::cmp::Reverse(hit.1));
    hits.into_iter().map(|(id, _)| id.clone()).collect()
}

fn check(database: &Database, index: &str, model: &Model, context: &str) {
    for (lo, hi, limit) in [
        (f64::NEG_INFINITY, f64::INFINITY, None),
        (5.0, 20.0, None),
        (0.0, 30.0, Some(4)),
    ] {
        let got = database
            .range(
                COLLECTION,
                index,
                &AttrValue::Float(lo),
                &AttrValue::Float(hi),
                limit,
            )
            .unwrap_or_else(|e| panic!("{context}: range: {e}"));
        let got: Vec<String> = got
            .hits
            .iter()
            .map(|hit| String::from_utf8(hit.pk.clone()).unwrap())
            .collect();
        let mut want = expected(model, lo, hi);
        if let Some(limit) = limit {
            want.truncate(limit);
        }
        assert_eq!(got, want, "{context}: range [{lo}, {hi}] limit {limit:?}");
    }
}

#[test]
fn partial_indexes_of_text_numbers_match_a_brute_force_filter_in_every_configuration() {
    for config in CONFIGS {
        let dir = tempfile::tempdir().unwrap();
        let mut rng = StdRng::seed_from_u64(41);
        let mut database = Database::open(dir.path(), DatabaseOptions::default()).unwrap();
        database.create_collection(COLLECTION, "id").unwrap();
        let mut model = Model::new();
        let mut order = 0u64;
        let mut write = |database: &Database, model: &mut Model, rng: &mut StdRng| {
            order += 1;
            let id = format!(
                "{}{}",
                ["user:", "vip:", "other:", "use"][rng.gen_range(0..4)],
                rng.gen_range(0..40)
            );
            let covered = PREFIXES.iter().any(|prefix| id.starts_with(prefix));
            if rng.gen_bool(0.15) {
                database.delete(COLLECTION, id.as_bytes()).unwrap();
                model.remove(&id);
            } else {
                let (text, value) = price(rng, covered);
                database
                    .put(COLLECTION, document(&id, &text).as_bytes())
                    .unwrap();
                model.insert(id, (value, order));
            }
        };
        // Before the index: back-filled, or read from the JSON (embedded, next: no back-fill).
        for _ in 0..150 {
            write(&database, &mut model, &mut rng);
        }
        database.flush().unwrap();
        let attribute = Attribute {
            field: "price",
            attr_type: AttrType::Float,
        };
        let spec = config
            .spec("by_price", attribute)
            .with_key_prefixes(PREFIXES.map(str::to_owned).to_vec())
            .with_conversion(ValueConversion::NumberText);
        database
            .create_index(COLLECTION, spec)
            .unwrap_or_else(|e| panic!("{}: create: {e}", config.name));
        database.wait_for_index_builds();
        for step in 0..150 {
            write(&database, &mut model, &mut rng);
            if step % 50 == 49 {
                database.flush().unwrap();
            }
        }
        // A covered document whose price is no number is refused, and nothing changes.
        let refused = database.put(COLLECTION, document("user:1", "\"cheap\"").as_bytes());
        assert!(
            refused.is_err(),
            "{}: a covered text that is no number must be refused",
            config.name
        );
        if config.is_async() {
            database.wait_until_indexed().unwrap();
        }
        check(&database, "by_price", &model, config.name);
        database.close().unwrap();
        database = Database::open(dir.path(), DatabaseOptions::default()).unwrap();
        database.wait_for_index_builds();
        if config.is_async() {
            database.wait_until_indexed().unwrap();
        }
        check(
            &database,
            "by_price",
            &model,
            &format!("{} after reopen", config.name),
        );
        database.close().unwrap();
    }
}

#[test]
fn tags_fold_case_and_refuse_several_values_and_points_read_lon_lat_text() {
    let dir = tempfile::tempdir().unwrap();
    let database = Database::open(dir.path(), DatabaseOptions::default()).unwrap();
    database.create_collection(COLLECTION, "id").unwrap();
    let tag = ValueConversion::Tag {
        separator: ',',
        case_sensitive: false,
    };
    for kind in [IndexKind::Composite, IndexKind::Lazy, IndexKind::Next] {
        let name = format!("color_{kind}");
        let spec =
            sift_index::IndexSpec::new(&name, "color", AttrType::String, kind).with_conversion(tag);
        database.create_index(COLLECTION, spec).unwrap();
    }
    let spec = sift_index::IndexSpec::new("place", "place", AttrType::Geo, IndexKind::Composite)
        .with_conversion(ValueConversion::LonLatText)
        .with_key_prefixes(vec!["shop:".to_owned()]);
    database.create_index(COLLECTION, spec).unwrap();
    database
        .put(
            COLLECTION,
            br#"{"id":"shop:1","color":"Red","place":"2.35,48.86"}"#,
        )
        .unwrap();
    database
        .put(
            COLLECTION,
            br#"{"id":"shop:2","color":" red ","place":"-73.97,40.78"}"#,
        )
        .unwrap();
    database
        .put(
            COLLECTION,
            br#"{"id":"home:3","color":"RED","place":"not a point"}"#,
        )
        .unwrap();
    let refused = database.put(COLLECTION, br#"{"id":"shop:4","color":"red,blue"}"#);
    let message = refused.expect_err("two tags in one field").to_string();
    assert!(message.contains("several tags"), "{message}");
    assert!(
        database.get(COLLECTION, b"shop:4").unwrap().is_none(),
        "a refused write stores nothing"
    );
    for kind in [IndexKind::Composite, IndexKind::Lazy, IndexKind::Next] {
        let hits = database
            .lookup(
                COLLECTION,
                &format!("color_{kind}"),
                &AttrValue::String("red".into()),
                None,
            )
            .unwrap();
        let pks: Vec<&[u8]> = hits.hits.iter().map(|hit| hit.pk.as_slice()).collect();
        assert_eq!(pks, [b"home:3".as_slice(), b"shop:2", b"shop:1"], "{kind}");
    }
    let paris = GeoBox::new(2.0, 48.0, 3.0, 49.0).unwrap();
    let hits = database.within(COLLECTION, "place", &paris, None).unwrap();
    assert_eq!(hits.hits.len(), 1);
    assert_eq!(hits.hits[0].pk, b"shop:1");
    database.close().unwrap();
}
