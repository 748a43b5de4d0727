//! What every experiment's verdicts are made of: a claim of the papers checked against this
//! run's measurements — reproduced, differs, or not measured — with the numbers that decided
//! it, and the selections and comparisons the claims share. Each experiment's own claims are in
//! its folder (`experiments/<name>/verdicts.rs` or its `mod.rs`).
//!
//! Kind-level claims ("Lazy beats Composite") compare each kind at its best maintenance scheme
//! (the configuration of that kind with the lowest value) and name that configuration. Nothing
//! here is tuned to agree with the papers: the rules are fixed thresholds stated in the claim's
//! evidence.

use crate::results::{Measurement, Verdict};
use crate::IndexConfiguration;
use std::collections::BTreeMap;

/// The kind of a configuration name (`lazy:sync-insert` → `lazy`).
pub fn kind_of(configuration: &str) -> &str {
    configuration.split(':').next().unwrap_or(configuration)
}

/// A verdict with its deciding numbers; values that are not finite are left out (JSON has no
/// NaN or infinity) and the others rounded to three decimals.
pub(crate) fn verdict(
    claim: &str,
    source: &str,
    outcome: &str,
    evidence: String,
    numbers: &[(impl AsRef<str>, f64)],
) -> Verdict {
    Verdict {
        claim: claim.to_owned(),
        source: source.to_owned(),
        outcome: outcome.to_owned(),
        evidence,
        numbers: numbers
            .iter()
            .filter(|(_, value)| value.is_finite())
            .map(|(name, value)| (name.as_ref().to_owned(), (value * 1000.0).round() / 1000.0))
            .collect(),
        across_sizes: None,
    }
}

pub(crate) fn not_measured(claim: &str, source: &str, why: &str) -> Verdict {
    verdict(
        claim,
        source,
        "not-measured",
        why.to_owned(),
        &[] as &[(&str, f64)],
    )
}

pub(crate) fn outcome(holds: bool) -> &'static str {
    if holds {
        "reproduced"
    } else {
        "differs"
    }
}

/// `outcome`, or "not-measured" when nothing decided.
pub(crate) fn outcome_if_measured(holds: Option<bool>) -> &'static str {
    holds.map_or("not-measured", outcome)
}

/// How a claim's outcome changes with the data size, from its outcome at each size
/// (`(size, outcome)`, smallest first; sizes where it was not measured are skipped).
pub fn across_sizes(outcomes: &[(u64, &str)], unit: &str) -> String {
    let measured: Vec<(u64, bool)> = outcomes
        .iter()
        .filter(|(_, outcome)| *outcome != "not-measured")
        .map(|(size, outcome)| (*size, *outcome == "reproduced"))
        .collect();
    let every = if measured.len() == outcomes.len() {
        "every size"
    } else {
        "every size measured"
    };
    let Some(first_held) = measured.iter().position(|(_, held)| *held) else {
        return if measured.is_empty() {
            "not measured at any size".to_owned()
        } else {
            format!("differs at {every}")
        };
    };
    let first_failed = measured.iter().position(|(_, held)| !*held);
    let held_from_first = measured[first_held..].iter().all(|(_, held)| *held);
    match first_failed {
        None => format!("reproduced at {every}"),
        Some(_) if held_from_first => {
            format!("reproduced from {} {unit} on", measured[first_held].0)
        }
        Some(failed) if measured[failed..].iter().all(|(_, held)| !*held) => format!(
            "reproduced up to {} {unit}, differs from {} {unit} on",
            measured[failed - 1].0,
            measured[failed].0
        ),
        Some(_) => {
            let list = |want: bool| {
                measured
                    .iter()
                    .filter(|(_, held)| *held == want)
                    .map(|(size, _)| size.to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            };
            format!(
                "changes with size: reproduced at {} {unit}, differs at {} {unit}",
                list(true),
                list(false)
            )
        }
    }
}

/// A filter over measurements.
#[derive(Clone, Copy, Default)]
pub(crate) struct Select<'a> {
    pub(crate) metric: &'a str,
    pub(crate) attribute: Option<&'a str>,
    pub(crate) op: Option<&'a str>,
    pub(crate) workload: Option<&'a str>,
    pub(crate) top_k: Option<&'a str>,
    pub(crate) selectivity: Option<u64>,
    pub(crate) slice: Option<u32>,
    pub(crate) tree: Option<&'a str>,
    pub(crate) bloom: Option<u32>,
    pub(crate) compression: Option<&'a str>,
}

