//! Extension points, exercised through the public `Db` API with small test-only
//! implementations: block property collectors and block filters (zone maps, meta blocks,
//! filtered scans), compaction observers, merge operators, version listeners, level-by-level
//! reads with GetLite, and the sequence numbers `get` reports.
//!
//! Every test is seeded: a failure prints its seed, and `SIFT_SEED=<n>` replays it.

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

use parking_lot::Mutex;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use sift_lsm::extension::{
    BlockFilter, BlockPropertyCollector, BlockPropertyCollectorFactory, ChangeReason,
    CollectorEntry, CompactionObserver, DropReason, DroppedEntry, FinishedBlock, JobKind,
    MergeOperator, Properties, TableCollectorOutput, TableContext, VersionChange, VersionListener,
    EMITTED_PIECE_ENTRIES,
};
use sift_lsm::fs::{FaultFileSystem, FaultKind};
use sift_lsm::{
    ComponentId, Db, Entry, NewerVersion, Options, ReadOptions, ReadStats, SeqNo, Snapshot, Tree,
    TreeId, TreeOptions, ValueKind, WriteBatch, WriteOptions,
};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::Path;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

const DIR: &str = "/extensions-db";
const LEVELS_MAX: usize = 7;

/// Runs `test` with the seed from `SIFT_SEED` or `default_seed`, printing it on failure.
fn with_seed(name: &str, default_seed: u64, test: impl Fn(u64) + std::panic::RefUnwindSafe) {
    let seed = std::env::var("SIFT_SEED").ok().map_or(default_seed, |s| {
        s.parse().expect("SIFT_SEED must be a number")
    });
    if let Err(e) = std::panic::catch_unwind(|| test(seed)) {
        eprintln!("{name} failed with seed {seed}: replay with SIFT_SEED={seed}");
        std::panic::resume_unwind(e);
    }
}

fn key(i: usize) -> Vec<u8> {
    format!("key{i:05}").into_bytes()
}

