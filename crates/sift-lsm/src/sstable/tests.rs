//! Table tests: random multi-version tables against a model vector, bloom accuracy, block
//! property collectors and filters, the block cache, and byte-flip corruption.

use super::bloom::{BloomBuilder, BloomFilter};
use super::format::Footer;
use super::test_util::{MemFile, MemReader};
use super::*;
use crate::extension::{
    BlockFilter, BlockPropertyCollector, CollectorEntry, FinishedBlock, Properties,
    TableCollectorOutput,
};
use crate::iterator::InternalIterator;
use crate::key::{compare_internal_keys, make_internal_key, make_seek_key, user_key, ValueKind};
use crate::options::Compression;
use crate::stats::{EngineCounters, ReadStats};
use crate::{Error, Result};
use parking_lot::Mutex;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;

type Entries = Vec<(Vec<u8>, Vec<u8>)>;

const COMPRESSIONS: [Compression; 3] = [Compression::None, Compression::Snappy, Compression::Lz4];

fn random_user_key(rng: &mut StdRng) -> Vec<u8> {
    let len = rng.gen_range(0..12);
    (0..len)
        .map(|_| {
            if rng.gen_bool(0.02) {
                0xff
            } else {
                rng.gen_range(b'a'..=b'e')
            }
        })
        .collect()
}

fn random_value(rng: &mut StdRng) -> Vec<u8> {
    let len = match rng.gen_range(0..100) {
        0 => rng.gen_range(1000..6000),
        1..=10 => 0,
        _ => rng.gen_range(1..80),
    };
    if rng.gen_bool(0.5) {
        // Compressible: a short repeated pattern.
        let byte = rng.gen_range(b'A'..=b'Z');
        vec![byte; len]
    } else {
        (0..len).map(|_| rng.gen()).collect()
    }
}

/// Sorted, distinct internal keys: random user keys, each with 1..=4 versions.
fn random_model(rng: &mut StdRng, user_keys: usize) -> Entries {
    let mut users: Vec<Vec<u8>> = (0..user_keys).map(|_| random_user_key(rng)).collect();
    users.sort();
    users.dedup();
    let mut entries = Vec::new();
    for user in users {
        let versions = rng.gen_range(1..=4);
        let mut seqs: Vec<u64> = (0..versions).map(|_| rng.gen_range(1..1_000_000)).collect();
        seqs.sort_unstable();
        seqs.dedup();
        for &seq in seqs.iter().rev() {
            let kind = match rng.gen_range(0..10) {
                0 => ValueKind::Delete,
                1 => ValueKind::Merge,
                _ => ValueKind::Put,
            };
            entries.push((make_internal_key(&user, seq, kind), random_value(rng)));
        }
    }
    debug_assert!(entries
        .windows(2)
        .all(|w| compare_internal_keys(&w[0].0, &w[1].0).is_lt()));
    entries
}

struct BuildConfig {
    block_bytes: usize,
    restart_interval: usize,
    bloom_bits_per_key: u32,
    compression: Compression,
}

impl Default for BuildConfig {
    fn default() -> Self {
        BuildConfig {
            block_bytes: 512,
            restart_interval: 4,
            bloom_bits_per_key: 10,
            compression: Compression::None,
        }
    }
}

fn build(
    entries: &Entries,
    config: &BuildConfig,
    collectors: Vec<(String, Box<dyn BlockPropertyCollector>)>,
) -> (Vec<u8>, TableSummary, MemFile) {
    let file = MemFile::default();
    let options = TableBuilderOptions {
        block_bytes: config.block_bytes,
        block_restart_interval: config.restart_interval,
        bloom_bits_per_key: config.bloom_bits_per_key,
        compression: config.compression,
        collectors,
    };
    let mut builder = TableBuilder::new(file.writer(), PathBuf::from("/mem/000007.sst"), options);
    for (key, value) in entries {
        builder.add(key, value).expect("add to memory file");
    }
    assert_eq!(builder.entries(), entries.len() as u64);
    let summary = builder.finish().expect("finish to memory file");
    (file.contents(), summary, file)
}

fn table_path() -> PathBuf {
    PathBuf::from("/mem/000007.sst")
}

fn open(bytes: Vec<u8>, cache: Option<Arc<BlockCache>>) -> Result<Arc<Table>> {
    Table::open(
        MemReader::open(bytes, &table_path()),
        7,
        cache,
        Arc::new(EngineCounters::default()),
    )
}

fn scan_forward(table: &Arc<Table>, ctx: ReadContext) -> Result<Entries> {
    let mut iter = table.iter(ctx);
    let mut out = Vec::new();
    iter.seek_to_first()?;
    while iter.valid() {
        out.push((iter.key().to_vec(), iter.value().to_vec()));
        iter.next()?;
    }
    Ok(out)
}

fn scan_backward(table: &Arc<Table>, ctx: ReadContext) -> Result<Entries> {
    let mut iter = table.iter(ctx);
    let mut out = Vec::new();
    iter.seek_to_last()?;
    while iter.valid() {
        out.push((iter.key().to_vec(), iter.value().to_vec()));
        iter.prev()?;
    }
    out.reverse();
    Ok(out)
}

/// Index of the first model entry `>= target`.
fn model_seek(model: &Entries, target: &[u8]) -> usize {
    model.partition_point(|(k, _)| compare_internal_keys(k, target).is_lt())
}

/// Index of the last model entry `<= target`, if any.
fn model_seek_for_prev(model: &Entries, target: &[u8]) -> Option<usize> {
    model
        .partition_point(|(k, _)| compare_internal_keys(k, target).is_le())
        .checked_sub(1)
}

fn model_get(model: &Entries, seek_key: &[u8]) -> Option<(Vec<u8>, Vec<u8>)> {
    let i = model_seek(model, seek_key);
    model
        .get(i)
        .filter(|(k, _)| user_key(k) == user_key(seek_key))
        .cloned()
}

