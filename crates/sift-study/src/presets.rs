//! Presets of the study: how many documents and operations each phase uses and the engine
//! options scaled with them, so that the LSM-tree has several levels even on a small run (the
//! paper loaded 100 GB into LevelDB with 4 MB memtables; a 5-minute run loads tens of MB).

use serde::Serialize;
use sift_bench::index::BenchError;
use sift_lsm::Compression;
use std::fmt;
use std::str::FromStr;

/// A named size of the study.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Preset {
    /// Seconds: CI smoke tests.
    Tiny,
    /// At most 5 minutes on a 2-core machine (the default).
    Quick,
    /// Closer to the papers' scale: 500,000 documents per load, 1 M mixed operations per run,
    /// the Vinyl benchmark disk-bound with 1 M keys. Not run on the 2-core development machine;
    /// estimated from the tiny preset's per-operation costs at 2–3 hours with the 11 default
    /// configurations (experiment 3's 33 runs of 1.25 M operations ≈ 40 min, experiment 4's 77
    /// loads of 200,000 documents plus the thread sweep ≈ 45 min, experiments 1–2 ≈ 40 min),
    /// more if PUTs slow down as the tree grows deeper.
    Paper,
}

impl Preset {
    pub fn name(self) -> &'static str {
        match self {
            Preset::Tiny => "tiny",
            Preset::Quick => "quick",
            Preset::Paper => "paper",
        }
    }
}

impl fmt::Display for Preset {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Preset {
    type Err = BenchError;
    fn from_str(text: &str) -> Result<Preset, BenchError> {
        match text {
            "tiny" => Ok(Preset::Tiny),
            "quick" => Ok(Preset::Quick),
            "paper" => Ok(Preset::Paper),
            other => Err(BenchError::new(format!(
                "unknown preset {other:?}: expected tiny, quick or paper"
            ))),
        }
    }
}

/// Engine options of the study's databases.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct EngineSettings {
    pub memtable_bytes: usize,
    pub level1_bytes: u64,
    pub table_file_bytes: u64,
    /// 0: no block cache, as in the paper (reads go through the OS page cache).
    pub block_cache_bytes: usize,
    pub bloom_bits_per_key: u32,
    /// "snappy" (the paper's default) or "none".
    pub compression: String,
}

impl EngineSettings {
    pub fn compression(&self) -> Compression {
        if self.compression == "none" {
            Compression::None
        } else {
            Compression::Snappy
        }
    }

    /// The database options for these settings.
    pub fn database_options(&self) -> sift_index::DatabaseOptions {
        let mut options = sift_index::DatabaseOptions::default();
        let engine = &mut options.engine;
        engine.memtable_bytes_max = self.memtable_bytes;
        engine.level1_bytes_max = self.level1_bytes;
        engine.table_file_bytes_target = self.table_file_bytes;
        engine.block_cache_bytes = self.block_cache_bytes;
        engine.bloom_bits_per_key = self.bloom_bits_per_key;
        engine.compression = self.compression();
        options
    }
}

/// Sizes of every phase.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Sizes {
    /// Documents loaded per configuration and attribute (experiments 1 and 2).
    pub documents: u64,
    /// Slices of the load (one PUT-throughput point each).
    pub slices: u32,
    pub gets: u64,
    /// LOOKUPs per attribute and top-K, per repetition.
    pub lookups: u64,
    /// RANGELOOKUPs per attribute, selectivity and top-K, per repetition.
    pub range_lookups: u64,
    /// Repetitions of each query measurement (after one warm-up pass over a tenth of it).
    pub repetitions: u32,
    /// A query measurement (all repetitions) stops after this many seconds.
    pub cell_seconds_max: f64,
    /// Experiment 3: documents loaded before each mixed workload, then operations.
    pub mixed_preload: u64,
    pub mixed_operations: u64,
    /// Experiment 4: documents per load, LOOKUPs and GETs per point.
    pub sweep_documents: u64,
    pub sweep_queries: u64,
    pub bloom_bits_per_key: Vec<u32>,
    /// Experiment 4: client threads of the load and query throughput sweep (LevelDB++ App.
    /// C.3); each loads half of `sweep_documents` into a fresh database.
    pub thread_counts: Vec<u32>,
    /// Experiment 6 (Vinyl microbenchmark): keys 1..=keys (all preloaded), measured seconds
    /// per scheme, interval of the rate plot, client threads, statements per batch at most,
    /// and whether tables are read with O_DIRECT through a 1 MiB cache (the disk-bound case).
    pub vinyl_keys: u64,
    pub vinyl_seconds: f64,
    pub vinyl_interval_seconds: f64,
    pub vinyl_threads: usize,
    pub vinyl_batch_max: usize,
    pub vinyl_disk_bound: bool,
    /// Experiment 5 (NEXT §6): documents per database, and queries per window and repetition.
    pub next_documents: u64,
    pub next_queries: u64,
}

