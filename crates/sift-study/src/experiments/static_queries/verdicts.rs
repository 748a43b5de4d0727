//! The claims of experiments 1 (static workload) and 2 (LOOKUP / RANGELOOKUP) checked against
//! their measurements.

use crate::results::{Measurement, Verdict};
use crate::verdict::{
    attribute_paths, best_of_kind, compare_kinds, fmt_us, has_kind, kind_of, not_measured, outcome,
    per_configuration, verdict, Select,
};
use crate::{IndexConfiguration, BASELINE};
use std::fmt::Write;

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
}
