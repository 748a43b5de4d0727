//! `sift advise --workload FILE`: reads a workload description (JSON, `docs/advise.md`),
//! checks it (every error names its field), and applies the study's cost model
//! ([`super::cost_model`]) to each attribute: the recommended index kind and maintenance
//! scheme, why, the runner-up, and what was excluded.

use super::cost_model::{self, AttributeProfile, CostTable, Costed, Excluded, OperationMix};
use serde::Serialize;
use serde_json::{Map, Value};
use std::fmt::Write;
use std::path::Path;
use std::str::FromStr;

/// One attribute of a workload, as described.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct WorkloadAttribute {
    pub path: String,
    /// int, float, string, time.
    pub value_type: String,
    pub time_correlated: bool,
    pub unique: bool,
    pub read_your_writes: bool,
    /// Share of the workload's LOOKUPs that are on this attribute.
    pub lookup_share: f64,
    /// Share of the workload's RANGELOOKUPs that are on this attribute.
    pub range_share: f64,
    /// `None`: all results.
    pub top_k: Option<u64>,
    /// Fraction of the documents one LOOKUP value matches.
    pub lookup_selectivity: Option<f64>,
    /// Fraction of the documents one RANGELOOKUP matches.
    pub range_selectivity: Option<f64>,
}

/// A checked workload description.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Workload {
    pub name: Option<String>,
    /// Documents in the collection (turns selectivities into result counts).
    pub documents: Option<u64>,
    /// Normalised to fractions.
    pub mix: OperationMix,
    pub attributes: Vec<WorkloadAttribute>,
}

const TOP_FIELDS: [&str; 4] = ["name", "documents", "mix", "attributes"];
const MIX_FIELDS: [&str; 6] = ["put", "update", "delete", "get", "lookup", "range"];
const ATTRIBUTE_FIELDS: [&str; 10] = [
    "path",
    "type",
    "time_correlated",
    "unique",
    "read_your_writes",
    "lookup_share",
    "range_share",
    "top_k",
    "lookup_selectivity",
    "range_selectivity",
];
const TYPES: [&str; 4] = ["int", "float", "string", "time"];

fn object<'a>(value: &'a Value, at: &str) -> Result<&'a Map<String, Value>, String> {
    value
        .as_object()
        .ok_or_else(|| format!("{at}: expected an object, found {}", describe(value)))
}

fn describe(value: &Value) -> String {
    match value {
        Value::Null => "null".to_owned(),
        Value::Bool(b) => format!("the boolean {b}"),
        Value::Number(n) => format!("the number {n}"),
        Value::String(s) => format!("the string {s:?}"),
        Value::Array(_) => "an array".to_owned(),
        Value::Object(_) => "an object".to_owned(),
    }
}

fn no_unknown_fields(map: &Map<String, Value>, allowed: &[&str], at: &str) -> Result<(), String> {
    for key in map.keys() {
        if !allowed.contains(&key.as_str()) {
            return Err(format!(
                "{at}{}{key}: unknown field (expected one of: {})",
                if at.is_empty() { "" } else { "." },
                allowed.join(", ")
            ));
        }
    }
    Ok(())
}

fn field_path(at: &str, key: &str) -> String {
    if at.is_empty() {
        key.to_owned()
    } else {
        format!("{at}.{key}")
    }
}

fn number(map: &Map<String, Value>, key: &str, at: &str) -> Result<Option<f64>, String> {
    match map.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) => n
            .as_f64()
            .filter(|v| v.is_finite())
            .map(Some)
            .ok_or_else(|| format!("{}: not a finite number", field_path(at, key))),
        Some(other) => Err(format!(
            "{}: expected a number, found {}",
            field_path(at, key),
            describe(other)
        )),
    }
}

fn fraction(map: &Map<String, Value>, key: &str, at: &str) -> Result<Option<f64>, String> {
    let value = number(map, key, at)?;
    if let Some(v) = value {
        if !(0.0..=1.0).contains(&v) {
            return Err(format!(
                "{}: {v} is not between 0 and 1",
                field_path(at, key)
            ));
        }
    }
    Ok(value)
}

