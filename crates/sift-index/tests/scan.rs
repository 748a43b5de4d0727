//! `Database::scan` against a `BTreeMap`: every page in key order, deleted and replaced
//! documents as the model says, across flushes and a reopen.

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

use std::collections::BTreeMap;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use sift_index::{Database, DatabaseOptions};

/// Every document, page by page, each page starting just after the previous one's last key.
fn scan_all(database: &Database, page_size: usize) -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut out: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
    let mut from = Vec::new();
    loop {
        let page = database.scan("docs", &from, page_size).expect("scan");
        assert!(page.len() <= page_size, "a page is at most the limit");
        let Some(last) = page.last() else {
            return out;
        };
        from.clone_from(&last.pk);
        from.push(0);
        out.extend(page.into_iter().map(|hit| (hit.pk, hit.doc)));
    }
}

#[test]
fn scan_pages_match_a_btreemap_across_flushes_and_reopen() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut model: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
    let mut rng = StdRng::seed_from_u64(17);
    let mut database = Database::open(dir.path(), DatabaseOptions::default()).expect("open");
    database
        .create_collection("docs", "id")
        .expect("collection");
    for round in 0..6 {
        for _ in 0..300 {
            let key = format!("k{:04}", rng.gen_range(0..500));
            if rng.gen_bool(0.25) {
                database.delete("docs", key.as_bytes()).expect("delete");
                model.remove(key.as_bytes());
            } else {
                let doc = format!(
                    r#"{{"id":"{key}","round":{round},"n":{}}}"#,
                    rng.gen::<u32>()
                );
                database.put("docs", doc.as_bytes()).expect("put");
                model.insert(key.into_bytes(), doc.into_bytes());
            }
        }
        match round % 3 {
            0 => database.flush().expect("flush"),
            1 => {
                database.close().expect("close");
                database = Database::open(dir.path(), DatabaseOptions::default()).expect("reopen");
            }
            _ => {}
        }
        let expected: Vec<(Vec<u8>, Vec<u8>)> = model.clone().into_iter().collect();
        for page_size in [1, 7, 1000] {
            assert_eq!(
                scan_all(&database, page_size),
                expected,
                "round {round}, pages of {page_size}"
            );
        }
        let from = b"k0250".as_slice();
        let page = database
            .scan("docs", from, 5)
            .expect("scan from the middle");
        let expected_keys: Vec<&Vec<u8>> = model
            .range(from.to_vec()..)
            .map(|(k, _)| k)
            .take(5)
            .collect();
        let keys: Vec<&Vec<u8>> = page.iter().map(|hit| &hit.pk).collect();
        assert_eq!(
            keys, expected_keys,
            "round {round}: a page starting mid-collection"
        );
    }
    assert!(
        database.scan("nope", b"", 1).is_err(),
        "an unknown collection is an error"
    );
}
