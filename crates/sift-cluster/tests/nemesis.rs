//! Three replicas under a random stream of faults — replicas stopped and restarted, nodes cut
//! off and healed, messages delayed and duplicated, snapshots taken and logs purged — while one
//! client writes through whoever leads. Every write's outcome is recorded: acknowledged, or
//! unknown (timed out, refused, no leader). At the end every replica holds the same documents,
//! and each key holds what a sequential history allows: its last acknowledged version, or a
//! version written after that whose outcome was unknown (raft commits a client's writes in the
//! order they were proposed, so an unknown write can only take effect before the next
//! acknowledged one).
//!
//! `SIFT_CLUSTER_NEMESIS_STEPS` (default 40) and `SIFT_CLUSTER_NEMESIS_SEED` set the run;
//! the seed is printed so a failure can be replayed.

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

mod common;

use common::{document, members, start_replica, COLLECTION};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use sift_cluster::network::local::LocalRouter;
use sift_cluster::{Command, CommandResult, NodeId, Replica};
use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::time::Duration;
const NODES: [NodeId; 3] = [1, 2, 3];
/// How long one write may take before its outcome counts as unknown.
const WRITE_TIMEOUT: Duration = Duration::from_millis(700);

/// One key's history: versions in the order they were written, with whether each was
/// acknowledged.
type History = BTreeMap<String, Vec<(u32, bool)>>;

struct Cluster {
    router: LocalRouter,
    root: tempfile::TempDir,
    running: HashMap<NodeId, Replica>,
}

impl Cluster {
    fn dir(&self, node: NodeId) -> PathBuf {
        self.root.path().join(format!("node-{node}"))
    }

    async fn start(&mut self, node: NodeId) {
        let replica = start_replica(&self.router, &self.dir(node), node).await;
        self.running.insert(node, replica);
    }

    async fn stop(&mut self, node: NodeId) {
        self.router.unregister(node, common::REGION);
        if let Some(replica) = self.running.remove(&node) {
            replica.shutdown().await.unwrap();
        }
    }

