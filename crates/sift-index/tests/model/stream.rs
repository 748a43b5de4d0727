//! The operation stream: writes as data (so a crash test can print them before they happen and
//! replay them into the model), and their effect on the database and on the model.

use crate::configs::{BLIND, COLLECTIONS, DOCS};
use crate::documents::{pk_name, random_doc, Model, ModelDoc, Values, BAD_DOCUMENTS, PKS};
use rand::rngs::StdRng;
use rand::Rng;
use sift_index::{Database, WriteOp};

/// One write of the stream.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub enum Write {
    Put(String),
    Delete(String),
}

impl Write {
    fn op(&self) -> WriteOp<'_> {
        match self {
            Write::Put(json) => WriteOp::Put(json.as_bytes()),
            Write::Delete(pk) => WriteOp::Delete(pk.as_bytes()),
        }
    }
}

/// A random batch of writes (one write most of the time); batches repeat keys.
pub fn random_writes(rng: &mut StdRng, model: &Model, clock: u64) -> Vec<Write> {
    match rng.gen_range(0..100) {
        0..=59 => {
            let pk = rng.gen_range(0..PKS);
            vec![Write::Put(random_doc(rng, pk, clock))]
        }
        60..=69 => {
            // Rewrite a live document as it is: a new version with the same values.
            match model.iter().nth(rng.gen_range(0..model.len().max(1))) {
                Some((_, doc)) => vec![Write::Put(doc.json.clone())],
                None => vec![Write::Delete(pk_name(0))],
            }
        }
        70..=84 => vec![Write::Delete(pk_name(rng.gen_range(0..PKS)))],
        _ => (0..rng.gen_range(2..7))
            .map(|_| {
                let pk = rng.gen_range(0..PKS / 6); // a small range: repeats within the batch
                if rng.gen_bool(0.7) {
                    Write::Put(random_doc(rng, pk, clock))
                } else {
                    Write::Delete(pk_name(pk))
                }
            })
            .collect(),
    }
}

/// Applies `writes` to one collection (`slot` in [`COLLECTIONS`]) as one batch, checks what
/// each write returned against the model, and updates the model's documents and this
/// collection's sequence numbers. The first collection written adds or removes documents; the
/// second only sets its sequence numbers, and must agree on which documents exist.
pub fn apply(db: &Database, model: &mut Model, slot: usize, writes: &[Write], what: &str) {
    let collection = COLLECTIONS[slot];
    let ops: Vec<WriteOp<'_>> = writes.iter().map(Write::op).collect();
    let results = db
        .write(collection, &ops)
        .unwrap_or_else(|e| panic!("{what}: write to {collection}: {e}"));
    assert_eq!(results.len(), writes.len(), "{what}: one result per write");
    for (write, result) in writes.iter().zip(results) {
        apply_one(model, slot, write, result, what);
    }
}

/// One write's effect on the model; `result` is what the database returned for it (`None` when
/// the caller replays a write it did not see returned).
pub fn apply_one(model: &mut Model, slot: usize, write: &Write, result: Option<u64>, what: &str) {
    let collection = COLLECTIONS[slot];
    match write {
        Write::Put(json) => {
            let seq =
                result.unwrap_or_else(|| panic!("{what}: a put into {collection} returned no seq"));
            let pk = Values::pk_of(json);
            let entry = model.entry(pk).or_insert_with(|| ModelDoc {
                json: String::new(),
                values: Values::default(),
                seqs: [0; 2],
            });
            entry.json.clone_from(json);
            entry.values = Values::of_json(json);
            entry.seqs[slot] = seq;
        }
        Write::Delete(pk) => {
            let existed = model.remove(pk).is_some();
            if collection == DOCS {
                assert_eq!(
                    result.is_some(),
                    existed,
                    "{what}: delete of {pk} in {DOCS}"
                );
            } else {
                assert_eq!(collection, BLIND);
                // Blind: a tombstone and its sequence number whether or not the document existed.
                assert!(
                    result.is_some(),
                    "{what}: a blind delete of {pk} returns its seq"
                );
            }
        }
    }
}

/// Writes `writes` to every collection, keeping one model: the first collection's writes
/// change the documents, the second's are checked to agree and set its sequence numbers.
/// `applied` is called with each collection's name once its batch is written.
pub fn apply_everywhere(
    db: &Database,
    model: &mut Model,
    writes: &[Write],
    what: &str,
    applied: &mut dyn FnMut(&str),
) {
    let before = model.clone();
    apply(db, model, 0, writes, what);
    applied(COLLECTIONS[0]);
    // The second collection starts from the same documents.
    let mut second = before;
    apply(db, &mut second, 1, writes, what);
    applied(COLLECTIONS[1]);
    assert_eq!(
        second.keys().collect::<Vec<_>>(),
        model.keys().collect::<Vec<_>>(),
        "{what}: both collections hold the same documents"
    );
    for (pk, doc) in model.iter_mut() {
        doc.seqs[1] = second[pk].seqs[1];
    }
}

/// Bad input changes nothing: a bad document alone, and a batch with a good one before it.
pub fn write_bad_input(db: &Database, rng: &mut StdRng, clock: u64, what: &str) {
    let bad = BAD_DOCUMENTS[rng.gen_range(0..BAD_DOCUMENTS.len())];
    let good = random_doc(rng, 1, clock);
    for collection in COLLECTIONS {
        assert!(
            db.put(collection, bad.as_bytes()).is_err(),
            "{what}: {collection} took {bad}"
        );
        assert!(
            db.write(
                collection,
                &[WriteOp::Put(good.as_bytes()), WriteOp::Put(bad.as_bytes())]
            )
            .is_err(),
            "{what}: {collection} took a batch ending in {bad}"
        );
    }
}

impl Values {
    /// The primary key of a document the driver wrote.
    pub fn pk_of(json: &str) -> String {
        let value: serde_json::Value = serde_json::from_str(json).expect("the driver's JSON");
        value["id"].as_str().expect("an id").to_string()
    }
}
