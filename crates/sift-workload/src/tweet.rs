//! The synthetic tweet generator of LevelDB++ (SIGMOD'18) §5.1, and its JSONL writer.
//!
//! The paper scales a seed set of 18 million geotagged New York State tweets: the user of each
//! synthetic tweet follows the seed set's heavy-tailed rank-frequency distribution (about 30
//! tweets per user), the number of tweets posted in each second is uniform between 0 and twice
//! the seed's average of 35 per second, and a random-character body makes documents about 550
//! bytes long. Here the seed set is replaced by its published statistics (see
//! [`crate::distribution::UserDistribution`] for the user distribution).
//!
//! # Document (one JSON object per tweet, fields in this order)
//!
//! | field | JSON type | meaning |
//! |---|---|---|
//! | `tweet_id` | integer | primary key: [`TWEET_ID_BASE`] + 1, + 2, … in generation order, so ids are time-ordered (as Twitter's snowflake ids are) **and all 16 digits wide**; unique |
//! | `created_at` | string | **CreationTime**, RFC 3339 UTC with second resolution (`"2017-10-01T00:00:05Z"`), non-decreasing; index it with type `time` |
//! | `timestamp_ms` | integer | the same instant in epoch milliseconds, with the tweets of one second spread over its milliseconds (strictly informative; non-decreasing) |
//! | `user.id` | integer | **UserID**, in `1..=users`, heavy-tailed (Zipf over a seeded permutation of the ids) |
//! | `user.name` | string | `"user_<id>"` |
//! | `lang` | string | one of 7 language codes, skewed (`en` ≈ 70%) — a low-cardinality string attribute |
//! | `retweet_count` | integer | numeric attribute, heavy-tailed: 0 for 60% of tweets, else log-uniform in `1..=10000` |
//! | `place.coordinates` | `[float, float]` | geo point `[longitude, latitude]` in degrees with 6 decimals, inside New York State (half around New York City, a fifth around four other cities, the rest uniform) |
//! | `text` | string | body of random letters, digits, spaces and `.,#@` (never needs escaping); its length makes the whole line average `document_bytes_target` bytes (±30% per document) |
//!
//! Equal-width ids matter: a store that keys integer primary keys by their decimal text (Sift
//! does, see `sift_index::document`) orders `10000 < 100000 < 10001`, so ids of different widths
//! would interleave and scatter every time range over the whole key space. Real tweet ids are
//! 64-bit snowflake numbers of equal width; `TWEET_ID_BASE + n` keeps that property for
//! `n < 9 × 10^15` and stays below 2^53, so JSON readers that parse numbers as doubles keep
//! them exact.
//!
//! Second resolution for `created_at` matches Twitter's own field and gives the CreationTime
//! posting lists of about 35 tweets that the paper's cost analysis uses (`PL_S = 35`).

use crate::distribution::UserDistribution;
use crate::random::Random;
use std::fmt;
use std::io::{self, Write};

/// 2017-10-01T00:00:00Z, around when the paper's seed tweets were collected.
pub const DEFAULT_START_TIME_MS: i64 = 1_506_816_000_000;
/// The seed set's average tweets per user (§5.1).
pub const TWEETS_PER_USER: u64 = 30;
/// The seed set's average tweets per second (§5.1); the per-second count is uniform in
/// `0..=2 × 35`.
pub const TWEETS_PER_SECOND_MEAN: u32 = 35;
/// The seed set's average document size in bytes (§5.1).
pub const DOCUMENT_BYTES_MEAN: usize = 550;
/// Default Zipf exponent of the user rank-frequency distribution. Figure 7 of the paper is only
/// published as a plot; 0.8 gives, at 1M tweets, a most active user with ~3% of all tweets, a
/// median user with ~12 and almost every user at least one, which is the shape of Twitter
/// activity data. Exponents >= 1 concentrate much more on the head.
pub const DEFAULT_USER_EXPONENT: f64 = 0.8;
/// Largest supported `users` (the sampling table costs 12 bytes per user).
pub const MAX_USERS: u64 = 100_000_000;
/// Tweet ids are `TWEET_ID_BASE + ordinal` (ordinal 1, 2, … in generation order): 16 decimal
/// digits each, so their text order is their numeric (and creation-time) order.
pub const TWEET_ID_BASE: u64 = 1_000_000_000_000_000;

