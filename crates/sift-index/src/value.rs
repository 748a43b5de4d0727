//! Typed attribute values: the five attribute types, conversion from JSON (at write time) and
//! from command-line text (at query time), and the value order that the encodings preserve.

use std::cmp::Ordering;
use std::fmt;

use serde_json::Value;

pub use crate::attr_type::AttrType;
use crate::error::{IndexError, Result, MAX_STRING_VALUE_BYTES};
use crate::time::{format_rfc3339_ms, parse_rfc3339_ms};
use crate::zorder::zorder;

/// One typed attribute value.
///
/// Invariants (upheld by every constructor in this crate; build values with [`AttrValue::float`]
/// and [`AttrValue::geo`] rather than the variants to keep them): floats are never NaN and
/// `-0.0` is stored as `0.0`; geo coordinates are finite, `lon` in -180..=180, `lat` in
/// -90..=90, and `-0.0` is stored as `0.0`.
#[derive(Debug, Clone, PartialEq)]
pub enum AttrValue {
    /// An `int` value.
    Int(i64),
    /// A `float` value (never NaN, `-0.0` stored as `0.0`).
    Float(f64),
    /// A `string` value.
    String(String),
    /// Milliseconds since 1970-01-01T00:00:00Z.
    Time(i64),
    /// A `geo` point.
    Geo {
        /// Longitude, degrees.
        lon: f64,
        /// Latitude, degrees.
        lat: f64,
    },
}

/// `-0.0` becomes `0.0`, so that equal numbers have one encoding.
pub(crate) fn normalize_zero(x: f64) -> f64 {
    if x == 0.0 {
        0.0
    } else {
        x
    }
}

impl AttrValue {
    /// The value's type.
    pub fn attr_type(&self) -> AttrType {
        match self {
            AttrValue::Int(_) => AttrType::Int,
            AttrValue::Float(_) => AttrType::Float,
            AttrValue::String(_) => AttrType::String,
            AttrValue::Time(_) => AttrType::Time,
            AttrValue::Geo { .. } => AttrType::Geo,
        }
    }

    /// A float value: NaN is rejected, `-0.0` becomes `0.0`, infinities are kept.
    pub fn float(x: f64) -> Result<AttrValue> {
        if x.is_nan() {
            return Err(IndexError::NotANumber {
                context: "float value".to_string(),
            });
        }
        Ok(AttrValue::Float(normalize_zero(x)))
    }

    /// A geo point; coordinates must be finite, `lon` in -180..=180 and `lat` in -90..=90.
    pub fn geo(lon: f64, lat: f64) -> Result<AttrValue> {
        check_geo(lon, lat).map_err(|reason| IndexError::InvalidGeo {
            context: "geo value".to_string(),
            found: format!("[{lon}, {lat}]"),
            reason,
        })?;
        Ok(AttrValue::Geo {
            lon: normalize_zero(lon),
            lat: normalize_zero(lat),
        })
    }

    /// A string value within [`MAX_STRING_VALUE_BYTES`]; `context` names it in the error.
    pub fn string(text: String, context: &str) -> Result<AttrValue> {
        if text.len() > MAX_STRING_VALUE_BYTES {
            return Err(IndexError::StringTooLong {
                path: context.to_string(),
                length_bytes: text.len(),
                limit_bytes: MAX_STRING_VALUE_BYTES,
            });
        }
        Ok(AttrValue::String(text))
    }

