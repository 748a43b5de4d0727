//! What NEXT §6's suites run: the suites, value distributions and query targets, and the plan
//! of cases (configurations × distributions × split deltas) a run measures.

use super::GEO_PATH;
use super::GEO_WINDOWS_DEGREES;
use super::NUMERIC_WINDOWS;
use super::SCORE_MAX;
use super::SCORE_PATH;
use super::SKEW_SPLIT_DELTA;
use super::TIME_PATH;
use crate::verdict::kind_of;
use rand::rngs::StdRng;
use rand::Rng;
use sift_bench::index::BenchError;
use sift_index::AttrType;
use std::fmt;
use std::str::FromStr;

/// How `score` values are drawn.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ValueDistribution {
    Uniform,
    /// Zipf with this exponent over `1..=10^8`, small values most frequent (a continuous
    /// power law, rounded down).
    Zipf(f64),
    /// Not drawn: the values of a user's file, as they are.
    File,
}

impl ValueDistribution {
    /// NEXT §6.5: uniform and Zipf 0.5, 0.8, 1.0.
    pub const PAPER: [ValueDistribution; 4] = [
        ValueDistribution::Uniform,
        ValueDistribution::Zipf(0.5),
        ValueDistribution::Zipf(0.8),
        ValueDistribution::Zipf(1.0),
    ];

    /// A value in `1..=SCORE_MAX`.
    pub fn sample(self, random: &mut StdRng) -> i64 {
        let n = SCORE_MAX as f64;
        let u: f64 = random.gen_range(0.0..1.0);
        let x = match self {
            // A file's values are read, not drawn; sampling one falls back to uniform.
            ValueDistribution::Uniform | ValueDistribution::File => 1.0 + u * n,
            // Inverse of the CDF of the density x^-s on [1, n + 1].
            ValueDistribution::Zipf(s) if (s - 1.0).abs() < 1e-12 => (n + 1.0).powf(u),
            ValueDistribution::Zipf(s) => {
                let one_minus = 1.0 - s;
                (1.0 + u * ((n + 1.0).powf(one_minus) - 1.0)).powf(1.0 / one_minus)
            }
        };
        (x.floor() as i64).clamp(1, SCORE_MAX)
    }
}

impl fmt::Display for ValueDistribution {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ValueDistribution::Uniform => f.write_str("uniform"),
            ValueDistribution::File => f.write_str("file"),
            ValueDistribution::Zipf(s) if s.fract() == 0.0 => write!(f, "zipf-{s:.1}"),
            ValueDistribution::Zipf(s) => write!(f, "zipf-{s}"),
        }
    }
}

impl FromStr for ValueDistribution {
    type Err = BenchError;
    fn from_str(text: &str) -> Result<ValueDistribution, BenchError> {
        if text == "uniform" {
            return Ok(ValueDistribution::Uniform);
        }
        text.strip_prefix("zipf-")
            .and_then(|s| s.parse::<f64>().ok())
            .filter(|s| s.is_finite() && *s > 0.0 && *s <= 5.0)
            .map(ValueDistribution::Zipf)
            .ok_or_else(|| {
                BenchError::new(format!(
                    "distribution {text:?}: expected uniform or zipf-S with 0 < S <= 5 \
                     (e.g. zipf-0.8)"
                ))
            })
    }
}

/// One part of the suite.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Suite {
    /// Small/medium/large windows on `score` per configuration (and the no-index PUT baseline).
    Windows,
    /// Small/medium/large geo windows per configuration (`Database::within`).
    Geo,
    /// `next` with each δ: medium and small windows, PUT cost, global-index memory.
    Delta,
    /// Each value distribution: medium windows and point LOOKUPs.
    Skew,
    /// `score` and the geo point indexed at once (score and created_at in every
    /// configuration when one of them has no geo support: [`align_fallbacks`]).
    TwoIndexes,
}

impl Suite {
    pub const ALL: [Suite; 5] = [
        Suite::Windows,
        Suite::Geo,
        Suite::Delta,
        Suite::Skew,
        Suite::TwoIndexes,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Suite::Windows => "windows",
            Suite::Geo => "geo",
            Suite::Delta => "delta",
            Suite::Skew => "skew",
            Suite::TwoIndexes => "two-indexes",
        }
    }
}

