//! Memcomparable encodings of attribute values and primary keys, composite index keys
//! `value ⊕ pk` and key ranges over them. A geo point's encoding starts with its Z-order code
//! (`zorder.rs`).
//!
//! Byte order of encodings equals value order ([`AttrValue::compare`]). Every encoding is
//! self-delimiting, so a composite key splits unambiguously and the encoding of one value is a
//! prefix of the composite keys of that value and of no other. The byte-level specification is
//! `docs/format/index-encodings.md`; the constants here are the truth.

use crate::error::{IndexError, Result};
use crate::value::{normalize_zero, AttrType, AttrValue};

/// Width of an encoded int, time or float.
pub const FIXED_VALUE_BYTES: usize = 8;
/// Width of an encoded geo point: Z-order code, then longitude and latitude as encoded floats.
pub const GEO_VALUE_BYTES: usize = 24;
/// Escape byte in strings and primary keys; a data byte 0x00 is written as `ESCAPE ESCAPED_ZERO`.
pub const ESCAPE: u8 = 0x00;
/// Follows `ESCAPE` for a data byte 0x00.
pub const ESCAPED_ZERO: u8 = 0xFF;
/// Follows `ESCAPE` to end a string or primary key. Lower than `ESCAPED_ZERO` and than any
/// unescaped byte (0x01..=0xFF), so a string sorts before its extensions.
pub const TERMINATOR: u8 = 0x01;

const SIGN_BIT: u64 = 1 << 63;

fn encode_i64(v: i64, out: &mut Vec<u8>) {
    out.extend_from_slice(&encode_i64_bytes(v));
}

/// The encoding of an int or time value.
#[inline]
pub(crate) fn encode_i64_bytes(v: i64) -> [u8; 8] {
    ((v as u64) ^ SIGN_BIT).to_be_bytes()
}

fn decode_i64(bits: u64) -> i64 {
    (bits ^ SIGN_BIT) as i64
}

/// The order-preserving image of a float's bits: positives get the sign bit set, negatives
/// have all bits flipped. `-0.0` is encoded as `0.0`.
pub fn float_order_bits(x: f64) -> u64 {
    let bits = normalize_zero(x).to_bits();
    if bits & SIGN_BIT == 0 {
        bits | SIGN_BIT
    } else {
        !bits
    }
}

/// Inverse of [`float_order_bits`].
pub fn float_from_order_bits(ordered: u64) -> f64 {
    if ordered & SIGN_BIT == 0 {
        f64::from_bits(!ordered)
    } else {
        f64::from_bits(ordered & !SIGN_BIT)
    }
}

/// Appends `bytes` escaped and terminated: 0x00 → 0x00 0xFF, then 0x00 0x01.
fn encode_escaped(bytes: &[u8], out: &mut Vec<u8>) {
    out.reserve(bytes.len() + 2);
    for &byte in bytes {
        if byte == ESCAPE {
            out.extend_from_slice(&[ESCAPE, ESCAPED_ZERO]);
        } else {
            out.push(byte);
        }
    }
    out.extend_from_slice(&[ESCAPE, TERMINATOR]);
}

/// Decodes an escaped, terminated byte string from the front of `bytes`; returns the bytes and
/// the length consumed. Offsets in errors are relative to `bytes`.
fn decode_escaped(bytes: &[u8]) -> Result<(Vec<u8>, usize)> {
    let mut decoded = Vec::new();
    let mut pos = 0;
    loop {
        // Copy the run up to the next escape byte in one go.
        let Some(run) = bytes[pos..].iter().position(|&b| b == ESCAPE) else {
            return Err(IndexError::corrupt(
                bytes.len(),
                "escaped string has no terminator",
            ));
        };
        decoded.extend_from_slice(&bytes[pos..pos + run]);
        pos += run;
        match bytes.get(pos + 1) {
            Some(&ESCAPED_ZERO) => decoded.push(0),
            Some(&TERMINATOR) => return Ok((decoded, pos + 2)),
            Some(other) => {
                return Err(IndexError::corrupt(
                    pos + 1,
                    format!("byte 0x{other:02X} after escape byte 0x00 (expected 0xFF or 0x01)"),
                ))
            }
            None => {
                return Err(IndexError::corrupt(
                    pos + 1,
                    "escape byte 0x00 at the end of the input",
                ))
            }
        }
        pos += 2;
    }
}

fn fixed_u64(bytes: &[u8], at: usize, what: &str) -> Result<u64> {
    bytes
        .get(at..at + FIXED_VALUE_BYTES)
        .and_then(|slice| slice.try_into().ok())
        .map(u64::from_be_bytes)
        .ok_or_else(|| {
            IndexError::corrupt(
                bytes.len().min(at),
                format!(
                    "{what} needs {FIXED_VALUE_BYTES} bytes, {} left",
                    bytes.len().saturating_sub(at)
                ),
            )
        })
}

