//! Fuzz targets for every decoder of bytes that come from disk or from users (the `sift-fuzz`
//! crate says how they run): attribute values and keys, posting lists, the document envelope,
//! the write-time JSON parser, secondary index blocks and directories, embedded-index
//! properties, memory-index snapshots and catalog records. Each returns its value or an error,
//! never panics; what decodes re-encodes to the same value.

#![allow(clippy::expect_used)]

use crate::catalog::{
    decode_record, encode_record, IndexKind, IndexRecord, IndexState, Maintenance,
};
use crate::deferred::{deferred_key, split_deferred_key};
use crate::document::{DocumentParser, IndexedAttribute};
use crate::embedded::collector::{block_seq_max, find_attr};
use crate::encoding::{
    decode_pk, decode_value, encode_pk, encode_value_to_vec, split_composite_key,
};
use crate::envelope::EnvelopeRef;
use crate::error::IndexError;
use crate::memory::snapshot::{encode_snapshot, load_snapshot};
use crate::memory::MemoryIndex;
use crate::next::format::{
    decode_directory, decode_secondary_block, encode_directory, encode_secondary_block,
    visit_secondary_from, DirectoryEntry, SecondaryEntryRef,
};
use crate::path::AttrPath;
use crate::postings::{decode_postings, encode_postings, Posting};
use crate::value::{AttrType, AttrValue};
use proptest::prelude::*;
use sift_fuzz::{config, input};
use std::path::Path;

fn sample_values() -> Vec<AttrValue> {
    vec![
        AttrValue::Int(-42),
        AttrValue::Int(i64::MAX),
        AttrValue::float(2.5).unwrap_or(AttrValue::Int(0)),
        AttrValue::String("caf\u{e9}\u{0}zero".to_string()),
        AttrValue::Time(1_600_000_000_000),
        AttrValue::geo(-122.4, 37.8).unwrap_or(AttrValue::Int(0)),
    ]
}

fn value_corpus() -> Vec<Vec<u8>> {
    sample_values()
        .iter()
        .map(|value| {
            let mut key = encode_value_to_vec(value);
            encode_pk(b"user:17", &mut key);
            key
        })
        .collect()
}

fn record(kind: IndexKind, attr_type: AttrType) -> IndexRecord {
    IndexRecord {
        name: "by_n".into(),
        collection: "docs".into(),
        id: 9,
        path: "n".into(),
        attr_type,
        kind,
        maintenance: Maintenance::SyncFull,
        read_repair: false,
        state: IndexState::Ready,
        attr_id: 9,
        first_seq: 0,
        tree: Some("sift.c1.i9".into()),
        split_delta: None,
        validation: None,
        bloom_bits_per_key: None,
        unique: false,
        key_prefixes: Vec::new(),
        conversion: crate::ValueConversion::Json,
    }
}

fn parser() -> DocumentParser {
    let attributes = [
        ("n", AttrType::Int),
        ("x", AttrType::Float),
        ("name", AttrType::String),
        ("at", AttrType::Time),
        ("loc", AttrType::Geo),
        ("user.id", AttrType::Int),
    ]
    .into_iter()
    .enumerate()
    .map(|(i, (path, attr_type))| {
        IndexedAttribute::new(
            i as u32 + 1,
            AttrPath::parse(path).expect("a valid path"),
            attr_type,
        )
    })
    .collect();
    DocumentParser::new(AttrPath::parse("id").expect("a valid path"), attributes)
        .expect("a valid parser")
}

fn document_corpus() -> Vec<Vec<u8>> {
    [
        r#"{"id": 1, "n": 5, "x": 0.5, "name": "a", "at": "2020-01-01T00:00:00Z", "loc": [1.5, -2], "user": {"id": 3}}"#,
        r#"{"id": "k", "n": -9223372036854775808, "name": "\u00e9\"\\", "at": 1600000000000}"#,
        r#"{"id": 2, "loc": [180, 90], "extra": [1, {"deep": [null, true]}]}"#,
    ]
    .into_iter()
    .map(|text| text.as_bytes().to_vec())
    .collect()
}