fn show(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Options for small, deterministic tests on an in-memory file system: memtables flush only
/// when asked (unless `memtable_bytes_max` is lowered) and L0 is never compacted on its own.
fn quiet_options(fs: &FaultFileSystem) -> Options {
    Options {
        file_system: Arc::new(fs.clone()),
        memtable_bytes_max: 8 << 20,
        l0_compaction_trigger: 1000,
        l0_slowdown_trigger: 2000,
        l0_stop_trigger: 3000,
        levels_max: LEVELS_MAX,
        level1_bytes_max: 64 << 20,
        table_file_bytes_target: 8 << 10,
        block_bytes: 256,
        block_restart_interval: 4,
        bloom_bits_per_key: 10,
        block_cache_bytes: 0,
        ..Options::default()
    }
}

fn open_or_create(db: &Db, name: &str, options: &Options) -> Tree {
    db.tree(name).unwrap_or_else(|_| {
        let tree_options = options.tree_options.get(name).cloned().unwrap_or_default();
        db.create_tree(name, tree_options).expect("create tree")
    })
}

fn reopen(db: Db, options: &Options) -> Db {
    db.close().expect("close");
    Db::open(DIR, options.clone()).expect("reopen")
}

/// One stored version of a key, as a component iterator yields it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
struct Stored {
    key: Vec<u8>,
    seq: SeqNo,
    kind: ValueKind,
    value: Vec<u8>,
}

/// Every entry of every component of `tree` in `view` order (newest component first).
fn components_contents(
    db: &Db,
    tree: &Tree,
    options: &ReadOptions,
) -> Vec<(ComponentId, Vec<Stored>)> {
    let view = db.components(tree, options).expect("components");
    view.ids()
        .into_iter()
        .map(|id| {
            let mut iter = view.iter(id).expect("component iter");
            iter.seek_to_first().expect("seek");
            let mut entries = Vec::new();
            while iter.valid() {
                entries.push(Stored {
                    key: iter.user_key().to_vec(),
                    seq: iter.seq(),
                    kind: iter.kind(),
                    value: iter.value().to_vec(),
                });
                iter.next().expect("next");
            }
            (id, entries)
        })
        .collect()
}

fn scan(db: &Db, tree: &Tree, options: ReadOptions) -> Vec<(Vec<u8>, Vec<u8>, SeqNo)> {
    db.iter(tree, options)
        .expect("iter")
        .collect::<Result<Vec<_>, _>>()
        .expect("scan")
}

// ---------------------------------------------------------------------------------------------
// Block property collectors and block filters
// ---------------------------------------------------------------------------------------------

const ZONE_COLLECTOR: &str = "minmax";
const NUMBERS_BLOCK: &str = "numbers";

/// Values are an 8-byte big-endian number followed by padding.
fn number_value(number: u64, padding: usize) -> Vec<u8> {
    let mut v = number.to_be_bytes().to_vec();
    v.extend(std::iter::repeat_n(b'p', padding));
    v
}

fn number_of(value: &[u8]) -> Option<u64> {
    Some(u64::from_be_bytes(value.get(..8)?.try_into().ok()?))
}

fn encode_range(range: Option<(u64, u64)>) -> Vec<u8> {
    range.map_or_else(Vec::new, |(lo, hi)| {
        let mut v = lo.to_be_bytes().to_vec();
        v.extend_from_slice(&hi.to_be_bytes());
        v
    })
}

fn decode_range(bytes: &[u8]) -> Option<(u64, u64)> {
    Some((number_of(bytes)?, number_of(bytes.get(8..)?)?))
}

fn encode_numbers(numbers: &[u64]) -> Vec<u8> {
    numbers.iter().flat_map(|n| n.to_be_bytes()).collect()
}

fn widen(range: &mut Option<(u64, u64)>, n: u64) {
    *range = Some(range.map_or((n, n), |(lo, hi)| (lo.min(n), hi.max(n))));
}

/// Min/max of the numbers of the Puts, per block and per table, plus a meta block with the
/// sorted numbers of the table.
#[derive(Default)]
struct ZoneCollector {
    block: Option<(u64, u64)>,
    table: Option<(u64, u64)>,
    numbers: Vec<u64>,
}

impl BlockPropertyCollector for ZoneCollector {
    fn add(&mut self, entry: &CollectorEntry<'_>) {
        if entry.kind != ValueKind::Put {
            return;
        }
        if let Some(n) = number_of(entry.value) {
            widen(&mut self.block, n);
            widen(&mut self.table, n);
            self.numbers.push(n);
        }
    }
    fn finish_block(&mut self, _block: &FinishedBlock) -> Vec<u8> {
        encode_range(self.block.take())
    }
    fn finish_table(&mut self) -> TableCollectorOutput {
        self.numbers.sort_unstable();
        TableCollectorOutput {
            table_property: encode_range(self.table),
            meta_blocks: vec![(NUMBERS_BLOCK.to_owned(), encode_numbers(&self.numbers))],
        }
    }
}

struct ZoneCollectorFactory;

impl BlockPropertyCollectorFactory for ZoneCollectorFactory {
    fn name(&self) -> &str {
        ZONE_COLLECTOR
    }
    fn create(&self, _context: &TableContext) -> Box<dyn BlockPropertyCollector> {
        Box::<ZoneCollector>::default()
    }
}

/// Reads only tables and blocks whose number range meets `[lo, hi]`. A range without any Put
/// (empty bytes) cannot match; a missing property (not collected) might.
struct NumberRangeFilter {
    lo: u64,
    hi: u64,
}

impl NumberRangeFilter {
    fn may_match(&self, properties: &Properties<'_>) -> bool {
        match properties.get(ZONE_COLLECTOR) {
            None => true,
            Some(bytes) => {
                decode_range(bytes).is_some_and(|(lo, hi)| lo <= self.hi && self.lo <= hi)
            }
        }
    }
}

impl BlockFilter for NumberRangeFilter {
    fn table_may_match(&self, properties: &Properties<'_>) -> bool {
        self.may_match(properties)
    }
    fn block_may_match(&self, properties: &Properties<'_>) -> bool {
        self.may_match(properties)
    }
}

/// Checks every live table's file-level property (from the manifest) and, if asked, its meta
/// block against the model. Keys are written in ascending order and never rewritten, so a
/// table holds exactly the model keys within its key range.
fn check_zone_properties(
    db: &Db,
    tree: &Tree,
    model: &BTreeMap<Vec<u8>, u64>,
    meta_blocks: bool,
) -> usize {
    let view = db
        .components(tree, &ReadOptions::default())
        .expect("components");
    let mut tables = 0;
    for level in 0..LEVELS_MAX {
        for file in view.files(level) {
            tables += 1;
            let numbers: Vec<u64> = model
                .range(file.smallest_user_key().to_vec()..=file.largest_user_key().to_vec())
                .map(|(_, n)| *n)
                .collect();
            assert_eq!(
                numbers.len() as u64,
                file.entries,
                "file {} at L{level} should hold the model keys of its range",
                file.number
            );
            let expected = numbers.iter().fold(None, |mut range, n| {
                widen(&mut range, *n);
                range
            });
            assert_eq!(
                file.properties().get(ZONE_COLLECTOR).map(decode_range),
                Some(expected),
                "file-level min/max of file {} at L{level}",
                file.number
            );
            if meta_blocks {
                let mut sorted = numbers.clone();
                sorted.sort_unstable();
                assert_eq!(
                    db.table_meta_block(tree, file.number, ZONE_COLLECTOR, NUMBERS_BLOCK)
                        .expect("meta block"),
                    Some(encode_numbers(&sorted)),
                    "meta block of file {}",
                    file.number
                );
                assert_eq!(
                    db.table_meta_block(tree, file.number, ZONE_COLLECTOR, "no-such-block")
                        .expect("meta block"),
                    None
                );
                assert_eq!(
                    db.table_meta_block(tree, file.number, "no-such-collector", NUMBERS_BLOCK)
                        .expect("meta block"),
                    None
                );
            }
        }
    }
    tables
}

/// What a filtered scan returned that matches, and the work it did.
struct FilteredScan {
    matching: BTreeMap<Vec<u8>, u64>,
    blocks_read: u64,
    blocks_skipped: u64,
    tables_skipped: u64,
}

fn filtered_db_scan(
    db: &Db,
    tree: &Tree,
    filter: Option<Arc<NumberRangeFilter>>,
    lo: u64,
    hi: u64,
) -> FilteredScan {
    let stats = Arc::new(ReadStats::default());
    let options = ReadOptions {
        block_filter: filter.map(|f| f as Arc<dyn BlockFilter>),
        read_stats: Some(Arc::clone(&stats)),
        ..ReadOptions::default()
    };
    let matching = scan(db, tree, options)
        .into_iter()
        .filter_map(|(k, v, _)| {
            number_of(&v)
                .filter(|n| (lo..=hi).contains(n))
                .map(|n| (k, n))
        })
        .collect();
    FilteredScan {
        matching,
        blocks_read: stats.blocks_read(),
        blocks_skipped: stats.blocks_skipped.load(Ordering::Relaxed),
        tables_skipped: stats.tables_skipped.load(Ordering::Relaxed),
    }
}

fn filtered_component_scan(
    db: &Db,
    tree: &Tree,
    filter: Option<Arc<NumberRangeFilter>>,
    lo: u64,
    hi: u64,
) -> FilteredScan {
    let stats = Arc::new(ReadStats::default());
    let options = ReadOptions {
        block_filter: filter.map(|f| f as Arc<dyn BlockFilter>),
        read_stats: Some(Arc::clone(&stats)),
        ..ReadOptions::default()
    };
    let mut matching = BTreeMap::new();
    for (_, entries) in components_contents(db, tree, &options) {
        for e in entries {
            if let Some(n) = number_of(&e.value).filter(|n| (lo..=hi).contains(n)) {
                assert_eq!(e.kind, ValueKind::Put);
                assert!(
                    matching.insert(e.key, n).is_none(),
                    "a key written once appears twice"
                );
            }
        }
    }
    FilteredScan {
        matching,
        blocks_read: stats.blocks_read(),
        blocks_skipped: stats.blocks_skipped.load(Ordering::Relaxed),
        tables_skipped: stats.tables_skipped.load(Ordering::Relaxed),
    }
}

fn filter_for(lo: u64, hi: u64) -> Arc<NumberRangeFilter> {
    Arc::new(NumberRangeFilter { lo, hi })
}

/// Each L0 file read alone as a component: a file whose table property does not match is
/// skipped unread and counted as one skipped table.
fn check_l0_component_skips(db: &Db, tree: &Tree, filter: &Arc<NumberRangeFilter>) {
    let files = db
        .components(tree, &ReadOptions::default())
        .expect("components")
        .files(0);
    for file in files {
        let stats = Arc::new(ReadStats::default());
        let options = ReadOptions {
            block_filter: Some(Arc::clone(filter) as Arc<dyn BlockFilter>),
            read_stats: Some(Arc::clone(&stats)),
            ..ReadOptions::default()
        };
        let view = db.components(tree, &options).expect("components");
        let mut iter = view
            .iter(ComponentId::Level0File(file.number))
            .expect("component iter");
        iter.seek_to_first().expect("seek");
        while iter.valid() {
            iter.next().expect("next");
        }
        let skipped = !filter.may_match(&file.properties());
        assert_eq!(
            stats.tables_skipped.load(Ordering::Relaxed),
            u64::from(skipped),
            "L0 file {} read alone with filter {}..={}",
            file.number,
            filter.lo,
            filter.hi
        );
        if skipped {
            assert_eq!(stats.blocks_read(), 0, "a skipped table is not read");
        }
    }
}

fn zone_options(fs: &FaultFileSystem) -> Options {
    let mut options = quiet_options(fs);
    options.tree_options.insert(
        "zones".to_owned(),
        TreeOptions {
            block_property_collectors: vec![Arc::new(ZoneCollectorFactory)],
            ..TreeOptions::default()
        },
    );
    options
}

#[test]
fn block_properties_give_zone_maps_meta_blocks_and_filtered_scans() {
    with_seed("block properties", 0x20e5, |seed| {
        let mut rng = StdRng::seed_from_u64(seed);
        let fs = FaultFileSystem::new();
        let options = zone_options(&fs);
        let mut db = Db::open(DIR, options.clone()).expect("open");
        let mut tree = open_or_create(&db, "zones", &options);
        // Key i holds a number near 10 * i: numbers rise with keys and with time, so tables and
        // blocks cover narrow number ranges.
        let mut model: BTreeMap<Vec<u8>, u64> = BTreeMap::new();
        let mut next = 0usize;
        let mut write_round =
            |db: &Db, tree: &Tree, model: &mut BTreeMap<Vec<u8>, u64>, count: usize| {
                for _ in 0..count {
                    let n = next as u64 * 10 + rng.gen_range(0..10);
                    let value = number_value(n, rng.gen_range(0..40));
                    db.put(tree, &key(next), &value).expect("put");
                    model.insert(key(next), n);
                    next += 1;
                }
            };
        for _ in 0..4 {
            write_round(&db, &tree, &mut model, 400);
            db.flush().expect("flush");
        }
        assert_eq!(
            check_zone_properties(&db, &tree, &model, true),
            4,
            "four L0 tables"
        );
        db.compact_range(&tree, None, None).expect("compact");
        let view = db
            .components(&tree, &ReadOptions::default())
            .expect("components");
        assert!(view.files(0).is_empty(), "compaction empties L0");
        assert!(
            view.files(1).len() > 2,
            "compaction output is cut into several tables"
        );
        drop(view);
        check_zone_properties(&db, &tree, &model, true);
        for _ in 0..2 {
            write_round(&db, &tree, &mut model, 300);
            db.flush().expect("flush");
        }
        check_zone_properties(&db, &tree, &model, true);

        // After reopening, the file-level properties come from the manifest: no file is read.
        db = reopen(db, &options);
        tree = open_or_create(&db, "zones", &options);
        let reads_before = fs.operations(FaultKind::Read);
        check_zone_properties(&db, &tree, &model, false);
        assert_eq!(
            fs.operations(FaultKind::Read),
            reads_before,
            "table properties must be served without reading any file"
        );
        check_zone_properties(&db, &tree, &model, true);
        // Some entries stay in the memtable: those are never skipped.
        write_round(&db, &tree, &mut model, 100);

        let span = next as u64 * 10;
        let full_db = filtered_db_scan(&db, &tree, None, 0, span);
        let full_components = filtered_component_scan(&db, &tree, None, 0, span);
        assert_eq!(full_db.matching, model);
        assert_eq!(full_components.matching, model);
        let mut saw_table_skip = false;
        let mut saw_component_table_skip = false;
        for round in 0..30 {
            let width = [0, 5, 50, 500, 3000][round % 5];
            let lo = rng.gen_range(0..span);
            let hi = lo + width;
            let filter = Arc::new(NumberRangeFilter { lo, hi });
            let expected: BTreeMap<Vec<u8>, u64> = model
                .iter()
                .filter(|(_, n)| (lo..=hi).contains(*n))
                .map(|(k, n)| (k.clone(), *n))
                .collect();
            let context = format!("range {lo}..={hi}");
            let by_db = filtered_db_scan(&db, &tree, Some(Arc::clone(&filter)), lo, hi);
            assert_eq!(by_db.matching, expected, "Db::iter with filter, {context}");
            assert!(
                by_db.blocks_skipped + by_db.tables_skipped > 0,
                "Db::iter skips, {context}"
            );
            assert!(
                by_db.blocks_read * 2 < full_db.blocks_read,
                "Db::iter with filter reads {} blocks, unfiltered {}, {context}",
                by_db.blocks_read,
                full_db.blocks_read
            );
            saw_table_skip |= by_db.tables_skipped > 0;
            let by_components = filtered_component_scan(&db, &tree, Some(filter), lo, hi);
            assert_eq!(
                by_components.matching, expected,
                "ComponentView::iter with filter, {context}"
            );
            assert!(
                by_components.blocks_skipped + by_components.tables_skipped > 0,
                "components skip, {context}"
            );
            assert!(
                by_components.blocks_read * 2 < full_components.blocks_read,
                "components with filter read {} blocks, unfiltered {}, {context}",
                by_components.blocks_read,
                full_components.blocks_read
            );
            saw_component_table_skip |= by_components.tables_skipped > 0;
            check_l0_component_skips(&db, &tree, &filter_for(lo, hi));
        }
        assert!(saw_table_skip, "Db::iter counts skipped tables");
        assert!(
            saw_component_table_skip,
            "ComponentView::iter counts skipped tables"
        );
        db.close().expect("close");
    });
}

// ---------------------------------------------------------------------------------------------
// Compaction observers
// ---------------------------------------------------------------------------------------------

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Report {
    seq: SeqNo,
    kind: ValueKind,
    reason: DropReason,
    job: JobKind,
}

/// For each dropped entry of tree `data`, records it and emits a put of
/// `dropped/<key>/<seq>` into tree `log`.
struct DropLogger {
    data: AtomicU32,
    log: AtomicU32,
    reports: Mutex<Vec<(Vec<u8>, Report)>>,
}

fn dropped_key(key: &[u8], seq: SeqNo) -> Vec<u8> {
    let mut k = b"dropped/".to_vec();
    k.extend_from_slice(key);
    k.extend_from_slice(format!("/{seq:020}").as_bytes());
    k
}

impl DropLogger {
    /// A logger for no tree yet (tests store `data` and `log` once the trees exist).
    fn new() -> Arc<DropLogger> {
        Arc::new(DropLogger {
            data: AtomicU32::new(u32::MAX),
            log: AtomicU32::new(u32::MAX),
            reports: Mutex::new(Vec::new()),
        })
    }

    /// Opens (or creates) trees `data` and `log` of `db` and watches them.
    fn watch(&self, db: &Db, options: &Options) -> (Tree, Tree) {
        let data = open_or_create(db, "data", options);
        let log = open_or_create(db, "log", options);
        self.data.store(data.id(), Ordering::SeqCst);
        self.log.store(log.id(), Ordering::SeqCst);
        (data, log)
    }
}

impl CompactionObserver for DropLogger {
    fn on_drop(&self, job: JobKind, entry: &DroppedEntry<'_>, emit: &mut WriteBatch) {
        if entry.tree != self.data.load(Ordering::SeqCst) {
            return;
        }
        self.reports.lock().push((
            entry.user_key.to_vec(),
            Report {
                seq: entry.seq,
                kind: entry.kind,
                reason: entry.reason,
                job,
            },
        ));
        let reason = match entry.reason {
            DropReason::Shadowed => b's',
            DropReason::TombstoneAtBottom => b't',
        };
        emit.put_in(
            self.log.load(Ordering::SeqCst),
            &dropped_key(entry.user_key, entry.seq),
            &[entry.kind as u8, reason],
        );
    }
}

/// One write of a key: its sequence number, kind and value.
type Written = (SeqNo, ValueKind, Vec<u8>);

/// The write history of tree `data`: every version ever written, by key.
#[derive(Default)]
struct History {
    versions: BTreeMap<Vec<u8>, Vec<Written>>,
}

impl History {
    fn record(&mut self, key: &[u8], seq: SeqNo, kind: ValueKind, value: &[u8]) {
        self.versions
            .entry(key.to_vec())
            .or_default()
            .push((seq, kind, value.to_vec()));
    }
    /// The newest version with sequence `<= at`.
    fn visible(&self, key: &[u8], at: SeqNo) -> Option<&Written> {
        self.versions
            .get(key)?
            .iter()
            .rev()
            .find(|(s, _, _)| *s <= at)
    }
    fn value_at(&self, key: &[u8], at: SeqNo) -> Option<Vec<u8>> {
        self.visible(key, at)
            .filter(|(_, kind, _)| *kind == ValueKind::Put)
            .map(|(_, _, v)| v.clone())
    }
    fn all(&self) -> BTreeSet<(Vec<u8>, SeqNo)> {
        self.versions
            .iter()
            .flat_map(|(k, vs)| vs.iter().map(move |(s, _, _)| (k.clone(), *s)))
            .collect()
    }
    /// The sequence number of the version written right after `seq`.
    fn next_newer(&self, key: &[u8], seq: SeqNo) -> Option<SeqNo> {
        self.versions
            .get(key)?
            .iter()
            .map(|(s, _, _)| *s)
            .find(|s| *s > seq)
    }
}

struct ObserverHarness {
    rng: StdRng,
    options: Options,
    observer: Arc<DropLogger>,
    db: Option<Db>,
    data: Tree,
    log: Tree,
    history: History,
    /// Reports already checked against the snapshots of their phase.
    checked_reports: usize,
}

impl ObserverHarness {
    fn new(seed: u64) -> Self {
        let fs = FaultFileSystem::new();
        let observer = DropLogger::new();
        let options = Options {
            l0_compaction_trigger: 3,
            compaction_observers: vec![Arc::clone(&observer) as Arc<dyn CompactionObserver>],
            ..quiet_options(&fs)
        };
        let db = Db::open(DIR, options.clone()).expect("open");
        let (data, log) = observer.watch(&db, &options);
        ObserverHarness {
            rng: StdRng::seed_from_u64(seed),
            options,
            observer,
            db: Some(db),
            data,
            log,
            history: History::default(),
            checked_reports: 0,
        }
    }

    fn db(&self) -> &Db {
        self.db.as_ref().expect("open")
    }

    fn write_some(&mut self, count: usize) {
        for _ in 0..count {
            let mut batch = WriteBatch::new();
            let mut ops = Vec::new();
            for _ in 0..self.rng.gen_range(1..4) {
                let k = key(self.rng.gen_range(0..40));
                if self.rng.gen_bool(0.25) {
                    batch.delete(&self.data, &k);
                    ops.push((k, ValueKind::Delete, Vec::new()));
                } else {
                    let v = format!("v{}", self.rng.gen_range(0..1_000_000)).into_bytes();
                    batch.put(&self.data, &k, &v);
                    ops.push((k, ValueKind::Put, v));
                }
            }
            let first = self
                .db()
                .write(batch, &WriteOptions::default())
                .expect("write");
            for (i, (k, kind, v)) in ops.into_iter().enumerate() {
                self.history.record(&k, first + i as u64, kind, &v);
            }
            if self.rng.gen_bool(0.02) {
                self.db().flush().expect("flush");
            }
        }
    }

    fn stored(&self) -> BTreeMap<(Vec<u8>, SeqNo), Stored> {
        let mut stored = BTreeMap::new();
        for (id, entries) in components_contents(self.db(), &self.data, &ReadOptions::default()) {
            for e in entries {
                let previous = stored.insert((e.key.clone(), e.seq), e);
                assert!(
                    previous.is_none(),
                    "a version is stored twice (second in {id:?})"
                );
            }
        }
        stored
    }

    /// Checks the reports so far: each version is either stored or reported (once), the
    /// reports made since the last check respect `snapshots`, the log tree holds exactly the
    /// emitted writes, and reads at each snapshot match the history.
    fn check(&mut self, snapshots: &[&Snapshot]) {
        self.db().wait_for_background_work().expect("wait");
        let reports = self.observer.reports.lock().clone();
        let stored = self.stored();
        let mut reported = BTreeSet::new();
        for (k, r) in &reports {
            assert!(
                reported.insert((k.clone(), r.seq)),
                "version {}@{} reported twice",
                show(k),
                r.seq
            );
            assert!(
                !stored.contains_key(&(k.clone(), r.seq)),
                "version {}@{} reported as dropped but still stored",
                show(k),
                r.seq
            );
        }
        let mut accounted: BTreeSet<(Vec<u8>, SeqNo)> = stored.keys().cloned().collect();
        accounted.extend(reported.iter().cloned());
        let written = self.history.all();
        let lost: Vec<String> = written
            .difference(&accounted)
            .map(|(k, s)| format!("{}@{s}", show(k)))
            .collect();
        let invented: Vec<String> = accounted
            .difference(&written)
            .map(|(k, s)| format!("{}@{s}", show(k)))
            .collect();
        assert!(
            lost.is_empty() && invented.is_empty(),
            "versions neither stored nor reported: {lost:?}; never written: {invented:?}"
        );

        let snapshot_seqs: Vec<SeqNo> = snapshots.iter().map(|s| s.sequence()).collect();
        for (k, r) in &reports[self.checked_reports..] {
            let (_, kind, _) = self.history.versions[k]
                .iter()
                .find(|(s, _, _)| *s == r.seq)
                .expect("reported version was written");
            assert_eq!(*kind, r.kind, "reported kind of {}@{}", show(k), r.seq);
            match r.reason {
                DropReason::Shadowed => {
                    let newer = self.history.next_newer(k, r.seq).unwrap_or_else(|| {
                        panic!("{}@{} reported shadowed but nothing newer", show(k), r.seq)
                    });
                    assert!(
                        !snapshot_seqs.iter().any(|s| r.seq <= *s && *s < newer),
                        "{}@{} dropped although a snapshot sees it ({r:?})",
                        show(k),
                        r.seq
                    );
                }
                DropReason::TombstoneAtBottom => {
                    assert_eq!(r.kind, ValueKind::Delete);
                    assert!(
                        !snapshot_seqs.iter().any(|s| *s < r.seq),
                        "tombstone {}@{} dropped under an older snapshot",
                        show(k),
                        r.seq
                    );
                    assert!(
                        !stored.keys().any(|(sk, s)| sk == k && *s < r.seq),
                        "tombstone {}@{} dropped while an older version is stored",
                        show(k),
                        r.seq
                    );
                }
            }
        }
        self.checked_reports = reports.len();

        // The emitted writes are visible: the log tree holds exactly one key per report.
        let logged: BTreeSet<Vec<u8>> = scan(self.db(), &self.log, ReadOptions::default())
            .into_iter()
            .map(|(k, _, _)| k)
            .collect();
        let expected: BTreeSet<Vec<u8>> =
            reports.iter().map(|(k, r)| dropped_key(k, r.seq)).collect();
        assert_eq!(logged, expected, "the log tree holds the emitted writes");

        // Reads at every snapshot and at the latest state still match the history.
        let latest = self.db().latest_sequence();
        let mut views: Vec<(Option<&Snapshot>, SeqNo)> =
            snapshots.iter().map(|s| (Some(*s), s.sequence())).collect();
        views.push((None, latest));
        for (snapshot, at) in views {
            let options = ReadOptions {
                snapshot: snapshot.cloned(),
                ..ReadOptions::default()
            };
            for k in self.history.versions.keys() {
                let got = self.db().get_with(&self.data, k, &options).expect("get");
                let visible = self.history.visible(k, at);
                let expected =
                    visible
                        .filter(|(_, kind, _)| *kind == ValueKind::Put)
                        .map(|(s, _, v)| Entry {
                            value: v.clone(),
                            seq: *s,
                        });
                assert_eq!(got, expected, "get {} at {at}", show(k));
                if let Some((s, ValueKind::Put, _)) = visible {
                    assert!(
                        !reported.contains(&(k.clone(), *s)),
                        "{}@{s} seen by a reader but dropped",
                        show(k)
                    );
                }
            }
            let scanned: Vec<(Vec<u8>, Vec<u8>)> = scan(self.db(), &self.data, options)
                .into_iter()
                .map(|(k, v, _)| (k, v))
                .collect();
            let expected: Vec<(Vec<u8>, Vec<u8>)> = self
                .history
                .versions
                .keys()
                .filter_map(|k| self.history.value_at(k, at).map(|v| (k.clone(), v)))
                .collect();
            assert_eq!(scanned, expected, "scan at {at}");
        }
    }

    /// After a full compaction with no snapshot, at most the newest version of a key is left.
    fn check_fully_compacted(&self) {
        let stored = self.stored();
        for (k, seq) in stored.keys() {
            let newest = self.history.versions[k].last().expect("written").0;
            assert_eq!(
                *seq,
                newest,
                "{} has an old version {seq} left after full compaction",
                show(k)
            );
        }
    }

    /// Compacts all of `data` into one level. `compact_range` leaves files alone that are
    /// already in the deepest level, so first an L0 file spanning every key is made: every
    /// file then overlaps it and is rewritten.
    fn compact_all(&mut self) {
        for k in [key(0), key(39)] {
            let seq = self.db().put(&self.data, &k, b"end").expect("put");
            self.history.record(&k, seq, ValueKind::Put, b"end");
        }
        self.db().flush().expect("flush");
        let data = self.data.clone();
        self.db().compact_range(&data, None, None).expect("compact");
    }

    fn reopen(&mut self) {
        let db = self.db.take().expect("open");
        let db = reopen(db, &self.options);
        self.data = open_or_create(&db, "data", &self.options);
        self.log = open_or_create(&db, "log", &self.options);
        self.db = Some(db);
    }
}

#[test]
fn compaction_observer_sees_exactly_the_dropped_versions() {
    with_seed("compaction observer", 0x0b5e, |seed| {
        let mut h = ObserverHarness::new(seed);
        // No snapshots: every shadowed version may go.
        h.write_some(400);
        h.check(&[]);
        let data = h.data.clone();
        h.compact_all();
        h.check(&[]);
        h.check_fully_compacted();
        assert!(
            h.observer
                .reports
                .lock()
                .iter()
                .any(|(_, r)| matches!(r.job, JobKind::Compaction { .. })),
            "compactions reported drops"
        );

        // Snapshots protect what they see.
        h.write_some(150);
        let first = h.db().snapshot();
        h.write_some(250);
        let second = h.db().snapshot();
        h.write_some(150);
        h.db().compact_range(&data, None, None).expect("compact");
        h.check(&[&first, &second]);
        h.write_some(100);
        h.db().flush().expect("flush");
        h.check(&[&first, &second]);

        // Released, they no longer hold anything back.
        drop(first);
        drop(second);
        h.compact_all();
        h.check(&[]);
        h.check_fully_compacted();

        // Emitted writes are durable; nothing is lost or silently dropped across a reopen,
        // including versions that were only in the WAL.
        h.write_some(200);
        h.reopen();
        h.check(&[]);
        h.compact_all();
        h.check(&[]);
        h.check_fully_compacted();
        let reports = h.observer.reports.lock().len();
        assert!(reports > 500, "only {reports} drops reported");
        let flush_reports = h
            .observer
            .reports
            .lock()
            .iter()
            .filter(|(_, r)| r.job == JobKind::Flush)
            .count();
        assert!(flush_reports > 0, "flushes reported drops");
    });
}

/// Regression: WAL replay at open used to write recovered memtables through the compaction
/// logic with no observers, so versions shadowed within the replayed log vanished unreported.
#[test]
fn versions_recovered_from_the_wal_are_reported_when_dropped() {
    let fs = FaultFileSystem::new();
    let observer = DropLogger::new();
    let options = Options {
        compaction_observers: vec![Arc::clone(&observer) as Arc<dyn CompactionObserver>],
        ..quiet_options(&fs)
    };
    let db = Db::open(DIR, options.clone()).expect("open");
    let (data, _) = observer.watch(&db, &options);
    let old = db.put(&data, b"k", b"old").expect("put");
    let new = db.put(&data, b"k", b"new").expect("put");
    // Closing leaves both versions in the WAL only.
    let db = reopen(db, &options);
    let data = db.tree("data").expect("tree");
    let log = db.tree("log").expect("tree");
    assert!(observer.reports.lock().is_empty());
    // A second L0 file, so that the compaction rewrites the recovered one (a single file would
    // just move down).
    let newest = db.put(&data, b"k", b"newest").expect("put");
    db.compact_range(&data, None, None).expect("compact");
    let reports: Vec<(Vec<u8>, SeqNo, DropReason)> = observer
        .reports
        .lock()
        .iter()
        .map(|(k, r)| (k.clone(), r.seq, r.reason))
        .collect();
    assert_eq!(
        reports,
        vec![
            (b"k".to_vec(), new, DropReason::Shadowed),
            (b"k".to_vec(), old, DropReason::Shadowed)
        ]
    );
    let logged: Vec<Vec<u8>> = scan(&db, &log, ReadOptions::default())
        .into_iter()
        .map(|(k, _, _)| k)
        .collect();
    assert_eq!(logged, vec![dropped_key(b"k", old), dropped_key(b"k", new)]);
    assert_eq!(
        db.get(&data, b"k").expect("get"),
        Some(Entry {
            value: b"newest".to_vec(),
            seq: newest
        })
    );
}

/// A job whose observer emits writes commits them through the write queue. A writer that is
/// stalled at the head of that queue waiting for the same job must not block it forever.
#[test]
fn observer_writes_commit_while_writers_stall() {
    with_seed("observer writes under stalls", 0x57a1, |seed| {
        let mut rng = StdRng::seed_from_u64(seed);
        let fs = FaultFileSystem::new();
        let observer = DropLogger::new();
        let options = Options {
            memtable_bytes_max: 4 << 10,
            immutable_memtables_max: 1,
            l0_compaction_trigger: 2,
            l0_slowdown_trigger: 3,
            l0_stop_trigger: 4,
            compaction_observers: vec![Arc::clone(&observer) as Arc<dyn CompactionObserver>],
            ..quiet_options(&fs)
        };
        let db = Db::open(DIR, options.clone()).expect("open");
        let (data, log) = observer.watch(&db, &options);
        let db = Arc::new(db);
        let (done_sender, done) = std::sync::mpsc::channel();
        let writer_db = Arc::clone(&db);
        let mut model = BTreeMap::new();
        let ops: Vec<(Vec<u8>, Vec<u8>)> = (0..3000)
            .map(|_| {
                let k = key(rng.gen_range(0..20));
                let v = format!("value{}", rng.gen_range(0..1000)).into_bytes();
                model.insert(k.clone(), v.clone());
                (k, v)
            })
            .collect();
        std::thread::spawn(move || {
            for (k, v) in ops {
                writer_db.put(&data, &k, &v).expect("put");
            }
            writer_db.wait_for_background_work().expect("wait");
            let _ = done_sender.send(());
        });
        done.recv_timeout(std::time::Duration::from_secs(30))
            .expect("writes with an emitting observer deadlocked");
        let data = db.tree("data").expect("tree");
        let got: BTreeMap<Vec<u8>, Vec<u8>> = scan(&db, &data, ReadOptions::default())
            .into_iter()
            .map(|(k, v, _)| (k, v))
            .collect();
        assert_eq!(got, model);
        let logged = scan(&db, &log, ReadOptions::default()).len();
        assert_eq!(logged, observer.reports.lock().len());
        assert!(logged > 0);
    });
}

/// Holds the first job that drops a version of `data` after emitting one put into `log`,
/// until released.
struct HoldingObserver {
    data: AtomicU32,
    log: AtomicU32,
    state: std::sync::Mutex<(bool, bool)>,
    changed: std::sync::Condvar,
}

impl CompactionObserver for HoldingObserver {
    fn on_drop(&self, _job: JobKind, entry: &DroppedEntry<'_>, emit: &mut WriteBatch) {
        if entry.tree != self.data.load(Ordering::SeqCst) {
            return;
        }
        let mut state = self.state.lock().unwrap();
        if state.0 {
            return;
        }
        emit.put_in(self.log.load(Ordering::SeqCst), b"held", entry.user_key);
        *state = (true, false);
        self.changed.notify_all();
        let _released = self
            .changed
            .wait_while(state, |(_, released)| !*released)
            .unwrap();
    }
}

/// `wait_for_running_jobs` returns only once the jobs running at the call have committed,
/// their emitted writes visible with them; with no job running it returns at once.
#[test]
fn wait_for_running_jobs_waits_for_the_job_in_flight_and_its_emitted_writes() {
    let fs = FaultFileSystem::new();
    let observer = Arc::new(HoldingObserver {
        data: AtomicU32::new(u32::MAX),
        log: AtomicU32::new(u32::MAX),
        state: std::sync::Mutex::new((false, false)),
        changed: std::sync::Condvar::new(),
    });
    let options = Options {
        l0_compaction_trigger: 2,
        l0_slowdown_trigger: 8,
        l0_stop_trigger: 12,
        compaction_observers: vec![Arc::clone(&observer) as Arc<dyn CompactionObserver>],
        ..quiet_options(&fs)
    };
    let db = Db::open(DIR, options.clone()).expect("open");
    db.wait_for_running_jobs()
        .expect("nothing runs: returns at once");
    let data = open_or_create(&db, "data", &options);
    let log = open_or_create(&db, "log", &options);
    observer.data.store(data.id(), Ordering::SeqCst);
    observer.log.store(log.id(), Ordering::SeqCst);
    for round in 0..2u8 {
        db.put(&data, b"k", &[round]).expect("put");
        db.flush().expect("flush");
    }
    // The background L0 compaction drops the older version of `k` and is held there.
    drop(
        observer
            .changed
            .wait_while(observer.state.lock().unwrap(), |(held, _)| !*held)
            .unwrap(),
    );
    let (returned_sender, returned) = std::sync::mpsc::channel();
    std::thread::scope(|scope| {
        scope.spawn(|| {
            db.wait_for_running_jobs().expect("wait");
            let visible = db.get(&log, b"held").expect("get").is_some();
            returned_sender.send(visible).expect("send");
        });
        assert!(
            returned
                .recv_timeout(std::time::Duration::from_millis(200))
                .is_err(),
            "returned while the job was held"
        );
        observer.state.lock().unwrap().1 = true;
        observer.changed.notify_all();
        let visible = returned
            .recv_timeout(std::time::Duration::from_secs(30))
            .expect("did not return once the job was released");
        assert!(
            visible,
            "returned before the job's emitted write was visible"
        );
    });
    db.wait_for_background_work().expect("wait");
    assert_eq!(
        scan(&db, &data, ReadOptions::default())
            .into_iter()
            .map(|(k, v, _)| (k, v))
            .collect::<Vec<_>>(),
        vec![(b"k".to_vec(), vec![1u8])]
    );
}

// ---------------------------------------------------------------------------------------------
// Merge operators
// ---------------------------------------------------------------------------------------------

/// u64 counters, little-endian; operands are added.
struct Counter;

fn counter_of(bytes: &[u8]) -> Result<u64, String> {
    bytes
        .try_into()
        .map(u64::from_le_bytes)
        .map_err(|_| format!("counter of {} bytes", bytes.len()))
}

impl MergeOperator for Counter {
    fn name(&self) -> &'static str {
        "counter"
    }
    fn full_merge(
        &self,
        _key: &[u8],
        existing: Option<&[u8]>,
        operands: &[&[u8]],
    ) -> Result<Vec<u8>, String> {
        let mut sum = existing.map_or(Ok(0), counter_of)?;
        for op in operands {
            sum = sum.wrapping_add(counter_of(op)?);
        }
        Ok(sum.to_le_bytes().to_vec())
    }
    fn partial_merge(&self, _key: &[u8], operands: &[&[u8]]) -> Option<Vec<u8>> {
        let mut sum = 0u64;
        for op in operands {
            sum = sum.wrapping_add(counter_of(op).ok()?);
        }
        Some(sum.to_le_bytes().to_vec())
    }
}