impl Select<'_> {
    pub(crate) fn matches(&self, m: &Measurement) -> bool {
        m.metric == self.metric
            && m.repetition.is_none()
            && (self.attribute.is_none() || m.attribute.as_deref() == self.attribute)
            && (self.op.is_none() || m.op.as_deref() == self.op)
            && (self.workload.is_none() || m.workload.as_deref() == self.workload)
            && (self.top_k.is_none() || m.top_k.as_deref() == self.top_k)
            && (self.selectivity.is_none() || m.selectivity == self.selectivity)
            && m.slice == self.slice
            && (self.tree.is_none() || m.tree.as_deref() == self.tree)
            && (self.bloom.is_none() || m.bloom_bits_per_key == self.bloom)
            && (self.compression.is_none() || m.compression.as_deref() == self.compression)
    }
}

/// Per configuration: the mean of the selected values (several when, e.g., two attribute
/// databases both measured GETs).
pub(crate) fn per_configuration(
    measurements: &[Measurement],
    select: Select<'_>,
) -> BTreeMap<String, f64> {
    let mut sums: BTreeMap<String, (f64, u32)> = BTreeMap::new();
    for m in measurements.iter().filter(|m| select.matches(m)) {
        let entry = sums.entry(m.configuration.clone()).or_insert((0.0, 0));
        entry.0 += m.value;
        entry.1 += 1;
    }
    sums.into_iter()
        .map(|(name, (sum, count))| (name, sum / f64::from(count)))
        .collect()
}

/// The configuration of `kind` with the lowest value.
pub(crate) fn best_of_kind(values: &BTreeMap<String, f64>, kind: &str) -> Option<(String, f64)> {
    values
        .iter()
        .filter(|(name, _)| kind_of(name) == kind)
        .min_by(|a, b| a.1.total_cmp(b.1))
        .map(|(name, value)| (name.clone(), *value))
}

pub(crate) fn fmt_us(value: f64) -> String {
    if value >= 100.0 {
        format!("{value:.0} µs")
    } else {
        format!("{value:.1} µs")
    }
}

pub(crate) fn missing_kinds(values: &BTreeMap<String, f64>, kinds: &[&str]) -> Option<String> {
    let missing: Vec<&str> = kinds
        .iter()
        .copied()
        .filter(|kind| best_of_kind(values, kind).is_none())
        .collect();
    (!missing.is_empty()).then(|| format!("no measurement of {} in this run", missing.join(", ")))
}

/// `first` is lower than `second` (both kinds at their best): the shared shape of most claims.
pub(crate) fn compare_kinds(
    claim: &str,
    source: &str,
    values: &BTreeMap<String, f64>,
    first: &str,
    second: &str,
    what: &str,
) -> Verdict {
    if let Some(why) = missing_kinds(values, &[first, second]) {
        return not_measured(claim, source, &why);
    }
    let (Some((a_name, a)), Some((b_name, b))) =
        (best_of_kind(values, first), best_of_kind(values, second))
    else {
        return not_measured(claim, source, "no measurement");
    };
    verdict(
        claim,
        source,
        outcome(a < b),
        format!(
            "{what}: {a_name} {} vs {b_name} {} ({:.2}×)",
            fmt_us(a),
            fmt_us(b),
            b / a.max(1e-9)
        ),
        &[(a_name, a), (b_name, b)],
    )
}

pub(crate) fn attribute_paths(measurements: &[Measurement]) -> Vec<String> {
    let mut paths: Vec<String> = Vec::new();
    for m in measurements {
        if let Some(path) = &m.attribute {
            if !paths.contains(path) {
                paths.push(path.clone());
            }
        }
    }
    paths
}

pub(crate) fn has_kind(configurations: &[IndexConfiguration], kind: &str) -> bool {
    configurations
        .iter()
        .any(|c| c.kind == kind && c.check_known().is_ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outcomes_across_sizes_read_as_a_sentence() {
        let say = |outcomes: &[(u64, &str)]| across_sizes(outcomes, "documents");
        assert_eq!(
            say(&[(20, "reproduced"), (200, "reproduced")]),
            "reproduced at every size"
        );
        assert_eq!(
            say(&[(20, "differs"), (200, "differs")]),
            "differs at every size"
        );
        assert_eq!(
            say(&[(20, "differs"), (66, "reproduced"), (200, "reproduced")]),
            "reproduced from 66 documents on"
        );
        assert_eq!(
            say(&[(20, "reproduced"), (66, "differs"), (200, "differs")]),
            "reproduced up to 20 documents, differs from 66 documents on"
        );
        assert_eq!(
            say(&[(20, "reproduced"), (66, "differs"), (200, "reproduced")]),
            "changes with size: reproduced at 20, 200 documents, differs at 66 documents"
        );
        assert_eq!(
            say(&[(20, "not-measured"), (200, "reproduced")]),
            "reproduced at every size measured"
        );
        assert_eq!(say(&[(20, "not-measured")]), "not measured at any size");
        assert_eq!(say(&[]), "not measured at any size");
    }
}
