//! The claims of experiment 5 (NEXT §6) checked against its measurements.

use super::bench::ValueDistribution;
use super::Pick;
use crate::results::{Measurement, Verdict};
use crate::verdict::{kind_of, not_measured, outcome, verdict};
use std::collections::BTreeMap;

pub(crate) fn of_kind(values: &BTreeMap<String, f64>, kind: &str) -> Option<(String, f64)> {
    values
        .iter()
        .find(|(name, _)| kind_of(name) == kind)
        .map(|(name, value)| (name.clone(), *value))
}

pub(crate) fn us(value: f64) -> String {
    if value >= 100.0 {
        format!("{value:.0} µs")
    } else {
        format!("{value:.1} µs")
    }
}

/// "next is faster than X at window W" on `attribute`, comparing medians.
pub(crate) fn window_verdict(
    ms: &[Measurement],
    claim: &str,
    source: &str,
    suite: &str,
    attribute: &str,
    window: &str,
    against: &[&str],
) -> Verdict {
    let medians = Pick {
        metric: "latency_p50",
        suite,
        attribute: Some(attribute),
        window: Some(window),
        op: Some("RANGELOOKUP"),
        ..Pick::default()
    }
    .per_configuration(ms);
    let Some((next_name, next)) = of_kind(&medians, "next") else {
        return not_measured(
            claim,
            source,
            &format!("next was not measured on {window} windows of {attribute}"),
        );
    };
    let others: Vec<(String, f64)> = against
        .iter()
        .filter_map(|kind| of_kind(&medians, kind))
        .collect();
    if others.is_empty() {
        return not_measured(
            claim,
            source,
            &format!("{} not measured on {attribute}", against.join(", ")),
        );
    }
    let holds = others.iter().all(|(_, value)| next < *value);
    let mut numbers = vec![(format!("{next_name} p50 us"), next)];
    let mut parts = Vec::new();
    for (name, value) in &others {
        numbers.push((format!("{name} p50 us"), *value));
        numbers.push((format!("{next_name}/{name}"), next / value.max(1e-9)));
        parts.push(format!(
            "{name} {} ({:.2}×)",
            us(*value),
            next / value.max(1e-9)
        ));
    }
    verdict(
        claim,
        source,
        outcome(holds),
        format!(
            "median latency of {window} windows on {attribute}: {next_name} {} vs {}",
            us(next),
            parts.join(", ")
        ),
        &numbers,
    )
}

