//! Composite LOOKUPs that read a table's blocks newest first by their sequence bound and stop
//! early (`composite/bounded.rs`): results equal a brute-force filter over a model
//! through puts of new pks, updates of old pks (same and other value), deletes, versions kept
//! by snapshots (a key's versions then straddle blocks), flushes, full compactions and
//! reopens; a top-10 LOOKUP of a heavy value in a fully compacted tree reads a few blocks, not
//! the value's; and a key whose newest version sits in a block the bound would read last is
//! still taken at that version. `SIFT_MODEL_STEPS` lengthens the model run, `SIFT_SEED`
//! replays one.

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

mod common;

use common::{open, seed, steps, SeedGuard};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use sift_index::{AttrType, AttrValue, Database, IndexKind, IndexSpec, Maintenance};
use std::collections::BTreeMap;

#[derive(Debug, Clone)]
struct ModelDoc {
    seq: u64,
    doc: Vec<u8>,
    user: i64,
}

impl common::ModelVersion for ModelDoc {
    fn seq(&self) -> u64 {
        self.seq
    }
    fn doc(&self) -> &[u8] {
        &self.doc
    }
}

type Model = BTreeMap<Vec<u8>, ModelDoc>;

/// (index name, maintenance, read repair): every composite flavour a LOOKUP walks this way.
const INDEXES: [(&str, Maintenance, bool); 3] = [
    ("insert", Maintenance::SyncInsert, false),
    ("repair", Maintenance::SyncInsert, true),
    ("full", Maintenance::SyncFull, false),
];

const USERS: i64 = 5;

fn setup(db: &Database) {
    db.create_collection("docs", "id").unwrap();
    for (name, maintenance, read_repair) in INDEXES {
        let spec = IndexSpec::new(name, "u", AttrType::Int, IndexKind::Composite)
            .with_maintenance(maintenance)
            .with_read_repair(read_repair);
        db.create_index("docs", spec).unwrap();
    }
}

fn put(db: &Database, model: &mut Model, pk: &str, user: i64, pad: usize) -> u64 {
    let doc =
        serde_json::to_vec(&serde_json::json!({ "id": pk, "u": user, "pad": "x".repeat(pad) }))
            .unwrap();
    let seq = db.put("docs", &doc).unwrap();
    model.insert(pk.as_bytes().to_vec(), ModelDoc { seq, doc, user });
    seq
}

/// Every index answers every LOOKUP like brute force over the model.
fn check(db: &Database, model: &Model, context: &str) {
    for (name, ..) in INDEXES {
        for user in -1..=USERS {
            for limit in [Some(1), Some(2), Some(10), None] {
                let got = db
                    .lookup("docs", name, &AttrValue::Int(user), limit)
                    .unwrap();
                let got: Vec<(String, u64, String)> = got
                    .hits
                    .into_iter()
                    .map(|hit| (readable(&hit.pk), hit.seq, readable(&hit.doc)))
                    .collect();
                let want: Vec<(String, u64, String)> =
                    common::newest_first(model, |d| d.user == user, limit)
                        .into_iter()
                        .map(|(pk, seq, doc)| (readable(&pk), seq, readable(&doc)))
                        .collect();
                assert_eq!(
                    got, want,
                    "{context}: index {name}, user {user}, limit {limit:?}"
                );
            }
        }
    }
}

