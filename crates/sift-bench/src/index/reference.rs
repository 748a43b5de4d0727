//! The reference engine: documents in a `BTreeMap`, queries answered by brute force (filter
//! every current document, sort newest first, take K). The model that the runner's tests use
//! and that `verify` checks real engines against; only for small data sets.

use super::{attribute_value, BenchError, EngineCounters, IndexEngine, IndexSpec, TreeBytes};
use sift_workload::Attribute;
use std::cell::RefCell;
use std::collections::BTreeMap;

#[derive(Debug, Clone)]
struct Document {
    /// Write order of this version (higher is newer).
    sequence: u64,
    bytes: usize,
    /// Values of `Attribute::ALL`, in that order.
    values: [Option<i64>; 2],
}

#[derive(Debug, Default)]
struct State {
    documents: BTreeMap<u64, Document>,
    sequence: u64,
    bytes_written: u64,
}

/// Brute-force engine; indexes only the attributes it was opened with (queries on others
/// are refused, as a real engine without that index would).
#[derive(Debug)]
pub struct ReferenceEngine {
    indexed: Vec<Attribute>,
    state: RefCell<State>,
}

fn slot(attribute: Attribute) -> usize {
    match attribute {
        Attribute::UserId => 0,
        Attribute::CreationTime => 1,
    }
}

impl ReferenceEngine {
    pub fn new(indexes: &[IndexSpec]) -> ReferenceEngine {
        ReferenceEngine {
            indexed: indexes.iter().map(|spec| spec.attribute).collect(),
            state: RefCell::new(State::default()),
        }
    }

    fn query(
        &self,
        attribute: Attribute,
        matches: &dyn Fn(i64) -> bool,
        top_k: Option<usize>,
        hit_ids: Option<&mut Vec<u64>>,
    ) -> Result<u64, BenchError> {
        if !self.indexed.contains(&attribute) {
            return Err(BenchError::new(format!(
                "reference: no index on {}",
                attribute.path()
            )));
        }
        let state = self.state.borrow();
        let mut hits: Vec<(u64, u64)> = state
            .documents
            .iter()
            .filter(|(_, document)| document.values[slot(attribute)].is_some_and(matches))
            .map(|(&tweet_id, document)| (document.sequence, tweet_id))
            .collect();
        hits.sort_unstable_by(|a, b| b.cmp(a));
        hits.truncate(top_k.unwrap_or(usize::MAX));
        if let Some(ids) = hit_ids {
            ids.extend(hits.iter().map(|&(_, tweet_id)| tweet_id));
        }
        Ok(hits.len() as u64)
    }
}

