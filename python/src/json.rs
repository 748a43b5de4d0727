//! Python objects to JSON text and back, without a detour through Python's `json` module.
//!
//! To JSON: dicts with string keys, lists and tuples, str, int (64-bit), float (finite),
//! bool and None; anything else is an [`InvalidDocument`] naming its path and type, so a
//! document that cannot round-trip is refused rather than silently changed. From JSON: the
//! stored text, with keys in the order they were written.

use crate::errors::InvalidDocument;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyFloat, PyInt, PyList, PyString, PyTuple};
use serde::de::{DeserializeSeed, Deserializer, Error as _, MapAccess, SeqAccess, Visitor};
use std::cell::RefCell;
use std::collections::HashMap;
use std::fmt;

/// Deepest nesting accepted in a document written from Python: one level less than
/// serde_json reads back (its limit counts the container it is about to enter).
const MAX_DEPTH: usize = 127;

/// Why a value could not be written: the message and the path to it, innermost last.
struct Refusal {
    message: String,
    path: Vec<String>,
}

impl Refusal {
    fn new(message: String) -> Refusal {
        Refusal {
            message,
            path: Vec::new(),
        }
    }

    fn at(mut self, segment: String) -> Refusal {
        self.path.push(segment);
        self
    }

    fn into_error(self, what: &str) -> PyErr {
        let mut path = String::from("$");
        for segment in self.path.iter().rev() {
            path.push_str(segment);
        }
        InvalidDocument::new_err(format!("{what}: {} at {path}", self.message))
    }
}

/// The JSON text of `document`, which must be a dict. `what` names it in errors
/// ("document", "document 3 of put_many").
pub fn document_to_json(document: &Bound<'_, PyAny>, what: &str) -> PyResult<Vec<u8>> {
    if !document.is_instance_of::<PyDict>() {
        return Err(InvalidDocument::new_err(format!(
            "{what} must be a dict, found {}",
            type_name(document)
        )));
    }
    let mut out = Vec::with_capacity(256);
    write_value(document, &mut out, 0).map_err(|refusal| refusal.into_error(what))?;
    Ok(out)
}

/// The JSON value of a query argument (a lookup value or a range bound).
pub fn value_to_json(value: &Bound<'_, PyAny>) -> Result<serde_json::Value, String> {
    let mut out = Vec::new();
    write_value(value, &mut out, MAX_DEPTH - 1).map_err(|refusal| refusal.message)?;
    serde_json::from_slice(&out).map_err(|error| error.to_string())
}

fn write_value(value: &Bound<'_, PyAny>, out: &mut Vec<u8>, depth: usize) -> Result<(), Refusal> {
    if let Ok(text) = value.cast::<PyString>() {
        let text = text
            .to_cow()
            .map_err(|error| Refusal::new(format!("string is not valid UTF-8 ({error})")))?;
        write_string(&text, out);
    } else if let Ok(dict) = value.cast::<PyDict>() {
        nested(depth)?;
        out.push(b'{');
        for (position, (key, item)) in dict.iter().enumerate() {
            let Ok(key) = key.cast::<PyString>() else {
                return Err(Refusal::new(format!(
                    "object key {} is a {}, not a str",
                    repr(&key),
                    type_name(&key)
                )));
            };
            let key = key
                .to_cow()
                .map_err(|error| Refusal::new(format!("key is not valid UTF-8 ({error})")))?;
            if position > 0 {
                out.push(b',');
            }
            write_string(&key, out);
            out.push(b':');
            write_value(&item, out, depth + 1).map_err(|refusal| refusal.at(format!(".{key}")))?;
        }
        out.push(b'}');
    } else if value.is_instance_of::<PyBool>() {
        out.extend_from_slice(if value.is_truthy().unwrap_or(false) {
            b"true"
        } else {
            b"false"
        });
    } else if value.is_instance_of::<PyInt>() {
        if let Ok(number) = value.extract::<i64>() {
            out.extend_from_slice(number.to_string().as_bytes());
        } else if let Ok(number) = value.extract::<u64>() {
            out.extend_from_slice(number.to_string().as_bytes());
        } else {
            return Err(Refusal::new(format!(
                "integer {} is outside the 64-bit range JSON numbers keep exactly",
                repr(value)
            )));
        }
    } else if let Ok(number) = value.cast::<PyFloat>() {
        let number = number.value();
        if !number.is_finite() {
            return Err(Refusal::new(format!(
                "float {number} has no JSON form (NaN and infinities are not JSON)"
            )));
        }
        // serde_json writes the shortest text that reads back as the same float.
        serde_json::to_writer(&mut *out, &number)
            .map_err(|error| Refusal::new(error.to_string()))?;
    } else if value.is_none() {
        out.extend_from_slice(b"null");
    } else if let Ok(list) = value.cast::<PyList>() {
        nested(depth)?;
        write_array(list.iter(), out, depth)?;
    } else if let Ok(tuple) = value.cast::<PyTuple>() {
        nested(depth)?;
        write_array(tuple.iter(), out, depth)?;
    } else {
        return Err(Refusal::new(format!(
            "a {} has no JSON form (use dict, list, str, int, float, bool or None{})",
            type_name(value),
            if value.hasattr("isoformat").unwrap_or(false) {
                "; store a time as an RFC 3339 string or as epoch milliseconds"
            } else {
                ""
            }
        )));
    }
    Ok(())
}

fn write_array<'py>(
    items: impl Iterator<Item = Bound<'py, PyAny>>,
    out: &mut Vec<u8>,
    depth: usize,
) -> Result<(), Refusal> {
    out.push(b'[');
    for (position, item) in items.enumerate() {
        if position > 0 {
            out.push(b',');
        }
        write_value(&item, out, depth + 1)
            .map_err(|refusal| refusal.at(format!("[{position}]")))?;
    }
    out.push(b']');
    Ok(())
}

