//! How an attribute's JSON value becomes an index value: as the type reads JSON (the
//! default), or from text, the way a Redis-style store keeps every field (`sift serve`'s
//! hashes hold strings; RediSearch's NUMERIC, TAG and GEO fields read them as numbers, tags
//! and `"lon,lat"` points). Recorded per index in the catalog (`docs/format/index-encodings.md`).

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::{IndexError, Result};
use crate::value::{describe_json, AttrType, AttrValue};

/// The conversion of an index's attribute.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ValueConversion {
    /// The JSON value as the type reads it (`AttrValue::from_json`).
    #[default]
    Json,
    /// `float`: a JSON number, or text holding one (`"4.5"`, `" -2 "`, `"inf"`).
    NumberText,
    /// `string`: a tag — text with surrounding spaces trimmed, lowercased unless
    /// `case_sensitive`. Text holding `separator` would be several tags; an attribute has one
    /// value, so it is refused (never indexed under a wrong value).
    Tag {
        /// The byte between tags (RediSearch's `SEPARATOR`, `,` by default).
        separator: char,
        /// Keep case (RediSearch's `CASESENSITIVE`).
        case_sensitive: bool,
    },
    /// `geo`: `[lon, lat]`, or text `"lon,lat"` (RediSearch GEO).
    LonLatText,
}

impl ValueConversion {
    /// Whether this is the default (the catalog leaves it out then).
    pub fn is_json(&self) -> bool {
        *self == ValueConversion::Json
    }

    /// The attribute type the conversion produces, if it fixes one.
    pub fn required_type(&self) -> Option<AttrType> {
        match self {
            ValueConversion::Json => None,
            ValueConversion::NumberText => Some(AttrType::Float),
            ValueConversion::Tag { .. } => Some(AttrType::String),
            ValueConversion::LonLatText => Some(AttrType::Geo),
        }
    }

    /// The index value of `json` (not null) for an attribute of `attr_type` at `path`.
    pub fn convert(&self, json: &Value, attr_type: AttrType, path: &str) -> Result<AttrValue> {
        let text_error = |reason: String| IndexError::InvalidValue {
            expected: attr_type,
            text: format!("{} at `{path}`", describe_json(json)),
            reason,
        };
        match (self, json) {
            (ValueConversion::Json, _)
            | (
                ValueConversion::NumberText | ValueConversion::LonLatText,
                Value::Number(_) | Value::Array(_),
            ) => AttrValue::from_json(json, attr_type, path),
            (ValueConversion::NumberText, Value::String(text)) => {
                let number: f64 = text
                    .trim()
                    .parse()
                    .map_err(|_| text_error("not a number".to_owned()))?;
                AttrValue::float(number).map_err(|_| text_error("not a number".to_owned()))
            }
            (
                ValueConversion::Tag {
                    separator,
                    case_sensitive,
                },
                Value::String(text),
            ) => {
                let tag = text.trim();
                if tag.contains(*separator) {
                    return Err(text_error(format!(
                        "holds several tags separated by '{separator}'; Sift indexes one tag per field"
                    )));
                }
                let tag = if *case_sensitive {
                    tag.to_owned()
                } else {
                    tag.to_lowercase()
                };
                AttrValue::string(tag, path)
            }
            (ValueConversion::LonLatText, Value::String(text)) => {
                let parts: Vec<&str> = text
                    .split([',', ' '])
                    .filter(|part| !part.is_empty())
                    .collect();
                let [lon, lat] = parts.as_slice() else {
                    return Err(text_error("expected \"lon,lat\"".to_owned()));
                };
                let (Ok(lon), Ok(lat)) = (lon.parse::<f64>(), lat.parse::<f64>()) else {
                    return Err(text_error(
                        "expected \"lon,lat\" with two numbers".to_owned(),
                    ));
                };
                AttrValue::geo(lon, lat).map_err(|error| text_error(error.to_string()))
            }
            _ => Err(IndexError::WrongType {
                path: path.to_owned(),
                expected: attr_type,
                found: describe_json(json),
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn tag(case_sensitive: bool) -> ValueConversion {
        ValueConversion::Tag {
            separator: ',',
            case_sensitive,
        }
    }

    #[test]
    fn text_converts_as_redisearch_reads_it_and_the_rest_is_refused() {
        let number = ValueConversion::NumberText;
        assert_eq!(
            number.convert(&json!(" 4.5 "), AttrType::Float, "n").ok(),
            AttrValue::float(4.5).ok()
        );
        assert_eq!(
            number.convert(&json!(3), AttrType::Float, "n").ok(),
            AttrValue::float(3.0).ok()
        );
        assert_eq!(
            number.convert(&json!("-inf"), AttrType::Float, "n").ok(),
            AttrValue::float(f64::NEG_INFINITY).ok()
        );
        assert!(number
            .convert(&json!("4.5x"), AttrType::Float, "n")
            .is_err());
        assert!(number.convert(&json!("NaN"), AttrType::Float, "n").is_err());
        assert!(number.convert(&json!(true), AttrType::Float, "n").is_err());
        assert_eq!(
            tag(false)
                .convert(&json!(" Red "), AttrType::String, "c")
                .ok(),
            Some(AttrValue::String("red".into()))
        );
        assert_eq!(
            tag(true).convert(&json!("Red"), AttrType::String, "c").ok(),
            Some(AttrValue::String("Red".into()))
        );
        let several = tag(false)
            .convert(&json!("red,blue"), AttrType::String, "c")
            .expect_err("two tags");
        assert!(several.to_string().contains("several tags"), "{several}");
        let lonlat = ValueConversion::LonLatText;
        assert_eq!(
            lonlat
                .convert(&json!("2.35,48.86"), AttrType::Geo, "g")
                .ok(),
            AttrValue::geo(2.35, 48.86).ok()
        );
        assert_eq!(
            lonlat
                .convert(&json!([2.35, 48.86]), AttrType::Geo, "g")
                .ok(),
            AttrValue::geo(2.35, 48.86).ok()
        );
        assert!(lonlat
            .convert(&json!("200,10"), AttrType::Geo, "g")
            .is_err());
        assert!(lonlat.convert(&json!("2.35"), AttrType::Geo, "g").is_err());
    }

    #[test]
    fn conversions_round_trip_through_the_catalog_encoding() {
        for conversion in [
            ValueConversion::Json,
            ValueConversion::NumberText,
            tag(true),
            ValueConversion::LonLatText,
        ] {
            let text = serde_json::to_string(&conversion).expect("serializes");
            assert_eq!(
                serde_json::from_str::<ValueConversion>(&text).ok(),
                Some(conversion),
                "{text}"
            );
        }
    }
}
