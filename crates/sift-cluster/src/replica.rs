//! One node's replica of one region: its raft handle, log store and state machine.

use crate::log_store::LogStore;
use crate::state_machine::StateMachine;
use crate::types::{Command, CommandResult, NodeId, Raft, RegionId};
use crate::Error;
use openraft::{Config, SnapshotPolicy};
use sift_index::DatabaseOptions;
use sift_lsm::Db;
use std::path::Path;
use std::sync::Arc;

/// Raft timing for a region: a heartbeat every 100 ms and an election after 0.5–1 s of
/// silence, so a lost leader is replaced in about a second even on a busy 2-core machine,
/// while scheduling pauses of a few hundred milliseconds do not depose a live one.
pub fn region_config() -> Result<Arc<Config>, Error> {
    let config = Config {
        cluster_name: "sift".into(),
        heartbeat_interval: 100,
        election_timeout_min: 500,
        election_timeout_max: 1000,
        // A checkpoint every 10,000 entries; the log before it is purged (keeping openraft's
        // default tail), and a replica that needs purged entries gets the snapshot.
        snapshot_policy: SnapshotPolicy::LogsSinceLast(10_000),
        ..Config::default()
    };
    config
        .validate()
        .map(Arc::new)
        .map_err(|e| Error::Config(e.to_string()))
}

/// A running replica.
pub struct Replica {
    pub node: NodeId,
    pub region: RegionId,
    pub raft: Raft,
    pub state_machine: StateMachine,
}

impl std::fmt::Debug for Replica {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Replica")
            .field("node", &self.node)
            .field("region", &self.region)
            .finish_non_exhaustive()
    }
}

impl Replica {
    /// Starts `node`'s replica of `region`: its log in the node's log engine `log_db`, its data
    /// under `data_dir` (created if missing; see `state_machine`), talking through `network`.
    pub async fn start<N>(
        node: NodeId,
        region: RegionId,
        log_db: Arc<Db>,
        data_dir: &Path,
        data_options: DatabaseOptions,
        network: N,
    ) -> Result<Replica, Error>
    where
        N: openraft::network::RaftNetworkFactory<crate::types::TypeConfig>,
        N::Network: openraft::network::NetSnapshot<
            crate::types::TypeConfig,
            SnapshotData = crate::types::SnapshotData,
        >,
    {
        let log_store = LogStore::open(log_db, region).map_err(Error::Storage)?;
        let state_machine =
            StateMachine::open(data_dir, data_options).map_err(|e| Error::Data {
                path: data_dir.display().to_string(),
                detail: e.to_string(),
            })?;
        let raft = Raft::new(
            node,
            region_config()?,
            network,
            log_store,
            state_machine.clone(),
        )
        .await
        .map_err(|e| Error::Raft(e.to_string()))?;
        Ok(Replica {
            node,
            region,
            raft,
            state_machine,
        })
    }

    /// Proposes `command`; returns its result once applied on this replica. Fails with
    /// [`Error::NotLeader`] (naming the leader, if known) on a follower.
    pub async fn propose(&self, command: Command) -> Result<CommandResult, Error> {
        match self.raft.client_write(command).await {
            Ok(response) => Ok(response.data),
            Err(e) => {
                if let Some(forward) = e.forward_to_leader() {
                    return Err(Error::NotLeader {
                        region: self.region,
                        leader: forward.leader_id,
                    });
                }
                Err(Error::Raft(e.to_string()))
            }
        }
    }

    /// Stops the replica's raft tasks (its stores close when the last handle goes).
    pub async fn shutdown(&self) -> Result<(), Error> {
        self.raft
            .shutdown()
            .await
            .map_err(|e| Error::Raft(format!("shutdown failed: {e}")))
    }
}