/// The id of the `ordinal`-th generated tweet (1-based).
pub fn tweet_id_of_ordinal(ordinal: u64) -> u64 {
    TWEET_ID_BASE + ordinal
}

/// Parameters of a synthetic tweet data set. Equal configurations generate equal documents.
#[derive(Debug, Clone, PartialEq)]
pub struct TweetConfig {
    /// Seed of every random choice.
    pub seed: u64,
    /// Number of distinct user ids (`1..=users`); [`TweetConfig::for_tweets`] uses
    /// `n / 30` for about 30 tweets per user.
    pub users: u64,
    /// Zipf exponent of the user rank-frequency distribution (finite, `>= 0`; 0 is uniform).
    pub user_exponent: f64,
    /// Tweets posted in each second are uniform in `0..=tweets_per_second_max` (the paper:
    /// twice the average, 70, for 35 per second on average). Must be `>= 1`.
    pub tweets_per_second_max: u32,
    /// Average length of one JSON document in bytes (without the line feed of JSONL); the body
    /// text is sized to reach it. Must be in `256..=1_000_000`.
    pub document_bytes_target: usize,
    /// CreationTime of the first second, epoch milliseconds (rounded down to a whole second).
    pub start_time_ms: i64,
}

impl TweetConfig {
    /// The paper's parameters for a data set of about `tweets` documents.
    pub fn for_tweets(tweets: u64, seed: u64) -> Self {
        Self {
            seed,
            users: (tweets / TWEETS_PER_USER).clamp(1, MAX_USERS),
            user_exponent: DEFAULT_USER_EXPONENT,
            tweets_per_second_max: 2 * TWEETS_PER_SECOND_MEAN,
            document_bytes_target: DOCUMENT_BYTES_MEAN,
            start_time_ms: DEFAULT_START_TIME_MS,
        }
    }

    /// Checks the ranges documented on each field.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.users == 0 || self.users > MAX_USERS {
            return Err(ConfigError(format!(
                "users must be in 1..={MAX_USERS}, got {}",
                self.users
            )));
        }
        if !self.user_exponent.is_finite() || self.user_exponent < 0.0 {
            return Err(ConfigError(format!(
                "user exponent must be a finite number >= 0, got {}",
                self.user_exponent
            )));
        }
        if self.tweets_per_second_max == 0 {
            return Err(ConfigError("tweets per second max must be >= 1".into()));
        }
        if !(256..=1_000_000).contains(&self.document_bytes_target) {
            return Err(ConfigError(format!(
                "document bytes target must be in 256..=1000000, got {}",
                self.document_bytes_target
            )));
        }
        // Leave room for centuries of tweets without overflowing the millisecond clock.
        const LIMIT_MS: i64 = 1 << 52;
        if !(-LIMIT_MS..=LIMIT_MS).contains(&self.start_time_ms) {
            return Err(ConfigError(format!(
                "start time must be within ±2^52 ms of the epoch, got {}",
                self.start_time_ms
            )));
        }
        Ok(())
    }
}

/// A configuration value out of its documented range.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError(pub String);

impl fmt::Display for ConfigError {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str(&self.0)
    }
}

impl std::error::Error for ConfigError {}

/// The typed values of one generated tweet (what its JSON says), for workloads and tests that
/// need them without parsing the document.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TweetFields {
    pub tweet_id: u64,
    /// `user.id`.
    pub user_id: u64,
    /// `created_at` in epoch milliseconds (a whole second).
    pub created_at_ms: i64,
    /// `timestamp_ms`.
    pub timestamp_ms: i64,
    pub retweet_count: u64,
    /// `place.coordinates[0]`, degrees, exactly the value printed with 6 decimals.
    pub longitude: f64,
    /// `place.coordinates[1]`.
    pub latitude: f64,
    pub lang: &'static str,
}

/// One generated tweet: its values and its JSON document.
#[derive(Debug, Clone, PartialEq)]
pub struct Tweet {
    pub fields: TweetFields,
    /// The document, one JSON object without a trailing line feed.
    pub json: String,
}

const LANGUAGES: [(&str, u64); 7] = [
    ("en", 70),
    ("es", 12),
    ("und", 5),
    ("pt", 4),
    ("ja", 3),
    ("fr", 3),
    ("ar", 3),
];

