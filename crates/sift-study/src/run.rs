//! Running the study: what to run (`StudyOptions`), progress, the machine's description, and
//! `run_study`, which runs the experiments one after the other and rewrites the results and
//! report after each.

use crate::configuration::{configuration_colour, IndexConfiguration, DEFAULT_CONFIGURATIONS};
use crate::data::StudyData;
use crate::experiments::shared::SharedDatabases;
use crate::experiments::{Context, ExperimentId};
use crate::presets::{preset_sizes, scaled_down_notes, EngineSettings, Preset, Sizes};
use crate::results::{
    ConfigurationInfo, DatabaseShape, ExperimentResult, MachineInfo, ScaleRun, StudyConfiguration,
    StudyResults,
};
use crate::{experiments, presets, report, results};
use sift_bench::index::BenchError;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::Instant;

/// The user's data instead of the tweet generator.
#[derive(Debug, Clone, PartialEq)]
pub struct UserData {
    pub path: PathBuf,
    pub primary_key: String,
    /// `path:type`, one or two.
    pub attributes: Vec<String>,
}

/// What to run.
#[derive(Debug, Clone, PartialEq)]
pub struct StudyOptions {
    pub preset: Preset,
    /// Overrides the preset's document count.
    pub documents: Option<u64>,
    /// Experiments to run; empty: all.
    pub only: Vec<ExperimentId>,
    pub out: PathBuf,
    pub configurations: Vec<IndexConfiguration>,
    pub data: Option<UserData>,
    pub seed: u64,
}

impl StudyOptions {
    pub fn new(preset: Preset, out: PathBuf) -> StudyOptions {
        StudyOptions {
            preset,
            documents: None,
            only: Vec::new(),
            out,
            configurations: DEFAULT_CONFIGURATIONS
                .iter()
                .filter_map(|text| text.parse().ok())
                .collect(),
            data: None,
            seed: 301,
        }
    }
}

/// Told about the study's progress (the CLI draws progress bars). Implementations use interior
/// mutability; every method has a default that does nothing.
pub trait StudyProgress {
    /// An experiment starts.
    fn experiment(&self, _number: u32, _title: &str) {}
    /// A phase of `total` steps (`unit`: documents, queries, operations) starts.
    fn phase(&self, _label: &str, _total: u64, _unit: &str) {}
    /// `steps` more steps of the current phase are done.
    fn advance(&self, _steps: u64) {}
    /// The current phase is done.
    fn phase_done(&self) {}
    /// A line for the user.
    fn message(&self, _text: &str) {}
}

/// Progress that is not shown.
#[derive(Debug, Default)]
pub struct NoProgress;
impl StudyProgress for NoProgress {}

/// How a run ended.
#[derive(Debug, Clone, PartialEq)]
pub struct StudyOutcome {
    /// Experiments that finished in this run (their results are written).
    pub finished: Vec<ExperimentId>,
    /// Experiments not run because of an interruption (resume with `--only`).
    pub remaining: Vec<ExperimentId>,
    pub interrupted: bool,
    pub out: PathBuf,
    pub seconds: f64,
}

impl StudyOutcome {
    /// The command that runs the remaining experiments into the same folder (with every
    /// option that changes what is measured, so the results merge).
    pub fn resume_hint(&self, options: &StudyOptions) -> Option<String> {
        if self.remaining.is_empty() {
            return None;
        }
        let only: Vec<&str> = self.remaining.iter().map(|e| e.id()).collect();
        let mut command = format!(
            "sift study --preset {} --out {} --only {}",
            options.preset,
            options.out.display(),
            only.join(",")
        );
        if let Some(documents) = options.documents {
            let _ = write!(command, " --n {documents}");
        }
        let defaults = StudyOptions::new(options.preset, options.out.clone());
        if options.configurations != defaults.configurations {
            let names: Vec<String> = options
                .configurations
                .iter()
                .map(IndexConfiguration::name)
                .collect();
            let _ = write!(command, " --configs {}", names.join(","));
        }
        if options.seed != defaults.seed {
            let _ = write!(command, " --seed {}", options.seed);
        }
        if let Some(data) = &options.data {
            let _ = write!(
                command,
                " --data {} --pk {}",
                data.path.display(),
                data.primary_key
            );
            for attribute in &data.attributes {
                let _ = write!(command, " --attr {attribute}");
            }
        }
        Some(command)
    }
}

