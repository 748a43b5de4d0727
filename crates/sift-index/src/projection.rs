//! Write-time JSON parsing that keeps only what the write path reads.
//!
//! A document is parsed once, at write, for its primary key and indexed attributes. Building a
//! full `serde_json::Value` allocates every string, number and map of the document, and most of
//! it is never looked at. A [`PathTrie`] of the paths the parser needs drives the parse instead:
//! the value at the end of each path is kept whole, members on the way to one are visited, and
//! everything else is read in full and dropped (`Skipped`: what is stored must read back).
//! The result is the value at each path, the same `Value` a full parse then `AttrPath::lookup`
//! would find, so the type checks that follow are unchanged; no object on the way is built.
//! On any other input the answer (a syntax error, or a root that is not an object) is the same
//! as well. A string kept at the end of a path is borrowed from the document when it has no
//! escapes ([`Kept::Str`]): a time or string attribute is then converted without allocating a
//! `String` for the JSON value first.

use crate::path::AttrPath;
use serde::de::value::{MapAccessDeserializer, SeqAccessDeserializer};
use serde::de::{DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;
use serde_json::{Number, Value};
use std::collections::BTreeMap;
use std::fmt;

/// A value the write path does not keep, read in full and dropped: strings decoded (escapes
/// and surrogate pairs checked), numbers converted (range checked), nesting within serde_json's
/// recursion limit. `IgnoredAny` checks syntax only, and a document it passes (a lone
/// surrogate `"\ud800"`, `1e400`, arrays nested 200 deep) would be stored and then fail every
/// full read of it (a query's caller parsing the hit, `JSON.GET`, a binding).
struct Skipped;

impl<'de> Deserialize<'de> for Skipped {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Skipped, D::Error> {
        deserializer.deserialize_any(SkippedVisitor)
    }
}

struct SkippedVisitor;

impl<'de> Visitor<'de> for SkippedVisitor {
    type Value = Skipped;

    fn expecting(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str("a JSON value")
    }
    fn visit_bool<E>(self, _: bool) -> Result<Skipped, E> {
        Ok(Skipped)
    }
    fn visit_i64<E>(self, _: i64) -> Result<Skipped, E> {
        Ok(Skipped)
    }
    fn visit_u64<E>(self, _: u64) -> Result<Skipped, E> {
        Ok(Skipped)
    }
    fn visit_f64<E>(self, _: f64) -> Result<Skipped, E> {
        Ok(Skipped)
    }
    fn visit_str<E>(self, _: &str) -> Result<Skipped, E> {
        Ok(Skipped)
    }
    fn visit_unit<E>(self) -> Result<Skipped, E> {
        Ok(Skipped)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut items: A) -> Result<Skipped, A::Error> {
        while items.next_element::<Skipped>()?.is_some() {}
        Ok(Skipped)
    }
    fn visit_map<A: MapAccess<'de>>(self, mut members: A) -> Result<Skipped, A::Error> {
        while members.next_key::<Skipped>()?.is_some() {
            members.next_value::<Skipped>()?;
        }
        Ok(Skipped)
    }
}

/// The members to keep, as a tree of path segments.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct PathTrie {
    /// A path ends here: keep the whole value.
    whole: bool,
    children: BTreeMap<String, PathTrie>,
    /// The same children as a list, for [`PathTrie::parse_paths`]: a document's member names
    /// are compared with a few short names (length first) instead of searched in a map.
    list: Vec<Child>,
    /// Every path (by its position in the list given to [`PathTrie::new`]) ending here or
    /// below, with the segments left after this node: a repeated member replaces what an
    /// earlier one set, and a whole value answers the paths below it.
    below: Vec<(usize, Vec<String>)>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Child {
    name: String,
    /// `name`'s length and first 8 bytes ([`name_head`]): most names are told apart by these
    /// two numbers, without a call to compare bytes.
    length: usize,
    head: u64,
    /// The name as an array index, if it is a canonical one (a path through an array).
    array_index: Option<usize>,
    node: PathTrie,
}

