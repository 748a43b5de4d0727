//! Tests of `Db::insert_unlogged_at_sequence`: where the entries land, when it refuses, that a
//! flush waits for the inserts running into its memtable, that concurrent inserts with user
//! writes and flushes keep every entry, and what a crash keeps.

use crate::db::{Db, Tree, UnloggedInsert, UnloggedRefusal};
use crate::fs::{FaultFileSystem, FaultKind};
use crate::hooks::{FlushInfo, FlushListener};
use crate::key::{SeqNo, SEQ_MAX};
use crate::options::{Options, ReadOptions, TreeOptions, WriteOptions};
use crate::write_batch::WriteBatch;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::time::Duration;

fn open_with_trees(dir: &std::path::Path, options: Options) -> (Db, Tree, Tree) {
    let db = Db::open(dir, options).unwrap();
    let base = db
        .tree("base")
        .or_else(|_| db.create_tree("base", TreeOptions::default()))
        .unwrap();
    let derived = db
        .tree("derived")
        .or_else(|_| db.create_tree("derived", TreeOptions::default()))
        .unwrap();
    (db, base, derived)
}

/// [`open_with_trees`] with a gate on the flush thread: a test closes it before a memtable
/// switch so the flush the switch wakes cannot seal or flush the frozen memtable before the
/// test has looked at it, and opens it before anything waits for that flush (close included).
fn open_with_flush_gate(
    dir: &std::path::Path,
) -> (Db, Tree, Tree, Arc<crate::db::write::tests::FlushGate>) {
    let gate = Arc::new(crate::db::write::tests::FlushGate::default());
    let options = Options {
        flush_listeners: vec![gate.clone()],
        ..Options::default()
    };
    let (db, base, derived) = open_with_trees(dir, options);
    (db, base, derived, gate)
}

/// One put into `tree` at `seq`, unlogged.
fn insert_at(db: &Db, tree: &Tree, key: &[u8], seq: SeqNo) -> UnloggedInsert {
    let mut batch = WriteBatch::new();
    batch.put(tree, key, &seq.to_be_bytes());
    db.insert_unlogged_at_sequence(&batch, &[seq]).unwrap()
}

/// The sequence-number layout unlogged inserts at old numbers must keep, checked on one super
/// version. In each tree every L0 file holds numbers strictly above those of the L0 files
/// listed after it: L0 is ordered by largest number and a point read returns the first L0 file
/// holding its key (`DbInner::get_at`), so files whose ranges interleave could serve an older
/// version of a key before a newer one, and a compaction that took the newer file alone would
/// move it below the older. The memtables' ranges are disjoint and descending, and each L0 file
/// lies below every memtable, or inside the one whose flush is being installed.
fn assert_sequence_ranges_disjoint(db: &Db, context: &str) {
    if let Err(violation) = sequence_ranges_disjoint(db) {
        panic!("{context}: {violation}");
    }
}

/// [`assert_sequence_ranges_disjoint`] as a result, for threads that must not panic.
fn sequence_ranges_disjoint(db: &Db) -> Result<(), String> {
    let current = db.inner.super_version.load();
    let ranges: Vec<(SeqNo, SeqNo)> = std::iter::once(&current.mem)
        .chain(current.imms.iter())
        .filter(|memtable| memtable.sequence_floor() != SeqNo::MAX)
        .map(|memtable| (memtable.sequence_floor(), memtable.sequence_ceiling()))
        .collect();
    for pair in ranges.windows(2) {
        if pair[1].1 >= pair[0].0 {
            return Err(format!(
                "memtable ranges {:?} (newer) and {:?} overlap or are out of order",
                pair[0], pair[1]
            ));
        }
    }
    for (tree, tree_version) in &current.version.trees {
        let level0 = tree_version.levels.first().map_or(&[][..], Vec::as_slice);
        for pair in level0.windows(2) {
            if pair[0].seq_min <= pair[1].seq_max {
                return Err(format!(
                    "tree {tree}: L0 file {} ({}..={}) is listed before file {} ({}..={}), \
                     and their sequence ranges are not disjoint and descending",
                    pair[0].number,
                    pair[0].seq_min,
                    pair[0].seq_max,
                    pair[1].number,
                    pair[1].seq_min,
                    pair[1].seq_max
                ));
            }
        }
        for file in level0 {
            for &(floor, ceiling) in &ranges {
                let below = file.seq_max < floor;
                let inside = floor <= file.seq_min && file.seq_max <= ceiling;
                if !below && !inside {
                    return Err(format!(
                        "tree {tree}: L0 file {} ({}..={}) overlaps memtable range \
                         {floor}..={ceiling}",
                        file.number, file.seq_min, file.seq_max
                    ));
                }
            }
        }
    }
    Ok(())
}

