//! Three replicas under a random stream of faults — replicas stopped and restarted, nodes cut
//! off and healed, messages delayed and duplicated, snapshots taken and logs purged — while
//! concurrent clients write and read (linearizably) through whoever leads. Every operation is
//! recorded in a `sift_cluster::history::History` (a write that times out or is refused after
//! proposing is of unknown outcome; its client goes on as a new thread of the history). At the
//! end every replica holds the same documents, a final read of every key joins the history, and
//! the history must be linearizable key by key; a violation prints its smallest failing part.
//!
//! `SIFT_CLUSTER_NEMESIS_STEPS` (default 40) and `SIFT_CLUSTER_NEMESIS_SEED` set the run;
//! the seed is printed so a failure can be replayed (thread timing still varies).

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

mod common;

use common::{members, start_replica, COLLECTION};
use parking_lot::RwLock;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use sift_cluster::history::{History, Operation, Outcome, Value};
use sift_cluster::network::local::LocalRouter;
use sift_cluster::{Command, CommandResult, NodeId, ReadConsistency, Replica};
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

const NODES: [NodeId; 3] = [1, 2, 3];
/// How long one operation may take before its outcome counts as unknown.
const OPERATION_TIMEOUT: Duration = Duration::from_millis(700);
const CLIENTS: u64 = 4;
const KEYS: u64 = 32;

type Running = Arc<RwLock<HashMap<NodeId, Arc<Replica>>>>;

struct Cluster {
    router: LocalRouter,
    root: tempfile::TempDir,
    running: Running,
}

impl Cluster {
    fn dir(&self, node: NodeId) -> PathBuf {
        self.root.path().join(format!("node-{node}"))
    }

    async fn start(&self, node: NodeId) {
        let replica = start_replica(&self.router, &self.dir(node), node).await;
        self.running.write().insert(node, Arc::new(replica));
    }

