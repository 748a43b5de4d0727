//! The cost model behind the study's recommendation table and `sift advise`: the cost of a
//! workload on one indexed attribute, per index configuration, from measured costs per
//! operation.
//!
//! Cost figures ([`CostTable`]) come from a study's `results.json` ([`CostTable::from_results`])
//! or from the built-in table measured on this project's machine ([`CostTable::built_in`]).
//! For each configuration and attribute shape (time-correlated or not) they hold the mean
//! latency of a PUT, an update and a GET, and LOOKUP and RANGELOOKUP latency as a curve over
//! the number of results returned (the study measures top-10, top-100 and all).
//!
//! The model: cost per operation = Σ fraction(op) × cost(op), with query costs read off the
//! curves at min(top-K, matches). Each attribute is costed alone (its index measured alone).
//! Constraints exclude configurations before costing: a unique attribute needs a sync-full
//! composite or eager index; a read-your-writes need excludes async-simple. Nothing is tuned:
//! the cheapest configuration that satisfies the constraints wins.

use super::results::{Measurement, StudyResults};
use super::BASELINE;
use serde::{Deserialize, Serialize};
use sift_bench::round_to;
use std::collections::BTreeMap;
use std::fmt::Write;
use std::str::FromStr;

/// Mean latency of a query as a function of the results it returns: measured points,
/// interpolated linearly between them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct CostCurve {
    /// (results returned per query, mean µs), sorted by results.
    pub points: Vec<(f64, f64)>,
}

impl CostCurve {
    /// A curve through `points` (same result counts are averaged).
    pub fn new(points: &[(f64, f64)]) -> CostCurve {
        let mut sorted: Vec<(f64, f64)> = points
            .iter()
            .copied()
            .filter(|(hits, us)| hits.is_finite() && us.is_finite())
            .collect();
        sorted.sort_by(|a, b| a.0.total_cmp(&b.0));
        let mut merged: Vec<(f64, f64, u32)> = Vec::new();
        for (hits, us) in sorted {
            match merged.last_mut() {
                Some(last) if (last.0 - hits).abs() < 1e-9 => {
                    last.1 += us;
                    last.2 += 1;
                }
                _ => merged.push((hits, us, 1)),
            }
        }
        CostCurve {
            points: merged
                .into_iter()
                .map(|(hits, sum, count)| (hits, sum / f64::from(count)))
                .collect(),
        }
    }

    /// The cost of a query returning `results`: interpolated; the first point's cost below
    /// it; beyond the last, the last segment's slope (never negative).
    pub fn at(&self, results: f64) -> Option<f64> {
        let points = &self.points;
        let first = *points.first()?;
        if points.len() == 1 || results <= first.0 {
            return Some(first.1);
        }
        for pair in points.windows(2) {
            let ((x0, y0), (x1, y1)) = (pair[0], pair[1]);
            if results <= x1 {
                let t = (results - x0) / (x1 - x0).max(1e-9);
                return Some(y0 + t * (y1 - y0));
            }
        }
        let ((x0, y0), (x1, y1)) = (points[points.len() - 2], points[points.len() - 1]);
        let slope = ((y1 - y0) / (x1 - x0).max(1e-9)).max(0.0);
        Some(y1 + slope * (results - x1))
    }

    /// Results per query of the point with the most results (the study's "all").
    pub fn most_results(&self) -> Option<f64> {
        self.points.last().map(|(hits, _)| *hits)
    }
}

/// Measured costs of one configuration on one attribute shape.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ConfigurationCosts {
    /// `kind[:maintenance]`.
    pub configuration: String,
    /// Measured on a time-correlated attribute (the study's CreationTime role) or not.
    pub time_correlated: bool,
    /// The attribute the figures were measured on.
    pub measured_on: String,
    /// Mean PUT latency of new documents, µs (experiment 1).
    pub put_us: f64,
    /// Mean latency of an update of an existing document, µs (experiment 3), if measured.
    pub update_us: Option<f64>,
    /// Mean GET latency, µs (experiment 1).
    pub get_us: Option<f64>,
    /// LOOKUP latency by results returned (experiment 2).
    pub lookup: CostCurve,
    /// RANGELOOKUP latency by results returned (experiment 2).
    pub range: CostCurve,
}