#[test]
fn merge_counters_fold_across_flush_compaction_and_reopen() {
    with_seed("merge counters", 0x3e12, |seed| {
        let mut rng = StdRng::seed_from_u64(seed);
        let fs = FaultFileSystem::new();
        let mut options = Options {
            memtable_bytes_max: 4 << 10,
            l0_compaction_trigger: 3,
            level1_bytes_max: 16 << 10,
            level_size_ratio: 4,
            table_file_bytes_target: 4 << 10,
            ..quiet_options(&fs)
        };
        options.tree_options.insert(
            "counters".to_owned(),
            TreeOptions {
                merge_operator: Some(Arc::new(Counter)),
                ..TreeOptions::default()
            },
        );
        let mut db = Db::open(DIR, options.clone()).expect("open");
        let mut tree = open_or_create(&db, "counters", &options);
        let mut model: BTreeMap<Vec<u8>, u64> = BTreeMap::new();
        let mut snapshots: Vec<(Snapshot, BTreeMap<Vec<u8>, u64>)> = Vec::new();
        // Engine stats start at zero at every open: compactions of earlier handles add up here.
        let mut compactions_of_closed_handles = 0;
        let check = |db: &Db,
                     tree: &Tree,
                     model: &BTreeMap<Vec<u8>, u64>,
                     snapshot: Option<&Snapshot>,
                     context: &str| {
            let options = ReadOptions {
                snapshot: snapshot.cloned(),
                ..ReadOptions::default()
            };
            for i in 0..60 {
                let got = db
                    .get_with(tree, &key(i), &options)
                    .expect("get")
                    .map(|e| counter_of(&e.value).expect("counter"));
                assert_eq!(got, model.get(&key(i)).copied(), "get {i}, {context}");
            }
            let scanned: BTreeMap<Vec<u8>, u64> = scan(db, tree, options)
                .into_iter()
                .map(|(k, v, _)| (k, counter_of(&v).expect("counter")))
                .collect();
            assert_eq!(&scanned, model, "scan, {context}");
        };
        for step in 0..4000 {
            let k = key(rng.gen_range(0..60));
            match rng.gen_range(0..100) {
                0..=74 => {
                    let n = rng.gen_range(1..1000u64);
                    db.merge(&tree, &k, &n.to_le_bytes()).expect("merge");
                    *model.entry(k).or_insert(0) += n;
                }
                75..=84 => {
                    let n = rng.gen_range(0..1_000_000u64);
                    db.put(&tree, &k, &n.to_le_bytes()).expect("put");
                    model.insert(k, n);
                }
                85..=92 => {
                    db.delete(&tree, &k).expect("delete");
                    model.remove(&k);
                }
                93..=94 => {
                    if snapshots.len() < 3 {
                        snapshots.push((db.snapshot(), model.clone()));
                    } else {
                        snapshots.remove(0);
                    }
                }
                95..=96 => db.flush().expect("flush"),
                97..=98 => db.compact_range(&tree, None, None).expect("compact"),
                _ => {
                    snapshots.clear();
                    compactions_of_closed_handles += db.stats().compactions;
                    db = reopen(db, &options);
                    tree = open_or_create(&db, "counters", &options);
                }
            }
            if step % 250 == 0 {
                check(&db, &tree, &model, None, &format!("step {step}"));
                for (i, (s, m)) in snapshots.iter().enumerate() {
                    check(
                        &db,
                        &tree,
                        m,
                        Some(s),
                        &format!("step {step}, snapshot {i}"),
                    );
                }
            }
        }
        db.wait_for_background_work().expect("wait");
        check(&db, &tree, &model, None, "end");
        db.compact_range(&tree, None, None).expect("compact");
        check(&db, &tree, &model, None, "after full compaction");
        // The last handle may have run none of its own (its full compaction may only move a
        // file down): what matters is that merges were folded by compactions during the run.
        assert!(
            compactions_of_closed_handles + db.stats().compactions > 0,
            "compactions ran"
        );
        let db = reopen(db, &options);
        let tree = open_or_create(&db, "counters", &options);
        check(&db, &tree, &model, None, "after reopen");
    });
}

