//! The study's data: the LevelDB++ synthetic tweets (`sift_workload`) or the user's JSON Lines
//! file (`--data FILE --pk F --attr path:type`). Either way the experiments get documents to
//! PUT (generated once and replayed for every configuration, so all see the same data) and a
//! query source positioned after them, with query values drawn from the data written.
//!
//! User attributes stand in the benchmark's two attribute roles (`Attribute::UserId`,
//! `Attribute::CreationTime`): the first `--attr` takes the first role, the second the other.

use super::results::{AttributeDescription, DataDescription};
use crate::engines::index::IndexSlot;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use sift_bench::index::time::parse_rfc3339_ms;
use sift_bench::index::BenchError;
use sift_index::AttrType;
use sift_workload::{
    table7, Attribute, Operation, Tweet, TweetConfig, TweetFields, Workload, WorkloadGenerator,
};
use std::io::BufRead;
use std::path::{Path, PathBuf};

/// One indexed attribute of the data.
#[derive(Debug, Clone, PartialEq)]
pub struct StudyAttribute {
    /// The role it plays in the benchmark's operations.
    pub role: Attribute,
    pub path: String,
    pub attr_type: AttrType,
}

impl StudyAttribute {
    /// The range unit of RANGELOOKUP selectivities on it.
    pub fn range_unit(&self) -> &'static str {
        match (self.attr_type, self.role) {
            (AttrType::Time, _) => "minutes",
            (_, Attribute::UserId) => "users",
            _ => "values",
        }
    }

    /// Table 7a's selectivities: 10 and 100 values, or 1 and 100 minutes.
    pub fn selectivities(&self) -> &'static [u64] {
        if self.attr_type == AttrType::Time {
            &table7::TIME_RANGE_SELECTIVITY_MINUTES
        } else {
            &table7::USER_RANGE_SELECTIVITY_USERS
        }
    }

    /// The engine slot indexing this attribute with `kind[:maintenance]`.
    pub fn slot(&self, kind: &str, maintenance: Option<&str>) -> IndexSlot {
        IndexSlot {
            attribute: self.role,
            path: self.path.clone(),
            attr_type: self.attr_type,
            kind: kind.to_owned(),
            maintenance: maintenance.map(str::to_owned),
        }
    }
}

/// A document to PUT: its id (a GET asks for it) and JSON text.
pub type Document = (u64, String);

/// Where documents come from.
#[derive(Debug, Clone)]
pub enum StudyData {
    Tweets {
        seed: u64,
    },
    File {
        path: PathBuf,
        primary_key: String,
        attributes: Vec<StudyAttribute>,
        documents: Vec<Document>,
        /// Per document, per attribute: the value (None when absent or not of the type).
        values: Vec<Vec<Option<i64>>>,
    },
}

/// Query values for operations on loaded data.
pub trait QuerySource {
    fn get(&mut self) -> Option<Operation>;
    fn lookup(&mut self, attribute: Attribute, top_k: Option<usize>) -> Option<Operation>;
    fn range_lookup(
        &mut self,
        attribute: Attribute,
        selectivity: u64,
        top_k: Option<usize>,
    ) -> Option<Operation>;
}

impl QuerySource for WorkloadGenerator {
    fn get(&mut self) -> Option<Operation> {
        WorkloadGenerator::get(self)
    }
    fn lookup(&mut self, attribute: Attribute, top_k: Option<usize>) -> Option<Operation> {
        WorkloadGenerator::lookup(self, attribute, top_k)
    }
    fn range_lookup(
        &mut self,
        attribute: Attribute,
        selectivity: u64,
        top_k: Option<usize>,
    ) -> Option<Operation> {
        WorkloadGenerator::range_lookup(self, attribute, selectivity, top_k)
    }
}

/// Queries over the first `loaded` documents of a user file.
struct FileQueries {
    random: StdRng,
    ids: Vec<u64>,
    /// Per attribute role: the values of the loaded documents (one per document that has one,
    /// so frequent values are queried more), and the distinct values sorted.
    values: Vec<(Attribute, AttrType, Vec<i64>, Vec<i64>)>,
}

impl QuerySource for FileQueries {
    fn get(&mut self) -> Option<Operation> {
        if self.ids.is_empty() {
            return None;
        }
        let tweet_id = self.ids[self.random.gen_range(0..self.ids.len())];
        Some(Operation::Get { tweet_id })
    }

    fn lookup(&mut self, attribute: Attribute, top_k: Option<usize>) -> Option<Operation> {
        let (_, _, values, _) = self.values.iter().find(|(a, ..)| *a == attribute)?;
        if values.is_empty() {
            return None;
        }
        let value = values[self.random.gen_range(0..values.len())];
        Some(Operation::Lookup {
            attribute,
            value,
            top_k,
        })
    }

