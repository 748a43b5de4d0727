//! Operation streams over the synthetic tweets: the Static and Mixed workloads of LevelDB++
//! (SIGMOD'18) §5.1, Table 7.
//!
//! * **Static**: every tweet is PUT first; then the benchmark asks the same generator for query
//!   operations of one type at a time ([`WorkloadGenerator::get`], [`WorkloadGenerator::lookup`],
//!   [`WorkloadGenerator::range_lookup`]) with the parameters of Table 7a ([`table7`]).
//! * **Mixed** (Table 7b): PUTs interleaved with GETs, LOOKUPs on UserID (top-10) and updates,
//!   drawn independently per operation with the workload's percentages. As in the paper, an
//!   update is a PUT whose `tweet_id` already exists (a freshly generated document — new user,
//!   current CreationTime, new text — under an old id), and mixed workloads query only UserID.
//!
//! Query conditions follow the distribution of values in the data written so far, as the paper
//! says ("selected based on the distribution of values in the input tweets dataset"):
//! * GET and update pick a `tweet_id` uniformly among the ids written so far;
//! * a UserID LOOKUP draws a user from the same rank-frequency distribution as the writes,
//!   redrawing until the user has at least one tweet written (so hot users are queried more,
//!   and no lookup targets a user that never tweeted);
//! * a CreationTime LOOKUP takes the `created_at` second of a uniformly chosen written tweet;
//! * a RANGELOOKUP starts at such a value: on UserID it covers `selectivity` consecutive user
//!   ids (`lo..=lo + selectivity - 1`, shifted down to stay within `1..=users`), on CreationTime
//!   `selectivity` minutes (`lo..=lo + selectivity × 60000 - 1` ms).
//!
//! "Written" counts every PUT and update handed out; an update may replace the only document of
//! a user or second, so a later query for that value can (rarely) find nothing. Ids never
//! disappear: there are no deletes, as in the paper.
//!
//! Query values are `i64`: a user id, or epoch milliseconds for CreationTime (whole seconds;
//! [`crate::format_rfc3339_seconds`] gives the document's text form).

use crate::random::Random;
use crate::tweet::{ConfigError, Tweet, TweetConfig, TweetGenerator};
use std::fmt;
use std::str::FromStr;

/// The parameters of Table 7 of the paper.
pub mod table7 {
    /// Table 7a: documents PUT in the static workload (the paper's full scale).
    pub const STATIC_PUTS: u64 = 180_000_000;
    /// Table 7a: GETs in the static workload.
    pub const STATIC_GETS: u64 = 100_000;
    /// Table 7a: LOOKUPs per index (UserID, CreationTime).
    pub const STATIC_LOOKUPS_PER_INDEX: u64 = 15_000;
    /// Table 7a: RANGELOOKUPs per index.
    pub const STATIC_RANGE_LOOKUPS_PER_INDEX: u64 = 50_000;
    /// Table 7a: UserID range selectivities, in number of users.
    pub const USER_RANGE_SELECTIVITY_USERS: [u64; 2] = [10, 100];
    /// Table 7a: CreationTime range selectivities, in minutes.
    pub const TIME_RANGE_SELECTIVITY_MINUTES: [u64; 2] = [1, 100];
    /// Table 7a: top-K of static queries (`None` = no limit).
    pub const STATIC_TOP_K: [Option<usize>; 3] = [Some(10), Some(100), None];
    /// Table 7b: operations per mixed workload.
    pub const MIXED_OPERATIONS: u64 = 50_000_000;
    /// Table 7b: top-K of mixed-workload LOOKUPs.
    pub const MIXED_TOP_K: usize = 10;
}

/// The two secondary attributes the paper indexes and queries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Attribute {
    /// `user.id`, an integer; not time-correlated.
    UserId,
    /// `created_at`, a time (RFC 3339, whole seconds); time-correlated.
    CreationTime,
}

impl Attribute {
    pub const ALL: [Attribute; 2] = [Attribute::UserId, Attribute::CreationTime];

    /// Path of the attribute in the documents.
    pub fn path(self) -> &'static str {
        match self {
            Attribute::UserId => "user.id",
            Attribute::CreationTime => "created_at",
        }
    }

    /// The index type to declare for it (`int`, `time`).
    pub fn index_type(self) -> &'static str {
        match self {
            Attribute::UserId => "int",
            Attribute::CreationTime => "time",
        }
    }

    /// The paper's name (`UserID`, `CreationTime`).
    pub fn name(self) -> &'static str {
        match self {
            Attribute::UserId => "UserID",
            Attribute::CreationTime => "CreationTime",
        }
    }
}