/// How many components (memtables, L0 files, levels) of `tree` hold each stored version
/// `(key, sequence number)`: 1 each when nothing was flushed twice or replayed over a table.
fn stored_versions(db: &Db, tree: &Tree) -> BTreeMap<(Vec<u8>, SeqNo), usize> {
    let view = db.components(tree, &ReadOptions::default()).unwrap();
    let mut versions = BTreeMap::new();
    for id in view.ids() {
        let mut iter = view.iter(id).unwrap();
        iter.seek_to_first().unwrap();
        while iter.valid() {
            *versions
                .entry((iter.user_key().to_vec(), iter.seq()))
                .or_insert(0) += 1;
            iter.next().unwrap();
        }
    }
    versions
}

#[test]
fn entries_land_in_the_memtable_holding_their_sequence_number() {
    let dir = tempfile::tempdir().unwrap();
    let (db, base, derived, gate) = open_with_flush_gate(dir.path());
    // A failed assertion must not leave the flush held: dropping the database waits for it.
    let _open_gate = OpenGateOnDrop(Arc::clone(&gate));
    let old = db.put(&base, b"a", b"1").unwrap();
    gate.set_closed(true);
    db.inner.force_memtable_switch().unwrap();
    let new = db.put(&base, b"b", b"2").unwrap();
    // Both in one call, each into its own memtable.
    let mut batch = WriteBatch::new();
    batch.put(&derived, b"for-a", b"x");
    batch.put(&derived, b"for-b", b"y");
    assert_eq!(
        db.insert_unlogged_at_sequence(&batch, &[old, new]).unwrap(),
        UnloggedInsert::Inserted
    );
    let current = db.inner.super_version.load();
    let frozen = &current.imms[0];
    assert!(frozen.holds_sequence(old) && !frozen.holds_sequence(new));
    assert_eq!(
        frozen.get(derived.id(), b"for-a", SEQ_MAX).unwrap().seq,
        old
    );
    assert!(frozen.get(derived.id(), b"for-b", SEQ_MAX).is_none());
    assert_eq!(
        current
            .mem
            .get(derived.id(), b"for-b", SEQ_MAX)
            .unwrap()
            .seq,
        new
    );
    assert!(current.mem.get(derived.id(), b"for-a", SEQ_MAX).is_none());
    // Readers see them at those sequence numbers.
    let entry = db.get(&derived, b"for-a").unwrap().unwrap();
    assert_eq!((entry.seq, entry.value), (old, b"x".to_vec()));
    // No log record: the commit lock was never taken and the log did not grow.
    assert_eq!(db.stats().unqueued_commits, 0);
    assert_eq!(db.stats().unlogged_inserts, 1);
    assert_eq!(db.stats().unlogged_insert_entries, 2);
    gate.set_closed(false);
}

