//! Experiment 5 (NEXT, SIGMOD'25, §6): small, medium and large query windows on a numeric and
//! a geo attribute, the δ sweep of the value-aware split, uniform against Zipf-skewed values,
//! two indexes at once, and the global index's memory against the data size — the cases of
//! `crate::experiments::next_windows::bench` (what `sift bench index --next-suite` runs), at the preset's size.
//!
//! NEXT compared four classes of index; Sift's kinds stand for them: `next` (NEXT), `sst-local`
//! (per-SSTable secondary indexes without a global index: NEXT's "Embedded"), `composite` (its
//! LSM "Standalone") and `memory` (its in-memory "Eager"). The experiment takes, for each of
//! these kinds, the first configuration of the run with that kind (so colours match the other
//! experiments), or the kind with its default maintenance when the run has none.

pub mod bench;
mod jobs;
pub mod report;
pub mod suite;
pub mod verdicts;

use super::{new_result, round, Context, Distribution, ExperimentId};
use crate::data::StudyData;
use crate::presets::EngineSettings;
use crate::results::{ExperimentResult, FigureInfo, Measurement};
use crate::verdict::kind_of;
use crate::BASELINE;
use bench::{
    align_fallbacks, generate, plan, CaseResult, CaseSettings, Documents, QueryOp, Suite, Target,
    TargetFields, ValueDistribution, WindowBenchConfig, DEFAULT_SPLIT_DELTAS, SKEW_SPLIT_DELTA,
};
use sift_bench::index::BenchError;
use std::collections::BTreeMap;

pub const PAPER: &str = "NEXT (SIGMOD'25) §6 loaded 33 million geotagged tweets and 115 million \
OSM buildings into RocksDB with NEXT, an embedded per-SSTable index, a stand-alone LSM index \
(composite keys) and an in-memory eager index, and ran 1000 queries per workload with small, \
medium and large windows (0.001°, 0.01°, 0.1° on coordinates; 10k, 100k, 1000k on UserID; \
Tables 3–4). Findings: for small windows NEXT and the stand-alone indexes beat the embedded \
index (NEXT up to 75% faster on numeric data); for medium windows NEXT beats every other \
technique (15.5% to 84.9% lower latency); the value-aware split δ lowers query latency by up \
to 25% at the cost of a larger global index (§6.4); NEXT beats the stand-alone and embedded \
indexes on range queries for uniform and Zipf (0.5, 0.8, 1.0) values (§6.5); with two indexes \
NEXT's PUT cost stays close to the stand-alone index's (17.1 vs 15.2 µs, Table 5); the global \
index takes a small part of the memory (§6.7).";

/// The engine settings of this experiment: NEXT §6.1's setup — blocks not compressed and a
/// block cache as large as the memtable (64 MB each in the paper) — on the study's sizes.
/// With LevelDB++'s setup (snappy, no cache), decompressing a block per matching document
/// costs more than any index saves, and every index answers a window at the same speed.
pub fn engine_settings(base: &EngineSettings) -> EngineSettings {
    EngineSettings {
        compression: "none".to_owned(),
        block_cache_bytes: base.memtable_bytes,
        ..base.clone()
    }
}

/// The kinds NEXT compared, by Sift's names.
pub const KINDS: [&str; 4] = ["next", "sst-local", "composite", "memory"];

/// NEXT §6 suites as run here: which configurations each one compares.
pub(crate) struct Plan {
    /// The four compared configurations (windows, geo).
    compared: Vec<String>,
    /// next, composite, sst-local (skew: NEXT §6.5 compared NEXT with and without δ, the
    /// stand-alone and the embedded index).
    skew: Vec<String>,
    /// next and composite (NEXT §6.6 compared NEXT with the stand-alone index).
    two: Vec<String>,
}