fn secondary_corpus() -> Vec<Vec<u8>> {
    let values: Vec<Vec<u8>> = (0..20)
        .map(|i| encode_value_to_vec(&AttrValue::Int(i / 3)))
        .collect();
    let pks: Vec<Vec<u8>> = (0..20).map(|i| format!("pk{i}").into_bytes()).collect();
    let refs = |checksummed: bool| {
        values
            .iter()
            .zip(&pks)
            .enumerate()
            .map(move |(i, (value, pk))| SecondaryEntryRef {
                value,
                pk,
                seq: 100 - i as u64,
                next_newer_seq: 0,
                data_block: i as u32 / 4,
                value_checksum: checksummed.then_some(i as u32 * 7),
                entry_offset: checksummed.then_some(i as u32 * 30),
            })
            .collect::<Vec<_>>()
    };
    let checksummed = refs(true);
    let plain = refs(false);
    let directory = encode_directory(
        3,
        &[DirectoryEntry {
            min: values[0].clone(),
            max: values[19].clone(),
            entries: 20,
            seq_max: 100,
            rect: None,
        }],
        false,
    );
    vec![
        encode_secondary_block(3, checksummed.into_iter()),
        encode_secondary_block(3, plain.into_iter()),
        directory,
    ]
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn fuzz_value_and_key_decoders(bytes in input(value_corpus(), 96)) {
        for attr_type in AttrType::ALL {
            if let Ok((value, used)) = decode_value(&bytes, attr_type) {
                prop_assert!(used <= bytes.len());
                let again = decode_value(&encode_value_to_vec(&value), attr_type).ok();
                prop_assert_eq!(again.map(|(v, _)| v), Some(value));
            }
            if let Ok((_, pk)) = split_composite_key(&bytes, attr_type) {
                prop_assert!(pk.len() <= bytes.len());
            }
            if let Ok((value_bytes, seq, pk)) = split_deferred_key(&bytes, attr_type) {
                prop_assert_eq!(deferred_key(&bytes[..value_bytes], seq, &pk), bytes.clone());
            }
        }
        if let Ok((pk, used)) = decode_pk(&bytes) {
            let mut again = Vec::new();
            encode_pk(&pk, &mut again);
            prop_assert_eq!(&again[..], &bytes[..used]);
        }
    }

    #[test]
    fn fuzz_postings(bytes in input(
        vec![encode_postings(&[Posting::add(b"a", 9), Posting::remove(b"bb", 3), Posting::add(&[0; 40], 1)])],
        256,
    )) {
        if let Ok(list) = decode_postings(&bytes) {
            prop_assert_eq!(decode_postings(&encode_postings(&list)).ok(), Some(list));
        }
    }

    #[test]
    fn fuzz_envelope_and_document_parser(bytes in input(document_corpus(), 512)) {
        if let Ok(envelope) = EnvelopeRef::decode(&bytes) {
            prop_assert!(envelope.doc_offset() <= bytes.len());
            for id in 0..8 {
                let _ = envelope.attr_encoded(id);
            }
        }
        if let Ok((pk, stored)) = parser().parse_stored(&bytes) {
            prop_assert!(!pk.is_empty());
            let envelope = EnvelopeRef::decode(&stored);
            prop_assert!(envelope.is_ok(), "the parser wrote an envelope that does not decode");
            if let Ok(envelope) = envelope {
                prop_assert_eq!(envelope.doc(), &bytes[..]);
            }
        }
    }

    #[test]
    fn fuzz_secondary_blocks(bytes in input(secondary_corpus(), 1024)) {
        for attr_id in [3, 4] {
            if let Ok(entries) = decode_secondary_block(&bytes, attr_id) {
                prop_assert!(entries.len() <= bytes.len());
            }
            let mut visited = 0usize;
            let _ = visit_secondary_from(&bytes, attr_id, &encode_value_to_vec(&AttrValue::Int(2)), &mut |_| {
                visited += 1;
                visited <= bytes.len()
            });
            prop_assert!(visited <= bytes.len() + 1, "a visit does not end");
            for geo in [false, true] {
                if let Ok(blocks) = decode_directory(&bytes, attr_id, geo) {
                    prop_assert!(blocks.len() <= bytes.len());
                }
            }
        }
    }

    #[test]
    fn fuzz_embedded_properties(bytes in input(vec![vec![1, 0, 0, 0, 0, 0, 0, 0, 0, 9]], 256)) {
        let _ = block_seq_max(&bytes);
        for block in [false, true] {
            for attr_id in [0, 1, 9] {
                let _ = find_attr(&bytes, block, attr_id);
            }
        }
    }

    #[test]
    fn fuzz_memory_snapshot(bytes in input(
        {
            let memory = MemoryIndex::default();
            memory.set(b"pk1", Some((&encode_value_to_vec(&AttrValue::Int(5)), 7)));
            memory.set(b"pk2", Some((&encode_value_to_vec(&AttrValue::Int(-1)), 8)));
            vec![encode_snapshot(&record(IndexKind::Memory, AttrType::Int), &memory, 8)]
        },
        512,
    )) {
        let memory = MemoryIndex::default();
        let loaded = load_snapshot(
            Path::new("/fuzz/memory-9.snapshot"),
            &bytes,
            &record(IndexKind::Memory, AttrType::Int),
            8,
            &memory,
        );
        if loaded.is_err() {
            prop_assert_eq!(memory.memory_bytes(), MemoryIndex::default().memory_bytes());
        }
    }

    #[test]
    fn fuzz_catalog_records(bytes in input(
        vec![encode_record(&record(IndexKind::Next, AttrType::Geo)).unwrap_or_default()],
        512,
    )) {
        match decode_record::<IndexRecord>(b"index/docs/by_n", &bytes) {
            Ok(_) | Err(IndexError::CorruptCatalog { .. }) => {}
            Err(other) => prop_assert!(false, "expected a corrupt-catalog error, got {}", other),
        }
    }
}

/// The valid corpora decode: the damaged inputs start from encodings that reach every decoder's
/// end, not from bytes the first check rejects.
#[test]
fn every_corpus_entry_decodes() {
    for document in document_corpus() {
        let (_, stored) = parser()
            .parse_stored(&document)
            .expect("a corpus document parses");
        EnvelopeRef::decode(&stored).expect("its envelope decodes");
    }
    let corpus = secondary_corpus();
    assert_eq!(
        decode_secondary_block(&corpus[0], 3)
            .expect("checksummed block")
            .len(),
        20
    );
    assert_eq!(
        decode_secondary_block(&corpus[1], 3)
            .expect("plain block")
            .len(),
        20
    );
    assert_eq!(
        decode_directory(&corpus[2], 3, false)
            .expect("directory")
            .len(),
        1
    );
    for key in value_corpus() {
        assert!(AttrType::ALL
            .into_iter()
            .any(|attr_type| split_composite_key(&key, attr_type).is_ok()));
    }
}