#[test]
fn refused_inserts_write_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let (db, base, derived, gate) = open_with_flush_gate(dir.path());
    // A failed assertion must not leave the flush held: dropping the database waits for it.
    let _open_gate = OpenGateOnDrop(Arc::clone(&gate));
    let first = db.put(&base, b"a", b"1").unwrap();
    let latest = db.latest_sequence();
    assert_eq!(
        insert_at(&db, &derived, b"future", latest + 1),
        UnloggedInsert::Refused(UnloggedRefusal::SequenceNotAllocated)
    );
    assert_eq!(
        insert_at(&db, &derived, b"zero", 0),
        UnloggedInsert::Refused(UnloggedRefusal::SequenceNotAllocated)
    );
    // A sealed memtable (its flush started) refuses; so does the whole call, even the entry
    // whose memtable would take it.
    gate.set_closed(true);
    db.inner.force_memtable_switch().unwrap();
    let second = db.put(&base, b"b", b"2").unwrap();
    db.inner.super_version.load().imms[0].seal_for_flush();
    let mut batch = WriteBatch::new();
    batch.put(&derived, b"sealed", b"x");
    batch.put(&derived, b"active", b"y");
    assert_eq!(
        db.insert_unlogged_at_sequence(&batch, &[first, second])
            .unwrap(),
        UnloggedInsert::Refused(UnloggedRefusal::MemtableSealed)
    );
    assert!(db.get(&derived, b"sealed").unwrap().is_none());
    assert!(db.get(&derived, b"active").unwrap().is_none());
    // Once flushed, its numbers are older than every memtable.
    gate.set_closed(false);
    db.flush().unwrap();
    assert_sequence_ranges_disjoint(&db, "after the flush");
    assert!(db.flushed_through() >= second);
    assert_eq!(
        insert_at(&db, &derived, b"flushed", first),
        UnloggedInsert::Refused(UnloggedRefusal::MemtableFlushed)
    );
    assert!(db.get(&derived, b"flushed").unwrap().is_none());
    // A count mismatch is an error naming both counts.
    let error = db
        .insert_unlogged_at_sequence(&batch, &[second])
        .unwrap_err();
    assert!(error.to_string().contains("2 entries given 1"), "{error}");
    assert_eq!(db.stats().unlogged_insert_refusals, 4);
    assert_eq!(db.stats().unlogged_inserts, 0);
}

#[test]
fn a_flush_waits_for_an_unlogged_insert_running_into_its_memtable() {
    let dir = tempfile::tempdir().unwrap();
    let (db, base, derived, gate) = open_with_flush_gate(dir.path());
    // A failed assertion must not leave the flush held: dropping the database waits for it.
    let _open_gate = OpenGateOnDrop(Arc::clone(&gate));
    let seq = db.put(&base, b"a", b"1").unwrap();
    gate.set_closed(true);
    db.inner.force_memtable_switch().unwrap();
    let frozen = Arc::clone(&db.inner.super_version.load().imms[0]);
    // An insert that has registered and not linked its entry yet (a thread preempted there).
    assert!(frozen.begin_unlogged_insert());
    gate.set_closed(false);
    let (done_sender, done) = mpsc::channel();
    std::thread::scope(|scope| {
        scope.spawn(|| {
            db.flush().unwrap();
            done_sender.send(()).unwrap();
        });
        // The flush sealed the memtable and waits.
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while !frozen.is_sealed() {
            assert!(
                std::time::Instant::now() < deadline,
                "the flush never sealed"
            );
            std::thread::sleep(Duration::from_millis(1));
        }
        assert!(
            done.recv_timeout(Duration::from_millis(200)).is_err(),
            "the flush finished while an unlogged insert was running into its memtable"
        );
        assert!(
            !frozen.begin_unlogged_insert(),
            "a sealed memtable took an insert"
        );
        frozen.add(derived.id(), seq, crate::ValueKind::Put, b"late", b"x");
        frozen.end_unlogged_insert();
        done.recv_timeout(Duration::from_secs(10))
            .expect("the flush never finished after the insert ended");
    });
    assert_eq!(frozen.unlogged_inserts_running(), 0);
    // The entry went into the flushed table: it is no longer in any memtable, and still read.
    let current = db.inner.super_version.load();
    assert!(current.imms.is_empty());
    assert!(current.mem.get(derived.id(), b"late", SEQ_MAX).is_none());
    assert_eq!(db.get(&derived, b"late").unwrap().unwrap().seq, seq);
}

