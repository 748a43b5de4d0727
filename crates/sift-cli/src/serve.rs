//! `sift serve`: the Redis-protocol server (`sift_server`), with its settings from the command
//! line and its log on standard error (`RUST_LOG` filters it; `info` by default).

use std::net::IpAddr;
use std::path::PathBuf;
use std::time::Duration;

use sift_server::{FsyncPolicy, ServerConfig};

/// The server's command-line settings.
#[derive(Debug, clap::Args)]
pub struct ServeArgs {
    /// Database directory (created if missing).
    #[arg(long)]
    pub db: PathBuf,
    /// Address to listen on. Anything but a loopback address needs --requirepass.
    #[arg(long, default_value = "127.0.0.1")]
    pub bind: IpAddr,
    /// TCP port (0: any free port, printed in the log).
    #[arg(long, default_value_t = 6379)]
    pub port: u16,
    /// Password of the `default` user; every command but AUTH, HELLO and QUIT needs it.
    #[arg(long)]
    pub requirepass: Option<String>,
    /// When writes reach the disk: always (before each acknowledgement), everysec (at least
    /// once a second), no (when the OS decides). A process crash loses no acknowledged write
    /// with any of them; a machine crash loses up to a second with everysec.
    #[arg(long, default_value = "everysec", value_parser = parse_fsync)]
    pub fsync: FsyncPolicy,
    /// Largest bulk string a client may send, in bytes (k, m, g suffixes: 512m).
    #[arg(long, default_value = "512m", value_parser = parse_bytes)]
    pub proto_max_bulk_len: usize,
    /// Most clients connected at once.
    #[arg(long, default_value_t = 10_000)]
    pub maxclients: usize,
    /// Disconnect a client idle for this many seconds (0: never).
    #[arg(long, default_value_t = 0)]
    pub timeout: u64,
    /// Threads serving clients (default: the number of CPUs, at least 2).
    #[arg(long)]
    pub threads: Option<usize>,
    /// The engine's block cache (k, m, g suffixes). Reads of documents that are not in it
    /// go to the files (through the OS page cache); size it to the data that queries touch.
    #[arg(long, default_value = "256m", value_parser = parse_bytes)]
    pub cache: usize,
}

fn parse_fsync(text: &str) -> Result<FsyncPolicy, String> {
    FsyncPolicy::parse(text).ok_or_else(|| format!("'{text}' is not one of always, everysec, no"))
}

fn parse_bytes(text: &str) -> Result<usize, String> {
    let lower = text.trim().to_ascii_lowercase();
    let (digits, unit) = match lower.trim_end_matches('b').char_indices().last() {
        Some((index, 'k')) => (&lower[..index], 1usize << 10),
        Some((index, 'm')) => (&lower[..index], 1 << 20),
        Some((index, 'g')) => (&lower[..index], 1 << 30),
        _ => (lower.as_str(), 1),
    };
    digits
        .parse::<usize>()
        .ok()
        .and_then(|count| count.checked_mul(unit))
        .ok_or_else(|| format!("'{text}' is not a size in bytes (examples: 1048576, 512m, 1g)"))
}

pub fn serve(args: &ServeArgs) -> Result<(), String> {
    crate::init_logging("info");
    let mut config = ServerConfig::new(&args.db);
    config.bind = args.bind;
    config.port = args.port;
    config.requirepass.clone_from(&args.requirepass);
    config.fsync = args.fsync;
    config.request_limits.bulk_bytes_max = args.proto_max_bulk_len;
    config.request_limits.request_bytes_max = config
        .request_limits
        .request_bytes_max
        .max(args.proto_max_bulk_len.saturating_add(1 << 20));
    config.maxclients = args.maxclients;
    config.idle_timeout = (args.timeout > 0).then(|| Duration::from_secs(args.timeout));
    if let Some(threads) = args.threads {
        config.worker_threads = threads;
    }
    config.block_cache_bytes = Some(args.cache);
    sift_server::run(config).map_err(|error| error.to_string())
}

#[cfg(test)]
mod tests {
    use super::parse_bytes;

    #[test]
    fn sizes_take_redis_style_suffixes() {
        assert_eq!(parse_bytes("1048576"), Ok(1 << 20));
        assert_eq!(parse_bytes("512m"), Ok(512 << 20));
        assert_eq!(parse_bytes("512mb"), Ok(512 << 20));
        assert_eq!(parse_bytes("2G"), Ok(2 << 30));
        assert_eq!(parse_bytes("64k"), Ok(64 << 10));
        assert!(parse_bytes("lots").is_err());
        assert!(parse_bytes("").is_err());
    }
}