fn choose(context: &Context<'_>) -> Plan {
    let known = context.known_configurations();
    let pick = |kind: &str| {
        known
            .iter()
            .find(|c| c.kind == kind)
            .map_or_else(|| kind.to_owned(), |c| c.name())
    };
    let compared: Vec<String> = KINDS.iter().map(|kind| pick(kind)).collect();
    let of = |kinds: &[&str]| {
        compared
            .iter()
            .filter(|c| kinds.contains(&kind_of(c)))
            .cloned()
            .collect::<Vec<_>>()
    };
    Plan {
        skew: of(&["next", "composite", "sst-local"]),
        two: of(&["next", "composite"]),
        compared,
    }
}

fn label(distribution: ValueDistribution, delta: Option<f64>) -> String {
    match delta {
        Some(delta) => format!("{distribution}, δ {delta:e}"),
        None => distribution.to_string(),
    }
}

pub fn run(context: &Context<'_>) -> Result<ExperimentResult, BenchError> {
    let sizes = context.sizes;
    let plan_of = choose(context);
    let method = format!(
        "Sift loaded {} LevelDB++ tweets per database, each with an extra integer `score` in \
         1..=10^8 (uniform unless said; the skew suite also draws it from Zipf {}, small \
         values most frequent), into databases with one index of each compared \
         configuration ({}), and measured PUT latency, sizes and the global index, then up to \
         {} queries per window ({} passes after a warm-up tenth; a cell stops once its median \
         is known to {}% at 95% confidence, or after {} s), every match returned. Windows on score are fractions of its domain — small 0.01%, \
         medium 0.1%, large 1% (10^4, 10^5, 10^6 values: NEXT's UserID widths) — and on the \
         tweet's point (`place.coordinates`, `within`) squares of 0.001°, 0.01° and 0.1°, \
         centred on random documents; RANGELOOKUP rows on place.coordinates are these geo \
         windows (selectivity: side in micro-degrees). The δ sweep runs next with δ = {} \
         (score units); skew compares {} and next with δ = {SKEW_SPLIT_DELTA:e}; two indexes \
         ({}) index score and the point together (score and created_at in every \
         configuration when one of them has no geo support). NEXT's 'Embedded' is sst-local \
         here (per-file indexes, no global index), its 'Eager' memory. The engine is set up as \
         NEXT's (§6.1): blocks not compressed and a block cache as large as the memtable (64 MB \
         each in the paper; {} KiB here). Databases are shared between suites where they hold the same data and index: the windows databases also \
         give the uniform skew cells and δ = none, the two-index databases give the geo \
         windows (of {} only: NEXT's spatial claim compares it with the stand-alone index), \
         and δ = {SKEW_SPLIT_DELTA:e} gives the skew \
         suite's uniform split; the δ and skew databases, whose PUT cost no claim uses, are \
         loaded two at a time (their PUT latencies are not reported) and queried one at a \
         time.",
        sizes.next_documents,
        sizes
            .next_zipf_exponents
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join(", "),
        plan_of.compared.join(", "),
        sizes.next_queries,
        sizes.repetitions,
        sizes.cell_precision * 100.0,
        sizes.cell_seconds_max,
        DEFAULT_SPLIT_DELTAS
            .iter()
            .map(|d| d.map_or_else(|| "none".to_owned(), |d| format!("{d:e}")))
            .collect::<Vec<_>>()
            .join(", "),
        plan_of.skew.join(", "),
        plan_of.two.join(", "),
        context.engine.memtable_bytes >> 10,
        plan_of.two.join(" and "),
    );
    let mut result = new_result(ExperimentId::Next, PAPER, &method);
    // On a user's file: its documents, its first attribute for the score and its second (a
    // time) for the second index.
    let user = match context.data {
        StudyData::Tweets { .. } => None,
        StudyData::File { .. } => {
            let Some(user) = user_documents(context) else {
                "not-measured".clone_into(&mut result.status);
                "no document of the file has a value of its first attribute"
                    .clone_into(&mut result.note);
                result.verdicts = verdicts::verdicts(&[]);
                return Ok(result);
            };
            Some(user)
        }
    };
    let fields = user
        .as_ref()
        .map_or_else(TargetFields::tweets, |(fields, _)| fields.clone());
    if let Some((fields, documents)) = &user {
        result.method = format!(
            "On the user's file: Sift loaded its first {} documents into databases with one \
             index of each compared configuration ({}) on {} ({} of them have a value), and \
             measured PUT latency, sizes and the global index, then up to {} queries per \
             window, every match returned. Windows are fractions of the attribute's range \
             ({} wide): small 0.01%, medium 0.1%, large 1%, centred on the values of random \
             documents. The δ sweep runs next with NEXT's δ values scaled to that range; two \
             indexes put {} and {} together. No skew suite (the file's values are what they \
             are) and no geo windows. The engine is set up as NEXT's (§6.1): blocks not \
             compressed and a block cache as large as the memtable.",
            documents.jsons.len(),
            plan_of.compared.join(", "),
            fields.score.0,
            documents.scores.len(),
            sizes.next_queries,
            documents.score_span,
            fields.score.0,
            fields.time
        );
    }
    let seed = match context.data {
        StudyData::Tweets { seed } => *seed,
        StudyData::File { .. } => 0,
    };
    let base = WindowBenchConfig {
        documents: sizes.next_documents,
        seed,
        suites: vec![Suite::Windows],
        configurations: std::iter::once(BASELINE.to_owned())
            .chain(plan_of.compared.iter().cloned())
            .collect(),
        distributions: vec![if user.is_some() {
            ValueDistribution::File
        } else {
            ValueDistribution::Uniform
        }],
        split_deltas: DEFAULT_SPLIT_DELTAS.to_vec(),
        next_split_delta: None,
        queries: sizes.next_queries,
        repetitions: sizes.repetitions,
        seconds_max: sizes.cell_seconds_max,
    };
    let engine = engine_settings(context.engine);
    let options = || engine.database_options();
    let settings = CaseSettings {
        options: &options,
        queries: sizes.next_queries,
        repetitions: sizes.repetitions,
        seconds_max: sizes.cell_seconds_max,
        seed,
        memory_slices: 10,
        precision: sizes.cell_precision,
        samples_min: sizes.cell_samples_min,
        fields: &fields,
    };
    let mut two_cases = plan(&WindowBenchConfig {
        suites: vec![Suite::TwoIndexes],
        configurations: plan_of.two.clone(),
        ..base.clone()
    });
    let skewed: Vec<ValueDistribution> = sizes
        .next_zipf_exponents
        .iter()
        .map(|&exponent| ValueDistribution::Zipf(exponent))
        .collect();
    let mut notes = Vec::new();
    let sweeps = match &user {
        None => {
            let scratch = context.fresh_dir("next-probe")?;
            align_fallbacks(&mut two_cases, scratch.path(), &settings)?;
            drop(scratch);
            jobs::Sweeps::tweets(&skewed)
        }
        Some((fields, documents)) => {
            // The file's two attributes together (no geo attribute in the study's data).
            let second = fields.time != fields.score.0;
            two_cases.retain(|_| second);
            for case in &mut two_cases {
                case.targets = vec![Target::Score, Target::CreationTime];
                case.fallback_targets = None;
            }
            notes.push(
                "on a user's file: no skew suite (its values are what they are) and no geo \
                 windows (the study takes int and time attributes)"
                    .to_owned(),
            );
            if !second {
                notes.push("no two-index suite: the file has one attribute".to_owned());
            }
            // NEXT's δ values are in units of a 10^8 domain: the same fractions of the file's.
            let scale = documents.score_span as f64 / bench::SCORE_MAX as f64;
            jobs::Sweeps {
                deltas: DEFAULT_SPLIT_DELTAS
                    .into_iter()
                    .flatten()
                    .map(|delta| (delta * scale).max(1.0))
                    .collect(),
                skew_delta: SKEW_SPLIT_DELTA * scale,
                skewed: None,
            }
        }
    };
    let jobs = jobs::plan_jobs(&base, &plan_of, two_cases, &sweeps);
    context
        .progress
        .phase("NEXT §6 databases", jobs.len() as u64, "databases");
    let mut documents: Option<Documents> = None;
    let mut position = 0;
    while position < jobs.len() {
        context.check_interrupt()?;
        // Untimed databases of the same value distribution are loaded two at a time.
        let together = if !jobs[position].timed
            && jobs.get(position + 1).is_some_and(|next| {
                !next.timed && next.distribution() == jobs[position].distribution()
            }) {
            2
        } else {
            1
        };
        let group = &jobs[position..position + together];
        position += together;
        let distribution = group[0].distribution();
        if user.is_none()
            && documents
                .as_ref()
                .is_none_or(|d| d.distribution != distribution)
        {
            drop(documents.take());
            documents = Some(generate(sizes.next_documents, seed, distribution)?);
        }
        let Some(documents) = user.as_ref().map(|(_, d)| d).or(documents.as_ref()) else {
            continue;
        };
        let found = jobs::run_group(context, group, documents, &settings)?;
        for (job, outcome) in group.iter().zip(found) {
            let what = format!(
                "{} {} ({})",
                job.case.suite,
                job.case.configuration,
                label(job.case.distribution, job.case.split_delta)
            );
            match outcome {
                Ok(views) => {
                    for view in views {
                        if let Some(note) = &view.note {
                            notes.push(format!("{what}: {note}"));
                        }
                        result.measurements.extend(measurements(&view, &fields));
                    }
                }
                Err(error) => {
                    context.check_interrupt()?;
                    notes.push(format!("{what}: not measured ({error})"));
                }
            }
            context.progress.advance(1);
        }
    }
    context.progress.phase_done();
    notes.dedup();
    let windows_title = format!(
        "RANGE latency on {} by window (µs; box p5–p95, line at the median)",
        fields.score.0
    );
    for (id, title) in [
        ("next-windows-score", windows_title.as_str()),
        (
            "next-windows-geo",
            "Geo window latency on place.coordinates (µs; box p5–p95, median)",
        ),
        (
            "next-delta",
            "next: median RANGE latency (µs) by δ of the value-aware split",
        ),
        (
            "next-delta-memory",
            "next: global index (KiB) by δ of the value-aware split",
        ),
        (
            "next-skew",
            "Median medium-window RANGE latency (µs) by value distribution (light: next with δ)",
        ),
        (
            "next-memory",
            "next: global index (KiB) against the data tree on disk (MiB) during the load",
        ),
        (
            "next-two-indexes",
            "Two indexes at once: mean PUT latency (µs) and median medium-window latency (µs)",
        ),
    ] {
        // A file has no geo windows and no skew suite: their figures would be empty.
        if user.is_some() && matches!(id, "next-windows-geo" | "next-skew") {
            continue;
        }
        result.figures.push(FigureInfo {
            id: id.to_owned(),
            title: title.to_owned(),
        });
    }
    result.verdicts = verdicts::verdicts(&result.measurements);
    if !notes.is_empty() {
        "partial".clone_into(&mut result.status);
        result.note = notes.join("; ");
    }
    Ok(result)
}

