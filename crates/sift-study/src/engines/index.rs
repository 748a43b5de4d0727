//! Sift behind the index benchmark: one `sift_index::Database` with a `tweets` collection and
//! one index per benchmarked attribute, of the kind and maintenance asked for.

use sift_bench::index::{EngineCounters, IndexBenchConfig, IndexEngine, LevelShape, TreeBytes};
use sift_bench::kv::BenchError;
use sift_index::{
    AttrType, AttrValue, Database, DatabaseOptions, IndexKind, IndexSpec, Maintenance, QueryResult,
};
use sift_workload::Attribute;
use std::path::Path;

const COLLECTION: &str = "tweets";

pub struct SiftIndexEngine {
    database: Database,
    /// (attribute, index name, kind, maintenance) of each index.
    indexes: Vec<(Attribute, String, IndexKind, Maintenance)>,
    /// The value type of each index (queries build their values with it).
    value_types: Vec<(Attribute, AttrType)>,
    /// Where and how the database was opened (`reopen` opens it again the same way).
    dir: std::path::PathBuf,
    options: DatabaseOptions,
    /// `sift bench index` prints the asynchronous index lag at close; the study keeps stderr
    /// for its progress (its Diff-Index experiment records the lag in its results).
    print_async_lag: bool,
}

/// Engine tree names of `collection` to the study's labels: `data`, `index <name>`.
pub fn tree_labels(
    database: &Database,
    collection: &str,
) -> std::collections::BTreeMap<String, String> {
    let mut names = std::collections::BTreeMap::new();
    if let Ok(info) = database.collection(collection) {
        names.insert(info.record.primary_tree_name(), "data".to_owned());
        for index in &info.indexes {
            if let Some(tree) = &index.tree {
                names.insert(tree.clone(), format!("index {}", index.name));
            }
        }
    }
    names
}

/// Table files per level (level 0 first, empty deeper levels left out) of every tree of the
/// database, labelled as in [`tree_labels`].
pub fn files_per_level(database: &Database, collection: &str) -> LevelShape {
    let names = tree_labels(database, collection);
    database
        .engine()
        .stats()
        .trees
        .iter()
        .map(|tree| {
            let label = names
                .get(&tree.name)
                .cloned()
                .unwrap_or_else(|| tree.name.clone());
            let mut files: Vec<usize> = tree.levels.iter().map(|level| level.files).collect();
            while files.len() > 1 && files.last() == Some(&0) {
                files.pop();
            }
            (label, files)
        })
        .collect()
}

/// One index to create, with where its attribute lives in the documents: a tweet attribute
/// ([`IndexSlot::for_tweets`]) or, for another data set (the study's `--data`), any path whose
/// values are integers or times; queries address it by the benchmark `attribute` it stands for.
#[derive(Debug, Clone, PartialEq)]
pub struct IndexSlot {
    pub attribute: Attribute,
    pub path: String,
    pub attr_type: AttrType,
    pub kind: String,
    pub maintenance: Option<String>,
}

impl IndexSlot {
    /// The slot of a tweet index specification.
    pub fn for_tweets(spec: &sift_bench::index::IndexSpec) -> IndexSlot {
        IndexSlot {
            attribute: spec.attribute,
            path: spec.attribute.path().to_owned(),
            attr_type: match spec.attribute {
                Attribute::UserId => AttrType::Int,
                Attribute::CreationTime => AttrType::Time,
            },
            kind: spec.kind.clone(),
            maintenance: spec.maintenance.clone(),
        }
    }
}

/// Scales the engine to a memtable of `memtable_bytes`: table files of the same size and a
/// level 1 of four memtables (the proportions of the study's presets).
pub fn scale_engine(options: &mut DatabaseOptions, memtable_bytes: usize) {
    let bytes = memtable_bytes.max(64 << 10);
    options.engine.memtable_bytes_max = bytes;
    options.engine.table_file_bytes_target = bytes as u64;
    options.engine.level1_bytes_max = 4 * bytes as u64;
}