impl fmt::Display for Suite {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Parses a comma-separated list of suites (`all` for every one).
pub fn parse_suites(texts: &[String]) -> Result<Vec<Suite>, BenchError> {
    let mut suites = Vec::new();
    for text in texts.iter().flat_map(|t| t.split(',')) {
        let text = text.trim();
        if text == "all" {
            suites.extend(Suite::ALL);
            continue;
        }
        let suite = Suite::ALL
            .into_iter()
            .find(|s| s.name() == text)
            .ok_or_else(|| {
                BenchError::new(format!(
                    "suite {text:?}: expected windows, geo, delta, skew, two-indexes or all"
                ))
            })?;
        suites.push(suite);
    }
    suites.sort_unstable();
    suites.dedup();
    Ok(suites)
}

/// An indexed attribute.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    Score,
    Geo,
    CreationTime,
}

impl Target {
    pub fn path(self) -> &'static str {
        match self {
            Target::Score => SCORE_PATH,
            Target::Geo => GEO_PATH,
            Target::CreationTime => TIME_PATH,
        }
    }

    pub fn attr_type(self) -> AttrType {
        match self {
            Target::Score => AttrType::Int,
            Target::Geo => AttrType::Geo,
            Target::CreationTime => AttrType::Time,
        }
    }

    pub(crate) fn index_name(self) -> &'static str {
        match self {
            Target::Score => "by_score",
            Target::Geo => "by_place",
            Target::CreationTime => "by_time",
        }
    }

    /// Unit of window widths on this attribute.
    pub fn width_unit(self) -> &'static str {
        match self {
            Target::Score => "values",
            Target::Geo => "degrees",
            Target::CreationTime => "ms",
        }
    }
}

/// Where each target is in the documents and what type it has: the tweets' fields, or the
/// attributes of a user's file (the first int or time attribute stands for the score, a second
/// time attribute for `created_at`).
#[derive(Debug, Clone, PartialEq)]
pub struct TargetFields {
    pub primary_key: String,
    pub score: (String, AttrType),
    pub time: String,
    pub geo: String,
}

impl TargetFields {
    /// The generated tweets: `score`, `created_at`, `place.coordinates`.
    pub fn tweets() -> TargetFields {
        TargetFields {
            primary_key: "tweet_id".to_owned(),
            score: (SCORE_PATH.to_owned(), AttrType::Int),
            time: TIME_PATH.to_owned(),
            geo: GEO_PATH.to_owned(),
        }
    }

    pub fn path(&self, target: Target) -> &str {
        match target {
            Target::Score => &self.score.0,
            Target::CreationTime => &self.time,
            Target::Geo => &self.geo,
        }
    }

    pub fn attr_type(&self, target: Target) -> AttrType {
        match target {
            Target::Score => self.score.1,
            _ => target.attr_type(),
        }
    }
}

/// The kind of query a cell runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QueryOp {
    /// A window `[centre - width/2, centre + width/2]` (RANGE, or WITHIN on geo).
    Window,
    /// LOOKUP of the value of a uniformly chosen document (NEXT §6.5's point workload).
    Lookup,
}

/// One query measurement of a case.
#[derive(Debug, Clone, PartialEq)]
pub struct CellSpec {
    pub target: Target,
    pub op: QueryOp,
    /// small, medium, large (windows); `None` for LOOKUP.
    pub window: Option<&'static str>,
    /// Window fraction of the domain (score, created_at) or side in degrees (geo).
    pub size: f64,
}

impl CellSpec {
    /// The op name in rows: RANGE, WITHIN or LOOKUP.
    pub fn op_name(&self) -> &'static str {
        match (self.op, self.target) {
            (QueryOp::Lookup, _) => "LOOKUP",
            (QueryOp::Window, Target::Geo) => "WITHIN",
            (QueryOp::Window, _) => "RANGE",
        }
    }
}

/// One database to load and measure.
#[derive(Debug, Clone, PartialEq)]
pub struct Case {
    pub suite: Suite,
    /// `kind[:maintenance]`, or `none` (no index: PUTs only).
    pub configuration: String,
    pub targets: Vec<Target>,
    /// Used when creating an index on `targets` fails (a kind without geo support); see
    /// [`align_fallbacks`].
    pub fallback_targets: Option<Vec<Target>>,
    /// Said with the case's results (why its targets were changed).
    pub note: Option<String>,
    /// δ of `next` / `sst-local` indexes.
    pub split_delta: Option<f64>,
    pub distribution: ValueDistribution,
}

impl Case {
    pub fn kind(&self) -> &str {
        self.configuration
            .split(':')
            .next()
            .unwrap_or(&self.configuration)
    }