/// Operation types, for counting and reporting.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum OperationKind {
    Put,
    Get,
    Lookup,
    RangeLookup,
    Update,
}

impl OperationKind {
    pub const ALL: [OperationKind; 5] = [
        OperationKind::Put,
        OperationKind::Get,
        OperationKind::Lookup,
        OperationKind::RangeLookup,
        OperationKind::Update,
    ];

    /// The paper's name (`PUT`, `GET`, `LOOKUP`, `RANGELOOKUP`, `UPDATE`).
    pub fn name(self) -> &'static str {
        match self {
            OperationKind::Put => "PUT",
            OperationKind::Get => "GET",
            OperationKind::Lookup => "LOOKUP",
            OperationKind::RangeLookup => "RANGELOOKUP",
            OperationKind::Update => "UPDATE",
        }
    }
}

/// One operation of a workload.
#[derive(Debug, Clone, PartialEq)]
pub enum Operation {
    /// PUT of a document with a new `tweet_id`.
    Put(Tweet),
    /// PUT of a new document whose `tweet_id` (`tweet.fields.tweet_id`) was written before.
    Update(Tweet),
    /// GET by primary key; the id was written before.
    Get { tweet_id: u64 },
    /// LOOKUP(A, a, K): documents whose `attribute` equals `value`, newest first, at most
    /// `top_k` (`None`: all).
    Lookup {
        attribute: Attribute,
        value: i64,
        top_k: Option<usize>,
    },
    /// RANGELOOKUP(A, a, b, K): documents whose `attribute` is in `lo..=hi`.
    RangeLookup {
        attribute: Attribute,
        lo: i64,
        hi: i64,
        top_k: Option<usize>,
    },
}

impl Operation {
    pub fn kind(&self) -> OperationKind {
        match self {
            Operation::Put(_) => OperationKind::Put,
            Operation::Update(_) => OperationKind::Update,
            Operation::Get { .. } => OperationKind::Get,
            Operation::Lookup { .. } => OperationKind::Lookup,
            Operation::RangeLookup { .. } => OperationKind::RangeLookup,
        }
    }
}

/// Percentages of each operation type; they sum to 100.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OperationMix {
    pub put_percent: u32,
    pub get_percent: u32,
    pub lookup_percent: u32,
    pub range_lookup_percent: u32,
    pub update_percent: u32,
}

impl OperationMix {
    /// The operation type of a uniform draw in `0..100`: the first type whose cumulative
    /// percentage exceeds it (PUT past the end).
    pub fn kind_of_draw(&self, draw: u32) -> OperationKind {
        let mut draw = draw;
        for candidate in OperationKind::ALL {
            let percent = self.percent(candidate);
            if draw < percent {
                return candidate;
            }
            draw -= percent;
        }
        OperationKind::Put
    }

    pub fn percent(&self, kind: OperationKind) -> u32 {
        match kind {
            OperationKind::Put => self.put_percent,
            OperationKind::Get => self.get_percent,
            OperationKind::Lookup => self.lookup_percent,
            OperationKind::RangeLookup => self.range_lookup_percent,
            OperationKind::Update => self.update_percent,
        }
    }

    pub fn validate(&self) -> Result<(), ConfigError> {
        let total: u32 = OperationKind::ALL
            .iter()
            .map(|&kind| self.percent(kind))
            .fold(0u32, u32::saturating_add);
        if total == 100 {
            Ok(())
        } else {
            Err(ConfigError(format!(
                "operation percentages must sum to 100, got {total} ({self:?})"
            )))
        }
    }
}

/// A workload of the paper.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Workload {
    /// Table 7a: only PUTs from the stream (queries are requested explicitly afterwards).
    Static,
    /// Table 7b: PUT 80%, GET 15%, LOOKUP 5%.
    WriteHeavy,
    /// Table 7b: PUT 20%, GET 70%, LOOKUP 10%.
    ReadHeavy,
    /// Table 7b: PUT 40%, GET 15%, LOOKUP 5%, UPDATE 40%.
    UpdateHeavy,
    /// Any other mix.
    Mixed(OperationMix),
}

impl Workload {
    /// The named workloads, in the order of the paper.
    pub const NAMED: [Workload; 4] = [
        Workload::Static,
        Workload::WriteHeavy,
        Workload::ReadHeavy,
        Workload::UpdateHeavy,
    ];

    pub fn mix(&self) -> OperationMix {
        let mix = |put_percent, get_percent, lookup_percent, update_percent| OperationMix {
            put_percent,
            get_percent,
            lookup_percent,
            range_lookup_percent: 0,
            update_percent,
        };
        match self {
            Workload::Static => mix(100, 0, 0, 0),
            Workload::WriteHeavy => mix(80, 15, 5, 0),
            Workload::ReadHeavy => mix(20, 70, 10, 0),
            Workload::UpdateHeavy => mix(40, 15, 5, 40),
            Workload::Mixed(mix) => *mix,
        }
    }