fn error(e: impl std::fmt::Display) -> BenchError {
    BenchError::new(format!("sift: {e}"))
}

fn index_name(attribute: Attribute) -> &'static str {
    match attribute {
        Attribute::UserId => "by_user",
        Attribute::CreationTime => "by_time",
    }
}

fn query_value(attr_type: AttrType, value: i64) -> AttrValue {
    match attr_type {
        AttrType::Time => AttrValue::Time(value),
        AttrType::Float => AttrValue::Float(value as f64),
        _ => AttrValue::Int(value),
    }
}

impl SiftIndexEngine {
    /// Opens a database in `dir` with the benchmark's indexes (the `IndexEngineOpener` shape).
    pub fn open_boxed(
        config: &IndexBenchConfig,
        dir: &Path,
    ) -> Result<Box<dyn IndexEngine>, BenchError> {
        Ok(Box::new(Self::open(config, dir)?))
    }

    /// Opens a database in `dir` with the benchmark's indexes.
    pub fn open(config: &IndexBenchConfig, dir: &Path) -> Result<SiftIndexEngine, BenchError> {
        let mut options = DatabaseOptions::default();
        options.engine.block_cache_bytes = config.cache_bytes;
        if let Some(bytes) = config.memtable_bytes {
            scale_engine(&mut options, bytes);
        }
        options
            .engine
            .background_thread_cpus
            .clone_from(&config.background_cpus);
        let slots: Vec<IndexSlot> = config.indexes.iter().map(IndexSlot::for_tweets).collect();
        let mut engine = Self::open_slots_tuned(
            dir,
            options,
            "tweet_id",
            &slots,
            config.bloom_bits_per_key,
            config.split_delta,
        )?;
        engine.print_async_lag = true;
        Ok(engine)
    }

    /// Opens a database in `dir` with `options`, one collection whose primary key is at
    /// `primary_key`, and one index per slot (the study sets engine options and, on its own
    /// data, the paths).
    pub fn open_slots(
        dir: &Path,
        options: DatabaseOptions,
        primary_key: &str,
        slots: &[IndexSlot],
    ) -> Result<Box<dyn IndexEngine>, BenchError> {
        Ok(Box::new(Self::open_slots_tuned(
            dir,
            options,
            primary_key,
            slots,
            None,
            None,
        )?))
    }

    /// [`SiftIndexEngine::open_slots`] as the concrete type, which is `Sync`: the study's
    /// thread sweep shares one engine between client threads.
    pub fn open_slots_shared(
        dir: &Path,
        options: DatabaseOptions,
        primary_key: &str,
        slots: &[IndexSlot],
    ) -> Result<SiftIndexEngine, BenchError> {
        Self::open_slots_tuned(dir, options, primary_key, slots, None, None)
    }