/// The first 8 bytes of `name`, zero-padded, as a number.
#[inline]
fn name_head(name: &str) -> u64 {
    let bytes = name.as_bytes();
    if let Some(head) = bytes.first_chunk::<8>() {
        return u64::from_le_bytes(*head);
    }
    // A short name, without a loop or a copy of variable length (a call): 4 to 7 bytes are two
    // overlapping 4-byte reads, 1 to 3 bytes the first, middle and last byte (where they
    // overlap, the same byte lands in the same place).
    let length = bytes.len();
    if let (Some(first), Some(last)) = (bytes.first_chunk::<4>(), bytes.last_chunk::<4>()) {
        return u64::from(u32::from_le_bytes(*first))
            | (u64::from(u32::from_le_bytes(*last)) << (8 * (length - 4)));
    }
    match bytes {
        [] => 0,
        [first, ..] => {
            let middle = bytes[length / 2];
            let last = bytes[length - 1];
            u64::from(*first)
                | (u64::from(middle) << (8 * (length / 2)))
                | (u64::from(last) << (8 * (length - 1)))
        }
    }
}

/// The value kept at the end of a path.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Kept<'de> {
    /// A JSON string without escapes, borrowed from the document.
    Str(&'de str),
    /// An integer serde_json reads as a `u64` (what `Value::Number` would hold): an id or a
    /// time is converted without building and matching a `Value` first.
    Unsigned(u64),
    /// An integer serde_json reads as an `i64` (a negative one).
    Signed(i64),
    /// Any other value (a string with escapes included).
    Value(Value),
}

impl Kept<'_> {
    /// The value as a full parse gives it.
    pub(crate) fn to_value(&self) -> Value {
        match self {
            Kept::Str(text) => Value::String((*text).to_string()),
            Kept::Unsigned(number) => Value::Number((*number).into()),
            Kept::Signed(number) => Value::Number((*number).into()),
            Kept::Value(value) => value.clone(),
        }
    }

    pub(crate) fn is_null(&self) -> bool {
        matches!(self, Kept::Value(Value::Null))
    }
}

/// Deserializes a [`Kept`]: the value a `Value` parse gives, a string without escapes borrowed.
struct KeptSeed;

impl<'de> DeserializeSeed<'de> for KeptSeed {
    type Value = Kept<'de>;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Kept<'de>, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for KeptSeed {
    type Value = Kept<'de>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_bool<E>(self, value: bool) -> Result<Kept<'de>, E> {
        Ok(Kept::Value(Value::Bool(value)))
    }
    fn visit_i64<E>(self, value: i64) -> Result<Kept<'de>, E> {
        Ok(Kept::Signed(value))
    }
    fn visit_u64<E>(self, value: u64) -> Result<Kept<'de>, E> {
        Ok(Kept::Unsigned(value))
    }
    fn visit_f64<E>(self, value: f64) -> Result<Kept<'de>, E> {
        Ok(Kept::Value(
            Number::from_f64(value).map_or(Value::Null, Value::Number),
        ))
    }
    fn visit_borrowed_str<E>(self, value: &'de str) -> Result<Kept<'de>, E> {
        Ok(Kept::Str(value))
    }
    fn visit_str<E>(self, value: &str) -> Result<Kept<'de>, E> {
        Ok(Kept::Value(Value::String(value.to_string())))
    }
    fn visit_string<E>(self, value: String) -> Result<Kept<'de>, E> {
        Ok(Kept::Value(Value::String(value)))
    }
    fn visit_unit<E>(self) -> Result<Kept<'de>, E> {
        Ok(Kept::Value(Value::Null))
    }
    fn visit_none<E>(self) -> Result<Kept<'de>, E> {
        Ok(Kept::Value(Value::Null))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, items: A) -> Result<Kept<'de>, A::Error> {
        Value::deserialize(SeqAccessDeserializer::new(items)).map(Kept::Value)
    }
    fn visit_map<A: MapAccess<'de>>(self, members: A) -> Result<Kept<'de>, A::Error> {
        Value::deserialize(MapAccessDeserializer::new(members)).map(Kept::Value)
    }
}

/// A document parsed by [`PathTrie::parse_paths`].
#[cfg(test)]
#[derive(Debug)]
pub(crate) enum Projected<'de> {
    /// The root is an object: the value at each path (by position), `None` where the path
    /// finds nothing (as `AttrPath::lookup` on a full parse).
    Object(Vec<Option<Kept<'de>>>),
    /// The root is not an object: the value kept for the error message.
    NotAnObject(Value),
}

