//! kill -9 of the leader and of a follower, and a paused leader, under concurrent clients.

use crate::processes::{client_of, leader, start_cluster, status, wait_converged};
use crate::workload::{create_collection, start_clients, value_of, Tally, COLLECTION};
use sift_cluster::history::{History, Operation, Outcome};
use sift_cluster::ReadConsistency;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const KEYS: u64 = 96;
const CLIENTS: u64 = 6;

/// Waits up to 20 s for a write acknowledged after `since`; returns how long it took.
async fn writes_resume(tally: &Tally, since: Instant, what: &str) -> Duration {
    let started = Instant::now();
    while started.elapsed() < Duration::from_secs(20) {
        if let Some(at) = tally.first_after(since) {
            return at - since;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("no write acknowledged within 20 s after {what}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn kill_9_and_pauses_under_load_lose_no_acknowledged_write_and_the_history_is_linearizable() {
    let root = tempfile::tempdir().unwrap();
    let mut nodes = start_cluster(root.path(), &[]);
    let addresses: Vec<String> = nodes.iter().map(|n| n.address.clone()).collect();
    let admin = client_of(&nodes.iter().collect::<Vec<_>>(), Duration::from_secs(10));
    create_collection(&admin).await;

    let history = Arc::new(History::new());
    let tally = Arc::new(Tally::default());
    let stop = Arc::new(AtomicBool::new(false));
    let clients = start_clients(CLIENTS, &addresses, KEYS, &history, &tally, &stop);
    let pause = |d| tokio::time::sleep(Duration::from_millis(d));

    // Rounds of faults (SIFT_CLUSTER_FAULT_ROUNDS, default 1), each: kill -9 of the leader and
    // its restart, the new leader frozen and resumed, kill -9 of a follower and its restart.
    let rounds: usize = std::env::var("SIFT_CLUSTER_FAULT_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1);
    pause(1500).await;
    let before_faults = tally.acknowledged();
    for round in 1..=rounds {
        // 1. kill -9 of the leader.
        let first_leader = leader(&nodes).await;
        let killed_at = Instant::now();
        nodes[first_leader].kill9();
        let failover = writes_resume(&tally, killed_at, "killing the leader").await;
        eprintln!(
            "round {round}: leader node {} killed; next write acknowledged {failover:?} after the kill",
            nodes[first_leader].id
        );
        pause(1000).await;

        // 2. The killed node restarts from its own log and catches up.
        nodes[first_leader].start(None);
        pause(1000).await;

        // 3. The leader frozen for longer than an election timeout: the others elect, and
        // when it wakes up it must not acknowledge anything on its stale view.
        let second_leader = leader(&nodes).await;
        nodes[second_leader].pause();
        let paused_at = Instant::now();
        let resumed = writes_resume(&tally, paused_at, "pausing the leader").await;
        eprintln!(
            "round {round}: leader node {} paused; next write acknowledged {resumed:?} later",
            nodes[second_leader].id
        );
        pause(1500).await;
        nodes[second_leader].resume();
        pause(1000).await;

        // 4. kill -9 of a follower, and its restart.
        let current = leader(&nodes).await;
        let follower = (0..nodes.len()).find(|&i| i != current).unwrap();
        nodes[follower].kill9();
        pause(1000).await;
        nodes[follower].start(None);
        pause(1500).await;
    }

    stop.store(true, Ordering::Relaxed);
    for client in clients {
        client.await.unwrap();
    }
    assert!(
        tally.rejected.lock().is_empty(),
        "{:?}",
        tally.rejected.lock()
    );
    let acknowledged = tally.acknowledged();
    assert!(
        acknowledged > before_faults,
        "no write acknowledged after the faults"
    );

    // Every node ends with the same data, and the final linearizable reads join the history.
    wait_converged(&nodes).await;
    let reader = client_of(&nodes.iter().collect::<Vec<_>>(), Duration::from_secs(10));
    let final_thread = 999_000_000;
    for key in 0..KEYS {
        let pk = format!("k{key}");
        history.invoke(final_thread, key, Operation::Read);
        let document = reader
            .get(COLLECTION, pk.as_bytes(), ReadConsistency::Linearizable)
            .await
            .unwrap();
        let value = value_of(document.as_ref().map(|d| d.json.as_slice()));
        history.complete(final_thread, key, Outcome::Read(value));
        for node in &nodes {
            let local = client_of(&[node], Duration::from_secs(5))
                .get(COLLECTION, pk.as_bytes(), ReadConsistency::Local)
                .await
                .unwrap();
            assert_eq!(
                value_of(local.as_ref().map(|d| d.json.as_slice())),
                value,
                "node {} holds another version of {pk}",
                node.id
            );
        }
    }
    let check_started = Instant::now();
    let summary = match history.check() {
        Ok(summary) => summary,
        Err(violation) => panic!("{violation}"),
    };
    eprintln!(
        "{} operations, {acknowledged} writes acknowledged; linearizable ({:?} to check): {summary:?}",
        history.operations(),
        check_started.elapsed()
    );
    assert_eq!(summary.keys, KEYS as usize);
    for node in &nodes {
        assert!(
            status(node).await.is_some(),
            "node {} is down at the end",
            node.id
        );
    }
}