impl IndexEngine for ReferenceEngine {
    fn name(&self) -> &'static str {
        "reference"
    }

    fn index_labels(&self, attribute: Attribute) -> Option<(String, String)> {
        self.indexed
            .contains(&attribute)
            .then(|| ("brute-force".to_owned(), "exact".to_owned()))
    }

    fn put(&self, tweet_id: u64, json: &str) -> Result<(), BenchError> {
        let parsed: serde_json::Value = serde_json::from_str(json)
            .map_err(|e| BenchError::new(format!("reference: tweet {tweet_id}: {e}")))?;
        let values = Attribute::ALL.map(|attribute| attribute_value(&parsed, attribute));
        let mut state = self.state.borrow_mut();
        state.sequence += 1;
        state.bytes_written += json.len() as u64;
        let document = Document {
            sequence: state.sequence,
            bytes: json.len(),
            values,
        };
        state.documents.insert(tweet_id, document);
        Ok(())
    }

    fn get(&self, tweet_id: u64) -> Result<Option<usize>, BenchError> {
        Ok(self
            .state
            .borrow()
            .documents
            .get(&tweet_id)
            .map(|document| document.bytes))
    }

    fn lookup(
        &self,
        attribute: Attribute,
        value: i64,
        top_k: Option<usize>,
        hit_ids: Option<&mut Vec<u64>>,
    ) -> Result<u64, BenchError> {
        self.query(attribute, &|candidate| candidate == value, top_k, hit_ids)
    }

    fn range_lookup(
        &self,
        attribute: Attribute,
        lo: i64,
        hi: i64,
        top_k: Option<usize>,
        hit_ids: Option<&mut Vec<u64>>,
    ) -> Result<u64, BenchError> {
        self.query(
            attribute,
            &|candidate| (lo..=hi).contains(&candidate),
            top_k,
            hit_ids,
        )
    }

    fn flush(&self) -> Result<(), BenchError> {
        Ok(())
    }

    fn wait_for_background_work(&self) -> Result<(), BenchError> {
        Ok(())
    }

    fn counters(&self) -> EngineCounters {
        EngineCounters {
            bytes_written: Some(self.state.borrow().bytes_written),
            blocks_read: Some(0),
        }
    }

    fn disk_bytes_per_tree(&self) -> Result<TreeBytes, BenchError> {
        let state = self.state.borrow();
        let mut trees = TreeBytes::new();
        trees.insert(
            "documents".to_owned(),
            state.documents.values().map(|d| d.bytes as u64).sum(),
        );
        for attribute in &self.indexed {
            let entries = state
                .documents
                .values()
                .filter(|d| d.values[slot(*attribute)].is_some())
                .count();
            // What a composite key (value, sequence, id) would take.
            trees.insert(format!("index.{}", attribute.path()), entries as u64 * 24);
        }
        Ok(trees)
    }

    fn close(self: Box<Self>) -> Result<(), BenchError> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn engine() -> ReferenceEngine {
        ReferenceEngine::new(&[
            IndexSpec::parse("user.id:x").unwrap(),
            IndexSpec::parse("created_at:x").unwrap(),
        ])
    }

    fn doc(user: i64, second: u32) -> String {
        format!(r#"{{"created_at":"2020-01-01T00:00:{second:02}Z","user":{{"id":{user}}}}}"#)
    }

    #[test]
    fn answers_newest_first_without_stale_versions() {
        let engine = engine();
        engine.put(1, &doc(5, 1)).unwrap();
        engine.put(2, &doc(5, 2)).unwrap();
        engine.put(3, &doc(6, 3)).unwrap();
        // Tweet 1 moves from user 5 to user 6 and becomes the newest.
        engine.put(1, &doc(6, 4)).unwrap();
        let mut ids = Vec::new();
        assert_eq!(
            engine
                .lookup(Attribute::UserId, 5, None, Some(&mut ids))
                .unwrap(),
            1
        );
        assert_eq!(ids, [2]);
        ids.clear();
        engine
            .lookup(Attribute::UserId, 6, None, Some(&mut ids))
            .unwrap();
        assert_eq!(ids, [1, 3]);
        ids.clear();
        engine
            .range_lookup(Attribute::UserId, 0, 100, Some(2), Some(&mut ids))
            .unwrap();
        assert_eq!(ids, [1, 3]);
        let base = super::super::time::parse_rfc3339_ms("2020-01-01T00:00:00Z").unwrap();
        ids.clear();
        engine
            .range_lookup(
                Attribute::CreationTime,
                base + 1000,
                base + 3000,
                None,
                Some(&mut ids),
            )
            .unwrap();
        assert_eq!(ids, [3, 2]);
        assert_eq!(engine.get(1).unwrap(), Some(doc(6, 4).len()));
        assert_eq!(engine.get(9).unwrap(), None);
        assert!(engine.put(4, "not json").is_err());
    }

    #[test]
    fn refuses_queries_on_unindexed_attributes() {
        let engine = ReferenceEngine::new(&[IndexSpec::parse("user.id:x").unwrap()]);
        assert!(engine
            .lookup(Attribute::CreationTime, 0, None, None)
            .is_err());
        assert!(engine.index_labels(Attribute::CreationTime).is_none());
    }
}
