//! The report's recommendation table: for each attribute and workload mix, the configuration
//! the cost model (`crate::cost_model`, shared with `sift advise`) ranks cheapest on this run's
//! measurements.

use crate::cost_model::{self, AttributeProfile, CostTable, OperationMix, Ranking};
use crate::results::{Recommendation, StudyResults};
use crate::verdict::{per_configuration, Select};
use sift_bench::round_to;
use std::fmt::Write;

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
                        round_to(*cost, 2)
                    );
                    if let Some(chosen) = row.best.as_ref().and_then(|b| measured.get(b)) {
                        let _ = write!(
                            row.why,
                            " (the model's choice measured {} µs)",
                            round_to(*chosen, 2)
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
        cost_us_per_op: best.map(|c| round_to(c.cost_us_per_op, 2)),
        runner_up: runner_up.map(|c| c.configuration.clone()),
        runner_up_cost_us_per_op: runner_up.map(|c| round_to(c.cost_us_per_op, 2)),
        basis,
        why: if best.is_none() {
            "not measured: run experiments 1–3".to_owned()
        } else {
            cost_model::explain(ranking)
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::Measurement;
    use std::collections::BTreeMap;

    #[test]
    fn recommendation_rows_use_the_shared_cost_model() {
        use crate::results::{
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
            scales: Vec::new(),
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
                    documents: None,
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
