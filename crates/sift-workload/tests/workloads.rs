//! Operation streams: Table 7 proportions, determinism, and queries that only reference
//! written ids and values (checked against a model of everything written).

#![allow(clippy::unwrap_used, clippy::panic)]

use sift_workload::{
    table7, Attribute, Operation, OperationKind, OperationMix, QueryParameters, TweetConfig,
    Workload, WorkloadGenerator, TWEET_ID_BASE,
};
use std::collections::{BTreeMap, HashMap, HashSet};

/// Everything written so far, to check that queries target existing ids and values.
#[derive(Default)]
struct Model {
    tweet_ids: u64,
    users: HashSet<u64>,
    seconds: HashSet<i64>,
}

impl Model {
    fn check(&mut self, operation: &Operation, users: u64) {
        match operation {
            Operation::Put(tweet) => {
                self.tweet_ids += 1;
                assert_eq!(
                    tweet.fields.tweet_id,
                    TWEET_ID_BASE + self.tweet_ids,
                    "ids are dense"
                );
                self.users.insert(tweet.fields.user_id);
                self.seconds.insert(tweet.fields.created_at_ms);
            }
            Operation::Update(tweet) => {
                assert!((TWEET_ID_BASE + 1..=TWEET_ID_BASE + self.tweet_ids)
                    .contains(&tweet.fields.tweet_id));
                assert!(tweet
                    .json
                    .starts_with(&format!("{{\"tweet_id\":{},", tweet.fields.tweet_id)));
                self.users.insert(tweet.fields.user_id);
                self.seconds.insert(tweet.fields.created_at_ms);
            }
            Operation::Get { tweet_id } => {
                assert!((TWEET_ID_BASE + 1..=TWEET_ID_BASE + self.tweet_ids).contains(tweet_id));
            }
            Operation::Lookup {
                attribute, value, ..
            } => match attribute {
                Attribute::UserId => assert!(self.users.contains(&(*value as u64)), "{value}"),
                Attribute::CreationTime => assert!(self.seconds.contains(value), "{value}"),
            },
            Operation::RangeLookup {
                attribute, lo, hi, ..
            } => {
                assert!(lo <= hi);
                match attribute {
                    Attribute::UserId => {
                        assert!(*lo >= 1 && *hi as u64 <= users, "{lo}..={hi}");
                        assert!((*lo..=*hi).any(|user| self.users.contains(&(user as u64))));
                    }
                    Attribute::CreationTime => assert!(self.seconds.contains(lo)),
                }
            }
        }
    }
}

fn count_operations(
    workload: Workload,
    operations: u64,
    seed: u64,
) -> BTreeMap<OperationKind, u64> {
    let config = TweetConfig::for_tweets(operations, seed);
    let users = config.users;
    let mut generator = WorkloadGenerator::new(config, workload).unwrap();
    let mut model = Model::default();
    let mut counts = BTreeMap::new();
    for operation in generator.by_ref().take(operations as usize) {
        model.check(&operation, users);
        if let Operation::Lookup {
            top_k, attribute, ..
        } = &operation
        {
            // Table 7b: mixed workloads query UserID, top-10.
            assert_eq!(*top_k, Some(table7::MIXED_TOP_K));
            assert_eq!(*attribute, Attribute::UserId);
        }
        *counts.entry(operation.kind()).or_insert(0) += 1;
    }
    assert_eq!(generator.tweets_written(), model.tweet_ids);
    counts
}

#[test]
fn mixed_workloads_have_the_table_7_proportions() {
    let expected = [
        (Workload::WriteHeavy, [80, 15, 5, 0, 0]),
        (Workload::ReadHeavy, [20, 70, 10, 0, 0]),
        (Workload::UpdateHeavy, [40, 15, 5, 0, 40]),
        (Workload::Static, [100, 0, 0, 0, 0]),
    ];
    let operations = 100_000u64;
    for (seed, (workload, percents)) in expected.into_iter().enumerate() {
        let counts = count_operations(workload, operations, seed as u64);
        for (kind, percent) in OperationKind::ALL.into_iter().zip(percents) {
            assert_eq!(workload.mix().percent(kind), percent);
            let seen = *counts.get(&kind).unwrap_or(&0) as f64 * 100.0 / operations as f64;
            assert!(
                (seen - f64::from(percent)).abs() <= 2.0,
                "{workload}: {} {seen}% (expected {percent}%)",
                kind.name()
            );
        }
    }
}