/// Body alphabet: 64 characters (6 random bits each), none of which needs JSON escaping;
/// letters repeated roughly by English frequency, with spaces between "words".
const TEXT_ALPHABET: &[u8; 64] =
    b"abcdefghijklmnopqrstuvwxyzetaoinshrdlu        ABCDEFG0123456.,#@";

/// Cities (longitude, latitude in micro-degrees) the non-NYC clustered points gather around.
const CITIES_MICRO_DEGREES: [(i64, i64); 4] = [
    (-78_878_400, 42_886_400), // Buffalo
    (-77_610_900, 43_156_600), // Rochester
    (-73_756_200, 42_652_600), // Albany
    (-76_147_400, 43_048_100), // Syracuse
];
const NEW_YORK_CITY_MICRO_DEGREES: (i64, i64) = (-73_968_000, 40_748_000);
/// New York State bounding box, micro-degrees: longitude, then latitude ranges.
const STATE_BOX_MICRO_DEGREES: ((i64, i64), (i64, i64)) =
    ((-79_762_000, -71_856_000), (40_496_000, 45_016_000));

/// Random-stream numbers (see [`Random::new`]).
const STREAM_USER_PERMUTATION: u64 = 1;
const STREAM_USERS: u64 = 2;
const STREAM_TIME: u64 = 3;
const STREAM_TEXT: u64 = 4;
const STREAM_ATTRIBUTES: u64 = 5;

/// Generates tweets in CreationTime order. Deterministic for a [`TweetConfig`]; streams,
/// holding only the sampling table (12 bytes per user) and one second's worth of state.
#[derive(Debug, Clone)]
pub struct TweetGenerator {
    config: TweetConfig,
    distribution: UserDistribution,
    user_random: Random,
    time_random: Random,
    text_random: Random,
    attribute_random: Random,
    /// The second tweets are being emitted for, epoch ms.
    second_ms: i64,
    /// Tweets in the current second, and how many have been emitted.
    second_tweets: u64,
    second_emitted: u64,
    /// `created_at` text of `second_ms`, cached: it changes once per ~35 tweets.
    second_text: String,
    next_tweet_id: u64,
    /// Rank of the user of the last tweet (for workloads that track seen users).
    last_user_rank: u32,
}

impl TweetGenerator {
    pub fn new(config: TweetConfig) -> Result<Self, ConfigError> {
        config.validate()?;
        let mut permutation_random = Random::new(config.seed, STREAM_USER_PERMUTATION);
        let distribution = UserDistribution::new(
            config.users as u32,
            config.user_exponent,
            &mut permutation_random,
        );
        let start_second_ms = config.start_time_ms.div_euclid(1000) * 1000;
        Ok(Self {
            user_random: Random::new(config.seed, STREAM_USERS),
            time_random: Random::new(config.seed, STREAM_TIME),
            text_random: Random::new(config.seed, STREAM_TEXT),
            attribute_random: Random::new(config.seed, STREAM_ATTRIBUTES),
            distribution,
            // The first call to `next_time` moves to the first second.
            second_ms: start_second_ms - 1000,
            second_tweets: 0,
            second_emitted: 0,
            second_text: String::new(),
            next_tweet_id: tweet_id_of_ordinal(1),
            last_user_rank: 0,
            config,
        })
    }

    pub fn config(&self) -> &TweetConfig {
        &self.config
    }

    pub fn user_distribution(&self) -> &UserDistribution {
        &self.distribution
    }

    /// Number of tweet ids handed out so far (the ids are
    /// `tweet_id_of_ordinal(1..=tweets_generated())`).
    pub fn tweets_generated(&self) -> u64 {
        self.next_tweet_id - TWEET_ID_BASE - 1
    }

    /// 0-based popularity rank of the user of the last generated document.
    pub fn last_user_rank(&self) -> u32 {
        self.last_user_rank
    }

    /// The next tweet, with a fresh `tweet_id`.
    pub fn next_tweet(&mut self) -> Tweet {
        self.next_tweet_reusing(String::new())
    }