fn boolean(map: &Map<String, Value>, key: &str, at: &str, default: bool) -> Result<bool, String> {
    match map.get(key) {
        None | Some(Value::Null) => Ok(default),
        Some(Value::Bool(b)) => Ok(*b),
        Some(other) => Err(format!(
            "{}: expected true or false, found {}",
            field_path(at, key),
            describe(other)
        )),
    }
}

fn string(map: &Map<String, Value>, key: &str, at: &str) -> Result<Option<String>, String> {
    match map.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(other) => Err(format!(
            "{}: expected a string, found {}",
            field_path(at, key),
            describe(other)
        )),
    }
}

fn top_k(map: &Map<String, Value>, at: &str) -> Result<Option<u64>, String> {
    let path = field_path(at, "top_k");
    match map.get("top_k") {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) if s == "all" => Ok(None),
        Some(Value::Number(n)) => match n.as_u64() {
            Some(k) if k >= 1 => Ok(Some(k)),
            _ => Err(format!(
                "{path}: expected a whole number of at least 1 or \"all\", found {n}"
            )),
        },
        Some(other) => Err(format!(
            "{path}: expected a whole number of at least 1 or \"all\", found {}",
            describe(other)
        )),
    }
}

/// Checks a workload description given as JSON text.
pub fn parse_workload(text: &str) -> Result<Workload, String> {
    let value: Value = serde_json::from_str(text).map_err(|e| format!("not valid JSON: {e}"))?;
    let top = object(&value, "the workload")?;
    no_unknown_fields(top, &TOP_FIELDS, "")?;
    let name = string(top, "name", "")?;
    let documents = match number(top, "documents", "")? {
        None => None,
        Some(d) if d >= 1.0 && d.fract() == 0.0 => Some(d as u64),
        Some(d) => {
            return Err(format!(
                "documents: expected a whole number of at least 1, found {d}"
            ))
        }
    };
    let mix_value = top
        .get("mix")
        .ok_or("mix: missing (the operation mix: put, update, delete, get, lookup, range)")?;
    let mix_map = object(mix_value, "mix")?;
    no_unknown_fields(mix_map, &MIX_FIELDS, "mix")?;
    let mut weights = [0.0; 6];
    for (weight, key) in weights.iter_mut().zip(MIX_FIELDS) {
        let value = number(mix_map, key, "mix")?.unwrap_or(0.0);
        if value < 0.0 {
            return Err(format!("mix.{key}: {value} is negative"));
        }
        *weight = value;
    }
    let total: f64 = weights.iter().sum();
    if total <= 0.0 {
        return Err("mix: every operation has weight 0; give fractions or counts".to_owned());
    }
    let [put, update, delete, get, lookup, range] = weights.map(|w| w / total);
    let mix = OperationMix {
        put,
        update,
        delete,
        get,
        lookup,
        range,
    };
    let attributes_value = top
        .get("attributes")
        .ok_or("attributes: missing (a list of the attributes to index)")?;
    let list = attributes_value.as_array().ok_or_else(|| {
        format!(
            "attributes: expected a list, found {}",
            describe(attributes_value)
        )
    })?;
    if list.is_empty() {
        return Err("attributes: the list is empty; name at least one attribute".to_owned());
    }
    let even_share = 1.0 / list.len() as f64;
    let mut attributes: Vec<WorkloadAttribute> = Vec::new();
    for (position, item) in list.iter().enumerate() {
        let at = format!("attributes[{position}]");
        let map = object(item, &at)?;
        no_unknown_fields(map, &ATTRIBUTE_FIELDS, &at)?;
        let path = string(map, "path", &at)?
            .filter(|p| !p.is_empty())
            .ok_or_else(|| {
                format!("{at}.path: missing (the attribute's JSON path, e.g. user.id)")
            })?;
        if attributes.iter().any(|a| a.path == path) {
            return Err(format!("{at}.path: {path:?} is listed twice"));
        }
        let value_type = string(map, "type", &at)?.unwrap_or_else(|| "int".to_owned());
        if !TYPES.contains(&value_type.as_str()) {
            return Err(format!(
                "{at}.type: {value_type:?} is not one of {} (geo attributes are not costed by \
                 the study)",
                TYPES.join(", ")
            ));
        }
        let selectivity = |key: &str| -> Result<Option<f64>, String> {
            let value = fraction(map, key, &at)?;
            if value == Some(0.0) {
                return Err(format!("{at}.{key}: must be above 0"));
            }
            if value.is_some() && documents.is_none() {
                return Err(format!(
                    "{at}.{key}: a selectivity needs the top-level \"documents\" (the \
                     collection's size)"
                ));
            }
            Ok(value)
        };
        attributes.push(WorkloadAttribute {
            time_correlated: boolean(map, "time_correlated", &at, value_type == "time")?,
            unique: boolean(map, "unique", &at, false)?,
            read_your_writes: boolean(map, "read_your_writes", &at, true)?,
            lookup_share: fraction(map, "lookup_share", &at)?.unwrap_or(even_share),
            range_share: fraction(map, "range_share", &at)?.unwrap_or(even_share),
            top_k: top_k(map, &at)?,
            lookup_selectivity: selectivity("lookup_selectivity")?,
            range_selectivity: selectivity("range_selectivity")?,
            path,
            value_type,
        });
    }
    for (key, total) in [
        (
            "lookup_share",
            attributes.iter().map(|a| a.lookup_share).sum::<f64>(),
        ),
        (
            "range_share",
            attributes.iter().map(|a| a.range_share).sum::<f64>(),
        ),
    ] {
        if total > 1.0 + 1e-6 {
            return Err(format!(
                "attributes: {key} adds up to {total:.3} over the attributes; at most 1"
            ));
        }
    }
    Ok(Workload {
        name,
        documents,
        mix,
        attributes,
    })
}