    /// [`Self::open_slots_shared`] with the bloom bits per value of `embedded` indexes and the
    /// δ of `next` / `sst-local` indexes (`None`: the index layer's defaults).
    pub fn open_slots_tuned(
        dir: &Path,
        options: DatabaseOptions,
        primary_key: &str,
        slots: &[IndexSlot],
        bloom_bits_per_key: Option<u32>,
        split_delta: Option<f64>,
    ) -> Result<SiftIndexEngine, BenchError> {
        let database = Database::open(dir, options.clone()).map_err(error)?;
        // A database loaded earlier (the study shares loads between experiments) already has
        // its collection and indexes: they are opened as they are.
        let existing = database.collection(COLLECTION).ok();
        if existing.is_none() {
            database
                .create_collection(COLLECTION, primary_key)
                .map_err(error)?;
        }
        let mut indexes = Vec::new();
        let mut value_types = Vec::new();
        for slot in slots {
            if slot.kind == "none" {
                continue; // a baseline without a secondary index (its queries are skipped)
            }
            let kind: IndexKind = slot.kind.parse().map_err(error)?;
            let name = index_name(slot.attribute);
            let mut index_spec = IndexSpec::new(name, &slot.path, slot.attr_type, kind);
            if let Some(m) = &slot.maintenance {
                // sst-local / next: the third part may name the validation (memo, get-lite).
                match m.parse::<sift_index::Validation>() {
                    Ok(validation) if matches!(kind, IndexKind::Next | IndexKind::SstLocal) => {
                        index_spec = index_spec.with_validation(validation);
                    }
                    _ => index_spec = index_spec.with_maintenance(m.parse().map_err(error)?),
                }
            }
            if let (IndexKind::Embedded, Some(bits)) = (kind, bloom_bits_per_key) {
                index_spec = index_spec.with_bloom_bits_per_key(bits);
            }
            if let (IndexKind::Next | IndexKind::SstLocal, Some(delta)) = (kind, split_delta) {
                let delta = sift_index::SplitDelta::new(delta)
                    .ok_or_else(|| BenchError::new(format!("bad split delta {delta}")))?;
                index_spec = index_spec.with_split_delta(delta);
            }
            let found = existing
                .as_ref()
                .and_then(|info| info.indexes.iter().find(|record| record.name == name));
            let record = match found {
                Some(record) if record.path == slot.path && record.kind == kind => record.clone(),
                Some(record) => {
                    return Err(BenchError::new(format!(
                        "{}: index {name} exists on {} ({:?}), not on {} ({kind:?})",
                        dir.display(),
                        record.path,
                        record.kind,
                        slot.path
                    )))
                }
                None => database
                    .create_index(COLLECTION, index_spec)
                    .map_err(error)?,
            };
            indexes.push((
                slot.attribute,
                name.to_owned(),
                record.kind,
                record.maintenance,
            ));
            value_types.push((slot.attribute, slot.attr_type));
        }
        Ok(SiftIndexEngine {
            database,
            indexes,
            value_types,
            dir: dir.to_path_buf(),
            options,
            print_async_lag: false,
        })
    }

    fn tree_labels(&self) -> std::collections::BTreeMap<String, String> {
        tree_labels(&self.database, COLLECTION)
    }

    fn value(&self, attribute: Attribute, value: i64) -> AttrValue {
        let attr_type = self
            .value_types
            .iter()
            .find(|(a, _)| *a == attribute)
            .map_or(AttrType::Int, |(_, t)| *t);
        query_value(attr_type, value)
    }

    fn index(&self, attribute: Attribute) -> Result<&str, BenchError> {
        self.indexes
            .iter()
            .find(|(a, ..)| *a == attribute)
            .map(|(_, name, ..)| name.as_str())
            .ok_or_else(|| BenchError::new(format!("no index on {}", attribute.path())))
    }

    fn report(result: &QueryResult, hit_ids: Option<&mut Vec<u64>>) -> Result<u64, BenchError> {
        if let Some(ids) = hit_ids {
            for hit in &result.hits {
                let id = std::str::from_utf8(&hit.pk)
                    .ok()
                    .and_then(|s| s.parse().ok())
                    .ok_or_else(|| {
                        BenchError::new("sift: a hit's primary key is not a tweet id")
                    })?;
                ids.push(id);
            }
        }
        Ok(result.hits.len() as u64)
    }
}