    /// Converts a JSON value of a document to the declared type. `path` names the attribute in
    /// errors. Rules: `int` takes JSON integers in the i64 range only (`1.5`, `1.0` and `1e30`
    /// are type errors); `float` takes any JSON number; `string` takes strings up to
    /// [`MAX_STRING_VALUE_BYTES`]; `time` takes an RFC 3339 string or integer epoch
    /// milliseconds; `geo` takes `[lon, lat]`. JSON `null` is a type error here; the document
    /// parser treats `null` as "attribute absent" before calling this.
    pub fn from_json(json: &Value, attr_type: AttrType, path: &str) -> Result<AttrValue> {
        let wrong_type = || IndexError::WrongType {
            path: path.to_string(),
            expected: attr_type,
            found: describe_json(json),
        };
        match attr_type {
            AttrType::Int => json.as_i64().map(AttrValue::Int).ok_or_else(wrong_type),
            AttrType::Float => {
                let x = json.as_f64().ok_or_else(wrong_type)?;
                // serde_json never yields NaN, but keep the invariant local.
                AttrValue::float(x).map_err(|_| IndexError::NotANumber {
                    context: format!("attribute `{path}`"),
                })
            }
            AttrType::String => {
                let text = json.as_str().ok_or_else(wrong_type)?;
                AttrValue::string(text.to_string(), path)
            }
            AttrType::Time => match json {
                Value::String(text) => {
                    parse_rfc3339_ms(text)
                        .map(AttrValue::Time)
                        .map_err(|reason| IndexError::InvalidTime {
                            context: format!("attribute `{path}`"),
                            found: describe_json(json),
                            reason,
                        })
                }
                Value::Number(_) => {
                    json.as_i64()
                        .map(AttrValue::Time)
                        .ok_or_else(|| IndexError::InvalidTime {
                            context: format!("attribute `{path}`"),
                            found: describe_json(json),
                            reason: "epoch milliseconds must be an integer in the i64 range"
                                .to_string(),
                        })
                }
                _ => Err(wrong_type()),
            },
            AttrType::Geo => {
                let Value::Array(items) = json else {
                    return Err(wrong_type());
                };
                let bad = |reason: String| IndexError::InvalidGeo {
                    context: format!("attribute `{path}`"),
                    found: describe_json(json),
                    reason,
                };
                let [lon, lat] = items.as_slice() else {
                    return Err(bad(format!(
                        "an array of 2 numbers is needed, found {} elements",
                        items.len()
                    )));
                };
                let (Some(lon), Some(lat)) = (lon.as_f64(), lat.as_f64()) else {
                    return Err(bad("both elements must be numbers".to_string()));
                };
                check_geo(lon, lat).map_err(bad)?;
                Ok(AttrValue::Geo {
                    lon: normalize_zero(lon),
                    lat: normalize_zero(lat),
                })
            }
        }
    }

    /// Parses a value typed on the command line (`--value 42`, `--from 2020-01-01T00:00:00Z`).
    /// `int`: decimal i64; `float`: a Rust float literal (`inf` allowed, `NaN` rejected);
    /// `string`: the text as is; `time`: RFC 3339 or integer epoch milliseconds; `geo`:
    /// `lon,lat` with optional surrounding brackets.
    pub fn parse_cli(text: &str, attr_type: AttrType) -> Result<AttrValue> {
        let invalid = |reason: String| IndexError::InvalidValue {
            expected: attr_type,
            text: text.to_string(),
            reason,
        };
        let trimmed = text.trim();
        match attr_type {
            AttrType::Int => trimmed
                .parse::<i64>()
                .map(AttrValue::Int)
                .map_err(|e| invalid(format!("{e} (an integer in the i64 range is needed)"))),
            AttrType::Float => {
                let x = trimmed.parse::<f64>().map_err(|e| invalid(e.to_string()))?;
                AttrValue::float(x).map_err(|_| IndexError::NotANumber {
                    context: "command-line value".to_string(),
                })
            }
            AttrType::String => AttrValue::string(text.to_string(), "command-line value"),
            AttrType::Time => {
                let is_integer = !trimmed.is_empty()
                    && trimmed
                        .strip_prefix('-')
                        .unwrap_or(trimmed)
                        .bytes()
                        .all(|b| b.is_ascii_digit());
                let parsed = if is_integer {
                    trimmed
                        .parse::<i64>()
                        .map_err(|e| format!("{e} (epoch milliseconds must fit in i64)"))
                } else {
                    parse_rfc3339_ms(trimmed)
                };
                parsed
                    .map(AttrValue::Time)
                    .map_err(|reason| IndexError::InvalidTime {
                        context: "command-line value".to_string(),
                        found: format!("`{text}`"),
                        reason,
                    })
            }
            AttrType::Geo => {
                let bad = |reason: String| IndexError::InvalidGeo {
                    context: "command-line value".to_string(),
                    found: format!("`{text}`"),
                    reason,
                };
                let inner = trimmed
                    .strip_prefix('[')
                    .and_then(|rest| rest.strip_suffix(']'))
                    .unwrap_or(trimmed);
                let Some((lon_text, lat_text)) = inner.split_once(',') else {
                    return Err(bad("write it as lon,lat".to_string()));
                };
                let lon = lon_text
                    .trim()
                    .parse::<f64>()
                    .map_err(|e| bad(format!("longitude: {e}")))?;
                let lat = lat_text
                    .trim()
                    .parse::<f64>()
                    .map_err(|e| bad(format!("latitude: {e}")))?;
                check_geo(lon, lat).map_err(bad)?;
                Ok(AttrValue::Geo {
                    lon: normalize_zero(lon),
                    lat: normalize_zero(lat),
                })
            }
        }
    }

