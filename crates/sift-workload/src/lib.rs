//! `sift-workload`: the synthetic tweet data set and the operation workloads of LevelDB++
//! (Qader, Cheng, Hristidis, SIGMOD'18, §5.1 and Table 7), used by `sift bench index`, the peer
//! comparisons and `sift generate tweets`.
//!
//! * [`TweetGenerator`] streams tweet documents (fields documented in [`tweet`]) and writes
//!   JSONL; deterministic for a [`TweetConfig`].
//! * [`WorkloadGenerator`] turns it into [`Operation`]s: the Static workload and the write-,
//!   read- and update-heavy Mixed workloads ([`workload`]).
//! * [`cli`] holds the arguments and body of `sift generate tweets`.

#![forbid(unsafe_code)]
#![deny(clippy::unwrap_used, clippy::expect_used)]

pub mod cli;
pub mod distribution;
pub mod random;
pub mod tweet;
pub mod workload;

pub use tweet::{
    format_rfc3339_seconds, tweet_id_of_ordinal, ConfigError, Tweet, TweetConfig, TweetFields,
    TweetGenerator, TWEET_ID_BASE,
};
pub use workload::{
    table7, Attribute, Operation, OperationKind, OperationMix, QueryParameters, Workload,
    WorkloadGenerator,
};
