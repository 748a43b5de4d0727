//! `sift-peer`: runs sift's benchmarks against peer engines: the kv benchmark
//! (`sift_bench::kv`, the same operations, keys, values and output rows as `sift bench kv`)
//! against RocksDB or LevelDB from Debian's packages, and the index benchmark
//! (`sift_bench::index`, as `sift bench index`) against SQLite with JSON expression indexes
//! or RocksDB with an application-maintained composite index.

#![deny(clippy::unwrap_used, clippy::expect_used)]

mod level;
mod rocks;
mod rocks_index;
mod sqlite_index;

use clap::{Parser, Subcommand, ValueEnum};
use sift_bench::index::IndexBenchArgs;
use sift_bench::kv::KvArgs;
use std::process::ExitCode;

#[derive(Debug, Parser)]
#[command(
    name = "sift-peer",
    about = "sift's benchmarks run against peer engines"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// The kv benchmark of `sift bench kv`, on a peer engine.
    Kv {
        #[arg(long, value_enum)]
        engine: PeerEngine,
        #[command(flatten)]
        args: KvArgs,
    },
    /// The index benchmark of `sift bench index`, on a peer document store.
    Index {
        #[arg(long, value_enum)]
        engine: IndexPeer,
        #[command(flatten)]
        args: IndexBenchArgs,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum IndexPeer {
    /// SQLite: JSON text documents, expression indexes, WAL, synchronous=NORMAL.
    Sqlite,
    /// RocksDB: documents plus one composite-key index column family per attribute.
    Rocksdb,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum PeerEngine {
    Rocksdb,
    Leveldb,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Kv { engine, args } => match engine {
            PeerEngine::Rocksdb => {
                sift_bench::kv::run_from_args(&args, "rocksdb", &mut rocks::RocksDbEngine::open)
                    .map(drop)
            }
            PeerEngine::Leveldb => {
                sift_bench::kv::run_from_args(&args, "leveldb", &mut level::LevelDbEngine::open)
                    .map(drop)
            }
        },
        Command::Index { engine, args } => match engine {
            IndexPeer::Sqlite => {
                sift_bench::index::run_from_args(&args, &mut sqlite_index::SqliteIndexEngine::open)
                    .map(drop)
            }
            IndexPeer::Rocksdb => {
                sift_bench::index::run_from_args(&args, &mut rocks_index::RocksIndexEngine::open)
                    .map(drop)
            }
        },
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("sift-peer: error: {error}");
            ExitCode::FAILURE
        }
    }
}