    /// The value order that the encoding preserves, for two values of the same type; `None`
    /// for values of different types. Floats compare numerically (`-inf` < negatives < `0.0` <
    /// positives < `inf`); strings compare by UTF-8 bytes; geo points compare by Z-order code,
    /// then longitude, then latitude.
    pub fn compare(&self, other: &AttrValue) -> Option<Ordering> {
        match (self, other) {
            (AttrValue::Int(a), AttrValue::Int(b)) | (AttrValue::Time(a), AttrValue::Time(b)) => {
                Some(a.cmp(b))
            }
            (AttrValue::Float(a), AttrValue::Float(b)) => {
                Some(normalize_zero(*a).total_cmp(&normalize_zero(*b)))
            }
            (AttrValue::String(a), AttrValue::String(b)) => Some(a.as_bytes().cmp(b.as_bytes())),
            (
                AttrValue::Geo {
                    lon: lon_a,
                    lat: lat_a,
                },
                AttrValue::Geo {
                    lon: lon_b,
                    lat: lat_b,
                },
            ) => Some(
                zorder(*lon_a, *lat_a)
                    .cmp(&zorder(*lon_b, *lat_b))
                    .then(normalize_zero(*lon_a).total_cmp(&normalize_zero(*lon_b)))
                    .then(normalize_zero(*lat_a).total_cmp(&normalize_zero(*lat_b))),
            ),
            _ => None,
        }
    }
}

/// Shown in CLI tables: integers and floats as numbers (floats with full round-trip precision),
/// strings as is, times as RFC 3339 UTC, geo as `[lon, lat]`.
impl fmt::Display for AttrValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AttrValue::Int(v) => write!(f, "{v}"),
            AttrValue::Float(v) => write!(f, "{v:?}"),
            AttrValue::String(v) => f.write_str(v),
            AttrValue::Time(ms) => f.write_str(&format_rfc3339_ms(*ms)),
            AttrValue::Geo { lon, lat } => write!(f, "[{lon:?}, {lat:?}]"),
        }
    }
}

fn check_geo(lon: f64, lat: f64) -> std::result::Result<(), String> {
    if !(-180.0..=180.0).contains(&lon) {
        return Err(format!("longitude {lon} is outside -180..=180"));
    }
    if !(-90.0..=90.0).contains(&lat) {
        return Err(format!("latitude {lat} is outside -90..=90"));
    }
    Ok(())
}