    /// A running replica that believes it leads, waiting up to `patience`.
    async fn leader(&self, patience: Duration) -> Option<NodeId> {
        let deadline = tokio::time::Instant::now() + patience;
        loop {
            for (node, replica) in &self.running {
                if replica.is_leader() {
                    return Some(*node);
                }
            }
            if tokio::time::Instant::now() >= deadline {
                return None;
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
    }
}

/// Puts `pk` at the next version through `node` and records the outcome; returns whether it
/// was acknowledged.
async fn put_recorded(
    cluster: &Cluster,
    node: NodeId,
    pk: String,
    next_version: &mut u32,
    history: &mut History,
) -> bool {
    *next_version += 1;
    let outcome = propose(
        cluster,
        node,
        Command::Put {
            collection: COLLECTION.into(),
            document: document(&pk, *next_version).into_bytes(),
        },
    )
    .await;
    if let Some(result) = &outcome {
        assert!(
            matches!(result, CommandResult::Written { .. }),
            "{result:?}"
        );
    }
    history
        .entry(pk)
        .or_default()
        .push((*next_version, outcome.is_some()));
    outcome.is_some()
}

/// Proposes `command` through `node` within the write timeout: `Some(result)` if
/// acknowledged, `None` if the outcome is unknown.
async fn propose(cluster: &Cluster, node: NodeId, command: Command) -> Option<CommandResult> {
    let replica = cluster.running.get(&node)?;
    match tokio::time::timeout(WRITE_TIMEOUT, replica.propose(command)).await {
        Ok(Ok(result)) => Some(result),
        _ => None,
    }
}

/// The versions a key may end with, given its history.
fn allowed_finals(history: &[(u32, bool)]) -> Vec<Option<u32>> {
    let last_acknowledged = history.iter().rposition(|&(_, acknowledged)| acknowledged);
    let mut allowed = match last_acknowledged {
        Some(i) => vec![Some(history[i].0)],
        None => vec![None],
    };
    let unknown_after = last_acknowledged.map_or(0, |i| i + 1);
    allowed.extend(
        history[unknown_after..]
            .iter()
            .map(|&(version, _)| Some(version)),
    );
    allowed
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn writes_survive_stops_partitions_and_snapshots_as_a_sequential_history_allows() {
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

    let mut cluster = Cluster {
        router: LocalRouter::new(),
        root: tempfile::tempdir().unwrap(),
        running: HashMap::new(),
    };
    for node in NODES {
        cluster.start(node).await;
    }
    cluster.running[&1]
        .raft
        .initialize(members(&NODES))
        .await
        .unwrap();
    let leader = cluster.leader(Duration::from_secs(20)).await.unwrap();
    let created = propose(
        &cluster,
        leader,
        Command::CreateCollection {
            name: COLLECTION.into(),
            pk_path: "id".into(),
        },
    )
    .await;
    assert_eq!(created, Some(CommandResult::Applied));

    let mut history = History::new();
    let mut next_version = 0_u32;
    let mut faults = Vec::new();
    for _ in 0..steps {
        match rng.gen_range(0..12) {
            // Writes, most of the time.
            0..=4 => {
                let Some(leader) = cluster.leader(Duration::from_secs(2)).await else {
                    continue;
                };
                for _ in 0..5 {
                    let pk = format!("k{:02}", rng.gen_range(0..20));
                    put_recorded(&cluster, leader, pk, &mut next_version, &mut history).await;
                }
            }
            // A replica stops (at most one down at a time), or a stopped one restarts.
            5 => {
                let down: Vec<NodeId> = NODES
                    .iter()
                    .copied()
                    .filter(|n| !cluster.running.contains_key(n))
                    .collect();
                if let Some(&node) = down.first() {
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
                if let Some(leader) = cluster.leader(Duration::from_millis(200)).await {
                    let replica = &cluster.running[&leader];
                    if let Some(applied) = replica.state_machine.last_applied() {
                        faults.push(format!("snapshot+purge on {leader}"));
                        replica.raft.trigger().snapshot().await.unwrap();
                        replica
                            .raft
                            .trigger()
                            .purge_log(applied.index())
                            .await
                            .unwrap();
                    }
                }
            }
        }
    }

    // Everything heals; one more acknowledged write is a barrier every replica must reach.
    cluster.router.heal();
    for node in NODES {
        if !cluster.running.contains_key(&node) {
            cluster.start(node).await;
        }
    }
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    let barrier_leader = loop {
        let leader = cluster.leader(Duration::from_secs(5)).await;
        if let Some(leader) = leader {
            let barrier = "barrier".to_owned();
            if put_recorded(&cluster, leader, barrier, &mut next_version, &mut history).await {
                break leader;
            }
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "seed {seed}: no write acknowledged after healing; faults {faults:?}"
        );
        // A deposed leader refuses at once until it learns the new term: no busy loop.
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let target = cluster.running[&barrier_leader]
        .state_machine
        .last_applied();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while cluster
        .running
        .values()
        .any(|replica| replica.state_machine.last_applied() < target)
    {
        assert!(
            tokio::time::Instant::now() < deadline,
            "seed {seed}: replicas did not catch up; faults {faults:?}"
        );
        tokio::time::sleep(Duration::from_millis(25)).await;
    }

    for (node, replica) in &cluster.running {
        let database = replica.state_machine.database();
        for (pk, writes) in &history {
            let found = database.get(COLLECTION, pk.as_bytes()).unwrap().map(|hit| {
                let value: serde_json::Value = serde_json::from_slice(&hit.doc).unwrap();
                value["version"].as_u64().unwrap() as u32
            });
            let allowed = allowed_finals(writes);
            assert!(
                allowed.contains(&found),
                "seed {seed}: node {node}, key {pk} holds {found:?}, history {writes:?} allows \
                 {allowed:?}; faults {faults:?}"
            );
        }
    }
    // And the replicas agree with each other.
    let views: Vec<Vec<Option<Vec<u8>>>> = cluster
        .running
        .values()
        .map(|replica| {
            let database = replica.state_machine.database();
            history
                .keys()
                .map(|pk| {
                    database
                        .get(COLLECTION, pk.as_bytes())
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
    let acknowledged = history.values().flatten().filter(|(_, a)| *a).count();
    eprintln!(
        "nemesis: {acknowledged} acknowledged of {} writes; faults {faults:?}",
        history.values().map(Vec::len).sum::<usize>()
    );
}

#[test]
fn the_allowed_finals_follow_the_last_acknowledged_write() {
    assert_eq!(allowed_finals(&[]), vec![None]);
    assert_eq!(allowed_finals(&[(1, false)]), vec![None, Some(1)]);
    assert_eq!(
        allowed_finals(&[(1, true), (2, false), (3, true), (4, false)]),
        vec![Some(3), Some(4)]
    );
    assert_eq!(allowed_finals(&[(1, false), (2, true)]), vec![Some(2)]);
}
