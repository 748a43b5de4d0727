//! Property tests: byte order of encodings equals value order, round trips, composite keys,
//! prefixes and range bounds, Z-order codes. Each property compares against a simple model
//! (`f64::partial_cmp`, byte-slice order, a bit-by-bit interleave). The proptest RNG seed is
//! fixed (`SEED`), so a failure reproduces; proptest prints the minimal failing input.

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

use std::cmp::Ordering;

use proptest::prelude::*;
use proptest::test_runner::{Config, RngSeed};
use sift_index::format::{
    decode_pk, decode_value, encode_pk, encode_value, lat_of_cell, lon_of_cell, quantize_lat,
    quantize_lon, value_bounds,
};
use sift_index::{
    format::composite_key, format::range_bounds, format::split_composite_key, format::value_prefix,
    format::zorder, format::zorder_cell, AttrType, AttrValue,
};

/// Whether `key` lies in `[start, end)` (`end == None`: unbounded): how a query reads the
/// bounds the encodings give.
fn range_contains(start: &[u8], end: Option<&[u8]>, key: &[u8]) -> bool {
    key >= start && end.is_none_or(|end| key < end)
}

const SEED: u64 = 0x51F7_1DE5;

fn config(cases: u32) -> Config {
    Config {
        cases,
        rng_seed: RngSeed::Fixed(SEED),
        failure_persistence: None,
        ..Config::default()
    }
}

fn int_strategy() -> BoxedStrategy<i64> {
    prop_oneof![
        any::<i64>(),
        Just(i64::MIN),
        Just(i64::MAX),
        Just(0),
        Just(-1),
        Just(1),
        -300i64..300,
    ]
    .boxed()
}

fn float_strategy() -> BoxedStrategy<f64> {
    prop_oneof![
        any::<u64>()
            .prop_map(f64::from_bits)
            .prop_filter("not NaN", |x| !x.is_nan()),
        prop::sample::select(vec![
            0.0,
            -0.0,
            f64::INFINITY,
            f64::NEG_INFINITY,
            f64::MAX,
            f64::MIN,
            f64::MIN_POSITIVE,
            -f64::MIN_POSITIVE,
            f64::from_bits(1),  // smallest positive subnormal
            -f64::from_bits(1), // largest negative subnormal
            f64::MIN_POSITIVE / 3.0,
            1.0,
            -1.0,
            1.000_000_1,
            1.000_000_2,
        ]),
        -10.0f64..10.0,
    ]
    .boxed()
}

/// Small alphabets make equal values, shared prefixes and embedded zero bytes common.
fn string_strategy() -> BoxedStrategy<String> {
    prop_oneof![
        prop::collection::vec(
            prop::sample::select(vec![
                '\0',
                '\u{1}',
                'a',
                'b',
                '+',
                'ÿ',
                '\u{FFFF}',
                '\u{10FFFF}'
            ]),
            0..6
        )
        .prop_map(|chars| chars.into_iter().collect::<String>()),
        any::<String>(),
        Just(String::new()),
    ]
    .boxed()
}

fn geo_strategy() -> BoxedStrategy<(f64, f64)> {
    prop_oneof![
        (-180.0f64..=180.0, -90.0f64..=90.0),
        (
            prop::sample::select(vec![-180.0, -0.0, 0.0, 180.0]),
            prop::sample::select(vec![-90.0, -0.0, 0.0, 90.0])
        ),
        // Points a few quantisation cells apart, so some share a Z-order code.
        (-3i32..3, -3i32..3).prop_map(|(x, y)| (f64::from(x) * 1e-7, f64::from(y) * 1e-7)),
    ]
    .boxed()
}

fn value_strategy(attr_type: AttrType) -> BoxedStrategy<AttrValue> {
    match attr_type {
        AttrType::Int => int_strategy().prop_map(AttrValue::Int).boxed(),
        AttrType::Time => int_strategy().prop_map(AttrValue::Time).boxed(),
        AttrType::Float => float_strategy()
            .prop_map(|x| AttrValue::float(x).unwrap())
            .boxed(),
        AttrType::String => string_strategy().prop_map(AttrValue::String).boxed(),
        AttrType::Geo => geo_strategy()
            .prop_map(|(lon, lat)| AttrValue::geo(lon, lat).unwrap())
            .boxed(),
    }
}

fn type_strategy() -> impl Strategy<Value = AttrType> {
    prop::sample::select(AttrType::ALL.to_vec())
}

fn pk_strategy() -> BoxedStrategy<Vec<u8>> {
    prop_oneof![
        prop::collection::vec(
            prop::sample::select(vec![0u8, 1, b'1', b'2', b'+', 0xFE, 0xFF]),
            0..6
        ),
        prop::collection::vec(any::<u8>(), 0..12),
    ]
    .boxed()
}