    fn range_lookup(
        &mut self,
        attribute: Attribute,
        selectivity: u64,
        top_k: Option<usize>,
    ) -> Option<Operation> {
        let (_, attr_type, values, distinct) =
            self.values.iter().find(|(a, ..)| *a == attribute)?;
        if values.is_empty() {
            return None;
        }
        let start = values[self.random.gen_range(0..values.len())];
        let selectivity = selectivity.max(1);
        let (lo, hi) = if *attr_type == AttrType::Time {
            let width_ms = (selectivity as i64).saturating_mul(60_000);
            (start, start.saturating_add(width_ms - 1))
        } else {
            // `selectivity` consecutive distinct values from the start (shifted down at the end).
            let position = distinct.partition_point(|&v| v < start);
            let first = position.min(distinct.len().saturating_sub(selectivity as usize));
            let last = (first + selectivity as usize - 1).min(distinct.len() - 1);
            (distinct[first], distinct[last])
        };
        Some(Operation::RangeLookup {
            attribute,
            lo,
            hi,
            top_k,
        })
    }
}

/// A PUT of a user document, in the workload's operation type (only the id and JSON matter).
pub fn put_operation(document: &Document) -> Operation {
    Operation::Put(Tweet {
        fields: TweetFields {
            tweet_id: document.0,
            user_id: 0,
            created_at_ms: 0,
            timestamp_ms: 0,
            retweet_count: 0,
            longitude: 0.0,
            latitude: 0.0,
            lang: "",
        },
        json: document.1.clone(),
    })
}

impl StudyData {
    /// The tweet attributes: `user.id` (int) and `created_at` (time).
    pub fn tweet_attributes() -> Vec<StudyAttribute> {
        vec![
            StudyAttribute {
                role: Attribute::UserId,
                path: "user.id".to_owned(),
                attr_type: AttrType::Int,
            },
            StudyAttribute {
                role: Attribute::CreationTime,
                path: "created_at".to_owned(),
                attr_type: AttrType::Time,
            },
        ]
    }

    pub fn attributes(&self) -> Vec<StudyAttribute> {
        match self {
            StudyData::Tweets { .. } => Self::tweet_attributes(),
            StudyData::File { attributes, .. } => attributes.clone(),
        }
    }

    pub fn primary_key(&self) -> &str {
        match self {
            StudyData::Tweets { .. } => "tweet_id",
            StudyData::File { primary_key, .. } => primary_key,
        }
    }

    pub fn is_tweets(&self) -> bool {
        matches!(self, StudyData::Tweets { .. })
    }

    pub fn describe(&self) -> DataDescription {
        DataDescription {
            source: if self.is_tweets() { "tweets" } else { "file" }.to_owned(),
            path: match self {
                StudyData::Tweets { .. } => None,
                StudyData::File { path, .. } => Some(path.display().to_string()),
            },
            primary_key: self.primary_key().to_owned(),
            attributes: self
                .attributes()
                .iter()
                .map(|attribute| AttributeDescription {
                    path: attribute.path.clone(),
                    value_type: attr_type_name(attribute.attr_type).to_owned(),
                    role: attribute.role.name().to_owned(),
                    range_unit: attribute.range_unit().to_owned(),
                })
                .collect(),
            documents: self.available(),
        }
    }

    /// The first `count` documents (fewer when a file has fewer) and the queries after them.
    pub fn load(&self, count: u64) -> (Vec<Document>, Box<dyn QuerySource>) {
        match self {
            StudyData::Tweets { seed } => {
                let config = TweetConfig::for_tweets(count.max(1), *seed);
                let mut generator = match WorkloadGenerator::new(config, Workload::Static) {
                    Ok(generator) => generator,
                    // The configuration comes from `for_tweets`, which is always valid.
                    Err(_) => return (Vec::new(), Box::new(empty_queries())),
                };
                let mut documents = Vec::with_capacity(count as usize);
                for _ in 0..count {
                    if let Operation::Put(tweet) = generator.put() {
                        documents.push((tweet.fields.tweet_id, tweet.json));
                    }
                }
                (documents, Box::new(generator))
            }
            StudyData::File {
                attributes,
                documents,
                values,
                ..
            } => {
                let loaded = (count as usize).min(documents.len());
                let mut per_attribute = Vec::new();
                for (position, attribute) in attributes.iter().enumerate() {
                    let all: Vec<i64> = values[..loaded]
                        .iter()
                        .filter_map(|row| row.get(position).copied().flatten())
                        .collect();
                    let mut distinct = all.clone();
                    distinct.sort_unstable();
                    distinct.dedup();
                    per_attribute.push((attribute.role, attribute.attr_type, all, distinct));
                }
                let queries = FileQueries {
                    random: StdRng::seed_from_u64(count),
                    ids: documents[..loaded].iter().map(|(id, _)| *id).collect(),
                    values: per_attribute,
                };
                (documents[..loaded].to_vec(), Box::new(queries))
            }
        }
    }