/// Two threads insert the derived entry of every base write (at its sequence number, falling
/// back to a logged write when refused) while a writer writes and memtables switch and flush
/// (small memtables, and explicit flushes): every entry is there afterwards, with its value.
#[test]
fn concurrent_unlogged_inserts_with_writes_and_flushes_keep_every_entry() {
    let dir = tempfile::tempdir().unwrap();
    let options = Options {
        memtable_bytes_max: 32 << 10,
        ..Options::default()
    };
    let (db, base, derived) = open_with_trees(dir.path(), options);
    let writes = 6000u32;
    let mut model: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
    let mut fallbacks = 0u64;
    let flusher_stop = std::sync::atomic::AtomicBool::new(false);
    let mut violation = None;
    std::thread::scope(|scope| {
        let mut senders = Vec::new();
        let mut inserters = Vec::new();
        for _ in 0..2 {
            let (sender, receiver) = mpsc::channel::<(Vec<u8>, SeqNo)>();
            senders.push(sender);
            let (db, derived) = (&db, &derived);
            inserters.push(scope.spawn(move || {
                let mut fallbacks = 0u64;
                for (key, seq) in receiver {
                    let mut batch = WriteBatch::new();
                    batch.put(derived, &key, &seq.to_be_bytes());
                    match db.insert_unlogged_at_sequence(&batch, &[seq]).unwrap() {
                        UnloggedInsert::Inserted => {}
                        UnloggedInsert::Refused(_) => {
                            fallbacks += 1;
                            db.write_unthrottled(batch, &WriteOptions::default())
                                .unwrap();
                        }
                    }
                }
                fallbacks
            }));
        }
        let flusher = scope.spawn(|| {
            while !flusher_stop.load(Ordering::Acquire) {
                db.flush().unwrap();
                std::thread::sleep(Duration::from_millis(2));
            }
        });
        for i in 0..writes {
            let key = format!("key{:05}", i % 2500).into_bytes();
            let seq = db.put(&base, &key, &[b'v'; 40]).unwrap();
            let derived_key = format!("derived{i:05}").into_bytes();
            model.insert(derived_key.clone(), seq.to_be_bytes().to_vec());
            senders[(i % 2) as usize].send((derived_key, seq)).unwrap();
            // Recorded, not asserted: a panic here would leave the flusher running and the
            // scope waiting for it.
            if let Err(found) = sequence_ranges_disjoint(&db) {
                violation = Some(format!("after write {i}: {found}"));
                break;
            }
        }
        drop(senders);
        for inserter in inserters {
            fallbacks += inserter.join().unwrap();
        }
        flusher_stop.store(true, Ordering::Release);
        flusher.join().unwrap();
    });
    let found: BTreeMap<Vec<u8>, Vec<u8>> = db
        .iter(&derived, crate::ReadOptions::default())
        .unwrap()
        .map(|item| item.map(|(key, value, _)| (key, value)).unwrap())
        .collect();
    assert_eq!(found.len(), model.len(), "entries lost or invented");
    assert!(found == model, "entries differ from the model");
    let stats = db.stats();
    assert!(stats.flushes > 1, "no flush ran during the test");
    assert!(
        stats.unlogged_inserts > 0,
        "every insert fell back ({fallbacks} fallbacks)"
    );
    assert_eq!(stats.unlogged_insert_refusals, fallbacks);
    assert_eq!(violation, None, "sequence ranges");
    assert_sequence_ranges_disjoint(&db, "after the inserts");
    // After a flush of everything the same holds from the tables alone.
    db.flush().unwrap();
    assert_sequence_ranges_disjoint(&db, "after the last flush");
    for (key, value) in &model {
        assert_eq!(&db.get(&derived, key).unwrap().unwrap().value, value);
    }
}

