//! The claims of experiment 4 (bloom bits per key, compression) checked against its
//! measurements.

use crate::results::{Measurement, Verdict};
use crate::verdict::{kind_of, not_measured, outcome, verdict};
use crate::IndexConfiguration;

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
        // The configurations measured both ways (compression off is loaded for a subset).
        let both: Vec<&String> = names
            .iter()
            .filter(|n| lookup_p50(n, "snappy").is_some() && lookup_p50(n, "none").is_some())
            .collect();
        let mut with: Vec<(String, f64)> = both
            .iter()
            .filter_map(|n| lookup_p50(n, "snappy").map(|v| ((*n).clone(), v)))
            .collect();
        let mut without: Vec<(String, f64)> = both
            .iter()
            .filter_map(|n| lookup_p50(n, "none").map(|v| ((*n).clone(), v)))
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