fn random_target(rng: &mut StdRng, model: &Entries) -> Vec<u8> {
    let existing = &model[rng.gen_range(0..model.len())].0;
    match rng.gen_range(0..5) {
        0 => existing.clone(),
        1 => make_seek_key(user_key(existing), rng.gen_range(0..1_100_000)),
        2 => make_internal_key(
            user_key(existing),
            rng.gen_range(0..1_100_000),
            ValueKind::Delete,
        ),
        3 => make_seek_key(b"\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff", 5),
        _ => {
            let user = random_user_key(rng);
            make_seek_key(&user, rng.gen_range(0..1_100_000))
        }
    }
}

fn check_table_against_model(table: &Arc<Table>, model: &Entries, rng: &mut StdRng, seed: u64) {
    let ctx = ReadContext::default;
    assert_eq!(
        scan_forward(table, ctx()).expect("scan"),
        *model,
        "seed {seed}: forward scan"
    );
    assert_eq!(
        scan_backward(table, ctx()).expect("scan"),
        *model,
        "seed {seed}: backward scan"
    );

    let mut iter = table.iter(ctx());
    for _ in 0..300 {
        let target = random_target(rng, model);
        let mut position = if rng.gen_bool(0.5) {
            iter.seek(&target).expect("seek");
            Some(model_seek(model, &target)).filter(|&i| i < model.len())
        } else {
            iter.seek_for_prev(&target).expect("seek_for_prev");
            model_seek_for_prev(model, &target)
        };
        // Then wander a few steps in random directions.
        for _ in 0..rng.gen_range(0..6) {
            let Some(i) = position else {
                assert!(
                    !iter.valid(),
                    "seed {seed}: iterator valid past the model's end"
                );
                break;
            };
            assert!(iter.valid(), "seed {seed}: iterator invalid, model at {i}");
            assert_eq!(iter.key(), model[i].0.as_slice(), "seed {seed}");
            assert_eq!(iter.value(), model[i].1.as_slice(), "seed {seed}");
            if rng.gen_bool(0.5) {
                iter.next().expect("next");
                position = position.map(|i| i + 1).filter(|&i| i < model.len());
            } else {
                iter.prev().expect("prev");
                position = position.and_then(|i| i.checked_sub(1));
            }
        }
        match position {
            Some(i) => assert_eq!(iter.key(), model[i].0.as_slice(), "seed {seed}"),
            None => assert!(!iter.valid(), "seed {seed}"),
        }
    }

    for _ in 0..300 {
        let target = random_target(rng, model);
        let seek_key = make_seek_key(user_key(&target), rng.gen_range(0..1_100_000));
        assert_eq!(
            table.get(&seek_key, &ctx()).expect("get"),
            model_get(model, &seek_key),
            "seed {seed}: get {seek_key:?}"
        );
    }
    // Every user key in the table is found at its newest version.
    for (key, value) in model.iter().step_by(7) {
        let seek_key = make_seek_key(user_key(key), crate::key::SEQ_MAX);
        let found = table
            .get(&seek_key, &ctx())
            .expect("get")
            .expect("present key found");
        assert_eq!(user_key(&found.0), user_key(key), "seed {seed}");
        if found.0 == *key {
            assert_eq!(found.1, *value, "seed {seed}");
        }
    }
}

#[test]
fn random_tables_match_the_model_for_every_compression_and_block_shape() {
    let seed = rand::random::<u64>();
    eprintln!("seed {seed}");
    let mut rng = StdRng::seed_from_u64(seed);
    for compression in COMPRESSIONS {
        for (block_bytes, restart_interval) in [(64, 1), (512, 4), (4096, 16), (2000, 3)] {
            let model = random_model(&mut rng, 1500);
            let config = BuildConfig {
                block_bytes,
                restart_interval,
                bloom_bits_per_key: rng.gen_range(0..12),
                compression,
            };
            let (bytes, summary, file) = build(&model, &config, Vec::new());
            assert_eq!(*file.syncs.lock(), 1, "finish syncs the file");
            assert_eq!(summary.file_bytes, bytes.len() as u64, "seed {seed}");
            assert_eq!(summary.entries, model.len() as u64);
            assert_eq!(summary.smallest, model[0].0);
            assert_eq!(summary.largest, model[model.len() - 1].0);
            let deletions = model
                .iter()
                .filter(|(k, _)| {
                    crate::key::parse_internal_key(k).map(|p| p.kind) == Some(ValueKind::Delete)
                })
                .count() as u64;
            assert_eq!(summary.deletions, deletions);
            let seqs = model
                .iter()
                .filter_map(|(k, _)| crate::key::parse_internal_key(k).map(|p| p.seq));
            assert_eq!(summary.seq_min, seqs.clone().min().unwrap_or(0));
            assert_eq!(summary.seq_max, seqs.max().unwrap_or(0));

            let table = open(bytes, None).expect("open");
            let props = table.properties();
            assert_eq!(props.entries, summary.entries);
            assert_eq!(props.deletions, deletions);
            assert_eq!(props.smallest, summary.smallest);
            assert_eq!(props.largest, summary.largest);
            assert_eq!(props.compression, compression);
            assert_eq!(props.format_version, FORMAT_VERSION);
            assert_eq!(props.data_blocks, table.block_count() as u64);
            assert_eq!(
                props.raw_value_bytes,
                model.iter().map(|(_, v)| v.len() as u64).sum::<u64>()
            );
            assert!(
                table.block_count() > 1,
                "seed {seed}: several blocks expected"
            );
            check_table_against_model(&table, &model, &mut rng, seed);

            // Whole blocks read back in order make the model.
            let mut all = Vec::new();
            for ordinal in 0..table.block_count() {
                all.extend(
                    table
                        .read_block_entries(ordinal, &ReadContext::default())
                        .expect("block"),
                );
            }
            assert_eq!(all, model, "seed {seed}");
        }
    }
}

