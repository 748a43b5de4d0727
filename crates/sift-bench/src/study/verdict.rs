//! Verdicts: each claim of the papers checked against this run's measurements — reproduced,
//! differs, or not measured — with the numbers that decided it; and the recommendation table
//! (for each attribute and workload mix, the configuration with the lowest cost).
//!
//! Kind-level claims ("Lazy beats Composite") compare each kind at its best maintenance scheme
//! (the configuration of that kind with the lowest value) and name that configuration. Nothing
//! here is tuned to agree with the papers: the rules are fixed thresholds stated in the claim's
//! evidence.

use super::cost_model::{self, AttributeProfile, CostTable, OperationMix, Ranking};
use super::results::{Measurement, Recommendation, StudyResults, Verdict};
use super::{IndexConfiguration, BASELINE};
use std::collections::BTreeMap;
use std::fmt::Write;

/// The kind of a configuration name (`lazy:sync-insert` → `lazy`).
pub fn kind_of(configuration: &str) -> &str {
    configuration.split(':').next().unwrap_or(configuration)
}

fn verdict(
    claim: &str,
    source: &str,
    outcome: &str,
    evidence: String,
    numbers: &[(String, f64)],
) -> Verdict {
    Verdict {
        claim: claim.to_owned(),
        source: source.to_owned(),
        outcome: outcome.to_owned(),
        evidence,
        // JSON has no NaN or infinity.
        numbers: numbers
            .iter()
            .filter(|(_, value)| value.is_finite())
            .cloned()
            .collect(),
    }
}

fn not_measured(claim: &str, source: &str, why: &str) -> Verdict {
    verdict(claim, source, "not-measured", why.to_owned(), &[])
}

fn outcome(holds: bool) -> &'static str {
    if holds {
        "reproduced"
    } else {
        "differs"
    }
}

/// A filter over measurements.
#[derive(Clone, Copy, Default)]
struct Select<'a> {
    metric: &'a str,
    attribute: Option<&'a str>,
    op: Option<&'a str>,
    workload: Option<&'a str>,
    top_k: Option<&'a str>,
    selectivity: Option<u64>,
    slice: Option<u32>,
    tree: Option<&'a str>,
    bloom: Option<u32>,
    compression: Option<&'a str>,
}