// ---------------------------------------------------------------------------------------------
// Version listeners
// ---------------------------------------------------------------------------------------------

type FileSet = BTreeSet<(TreeId, usize, u64)>;

/// Keeps the set of live files from the change events alone.
#[derive(Default)]
struct FileTracker {
    files: Mutex<FileSet>,
    reasons: Mutex<Vec<ChangeReason>>,
    errors: Mutex<Vec<String>>,
}

impl VersionListener for FileTracker {
    fn on_version_change(&self, change: &VersionChange) {
        let mut files = self.files.lock();
        let mut errors = self.errors.lock();
        let mut reasons = self.reasons.lock();
        if reasons.is_empty() && change.reason != ChangeReason::Open {
            errors.push(format!("first event is {:?}, not Open", change.reason));
        }
        reasons.push(change.reason);
        for f in &change.removed {
            if !files.remove(&(f.tree, f.level, f.file.number)) {
                errors.push(format!(
                    "{:?}: removed unknown file {} at L{}",
                    change.reason, f.file.number, f.level
                ));
            }
        }
        for f in &change.added {
            if !files.insert((f.tree, f.level, f.file.number)) {
                errors.push(format!(
                    "{:?}: added file {} at L{} twice",
                    change.reason, f.file.number, f.level
                ));
            }
        }
    }
}

