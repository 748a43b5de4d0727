//! What `sift serve` is started with, and the checks made before it binds.

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::time::Duration;

use sift_resp::RequestLimits;

/// When writes reach the disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FsyncPolicy {
    /// A write is acknowledged only once its log record is synced (group commit per write).
    Always,
    /// The log is synced at least once a second; a machine crash loses at most about a
    /// second of acknowledged writes, a process crash none. The default, as in Redis.
    #[default]
    EverySecond,
    /// The operating system decides; a process crash still loses nothing acknowledged.
    No,
}

impl FsyncPolicy {
    /// The name `--fsync` takes and INFO shows.
    pub fn name(self) -> &'static str {
        match self {
            FsyncPolicy::Always => "always",
            FsyncPolicy::EverySecond => "everysec",
            FsyncPolicy::No => "no",
        }
    }

    /// Parses `always`, `everysec` or `no`.
    pub fn parse(text: &str) -> Option<FsyncPolicy> {
        match text {
            "always" => Some(FsyncPolicy::Always),
            "everysec" => Some(FsyncPolicy::EverySecond),
            "no" => Some(FsyncPolicy::No),
            _ => None,
        }
    }
}

/// The server's settings.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// The database directory (created if missing).
    pub db_dir: PathBuf,
    /// The address to listen on.
    pub bind: IpAddr,
    /// The TCP port; 0 picks a free one (tests).
    pub port: u16,
    /// The password of the `default` user; `None`: no authentication.
    pub requirepass: Option<String>,
    /// When writes reach the disk.
    pub fsync: FsyncPolicy,
    /// What one request may claim and occupy.
    pub request_limits: RequestLimits,
    /// Connected clients at most; the next one gets `-ERR max number of clients reached`.
    pub maxclients: usize,
    /// A client idle this long is disconnected; `None`: never (Redis's `timeout 0`).
    pub idle_timeout: Option<Duration>,
    /// A client that does not read its replies for this long while the server has replies
    /// waiting for it is disconnected (its unread replies are what would otherwise grow).
    pub reply_stall_timeout: Duration,
    /// Reply bytes buffered for one client before the server stops reading its requests and
    /// waits for it to read (back-pressure on pipelines).
    pub reply_buffer_bytes: usize,
    /// Threads serving clients (each runs commands on the engine directly).
    pub worker_threads: usize,
    /// The engine's memtable size (`None`: the engine's default, 64 MiB). Small values make
    /// flushes and compactions frequent (tests).
    pub memtable_bytes_max: Option<usize>,
    /// The engine's block cache (`None`: the engine's default, 32 MiB).
    pub block_cache_bytes: Option<usize>,
}

impl ServerConfig {
    /// Defaults for a database at `db_dir`: loopback, port 6379, no password, `everysec`.
    pub fn new(db_dir: impl Into<PathBuf>) -> ServerConfig {
        ServerConfig {
            db_dir: db_dir.into(),
            bind: IpAddr::from([127, 0, 0, 1]),
            port: 6379,
            requirepass: None,
            fsync: FsyncPolicy::default(),
            request_limits: RequestLimits::default(),
            maxclients: 10_000,
            idle_timeout: None,
            reply_stall_timeout: Duration::from_mins(1),
            reply_buffer_bytes: 64 * 1024,
            worker_threads: std::thread::available_parallelism().map_or(2, |n| n.get().max(2)),
            memtable_bytes_max: None,
            block_cache_bytes: None,
        }
    }

    /// The socket address to bind.
    pub fn address(&self) -> SocketAddr {
        SocketAddr::new(self.bind, self.port)
    }

    /// Refuses settings that would expose the database or cannot work, with the reason.
    pub fn validate(&self) -> Result<(), String> {
        if !self.bind.is_loopback() && self.requirepass.as_deref().is_none_or(str::is_empty) {
            return Err(format!(
                "refusing to listen on {} without --requirepass: anyone who can reach that \
                 address could read and change every key (Redis calls this protected mode). \
                 Set a password with --requirepass, or bind to 127.0.0.1",
                self.bind
            ));
        }
        if self.maxclients == 0 {
            return Err("--maxclients must be at least 1".to_owned());
        }
        if self.request_limits.bulk_bytes_max == 0 {
            return Err("--proto-max-bulk-len must be at least 1".to_owned());
        }
        if self.worker_threads == 0 {
            return Err("--threads must be at least 1".to_owned());
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn binding_beyond_loopback_needs_a_password() {
        let mut config = ServerConfig::new("/tmp/db");
        assert!(config.validate().is_ok());
        config.bind = IpAddr::from([0, 0, 0, 0]);
        let refusal = config.validate().expect_err("protected mode");
        assert!(refusal.contains("--requirepass"), "{refusal}");
        config.requirepass = Some(String::new());
        assert!(
            config.validate().is_err(),
            "an empty password is no password"
        );
        config.requirepass = Some("secret".to_owned());
        assert!(config.validate().is_ok());
        config.bind = "::1".parse().expect("address");
        config.requirepass = None;
        assert!(config.validate().is_ok(), "IPv6 loopback is loopback");
    }

    #[test]
    fn fsync_policies_parse_by_their_names() {
        for policy in [
            FsyncPolicy::Always,
            FsyncPolicy::EverySecond,
            FsyncPolicy::No,
        ] {
            assert_eq!(FsyncPolicy::parse(policy.name()), Some(policy));
        }
        assert_eq!(FsyncPolicy::parse("sometimes"), None);
    }
}
