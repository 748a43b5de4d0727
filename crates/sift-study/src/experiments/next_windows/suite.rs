//! `sift bench index --next-suite`: NEXT §6's suites run on their own, outside the study, with
//! the index benchmark's options (`sift_bench::index::IndexBenchArgs`).

use super::bench::WindowBenchConfig;
use sift_bench::index::args::write_line;
use sift_bench::index::{BenchError, IndexBenchArgs};
use sift_bench::kv::{settings, BenchDir};

/// The configuration of `--next-suite`.
pub fn window_config(args: &IndexBenchArgs) -> Result<WindowBenchConfig, BenchError> {
    use super::bench::{
        parse_suites, Suite, ValueDistribution, DEFAULT_CONFIGURATIONS, DEFAULT_SPLIT_DELTAS,
    };
    let suites = parse_suites(&args.next_suite)?;
    if args.n == 0 {
        return Err(BenchError::new("--n must be at least 1"));
    }
    if !(args.max_seconds.is_finite() && args.max_seconds > 0.0) {
        return Err(BenchError::new("--max-seconds must be a positive number"));
    }
    let configurations: Vec<String> = if args.window_kinds.is_empty() {
        DEFAULT_CONFIGURATIONS
            .iter()
            .map(|s| (*s).to_owned())
            .collect()
    } else {
        args.window_kinds.clone()
    };
    for configuration in configurations.iter().filter(|c| c.as_str() != "none") {
        let kind = configuration.split(':').next().unwrap_or_default();
        kind.parse::<sift_index::IndexKind>()
            .map_err(|e| BenchError::new(format!("--window-kinds {configuration}: {e}")))?;
    }
    let distributions = if args.distribution.is_empty() {
        if suites.contains(&Suite::Skew) {
            ValueDistribution::PAPER.to_vec()
        } else {
            vec![ValueDistribution::Uniform]
        }
    } else {
        args.distribution
            .iter()
            .map(|text| text.parse())
            .collect::<Result<Vec<_>, _>>()?
    };
    let deltas = args
        .split_delta
        .iter()
        .map(|text| sift_bench::index::parse_split_delta(text))
        .collect::<Result<Vec<_>, _>>()?;
    let (split_deltas, next_split_delta) = if suites.contains(&Suite::Delta) {
        let sweep = if deltas.is_empty() {
            DEFAULT_SPLIT_DELTAS.to_vec()
        } else {
            deltas
        };
        (sweep, None)
    } else {
        if deltas.len() > 1 {
            return Err(BenchError::new(
                "several --split-delta values are a sweep: add `delta` to --next-suite",
            ));
        }
        (Vec::new(), deltas.first().copied().flatten())
    };
    Ok(super::bench::WindowBenchConfig {
        documents: args.n,
        seed: args.seed,
        suites,
        configurations,
        distributions,
        split_deltas,
        next_split_delta,
        queries: args.range_lookups.max(1),
        repetitions: 1,
        seconds_max: args.max_seconds,
    })
}

/// `--next-suite`: NEXT §6 on Sift, rows printed as they finish.
pub fn run_next_suite(args: &IndexBenchArgs) -> Result<(), BenchError> {
    if args.background_cpus.is_some() || args.client_cpus.is_some() {
        return Err(BenchError::new(
            "--background-cpus and --client-cpus pin the LevelDB++ workload's threads; \
             --next-suite does not take them",
        ));
    }
    use super::bench::{run_suites, table_header, table_row};
    let config = window_config(args)?;
    let dir = BenchDir::prepare(args.db.as_deref(), &[])?;
    let cache_bytes = args.cache_bytes.unwrap_or(settings::DEFAULT_CACHE_BYTES);
    let memtable_bytes = args.memtable_bytes;
    let options = || {
        let mut options = sift_index::DatabaseOptions::default();
        options.engine.block_cache_bytes = cache_bytes;
        if let Some(bytes) = memtable_bytes {
            crate::engines::index::scale_engine(&mut options, bytes);
        }
        options
    };
    if !args.json {
        write_line(&format!(
            "NEXT §6 suites [{}]: n {} configurations [{}] distributions [{}] queries per \
             window {} (every match, no top-K) cache_bytes {cache_bytes} memtable_bytes {} seed {}\n\
             windows on score (1..=10^8): small 0.01% = 10^4, medium 0.1% = 10^5, large 1% = \
             10^6 values; on created_at the same fractions of the time span; geo: squares of \
             0.001°, 0.01°, 0.1°; centred on random documents\n\
             latency: time inside Sift's call, per query; blocks: data and index blocks read \
             (cache or disk) per query; δ in score units (ms for created_at)",
            config
                .suites
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(","),
            config.documents,
            config.configurations.join(","),
            config
                .distributions
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(","),
            config.queries,
            memtable_bytes.map_or_else(|| "default".to_owned(), |b| b.to_string()),
            config.seed,
        ))?;
        write_line(&table_header())?;
    }
    let json = args.json;
    let result = run_suites(&config, dir.path(), &options, args.keep, &mut |row| {
        if json {
            let line = serde_json::to_string(row)
                .map_err(|e| BenchError::new(format!("cannot encode a result row: {e}")))?;
            write_line(&line)
        } else {
            write_line(&table_row(row))
        }
    });
    let kept = dir.finish(args.keep)?;
    result?;
    if let (Some(path), false, true) = (kept, json, args.keep || args.db.is_some()) {
        write_line(&format!("databases kept in {}", path.display()))?;
    }
    Ok(())
}