/// Appends the memcomparable encoding of `value`:
/// int/time: big-endian i64 with the sign bit flipped (8 bytes); float: [`float_order_bits`]
/// big-endian (8 bytes); string: UTF-8 escaped and terminated; geo: [`zorder`] big-endian,
/// then longitude and latitude as floats (24 bytes).
///
/// A NaN float (which no constructor of this crate produces) is encoded with its raw bits
/// transformed, above `+inf`; [`decode_value`] rejects it as corrupt.
pub fn encode_value(value: &AttrValue, out: &mut Vec<u8>) {
    match value {
        AttrValue::Int(v) | AttrValue::Time(v) => encode_i64(*v, out),
        AttrValue::Float(x) => out.extend_from_slice(&float_order_bits(*x).to_be_bytes()),
        AttrValue::String(text) => encode_escaped(text.as_bytes(), out),
        AttrValue::Geo { lon, lat } => {
            out.extend_from_slice(&zorder(*lon, *lat).to_be_bytes());
            out.extend_from_slice(&float_order_bits(*lon).to_be_bytes());
            out.extend_from_slice(&float_order_bits(*lat).to_be_bytes());
        }
    }
}

/// The encoding of `value` as a new vector.
pub fn encode_value_to_vec(value: &AttrValue) -> Vec<u8> {
    let mut out = Vec::new();
    encode_value(value, &mut out);
    out
}

/// Decodes one value of type `attr_type` from the front of `bytes`; returns it and the number
/// of bytes consumed. Only canonical encodings are accepted (no NaN, no `-0.0`, valid UTF-8,
/// in-range geo points whose Z-order code matches): anything else is `Corrupt` with the offset
/// inside `bytes`.
pub fn decode_value(bytes: &[u8], attr_type: AttrType) -> Result<(AttrValue, usize)> {
    match attr_type {
        AttrType::Int => Ok((
            AttrValue::Int(decode_i64(fixed_u64(bytes, 0, "int")?)),
            FIXED_VALUE_BYTES,
        )),
        AttrType::Time => Ok((
            AttrValue::Time(decode_i64(fixed_u64(bytes, 0, "time")?)),
            FIXED_VALUE_BYTES,
        )),
        AttrType::Float => Ok((
            AttrValue::Float(decode_float(bytes, 0, "float")?),
            FIXED_VALUE_BYTES,
        )),
        AttrType::String => {
            let (raw, consumed) = decode_escaped(bytes)?;
            let text = String::from_utf8(raw).map_err(|e| {
                IndexError::corrupt(
                    e.utf8_error().valid_up_to(),
                    "string value is not valid UTF-8",
                )
            })?;
            Ok((AttrValue::String(text), consumed))
        }
        AttrType::Geo => {
            let code = fixed_u64(bytes, 0, "geo Z-order code")?;
            let lon = decode_float(bytes, 8, "geo longitude")?;
            let lat = decode_float(bytes, 16, "geo latitude")?;
            if !(-180.0..=180.0).contains(&lon) || !(-90.0..=90.0).contains(&lat) {
                return Err(IndexError::corrupt(
                    8,
                    format!("geo point [{lon}, {lat}] out of range"),
                ));
            }
            if zorder(lon, lat) != code {
                return Err(IndexError::corrupt(
                    0,
                    "geo Z-order code does not match the coordinates",
                ));
            }
            Ok((AttrValue::Geo { lon, lat }, GEO_VALUE_BYTES))
        }
    }
}

fn decode_float(bytes: &[u8], at: usize, what: &str) -> Result<f64> {
    let ordered = fixed_u64(bytes, at, what)?;
    let x = float_from_order_bits(ordered);
    if x.is_nan() {
        return Err(IndexError::corrupt(at, format!("{what} is NaN")));
    }
    if x == 0.0 && x.is_sign_negative() {
        return Err(IndexError::corrupt(
            at,
            format!("{what} is -0.0 (not canonical)"),
        ));
    }
    Ok(x)
}

/// Appends a primary key escaped and terminated exactly like a string value, so that it is
/// self-delimiting and keys sort by their raw bytes.
pub fn encode_pk(pk: &[u8], out: &mut Vec<u8>) {
    encode_escaped(pk, out);
}

/// Decodes an escaped primary key from the front of `bytes`; returns it and the bytes consumed.
pub fn decode_pk(bytes: &[u8]) -> Result<(Vec<u8>, usize)> {
    decode_escaped(bytes)
}

/// The index key `encode(value) ‖ encode_pk(pk)`.
pub fn composite_key(value: &AttrValue, pk: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(GEO_VALUE_BYTES + pk.len() + 2);
    encode_value(value, &mut out);
    encode_pk(pk, &mut out);
    out
}

