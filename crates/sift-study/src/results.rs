//! The study's results as written to `results.json` (schema: `docs/study-results.schema.json`):
//! the machine, the exact configuration, and per experiment every measurement with its unit,
//! the paper's claims with this run's verdicts, and the figures the report draws.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Version of the `results.json` layout; bump when a field changes meaning.
pub const SCHEMA_VERSION: u32 = 2;

/// Everything a run produced.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StudyResults {
    pub schema_version: u32,
    /// "sift study".
    pub tool: String,
    pub machine: MachineInfo,
    pub configuration: StudyConfiguration,
    /// In experiment-number order; an experiment not run (yet) is absent.
    pub experiments: Vec<ExperimentResult>,
    /// The recommendation table, computed from experiments 1–3 of this file.
    pub recommendations: Vec<Recommendation>,
}

/// Where the numbers were taken.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MachineInfo {
    pub cpu_count: usize,
    /// `std::env::consts::OS` and, where readable, the kernel release.
    pub os: String,
    pub arch: String,
    /// `rustc --version` when rustc is on the PATH.
    pub rustc_version: Option<String>,
    /// The sift crates' version.
    pub sift_version: String,
    /// `git rev-parse HEAD` in the current directory, when it is a git checkout.
    pub git_commit: Option<String>,
    /// When the run started, RFC 3339 UTC.
    pub date_utc: String,
}

/// What was run, exactly.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StudyConfiguration {
    /// tiny, quick, paper.
    pub preset: String,
    pub seed: u64,
    /// The data: generated tweets or the user's file.
    pub data: DataDescription,
    /// Index configurations (`kind[:maintenance]`) in the order given; colours follow it.
    pub index_configurations: Vec<ConfigurationInfo>,
    /// Sizes of every phase.
    pub sizes: BTreeMap<String, serde_json::Value>,
    /// Engine options of every database the study opens (experiment 4 varies some).
    pub engine: BTreeMap<String, serde_json::Value>,
    /// What is smaller than in the paper, and by how much.
    pub scaled_down: Vec<String>,
    /// Two runs whose fingerprints match measured the same thing (resume merges only those).
    pub fingerprint: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DataDescription {
    /// "tweets" (the LevelDB++ generator) or "file".
    pub source: String,
    pub path: Option<String>,
    pub primary_key: String,
    /// The indexed attributes: the role they play (UserID / CreationTime slot), path, type.
    pub attributes: Vec<AttributeDescription>,
    /// A file: the documents read from it (the whole file, or as many as the preset's largest
    /// load when it has more).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub documents: Option<u64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AttributeDescription {
    pub path: String,
    /// int, time.
    pub value_type: String,
    /// The paper's attribute this one stands for: UserID or CreationTime.
    pub role: String,
    /// Unit of range widths on it: "users"/"values" or "minutes".
    pub range_unit: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ConfigurationInfo {
    /// `kind[:maintenance]` as given.
    pub name: String,
    pub kind: String,
    pub maintenance: Option<String>,
    /// False when this build does not know the kind or maintenance (not measured).
    pub known: bool,
    pub note: String,
    /// The colour of the configuration in every plot.
    pub colour: String,
}

/// One experiment's outcome.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ExperimentResult {
    /// static, queries, mixed, bloom-compression, next, vinyl, diff-index.
    pub id: String,
    pub number: u32,
    pub title: String,
    /// "measured", "partial" (some configurations could not be measured) or "not-measured".
    pub status: String,
    /// Why not measured / what was left out.
    pub note: String,
    /// What the paper measured and found.
    pub paper: String,
    /// What Sift measured, in words.
    pub method: String,
    /// Wall-clock time of the experiment, seconds.
    pub duration_s: f64,
    pub measurements: Vec<Measurement>,
    pub verdicts: Vec<Verdict>,
    /// Figures of this experiment's section of the report.
    pub figures: Vec<FigureInfo>,
    /// The experiment at each size of the preset's scale sweep, smallest first; the last is
    /// the full size, whose measurements and verdicts are the fields above.
    #[serde(default)]
    pub scales: Vec<ScaleRun>,
}