#[test]
fn compression_shrinks_compressible_tables_and_keeps_incompressible_blocks_raw() {
    let mut rng = StdRng::seed_from_u64(11);
    let compressible: Entries = (0..2000u32)
        .map(|i| {
            let key = make_internal_key(format!("key{i:08}").as_bytes(), 5, ValueKind::Put);
            (key, vec![b'x'; 100])
        })
        .collect();
    let random: Entries = (0..500u32)
        .map(|i| {
            let key = make_internal_key(format!("key{i:08}").as_bytes(), 5, ValueKind::Put);
            (key, (0..100).map(|_| rng.gen()).collect())
        })
        .collect();
    for compression in [Compression::Snappy, Compression::Lz4] {
        let plain = build(&compressible, &BuildConfig::default(), Vec::new()).0;
        let config = BuildConfig {
            compression,
            ..BuildConfig::default()
        };
        let packed = build(&compressible, &config, Vec::new()).0;
        assert!(
            packed.len() * 3 < plain.len(),
            "{compression:?}: {} vs {}",
            packed.len(),
            plain.len()
        );
        let table = open(packed, None).expect("open");
        assert_eq!(
            scan_forward(&table, ReadContext::default()).expect("scan"),
            compressible
        );

        // Random values do not compress by 1/8: blocks are stored raw, the file is no larger.
        let plain = build(&random, &BuildConfig::default(), Vec::new()).0;
        let packed = build(&random, &config, Vec::new()).0;
        assert!(packed.len() <= plain.len() + 64, "{compression:?}");
        let table = open(packed, None).expect("open");
        assert_eq!(
            scan_forward(&table, ReadContext::default()).expect("scan"),
            random
        );
    }
}

#[test]
fn empty_table_opens_and_reads_nothing() {
    let (bytes, summary, _) = build(&Vec::new(), &BuildConfig::default(), Vec::new());
    assert_eq!(summary.entries, 0);
    let table = open(bytes, None).expect("open");
    assert_eq!(table.block_count(), 0);
    assert!(scan_forward(&table, ReadContext::default())
        .expect("scan")
        .is_empty());
    assert!(scan_backward(&table, ReadContext::default())
        .expect("scan")
        .is_empty());
    let mut iter = table.iter(ReadContext::default());
    iter.seek(&make_seek_key(b"a", 1)).expect("seek");
    assert!(!iter.valid());
    iter.seek_for_prev(&make_seek_key(b"a", 1))
        .expect("seek_for_prev");
    assert!(!iter.valid());
    assert_eq!(
        table
            .get(&make_seek_key(b"a", 1), &ReadContext::default())
            .expect("get"),
        None
    );
}

#[test]
fn bloom_has_no_false_negatives_and_about_one_percent_false_positives() {
    let mut builder = BloomBuilder::new(10);
    let keys: Vec<Vec<u8>> = (0..20_000u32)
        .map(|i| format!("present-{i}").into_bytes())
        .collect();
    for key in &keys {
        builder.add_key(key);
    }
    let filter = BloomFilter::decode(builder.finish()).expect("filter decodes");
    assert!(keys.iter().all(|k| filter.may_contain(k)), "false negative");
    let probes = 100_000u32;
    let false_positives = (0..probes)
        .filter(|i| filter.may_contain(format!("absent-{i}").as_bytes()))
        .count();
    let rate = false_positives as f64 / f64::from(probes);
    eprintln!("bloom false-positive rate at 10 bits/key: {rate}");
    assert!(rate < 0.02, "false-positive rate {rate} at 10 bits/key");
    assert!(
        rate > 0.001,
        "false-positive rate {rate} is implausibly low for 10 bits/key"
    );

    // Through a table: every present user key passes, most absent ones are rejected with no I/O.
    let model: Entries = (0..5000u32)
        .map(|i| {
            (
                make_internal_key(format!("k{i:05}").as_bytes(), 1, ValueKind::Put),
                vec![1],
            )
        })
        .collect();
    let table = open(build(&model, &BuildConfig::default(), Vec::new()).0, None).expect("open");
    assert!(model
        .iter()
        .all(|(k, _)| table.may_contain_user_key(user_key(k))));
    let stats = Arc::new(ReadStats::default());
    let ctx = ReadContext {
        stats: Some(Arc::clone(&stats)),
        ..ReadContext::default()
    };
    let mut found = 0;
    for i in 0..5000u32 {
        let seek_key = make_seek_key(format!("k{i:05}x").as_bytes(), 9);
        found += usize::from(table.get(&seek_key, &ctx).expect("get").is_some());
    }
    assert_eq!(found, 0);
    assert!(
        stats.blocks_read() < 150,
        "bloom let {} reads through",
        stats.blocks_read()
    );
    assert!(stats.blocks_skipped.load(Relaxed) > 4850);

    // No filter: everything may be present.
    let config = BuildConfig {
        bloom_bits_per_key: 0,
        ..BuildConfig::default()
    };
    let table = open(build(&model, &config, Vec::new()).0, None).expect("open");
    assert!(table.may_contain_user_key(b"surely-absent"));
}

/// Test collector: min and max of the big-endian u64 in each value's first 8 bytes.
struct MinMaxCollector {
    block: Option<(u64, u64)>,
    table: Option<(u64, u64)>,
    entries: u64,
    finished: Arc<Mutex<Vec<FinishedBlock>>>,
}

fn encode_range(range: Option<(u64, u64)>) -> Vec<u8> {
    range.map_or_else(Vec::new, |(lo, hi)| {
        [lo.to_be_bytes(), hi.to_be_bytes()].concat()
    })
}

fn decode_range(bytes: &[u8]) -> Option<(u64, u64)> {
    let lo = u64::from_be_bytes(bytes.get(..8)?.try_into().ok()?);
    let hi = u64::from_be_bytes(bytes.get(8..16)?.try_into().ok()?);
    Some((lo, hi))
}

fn value_number(value: &[u8]) -> Option<u64> {
    Some(u64::from_be_bytes(value.get(..8)?.try_into().ok()?))
}

fn widen(range: &mut Option<(u64, u64)>, n: u64) {
    *range = Some(range.map_or((n, n), |(lo, hi)| (lo.min(n), hi.max(n))));
}