/// Reads and checks a workload file.
pub fn read_workload(path: &Path) -> Result<Workload, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read the workload {}: {e}", path.display()))?;
    parse_workload(&text).map_err(|e| format!("workload {}: {e}", path.display()))
}

impl Workload {
    /// The cost model's view of one attribute.
    pub fn profile(&self, attribute: &WorkloadAttribute) -> AttributeProfile {
        let matches = |selectivity: Option<f64>| {
            selectivity
                .zip(self.documents)
                .map(|(s, documents)| (s * documents as f64).max(1.0))
        };
        AttributeProfile {
            path: attribute.path.clone(),
            time_correlated: attribute.time_correlated,
            lookup_fraction: self.mix.lookup * attribute.lookup_share,
            range_fraction: self.mix.range * attribute.range_share,
            top_k: attribute.top_k,
            lookup_matches: matches(attribute.lookup_selectivity),
            range_matches: matches(attribute.range_selectivity),
            read_your_writes: attribute.read_your_writes,
            unique: attribute.unique,
        }
    }
}

/// The advice for one attribute.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Advice {
    pub attribute: String,
    /// The attribute as the model saw it, in words.
    pub profile: String,
    pub choice: Option<Costed>,
    /// The index kind and maintenance scheme of the choice.
    pub kind: Option<String>,
    pub maintenance: Option<String>,
    pub runner_up: Option<Costed>,
    pub why: String,
    pub excluded: Vec<Excluded>,
    pub notes: Vec<String>,
}

/// The kind and effective maintenance of `kind[:maintenance]`.
pub fn kind_and_maintenance(configuration: &str) -> (String, String) {
    let mut parts = configuration.split(':');
    let kind = parts.next().unwrap_or_default().to_owned();
    let maintenance = parts.next().map_or_else(
        || {
            sift_index::IndexKind::from_str(&kind).map_or_else(
                |_| "unknown".to_owned(),
                |k| format!("{} (the kind's default)", k.default_maintenance().name()),
            )
        },
        str::to_owned,
    );
    (kind, maintenance)
}