/// The sizes and engine settings of a preset; `documents` overrides the load size (and scales
/// the other phases with it).
pub fn preset_sizes(preset: Preset, documents: Option<u64>) -> (Sizes, EngineSettings) {
    let (mut sizes, engine) = match preset {
        Preset::Tiny => (
            Sizes {
                documents: 2_000,
                slices: 5,
                gets: 200,
                lookups: 20,
                range_lookups: 8,
                repetitions: 2,
                cell_seconds_max: 0.25,
                mixed_preload: 1_000,
                mixed_operations: 2_000,
                sweep_documents: 1_000,
                sweep_queries: 50,
                bloom_bits_per_key: vec![0, 10, 50],
                thread_counts: vec![1, 2, 3, 4],
                vinyl_keys: 2_000,
                vinyl_seconds: 0.8,
                vinyl_interval_seconds: 0.1,
                vinyl_threads: 4,
                vinyl_batch_max: 100,
                vinyl_disk_bound: false,
                next_documents: 2_000,
                next_queries: 10,
            },
            EngineSettings {
                // Large enough that a load flushes only a few times: each flush costs several
                // fsyncs, which dominate a tiny run on a slow disk.
                memtable_bytes: 512 << 10,
                level1_bytes: 2 << 20,
                table_file_bytes: 512 << 10,
                block_cache_bytes: 0,
                bloom_bits_per_key: 10,
                compression: "snappy".to_owned(),
            },
        ),
        Preset::Quick => (
            Sizes {
                documents: 40_000,
                slices: 10,
                gets: 2_000,
                lookups: 200,
                range_lookups: 40,
                repetitions: 3,
                cell_seconds_max: 0.6,
                mixed_preload: 20_000,
                mixed_operations: 30_000,
                sweep_documents: 20_000,
                sweep_queries: 300,
                bloom_bits_per_key: vec![0, 5, 10, 20, 100],
                thread_counts: vec![1, 2, 3, 4],
                vinyl_keys: 30_000,
                vinyl_seconds: 6.0,
                vinyl_interval_seconds: 0.5,
                vinyl_threads: 4,
                vinyl_batch_max: 500,
                vinyl_disk_bound: false,
                next_documents: 20_000,
                next_queries: 40,
            },
            EngineSettings {
                memtable_bytes: 1 << 20,
                level1_bytes: 4 << 20,
                table_file_bytes: 1 << 20,
                block_cache_bytes: 0,
                bloom_bits_per_key: 10,
                compression: "snappy".to_owned(),
            },
        ),
        Preset::Paper => (
            Sizes {
                documents: 500_000,
                slices: 20,
                gets: 100_000,
                lookups: 5_000,
                range_lookups: 2_000,
                repetitions: 3,
                cell_seconds_max: 5.0,
                mixed_preload: 250_000,
                mixed_operations: 1_000_000,
                sweep_documents: 200_000,
                sweep_queries: 5_000,
                bloom_bits_per_key: vec![0, 5, 10, 20, 50, 100],
                thread_counts: vec![1, 2, 3, 4],
                vinyl_keys: 1_000_000,
                vinyl_seconds: 60.0,
                vinyl_interval_seconds: 1.0,
                vinyl_threads: 4,
                vinyl_batch_max: 500,
                vinyl_disk_bound: true,
                next_documents: 200_000,
                next_queries: 300,
            },
            EngineSettings {
                memtable_bytes: 4 << 20,
                level1_bytes: 10 << 20,
                table_file_bytes: 2 << 20,
                block_cache_bytes: 0,
                bloom_bits_per_key: 10,
                compression: "snappy".to_owned(),
            },
        ),
    };
    if let Some(documents) = documents {
        let documents = documents.max(10);
        sizes.documents = documents;
        sizes.mixed_preload = (documents / 2).max(10);
        sizes.mixed_operations = documents;
        sizes.sweep_documents = (documents / 2).max(10);
        sizes.next_documents = (documents / 2).max(10);
    }
    (sizes, engine)
}

/// Configurations the quick preset's sizes are made for; with more, it shrinks its phases so
/// the run stays within its time budget.
pub const QUICK_CONFIGURATIONS: usize = 6;

/// Shrinks the quick preset's phases when `known_configurations` exceed
/// [`QUICK_CONFIGURATIONS`] (the time of a run grows with the configurations measured).
pub fn fit_quick_budget(sizes: &mut Sizes, known_configurations: usize) -> Option<String> {
    if known_configurations <= QUICK_CONFIGURATIONS {
        return None;
    }
    let scale =
        |value: u64| (value * QUICK_CONFIGURATIONS as u64 / known_configurations as u64).max(10);
    sizes.documents = scale(sizes.documents);
    sizes.mixed_preload = scale(sizes.mixed_preload);
    sizes.mixed_operations = scale(sizes.mixed_operations);
    sizes.sweep_documents = scale(sizes.sweep_documents);
    sizes.next_documents = scale(sizes.next_documents);
    Some(format!(
        "quick preset: {known_configurations} configurations instead of {QUICK_CONFIGURATIONS},          so every load and mixed run is {:.0}% of its usual size to stay within 5 minutes",
        100.0 * QUICK_CONFIGURATIONS as f64 / known_configurations as f64
    ))
}