    /// [`TweetGenerator::next_tweet`] written into `json` (cleared first; the same tweet): a
    /// loader that hands back each written tweet's buffer allocates none per tweet.
    pub fn next_tweet_reusing(&mut self, mut json: String) -> Tweet {
        // Cleared before reserving, so a reused buffer is not grown past twice the target.
        json.clear();
        json.reserve(self.config.document_bytes_target * 2);
        let tweet_id = self.next_tweet_id;
        self.next_tweet_id += 1;
        let fields = self.generate_into(tweet_id, &mut json);
        Tweet { fields, json }
    }

    /// A new document (next CreationTime, newly drawn user, attributes and text) carrying an
    /// already generated `tweet_id`: the paper's "update", a PUT of an existing primary key.
    /// Does not consume a tweet id.
    pub fn next_version_of(&mut self, tweet_id: u64) -> Tweet {
        let mut json = String::with_capacity(self.config.document_bytes_target * 2);
        let fields = self.generate_into(tweet_id, &mut json);
        Tweet { fields, json }
    }

    /// Writes `tweets` new documents as JSON Lines (one document and `\n` each), reusing one
    /// buffer. Returns the bytes written.
    pub fn write_jsonl<W: Write + ?Sized>(&mut self, out: &mut W, tweets: u64) -> io::Result<u64> {
        let mut line = String::with_capacity(self.config.document_bytes_target * 2);
        let mut bytes_written = 0u64;
        for _ in 0..tweets {
            let tweet_id = self.next_tweet_id;
            self.next_tweet_id += 1;
            self.generate_into(tweet_id, &mut line);
            line.push('\n');
            out.write_all(line.as_bytes())?;
            bytes_written += line.len() as u64;
        }
        Ok(bytes_written)
    }

    /// Advances the clock by one tweet: returns (`created_at` ms, `timestamp_ms`).
    fn next_time(&mut self) -> (i64, i64) {
        while self.second_emitted == self.second_tweets {
            self.second_ms += 1000;
            self.second_tweets = self
                .time_random
                .below(u64::from(self.config.tweets_per_second_max) + 1);
            self.second_emitted = 0;
            if self.second_tweets > 0 {
                self.second_text.clear();
                push_rfc3339_seconds(&mut self.second_text, self.second_ms);
            }
        }
        let offset_ms = (self.second_emitted * 1000 / self.second_tweets) as i64;
        self.second_emitted += 1;
        (self.second_ms, self.second_ms + offset_ms)
    }

    fn next_point(&mut self) -> (i64, i64) {
        let random = &mut self.attribute_random;
        let choice = random.below(10);
        let (center, spread) = if choice < 5 {
            (NEW_YORK_CITY_MICRO_DEGREES, 150_000)
        } else if choice < 7 {
            (
                CITIES_MICRO_DEGREES[random.below(CITIES_MICRO_DEGREES.len() as u64) as usize],
                80_000,
            )
        } else {
            let ((longitude_low, longitude_high), (latitude_low, latitude_high)) =
                STATE_BOX_MICRO_DEGREES;
            let longitude =
                longitude_low + random.below((longitude_high - longitude_low) as u64) as i64;
            let latitude =
                latitude_low + random.below((latitude_high - latitude_low) as u64) as i64;
            return (longitude, latitude);
        };
        // Triangular noise (sum of two uniforms) concentrates points near the centre.
        let noise = |random: &mut Random| {
            random.below(spread as u64 + 1) as i64 + random.below(spread as u64 + 1) as i64 - spread
        };
        let longitude = center.0 + noise(random);
        let latitude = center.1 + noise(random);
        (longitude, latitude)
    }

