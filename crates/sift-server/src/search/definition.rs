//! A search index's definition (what `FT.CREATE` declared), how it is stored in the
//! collection `redis.search`, and how one of its fields reads a stored key
//! (`docs/format/server-keyspace.md`, "Search indexes").

use serde::{Deserialize, Serialize};
use serde_json::Value as Json;
use std::sync::OnceLock;

use sift_index::{
    AttrPath, AttrType, AttrValue, IndexKind, IndexSpec, Maintenance, ValueConversion,
};

/// The collection that holds one document per search index.
pub const SEARCH_COLLECTION: &str = "redis.search";
/// Its primary-key field.
pub const SEARCH_NAME_FIELD: &str = "name";

/// The keys an index covers: hashes or JSON documents (`ON HASH | JSON`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum KeyType {
    /// Fields of a hash, at `h.FIELD` of the stored record.
    Hash,
    /// Paths of a JSON document, at `j.PATH` of the stored record.
    Json,
}

impl KeyType {
    /// As FT.INFO shows it.
    pub fn name(self) -> &'static str {
        match self {
            KeyType::Hash => "HASH",
            KeyType::Json => "JSON",
        }
    }

    /// The member of the stored record that holds a value of this type.
    pub fn record_member(self) -> &'static str {
        match self {
            KeyType::Hash => "h",
            KeyType::Json => "j",
        }
    }
}

/// A field's RediSearch type.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FieldType {
    /// `NUMERIC`: a float.
    Numeric,
    /// `TAG`: one exact-match tag.
    Tag {
        /// `SEPARATOR` (`,` by default).
        separator: char,
        /// `CASESENSITIVE`.
        case_sensitive: bool,
    },
    /// `GEO`: a `"lon,lat"` point.
    Geo,
}

impl FieldType {
    /// As FT.INFO shows it.
    pub fn name(&self) -> &'static str {
        match self {
            FieldType::Numeric => "NUMERIC",
            FieldType::Tag { .. } => "TAG",
            FieldType::Geo => "GEO",
        }
    }

    /// The Sift attribute type of its index.
    pub fn attr_type(&self) -> AttrType {
        match self {
            FieldType::Numeric => AttrType::Float,
            FieldType::Tag { .. } => AttrType::String,
            FieldType::Geo => AttrType::Geo,
        }
    }

    /// How its index reads a stored value of a key of `key_type`. A JSON number is a number
    /// (RedisJSON keeps types); a hash holds text, read as RediSearch reads it.
    pub fn conversion(&self, key_type: KeyType) -> ValueConversion {
        match (self, key_type) {
            (FieldType::Numeric, KeyType::Json) => ValueConversion::Json,
            (FieldType::Numeric, KeyType::Hash) => ValueConversion::NumberText,
            (
                FieldType::Tag {
                    separator,
                    case_sensitive,
                },
                _,
            ) => ValueConversion::Tag {
                separator: *separator,
                case_sensitive: *case_sensitive,
            },
            (FieldType::Geo, _) => ValueConversion::LonLatText,
        }
    }

    /// The maintenance used when FT.CREATE does not name one: sync-full for a composite index
    /// (stale entries are removed at write, so an index does not grow with updates and
    /// queries read no stale entries), else the kind's own default.
    pub fn default_maintenance(kind: IndexKind) -> Maintenance {
        match kind {
            IndexKind::Composite => Maintenance::SyncFull,
            other => other.default_maintenance(),
        }
    }

    /// The index technique used when FT.CREATE does not name one (`docs/server.md`).
    /// Composite for every type: the cheapest writes and smallest index of the study, an
    /// exact sync-full range scan, and geo support. FT.SEARCH counts every match, so the
    /// top-K shortcuts of lazy and eager posting lists would not shorten a query.
    pub const DEFAULT_KIND: IndexKind = IndexKind::Composite;
}

