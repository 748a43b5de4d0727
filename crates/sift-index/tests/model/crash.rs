//! SIGKILL of a writer: this test binary re-runs itself as a child that writes the driver's
//! stream into every configuration while a second thread flushes and compacts, and is killed
//! at a random moment. The child prints each batch before writing it and an acknowledgement
//! after each collection took it; the parent rebuilds what was acknowledged, reopens, and
//! checks that every acknowledged write is there (the one in flight may or may not be), then
//! runs the driver's checks: every configuration against the model and against each other.

use crate::check::{self, Coverage};
use crate::common::{seed, SeedGuard};
use crate::configs::COLLECTIONS;
use crate::documents::{pk_name, random_doc, Model, ModelDoc, Values, PKS};
use crate::stream::{self, Write};
use crate::{check_step, create_collections, create_indexes, open, StepContext};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use sift_index::{Database, WriteOp};
use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

const CHILD_DIR_ENV: &str = "SIFT_MODEL_CHILD_DIR";
const CHILD_SEED_ENV: &str = "SIFT_MODEL_CHILD_SEED";
const ROUNDS: u64 = 3;
/// Rounds a child's clock can be told apart in, and the clock steps each child has.
const ROUNDS_MAX: u64 = 1000;
const CHILD_CLOCK_SPAN: u64 = 100_000;
const CHILD_CLOCK_START: u64 = 1_000;
/// The driver's clock for the parent's queries: past every child's.
const PARENT_CLOCK: u64 = CHILD_CLOCK_START + ROUNDS_MAX * CHILD_CLOCK_SPAN;

/// The model of what `db` holds now: documents from the first collection, each collection's
/// sequence numbers; both collections must hold the same documents.
fn model_of(db: &Database, what: &str) -> Model {
    let mut model = Model::new();
    for pk in 0..PKS {
        let pk = pk_name(pk);
        let hits: Vec<_> = COLLECTIONS
            .iter()
            .map(|collection| db.get(collection, pk.as_bytes()).unwrap())
            .collect();
        match (&hits[0], &hits[1]) {
            (Some(first), Some(second)) => {
                assert_eq!(
                    first.doc, second.doc,
                    "{what}: {pk} differs between collections"
                );
                let json = String::from_utf8(first.doc.clone()).unwrap();
                let values = Values::of_json(&json);
                model.insert(
                    pk,
                    ModelDoc {
                        json,
                        values,
                        seqs: [first.seq, second.seq],
                    },
                );
            }
            (None, None) => {}
            _ => panic!("{what}: {pk} is in one collection only"),
        }
    }
    model
}

/// pk → JSON of one collection, read back.
fn stored(db: &Database, collection: &str) -> BTreeMap<String, String> {
    (0..PKS)
        .filter_map(|pk| {
            let pk = pk_name(pk);
            db.get(collection, pk.as_bytes())
                .unwrap()
                .map(|hit| (pk, String::from_utf8(hit.doc).unwrap()))
        })
        .collect()
}

fn apply_to_state(state: &mut BTreeMap<String, String>, writes: &[Write]) {
    for write in writes {
        match write {
            Write::Put(json) => {
                state.insert(Values::pk_of(json), json.clone());
            }
            Write::Delete(pk) => {
                state.remove(pk);
            }
        }
    }
}

/// Child mode only (does nothing in a normal test run): writes the driver's stream until
/// killed, printing `@@writes <batch>` before each batch and `@@ack <collection>` after each
/// collection took it, while a second thread flushes and compacts trees at random.
#[test]
fn child_writer() {
    let Ok(dir) = std::env::var(CHILD_DIR_ENV) else {
        return;
    };
    let seed: u64 = std::env::var(CHILD_SEED_ENV).unwrap().parse().unwrap();
    let mut rng = StdRng::seed_from_u64(seed);
    // Every other child writes with the deferred fast path (its DELETEs ride in the batches).
    let db = Arc::new(open(Path::new(&dir), seed % 2 == 1));
    let mut model = model_of(&db, "child start");
    let _compactor = {
        let db = Arc::clone(&db);
        let mut rng = StdRng::seed_from_u64(seed ^ 0x5eed);
        std::thread::spawn(move || loop {
            std::thread::sleep(Duration::from_millis(rng.gen_range(5..40)));
            let collection = COLLECTIONS[rng.gen_range(0..COLLECTIONS.len())];
            let info = db.collection(collection).unwrap();
            let mut trees = vec![info.record.primary_tree_name()];
            trees.extend(info.indexes.iter().filter_map(|index| index.tree.clone()));
            let tree = db
                .engine()
                .tree(&trees[rng.gen_range(0..trees.len())])
                .unwrap();
            match rng.gen_range(0..3) {
                0 => db.flush().unwrap(),
                _ => db.engine().compact_range(&tree, None, None).unwrap(),
            }
        })
    };
    let deadline = Instant::now() + Duration::from_secs(20);
    // Each child's clock starts past the previous children's (for the time attribute).
    let mut clock = CHILD_CLOCK_START + (seed % ROUNDS_MAX) * CHILD_CLOCK_SPAN;
    while Instant::now() < deadline {
        clock += 1;
        let writes = stream::random_writes(&mut rng, &model, clock);
        println!("@@writes {}", serde_json::to_string(&writes).unwrap());
        stream::apply_everywhere(&db, &mut model, &writes, "child", &mut |collection| {
            println!("@@ack {collection}");
        });
    }
}