    /// The query cells for the targets actually indexed.
    pub fn cells(&self, targets: &[Target]) -> Vec<CellSpec> {
        let mut cells = Vec::new();
        for &target in targets {
            let windows: Vec<(&'static str, f64)> = match self.suite {
                Suite::Windows | Suite::Geo | Suite::TwoIndexes => match target {
                    Target::Geo => GEO_WINDOWS_DEGREES.to_vec(),
                    _ => NUMERIC_WINDOWS.to_vec(),
                },
                Suite::Delta => NUMERIC_WINDOWS[..2].to_vec(),
                Suite::Skew => NUMERIC_WINDOWS[1..2].to_vec(),
            };
            for (window, size) in windows {
                cells.push(CellSpec {
                    target,
                    op: QueryOp::Window,
                    window: Some(window),
                    size,
                });
            }
            if self.suite == Suite::Skew {
                cells.push(CellSpec {
                    target,
                    op: QueryOp::Lookup,
                    window: None,
                    size: 0.0,
                });
            }
        }
        cells
    }
}

/// What to run.
#[derive(Debug, Clone, PartialEq)]
pub struct WindowBenchConfig {
    pub documents: u64,
    pub seed: u64,
    pub suites: Vec<Suite>,
    /// Compared in windows, geo, skew and two-indexes (`none` only in windows).
    pub configurations: Vec<String>,
    /// The first is the distribution outside the skew suite.
    pub distributions: Vec<ValueDistribution>,
    /// The δ sweep.
    pub split_deltas: Vec<Option<f64>>,
    /// δ of `next` outside the δ sweep.
    pub next_split_delta: Option<f64>,
    /// Queries per cell and repetition.
    pub queries: u64,
    pub repetitions: u32,
    /// A cell (all repetitions) stops after this many seconds.
    pub seconds_max: f64,
}

/// The cases of `config`, grouped by distribution (each distribution's documents are
/// generated once).
pub fn plan(config: &WindowBenchConfig) -> Vec<Case> {
    let first = config
        .distributions
        .first()
        .copied()
        .unwrap_or(ValueDistribution::Uniform);
    let indexed: Vec<&String> = config
        .configurations
        .iter()
        .filter(|c| c.as_str() != "none")
        .collect();
    let delta_of = |configuration: &str| {
        if kind_of(configuration) == "next" {
            config.next_split_delta
        } else {
            None
        }
    };
    let case = |suite, configuration: &str, targets: Vec<Target>, distribution| Case {
        suite,
        configuration: configuration.to_owned(),
        targets,
        fallback_targets: None,
        note: None,
        split_delta: delta_of(configuration),
        distribution,
    };
    let mut cases = Vec::new();
    for &suite in &config.suites {
        match suite {
            Suite::Windows => {
                for configuration in &config.configurations {
                    let targets = if configuration == "none" {
                        Vec::new()
                    } else {
                        vec![Target::Score]
                    };
                    cases.push(case(suite, configuration, targets, first));
                }
            }
            Suite::Geo => {
                for configuration in &indexed {
                    cases.push(case(suite, configuration, vec![Target::Geo], first));
                }
            }
            Suite::Delta => {
                for &delta in &config.split_deltas {
                    let mut next = case(suite, "next", vec![Target::Score], first);
                    next.split_delta = delta;
                    cases.push(next);
                }
            }
            Suite::Skew => {
                for &distribution in &config.distributions {
                    for configuration in &indexed {
                        cases.push(case(
                            suite,
                            configuration,
                            vec![Target::Score],
                            distribution,
                        ));
                    }
                    if indexed.iter().any(|c| kind_of(c) == "next")
                        && config.next_split_delta.is_none()
                    {
                        let mut split = case(suite, "next", vec![Target::Score], distribution);
                        split.split_delta = Some(SKEW_SPLIT_DELTA);
                        cases.push(split);
                    }
                }
            }
            Suite::TwoIndexes => {
                for configuration in &indexed {
                    let mut two = case(
                        suite,
                        configuration,
                        vec![Target::Score, Target::Geo],
                        first,
                    );
                    two.fallback_targets = Some(vec![Target::Score, Target::CreationTime]);
                    cases.push(two);
                }
            }
        }
    }
    // Stable: cases keep their order within a distribution.
    let order = |d: &ValueDistribution| {
        config
            .distributions
            .iter()
            .position(|x| x == d)
            .unwrap_or(0)
    };
    cases.sort_by_key(|case| order(&case.distribution));
    cases
}