fn live_files(db: &Db) -> FileSet {
    let mut files = FileSet::new();
    for name in db.tree_names() {
        let tree = db.tree(&name).expect("tree");
        let view = db
            .components(&tree, &ReadOptions::default())
            .expect("components");
        for level in 0..LEVELS_MAX {
            for f in view.files(level) {
                files.insert((tree.id(), level, f.number));
            }
        }
    }
    files
}

#[test]
fn version_listener_tracks_exactly_the_live_files() {
    with_seed("version listener", 0x11e7, |seed| {
        let mut rng = StdRng::seed_from_u64(seed);
        let fs = FaultFileSystem::new();
        let base = Options {
            memtable_bytes_max: 4 << 10,
            l0_compaction_trigger: 2,
            level1_bytes_max: 8 << 10,
            level_size_ratio: 3,
            table_file_bytes_target: 2 << 10,
            ..quiet_options(&fs)
        };
        let open = |base: &Options| {
            let tracker = Arc::new(FileTracker::default());
            let options = Options {
                version_listeners: vec![Arc::clone(&tracker) as Arc<dyn VersionListener>],
                ..base.clone()
            };
            let db = Db::open(DIR, options).expect("open");
            (db, tracker)
        };
        let check = |db: &Db, tracker: &FileTracker, context: &str| {
            db.wait_for_background_work().expect("wait");
            let errors = tracker.errors.lock().clone();
            assert!(errors.is_empty(), "{context}: {errors:?}");
            assert_eq!(*tracker.files.lock(), live_files(db), "{context}");
        };
        let (mut db, mut tracker) = open(&base);
        assert_eq!(*tracker.reasons.lock(), vec![ChangeReason::Open]);
        let mut names = vec!["default".to_owned()];
        let mut created = 0;
        for step in 0..1500 {
            match rng.gen_range(0..100) {
                0..=84 => {
                    let name = names[rng.gen_range(0..names.len())].clone();
                    let tree = db.tree(&name).expect("tree");
                    let k = key(rng.gen_range(0..300));
                    let v = vec![b'v'; rng.gen_range(1..100)];
                    if rng.gen_bool(0.2) {
                        db.delete(&tree, &k).expect("delete");
                    } else {
                        db.put(&tree, &k, &v).expect("put");
                    }
                }
                85..=89 => {
                    db.flush().expect("flush");
                    check(&db, &tracker, &format!("step {step}, after flush"));
                }
                90..=93 => {
                    let name = names[rng.gen_range(0..names.len())].clone();
                    let tree = db.tree(&name).expect("tree");
                    db.compact_range(&tree, None, None).expect("compact");
                    check(&db, &tracker, &format!("step {step}, after compaction"));
                }
                94..=96 => {
                    if names.len() > 2 && rng.gen_bool(0.5) {
                        let name = names.remove(rng.gen_range(1..names.len()));
                        db.drop_tree(&name).expect("drop tree");
                        check(
                            &db,
                            &tracker,
                            &format!("step {step}, after dropping {name}"),
                        );
                    } else {
                        let name = format!("tree{created}");
                        created += 1;
                        db.create_tree(&name, TreeOptions::default())
                            .expect("create tree");
                        names.push(name);
                    }
                }
                _ => {
                    db.close().expect("close");
                    (db, tracker) = open(&base);
                    assert_eq!(tracker.reasons.lock().first(), Some(&ChangeReason::Open));
                    check(&db, &tracker, &format!("step {step}, after reopen"));
                }
            }
        }
        check(&db, &tracker, "end");
        let reasons = tracker.reasons.lock().clone();
        assert!(reasons.len() > 1, "events after open: {reasons:?}");
        db.close().expect("close");
    });
}

