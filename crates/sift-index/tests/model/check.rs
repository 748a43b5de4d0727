//! Queries and what they must answer: brute force over the model for every configuration, the
//! metamorphic check (every configuration answers one query identically), and the invariants
//! particular kinds promise (a `next` global index describes the live files; a `deferred`
//! index's garbage is what the model says; an async index holds exactly the live entries).

use crate::configs::{Attribute, Config, ATTRIBUTES, BLIND, CONFIGS, DOCS, LATE_FIELDS};
use crate::documents::{
    random_point, Model, ModelDoc, Values, BEFORE_EVERY_DOCUMENT_MS, CLOCK_ORIGIN_MS, CLUSTERS,
    FLOATS, GRID, STRINGS, TIME_TEXTS,
};
use rand::rngs::StdRng;
use rand::Rng;
use sift_index::{AttrType, AttrValue, Database, GeoBox, IndexKind, Maintenance, QueryResult};
use sift_lsm::ReadOptions;
use std::collections::BTreeSet;

/// One query on one attribute.
#[derive(Debug, Clone)]
pub enum Query {
    Lookup(AttrValue),
    Range(AttrValue, AttrValue),
    Within(GeoBox),
}

/// A hit as the model compares it: pk, sequence number, JSON.
pub type Answer = Vec<(String, u64, String)>;

impl Query {
    /// Whether a document with `values` answers this query on `attribute`.
    fn matches(&self, values: &Values, attribute: Attribute) -> bool {
        let value: Option<AttrValue> = match attribute.attr_type {
            AttrType::Int => values.n.map(AttrValue::Int),
            AttrType::Float => values.f.map(AttrValue::Float),
            AttrType::String => values.s.clone().map(AttrValue::String),
            AttrType::Time => values.t.map(AttrValue::Time),
            AttrType::Geo => values.g.map(|(lon, lat)| AttrValue::Geo { lon, lat }),
        };
        let Some(value) = value else {
            return false;
        };
        match (self, &value) {
            (Query::Lookup(v), _) => order(&value, v).is_eq(),
            (Query::Range(lo, hi), _) => order(lo, &value).is_le() && order(&value, hi).is_le(),
            (Query::Within(b), AttrValue::Geo { lon, lat }) => {
                b.min_lon <= *lon && *lon <= b.max_lon && b.min_lat <= *lat && *lat <= b.max_lat
            }
            (Query::Within(_), _) => false,
        }
    }

    fn run(
        &self,
        db: &Database,
        collection: &str,
        index: &str,
        limit: Option<usize>,
    ) -> sift_index::Result<QueryResult> {
        match self {
            Query::Lookup(v) => db.lookup(collection, index, v, limit),
            Query::Range(lo, hi) => db.range(collection, index, lo, hi, limit),
            Query::Within(geo_box) => db.within(collection, index, geo_box, limit),
        }
    }
}

/// The model's order of two values of one type (floats by value: `-0.0 == 0.0`).
fn order(a: &AttrValue, b: &AttrValue) -> std::cmp::Ordering {
    match (a, b) {
        (AttrValue::Int(a), AttrValue::Int(b)) | (AttrValue::Time(a), AttrValue::Time(b)) => {
            a.cmp(b)
        }
        (AttrValue::Float(a), AttrValue::Float(b)) => a.partial_cmp(b).expect("no NaN"),
        (AttrValue::String(a), AttrValue::String(b)) => a.as_bytes().cmp(b.as_bytes()),
        _ => panic!("values of different types: {a:?} and {b:?}"),
    }
}

fn random_geo_box(rng: &mut StdRng) -> GeoBox {
    match rng.gen_range(0..12) {
        0 => GeoBox::new(-180.0, -90.0, 180.0, 90.0).expect("a box"),
        1 => {
            // A single point (often one that documents hold).
            let (lon, lat) = random_point(rng);
            GeoBox::new(lon, lat, lon, lat).expect("a box")
        }
        2 => {
            let (a, b): (f64, f64) = (rng.gen_range(-180.0..=180.0), rng.gen_range(-180.0..=180.0));
            let (c, d): (f64, f64) = (rng.gen_range(-90.0..=90.0), rng.gen_range(-90.0..=90.0));
            GeoBox::new(a.min(b), c.min(d), a.max(b), c.max(d)).expect("a box")
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
            GeoBox::new(min_lon, min_lat, max_lon, max_lat).expect("a box")
        }
    }
}

