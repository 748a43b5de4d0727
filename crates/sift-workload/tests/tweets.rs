//! Properties of the generated tweet documents: determinism, the documented shape, and the
//! statistics of LevelDB++ §5.1 (document size, tweets per user, tweets per second).

#![allow(clippy::unwrap_used, clippy::panic)]

use serde_json::Value;
use sift_workload::cli::{generate_tweets_command, GenerateTweetsArgs};
use sift_workload::{format_rfc3339_seconds, TweetConfig, TweetGenerator, TWEET_ID_BASE};
use std::collections::HashMap;

fn jsonl(config: &TweetConfig, tweets: u64) -> Vec<u8> {
    let mut generator = TweetGenerator::new(config.clone()).unwrap();
    let mut out = Vec::new();
    let bytes = generator.write_jsonl(&mut out, tweets).unwrap();
    assert_eq!(bytes, out.len() as u64);
    out
}

#[test]
fn same_seed_same_documents_and_other_seed_other_documents() {
    let config = TweetConfig::for_tweets(3000, 11);
    let first = jsonl(&config, 3000);
    assert_eq!(first, jsonl(&config, 3000));
    let other = TweetConfig::for_tweets(3000, 12);
    assert_ne!(first, jsonl(&other, 3000));

    // write_jsonl and next_tweet produce the same documents.
    let mut generator = TweetGenerator::new(config).unwrap();
    let lines: Vec<&[u8]> = first.split(|&byte| byte == b'\n').collect();
    assert_eq!(lines.len(), 3001);
    assert!(lines[3000].is_empty());
    for line in &lines[..3000] {
        assert_eq!(generator.next_tweet().json.as_bytes(), *line);
    }
}

const TEXT_CHARACTERS: &str = "abcdefghijklmnopqrstuvwxyz ABCDEFG0123456.,#@";

#[test]
fn documents_have_the_documented_fields_and_types() {
    let config = TweetConfig::for_tweets(5000, 5);
    let mut generator = TweetGenerator::new(config.clone()).unwrap();
    let mut previous_id_text = String::new();
    for ordinal in 1..=5000u64 {
        let expected_id = TWEET_ID_BASE + ordinal;
        let tweet = generator.next_tweet();
        assert!(!tweet.json.contains('\n'));
        let document: Value = serde_json::from_str(&tweet.json)
            .unwrap_or_else(|error| panic!("{error}: {}", tweet.json));
        let object = document.as_object().unwrap();
        let mut keys: Vec<&str> = object.keys().map(String::as_str).collect();
        keys.sort_unstable();
        assert_eq!(
            keys,
            [
                "created_at",
                "lang",
                "place",
                "retweet_count",
                "text",
                "timestamp_ms",
                "tweet_id",
                "user"
            ]
        );
        let fields = tweet.fields;
        assert_eq!(fields.tweet_id, expected_id);
        assert_eq!(document["tweet_id"].as_u64(), Some(expected_id));
        // Equal width: the decimal text (how integer keys are stored) sorts like the number.
        let id_text = expected_id.to_string();
        assert_eq!(id_text.len(), 16);
        assert!(
            previous_id_text < id_text,
            "{previous_id_text} !< {id_text}"
        );
        previous_id_text = id_text;
        assert_eq!(
            document["created_at"].as_str(),
            Some(format_rfc3339_seconds(fields.created_at_ms).as_str())
        );
        assert_eq!(fields.created_at_ms % 1000, 0);
        assert_eq!(document["timestamp_ms"].as_i64(), Some(fields.timestamp_ms));
        assert!((fields.created_at_ms..fields.created_at_ms + 1000).contains(&fields.timestamp_ms));
        let user = document["user"].as_object().unwrap();
        assert_eq!(user.len(), 2);
        assert_eq!(user["id"].as_u64(), Some(fields.user_id));
        assert!((1..=config.users).contains(&fields.user_id));
        assert_eq!(
            user["name"].as_str(),
            Some(format!("user_{}", fields.user_id).as_str())
        );
        assert_eq!(document["lang"].as_str(), Some(fields.lang));
        assert!(["en", "es", "und", "pt", "ja", "fr", "ar"].contains(&fields.lang));
        assert_eq!(
            document["retweet_count"].as_u64(),
            Some(fields.retweet_count)
        );
        assert!(fields.retweet_count <= 10_000);
        let coordinates = document["place"]["coordinates"].as_array().unwrap();
        assert_eq!(coordinates.len(), 2);
        assert_eq!(coordinates[0].as_f64(), Some(fields.longitude));
        assert_eq!(coordinates[1].as_f64(), Some(fields.latitude));
        assert!((-80.0..=-71.5).contains(&fields.longitude), "{fields:?}");
        assert!((40.3..=45.1).contains(&fields.latitude), "{fields:?}");
        let text = document["text"].as_str().unwrap();
        assert!(!text.is_empty());
        assert!(text
            .chars()
            .all(|character| TEXT_CHARACTERS.contains(character)));
    }
}

