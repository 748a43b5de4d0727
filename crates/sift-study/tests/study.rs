//! End-to-end test of `sift study` at a tiny size: runs every experiment into a temporary
//! folder, validates `results.json` against `docs/study-results.schema.json` (with the small
//! JSON Schema validator below: type, enum, required, properties, additionalProperties, items,
//! minItems, minimum, maximum, local `$ref`), checks that every experiment produced data (or
//! says why not), that `index.html` has one non-empty `<svg>` per figure, one CSV per
//! experiment, the merge of a later `--only` run, interruption, and a run on user data.

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

use serde_json::Value;
use sift_study::advise::{advise, parse_workload};
use sift_study::cost_model::CostTable;
use sift_study::experiments::ExperimentId;
use sift_study::presets::Preset;
use sift_study::results::StudyResults;
use sift_study::{run_study, IndexConfiguration, NoProgress, StudyOptions, UserData};
use std::fmt::Write;
use std::path::Path;
use std::sync::atomic::AtomicBool;

fn schema() -> Value {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/study-results.schema.json");
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn type_matches(name: &str, value: &Value) -> bool {
    match name {
        "object" => value.is_object(),
        "array" => value.is_array(),
        "string" => value.is_string(),
        "boolean" => value.is_boolean(),
        "null" => value.is_null(),
        "number" => value.is_number(),
        "integer" => value.is_i64() || value.is_u64(),
        other => panic!("schema uses type {other:?}, unknown to this validator"),
    }
}

/// Appends to `errors` every way `value` (at `at`) breaks `schema`.
fn validate(root: &Value, schema: &Value, value: &Value, at: &str, errors: &mut Vec<String>) {
    if let Some(reference) = schema.get("$ref").and_then(Value::as_str) {
        let name = reference
            .strip_prefix("#/$defs/")
            .unwrap_or_else(|| panic!("unsupported $ref {reference}"));
        validate(root, &root["$defs"][name], value, at, errors);
        return;
    }
    if let Some(types) = schema.get("type") {
        let names: Vec<&str> = match types {
            Value::String(name) => vec![name.as_str()],
            Value::Array(names) => names.iter().filter_map(Value::as_str).collect(),
            _ => panic!("bad type in schema"),
        };
        if !names.iter().any(|name| type_matches(name, value)) {
            errors.push(format!("{at}: {value} is not of type {names:?}"));
            return;
        }
    }
    if let Some(allowed) = schema.get("enum").and_then(Value::as_array) {
        if !allowed.contains(value) {
            errors.push(format!("{at}: {value} is not one of {allowed:?}"));
        }
    }
    if let (Some(minimum), Some(number)) = (
        schema.get("minimum").and_then(Value::as_f64),
        value.as_f64(),
    ) {
        if number < minimum {
            errors.push(format!("{at}: {number} < minimum {minimum}"));
        }
    }
    if let (Some(maximum), Some(number)) = (
        schema.get("maximum").and_then(Value::as_f64),
        value.as_f64(),
    ) {
        if number > maximum {
            errors.push(format!("{at}: {number} > maximum {maximum}"));
        }
    }
    if let Some(object) = value.as_object() {
        for required in schema
            .get("required")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let name = required.as_str().unwrap();
            if !object.contains_key(name) {
                errors.push(format!("{at}: missing {name}"));
            }
        }
        let properties = schema.get("properties").and_then(Value::as_object);
        for (name, field) in object {
            let path = format!("{at}.{name}");
            match properties.and_then(|p| p.get(name)) {
                Some(property) => validate(root, property, field, &path, errors),
                None => match schema.get("additionalProperties") {
                    Some(Value::Bool(false)) => errors.push(format!("{path}: not allowed")),
                    Some(extra @ Value::Object(_)) => validate(root, extra, field, &path, errors),
                    _ => {}
                },
            }
        }
    }
    if let Some(items) = value.as_array() {
        if let Some(minimum) = schema.get("minItems").and_then(Value::as_u64) {
            if (items.len() as u64) < minimum {
                errors.push(format!("{at}: fewer than {minimum} items"));
            }
        }
        if let Some(item_schema) = schema.get("items") {
            for (index, item) in items.iter().enumerate() {
                validate(root, item_schema, item, &format!("{at}[{index}]"), errors);
            }
        }
    }
}