fn describe_profile(profile: &AttributeProfile) -> String {
    let mut parts = vec![format!(
        "{}time-correlated",
        if profile.time_correlated { "" } else { "not " }
    )];
    for (label, fraction, matches) in [
        ("LOOKUPs", profile.lookup_fraction, profile.lookup_matches),
        (
            "RANGELOOKUPs",
            profile.range_fraction,
            profile.range_matches,
        ),
    ] {
        if fraction > 0.0 {
            parts.push(format!(
                "{:.1}% {label} ({}, top-K {})",
                fraction * 100.0,
                matches.map_or_else(
                    || "matches as measured by the study".to_owned(),
                    |m| format!("~{m:.0} matching documents")
                ),
                profile
                    .top_k
                    .map_or_else(|| "all".to_owned(), |k| k.to_string())
            ));
        }
    }
    parts.push(format!(
        "read-your-writes {}",
        if profile.read_your_writes {
            "needed"
        } else {
            "not needed"
        }
    ));
    if profile.unique {
        parts.push("unique".to_owned());
    }
    parts.join("; ")
}

/// Applies the cost model to every attribute of `workload`.
pub fn advise(workload: &Workload, table: &CostTable) -> Vec<Advice> {
    workload
        .attributes
        .iter()
        .map(|attribute| {
            let profile = workload.profile(attribute);
            let ranking = cost_model::rank(table, &workload.mix, &profile);
            let choice = ranking.ranked.first().cloned();
            let (kind, maintenance) = choice
                .as_ref()
                .map(|c| kind_and_maintenance(&c.configuration))
                .unzip();
            Advice {
                attribute: attribute.path.clone(),
                profile: describe_profile(&profile),
                kind,
                maintenance,
                runner_up: ranking.ranked.get(1).cloned(),
                why: cost_model::explain(&ranking),
                choice,
                excluded: ranking.excluded,
                notes: ranking.notes,
            }
        })
        .collect()
}