    /// Every document of a user file and its attribute values (empty for tweets).
    pub fn file_documents(&self) -> (&[Document], &[Vec<Option<i64>>]) {
        match self {
            StudyData::Tweets { .. } => (&[], &[]),
            StudyData::File {
                documents, values, ..
            } => (documents, values),
        }
    }

    /// Mean bytes of a document's JSON: the engine settings are sized from it.
    pub fn document_bytes_mean(&self) -> u64 {
        match self {
            StudyData::Tweets { .. } => sift_workload::tweet::DOCUMENT_BYTES_MEAN as u64,
            StudyData::File { documents, .. } => {
                let total: usize = documents.iter().map(|(_, json)| json.len()).sum();
                (total / documents.len().max(1)).max(1) as u64
            }
        }
    }

    /// How many of `count` documents a load gets: all of them from the generator, at most the
    /// file's from a file.
    pub fn loadable(&self, count: u64) -> u64 {
        self.available()
            .map_or(count, |available| count.min(available))
    }

    /// The documents available (files), or `None` (generated: unbounded).
    pub fn available(&self) -> Option<u64> {
        match self {
            StudyData::Tweets { .. } => None,
            StudyData::File { documents, .. } => Some(documents.len() as u64),
        }
    }

    /// Reads a JSON Lines file: at most `limit` documents with a primary key, each attribute
    /// `path:type` (int or time). Primary keys that are non-negative integers are used as
    /// they are; otherwise the line number becomes the key, stored in the field
    /// `_sift_study_id` (GETs need integer keys).
    pub fn from_file(
        path: &Path,
        primary_key: &str,
        attributes: &[String],
        limit: u64,
    ) -> Result<StudyData, BenchError> {
        let attributes = parse_attributes(attributes)?;
        let file = std::fs::File::open(path)
            .map_err(|e| BenchError::new(format!("cannot open {}: {e}", path.display())))?;
        let mut raw = Vec::new();
        for (number, line) in std::io::BufReader::new(file).lines().enumerate() {
            if raw.len() as u64 >= limit {
                break;
            }
            let line = line.map_err(|e| {
                BenchError::new(format!(
                    "cannot read {} line {}: {e}",
                    path.display(),
                    number + 1
                ))
            })?;
            if line.trim().is_empty() {
                continue;
            }
            let document: serde_json::Value = serde_json::from_str(&line).map_err(|e| {
                BenchError::new(format!(
                    "{} line {}: not a JSON document: {e}",
                    path.display(),
                    number + 1
                ))
            })?;
            if !document.is_object() {
                return Err(BenchError::new(format!(
                    "{} line {}: not a JSON object",
                    path.display(),
                    number + 1
                )));
            }
            raw.push(document);
        }
        if raw.is_empty() {
            return Err(BenchError::new(format!("{}: no documents", path.display())));
        }
        let integer_keys: Option<Vec<u64>> = raw
            .iter()
            .map(|document| match value_at(document, primary_key)? {
                serde_json::Value::Number(n) => n.as_u64(),
                serde_json::Value::String(s) => s.parse().ok(),
                _ => None,
            })
            .collect();
        let unique_keys = integer_keys.as_ref().is_some_and(|keys| {
            let mut sorted = keys.clone();
            sorted.sort_unstable();
            sorted.windows(2).all(|pair| pair[0] != pair[1])
        });
        let (primary_key, keys) = match integer_keys {
            Some(keys) if unique_keys => (primary_key.to_owned(), keys),
            _ => {
                let keys: Vec<u64> = (1..=raw.len() as u64).collect();
                for (document, key) in raw.iter_mut().zip(&keys) {
                    if let Some(object) = document.as_object_mut() {
                        object.insert("_sift_study_id".to_owned(), serde_json::Value::from(*key));
                    }
                }
                ("_sift_study_id".to_owned(), keys)
            }
        };
        let mut documents = Vec::with_capacity(raw.len());
        let mut values = Vec::with_capacity(raw.len());
        for (document, key) in raw.iter().zip(keys) {
            values.push(
                attributes
                    .iter()
                    .map(|attribute| attribute_value(document, attribute))
                    .collect(),
            );
            documents.push((key, document.to_string()));
        }
        Ok(StudyData::File {
            path: path.to_owned(),
            primary_key,
            attributes,
            documents,
            values,
        })
    }
}