fn schema_errors(value: &Value) -> Vec<String> {
    let schema = schema();
    let mut errors = Vec::new();
    validate(&schema, &schema, value, "$", &mut errors);
    errors
}

#[test]
fn the_validator_rejects_what_the_schema_forbids() {
    let good = serde_json::json!({"claim": "c", "source": "s", "outcome": "reproduced",
        "evidence": "e", "numbers": {"a": 1.5}});
    let schema = schema();
    let verdict = &schema["$defs"]["verdict"];
    let mut errors = Vec::new();
    validate(&schema, verdict, &good, "$", &mut errors);
    assert!(errors.is_empty(), "{errors:?}");
    let mut bad = good.clone();
    bad["outcome"] = "maybe".into();
    bad["numbers"]["a"] = "x".into();
    bad["extra"] = 1.into();
    bad.as_object_mut().unwrap().remove("claim");
    validate(&schema, verdict, &bad, "$", &mut errors);
    assert_eq!(errors.len(), 4, "{errors:?}");
}

fn options(out: &Path) -> StudyOptions {
    let mut options = StudyOptions::new(Preset::Tiny, out.to_owned());
    options.documents = Some(400);
    options.configurations = [
        "composite:sync-insert",
        "lazy:sync-insert",
        "hologram:sync-full",
    ]
    .iter()
    .map(|text| text.parse::<IndexConfiguration>().unwrap())
    .collect();
    options
}

/// `<figure id="fig-{id}" ...>` holds an `<svg>` with at least one data mark (every mark
/// carries a `<title>` tooltip besides the plot's own title).
fn figure_is_drawn(html: &str, id: &str) -> Result<(), String> {
    let start = html
        .find(&format!("<figure id=\"fig-{id}\""))
        .ok_or_else(|| format!("no figure {id}"))?;
    let figure = &html[start..];
    let end = figure.find("</figure>").ok_or("unterminated figure")?;
    let figure = &figure[..end];
    let svg_start = figure
        .find("<svg")
        .ok_or_else(|| format!("figure {id} has no svg"))?;
    let svg_end = figure.find("</svg>").ok_or("unterminated svg")?;
    let svg = &figure[svg_start..svg_end];
    if figure.matches("<svg").count() != 1 {
        return Err(format!("figure {id} has more than one svg"));
    }
    // The axes are lines too: the plots say "no data measured" when they have no value.
    let marks = ["<circle", "<polyline", "<rect", "<line"]
        .iter()
        .map(|mark| svg.matches(mark).count())
        .sum::<usize>();
    if marks == 0 || svg.contains("no data measured") {
        return Err(format!("figure {id} has no data marks"));
    }
    Ok(())
}