/// The advice as text for a terminal.
pub fn render_text(workload: &Workload, table: &CostTable, advice: &[Advice]) -> String {
    let mut out = String::new();
    let mix = &workload.mix;
    let _ = writeln!(
        out,
        "workload{}: {:.0}% PUT, {:.0}% update, {:.0}% delete, {:.0}% GET, {:.0}% LOOKUP, \
         {:.0}% RANGELOOKUP",
        workload
            .name
            .as_ref()
            .map_or_else(String::new, |n| format!(" {n:?}")),
        mix.put * 100.0,
        mix.update * 100.0,
        mix.delete * 100.0,
        mix.get * 100.0,
        mix.lookup * 100.0,
        mix.range * 100.0
    );
    let _ = writeln!(out, "cost figures: {}", table.source);
    for item in advice {
        let _ = writeln!(out, "\nattribute {} ({})", item.attribute, item.profile);
        match &item.choice {
            Some(choice) => {
                let _ = writeln!(
                    out,
                    "  choose     {}  (kind {}, maintenance {}), {:.2} µs per operation",
                    choice.configuration,
                    item.kind.as_deref().unwrap_or("?"),
                    item.maintenance.as_deref().unwrap_or("?"),
                    choice.cost_us_per_op
                );
            }
            None => {
                let _ = writeln!(
                    out,
                    "  choose     nothing: no measured configuration qualifies"
                );
            }
        }
        if let Some(runner_up) = &item.runner_up {
            let _ = writeln!(
                out,
                "  runner-up  {}, {:.2} µs per operation",
                runner_up.configuration, runner_up.cost_us_per_op
            );
        }
        let _ = writeln!(out, "  why        {}", item.why);
        for note in &item.notes {
            let _ = writeln!(out, "  note       {note}");
        }
        for excluded in &item.excluded {
            let _ = writeln!(
                out,
                "  excluded   {}: {}",
                excluded.configuration, excluded.reason
            );
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cost_model::{ConfigurationCosts, CostCurve};

    fn costs(
        configuration: &str,
        time_correlated: bool,
        put_us: f64,
        lookup_us: f64,
        range_us: f64,
    ) -> ConfigurationCosts {
        ConfigurationCosts {
            configuration: configuration.to_owned(),
            time_correlated,
            measured_on: if time_correlated { "t" } else { "u" }.to_owned(),
            put_us,
            update_us: Some(put_us * 2.0),
            get_us: Some(5.0),
            lookup: CostCurve::new(&[(10.0, lookup_us), (100.0, lookup_us * 5.0)]),
            range: CostCurve::new(&[(10.0, range_us), (1000.0, range_us * 20.0)]),
        }
    }

    /// Hand-made figures in the shape the study measures: embedded writes almost for free and
    /// (time-correlated) ranges well; lazy is cheap to write and good at top-K; composite
    /// sync-full is the exact index; async-simple is the cheapest write of all.
    fn table() -> CostTable {
        let mut entries = Vec::new();
        for time_correlated in [false, true] {
            let embedded_range = if time_correlated { 30.0 } else { 3000.0 };
            entries.extend([
                costs("embedded", time_correlated, 10.0, 900.0, embedded_range),
                costs("lazy:sync-insert", time_correlated, 14.0, 60.0, 200.0),
                costs("composite:sync-insert", time_correlated, 13.0, 80.0, 150.0),
                costs("composite:sync-full", time_correlated, 20.0, 70.0, 140.0),
                costs("composite:async-simple", time_correlated, 9.0, 75.0, 140.0),
            ]);
        }
        CostTable {
            source: "test".to_owned(),
            entries,
        }
    }

    fn workload(text: &str) -> Workload {
        parse_workload(text).unwrap()
    }

    #[test]
    fn write_heavy_time_correlated_attribute_gets_embedded() {
        let w = workload(
            r#"{"mix": {"put": 0.9, "range": 0.1},
                "attributes": [{"path": "created_at", "type": "time", "top_k": 10,
                                "read_your_writes": true}]}"#,
        );
        let advice = advise(&w, &table());
        let choice = advice[0].choice.as_ref().unwrap();
        assert_eq!(choice.configuration, "embedded", "{advice:#?}");
        assert_eq!(advice[0].kind.as_deref(), Some("embedded"));
        assert!(advice[0]
            .maintenance
            .as_deref()
            .unwrap()
            .contains("default"));
        // 0.9 × 10 + 0.1 × 30 µs.
        assert!((choice.cost_us_per_op - 12.0).abs() < 1e-9);
        assert!(advice[0].why.contains("cheaper"), "{}", advice[0].why);
        // The same mix on a non-time-correlated attribute: embedded's ranges are slow there.
        let w = workload(
            r#"{"mix": {"put": 0.9, "range": 0.1},
                "attributes": [{"path": "user", "type": "int", "top_k": 10}]}"#,
        );
        let choice = advise(&w, &table())[0].choice.clone().unwrap();
        assert_ne!(choice.configuration, "embedded");
    }

    #[test]
    fn read_your_writes_excludes_async_simple() {
        let text = |ryw: bool| {
            format!(
                r#"{{"mix": {{"put": 1}}, "attributes": [{{"path": "a", "read_your_writes": {ryw}}}]}}"#
            )
        };
        // Writes only: async-simple is the cheapest when allowed ...
        let free = advise(&workload(&text(false)), &table());
        assert_eq!(
            free[0].choice.as_ref().unwrap().configuration,
            "composite:async-simple"
        );
        // ... and excluded, with the reason, when read-your-writes is needed.
        let needed = advise(&workload(&text(true)), &table());
        assert_eq!(needed[0].choice.as_ref().unwrap().configuration, "embedded");
        let excluded = needed[0]
            .excluded
            .iter()
            .find(|e| e.configuration == "composite:async-simple")
            .unwrap();
        assert!(excluded.reason.contains("read-your-writes"));
    }

    #[test]
    fn unique_attribute_gets_sync_full() {
        let w = workload(
            r#"{"mix": {"put": 0.8, "lookup": 0.2},
                "attributes": [{"path": "email", "type": "string", "unique": true, "top_k": 1}]}"#,
        );
        let advice = advise(&w, &table());
        assert_eq!(
            advice[0].choice.as_ref().unwrap().configuration,
            "composite:sync-full"
        );
        assert_eq!(advice[0].maintenance.as_deref(), Some("sync-full"));
        assert!(advice[0].runner_up.is_none(), "only sync-full qualifies");
        assert_eq!(advice[0].excluded.len(), 4);
    }

    #[test]
    fn top_k_and_selectivity_move_the_query_cost() {
        // 1% of 10,000 documents = 100 matches: top-10 reads the curve at 10, all at 100.
        let base = |top_k: &str| {
            format!(
                r#"{{"documents": 10000, "mix": {{"lookup": 1}},
                    "attributes": [{{"path": "a", "top_k": {top_k}, "lookup_selectivity": 0.01}}]}}"#
            )
        };
        let top10 = advise(&workload(&base("10")), &table());
        let all = advise(&workload(&base("\"all\"")), &table());
        let cost = |advice: &[Advice], name: &str| {
            advice[0]
                .choice
                .iter()
                .chain(advice[0].runner_up.iter())
                .find(|c| c.configuration == name)
                .map(|c| c.cost_us_per_op)
        };
        assert_eq!(
            top10[0].choice.as_ref().unwrap().configuration,
            "lazy:sync-insert"
        );
        assert_eq!(cost(&top10, "lazy:sync-insert"), Some(60.0));
        assert_eq!(cost(&all, "lazy:sync-insert"), Some(300.0));
    }

    #[test]
    fn mix_counts_are_normalised() {
        let w = workload(r#"{"mix": {"put": 300, "get": 100}, "attributes": [{"path": "a"}]}"#);
        assert!((w.mix.put - 0.75).abs() < 1e-12 && (w.mix.get - 0.25).abs() < 1e-12);
        assert_eq!(w.attributes[0].top_k, None);
        assert!(w.attributes[0].read_your_writes && !w.attributes[0].unique);
    }

    #[test]
    fn errors_name_the_field() {
        for (text, expected) in [
            ("[", "not valid JSON"),
            ("[]", "the workload: expected an object"),
            (r#"{"attributes": [{"path": "a"}]}"#, "mix: missing"),
            (r#"{"mix": {"put": 1}}"#, "attributes: missing"),
            (
                r#"{"mix": {"put": 1}, "attributes": []}"#,
                "attributes: the list is empty",
            ),
            (r#"{"mixx": {}}"#, "mixx: unknown field"),
            (
                r#"{"mix": {"puts": 1}, "attributes": [{"path": "a"}]}"#,
                "mix.puts: unknown field",
            ),
            (
                r#"{"mix": {"put": -1}, "attributes": [{"path": "a"}]}"#,
                "mix.put: -1 is negative",
            ),
            (
                r#"{"mix": {"put": "x"}, "attributes": [{"path": "a"}]}"#,
                "mix.put: expected a number",
            ),
            (
                r#"{"mix": {"put": 0}, "attributes": [{"path": "a"}]}"#,
                "mix: every operation",
            ),
            (
                r#"{"mix": {"put": 1}, "attributes": [{}]}"#,
                "attributes[0].path: missing",
            ),
            (
                r#"{"mix": {"put": 1}, "attributes": [{"path": "a"}, {"path": "a"}]}"#,
                "attributes[1].path: \"a\" is listed twice",
            ),
            (
                r#"{"mix": {"put": 1}, "attributes": [{"path": "a", "type": "geo"}]}"#,
                "attributes[0].type: \"geo\" is not one of",
            ),
            (
                r#"{"mix": {"put": 1}, "attributes": [{"path": "a", "top_k": 0}]}"#,
                "attributes[0].top_k: expected a whole number",
            ),
            (
                r#"{"mix": {"put": 1}, "attributes": [{"path": "a", "unique": "yes"}]}"#,
                "attributes[0].unique: expected true or false",
            ),
            (
                r#"{"mix": {"put": 1}, "attributes": [{"path": "a", "lookup_selectivity": 0.1}]}"#,
                "attributes[0].lookup_selectivity: a selectivity needs",
            ),
            (
                r#"{"documents": 10, "mix": {"put": 1}, "attributes": [{"path": "a", "range_selectivity": 2}]}"#,
                "attributes[0].range_selectivity: 2 is not between 0 and 1",
            ),
            (
                r#"{"mix": {"put": 1}, "attributes": [{"path": "a", "lookup_share": 0.7}, {"path": "b", "lookup_share": 0.7}]}"#,
                "attributes: lookup_share adds up to 1.400",
            ),
            (
                r#"{"documents": 1.5, "mix": {"put": 1}, "attributes": [{"path": "a"}]}"#,
                "documents: expected a whole number",
            ),
        ] {
            let error = parse_workload(text).unwrap_err();
            assert!(error.contains(expected), "{text}: {error}");
        }
    }
}
