//! Regression tests for encoding pitfalls seen in the published LevelDB++ code: numbers compared
//! as strings, doubles rounded to 6 digits, a `+` separator in composite keys, and a prefix scan
//! for "12" that also matched "120".

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

use std::collections::BTreeSet;
use std::ops::Bound;

use sift_index::format::value_bounds;
use sift_index::{
    format::composite_key, format::range_bounds, format::split_composite_key, AttrType, AttrValue,
};

/// The composite keys in `[start, end)`, scanned from a sorted set like an index tree.
fn scan(index: &BTreeSet<Vec<u8>>, start: &[u8], end: Option<&[u8]>) -> Vec<Vec<u8>> {
    let upper = match end {
        Some(end) => Bound::Excluded(end),
        None => Bound::Unbounded,
    };
    index
        .range::<[u8], _>((Bound::Included(start), upper))
        .cloned()
        .collect()
}

fn index_of(entries: &[(AttrValue, &str)]) -> BTreeSet<Vec<u8>> {
    entries
        .iter()
        .map(|(value, pk)| composite_key(value, pk.as_bytes()))
        .collect()
}

fn pks(keys: &[Vec<u8>], attr_type: AttrType) -> Vec<String> {
    keys.iter()
        .map(|key| String::from_utf8(split_composite_key(key, attr_type).unwrap().1).unwrap())
        .collect()
}

#[test]
fn numbers_are_compared_as_numbers_not_strings() {
    let values = [8, 9, 10, 50, 99, 100, 900, -10];
    let entries: Vec<(AttrValue, String)> = values
        .iter()
        .map(|v| (AttrValue::Int(*v), format!("pk{v}")))
        .collect();
    let entries: Vec<(AttrValue, &str)> = entries
        .iter()
        .map(|(v, pk)| (v.clone(), pk.as_str()))
        .collect();
    let index = index_of(&entries);
    let (start, end) = range_bounds(&AttrValue::Int(9), &AttrValue::Int(99));
    let mut found = pks(&scan(&index, &start, end.as_deref()), AttrType::Int);
    found.sort();
    assert_eq!(found, ["pk10", "pk50", "pk9", "pk99"]);

    // The same for floats and times.
    let float_index = index_of(&[
        (AttrValue::Float(10.0), "ten"),
        (AttrValue::Float(900.0), "nine hundred"),
        (AttrValue::Float(-1e300), "tiny"),
    ]);
    let (start, end) = range_bounds(&AttrValue::Float(9.0), &AttrValue::Float(99.0));
    assert_eq!(
        pks(&scan(&float_index, &start, end.as_deref()), AttrType::Float),
        ["ten"]
    );
}

#[test]
fn doubles_are_not_rounded_to_six_digits() {
    let a = AttrValue::Float(1.000_000_1);
    let b = AttrValue::Float(1.000_000_2);
    assert_ne!(composite_key(&a, b"k"), composite_key(&b, b"k"));
    assert!(composite_key(&a, b"z") < composite_key(&b, b"a"));
    assert_eq!(
        split_composite_key(&composite_key(&b, b"k"), AttrType::Float)
            .unwrap()
            .0,
        b
    );
    let index = index_of(&[(a.clone(), "a"), (b.clone(), "b")]);
    let (start, end) = value_bounds(&a);
    assert_eq!(
        pks(&scan(&index, &start, end.as_deref()), AttrType::Float),
        ["a"]
    );
    let (start, end) = range_bounds(&b, &b);
    assert_eq!(
        pks(&scan(&index, &start, end.as_deref()), AttrType::Float),
        ["b"]
    );
    // Neighbouring doubles one ulp apart stay apart too.
    let next = AttrValue::Float(f64::from_bits(1.0f64.to_bits() + 1));
    assert!(composite_key(&AttrValue::Float(1.0), b"\xFF") < composite_key(&next, b""));
}

#[test]
fn plus_in_data_cannot_break_composite_keys() {
    // With a `+` separator, ("a+b", "c") and ("a", "b+c") both became "a+b+c".
    let first = composite_key(&AttrValue::String("a+b".to_string()), b"c");
    let second = composite_key(&AttrValue::String("a".to_string()), b"b+c");
    assert_ne!(first, second);
    assert_eq!(
        split_composite_key(&first, AttrType::String).unwrap(),
        (AttrValue::String("a+b".to_string()), b"c".to_vec())
    );
    assert_eq!(
        split_composite_key(&second, AttrType::String).unwrap(),
        (AttrValue::String("a".to_string()), b"b+c".to_vec())
    );
    let index = index_of(&[
        (AttrValue::String("a+b".to_string()), "c"),
        (AttrValue::String("a".to_string()), "b+c"),
        (AttrValue::String("a".to_string()), "+"),
        (AttrValue::String("a+".to_string()), "x"),
    ]);
    let (start, end) = value_bounds(&AttrValue::String("a".to_string()));
    assert_eq!(
        pks(&scan(&index, &start, end.as_deref()), AttrType::String),
        ["+", "b+c"]
    );
    let (start, end) = value_bounds(&AttrValue::String("a+b".to_string()));
    assert_eq!(
        pks(&scan(&index, &start, end.as_deref()), AttrType::String),
        ["c"]
    );
}

#[test]
fn lookup_of_12_does_not_scan_120() {
    let index = index_of(&[
        (AttrValue::String("12".to_string()), "p1"),
        (AttrValue::String("120".to_string()), "p2"),
        (AttrValue::String("12\0".to_string()), "p3"),
        (AttrValue::String("1".to_string()), "p4"),
        (AttrValue::String("12".to_string()), "0"),
    ]);
    let (start, end) = value_bounds(&AttrValue::String("12".to_string()));
    assert_eq!(
        pks(&scan(&index, &start, end.as_deref()), AttrType::String),
        ["0", "p1"]
    );

    // A range ["1", "12"] includes "12" with every pk but not "120" or "12\0".
    let (start, end) = range_bounds(
        &AttrValue::String("1".to_string()),
        &AttrValue::String("12".to_string()),
    );
    assert_eq!(
        pks(&scan(&index, &start, end.as_deref()), AttrType::String),
        ["p4", "0", "p1"]
    );

    // Integer values stored in string attributes compare as strings on purpose, but an int
    // attribute never confuses 12 with 120.
    let ints = index_of(&[(AttrValue::Int(12), "a"), (AttrValue::Int(120), "b")]);
    let (start, end) = value_bounds(&AttrValue::Int(12));
    assert_eq!(
        pks(&scan(&ints, &start, end.as_deref()), AttrType::Int),
        ["a"]
    );

    // Primary keys "12" and "120" under one value split back exactly.
    let short = composite_key(&AttrValue::Int(1), b"12");
    let long = composite_key(&AttrValue::Int(1), b"120");
    assert!(short < long);
    assert_eq!(split_composite_key(&short, AttrType::Int).unwrap().1, b"12");
    assert_eq!(split_composite_key(&long, AttrType::Int).unwrap().1, b"120");
}