impl BlockPropertyCollector for MinMaxCollector {
    fn add(&mut self, entry: &CollectorEntry<'_>) {
        self.entries += 1;
        if let Some(n) = value_number(entry.value) {
            widen(&mut self.block, n);
            widen(&mut self.table, n);
        }
    }
    fn finish_block(&mut self, block: &FinishedBlock) -> Vec<u8> {
        self.finished.lock().push(*block);
        encode_range(self.block.take())
    }
    fn finish_table(&mut self) -> TableCollectorOutput {
        TableCollectorOutput {
            table_property: encode_range(self.table),
            meta_blocks: vec![
                ("stats".to_owned(), self.entries.to_le_bytes().to_vec()),
                ("big".to_owned(), vec![b'z'; 10_000]),
            ],
        }
    }
}

/// A second collector, to check that properties keep their per-collector order.
struct CountCollector(u32);

impl BlockPropertyCollector for CountCollector {
    fn add(&mut self, _entry: &CollectorEntry<'_>) {
        self.0 += 1;
    }
    fn finish_block(&mut self, _block: &FinishedBlock) -> Vec<u8> {
        std::mem::take(&mut self.0).to_le_bytes().to_vec()
    }
    fn finish_table(&mut self) -> TableCollectorOutput {
        TableCollectorOutput {
            table_property: b"count".to_vec(),
            meta_blocks: Vec::new(),
        }
    }
}

/// Passes blocks whose min/max range overlaps `[low, high]`.
struct RangeFilter {
    low: u64,
    high: u64,
}

impl BlockFilter for RangeFilter {
    fn table_may_match(&self, properties: &Properties<'_>) -> bool {
        self.block_may_match(properties)
    }
    fn block_may_match(&self, properties: &Properties<'_>) -> bool {
        match properties.get("minmax").map(decode_range) {
            Some(Some((lo, hi))) => lo <= self.high && hi >= self.low,
            Some(None) => false,
            None => true,
        }
    }
}

fn collectors(
    finished: &Arc<Mutex<Vec<FinishedBlock>>>,
) -> Vec<(String, Box<dyn BlockPropertyCollector>)> {
    vec![
        ("count".to_owned(), Box::new(CountCollector(0))),
        (
            "minmax".to_owned(),
            Box::new(MinMaxCollector {
                block: None,
                table: None,
                entries: 0,
                finished: Arc::clone(finished),
            }),
        ),
    ]
}

/// Keys in order, values carrying a number that wanders so blocks get distinct ranges.
fn numbered_model(rng: &mut StdRng, n: u32) -> Entries {
    let mut number: i64 = 1000;
    (0..n)
        .map(|i| {
            number = (number + rng.gen_range(-3..=8)).max(0);
            let mut value = (number as u64).to_be_bytes().to_vec();
            value.extend(std::iter::repeat_n(b'v', rng.gen_range(0..40)));
            (
                make_internal_key(
                    format!("user{i:06}").as_bytes(),
                    u64::from(i) + 1,
                    ValueKind::Put,
                ),
                value,
            )
        })
        .collect()
}

#[test]
fn collector_properties_round_trip_and_block_filter_skips_blocks() {
    let seed = rand::random::<u64>();
    eprintln!("seed {seed}");
    let mut rng = StdRng::seed_from_u64(seed);
    let model = numbered_model(&mut rng, 3000);
    let finished = Arc::new(Mutex::new(Vec::new()));
    let config = BuildConfig {
        compression: Compression::Lz4,
        ..BuildConfig::default()
    };
    let (bytes, summary, _) = build(&model, &config, collectors(&finished));
    let table_bytes = bytes.clone();
    let table = open(bytes, None).expect("open");
    let ctx = ReadContext::default;

    // Per-block properties match each block's content; collectors saw the right handles.
    let finished = finished.lock().clone();
    assert_eq!(finished.len(), table.block_count(), "seed {seed}");
    let mut blocks = Vec::new();
    for (ordinal, finished_block) in finished.iter().enumerate() {
        assert_eq!(finished_block.ordinal as usize, ordinal);
        assert_eq!(Some(finished_block.handle), table.block_handle(ordinal));
        let entries = table.read_block_entries(ordinal, &ctx()).expect("block");
        let mut range = None;
        for (_, v) in &entries {
            widen(&mut range, value_number(v).expect("numbered value"));
        }
        let props = table.block_properties(ordinal).expect("ordinal in range");
        assert_eq!(
            props.get("minmax").and_then(decode_range),
            range,
            "seed {seed}"
        );
        assert_eq!(
            props.get("count"),
            Some(&(entries.len() as u32).to_le_bytes()[..])
        );
        let names: Vec<&str> = props.iter().map(|(n, _)| n).collect();
        assert_eq!(names, ["count", "minmax"]);
        blocks.push((range.expect("non-empty block"), entries));
    }
    assert!(table.block_properties(table.block_count()).is_none());
    assert!(table.block_handle(table.block_count()).is_none());

    // Table properties and meta blocks, by name.
    let mut table_range = None;
    for (_, v) in &model {
        widen(&mut table_range, value_number(v).expect("numbered value"));
    }
    assert_eq!(summary.property_names, ["count", "minmax"]);
    assert_eq!(decode_range(&summary.property_values[1]), table_range);
    let props = table.properties().collector_properties();
    assert_eq!(props.get("minmax").and_then(decode_range), table_range);
    assert_eq!(props.get("count"), Some(&b"count"[..]));
    assert_eq!(
        table.meta_block("minmax", "stats").expect("read"),
        Some((model.len() as u64).to_le_bytes().to_vec())
    );
    assert_eq!(
        table.meta_block("minmax", "big").expect("read"),
        Some(vec![b'z'; 10_000])
    );
    assert_eq!(table.meta_block("minmax", "absent").expect("read"), None);
    assert_eq!(table.meta_block("count", "stats").expect("read"), None);
    // The same meta blocks read without opening the table (footer and metaindex only).
    let unopened = MemReader::open(table_bytes.clone(), &table_path());
    for (collector, name) in [
        ("minmax", "stats"),
        ("minmax", "big"),
        ("minmax", "absent"),
        ("count", "stats"),
    ] {
        let read = crate::sstable::read_meta_block_unopened(&*unopened, collector, name)
            .expect("read unopened");
        assert_eq!(
            read.as_ref().map(|block| block.bytes.clone()),
            table.meta_block(collector, name).expect("read"),
            "{collector}/{name}"
        );
        assert_eq!(
            read.map(|block| block.handle),
            table.meta_block_handle(collector, name)
        );
    }

    // Filtered scans yield exactly the entries of matching blocks, and count skipped blocks.
    let (low, high) = table_range.expect("numbers");
    for _ in 0..20 {
        let a = rng.gen_range(low..=high);
        let b = rng.gen_range(a..=(a + (high - low) / 5));
        let stats = Arc::new(ReadStats::default());
        let filtered = || ReadContext {
            stats: Some(Arc::clone(&stats)),
            block_filter: Some(Arc::new(RangeFilter { low: a, high: b })),
            ..ReadContext::default()
        };
        let expected: Entries = blocks
            .iter()
            .filter(|((lo, hi), _)| *lo <= b && *hi >= a)
            .flat_map(|(_, entries)| entries.clone())
            .collect();
        let skipped = blocks
            .iter()
            .filter(|((lo, hi), _)| !(*lo <= b && *hi >= a))
            .count();
        assert_eq!(
            scan_forward(&table, filtered()).expect("scan"),
            expected,
            "seed {seed}"
        );
        assert_eq!(
            stats.blocks_skipped.load(Relaxed),
            skipped as u64,
            "seed {seed}"
        );
        assert_eq!(
            stats.blocks_read(),
            (blocks.len() - skipped) as u64,
            "seed {seed}"
        );
        assert_eq!(
            scan_backward(&table, filtered()).expect("scan"),
            expected,
            "seed {seed}"
        );

        // Seeks land on the first matching entry at or after the target.
        let mut iter = table.iter(filtered());
        for _ in 0..20 {
            let target = &model[rng.gen_range(0..model.len())].0;
            iter.seek(target).expect("seek");
            let want = expected
                .iter()
                .find(|(k, _)| compare_internal_keys(k, target).is_ge());
            assert_eq!(
                iter.valid().then(|| iter.key().to_vec()),
                want.map(|(k, _)| k.clone())
            );
            iter.seek_for_prev(target).expect("seek_for_prev");
            let want = expected
                .iter()
                .rev()
                .find(|(k, _)| compare_internal_keys(k, target).is_le());
            assert_eq!(
                iter.valid().then(|| iter.key().to_vec()),
                want.map(|(k, _)| k.clone())
            );
        }
    }
}