/// Cost figures of every configuration measured, and where they came from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CostTable {
    /// Where the figures came from (a results.json, or the run behind the built-in table).
    pub source: String,
    pub entries: Vec<ConfigurationCosts>,
}

/// The built-in figures (`cost_defaults.json`, extracted with `sift advise --print-costs` from
/// the study run named in its `source`).
const BUILT_IN: &str = include_str!("cost_defaults.json");

/// Fractions of all operations (they sum to 1).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, Default)]
pub struct OperationMix {
    pub put: f64,
    pub update: f64,
    pub delete: f64,
    pub get: f64,
    pub lookup: f64,
    pub range: f64,
}

/// What the model needs to know about one attribute of a workload.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AttributeProfile {
    pub path: String,
    pub time_correlated: bool,
    /// Fraction of all operations that are LOOKUPs on this attribute.
    pub lookup_fraction: f64,
    /// Fraction of all operations that are RANGELOOKUPs on this attribute.
    pub range_fraction: f64,
    /// Results wanted per query; `None`: all.
    pub top_k: Option<u64>,
    /// Documents one LOOKUP value matches; `None`: as in the measurements.
    pub lookup_matches: Option<f64>,
    /// Documents one RANGELOOKUP matches; `None`: as in the measurements.
    pub range_matches: Option<f64>,
    /// A client must see its own writes in its next query.
    pub read_your_writes: bool,
    /// No two documents may share a value.
    pub unique: bool,
}

/// One configuration's cost for a profile, split by operation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Costed {
    pub configuration: String,
    /// µs per operation of the whole mix.
    pub cost_us_per_op: f64,
    /// (operation, µs per such operation) of the operations with a non-zero fraction.
    pub parts: Vec<(String, f64)>,
    /// Assumptions made for this configuration (fallbacks, caveats).
    pub notes: Vec<String>,
}

/// A configuration left out, and why.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Excluded {
    pub configuration: String,
    pub reason: String,
}

/// The configurations ranked cheapest first, and those excluded.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Ranking {
    pub ranked: Vec<Costed>,
    pub excluded: Vec<Excluded>,
    /// Notes that apply to every configuration (e.g. figures of the other attribute shape).
    pub notes: Vec<String>,
}

/// What a configuration guarantees (from its design, not measured).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Guarantees {
    pub read_your_writes: bool,
    pub unique_capable: bool,
    pub in_memory: bool,
    pub session_only: bool,
}

/// The guarantees of `kind[:maintenance]`; `None` when this build does not know it.
pub fn guarantees(configuration: &str) -> Option<Guarantees> {
    let mut parts = configuration.split(':');
    let kind = sift_index::IndexKind::from_str(parts.next()?).ok()?;
    let maintenance = match parts.next() {
        // sst-local / next may name a validation instead of a maintenance.
        Some(text) => sift_index::Maintenance::from_str(text)
            .ok()
            .unwrap_or_else(|| kind.default_maintenance()),
        None => kind.default_maintenance(),
    };
    Some(Guarantees {
        read_your_writes: maintenance != sift_index::Maintenance::AsyncSimple,
        unique_capable: maintenance == sift_index::Maintenance::SyncFull
            && matches!(
                kind,
                sift_index::IndexKind::Composite | sift_index::IndexKind::Eager
            ),
        in_memory: kind == sift_index::IndexKind::Memory,
        session_only: maintenance == sift_index::Maintenance::AsyncSession,
    })
}

fn whole(m: &Measurement) -> bool {
    m.slice.is_none() && m.repetition.is_none() && m.threads.is_none()
}

impl CostTable {
    /// The built-in figures.
    pub fn built_in() -> Result<CostTable, String> {
        serde_json::from_str(BUILT_IN)
            .map_err(|e| format!("the built-in cost table is unreadable: {e}"))
    }