/// One size of an experiment's scale sweep: its verdicts, the engine settings and the shape
/// of the LSM-trees its queries met.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ScaleRun {
    /// Fraction of the preset's data sizes (1 for the full size).
    pub fraction: f64,
    /// Documents per database of the experiment's main load (keys for Vinyl).
    pub documents: u64,
    /// What `documents` counts: "documents" or "keys".
    pub unit: String,
    /// Engine settings of the databases at this size.
    pub engine: BTreeMap<String, serde_json::Value>,
    pub duration_s: f64,
    pub status: String,
    pub verdicts: Vec<Verdict>,
    /// Table files per level of each database, as the measurements found it.
    pub shapes: Vec<DatabaseShape>,
}

/// Table files per level (level 0 first) of each tree of one database.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DatabaseShape {
    /// Configuration, attribute or case, as the experiment names its databases.
    pub database: String,
    /// `data`, `index <name>`: files per level.
    pub trees: BTreeMap<String, Vec<usize>>,
}

/// One number. Fields that do not apply are absent (`null`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct Measurement {
    /// `kind:maintenance`, or "none" for the baseline without a secondary index.
    pub configuration: String,
    /// Path of the indexed/queried attribute.
    pub attribute: Option<String>,
    /// PUT, GET, LOOKUP, RANGELOOKUP, UPDATE, ALL.
    pub op: Option<String>,
    /// static, write-heavy, read-heavy, update-heavy.
    pub workload: Option<String>,
    /// "10", "100", "all".
    pub top_k: Option<String>,
    /// RANGELOOKUP width in the attribute's range unit.
    pub selectivity: Option<u64>,
    /// 1-based slice (interval) of a phase; absent for the whole phase.
    pub slice: Option<u32>,
    /// 1-based repetition; absent for all repetitions together.
    pub repetition: Option<u32>,
    /// Tree group of a size: data, index, other.
    pub tree: Option<String>,
    pub bloom_bits_per_key: Option<u32>,
    /// none, snappy.
    pub compression: Option<String>,
    /// Experiment 5: the part of NEXT §6 (windows, geo, delta, skew, two-indexes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub suite: Option<String>,
    /// Experiment 5: small, medium or large query window.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub window: Option<String>,
    /// Experiment 5: distribution of the indexed values (uniform, zipf-S).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub distribution: Option<String>,
    /// Experiment 5: δ of NEXT's value-aware split (absent: no split).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub split_delta: Option<f64>,
    /// What is measured, e.g. `latency_p50`, `throughput`, `bytes_on_disk`.
    pub metric: String,
    /// us, ops/s, bytes, blocks, hits, documents.
    pub unit: String,
    pub value: f64,
    /// Operations behind the value.
    pub count: Option<u64>,
    /// Client threads, where an experiment varies or sets them (experiment 4's thread sweep,
    /// experiment 6); absent otherwise (one thread).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub threads: Option<u32>,
}

/// A paper's claim and what this run says about it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Verdict {
    pub claim: String,
    /// Paper and place, e.g. "LevelDB++ §5.2.1, Fig. 10a".
    pub source: String,
    /// "reproduced", "differs" or "not-measured".
    pub outcome: String,
    /// The deciding numbers, in words.
    pub evidence: String,
    /// The deciding numbers by name.
    pub numbers: BTreeMap<String, f64>,
    /// How the outcome changes with the data size, over the sizes of `ExperimentResult::
    /// scales`: "reproduced at every size", "reproduced from 20000 documents on", …
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub across_sizes: Option<String>,
}

/// A figure of the report: the page has `<figure id="fig-{id}">` with one non-empty `<svg>`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FigureInfo {
    pub id: String,
    pub title: String,
}

/// One row of the recommendation table.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Recommendation {
    pub attribute: String,
    /// A Table 7b mix, or a static query shape.
    pub workload: String,
    /// The configuration with the lowest cost, or absent when nothing was measured.
    pub best: Option<String>,
    /// Its cost, microseconds per operation.
    pub cost_us_per_op: Option<f64>,
    pub runner_up: Option<String>,
    pub runner_up_cost_us_per_op: Option<f64>,
    /// "measured (experiment 3)" or "model: ... from experiments 1–2".
    pub basis: String,
    pub why: String,
}

impl Measurement {
    /// A measurement of `metric` in `unit` for `configuration`; set the labels that apply.
    pub fn new(configuration: &str, metric: &str, unit: &str, value: f64) -> Measurement {
        Measurement {
            configuration: configuration.to_owned(),
            metric: metric.to_owned(),
            unit: unit.to_owned(),
            value,
            ..Measurement::default()
        }
    }
}
