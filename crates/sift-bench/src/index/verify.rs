//! Answer checking: drives an engine and the brute-force `ReferenceEngine` through the same
//! seeded workload with many overwrites (documents moving between values), flushing now and
//! then, and compares every answer: the same hit ids in the same order (newest first), the
//! same GET results. Used by the peers' tests and usable by Sift's.

use super::reference::ReferenceEngine;
use super::runner::selectivities;
use super::{BenchError, IndexEngine, IndexSpec};
use sift_workload::{Attribute, Operation, OperationMix, TweetConfig, Workload, WorkloadGenerator};

/// What to run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VerifyConfig {
    pub seed: u64,
    /// Distinct tweets to start from.
    pub tweets: u64,
    /// Rounds of mixed writes and queries after the load; the candidate is flushed after
    /// every other round.
    pub rounds: u32,
    /// Mixed operations (40% updates) per round.
    pub operations_per_round: u64,
}

impl Default for VerifyConfig {
    fn default() -> Self {
        VerifyConfig {
            seed: 11,
            tweets: 600,
            rounds: 4,
            operations_per_round: 300,
        }
    }
}

/// The indexes `verify_against_reference` expects the candidate to have: both attributes.
pub fn verify_indexes(kind: &str) -> Vec<IndexSpec> {
    Attribute::ALL
        .into_iter()
        .map(|attribute| IndexSpec {
            attribute,
            kind: kind.to_owned(),
            maintenance: None,
        })
        .collect()
}

/// What a successful check compared.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct VerifySummary {
    /// GET, LOOKUP and RANGELOOKUP answers compared.
    pub answers: u64,
    /// Of those, the queries with at least one hit.
    pub non_empty_queries: u64,
    /// PUTs of an id that already existed.
    pub overwrites: u64,
}

/// Runs the check; returns what it compared, or the first difference.
pub fn verify_against_reference(
    candidate: &dyn IndexEngine,
    config: VerifyConfig,
) -> Result<VerifySummary, BenchError> {
    let reference = ReferenceEngine::new(&verify_indexes("reference"));
    let mut tweet_config = TweetConfig::for_tweets(config.tweets, config.seed);
    // Few users, so posting lists are long and updates move documents between them.
    tweet_config.users = (config.tweets / 60).max(3);
    // Writes, reads and queries interleaved; updates rewrite existing ids.
    let mix = OperationMix {
        put_percent: 20,
        get_percent: 15,
        lookup_percent: 10,
        range_lookup_percent: 15,
        update_percent: 40,
    };
    let mut generator = WorkloadGenerator::new(tweet_config, Workload::Mixed(mix))
        .map_err(|e| BenchError::new(format!("verify: {e}")))?;
    let mut compared = VerifySummary::default();
    for _ in 0..config.tweets {
        apply(candidate, &reference, &generator.put(), &mut compared)?;
    }
    for round in 0..=config.rounds {
        if round > 0 {
            for _ in 0..config.operations_per_round {
                let operation = generator.next_operation();
                apply(candidate, &reference, &operation, &mut compared)?;
            }
        }
        if round % 2 == 1 {
            candidate.flush()?;
            candidate.wait_for_background_work()?;
        }
        // A battery of every query shape on both attributes.
        for attribute in Attribute::ALL {
            for top_k in [Some(1), Some(3), Some(10), None] {
                for _ in 0..4 {
                    if let Some(lookup) = generator.lookup(attribute, top_k) {
                        apply(candidate, &reference, &lookup, &mut compared)?;
                    }
                }
                for &selectivity in selectivities(attribute) {
                    if let Some(range) = generator.range_lookup(attribute, selectivity, top_k) {
                        apply(candidate, &reference, &range, &mut compared)?;
                    }
                }
            }
            // Values nobody has: empty answers.
            let missing = Operation::Lookup {
                attribute,
                value: -5,
                top_k: None,
            };
            apply(candidate, &reference, &missing, &mut compared)?;
        }
    }
    Ok(compared)
}

