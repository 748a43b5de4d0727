//! The test documents, their attribute values as the model knows them, and the model itself.
//!
//! The model reads a document's values from its JSON with this file's own rules (a table of
//! RFC 3339 texts with their instants worked out by hand, not the crate's parser), so the same
//! function serves documents the driver wrote and documents found after a crash.

use rand::rngs::StdRng;
use rand::Rng;
use std::collections::BTreeMap;

/// Primary keys `pk00`…: few, so documents are replaced and deleted often.
pub const PKS: u32 = 60;

pub fn pk_name(pk: u32) -> String {
    format!("pk{pk:02}")
}

/// Strings: empty, prefixes of each other, a NUL inside, and 8 bytes and more (the published
/// LevelDB++ code never found those in embedded indexes).
pub const STRINGS: [&str; 9] = [
    "a",
    "ab",
    "b",
    "b\u{0}",
    "",
    "zz",
    "eight888",
    "a much longer value",
    "ab\u{0}cdefghij",
];

/// Floats, `-0.0` among them (equal to `0.0`: one encoding).
pub const FLOATS: [f64; 9] = [-2.5, -0.0, 0.0, 0.25, 1.0, 7.75, -1e-3, 1e10, -1e300];

/// RFC 3339 texts and their instants in milliseconds (worked out with Python's `datetime`):
/// offsets, fractions, before the epoch, a leap day, and one instant written three ways.
pub const TIME_TEXTS: [(&str, i64); 8] = [
    ("1969-12-31T23:59:59.999Z", -1),
    ("1970-01-01T00:00:00Z", 0),
    ("2000-02-29T12:00:00Z", 951_825_600_000),
    ("2024-01-01T00:00:00Z", 1_704_067_200_000),
    ("2024-01-01T01:00:00+01:00", 1_704_067_200_000),
    ("2023-12-31T19:00:00-05:00", 1_704_067_200_000),
    ("2024-01-01T00:00:00.500Z", 1_704_067_200_500),
    ("2024-01-01T00:00:01Z", 1_704_067_201_000),
];

/// Instants written as integer milliseconds grow with the driver's clock from here, so that
/// recent tables hold recent times (the embedded kind's zone maps have ranges to skip).
pub const CLOCK_ORIGIN_MS: i64 = 1_600_000_000_000;
/// An instant before every document's: a window there must read no candidate.
pub const BEFORE_EVERY_DOCUMENT_MS: i64 = -(1 << 40);

/// Cluster centres far apart, so a δ split has gaps to cut at.
pub const CLUSTERS: [(f64, f64); 4] = [(-120.0, 35.0), (10.0, 50.0), (139.5, -35.0), (0.0, 0.0)];
/// Grid step inside a cluster (exact in binary, so boxes share edges with points).
pub const GRID: f64 = 0.25;

/// A document's indexed values, as the model reads them from its JSON.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Values {
    pub n: Option<i64>,
    pub f: Option<f64>,
    pub s: Option<String>,
    pub t: Option<i64>,
    pub g: Option<(f64, f64)>,
}

impl Values {
    pub fn of_json(json: &str) -> Values {
        let value: serde_json::Value = serde_json::from_str(json).expect("the driver's JSON");
        let time = |v: &serde_json::Value| match v {
            serde_json::Value::String(text) => Some(
                TIME_TEXTS
                    .iter()
                    .find(|(known, _)| known == text)
                    .map(|(_, ms)| *ms)
                    .expect("a time text from TIME_TEXTS"),
            ),
            other => other.as_i64(),
        };
        Values {
            n: value.get("n").and_then(serde_json::Value::as_i64),
            f: value.get("f").and_then(serde_json::Value::as_f64),
            s: value
                .get("s")
                .and_then(serde_json::Value::as_str)
                .map(str::to_string),
            t: value.get("t").and_then(time),
            g: value
                .get("g")
                .and_then(serde_json::Value::as_array)
                .map(|point| {
                    (
                        point[0].as_f64().expect("a longitude"),
                        point[1].as_f64().expect("a latitude"),
                    )
                }),
        }
    }
}

/// A live document in the model: its JSON, values, and the sequence number it has in each
/// collection (the same writes go to both, in the same order, so the orders agree).
#[derive(Debug, Clone)]
pub struct ModelDoc {
    pub json: String,
    pub values: Values,
    pub seqs: [u64; 2],
}

/// pk → live document.
pub type Model = BTreeMap<String, ModelDoc>;

fn random_int(rng: &mut StdRng) -> i64 {
    // Clustered values with gaps, so the value-aware split has something to split.
    rng.gen_range(0..4) * 10 + rng.gen_range(-2..3)
}

pub fn random_point(rng: &mut StdRng) -> (f64, f64) {
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

/// A random document for `pk`; `clock` is the driver's step counter. Each attribute is
/// sometimes missing, `n` sometimes `null`.
pub fn random_doc(rng: &mut StdRng, pk: u32, clock: u64) -> String {
    let mut doc = serde_json::json!({
        "id": pk_name(pk),
        "clock": clock,
        "pad": "x".repeat(rng.gen_range(0..90)),
    });
    if rng.gen_range(0..10) > 0 {
        doc["n"] = serde_json::json!(random_int(rng));
    } else if rng.gen_bool(0.5) {
        doc["n"] = serde_json::Value::Null;
    }
    if rng.gen_range(0..8) > 0 {
        doc["f"] = serde_json::json!(FLOATS[rng.gen_range(0..FLOATS.len())]);
    }
    if rng.gen_range(0..8) > 0 {
        doc["s"] = serde_json::json!(STRINGS[rng.gen_range(0..STRINGS.len())]);
    }
    match rng.gen_range(0..12) {
        0 => {}
        1..=4 => doc["t"] = serde_json::json!(TIME_TEXTS[rng.gen_range(0..TIME_TEXTS.len())].0),
        _ => doc["t"] = serde_json::json!(CLOCK_ORIGIN_MS + clock as i64 * 1000),
    }
    if rng.gen_range(0..10) > 0 {
        let (lon, lat) = random_point(rng);
        doc["g"] = serde_json::json!([lon, lat]);
    }
    serde_json::to_string(&doc).expect("JSON")
}

/// Documents every collection refuses (and whose batches it refuses whole): broken JSON, not
/// an object, a value of the wrong type for an index every collection has, no primary key.
pub const BAD_DOCUMENTS: [&str; 4] = [
    "{\"id\": \"pk01\", \"n\": ",
    "[1]",
    r#"{"id": "pk01", "n": "seven"}"#,
    r#"{"n": 1}"#,
];