fn nested(depth: usize) -> Result<(), Refusal> {
    if depth >= MAX_DEPTH {
        return Err(Refusal::new(format!(
            "nesting deeper than {MAX_DEPTH} levels"
        )));
    }
    Ok(())
}

fn write_string(text: &str, out: &mut Vec<u8>) {
    // Writing a str into a Vec cannot fail.
    let _ = serde_json::to_writer(&mut *out, text);
}

/// The Python type name of `value`, for messages.
pub fn type_name(value: &Bound<'_, PyAny>) -> String {
    value
        .get_type()
        .name()
        .map_or_else(|_| "object".to_owned(), |name| name.to_string())
}

fn repr(value: &Bound<'_, PyAny>) -> String {
    let text = value
        .repr()
        .map_or_else(|_| "?".to_owned(), |repr| repr.to_string());
    if text.chars().count() > 60 {
        format!("{}…", text.chars().take(60).collect::<String>())
    } else {
        text
    }
}

/// The Python object for stored JSON text: dicts keep the key order of the text.
pub fn json_to_python<'py>(py: Python<'py>, json: &[u8]) -> PyResult<Bound<'py, PyAny>> {
    Decoder::new(py).decode(json)
}

/// Most distinct object keys a [`Decoder`] keeps for reuse.
const MAX_REMEMBERED_KEYS: usize = 1024;

/// Turns stored JSON texts into Python objects. Object keys seen before are reused rather
/// than made again: documents of one collection share their keys, and a reused key string
/// also keeps the hash Python computed for it, so dicts are built faster.
pub struct Decoder<'py> {
    py: Python<'py>,
    keys: RefCell<HashMap<Box<str>, Bound<'py, PyString>>>,
}

impl<'py> Decoder<'py> {
    pub fn new(py: Python<'py>) -> Decoder<'py> {
        Decoder {
            py,
            keys: RefCell::new(HashMap::new()),
        }
    }

    /// The Python object for `json`.
    pub fn decode(&self, json: &[u8]) -> PyResult<Bound<'py, PyAny>> {
        let mut deserializer = serde_json::Deserializer::from_slice(json);
        PythonValue(self)
            .deserialize(&mut deserializer)
            .and_then(|value| deserializer.end().map(|()| value))
            .map_err(|error| {
                crate::errors::Corruption::new_err(format!("stored document is not JSON: {error}"))
            })
    }

    /// The Python token the decoder builds with.
    pub fn py(&self) -> Python<'py> {
        self.py
    }

    fn key(&self, text: &str) -> Bound<'py, PyString> {
        if let Some(key) = self.keys.borrow().get(text) {
            return key.clone();
        }
        let key = PyString::new(self.py, text);
        let mut keys = self.keys.borrow_mut();
        if keys.len() < MAX_REMEMBERED_KEYS {
            keys.insert(text.into(), key.clone());
        }
        key
    }
}

/// Builds Python objects straight from the parser's events.
#[derive(Clone, Copy)]
struct PythonValue<'a, 'py>(&'a Decoder<'py>);

impl<'de, 'py> DeserializeSeed<'de> for PythonValue<'_, 'py> {
    type Value = Bound<'py, PyAny>;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de, 'py> Visitor<'de> for PythonValue<'_, 'py> {
    type Value = Bound<'py, PyAny>;

    fn expecting(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str("a JSON value")
    }

    fn visit_bool<E: serde::de::Error>(self, value: bool) -> Result<Self::Value, E> {
        Ok(PyBool::new(self.0.py, value).to_owned().into_any())
    }

    fn visit_i64<E: serde::de::Error>(self, value: i64) -> Result<Self::Value, E> {
        Ok(PyInt::new(self.0.py, value).into_any())
    }

    fn visit_u64<E: serde::de::Error>(self, value: u64) -> Result<Self::Value, E> {
        Ok(PyInt::new(self.0.py, value).into_any())
    }

    fn visit_f64<E: serde::de::Error>(self, value: f64) -> Result<Self::Value, E> {
        Ok(PyFloat::new(self.0.py, value).into_any())
    }

    fn visit_str<E: serde::de::Error>(self, value: &str) -> Result<Self::Value, E> {
        Ok(PyString::new(self.0.py, value).into_any())
    }

    fn visit_unit<E: serde::de::Error>(self) -> Result<Self::Value, E> {
        Ok(self.0.py.None().into_bound(self.0.py))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let list = PyList::empty(self.0.py);
        while let Some(item) = seq.next_element_seed(self)? {
            list.append(item).map_err(A::Error::custom)?;
        }
        Ok(list.into_any())
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let dict = PyDict::new(self.0.py);
        while let Some(key) = map.next_key_seed(ObjectKey(self.0))? {
            let value = map.next_value_seed(self)?;
            dict.set_item(key, value).map_err(A::Error::custom)?;
        }
        Ok(dict.into_any())
    }
}

/// An object key, through the decoder's remembered keys.
struct ObjectKey<'a, 'py>(&'a Decoder<'py>);

impl<'de, 'py> DeserializeSeed<'de> for ObjectKey<'_, 'py> {
    type Value = Bound<'py, PyString>;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_str(self)
    }
}

impl<'py> Visitor<'_> for ObjectKey<'_, 'py> {
    type Value = Bound<'py, PyString>;

    fn expecting(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str("an object key")
    }

    fn visit_str<E: serde::de::Error>(self, value: &str) -> Result<Self::Value, E> {
        Ok(self.0.key(value))
    }
}