fn command_output(program: &str, arguments: &[&str]) -> Option<String> {
    let output = std::process::Command::new(program)
        .args(arguments)
        .output()
        .ok()?;
    if !output.status.success() {
        return None;
    }
    let text = String::from_utf8_lossy(&output.stdout).trim().to_owned();
    (!text.is_empty()).then_some(text)
}

/// The machine and build, for `results.json`.
pub fn machine_info() -> MachineInfo {
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .ok()
        .map(|text| text.trim().to_owned());
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64);
    MachineInfo {
        cpu_count: std::thread::available_parallelism().map_or(1, std::num::NonZero::get),
        os: match kernel {
            Some(kernel) => format!("{} {kernel}", std::env::consts::OS),
            None => std::env::consts::OS.to_owned(),
        },
        arch: std::env::consts::ARCH.to_owned(),
        rustc_version: command_output("rustc", &["--version"]),
        sift_version: env!("CARGO_PKG_VERSION").to_owned(),
        git_commit: command_output("git", &["rev-parse", "HEAD"]),
        date_utc: sift_workload::format_rfc3339_seconds(now_ms),
    }
}

fn configuration_infos(configurations: &[IndexConfiguration]) -> Vec<ConfigurationInfo> {
    configurations
        .iter()
        .enumerate()
        .map(|(position, configuration)| {
            let known = configuration.check_known();
            ConfigurationInfo {
                name: configuration.name(),
                kind: configuration.kind.clone(),
                maintenance: configuration.maintenance.clone(),
                known: known.is_ok(),
                note: known.err().map_or_else(String::new, |reason| {
                    format!("not measured: this build does not know it ({reason})")
                }),
                colour: configuration_colour(position).to_owned(),
            }
        })
        .collect()
}

fn json_map<T: serde::Serialize>(
    value: &T,
) -> std::collections::BTreeMap<String, serde_json::Value> {
    match serde_json::to_value(value) {
        Ok(serde_json::Value::Object(map)) => map.into_iter().collect(),
        _ => std::collections::BTreeMap::new(),
    }
}

fn study_configuration(
    options: &StudyOptions,
    data: &StudyData,
    sizes: &Sizes,
    engine: &EngineSettings,
) -> StudyConfiguration {
    let index_configurations = configuration_infos(&options.configurations);
    let sizes_map = json_map(sizes);
    let engine_map = json_map(engine);
    let data_description = data.describe();
    let fingerprint_source = serde_json::json!({
        "preset": options.preset.name(),
        "seed": options.seed,
        "data": &data_description,
        "sizes": &sizes_map,
        "engine": &engine_map,
        "configurations": index_configurations.iter().map(|c| c.name.clone()).collect::<Vec<_>>(),
    });
    let fingerprint = format!("{:016x}", fnv1a(fingerprint_source.to_string().as_bytes()));
    StudyConfiguration {
        preset: options.preset.name().to_owned(),
        seed: options.seed,
        data: data_description,
        index_configurations,
        sizes: sizes_map,
        engine: engine_map,
        scaled_down: scaled_down_notes(sizes, engine),
        fingerprint,
    }
}

