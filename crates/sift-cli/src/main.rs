//! The `sift` command-line tool. Subcommands are thin: the work lives in library crates
//! (`sift bench kv` runs `sift_bench::kv` against `sift_lsm::Db`; `sift generate tweets` runs
//! `sift_workload::cli`; the document and index commands in `docs.rs` run `sift_index`).

#![deny(clippy::unwrap_used, clippy::expect_used)]

mod advise;
mod cluster;
mod cluster_bench;
mod docs;
mod serve;
mod study;

use clap::{Parser, Subcommand};
use sift_bench::kv::KvArgs;
use sift_study::engines::kv::SiftEngine;
use std::process::ExitCode;

#[derive(Debug, Parser)]
#[command(
    name = "sift",
    version,
    about = "Sift: an LSM-tree key-value engine with secondary indexes"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Benchmarks.
    Bench {
        #[command(subcommand)]
        benchmark: Benchmark,
    },
    /// Synthetic data sets.
    Generate {
        #[command(subcommand)]
        data_set: DataSet,
    },
    /// Imports a JSON Lines file into a collection (a document whose primary key exists
    /// replaces it; bad lines are reported with their number and skipped, or abort with
    /// --strict).
    Import(docs::ImportArgs),
    /// Secondary indexes: create, list, drop.
    Index {
        #[command(subcommand)]
        command: docs::IndexCommand,
    },
    /// Prints the live version of a document.
    Get(docs::PkArgs),
    /// Stores a document (replacing the one with the same primary key).
    Put(docs::PutArgs),
    /// Deletes a document.
    Delete(docs::PkArgs),
    /// LOOKUP: documents whose indexed attribute equals a value, newest first.
    Lookup(docs::LookupArgs),
    /// RANGELOOKUP: documents whose indexed attribute is within [--from, --to], newest first.
    Range(docs::RangeArgs),
    /// Spatial query: documents whose geo attribute lies in --bbox (edges included), newest
    /// first.
    Within(docs::WithinArgs),
    /// Documents, bytes on disk and files per level, per collection and index.
    Stats(docs::StatsArgs),
    /// The comparative study of index kinds: reproduces the papers' experiments and writes
    /// index.html (plots, tables, verdicts), results.json and CSVs to --out.
    Study(study::StudyArgs),
    /// Recommends an index kind and maintenance scheme per attribute for a described or
    /// recorded workload, with the study's cost model (docs/advise.md).
    Advise(advise::AdviseArgs),
    /// A Redis-protocol server over a database: strings, hashes and RedisJSON documents for
    /// any Redis client (docs/server.md). Stops cleanly on Ctrl-C or SIGTERM.
    Serve(serve::ServeArgs),
    /// Runs one node of a replicated cluster until Ctrl-C or SIGTERM (docs/cluster.md).
    Node(cluster::NodeArgs),
    /// A local cluster of node processes, its status, its collections (docs/cluster.md).
    Cluster {
        #[command(subcommand)]
        command: cluster::ClusterCommand,
    },
}

#[derive(Debug, Subcommand)]
enum DataSet {
    /// Synthetic tweets (LevelDB++ §5.1) as JSON Lines.
    Tweets(sift_workload::cli::GenerateTweetsArgs),
}

#[derive(Debug, Subcommand)]
enum Benchmark {
    /// db_bench-style key-value benchmark of the engine (fillseq, fillrandom, overwrite,
    /// readrandom, readseq, seekrandom).
    Kv(KvArgs),
    /// Secondary-index benchmark on the LevelDB++ tweet workload: load (PUT throughput per
    /// slice), then GET / LOOKUP / RANGELOOKUP (static) or a Table 7 mixed workload.
    Index(sift_bench::index::IndexBenchArgs),
    /// The Vinyl deferred-DELETE microbenchmark: four non-unique indexes, batches of 1-500
    /// replaces and deletes from several threads; statements/s of deferred vs sync-full.
    Vinyl(sift_study::experiments::vinyl::bench::VinylArgs),
    /// The Diff-Index experiments: update latency against offered load (open loop), index lag,
    /// exact-match and range read latency, per maintenance scheme of one secondary index.
    DiffIndex(sift_study::experiments::diff_index::bench::DiffIndexArgs),
    /// How much of a spinning thread's time this machine takes away (interrupts, other tasks,
    /// the hypervisor): the noise floor under every latency measurement.
    MachineNoise(sift_bench::noise::hiccup::MachineNoiseArgs),
    /// Cluster throughput on loopback (`sift node` processes): one node against three
    /// replicas, failover after kill -9 of the leader, catch-up of the restarted node.
    Cluster(cluster_bench::ClusterBenchArgs),
}