/// The verdicts of experiment 5, computed from its measurements.
pub fn verdicts(ms: &[Measurement]) -> Vec<Verdict> {
    let score = super::score_path(ms);
    let mut out = vec![
        window_verdict(
            ms,
            "NEXT answers small windows faster than a composite index",
            "NEXT §6.2.1, Table 4",
            "windows",
            &score,
            "small",
            &["composite"],
        ),
        window_verdict(
            ms,
            "NEXT answers medium windows faster than every other index",
            "NEXT §6.2.1, Tables 3–4",
            "windows",
            &score,
            "medium",
            &["composite", "sst-local", "memory"],
        ),
        window_verdict(
            ms,
            "NEXT answers medium spatial windows faster than the stand-alone index",
            "NEXT §6.2.1, Table 4 (spatial)",
            "geo",
            "place.coordinates",
            "medium",
            &["composite"],
        ),
    ];
    // Global index against the data (issue 4's target: at most 2%).
    let claim = "NEXT's global index stays small relative to the data";
    let source = "NEXT §6.7; issue 4 target ≤ 2% of the data";
    let percent = Pick {
        metric: "global_index_percent_of_data",
        suite: "windows",
        ..Pick::default()
    }
    .per_configuration(ms);
    out.push(match of_kind(&percent, "next") {
        Some((name, value)) => {
            let bytes = Pick {
                metric: "global_index_bytes",
                suite: "windows",
                ..Pick::default()
            }
            .per_configuration(ms)
            .get(&name)
            .copied()
            .unwrap_or(f64::NAN);
            verdict(
                claim,
                source,
                outcome(value <= 2.0),
                format!(
                    "{name}: global index {:.1} KiB = {value:.3}% of the data tree on disk \
                     (rule: at most 2%)",
                    bytes / 1024.0
                ),
                &[
                    ("global index percent of data".to_owned(), value),
                    ("global index bytes".to_owned(), bytes),
                ],
            )
        }
        None => not_measured(claim, source, "next was not measured"),
    });
    // δ: the best split against none, medium windows.
    let claim = "The value-aware split (δ) lowers NEXT's query latency";
    let source = "NEXT §6.4, Fig. 10 (up to 25%)";
    let by_delta: Vec<(Option<f64>, f64)> = ms
        .iter()
        .filter(|m| {
            Pick {
                metric: "latency_p50",
                suite: "delta",
                window: Some("medium"),
                ..Pick::default()
            }
            .matches(m)
        })
        .map(|m| (m.split_delta, m.value))
        .collect();
    let without = by_delta.iter().find(|(d, _)| d.is_none()).map(|(_, v)| *v);
    let best = by_delta
        .iter()
        .filter(|(d, _)| d.is_some())
        .min_by(|a, b| a.1.total_cmp(&b.1))
        .copied();
    out.push(match (without, best) {
        (Some(without), Some((Some(delta), with))) => verdict(
            claim,
            source,
            outcome(with < without),
            format!(
                "median medium-window latency: no split {}, best δ = {delta:e}: {} ({:+.1}%)",
                us(without),
                us(with),
                100.0 * (with / without.max(1e-9) - 1.0)
            ),
            &[
                ("no split p50 us".to_owned(), without),
                ("best delta".to_owned(), delta),
                ("best delta p50 us".to_owned(), with),
            ],
        ),
        _ => not_measured(claim, source, "the δ sweep was not measured"),
    });
    // Skew: next (either δ) against composite, per distribution.
    let claim = "NEXT beats the stand-alone index on range windows for every value distribution";
    let source = "NEXT §6.5, Fig. 11a";
    let mut rows = Vec::new();
    let mut numbers = Vec::new();
    let mut holds = true;
    for distribution in ValueDistribution::PAPER {
        let name = distribution.to_string();
        let medians: Vec<(&Measurement, f64)> = ms
            .iter()
            .filter(|m| {
                Pick {
                    metric: "latency_p50",
                    suite: "skew",
                    window: Some("medium"),
                    distribution: Some(&name),
                    ..Pick::default()
                }
                .matches(m)
            })
            .map(|m| (m, m.value))
            .collect();
        let best_next = medians
            .iter()
            .filter(|(m, _)| kind_of(&m.configuration) == "next")
            .map(|(_, v)| *v)
            .fold(f64::INFINITY, f64::min);
        let composite = medians
            .iter()
            .find(|(m, _)| kind_of(&m.configuration) == "composite")
            .map(|(_, v)| *v);
        if let (true, Some(composite)) = (best_next.is_finite(), composite) {
            holds &= best_next < composite;
            rows.push(format!(
                "{name}: next {} vs composite {}",
                us(best_next),
                us(composite)
            ));
            numbers.push((format!("{name} next p50 us"), best_next));
            numbers.push((format!("{name} composite p50 us"), composite));
        }
    }
    out.push(if rows.is_empty() {
        not_measured(claim, source, "the skew suite was not measured")
    } else {
        verdict(
            claim,
            source,
            outcome(holds),
            format!(
                "median medium-window latency (next: the better of no split and δ): {}",
                rows.join("; ")
            ),
            &numbers,
        )
    });
    // Two indexes: PUT cost close to the stand-alone index (within 25%).
    let claim = "With two indexes, NEXT's PUT cost stays close to the stand-alone index's";
    let source = "NEXT §6.6, Table 5 (17.1 vs 15.2 µs)";
    let puts = Pick {
        metric: "put_latency_mean",
        suite: "two-indexes",
        ..Pick::default()
    }
    .per_configuration(ms);
    out.push(
        match (of_kind(&puts, "next"), of_kind(&puts, "composite")) {
            (Some((next_name, next)), Some((composite_name, composite))) => verdict(
                claim,
                source,
                outcome(next <= 1.25 * composite),
                format!(
                    "mean PUT latency with two indexes: {next_name} {} vs {composite_name} {} \
                     ({:.2}×; rule: at most 1.25×)",
                    us(next),
                    us(composite),
                    next / composite.max(1e-9)
                ),
                &[
                    (format!("{next_name} PUT us"), next),
                    (format!("{composite_name} PUT us"), composite),
                ],
            ),
            _ => not_measured(claim, source, "the two-index runs were not measured"),
        },
    );
    out
}
