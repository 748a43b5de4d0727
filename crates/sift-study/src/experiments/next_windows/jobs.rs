//! Experiment 5's databases and the suites each one is read for. NEXT §6's suites overlap:
//! the windows databases hold exactly what the uniform skew cells and the δ = none point
//! need, the two-index databases (NEXT §6.6 compared NEXT with the stand-alone index) hold
//! the geo windows of those two, and the δ = 10^6 database is the skew suite's uniform split. Loading each of those once is what lets the experiment run 300,000
//! documents per database within the quick preset's budget; the databases no claim times are
//! loaded two at a time.

use super::bench::{
    load_case, query_case, Case, CaseResult, CaseSettings, CellSpec, Documents, QueryOp, Suite,
    Target, ValueDistribution, WindowBenchConfig, DEFAULT_SPLIT_DELTAS, SKEW_SPLIT_DELTA,
};
use super::Plan;
use crate::engines::index::files_per_level;
use crate::experiments::Context;
use crate::verdict::kind_of;
use sift_bench::index::BenchError;

/// Which cells of a database a suite reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Cells {
    /// Every cell measured.
    All,
    /// Windows on the score.
    ScoreWindows,
    /// Small and medium windows on the score (the δ sweep).
    SmallMediumScore,
    /// The medium score window and the score LOOKUP (the skew suite).
    MediumAndLookup,
    /// Windows on the point.
    Geo,
}

impl Cells {
    fn keeps(self, spec: &CellSpec) -> bool {
        let score_window = spec.target == Target::Score && spec.op == QueryOp::Window;
        match self {
            Cells::All => true,
            Cells::ScoreWindows => score_window,
            Cells::SmallMediumScore => {
                score_window && matches!(spec.window, Some("small" | "medium"))
            }
            Cells::MediumAndLookup => {
                spec.target == Target::Score
                    && (spec.op == QueryOp::Lookup || spec.window == Some("medium"))
            }
            Cells::Geo => spec.target == Target::Geo,
        }
    }
}

/// A suite's view of a database: its results as if the suite had loaded it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct View {
    pub suite: Suite,
    pub cells: Cells,
    /// Reports the load (PUT latencies) and the sizes.
    pub load: bool,
}

/// One database: the case that opens and loads it, the cells measured on it and the views.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Job {
    pub case: Case,
    pub views: Vec<View>,
    /// Loaded alone, so its PUT latencies are reported; otherwise loaded beside another.
    pub timed: bool,
}

impl Job {
    pub fn distribution(&self) -> ValueDistribution {
        self.case.distribution
    }

    /// The cells to measure: the suite's own, plus the score LOOKUP where a skew view needs it.
    fn cells(&self, targets: &[Target]) -> Vec<CellSpec> {
        let mut cells = self.case.cells(targets);
        let needs_lookup = self
            .views
            .iter()
            .any(|view| view.cells == Cells::MediumAndLookup);
        if needs_lookup
            && targets.contains(&Target::Score)
            && !cells.iter().any(|cell| cell.op == QueryOp::Lookup)
        {
            cells.push(CellSpec {
                target: Target::Score,
                op: QueryOp::Lookup,
                window: None,
                size: 0.0,
            });
        }
        cells
    }
}

/// The databases of the experiment: timed ones first (windows, then two indexes), then the δ
/// sweep and the skewed distributions.
/// What the δ sweep and the skew suite run: the δ values swept (in the score's units), the δ
/// of the skew suite's split, and the skewed distributions (`None`: no skew suite at all, as
/// on a user's file, whose values are what they are).
pub(crate) struct Sweeps<'a> {
    pub deltas: Vec<f64>,
    pub skew_delta: f64,
    pub skewed: Option<&'a [ValueDistribution]>,
}

impl Sweeps<'_> {
    /// The tweets: NEXT's δ values on the score's 10^8 domain, and `skewed`.
    pub fn tweets(skewed: &[ValueDistribution]) -> Sweeps<'_> {
        Sweeps {
            deltas: DEFAULT_SPLIT_DELTAS.into_iter().flatten().collect(),
            skew_delta: SKEW_SPLIT_DELTA,
            skewed: Some(skewed),
        }
    }
}