    /// The figures of a study's results: experiments 1–2 (and 3 for updates) must be there.
    pub fn from_results(results: &StudyResults, source: &str) -> CostTable {
        let find = |id: &str| {
            results
                .experiments
                .iter()
                .find(|e| e.id == id)
                .map(|e| e.measurements.as_slice())
                .unwrap_or_default()
        };
        let (static_ms, query_ms, mixed_ms) = (find("static"), find("queries"), find("mixed"));
        let mut names: Vec<String> = Vec::new();
        for m in static_ms {
            if m.configuration != BASELINE && !names.contains(&m.configuration) {
                names.push(m.configuration.clone());
            }
        }
        let updates: BTreeMap<&str, f64> = mixed_ms
            .iter()
            .filter(|m| {
                whole(m)
                    && m.metric == "latency_mean"
                    && m.op.as_deref() == Some("UPDATE")
                    && m.workload.as_deref() == Some("update-heavy")
            })
            .map(|m| (m.configuration.as_str(), m.value))
            .collect();
        let mut entries = Vec::new();
        for attribute in &results.configuration.data.attributes {
            let path = attribute.path.as_str();
            for name in &names {
                let one = |ms: &[Measurement], metric: &str, op: &str| {
                    ms.iter()
                        .find(|m| {
                            whole(m)
                                && m.configuration == *name
                                && m.attribute.as_deref() == Some(path)
                                && m.metric == metric
                                && m.op.as_deref() == Some(op)
                        })
                        .map(|m| m.value)
                };
                let Some(put_us) = one(static_ms, "put_latency_mean", "PUT") else {
                    continue;
                };
                let curve = |op: &str| {
                    let points: Vec<(f64, f64)> = query_ms
                        .iter()
                        .filter(|m| {
                            whole(m)
                                && m.configuration == *name
                                && m.attribute.as_deref() == Some(path)
                                && m.op.as_deref() == Some(op)
                                && m.metric == "latency_mean"
                        })
                        .filter_map(|m| {
                            let hits = query_ms.iter().find(|h| {
                                whole(h)
                                    && h.configuration == m.configuration
                                    && h.attribute == m.attribute
                                    && h.op == m.op
                                    && h.top_k == m.top_k
                                    && h.selectivity == m.selectivity
                                    && h.metric == "hits_per_query"
                            })?;
                            Some((hits.value, m.value))
                        })
                        .collect();
                    CostCurve::new(&points)
                };
                entries.push(ConfigurationCosts {
                    configuration: name.clone(),
                    time_correlated: attribute.role == "CreationTime",
                    measured_on: path.to_owned(),
                    put_us,
                    // Experiment 3 indexes the UserID attribute only.
                    update_us: if attribute.role == "UserID" {
                        updates.get(name.as_str()).copied()
                    } else {
                        None
                    },
                    get_us: one(static_ms, "latency_mean", "GET"),
                    lookup: curve("LOOKUP"),
                    range: curve("RANGELOOKUP"),
                });
            }
        }
        CostTable {
            source: source.to_owned(),
            entries,
        }
    }

    /// Entries of one attribute shape; when there are none, the other shape's (and a note).
    fn entries_for(&self, time_correlated: bool) -> (Vec<&ConfigurationCosts>, Option<String>) {
        let same: Vec<&ConfigurationCosts> = self
            .entries
            .iter()
            .filter(|e| e.time_correlated == time_correlated)
            .collect();
        if !same.is_empty() {
            return (same, None);
        }
        let other: Vec<&ConfigurationCosts> = self.entries.iter().collect();
        let note = (!other.is_empty()).then(|| {
            format!(
                "no figures measured on a {}time-correlated attribute: the other attribute's \
                 figures are used",
                if time_correlated { "" } else { "non-" }
            )
        });
        (other, note)
    }