/// Splits a composite key into its value and primary key. Bytes after the primary key are an
/// error: a composite key is exactly `value ‖ pk`.
pub fn split_composite_key(bytes: &[u8], attr_type: AttrType) -> Result<(AttrValue, Vec<u8>)> {
    let (value, value_bytes) = decode_value(bytes, attr_type)?;
    let (pk, pk_bytes) =
        decode_pk(&bytes[value_bytes..]).map_err(|e| e.shift_offset(value_bytes))?;
    let end = value_bytes + pk_bytes;
    if end != bytes.len() {
        return Err(IndexError::corrupt(
            end,
            format!(
                "{} bytes after the primary key of a composite key",
                bytes.len() - end
            ),
        ));
    }
    Ok((value, pk))
}

/// The prefix shared by every composite key of `value` and by no composite key of another
/// value: the value's encoding.
pub fn value_prefix(value: &AttrValue) -> Vec<u8> {
    encode_value_to_vec(value)
}

/// The smallest byte string greater than every string that starts with `prefix`, or `None` if
/// there is none (the prefix is empty or all 0xFF).
pub fn prefix_successor(prefix: &[u8]) -> Option<Vec<u8>> {
    let last = prefix.iter().rposition(|&b| b != 0xFF)?;
    let mut successor = prefix[..=last].to_vec();
    successor[last] += 1;
    Some(successor)
}

/// Key range `[start, end)` of all composite keys of `value` (a LOOKUP's prefix scan);
/// `end == None` means unbounded.
pub fn value_bounds(value: &AttrValue) -> (Vec<u8>, Option<Vec<u8>>) {
    let prefix = value_prefix(value);
    let end = prefix_successor(&prefix);
    (prefix, end)
}

/// Key range `[start, end)` holding exactly the composite keys whose value `v` satisfies
/// `lo <= v <= hi` (any primary key); `end == None` means unbounded (only when `hi` is the
/// largest value of its type, e.g. `i64::MAX`). The bounds match the engine's
/// `ReadOptions::{lower_bound, upper_bound}`. `lo` and `hi` must have the same type; if
/// `lo > hi` the range is empty (`end <= start`). See [`checked_range_bounds`] for a version
/// that rejects both mistakes.
pub fn range_bounds(lo: &AttrValue, hi: &AttrValue) -> (Vec<u8>, Option<Vec<u8>>) {
    (value_prefix(lo), prefix_successor(&value_prefix(hi)))
}

/// [`range_bounds`], rejecting bounds of different types and `lo > hi` with a clear error.
pub fn checked_range_bounds(lo: &AttrValue, hi: &AttrValue) -> Result<(Vec<u8>, Option<Vec<u8>>)> {
    match lo.compare(hi) {
        None => Err(IndexError::MixedRangeTypes {
            lo_type: lo.attr_type(),
            hi_type: hi.attr_type(),
        }),
        Some(std::cmp::Ordering::Greater) => Err(IndexError::ReversedRange {
            lo: lo.to_string(),
            hi: hi.to_string(),
        }),
        Some(_) => Ok(range_bounds(lo, hi)),
    }
}

pub use crate::zorder::{zorder, zorder_cell, GeoCell};

#[cfg(test)]
mod tests {
    use super::*;
    use crate::zorder::{gather_bits, quantize_lat, quantize_lon, spread_bits};

    #[test]
    fn int_encoding_examples() {
        assert_eq!(
            encode_value_to_vec(&AttrValue::Int(0)),
            [0x80, 0, 0, 0, 0, 0, 0, 0]
        );
        assert_eq!(
            encode_value_to_vec(&AttrValue::Int(-1)),
            [0x7F, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF]
        );
        assert_eq!(encode_value_to_vec(&AttrValue::Int(i64::MIN)), [0; 8]);
        assert_eq!(encode_value_to_vec(&AttrValue::Int(i64::MAX)), [0xFF; 8]);
    }

    #[test]
    fn float_encoding_examples() {
        assert_eq!(
            encode_value_to_vec(&AttrValue::Float(0.0)),
            [0x80, 0, 0, 0, 0, 0, 0, 0]
        );
        assert_eq!(
            encode_value_to_vec(&AttrValue::Float(-0.0)),
            [0x80, 0, 0, 0, 0, 0, 0, 0]
        );
        assert_eq!(
            encode_value_to_vec(&AttrValue::Float(1.0)),
            [0xBF, 0xF0, 0, 0, 0, 0, 0, 0]
        );
        assert_eq!(
            encode_value_to_vec(&AttrValue::Float(-1.0)),
            [0x40, 0x0F, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF]
        );
        assert_eq!(
            encode_value_to_vec(&AttrValue::Float(f64::INFINITY)),
            [0xFF, 0xF0, 0, 0, 0, 0, 0, 0]
        );
    }

