//! One randomized model driver for every index configuration.
//!
//! The same operation stream — puts, replacing puts (changing or keeping values), deletes,
//! batches with repeated keys, bad input, flushes, compactions of everything and of single
//! trees, reopens, indexes created on existing data and dropped, failing async workers — runs
//! over every kind × maintenance scheme (`configs.rs`) × attribute type (int, float, string,
//! time, geo). After every step:
//! - **metamorphic**: every configuration answers each query with the same documents in the
//!   same order;
//! - **model**: each answers exactly what a brute-force filter over a `BTreeMap` gives (same
//!   documents, order and sequence numbers), with random limits;
//! - the invariants of particular kinds: `next` global indexes describe the live files,
//!   `deferred` garbage matches the model, async indexes hold exactly the live entries and
//!   answer "current or missing" before their workers catch up, embedded zone maps skip.
//!
//! A second test re-runs this binary as a writer child that is SIGKILLed at a random moment
//! while flushes and compactions run; every acknowledged write must be there and every query
//! must again match the model.
//!
//! `SIFT_MODEL_STEPS` lengthens the run, `SIFT_SEED` replays one. Kind-specific regressions
//! live in their own named tests.

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

#[path = "../common/mod.rs"]
mod common;

mod check;
mod configs;
mod crash;
mod documents;
mod stream;

use check::Coverage;
use common::{seed, small_options, steps, SeedGuard};
use configs::{indexed, Config, ATTRIBUTES, BLIND, COLLECTIONS, CONFIGS, LATE_FIELDS};
use documents::{random_doc, Model, PKS};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use sift_index::{AttrType, Database, DatabaseOptions, GeoBox, IndexError};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Engine settings that flush and compact after a few hundred writes; async workers that retry
/// at once and report a failure only after many attempts (the driver injects failures).
pub fn options(deferred_fast_path: bool, inject_failures: &Arc<AtomicU64>) -> DatabaseOptions {
    let mut options = small_options();
    options.async_index.inject_failures = Arc::clone(inject_failures);
    options.engine.memtable_bytes_max = 12 << 10;
    options.async_index.workers = 2;
    options.async_index.retry_backoff_initial = Duration::from_millis(1);
    options.async_index.retry_backoff_max = Duration::from_millis(20);
    options.async_index.failures_reported_after = 1000;
    options.deferred_fast_path = deferred_fast_path;
    options
}

/// Creates both collections and every index (under `prefix`, only `fields`).
pub fn create_indexes(db: &Database, prefix: &str, fields: &[&str]) {
    for (config, attribute) in indexed() {
        if fields.contains(&attribute.field) {
            let name = config.index_name(prefix, attribute.field);
            db.create_index(config.collection(), config.spec(&name, attribute))
                .unwrap_or_else(|e| panic!("create {name}: {e}"));
        }
    }
}

pub fn create_collections(db: &Database) {
    for collection in COLLECTIONS {
        db.create_collection(collection, "id").unwrap();
    }
}

/// The kinds that cannot answer `within` say so: a clear error, not an empty answer.
fn check_unsupported_geo(db: &Database) {
    let world = GeoBox::new(-180.0, -90.0, 180.0, 90.0).unwrap();
    let geo = ATTRIBUTES
        .into_iter()
        .find(|a| a.attr_type == AttrType::Geo)
        .unwrap();
    for config in CONFIGS
        .into_iter()
        .filter(|config| !config.supports(AttrType::Geo))
    {
        let name = config.index_name("unsupported_", geo.field);
        db.create_index(config.collection(), config.spec(&name, geo))
            .unwrap();
        let error = db
            .within(config.collection(), &name, &world, None)
            .unwrap_err();
        assert!(
            matches!(error, IndexError::UnsupportedQuery { .. }),
            "{name}: {error}"
        );
        db.drop_index(config.collection(), &name).unwrap();
    }
}

/// Which tree a single-tree compaction picks.
fn random_tree(db: &Database, rng: &mut StdRng) -> sift_lsm::Tree {
    let collection = COLLECTIONS[rng.gen_range(0..COLLECTIONS.len())];
    let info = db.collection(collection).unwrap();
    let mut trees = vec![info.record.primary_tree_name()];
    trees.extend(info.indexes.iter().filter_map(|index| index.tree.clone()));
    db.engine()
        .tree(&trees[rng.gen_range(0..trees.len())])
        .unwrap()
}

/// Where a check runs: the index prefixes that exist, the driver's clock, the step (and its
/// description for failure messages).
struct StepContext<'a> {
    prefixes: &'a [&'a str],
    clock: u64,
    step: usize,
    what: &'a str,
}

/// Everything checked after a step (and after the run).
fn check_step(
    db: &Database,
    model: &Model,
    rng: &mut StdRng,
    context: &StepContext<'_>,
    coverage: &mut Coverage,
) {
    let StepContext {
        prefixes,
        clock,
        step,
        what,
    } = *context;
    check::check_async_current_or_missing(db, model, rng, prefixes, clock, what);
    db.wait_until_indexed()
        .unwrap_or_else(|e| panic!("{what}: {e}"));
    assert_eq!(db.async_index_stats().queue_length, 0, "{what}");
    check::check_queries(db, model, rng, prefixes, clock, what, coverage);
    check::check_async_entries(db, model, prefixes, what);
    check::check_zone_maps(db, what, coverage);
    check::check_global_indexes(db, prefixes, what, coverage);
    if step.is_multiple_of(20) {
        check::check_deferred_garbage(db, model, false, what);
    }
}