    /// The update cost of an entry: measured, or its PUT cost scaled by the update/PUT ratio
    /// of the same configuration on the other attribute shape, or its PUT cost.
    fn update_cost(&self, entry: &ConfigurationCosts) -> (f64, Option<String>) {
        if let Some(update) = entry.update_us {
            return (update, None);
        }
        let ratio = self
            .entries
            .iter()
            .find(|e| e.configuration == entry.configuration && e.update_us.is_some())
            .and_then(|e| Some(e.update_us? / e.put_us.max(1e-9)));
        match ratio {
            Some(ratio) => (
                entry.put_us * ratio,
                Some(format!(
                    "update on {} = its PUT × the update/PUT ratio {ratio:.2} measured on {}",
                    entry.measured_on,
                    self.entries
                        .iter()
                        .find(|e| e.configuration == entry.configuration && e.update_us.is_some())
                        .map_or("", |e| e.measured_on.as_str())
                )),
            ),
            None => (
                entry.put_us,
                Some("updates not measured: costed as a PUT".to_owned()),
            ),
        }
    }
}

/// Ranks every configuration of `table` for `mix` on the attribute `profile`.
pub fn rank(table: &CostTable, mix: &OperationMix, profile: &AttributeProfile) -> Ranking {
    let (entries, shape_note) = table.entries_for(profile.time_correlated);
    let mut ranking = Ranking {
        ranked: Vec::new(),
        excluded: Vec::new(),
        notes: shape_note.into_iter().collect(),
    };
    for entry in entries {
        let name = &entry.configuration;
        let Some(guarantee) = guarantees(name) else {
            ranking.excluded.push(Excluded {
                configuration: name.clone(),
                reason: "this build does not know the configuration".to_owned(),
            });
            continue;
        };
        if profile.unique && !guarantee.unique_capable {
            ranking.excluded.push(Excluded {
                configuration: name.clone(),
                reason: "a unique attribute needs a sync-full composite or eager index (the \
                         uniqueness check reads an exact index at write)"
                    .to_owned(),
            });
            continue;
        }
        if profile.read_your_writes && !guarantee.read_your_writes {
            ranking.excluded.push(Excluded {
                configuration: name.clone(),
                reason: "async-simple queries may miss the client's own recent writes (no \
                         read-your-writes)"
                    .to_owned(),
            });
            continue;
        }
        let mut notes = Vec::new();
        let mut parts = Vec::new();
        let mut missing = Vec::new();
        let (update_us, update_note) = table.update_cost(entry);
        let wants = |fraction: f64| fraction > 0.0;
        if wants(mix.put) {
            parts.push(("PUT".to_owned(), mix.put, entry.put_us));
        }
        if wants(mix.update) || wants(mix.delete) {
            notes.extend(update_note);
        }
        if wants(mix.update) {
            parts.push(("update".to_owned(), mix.update, update_us));
        }
        if wants(mix.delete) {
            // A delete reads the old version like an update (sync-full) and writes less.
            parts.push(("delete".to_owned(), mix.delete, update_us));
            notes.push("deletes costed as updates (not measured separately)".to_owned());
        }
        if wants(mix.get) {
            match entry.get_us {
                Some(get) => parts.push(("GET".to_owned(), mix.get, get)),
                None => missing.push("GET"),
            }
        }
        for (label, fraction, curve, matches) in [
            (
                "LOOKUP",
                profile.lookup_fraction,
                &entry.lookup,
                profile.lookup_matches,
            ),
            (
                "RANGELOOKUP",
                profile.range_fraction,
                &entry.range,
                profile.range_matches,
            ),
        ] {
            if !wants(fraction) {
                continue;
            }
            let matches = matches.or_else(|| curve.most_results()).unwrap_or(0.0);
            let results = profile
                .top_k
                .map_or(matches, |k| matches.min(k as f64))
                .max(0.0);
            match curve.at(results) {
                Some(us) => parts.push((format!("{label} ({results:.0} results)"), fraction, us)),
                None => missing.push(label),
            }
        }
        if !missing.is_empty() {
            ranking.excluded.push(Excluded {
                configuration: name.clone(),
                reason: format!("not measured: {}", missing.join(", ")),
            });
            continue;
        }
        if guarantee.in_memory {
            notes.push(
                "a memory index is not persisted: it costs RAM and is rebuilt (or loaded from \
                 its snapshot) at every open"
                    .to_owned(),
            );
        }
        if guarantee.session_only && profile.read_your_writes {
            notes.push("read-your-writes only through a session (Database::session)".to_owned());
        }
        if profile.unique {
            notes.push(
                "the uniqueness check's index read is not in the measured PUT cost".to_owned(),
            );
        }
        ranking.ranked.push(Costed {
            configuration: name.clone(),
            cost_us_per_op: parts.iter().map(|(_, fraction, us)| fraction * us).sum(),
            parts: parts
                .into_iter()
                .map(|(label, _, us)| (label, us))
                .collect(),
            notes,
        });
    }
    ranking
        .ranked
        .sort_by(|a, b| a.cost_us_per_op.total_cmp(&b.cost_us_per_op));
    ranking
}

