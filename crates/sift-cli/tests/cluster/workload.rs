//! Concurrent clients writing and reading registers (one document per key) through the
//! routing client, every operation recorded in a `History`.

use parking_lot::Mutex;
use rand::{Rng, SeedableRng};
use sift_cluster::history::{History, Operation, Outcome, Value};
use sift_cluster::{ClientError, ClusterClient, Command, CommandResult, ReadConsistency};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

pub const COLLECTION: &str = "registers";

pub fn document(key: u64, value: Value) -> Vec<u8> {
    format!(r#"{{"id":"k{key}","v":{value}}}"#).into_bytes()
}

/// The register value a stored document holds (0: no document).
pub fn value_of(json: Option<&[u8]>) -> Value {
    json.map_or(0, |json| {
        let parsed: serde_json::Value = serde_json::from_slice(json).unwrap();
        parsed["v"].as_u64().unwrap()
    })
}

pub async fn create_collection(client: &ClusterClient) {
    let created = client
        .write(Command::CreateCollection {
            name: COLLECTION.into(),
            pk_path: "id".into(),
        })
        .await
        .unwrap();
    assert_eq!(created, CommandResult::Applied);
}

/// What the clients saw, besides the history.
#[derive(Debug, Default)]
pub struct Tally {
    /// When each acknowledged write was sent, and when it was acknowledged.
    pub acknowledged_at: Mutex<Vec<(Instant, Instant)>>,
    /// Writes that were refused by the state machine: there must be none.
    pub rejected: Mutex<Vec<String>>,
}

impl Tally {
    pub fn acknowledged(&self) -> usize {
        self.acknowledged_at.lock().len()
    }

    /// The first acknowledgement of a write sent after `instant` (an answer to one sent
    /// before may still arrive after it).
    pub fn first_after(&self, instant: Instant) -> Option<Instant> {
        self.acknowledged_at
            .lock()
            .iter()
            .filter(|(sent, _)| *sent >= instant)
            .map(|(_, acknowledged)| *acknowledged)
            .min()
    }
}

/// Client `id` until `stop`: random writes (unique values) and linearizable reads on `keys`
/// registers. After a write of unknown outcome it continues as a new thread of the history.
pub async fn run_client(
    id: u64,
    client: ClusterClient,
    keys: u64,
    history: Arc<History>,
    tally: Arc<Tally>,
    stop: Arc<AtomicBool>,
) {
    let mut random = rand::rngs::StdRng::seed_from_u64(id);
    let mut generation = 0u64;
    let mut counter = 0u64;
    while !stop.load(Ordering::Relaxed) {
        let thread = id * 1_000_000 + generation;
        let key = random.gen_range(0..keys);
        if random.gen_bool(0.5) {
            counter += 1;
            let value = (id << 32) | counter;
            history.invoke(thread, key, Operation::Write(value));
            let sent = Instant::now();
            let answer = client
                .write(Command::Put {
                    collection: COLLECTION.into(),
                    document: document(key, value),
                })
                .await;
            match answer {
                Ok(CommandResult::Written { .. }) => {
                    history.complete(thread, key, Outcome::Written);
                    tally.acknowledged_at.lock().push((sent, Instant::now()));
                }
                Ok(other) => {
                    history.complete(thread, key, Outcome::Written);
                    tally.rejected.lock().push(format!("{other:?}"));
                }
                Err(e) => {
                    history.complete(thread, key, Outcome::Unknown);
                    generation += 1;
                    // Unavailable: nobody could take it; back off while the cluster elects.
                    if matches!(e, ClientError::Unavailable { .. }) {
                        tokio::time::sleep(Duration::from_millis(50)).await;
                    }
                }
            }
        } else {
            history.invoke(thread, key, Operation::Read);
            let answer = client
                .get(
                    COLLECTION,
                    format!("k{key}").as_bytes(),
                    ReadConsistency::Linearizable,
                )
                .await;
            match answer {
                Ok(document) => {
                    let value = value_of(document.as_ref().map(|d| d.json.as_slice()));
                    history.complete(thread, key, Outcome::Read(value));
                }
                Err(_) => history.complete(thread, key, Outcome::Unknown),
            }
        }
    }
}

/// Starts `clients` clients on `addresses`; returns their handles.
pub fn start_clients(
    clients: u64,
    addresses: &[String],
    keys: u64,
    history: &Arc<History>,
    tally: &Arc<Tally>,
    stop: &Arc<AtomicBool>,
) -> Vec<tokio::task::JoinHandle<()>> {
    (1..=clients)
        .map(|id| {
            let client =
                ClusterClient::new(addresses.to_vec(), Some(Duration::from_secs(3))).unwrap();
            tokio::spawn(run_client(
                id,
                client,
                keys,
                Arc::clone(history),
                Arc::clone(tally),
                Arc::clone(stop),
            ))
        })
        .collect()
}
