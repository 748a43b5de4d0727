//! What the cluster tests share: starting a replica of the test region in a node directory.

#![allow(dead_code, clippy::expect_used, clippy::unwrap_used, clippy::panic)]

use openraft::BasicNode;
use sift_cluster::network::local::LocalRouter;
use sift_cluster::{NodeId, Replica};
use sift_index::DatabaseOptions;
use std::collections::BTreeMap;
use std::path::Path;

pub const REGION: u64 = 1;
pub const COLLECTION: &str = "docs";

/// Starts `node`'s replica of the test region from `node_dir` on `router`.
pub async fn start_replica(router: &LocalRouter, node_dir: &Path, node: NodeId) -> Replica {
    Replica::start_local(router, node_dir, node, REGION, DatabaseOptions::default())
        .await
        .unwrap()
}

/// The membership of a region on `nodes`.
pub fn members(nodes: &[NodeId]) -> BTreeMap<NodeId, BasicNode> {
    nodes
        .iter()
        .map(|&node| (node, BasicNode::new(format!("local:{node}"))))
        .collect()
}

/// The test document of `pk` at `version`.
pub fn document(pk: &str, version: u32) -> String {
    format!(r#"{{"id":"{pk}","version":{version}}}"#)
}

/// Creates the test collection through `replica` (the leader) and checks it was applied.
pub async fn create_collection(replica: &sift_cluster::Replica) {
    let created = replica
        .propose(sift_cluster::Command::CreateCollection {
            name: COLLECTION.into(),
            pk_path: "id".into(),
        })
        .await
        .unwrap();
    assert_eq!(created, sift_cluster::CommandResult::Applied);
}