/// The documents of a user's file for NEXT's windows (up to the preset's size): the first
/// attribute stands for the score, a second one of type time for `created_at`. `None` when no
/// document has a value of the first attribute.
fn user_documents(context: &Context<'_>) -> Option<(TargetFields, Documents)> {
    let attributes = context.data.attributes();
    let first = attributes.first()?;
    let second = attributes
        .get(1)
        .filter(|attribute| attribute.attr_type == sift_index::AttrType::Time);
    let (all, values) = context.data.file_documents();
    let count = all.len().min(context.sizes.next_documents as usize);
    let mut documents = Documents {
        distribution: ValueDistribution::File,
        jsons: all[..count].to_vec(),
        scores: Vec::new(),
        times_ms: Vec::new(),
        points: Vec::new(),
        json_bytes: all[..count].iter().map(|(_, json)| json.len() as u64).sum(),
        score_span: 1,
    };
    for row in &values[..count] {
        if let Some(value) = row.first().copied().flatten() {
            documents.scores.push(value);
        }
        if second.is_some() {
            if let Some(value) = row.get(1).copied().flatten() {
                documents.times_ms.push(value);
            }
        }
    }
    let low = documents.scores.iter().min()?;
    let high = documents.scores.iter().max()?;
    documents.score_span = (high - low).max(1);
    let fields = TargetFields {
        primary_key: context.data.primary_key().to_owned(),
        score: (first.path.clone(), first.attr_type),
        time: second.map_or_else(|| first.path.clone(), |s| s.path.clone()),
        geo: String::new(),
    };
    Some((fields, documents))
}