/// What a preset scales down relative to the paper (LevelDB++ Table 7 and §5).
pub fn scaled_down_notes(sizes: &Sizes, engine: &EngineSettings) -> Vec<String> {
    use sift_workload::table7;
    let ratio = |paper: u64, here: u64| paper as f64 / here.max(1) as f64;
    vec![
        format!(
            "documents loaded: {} instead of {} ({:.0}× fewer)",
            sizes.documents,
            table7::STATIC_PUTS,
            ratio(table7::STATIC_PUTS, sizes.documents)
        ),
        format!(
            "GETs: {} instead of {}; LOOKUPs: {} per attribute, top-K and repetition instead of \
             {} per index; RANGELOOKUPs: {} per attribute, selectivity, top-K and repetition \
             instead of {} per index; each query measurement stops after {} s",
            sizes.gets,
            table7::STATIC_GETS,
            sizes.lookups,
            table7::STATIC_LOOKUPS_PER_INDEX,
            sizes.range_lookups,
            table7::STATIC_RANGE_LOOKUPS_PER_INDEX,
            sizes.cell_seconds_max
        ),
        format!(
            "mixed workloads: {} documents then {} operations instead of {} operations",
            sizes.mixed_preload,
            sizes.mixed_operations,
            table7::MIXED_OPERATIONS
        ),
        format!(
            "engine scaled with the data: memtable {} KiB (LevelDB's default 4096 KiB), level 1 \
             {} KiB, table files {} KiB; no block cache (as in the paper), snappy compression",
            engine.memtable_bytes >> 10,
            engine.level1_bytes >> 10,
            engine.table_file_bytes >> 10
        ),
        format!(
            "bloom and compression sweep (experiment 4): {} documents per load instead of 20 \
             million tweets, {} top-10 queries per cell instead of 200,000 LOOKUPs, bits per key \
             {} instead of Table 8's 20–1000 (on primary keys, not on secondary values); the \
             thread sweep loads half as many documents per database",
            sizes.sweep_documents,
            sizes.sweep_queries,
            sizes
                .bloom_bits_per_key
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        ),
        format!(
            "NEXT §6 (experiment 5): {} documents per database instead of 33 million tweets; {} \
             queries per window and repetition instead of 1000",
            sizes.next_documents, sizes.next_queries
        ),
        "loads are not repeated (their spread is shown over the load's slices); queries are \
         repeated after a warm-up"
            .to_owned(),
        format!(
            "one client thread, except experiment 4's thread sweep ({} threads; App. C.3 varied the number of \
             concurrent query threads on its server) and experiment 6 ({} threads, as the Vinyl paper's 4 \
             clients); this machine has {} CPU cores, so more threads than cores add no \
             throughput",
            sizes
                .thread_counts
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(", "),
            sizes.vinyl_threads,
            std::thread::available_parallelism().map_or(1, std::num::NonZero::get)
        ),
        format!(
            "Vinyl microbenchmark (experiment 6): {} keys instead of 1,000,000, {} s per scheme \
             instead of the paper's run, batches of 1–{} statements (paper: 1–500), memtable {} \
             KiB instead of Tarantool's 128 MB memory level, {} (the paper's 5× was disk-bound: \
             hidden reads went to an SSD)",
            sizes.vinyl_keys,
            sizes.vinyl_seconds,
            sizes.vinyl_batch_max,
            engine.memtable_bytes >> 10,
            if sizes.vinyl_disk_bound {
                "tables read with O_DIRECT through a 1 MiB cache (disk-bound)"
            } else {
                "tables read through the OS page cache (not disk-bound)"
            }
        ),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn presets_parse_and_scale() {
        for preset in [Preset::Tiny, Preset::Quick, Preset::Paper] {
            assert_eq!(preset.name().parse::<Preset>().unwrap(), preset);
        }
        assert!("huge".parse::<Preset>().is_err());
        let (tiny, _) = preset_sizes(Preset::Tiny, None);
        let (quick, _) = preset_sizes(Preset::Quick, None);
        assert!(tiny.documents < quick.documents);
        let (custom, _) = preset_sizes(Preset::Quick, Some(500));
        assert_eq!(
            (
                custom.documents,
                custom.mixed_preload,
                custom.sweep_documents
            ),
            (500, 250, 250)
        );
    }
}