/// What a killed child printed: the batches each collection acknowledged, applied to the
/// states, and the batch in flight (printed, not acknowledged by every collection).
struct ChildOutput {
    acknowledged: usize,
    in_flight: Option<Vec<Write>>,
}

fn read_child_output(
    text: &str,
    states: &mut [BTreeMap<String, String>; 2],
    round: u64,
) -> ChildOutput {
    // Only complete lines count: the kill may cut the last one.
    let complete = text.rfind('\n').map_or("", |end| &text[..end]);
    let mut acknowledged = 0;
    let mut in_flight: Option<(Vec<Write>, usize)> = None;
    for line in complete.lines() {
        // The test harness may print its own text before ours on the first line.
        let line = line.find("@@").map_or(line, |at| &line[at..]);
        if let Some(batch) = line.strip_prefix("@@writes ") {
            assert!(
                in_flight.is_none(),
                "round {round}: a batch before the last was acknowledged"
            );
            in_flight = Some((serde_json::from_str(batch).unwrap(), 0));
        } else if let Some(collection) = line.strip_prefix("@@ack ") {
            let (writes, acks) = in_flight.as_mut().expect("an ack follows a batch");
            assert_eq!(
                collection, COLLECTIONS[*acks],
                "round {round}: acks in collection order"
            );
            apply_to_state(&mut states[*acks], writes);
            *acks += 1;
            if *acks == COLLECTIONS.len() {
                in_flight = None;
                acknowledged += 1;
            }
        }
    }
    ChildOutput {
        acknowledged,
        in_flight: in_flight.map(|(writes, _)| writes),
    }
}

#[test]
fn sigkill_of_a_writer_loses_nothing_acknowledged() {
    let seed = seed();
    let _guard = SeedGuard(seed);
    let mut rng = StdRng::seed_from_u64(seed);
    let dir = tempfile::tempdir().unwrap();
    {
        let db = open(dir.path(), false);
        create_collections(&db);
        let mut model = Model::new();
        for pk in 0..PKS / 3 {
            let writes = vec![Write::Put(random_doc(&mut rng, pk, u64::from(pk)))];
            stream::apply_everywhere(&db, &mut model, &writes, "setup", &mut |_| {});
        }
        create_indexes(&db, "", &["n", "f", "s", "t", "g"]);
        db.close().unwrap();
    }
    let exe = std::env::current_exe().unwrap();
    let mut coverage = Coverage::default();
    let mut states: [BTreeMap<String, String>; 2] = {
        let db = open(dir.path(), false);
        let states = [stored(&db, COLLECTIONS[0]), stored(&db, COLLECTIONS[1])];
        db.close().unwrap();
        states
    };
    for round in 0..ROUNDS {
        let mut child = Command::new(&exe)
            .args([
                "--exact",
                "crash::child_writer",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(CHILD_DIR_ENV, dir.path())
            .env(
                CHILD_SEED_ENV,
                ((seed % (1 << 40)) * ROUNDS_MAX + round).to_string(),
            )
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis(rng.gen_range(300..1200)));
        let exited_early = child.try_wait().unwrap();
        child.kill().unwrap(); // SIGKILL
        let output = child.wait_with_output().unwrap();
        let text = String::from_utf8_lossy(&output.stdout);
        assert!(
            exited_early.is_none(),
            "round {round}: the child stopped before it was killed ({exited_early:?}):\n{text}\n{}",
            String::from_utf8_lossy(&output.stderr)
        );
        let child_output = read_child_output(&text, &mut states, round);
        assert!(
            child_output.acknowledged > 0,
            "round {round}: the child acknowledged no batch"
        );
        let what = format!(
            "round {round} ({} acknowledged batches)",
            child_output.acknowledged
        );
        let db = open(dir.path(), false);
        for (slot, collection) in COLLECTIONS.iter().enumerate() {
            let found = stored(&db, collection);
            if found == states[slot] {
                // The batch in flight did not reach this collection: write it now, so that both
                // collections hold the same documents again.
                if let Some(writes) = &child_output.in_flight {
                    let ops: Vec<WriteOp<'_>> = writes
                        .iter()
                        .map(|write| match write {
                            Write::Put(json) => WriteOp::Put(json.as_bytes()),
                            Write::Delete(pk) => WriteOp::Delete(pk.as_bytes()),
                        })
                        .collect();
                    db.write(collection, &ops).unwrap();
                    apply_to_state(&mut states[slot], writes);
                }
            } else {
                let mut with_in_flight = states[slot].clone();
                apply_to_state(
                    &mut with_in_flight,
                    child_output.in_flight.as_deref().unwrap_or_default(),
                );
                assert!(
                    found == with_in_flight,
                    "{what}: {collection} holds neither the acknowledged writes nor them plus the batch in flight"
                );
                states[slot] = with_in_flight;
            }
        }
        let model = model_of(&db, &what);
        check_step(
            &db,
            &model,
            &mut rng,
            &StepContext {
                prefixes: &[""],
                clock: PARENT_CLOCK,
                step: 0,
                what: &what,
            },
            &mut coverage,
        );
        if round + 1 == ROUNDS {
            // No DELETE was lost to a crash: full compactions leave exactly the live entries.
            check::compact_deferred_fully(&db);
            check::check_deferred_garbage(&db, &model, true, &what);
            check_step(
                &db,
                &model,
                &mut rng,
                &StepContext {
                    prefixes: &[""],
                    clock: PARENT_CLOCK,
                    step: 0,
                    what: &what,
                },
                &mut coverage,
            );
        }
        db.close().unwrap();
    }
    assert!(coverage.hits_compared > 0, "{coverage:?}");
}