/// A power loss keeps the unlogged entries whose memtable was flushed and loses only those
/// still in a memtable; the base writes (synced) all survive.
#[test]
fn a_crash_loses_only_unflushed_unlogged_entries() {
    let fs = crate::fs::FaultFileSystem::new();
    let dir = std::path::Path::new("/unlogged-crash");
    let options = Options {
        file_system: Arc::new(fs.clone()),
        ..Options::default()
    };
    let sync = WriteOptions { sync: true };
    let (db, base, derived) = open_with_trees(dir, options.clone());
    let mut flushed = Vec::new();
    let mut unflushed = Vec::new();
    let mut base_keys = Vec::new();
    for round in 0..2 {
        for i in 0..200u32 {
            let key = format!("key{round}-{i:04}").into_bytes();
            let mut batch = WriteBatch::new();
            batch.put(&base, &key, b"base");
            let seq = db.write(batch, &sync).unwrap();
            base_keys.push(key.clone());
            assert_eq!(
                insert_at(&db, &derived, &key, seq),
                UnloggedInsert::Inserted
            );
            if round == 0 {
                flushed.push((key, seq));
            } else {
                unflushed.push(key);
            }
        }
        if round == 0 {
            db.flush().unwrap();
            assert_sequence_ranges_disjoint(&db, "after the flush");
        }
    }
    let last_flushed = flushed.last().map(|(_, seq)| *seq).unwrap();
    assert!(db.flushed_through() >= last_flushed);
    assert!(db.flushed_through() < db.latest_sequence());
    fs.crash();
    drop(db);
    let options = Options {
        file_system: Arc::new(fs.clone()),
        ..options
    };
    let (db, base, derived) = open_with_trees(dir, options);
    assert_sequence_ranges_disjoint(&db, "after the reopen");
    for key in &base_keys {
        assert!(
            db.get(&base, key).unwrap().is_some(),
            "synced base write lost"
        );
    }
    for (key, seq) in &flushed {
        let entry = db.get(&derived, key).unwrap();
        assert_eq!(
            entry.map(|e| (e.seq, e.value)),
            Some((*seq, seq.to_be_bytes().to_vec())),
            "a flushed unlogged entry was lost"
        );
    }
    for key in &unflushed {
        assert!(
            db.get(&derived, key).unwrap().is_none(),
            "an unflushed unlogged entry survived a crash without any log holding it"
        );
    }
}

/// Opens a [`crate::db::write::tests::FlushGate`] when dropped.
struct OpenGateOnDrop(Arc<crate::db::write::tests::FlushGate>);

impl Drop for OpenGateOnDrop {
    fn drop(&mut self) {
        self.0.set_closed(false);
    }
}

/// Makes the next table creation fail once a flush reaches it, when armed: after the flush
/// created its spare log and passed the gates listed before it, before it seals its memtable.
struct FailNextTableCreation {
    fs: FaultFileSystem,
    armed: AtomicBool,
}

impl FlushListener for FailNextTableCreation {
    fn before_flush(&self, _info: &FlushInfo) {
        if self.armed.swap(false, Ordering::SeqCst) {
            self.fs.fail_after(FaultKind::Create, 0);
        }
    }
}