/// A value of `attr_type` that documents often hold (and sometimes one none does).
fn random_value(rng: &mut StdRng, attr_type: AttrType, clock: u64) -> AttrValue {
    match attr_type {
        AttrType::Int => AttrValue::Int(rng.gen_range(-3..36)),
        AttrType::Float => match rng.gen_range(0..10) {
            0 => AttrValue::Float([f64::NEG_INFINITY, f64::INFINITY, 3.0][rng.gen_range(0..3)]),
            _ => AttrValue::Float(FLOATS[rng.gen_range(0..FLOATS.len())]),
        },
        AttrType::String => AttrValue::String(STRINGS[rng.gen_range(0..STRINGS.len())].to_string()),
        AttrType::Time => match rng.gen_range(0..3) {
            0 => AttrValue::Time(TIME_TEXTS[rng.gen_range(0..TIME_TEXTS.len())].1),
            _ => AttrValue::Time(CLOCK_ORIGIN_MS + rng.gen_range(0..=clock as i64 + 1) * 1000),
        },
        AttrType::Geo => unreachable!("geo is queried with boxes"),
    }
}

/// A random LOOKUP or RANGE (WITHIN for geo) on `attribute`.
pub fn random_query(rng: &mut StdRng, attribute: Attribute, clock: u64) -> Query {
    if attribute.attr_type == AttrType::Geo {
        return Query::Within(random_geo_box(rng));
    }
    if rng.gen_bool(0.4) {
        return Query::Lookup(random_value(rng, attribute.attr_type, clock));
    }
    let a = random_value(rng, attribute.attr_type, clock);
    let b = if attribute.attr_type == AttrType::Int && rng.gen_bool(0.7) {
        let AttrValue::Int(a) = a else { unreachable!() };
        AttrValue::Int(a + rng.gen_range(0..15))
    } else {
        random_value(rng, attribute.attr_type, clock)
    };
    if order(&a, &b).is_le() {
        Query::Range(a, b)
    } else {
        Query::Range(b, a)
    }
}

pub fn random_limit(rng: &mut StdRng) -> Option<usize> {
    [Some(1), Some(3), Some(10), None][rng.gen_range(0..4)]
}

/// Brute force: the documents answering `query`, newest first in collection `slot`.
pub fn expected(
    model: &Model,
    query: &Query,
    attribute: Attribute,
    slot: usize,
    limit: Option<usize>,
) -> Answer {
    let mut hits: Vec<(&String, &ModelDoc)> = model
        .iter()
        .filter(|(_, doc)| query.matches(&doc.values, attribute))
        .collect();
    hits.sort_by_key(|(_, doc)| std::cmp::Reverse(doc.seqs[slot]));
    hits.truncate(limit.unwrap_or(usize::MAX));
    hits.into_iter()
        .map(|(pk, doc)| (pk.clone(), doc.seqs[slot], doc.json.clone()))
        .collect()
}

fn answer(result: &QueryResult) -> Answer {
    result
        .hits
        .iter()
        .map(|hit| {
            (
                String::from_utf8(hit.pk.clone()).expect("UTF-8 pk"),
                hit.seq,
                String::from_utf8(hit.doc.clone()).expect("UTF-8 JSON"),
            )
        })
        .collect()
}

fn show(answer: &Answer) -> Vec<String> {
    answer
        .iter()
        .map(|(pk, seq, _)| format!("{pk}@{seq}"))
        .collect()
}

