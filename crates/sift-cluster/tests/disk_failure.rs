//! A disk that stops taking writes on one node takes that replica out, not the region: the
//! node's log engine runs on Sift's fault-injecting file system, its writes and syncs start
//! failing, and the two other replicas go on acknowledging writes (through a new leader if the
//! failed node led), every one of which they hold.

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

mod common;

use common::{document, members, start_replica, COLLECTION, REGION};
use sift_cluster::network::local::LocalRouter;
use sift_cluster::{Command, CommandResult, NodeId, ReadConsistency, Replica};
use sift_index::DatabaseOptions;
use sift_lsm::fs::{FaultFileSystem, FaultKind};
use sift_lsm::{Db, Options};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

const FAILING: NodeId = 3;

/// A running replica that is a leader, among `replicas` other than `except`.
async fn leader_among(replicas: &HashMap<NodeId, Replica>, except: Option<NodeId>) -> NodeId {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        for (node, replica) in replicas {
            if Some(*node) != except && replica.is_leader() {
                return *node;
            }
        }
        assert!(tokio::time::Instant::now() < deadline, "no leader");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_failing_disk_takes_its_replica_out_and_the_majority_goes_on() {
    let root = tempfile::tempdir().unwrap();
    let router = LocalRouter::new();
    let mut replicas = HashMap::new();
    for node in [1, 2] {
        let dir = root.path().join(format!("node-{node}"));
        replicas.insert(node, start_replica(&router, &dir, node).await);
    }
    // Node 3's log engine is on the fault file system (in memory).
    let disk = FaultFileSystem::new();
    let log_options = Options {
        file_system: Arc::new(disk.clone()),
        ..Options::default()
    };
    let failing_dir = root.path().join("node-3");
    let log_db = Arc::new(Db::open(failing_dir.join("log"), log_options).unwrap());
    let replica = Replica::start(
        FAILING,
        REGION,
        log_db,
        &failing_dir.join("data"),
        DatabaseOptions::default(),
        router.network(FAILING, REGION),
    )
    .await
    .unwrap();
    router.register(FAILING, REGION, replica.raft.clone());
    replicas.insert(FAILING, replica);

    // Node 3 starts the region, so it is likely to lead when its disk fails.
    replicas[&FAILING]
        .raft
        .initialize(members(&[1, 2, 3]))
        .await
        .unwrap();
    let leader = leader_among(&replicas, None).await;
    common::create_collection(&replicas[&leader]).await;
    let mut acknowledged = Vec::new();
    for i in 0..20 {
        let pk = format!("before{i:02}");
        let put = Command::Put {
            collection: COLLECTION.into(),
            document: document(&pk, 1).into_bytes(),
        };
        replicas[&leader].propose(put).await.unwrap();
        acknowledged.push(pk);
    }

    disk.fail_always(FaultKind::Write);
    disk.fail_always(FaultKind::Sync);

    // Writes go on through whichever replica leads: if it is node 3, its append fails and it
    // stops, and the others elect a leader. Each pk is written once, so a write whose outcome
    // is unknown cannot hide another.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    let mut i = 0;
    while acknowledged.len() < 60 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "only {} writes acknowledged after the disk failed",
            acknowledged.len() - 20
        );
        let leader = leader_among(&replicas, None).await;
        let pk = format!("after{i:03}");
        i += 1;
        let put = Command::Put {
            collection: COLLECTION.into(),
            document: document(&pk, 1).into_bytes(),
        };
        if let Ok(Ok(result)) =
            tokio::time::timeout(Duration::from_secs(1), replicas[&leader].propose(put)).await
        {
            assert!(
                matches!(result, CommandResult::Written { .. }),
                "{result:?}"
            );
            acknowledged.push(pk);
        }
    }

    // The healthy replicas hold every acknowledged write; the failed one takes no new entry.
    let leader = leader_among(&replicas, Some(FAILING)).await;
    for pk in &acknowledged {
        let hit = replicas[&leader]
            .get(COLLECTION, pk.as_bytes(), ReadConsistency::Linearizable)
            .await
            .unwrap();
        assert!(hit.is_some(), "acknowledged {pk} missing on the leader");
    }
    let follower = if leader == 1 { 2 } else { 1 };
    let target = replicas[&leader].state_machine.last_applied();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while replicas[&follower].state_machine.last_applied() < target {
        assert!(tokio::time::Instant::now() < deadline, "follower behind");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    for pk in &acknowledged {
        let hit = replicas[&follower]
            .get(COLLECTION, pk.as_bytes(), ReadConsistency::Local)
            .await
            .unwrap();
        assert!(
            hit.is_some(),
            "acknowledged {pk} missing on node {follower}"
        );
    }
    let failed_applied = replicas[&FAILING].state_machine.last_applied();
    assert!(
        failed_applied < target,
        "the replica with the failed disk kept up ({failed_applied:?})"
    );
}
