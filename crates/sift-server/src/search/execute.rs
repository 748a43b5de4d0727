//! Answering a parsed query exactly: one clause's Sift index (the driver) finds candidates, or
//! a scan of the index's key prefixes does (`*`, or while the index is being built); every
//! candidate is then checked against the whole query and the index's membership rules on its
//! stored record, so the answer does not depend on which index found it.

use std::cmp::Ordering;
use std::collections::HashMap;

use sift_index::{AttrValue, Database, GeoBox, Hit, IndexError, SeqNo};

use super::definition::{Definition, Membership};
use super::geo::covering_boxes;
use super::query::{Clause, Predicate, Query};
use crate::keyspace::KEYS_COLLECTION;

/// Documents read per page when scanning the key prefixes.
const SCAN_PAGE_DOCUMENTS: usize = 1024;

/// A matching document.
#[derive(Debug)]
pub struct Match {
    /// Its key.
    pub key: Vec<u8>,
    /// The sequence number of its live version (newest first = highest first).
    pub seq: SeqNo,
    /// Its stored record.
    pub doc: Vec<u8>,
    /// Each schema field's value.
    pub values: Vec<Option<AttrValue>>,
}

/// How matches are ordered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Order {
    /// Newest first (Sift's top-K order).
    Newest,
    /// By a field's value (missing values last; ties newest first).
    Field {
        /// The field's position.
        field: usize,
        /// Ascending.
        ascending: bool,
    },
}

/// Every match of `query`, ordered; `use_indexes` false scans the prefixes (the index is still
/// being built).
pub fn run(
    database: &Database,
    definition: &Definition,
    query: &Query,
    order: Order,
    use_indexes: bool,
) -> Result<Vec<Match>, IndexError> {
    let driver = if use_indexes {
        choose_driver(&query.clauses)
    } else {
        None
    };
    let mut matches = Vec::new();
    let mut keep_matches = |hits: Vec<Hit>| {
        for hit in hits {
            if !definition.covers_key(&hit.pk) {
                continue;
            }
            let Membership::Member(values) = definition.member_values_of(&hit.doc) else {
                continue;
            };
            let holds = query.clauses.iter().all(|clause| {
                values[clause.field]
                    .as_ref()
                    .is_some_and(|value| clause.predicate.matches(value))
            });
            if holds {
                matches.push(Match {
                    key: hit.pk,
                    seq: hit.seq,
                    doc: hit.doc,
                    values,
                });
            }
        }
    };
    match driver
        .map(|clause| driven(database, definition, clause))
        .transpose()?
    {
        Some(Some(candidates)) => keep_matches(candidates),
        // No driver, or writes kept changing the data under a query of several lookups: a
        // scan, a page at a time (only matches are kept).
        Some(None) | None => for_each_covered_page(database, definition, |page| {
            keep_matches(page);
            Ok::<(), IndexError>(())
        })?,
    }
    match order {
        Order::Newest => matches.sort_by_key(|hit| std::cmp::Reverse(hit.seq)),
        Order::Field { field, ascending } => matches.sort_by(|a, b| {
            let by_value = match (&a.values[field], &b.values[field]) {
                (Some(x), Some(y)) => {
                    let ordering = x.compare(y).unwrap_or(Ordering::Equal);
                    if ascending {
                        ordering
                    } else {
                        ordering.reverse()
                    }
                }
                (Some(_), None) => Ordering::Less,
                (None, Some(_)) => Ordering::Greater,
                (None, None) => Ordering::Equal,
            };
            by_value.then(b.seq.cmp(&a.seq))
        }),
    }
    Ok(matches)
}

/// The clause whose index should find the candidates: a tag clause (fewest tags first), then
/// a geo radius, then a numeric range bounded on both sides, then any range. Selectivity is not
/// known in advance; equality on a tag is usually the narrowest.
fn choose_driver(clauses: &[Clause]) -> Option<&Clause> {
    clauses.iter().min_by_key(|clause| match &clause.predicate {
        Predicate::Tags(tags) => tags.len(),
        Predicate::Radius { .. } => 1 << 20,
        Predicate::Range { lo, hi, .. } if lo.is_finite() && hi.is_finite() => 1 << 21,
        Predicate::Range { .. } => 1 << 22,
    })
}

/// Rounds of lookups a query of several lookups tries before it scans instead.
const CONSISTENT_ROUNDS: usize = 4;

