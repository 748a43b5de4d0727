//! INFO's text: `# Section` headers and `field:value` lines, as Redis writes them.

use std::fmt::Write as _;

use crate::session::{ServerStats, Shared};

/// The Redis version whose commands and replies Sift's subset follows (clients that check a
/// version see this one).
pub const REDIS_COMPATIBLE_VERSION: &str = "7.0.0";

/// The sections INFO (no argument, `default`, `all`, `everything`) shows.
const SECTIONS: [&str; 6] = [
    "server",
    "clients",
    "persistence",
    "stats",
    "keyspace",
    "sift",
];

/// INFO's text for the requested sections (none: all of Sift's).
pub fn render(shared: &Shared, requested: &[String]) -> String {
    let everything = requested.is_empty()
        || requested
            .iter()
            .any(|section| matches!(section.as_str(), "all" | "default" | "everything"));
    let mut out = String::new();
    for section in SECTIONS {
        if !everything && !requested.iter().any(|wanted| wanted == section) {
            continue;
        }
        if !out.is_empty() {
            out.push_str("\r\n");
        }
        let title = format!("{}{}", section[..1].to_uppercase(), &section[1..]);
        let _ = write!(out, "# {title}\r\n");
        for (field, value) in fields(shared, section) {
            let _ = write!(out, "{field}:{value}\r\n");
        }
    }
    out
}

fn fields(shared: &Shared, section: &str) -> Vec<(&'static str, String)> {
    let stats = &shared.stats;
    let counter = |value: &std::sync::atomic::AtomicU64| ServerStats::get(value).to_string();
    match section {
        "server" => vec![
            ("redis_version", REDIS_COMPATIBLE_VERSION.to_owned()),
            ("sift_version", env!("CARGO_PKG_VERSION").to_owned()),
            ("redis_mode", "standalone".to_owned()),
            ("os", std::env::consts::OS.to_owned()),
            ("arch_bits", (usize::BITS).to_string()),
            ("process_id", std::process::id().to_string()),
            ("tcp_port", shared.port.to_string()),
            (
                "uptime_in_seconds",
                shared.started.elapsed().as_secs().to_string(),
            ),
            (
                "executable",
                std::env::current_exe()
                    .map(|path| path.display().to_string())
                    .unwrap_or_default(),
            ),
            ("db_dir", shared.config.db_dir.display().to_string()),
            (
                "io_threads_active",
                shared.config.worker_threads.to_string(),
            ),
        ],
        "clients" => vec![
            ("connected_clients", counter(&stats.connected_clients)),
            ("maxclients", shared.config.maxclients.to_string()),
        ],
        "persistence" => vec![
            ("loading", "0".to_owned()),
            ("sift_fsync", shared.config.fsync.name().to_owned()),
            ("sift_fsync_errors", counter(&stats.fsync_errors)),
        ],
        "stats" => vec![
            (
                "total_connections_received",
                counter(&stats.total_connections_received),
            ),
            (
                "total_commands_processed",
                counter(&stats.total_commands_processed),
            ),
            (
                "total_net_input_bytes",
                counter(&stats.total_net_input_bytes),
            ),
            (
                "total_net_output_bytes",
                counter(&stats.total_net_output_bytes),
            ),
            ("rejected_connections", counter(&stats.rejected_connections)),
            ("total_error_replies", counter(&stats.total_error_replies)),
            ("sift_protocol_errors", counter(&stats.protocol_errors)),
            ("sift_idle_disconnects", counter(&stats.idle_disconnects)),
            (
                "sift_reply_stall_disconnects",
                counter(&stats.reply_stall_disconnects),
            ),
        ],
        "keyspace" => {
            let keys = shared.keyspace.len();
            if keys == 0 {
                Vec::new()
            } else {
                vec![("db0", format!("keys={keys},expires=0,avg_ttl=0"))]
            }
        }
        "sift" => {
            let engine = shared.keyspace.database().engine().stats();
            let search = shared.search.all();
            // Each engine counter as `engine_<its Stats field>`.
            macro_rules! engine_counters {
                ($($field:ident),*) => {
                    vec![$((concat!("engine_", stringify!($field)), engine.$field.to_string())),*]
                };
            }
            let mut lines = engine_counters!(
                writes,
                write_groups,
                wal_bytes,
                wal_syncs,
                flushes,
                compactions,
                seek_compactions,
                write_stalls,
                write_stall_micros,
                write_slowdown_micros,
                write_stop_memtables_micros,
                write_stop_l0_micros,
                commit_lock_wait_micros,
                blocks_read_from_disk,
                blocks_read_from_cache,
                bytes_written
            );
            lines.extend([
                ("search_indexes", search.len().to_string()),
                (
                    "search_indexes_indexing",
                    search
                        .iter()
                        .filter(|index| !index.is_ready())
                        .count()
                        .to_string(),
                ),
                (
                    "secondary_indexes",
                    shared
                        .keyspace
                        .database()
                        .collection(crate::keyspace::KEYS_COLLECTION)
                        .map_or(0, |info| info.indexes.len())
                        .to_string(),
                ),
            ]);
            lines
        }
        _ => Vec::new(),
    }
}