/// Selectivity label of a window: its width in the attribute's unit (values, ms), or the side
/// of a geo square in micro-degrees.
fn selectivity(target: Target, width: f64) -> u64 {
    match target {
        Target::Geo => (width * 1e6).round() as u64,
        _ => width.round().max(0.0) as u64,
    }
}

/// The measurements of one case.
pub fn measurements(found: &CaseResult, fields: &TargetFields) -> Vec<Measurement> {
    let case = &found.case;
    let paths = found
        .targets
        .iter()
        .map(|t| fields.path(*t))
        .collect::<Vec<_>>()
        .join("+");
    let template = Measurement {
        configuration: case.configuration.clone(),
        attribute: (!paths.is_empty()).then_some(paths),
        suite: Some(case.suite.name().to_owned()),
        distribution: Some(case.distribution.to_string()),
        split_delta: case.split_delta,
        ..Measurement::default()
    };
    let mut out = Vec::new();
    let mut push = |metric: &str, unit: &str, value: f64, labels: &Measurement| {
        out.push(Measurement {
            metric: metric.to_owned(),
            unit: unit.to_owned(),
            value,
            ..labels.clone()
        });
    };
    if let Some(load) = &found.load {
        let put = Measurement {
            op: Some("PUT".to_owned()),
            count: Some(load.documents),
            ..template.clone()
        };
        let latency = Distribution::of(&load.latencies_us);
        push("put_latency_mean", "us", latency.mean, &put);
        push("put_latency_p50", "us", latency.p50, &put);
        push("put_latency_p99", "us", latency.p99, &put);
        push(
            "put_throughput",
            "ops/s",
            round(load.ops_per_sec(), 1),
            &put,
        );
        push("settle_time", "s", round(load.settle_s, 4), &put);
    }
    if let Some(size) = &found.size {
        for (tree, bytes) in [("data", size.data_bytes), ("index", size.index_bytes)] {
            let labelled = Measurement {
                tree: Some(tree.to_owned()),
                ..template.clone()
            };
            push("bytes_on_disk", "bytes", bytes as f64, &labelled);
        }
        push(
            "index_memory_bytes",
            "bytes",
            size.index_memory_bytes as f64,
            &template,
        );
        if let (Some(bytes), Some(entries)) = (size.global_index_bytes, size.global_index_entries) {
            push("global_index_bytes", "bytes", bytes as f64, &template);
            push("global_index_entries", "entries", entries as f64, &template);
            if size.data_bytes > 0 {
                push(
                    "global_index_percent_of_data",
                    "%",
                    round(100.0 * bytes as f64 / size.data_bytes as f64, 4),
                    &template,
                );
            }
        }
    }
    for (position, point) in found.memory_curve.iter().enumerate() {
        let labelled = Measurement {
            slice: Some(position as u32 + 1),
            ..template.clone()
        };
        push(
            "documents_loaded",
            "documents",
            point.documents as f64,
            &labelled,
        );
        push(
            "data_bytes_on_disk",
            "bytes",
            point.data_bytes as f64,
            &labelled,
        );
        push(
            "global_index_bytes",
            "bytes",
            point.global_index_bytes as f64,
            &labelled,
        );
    }
    for cell in &found.cells {
        let is_window = cell.spec.op == QueryOp::Window;
        let labelled = Measurement {
            attribute: Some(fields.path(cell.spec.target).to_owned()),
            op: Some(if is_window { "RANGELOOKUP" } else { "LOOKUP" }.to_owned()),
            top_k: Some("all".to_owned()),
            window: cell.spec.window.map(str::to_owned),
            selectivity: is_window.then(|| selectivity(cell.spec.target, cell.width)),
            count: Some(cell.latencies_us.len() as u64),
            ..template.clone()
        };
        Distribution::of(&cell.latencies_us).push(&mut out, &labelled, "latency");
        out.push(Measurement {
            metric: "hits_per_query".to_owned(),
            unit: "hits".to_owned(),
            value: round(cell.hits_per_query, 3),
            ..labelled.clone()
        });
        out.push(Measurement {
            metric: "blocks_read_per_query".to_owned(),
            unit: "blocks".to_owned(),
            value: round(cell.blocks_per_query, 3),
            ..labelled
        });
    }
    out
}