impl PathTrie {
    pub(crate) fn new<'a>(paths: impl IntoIterator<Item = &'a AttrPath>) -> PathTrie {
        let mut root = PathTrie::default();
        let mut count = 0;
        for (position, path) in paths.into_iter().enumerate() {
            count = position + 1;
            let mut node = &mut root;
            let segments = path.segments();
            for (depth, segment) in segments.iter().enumerate() {
                node.below.push((position, segments[depth..].to_vec()));
                node = node.children.entry(segment.clone()).or_default();
            }
            node.below.push((position, Vec::new()));
            node.whole = true;
        }
        root.build_lists();
        debug_assert!(root.below.len() == count);
        root
    }

    fn build_lists(&mut self) {
        self.list = self
            .children
            .iter()
            .map(|(name, node)| {
                let mut node = node.clone();
                node.build_lists();
                Child {
                    name: name.clone(),
                    length: name.len(),
                    head: name_head(name),
                    array_index: crate::path::array_index(name),
                    node,
                }
            })
            .collect();
    }

    /// The child named `name` (a member of an object).
    #[inline]
    fn member(&self, name: &str) -> Option<&PathTrie> {
        let (length, head) = (name.len(), name_head(name));
        self.list
            .iter()
            .find(|child| {
                child.length == length
                    && child.head == head
                    && (length <= 8 || child.name.as_bytes()[8..] == name.as_bytes()[8..])
            })
            .map(|child| &child.node)
    }

    /// The child for item `index` of an array.
    #[inline]
    fn item(&self, index: usize) -> Option<&PathTrie> {
        self.list
            .iter()
            .find(|child| child.array_index == Some(index))
            .map(|child| &child.node)
    }

    /// Forgets what the paths at and below this node found (a repeated member replaces it).
    fn clear(&self, slots: &mut [Option<Kept<'_>>]) {
        for (position, _) in &self.below {
            if let Some(slot) = slots.get_mut(*position) {
                *slot = None;
            }
        }
    }

    /// Answers the paths at and below this node from its whole value.
    #[inline]
    fn fill<'de>(&self, value: Kept<'de>, slots: &mut [Option<Kept<'de>>]) {
        // One path ending here (the usual node): its slot takes the value, without a call.
        if let [(position, rest)] = self.below.as_slice() {
            if rest.is_empty() {
                if let Some(slot) = slots.get_mut(*position) {
                    *slot = Some(value);
                }
                return;
            }
        }
        self.fill_every_path(value, slots);
    }

    /// [`PathTrie::fill`] for every node.
    #[inline(never)]
    fn fill_every_path<'de>(&self, value: Kept<'de>, slots: &mut [Option<Kept<'de>>]) {
        for (position, rest) in &self.below {
            let found = match &value {
                _ if rest.is_empty() => Some(value.clone()),
                // A string or number has no members or items.
                Kept::Str(_) | Kept::Unsigned(_) | Kept::Signed(_) => None,
                Kept::Value(value) => rest
                    .iter()
                    .try_fold(value, |current, segment| match current {
                        Value::Object(fields) => fields.get(segment.as_str()),
                        Value::Array(items) => {
                            crate::path::array_index(segment).and_then(|index| items.get(index))
                        }
                        _ => None,
                    })
                    .cloned()
                    .map(Kept::Value),
            };
            if let Some(slot) = slots.get_mut(*position) {
                *slot = found;
            }
        }
    }

    /// How many paths the trie was made with (the length of what [`PathTrie::parse_paths`]
    /// fills).
    pub(crate) fn path_count(&self) -> usize {
        self.below.len()
    }

    /// Parses `json` (which must be UTF-8: checked here, as skipped strings are not otherwise
    /// checked) and returns the value at each path directly: no object is built on the way to
    /// them.
    #[cfg(test)]
    pub(crate) fn parse_paths<'de>(&self, json: &'de [u8]) -> serde_json::Result<Projected<'de>> {
        let mut values: Vec<Option<Kept<'de>>> = vec![None; self.path_count()];
        Ok(match self.parse_paths_into(json, &mut values)? {
            Some(other) => Projected::NotAnObject(other),
            None => Projected::Object(values),
        })
    }

    /// Parses `json` as `parse_paths` does into `values` (one per path; the caller's buffer, so a
    /// document with few paths needs no allocation for them): `values[i]` is the value at path
    /// `i` or `None`. Returns the root itself when it is not an object (`values` then says
    /// nothing).
    pub(crate) fn parse_paths_into<'de>(
        &self,
        json: &'de [u8],
        values: &mut [Option<Kept<'de>>],
    ) -> serde_json::Result<Option<Value>> {
        let text = match std::str::from_utf8(json) {
            Ok(text) => text,
            Err(error) => {
                serde_json::from_slice::<IgnoredAny>(json)?;
                return Err(serde::de::Error::custom(format!(
                    "invalid UTF-8 at byte {}",
                    error.valid_up_to()
                )));
            }
        };
        for value in values.iter_mut() {
            *value = None;
        }
        // From the checked text: member names and kept strings are not checked again.
        let mut deserializer = serde_json::Deserializer::from_str(text);
        let root = Root {
            trie: self,
            slots: values,
        }
        .deserialize(&mut deserializer)?;
        deserializer.end()?;
        Ok(root)
    }
}

