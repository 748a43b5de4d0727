//! The claims of experiment 3 (Table 7b mixed workloads) checked against its measurements.

use crate::results::{Measurement, Verdict};
use crate::verdict::{
    best_of_kind, fmt_us, kind_of, not_measured, outcome, per_configuration, verdict, Select,
};
use crate::IndexConfiguration;
use std::collections::BTreeMap;

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