/// A short description of a JSON value for error messages: its JSON type and, for scalars,
/// the value (long strings are cut).
pub fn describe_json(json: &Value) -> String {
    match json {
        Value::Null => "null".to_string(),
        Value::Bool(b) => format!("boolean {b}"),
        Value::Number(n) if n.is_i64() => format!("integer {n}"),
        Value::Number(n) if n.is_u64() => format!("integer {n} (outside the i64 range)"),
        Value::Number(n) => format!("number {n} (not an integer)"),
        Value::String(s) => {
            const SHOWN_CHARS: usize = 40;
            let mut shown: String = s.chars().take(SHOWN_CHARS).collect();
            if shown.len() < s.len() {
                shown.push('…');
            }
            format!("string {shown:?}")
        }
        Value::Array(items) => format!("array of {} elements", items.len()),
        Value::Object(fields) => format!("object with {} fields", fields.len()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn type_names_round_trip() {
        for t in AttrType::ALL {
            assert_eq!(t.name().parse::<AttrType>().ok(), Some(t));
            assert_eq!(AttrType::from_type_byte(t.type_byte()), Some(t));
        }
        assert!("integer".parse::<AttrType>().is_err());
        assert_eq!(AttrType::from_type_byte(0), None);
        assert_eq!(AttrType::from_type_byte(6), None);
    }

    #[test]
    fn int_accepts_only_i64_integers() {
        assert_eq!(
            AttrValue::from_json(&json!(42), AttrType::Int, "a").ok(),
            Some(AttrValue::Int(42))
        );
        assert_eq!(
            AttrValue::from_json(&json!(i64::MIN), AttrType::Int, "a").ok(),
            Some(AttrValue::Int(i64::MIN))
        );
        for bad in [
            json!(1.5),
            json!(1.0),
            json!(1e30),
            json!(u64::MAX),
            json!("42"),
            json!(true),
            json!([1]),
        ] {
            let err = AttrValue::from_json(&bad, AttrType::Int, "user.id").unwrap_err();
            let message = err.to_string();
            assert!(
                matches!(
                    err,
                    IndexError::WrongType {
                        expected: AttrType::Int,
                        ..
                    }
                ),
                "{message}"
            );
            assert!(
                message.contains("user.id") && message.contains("int"),
                "{message}"
            );
        }
    }

    #[test]
    fn float_accepts_integers_and_normalizes_negative_zero() {
        assert_eq!(
            AttrValue::from_json(&json!(3), AttrType::Float, "a").ok(),
            Some(AttrValue::Float(3.0))
        );
        let zero = AttrValue::from_json(&json!(-0.0), AttrType::Float, "a").unwrap();
        let AttrValue::Float(x) = zero else {
            unreachable!()
        };
        assert!(x.is_sign_positive());
        assert!(AttrValue::from_json(&json!("1.5"), AttrType::Float, "a").is_err());
        assert!(matches!(
            AttrValue::float(f64::NAN),
            Err(IndexError::NotANumber { .. })
        ));
    }

    #[test]
    fn time_accepts_rfc3339_and_epoch_ms() {
        assert_eq!(
            AttrValue::from_json(&json!("2020-01-01T00:00:00Z"), AttrType::Time, "t").ok(),
            Some(AttrValue::Time(1_577_836_800_000))
        );
        assert_eq!(
            AttrValue::from_json(&json!(-5), AttrType::Time, "t").ok(),
            Some(AttrValue::Time(-5))
        );
        let err = AttrValue::from_json(&json!("yesterday"), AttrType::Time, "created").unwrap_err();
        assert!(
            matches!(err, IndexError::InvalidTime { .. }) && err.to_string().contains("created")
        );
        assert!(matches!(
            AttrValue::from_json(&json!(1.5), AttrType::Time, "t"),
            Err(IndexError::InvalidTime { .. })
        ));
        assert!(matches!(
            AttrValue::from_json(&json!(true), AttrType::Time, "t"),
            Err(IndexError::WrongType { .. })
        ));
    }

    #[test]
    fn geo_checks_shape_and_bounds() {
        assert_eq!(
            AttrValue::from_json(&json!([-122.5, 37.75]), AttrType::Geo, "loc").ok(),
            Some(AttrValue::Geo {
                lon: -122.5,
                lat: 37.75
            })
        );
        for bad in [
            json!([1.0]),
            json!([1, 2, 3]),
            json!([181, 0]),
            json!([0, -90.5]),
            json!(["1", "2"]),
        ] {
            assert!(
                matches!(
                    AttrValue::from_json(&bad, AttrType::Geo, "loc"),
                    Err(IndexError::InvalidGeo { .. })
                ),
                "{bad}"
            );
        }
        assert!(matches!(
            AttrValue::from_json(&json!({"lon": 1}), AttrType::Geo, "loc"),
            Err(IndexError::WrongType { .. })
        ));
    }

    #[test]
    fn string_limit() {
        let long = "x".repeat(MAX_STRING_VALUE_BYTES + 1);
        let err = AttrValue::from_json(&json!(long), AttrType::String, "name").unwrap_err();
        assert!(
            matches!(err, IndexError::StringTooLong { .. }) && err.to_string().contains("name")
        );
        let max = "x".repeat(MAX_STRING_VALUE_BYTES);
        assert!(AttrValue::from_json(&json!(max), AttrType::String, "name").is_ok());
    }

    #[test]
    fn cli_values() {
        assert_eq!(
            AttrValue::parse_cli("42", AttrType::Int).ok(),
            Some(AttrValue::Int(42))
        );
        assert_eq!(
            AttrValue::parse_cli(" -7 ", AttrType::Int).ok(),
            Some(AttrValue::Int(-7))
        );
        assert!(matches!(
            AttrValue::parse_cli("4.2", AttrType::Int),
            Err(IndexError::InvalidValue { .. })
        ));
        assert_eq!(
            AttrValue::parse_cli("1e3", AttrType::Float).ok(),
            Some(AttrValue::Float(1000.0))
        );
        assert_eq!(
            AttrValue::parse_cli("-inf", AttrType::Float).ok(),
            Some(AttrValue::Float(f64::NEG_INFINITY))
        );
        assert!(matches!(
            AttrValue::parse_cli("NaN", AttrType::Float),
            Err(IndexError::NotANumber { .. })
        ));
        assert_eq!(
            AttrValue::parse_cli(" a b ", AttrType::String).ok(),
            Some(AttrValue::String(" a b ".to_string()))
        );
        assert_eq!(
            AttrValue::parse_cli("2020-01-01T00:00:00Z", AttrType::Time).ok(),
            Some(AttrValue::Time(1_577_836_800_000))
        );
        assert_eq!(
            AttrValue::parse_cli("-1000", AttrType::Time).ok(),
            Some(AttrValue::Time(-1000))
        );
        assert!(matches!(
            AttrValue::parse_cli("2020-01-01", AttrType::Time),
            Err(IndexError::InvalidTime { .. })
        ));
        assert_eq!(
            AttrValue::parse_cli("[1.5, -2]", AttrType::Geo).ok(),
            Some(AttrValue::Geo {
                lon: 1.5,
                lat: -2.0
            })
        );
        assert_eq!(
            AttrValue::parse_cli("1.5,-2", AttrType::Geo).ok(),
            Some(AttrValue::Geo {
                lon: 1.5,
                lat: -2.0
            })
        );
        assert!(matches!(
            AttrValue::parse_cli("1.5", AttrType::Geo),
            Err(IndexError::InvalidGeo { .. })
        ));
        assert!(matches!(
            AttrValue::parse_cli("0,91", AttrType::Geo),
            Err(IndexError::InvalidGeo { .. })
        ));
    }

    #[test]
    fn display() {
        assert_eq!(
            AttrValue::Time(1_577_836_800_000).to_string(),
            "2020-01-01T00:00:00.000Z"
        );
        assert_eq!(AttrValue::Float(1.000_000_1).to_string(), "1.0000001");
        assert_eq!(
            AttrValue::Geo {
                lon: 1.0,
                lat: -2.5
            }
            .to_string(),
            "[1.0, -2.5]"
        );
    }
}
