//! Write throughput of one region replicated on three in-process replicas, against one
//! database alone with the same durability (every write's log synced before it is
//! acknowledged) and without it, and the time from stopping the leader to the next
//! acknowledged write.
//!
//!     cargo run --release -p sift-cluster --example region_bench -- [WRITES] [CLIENTS] [ROUNDS]
//!
//! Defaults: 4,000 writes by 16 concurrent clients, 3 rounds alternating the setups.
//! Prints one line per measurement and the medians. In-process replicas share the machine's
//! disk and cores: this measures the replication machinery (log, apply, openraft), not a
//! network.

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

use sift_cluster::network::local::LocalRouter;
use sift_cluster::{Command, NodeId, Replica};
use sift_index::{Database, DatabaseOptions};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

const REGION: u64 = 1;

fn document(i: usize) -> Vec<u8> {
    format!(
        r#"{{"id":"d{i:08}","user":{},"text":"{}"}}"#,
        i % 997,
        "x".repeat(200)
    )
    .into_bytes()
}

fn argument(index: usize, default: usize) -> usize {
    std::env::args()
        .nth(index)
        .and_then(|a| a.parse().ok())
        .unwrap_or(default)
}

/// Puts `writes` documents through `put` from `clients` concurrent tasks; returns writes/s.
async fn drive<F, Fut>(writes: usize, clients: usize, put: F) -> f64
where
    F: Fn(usize) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = ()> + Send,
{
    let put = Arc::new(put);
    let started = Instant::now();
    let tasks: Vec<_> = (0..clients)
        .map(|client| {
            let put = Arc::clone(&put);
            tokio::spawn(async move {
                for i in (client..writes).step_by(clients) {
                    put(i).await;
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.unwrap();
    }
    writes as f64 / started.elapsed().as_secs_f64()
}

async fn one_node(writes: usize, clients: usize, sync_writes: bool) -> f64 {
    let dir = tempfile::tempdir().unwrap();
    let options = DatabaseOptions {
        sync_writes,
        ..DatabaseOptions::default()
    };
    let database = Arc::new(Database::open(dir.path(), options).unwrap());
    database.create_collection("docs", "id").unwrap();
    drive(writes, clients, move |i| {
        let database = Arc::clone(&database);
        async move {
            tokio::task::spawn_blocking(move || database.put("docs", &document(i)).unwrap())
                .await
                .unwrap();
        }
    })
    .await
}

struct Region {
    router: LocalRouter,
    replicas: BTreeMap<NodeId, Arc<Replica>>,
    _dir: tempfile::TempDir,
}

async fn start_region() -> Region {
    let dir = tempfile::tempdir().unwrap();
    let router = LocalRouter::new();
    let mut replicas = BTreeMap::new();
    for node in [1, 2, 3] {
        let node_dir = dir.path().join(format!("node-{node}"));
        let replica =
            Replica::start_local(&router, &node_dir, node, REGION, DatabaseOptions::default())
                .await
                .unwrap();
        replicas.insert(node, Arc::new(replica));
    }
    let members = [1, 2, 3]
        .map(|n| (n, openraft::BasicNode::new(format!("local:{n}"))))
        .into_iter()
        .collect::<BTreeMap<_, _>>();
    replicas[&1].raft.initialize(members).await.unwrap();
    Region {
        router,
        replicas,
        _dir: dir,
    }
}

async fn leader(region: &Region) -> NodeId {
    let deadline = Instant::now() + Duration::from_secs(30);
    while Instant::now() < deadline {
        for (node, replica) in &region.replicas {
            if replica.is_leader() {
                return *node;
            }
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    panic!("no leader elected within 30 s")
}

async fn three_replicas(writes: usize, clients: usize) -> (f64, Duration) {
    let region = start_region().await;
    let leader_node = leader(&region).await;
    let replica = Arc::clone(&region.replicas[&leader_node]);
    replica
        .propose(Command::CreateCollection {
            name: "docs".into(),
            pk_path: "id".into(),
        })
        .await
        .unwrap();
    let throughput = drive(writes, clients, move |i| {
        let replica = Arc::clone(&replica);
        async move {
            replica
                .propose(Command::Put {
                    collection: "docs".into(),
                    document: document(i),
                })
                .await
                .unwrap();
        }
    })
    .await;

    // Failover: from stopping the leader to the next acknowledged write.
    let stopped = Instant::now();
    region.router.unregister(leader_node, REGION);
    region.replicas[&leader_node].shutdown().await.unwrap();
    let failover = loop {
        assert!(
            stopped.elapsed() < Duration::from_secs(30),
            "no write acknowledged within 30 s of stopping the leader"
        );
        let mut acknowledged = false;
        for (node, replica) in &region.replicas {
            if *node == leader_node {
                continue;
            }
            let put = Command::Put {
                collection: "docs".into(),
                document: document(writes),
            };
            if let Ok(Ok(_)) =
                tokio::time::timeout(Duration::from_millis(200), replica.propose(put)).await
            {
                acknowledged = true;
                break;
            }
        }
        if acknowledged {
            break stopped.elapsed();
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    };
    for (node, replica) in &region.replicas {
        if *node != leader_node {
            replica.shutdown().await.unwrap();
        }
    }
    (throughput, failover)
}

fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let writes = argument(1, 4000);
    let clients = argument(2, 16);
    let rounds = argument(3, 3);
    let (mut single, mut unsynced, mut replicated, mut failovers) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for round in 1..=rounds {
        let one = one_node(writes, clients, true).await;
        let loose = one_node(writes, clients, false).await;
        let (three, failover) = three_replicas(writes, clients).await;
        println!(
            "round {round}: one node synced {one:.0} writes/s, unsynced {loose:.0}; three \
             replicas {three:.0} writes/s; failover {} ms",
            failover.as_millis()
        );
        single.push(one);
        unsynced.push(loose);
        replicated.push(three);
        failovers.push(failover.as_secs_f64() * 1000.0);
    }
    let (one, loose, three) = (
        median(&mut single),
        median(&mut unsynced),
        median(&mut replicated),
    );
    println!(
        "median: three replicas {three:.0} writes/s = {:.2}x one node synced ({one:.0}), \
         {:.2}x one node unsynced ({loose:.0}); failover {:.0} ms ({writes} writes, {clients} \
         clients, {rounds} rounds)",
        three / one,
        three / loose,
        median(&mut failovers)
    );
}