/// One field of the schema.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Field {
    /// As declared: a hash field name, or a JSON path (`$.a.b`).
    pub identifier: String,
    /// The name queries use (`AS`, else the identifier).
    pub alias: String,
    /// Its type.
    #[serde(rename = "type")]
    pub search_type: FieldType,
    /// `SORTABLE` was given (every field can be sorted by in Sift; kept for FT.INFO).
    pub sortable: bool,
    /// The Sift index kind behind it.
    pub kind: IndexKind,
    /// Its maintenance scheme.
    pub maintenance: Maintenance,
    /// The name of the Sift index in the collection `redis.keys`.
    pub sift_index: String,
    /// Where the value sits in the stored record, as path segments (`["h", FIELD]`,
    /// `["j", "a", "b"]`).
    pub segments: Vec<String>,
    /// `segments` as a path, made once (every query candidate reads through it).
    #[serde(skip)]
    pub path: OnceLock<Option<AttrPath>>,
}

impl Field {
    /// The path of the value in the stored record (`/h/price`), as the field's Sift index
    /// reads it; `None` if the path is beyond the index layer's limits (FT.CREATE refuses it).
    pub fn path(&self) -> Option<&AttrPath> {
        self.path
            .get_or_init(|| AttrPath::from_segments(&self.segments).ok())
            .as_ref()
    }

    /// The value of this field in a stored record: `None` when absent (or JSON null),
    /// `Some(Err)` when present but not readable as the field's type (RediSearch counts such a
    /// document as an indexing failure and leaves it out of the index).
    pub fn value_in(&self, record: &Json, key_type: KeyType) -> Option<Result<AttrValue, String>> {
        // Read as the field's Sift index reads it (`AttrPath::lookup`).
        let json = self.path()?.lookup(record)?;
        if json.is_null() {
            return None;
        }
        Some(self.convert(json, key_type))
    }

    /// `json` (not null) read as this field's type.
    fn convert(&self, json: &Json, key_type: KeyType) -> Result<AttrValue, String> {
        self.search_type
            .conversion(key_type)
            .convert(json, self.search_type.attr_type(), &self.identifier)
            .map_err(|error| error.to_string())
    }
}

/// What FT.CREATE declared.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Definition {
    /// The index's name.
    pub name: String,
    /// A number no other index of this database had: it names the Sift indexes (`ft.ID.N`).
    pub id: u64,
    /// `ON HASH | JSON`.
    pub on: KeyType,
    /// The key prefixes it covers; empty covers every key.
    pub prefixes: Vec<String>,
    /// The schema, in declaration order.
    pub fields: Vec<Field>,
}

impl Definition {
    /// Whether `key` is under one of the prefixes.
    pub fn covers_key(&self, key: &[u8]) -> bool {
        self.prefixes.is_empty()
            || self
                .prefixes
                .iter()
                .any(|prefix| key.starts_with(prefix.as_bytes()))
    }

    /// The field queries call `name`.
    pub fn field(&self, name: &str) -> Option<(usize, &Field)> {
        self.fields
            .iter()
            .enumerate()
            .find(|(_, field)| field.alias == name)
    }

    /// The prefixes to scan for every covered key: none of them starts with another (a key
    /// under both would be read twice), `[""]` for every key.
    pub fn scan_prefixes(&self) -> Vec<String> {
        if self.prefixes.is_empty() {
            return vec![String::new()];
        }
        let mut prefixes = self.prefixes.clone();
        prefixes.sort();
        prefixes.dedup();
        let mut kept: Vec<String> = Vec::new();
        for prefix in prefixes {
            if !kept
                .iter()
                .any(|shorter| prefix.starts_with(shorter.as_str()))
            {
                kept.push(prefix);
            }
        }
        kept
    }

    /// The Sift index spec of field `position`.
    pub fn index_spec(&self, position: usize) -> IndexSpec {
        let field = &self.fields[position];
        IndexSpec::new(
            &field.sift_index,
            field.path().map_or("", AttrPath::as_str),
            field.search_type.attr_type(),
            field.kind,
        )
        .with_key_prefixes(self.prefixes.clone())
        .with_conversion(field.search_type.conversion(self.on))
        .with_maintenance(field.maintenance)
    }

    /// Whether a stored record (of a covered key) belongs to the index, and if so the values
    /// of its fields (`None` where absent). A record of the other key type, or with a field
    /// that does not read as its type, does not belong (RediSearch: an indexing failure).
    pub fn member_values(&self, record: &Json) -> Membership {
        if record.get(self.on.record_member()).is_none() {
            return Membership::OtherType;
        }
        let mut values = Vec::with_capacity(self.fields.len());
        for field in &self.fields {
            match field.value_in(record, self.on) {
                None => values.push(None),
                Some(Ok(value)) => values.push(Some(value)),
                Some(Err(reason)) => return Membership::Failed(reason),
            }
        }
        Membership::Member(values)
    }

