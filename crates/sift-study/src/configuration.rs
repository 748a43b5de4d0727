//! Index configurations (`kind[:maintenance]`): the default list every experiment iterates
//! over, parsing, and the colour each has in the report.

use sift_bench::index::BenchError;
use std::fmt;
use std::str::FromStr;

/// The configurations studied by default: every kind of this build with each maintenance it
/// accepts. Add a kind or scheme here and it appears in every experiment.
pub const DEFAULT_CONFIGURATIONS: &[&str] = &[
    "composite:sync-insert",
    "composite:sync-full",
    "eager:sync-full",
    "lazy:sync-insert",
    "lazy:sync-full",
    "memory:sync-full",
    "embedded",
    "sst-local",
    "next",
    "composite:deferred",
    "composite:async-simple",
];

/// One index configuration: a kind and, optionally, a maintenance scheme (default: the
/// kind's).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IndexConfiguration {
    pub kind: String,
    pub maintenance: Option<String>,
}

impl IndexConfiguration {
    /// `kind:maintenance` (or `kind`): the name in tables, plots and `results.json`.
    pub fn name(&self) -> String {
        self.to_string()
    }

    /// Whether this build knows the kind and the maintenance; `Err` says what it does not know.
    pub fn check_known(&self) -> Result<(), String> {
        sift_index::IndexKind::from_str(&self.kind)?;
        if let Some(maintenance) = &self.maintenance {
            sift_index::Maintenance::from_str(maintenance)?;
        }
        Ok(())
    }
}

impl fmt::Display for IndexConfiguration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.kind)?;
        if let Some(maintenance) = &self.maintenance {
            write!(f, ":{maintenance}")?;
        }
        Ok(())
    }
}

impl FromStr for IndexConfiguration {
    type Err = BenchError;
    fn from_str(text: &str) -> Result<IndexConfiguration, BenchError> {
        let mut parts = text.split(':');
        let kind = parts.next().unwrap_or_default().trim();
        let maintenance = parts.next().map(|m| m.trim().to_owned());
        if kind.is_empty() || maintenance.as_deref() == Some("") || parts.next().is_some() {
            return Err(BenchError::new(format!(
                "index configuration {text:?}: expected kind[:maintenance], e.g. lazy:sync-insert"
            )));
        }
        Ok(IndexConfiguration {
            kind: kind.to_owned(),
            maintenance,
        })
    }
}

/// Colours of configurations, in list order (colour-blind-safe first).
const PALETTE: [&str; 12] = [
    "#0072b2", "#e69f00", "#009e73", "#d55e00", "#cc79a7", "#56b4e9", "#8c564b", "#f0c000",
    "#7f3c8d", "#11a579", "#3969ac", "#e73f74",
];
/// The colour of the no-index baseline.
pub const BASELINE_COLOUR: &str = "#7f7f7f";
/// The configuration name of the baseline without a secondary index.
pub const BASELINE: &str = "none";

/// The colour of the configuration at `position` in the run's list.
pub fn configuration_colour(position: usize) -> &'static str {
    PALETTE[position % PALETTE.len()]
}