/// Why the best beats the runner-up, in words.
pub fn explain(ranking: &Ranking) -> String {
    match (ranking.ranked.first(), ranking.ranked.get(1)) {
        (Some(best), Some(other)) => {
            let mut why = format!(
                "{} µs per operation vs {} µs for {} ({:.2}× cheaper)",
                round_to(best.cost_us_per_op, 2),
                round_to(other.cost_us_per_op, 2),
                other.configuration,
                other.cost_us_per_op / best.cost_us_per_op.max(1e-9)
            );
            let parts: Vec<String> = best
                .parts
                .iter()
                .filter_map(|(label, a)| {
                    let (_, b) = other.parts.iter().find(|(l, _)| l == label)?;
                    Some(format!(
                        "{label} {} vs {} µs",
                        round_to(*a, 2),
                        round_to(*b, 2)
                    ))
                })
                .collect();
            if !parts.is_empty() {
                let _ = write!(why, "; {}", parts.join(", "));
            }
            for note in &best.notes {
                let _ = write!(why, "; note: {note}");
            }
            why
        }
        (Some(best), None) => {
            let mut why = "the only configuration that qualifies".to_owned();
            for note in &best.notes {
                let _ = write!(why, "; note: {note}");
            }
            why
        }
        _ => "no measured configuration qualifies".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn curves_interpolate_and_extrapolate_upwards_only() {
        let curve = CostCurve::new(&[(10.0, 100.0), (100.0, 400.0), (10.0, 120.0)]);
        assert_eq!(curve.points, vec![(10.0, 110.0), (100.0, 400.0)]);
        assert_eq!(curve.at(1.0), Some(110.0));
        assert!((curve.at(55.0).unwrap() - 255.0).abs() < 1e-9);
        assert!((curve.at(200.0).unwrap() - (400.0 + 100.0 * 290.0 / 90.0)).abs() < 1e-6);
        let falling = CostCurve::new(&[(10.0, 100.0), (20.0, 50.0)]);
        assert_eq!(falling.at(1000.0), Some(50.0));
        assert_eq!(CostCurve::default().at(5.0), None);
    }

    #[test]
    fn guarantees_follow_kind_and_maintenance() {
        let composite = guarantees("composite:sync-full").unwrap();
        assert!(composite.unique_capable && composite.read_your_writes);
        assert!(!guarantees("composite").unwrap().unique_capable); // sync-insert by default
        assert!(guarantees("eager").unwrap().unique_capable); // sync-full by default
        assert!(!guarantees("lazy:sync-full").unwrap().unique_capable);
        assert!(
            !guarantees("composite:async-simple")
                .unwrap()
                .read_your_writes
        );
        let session = guarantees("composite:async-session").unwrap();
        assert!(session.read_your_writes && session.session_only);
        assert!(guarantees("memory").unwrap().in_memory);
        assert!(guarantees("hologram").is_none());
    }

    #[test]
    fn the_built_in_table_loads_and_covers_both_attribute_shapes() {
        let table = CostTable::built_in().unwrap();
        assert!(!table.source.is_empty());
        for time_correlated in [false, true] {
            assert!(
                table
                    .entries
                    .iter()
                    .filter(|e| e.time_correlated == time_correlated)
                    .count()
                    >= 4
            );
        }
        assert!(table
            .entries
            .iter()
            .all(|e| e.put_us > 0.0 && !e.lookup.points.is_empty()));
    }
}