/// A flush fails (its first table cannot be created) while its sealed memtable holds unlogged
/// entries, some inserted after the memtable was frozen; the next memtable holds more. The
/// failure is a recoverable background error: writes (unlogged inserts too) stop, the
/// memtable stays, sealed, so `flushed_through` stays below it, and its unlogged entries stay
/// readable, each stored once. Automatic retries are off here, so nothing changes until
/// `Db::resume` retries the flush of that same memtable: then it is flushed with every entry
/// exactly once, `flushed_through` advances past it, and writes work again. A reopen replays
/// the logs of the memtables not flushed: every base write is back, each version stored
/// once; the unlogged entries of the flushed memtables are there once, those of the active
/// one are gone (they had no log record: the caller re-derives them, at fresh numbers, since
/// their memtable is gone).
#[test]
fn a_failed_flush_keeps_its_unlogged_entries_unflushed_until_a_retry_flushes_them_once() {
    let fs = FaultFileSystem::new();
    let dir = std::path::Path::new("/unlogged-failed-flush");
    let gate = Arc::new(crate::db::write::tests::FlushGate::default());
    let failure = Arc::new(FailNextTableCreation {
        fs: fs.clone(),
        armed: AtomicBool::new(false),
    });
    let options = Options {
        file_system: Arc::new(fs.clone()),
        flush_listeners: vec![gate.clone(), failure.clone()],
        background_error_retry_interval_max_millis: 0,
        ..Options::default()
    };
    let (db, base, derived) = open_with_trees(dir, options.clone());
    // Dropped before `db`: a failed check must not leave the flush held and the drop waiting.
    let _open_gate = OpenGateOnDrop(Arc::clone(&gate));
    let mut base_keys = Vec::new();
    // Derived key -> (sequence number, round: 0 flushed, 1 in the failed flush, 2 active).
    let mut model: BTreeMap<Vec<u8>, (SeqNo, u32)> = BTreeMap::new();
    let mut round_first = [0; 3];
    for round in 0..3u32 {
        if round == 1 {
            db.flush().unwrap();
            assert_sequence_ranges_disjoint(&db, "after the first flush");
        }
        if round == 2 {
            // Frozen, and its flush held before it seals the memtable.
            gate.set_closed(true);
            db.inner.force_memtable_switch().unwrap();
        }
        for i in 0..150u32 {
            let key = format!("key{round}-{i:04}").into_bytes();
            let seq = db.put(&base, &key, b"base").unwrap();
            if i == 0 {
                round_first[round as usize] = seq;
            }
            base_keys.push(key.clone());
            assert_eq!(
                insert_at(&db, &derived, &key, seq),
                UnloggedInsert::Inserted
            );
            model.insert(key, (seq, round));
        }
    }
    // More entries into the frozen memtable, at its writes' numbers, after the next memtable
    // took writes.
    let frozen = Arc::clone(&db.inner.super_version.load().imms[0]);
    for (key, (seq, round)) in model.clone() {
        if round == 1 {
            let late = [b"late-".as_slice(), &key].concat();
            assert_eq!(
                insert_at(&db, &derived, &late, seq),
                UnloggedInsert::Inserted
            );
            assert!(frozen.get(derived.id(), &late, SEQ_MAX).is_some());
            model.insert(late, (seq, 1));
        }
    }
    let flushed_before = db.flushed_through();
    assert!(flushed_before < round_first[1]);
    assert_sequence_ranges_disjoint(&db, "before the failing flush");
    failure.armed.store(true, Ordering::SeqCst);
    gate.set_closed(false);
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    let error = loop {
        if let Some(error) = db.inner.state.lock().bg_error.clone() {
            break error;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the flush neither failed nor stopped"
        );
        std::thread::sleep(Duration::from_millis(1));
    };
    assert!(!failure.armed.load(Ordering::SeqCst), "{error}");
    assert_eq!(db.stats().flushes, 1, "the failing flush was installed");
    // Not retried: the memtable stays, sealed, with every entry; nothing more is flushed.
    assert!(db.flush().is_err());
    std::thread::sleep(Duration::from_millis(50));
    let current = db.inner.super_version.load();
    assert!(current.imms.iter().any(|m| Arc::ptr_eq(m, &frozen)));
    assert!(frozen.is_sealed());
    assert_eq!(db.flushed_through(), flushed_before);
    assert!(db.flushed_through() < round_first[1]);
    assert_sequence_ranges_disjoint(&db, "after the failed flush");
    let stored = stored_versions(&db, &derived);
    let expected: BTreeMap<(Vec<u8>, SeqNo), usize> = model
        .iter()
        .map(|(key, (seq, _))| ((key.clone(), *seq), 1))
        .collect();
    assert!(
        stored == expected,
        "derived entries lost, invented or doubled"
    );
    for (key, (seq, _)) in &model {
        let entry = db.get(&derived, key).unwrap().unwrap();
        assert_eq!((entry.seq, entry.value), (*seq, seq.to_be_bytes().to_vec()));
    }
    // Writes stopped: unlogged inserts too.
    assert!(db
        .insert_unlogged_at_sequence(&WriteBatch::new(), &[])
        .is_err());
    drop(current);

    // The retry flushes the same memtable, with every entry, once.
    db.resume().unwrap();
    assert_eq!(db.stats().flushes, 2);
    assert_eq!(db.stats().background_error_recoveries, 1);
    let current = db.inner.super_version.load();
    assert!(!current.imms.iter().any(|m| Arc::ptr_eq(m, &frozen)));
    drop(current);
    assert!(db.flushed_through() >= round_first[2] - 1);
    assert!(db.flushed_through() < round_first[2]);
    assert_sequence_ranges_disjoint(&db, "after the retried flush");
    assert!(
        stored_versions(&db, &derived) == expected,
        "derived entries lost, invented or doubled by the retried flush"
    );
    let level0 = db
        .components(&derived, &ReadOptions::default())
        .unwrap()
        .files(0);
    assert_eq!(level0.len(), 2, "one table per flushed memtable");
    for (key, (seq, _)) in &model {
        let entry = db.get(&derived, key).unwrap().unwrap();
        assert_eq!((entry.seq, entry.value), (*seq, seq.to_be_bytes().to_vec()));
    }
    let after = db.put(&base, b"after-the-retry", b"base").unwrap();
    base_keys.push(b"after-the-retry".to_vec());
    assert!(after > db.flushed_through());
    drop(db);

    let (db, base, derived) = open_with_trees(dir, options);
    assert_sequence_ranges_disjoint(&db, "after the reopen");
    assert_eq!(db.flushed_through(), db.latest_sequence());
    let base_stored = stored_versions(&db, &base);
    assert_eq!(base_stored.len(), base_keys.len(), "base writes lost");
    assert!(
        base_stored.values().all(|&copies| copies == 1),
        "a base write stored twice"
    );
    for key in &base_keys {
        assert!(db.get(&base, key).unwrap().is_some(), "base write lost");
    }
    let kept: BTreeMap<(Vec<u8>, SeqNo), usize> = model
        .iter()
        .filter(|(_, (_, round))| *round <= 1)
        .map(|(key, (seq, _))| ((key.clone(), *seq), 1))
        .collect();
    assert!(
        stored_versions(&db, &derived) == kept,
        "after the reopen, the derived entries are not those of the flushed memtables, once each"
    );
    // Their memtable is gone: an unlogged insert at their numbers is refused.
    let (lost_key, (lost_seq, _)) = model.iter().find(|(_, (_, round))| *round == 2).unwrap();
    assert_eq!(
        insert_at(&db, &derived, lost_key, *lost_seq),
        UnloggedInsert::Refused(UnloggedRefusal::MemtableFlushed)
    );
}