// ---------------------------------------------------------------------------------------------
// Level-by-level reads and GetLite
// ---------------------------------------------------------------------------------------------

#[test]
fn component_view_reads_level_by_level_and_getlite_is_sound() {
    with_seed("component view", 0xc0de, |seed| {
        let mut rng = StdRng::seed_from_u64(seed);
        let fs = FaultFileSystem::new();
        let mut history = History::default();
        let write =
            |db: &Db, tree: &Tree, rng: &mut StdRng, history: &mut History, count: usize| {
                for _ in 0..count {
                    let k = key(rng.gen_range(0..200));
                    if rng.gen_bool(0.2) {
                        let seq = db.delete(tree, &k).expect("delete");
                        history.record(&k, seq, ValueKind::Delete, &[]);
                    } else {
                        let v = format!("v{}", rng.gen_range(0..1_000_000)).into_bytes();
                        let seq = db.put(tree, &k, &v).expect("put");
                        history.record(&k, seq, ValueKind::Put, &v);
                    }
                }
            };
        // Deep levels first: background compactions with a tiny L1 push data down to L2.
        let deep_options = Options {
            l0_compaction_trigger: 2,
            level1_bytes_max: 2 << 10,
            level_size_ratio: 100,
            table_file_bytes_target: 1 << 10,
            ..quiet_options(&fs)
        };
        let db = Db::open(DIR, deep_options.clone()).expect("open");
        let tree = open_or_create(&db, "t", &deep_options);
        for _ in 0..10 {
            write(&db, &tree, &mut rng, &mut history, 150);
            db.flush().expect("flush");
        }
        db.wait_for_background_work().expect("wait");
        // Then, with compactions quiet, L0 files and the memtable.
        let options = quiet_options(&fs);
        let db = reopen(db, &options);
        let tree = open_or_create(&db, "t", &options);
        let old_snapshot = db.snapshot();
        for _ in 0..3 {
            write(&db, &tree, &mut rng, &mut history, 150);
            db.flush().expect("flush");
        }
        write(&db, &tree, &mut rng, &mut history, 100);

        let view = db
            .components(&tree, &ReadOptions::default())
            .expect("components");
        let ids = view.ids();
        let l0: Vec<u64> = view.files(0).iter().map(|f| f.number).collect();
        let deeper: Vec<usize> = (1..LEVELS_MAX)
            .filter(|l| !view.files(*l).is_empty())
            .collect();
        assert!(l0.len() >= 3, "L0 files: {l0:?}");
        assert!(deeper.len() >= 2, "sorted levels: {deeper:?}");
        let mut expected_ids = vec![ComponentId::Memtable];
        // Frozen memtables may still be waiting for flush, newest first.
        expected_ids.extend(
            ids.iter()
                .filter(|id| matches!(id, ComponentId::ImmutableMemtable(_))),
        );
        expected_ids.extend(l0.iter().map(|n| ComponentId::Level0File(*n)));
        expected_ids.extend(deeper.iter().map(|l| ComponentId::Level(*l)));
        assert_eq!(ids, expected_ids);
        let l0_seqs: Vec<SeqNo> = view.files(0).iter().map(|f| f.seq_max).collect();
        assert!(
            l0_seqs.windows(2).all(|w| w[0] > w[1]),
            "L0 files come newest first: {l0_seqs:?}"
        );
        assert!(
            l0.windows(2).all(|w| w[0] > w[1]),
            "newer L0 files have higher numbers: {l0:?}"
        );
        drop(view);

        let contents = components_contents(&db, &tree, &ReadOptions::default());
        let latest = db.latest_sequence();
        // Where each version lives: component index, newest component first.
        let mut location: BTreeMap<(Vec<u8>, SeqNo), usize> = BTreeMap::new();
        for (index, (id, entries)) in contents.iter().enumerate() {
            let mut previous: Option<&Stored> = None;
            for e in entries {
                if let Some(p) = previous {
                    assert!(
                        (p.key.as_slice(), std::cmp::Reverse(p.seq))
                            < (e.key.as_slice(), std::cmp::Reverse(e.seq)),
                        "{id:?} yields entries out of internal-key order"
                    );
                }
                previous = Some(e);
                assert!(e.seq <= latest);
                let written = history.versions[&e.key]
                    .iter()
                    .find(|(s, _, _)| *s == e.seq)
                    .unwrap_or_else(|| {
                        panic!(
                            "{id:?} holds {}@{} that was never written",
                            show(&e.key),
                            e.seq
                        )
                    });
                assert_eq!(
                    (written.1, &written.2),
                    (e.kind, &e.value),
                    "{id:?} entry {}@{}",
                    show(&e.key),
                    e.seq
                );
                assert!(
                    location.insert((e.key.clone(), e.seq), index).is_none(),
                    "version in two components"
                );
            }
            assert!(
                !entries.is_empty() || matches!(id, ComponentId::Memtable),
                "{id:?} is empty"
            );
        }
        // Versions no compaction has dropped yet are all there; the newest of each key always.
        for (k, versions) in &history.versions {
            let newest = versions.last().expect("written").0;
            assert!(
                location.contains_key(&(k.clone(), newest)),
                "newest version of {} is missing",
                show(k)
            );
        }
        // Components are newest first: for one key, a higher component holds higher sequences.
        let mut by_key: BTreeMap<&[u8], Vec<(SeqNo, usize)>> = BTreeMap::new();
        for ((k, seq), index) in &location {
            by_key.entry(k).or_default().push((*seq, *index));
        }
        for (k, mut versions) in by_key {
            versions.sort_unstable();
            assert!(
                versions.windows(2).all(|w| w[0].1 >= w[1].1),
                "versions of {} are not in component order: {versions:?}",
                show(k)
            );
        }

        // An older view sees only what its snapshot saw.
        let old = components_contents(
            &db,
            &tree,
            &ReadOptions {
                snapshot: Some(old_snapshot.clone()),
                ..ReadOptions::default()
            },
        );
        let old_seq = old_snapshot.sequence();
        let visible: BTreeSet<(Vec<u8>, SeqNo)> = location
            .keys()
            .filter(|(_, s)| *s <= old_seq)
            .cloned()
            .collect();
        let old_seen: BTreeSet<(Vec<u8>, SeqNo)> = old
            .iter()
            .flat_map(|(_, es)| es.iter().map(|e| (e.key.clone(), e.seq)))
            .collect();
        assert_eq!(
            old_seen, visible,
            "a snapshot view yields the versions up to its sequence"
        );

        // GetLite against brute force over where the versions really live.
        let view = db
            .components(&tree, &ReadOptions::default())
            .expect("components");
        let ids = view.ids();
        let (mut no, mut maybe, mut yes, mut maybe_false) = (0, 0, 0, 0);
        for (index, id) in ids.iter().enumerate() {
            let mut probes: Vec<(Vec<u8>, SeqNo)> = contents[index]
                .1
                .iter()
                .map(|e| (e.key.clone(), e.seq))
                .collect();
            // Keys absent here, and sequences between versions.
            for _ in 0..50 {
                let k = key(rng.gen_range(0..220));
                let seq = rng.gen_range(1..=latest);
                probes.push((k, seq));
            }
            for (k, seq) in probes {
                let newer_above: Vec<usize> = location
                    .iter()
                    .filter(|((lk, ls), li)| *lk == k && *ls > seq && **li < index)
                    .map(|(_, li)| *li)
                    .collect();
                let in_memtable_above = newer_above.iter().any(|li| {
                    matches!(
                        ids[*li],
                        ComponentId::Memtable | ComponentId::ImmutableMemtable(_)
                    )
                });
                let answer = view
                    .newer_version_exists_above(&k, seq, *id)
                    .expect("getlite");
                let context = format!(
                    "{}@{seq} above {id:?}: {answer:?}, newer in {newer_above:?}",
                    show(&k)
                );
                if in_memtable_above {
                    assert_eq!(answer, NewerVersion::Yes, "{context}");
                } else if !newer_above.is_empty() {
                    assert_eq!(answer, NewerVersion::Maybe, "{context}");
                } else {
                    assert_ne!(answer, NewerVersion::Yes, "{context}");
                }
                if index == 0 {
                    assert_eq!(answer, NewerVersion::No, "nothing is above the memtable");
                }
                match answer {
                    NewerVersion::No => no += 1,
                    NewerVersion::Yes => yes += 1,
                    NewerVersion::Maybe => {
                        maybe += 1;
                        maybe_false += usize::from(newer_above.is_empty());
                    }
                }
                // The Db shortcut answers from the same (unchanged) state.
                assert_eq!(
                    db.newer_version_exists_above(&tree, &k, seq, *id)
                        .expect("getlite"),
                    answer
                );
            }
        }
        assert!(
            no > 0 && yes > 0 && maybe > 0,
            "no {no}, yes {yes}, maybe {maybe}"
        );
        // Bloom filters and key ranges rule most tables out.
        assert!(
            maybe_false * 4 < no,
            "{maybe_false} false Maybe against {no} No"
        );
    });
}

