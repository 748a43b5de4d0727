//! Table 7b's mixed workloads on the user's own documents (`sift study --data FILE`): the
//! same operation mixes as the tweet generator's, with every operation derived from the file.
//!
//! - PUT: the file's next unused document; once the file is used up, a copy of a random
//!   document under a new primary key (so its values follow the file's distribution).
//! - UPDATE (a PUT of an existing primary key, as LevelDB++'s): the content of a random
//!   document of the file under the key of a random document written so far — the indexed
//!   value moves the way the file's values are distributed.
//! - GET: a random key written so far.
//! - LOOKUP / RANGELOOKUP: a value of a random document written so far (frequent values are
//!   asked more often, as the tweet workload asks active users more often), top-10.

use crate::data::{put_operation, Document, StudyAttribute};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use sift_workload::{table7, Operation, OperationKind, OperationMix, Workload};

/// The operations of one mixed workload over a user file.
pub struct UserMix<'a> {
    random: StdRng,
    mix: OperationMix,
    /// The file's documents, in order, and the first attribute's value of each.
    documents: &'a [Document],
    values: &'a [Option<i64>],
    primary_key: &'a str,
    attribute: StudyAttribute,
    /// Documents of the file written so far (PUTs take the next one).
    used: usize,
    /// Keys written so far, and the attribute values of the documents written.
    keys: Vec<u64>,
    written_values: Vec<i64>,
    distinct_values: Vec<i64>,
    next_key: u64,
}

impl<'a> UserMix<'a> {
    /// A workload after `preloaded` documents of the file were written.
    pub fn new(
        workload: Workload,
        documents: &'a [Document],
        values: &'a [Option<i64>],
        primary_key: &'a str,
        attribute: StudyAttribute,
        preloaded: usize,
        seed: u64,
    ) -> UserMix<'a> {
        let preloaded = preloaded.min(documents.len());
        let written_values: Vec<i64> = values[..preloaded].iter().flatten().copied().collect();
        let mut distinct_values = written_values.clone();
        distinct_values.sort_unstable();
        distinct_values.dedup();
        UserMix {
            random: StdRng::seed_from_u64(seed),
            mix: workload.mix(),
            documents,
            values,
            primary_key,
            attribute,
            used: preloaded,
            keys: documents[..preloaded].iter().map(|(key, _)| *key).collect(),
            written_values,
            distinct_values,
            next_key: documents.iter().map(|(key, _)| *key).max().unwrap_or(0) + 1,
        }
    }

    /// The next operation of the mix.
    pub fn next_operation(&mut self) -> Operation {
        let kind = self.mix.kind_of_draw(self.random.gen_range(0..100_u32));
        let operation = match kind {
            OperationKind::Put => None,
            OperationKind::Get => self
                .random_key()
                .map(|tweet_id| Operation::Get { tweet_id }),
            OperationKind::Update => self.update(),
            OperationKind::Lookup => self.random_value().map(|value| Operation::Lookup {
                attribute: self.attribute.role,
                value,
                top_k: Some(table7::MIXED_TOP_K),
            }),
            OperationKind::RangeLookup => self.range_lookup(),
        };
        operation.unwrap_or_else(|| self.put())
    }

    fn random_key(&mut self) -> Option<u64> {
        (!self.keys.is_empty()).then(|| self.keys[self.random.gen_range(0..self.keys.len())])
    }

    fn random_value(&mut self) -> Option<i64> {
        (!self.written_values.is_empty())
            .then(|| self.written_values[self.random.gen_range(0..self.written_values.len())])
    }

    fn range_lookup(&mut self) -> Option<Operation> {
        let start = self.random_value()?;
        let selectivity = self.attribute.selectivities()[0].max(1) as usize;
        let (lo, hi) = if self.attribute.attr_type == sift_index::AttrType::Time {
            (start, start.saturating_add(selectivity as i64 * 60_000 - 1))
        } else {
            let position = self.distinct_values.partition_point(|&v| v < start);
            let first = position.min(self.distinct_values.len().saturating_sub(selectivity));
            let last = (first + selectivity - 1).min(self.distinct_values.len() - 1);
            (self.distinct_values[first], self.distinct_values[last])
        };
        Some(Operation::RangeLookup {
            attribute: self.attribute.role,
            lo,
            hi,
            top_k: Some(table7::MIXED_TOP_K),
        })
    }

    /// The content of a random document of the file under `key`, and its attribute value.
    fn copy_under(&mut self, key: u64) -> Option<(Document, Option<i64>)> {
        if self.documents.is_empty() {
            return None;
        }
        let source = self.random.gen_range(0..self.documents.len());
        let mut document: serde_json::Value =
            serde_json::from_str(&self.documents[source].1).ok()?;
        set_field(&mut document, self.primary_key, key);
        Some(((key, document.to_string()), self.values[source]))
    }

    fn record(&mut self, key: Option<u64>, value: Option<i64>) {
        if let Some(key) = key {
            self.keys.push(key);
        }
        if let Some(value) = value {
            if let Err(position) = self.distinct_values.binary_search(&value) {
                self.distinct_values.insert(position, value);
            }
            self.written_values.push(value);
        }
    }

    fn update(&mut self) -> Option<Operation> {
        let key = self.random_key()?;
        let (document, value) = self.copy_under(key)?;
        self.record(None, value);
        Some(update_operation(&document))
    }

    fn put(&mut self) -> Operation {
        let (document, value) = if self.used < self.documents.len() {
            self.used += 1;
            (
                self.documents[self.used - 1].clone(),
                self.values[self.used - 1],
            )
        } else {
            let key = self.next_key;
            self.next_key += 1;
            // `copy_under` fails only on a file without documents, which is refused on reading.
            self.copy_under(key)
                .unwrap_or_else(|| ((key, String::from("{}")), None))
        };
        self.record(Some(document.0), value);
        put_operation(&document)
    }
}

