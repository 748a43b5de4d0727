//! `sift-peer`: runs sift's kv benchmark (`sift_bench::kv`, the same operations, keys, values
//! and output rows as `sift bench kv`) against RocksDB or LevelDB from Debian's packages.

#![deny(clippy::unwrap_used, clippy::expect_used)]

mod level;
mod rocks;

use clap::{Parser, Subcommand, ValueEnum};
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
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum PeerEngine {
    Rocksdb,
    Leveldb,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let Command::Kv { engine, args } = cli.command;
    let result = match engine {
        PeerEngine::Rocksdb => {
            sift_bench::kv::run_from_args(&args, "rocksdb", &mut rocks::RocksDbEngine::open)
        }
        PeerEngine::Leveldb => {
            sift_bench::kv::run_from_args(&args, "leveldb", &mut level::LevelDbEngine::open)
        }
    };
    match result {
        Ok(_rows) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("sift-peer: error: {error}");
            ExitCode::FAILURE
        }
    }
}
