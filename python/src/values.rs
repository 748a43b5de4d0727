//! Python arguments to the engine's types: primary keys, query values and bounds, boxes.
//! A wrong argument is an `InvalidArgument` naming the index and what was expected.

use crate::errors::InvalidArgument;
use crate::json::{type_name, value_to_json};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyInt, PyString};
use sift_index::{AttrType, AttrValue, GeoBox, MAX_PRIMARY_KEY_BYTES};

/// Which end of a range a bound is.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Bound {
    Low,
    High,
}

/// The primary key bytes for `key`: a str's UTF-8, or an int's decimal text (how the engine
/// keys a document whose key field is an integer).
pub fn primary_key(key: &pyo3::Bound<'_, PyAny>) -> PyResult<Vec<u8>> {
    let pk = primary_key_bytes(key)?;
    if pk.len() > MAX_PRIMARY_KEY_BYTES {
        return Err(InvalidArgument::new_err(format!(
            "a primary key of {} bytes is longer than the {MAX_PRIMARY_KEY_BYTES}-byte limit",
            pk.len()
        )));
    }
    Ok(pk)
}

fn primary_key_bytes(key: &pyo3::Bound<'_, PyAny>) -> PyResult<Vec<u8>> {
    if let Ok(text) = key.cast::<PyString>() {
        let text = text.to_cow()?;
        if text.is_empty() {
            return Err(InvalidArgument::new_err(
                "the primary key must not be empty",
            ));
        }
        return Ok(text.as_bytes().to_vec());
    }
    if key.is_instance_of::<PyInt>() && !key.is_instance_of::<PyBool>() {
        if let Ok(number) = key.extract::<i64>() {
            return Ok(number.to_string().into_bytes());
        }
        if let Ok(number) = key.extract::<u64>() {
            return Ok(number.to_string().into_bytes());
        }
    }
    Err(InvalidArgument::new_err(format!(
        "a primary key is a non-empty str or a 64-bit int, found {}",
        type_name(key)
    )))
}

/// The value of a LOOKUP on an index of `attr_type`.
pub fn query_value(
    value: &pyo3::Bound<'_, PyAny>,
    attr_type: AttrType,
    index: &str,
) -> PyResult<AttrValue> {
    if attr_type == AttrType::Geo {
        return Err(InvalidArgument::new_err(format!(
            "index `{index}` holds geo points: query it with within(), not lookup() or range()"
        )));
    }
    let invalid = |reason: String| {
        InvalidArgument::new_err(format!(
            "query value for index `{index}` ({attr_type}): {reason}"
        ))
    };
    if value.is_instance_of::<PyBool>() {
        return Err(invalid("a bool is not an index value".to_owned()));
    }
    if attr_type == AttrType::Time && value.hasattr("isoformat")? && value.hasattr("tzinfo")? {
        if value.getattr("tzinfo")?.is_none() {
            return Err(invalid(
                "a datetime without a timezone is ambiguous; give tzinfo (e.g. datetime.timezone.utc)"
                    .to_owned(),
            ));
        }
        let text: String = value.call_method0("isoformat")?.extract()?;
        return AttrValue::from_json(&serde_json::Value::String(text), attr_type, index)
            .map_err(|error| invalid(error.to_string()));
    }
    let json = value_to_json(value).map_err(invalid)?;
    if json.is_null() {
        return Err(invalid("None is not an index value".to_owned()));
    }
    AttrValue::from_json(&json, attr_type, index).map_err(|error| invalid(error.to_string()))
}

/// One end of a RANGE: a value, or None for "unbounded on this side".
pub fn range_bound(
    value: &pyo3::Bound<'_, PyAny>,
    attr_type: AttrType,
    index: &str,
    end: Bound,
) -> PyResult<AttrValue> {
    if !value.is_none() {
        return query_value(value, attr_type, index);
    }
    let low = end == Bound::Low;
    match attr_type {
        AttrType::Int => Ok(AttrValue::Int(if low { i64::MIN } else { i64::MAX })),
        AttrType::Time => Ok(AttrValue::Time(if low { i64::MIN } else { i64::MAX })),
        AttrType::Float => Ok(AttrValue::Float(if low {
            f64::NEG_INFINITY
        } else {
            f64::INFINITY
        })),
        AttrType::String if low => Ok(AttrValue::String(String::new())),
        AttrType::String => Err(InvalidArgument::new_err(format!(
            "index `{index}` holds strings, which have no greatest value: give the range's high end"
        ))),
        AttrType::Geo => query_value(value, attr_type, index),
    }
}

/// A `(min_lon, min_lat, max_lon, max_lat)` box.
pub fn geo_box(bbox: &pyo3::Bound<'_, PyAny>) -> PyResult<GeoBox> {
    let corners: Vec<f64> = bbox
        .try_iter()
        .and_then(|items| {
            // At most one more than needed: an endless iterable is refused, not read forever.
            items
                .take(5)
                .map(|item| item.and_then(|item| item.extract::<f64>()))
                .collect::<PyResult<Vec<f64>>>()
        })
        .map_err(|_| {
            InvalidArgument::new_err(format!(
                "a box is (min_lon, min_lat, max_lon, max_lat) as 4 numbers, found {}",
                type_name(bbox)
            ))
        })?;
    let [min_lon, min_lat, max_lon, max_lat] = corners.as_slice() else {
        return Err(InvalidArgument::new_err(format!(
            "a box is (min_lon, min_lat, max_lon, max_lat): 4 numbers, found {}",
            if corners.len() > 4 {
                "more".to_owned()
            } else {
                corners.len().to_string()
            }
        )));
    };
    GeoBox::new(*min_lon, *min_lat, *max_lon, *max_lat)
        .map_err(|error| crate::errors::to_python(&error))
}