#[test]
fn tiny_study_writes_a_valid_complete_report() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("study");
    let options = options(&out);
    let outcome = run_study(&options, &NoProgress, &AtomicBool::new(false)).unwrap();
    assert_eq!(outcome.finished, ExperimentId::ALL.to_vec());
    assert!(!outcome.interrupted && outcome.remaining.is_empty());
    assert!(!out.join(".work").exists(), "work databases are removed");

    let text = std::fs::read_to_string(out.join("results.json")).unwrap();
    let json: Value = serde_json::from_str(&text).unwrap();
    let errors = schema_errors(&json);
    assert!(
        errors.is_empty(),
        "results.json breaks the schema: {errors:#?}"
    );
    let results: StudyResults = serde_json::from_value(json).unwrap();
    assert!(results.machine.cpu_count >= 1 && !results.machine.date_utc.is_empty());
    let unknown = &results.configuration.index_configurations[2];
    assert!(!unknown.known && unknown.note.contains("not measured"));

    let html = std::fs::read_to_string(out.join("index.html")).unwrap();
    // Self-contained: no scripts, stylesheets, images or fonts from elsewhere.
    for forbidden in ["<script", "<link", "src=", "@import", "url("] {
        assert!(!html.contains(forbidden), "index.html contains {forbidden}");
    }
    for id in ExperimentId::ALL {
        let experiment = results
            .experiments
            .iter()
            .find(|e| e.id == id.id())
            .unwrap_or_else(|| panic!("experiment {} missing", id.id()));
        assert!(
            !experiment.verdicts.is_empty(),
            "{} has no verdict",
            id.id()
        );
        // The tiny preset's scale sweep: half and full size, each with its verdicts, engine
        // settings and the level shape of the databases it measured; every full-size verdict
        // says how it changes with size.
        let sizes: Vec<u64> = experiment.scales.iter().map(|s| s.documents).collect();
        assert_eq!(experiment.scales.len(), 2, "{}", id.id());
        assert!(sizes[0] < sizes[1], "{}: {sizes:?}", id.id());
        assert_eq!(
            experiment.scales[1].verdicts,
            experiment
                .verdicts
                .iter()
                .map(|v| {
                    let mut plain = v.clone();
                    plain.across_sizes = None;
                    plain
                })
                .collect::<Vec<_>>()
        );
        for verdict in &experiment.verdicts {
            let across = verdict.across_sizes.as_deref().unwrap_or("");
            assert!(
                ["reproduced", "differs", "changes", "not measured"]
                    .iter()
                    .any(|start| across.starts_with(start)),
                "{}: {across:?}",
                id.id()
            );
        }
        for scale in &experiment.scales {
            assert!(scale.engine.contains_key("memtable_bytes"), "{}", id.id());
        }
        if !matches!(id, ExperimentId::Vinyl | ExperimentId::DiffIndex) {
            let shapes = &experiment.scales[1].shapes;
            assert!(
                shapes.iter().any(|shape| shape
                    .trees
                    .get("data")
                    .is_some_and(|files| files.iter().sum::<usize>() > 0)),
                "{}: no database shape with data files",
                id.id()
            );
        }
        let csv = std::fs::read_to_string(out.join(format!("{}.csv", id.id()))).unwrap();
        assert_eq!(
            csv.lines().count(),
            experiment.measurements.len() + 1,
            "{}",
            id.id()
        );
        assert!(html.contains(&format!("<section id=\"experiment-{}\"", id.id())));
        match id {
            ExperimentId::Vinyl => {
                // Always composite:deferred against composite:sync-full (the paper's setup).
                assert_eq!(experiment.status, "measured", "{}", experiment.note);
                for name in ["composite:deferred", "composite:sync-full"] {
                    assert!(
                        experiment
                            .measurements
                            .iter()
                            .any(|m| m.configuration == name
                                && m.metric == "statements_per_second"
                                && m.slice == Some(2)
                                && m.value > 0.0),
                        "no rate over time for {name}"
                    );
                }
                assert_ne!(experiment.verdicts[0].outcome, "not-measured");
                assert!(experiment.verdicts[0].evidence.contains("disk-bound"));
                for figure in &experiment.figures {
                    figure_is_drawn(&html, &figure.id).unwrap();
                }
            }
            ExperimentId::Next => {
                // NEXT's comparison set (next, sst-local, composite, memory), taking the run's
                // composite configuration; geo on next / sst-local may be a note.
                assert!(
                    matches!(experiment.status.as_str(), "measured" | "partial"),
                    "{}: {}",
                    experiment.status,
                    experiment.note
                );
                for name in ["next", "sst-local", "composite:sync-insert", "memory"] {
                    assert!(
                        experiment
                            .measurements
                            .iter()
                            .any(|m| m.configuration == name
                                && m.metric == "latency_p50"
                                && m.suite.as_deref() == Some("windows")),
                        "experiment 5 has no window latency for {name}"
                    );
                }
                for suite in ["windows", "geo", "delta", "skew", "two-indexes"] {
                    assert!(
                        experiment
                            .measurements
                            .iter()
                            .any(|m| m.suite.as_deref() == Some(suite)),
                        "experiment 5 has nothing for {suite}"
                    );
                }
                assert!(experiment
                    .measurements
                    .iter()
                    .all(|m| m.value >= 0.0 && !m.unit.is_empty()));
                assert!(experiment
                    .verdicts
                    .iter()
                    .any(|v| v.outcome != "not-measured"));
                for figure in &experiment.figures {
                    figure_is_drawn(&html, &figure.id).unwrap();
                }
            }
            ExperimentId::DiffIndex => {
                // Its own schemes on one composite index, whatever the configurations.
                assert_eq!(experiment.status, "measured", "{}", experiment.note);
                for name in [
                    "none",
                    "composite:sync-full",
                    "composite:sync-insert",
                    "composite:async-simple",
                    "composite:async-session",
                ] {
                    assert!(
                        experiment
                            .measurements
                            .iter()
                            .any(|m| m.configuration == name
                                && m.metric == "latency_p99"
                                && m.op.as_deref() == Some("UPDATE")),
                        "diff-index has no update latency for {name}"
                    );
                }
                assert!(experiment
                    .measurements
                    .iter()
                    .any(|m| m.metric == "index_lag_bucket" && m.count.unwrap_or(0) > 0));
                assert!(experiment
                    .measurements
                    .iter()
                    .all(|m| m.value >= 0.0 && !m.unit.is_empty()));
                assert!(experiment
                    .verdicts
                    .iter()
                    .all(|v| v.outcome != "not-measured"));
                for figure in &experiment.figures {
                    figure_is_drawn(&html, &figure.id).unwrap();
                }
            }
            _ => {
                // Partial: the unknown configuration is not measured; the others are.
                assert_eq!(
                    experiment.status,
                    "partial",
                    "{}: {}",
                    id.id(),
                    experiment.note
                );
                assert!(experiment.note.contains("hologram"), "{}", experiment.note);
                for name in ["composite:sync-insert", "lazy:sync-insert"] {
                    assert!(
                        experiment
                            .measurements
                            .iter()
                            .any(|m| m.configuration == name),
                        "{} has no data for {name}",
                        id.id()
                    );
                }
                assert!(experiment
                    .measurements
                    .iter()
                    .all(|m| !m.configuration.starts_with("hologram")));
                assert!(experiment
                    .measurements
                    .iter()
                    .all(|m| m.value >= 0.0 && !m.unit.is_empty()));
                assert!(!experiment.figures.is_empty());
                assert!(
                    experiment
                        .verdicts
                        .iter()
                        .any(|v| v.outcome != "not-measured"),
                    "{}: no verdict was decided",
                    id.id()
                );
                for figure in &experiment.figures {
                    figure_is_drawn(&html, &figure.id).unwrap();
                }
            }
        }
    }
    // Experiment-specific shape: slices of the load, box-plot statistics, mixed intervals,
    // the bloom sweep.
    let static_ = &results.experiments[0];
    assert!(static_
        .measurements
        .iter()
        .any(|m| m.configuration == "none" && m.metric == "put_throughput" && m.slice == Some(5)));
    assert!(static_
        .measurements
        .iter()
        .any(|m| m.tree.as_deref() == Some("index") && m.value > 0.0));
    let queries = &results.experiments[1];
    for metric in [
        "latency_p5",
        "latency_p25",
        "latency_p50",
        "latency_p75",
        "latency_p95",
        "blocks_read_per_query",
    ] {
        assert!(
            queries
                .measurements
                .iter()
                .any(|m| m.metric == metric && m.top_k.as_deref() == Some("all")),
            "{metric}"
        );
    }
    let mixed = &results.experiments[2];
    for workload in ["write-heavy", "read-heavy", "update-heavy"] {
        assert!(mixed
            .measurements
            .iter()
            .any(|m| m.workload.as_deref() == Some(workload)
                && m.slice == Some(10)
                && m.op.as_deref() == Some("LOOKUP")));
    }
    assert!(mixed
        .measurements
        .iter()
        .any(|m| m.op.as_deref() == Some("UPDATE")));
    let sweep = &results.experiments[3];
    for bits in [0, 10, 50] {
        assert!(sweep
            .measurements
            .iter()
            .any(|m| m.bloom_bits_per_key == Some(bits) && m.metric == "bytes_on_disk"));
    }
    assert!(sweep
        .measurements
        .iter()
        .any(|m| m.compression.as_deref() == Some("none")));
    // The thread sweep: load and query throughput at 1–4 client threads per configuration.
    for threads in 1..=4 {
        for op in ["PUT", "LOOKUP", "RANGELOOKUP"] {
            assert!(
                sweep.measurements.iter().any(|m| m.threads == Some(threads)
                    && m.op.as_deref() == Some(op)
                    && m.metric == "throughput"
                    && m.configuration == "lazy:sync-insert"
                    && m.value > 0.0),
                "{op} at {threads} threads"
            );
        }
    }
    assert!(sweep
        .verdicts
        .iter()
        .any(|v| v.claim.starts_with("Index variants keep their ranking")
            && v.outcome != "not-measured"));
    // The recommendation table has a row per attribute and mix, each naming a measured choice.
    assert!(results.recommendations.len() >= 6);
    assert!(results.recommendations.iter().all(|r| r
        .best
        .as_deref()
        .is_some_and(|b| b.starts_with("composite") || b.starts_with("lazy"))));
    assert!(html.contains("id=\"recommendations\""));
    // `sift advise --results` takes its figures from this file: both attributes, both
    // configurations, and a workload gets a measured choice.
    let table = CostTable::from_results(&results, "tiny run");
    for time_correlated in [false, true] {
        assert_eq!(
            table
                .entries
                .iter()
                .filter(|e| e.time_correlated == time_correlated)
                .count(),
            2
        );
    }
    let workload = parse_workload(
        r#"{"mix": {"put": 0.5, "lookup": 0.5}, "attributes": [{"path": "user.id", "top_k": 10}]}"#,
    )
    .unwrap();
    let advice = advise(&workload, &table);
    assert!(advice[0].choice.is_some() && advice[0].runner_up.is_some());

    // A later run of one experiment into the same folder keeps the others.
    let mut again = options.clone();
    again.only = vec![ExperimentId::Vinyl];
    run_study(&again, &NoProgress, &AtomicBool::new(false)).unwrap();
    let merged: StudyResults =
        serde_json::from_str(&std::fs::read_to_string(out.join("results.json")).unwrap()).unwrap();
    assert_eq!(merged.experiments.len(), ExperimentId::ALL.len());
    assert_eq!(merged.experiments[0], results.experiments[0]);
}

