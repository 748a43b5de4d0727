//! Fuzz target for the manifest's version edits (the `sift-fuzz` crate says how it runs): an edit
//! decodes to its value or to `Error::Corruption` naming the manifest, never a panic; an edit
//! that decodes encodes to bytes that decode to the same edit.

use super::edit::{NewFile, VersionEdit};
use crate::Error;
use proptest::prelude::*;
use sift_fuzz::{config, input};
use std::path::PathBuf;

fn manifest_path() -> PathBuf {
    PathBuf::from("/fuzz/MANIFEST-000002")
}

fn edit_corpus() -> Vec<Vec<u8>> {
    let full = VersionEdit {
        log_number: Some(12),
        next_file_number: Some(40),
        last_sequence: Some(1 << 33),
        next_tree_id: Some(3),
        trees_created: vec![(2, "sift.c1.docs".to_string())],
        trees_dropped: vec![1],
        compaction_pointers: vec![(2, 1, b"pointer".to_vec())],
        deleted_files: vec![(2, 0, 17)],
        new_files: vec![(
            2,
            1,
            NewFile {
                number: 39,
                file_bytes: 1 << 20,
                smallest: b"a\x01\x00\x00\x00\x00\x00\x00\x00".to_vec(),
                largest: b"z\x01\x00\x00\x00\x00\x00\x00\x00".to_vec(),
                seq_min: 5,
                seq_max: 900,
                entries: 1000,
                deletions: 3,
                property_names: vec!["sift.next".to_string()],
                property_values: vec![vec![1, 2, 3]],
            },
        )],
    };
    vec![VersionEdit::default().encode(), full.encode()]
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn fuzz_version_edit(bytes in input(edit_corpus(), 512)) {
        match VersionEdit::decode(&bytes, &manifest_path(), 0) {
            Ok(edit) => {
                let again = VersionEdit::decode(&edit.encode(), &manifest_path(), 0);
                prop_assert_eq!(again.ok(), Some(edit));
            }
            Err(Error::Corruption { file, .. }) => prop_assert_eq!(file, manifest_path()),
            Err(other) => prop_assert!(false, "expected corruption, got {}", other),
        }
    }
}