impl Select<'_> {
    fn matches(&self, m: &Measurement) -> bool {
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
fn per_configuration(measurements: &[Measurement], select: Select<'_>) -> BTreeMap<String, f64> {
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
fn best_of_kind(values: &BTreeMap<String, f64>, kind: &str) -> Option<(String, f64)> {
    values
        .iter()
        .filter(|(name, _)| kind_of(name) == kind)
        .min_by(|a, b| a.1.total_cmp(b.1))
        .map(|(name, value)| (name.clone(), *value))
}

fn fmt_us(value: f64) -> String {
    if value >= 100.0 {
        format!("{value:.0} µs")
    } else {
        format!("{value:.1} µs")
    }
}

fn missing_kinds(values: &BTreeMap<String, f64>, kinds: &[&str]) -> Option<String> {
    let missing: Vec<&str> = kinds
        .iter()
        .copied()
        .filter(|kind| best_of_kind(values, kind).is_none())
        .collect();
    (!missing.is_empty()).then(|| format!("no measurement of {} in this run", missing.join(", ")))
}

/// `first` is lower than `second` (both kinds at their best): the shared shape of most claims.
fn compare_kinds(
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

fn attribute_paths(measurements: &[Measurement]) -> Vec<String> {
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

fn has_kind(configurations: &[IndexConfiguration], kind: &str) -> bool {
    configurations
        .iter()
        .any(|c| c.kind == kind && c.check_known().is_ok())
}

/// Experiment 1.
pub fn static_verdicts(
    measurements: &[Measurement],
    configurations: &[IndexConfiguration],
) -> Vec<Verdict> {
    let mut verdicts = Vec::new();
    let source = "LevelDB++ §5.2.1, Fig. 8c";
    let claim = "GET latency is the same for every index variant";
    let gets = per_configuration(
        measurements,
        Select {
            metric: "latency_p50",
            op: Some("GET"),
            ..Select::default()
        },
    );
    if gets.len() < 2 {
        verdicts.push(not_measured(
            claim,
            source,
            "fewer than two configurations measured",
        ));
    } else {
        let (low_name, low) = gets
            .iter()
            .min_by(|a, b| a.1.total_cmp(b.1))
            .map(|(n, v)| (n.clone(), *v))
            .unwrap_or_default();
        let (high_name, high) = gets
            .iter()
            .max_by(|a, b| a.1.total_cmp(b.1))
            .map(|(n, v)| (n.clone(), *v))
            .unwrap_or_default();
        let ratio = high / low.max(1e-9);
        verdicts.push(verdict(
            claim,
            source,
            outcome(ratio <= 1.5),
            format!(
                "median GET from {} ({low_name}) to {} ({high_name}): {ratio:.2}× (rule: at \
                 most 1.5×)",
                fmt_us(low),
                fmt_us(high)
            ),
            &gets.into_iter().collect::<Vec<_>>(),
        ));
    }
    let paths = attribute_paths(measurements);
    let baseline = per_configuration(
        measurements,
        Select {
            metric: "put_latency_mean",
            op: Some("PUT"),
            ..Select::default()
        },
    )
    .get(BASELINE)
    .copied();
    for path in &paths {
        let puts = per_configuration(
            measurements,
            Select {
                metric: "put_latency_mean",
                op: Some("PUT"),
                attribute: Some(path),
                ..Select::default()
            },
        );
        let mut overhead = puts.clone();
        if let Some(baseline) = baseline {
            for value in overhead.values_mut() {
                *value -= baseline;
            }
        }
        let claim =
            format!("Composite has the cheapest PUT among stand-alone indexes (index on {path})");
        let source = "LevelDB++ §5.2.1, Fig. 8b";
        let mut kinds: Vec<(String, f64)> = ["composite", "lazy", "eager"]
            .iter()
            .filter_map(|kind| best_of_kind(&overhead, kind))
            .collect();
        if best_of_kind(&overhead, "composite").is_none() || kinds.len() < 2 {
            verdicts.push(not_measured(
                &claim,
                source,
                "composite and another stand-alone kind are needed",
            ));
        } else {
            kinds.sort_by(|a, b| a.1.total_cmp(&b.1));
            let holds = kind_of(&kinds[0].0) == "composite";
            verdicts.push(verdict(
                &claim,
                source,
                outcome(holds),
                format!(
                    "mean PUT overhead over no index ({}): {}",
                    baseline.map_or_else(|| "baseline not measured".to_owned(), fmt_us),
                    kinds
                        .iter()
                        .map(|(name, value)| format!("{name} {}", fmt_us(*value)))
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
                &kinds,
            ));
        }
        let claim = format!("Embedded adds almost nothing to PUT cost (index on {path})");
        let source = "LevelDB++ §5.2.1, Fig. 8b";
        match (best_of_kind(&overhead, "embedded"), baseline) {
            (Some((name, extra)), Some(baseline)) => verdicts.push(verdict(
                &claim,
                source,
                outcome(extra <= 0.1 * baseline),
                format!(
                    "{name} adds {} to the {} of a PUT without index (rule: at most 10%)",
                    fmt_us(extra),
                    fmt_us(baseline)
                ),
                &[(name, extra), ("baseline".to_owned(), baseline)],
            )),
            _ => verdicts.push(not_measured(
                &claim,
                source,
                if has_kind(configurations, "embedded") {
                    "embedded or the baseline was not measured"
                } else {
                    "no embedded configuration in this build or run"
                },
            )),
        }
    }
    // Eager on the first attribute (UserID role): most expensive and growing.
    if let Some(path) = paths.first() {
        let claim = format!(
            "Eager is the most expensive index to maintain on the non-time-correlated {path} and \
             gets slower as the database grows"
        );
        let source = "LevelDB++ §5.2.1, Fig. 9c";
        let slices = |configuration: &str| -> Vec<f64> {
            let mut values: Vec<(u32, f64)> = measurements
                .iter()
                .filter(|m| {
                    m.metric == "put_latency_mean"
                        && m.configuration == configuration
                        && m.attribute.as_deref() == Some(path.as_str())
                        && m.slice.is_some()
                })
                .map(|m| (m.slice.unwrap_or(0), m.value))
                .collect();
            values.sort_by_key(|(slice, _)| *slice);
            values.into_iter().map(|(_, value)| value).collect()
        };
        let growth = |values: &[f64]| -> Option<f64> {
            if values.len() < 4 {
                return None;
            }
            let head = values[0].midpoint(values[1]);
            let tail = values[values.len() - 1].midpoint(values[values.len() - 2]);
            Some(tail / head.max(1e-9))
        };
        let puts = per_configuration(
            measurements,
            Select {
                metric: "put_latency_mean",
                op: Some("PUT"),
                attribute: Some(path),
                ..Select::default()
            },
        );
        match (
            best_of_kind(&puts, "eager"),
            best_of_kind(&puts, "composite"),
        ) {
            (Some((eager_name, eager)), Some((composite_name, composite))) => {
                let most = puts
                    .iter()
                    .filter(|(name, _)| matches!(kind_of(name), "composite" | "lazy" | "eager"))
                    .all(|(_, value)| *value <= eager);
                let eager_growth = growth(&slices(&eager_name)).unwrap_or(1.0);
                let composite_growth = growth(&slices(&composite_name)).unwrap_or(1.0);
                verdicts.push(verdict(
                    &claim,
                    source,
                    outcome(most && eager_growth > composite_growth),
                    format!(
                        "mean PUT {eager_name} {} vs {composite_name} {}; last/first slices: \
                         eager {eager_growth:.2}×, composite {composite_growth:.2}× (rule: eager \
                         highest and growing faster than composite)",
                        fmt_us(eager),
                        fmt_us(composite)
                    ),
                    &[
                        (eager_name, eager),
                        (composite_name, composite),
                        ("eager_growth".to_owned(), eager_growth),
                        ("composite_growth".to_owned(), composite_growth),
                    ],
                ));
            }
            _ => verdicts.push(not_measured(
                &claim,
                source,
                "eager and composite are needed",
            )),
        }
    }
    if let Some(path) = paths.get(1) {
        let claim = format!("Eager stays affordable on the time-correlated {path}");
        let source = "LevelDB++ §5.2.1, Fig. 9b";
        let puts = per_configuration(
            measurements,
            Select {
                metric: "put_latency_mean",
                op: Some("PUT"),
                attribute: Some(path),
                ..Select::default()
            },
        );
        match (
            best_of_kind(&puts, "eager"),
            best_of_kind(&puts, "composite"),
        ) {
            (Some((eager_name, eager)), Some((composite_name, composite))) => {
                let ratio = eager / composite.max(1e-9);
                verdicts.push(verdict(
                    &claim,
                    source,
                    outcome(ratio <= 2.0),
                    format!(
                        "mean PUT {eager_name} {} vs {composite_name} {} ({ratio:.2}×; rule: at \
                         most 2×)",
                        fmt_us(eager),
                        fmt_us(composite)
                    ),
                    &[(eager_name, eager), (composite_name, composite)],
                ));
            }
            _ => verdicts.push(not_measured(
                &claim,
                source,
                "eager and composite are needed",
            )),
        }
    }
    let claim = "Composite takes the least index space of the stand-alone indexes; Lazy the most";
    let source = "LevelDB++ §5.2.1, Fig. 8a";
    let index_bytes = per_configuration(
        measurements,
        Select {
            metric: "bytes_on_disk",
            tree: Some("index"),
            ..Select::default()
        },
    );
    match (
        best_of_kind(&index_bytes, "composite"),
        best_of_kind(&index_bytes, "lazy"),
        best_of_kind(&index_bytes, "eager"),
    ) {
        (Some((c_name, c)), Some((l_name, l)), eager) => {
            let mut holds = c < l;
            let mut numbers = vec![(c_name.clone(), c), (l_name.clone(), l)];
            let mut text = format!(
                "index bytes (mean over attributes): {c_name} {:.2} MiB, {l_name} {:.2} MiB",
                c / 1_048_576.0,
                l / 1_048_576.0
            );
            if let Some((e_name, e)) = eager {
                holds = holds && c < e && e <= l;
                let _ = write!(text, ", {e_name} {:.2} MiB", e / 1_048_576.0);
                numbers.push((e_name, e));
            }
            verdicts.push(verdict(claim, source, outcome(holds), text, &numbers));
        }
        _ => verdicts.push(not_measured(claim, source, "composite and lazy are needed")),
    }
    verdicts
}

/// Experiment 2.
pub fn query_verdicts(
    measurements: &[Measurement],
    configurations: &[IndexConfiguration],
) -> Vec<Verdict> {
    let mut verdicts = Vec::new();
    let paths = attribute_paths(measurements);
    let median = |path: &str, op: &str, top_k: &str, selectivity: Option<u64>| {
        per_configuration(
            measurements,
            Select {
                metric: "latency_p50",
                attribute: Some(path),
                op: Some(op),
                top_k: Some(top_k),
                selectivity,
                ..Select::default()
            },
        )
    };
    for path in &paths {
        let source = if Some(path) == paths.first() {
            "LevelDB++ §5.2.1, Fig. 10a"
        } else {
            "LevelDB++ §5.2.1, Fig. 11a"
        };
        verdicts.push(compare_kinds(
            &format!("Lazy beats Composite for top-10 LOOKUPs on {path}"),
            source,
            &median(path, "LOOKUP", "10", None),
            "lazy",
            "composite",
            "median top-10 LOOKUP",
        ));
        verdicts.push(compare_kinds(
            &format!("Composite beats Lazy for LOOKUPs without a top-K limit on {path}"),
            source,
            &median(path, "LOOKUP", "all", None),
            "composite",
            "lazy",
            "median LOOKUP returning all hits",
        ));
    }
    if let Some(path) = paths.first() {
        let selectivities: Vec<u64> = {
            let mut found: Vec<u64> = measurements
                .iter()
                .filter(|m| {
                    m.attribute.as_deref() == Some(path.as_str())
                        && m.op.as_deref() == Some("RANGELOOKUP")
                })
                .filter_map(|m| m.selectivity)
                .collect();
            found.sort_unstable();
            found.dedup();
            found
        };
        for (top_k, first, second, what) in [
            (
                "10",
                "lazy",
                "composite",
                "Lazy beats Composite for top-10 RANGELOOKUPs",
            ),
            (
                "all",
                "composite",
                "lazy",
                "Composite beats Lazy for RANGELOOKUPs without a top-K limit",
            ),
        ] {
            let claim = format!("{what} on {path}");
            let source = "LevelDB++ §5.2.1, Fig. 10b–c";
            let mut parts = Vec::new();
            let mut numbers = Vec::new();
            let mut holds = true;
            let mut measured = false;
            for &selectivity in &selectivities {
                let values = median(path, "RANGELOOKUP", top_k, Some(selectivity));
                if let (Some((a_name, a)), Some((b_name, b))) =
                    (best_of_kind(&values, first), best_of_kind(&values, second))
                {
                    measured = true;
                    holds = holds && a < b;
                    parts.push(format!(
                        "selectivity {selectivity}: {a_name} {} vs {b_name} {}",
                        fmt_us(a),
                        fmt_us(b)
                    ));
                    numbers.push((format!("{a_name} sel {selectivity}"), a));
                    numbers.push((format!("{b_name} sel {selectivity}"), b));
                }
            }
            if measured {
                verdicts.push(verdict(
                    &claim,
                    source,
                    outcome(holds),
                    format!("median latency, {}", parts.join("; ")),
                    &numbers,
                ));
            } else {
                verdicts.push(not_measured(
                    &claim,
                    source,
                    "lazy and composite are needed",
                ));
            }
        }
    }
    if let Some(path) = paths.get(1) {
        let claim = format!(
            "Embedded (zone maps) answers RANGELOOKUPs on the time-correlated {path} fastest"
        );
        let source = "LevelDB++ §5.2.1, Fig. 11b–c";
        let values = median(path, "RANGELOOKUP", "10", Some(1));
        match best_of_kind(&values, "embedded") {
            Some((name, value)) => {
                let best_other = values
                    .iter()
                    .filter(|(other, _)| kind_of(other) != "embedded")
                    .min_by(|a, b| a.1.total_cmp(b.1));
                let holds = best_other.is_none_or(|(_, other)| value <= *other);
                let mut numbers = vec![(name.clone(), value)];
                let mut text = format!("median top-10 RANGELOOKUP: {name} {}", fmt_us(value));
                if let Some((other_name, other)) = best_other {
                    let _ = write!(text, ", best other {other_name} {}", fmt_us(*other));
                    numbers.push((other_name.clone(), *other));
                }
                verdicts.push(verdict(&claim, source, outcome(holds), text, &numbers));
            }
            None => verdicts.push(not_measured(
                &claim,
                source,
                if has_kind(configurations, "embedded") {
                    "embedded was not measured in this run"
                } else {
                    "no embedded configuration in this build or run"
                },
            )),
        }
    }
    verdicts
}

/// Experiment 3.
pub fn mixed_verdicts(
    measurements: &[Measurement],
    configurations: &[IndexConfiguration],
) -> Vec<Verdict> {
    let mut verdicts = Vec::new();
    let whole = |workload: &str, op: &str| {
        per_configuration(
            measurements,
            Select {
                metric: "latency_mean",
                workload: Some(workload),
                op: Some(op),
                ..Select::default()
            },
        )
    };
    for workload in ["write-heavy", "read-heavy"] {
        let claim = format!("Lazy has the lowest mean latency per operation ({workload})");
        let source = "LevelDB++ §5.2.2, Fig. 12";
        let values = whole(workload, "ALL");
        let contenders: BTreeMap<String, f64> = values
            .into_iter()
            .filter(|(name, _)| matches!(kind_of(name), "lazy" | "composite" | "embedded"))
            .collect();
        match best_of_kind(&contenders, "lazy") {
            Some((lazy_name, lazy)) if contenders.len() > 1 => {
                let holds = contenders
                    .iter()
                    .filter(|(name, _)| kind_of(name) != "lazy")
                    .all(|(_, value)| lazy <= *value);
                verdicts.push(verdict(
                    &claim,
                    source,
                    outcome(holds),
                    format!(
                        "mean µs per operation (the paper compared Lazy, Composite, Embedded): {}",
                        contenders
                            .iter()
                            .map(|(name, value)| format!("{name} {}", fmt_us(*value)))
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                    &contenders
                        .iter()
                        .map(|(n, v)| (n.clone(), *v))
                        .chain(std::iter::once((format!("best lazy {lazy_name}"), lazy)))
                        .collect::<Vec<_>>(),
                ));
            }
            _ => verdicts.push(not_measured(
                &claim,
                source,
                "lazy and another kind are needed",
            )),
        }
    }
    {
        let claim = "Composite is slightly better than Lazy in the update-heavy mix as the \
                     database grows";
        let source = "LevelDB++ §5.2.2, Fig. 12c";
        let late = |kind: &str| -> Option<(String, f64)> {
            let mut by_configuration: BTreeMap<String, (f64, u32)> = BTreeMap::new();
            for m in measurements.iter().filter(|m| {
                m.metric == "latency_mean"
                    && m.workload.as_deref() == Some("update-heavy")
                    && m.op.as_deref() == Some("ALL")
                    && m.slice.is_some_and(|slice| slice >= 8)
                    && kind_of(&m.configuration) == kind
            }) {
                let entry = by_configuration
                    .entry(m.configuration.clone())
                    .or_insert((0.0, 0));
                entry.0 += m.value;
                entry.1 += 1;
            }
            by_configuration
                .into_iter()
                .map(|(name, (sum, count))| (name, sum / f64::from(count)))
                .min_by(|a, b| a.1.total_cmp(&b.1))
        };
        match (late("composite"), late("lazy")) {
            (Some((c_name, c)), Some((l_name, l))) => verdicts.push(verdict(
                claim,
                source,
                outcome(c < l),
                format!(
                    "mean µs per operation over the last three tenths: {c_name} {}, {l_name} {}",
                    fmt_us(c),
                    fmt_us(l)
                ),
                &[(c_name, c), (l_name, l)],
            )),
            _ => verdicts.push(not_measured(claim, source, "composite and lazy are needed")),
        }
    }
    {
        let claim = "Lazy LOOKUPs (top-10) beat Composite LOOKUPs in every mix";
        let source = "LevelDB++ §5.2.2, Figures 13c–15c";
        let mut parts = Vec::new();
        let mut numbers = Vec::new();
        let mut holds = true;
        for workload in ["write-heavy", "read-heavy", "update-heavy"] {
            let values = whole(workload, "LOOKUP");
            if let (Some((l_name, l)), Some((c_name, c))) = (
                best_of_kind(&values, "lazy"),
                best_of_kind(&values, "composite"),
            ) {
                holds = holds && l < c;
                parts.push(format!(
                    "{workload}: {l_name} {} vs {c_name} {}",
                    fmt_us(l),
                    fmt_us(c)
                ));
                numbers.push((format!("{workload} {l_name}"), l));
                numbers.push((format!("{workload} {c_name}"), c));
            }
        }
        if parts.is_empty() {
            verdicts.push(not_measured(claim, source, "lazy and composite are needed"));
        } else {
            verdicts.push(verdict(
                claim,
                source,
                outcome(holds),
                format!(
                    "mean LOOKUP latency (the paper counted disk I/O), {}",
                    parts.join("; ")
                ),
                &numbers,
            ));
        }
    }
    {
        let claim = "GET costs the same for every index variant in the mixed workloads";
        let source = "LevelDB++ §5.2.2, Figures 13b–15b";
        let mut worst: Option<(String, f64)> = None;
        let mut numbers = Vec::new();
        for workload in ["write-heavy", "read-heavy", "update-heavy"] {
            let values = whole(workload, "GET");
            if values.len() < 2 {
                continue;
            }
            let low = values.values().copied().fold(f64::INFINITY, f64::min);
            let high = values.values().copied().fold(0.0, f64::max);
            let ratio = high / low.max(1e-9);
            numbers.push((format!("{workload} max/min"), ratio));
            if worst.as_ref().is_none_or(|(_, r)| ratio > *r) {
                worst = Some((workload.to_owned(), ratio));
            }
        }
        match worst {
            Some((workload, ratio)) => verdicts.push(verdict(
                claim,
                source,
                outcome(ratio <= 1.5),
                format!(
                    "largest spread of mean GET latency across configurations: {ratio:.2}× \
                     ({workload}; rule: at most 1.5×)"
                ),
                &numbers,
            )),
            None => verdicts.push(not_measured(claim, source, "two configurations are needed")),
        }
    }
    let _ = configurations;
    verdicts
}

/// Experiment 4.
pub fn bloom_compression_verdicts(
    measurements: &[Measurement],
    configurations: &[IndexConfiguration],
    default_bits: u32,
) -> Vec<Verdict> {
    let _ = configurations;
    let mut verdicts = Vec::new();
    let mut bits: Vec<u32> = measurements
        .iter()
        .filter(|m| m.compression.as_deref() == Some("snappy"))
        .filter_map(|m| m.bloom_bits_per_key)
        .collect();
    bits.sort_unstable();
    bits.dedup();
    let names: Vec<String> = {
        let mut names: Vec<String> = measurements
            .iter()
            .map(|m| m.configuration.clone())
            .collect();
        names.sort();
        names.dedup();
        names
    };
    let value = |name: &str, metric: &str, op: Option<&str>, bits: u32, compression: &str| {
        measurements
            .iter()
            .find(|m| {
                m.configuration == name
                    && m.metric == metric
                    && m.op.as_deref() == op
                    && m.bloom_bits_per_key == Some(bits)
                    && m.compression.as_deref() == Some(compression)
            })
            .map(|m| m.value)
    };
    {
        let claim = "The database grows with the bloom filter's bits per key";
        let source = "LevelDB++ App. C.1, Table 8";
        if bits.len() < 2 || names.is_empty() {
            verdicts.push(not_measured(
                claim,
                source,
                "fewer than two bits-per-key values",
            ));
        } else {
            let (low, high) = (bits[0], bits[bits.len() - 1]);
            let mut numbers = Vec::new();
            let mut holds = true;
            for name in &names {
                if let (Some(a), Some(b)) = (
                    value(name, "bytes_on_disk", None, low, "snappy"),
                    value(name, "bytes_on_disk", None, high, "snappy"),
                ) {
                    holds = holds && b > a;
                    numbers.push((format!("{name} {low} bits"), a));
                    numbers.push((format!("{name} {high} bits"), b));
                }
            }
            verdicts.push(verdict(
                claim,
                source,
                outcome(holds && !numbers.is_empty()),
                format!(
                    "bytes on disk at {low} vs {high} bits per key, for every configuration \
                     (Sift's filters are on primary keys)"
                ),
                &numbers,
            ));
        }
    }
    {
        let claim = "LOOKUP latency falls as bits per key rise from few, then rises again \
                     for very large filters";
        let source = "LevelDB++ App. C.1, Table 8";
        if bits.len() < 3 {
            verdicts.push(not_measured(
                claim,
                source,
                "fewer than three bits-per-key values",
            ));
        } else {
            let mut falls = 0;
            let mut rises = 0;
            let mut counted = 0;
            let mut numbers = Vec::new();
            for name in &names {
                let curve: Vec<(u32, f64)> = bits
                    .iter()
                    .filter_map(|&b| {
                        value(name, "latency_mean", Some("LOOKUP"), b, "snappy").map(|v| (b, v))
                    })
                    .collect();
                if curve.len() < 3 {
                    continue;
                }
                counted += 1;
                let (best_bits, best) = curve
                    .iter()
                    .copied()
                    .min_by(|a, b| a.1.total_cmp(&b.1))
                    .unwrap_or((0, 0.0));
                let first = curve[0].1;
                let last = curve[curve.len() - 1].1;
                if best < first * 0.95 {
                    falls += 1;
                }
                if last > best * 1.05 && best_bits != curve[curve.len() - 1].0 {
                    rises += 1;
                }
                numbers.push((format!("{name} best bits"), f64::from(best_bits)));
                numbers.push((format!("{name} {} bits µs", curve[0].0), first));
                numbers.push((format!("{name} best µs"), best));
            }
            if counted == 0 {
                verdicts.push(not_measured(claim, source, "no LOOKUP curve measured"));
            } else {
                verdicts.push(verdict(
                    claim,
                    source,
                    outcome(falls * 2 > counted && rises * 2 > counted),
                    format!(
                        "mean top-10 LOOKUP: falls by more than 5% from the fewest bits in \
                         {falls} of {counted} configurations, rises again by more than 5% after \
                         its best in {rises} of {counted} (rule: both in a majority). Sift's \
                         filters are on primary keys, so they serve the validation reads; the \
                         paper's were on secondary values (Embedded)"
                    ),
                    &numbers,
                ));
            }
        }
    }
    let lookup_p50 = |name: &str, compression: &str| {
        value(
            name,
            "latency_p50",
            Some("LOOKUP"),
            default_bits,
            compression,
        )
    };
    {
        let claim = "Compression does not change the ranking of index variants";
        let source = "LevelDB++ App. C.2, Fig. 18";
        let mut with: Vec<(String, f64)> = names
            .iter()
            .filter_map(|n| lookup_p50(n, "snappy").map(|v| (n.clone(), v)))
            .collect();
        let mut without: Vec<(String, f64)> = names
            .iter()
            .filter_map(|n| lookup_p50(n, "none").map(|v| (n.clone(), v)))
            .collect();
        if with.len() < 2 || without.len() != with.len() {
            verdicts.push(not_measured(
                claim,
                source,
                "two configurations with both settings are needed",
            ));
        } else {
            with.sort_by(|a, b| a.1.total_cmp(&b.1));
            without.sort_by(|a, b| a.1.total_cmp(&b.1));
            let kinds_with: Vec<&str> = with.iter().map(|(n, _)| kind_of(n)).collect();
            let kinds_without: Vec<&str> = without.iter().map(|(n, _)| kind_of(n)).collect();
            let mut deduped_with = kinds_with.clone();
            deduped_with.dedup();
            let mut deduped_without = kinds_without.clone();
            deduped_without.dedup();
            verdicts.push(verdict(
                claim,
                source,
                outcome(deduped_with == deduped_without),
                format!(
                    "kinds by median top-10 LOOKUP, snappy: {}; uncompressed: {}",
                    deduped_with.join(" < "),
                    deduped_without.join(" < ")
                ),
                &with
                    .iter()
                    .map(|(n, v)| (format!("{n} snappy"), *v))
                    .chain(without.iter().map(|(n, v)| (format!("{n} none"), *v)))
                    .collect::<Vec<_>>(),
            ));
        }
    }
    {
        let claim = "Queries are slightly slower without compression";
        let source = "LevelDB++ App. C.2, Fig. 18";
        let ratios: Vec<(String, f64)> = names
            .iter()
            .filter_map(|n| match (lookup_p50(n, "snappy"), lookup_p50(n, "none")) {
                (Some(a), Some(b)) => Some((n.clone(), b / a.max(1e-9))),
                _ => None,
            })
            .collect();
        if ratios.is_empty() {
            verdicts.push(not_measured(
                claim,
                source,
                "no configuration with both settings",
            ));
        } else {
            let mean = ratios.iter().map(|(_, r)| r).sum::<f64>() / ratios.len() as f64;
            verdicts.push(verdict(
                claim,
                source,
                outcome(mean > 1.0),
                format!(
                    "median top-10 LOOKUP uncompressed / snappy, mean over configurations: \
                     {mean:.2}× (rule: above 1)"
                ),
                &ratios,
            ));
        }
    }
    {
        let claim = "PUT cost is almost identical with and without compression";
        let source = "LevelDB++ App. C.2, Fig. 19";
        let ratios: Vec<(String, f64)> = names
            .iter()
            .filter_map(|n| {
                match (
                    value(n, "put_latency_mean", Some("PUT"), default_bits, "snappy"),
                    value(n, "put_latency_mean", Some("PUT"), default_bits, "none"),
                ) {
                    (Some(a), Some(b)) => Some((n.clone(), b / a.max(1e-9))),
                    _ => None,
                }
            })
            .collect();
        if ratios.is_empty() {
            verdicts.push(not_measured(
                claim,
                source,
                "no configuration with both settings",
            ));
        } else {
            let holds = ratios.iter().all(|(_, r)| (0.8..=1.25).contains(r));
            verdicts.push(verdict(
                claim,
                source,
                outcome(holds),
                format!(
                    "mean PUT uncompressed / snappy per configuration: {} (rule: all within \
                     0.8–1.25)",
                    ratios
                        .iter()
                        .map(|(n, r)| format!("{n} {r:.2}×"))
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
                &ratios,
            ));
        }
    }
    verdicts
}

/// Table 7b mixes as (name, PUT, GET, LOOKUP, UPDATE) fractions.
const MIXES: [(&str, f64, f64, f64, f64); 3] = [
    ("write-heavy", 0.80, 0.15, 0.05, 0.0),
    ("read-heavy", 0.20, 0.70, 0.10, 0.0),
    ("update-heavy", 0.40, 0.15, 0.05, 0.40),
];

/// The recommendation table from experiments 1–3 of `results`: every row ranks the
/// configurations with the cost model shared with `sift advise` (`super::cost_model`), on the
/// figures measured for that attribute; where experiment 3 measured the same mix, the row says
/// what the measurement chose.
pub fn recommendations(results: &StudyResults) -> Vec<Recommendation> {
    let table = CostTable::from_results(results, "this run");
    let mixed_measurements = results
        .experiments
        .iter()
        .find(|e| e.id == "mixed")
        .map(|e| e.measurements.as_slice())
        .unwrap_or_default();
    let mut rows = Vec::new();
    for attribute in &results.configuration.data.attributes {
        let path = attribute.path.as_str();
        let measured_here = CostTable {
            source: table.source.clone(),
            entries: table
                .entries
                .iter()
                .filter(|e| e.measured_on == path)
                .cloned()
                .collect(),
        };
        let profile = |lookup: f64, range: f64, top_k: Option<u64>| AttributeProfile {
            path: path.to_owned(),
            time_correlated: attribute.role == "CreationTime",
            lookup_fraction: lookup,
            range_fraction: range,
            top_k,
            lookup_matches: None,
            range_matches: None,
            read_your_writes: false,
            unique: false,
        };
        for (name, put, get, lookup, update) in MIXES {
            let mix = OperationMix {
                put,
                update,
                get,
                lookup,
                ..OperationMix::default()
            };
            let ranking = cost_model::rank(&measured_here, &mix, &profile(lookup, 0.0, Some(10)));
            let mut row = recommend(
                path,
                name,
                &ranking,
                format!(
                    "model (cost_model.rs, as sift advise): Table 7b mix ({:.0}% PUT, {:.0}% GET, \
                     {:.0}% top-10 LOOKUP, {:.0}% update) × mean latencies of experiments 1–3",
                    put * 100.0,
                    get * 100.0,
                    lookup * 100.0,
                    update * 100.0
                ),
            );
            if attribute.role == "UserID" {
                let measured = per_configuration(
                    mixed_measurements,
                    Select {
                        metric: "latency_mean",
                        workload: Some(name),
                        op: Some("ALL"),
                        ..Select::default()
                    },
                );
                if let Some((best, cost)) = measured.iter().min_by(|a, b| a.1.total_cmp(b.1)) {
                    let _ = write!(
                        row.why,
                        "; experiment 3 measured this mix: {best} best at {} µs per operation",
                        round2(*cost)
                    );
                    if let Some(chosen) = row.best.as_ref().and_then(|b| measured.get(b)) {
                        let _ = write!(
                            row.why,
                            " (the model's choice measured {} µs)",
                            round2(*chosen)
                        );
                    }
                }
            }
            rows.push(row);
        }
        for (name, mix, top_k, what) in [
            (
                "LOOKUP top-10 only",
                OperationMix {
                    lookup: 1.0,
                    ..OperationMix::default()
                },
                Some(10),
                "mean top-10 LOOKUP latency (experiment 2)",
            ),
            (
                "LOOKUP all hits only",
                OperationMix {
                    lookup: 1.0,
                    ..OperationMix::default()
                },
                None,
                "mean LOOKUP latency without limit (experiment 2)",
            ),
            (
                "RANGELOOKUP top-10 only",
                OperationMix {
                    range: 1.0,
                    ..OperationMix::default()
                },
                Some(10),
                "top-10 RANGELOOKUP latency on the widest measured range (experiment 2)",
            ),
            (
                "PUT only (ingestion)",
                OperationMix {
                    put: 1.0,
                    ..OperationMix::default()
                },
                None,
                "mean PUT latency (experiment 1)",
            ),
        ] {
            let ranking =
                cost_model::rank(&measured_here, &mix, &profile(mix.lookup, mix.range, top_k));
            rows.push(recommend(
                path,
                name,
                &ranking,
                format!("model (cost_model.rs, as sift advise): {what}"),
            ));
        }
    }
    rows
}

fn recommend(path: &str, workload: &str, ranking: &Ranking, basis: String) -> Recommendation {
    let best = ranking.ranked.first();
    let runner_up = ranking.ranked.get(1);
    Recommendation {
        attribute: path.to_owned(),
        workload: workload.to_owned(),
        best: best.map(|c| c.configuration.clone()),
        cost_us_per_op: best.map(|c| round2(c.cost_us_per_op)),
        runner_up: runner_up.map(|c| c.configuration.clone()),
        runner_up_cost_us_per_op: runner_up.map(|c| round2(c.cost_us_per_op)),
        basis,
        why: if best.is_none() {
            "not measured: run experiments 1–3".to_owned()
        } else {
            cost_model::explain(ranking)
        },
    }
}

fn round2(value: f64) -> f64 {
    (value * 100.0).round() / 100.0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(configuration: &str, attribute: &str, op: &str, top_k: &str, value: f64) -> Measurement {
        Measurement {
            attribute: Some(attribute.to_owned()),
            op: Some(op.to_owned()),
            top_k: Some(top_k.to_owned()),
            ..Measurement::new(configuration, "latency_p50", "us", value)
        }
    }

    #[test]
    fn lookup_claims_follow_the_numbers() {
        let configurations: Vec<IndexConfiguration> = [
            "composite:sync-insert",
            "lazy:sync-insert",
            "lazy:sync-full",
        ]
        .iter()
        .map(|t| t.parse().unwrap())
        .collect();
        let measurements = vec![
            m("composite:sync-insert", "user.id", "LOOKUP", "10", 50.0),
            m("lazy:sync-insert", "user.id", "LOOKUP", "10", 80.0),
            // The best lazy configuration decides.
            m("lazy:sync-full", "user.id", "LOOKUP", "10", 20.0),
            m("composite:sync-insert", "user.id", "LOOKUP", "all", 500.0),
            m("lazy:sync-insert", "user.id", "LOOKUP", "all", 400.0),
        ];
        let verdicts = query_verdicts(&measurements, &configurations);
        let top10 = verdicts
            .iter()
            .find(|v| {
                v.claim
                    .starts_with("Lazy beats Composite for top-10 LOOKUPs")
            })
            .unwrap();
        assert_eq!(top10.outcome, "reproduced", "{top10:?}");
        assert!(
            top10.evidence.contains("lazy:sync-full"),
            "{}",
            top10.evidence
        );
        assert!((top10.numbers["lazy:sync-full"] - 20.0).abs() < 1e-9);
        let all = verdicts
            .iter()
            .find(|v| v.claim.starts_with("Composite beats Lazy for LOOKUPs"))
            .unwrap();
        assert_eq!(all.outcome, "differs");
        // No embedded kind: its claims are not measured, not failed.
        assert!(verdicts.iter().any(|v| v.outcome == "not-measured"));
    }

    #[test]
    fn get_claim_uses_a_fixed_spread_rule() {
        let get = |configuration: &str, value: f64| Measurement {
            op: Some("GET".to_owned()),
            attribute: Some("user.id".to_owned()),
            ..Measurement::new(configuration, "latency_p50", "us", value)
        };
        let same = static_verdicts(&[get("none", 10.0), get("lazy", 12.0)], &[]);
        assert_eq!(same[0].outcome, "reproduced");
        let apart = static_verdicts(&[get("none", 10.0), get("lazy", 40.0)], &[]);
        assert_eq!(apart[0].outcome, "differs");
        assert!(apart[0].evidence.contains("4.00×"), "{}", apart[0].evidence);
    }

    #[test]
    fn recommendation_rows_use_the_shared_cost_model() {
        use crate::study::results::{
            AttributeDescription, DataDescription, ExperimentResult, MachineInfo,
            StudyConfiguration,
        };
        let labelled = |configuration: &str, metric: &str, op: &str, value: f64| Measurement {
            attribute: Some("user.id".to_owned()),
            op: Some(op.to_owned()),
            ..Measurement::new(configuration, metric, "us", value)
        };
        let query = |configuration: &str, top_k: &str, latency: f64, hits: f64| {
            [
                Measurement {
                    top_k: Some(top_k.to_owned()),
                    ..labelled(configuration, "latency_mean", "LOOKUP", latency)
                },
                Measurement {
                    top_k: Some(top_k.to_owned()),
                    ..labelled(configuration, "hits_per_query", "LOOKUP", hits)
                },
            ]
        };
        let experiment = |id: &str, measurements: Vec<Measurement>| ExperimentResult {
            id: id.to_owned(),
            number: 1,
            title: String::new(),
            status: "measured".to_owned(),
            note: String::new(),
            paper: String::new(),
            method: String::new(),
            duration_s: 0.0,
            measurements,
            verdicts: Vec::new(),
            figures: Vec::new(),
        };
        let static_ = vec![
            labelled("composite:sync-insert", "put_latency_mean", "PUT", 10.0),
            labelled("lazy:sync-insert", "put_latency_mean", "PUT", 12.0),
            labelled("composite:sync-insert", "latency_mean", "GET", 5.0),
            labelled("lazy:sync-insert", "latency_mean", "GET", 5.0),
        ];
        let mut queries = Vec::new();
        queries.extend(query("composite:sync-insert", "10", 100.0, 10.0));
        queries.extend(query("composite:sync-insert", "all", 200.0, 50.0));
        queries.extend(query("lazy:sync-insert", "10", 40.0, 10.0));
        queries.extend(query("lazy:sync-insert", "all", 400.0, 50.0));
        let results = StudyResults {
            schema_version: 1,
            tool: "sift study".to_owned(),
            machine: MachineInfo {
                cpu_count: 2,
                os: String::new(),
                arch: String::new(),
                rustc_version: None,
                sift_version: String::new(),
                git_commit: None,
                date_utc: String::new(),
            },
            configuration: StudyConfiguration {
                preset: "tiny".to_owned(),
                seed: 1,
                data: DataDescription {
                    source: "tweets".to_owned(),
                    path: None,
                    primary_key: "id".to_owned(),
                    attributes: vec![AttributeDescription {
                        path: "user.id".to_owned(),
                        value_type: "int".to_owned(),
                        role: "UserID".to_owned(),
                        range_unit: "users".to_owned(),
                    }],
                },
                index_configurations: Vec::new(),
                sizes: BTreeMap::new(),
                engine: BTreeMap::new(),
                scaled_down: Vec::new(),
                fingerprint: String::new(),
            },
            experiments: vec![
                experiment("static", static_),
                experiment("queries", queries),
            ],
            recommendations: Vec::new(),
        };
        let rows = recommendations(&results);
        let row = |workload: &str| rows.iter().find(|r| r.workload == workload).unwrap();
        // Top-10: lazy 40 vs composite 100 µs; all hits: composite 200 vs lazy 400 µs.
        assert_eq!(
            row("LOOKUP top-10 only").best.as_deref(),
            Some("lazy:sync-insert")
        );
        assert_eq!(
            row("LOOKUP all hits only").best.as_deref(),
            Some("composite:sync-insert")
        );
        assert_eq!(row("LOOKUP all hits only").cost_us_per_op, Some(200.0));
        assert!(row("LOOKUP all hits only").why.contains("2.00× cheaper"));
        assert_eq!(
            row("PUT only (ingestion)").best.as_deref(),
            Some("composite:sync-insert")
        );
        // Write-heavy (80% PUT, 15% GET, 5% top-10 LOOKUP): composite 8 + 0.75 + 5 = 13.75,
        // lazy 9.6 + 0.75 + 2 = 12.35 µs per operation.
        let write_heavy = row("write-heavy");
        assert_eq!(write_heavy.best.as_deref(), Some("lazy:sync-insert"));
        assert_eq!(write_heavy.cost_us_per_op, Some(12.35));
        assert!(write_heavy.basis.contains("sift advise"));
        // Ranges were not measured: nothing to recommend, and it says so.
        assert!(row("RANGELOOKUP top-10 only").best.is_none());
    }
}