/// An unlogged entry at an old number goes into the frozen memtable holding that number, so
/// the two memtables' L0 files keep disjoint sequence ranges (checked) and reads stay right:
/// the derived key has a logged version at `c` in the older memtable and an unlogged one at
/// `a < c`; had the unlogged one gone into the newer memtable, its L0 file (listed first)
/// would serve the version at `a`.
#[test]
fn entries_at_old_numbers_keep_the_l0_files_of_distinct_memtables_disjoint() {
    let dir = tempfile::tempdir().unwrap();
    let (db, base, derived, gate) = open_with_flush_gate(dir.path());
    let _open_gate = OpenGateOnDrop(Arc::clone(&gate));
    let old = db.put(&base, b"a", b"1").unwrap();
    let newer_in_same_memtable = db.put(&derived, b"d", b"logged").unwrap();
    gate.set_closed(true);
    db.inner.force_memtable_switch().unwrap();
    let new = db.put(&base, b"b", b"2").unwrap();
    assert!(old < newer_in_same_memtable && newer_in_same_memtable < new);
    let mut batch = WriteBatch::new();
    batch.put(&derived, b"d", b"unlogged");
    batch.put(&derived, b"for-b", b"y");
    assert_eq!(
        db.insert_unlogged_at_sequence(&batch, &[old, new]).unwrap(),
        UnloggedInsert::Inserted
    );
    gate.set_closed(false);
    db.flush().unwrap();
    assert_sequence_ranges_disjoint(&db, "after both flushes");
    let level0 = db
        .components(&derived, &ReadOptions::default())
        .unwrap()
        .files(0);
    assert_eq!(level0.len(), 2, "one file per memtable");
    let entry = db.get(&derived, b"d").unwrap().unwrap();
    assert_eq!(
        (entry.seq, entry.value),
        (newer_in_same_memtable, b"logged".to_vec())
    );
    assert_eq!(db.get(&derived, b"for-b").unwrap().unwrap().seq, new);
}