pub(crate) fn plan_jobs(
    base: &WindowBenchConfig,
    plan: &Plan,
    two_cases: Vec<Case>,
    sweeps: &Sweeps<'_>,
) -> Vec<Job> {
    let skew_kinds = |configuration: &str| {
        sweeps.skewed.is_some() && plan.skew.iter().any(|c| c == configuration)
    };
    let windows_view = View {
        suite: Suite::Windows,
        cells: Cells::ScoreWindows,
        load: true,
    };
    let skew_view = View {
        suite: Suite::Skew,
        cells: Cells::MediumAndLookup,
        load: false,
    };
    let mut jobs = Vec::new();
    for case in super::bench::plan(base) {
        let mut views = vec![windows_view.clone()];
        if skew_kinds(&case.configuration) {
            views.push(skew_view.clone());
        }
        if kind_of(&case.configuration) == "next" {
            views.push(View {
                suite: Suite::Delta,
                cells: Cells::SmallMediumScore,
                load: true,
            });
        }
        jobs.push(Job {
            case,
            views,
            timed: true,
        });
    }
    for case in two_cases {
        let mut views = vec![View {
            suite: Suite::TwoIndexes,
            cells: Cells::All,
            load: true,
        }];
        if case.targets.contains(&Target::Geo) {
            views.insert(
                0,
                View {
                    suite: Suite::Geo,
                    cells: Cells::Geo,
                    load: false,
                },
            );
        }
        jobs.push(Job {
            case,
            views,
            timed: true,
        });
    }
    let next = plan.compared.iter().find(|c| kind_of(c) == "next").cloned();
    let score_case = |configuration: &str, suite, distribution, split_delta| Case {
        suite,
        configuration: configuration.to_owned(),
        targets: vec![Target::Score],
        fallback_targets: None,
        note: None,
        split_delta,
        distribution,
    };
    let uniform = base
        .distributions
        .first()
        .copied()
        .unwrap_or(ValueDistribution::Uniform);
    if let Some(next) = &next {
        for &delta in &sweeps.deltas {
            let mut views = vec![View {
                suite: Suite::Delta,
                cells: Cells::SmallMediumScore,
                load: false,
            }];
            // The skew suite's δ is one of the swept values (computed the same way).
            if sweeps.skewed.is_some() && delta.to_bits() == sweeps.skew_delta.to_bits() {
                views.push(skew_view.clone());
            }
            jobs.push(Job {
                case: score_case(next, Suite::Delta, uniform, Some(delta)),
                views,
                timed: false,
            });
        }
    }
    for &distribution in sweeps.skewed.unwrap_or_default() {
        if distribution == ValueDistribution::Uniform {
            continue; // the windows and δ databases above
        }
        for configuration in &plan.skew {
            jobs.push(Job {
                case: score_case(configuration, Suite::Skew, distribution, None),
                views: vec![skew_view.clone()],
                timed: false,
            });
        }
        if let Some(next) = &next {
            jobs.push(Job {
                case: score_case(next, Suite::Skew, distribution, Some(sweeps.skew_delta)),
                views: vec![skew_view.clone()],
                timed: false,
            });
        }
    }
    jobs
}

