//! Fuzz targets for the table decoders (the `sift-fuzz` crate says how they run): a data or index
//! block, a block handle, the footer, the properties block, a bloom filter, and a whole table
//! damaged on disk. Each must return its value or an error — a `BlockCorruption`, or
//! `Error::Corruption` naming the file — and never panic or loop.

use super::block::{Block, BlockBuilder, BlockIter};
use super::bloom::{BloomBuilder, BloomFilter};
use super::format::{Footer, FORMAT_VERSION};
use super::test_util::{MemFile, MemReader};
use super::BlockHandle;
use super::{ReadContext, Table, TableBuilder, TableBuilderOptions, TableProperties};
use crate::coding::Decoder;
use crate::iterator::InternalIterator;
use crate::key::{make_internal_key, ValueKind};
use crate::options::Compression;
use crate::stats::EngineCounters;
use crate::Error;
use proptest::prelude::*;
use sift_fuzz::{config, input};
use std::path::{Path, PathBuf};
use std::sync::Arc;

fn table_path() -> PathBuf {
    PathBuf::from("/fuzz/000009.sst")
}

/// A decoder error on disk must name the file it read.
fn assert_names_file(error: &Error, path: &Path) {
    match error {
        Error::Corruption { file, .. } => assert_eq!(file, path, "{error}"),
        other => panic!("expected a corruption error naming {path:?}, got {other}"),
    }
}

fn internal_key(i: usize, seq: u64) -> Vec<u8> {
    make_internal_key(format!("key{i:05}").as_bytes(), seq, ValueKind::Put)
}

fn block_corpus() -> Vec<Vec<u8>> {
    [1usize, 4, 16]
        .into_iter()
        .map(|restart_interval| {
            let mut builder = BlockBuilder::new(restart_interval);
            for i in 0..40 {
                builder.add(
                    &internal_key(i, 100 - i as u64),
                    format!("value{i}").as_bytes(),
                );
            }
            builder.finish().to_vec()
        })
        .collect()
}

/// Walks a block every way a reader does, bounded so that a loop is a failure, not a hang.
fn walk_block(bytes: Vec<u8>) {
    let limit = bytes.len() + 2;
    let Ok(block) = Block::new(bytes) else {
        return;
    };
    let block = Arc::new(block);
    let _ = block.entries();
    let mut iter = BlockIter::new(Arc::clone(&block));
    let mut steps = 0;
    if iter.seek_to_first().is_ok() {
        while iter.valid() {
            let _ = (iter.key(), iter.value());
            steps += 1;
            assert!(steps <= limit, "forward scan does not end");
            if iter.next().is_err() {
                break;
            }
        }
    }
    steps = 0;
    if iter.seek_to_last().is_ok() {
        while iter.valid() {
            steps += 1;
            assert!(steps <= limit, "backward scan does not end");
            if iter.prev().is_err() {
                break;
            }
        }
    }
    for target in [
        internal_key(0, 200),
        internal_key(20, 50),
        b"zzzz".to_vec(),
        Vec::new(),
    ] {
        let _ = iter.seek(&target);
    }
}

fn table_corpus() -> Vec<Vec<u8>> {
    [Compression::None, Compression::Snappy]
        .into_iter()
        .map(|compression| {
            let file = MemFile::default();
            let options = TableBuilderOptions {
                block_bytes: 256,
                block_restart_interval: 4,
                bloom_bits_per_key: 10,
                compression,
                collectors: Vec::new(),
            };
            let mut builder = TableBuilder::new(file.writer(), table_path(), options);
            for i in 0..60 {
                builder
                    .add(&internal_key(i, 1000 - i as u64), &[b'v'; 20])
                    .expect("add to a memory file");
            }
            builder.finish().expect("finish a memory file");
            file.contents()
        })
        .collect()
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn fuzz_block(bytes in input(block_corpus(), 1024)) {
        walk_block(bytes);
    }

    #[test]
    fn fuzz_block_handle(bytes in input(vec![vec![0x80, 0x01, 0x10], vec![0xFF; 12]], 32)) {
        let mut decoder = Decoder::new(&bytes);
        let mut handles = 0;
        while let Some(handle) = BlockHandle::decode_from(&mut decoder) {
            let _ = handle.end_with_trailer();
            handles += 1;
            prop_assert!(handles <= bytes.len(), "a handle decoded from no bytes");
        }
    }

    #[test]
    fn fuzz_footer(bytes in input(
        vec![Footer {
            metaindex: BlockHandle { offset: 1000, size: 50 },
            index: BlockHandle { offset: 1055, size: 300 },
            format_version: FORMAT_VERSION,
        }
        .encode()
        .to_vec()],
        96,
    )) {
        if let Err(error) = Footer::decode(&bytes, &table_path(), 0) {
            assert_names_file(&error, &table_path());
        }
    }

    #[test]
    fn fuzz_properties(bytes in input(vec![TableProperties::default().encode()], 512)) {
        if let Ok(block) = Block::new(bytes) {
            if let Ok(entries) = Arc::new(block).entries() {
                let _ = TableProperties::decode(&entries);
            }
        }
    }

    #[test]
    fn fuzz_bloom(bytes in input(
        vec![{
            let mut builder = BloomBuilder::new(10);
            for i in 0..50 {
                builder.add_key(format!("key{i:05}").as_bytes());
            }
            builder.finish()
        }],
        512,
    )) {
        if let Some(filter) = BloomFilter::decode(bytes) {
            for i in 0..8 {
                let _ = filter.may_contain(format!("key{i:05}").as_bytes());
            }
        }
    }

    #[test]
    fn fuzz_table(bytes in input(table_corpus(), 256)) {
        let path = table_path();
        let opened = Table::open(
            MemReader::open(bytes, &path),
            9,
            None,
            Arc::new(EngineCounters::default()),
        );
        let table = match opened {
            Ok(table) => table,
            Err(error) => {
                assert_names_file(&error, &path);
                return Ok(());
            }
        };
        let context = ReadContext::from_read_options(&crate::ReadOptions::default());
        let mut iter = table.iter(context.clone());
        let mut steps = 0;
        match iter.seek_to_first() {
            Ok(()) => {
                while iter.valid() {
                    steps += 1;
                    prop_assert!(steps <= 10_000, "table scan does not end");
                    if let Err(error) = iter.next() {
                        assert_names_file(&error, &path);
                        break;
                    }
                }
            }
            Err(error) => assert_names_file(&error, &path),
        }
        if let Err(error) = table.get(&internal_key(30, u64::MAX >> 8), &context) {
            assert_names_file(&error, &path);
        }
    }
}

/// The valid corpora decode, so that damaged inputs start past every decoder's first check.
#[test]
fn every_corpus_entry_decodes() {
    for bytes in block_corpus() {
        let block = Arc::new(Block::new(bytes).expect("a corpus block decodes"));
        assert_eq!(block.entries().expect("its entries decode").len(), 40);
    }
    for bytes in table_corpus() {
        let path = table_path();
        let table = Table::open(
            MemReader::open(bytes, &path),
            9,
            None,
            Arc::new(EngineCounters::default()),
        )
        .expect("a corpus table opens");
        assert!(
            table.block_count() > 1,
            "the corpus table spans several blocks"
        );
    }
}
