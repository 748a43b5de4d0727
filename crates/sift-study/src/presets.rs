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

/// The engine settings for a database of about `document_bytes` bytes of JSON: the memtable
/// a 24th of it as a power of two between 512 KiB and 4 MiB (LevelDB's default, the paper's),
/// level 1 two and a half memtables and table files half of one (LevelDB's 4 MB, 10 MB and
/// 2 MB). Every size then gets the same shape — a few level-0 files, a full level 1 and most of
/// the data in level 2 — instead of a tiny run fitting in level 1 and a large one growing
/// levels the small one never has. No block cache (as in the paper), snappy.
pub fn engine_for(document_bytes: u64) -> EngineSettings {
    const MIN: u64 = 512 << 10;
    const MAX: u64 = 4 << 20;
    let target = (document_bytes / 24).clamp(MIN, MAX);
    let memtable = 1_u64 << target.ilog2();
    EngineSettings {
        memtable_bytes: memtable as usize,
        level1_bytes: memtable * 5 / 2,
        table_file_bytes: memtable / 2,
        block_cache_bytes: 0,
        bloom_bits_per_key: 10,
        compression: "snappy".to_owned(),
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
    /// ... or once the 95% confidence interval of its median is within this fraction of the
    /// median, after at least `cell_samples_min` queries.
    pub cell_precision: f64,
    pub cell_samples_min: usize,
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
    /// Experiment 7 (Diff-Index): seconds of each phase and load step, and whether it runs
    /// three short steps once (the tiny preset) instead of five steps twice.
    pub diff_index_phase_seconds: f64,
    pub diff_index_short: bool,
    /// Experiment 7: documents (about 200 bytes each) loaded before the update load. Its claims
    /// are about the update path under a steady load, not the tree's size.
    pub diff_index_documents: u64,
    /// Exponents of the Zipf distributions of NEXT §6.5's skew suite (beside uniform).
    pub next_zipf_exponents: Vec<f64>,
    /// Fractions of the sizes above at which the experiments also run, smallest first, to
    /// show how each verdict changes with scale (1.0, the full size, is always run last).
    pub scale_fractions: Vec<f64>,
    /// The experiments (`ExperimentId::id`) run at every fraction; empty: all of them. The
    /// others run at the full size only.
    pub scaled_experiments: Vec<String>,
}

impl Sizes {
    /// Whether experiment `id` runs at every fraction of the sweep (else at the full size only).
    pub fn sweeps(&self, id: &str) -> bool {
        self.scaled_experiments.is_empty() || self.scaled_experiments.iter().any(|e| e == id)
    }

    /// These sizes with every data size (loads, preloads, mixed operations, keys) multiplied
    /// by `fraction`; query counts and time caps stay, so cells are measured as precisely.
    /// The result has one size (no sweep of its own).
    pub fn scaled(&self, fraction: f64) -> Sizes {
        let scale = |value: u64| ((value as f64 * fraction).round() as u64).max(10);
        Sizes {
            documents: scale(self.documents),
            mixed_preload: scale(self.mixed_preload),
            mixed_operations: scale(self.mixed_operations),
            sweep_documents: scale(self.sweep_documents),
            vinyl_keys: scale(self.vinyl_keys),
            diff_index_documents: scale(self.diff_index_documents),
            next_documents: scale(self.next_documents),
            scale_fractions: vec![1.0],
            scaled_experiments: Vec::new(),
            ..self.clone()
        }
    }
}

/// The sizes of a preset; `documents` overrides the load size (and scales the other data
/// sizes with it). The engine settings follow the data ([`engine_for`]).
pub fn preset_sizes(preset: Preset, documents: Option<u64>) -> Sizes {
    let mut sizes = match preset {
        Preset::Tiny => Sizes {
            documents: 2_000,
            slices: 5,
            gets: 200,
            lookups: 20,
            range_lookups: 8,
            repetitions: 2,
            cell_seconds_max: 0.25,
            cell_precision: 0.1,
            cell_samples_min: 10,
            mixed_preload: 2_000,
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
            diff_index_phase_seconds: 0.125,
            diff_index_documents: 2_000,
            diff_index_short: true,
            next_zipf_exponents: vec![1.0],
            scale_fractions: vec![0.5, 1.0],
            scaled_experiments: Vec::new(),
        },
        // Sized so that the 11 default configurations finish within 5 minutes on an idle
        // 2-core machine: experiments 1-3 share one load per configuration and attribute
        // (`experiments::shared`), query cells stop when their median is known to 5%.
        Preset::Quick => Sizes {
            documents: 200_000,
            slices: 10,
            gets: 2_000,
            lookups: 300,
            range_lookups: 100,
            repetitions: 3,
            cell_seconds_max: 0.1,
            cell_precision: 0.1,
            cell_samples_min: 30,
            mixed_preload: 200_000,
            mixed_operations: 10_000,
            sweep_documents: 200_000,
            sweep_queries: 300,
            bloom_bits_per_key: vec![0, 10, 100],
            thread_counts: vec![1, 4],
            vinyl_keys: 200_000,
            vinyl_seconds: 5.0,
            vinyl_interval_seconds: 0.5,
            vinyl_threads: 4,
            vinyl_batch_max: 500,
            vinyl_disk_bound: false,
            next_documents: 300_000,
            next_queries: 60,
            diff_index_phase_seconds: 0.6,
            diff_index_documents: 20_000,
            diff_index_short: false,
            // The most skewed of the paper's three: the quick budget has room for one.
            next_zipf_exponents: vec![1.0],
            scale_fractions: vec![0.1, 1.0],
            // Experiments 1-3 at a tenth of the size cost about 25 s; experiments 4-7 at a
            // tenth would take the run past 5 minutes (they cost 45 s more, measured).
            scaled_experiments: ["static", "queries", "mixed"].map(str::to_owned).to_vec(),
        },
        Preset::Paper => Sizes {
            documents: 500_000,
            slices: 20,
            gets: 100_000,
            lookups: 5_000,
            range_lookups: 2_000,
            repetitions: 3,
            cell_seconds_max: 5.0,
            cell_precision: 0.02,
            cell_samples_min: 200,
            mixed_preload: 500_000,
            mixed_operations: 1_000_000,
            sweep_documents: 500_000,
            sweep_queries: 5_000,
            bloom_bits_per_key: vec![0, 5, 10, 20, 50, 100],
            thread_counts: vec![1, 2, 3, 4],
            vinyl_keys: 1_000_000,
            vinyl_seconds: 60.0,
            vinyl_interval_seconds: 1.0,
            vinyl_threads: 4,
            vinyl_batch_max: 500,
            vinyl_disk_bound: true,
            next_documents: 500_000,
            next_queries: 300,
            diff_index_phase_seconds: 5.0,
            diff_index_documents: 250_000,
            diff_index_short: false,
            next_zipf_exponents: vec![0.5, 0.8, 1.0],
            scale_fractions: vec![0.1, 1.0 / 3.0, 1.0],
            scaled_experiments: Vec::new(),
        },
    };
    if let Some(documents) = documents {
        let documents = documents.max(10);
        let fraction = documents as f64 / sizes.documents as f64;
        let fractions = sizes.scale_fractions.clone();
        let scaled_experiments = sizes.scaled_experiments.clone();
        sizes = sizes.scaled(fraction);
        sizes.documents = documents;
        sizes.scale_fractions = fractions;
        sizes.scaled_experiments = scaled_experiments;
    }
    sizes
}

/// Configurations the quick preset's sizes are made for (the default set); with more, it
/// shrinks its phases so the run stays within its time budget.
pub const QUICK_CONFIGURATIONS: usize = 11;

/// Shrinks the quick preset's phases when `known_configurations` exceed
/// [`QUICK_CONFIGURATIONS`] (the time of a run grows with the configurations measured).
pub fn fit_quick_budget(sizes: &mut Sizes, known_configurations: usize) -> Option<String> {
    if known_configurations <= QUICK_CONFIGURATIONS {
        return None;
    }
    let fraction = QUICK_CONFIGURATIONS as f64 / known_configurations as f64;
    let fractions = sizes.scale_fractions.clone();
    let scaled_experiments = sizes.scaled_experiments.clone();
    *sizes = sizes.scaled(fraction);
    sizes.scale_fractions = fractions;
    sizes.scaled_experiments = scaled_experiments;
    Some(format!(
        "quick preset: {known_configurations} configurations instead of \
         {QUICK_CONFIGURATIONS}, so every load and mixed run is {:.0}% of its usual size to \
         stay within 5 minutes",
        100.0 * fraction
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
             instead of {} per index; each query measurement stops once its median is known to \
             {}% at 95% confidence (after at least {} queries), or after {} s",
            sizes.gets,
            table7::STATIC_GETS,
            sizes.lookups,
            table7::STATIC_LOOKUPS_PER_INDEX,
            sizes.range_lookups,
            table7::STATIC_RANGE_LOOKUPS_PER_INDEX,
            sizes.cell_precision * 100.0,
            sizes.cell_samples_min,
            sizes.cell_seconds_max
        ),
        "experiments 1-4 share their loads: each configuration and attribute is loaded once \
         (timed, by experiment 1), experiment 2 queries those databases, experiment 3 starts \
         each mixed workload from a copy of the configuration's UserID database and \
         experiment 4 compares its other settings with it"
            .to_owned(),
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
             {} instead of Table 8's 20–1000 (on primary keys, not on secondary values) on \
             Embedded and Lazy, compression off on the four variants; the thread sweep queries \
             experiment 1's databases and loads a twentieth of the documents per thread count",
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
            "NEXT §6 (experiment 5): {} documents per database instead of 33 million tweets; up \
             to {} queries per window and repetition instead of 1000; skew: uniform and Zipf {} \
             (the paper: 0.5, 0.8, 1.0)",
            sizes.next_documents,
            sizes.next_queries,
            sizes
                .next_zipf_exponents
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(", ")
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
            let sizes = preset_sizes(preset, None);
            assert_eq!(sizes.scale_fractions.last(), Some(&1.0), "{preset}");
            assert!(sizes.scale_fractions.windows(2).all(|w| w[0] < w[1]));
        }
        assert!("huge".parse::<Preset>().is_err());
        let tiny = preset_sizes(Preset::Tiny, None);
        let quick = preset_sizes(Preset::Quick, None);
        assert!(tiny.documents < quick.documents);
        assert!(quick.documents >= 200_000 && quick.next_documents >= 300_000);
        let custom = preset_sizes(Preset::Quick, Some(500));
        assert_eq!(
            (
                custom.documents,
                custom.mixed_preload,
                custom.next_documents
            ),
            (500, 500, 750)
        );
        let tenth = quick.scaled(0.1);
        assert_eq!((tenth.documents, tenth.lookups), (20_000, quick.lookups));
    }

    #[test]
    fn engine_settings_follow_the_data() {
        let small = engine_for(2_000 * 550);
        let medium = engine_for(66_000 * 550);
        let large = engine_for(200_000 * 550);
        assert_eq!(small.memtable_bytes, 512 << 10, "clamped below");
        assert_eq!(medium.memtable_bytes, 1 << 20);
        assert_eq!(large.memtable_bytes, 4 << 20);
        assert_eq!(
            engine_for(u64::MAX / 2).memtable_bytes,
            4 << 20,
            "clamped above"
        );
        assert_eq!(
            (large.level1_bytes, large.table_file_bytes),
            (10 << 20, 2 << 20),
            "LevelDB's proportions"
        );
    }
}
