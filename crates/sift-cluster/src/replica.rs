//! One node's replica of one region: its raft handle, log store and state machine.

use crate::log_store::LogStore;
use crate::network::local::LocalRouter;
use crate::state_machine::StateMachine;
use crate::types::{Command, CommandResult, NodeId, Raft, RegionId};
use crate::Error;
use openraft::raft::ReadPolicy;
use openraft::{Config, SnapshotPolicy};
use sift_index::{DatabaseOptions, Hit};
use sift_lsm::Db;
use std::path::Path;
use std::sync::Arc;

/// Raft timing for a region: a heartbeat every 100 ms and an election after 0.5–1 s of
/// silence, so a lost leader is replaced in about a second even on a busy 2-core machine,
/// while scheduling pauses of a few hundred milliseconds do not depose a live one.
pub fn region_config() -> Result<Arc<Config>, Error> {
    tuned_region_config(LogRetention::default())
}

/// When a replica checkpoints its region and how much log it keeps after that.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LogRetention {
    /// A snapshot (engine checkpoint) after this many entries since the last one.
    pub snapshot_every: u64,
    /// Entries kept in the log below a snapshot, so that a follower a little behind gets
    /// entries, not the whole snapshot.
    pub kept_after_snapshot: u64,
}

impl Default for LogRetention {
    fn default() -> Self {
        LogRetention {
            snapshot_every: 10_000,
            kept_after_snapshot: 1_000,
        }
    }
}

/// [`region_config`] with another log retention (tests make snapshots happen sooner).
pub fn tuned_region_config(retention: LogRetention) -> Result<Arc<Config>, Error> {
    let config = Config {
        cluster_name: "sift".into(),
        heartbeat_interval: 100,
        election_timeout_min: 500,
        election_timeout_max: 1000,
        // A checkpoint every 10,000 entries by default; the log before it is purged but for a
        // tail, and a replica that needs purged entries gets the snapshot.
        snapshot_policy: SnapshotPolicy::LogsSinceLast(retention.snapshot_every),
        max_in_snapshot_log_to_keep: retention.kept_after_snapshot,
        // A replica that restarts, or comes back from a partition, first asks whether it could
        // win before raising the term: it does not depose a leader the others still hear.
        enable_pre_vote: Some(true),
        ..Config::default()
    };
    config
        .validate()
        .map(Arc::new)
        .map_err(|e| Error::Config(e.to_string()))
}

/// How a read sees the region.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub enum ReadConsistency {
    /// Linearizable (the default): the leader confirms with a majority that it still leads
    /// (raft's read index), waits until it has applied every entry committed before the read,
    /// then reads. Only the leader serves it.
    #[default]
    Linearizable,
    /// Linearizable while the leader's lease holds (no round trip; assumes clocks drift
    /// little over an election timeout). Only the leader serves it.
    Lease,
    /// Whatever this replica has applied, leader or not: may miss recent writes (a follower
    /// read), never shows a write that was not committed.
    Local,
}