impl IndexEngine for SiftIndexEngine {
    fn name(&self) -> &'static str {
        "sift"
    }

    fn index_labels(&self, attribute: Attribute) -> Option<(String, String)> {
        self.indexes
            .iter()
            .find(|(a, ..)| *a == attribute)
            .map(|(_, _, kind, maintenance)| {
                (kind.name().to_owned(), maintenance.name().to_owned())
            })
    }

    fn settings_note(&self) -> String {
        "WAL on without sync; one database-wide write lock in the index layer".to_owned()
    }

    fn put(&self, _tweet_id: u64, json: &str) -> Result<(), BenchError> {
        self.database
            .put(COLLECTION, json.as_bytes())
            .map(|_| ())
            .map_err(error)
    }

    fn get(&self, tweet_id: u64) -> Result<Option<usize>, BenchError> {
        Ok(self
            .database
            .get(COLLECTION, tweet_id.to_string().as_bytes())
            .map_err(error)?
            .map(|hit| hit.doc.len()))
    }

    fn lookup(
        &self,
        attribute: Attribute,
        value: i64,
        top_k: Option<usize>,
        hit_ids: Option<&mut Vec<u64>>,
    ) -> Result<u64, BenchError> {
        let index = self.index(attribute)?;
        let result = self
            .database
            .lookup(COLLECTION, index, &self.value(attribute, value), top_k)
            .map_err(error)?;
        Self::report(&result, hit_ids)
    }

    fn range_lookup(
        &self,
        attribute: Attribute,
        lo: i64,
        hi: i64,
        top_k: Option<usize>,
        hit_ids: Option<&mut Vec<u64>>,
    ) -> Result<u64, BenchError> {
        let index = self.index(attribute)?;
        let result = self
            .database
            .range(
                COLLECTION,
                index,
                &self.value(attribute, lo),
                &self.value(attribute, hi),
                top_k,
            )
            .map_err(error)?;
        Self::report(&result, hit_ids)
    }

    fn result_blocks(
        &self,
        attribute: Attribute,
        lo: i64,
        hi: i64,
        top_k: Option<usize>,
    ) -> Result<Option<u64>, BenchError> {
        let index = self.index(attribute)?;
        let result = self
            .database
            .range(
                COLLECTION,
                index,
                &self.value(attribute, lo),
                &self.value(attribute, hi),
                top_k,
            )
            .map_err(error)?;
        let versions: Vec<(Vec<u8>, sift_index::SeqNo)> = result
            .hits
            .into_iter()
            .map(|hit| (hit.pk, hit.seq))
            .collect();
        super::blocks::distinct_blocks(&self.database, COLLECTION, &versions).map(Some)
    }

    fn flush(&self) -> Result<(), BenchError> {
        self.database.flush().map_err(error)
    }

    fn wait_for_background_work(&self) -> Result<(), BenchError> {
        // Asynchronous indexes: every queued index update applied (no-op otherwise).
        self.database.wait_until_indexed().map_err(error)?;
        self.database
            .engine()
            .wait_for_background_work()
            .map_err(error)
    }

    fn compact_all(&self) -> Result<(), BenchError> {
        self.database.flush().map_err(error)?;
        self.database.compact_all().map_err(error)?;
        self.wait_for_background_work()
    }

    fn counters(&self) -> EngineCounters {
        let stats = self.database.engine().stats();
        EngineCounters {
            bytes_written: Some(stats.bytes_written),
            blocks_read: Some(stats.blocks_read_from_disk + stats.blocks_read_from_cache),
        }
    }

    fn disk_bytes_per_tree(&self) -> Result<TreeBytes, BenchError> {
        let stats = self.database.engine().stats();
        let names = self.tree_labels();
        Ok(stats
            .trees
            .iter()
            .map(|t| {
                let label = names
                    .get(&t.name)
                    .cloned()
                    .unwrap_or_else(|| t.name.clone());
                (label, t.levels.iter().map(|l| l.bytes).sum())
            })
            .collect())
    }

    fn files_per_level(&self) -> Result<LevelShape, BenchError> {
        Ok(files_per_level(&self.database, COLLECTION))
    }

    fn close(self: Box<Self>) -> Result<(), BenchError> {
        if self.print_async_lag && self.indexes.iter().any(|(.., m)| m.is_async()) {
            // The index lag of asynchronous maintenance (Diff-Index Figure 11), on stderr so
            // JSON rows on stdout stay parseable.
            let s = self.database.async_index_stats();
            eprintln!(
                "sift async index lag: {} updates, p50 {} us, p90 {} us, p99 {} us, p99.9 {} us, max {} us; {} flush drains waited {} us",
                s.updates_applied,
                s.lag_us_p50,
                s.lag_us_p90,
                s.lag_us_p99,
                s.lag_us_p999,
                s.lag_us_max,
                s.flush_drains,
                s.flush_drain_wait_us
            );
        }
        self.database.close().map_err(error)
    }

    fn reopen(
        self: Box<Self>,
    ) -> Result<(Box<dyn IndexEngine>, sift_bench::index::ReopenReport), BenchError> {
        let SiftIndexEngine {
            database,
            indexes,
            value_types,
            dir,
            options,
            print_async_lag,
        } = *self;
        database.close().map_err(error)?;
        let started = std::time::Instant::now();
        let database = Database::open(&dir, options.clone()).map_err(error)?;
        let open_s = started.elapsed().as_secs_f64();
        let timings = database.open_timings();
        let seconds = |us: u64| us as f64 / 1e6;
        let mut report = sift_bench::index::ReopenReport {
            phase: "reopen".to_owned(),
            engine: "sift".to_owned(),
            open_s,
            engine_open_s: Some(seconds(timings.engine_us)),
            indexes_open_s: Some(seconds(timings.indexes_us)),
            global_index_rebuild_s: Some(seconds(timings.next_register_us)),
            ..sift_bench::index::ReopenReport::default()
        };
        for (_, name, kind, _) in &indexes {
            if *kind == IndexKind::Next {
                let global = database
                    .global_index_stats(COLLECTION, name)
                    .map_err(error)?;
                *report.global_index_files.get_or_insert(0) += global.files as u64;
                *report.global_index_blocks.get_or_insert(0) += global.blocks as u64;
                *report.global_index_memory_bytes.get_or_insert(0) += global.memory_bytes;
            }
        }
        let engine = SiftIndexEngine {
            database,
            indexes,
            value_types,
            dir,
            options,
            print_async_lag,
        };
        report.bytes_on_disk = Some(engine.disk_bytes_per_tree()?.values().sum());
        Ok((Box::new(engine), report))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sift_bench::index::verify::{verify_against_reference, VerifyConfig};

    #[test]
    fn sift_answers_like_the_reference_engine_for_every_kind() {
        for kind in ["composite", "eager", "lazy", "memory"] {
            let dir = tempfile::tempdir().expect("tempdir");
            let mut config = IndexBenchConfig::small(500, sift_workload::Workload::Static);
            config.indexes = sift_bench::index::verify::verify_indexes(kind);
            let engine = SiftIndexEngine::open_boxed(&config, dir.path()).expect("open");
            let summary = verify_against_reference(engine.as_ref(), VerifyConfig::default())
                .unwrap_or_else(|e| panic!("{kind}: {e}"));
            assert!(
                summary.answers > 0 && summary.non_empty_queries > 0 && summary.overwrites > 0,
                "{kind}: {summary:?}"
            );
            engine.close().expect("close");
        }
    }

    /// `--compact`: after it every tree's files sit in one level, and the answers are the
    /// same as before it.
    #[test]
    fn compact_all_leaves_each_tree_in_one_level_and_keeps_the_answers() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut options = DatabaseOptions::default();
        scale_engine(&mut options, 32 << 10); // many small tables, several levels
        let slots = [IndexSlot::for_tweets(
            &sift_bench::index::IndexSpec::parse("user.id:lazy").expect("spec"),
        )];
        let engine = SiftIndexEngine::open_slots_shared(dir.path(), options, "tweet_id", &slots)
            .expect("open");
        let mut tweets =
            sift_workload::TweetGenerator::new(sift_workload::TweetConfig::for_tweets(4000, 11))
                .expect("generator");
        let mut users = Vec::new();
        for _ in 0..4000 {
            let tweet = tweets.next_tweet();
            users.push(tweet.fields.user_id as i64);
            engine.put(tweet.fields.tweet_id, &tweet.json).expect("put");
        }
        engine.flush().expect("flush");
        engine.wait_for_background_work().expect("wait");
        let answers = |engine: &SiftIndexEngine| -> Vec<Vec<u64>> {
            users
                .iter()
                .step_by(37)
                .map(|&user| {
                    let mut ids = Vec::new();
                    engine
                        .lookup(Attribute::UserId, user, Some(10), Some(&mut ids))
                        .expect("lookup");
                    ids
                })
                .collect()
        };
        let levels_with_files = |engine: &SiftIndexEngine| -> Vec<(String, usize)> {
            engine
                .database
                .engine()
                .stats()
                .trees
                .iter()
                .map(|tree| {
                    let used = tree.levels.iter().filter(|level| level.files > 0).count();
                    (tree.name.clone(), used)
                })
                .collect()
        };
        let before = answers(&engine);
        assert!(before.iter().all(|ids| !ids.is_empty()));
        assert!(
            levels_with_files(&engine).iter().any(|(_, used)| *used > 1),
            "the test needs a tree in several levels before the compaction: {:?}",
            levels_with_files(&engine)
        );
        engine.compact_all().expect("compact");
        let after = levels_with_files(&engine);
        assert!(after.iter().all(|(_, used)| *used <= 1), "{after:?}");
        assert!(after.iter().any(|(_, used)| *used == 1), "{after:?}");
        assert_eq!(answers(&engine), before);
        Box::new(engine).close().expect("close");
    }

    /// `sift bench index --index user.id:embedded --background-cpus C --client-cpus C --json`:
    /// the engine's and the index layer's background threads run on C, every row reports
    /// both lists, and a CPU the process may not use is refused before anything runs.
    #[test]
    fn a_pinned_run_pins_the_background_threads_and_reports_its_cpus() {
        #[derive(Debug, clap::Parser)]
        struct Cli {
            #[command(flatten)]
            args: sift_bench::index::IndexBenchArgs,
        }
        let parse = |cpus: &str| {
            let dir = tempfile::tempdir().expect("tempdir");
            let db = dir.path().join("db").to_str().expect("utf-8").to_owned();
            let arguments = [
                "index",
                "--n",
                "300",
                "--index",
                "user.id:embedded",
                "--gets",
                "5",
                "--lookups",
                "5",
                "--range-lookups",
                "2",
                "--db",
                &db,
                "--background-cpus",
                cpus,
                "--client-cpus",
                cpus,
                "--json",
            ];
            let args = <Cli as clap::Parser>::try_parse_from(arguments)
                .expect("parse")
                .args;
            (dir, args)
        };
        let first = sift_lsm::process_allowed_cpus()[0];
        let (_dir, args) = parse(&first.to_string());
        let mut background_threads = Vec::new();
        let rows = sift_bench::index::run_from_args(&args, &mut |config, path| {
            let engine = SiftIndexEngine::open(config, path)?;
            if cfg!(target_os = "linux") {
                // The threads pin themselves as they start: wait (up to 10 s) until they have.
                let expected = Some(first.to_string());
                let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
                loop {
                    background_threads = background_thread_cpus(&engine);
                    let settled = ["sift-flush", "sift-compact-0", "sift-index-async-0"]
                        .iter()
                        .all(|name| background_threads.iter().any(|(n, _)| n == name))
                        && background_threads.iter().all(|(_, cpus)| *cpus == expected);
                    if settled || std::time::Instant::now() > deadline {
                        break;
                    }
                    std::thread::sleep(std::time::Duration::from_millis(10));
                }
            }
            Ok(Box::new(engine) as Box<dyn IndexEngine>)
        })
        .expect("run");
        if cfg!(target_os = "linux") {
            let expected = Some(first.to_string());
            for name in ["sift-flush", "sift-compact-0", "sift-index-async-0"] {
                assert!(
                    background_threads
                        .iter()
                        .any(|(n, cpus)| n == name && *cpus == expected),
                    "{name} not on CPU {first}: {background_threads:?}"
                );
            }
        }
        assert!(rows.iter().any(|row| row.phase == "load"));
        assert!(rows.iter().any(|row| row.op == "LOOKUP"));
        sift_bench::pinning::test_support::assert_rows_report_pinning(&rows, first);
        if cfg!(target_os = "linux") {
            let (dir, args) = parse("4096");
            let error = sift_bench::index::run_from_args(&args, &mut SiftIndexEngine::open_boxed)
                .expect_err("CPU 4096 refused");
            assert!(
                error.message().starts_with("--background-cpus: CPU 4096 "),
                "{error}"
            );
            assert!(!dir.path().join("db").exists(), "nothing ran");
        }
    }

    /// The `Cpus_allowed_list` of each of the engine's running background threads, by name.
    fn background_thread_cpus(engine: &SiftIndexEngine) -> Vec<(String, Option<String>)> {
        engine
            .database
            .engine()
            .background_thread_ids()
            .into_iter()
            .map(|(name, id)| (name, sift_bench::pinning::thread_cpu_list(id)))
            .collect()
    }

    /// `--reopen`: the reopened store reports the open and its parts, its `next` global index
    /// lists the loaded tables, and it answers as before the reopen.
    #[test]
    fn reopen_reports_the_open_and_answers_as_before() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut config = IndexBenchConfig::small(3000, sift_workload::Workload::Static);
        config.indexes = vec![
            sift_bench::index::IndexSpec::parse("user.id:next").expect("spec"),
            sift_bench::index::IndexSpec::parse("created_at:embedded").expect("spec"),
        ];
        config.memtable_bytes = Some(64 << 10); // several tables
        let engine = SiftIndexEngine::open_boxed(&config, dir.path()).expect("open");
        let mut tweets = sift_workload::TweetGenerator::new(
            sift_workload::TweetConfig::for_tweets(config.tweets, config.seed),
        )
        .expect("generator");
        let mut users = Vec::new();
        for _ in 0..config.tweets {
            let tweet = tweets.next_tweet();
            users.push(tweet.fields.user_id as i64);
            engine.put(tweet.fields.tweet_id, &tweet.json).expect("put");
        }
        engine.flush().expect("flush");
        engine.wait_for_background_work().expect("wait");
        let answers = |engine: &dyn IndexEngine| -> Vec<Vec<u64>> {
            users
                .iter()
                .step_by(97)
                .map(|&user| {
                    let mut ids = Vec::new();
                    engine
                        .lookup(Attribute::UserId, user, None, Some(&mut ids))
                        .expect("lookup");
                    ids
                })
                .collect()
        };
        let before = answers(engine.as_ref());
        assert!(before.iter().all(|ids| !ids.is_empty()));
        let (engine, report) = engine.reopen().expect("reopen");
        assert_eq!(report.phase, "reopen");
        assert!(report.open_s > 0.0);
        let parts = [
            report.engine_open_s,
            report.indexes_open_s,
            report.global_index_rebuild_s,
        ];
        assert!(parts
            .iter()
            .all(|part| part.is_some_and(|s| s <= report.open_s)));
        assert!(report.global_index_rebuild_s <= report.indexes_open_s);
        assert!(
            report.global_index_files.is_some_and(|files| files >= 2),
            "{report:?}"
        );
        assert!(report.global_index_blocks.is_some_and(|blocks| blocks >= 2));
        assert!(report.bytes_on_disk.is_some_and(|bytes| bytes > 0));
        assert_eq!(answers(engine.as_ref()), before);
        engine.close().expect("close");
    }
}