/// Every index of the driver that answers queries on `attribute`: (configuration, index name).
fn indexes_of(attribute: Attribute, prefixes: &[&str]) -> Vec<(Config, String)> {
    let mut indexes = Vec::new();
    for prefix in prefixes {
        if !prefix.is_empty() && !LATE_FIELDS.contains(&attribute.field) {
            continue;
        }
        for config in CONFIGS {
            if config.supports(attribute.attr_type) {
                indexes.push((config, config.index_name(prefix, attribute.field)));
            }
        }
    }
    indexes
}

/// Before the asynchronous indexes are waited for: every hit of an async index is a live
/// version holding a matching value, newest first, none twice; missing hits are allowed.
pub fn check_async_current_or_missing(
    db: &Database,
    model: &Model,
    rng: &mut StdRng,
    prefixes: &[&str],
    clock: u64,
    what: &str,
) {
    for attribute in ATTRIBUTES {
        let query = random_query(rng, attribute, clock);
        for (config, index) in indexes_of(attribute, prefixes) {
            if !config.is_async() {
                continue;
            }
            let got = answer(
                &query
                    .run(db, DOCS, &index, None)
                    .unwrap_or_else(|e| panic!("{what}: {index}: {e}")),
            );
            let context = format!("{what}: {index} {query:?} before the workers caught up");
            let mut seen = BTreeSet::new();
            for (pk, seq, json) in &got {
                let doc = model
                    .get(pk)
                    .unwrap_or_else(|| panic!("{context}: deleted document {pk} returned"));
                assert_eq!(*seq, doc.seqs[0], "{context}: stale version of {pk}");
                assert_eq!(json, &doc.json, "{context}: {pk}");
                assert!(
                    query.matches(&doc.values, attribute),
                    "{context}: {pk} does not match"
                );
                assert!(seen.insert(pk.clone()), "{context}: {pk} twice");
            }
            assert!(
                got.windows(2).all(|pair| pair[0].1 > pair[1].1),
                "{context}: not newest first: {:?}",
                show(&got)
            );
        }
    }
}

/// Counters the driver sums over a run, to show that the paths it means to test ran.
#[derive(Debug, Default)]
pub struct Coverage {
    /// Hits compared with the model.
    pub hits_compared: u64,
    /// Live files described by `next` global indexes, summed over checks.
    pub files_indexed: usize,
    /// Blocks and tables the embedded time index skipped on a window before every document.
    pub zone_map_skips: u64,
}

/// Two queries per attribute, each with a random limit, on every index: all configurations
/// answer the same documents in the same order (metamorphic), and each answers exactly what
/// brute force over the model gives for its collection (documents, order, sequence numbers).
/// The caller has waited for the asynchronous indexes.
pub fn check_queries(
    db: &Database,
    model: &Model,
    rng: &mut StdRng,
    prefixes: &[&str],
    clock: u64,
    what: &str,
    coverage: &mut Coverage,
) {
    for attribute in ATTRIBUTES {
        for _ in 0..2 {
            let query = random_query(rng, attribute, clock);
            let limit = random_limit(rng);
            let context = format!("{what}: {} {query:?} limit {limit:?}", attribute.field);
            let mut answers: Vec<(String, Answer, usize)> = Vec::new();
            for (config, index) in indexes_of(attribute, prefixes) {
                let result = query
                    .run(db, config.collection(), &index, limit)
                    .unwrap_or_else(|e| panic!("{context}: {index}: {e}"));
                answers.push((index, answer(&result), config.collection_slot()));
            }
            check_metamorphic(&answers, &context);
            for (index, got, slot) in &answers {
                let want = expected(model, &query, attribute, *slot, limit);
                assert!(
                    got == &want,
                    "{context}: {index} got {:?}, want {:?}",
                    show(got),
                    show(&want)
                );
                coverage.hits_compared += got.len() as u64;
            }
        }
    }
}