#[test]
fn duplicate_meta_block_names_are_rejected() {
    struct Twice;
    impl BlockPropertyCollector for Twice {
        fn add(&mut self, _entry: &CollectorEntry<'_>) {}
        fn finish_block(&mut self, _block: &FinishedBlock) -> Vec<u8> {
            Vec::new()
        }
        fn finish_table(&mut self) -> TableCollectorOutput {
            TableCollectorOutput {
                table_property: Vec::new(),
                meta_blocks: vec![("a".into(), vec![1]), ("a".into(), vec![2])],
            }
        }
    }
    let file = MemFile::default();
    let options = TableBuilderOptions {
        block_bytes: 4096,
        block_restart_interval: 16,
        bloom_bits_per_key: 10,
        compression: Compression::None,
        collectors: vec![("twice".into(), Box::new(Twice))],
    };
    let mut builder = TableBuilder::new(file.writer(), table_path(), options);
    builder
        .add(&make_internal_key(b"k", 1, ValueKind::Put), b"v")
        .expect("add");
    assert!(matches!(builder.finish(), Err(Error::InvalidArgument(_))));
}

#[test]
fn block_cache_serves_second_reads_and_capacity_zero_caches_nothing() {
    let mut rng = StdRng::seed_from_u64(3);
    let model = random_model(&mut rng, 2000);
    let bytes = build(&model, &BuildConfig::default(), Vec::new()).0;
    let key = make_seek_key(user_key(&model[model.len() / 2].0), crate::key::SEQ_MAX);

    let cache = Arc::new(BlockCache::new(1 << 20));
    let counters = Arc::new(EngineCounters::default());
    let table = Table::open(
        MemReader::open(bytes.clone(), &table_path()),
        7,
        Some(Arc::clone(&cache)),
        Arc::clone(&counters),
    )
    .expect("open");
    let stats = Arc::new(ReadStats::default());
    let ctx = ReadContext {
        stats: Some(Arc::clone(&stats)),
        ..ReadContext::default()
    };
    assert!(table.get(&key, &ctx).expect("get").is_some());
    assert_eq!(stats.blocks_read_from_disk.load(Relaxed), 1);
    assert_eq!(stats.blocks_read_from_cache.load(Relaxed), 0);
    let disk_bytes = stats.bytes_read_from_disk.load(Relaxed);
    assert!(disk_bytes > 0);
    assert!(cache.used_bytes() >= disk_bytes);
    assert!(table.get(&key, &ctx).expect("get").is_some());
    assert_eq!(stats.blocks_read_from_disk.load(Relaxed), 1);
    assert_eq!(stats.blocks_read_from_cache.load(Relaxed), 1);
    assert_eq!(counters.blocks_read_from_disk.load(Relaxed), 1);
    assert_eq!(counters.blocks_read_from_cache.load(Relaxed), 1);
    assert_eq!(counters.bytes_read_from_disk.load(Relaxed), disk_bytes);

    // A full scan reads each block once, from disk or cache; a second scan only from cache.
    let before = counters.blocks_read_from_disk.load(Relaxed);
    scan_forward(&table, ReadContext::default()).expect("scan");
    let scanned = counters.blocks_read_from_disk.load(Relaxed) - before;
    assert_eq!(scanned, table.block_count() as u64 - 1);
    let cache_before = counters.blocks_read_from_cache.load(Relaxed);
    scan_forward(&table, ReadContext::default()).expect("scan");
    assert_eq!(
        counters.blocks_read_from_disk.load(Relaxed) - before,
        scanned
    );
    assert_eq!(
        counters.blocks_read_from_cache.load(Relaxed) - cache_before,
        table.block_count() as u64
    );

    // fill_cache off: reads do not populate the cache.
    let cold = Arc::new(BlockCache::new(1 << 20));
    let table = Table::open(
        MemReader::open(bytes.clone(), &table_path()),
        8,
        Some(Arc::clone(&cold)),
        Arc::new(EngineCounters::default()),
    )
    .expect("open");
    let no_fill = ReadContext {
        fill_cache: false,
        ..ReadContext::default()
    };
    scan_forward(&table, no_fill).expect("scan");
    assert_eq!(cold.used_bytes(), 0);
    assert_eq!(cold.blocks(), 0);

    // Capacity 0: every read goes to the file.
    let none = Arc::new(BlockCache::new(0));
    let counters = Arc::new(EngineCounters::default());
    let table = Table::open(
        MemReader::open(bytes, &table_path()),
        9,
        Some(Arc::clone(&none)),
        Arc::clone(&counters),
    )
    .expect("open");
    for _ in 0..3 {
        assert!(table
            .get(&key, &ReadContext::default())
            .expect("get")
            .is_some());
    }
    assert_eq!(counters.blocks_read_from_disk.load(Relaxed), 3);
    assert_eq!(counters.blocks_read_from_cache.load(Relaxed), 0);
    assert_eq!(none.used_bytes(), 0);
}

fn assert_corruption_names_file(error: &Error, context: &str) {
    match error {
        Error::Corruption { file, .. } => {
            assert_eq!(file, Path::new("/mem/000007.sst"), "{context}");
        }
        other => panic!("{context}: expected corruption, got {other}"),
    }
}

#[test]
fn every_flipped_byte_is_detected_and_never_returns_wrong_data() {
    let seed = rand::random::<u64>();
    eprintln!("seed {seed}");
    let mut rng = StdRng::seed_from_u64(seed);
    let model = numbered_model(&mut rng, 400);
    for compression in COMPRESSIONS {
        let finished = Arc::new(Mutex::new(Vec::new()));
        let config = BuildConfig {
            block_bytes: 256,
            compression,
            ..BuildConfig::default()
        };
        let pristine = build(&model, &config, collectors(&finished)).0;
        for _ in 0..300 {
            let position = rng.gen_range(0..pristine.len());
            let mut bytes = pristine.clone();
            bytes[position] ^= rng.gen_range(1..=255u8);
            let context = format!(
                "seed {seed}, {compression:?}, byte {position} of {}",
                pristine.len()
            );
            let table = match open(bytes, None) {
                Err(e) => {
                    assert_corruption_names_file(&e, &context);
                    continue;
                }
                Ok(table) => table,
            };
            // Every byte is covered by a checksum: the damage must show up when reading.
            let mut detected = false;
            for (i, (key, value)) in model.iter().enumerate().step_by(13) {
                let seek_key = make_seek_key(user_key(key), crate::key::SEQ_MAX);
                match table.get(&seek_key, &ReadContext::default()) {
                    Ok(found) => assert_eq!(
                        found,
                        Some((key.clone(), value.clone())),
                        "{context}, key {i}"
                    ),
                    Err(e) => {
                        assert_corruption_names_file(&e, &context);
                        detected = true;
                    }
                }
            }
            for scan in [scan_forward, scan_backward] {
                match scan(&table, ReadContext::default()) {
                    Ok(entries) => assert_eq!(entries, model, "{context}"),
                    Err(e) => {
                        assert_corruption_names_file(&e, &context);
                        detected = true;
                    }
                }
            }
            for meta in ["stats", "big"] {
                match table.meta_block("minmax", meta) {
                    Ok(found) => assert!(found.is_some(), "{context}"),
                    Err(e) => {
                        assert_corruption_names_file(&e, &context);
                        detected = true;
                    }
                }
            }
            assert!(detected, "{context}: a flipped byte went unnoticed");
        }
    }
}

#[test]
fn truncated_files_and_bad_footers_are_corruption() {
    let mut rng = StdRng::seed_from_u64(5);
    let model = random_model(&mut rng, 300);
    let pristine = build(&model, &BuildConfig::default(), Vec::new()).0;
    for len in [0, 1, 47, 48, 100, pristine.len() / 2, pristine.len() - 1] {
        let error = open(pristine[..len].to_vec(), None)
            .err()
            .expect("truncated table fails");
        assert_corruption_names_file(&error, &format!("truncated to {len}"));
        let unopened = MemReader::open(pristine[..len].to_vec(), &table_path());
        let error = crate::sstable::read_meta_block_unopened(&*unopened, "any", "block")
            .expect_err("truncated table fails unopened too");
        assert_corruption_names_file(&error, &format!("truncated to {len}, unopened"));
    }
    let footer_offset = pristine.len() - FOOTER_BYTES;
    let footer = Footer::decode(&pristine[footer_offset..], &table_path(), 0).expect("footer");

    let mut bad_magic = pristine.clone();
    *bad_magic.last_mut().expect("non-empty") ^= 1;
    let error = open(bad_magic, None).err().expect("bad magic fails");
    assert!(error.to_string().contains("magic"), "{error}");

    // A future version with a valid footer checksum is refused by version, not checksum.
    let mut future = pristine.clone();
    let newer = Footer {
        format_version: FORMAT_VERSION + 1,
        ..footer
    };
    future[footer_offset..].copy_from_slice(&newer.encode());
    let error = open(future, None).err().expect("unknown version fails");
    assert!(error.to_string().contains("version"), "{error}");
    assert_corruption_names_file(&error, "version");

    // A handle pointing past the block area is caught before reading.
    let mut past_end = pristine.clone();
    let far = Footer {
        index: BlockHandle {
            offset: footer_offset as u64,
            size: 1 << 40,
        },
        ..footer
    };
    past_end[footer_offset..].copy_from_slice(&far.encode());
    let error = open(past_end, None).err().expect("handle past end fails");
    assert!(error.to_string().contains("past the end"), "{error}");
}

#[test]
fn table_is_send_and_sync_and_iterators_are_send() {
    fn assert_send_sync<T: Send + Sync>() {}
    fn assert_send<T: Send>() {}
    assert_send_sync::<Table>();
    assert_send_sync::<BlockCache>();
    assert_send::<TableIterator>();
}

#[test]
fn concurrent_gets_share_the_cache() {
    let mut rng = StdRng::seed_from_u64(8);
    let model = random_model(&mut rng, 1000);
    let bytes = build(&model, &BuildConfig::default(), Vec::new()).0;
    let cache = Arc::new(BlockCache::new(64 << 10));
    let table = Table::open(
        MemReader::open(bytes, &table_path()),
        7,
        Some(cache),
        Arc::new(EngineCounters::default()),
    )
    .expect("open");
    let model = Arc::new(model);
    let threads: Vec<_> = (0..4u64)
        .map(|t| {
            let (table, model) = (Arc::clone(&table), Arc::clone(&model));
            std::thread::spawn(move || {
                let mut rng = StdRng::seed_from_u64(t);
                for _ in 0..2000 {
                    let (key, _) = &model[rng.gen_range(0..model.len())];
                    let seek_key = make_seek_key(user_key(key), crate::key::SEQ_MAX);
                    let got = table.get(&seek_key, &ReadContext::default()).expect("get");
                    assert_eq!(got, model_get(&model, &seek_key));
                }
            })
        })
        .collect();
    for thread in threads {
        thread.join().expect("reader thread");
    }
}

#[test]
fn one_entry_table_has_the_documented_bytes() {
    let key = make_internal_key(b"k", 1, ValueKind::Put);
    let config = BuildConfig {
        bloom_bits_per_key: 0,
        ..BuildConfig::default()
    };
    let (bytes, _, _) = build(&vec![(key.clone(), b"v".to_vec())], &config, Vec::new());
    // Data block: shared 0, unshared 9, value_len 1, key, value, restart[0] = 0, count = 1.
    let mut block = vec![0, 9, 1];
    block.extend_from_slice(&key);
    block.push(b'v');
    block.extend_from_slice(&0u32.to_le_bytes());
    block.extend_from_slice(&1u32.to_le_bytes());
    assert_eq!(&bytes[..block.len()], block.as_slice());
    // Trailer: type 0 then masked CRC32C of block bytes + type byte.
    let crc = crate::coding::mask_crc(crc32c::crc32c_append(crc32c::crc32c(&block), &[0]));
    assert_eq!(bytes[block.len()], 0);
    assert_eq!(&bytes[block.len() + 1..block.len() + 5], &crc.to_le_bytes());
    // Footer: magic last, version before the footer checksum.
    let footer = &bytes[bytes.len() - FOOTER_BYTES..];
    assert_eq!(&footer[40..], b"SIFTSST1");
    assert_eq!(&footer[32..36], &FORMAT_VERSION.to_le_bytes());
    let footer_crc = crate::coding::mask_crc(crc32c::crc32c(&footer[..36]));
    assert_eq!(&footer[36..40], &footer_crc.to_le_bytes());
    let table = open(bytes, None).expect("open");
    assert_eq!(
        table.block_handle(0),
        Some(BlockHandle {
            offset: 0,
            size: block.len() as u64
        })
    );
    assert!(table.may_contain_user_key(b"anything"), "no filter written");
}

#[test]
fn garbage_blocks_error_or_decode_without_panicking() {
    use super::block::{Block, BlockBuilder, BlockIter};
    let seed = rand::random::<u64>();
    eprintln!("seed {seed}");
    let mut rng = StdRng::seed_from_u64(seed);
    for round in 0..3000 {
        // Half pure noise, half a real block with a few damaged bytes.
        let data: Vec<u8> = if round % 2 == 0 {
            (0..rng.gen_range(0..200)).map(|_| rng.gen()).collect()
        } else {
            let mut builder = BlockBuilder::new(rng.gen_range(1..5));
            for i in 0..rng.gen_range(0..20u32) {
                builder.add(
                    &make_internal_key(format!("key{i:04}").as_bytes(), 1, ValueKind::Put),
                    b"value",
                );
            }
            let mut data = builder.finish().to_vec();
            for _ in 0..rng.gen_range(1..4) {
                let at = rng.gen_range(0..data.len());
                data[at] = rng.gen();
            }
            data
        };
        let Ok(block) = Block::new(data) else {
            continue;
        };
        let block = Arc::new(block);
        let mut iter = BlockIter::new(Arc::clone(&block));
        let mut steps = 0;
        if iter.seek_to_first().is_ok() {
            while iter.valid() && iter.next().is_ok() {
                steps += 1;
                assert!(steps < 10_000, "seed {seed}: forward walk does not end");
            }
        }
        if iter.seek_to_last().is_ok() {
            while iter.valid() && iter.prev().is_ok() {
                steps += 1;
                assert!(steps < 20_000, "seed {seed}: backward walk does not end");
            }
        }
        let target = make_seek_key(format!("key{:04}", rng.gen_range(0..25)).as_bytes(), 5);
        let _ = iter.seek(&target);
        let _ = block.entries();
    }
}

/// Where the table builder said each entry starts: (internal key, block, offset).
type SeenOffsets = Arc<Mutex<Vec<(Vec<u8>, u32, Option<u32>)>>>;

struct OffsetCollector {
    block: u32,
    seen: SeenOffsets,
}

impl BlockPropertyCollector for OffsetCollector {
    fn add(&mut self, entry: &CollectorEntry<'_>) {
        let key = make_internal_key(entry.user_key, entry.seq, entry.kind);
        self.seen.lock().push((key, self.block, entry.block_offset));
    }
    fn finish_block(&mut self, block: &FinishedBlock) -> Vec<u8> {
        self.block = block.ordinal + 1;
        Vec::new()
    }
    fn finish_table(&mut self) -> TableCollectorOutput {
        TableCollectorOutput::default()
    }
}

/// A table of `model` with `compression`, and where its builder told a collector each entry
/// starts.
fn build_recording_offsets(model: &Entries, compression: Compression) -> (Vec<u8>, SeenOffsets) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let collector = OffsetCollector {
        block: 0,
        seen: Arc::clone(&seen),
    };
    let config = BuildConfig {
        compression,
        ..BuildConfig::default()
    };
    let (bytes, _, _) = build(
        model,
        &config,
        vec![("offsets".to_owned(), Box::new(collector))],
    );
    (bytes, seen)
}