    /// [`Definition::member_values`] of a stored record's bytes. A hash record is read
    /// without building a JSON tree (only the schema's fields are converted): every query
    /// candidate goes through here.
    pub fn member_values_of(&self, document: &[u8]) -> Membership {
        if self.on == KeyType::Hash {
            if let Ok(view) = serde_json::from_slice::<HashView<'_>>(document) {
                let Some(fields) = view.h else {
                    return Membership::OtherType;
                };
                let mut values = Vec::with_capacity(self.fields.len());
                for field in &self.fields {
                    let name = field.segments.get(1).map_or("", String::as_str);
                    let Some((_, raw)) = fields.iter().find(|(key, _)| *key == name) else {
                        values.push(None);
                        continue;
                    };
                    let Ok(json) = serde_json::from_str::<Json>(raw.get()) else {
                        return Membership::OtherType;
                    };
                    match field.convert(&json, self.on) {
                        Ok(value) => values.push(Some(value)),
                        Err(reason) => return Membership::Failed(reason),
                    }
                }
                return Membership::Member(values);
            }
        }
        // JSON documents, and hash fields whose names hold escapes.
        match serde_json::from_slice::<Json>(document) {
            Ok(record) => self.member_values(&record),
            Err(_) => Membership::OtherType,
        }
    }
}

/// A stored record with its hash fields borrowed (names without JSON escapes only; the
/// caller falls back to a full parse otherwise).
#[derive(Deserialize)]
struct HashView<'a> {
    #[serde(borrow, default, deserialize_with = "borrowed_pairs")]
    h: Option<BorrowedFields<'a>>,
}

/// Hash fields as (name, raw JSON value) pairs borrowed from the stored bytes.
type BorrowedFields<'a> = Vec<(&'a str, &'a serde_json::value::RawValue)>;

fn borrowed_pairs<'de, D: serde::Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<BorrowedFields<'de>>, D::Error> {
    struct Pairs;
    impl<'de> serde::de::Visitor<'de> for Pairs {
        type Value = BorrowedFields<'de>;
        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("an object of hash fields")
        }
        fn visit_map<M: serde::de::MapAccess<'de>>(
            self,
            mut map: M,
        ) -> Result<Self::Value, M::Error> {
            let mut pairs = Vec::with_capacity(map.size_hint().unwrap_or(8));
            while let Some(pair) = map.next_entry()? {
                pairs.push(pair);
            }
            Ok(pairs)
        }
    }
    deserializer.deserialize_map(Pairs).map(Some)
}

/// What a record is to an index.
#[derive(Debug)]
pub enum Membership {
    /// Not a key of the index's type.
    OtherType,
    /// Of its type, but a field does not read as its type.
    Failed(String),
    /// In the index, with each field's value.
    Member(Vec<Option<AttrValue>>),
}

/// The stored document of a definition.
pub fn encode(definition: &Definition) -> Vec<u8> {
    // Serializing plain data to a Vec cannot fail.
    serde_json::to_vec(definition).unwrap_or_default()
}

/// A definition from its stored document.
pub fn decode(document: &[u8]) -> Result<Definition, String> {
    serde_json::from_slice(document).map_err(|error| error.to_string())
}