    /// `static`, `write-heavy`, `read-heavy`, `update-heavy`, or `mixed` for a custom mix.
    pub fn name(&self) -> &'static str {
        match self {
            Workload::Static => "static",
            Workload::WriteHeavy => "write-heavy",
            Workload::ReadHeavy => "read-heavy",
            Workload::UpdateHeavy => "update-heavy",
            Workload::Mixed(_) => "mixed",
        }
    }
}

impl fmt::Display for Workload {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str(self.name())
    }
}

impl FromStr for Workload {
    type Err = ConfigError;

    /// Parses the names of [`Workload::NAMED`].
    fn from_str(text: &str) -> Result<Self, ConfigError> {
        Workload::NAMED
            .into_iter()
            .find(|workload| workload.name() == text)
            .ok_or_else(|| {
                ConfigError(format!(
                    "unknown workload {text:?}: expected static, write-heavy, read-heavy or update-heavy"
                ))
            })
    }
}

/// How [`WorkloadGenerator::next_operation`] parameterises the queries of a mix.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QueryParameters {
    /// Attribute of LOOKUPs (the paper's mixed workloads: UserID).
    pub lookup_attribute: Attribute,
    /// Attribute of RANGELOOKUPs.
    pub range_attribute: Attribute,
    /// Top-K of LOOKUPs and RANGELOOKUPs (Table 7b: 10).
    pub top_k: Option<usize>,
    /// RANGELOOKUP width: users for UserID, minutes for CreationTime (at least 1).
    pub range_selectivity: u64,
}

impl Default for QueryParameters {
    fn default() -> Self {
        Self {
            lookup_attribute: Attribute::UserId,
            range_attribute: Attribute::UserId,
            top_k: Some(table7::MIXED_TOP_K),
            range_selectivity: table7::USER_RANGE_SELECTIVITY_USERS[0],
        }
    }
}

const STREAM_OPERATIONS: u64 = 16;
const STREAM_QUERIES: u64 = 17;

/// Produces the operations of a workload; deterministic for a configuration. Keeps, besides the
/// tweet generator, a bit per user (who has tweeted) and an entry per second that has tweets,
/// so that queries target values that exist.
#[derive(Debug, Clone)]
pub struct WorkloadGenerator {
    tweets: TweetGenerator,
    mix: OperationMix,
    queries: QueryParameters,
    /// Chooses the type of each operation.
    operation_random: Random,
    /// Chooses query values and updated ids.
    query_random: Random,
    /// Bit per user rank: set once that user has a written document.
    seen_user_ranks: Vec<u64>,
    /// (ordinal of the first write in that second, `created_at` ms), in write order.
    seconds: Vec<(u64, i64)>,
    /// PUTs and updates handed out.
    writes: u64,
}

impl WorkloadGenerator {
    pub fn new(config: TweetConfig, workload: Workload) -> Result<Self, ConfigError> {
        let mix = workload.mix();
        mix.validate()?;
        let seed = config.seed;
        let tweets = TweetGenerator::new(config)?;
        let users = tweets.user_distribution().users() as usize;
        Ok(Self {
            tweets,
            mix,
            queries: QueryParameters::default(),
            operation_random: Random::new(seed, STREAM_OPERATIONS),
            query_random: Random::new(seed, STREAM_QUERIES),
            seen_user_ranks: vec![0; users.div_ceil(64)],
            seconds: Vec::new(),
            writes: 0,
        })
    }

    /// Replaces the query parameters (default: UserID, top-10, ranges of 10 users).
    pub fn with_queries(mut self, queries: QueryParameters) -> Self {
        self.queries = queries;
        self
    }

    pub fn tweet_generator(&self) -> &TweetGenerator {
        &self.tweets
    }

    /// Distinct tweet ids written so far (they are
    /// [`crate::tweet::tweet_id_of_ordinal`]`(1..=tweets_written())`).
    pub fn tweets_written(&self) -> u64 {
        self.tweets.tweets_generated()
    }

    /// The next operation of the mix. Until a first document exists, every operation is a PUT
    /// (there is nothing to read or update yet).
    pub fn next_operation(&mut self) -> Operation {
        let kind = self
            .mix
            .kind_of_draw(self.operation_random.below(100) as u32);
        let queries = self.queries;
        let operation = match kind {
            OperationKind::Put => None,
            OperationKind::Get => self.get(),
            OperationKind::Update => self.update(),
            OperationKind::Lookup => self.lookup(queries.lookup_attribute, queries.top_k),
            OperationKind::RangeLookup => self.range_lookup(
                queries.range_attribute,
                queries.range_selectivity,
                queries.top_k,
            ),
        };
        operation.unwrap_or_else(|| self.put())
    }