/// One query, every configuration: the same documents in the same order (sequence numbers
/// differ between collections, so they are left out). On failure, the configurations are
/// grouped by answer.
fn check_metamorphic(answers: &[(String, Answer, usize)], context: &str) {
    let documents = |answer: &Answer| -> Vec<(String, String)> {
        answer
            .iter()
            .map(|(pk, _, json)| (pk.clone(), json.clone()))
            .collect()
    };
    let first = documents(&answers[0].1);
    if answers
        .iter()
        .all(|(_, answer, _)| documents(answer) == first)
    {
        return;
    }
    // (documents answered, the indexes that answered them)
    type Group<'a> = (Vec<(String, String)>, Vec<&'a str>);
    let mut groups: Vec<Group<'_>> = Vec::new();
    for (index, answer, _) in answers {
        let docs = documents(answer);
        match groups.iter_mut().find(|(d, _)| *d == docs) {
            Some((_, names)) => names.push(index),
            None => groups.push((docs, vec![index])),
        }
    }
    let described: Vec<String> = groups
        .iter()
        .map(|(docs, names)| {
            format!(
                "{names:?} → {:?}",
                docs.iter().map(|(pk, _)| pk).collect::<Vec<_>>()
            )
        })
        .collect();
    panic!(
        "{context}: configurations disagree:\n  {}",
        described.join("\n  ")
    );
}

/// Every `next` index's global index describes exactly the secondary blocks of the live files
/// (checked with no flush or compaction running).
pub fn check_global_indexes(db: &Database, prefixes: &[&str], what: &str, coverage: &mut Coverage) {
    db.engine()
        .wait_for_background_work()
        .expect("background work");
    for attribute in ATTRIBUTES {
        for (config, index) in indexes_of(attribute, prefixes) {
            if config.kind != IndexKind::Next {
                continue;
            }
            let report = db
                .check_global_index(DOCS, &index)
                .unwrap_or_else(|e| panic!("{what}: {index}: {e}"));
            coverage.files_indexed += report.files_indexed;
        }
    }
}

/// A time window before every document: the embedded index's zone maps skip every table and
/// block, so no candidate is read.
pub fn check_zone_maps(db: &Database, what: &str, coverage: &mut Coverage) {
    for config in CONFIGS {
        if config.kind != IndexKind::Embedded {
            continue;
        }
        let index = config.index_name("", "t");
        let stats = db
            .range(
                DOCS,
                &index,
                &AttrValue::Time(BEFORE_EVERY_DOCUMENT_MS),
                &AttrValue::Time(BEFORE_EVERY_DOCUMENT_MS + 1),
                None,
            )
            .unwrap_or_else(|e| panic!("{what}: {index}: {e}"))
            .stats;
        assert_eq!(stats.candidates_examined, 0, "{what}: {index}: {stats:?}");
        coverage.zone_map_skips += stats.blocks_skipped + stats.tables_skipped;
    }
}

fn has_value(values: &Values, attribute: Attribute) -> bool {
    match attribute.attr_type {
        AttrType::Int => values.n.is_some(),
        AttrType::Float => values.f.is_some(),
        AttrType::String => values.s.is_some(),
        AttrType::Time => values.t.is_some(),
        AttrType::Geo => values.g.is_some(),
    }
}

/// Each deferred index's garbage report agrees with the model: its live entries are the
/// documents with a value, it holds at least those, and the rest is garbage. With `settled`
/// (after full compactions of the primary and of the index trees) it holds exactly those.
pub fn check_deferred_garbage(db: &Database, model: &Model, settled: bool, what: &str) {
    for attribute in ATTRIBUTES {
        for (config, index) in indexes_of(attribute, &[""]) {
            if config.maintenance != Maintenance::Deferred {
                continue;
            }
            let report = db
                .deferred_garbage(BLIND, &index)
                .unwrap_or_else(|e| panic!("{what}: {index}: {e}"));
            let live = model
                .values()
                .filter(|doc| has_value(&doc.values, attribute))
                .count() as u64;
            assert_eq!(report.live_entries, live, "{what}: {index}: {report:?}");
            assert!(
                report.index_entries >= report.live_entries,
                "{what}: {index}: {report:?}"
            );
            assert_eq!(
                report.garbage_entries,
                report.index_entries - report.live_entries,
                "{what}: {index}"
            );
            if settled {
                assert_eq!(report.garbage_entries, 0, "{what}: {index}: {report:?}");
                assert_eq!(report.stored_entries, live, "{what}: {index}: {report:?}");
                assert_eq!(report.stored_tombstones, 0, "{what}: {index}: {report:?}");
            }
        }
    }
}