/// `mapped_entry_value` finds every put exactly where the builder told collectors it starts,
/// and nothing for a key of another length, a compressed block or a file that is not
/// memory-mapped.
#[test]
fn mapped_entry_value_reads_entries_at_their_collector_offsets() {
    let seed = 0x5eed_0ff5;
    let mut rng = StdRng::seed_from_u64(seed);
    for compression in [Compression::None, Compression::Snappy] {
        let model = random_model(&mut rng, 300);
        let (bytes, seen) = build_recording_offsets(&model, compression);
        let mapped = Table::open(
            Arc::new(super::test_util::MappedMemReader(MemReader {
                bytes: bytes.clone(),
                path: table_path(),
            })),
            7,
            None,
            Arc::new(EngineCounters::default()),
        )
        .expect("open mapped");
        let unmapped = open(bytes, None).expect("open");
        let seen = seen.lock();
        assert_eq!(seen.len(), model.len(), "seed {seed:#x}");
        let mut found = 0;
        for ((key, value), (seen_key, block, offset)) in model.iter().zip(seen.iter()) {
            assert_eq!(key, seen_key);
            let offset = offset.expect("the builder knows every offset") as usize;
            let parsed = crate::key::parse_internal_key(key).expect("model key");
            let (block, user, seq) = (*block as usize, parsed.user_key, parsed.seq);
            let got = mapped.mapped_entry_value(block, offset, user, seq);
            // Compressed blocks are not used in place (a compressible block may still have
            // been stored raw, when compression did not pay). Non-puts are not asked for: a
            // kind byte shared with the previous version's key is not checked (callers check
            // the value).
            if parsed.kind == ValueKind::Put {
                match got {
                    Some(got) => {
                        found += 1;
                        assert_eq!(got, value.as_slice(), "seed {seed:#x}");
                    }
                    None => assert!(
                        compression != Compression::None,
                        "seed {seed:#x}: a put of an uncompressed block not found in place"
                    ),
                }
            }
            // A key of another length never matches (the stored part of the key is only
            // checked as far as the entry stores it: callers check values themselves).
            let longer = [user, b"zz"].concat();
            assert_eq!(mapped.mapped_entry_value(block, offset, &longer, seq), None);
            assert_eq!(unmapped.mapped_entry_value(block, offset, user, seq), None);
        }
        if compression == Compression::None {
            assert!(found > 0, "seed {seed:#x}");
        }
    }
}