/// Loads the group's databases (side by side when there are two), then queries them one at a
/// time; per job, its views' results or its error.
pub(crate) fn run_group(
    context: &Context<'_>,
    group: &[Job],
    documents: &Documents,
    settings: &CaseSettings<'_>,
) -> Result<Vec<Result<Vec<CaseResult>, BenchError>>, BenchError> {
    let dirs = group
        .iter()
        .map(|job| {
            context.fresh_dir(&format!(
                "next-{}-{}",
                job.case.suite, job.case.configuration
            ))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let loaded = crate::experiments::on_threads(group.len(), "loading", |position| {
        let db = dirs[position].path().join("db");
        load_case(&group[position].case, documents, &db, settings)
    });
    let mut out = Vec::new();
    for (job, loaded) in group.iter().zip(loaded) {
        out.push(loaded.and_then(|(database, mut result)| {
            let Some(database) = database else {
                return Ok(views(job, &result));
            };
            let cells = job.cells(&result.targets);
            let measured = query_case(&database, documents, settings, &mut result, &cells);
            context.record_level_shape(
                &format!(
                    "{} {} {}",
                    job.case.suite,
                    job.case.configuration,
                    super::label(job.case.distribution, job.case.split_delta)
                ),
                files_per_level(&database, super::bench::COLLECTION),
            );
            let closed = database
                .close()
                .map_err(|e| BenchError::new(format!("sift: {e}")));
            measured?;
            closed?;
            Ok(views(job, &result))
        }));
    }
    Ok(out)
}

/// The job's result as each of its views reports it.
fn views(job: &Job, result: &CaseResult) -> Vec<CaseResult> {
    job.views
        .iter()
        .map(|view| {
            let mut case = result.case.clone();
            case.suite = view.suite;
            let mut note = result.note.clone();
            if view.cells == Cells::Geo && !result.targets.contains(&Target::Geo) {
                note = Some(note.unwrap_or_else(|| "no geo index".to_owned()));
            }
            CaseResult {
                case,
                targets: result.targets.clone(),
                note,
                load: if view.load && job.timed {
                    result.load.clone()
                } else {
                    None
                },
                size: if view.load { result.size } else { None },
                memory_curve: if view.suite == Suite::Windows {
                    result.memory_curve.clone()
                } else {
                    Vec::new()
                },
                cells: result
                    .cells
                    .iter()
                    .filter(|cell| view.cells.keeps(&cell.spec))
                    .cloned()
                    .collect(),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan_of() -> Plan {
        Plan {
            compared: vec![
                "next".to_owned(),
                "sst-local".to_owned(),
                "composite:sync-insert".to_owned(),
                "memory:sync-full".to_owned(),
            ],
            skew: vec![
                "next".to_owned(),
                "sst-local".to_owned(),
                "composite:sync-insert".to_owned(),
            ],
            two: vec!["next".to_owned(), "composite:sync-insert".to_owned()],
        }
    }

    fn base() -> WindowBenchConfig {
        WindowBenchConfig {
            documents: 100,
            seed: 1,
            suites: vec![Suite::Windows],
            configurations: std::iter::once("none".to_owned())
                .chain(plan_of().compared)
                .collect(),
            distributions: vec![ValueDistribution::Uniform],
            split_deltas: DEFAULT_SPLIT_DELTAS.to_vec(),
            next_split_delta: None,
            queries: 1,
            repetitions: 1,
            seconds_max: 1.0,
        }
    }

    /// Every (suite, configuration, distribution, δ) the separate cases of `bench::plan`
    /// measure is reported by exactly one view, from one database per distinct load.
    #[test]
    fn shared_databases_cover_every_suite_once() {
        let two = super::super::bench::plan(&WindowBenchConfig {
            suites: vec![Suite::TwoIndexes],
            configurations: plan_of().two,
            ..base()
        });
        let jobs = plan_jobs(
            &base(),
            &plan_of(),
            two,
            &Sweeps::tweets(&ValueDistribution::PAPER),
        );
        let mut reported: Vec<(Suite, String, ValueDistribution, Option<u64>)> = Vec::new();
        for job in &jobs {
            for view in &job.views {
                reported.push((
                    view.suite,
                    job.case.configuration.clone(),
                    job.case.distribution,
                    job.case.split_delta.map(|d| d as u64),
                ));
            }
        }
        let mut expected = Vec::new();
        let mut separate = super::super::bench::plan(&base());
        for (suites, configurations, distributions) in [
            (
                vec![Suite::Geo],
                plan_of().two,
                vec![ValueDistribution::Uniform],
            ),
            (
                vec![Suite::Delta],
                plan_of().compared,
                vec![ValueDistribution::Uniform],
            ),
            (
                vec![Suite::TwoIndexes],
                plan_of().two,
                vec![ValueDistribution::Uniform],
            ),
            (
                vec![Suite::Skew],
                plan_of().skew,
                ValueDistribution::PAPER.to_vec(),
            ),
        ] {
            separate.extend(super::super::bench::plan(&WindowBenchConfig {
                suites,
                configurations,
                distributions,
                ..base()
            }));
        }
        for case in separate {
            expected.push((
                case.suite,
                case.configuration.clone(),
                case.distribution,
                case.split_delta.map(|d| d as u64),
            ));
        }
        let key = |r: &(Suite, String, ValueDistribution, Option<u64>)| {
            format!("{} {} {} {:?}", r.0, r.1, r.2, r.3)
        };
        let mut reported_keys: Vec<String> = reported.iter().map(key).collect();
        let mut expected_keys: Vec<String> = expected.iter().map(key).collect();
        reported_keys.sort();
        expected_keys.sort();
        assert_eq!(reported_keys, expected_keys);
        // 5 windows + 2 two-index + 4 δ + 3 × 4 skewed databases instead of 32 (geo on
        // next and composite only).
        assert_eq!(jobs.len(), 23);
        assert!(jobs.iter().take(7).all(|job| job.timed));
        assert!(jobs.iter().skip(7).all(|job| !job.timed));
    }

    #[test]
    fn views_keep_only_their_cells() {
        let spec = |target, op, window| CellSpec {
            target,
            op,
            window,
            size: 0.0,
        };
        let small = spec(Target::Score, QueryOp::Window, Some("small"));
        let large = spec(Target::Score, QueryOp::Window, Some("large"));
        let medium = spec(Target::Score, QueryOp::Window, Some("medium"));
        let lookup = spec(Target::Score, QueryOp::Lookup, None);
        let geo = spec(Target::Geo, QueryOp::Window, Some("small"));
        assert!(Cells::ScoreWindows.keeps(&large) && !Cells::ScoreWindows.keeps(&lookup));
        assert!(Cells::SmallMediumScore.keeps(&small) && !Cells::SmallMediumScore.keeps(&large));
        assert!(Cells::MediumAndLookup.keeps(&medium) && Cells::MediumAndLookup.keeps(&lookup));
        assert!(!Cells::MediumAndLookup.keeps(&small));
        assert!(Cells::Geo.keeps(&geo) && !Cells::Geo.keeps(&medium));
        assert!(Cells::All.keeps(&geo));
    }
}