    /// A PUT of a new tweet.
    pub fn put(&mut self) -> Operation {
        self.put_reusing(String::new())
    }

    /// [`WorkloadGenerator::put`] with the tweet written into `json` (a buffer handed back by
    /// the caller: no allocation per tweet, so a load's allocator work is the store's alone).
    pub fn put_reusing(&mut self, json: String) -> Operation {
        let tweet = self.tweets.next_tweet_reusing(json);
        self.record_write(&tweet);
        Operation::Put(tweet)
    }

    /// An update of a uniformly chosen written id; `None` before the first write.
    pub fn update(&mut self) -> Option<Operation> {
        let tweet_id = self.existing_tweet_id()?;
        let tweet = self.tweets.next_version_of(tweet_id);
        self.record_write(&tweet);
        Some(Operation::Update(tweet))
    }

    /// A GET of a uniformly chosen written id; `None` before the first write.
    pub fn get(&mut self) -> Option<Operation> {
        let tweet_id = self.existing_tweet_id()?;
        Some(Operation::Get { tweet_id })
    }

    /// A LOOKUP of an existing value of `attribute`; `None` before the first write.
    pub fn lookup(&mut self, attribute: Attribute, top_k: Option<usize>) -> Option<Operation> {
        let value = self.existing_value(attribute)?;
        Some(Operation::Lookup {
            attribute,
            value,
            top_k,
        })
    }

    /// A RANGELOOKUP starting at an existing value of `attribute`, `selectivity` users wide on
    /// UserID or `selectivity` minutes on CreationTime; `None` before the first write.
    pub fn range_lookup(
        &mut self,
        attribute: Attribute,
        selectivity: u64,
        top_k: Option<usize>,
    ) -> Option<Operation> {
        let start = self.existing_value(attribute)?;
        let selectivity = selectivity.max(1) as i64;
        let (lo, hi) = match attribute {
            Attribute::UserId => {
                let users = i64::from(self.tweets.user_distribution().users());
                let lo = start.min(users - selectivity + 1).max(1);
                (lo, lo + selectivity - 1)
            }
            Attribute::CreationTime => {
                let width_ms = selectivity.saturating_mul(60_000);
                (start, start.saturating_add(width_ms - 1))
            }
        };
        Some(Operation::RangeLookup {
            attribute,
            lo,
            hi,
            top_k,
        })
    }

    fn record_write(&mut self, tweet: &Tweet) {
        let rank = self.tweets.last_user_rank() as usize;
        if let Some(word) = self.seen_user_ranks.get_mut(rank / 64) {
            *word |= 1 << (rank % 64);
        }
        let created_at_ms = tweet.fields.created_at_ms;
        if self.seconds.last().map(|&(_, second)| second) != Some(created_at_ms) {
            self.seconds.push((self.writes, created_at_ms));
        }
        self.writes += 1;
    }

    fn existing_tweet_id(&mut self) -> Option<u64> {
        let written = self.tweets_written();
        (written > 0)
            .then(|| crate::tweet::tweet_id_of_ordinal(self.query_random.in_range(1, written)))
    }

    fn existing_value(&mut self, attribute: Attribute) -> Option<i64> {
        if self.writes == 0 {
            return None;
        }
        match attribute {
            Attribute::UserId => {
                let distribution = self.tweets.user_distribution();
                // The most popular users tweet first, so a few redraws find a seen user; the
                // bound only guards pathological configurations.
                let mut rank = self.tweets.last_user_rank();
                for _ in 0..1000 {
                    let candidate = distribution.sample_rank(&mut self.query_random);
                    let index = candidate as usize;
                    if self.seen_user_ranks[index / 64] & (1 << (index % 64)) != 0 {
                        rank = candidate;
                        break;
                    }
                }
                Some(i64::from(distribution.user_id(rank)))
            }
            Attribute::CreationTime => {
                let ordinal = self.query_random.below(self.writes);
                let index = self
                    .seconds
                    .partition_point(|&(first, _)| first <= ordinal)
                    .saturating_sub(1);
                self.seconds.get(index).map(|&(_, second_ms)| second_ms)
            }
        }
    }
}

impl Iterator for WorkloadGenerator {
    type Item = Operation;

    /// Endless: take as many operations as needed.
    fn next(&mut self) -> Option<Operation> {
        Some(self.next_operation())
    }
}