/// The candidates of one clause, from its Sift index (a superset of its matches among the
/// index's members); `None` when writes kept changing the data under a clause that needs
/// several lookups (several tags, two boxes across the antimeridian): each lookup reads its
/// own snapshot, so a key that moved from one tag to another between them would be missed.
fn driven(
    database: &Database,
    definition: &Definition,
    clause: &Clause,
) -> Result<Option<Vec<Hit>>, IndexError> {
    let index = &definition.fields[clause.field].sift_index;
    for _ in 0..CONSISTENT_ROUNDS {
        let before = database.engine().latest_sequence();
        let mut results = Vec::new();
        match &clause.predicate {
            Predicate::Tags(tags) => {
                for tag in tags {
                    let value = AttrValue::String(tag.clone());
                    results.push(database.lookup(KEYS_COLLECTION, index, &value, None)?);
                }
            }
            Predicate::Range { lo, hi, .. } => {
                if lo > hi {
                    return Ok(Some(Vec::new()));
                }
                let (Ok(lo), Ok(hi)) = (AttrValue::float(*lo), AttrValue::float(*hi)) else {
                    return Ok(Some(Vec::new()));
                };
                results.push(database.range(KEYS_COLLECTION, index, &lo, &hi, None)?);
            }
            Predicate::Radius { lon, lat, meters } => {
                for (min_lon, min_lat, max_lon, max_lat) in covering_boxes(*lon, *lat, *meters) {
                    let geo_box = GeoBox::new(min_lon, min_lat, max_lon, max_lat)?;
                    results.push(database.within(KEYS_COLLECTION, index, &geo_box, None)?);
                }
            }
        }
        if results.len() == 1 {
            return Ok(Some(
                results.pop().map(|result| result.hits).unwrap_or_default(),
            ));
        }
        if database.engine().latest_sequence() != before {
            continue;
        }
        // Nothing was written meanwhile: the lookups saw one state. A key is in at most one
        // (one tag per field, disjoint boxes), but keep each once anyway.
        let mut newest: HashMap<Vec<u8>, Hit> = HashMap::new();
        for hit in results.into_iter().flat_map(|result| result.hits) {
            match newest.get(&hit.pk) {
                Some(kept) if kept.seq >= hit.seq => {}
                _ => {
                    newest.insert(hit.pk.clone(), hit);
                }
            }
        }
        return Ok(Some(newest.into_values().collect()));
    }
    Ok(None)
}

/// Calls `visit` with every stored key under the index's prefixes, a page at a time, in key
/// order. Each page is read from one snapshot; `visit` may change the keys it was given.
pub fn for_each_covered_page<E: From<IndexError>>(
    database: &Database,
    definition: &Definition,
    mut visit: impl FnMut(Vec<Hit>) -> Result<(), E>,
) -> Result<(), E> {
    for prefix in definition.scan_prefixes() {
        let mut from = prefix.as_bytes().to_vec();
        loop {
            let mut page = database.scan(KEYS_COLLECTION, &from, SCAN_PAGE_DOCUMENTS)?;
            let full = page.len() == SCAN_PAGE_DOCUMENTS;
            let inside = page
                .iter()
                .take_while(|hit| hit.pk.starts_with(prefix.as_bytes()))
                .count();
            let past_prefix = inside < page.len();
            page.truncate(inside);
            if let Some(last) = page.last() {
                from.clone_from(&last.pk);
                from.push(0);
            }
            if !page.is_empty() {
                visit(page)?;
            }
            if past_prefix || !full {
                break;
            }
        }
    }
    Ok(())
}

/// FT.INFO's counts: the index's members, and the keys of its type whose fields do not read
/// as their types (with the first one's reason).
#[derive(Debug, Default)]
pub struct Census {
    /// Members.
    pub documents: u64,
    /// Indexing failures.
    pub failures: u64,
    /// The first failure: key and reason.
    pub first_failure: Option<String>,
}

/// Counts the index's members and failures by a scan of its prefixes.
pub fn census(database: &Database, definition: &Definition) -> Result<Census, IndexError> {
    let mut census = Census::default();
    for_each_covered_page(database, definition, |page| {
        for hit in page {
            match definition.member_values_of(&hit.doc) {
                Membership::Member(_) => census.documents += 1,
                Membership::Failed(reason) => {
                    census.failures += 1;
                    census.first_failure.get_or_insert_with(|| {
                        format!("{}: {reason}", String::from_utf8_lossy(&hit.pk))
                    });
                }
                Membership::OtherType => {}
            }
        }
        Ok::<(), IndexError>(())
    })?;
    Ok(census)
}