/// Applies one operation to both engines, comparing answers.
fn apply(
    candidate: &dyn IndexEngine,
    reference: &ReferenceEngine,
    operation: &Operation,
    compared: &mut VerifySummary,
) -> Result<(), BenchError> {
    let mismatch = |what: String| {
        Err(BenchError::new(format!(
            "{} differs from the reference on {operation_text}: {what}",
            candidate.name(),
            operation_text = describe(operation)
        )))
    };
    match operation {
        Operation::Put(tweet) | Operation::Update(tweet) => {
            if reference.get(tweet.fields.tweet_id)?.is_some() {
                compared.overwrites += 1;
            }
            candidate.put(tweet.fields.tweet_id, &tweet.json)?;
            reference.put(tweet.fields.tweet_id, &tweet.json)?;
            return Ok(());
        }
        Operation::Get { tweet_id } => {
            let expected = reference.get(*tweet_id)?;
            let actual = candidate.get(*tweet_id)?;
            if actual != expected {
                return mismatch(format!("got {actual:?}, expected {expected:?}"));
            }
        }
        Operation::Lookup {
            attribute,
            value,
            top_k,
        } => {
            let mut expected = Vec::new();
            let mut actual = Vec::new();
            let expected_count =
                reference.lookup(*attribute, *value, *top_k, Some(&mut expected))?;
            let actual_count = candidate.lookup(*attribute, *value, *top_k, Some(&mut actual))?;
            if actual != expected || actual_count != expected_count {
                return mismatch(format!(
                    "hits {actual:?} (count {actual_count}), expected {expected:?} (count \
                     {expected_count})"
                ));
            }
            compared.non_empty_queries += u64::from(expected_count > 0);
        }
        Operation::RangeLookup {
            attribute,
            lo,
            hi,
            top_k,
        } => {
            let mut expected = Vec::new();
            let mut actual = Vec::new();
            let expected_count =
                reference.range_lookup(*attribute, *lo, *hi, *top_k, Some(&mut expected))?;
            let actual_count =
                candidate.range_lookup(*attribute, *lo, *hi, *top_k, Some(&mut actual))?;
            if actual != expected || actual_count != expected_count {
                return mismatch(format!(
                    "hits {actual:?} (count {actual_count}), expected {expected:?} (count \
                     {expected_count})"
                ));
            }
            compared.non_empty_queries += u64::from(expected_count > 0);
        }
    }
    compared.answers += 1;
    Ok(())
}

fn describe(operation: &Operation) -> String {
    match operation {
        Operation::Put(tweet) | Operation::Update(tweet) => {
            format!("PUT {}", tweet.fields.tweet_id)
        }
        Operation::Get { tweet_id } => format!("GET {tweet_id}"),
        Operation::Lookup {
            attribute,
            value,
            top_k,
        } => format!("LOOKUP({}, {value}, {top_k:?})", attribute.path()),
        Operation::RangeLookup {
            attribute,
            lo,
            hi,
            top_k,
        } => format!("RANGELOOKUP({}, {lo}, {hi}, {top_k:?})", attribute.path()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::index::EngineCounters;
    use crate::index::TreeBytes;

    #[test]
    fn the_reference_agrees_with_itself() {
        let candidate = ReferenceEngine::new(&verify_indexes("x"));
        let summary = verify_against_reference(&candidate, VerifyConfig::default()).unwrap();
        // The check is only as good as what it exercised.
        assert!(summary.answers > 300, "{summary:?}");
        assert!(summary.non_empty_queries > 150, "{summary:?}");
        assert!(summary.overwrites > 300, "{summary:?}");
    }

    /// Returns the oldest hits first: must be caught.
    struct OldestFirst(ReferenceEngine);

    impl IndexEngine for OldestFirst {
        fn name(&self) -> &'static str {
            "oldest-first"
        }
        fn index_labels(&self, attribute: Attribute) -> Option<(String, String)> {
            self.0.index_labels(attribute)
        }
        fn put(&self, tweet_id: u64, json: &str) -> Result<(), BenchError> {
            self.0.put(tweet_id, json)
        }
        fn get(&self, tweet_id: u64) -> Result<Option<usize>, BenchError> {
            self.0.get(tweet_id)
        }
        fn lookup(
            &self,
            attribute: Attribute,
            value: i64,
            top_k: Option<usize>,
            hit_ids: Option<&mut Vec<u64>>,
        ) -> Result<u64, BenchError> {
            let mut all = Vec::new();
            self.0.lookup(attribute, value, None, Some(&mut all))?;
            all.reverse();
            all.truncate(top_k.unwrap_or(usize::MAX));
            if let Some(ids) = hit_ids {
                ids.extend(&all);
            }
            Ok(all.len() as u64)
        }
        fn range_lookup(
            &self,
            attribute: Attribute,
            lo: i64,
            hi: i64,
            top_k: Option<usize>,
            hit_ids: Option<&mut Vec<u64>>,
        ) -> Result<u64, BenchError> {
            self.0.range_lookup(attribute, lo, hi, top_k, hit_ids)
        }
        fn flush(&self) -> Result<(), BenchError> {
            Ok(())
        }
        fn wait_for_background_work(&self) -> Result<(), BenchError> {
            Ok(())
        }
        fn counters(&self) -> EngineCounters {
            EngineCounters::default()
        }
        fn disk_bytes_per_tree(&self) -> Result<TreeBytes, BenchError> {
            Ok(TreeBytes::new())
        }
        fn close(self: Box<Self>) -> Result<(), BenchError> {
            Ok(())
        }
    }

    #[test]
    fn a_wrong_order_is_reported() {
        let candidate = OldestFirst(ReferenceEngine::new(&verify_indexes("x")));
        let error = verify_against_reference(&candidate, VerifyConfig::default()).unwrap_err();
        assert!(error.message().contains("LOOKUP("), "{error}");
        assert!(error.message().contains("oldest-first"), "{error}");
    }
}
