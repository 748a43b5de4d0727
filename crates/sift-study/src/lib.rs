//! `sift study`: the comparative study of Sift's secondary-index configurations, reproducing
//! the experiments of LevelDB++ (SIGMOD'18, §5 and App. C) on this machine, and its report.
//!
//! An *index configuration* is `kind[:maintenance]` (parsed with `sift_index::IndexKind` and
//! `Maintenance`); the experiments iterate over a list of them, so a new kind or scheme appears
//! in every experiment, plot and verdict by adding it to [`DEFAULT_CONFIGURATIONS`] (or
//! `--configs`). A configuration this build does not know is listed as "not measured".
//!
//! Experiments ([`experiments`]) run one after the other; after each one finishes, `results.json`
//! ([`results`], schema `docs/study-results.schema.json`), its CSV and `index.html`
//! ([`report`]) are rewritten, so an interrupted run keeps what finished and a later run with
//! `--only` the remaining experiments merges into the same folder. Verdicts and the
//! recommendation table are computed from the measurements ([`verdict`]); the table ranks
//! configurations with the cost model ([`cost_model`]) that `sift advise` ([`advise`]) applies
//! to a user's workload description.
//!
//! Each experiment is one folder of [`experiments`] that owns its run, its verdicts and its
//! report section. [`engines`] adapts Sift to the engine-neutral harness (`sift-bench`), so
//! `sift bench kv` and `sift bench index` run Sift as the peers' binary runs RocksDB.

#![deny(clippy::unwrap_used, clippy::expect_used)]
#![forbid(unsafe_code)]

pub mod advise;
pub mod configuration;
pub mod cost_model;
pub mod data;
pub mod engines;
pub mod experiments;
pub mod figure;
pub mod presets;
pub mod recommendations;
pub mod report;
pub mod results;
mod run;
pub mod user_workload;
pub mod verdict;

pub use configuration::{
    configuration_colour, IndexConfiguration, BASELINE, BASELINE_COLOUR, DEFAULT_CONFIGURATIONS,
};
pub use run::{
    machine_info, run_study, NoProgress, StudyOptions, StudyOutcome, StudyProgress, UserData,
};