/// Compacts the primary of the blind collection fully (emitting every DELETE), then every
/// deferred index tree (dropping the cancelled pairs).
///
/// Before each step the async indexes catch up and their watermark is written and flushed:
/// until then the engine retains every version above the watermark, in every tree
/// (`async_index/`), so a compaction would keep the versions and pairs it is meant to drop.
pub fn compact_deferred_fully(db: &Database) {
    let info = db.collection(BLIND).expect("the blind collection");
    let compact = |name: &str| {
        let tree = db.engine().tree(name).expect("a tree");
        db.engine()
            .compact_range(&tree, None, None)
            .expect("compact a tree");
    };
    release_retained_versions(db);
    db.compact_all().expect("compact");
    compact(&info.record.primary_tree_name());
    release_retained_versions(db);
    for index in &info.indexes {
        if let Some(tree) = &index.tree {
            compact(tree);
        }
    }
}

/// Moves the async indexes' retention of old versions up to now: the watermark is written,
/// its record flushed, and the next watermark write settles it (moving the retention). A
/// watermark may stop below the newest write while async entries inserted unlogged wait for
/// a flush, so this repeats until the durable watermark has reached it.
fn release_retained_versions(db: &Database) {
    db.wait_until_indexed().expect("indexed");
    let target = db.engine().latest_sequence();
    for _ in 0..8 {
        db.write_index_watermark().expect("watermark");
        db.flush().expect("flush");
        db.write_index_watermark().expect("watermark");
        if db.async_index_stats().durable_watermark >= target {
            return;
        }
    }
    panic!(
        "the async watermark stays at {} below {target}",
        db.async_index_stats().durable_watermark
    );
}

/// After the workers caught up: each asynchronous int index holds exactly one entry per live
/// document with a value, carrying that version's sequence number (no stale, no duplicate).
pub fn check_async_entries(db: &Database, model: &Model, prefixes: &[&str], what: &str) {
    let attribute = ATTRIBUTES[0];
    assert_eq!(attribute.attr_type, AttrType::Int);
    let info = db.collection(DOCS).expect("the docs collection");
    for (config, index) in indexes_of(attribute, prefixes) {
        if !config.is_async() {
            continue;
        }
        let record = info
            .indexes
            .iter()
            .find(|i| i.name == index)
            .expect("the index");
        let tree = db
            .engine()
            .tree(record.tree.as_deref().expect("a tree"))
            .expect("a tree");
        let mut iter = db
            .engine()
            .iter(&tree, ReadOptions::default())
            .expect("an iterator");
        iter.seek_to_first().expect("seek");
        let mut entries = BTreeSet::new();
        while iter.valid() {
            let (value, used) =
                sift_index::format::decode_value(iter.key(), AttrType::Int).expect("a value");
            let (pk, _) = sift_index::format::decode_pk(&iter.key()[used..]).expect("a pk");
            let AttrValue::Int(value) = value else {
                panic!("{what}: {index}: not an int")
            };
            let seq = u64::from_be_bytes(iter.value().try_into().expect("8 bytes"));
            assert!(
                entries.insert((value, String::from_utf8(pk).expect("UTF-8"), seq)),
                "{what}: {index}: an entry twice"
            );
            iter.next().expect("next");
        }
        let want: BTreeSet<(i64, String, u64)> = model
            .iter()
            .filter_map(|(pk, doc)| doc.values.n.map(|n| (n, pk.clone(), doc.seqs[0])))
            .collect();
        assert_eq!(entries, want, "{what}: {index}: index entries");
    }
}