// ---------------------------------------------------------------------------------------------
// Sequence numbers and snapshots
// ---------------------------------------------------------------------------------------------

#[test]
fn get_returns_the_sequence_number_of_each_write_and_snapshots_see_their_past() {
    with_seed("sequence numbers", 0x5e9, |seed| {
        let mut rng = StdRng::seed_from_u64(seed);
        let fs = FaultFileSystem::new();
        let options = Options {
            memtable_bytes_max: 8 << 10,
            l0_compaction_trigger: 3,
            level1_bytes_max: 16 << 10,
            ..quiet_options(&fs)
        };
        let mut db = Db::open(DIR, options.clone()).expect("open");
        let names = ["default", "second"];
        let mut trees: Vec<Tree> = names
            .iter()
            .map(|n| open_or_create(&db, n, &options))
            .collect();
        type Model = HashMap<(usize, Vec<u8>), Entry>;
        let mut model: Model = HashMap::new();
        let mut snapshots: Vec<(Snapshot, Model)> = Vec::new();
        let mut last_seq = db.latest_sequence();
        let check =
            |db: &Db, trees: &[Tree], model: &Model, snapshot: Option<&Snapshot>, context: &str| {
                let options = ReadOptions {
                    snapshot: snapshot.cloned(),
                    ..ReadOptions::default()
                };
                for (t, tree) in trees.iter().enumerate() {
                    for i in 0..100 {
                        let got = db.get_with(tree, &key(i), &options).expect("get");
                        assert_eq!(
                            got.as_ref(),
                            model.get(&(t, key(i))),
                            "get {i} in {}, {context}",
                            names[t]
                        );
                    }
                    let mut expected: Vec<(Vec<u8>, Vec<u8>, SeqNo)> = model
                        .iter()
                        .filter(|((mt, _), _)| *mt == t)
                        .map(|((_, k), e)| (k.clone(), e.value.clone(), e.seq))
                        .collect();
                    expected.sort();
                    assert_eq!(
                        scan(db, tree, options.clone()),
                        expected,
                        "scan of {}, {context}",
                        names[t]
                    );
                }
            };
        for step in 0..3000 {
            match rng.gen_range(0..100) {
                0..=79 => {
                    let mut batch = WriteBatch::new();
                    let mut ops = Vec::new();
                    for _ in 0..rng.gen_range(1..5) {
                        let t = rng.gen_range(0..trees.len());
                        let k = key(rng.gen_range(0..100));
                        if rng.gen_bool(0.2) {
                            batch.delete(&trees[t], &k);
                            ops.push((t, k, None));
                        } else {
                            let v = format!("{step}-{}", rng.gen_range(0..1000)).into_bytes();
                            batch.put(&trees[t], &k, &v);
                            ops.push((t, k, Some(v)));
                        }
                    }
                    let first = db.write(batch, &WriteOptions::default()).expect("write");
                    assert_eq!(first, last_seq + 1, "sequence numbers are consecutive");
                    last_seq = first + ops.len() as u64 - 1;
                    assert_eq!(db.latest_sequence(), last_seq);
                    for (i, (t, k, v)) in ops.into_iter().enumerate() {
                        match v {
                            Some(value) => {
                                model.insert(
                                    (t, k),
                                    Entry {
                                        value,
                                        seq: first + i as u64,
                                    },
                                );
                            }
                            None => {
                                model.remove(&(t, k));
                            }
                        }
                    }
                }
                80..=85 => {
                    if snapshots.len() < 4 {
                        let s = db.snapshot();
                        assert_eq!(s.sequence(), last_seq);
                        snapshots.push((s, model.clone()));
                    } else {
                        snapshots.swap_remove(rng.gen_range(0..4));
                    }
                }
                86..=89 => db.flush().expect("flush"),
                90..=92 => {
                    let t = rng.gen_range(0..trees.len());
                    db.compact_range(&trees[t], None, None).expect("compact");
                }
                93 => {
                    snapshots.clear();
                    db = reopen(db, &options);
                    trees = names
                        .iter()
                        .map(|n| open_or_create(&db, n, &options))
                        .collect();
                    assert_eq!(
                        db.latest_sequence(),
                        last_seq,
                        "the sequence survives a reopen"
                    );
                }
                _ => {
                    check(&db, &trees, &model, None, &format!("step {step}"));
                    for (i, (s, m)) in snapshots.iter().enumerate() {
                        check(
                            &db,
                            &trees,
                            m,
                            Some(s),
                            &format!("step {step}, snapshot {i}"),
                        );
                    }
                }
            }
        }
        check(&db, &trees, &model, None, "end");
        let path = db.path().to_path_buf();
        assert_eq!(path, Path::new(DIR));
        db.close().expect("close");
    });
}

