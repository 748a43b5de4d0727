//! The `embedded` kind under concurrency: queries racing a writer that updates documents and
//! flushes find every document of a value exactly once. (Model equivalence for every kind,
//! embedded included, is in `tests/model/`.)

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

mod common;

use common::open;
use sift_index::{AttrType, AttrValue, IndexKind, IndexSpec};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// Queries racing a writer that updates documents (values never change) and flushes: every
/// LOOKUP must find every document of its value exactly once, whatever flush or memtable map
/// pruning happens meanwhile.
#[test]
fn queries_racing_flushes_stay_exact() {
    const DOCS: u32 = 120;
    let dir = tempfile::tempdir().unwrap();
    let db = Arc::new(open(dir.path()));
    db.create_collection("docs", "id").unwrap();
    let doc = |i: u32, round: u32| {
        format!(
            r#"{{"id": "d{i:03}", "n": {}, "round": {round}, "pad": "{}"}}"#,
            i % 4,
            "y".repeat(40)
        )
    };
    for i in 0..DOCS {
        db.put("docs", doc(i, 0).as_bytes()).unwrap();
    }
    db.create_index(
        "docs",
        IndexSpec::new("n", "n", AttrType::Int, IndexKind::Embedded),
    )
    .unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let db = Arc::clone(&db);
        let stop = Arc::clone(&stop);
        std::thread::spawn(move || {
            let mut round = 1;
            while !stop.load(Ordering::Relaxed) {
                for i in (round % 7..DOCS).step_by(7) {
                    db.put("docs", doc(i, round).as_bytes()).unwrap();
                }
                if round % 3 == 0 {
                    db.flush().unwrap();
                }
                round += 1;
            }
        })
    };
    for query in 0..300 {
        let v = query % 4;
        let result = db
            .lookup("docs", "n", &AttrValue::Int(i64::from(v)), None)
            .unwrap();
        let mut pks: Vec<Vec<u8>> = result.hits.iter().map(|h| h.pk.clone()).collect();
        pks.sort();
        let want: Vec<Vec<u8>> = (0..DOCS)
            .filter(|i| i % 4 == v)
            .map(|i| format!("d{i:03}").into_bytes())
            .collect();
        assert_eq!(pks, want, "query {query}: lookup n = {v}");
        let seqs: Vec<u64> = result.hits.iter().map(|h| h.seq).collect();
        assert!(seqs.windows(2).all(|w| w[0] > w[1]), "newest first");
    }
    stop.store(true, Ordering::Relaxed);
    writer.join().unwrap();
}