    fn generate_into(&mut self, tweet_id: u64, json: &mut String) -> TweetFields {
        json.clear();
        let (created_at_ms, timestamp_ms) = self.next_time();
        let rank = self.distribution.sample_rank(&mut self.user_random);
        self.last_user_rank = rank;
        let user_id = u64::from(self.distribution.user_id(rank));

        let attributes = &mut self.attribute_random;
        let mut language_draw = attributes.below(100);
        let mut lang = LANGUAGES[0].0;
        for (code, percent) in LANGUAGES {
            if language_draw < percent {
                lang = code;
                break;
            }
            language_draw -= percent;
        }
        let retweet_count = if attributes.below(10) < 6 {
            0
        } else {
            // Log-uniform in 1..=10000.
            (10f64.powf(4.0 * attributes.unit()).floor() as u64).clamp(1, 10_000)
        };
        let (longitude_micro, latitude_micro) = self.next_point();

        json.push_str("{\"tweet_id\":");
        push_u64(json, tweet_id);
        json.push_str(",\"created_at\":\"");
        json.push_str(&self.second_text);
        json.push_str("\",\"timestamp_ms\":");
        push_i64(json, timestamp_ms);
        json.push_str(",\"user\":{\"id\":");
        push_u64(json, user_id);
        json.push_str(",\"name\":\"user_");
        push_u64(json, user_id);
        json.push_str("\"},\"lang\":\"");
        json.push_str(lang);
        json.push_str("\",\"retweet_count\":");
        push_u64(json, retweet_count);
        json.push_str(",\"place\":{\"coordinates\":[");
        push_micro_degrees(json, longitude_micro);
        json.push(',');
        push_micro_degrees(json, latitude_micro);
        json.push_str("]},\"text\":\"");

        // Size the body so the document lands on target ± 30%, whatever the other fields took.
        let target = self.config.document_bytes_target as u64;
        let spread = target * 3 / 10;
        let document_bytes = self.text_random.in_range(target - spread, target + spread);
        let closing_bytes = 2; // `"}`
        let text_bytes = document_bytes
            .saturating_sub((json.len() + closing_bytes) as u64)
            .max(1);
        push_random_text(json, &mut self.text_random, text_bytes);
        json.push_str("\"}");

        TweetFields {
            tweet_id,
            user_id,
            created_at_ms,
            timestamp_ms,
            retweet_count,
            longitude: longitude_micro as f64 / 1e6,
            latitude: latitude_micro as f64 / 1e6,
            lang,
        }
    }
}

impl Iterator for TweetGenerator {
    type Item = Tweet;

    /// Endless: take as many as needed.
    fn next(&mut self) -> Option<Tweet> {
        Some(self.next_tweet())
    }
}

fn push_random_text(out: &mut String, random: &mut Random, bytes: u64) {
    out.reserve(bytes as usize);
    let mut remaining = bytes;
    while remaining > 0 {
        let mut bits = random.next_u64();
        // Ten 6-bit characters per draw.
        for _ in 0..remaining.min(10) {
            out.push(char::from(TEXT_ALPHABET[(bits & 63) as usize]));
            bits >>= 6;
        }
        remaining -= remaining.min(10);
    }
}

fn push_u64(out: &mut String, mut value: u64) {
    let mut digits = [0u8; 20];
    let mut start = digits.len();
    loop {
        start -= 1;
        digits[start] = b'0' + (value % 10) as u8;
        value /= 10;
        if value == 0 {
            break;
        }
    }
    for &digit in &digits[start..] {
        out.push(char::from(digit));
    }
}

fn push_i64(out: &mut String, value: i64) {
    if value < 0 {
        out.push('-');
    }
    push_u64(out, value.unsigned_abs());
}

/// Writes micro-degrees as decimal degrees with exactly 6 decimals (`-73968123` ->
/// `-73.968123`), so the printed text parses back to `micro / 1e6` exactly.
fn push_micro_degrees(out: &mut String, micro: i64) {
    if micro < 0 {
        out.push('-');
    }
    let magnitude = micro.unsigned_abs();
    push_u64(out, magnitude / 1_000_000);
    out.push('.');
    let fraction = magnitude % 1_000_000;
    let mut divisor = 100_000;
    while divisor > 0 {
        out.push(char::from(b'0' + (fraction / divisor % 10) as u8));
        divisor /= 10;
    }
}