/// Reads a member name and answers the child of `0` it names: the name is looked up where
/// serde_json gives it (borrowed from the input or, with escapes, from its scratch buffer),
/// never copied.
struct MemberSeed<'t>(&'t PathTrie);

impl<'de, 't> DeserializeSeed<'de> for MemberSeed<'t> {
    type Value = Option<&'t PathTrie>;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_str(self)
    }
}

impl<'t> Visitor<'_> for MemberSeed<'t> {
    type Value = Option<&'t PathTrie>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a member name")
    }
    fn visit_str<E>(self, name: &str) -> Result<Option<&'t PathTrie>, E> {
        Ok(self.0.member(name))
    }
}

/// The root of a [`PathTrie::parse_paths`] parse: `None` for an object (its paths filled in),
/// else the value itself.
struct Root<'t, 's, 'de> {
    trie: &'t PathTrie,
    slots: &'s mut [Option<Kept<'de>>],
}

impl<'de> DeserializeSeed<'de> for Root<'_, '_, 'de> {
    type Value = Option<Value>;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Option<Value>, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Root<'_, '_, 'de> {
    type Value = Option<Value>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_bool<E>(self, value: bool) -> Result<Option<Value>, E> {
        Ok(Some(Value::Bool(value)))
    }
    fn visit_i64<E>(self, value: i64) -> Result<Option<Value>, E> {
        Ok(Some(Value::Number(value.into())))
    }
    fn visit_u64<E>(self, value: u64) -> Result<Option<Value>, E> {
        Ok(Some(Value::Number(value.into())))
    }
    fn visit_f64<E>(self, value: f64) -> Result<Option<Value>, E> {
        Ok(Some(
            Number::from_f64(value).map_or(Value::Null, Value::Number),
        ))
    }
    fn visit_str<E>(self, value: &str) -> Result<Option<Value>, E> {
        Ok(Some(Value::String(value.to_string())))
    }
    fn visit_string<E>(self, value: String) -> Result<Option<Value>, E> {
        Ok(Some(Value::String(value)))
    }
    fn visit_unit<E>(self) -> Result<Option<Value>, E> {
        Ok(Some(Value::Null))
    }
    fn visit_none<E>(self) -> Result<Option<Value>, E> {
        Ok(Some(Value::Null))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut items: A) -> Result<Option<Value>, A::Error> {
        let mut kept = Vec::new();
        while let Some(item) = items.next_element::<Value>()? {
            kept.push(item);
        }
        Ok(Some(Value::Array(kept)))
    }
    fn visit_map<A: MapAccess<'de>>(self, members: A) -> Result<Option<Value>, A::Error> {
        Slots {
            trie: self.trie,
            slots: self.slots,
        }
        .visit_map(members)?;
        Ok(None)
    }
}

/// A value below the root on the way to some paths: fills the slots of the paths it holds.
struct Slots<'t, 's, 'de> {
    trie: &'t PathTrie,
    slots: &'s mut [Option<Kept<'de>>],
}

impl<'de> DeserializeSeed<'de> for Slots<'_, '_, 'de> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        if self.trie.whole {
            let value = KeptSeed.deserialize(deserializer)?;
            self.trie.fill(value, self.slots);
            Ok(())
        } else {
            deserializer.deserialize_any(self)
        }
    }
}