fn readable(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Heavy-tailed users: user 0 gets about half of the writes.
fn random_user(rng: &mut StdRng) -> i64 {
    if rng.gen_bool(0.5) {
        0
    } else {
        rng.gen_range(1..USERS)
    }
}

#[test]
fn lookups_equal_brute_force_through_updates_deletes_compactions_and_reopens() {
    let seed = seed();
    let _guard = SeedGuard(seed);
    let mut rng = StdRng::seed_from_u64(seed);
    let dir = tempfile::tempdir().unwrap();
    let mut db = open(dir.path());
    setup(&db);
    let mut model = Model::new();
    let mut next_pk = 0u32;
    let mut snapshots = Vec::new();
    let total = steps(1500);
    for step in 0..total {
        let roll = rng.gen_range(0..1000);
        if roll < 450 || model.is_empty() {
            // A new pk, larger than every earlier one (pks follow time, as tweet ids do).
            let pk = format!("p{next_pk:06}");
            next_pk += 1;
            let user = random_user(&mut rng);
            put(&db, &mut model, &pk, user, rng.gen_range(0..40));
        } else if roll < 750 {
            // An old pk again: same value (a newer composite entry of the same key) or another.
            let (pk, old) = common::random_entry(&model, &mut rng).unwrap();
            let user = if rng.gen_bool(0.5) {
                old.user
            } else {
                random_user(&mut rng)
            };
            put(&db, &mut model, std::str::from_utf8(&pk).unwrap(), user, 3);
        } else if roll < 880 {
            let (pk, _) = common::random_entry(&model, &mut rng).unwrap();
            db.delete("docs", &pk).unwrap();
            model.remove(&pk);
        } else if roll < 930 {
            // Versions kept for a snapshot stay in the tables: keys with several versions.
            snapshots.push(db.engine().snapshot());
        } else if roll < 950 {
            snapshots.clear();
        } else if roll < 975 {
            db.flush().unwrap();
        } else if roll < 992 {
            db.flush().unwrap();
            db.compact_all().unwrap();
        } else {
            snapshots.clear();
            drop(db);
            db = open(dir.path());
        }
        if step % 100 == 99 {
            check(&db, &model, &format!("step {step}"));
        }
    }
    db.flush().unwrap();
    db.compact_all().unwrap();
    check(&db, &model, "after the last compaction");
    drop(db);
    let db = open(dir.path());
    check(&db, &model, "after the last reopen");
}

#[test]
fn top_ten_lookup_of_a_heavy_value_reads_few_blocks_in_a_compacted_tree() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path());
    setup(&db);
    let mut model = Model::new();
    let mut rng = StdRng::seed_from_u64(7);
    for i in 0..4000 {
        let user = if i % 3 == 0 {
            rng.gen_range(1..USERS)
        } else {
            0
        };
        put(&db, &mut model, &format!("p{i:06}"), user, 8);
    }
    db.flush().unwrap();
    // No background job after the manual compaction: a size compaction of the level it
    // filled would move part of it one level down (two levels, three components).
    db.engine().pause_compactions();
    db.compact_all().unwrap();
    check(&db, &model, "compacted");
    for (name, ..) in INDEXES {
        let all = db.lookup("docs", name, &AttrValue::Int(0), None).unwrap();
        let top = db
            .lookup("docs", name, &AttrValue::Int(0), Some(10))
            .unwrap();
        // The whole tree is one level: the (empty) memtable, then that level.
        assert_eq!(top.stats.components_read, 2, "{name}: {:?}", top.stats);
        // Blocks of the value's entries: what reading them all costs, less one primary block
        // per validation (at least one each; bloom false positives add a few).
        let value_blocks = all.stats.blocks_read - all.stats.validations;
        assert!(value_blocks >= 40, "{name}: {:?}", all.stats);
        assert_eq!(top.hits.len(), 10);
        assert_eq!(top.stats.validations, 10, "{name}: {:?}", top.stats);
        // Index blocks of the top-10: the one or two holding the newest keys (a scan of the
        // value read them all).
        let index_blocks = top.stats.blocks_read - top.stats.validations;
        assert!(
            index_blocks <= 3 && index_blocks * 10 <= value_blocks,
            "{name}: top-10 read {index_blocks} index blocks, the value has {value_blocks}: {:?}",
            top.stats
        );
        assert!(top.stats.blocks_skipped > 0, "{name}: {:?}", top.stats);
        eprintln!(
            "{name}: top-10 read {} blocks ({index_blocks} of the index, {} skipped); \
             the value's entries fill about {value_blocks}",
            top.stats.blocks_read, top.stats.blocks_skipped
        );
    }
    db.engine().resume_compactions();
    // Updates of old pks (same value): their newest entries sit in old blocks; still exact.
    for i in (0..4000).step_by(97) {
        let pk = format!("p{i:06}");
        let user = model[pk.as_bytes()].user;
        put(&db, &mut model, &pk, user, 9);
    }
    db.flush().unwrap();
    db.compact_all().unwrap();
    check(&db, &model, "compacted after updates of old pks");
}

/// A key's versions (kept by snapshots) fill several blocks; a later key in the block holding
/// its OLDEST versions makes that block's bound the highest. Reading that block alone, the key
/// would be taken at an old version whose sequence number is below another document's, and a
/// top-2 would return that document instead of the key's.
#[test]
fn a_key_whose_newest_version_is_in_an_earlier_block_is_taken_at_that_version() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path());
    setup(&db);
    let mut model = Model::new();
    // Old documents of the value, before the key (pks sort before "a"): blocks the bound skips.
    for i in 0..300 {
        put(&db, &mut model, &format!("0{i:04}"), 1, 0);
    }
    let mut snapshots = Vec::new();
    for _ in 0..60 {
        put(&db, &mut model, "a", 1, 0);
        snapshots.push(db.engine().snapshot());
    }
    put(&db, &mut model, "c", 1, 0);
    for _ in 0..60 {
        put(&db, &mut model, "a", 1, 0);
        snapshots.push(db.engine().snapshot());
    }
    put(&db, &mut model, "b", 1, 0);
    db.flush().unwrap();
    db.compact_all().unwrap();
    for (name, ..) in INDEXES {
        let top = db
            .lookup("docs", name, &AttrValue::Int(1), Some(2))
            .unwrap();
        let pks: Vec<&[u8]> = top.hits.iter().map(|hit| hit.pk.as_slice()).collect();
        assert_eq!(pks, [b"b".as_slice(), b"a"], "{name}: {:?}", top.stats);
        assert!(top.stats.blocks_skipped > 0, "{name}: {:?}", top.stats);
    }
    check(&db, &model, "versions straddling blocks");
    // The key moves to another value (sync-full writes a delete as its newest version): its
    // older puts in other blocks must not bring it back.
    put(&db, &mut model, "a", 2, 0);
    db.flush().unwrap();
    db.compact_all().unwrap();
    check(&db, &model, "key moved away");
    drop(snapshots);
    db.compact_all().unwrap();
    check(&db, &model, "snapshots released");
}