#[test]
fn an_interrupted_study_says_how_to_resume() {
    let dir = tempfile::tempdir().unwrap();
    let options = options(&dir.path().join("study"));
    let outcome = run_study(&options, &NoProgress, &AtomicBool::new(true)).unwrap();
    assert!(outcome.interrupted && outcome.finished.is_empty());
    assert_eq!(outcome.remaining, ExperimentId::ALL.to_vec());
    let hint = outcome.resume_hint(&options).unwrap();
    assert!(
        hint.contains("--only static,queries,mixed,bloom-compression,next,vinyl,diff-index"),
        "{hint}"
    );
    assert!(hint.contains("--n 400"), "{hint}");
    assert!(
        hint.contains("--configs composite:sync-insert,lazy:sync-insert,hologram:sync-full"),
        "{hint}"
    );
    // What is there is still a valid (empty) report.
    let json: Value = serde_json::from_str(
        &std::fs::read_to_string(dir.path().join("study/results.json")).unwrap(),
    )
    .unwrap();
    assert!(schema_errors(&json).is_empty());
}

#[test]
fn studies_user_data() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("events.jsonl");
    let mut lines = String::new();
    for i in 0..300 {
        writeln!(
            lines,
            "{{\"id\":{},\"device\":{},\"at\":\"2024-05-01T{:02}:{:02}:00Z\",\"payload\":\"{}\"}}",
            1000 + i,
            i % 13,
            (i / 60) % 24,
            i % 60,
            "x".repeat(i % 50)
        )
        .unwrap();
    }
    std::fs::write(&data, lines).unwrap();
    let mut options = options(&dir.path().join("study"));
    options.configurations.truncate(2);
    options.only = vec![
        ExperimentId::Static,
        ExperimentId::Queries,
        ExperimentId::Mixed,
        ExperimentId::Next,
    ];
    options.data = Some(UserData {
        path: data,
        primary_key: "id".to_owned(),
        attributes: vec!["device:int".to_owned(), "at:time".to_owned()],
    });
    run_study(&options, &NoProgress, &AtomicBool::new(false)).unwrap();
    let json: Value = serde_json::from_str(
        &std::fs::read_to_string(dir.path().join("study/results.json")).unwrap(),
    )
    .unwrap();
    assert!(schema_errors(&json).is_empty());
    let results: StudyResults = serde_json::from_value(json).unwrap();
    assert_eq!(results.configuration.data.source, "file");
    let queries = &results.experiments[1];
    for path in ["device", "at"] {
        assert!(
            queries
                .measurements
                .iter()
                .any(|m| m.attribute.as_deref() == Some(path)
                    && m.metric == "hits_per_query"
                    && m.value >= 1.0),
            "no hits on {path}"
        );
    }
    // GETs find the documents by their integer ids.
    let get_hits: Vec<f64> = results.experiments[0]
        .measurements
        .iter()
        .filter(|m| m.op.as_deref() == Some("GET") && m.metric == "hits_per_query")
        .map(|m| m.value)
        .collect();
    assert!(
        !get_hits.is_empty() && get_hits.iter().all(|&hits| (hits - 1.0).abs() < 1e-9),
        "{get_hits:?}"
    );
    // The documents used are said, and the mixed workloads run on the file's own documents.
    assert_eq!(results.configuration.data.documents, Some(300));
    let mixed = &results.experiments[2];
    assert_eq!(mixed.status, "measured", "{}", mixed.note);
    for workload in ["write-heavy", "read-heavy", "update-heavy"] {
        for op in ["PUT", "GET", "LOOKUP"] {
            assert!(
                mixed
                    .measurements
                    .iter()
                    .any(|m| m.workload.as_deref() == Some(workload)
                        && m.op.as_deref() == Some(op)
                        && m.metric == "latency_mean"
                        && m.slice.is_none()
                        && m.value > 0.0),
                "no {op} in {workload}"
            );
        }
    }
    assert!(
        mixed
            .verdicts
            .iter()
            .any(|verdict| verdict.outcome != "not-measured"),
        "{:#?}",
        mixed.verdicts
    );
    // NEXT's windows on the file's first attribute (device), its δ sweep and both attributes
    // indexed together; no skew or geo suite on a file, and the note says so.
    let next = &results.experiments[3];
    assert_eq!(next.id, "next");
    assert_eq!(next.status, "partial", "{}", next.note);
    assert!(next.note.contains("no skew suite"), "{}", next.note);
    for window in ["small", "medium", "large"] {
        assert!(
            next.measurements
                .iter()
                .any(|m| m.suite.as_deref() == Some("windows")
                    && m.configuration == "next"
                    && m.attribute.as_deref() == Some("device")
                    && m.window.as_deref() == Some(window)
                    && m.metric == "hits_per_query"
                    && m.value >= 1.0
                    && m.distribution.as_deref() == Some("file")),
            "no {window} window on device"
        );
    }
    assert!(
        next.measurements
            .iter()
            .any(|m| m.suite.as_deref() == Some("two-indexes")
                && m.attribute.as_deref() == Some("at"))
    );
    assert!(next
        .measurements
        .iter()
        .any(|m| m.suite.as_deref() == Some("delta") && m.split_delta.is_some()));
    // Every figure the section lists is drawn (a file has no skew or geo figure).
    let html = std::fs::read_to_string(dir.path().join("study/index.html")).unwrap();
    assert!(!next.figures.iter().any(|f| f.id == "next-skew"));
    for figure in &next.figures {
        figure_is_drawn(&html, &figure.id).unwrap();
    }
    let measured: Vec<&str> = next
        .verdicts
        .iter()
        .filter(|v| v.outcome != "not-measured")
        .map(|v| v.claim.as_str())
        .collect();
    assert!(
        measured
            .iter()
            .any(|claim| claim.contains("medium windows"))
            && measured.iter().any(|claim| claim.contains("two indexes")),
        "{measured:?}"
    );
}
