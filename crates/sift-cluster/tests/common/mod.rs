//! What the cluster tests share: starting a replica of the test region in a node directory.

#![allow(dead_code, clippy::expect_used, clippy::unwrap_used, clippy::panic)]

use openraft::BasicNode;
use sift_cluster::network::local::LocalRouter;
use sift_cluster::{NodeId, Replica};
use sift_index::DatabaseOptions;
use sift_lsm::{Db, Options};
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

pub const REGION: u64 = 1;
pub const COLLECTION: &str = "docs";

/// Starts `node`'s replica of the test region from `node_dir` (log engine in `log/`, data
/// under `data/`) and makes it reachable through `router`.
pub async fn start_replica(router: &LocalRouter, node_dir: &Path, node: NodeId) -> Replica {
    let log_db = Arc::new(Db::open(node_dir.join("log"), Options::default()).unwrap());
    let replica = Replica::start(
        node,
        REGION,
        log_db,
        &node_dir.join("data"),
        DatabaseOptions::default(),
        router.network(node, REGION),
    )
    .await
    .unwrap();
    router.register(node, REGION, replica.raft.clone());
    replica
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