/// FNV-1a: a stable fingerprint without another dependency.
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325_u64, |hash, &byte| {
        (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// Reads `results.json` of an earlier run in `out`, if any and if it measured the same thing.
fn earlier_results(out: &Path, fingerprint: &str) -> Vec<ExperimentResult> {
    let Ok(text) = std::fs::read_to_string(out.join("results.json")) else {
        return Vec::new();
    };
    match serde_json::from_str::<StudyResults>(&text) {
        Ok(results) if results.configuration.fingerprint == fingerprint => results.experiments,
        _ => Vec::new(),
    }
}

/// Runs the study; `interrupted` is polled between operations (Ctrl-C). Writes results as each
/// experiment finishes.
pub fn run_study(
    options: &StudyOptions,
    progress: &dyn StudyProgress,
    interrupted: &AtomicBool,
) -> Result<StudyOutcome, BenchError> {
    let started = Instant::now();
    if options.configurations.is_empty() {
        return Err(BenchError::new("no index configuration to study"));
    }
    let mut sizes = preset_sizes(options.preset, options.documents);
    let known = options
        .configurations
        .iter()
        .filter(|configuration| configuration.check_known().is_ok())
        .count();
    let budget_note = if options.preset == Preset::Quick && options.documents.is_none() {
        presets::fit_quick_budget(&mut sizes, known)
    } else {
        None
    };
    let data = match &options.data {
        None => StudyData::Tweets { seed: options.seed },
        Some(user) => {
            let limit = sizes
                .documents
                .max(sizes.mixed_preload + sizes.mixed_operations)
                .max(sizes.sweep_documents)
                .max(sizes.next_documents);
            StudyData::from_file(&user.path, &user.primary_key, &user.attributes, limit)?
        }
    };
    // Every size of the sweep, smallest first; the engine settings follow each size's data.
    let document_bytes = data.document_bytes_mean();
    let scales: Vec<(f64, Sizes, EngineSettings)> = sizes
        .scale_fractions
        .iter()
        .map(|&fraction| {
            let scaled = if fraction >= 1.0 {
                sizes.clone()
            } else {
                sizes.scaled(fraction)
            };
            let engine = presets::engine_for(
                data.loadable(scaled.documents)
                    .saturating_mul(document_bytes),
            );
            (fraction.min(1.0), scaled, engine)
        })
        .collect();
    let engine = presets::engine_for(
        data.loadable(sizes.documents)
            .saturating_mul(document_bytes),
    );
    std::fs::create_dir_all(&options.out)
        .map_err(|e| BenchError::new(format!("cannot create {}: {e}", options.out.display())))?;
    let mut configuration = study_configuration(options, &data, &sizes, &engine);
    configuration.scaled_down.extend(budget_note);
    configuration.scaled_down.push(scale_note(
        &scales,
        &sizes.scaled_experiments,
        document_bytes,
    ));
    let selected: Vec<ExperimentId> = if options.only.is_empty() {
        ExperimentId::ALL.to_vec()
    } else {
        ExperimentId::ALL
            .into_iter()
            .filter(|id| options.only.contains(id))
            .collect()
    };
    // A partial run (--only) keeps the other experiments of an earlier run of the same setup.
    let mut kept: Vec<ExperimentResult> = if options.only.is_empty() {
        Vec::new()
    } else {
        earlier_results(&options.out, &configuration.fingerprint)
            .into_iter()
            .filter(|result| !selected.iter().any(|id| id.id() == result.id))
            .collect()
    };
    let mut results = StudyResults {
        schema_version: results::SCHEMA_VERSION,
        tool: "sift study".to_owned(),
        machine: machine_info(),
        configuration,
        experiments: Vec::new(),
        recommendations: Vec::new(),
    };
    let work_dir = options.out.join(".work");
    let _ = std::fs::remove_dir_all(&work_dir);
    std::fs::create_dir_all(&work_dir)
        .map_err(|e| BenchError::new(format!("cannot create {}: {e}", work_dir.display())))?;
    let shared = SharedDatabases::new();
    let shapes = Mutex::new(Vec::new());
    let mut finished = Vec::new();
    let mut remaining = Vec::new();
    let mut failure = None;
    for (position, &id) in selected.iter().enumerate() {
        if interrupted.load(Ordering::SeqCst) {
            remaining.extend_from_slice(&selected[position..]);
            break;
        }
        progress.experiment(id.number(), id.title());
        let mut runs = Vec::new();
        let mut outcome = Ok(None);
        // The sizes this experiment runs at: every one, or the full size only.
        let runs_at: Vec<&(f64, Sizes, EngineSettings)> = if sizes.sweeps(id.id()) {
            scales.iter().collect()
        } else {
            scales.last().into_iter().collect()
        };
        for (step, (fraction, sizes, engine)) in runs_at.iter().copied().enumerate() {
            if runs_at.len() > 1 {
                let (documents, unit) = scale_of(id, sizes, &data);
                progress.message(&format!(
                    "experiment {}, size {} of {}: {documents} {unit}",
                    id.number(),
                    step + 1,
                    runs_at.len()
                ));
            }
            let context = Context {
                data: &data,
                sizes,
                engine,
                configurations: &options.configurations,
                work_dir: &work_dir,
                shared: &shared,
                shapes: &shapes,
                progress,
                interrupted,
            };
            match experiments::run(&context, id) {
                Ok(result) => {
                    let shapes = std::mem::take(
                        &mut *shapes
                            .lock()
                            .unwrap_or_else(std::sync::PoisonError::into_inner),
                    );
                    runs.push(scale_run(
                        id,
                        (*fraction, sizes, engine),
                        &data,
                        &result,
                        shapes,
                    ));
                    outcome = Ok(Some(result));
                }
                Err(error) => {
                    outcome = Err(error);
                    break;
                }
            }
        }
        match outcome {
            Ok(Some(mut result)) => {
                annotate_across_sizes(&mut result, runs);
                kept.retain(|other| other.id != result.id);
                kept.push(result);
                finished.push(id);
                kept.sort_by_key(|result| result.number);
                results.experiments.clone_from(&kept);
                results.recommendations = crate::recommendations::recommendations(&results);
                report::write_all(&options.out, &results)?;
            }
            Ok(None) => {}
            Err(error) if interrupted.load(Ordering::SeqCst) => {
                progress.message(&format!(
                    "experiment {} ({}) interrupted: {error}",
                    id.number(),
                    id.id()
                ));
                remaining.extend_from_slice(&selected[position..]);
                break;
            }
            Err(error) => {
                failure = Some(BenchError::new(format!(
                    "experiment {} ({}): {error}",
                    id.number(),
                    id.id()
                )));
                remaining.extend_from_slice(&selected[position..]);
                break;
            }
        }
    }
    drop(shared);
    let _ = std::fs::remove_dir_all(&work_dir);
    if finished.is_empty() {
        // Nothing new: still write a report of what is kept (or an empty one).
        results.experiments.clone_from(&kept);
        results.recommendations = crate::recommendations::recommendations(&results);
        report::write_all(&options.out, &results)?;
    }
    if let Some(error) = failure {
        return Err(error);
    }
    Ok(StudyOutcome {
        finished,
        interrupted: interrupted.load(Ordering::SeqCst),
        remaining,
        out: options.out.clone(),
        seconds: started.elapsed().as_secs_f64(),
    })
}

/// The size of `id`'s main databases: [`experiments::scale_of`], at most the file's documents.
fn scale_of(id: ExperimentId, sizes: &Sizes, data: &StudyData) -> (u64, &'static str) {
    match experiments::scale_of(id, sizes) {
        (documents, "documents") => (data.loadable(documents), "documents"),
        other => other,
    }
}

/// One size of an experiment's sweep, from its result at that size.
fn scale_run(
    id: ExperimentId,
    (fraction, sizes, engine): (f64, &Sizes, &EngineSettings),
    data: &StudyData,
    result: &ExperimentResult,
    shapes: Vec<DatabaseShape>,
) -> ScaleRun {
    let (documents, unit) = scale_of(id, sizes, data);
    ScaleRun {
        fraction: sift_bench::round_to(fraction, 4),
        documents,
        unit: unit.to_owned(),
        engine: json_map(&experiments::engine_of(id, engine)),
        duration_s: result.duration_s,
        status: result.status.clone(),
        verdicts: result.verdicts.clone(),
        shapes,
    }
}

/// Stores the sweep in the full-size result and says, for each of its verdicts, how the
/// outcome changes with size (claims are matched by their text).
fn annotate_across_sizes(result: &mut ExperimentResult, runs: Vec<ScaleRun>) {
    if runs.len() > 1 {
        for verdict in &mut result.verdicts {
            let outcomes: Vec<(u64, &str)> = runs
                .iter()
                .map(|run| {
                    let outcome = run
                        .verdicts
                        .iter()
                        .find(|other| other.claim == verdict.claim)
                        .map_or("not-measured", |other| other.outcome.as_str());
                    (run.documents, outcome)
                })
                .collect();
            let unit = runs.last().map_or("documents", |run| run.unit.as_str());
            verdict.across_sizes = Some(crate::verdict::across_sizes(&outcomes, unit));
        }
    }
    result.scales = runs;
}

/// What the sweep runs, for the report's list of what is scaled down.
fn scale_note(
    scales: &[(f64, Sizes, EngineSettings)],
    scaled_experiments: &[String],
    document_bytes: u64,
) -> String {
    let sizes: Vec<String> = scales
        .iter()
        .map(|(fraction, sizes, engine)| {
            format!(
                "{:.0}% ({} documents; memtable {} KiB, level 1 {} KiB, table files {} KiB)",
                fraction * 100.0,
                sizes.documents,
                engine.memtable_bytes >> 10,
                engine.level1_bytes >> 10,
                engine.table_file_bytes >> 10
            )
        })
        .collect();
    let which = if scaled_experiments.is_empty() || scales.len() == 1 {
        "every experiment runs".to_owned()
    } else {
        format!(
            "experiments {} run (the others at the full size only: the budget of the preset \
             has no room for more; --preset paper runs every experiment at every size)",
            scaled_experiments.join(", ")
        )
    };
    format!(
        "{which} at {} size{}: {}; the engine settings follow each size's data (about \
         {document_bytes} bytes of JSON per document), so every size has the same level shape",
        scales.len(),
        if scales.len() == 1 { "" } else { "s" },
        sizes.join(", ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_configurations_and_knows_this_builds_kinds() {
        let configuration: IndexConfiguration = "lazy:sync-insert".parse().unwrap();
        assert_eq!(configuration.kind, "lazy");
        assert_eq!(configuration.name(), "lazy:sync-insert");
        assert!(configuration.check_known().is_ok());
        let bare: IndexConfiguration = "memory".parse().unwrap();
        assert_eq!((bare.name().as_str(), bare.maintenance), ("memory", None));
        let future: IndexConfiguration = "hologram:sync-full".parse().unwrap();
        assert!(future.check_known().unwrap_err().contains("hologram"));
        let scheme: IndexConfiguration = "composite:telepathy".parse().unwrap();
        assert!(scheme.check_known().is_err());
        for bad in ["", ":x", "a:", "a:b:c"] {
            assert!(bad.parse::<IndexConfiguration>().is_err(), "{bad:?}");
        }
        for text in DEFAULT_CONFIGURATIONS {
            let configuration: IndexConfiguration = text.parse().unwrap();
            assert!(configuration.check_known().is_ok(), "{text}");
        }
        let infos = configuration_infos(&[configuration, future]);
        assert!(infos[0].known && !infos[1].known);
        assert_ne!(infos[0].colour, infos[1].colour);
        assert!(infos[1].note.contains("not measured"));
    }
}
