//! The documents of one case (tweets with a `score` drawn from a distribution) and the windows
//! queried on them, the same for every configuration.

use super::error;
use super::plan::CellSpec;
use super::plan::QueryOp;
use super::plan::Target;
use super::plan::ValueDistribution;
use super::SCORE_MAX;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use sift_bench::index::BenchError;
use sift_index::{AttrType, AttrValue, GeoBox};
use sift_workload::{TweetConfig, TweetGenerator};

/// The documents of one distribution and what queries are drawn from.
#[derive(Debug, Clone)]
pub struct Documents {
    pub distribution: ValueDistribution,
    /// (tweet id, JSON).
    pub jsons: Vec<(u64, String)>,
    pub scores: Vec<i64>,
    pub times_ms: Vec<i64>,
    /// (longitude, latitude).
    pub points: Vec<(f64, f64)>,
    pub json_bytes: u64,
    /// Width of the scores' domain: windows are fractions of it (`SCORE_MAX` for tweets, the
    /// spread of the values in a user's file).
    pub score_span: i64,
}

/// Generates `count` tweets with a `score` drawn from `distribution`.
pub fn generate(
    count: u64,
    seed: u64,
    distribution: ValueDistribution,
) -> Result<Documents, BenchError> {
    let mut tweets = TweetGenerator::new(TweetConfig::for_tweets(count.max(1), seed))
        .map_err(|e| BenchError::new(format!("tweets: {e}")))?;
    let mut random = StdRng::seed_from_u64(seed ^ 0x5c02_e5c0_2e5c_02e5);
    let mut documents = Documents {
        distribution,
        jsons: Vec::with_capacity(count as usize),
        scores: Vec::with_capacity(count as usize),
        times_ms: Vec::with_capacity(count as usize),
        points: Vec::with_capacity(count as usize),
        json_bytes: 0,
        score_span: SCORE_MAX,
    };
    for _ in 0..count {
        let tweet = tweets.next_tweet();
        let score = distribution.sample(&mut random);
        let mut json = tweet.json;
        // The document ends with `}`: append the field before it.
        json.pop();
        json.push_str(",\"score\":");
        json.push_str(&score.to_string());
        json.push('}');
        documents.json_bytes += json.len() as u64;
        documents.jsons.push((tweet.fields.tweet_id, json));
        documents.scores.push(score);
        documents.times_ms.push(tweet.fields.created_at_ms);
        documents
            .points
            .push((tweet.fields.longitude, tweet.fields.latitude));
    }
    Ok(documents)
}

/// A query against one index.
#[derive(Debug, Clone, PartialEq)]
pub enum Query {
    Range { lo: AttrValue, hi: AttrValue },
    Lookup(AttrValue),
    Within(GeoBox),
}

/// The queries of `cell` over `documents`: `count` of them, centred on uniformly chosen
/// documents (the same for every configuration: the seed depends only on the cell).
pub fn queries(
    cell: &CellSpec,
    documents: &Documents,
    score_type: AttrType,
    count: u64,
    seed: u64,
) -> Result<Vec<Query>, BenchError> {
    // Centres are drawn among the documents that have the target (all of them for tweets).
    let n = match cell.target {
        Target::Score => documents.scores.len(),
        Target::CreationTime => documents.times_ms.len(),
        Target::Geo => documents.points.len(),
    };
    if n == 0 {
        return Ok(Vec::new());
    }
    let score = |value: i64| match score_type {
        AttrType::Time => AttrValue::Time(value),
        _ => AttrValue::Int(value),
    };
    let mut random = StdRng::seed_from_u64(
        seed ^ (cell.size.to_bits().rotate_left(17)) ^ (cell.target as u64) ^ (cell.op as u64) << 8,
    );
    let time_span = match (
        documents.times_ms.iter().min(),
        documents.times_ms.iter().max(),
    ) {
        (Some(first), Some(last)) => (last - first).max(1),
        _ => 1,
    };
    let mut out = Vec::with_capacity(count as usize);
    for _ in 0..count {
        let i = random.gen_range(0..n);
        let query = match (cell.op, cell.target) {
            (QueryOp::Lookup, Target::Score) => Query::Lookup(score(documents.scores[i])),
            (QueryOp::Lookup, Target::CreationTime) => {
                Query::Lookup(AttrValue::Time(documents.times_ms[i]))
            }
            (QueryOp::Lookup, Target::Geo) => {
                let (lon, lat) = documents.points[i];
                Query::Lookup(AttrValue::Geo { lon, lat })
            }
            (QueryOp::Window, Target::Score) => {
                let half = ((cell.size * documents.score_span as f64) / 2.0).round() as i64;
                let centre = documents.scores[i];
                Query::Range {
                    lo: score(centre - half),
                    hi: score(centre + half),
                }
            }
            (QueryOp::Window, Target::CreationTime) => {
                let half = ((cell.size * time_span as f64) / 2.0).round() as i64;
                let centre = documents.times_ms[i];
                Query::Range {
                    lo: AttrValue::Time(centre - half),
                    hi: AttrValue::Time(centre + half),
                }
            }
            (QueryOp::Window, Target::Geo) => {
                let (lon, lat) = documents.points[i];
                let half = cell.size / 2.0;
                Query::Within(
                    GeoBox::new(
                        (lon - half).max(-180.0),
                        (lat - half).max(-90.0),
                        (lon + half).min(180.0),
                        (lat + half).min(90.0),
                    )
                    .map_err(error)?,
                )
            }
        };
        out.push(query);
    }
    Ok(out)
}