/// A filter over this experiment's measurements.
#[derive(Clone, Copy, Default)]
pub struct Pick<'a> {
    pub metric: &'a str,
    pub suite: &'a str,
    pub attribute: Option<&'a str>,
    pub window: Option<&'a str>,
    pub op: Option<&'a str>,
    pub distribution: Option<&'a str>,
    /// `Some(None)`: no split; `None`: any.
    pub split_delta: Option<Option<f64>>,
}

impl Pick<'_> {
    pub fn matches(&self, m: &Measurement) -> bool {
        m.metric == self.metric
            && m.suite.as_deref() == Some(self.suite)
            && m.slice.is_none()
            && m.repetition.is_none()
            && (self.attribute.is_none() || m.attribute.as_deref() == self.attribute)
            && (self.window.is_none() || m.window.as_deref() == self.window)
            && (self.op.is_none() || m.op.as_deref() == self.op)
            && (self.distribution.is_none() || m.distribution.as_deref() == self.distribution)
            && self.split_delta.is_none_or(|delta| m.split_delta == delta)
    }

    /// Value per configuration (the first match of each).
    pub fn per_configuration(&self, ms: &[Measurement]) -> BTreeMap<String, f64> {
        let mut out = BTreeMap::new();
        for m in ms.iter().filter(|m| self.matches(m)) {
            out.entry(m.configuration.clone()).or_insert(m.value);
        }
        out
    }
}

/// The path of the windows' numeric attribute in `ms`: `score` for the tweets, the first
/// attribute of a user's file.
pub fn score_path(ms: &[Measurement]) -> String {
    ms.iter()
        .find(|m| m.suite.as_deref() == Some("windows") && m.op.as_deref() == Some("RANGELOOKUP"))
        .and_then(|m| m.attribute.clone())
        .unwrap_or_else(|| bench::SCORE_PATH.to_owned())
}

/// The label of a skew/δ configuration: `next δ 1e6` for a split.
pub fn series_name(m: &Measurement) -> String {
    match m.split_delta {
        Some(delta) => format!("{} δ {delta:e}", m.configuration),
        None => m.configuration.clone(),
    }
}

/// The median RANGE latency of windows per (configuration) in `suite`, for the report.
pub fn window_label(window: &str) -> String {
    let fraction = match window {
        "small" => "0.01% / 0.001°",
        "medium" => "0.1% / 0.01°",
        _ => "1% / 0.1°",
    };
    format!("{window} ({fraction})")
}