/// `visit_block_entries` gives every entry, in table order, with the offset the builder told
/// collectors, compressed blocks included (offsets are into the uncompressed block).
#[test]
fn visit_block_entries_gives_the_collector_offsets() {
    let seed = 0x0ff5_e075;
    let mut rng = StdRng::seed_from_u64(seed);
    for compression in [Compression::None, Compression::Snappy] {
        let model = random_model(&mut rng, 300);
        let (bytes, seen) = build_recording_offsets(&model, compression);
        let table = open(bytes, None).expect("open");
        let mut visited = Vec::new();
        for ordinal in 0..table.block_count() {
            table
                .visit_block_entries(
                    ordinal,
                    &ReadContext::default(),
                    |key: &[u8], value: &[u8], at| {
                        let block = u32::try_from(ordinal).expect("small table");
                        let offset = u32::try_from(at).ok();
                        visited.push(((key.to_vec(), block, offset), value.to_vec()));
                        Ok(())
                    },
                )
                .expect("visit");
        }
        let seen = seen.lock();
        assert!(table.block_count() > 1, "seed {seed:#x}: several blocks");
        assert_eq!(visited.len(), model.len(), "seed {seed:#x}");
        for (((visit, value), seen), (key, model_value)) in
            visited.iter().zip(seen.iter()).zip(model.iter())
        {
            assert_eq!(visit, seen, "seed {seed:#x} {compression:?}");
            assert_eq!(&visit.0, key, "seed {seed:#x}");
            assert_eq!(value, model_value, "seed {seed:#x}");
        }
    }
}