/// The record path of a schema identifier, for an index on `key_type`: a hash field is one
/// segment whatever it holds; a JSON path is `$.a.b` (or `$["a b"]`, `.a`), member names only.
pub fn identifier_segments(identifier: &str, key_type: KeyType) -> Result<Vec<String>, String> {
    match key_type {
        KeyType::Hash => {
            if identifier.is_empty() {
                return Err("a field name must not be empty".to_owned());
            }
            Ok(vec!["h".to_owned(), identifier.to_owned()])
        }
        KeyType::Json => {
            let path = crate::json_path::parse(identifier)?;
            if path.steps.is_empty() {
                return Err(format!(
                    "the JSON path '{identifier}' is the whole document; index a member of it"
                ));
            }
            let mut segments = vec!["j".to_owned()];
            for step in path.steps {
                match step {
                    crate::json_path::Step::Member(name) => segments.push(name),
                    crate::json_path::Step::Index(_) => {
                        return Err(format!(
                            "Sift does not index array elements (JSON path '{identifier}'); \
                             index a member of an object"
                        ))
                    }
                }
            }
            Ok(segments)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn definition(on: KeyType, identifier: &str, search_type: FieldType) -> Definition {
        Definition {
            name: "idx".to_owned(),
            id: 1,
            on,
            prefixes: vec!["doc:".to_owned()],
            fields: vec![Field {
                identifier: identifier.to_owned(),
                alias: "f".to_owned(),
                search_type,
                sortable: false,
                kind: IndexKind::Composite,
                maintenance: Maintenance::SyncFull,
                sift_index: "ft.1.0".to_owned(),
                segments: identifier_segments(identifier, on).expect("valid identifier"),
                path: OnceLock::new(),
            }],
        }
    }

    #[test]
    fn a_hash_field_reads_text_and_a_json_path_reads_typed_values() {
        let hash = definition(KeyType::Hash, "price/usd.x", FieldType::Numeric);
        let record = json!({"k": "doc:1", "h": {"price/usd.x": " 12.5 "}});
        match hash.member_values(&record) {
            Membership::Member(values) => assert_eq!(values, [AttrValue::float(12.5).ok()]),
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            hash.member_values(&json!({"k": "doc:1", "h": {"price/usd.x": "cheap"}})),
            Membership::Failed(_)
        ));
        assert!(matches!(
            hash.member_values(&json!({"k": "doc:1", "j": {"a": 1}})),
            Membership::OtherType
        ));
        let document = definition(KeyType::Json, "$.a.b", FieldType::Numeric);
        match document.member_values(&json!({"k": "doc:1", "j": {"a": {"b": 3}}})) {
            Membership::Member(values) => assert_eq!(values, [AttrValue::float(3.0).ok()]),
            other => panic!("{other:?}"),
        }
        // RedisJSON keeps types: text is not a number.
        assert!(matches!(
            document.member_values(&json!({"k": "doc:1", "j": {"a": {"b": "3"}}})),
            Membership::Failed(_)
        ));
        match document.member_values(&json!({"k": "doc:1", "j": {"a": null}})) {
            Membership::Member(values) => assert_eq!(values, [None]),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn reading_stored_bytes_agrees_with_reading_the_parsed_record() {
        let hash = definition(
            KeyType::Hash,
            "c\"x",
            FieldType::Tag {
                separator: ',',
                case_sensitive: false,
            },
        );
        let plain = definition(KeyType::Hash, "n", FieldType::Numeric);
        let document = definition(KeyType::Json, "$.n", FieldType::Numeric);
        for record in [
            json!({"k": "doc:1", "h": {"n": "4", "c\"x": " Red "}}),
            json!({"k": "doc:1", "h": {"n": "four", "c\"x": "a,b"}}),
            json!({"k": "doc:1", "h": {"other": "1"}, "hb": [["AA==", "AA=="]]}),
            json!({"k": "doc:1", "h": {"n": " 1e3 ", "c": "q\"é"}}),
            json!({"k": "doc:1", "j": {"n": 4}}),
            json!({"k": "doc:1", "j": {"n": "4"}}),
            json!({"k": "doc:1", "s": "text"}),
        ] {
            let bytes = record.to_string().into_bytes();
            for index in [&hash, &plain, &document] {
                assert_eq!(
                    format!("{:?}", index.member_values_of(&bytes)),
                    format!("{:?}", index.member_values(&record)),
                    "{record}"
                );
            }
        }
    }

    #[test]
    fn scan_prefixes_never_overlap_and_array_paths_are_refused() {
        let mut index = definition(KeyType::Hash, "n", FieldType::Numeric);
        index.prefixes = vec!["ab".into(), "a".into(), "b:".into(), "a".into()];
        assert_eq!(index.scan_prefixes(), ["a", "b:"]);
        index.prefixes.clear();
        assert_eq!(index.scan_prefixes(), [""]);
        assert!(identifier_segments("$.tags[0]", KeyType::Json).is_err());
        assert!(identifier_segments("$", KeyType::Json).is_err());
        assert_eq!(
            identifier_segments("$[\"a b\"].c", KeyType::Json).expect("valid"),
            ["j", "a b", "c"]
        );
    }
}