/// Logs to standard error at `default_level` (`RUST_LOG` overrides it), coloured on a terminal.
fn init_logging(default_level: &str) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default_level));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .try_init();
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Bench {
            benchmark: Benchmark::Kv(args),
        } => sift_bench::kv::run_from_args(&args, "sift", &mut SiftEngine::open_boxed)
            .map(|_rows| ())
            .map_err(|error| error.to_string()),
        Command::Bench {
            benchmark: Benchmark::Index(args),
        } if !args.next_suite.is_empty() => {
            sift_study::experiments::next_windows::suite::run_next_suite(&args)
                .map_err(|error| error.to_string())
        }
        Command::Bench {
            benchmark: Benchmark::Index(args),
        } => sift_bench::index::run_from_args(
            &args,
            &mut sift_study::engines::index::SiftIndexEngine::open_boxed,
        )
        .map(|_rows| ())
        .map_err(|error| error.to_string()),
        Command::Bench {
            benchmark: Benchmark::Vinyl(args),
        } => sift_study::experiments::vinyl::bench::run(&args, &mut std::io::stdout().lock())
            .map(|_results| ())
            .map_err(|error| error.to_string()),
        Command::Bench {
            benchmark: Benchmark::DiffIndex(args),
        } => sift_study::experiments::diff_index::bench::run(&args, &mut std::io::stdout().lock())
            .map(|_report| ())
            .map_err(|error| error.to_string()),
        Command::Bench {
            benchmark: Benchmark::MachineNoise(args),
        } => sift_bench::noise::hiccup::run(&args, &mut std::io::stdout().lock())
            .map(|_runs| ())
            .map_err(|error| error.to_string()),
        Command::Bench {
            benchmark: Benchmark::Cluster(args),
        } => cluster_bench::run(&args),
        Command::Generate {
            data_set: DataSet::Tweets(args),
        } => sift_workload::cli::generate_tweets_command(&args)
            .map(|_summary| ())
            .map_err(|error| error.to_string()),
        Command::Import(args) => docs::import(&args),
        Command::Index { command } => docs::index(&command),
        Command::Get(args) => docs::get(&args),
        Command::Put(args) => docs::put(&args),
        Command::Delete(args) => docs::delete(&args),
        Command::Lookup(args) => docs::lookup(&args),
        Command::Range(args) => docs::range(&args),
        Command::Within(args) => docs::within(&args),
        Command::Stats(args) => docs::stats(&args),
        Command::Study(args) => study::study(&args),
        Command::Advise(args) => advise::run(&args),
        Command::Serve(args) => serve::serve(&args),
        Command::Node(args) => cluster::node(&args),
        Command::Cluster { command } => cluster::run(&command),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("sift: error: {error}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn command_line_is_well_formed() {
        Cli::command().debug_assert();
    }

    #[test]
    fn parses_bench_kv() {
        let cli =
            Cli::try_parse_from(["sift", "bench", "kv", "--ops", "readseq", "--n", "10"]).unwrap();
        let Command::Bench {
            benchmark: Benchmark::Kv(args),
        } = cli.command
        else {
            panic!("not bench kv");
        };
        assert_eq!(args.n, 10);
        assert!(Cli::try_parse_from(["sift", "bench"]).is_err());
        assert!(Cli::try_parse_from(["sift", "bench", "kv", "--bogus"]).is_err());
    }

    #[test]
    fn parses_generate_tweets() {
        let cli = Cli::try_parse_from([
            "sift", "generate", "tweets", "--n", "5", "--seed", "7", "--out", "t.jsonl",
        ])
        .unwrap();
        let Command::Generate {
            data_set: DataSet::Tweets(args),
        } = cli.command
        else {
            panic!("not generate tweets");
        };
        assert_eq!((args.n, args.seed), (5, 7));
        assert!(Cli::try_parse_from(["sift", "generate", "tweets"]).is_err());
    }
}