/// An UPDATE of a user document: a PUT of an existing key.
fn update_operation(document: &Document) -> Operation {
    match put_operation(document) {
        Operation::Put(tweet) => Operation::Update(tweet),
        other => other,
    }
}

/// Sets the (dotted) `path` of `document` to `key`, creating objects on the way.
fn set_field(document: &mut serde_json::Value, path: &str, key: u64) {
    let mut value = document;
    let mut segments = path.split('.').peekable();
    while let Some(segment) = segments.next() {
        let Some(object) = value.as_object_mut() else {
            return;
        };
        if segments.peek().is_none() {
            object.insert(segment.to_owned(), serde_json::Value::from(key));
            return;
        }
        value = object
            .entry(segment.to_owned())
            .or_insert_with(|| serde_json::Value::Object(serde_json::Map::new()));
    }
}

/// The tweet behind an operation, for tests.
#[cfg(test)]
fn tweet(operation: &Operation) -> Option<&sift_workload::Tweet> {
    match operation {
        Operation::Put(tweet) | Operation::Update(tweet) => Some(tweet),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sift_workload::Attribute;

    fn documents(count: u64) -> (Vec<Document>, Vec<Option<i64>>) {
        let documents: Vec<Document> = (1..=count)
            .map(|key| {
                (
                    key,
                    format!(r#"{{"rid":{key},"user":{{"id":{}}}}}"#, key % 5),
                )
            })
            .collect();
        let values = (1..=count).map(|key| Some((key % 5) as i64)).collect();
        (documents, values)
    }

    fn attribute() -> StudyAttribute {
        StudyAttribute {
            role: Attribute::UserId,
            path: "user.id".to_owned(),
            attr_type: sift_index::AttrType::Int,
        }
    }

    #[test]
    fn follows_the_mix_and_the_file() {
        let (documents, values) = documents(50);
        let mut mix = UserMix::new(
            Workload::UpdateHeavy,
            &documents,
            &values,
            "rid",
            attribute(),
            20,
            7,
        );
        let mut counts = std::collections::BTreeMap::new();
        let mut new_keys = Vec::new();
        for _ in 0..2_000 {
            let operation = mix.next_operation();
            *counts.entry(format!("{:?}", operation.kind())).or_insert(0) += 1;
            match &operation {
                Operation::Put(tweet) => new_keys.push(tweet.fields.tweet_id),
                Operation::Update(tweet) => {
                    let key = tweet.fields.tweet_id;
                    let json: serde_json::Value = serde_json::from_str(&tweet.json).unwrap();
                    assert_eq!(json["rid"], key, "an update keeps its key in the document");
                    assert!(key <= mix.next_key, "updates only keys already written");
                }
                Operation::Get { tweet_id } => assert!(*tweet_id >= 1),
                Operation::Lookup { value, top_k, .. } => {
                    assert!((0..5).contains(value));
                    assert_eq!(*top_k, Some(table7::MIXED_TOP_K));
                }
                Operation::RangeLookup { .. } => {}
            }
        }
        // Table 7b's update-heavy: 40% PUT, 15% GET, 5% LOOKUP, 40% UPDATE.
        let share = |kind: &str| f64::from(*counts.get(kind).unwrap_or(&0)) / 2_000.0;
        assert!((share("Put") - 0.40).abs() < 0.05, "{counts:?}");
        assert!((share("Update") - 0.40).abs() < 0.05, "{counts:?}");
        assert!((share("Lookup") - 0.05).abs() < 0.03, "{counts:?}");
        // PUTs take the file's unused documents first (21..=50), then new keys above them.
        assert_eq!(&new_keys[..30], &(21..=50).collect::<Vec<u64>>()[..]);
        assert!(new_keys[30..].iter().all(|&key| key > 50));
        let distinct: std::collections::BTreeSet<_> = new_keys.iter().collect();
        assert_eq!(distinct.len(), new_keys.len(), "every PUT a new key");
        let synthesized = mix.put();
        let json: serde_json::Value =
            serde_json::from_str(&tweet(&synthesized).unwrap().json).unwrap();
        assert!(json["user"]["id"]
            .as_i64()
            .is_some_and(|v| (0..5).contains(&v)));
    }

    #[test]
    fn sets_dotted_fields() {
        let mut document = serde_json::json!({"a": {"b": 1}, "c": 2});
        set_field(&mut document, "a.b", 9);
        set_field(&mut document, "x.y", 3);
        assert_eq!(
            document,
            serde_json::json!({"a": {"b": 9}, "c": 2, "x": {"y": 3}})
        );
    }
}
