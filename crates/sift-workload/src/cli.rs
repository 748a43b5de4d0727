//! `sift generate tweets`: writes a synthetic tweet data set as JSON Lines. The arguments live
//! here so the CLI binary stays a thin dispatcher.

use crate::tweet::{TweetConfig, TweetGenerator};
use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::PathBuf;

/// Arguments of `sift generate tweets`.
#[derive(Debug, Clone, clap::Args)]
pub struct GenerateTweetsArgs {
    /// Number of tweets to write.
    #[arg(long)]
    pub n: u64,
    /// Seed: the same seed and options give the same file.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Output file (JSONL); standard output when absent.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Distinct users [default: n / 30, about 30 tweets per user].
    #[arg(long)]
    pub users: Option<u64>,
    /// Zipf exponent of tweets per user (rank-frequency).
    #[arg(long, default_value_t = crate::tweet::DEFAULT_USER_EXPONENT)]
    pub user_exponent: f64,
    /// Average document size in bytes.
    #[arg(long, default_value_t = crate::tweet::DOCUMENT_BYTES_MEAN)]
    pub document_bytes: usize,
}

/// What a generation wrote.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GenerateSummary {
    pub tweets: u64,
    pub bytes: u64,
}

/// Runs `sift generate tweets`. Errors name the output file.
pub fn generate_tweets_command(args: &GenerateTweetsArgs) -> io::Result<GenerateSummary> {
    let mut config = TweetConfig::for_tweets(args.n, args.seed);
    if let Some(users) = args.users {
        config.users = users;
    }
    config.user_exponent = args.user_exponent;
    config.document_bytes_target = args.document_bytes;
    let mut generator = TweetGenerator::new(config)
        .map_err(|error| io::Error::new(io::ErrorKind::InvalidInput, error))?;
    let bytes = if let Some(path) = &args.out {
        let with_path =
            |error: io::Error| io::Error::new(error.kind(), format!("{}: {error}", path.display()));
        let file = File::create(path).map_err(with_path)?;
        let mut out = BufWriter::with_capacity(1 << 20, file);
        let bytes = generator.write_jsonl(&mut out, args.n).map_err(with_path)?;
        out.flush().map_err(with_path)?;
        bytes
    } else {
        let stdout = io::stdout();
        let mut out = BufWriter::with_capacity(1 << 20, stdout.lock());
        let bytes = generator.write_jsonl(&mut out, args.n)?;
        out.flush()?;
        bytes
    };
    Ok(GenerateSummary {
        tweets: args.n,
        bytes,
    })
}