#[test]
fn custom_mixes_include_range_lookups_with_the_asked_selectivity() {
    let mix = OperationMix {
        put_percent: 50,
        get_percent: 10,
        lookup_percent: 10,
        range_lookup_percent: 20,
        update_percent: 10,
    };
    for (attribute, selectivity, width) in [
        (Attribute::UserId, 10, 10),
        (Attribute::CreationTime, 100, 100 * 60_000),
    ] {
        let config = TweetConfig::for_tweets(20_000, 4);
        let users = config.users;
        let queries = QueryParameters {
            lookup_attribute: attribute,
            range_attribute: attribute,
            top_k: None,
            range_selectivity: selectivity,
        };
        let generator = WorkloadGenerator::new(config, Workload::Mixed(mix))
            .unwrap()
            .with_queries(queries);
        let mut model = Model::default();
        let mut ranges = 0;
        for operation in generator.take(20_000) {
            model.check(&operation, users);
            match operation {
                Operation::RangeLookup {
                    attribute: seen,
                    lo,
                    hi,
                    top_k,
                } => {
                    assert_eq!(seen, attribute);
                    assert_eq!(top_k, None);
                    assert_eq!(hi - lo + 1, width);
                    ranges += 1;
                }
                Operation::Lookup {
                    attribute: seen, ..
                } => assert_eq!(seen, attribute),
                _ => {}
            }
        }
        assert!(ranges > 3000, "{ranges}");
    }

    let bad = OperationMix {
        put_percent: 60,
        ..mix
    };
    assert!(WorkloadGenerator::new(TweetConfig::for_tweets(10, 1), Workload::Mixed(bad)).is_err());
}

#[test]
fn static_queries_follow_table_7a_and_target_existing_values() {
    let tweets = 30_000u64;
    let config = TweetConfig::for_tweets(tweets, 9);
    let users = config.users;
    let mut generator = WorkloadGenerator::new(config, Workload::Static).unwrap();
    // Nothing to query before the load.
    assert!(generator.get().is_none());
    assert!(generator.lookup(Attribute::UserId, Some(10)).is_none());
    assert!(generator
        .range_lookup(Attribute::CreationTime, 1, None)
        .is_none());
    let mut model = Model::default();
    let mut tweets_per_user: HashMap<u64, u64> = HashMap::new();
    for _ in 0..tweets {
        let operation = generator.next_operation();
        assert_eq!(operation.kind(), OperationKind::Put);
        if let Operation::Put(tweet) = &operation {
            *tweets_per_user.entry(tweet.fields.user_id).or_default() += 1;
        }
        model.check(&operation, users);
    }

    let mut looked_up: HashMap<i64, u64> = HashMap::new();
    for _ in 0..5000 {
        let get = generator.get().unwrap();
        model.check(&get, users);
        for attribute in Attribute::ALL {
            for top_k in table7::STATIC_TOP_K {
                let lookup = generator.lookup(attribute, top_k).unwrap();
                model.check(&lookup, users);
                if let Operation::Lookup {
                    attribute: Attribute::UserId,
                    value,
                    ..
                } = lookup
                {
                    *looked_up.entry(value).or_default() += 1;
                }
            }
        }
        for selectivity in table7::USER_RANGE_SELECTIVITY_USERS {
            let range = generator
                .range_lookup(Attribute::UserId, selectivity, Some(10))
                .unwrap();
            model.check(&range, users);
            let Operation::RangeLookup { lo, hi, .. } = range else {
                panic!("not a range: {range:?}");
            };
            assert_eq!((hi - lo + 1) as u64, selectivity);
        }
        for minutes in table7::TIME_RANGE_SELECTIVITY_MINUTES {
            let range = generator
                .range_lookup(Attribute::CreationTime, minutes, Some(10))
                .unwrap();
            model.check(&range, users);
            let Operation::RangeLookup { lo, hi, .. } = range else {
                panic!("not a range: {range:?}");
            };
            assert_eq!(hi - lo + 1, minutes as i64 * 60_000);
        }
    }
    // Queries do not write.
    assert_eq!(generator.tweets_written(), tweets);
    // Lookups follow the data's distribution: the most active user is queried most.
    let most_active = tweets_per_user
        .iter()
        .max_by_key(|&(_, count)| *count)
        .map(|(&user, _)| user as i64)
        .unwrap();
    let most_queried = looked_up
        .iter()
        .max_by_key(|&(_, count)| *count)
        .map(|(&user, _)| user)
        .unwrap();
    assert_eq!(most_queried, most_active);
}

#[test]
fn operations_are_deterministic_for_a_seed() {
    let run = |seed| {
        let generator =
            WorkloadGenerator::new(TweetConfig::for_tweets(5000, seed), Workload::UpdateHeavy)
                .unwrap();
        generator.take(5000).collect::<Vec<Operation>>()
    };
    let first = run(2);
    assert_eq!(first, run(2));
    assert_ne!(first, run(3));
}

#[test]
fn workload_names_parse() {
    for workload in Workload::NAMED {
        assert_eq!(workload.name().parse::<Workload>().unwrap(), workload);
    }
    let error = "read-mostly".parse::<Workload>().unwrap_err();
    assert!(error.to_string().contains("read-mostly"));
}

#[test]
fn a_draw_falls_in_its_operation_types_share() {
    // Update-heavy: PUT 0..40, GET 40..55, LOOKUP 55..60, (no RANGELOOKUP), UPDATE 60..100.
    let mix = Workload::UpdateHeavy.mix();
    for (draw, kind) in [
        (0, OperationKind::Put),
        (39, OperationKind::Put),
        (40, OperationKind::Get),
        (54, OperationKind::Get),
        (55, OperationKind::Lookup),
        (59, OperationKind::Lookup),
        (60, OperationKind::Update),
        (99, OperationKind::Update),
    ] {
        assert_eq!(mix.kind_of_draw(draw), kind, "draw {draw}");
    }
}