fn empty_queries() -> FileQueries {
    FileQueries {
        random: StdRng::seed_from_u64(0),
        ids: Vec::new(),
        values: Vec::new(),
    }
}

fn attr_type_name(attr_type: AttrType) -> &'static str {
    match attr_type {
        AttrType::Int => "int",
        AttrType::Float => "float",
        AttrType::String => "string",
        AttrType::Time => "time",
        AttrType::Geo => "geo",
    }
}

/// Parses `path:type` attributes (one or two; types int or time).
pub fn parse_attributes(texts: &[String]) -> Result<Vec<StudyAttribute>, BenchError> {
    if texts.is_empty() || texts.len() > 2 {
        return Err(BenchError::new(
            "--data needs one or two --attr path:type (type int or time)",
        ));
    }
    let roles = [Attribute::UserId, Attribute::CreationTime];
    texts
        .iter()
        .zip(roles)
        .map(|(text, role)| {
            let (path, type_name) = text.rsplit_once(':').ok_or_else(|| {
                BenchError::new(format!(
                    "--attr {text:?}: expected path:type, e.g. user.id:int"
                ))
            })?;
            let attr_type = match type_name {
                "int" => AttrType::Int,
                "time" => AttrType::Time,
                other => {
                    return Err(BenchError::new(format!(
                        "--attr {text:?}: type {other:?} is not supported by the study \
                         (its queries use integer values): use int or time"
                    )))
                }
            };
            if path.is_empty() {
                return Err(BenchError::new(format!("--attr {text:?}: empty path")));
            }
            Ok(StudyAttribute {
                role,
                path: path.trim_start_matches('/').replace('/', "."),
                attr_type,
            })
        })
        .collect()
}

fn value_at<'a>(document: &'a serde_json::Value, path: &str) -> Option<&'a serde_json::Value> {
    let mut value = document;
    for segment in path.split('.') {
        value = value.get(segment)?;
    }
    Some(value)
}

fn attribute_value(document: &serde_json::Value, attribute: &StudyAttribute) -> Option<i64> {
    let value = value_at(document, &attribute.path)?;
    match attribute.attr_type {
        AttrType::Time => match value {
            serde_json::Value::String(text) => parse_rfc3339_ms(text),
            other => other.as_i64(),
        },
        _ => value.as_i64(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn tweets_load_the_same_documents_every_time() {
        let data = StudyData::Tweets { seed: 3 };
        let (first, mut queries) = data.load(100);
        let (second, _) = data.load(100);
        assert_eq!(first.len(), 100);
        assert_eq!(first, second);
        assert!(matches!(queries.get(), Some(Operation::Get { tweet_id })
            if tweet_id > sift_workload::TWEET_ID_BASE && tweet_id <= sift_workload::TWEET_ID_BASE + 100));
    }

    #[test]
    fn reads_user_files_and_draws_queries_from_their_values() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("data.jsonl");
        let mut file = std::fs::File::create(&path).unwrap();
        for i in 0..50 {
            writeln!(
                file,
                r#"{{"name":"n{i}","score":{},"at":"2020-01-01T00:{:02}:00Z"}}"#,
                i % 7,
                i % 60
            )
            .unwrap();
        }
        drop(file);
        let data = StudyData::from_file(
            &path,
            "name",
            &["score:int".to_owned(), "at:time".to_owned()],
            40,
        )
        .unwrap();
        // String keys: the line number becomes the key.
        assert_eq!(data.primary_key(), "_sift_study_id");
        let (documents, mut queries) = data.load(1000);
        assert_eq!(documents.len(), 40);
        assert!(documents[0].1.contains("\"_sift_study_id\":1"));
        for _ in 0..20 {
            let Some(Operation::Lookup { value, .. }) = queries.lookup(Attribute::UserId, None)
            else {
                panic!("no lookup");
            };
            assert!((0..7).contains(&value));
            let Some(Operation::RangeLookup { lo, hi, .. }) =
                queries.range_lookup(Attribute::UserId, 3, None)
            else {
                panic!("no range");
            };
            assert_eq!(hi - lo, 2, "three consecutive distinct values");
        }
        assert!(parse_attributes(&["x:geo".to_owned()]).is_err());
        assert!(parse_attributes(&[]).is_err());
        assert!(
            StudyData::from_file(&dir.path().join("missing"), "a", &["a:int".into()], 1).is_err()
        );
    }
}