/// Whether the deferred scheme's in-memory fast path runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum FastPath {
    Off,
    /// On at first, then chosen at random at each reopen: DELETEs must be right whichever
    /// process wrote a version.
    Toggled,
}

fn run_model(fast_path: FastPath) {
    let seed = seed();
    let _guard = SeedGuard(seed);
    let mut rng = StdRng::seed_from_u64(seed);
    // A second stream for the fast-path choices, so the main stream is the same in both runs.
    let mut toggles = StdRng::seed_from_u64(seed ^ 0x5eed_fa57);
    let dir = tempfile::tempdir().unwrap();
    let mut fast = fast_path == FastPath::Toggled;
    // Failures injected into the async workers (shared by every open of the run).
    let inject = Arc::new(AtomicU64::new(0));
    let mut db = Database::open(dir.path(), options(fast, &inject)).unwrap();
    create_collections(&db);
    check_unsupported_geo(&db);
    let mut model = Model::new();
    let mut clock: u64 = 0;
    // Some documents exist before the first indexes, in a table: scanned until rewritten.
    for pk in 0..PKS / 2 {
        clock += 1;
        let writes = vec![stream::Write::Put(random_doc(&mut rng, pk, clock))];
        stream::apply_everywhere(&db, &mut model, &writes, "before the indexes", &mut |_| {});
    }
    db.flush().unwrap();
    create_indexes(&db, "", &["n", "f", "s", "t", "g"]);
    let mut late_created = false;
    let mut coverage = Coverage::default();
    for step in 0..steps(200) {
        clock += 1;
        let what = format!("step {step} (deferred fast path {fast})");
        match rng.gen_range(0..100) {
            0..=64 => {
                let writes = stream::random_writes(&mut rng, &model, clock);
                stream::apply_everywhere(&db, &mut model, &writes, &what, &mut |_| {});
            }
            65..=67 => stream::write_bad_input(&db, &mut rng, clock, &what),
            68..=74 => db.flush().unwrap(),
            75..=77 => db.compact_all().unwrap(),
            78..=83 => {
                let tree = random_tree(&db, &mut rng);
                db.engine().compact_range(&tree, None, None).unwrap();
            }
            84..=86 => {
                // Failing async workers: updates pile up and are retried; flushes wait.
                inject.store(rng.gen_range(1..10), Ordering::SeqCst);
            }
            87..=93 => {
                if rng.gen_bool(0.5) {
                    db.close().unwrap();
                } else {
                    drop(db); // no clean close: what the log holds is replayed
                }
                fast = fast_path == FastPath::Toggled && toggles.gen_bool(0.5);
                db = Database::open(dir.path(), options(fast, &inject)).unwrap();
            }
            _ => {
                if late_created {
                    // Drop one late index and create it again on the current data: tables
                    // written before lack its entries or blocks.
                    let config: Config = CONFIGS[rng.gen_range(0..CONFIGS.len())];
                    let field = LATE_FIELDS[rng.gen_range(0..LATE_FIELDS.len())];
                    let attribute = ATTRIBUTES.into_iter().find(|a| a.field == field).unwrap();
                    if config.supports(attribute.attr_type) {
                        let name = config.index_name("late_", field);
                        db.drop_index(config.collection(), &name).unwrap();
                        db.create_index(config.collection(), config.spec(&name, attribute))
                            .unwrap();
                    }
                } else {
                    create_indexes(&db, "late_", &LATE_FIELDS);
                    late_created = true;
                }
            }
        }
        let prefixes: &[&str] = if late_created { &["", "late_"] } else { &[""] };
        check_step(
            &db,
            &model,
            &mut rng,
            &StepContext {
                prefixes,
                clock,
                step,
                what: &what,
            },
            &mut coverage,
        );
    }
    check::compact_deferred_fully(&db);
    let prefixes: &[&str] = if late_created { &["", "late_"] } else { &[""] };
    check_step(
        &db,
        &model,
        &mut rng,
        &StepContext {
            prefixes,
            clock,
            step: 0,
            what: "after full compactions",
        },
        &mut coverage,
    );
    check::check_deferred_garbage(&db, &model, true, "after full compactions");
    if fast_path == FastPath::Off {
        for config in CONFIGS.into_iter().filter(|c| c.collection() == BLIND) {
            let report = db
                .deferred_garbage(BLIND, &config.index_name("", "n"))
                .unwrap();
            assert_eq!(report.fast_path_deletes, 0, "{report:?}");
        }
    }
    let stats = db.async_index_stats();
    assert_eq!(stats.updates_applied, stats.updates_queued, "{stats:?}");
    assert!(stats.lag_us_p50 <= stats.lag_us_p99 && stats.lag_us_p99 <= stats.lag_us_max);
    assert!(coverage.hits_compared > 1000, "{coverage:?}");
    assert!(
        coverage.files_indexed > 0,
        "next indexes should have described tables: {coverage:?}"
    );
    assert!(
        coverage.zone_map_skips > 0,
        "zone maps should have skipped: {coverage:?}"
    );
    eprintln!("seed {seed}: {coverage:?}");
}

#[test]
fn every_configuration_matches_the_model() {
    run_model(FastPath::Toggled);
}

#[test]
fn every_configuration_matches_the_model_without_the_deferred_fast_path() {
    run_model(FastPath::Off);
}

/// Opens `dir` with the driver's options (the crash test's parent and child).
pub fn open(dir: &Path, deferred_fast_path: bool) -> Database {
    Database::open(
        dir,
        options(deferred_fast_path, &Arc::new(AtomicU64::new(0))),
    )
    .unwrap()
}