/// A running replica.
pub struct Replica {
    pub node: NodeId,
    pub region: RegionId,
    pub raft: Raft,
    pub state_machine: StateMachine,
    /// Counts this region's log store handles: `shutdown` waits until only this one is left
    /// (other regions' handles on the node's log engine do not count).
    log_handles: Arc<()>,
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
        let config = region_config()?;
        Replica::start_with(
            node,
            region,
            log_db,
            data_dir,
            data_options,
            network,
            config,
        )
        .await
    }

    /// [`Replica::start`] with a raft configuration of the caller's.
    pub async fn start_with<N>(
        node: NodeId,
        region: RegionId,
        log_db: Arc<Db>,
        data_dir: &Path,
        data_options: DatabaseOptions,
        network: N,
        config: Arc<Config>,
    ) -> Result<Replica, Error>
    where
        N: openraft::network::RaftNetworkFactory<crate::types::TypeConfig>,
        N::Network: openraft::network::NetSnapshot<
            crate::types::TypeConfig,
            SnapshotData = crate::types::SnapshotData,
        >,
    {
        let log_store = LogStore::open(log_db, region).map_err(Error::Storage)?;
        let log_handles = log_store.handles();
        let state_machine =
            StateMachine::open(data_dir, data_options).map_err(|e| Error::Data {
                path: data_dir.display().to_string(),
                detail: e.to_string(),
            })?;
        let raft = Raft::new(node, config, network, log_store, state_machine.clone())
            .await
            .map_err(|e| Error::Raft(e.to_string()))?;
        Ok(Replica {
            node,
            region,
            raft,
            state_machine,
            log_handles,
        })
    }

    /// Starts `node`'s replica of `region` on the in-process `router`, from `node_dir` (the
    /// node's log engine in `log/`, the region's data under `data/`), and registers it there.
    pub async fn start_local(
        router: &LocalRouter,
        node_dir: &Path,
        node: NodeId,
        region: RegionId,
        data_options: DatabaseOptions,
    ) -> Result<Replica, Error> {
        let log_dir = node_dir.join("log");
        let log_db = Db::open(&log_dir, sift_lsm::Options::default()).map_err(|e| Error::Data {
            path: log_dir.display().to_string(),
            detail: e.to_string(),
        })?;
        let replica = Replica::start(
            node,
            region,
            Arc::new(log_db),
            &node_dir.join("data"),
            data_options,
            router.network(node, region),
        )
        .await?;
        router.register(node, region, replica.raft.clone());
        Ok(replica)
    }

    /// Whether this replica is its region's leader now (by its own state: a replica that was
    /// shut down or restarted goes on reporting the leader it last knew from
    /// `Raft::current_leader`).
    pub fn is_leader(&self) -> bool {
        use openraft::async_runtime::watch::WatchReceiver;
        let metrics = self.raft.metrics();
        let state = metrics.borrow_watched().state;
        state == openraft::ServerState::Leader
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

    /// The document with primary key `pk` in `collection`, read as `consistency` says. A
    /// linearizable read on a follower fails with [`Error::NotLeader`].
    pub async fn get(
        &self,
        collection: &str,
        pk: &[u8],
        consistency: ReadConsistency,
    ) -> Result<Option<Hit>, Error> {
        let database = self.readable(consistency).await?;
        database
            .get(collection, pk)
            .map_err(|e| Error::Read(e.to_string()))
    }

    /// The region's database once a read may see it as `consistency` says: for a
    /// linearizable or lease read, after this replica has confirmed it leads and has applied
    /// every entry committed before the call. Hold it for one read, not for ever (a snapshot
    /// install replaces it).
    pub async fn readable(
        &self,
        consistency: ReadConsistency,
    ) -> Result<Arc<sift_index::Database>, Error> {
        let policy = match consistency {
            ReadConsistency::Linearizable => Some(ReadPolicy::ReadIndex),
            ReadConsistency::Lease => Some(ReadPolicy::LeaseRead),
            ReadConsistency::Local => None,
        };
        if let Some(policy) = policy {
            if let Err(e) = self.raft.ensure_linearizable(policy).await {
                if let Some(forward) = e.forward_to_leader() {
                    return Err(Error::NotLeader {
                        region: self.region,
                        leader: forward.leader_id,
                    });
                }
                return Err(Error::Raft(e.to_string()));
            }
        }
        Ok(self.state_machine.database())
    }

    /// Stops the replica's raft tasks and waits (up to 10 s) until they have let go of its log
    /// store (and with it their handle on the node's log engine) and its database, so that
    /// the node can open them again: openraft's replication tasks can outlive
    /// `Raft::shutdown` for as long as a message they sent is in flight. Other regions on the
    /// same log engine do not hold it up.
    pub async fn shutdown(&self) -> Result<(), Error> {
        self.raft
            .shutdown()
            .await
            .map_err(|e| Error::Raft(format!("shutdown failed: {e}")))?;
        let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(10);
        while Arc::strong_count(&self.log_handles) > 1 || !self.state_machine.is_sole_handle() {
            if tokio::time::Instant::now() >= deadline {
                return Err(Error::Raft(format!(
                    "region {} on node {}: storage still in use 10 s after shutdown",
                    self.region, self.node
                )));
            }
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        Ok(())
    }
}
