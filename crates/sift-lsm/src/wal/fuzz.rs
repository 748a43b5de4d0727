//! Fuzz targets for what recovery decodes from a write-ahead log (the `sift-fuzz` crate says how
//! they run): the record framing (`LogReader`, both recovery modes), control records, and the
//! write batches records carry. Each returns records or `Error::Corruption` naming the log,
//! never a panic or a loop.

use super::{ControlRecord, LogReader, LogWriter};
use crate::sstable::test_util::MemFile;
use crate::write_batch::WriteBatch;
use crate::{Error, WalRecovery};
use proptest::prelude::*;
use sift_fuzz::{config, input};
use std::path::{Path, PathBuf};

fn log_path() -> PathBuf {
    PathBuf::from("/fuzz/000004.log")
}

fn assert_names_file(error: &Error, path: &Path) {
    match error {
        Error::Corruption { file, .. } => assert_eq!(file, path, "{error}"),
        other => panic!("expected a corruption error naming {path:?}, got {other}"),
    }
}

fn batch(entries: usize) -> WriteBatch {
    let mut batch = WriteBatch::new();
    for i in 0..entries {
        let key = format!("key{i}");
        match i % 3 {
            0 => batch.put_in(0, key.as_bytes(), &[b'v'; 40]),
            1 => batch.delete_in(1, key.as_bytes()),
            _ => batch.merge_in(2, key.as_bytes(), b"operand"),
        }
    }
    batch
}

fn log_corpus() -> Vec<Vec<u8>> {
    let file = MemFile::default();
    let mut writer = LogWriter::new(file.writer(), log_path());
    writer
        .add_record(
            &ControlRecord::PreviousLog {
                number: 3,
                bytes: 4096,
            }
            .encode(),
        )
        .expect("write to a memory file");
    for entries in [1, 7, 400] {
        // 400 entries span several 32 KiB log blocks: first, middle and last fragments.
        writer
            .add_record(batch(entries).encoded())
            .expect("write to a memory file");
    }
    writer.flush().expect("flush a memory file");
    vec![file.contents()]
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn fuzz_log_records(bytes in input(log_corpus(), 4096)) {
        for recovery in [WalRecovery::TolerateTornTail, WalRecovery::SalvageCorrupted] {
            let limit = bytes.len() + 1;
            let mut reader = LogReader::new(bytes.clone(), log_path(), recovery);
            let mut records = 0;
            loop {
                match reader.read_record() {
                    Ok(Some((offset, payload))) => {
                        records += 1;
                        prop_assert!(records <= limit, "the reader does not end");
                        prop_assert!((offset as usize) < bytes.len());
                        match ControlRecord::decode(&payload, &log_path(), offset) {
                            Ok(Some(_)) => {}
                            Ok(None) => {
                                if let Ok(batch) = WriteBatch::decode(&payload, &log_path(), offset) {
                                    prop_assert!(batch.iter().count() <= payload.len());
                                }
                            }
                            Err(error) => assert_names_file(&error, &log_path()),
                        }
                    }
                    Ok(None) => break,
                    Err(error) => {
                        assert_names_file(&error, &log_path());
                        break;
                    }
                }
            }
        }
    }

    #[test]
    fn fuzz_write_batch(bytes in input(vec![batch(0).encoded().to_vec(), batch(5).encoded().to_vec()], 512)) {
        match WriteBatch::decode(&bytes, &log_path(), 0) {
            Ok(batch) => prop_assert!(batch.iter().count() <= bytes.len()),
            Err(error) => assert_names_file(&error, &log_path()),
        }
    }

    #[test]
    fn fuzz_control_record(bytes in input(
        vec![
            ControlRecord::PreviousLog { number: 7, bytes: 99 }.encode().to_vec(),
            ControlRecord::LogSynced { number: 8, bytes: 1 << 40 }.encode().to_vec(),
        ],
        64,
    )) {
        if let Err(error) = ControlRecord::decode(&bytes, &log_path(), 0) {
            assert_names_file(&error, &log_path());
        }
    }
}