    #[test]
    fn string_encoding_examples() {
        assert_eq!(
            encode_value_to_vec(&AttrValue::String(String::new())),
            [0x00, 0x01]
        );
        assert_eq!(
            encode_value_to_vec(&AttrValue::String("a\0b".to_string())),
            [b'a', 0x00, 0xFF, b'b', 0x00, 0x01]
        );
    }

    #[test]
    fn bad_escapes_are_corrupt_with_offsets() {
        assert!(matches!(
            decode_pk(b"ab"),
            Err(IndexError::Corrupt { offset: 2, .. })
        ));
        assert!(matches!(
            decode_pk(b"ab\0"),
            Err(IndexError::Corrupt { offset: 3, .. })
        ));
        assert!(matches!(
            decode_pk(b"ab\0\x02"),
            Err(IndexError::Corrupt { offset: 3, .. })
        ));
        assert!(matches!(
            decode_value(b"\xC3\x28\0\x01", AttrType::String),
            Err(IndexError::Corrupt { offset: 0, .. })
        ));
        assert!(matches!(
            split_composite_key(&[0x80, 0, 0, 0, 0, 0, 0, 1, b'k', 0, 1, 9], AttrType::Int),
            Err(IndexError::Corrupt { offset: 11, .. })
        ));
        assert!(matches!(
            split_composite_key(&[0x80, 0, 0, 0, 0, 0, 0, 1, b'k', 0], AttrType::Int),
            Err(IndexError::Corrupt { offset: 10, .. })
        ));
        assert!(matches!(
            decode_value(&[1, 2, 3], AttrType::Int),
            Err(IndexError::Corrupt { .. })
        ));
    }

    #[test]
    fn non_canonical_floats_are_corrupt() {
        let negative_zero = float_order_bits_raw(-0.0);
        assert!(decode_value(&negative_zero.to_be_bytes(), AttrType::Float).is_err());
        let nan = float_order_bits(f64::NAN);
        assert!(decode_value(&nan.to_be_bytes(), AttrType::Float).is_err());
    }

    fn float_order_bits_raw(x: f64) -> u64 {
        let bits = x.to_bits();
        if bits & SIGN_BIT == 0 {
            bits | SIGN_BIT
        } else {
            !bits
        }
    }

    #[test]
    fn prefix_successor_examples() {
        assert_eq!(prefix_successor(b"ab"), Some(b"ac".to_vec()));
        assert_eq!(prefix_successor(&[1, 0xFF, 0xFF]), Some(vec![2]));
        assert_eq!(prefix_successor(&[0xFF, 0xFF]), None);
        assert_eq!(prefix_successor(&[]), None);
        let (_, end) = range_bounds(&AttrValue::Int(0), &AttrValue::Int(i64::MAX));
        assert_eq!(end, None);
    }

    #[test]
    fn zorder_corners_and_bits() {
        assert_eq!(zorder(-180.0, -90.0), 0);
        assert_eq!(zorder(180.0, 90.0), u64::MAX);
        assert_eq!(quantize_lon(0.0), 1 << 31);
        assert_eq!(quantize_lat(0.0), 1 << 31);
        // Top bit is latitude's: the northern half sorts after the southern half.
        assert!(zorder(-179.0, 1.0) > zorder(179.0, -1.0));
        for x in [0u32, 1, 0xDEAD_BEEF, u32::MAX] {
            assert_eq!(gather_bits(spread_bits(x)), x);
        }
        let whole = zorder_cell(12345, 0);
        assert_eq!(
            (whole.lon_min, whole.lon_max, whole.lat_min, whole.lat_max),
            (-180.0, 180.0, -90.0, 90.0)
        );
        let north_east = zorder_cell(zorder(10.0, 10.0), 2);
        assert_eq!(
            (
                north_east.lon_min,
                north_east.lon_max,
                north_east.lat_min,
                north_east.lat_max
            ),
            (0.0, 180.0, 0.0, 90.0)
        );
        let north = zorder_cell(zorder(10.0, 10.0), 1);
        assert_eq!(
            (north.lon_min, north.lon_max, north.lat_min),
            (-180.0, 180.0, 0.0)
        );
    }

    #[test]
    fn checked_range_bounds_errors() {
        assert!(matches!(
            checked_range_bounds(&AttrValue::Int(5), &AttrValue::Int(4)),
            Err(IndexError::ReversedRange { .. })
        ));
        assert!(matches!(
            checked_range_bounds(&AttrValue::Int(5), &AttrValue::Time(6)),
            Err(IndexError::MixedRangeTypes { .. })
        ));
        assert!(checked_range_bounds(&AttrValue::Int(5), &AttrValue::Int(5)).is_ok());
    }
}