#[test]
fn average_document_is_550_bytes() {
    let config = TweetConfig::for_tweets(10_000, 21);
    let mut generator = TweetGenerator::new(config).unwrap();
    let lengths: Vec<usize> = (0..10_000)
        .map(|_| generator.next_tweet().json.len())
        .collect();
    let mean = lengths.iter().sum::<usize>() as f64 / lengths.len() as f64;
    assert!((495.0..=605.0).contains(&mean), "mean {mean}");
    // Documents vary in length, as the seed set's bodies do.
    let shortest = lengths.iter().min().unwrap();
    let longest = lengths.iter().max().unwrap();
    assert!(*shortest < 450 && *longest > 650, "{shortest}..{longest}");

    // Another target is honoured too.
    let config = TweetConfig {
        document_bytes_target: 1000,
        ..TweetConfig::for_tweets(2000, 21)
    };
    let mut generator = TweetGenerator::new(config).unwrap();
    let total: usize = (0..2000).map(|_| generator.next_tweet().json.len()).sum();
    let mean = total as f64 / 2000.0;
    assert!((900.0..=1100.0).contains(&mean), "mean {mean}");
}

#[test]
fn about_30_tweets_per_user_with_a_heavy_tail() {
    let tweets = 60_000u64;
    let config = TweetConfig::for_tweets(tweets, 8);
    assert_eq!(config.users, 2000);
    let mut generator = TweetGenerator::new(config).unwrap();
    let mut per_user: HashMap<u64, u64> = HashMap::new();
    for _ in 0..tweets {
        *per_user
            .entry(generator.next_tweet().fields.user_id)
            .or_default() += 1;
    }
    let mean = tweets as f64 / per_user.len() as f64;
    assert!((24.0..=36.0).contains(&mean), "mean tweets per user {mean}");
    let mut counts: Vec<u64> = per_user.values().copied().collect();
    counts.sort_unstable();
    let median = counts[counts.len() / 2];
    let most = *counts.last().unwrap();
    assert!(most > 20 * median, "most {most}, median {median}");
    // Heavy tail, not a few giants: the median user still tweets several times.
    assert!(median >= 5, "median {median}");
    // Popularity is not tied to the id value: the ten most active users are spread out.
    let mut top: Vec<(u64, u64)> = per_user
        .iter()
        .map(|(&user, &count)| (count, user))
        .collect();
    top.sort_unstable_by(|a, b| b.cmp(a));
    let top_ids: Vec<u64> = top[..10].iter().map(|&(_, user)| user).collect();
    assert!(top_ids.iter().any(|&user| user > 1000), "{top_ids:?}");
}

#[test]
fn creation_time_is_non_decreasing_at_35_per_second() {
    let tweets = 20_000u64;
    let config = TweetConfig::for_tweets(tweets, 13);
    let start_ms = config.start_time_ms;
    let mut generator = TweetGenerator::new(config).unwrap();
    let mut previous = (i64::MIN, i64::MIN);
    let mut first_created_ms = None;
    let mut per_second: HashMap<i64, u64> = HashMap::new();
    for _ in 0..tweets {
        let fields = generator.next_tweet().fields;
        assert!(fields.created_at_ms >= previous.0);
        assert!(fields.timestamp_ms >= previous.1);
        previous = (fields.created_at_ms, fields.timestamp_ms);
        first_created_ms.get_or_insert(fields.created_at_ms);
        *per_second.entry(fields.created_at_ms).or_default() += 1;
    }
    assert!(first_created_ms.unwrap() >= start_ms);
    let elapsed_seconds = (previous.0 - start_ms) / 1000 + 1;
    let rate = tweets as f64 / elapsed_seconds as f64;
    assert!((29.75..=40.25).contains(&rate), "{rate} tweets per second");
    // Uniform 0..=70 per second: never more than 70, and both sparse and busy seconds occur.
    let busiest = *per_second.values().max().unwrap();
    let quietest = *per_second.values().min().unwrap();
    assert!((60..=70).contains(&busiest), "{busiest}");
    assert!(quietest <= 10, "{quietest}");
    // Some seconds have no tweet at all (probability 1/71 each).
    assert!((per_second.len() as i64) < elapsed_seconds);
}

#[test]
fn generate_command_writes_the_file() {
    let directory = tempfile::tempdir().unwrap();
    let path = directory.path().join("tweets.jsonl");
    let args = GenerateTweetsArgs {
        n: 1000,
        seed: 3,
        out: Some(path.clone()),
        users: None,
        user_exponent: sift_workload::tweet::DEFAULT_USER_EXPONENT,
        document_bytes: 550,
    };
    let summary = generate_tweets_command(&args).unwrap();
    let written = std::fs::read(&path).unwrap();
    assert_eq!(summary.tweets, 1000);
    assert_eq!(summary.bytes, written.len() as u64);
    assert_eq!(written, jsonl(&TweetConfig::for_tweets(1000, 3), 1000));

    let bad = GenerateTweetsArgs {
        users: Some(0),
        ..args.clone()
    };
    assert!(generate_tweets_command(&bad).is_err());
    let unwritable = GenerateTweetsArgs {
        out: Some(directory.path().join("missing").join("tweets.jsonl")),
        ..args
    };
    let error = generate_tweets_command(&unwritable).unwrap_err();
    assert!(error.to_string().contains("missing"), "{error}");
}