/// Three values of one type, and two primary keys.
fn triple_strategy() -> impl Strategy<Value = (AttrValue, AttrValue, AttrValue, Vec<u8>, Vec<u8>)> {
    type_strategy().prop_flat_map(|t| {
        (
            value_strategy(t),
            value_strategy(t),
            value_strategy(t),
            pk_strategy(),
            pk_strategy(),
        )
    })
}

/// The value order, written independently of the encoding for all types but geo.
fn model_cmp(a: &AttrValue, b: &AttrValue) -> Ordering {
    match (a, b) {
        (AttrValue::Int(x), AttrValue::Int(y)) | (AttrValue::Time(x), AttrValue::Time(y)) => {
            x.cmp(y)
        }
        (AttrValue::Float(x), AttrValue::Float(y)) => x.partial_cmp(y).unwrap(),
        (AttrValue::String(x), AttrValue::String(y)) => x.as_bytes().cmp(y.as_bytes()),
        (AttrValue::Geo { lon: xa, lat: ya }, AttrValue::Geo { lon: xb, lat: yb }) => {
            zorder(*xa, *ya)
                .cmp(&zorder(*xb, *yb))
                .then(xa.partial_cmp(xb).unwrap())
                .then(ya.partial_cmp(yb).unwrap())
        }
        _ => panic!("values of different types: {a:?} {b:?}"),
    }
}

fn enc(value: &AttrValue) -> Vec<u8> {
    let mut out = Vec::new();
    encode_value(value, &mut out);
    out
}

/// The Z-order code computed one bit at a time.
fn naive_zorder(lon: f64, lat: f64) -> u64 {
    let (x, y) = (quantize_lon(lon), quantize_lat(lat));
    let mut code = 0u64;
    for bit in 0..32 {
        code |= u64::from((x >> bit) & 1) << (2 * bit);
        code |= u64::from((y >> bit) & 1) << (2 * bit + 1);
    }
    code
}

proptest! {
    #![proptest_config(config(2000))]

    #[test]
    fn byte_order_equals_value_order_and_values_round_trip((a, b, _c, _pk1, _pk2) in triple_strategy()) {
        let (enc_a, enc_b) = (enc(&a), enc(&b));
        prop_assert_eq!(enc_a.cmp(&enc_b), model_cmp(&a, &b), "{:?} vs {:?}", a, b);
        prop_assert_eq!(a.compare(&b), Some(model_cmp(&a, &b)));
        // Round trip, and the decoder stops at the end of the value even with bytes after it.
        let mut followed = enc_a.clone();
        followed.extend_from_slice(&[0x00, 0x01, 0xFF]);
        let (decoded, consumed) = decode_value(&followed, a.attr_type()).unwrap();
        prop_assert_eq!(&decoded, &a);
        prop_assert_eq!(consumed, enc_a.len());
        // Every proper prefix of an encoding is corrupt, never a panic or a shorter value.
        for cut in 0..enc_a.len() {
            prop_assert!(decode_value(&enc_a[..cut], a.attr_type()).is_err());
        }
    }

    #[test]
    fn negative_zero_encodes_as_zero(x in float_strategy()) {
        let raw = AttrValue::Float(x);
        let normalized = AttrValue::float(x).unwrap();
        prop_assert_eq!(enc(&raw), enc(&normalized));
    }

    #[test]
    fn primary_keys_keep_byte_order_and_round_trip(pk1 in pk_strategy(), pk2 in pk_strategy()) {
        let (mut e1, mut e2) = (Vec::new(), Vec::new());
        encode_pk(&pk1, &mut e1);
        encode_pk(&pk2, &mut e2);
        prop_assert_eq!(e1.cmp(&e2), pk1.cmp(&pk2));
        prop_assert_eq!(decode_pk(&e1).unwrap(), (pk1.clone(), e1.len()));
    }

    #[test]
    fn composite_keys_order_by_value_then_pk((a, b, _c, pk1, pk2) in triple_strategy()) {
        let key_a = composite_key(&a, &pk1);
        let key_b = composite_key(&b, &pk2);
        let expected = model_cmp(&a, &b).then(pk1.cmp(&pk2));
        prop_assert_eq!(key_a.cmp(&key_b), expected);
        prop_assert_eq!(split_composite_key(&key_a, a.attr_type()).unwrap(), (a.clone(), pk1.clone()));
        prop_assert_eq!(split_composite_key(&key_b, b.attr_type()).unwrap(), (b.clone(), pk2.clone()));
    }

    #[test]
    fn value_prefix_selects_exactly_one_value((a, b, _c, pk1, pk2) in triple_strategy()) {
        let prefix = value_prefix(&a);
        prop_assert!(composite_key(&a, &pk1).starts_with(&prefix));
        prop_assert!(composite_key(&a, &pk2).starts_with(&prefix));
        let other_has_prefix = composite_key(&b, &pk2).starts_with(&prefix);
        prop_assert_eq!(other_has_prefix, a == b, "{:?} {:?}", a, b);
        // The LOOKUP bounds agree with the prefix.
        let (start, end) = value_bounds(&a);
        let key = composite_key(&b, &pk1);
        prop_assert_eq!(range_contains(&start, end.as_deref(), &key), a == b);
    }

    #[test]
    fn range_bounds_hold_exactly_the_values_in_range((lo, hi, v, pk1, _pk2) in triple_strategy()) {
        let (start, end) = range_bounds(&lo, &hi);
        let key = composite_key(&v, &pk1);
        let inside = model_cmp(&lo, &v) != Ordering::Greater && model_cmp(&v, &hi) != Ordering::Greater;
        prop_assert_eq!(range_contains(&start, end.as_deref(), &key), inside, "{:?} <= {:?} <= {:?}", lo, v, hi);
        // The bounds of the extreme pks of the endpoints themselves.
        if model_cmp(&lo, &hi) != Ordering::Greater {
            prop_assert!(range_contains(&start, end.as_deref(), &composite_key(&lo, &[])));
            prop_assert!(range_contains(&start, end.as_deref(), &composite_key(&hi, &[0xFF; 16])));
        }
    }

    #[test]
    fn zorder_matches_naive_interleave_and_cells_contain_points((lon, lat) in geo_strategy(), prefix_bits in 0u32..=64) {
        let code = zorder(lon, lat);
        prop_assert_eq!(code, naive_zorder(lon, lat));
        let cell = zorder_cell(code, prefix_bits);
        prop_assert!(cell.contains(lon, lat), "{lon} {lat} not in {cell:?}");
        let full = zorder_cell(code, 64);
        prop_assert!(full.contains(lon, lat), "{lon} {lat} not in {full:?}");
        // Quantisation agrees exactly with the cell edges used for the inverse.
        let x = u64::from(quantize_lon(lon));
        prop_assert!(lon_of_cell(x) <= lon && (lon < lon_of_cell(x + 1) || x == u64::from(u32::MAX)));
        let y = u64::from(quantize_lat(lat));
        prop_assert!(lat_of_cell(y) <= lat && (lat < lat_of_cell(y + 1) || y == u64::from(u32::MAX)));
    }
}