// ---------------------------------------------------------------------------------------------
// Engine regressions found while testing the extension points
// ---------------------------------------------------------------------------------------------

/// Regression: compaction restarted its walk over the grandparent level (level + 2) for every
/// output file, so once the keys passed more than `10 * table_file_bytes_target` of
/// grandparent data, every output file was cut after its first user key (thousands of
/// one-key tables; found through the observer's log tree in `tests/concurrency.rs`).
#[test]
fn compaction_output_files_are_not_cut_after_every_key() {
    let fs = FaultFileSystem::new();
    let target = 1 << 10;
    // First a deep L2 (the grandparent level of L0 -> L1 compactions): tiny L1, large ratio.
    let deep = Options {
        l0_compaction_trigger: 2,
        level1_bytes_max: 1 << 10,
        level_size_ratio: 1000,
        table_file_bytes_target: target,
        ..quiet_options(&fs)
    };
    let db = Db::open(DIR, deep).expect("open");
    let tree = db.default_tree();
    for round in 0..4 {
        for i in (round..2000).step_by(4) {
            db.put(&tree, &key(i), &[b'v'; 20]).expect("put");
        }
        db.flush().expect("flush");
    }
    db.wait_for_background_work().expect("wait");
    // Then two L0 files spanning every key, compacted into L1 over that L2.
    let options = Options {
        l0_compaction_trigger: 2,
        table_file_bytes_target: target,
        ..quiet_options(&fs)
    };
    let db = reopen(db, &options);
    let tree = db.default_tree();
    let grandparent_bytes: u64 = db
        .components(&tree, &ReadOptions::default())
        .expect("components")
        .files(2)
        .iter()
        .map(|f| f.file_bytes)
        .sum();
    assert!(
        grandparent_bytes > 20 * target,
        "L2 holds {grandparent_bytes} bytes"
    );
    for round in 0..2 {
        for i in (round..2000).step_by(2) {
            db.put(&tree, &key(i), &[b'w'; 20]).expect("put");
        }
        db.flush().expect("flush");
    }
    db.wait_for_background_work().expect("wait");
    let view = db
        .components(&tree, &ReadOptions::default())
        .expect("components");
    let level1: Vec<u64> = view.files(1).iter().map(|f| f.entries).collect();
    assert!(!level1.is_empty(), "the L0 files were compacted into L1");
    let single_key = level1.iter().filter(|entries| **entries == 1).count();
    assert!(
        single_key * 10 < level1.len(),
        "{single_key} of {} L1 files hold a single entry: {level1:?}",
        level1.len()
    );
}

/// A compaction that drops more entries than one piece commits their emitted writes in pieces
/// while it runs (a piece per `EMITTED_PIECE_ENTRIES`, the rest with its edit), not in one
/// commit that holds every writer; and all of them are durable once its edit is: a crash right
/// after the compaction loses none. With exactly two pieces' worth, nothing is left to commit
/// with the edit, and the job syncs the log itself.
#[test]
fn a_large_compaction_commits_its_emitted_writes_in_pieces_all_durable_with_its_edit() {
    for (dropped, commits_expected) in [
        (2 * EMITTED_PIECE_ENTRIES, 2),
        (2 * EMITTED_PIECE_ENTRIES + 17, 3),
    ] {
        let fs = FaultFileSystem::new();
        let observer = DropLogger::new();
        let options = Options {
            compaction_observers: vec![Arc::clone(&observer) as Arc<dyn CompactionObserver>],
            seek_compaction: false,
            ..quiet_options(&fs)
        };
        let db = Db::open(DIR, options.clone()).expect("open");
        let (data, _) = observer.watch(&db, &options);
        for version in [b"old", b"new"] {
            for i in 0..dropped {
                db.put(&data, format!("k{i:06}").as_bytes(), version)
                    .expect("put");
            }
            // A last key after every dropped one: the job checks for a full piece as it writes
            // a key out, so the last drop is followed by a check.
            if version == b"new" {
                db.put(&data, b"z", b"new").expect("put");
            }
            db.flush().expect("flush");
        }
        let before = db.stats().unqueued_commits;
        db.compact_range(&data, None, None).expect("compact");
        assert_eq!(
            db.stats().unqueued_commits - before,
            commits_expected,
            "{dropped} emitted writes"
        );
        fs.crash();
        drop(db);
        let options = Options {
            file_system: Arc::new(fs.clone()),
            ..options
        };
        let db = Db::open(DIR, options).expect("reopen after the crash");
        let log = db.tree("log").expect("log tree");
        let logged = scan(&db, &log, ReadOptions::default());
        assert_eq!(logged.len(), dropped, "emitted writes lost in the crash");
        assert!(logged
            .iter()
            .all(|(key, _, _)| key.starts_with(b"dropped/k")));
        let data = db.tree("data").expect("data tree");
        assert!(scan(&db, &data, ReadOptions::default())
            .iter()
            .all(|(_, value, _)| value == b"new"));
        db.close().expect("close");
    }
}