impl<'de> Visitor<'de> for Slots<'_, '_, 'de> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }
    // A scalar where a path goes on: the paths find nothing (their slots are already empty).
    fn visit_bool<E>(self, _value: bool) -> Result<(), E> {
        Ok(())
    }
    fn visit_i64<E>(self, _value: i64) -> Result<(), E> {
        Ok(())
    }
    fn visit_u64<E>(self, _value: u64) -> Result<(), E> {
        Ok(())
    }
    fn visit_f64<E>(self, _value: f64) -> Result<(), E> {
        Ok(())
    }
    fn visit_str<E>(self, _value: &str) -> Result<(), E> {
        Ok(())
    }
    fn visit_unit<E>(self) -> Result<(), E> {
        Ok(())
    }
    fn visit_none<E>(self) -> Result<(), E> {
        Ok(())
    }
    /// A path through an array (`/tags/1`): only the items on a path are kept.
    fn visit_seq<A: SeqAccess<'de>>(self, mut items: A) -> Result<(), A::Error> {
        let mut index = 0usize;
        loop {
            let more = match self.trie.item(index) {
                Some(child) => items
                    .next_element_seed(Slots {
                        trie: child,
                        slots: &mut *self.slots,
                    })?
                    .is_some(),
                None => items.next_element::<Skipped>()?.is_some(),
            };
            if !more {
                return Ok(());
            }
            index = index.saturating_add(1);
        }
    }
    fn visit_map<A: MapAccess<'de>>(self, mut members: A) -> Result<(), A::Error> {
        while let Some(child) = members.next_key_seed(MemberSeed(self.trie))? {
            match child {
                // A value kept whole (`Slots::deserialize` of a whole node, without its call):
                // `fill` sets every slot `clear` would, so a repeated name keeps its last value.
                Some(child) if child.whole => {
                    let value = members.next_value_seed(KeptSeed)?;
                    child.fill(value, self.slots);
                }
                // A repeated name keeps its last value, as a full parse does.
                Some(child) => {
                    child.clear(self.slots);
                    members.next_value_seed(Slots {
                        trie: child,
                        slots: &mut *self.slots,
                    })?;
                }
                None => {
                    members.next_value::<Skipped>()?;
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// `name_head` of every length (the overlapping reads of short names) is the first 8 bytes,
    /// zero-padded, byte by byte.
    #[test]
    fn name_head_is_the_zero_padded_first_bytes() {
        use rand::{Rng, SeedableRng};
        let seed = 0x4EAD_u64;
        let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
        for _ in 0..200 {
            for length in 0..=12 {
                let name: String = (0..length)
                    .map(|_| char::from(rng.gen_range(b' '..=b'~')))
                    .collect();
                let mut want = 0u64;
                for (i, &byte) in name.as_bytes().iter().take(8).enumerate() {
                    want |= u64::from(byte) << (8 * i);
                }
                assert_eq!(name_head(&name), want, "seed {seed}: {name:?}");
            }
        }
    }

    fn trie(paths: &[&str]) -> PathTrie {
        let paths: Vec<AttrPath> = paths.iter().map(|p| AttrPath::parse(p).unwrap()).collect();
        PathTrie::new(paths.iter())
    }

    #[test]
    fn keeps_exactly_the_values_on_the_paths() {
        let paths = ["id", "user.id", "/user/tags/1", "place.coordinates", "a\"b"];
        let text = r#"{"id": "x\"1", "body": "long text", "user": {"id": -7, "name": "n",
            "tags": ["p", "q"]}, "place": {"coordinates": [1.5, -2.25], "kind": "city"},
            "a\"b": {"deep": [1, {"x": null}]}, "id": 42}"#;
        let full: Value = serde_json::from_str(text).unwrap();
        let Projected::Object(values) = trie(&paths).parse_paths(text.as_bytes()).unwrap() else {
            panic!("an object root is an object");
        };
        for (path, value) in paths.iter().zip(&values) {
            let path = AttrPath::parse(path).unwrap();
            assert_eq!(
                value.as_ref().map(Kept::to_value).as_ref(),
                path.lookup(&full),
                "{path}"
            );
        }
        assert_eq!(
            values[0],
            Some(Kept::Unsigned(42)),
            "a repeated name keeps its last value"
        );
        assert_eq!(values[1], Some(Kept::Signed(-7)));
        assert_eq!(values[3], Some(Kept::Value(json!([1.5, -2.25]))));
        // Strings are borrowed from the text unless they have escapes.
        let paths = ["a", "b", "c"];
        let text = r#"{"a": "plain", "b": "esc\u0061ped", "c": ""}"#;
        let Projected::Object(values) = trie(&paths).parse_paths(text.as_bytes()).unwrap() else {
            panic!("an object root is an object");
        };
        assert_eq!(values[0], Some(Kept::Str("plain")));
        assert_eq!(values[1], Some(Kept::Value(json!("escaped"))));
        assert_eq!(values[2], Some(Kept::Str("")));
    }

    /// `parse_paths` answers every path as `lookup` on a full parse does: repeated members
    /// (the last wins, also when it no longer holds the path), paths through arrays, a path
    /// ending where another goes on, the same path twice, scalars in the way.
    #[test]
    fn parse_paths_matches_lookup_on_a_full_parse() {
        let paths = [
            "id",
            "user.id",
            "user",
            "/user/tags/1",
            "/list/0/x",
            "/list/2",
            "place.coordinates",
            "a\"b",
            "id",
            "/user/0",
        ];
        let documents = [
            r#"{"id": "x\"1", "body": "long text", "user": {"id": -7, "name": "n",
                "tags": ["p", "q"]}, "place": {"coordinates": [1.5, -2.25], "kind": "city"},
                "a\"b": {"deep": [1, {"x": null}]}, "id": 42}"#,
            r#"{"user": {"id": 1, "tags": ["a", "b"]}, "user": 5, "list": [{"x": 1}, 2, 3]}"#,
            r#"{"user": {"id": 1}, "user": {"name": "only"}, "list": {"0": {"x": "m"}, "2": 9}}"#,
            r#"{"user": ["zero", "one"], "list": [[], {"x": [1]}, null], "place": null}"#,
            r#"{"user": {"0": "member", "id": {"nested": true}}, "list": 7, "id": null}"#,
            "{}",
        ];
        let trie = trie(&paths);
        for text in documents {
            let full: Value = serde_json::from_str(text).unwrap();
            let Projected::Object(values) = trie.parse_paths(text.as_bytes()).unwrap() else {
                panic!("an object root is an object");
            };
            assert_eq!(values.len(), paths.len());
            for (path, value) in paths.iter().zip(&values) {
                let path = AttrPath::parse(path).unwrap();
                assert_eq!(
                    value.as_ref().map(Kept::to_value).as_ref(),
                    path.lookup(&full),
                    "{path} in {text}"
                );
            }
        }
        assert!(matches!(
            trie.parse_paths(b"[1, 2]").unwrap(),
            Projected::NotAnObject(Value::Array(items)) if items.len() == 2
        ));
        assert!(matches!(
            trie.parse_paths(b"\"text\"").unwrap(),
            Projected::NotAnObject(Value::String(_))
        ));
        for bad in [
            &b"{\"id\": 1, \"x\": [1, 2,]}"[..],
            b"{\"user\": {\"id\": 1,}}",
            b"{\"id\": 1} trailing",
            b"{\"id\": 1, \"x\": \"\xff\"}",
            b"",
        ] {
            assert!(
                trie.parse_paths(bad).is_err(),
                "{}",
                String::from_utf8_lossy(bad)
            );
        }
    }

    /// Random JSON text: objects (names from a small set, so they repeat and meet the paths,
    /// some escaped), arrays, strings with escapes, numbers of every form, literals, and
    /// random whitespace.
    fn random_json(rng: &mut rand::rngs::StdRng, depth: u32, out: &mut String) {
        use rand::Rng;
        const NAMES: [&str; 8] = ["a", "b", "id", "user", "0", "1", "a\\\"b", "u\\u0073er"];
        const SCALARS: [&str; 16] = [
            "0",
            "7",
            "-0",
            "-12",
            "1.5",
            "-2.25e3",
            "1E2",
            "18446744073709551615",
            "123456789012345678",
            "1234567890123456789",
            "true",
            "false",
            "null",
            "\"text\"",
            "\"q\\\"u\\\\o\\u00e9te\"",
            "\"\"",
        ];
        const SPACES: [&str; 4] = ["", " ", "\n\t", "\r "];
        let space = |rng: &mut rand::rngs::StdRng, out: &mut String| {
            out.push_str(SPACES[rng.gen_range(0..SPACES.len())]);
        };
        let kind = if depth == 0 { 2 } else { rng.gen_range(0..5) };
        match kind {
            0 | 1 => {
                out.push('{');
                let members = rng.gen_range(0..5);
                for member in 0..members {
                    if member > 0 {
                        out.push(',');
                    }
                    space(rng, out);
                    out.push('"');
                    out.push_str(NAMES[rng.gen_range(0..NAMES.len())]);
                    out.push('"');
                    space(rng, out);
                    out.push(':');
                    space(rng, out);
                    random_json(rng, depth.saturating_sub(1), out);
                    space(rng, out);
                }
                out.push('}');
            }
            2 => out.push_str(SCALARS[rng.gen_range(0..SCALARS.len())]),
            _ => {
                out.push('[');
                for item in 0..rng.gen_range(0..4) {
                    if item > 0 {
                        out.push(',');
                    }
                    space(rng, out);
                    random_json(rng, depth.saturating_sub(1), out);
                }
                out.push(']');
            }
        }
    }

    /// On random documents, every path's value (through objects, arrays, repeated and
    /// escaped names) is what `lookup` finds on a full parse.
    #[test]
    fn random_documents_match_lookup_on_a_full_parse() {
        use rand::{Rng, SeedableRng};
        let seed = 0x5CA7_u64;
        let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
        let path_sets: [&[&str]; 5] = [
            &["id", "user.id"],
            &["user.id", "user.a.b", "/a\"b/id"],
            &["user", "user.id", "/user/0/id"],
            &["a.b.id", "/a/1", "b", "/user/id/a"],
            &["/usser/id", "user.0.a", "/a/b/0"],
        ];
        let tries: Vec<(Vec<AttrPath>, PathTrie)> = path_sets
            .iter()
            .map(|paths| {
                let paths: Vec<AttrPath> =
                    paths.iter().map(|p| AttrPath::parse(p).unwrap()).collect();
                let trie = PathTrie::new(paths.iter());
                (paths, trie)
            })
            .collect();
        let mut scanned = 0;
        for round in 0..3000 {
            let mut text = String::new();
            let depth = rng.gen_range(1..5);
            text.push('{');
            for member in 0..rng.gen_range(0..6) {
                if member > 0 {
                    text.push(',');
                }
                let name = ["user", "a", "id", "b", "usser"][rng.gen_range(0..5)];
                text.push('"');
                text.push_str(name);
                text.push_str("\":");
                random_json(&mut rng, depth, &mut text);
            }
            text.push('}');
            let full: Value = serde_json::from_str(&text)
                .unwrap_or_else(|e| panic!("seed {seed} round {round}: {e}: {text}"));
            for (paths, trie) in &tries {
                let Projected::Object(values) = trie.parse_paths(text.as_bytes()).unwrap() else {
                    panic!("seed {seed}: an object root is an object");
                };
                for (path, value) in paths.iter().zip(&values) {
                    if value.is_some() && path.segments().len() > 1 {
                        scanned += 1;
                    }
                    assert_eq!(
                        value.as_ref().map(Kept::to_value).as_ref(),
                        path.lookup(&full),
                        "seed {seed} round {round}: {path} in {text}"
                    );
                }
            }
        }
        assert!(scanned > 500, "only {scanned} nested values found");
    }

    #[test]
    fn rejects_what_a_full_parse_rejects() {
        let t = trie(&["id"]);
        for bad in [
            &b"{\"id\": 1, \"x\": [1, 2,]}"[..],
            b"{\"id\": 1, \"x\": tru}",
            b"{\"id\": 1} trailing",
            b"{\"id\": 1, \"x\": \"\xff\"}",
            b"{\"id\": 1, \"x\": \"\\u12\"}",
            b"",
        ] {
            assert!(serde_json::from_slice::<Value>(bad).is_err());
            assert!(
                t.parse_paths(bad).is_err(),
                "{}",
                String::from_utf8_lossy(bad)
            );
        }
    }

    #[test]
    fn a_root_that_is_not_an_object_is_kept_for_the_error_message() {
        let t = trie(&["id"]);
        let root = |text: &[u8]| match t.parse_paths(text).unwrap() {
            Projected::NotAnObject(value) => value,
            Projected::Object(_) => panic!("{} is not an object", String::from_utf8_lossy(text)),
        };
        assert_eq!(root(b"[1, 2]"), json!([1, 2]));
        assert_eq!(root(b"\"text\""), json!("text"));
        assert_eq!(root(b"3.5"), json!(3.5));
        assert_eq!(root(b"null"), Value::Null);
        assert!(matches!(t.parse_paths(b"{}").unwrap(), Projected::Object(v) if v == vec![None]));
    }
}