/// Days since 1970-01-01 -> (year, month 1..=12, day 1..=31), proleptic Gregorian
/// (H. Hinnant's `civil_from_days`).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let shifted = days + 719_468;
    let era = shifted.div_euclid(146_097);
    let day_of_era = shifted.rem_euclid(146_097);
    let year_of_era =
        (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let month_index = (5 * day_of_year + 2) / 153;
    let day = (day_of_year - (153 * month_index + 2) / 5 + 1) as u32;
    let month = if month_index < 10 {
        month_index + 3
    } else {
        month_index - 9
    } as u32;
    let year = year_of_era + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

fn push_two_digits(out: &mut String, value: u32) {
    out.push(char::from(b'0' + (value / 10 % 10) as u8));
    out.push(char::from(b'0' + (value % 10) as u8));
}

fn push_rfc3339_seconds(out: &mut String, epoch_ms: i64) {
    let seconds = epoch_ms.div_euclid(1000);
    let (year, month, day) = civil_from_days(seconds.div_euclid(86_400));
    let second_of_day = seconds.rem_euclid(86_400) as u32;
    if (0..10_000).contains(&year) {
        let year = year as u32;
        push_two_digits(out, year / 100);
        push_two_digits(out, year % 100);
    } else {
        // Outside RFC 3339's four-digit years; still unambiguous for people.
        push_i64(out, year);
    }
    out.push('-');
    push_two_digits(out, month);
    out.push('-');
    push_two_digits(out, day);
    out.push('T');
    push_two_digits(out, second_of_day / 3600);
    out.push(':');
    push_two_digits(out, second_of_day / 60 % 60);
    out.push(':');
    push_two_digits(out, second_of_day % 60);
    out.push('Z');
}

/// `epoch_ms` as the RFC 3339 text `created_at` uses (UTC, whole seconds, rounded down):
/// `format_rfc3339_seconds(1_506_816_005_000) == "2017-10-01T00:00:05Z"`.
pub fn format_rfc3339_seconds(epoch_ms: i64) -> String {
    let mut text = String::with_capacity(20);
    push_rfc3339_seconds(&mut text, epoch_ms);
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A loader that hands each tweet's buffer back (`next_tweet_reusing`) gets the same
    /// tweets as one that does not, whatever the buffer held.
    #[test]
    fn reusing_a_buffer_generates_the_same_tweets() {
        for seed in [1, 2, 3] {
            let config = TweetConfig::for_tweets(5_000, seed);
            let mut fresh = TweetGenerator::new(config.clone()).expect("valid config");
            let mut reusing = TweetGenerator::new(config).expect("valid config");
            let mut spare = "garbage {\"user\": 1} ".repeat(100);
            for _ in 0..5_000 {
                let expected = fresh.next_tweet();
                let tweet = reusing.next_tweet_reusing(spare);
                assert_eq!(tweet, expected);
                spare = tweet.json;
                spare.push_str("left over");
            }
        }
    }

    #[test]
    fn rfc3339_formatting() {
        assert_eq!(format_rfc3339_seconds(0), "1970-01-01T00:00:00Z");
        assert_eq!(
            format_rfc3339_seconds(DEFAULT_START_TIME_MS + 5_999),
            "2017-10-01T00:00:05Z"
        );
        // Leap day and end of year.
        assert_eq!(
            format_rfc3339_seconds(951_782_400_000),
            "2000-02-29T00:00:00Z"
        );
        assert_eq!(
            format_rfc3339_seconds(1_704_067_199_000),
            "2023-12-31T23:59:59Z"
        );
        assert_eq!(format_rfc3339_seconds(-1000), "1969-12-31T23:59:59Z");
    }

    #[test]
    fn number_formatting() {
        let mut text = String::new();
        push_u64(&mut text, 0);
        text.push(' ');
        push_u64(&mut text, u64::MAX);
        text.push(' ');
        push_i64(&mut text, -42);
        text.push(' ');
        push_micro_degrees(&mut text, -73_000_123);
        text.push(' ');
        push_micro_degrees(&mut text, 40_500_000);
        text.push(' ');
        push_micro_degrees(&mut text, -5);
        assert_eq!(
            text,
            "0 18446744073709551615 -42 -73.000123 40.500000 -0.000005"
        );
    }

    #[test]
    fn bad_configurations_are_rejected() {
        let good = TweetConfig::for_tweets(1000, 1);
        assert!(TweetGenerator::new(good.clone()).is_ok());
        let cases = [
            TweetConfig {
                users: 0,
                ..good.clone()
            },
            TweetConfig {
                user_exponent: f64::NAN,
                ..good.clone()
            },
            TweetConfig {
                user_exponent: -1.0,
                ..good.clone()
            },
            TweetConfig {
                tweets_per_second_max: 0,
                ..good.clone()
            },
            TweetConfig {
                document_bytes_target: 10,
                ..good.clone()
            },
            TweetConfig {
                start_time_ms: i64::MAX,
                ..good.clone()
            },
        ];
        for config in cases {
            let error = TweetGenerator::new(config.clone()).err();
            assert!(error.is_some(), "{config:?} accepted");
        }
    }
}