/// A builder paces its entries (`crate::pacing`) when the thread that made it paces, and only
/// then.
#[test]
fn a_builder_pauses_only_when_made_on_a_paced_thread() {
    use std::time::{Duration, Instant};
    std::thread::spawn(|| {
        let options = || TableBuilderOptions {
            block_bytes: 4096,
            block_restart_interval: 16,
            bloom_bits_per_key: 0,
            compression: Compression::None,
            collectors: Vec::new(),
        };
        let mut key_number = 0u64;
        let mut add = |builder: &mut TableBuilder| {
            let key = make_internal_key(format!("{key_number:016}").as_bytes(), 1, ValueKind::Put);
            key_number += 1;
            builder.add(&key, b"value").expect("add to memory file");
        };
        let unpaced_file = MemFile::default();
        let mut unpaced = TableBuilder::new(
            unpaced_file.writer(),
            PathBuf::from("/mem/000001.sst"),
            options(),
        );
        let start = Instant::now();
        while start.elapsed() < crate::pacing::BURST * 4 {
            add(&mut unpaced);
        }
        assert_eq!(
            crate::pacing::pauses_of_current_thread(),
            0,
            "a builder made on a thread that does not pace paused"
        );
        crate::pacing::enable_for_current_thread();
        let paced_file = MemFile::default();
        let mut paced = TableBuilder::new(
            paced_file.writer(),
            PathBuf::from("/mem/000002.sst"),
            options(),
        );
        let deadline = Instant::now() + Duration::from_secs(10);
        while crate::pacing::pauses_of_current_thread() == 0 && Instant::now() < deadline {
            add(&mut paced);
        }
        assert!(
            crate::pacing::pauses_of_current_thread() > 0,
            "a builder made on a paced thread never paused"
        );
    })
    .join()
    .expect("building thread");
}