    async fn stop(&self, node: NodeId) {
        self.router.unregister(node, common::REGION);
        let removed = self.running.write().remove(&node);
        if let Some(replica) = removed {
            replica.shutdown().await.unwrap();
            // A client may still hold the replica for an operation in flight (it fails, up to
            // the operation timeout later): its handle keeps the log engine open, so the node
            // cannot restart before that.
            let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
            while Arc::strong_count(&replica) > 1 {
                assert!(
                    tokio::time::Instant::now() < deadline,
                    "a client held node {node}'s replica for 5 s"
                );
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        }
    }

    fn is_running(&self, node: NodeId) -> bool {
        self.running.read().contains_key(&node)
    }
}

/// A running replica that believes it leads, waiting up to `patience`.
async fn leader(running: &Running, patience: Duration) -> Option<Arc<Replica>> {
    let deadline = tokio::time::Instant::now() + patience;
    loop {
        let found = running.read().values().find(|r| r.is_leader()).cloned();
        if found.is_some() {
            return found;
        }
        if tokio::time::Instant::now() >= deadline {
            return None;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn register_document(key: u64, value: Value) -> Vec<u8> {
    format!(r#"{{"id":"k{key}","v":{value}}}"#).into_bytes()
}

fn value_of(json: Option<&[u8]>) -> Value {
    json.map_or(0, |json| {
        let parsed: serde_json::Value = serde_json::from_slice(json).unwrap();
        parsed["v"].as_u64().unwrap()
    })
}

/// One client until `stop`: writes of unique values and linearizable reads of random keys,
/// each through whichever replica leads at that moment.
async fn client(
    id: u64,
    running: Running,
    history: Arc<History>,
    stop: Arc<AtomicBool>,
    acknowledged: Arc<AtomicUsize>,
    seed: u64,
) {
    let mut rng = StdRng::seed_from_u64(seed ^ id);
    let mut generation = 0;
    let mut counter = 0;
    while !stop.load(Ordering::Relaxed) {
        let Some(replica) = leader(&running, Duration::from_millis(200)).await else {
            continue;
        };
        let thread = id * 1_000_000 + generation;
        let key = rng.gen_range(0..KEYS);
        if rng.gen_bool(0.5) {
            counter += 1;
            let value = (id << 32) | counter;
            history.invoke(thread, key, Operation::Write(value));
            let command = Command::Put {
                collection: COLLECTION.into(),
                document: register_document(key, value),
            };
            match tokio::time::timeout(OPERATION_TIMEOUT, replica.propose(command)).await {
                Ok(Ok(CommandResult::Written { .. })) => {
                    history.complete(thread, key, Outcome::Written);
                    acknowledged.fetch_add(1, Ordering::Relaxed);
                }
                Ok(Ok(other)) => panic!("a valid write was refused: {other:?}"),
                // Not the leader any more, timed out, or stopped: whether it was proposed
                // before that is unknown.
                _ => {
                    history.complete(thread, key, Outcome::Unknown);
                    generation += 1;
                }
            }
        } else {
            history.invoke(thread, key, Operation::Read);
            let pk = format!("k{key}");
            let read = replica.get(COLLECTION, pk.as_bytes(), ReadConsistency::Linearizable);
            match tokio::time::timeout(OPERATION_TIMEOUT, read).await {
                Ok(Ok(hit)) => {
                    let value = value_of(hit.as_ref().map(|h| h.doc.as_slice()));
                    history.complete(thread, key, Outcome::Read(value));
                }
                _ => history.complete(thread, key, Outcome::Unknown),
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_clients_under_stops_partitions_and_snapshots_leave_a_linearizable_history() {
    let steps: usize = std::env::var("SIFT_CLUSTER_NEMESIS_STEPS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(40);
    let seed: u64 = std::env::var("SIFT_CLUSTER_NEMESIS_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(rand::random);
    eprintln!("nemesis: seed {seed}, {steps} steps (SIFT_CLUSTER_NEMESIS_SEED to replay)");
    let mut rng = StdRng::seed_from_u64(seed);

    let cluster = Cluster {
        router: LocalRouter::new(),
        root: tempfile::tempdir().unwrap(),
        running: Arc::default(),
    };
    for node in NODES {
        cluster.start(node).await;
    }
    {
        // Not kept: a handle held past a stop would keep node 1's log engine open.
        let first = cluster.running.read()[&1].clone();
        first.raft.initialize(members(&NODES)).await.unwrap();
    }
    common::create_collection(
        &leader(&cluster.running, Duration::from_secs(20))
            .await
            .unwrap(),
    )
    .await;

    let history = Arc::new(History::new());
    let stop = Arc::new(AtomicBool::new(false));
    let acknowledged = Arc::new(AtomicUsize::new(0));
    let clients: Vec<_> = (1..=CLIENTS)
        .map(|id| {
            tokio::spawn(client(
                id,
                Arc::clone(&cluster.running),
                Arc::clone(&history),
                Arc::clone(&stop),
                Arc::clone(&acknowledged),
                seed,
            ))
        })
        .collect();

    let mut faults = Vec::new();
    for _ in 0..steps {
        match rng.gen_range(0..12) {
            // Quiet steps: the clients run under whatever faults are in force.
            0..=4 => {}
            // A replica stops (at most one down at a time), or a stopped one restarts.
            5 => {
                let down = NODES.iter().copied().find(|&n| !cluster.is_running(n));
                if let Some(node) = down {
                    faults.push(format!("start {node}"));
                    cluster.start(node).await;
                } else {
                    let node = NODES[rng.gen_range(0..NODES.len())];
                    faults.push(format!("stop {node}"));
                    cluster.stop(node).await;
                }
            }
            6 => {
                let node = NODES[rng.gen_range(0..NODES.len())];
                faults.push(format!("isolate {node}"));
                cluster.router.isolate(node);
            }
            7 => {
                let max_ms = rng.gen_range(1..40);
                faults.push(format!("delay up to {max_ms} ms"));
                cluster.router.slow_down(Duration::from_millis(max_ms));
            }
            8 => {
                let every = rng.gen_range(2..6);
                faults.push(format!("duplicate every {every}th"));
                cluster.router.duplicate_every(every);
            }
            9 | 10 => {
                faults.push("heal".into());
                cluster.router.heal();
            }
            // The leader checkpoints and purges its log.
            _ => {
                if let Some(replica) = leader(&cluster.running, Duration::from_millis(200)).await {
                    if let Some(applied) = replica.state_machine.last_applied() {
                        faults.push(format!("snapshot+purge on {}", replica.node));
                        // A replica stopped meanwhile refuses: that is not a failure.
                        if replica.raft.trigger().snapshot().await.is_ok() {
                            let _ = replica.raft.trigger().purge_log(applied.index()).await;
                        }
                    }
                }
            }
        }
        tokio::time::sleep(Duration::from_millis(rng.gen_range(20..120))).await;
    }

    // Everything heals; the clients must get writes through again before they stop.
    cluster.router.heal();
    for node in NODES {
        if !cluster.is_running(node) {
            cluster.start(node).await;
        }
    }
    let healed_with = acknowledged.load(Ordering::Relaxed);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while acknowledged.load(Ordering::Relaxed) < healed_with + 20 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "seed {seed}: no writes acknowledged after healing; faults {faults:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    stop.store(true, Ordering::Relaxed);
    for client in clients {
        client.await.unwrap();
    }

    // Every replica reaches the leader's applied position and holds the same documents.
    let barrier = leader(&cluster.running, Duration::from_secs(10))
        .await
        .unwrap();
    let final_thread = 999_000_000;
    for key in 0..KEYS {
        history.invoke(final_thread, key, Operation::Read);
        let hit = barrier
            .get(
                COLLECTION,
                format!("k{key}").as_bytes(),
                ReadConsistency::Linearizable,
            )
            .await
            .unwrap();
        history.complete(
            final_thread,
            key,
            Outcome::Read(value_of(hit.as_ref().map(|h| h.doc.as_slice()))),
        );
    }
    let target = barrier.state_machine.last_applied();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while cluster
        .running
        .read()
        .values()
        .any(|replica| replica.state_machine.last_applied() < target)
    {
        assert!(
            tokio::time::Instant::now() < deadline,
            "seed {seed}: replicas did not catch up; faults {faults:?}"
        );
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    let views: Vec<Vec<Option<Vec<u8>>>> = cluster
        .running
        .read()
        .values()
        .map(|replica| {
            let database = replica.state_machine.database();
            (0..KEYS)
                .map(|key| {
                    database
                        .get(COLLECTION, format!("k{key}").as_bytes())
                        .unwrap()
                        .map(|h| h.doc)
                })
                .collect()
        })
        .collect();
    assert!(
        views.windows(2).all(|w| w[0] == w[1]),
        "seed {seed}: replicas differ; faults {faults:?}"
    );
    let check_started = std::time::Instant::now();
    let summary = match history.check() {
        Ok(summary) => summary,
        Err(violation) => panic!("seed {seed}: {violation}\nfaults {faults:?}"),
    };
    let checked_in = check_started.elapsed();
    eprintln!(
        "nemesis: {} operations, {} writes acknowledged; {summary:?} (checked in {:?}); faults {faults:?}",
        history.operations(),
        acknowledged.load(Ordering::Relaxed),
        checked_in,
    );
    let replicas: Vec<Arc<Replica>> = cluster.running.write().drain().map(|(_, r)| r).collect();
    for replica in replicas {
        replica.shutdown().await.unwrap();
    }
}