#[test]
fn every_type_covers_its_named_edge_cases() {
    // Hand-picked ascending sequences: each encoding must be strictly increasing along them.
    let sequences: Vec<Vec<AttrValue>> = vec![
        [i64::MIN, i64::MIN + 1, -256, -1, 0, 1, 255, 256, i64::MAX]
            .map(AttrValue::Int)
            .to_vec(),
        [i64::MIN, -1, 0, 1, i64::MAX].map(AttrValue::Time).to_vec(),
        [
            f64::NEG_INFINITY,
            f64::MIN,
            -1.0,
            -f64::MIN_POSITIVE,
            -f64::from_bits(1),
            0.0,
            f64::from_bits(1),
            f64::from_bits(2),
            f64::MIN_POSITIVE,
            1.0,
            1.000_000_1,
            1.000_000_2,
            f64::MAX,
            f64::INFINITY,
        ]
        .map(AttrValue::Float)
        .to_vec(),
        [
            "",
            "\0",
            "\0\0",
            "\0\u{1}",
            "\u{1}",
            "a",
            "a\0",
            "a\0b",
            "a\u{1}",
            "ab",
            "b",
            "ÿ",
            "\u{10FFFF}",
        ]
        .map(|s| AttrValue::String(s.to_string()))
        .to_vec(),
    ];
    for sequence in sequences {
        for pair in sequence.windows(2) {
            assert!(
                enc(&pair[0]) < enc(&pair[1]),
                "{:?} !< {:?}",
                pair[0],
                pair[1]
            );
            let (decoded, _) = decode_value(&enc(&pair[1]), pair[1].attr_type()).unwrap();
            assert_eq!(decoded, pair[1]);
        }
    }
    // -0.0 and 0.0 are one value.
    assert_eq!(enc(&AttrValue::Float(-0.0)), enc(&AttrValue::Float(0.0)));
    // Primary keys with 0x00 and 0xFF bytes order as raw bytes.
    let pks: [&[u8]; 6] = [b"", b"\x00", b"\x00\xFF", b"\x01", b"\xFF", b"\xFF\x00"];
    for pair in pks.windows(2) {
        let key_low = composite_key(&AttrValue::Int(1), pair[0]);
        let key_high = composite_key(&AttrValue::Int(1), pair[1]);
        assert!(key_low < key_high, "{:?} !< {:?}", pair[0], pair[1]);
    }
}
