//! An in-process network: replicas registered by `(node, region)` call each other's raft
//! handlers directly. Faults are injected per link: a node can be cut off (every link to and
//! from it fails) or one directed link cut; a failed call is `Unreachable` to openraft, which
//! retries with backoff — what a lost connection looks like. The whole network can also be
//! made slow (each message waits a pseudo-random time up to a bound) and duplicating (every
//! n-th append or vote request is delivered twice, as a retransmission would).

use crate::types::{NodeId, Raft, RegionId, SnapshotData, TypeConfig};
use openraft::alias::{SnapshotOf, VoteOf};
use openraft::error::{RPCError, ReplicationClosed, StreamingError, Unreachable};
use openraft::network::{RPCOption, RaftNetworkFactory, RaftNetworkV2};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, SnapshotResponse, VoteRequest, VoteResponse,
};
use openraft::BasicNode;
use parking_lot::{Mutex, RwLock};
use std::collections::{HashMap, HashSet};
use std::future::Future;
use std::sync::Arc;

/// Why a call did not get through.
#[derive(Debug, thiserror::Error)]
#[error("node {target} unreachable from node {from}: {why}")]
struct LinkDown {
    from: NodeId,
    target: NodeId,
    why: &'static str,
}

#[derive(Default)]
struct Faults {
    /// Nodes cut off from every other node.
    isolated: HashSet<NodeId>,
    /// Directed links `(from, to)` that drop every message.
    cut: HashSet<(NodeId, NodeId)>,
    /// Each message waits up to this long (0: no delay).
    delay_max_ms: u64,
    /// Every n-th append or vote request is delivered twice (0: none).
    duplicate_every: u64,
    /// Messages sent so far: drives the delays and duplicates (reproducible per run order).
    sent: u64,
}

impl Faults {
    fn blocks(&self, from: NodeId, to: NodeId) -> bool {
        self.isolated.contains(&from)
            || self.isolated.contains(&to)
            || self.cut.contains(&(from, to))
    }
}

#[derive(Default)]
struct RouterInner {
    replicas: RwLock<HashMap<(NodeId, RegionId), Raft>>,
    faults: Mutex<Faults>,
}

/// The in-process network shared by every replica of a local cluster.
#[derive(Clone, Default)]
pub struct LocalRouter {
    inner: Arc<RouterInner>,
}

impl std::fmt::Debug for LocalRouter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalRouter").finish_non_exhaustive()
    }
}

impl LocalRouter {
    pub fn new() -> LocalRouter {
        LocalRouter::default()
    }

    /// Makes `raft` reachable as `node`'s replica of `region`.
    pub fn register(&self, node: NodeId, region: RegionId, raft: Raft) {
        self.inner.replicas.write().insert((node, region), raft);
    }

    /// Removes `node`'s replica of `region` (a stopped or killed replica).
    pub fn unregister(&self, node: NodeId, region: RegionId) {
        self.inner.replicas.write().remove(&(node, region));
    }

    /// Cuts `node` off from every other node, both ways.
    pub fn isolate(&self, node: NodeId) {
        self.inner.faults.lock().isolated.insert(node);
    }

    /// Drops every message sent from `from` to `to` (one direction).
    pub fn cut(&self, from: NodeId, to: NodeId) {
        self.inner.faults.lock().cut.insert((from, to));
    }

    /// Removes every injected fault (delays and duplicates included).
    pub fn heal(&self) {
        let mut faults = self.inner.faults.lock();
        faults.isolated.clear();
        faults.cut.clear();
        faults.delay_max_ms = 0;
        faults.duplicate_every = 0;
    }

    /// Makes every message wait a pseudo-random time up to `max` before delivery.
    pub fn slow_down(&self, max: std::time::Duration) {
        self.inner.faults.lock().delay_max_ms = max.as_millis() as u64;
    }

    /// Delivers every `n`-th append or vote request twice (`0`: never).
    pub fn duplicate_every(&self, n: u64) {
        self.inner.faults.lock().duplicate_every = n;
    }

    /// How long the next message waits, and whether it is delivered twice.
    fn next_message(&self) -> (std::time::Duration, bool) {
        let mut faults = self.inner.faults.lock();
        faults.sent += 1;
        let sent = faults.sent;
        // SplitMix64 of the message count: a spread of delays without a random source.
        let mut mixed = sent.wrapping_mul(0x9E37_79B9_7F4A_7C15);
        mixed = (mixed ^ (mixed >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        mixed ^= mixed >> 31;
        let delay_ms = match faults.delay_max_ms {
            0 => 0,
            max => mixed % (max + 1),
        };
        let duplicate = faults.duplicate_every > 0 && sent.is_multiple_of(faults.duplicate_every);
        (std::time::Duration::from_millis(delay_ms), duplicate)
    }

    /// The network factory of `node`'s replica of `region`.
    pub fn network(&self, node: NodeId, region: RegionId) -> LocalNetworkFactory {
        LocalNetworkFactory {
            router: self.clone(),
            from: node,
            region,
        }
    }

    /// The target replica, if the link there and back is up.
    fn reach(&self, from: NodeId, target: NodeId, region: RegionId) -> Result<Raft, LinkDown> {
        let down = |why| LinkDown { from, target, why };
        {
            let faults = self.inner.faults.lock();
            if faults.blocks(from, target) || faults.blocks(target, from) {
                return Err(down("link cut"));
            }
        }
        self.inner
            .replicas
            .read()
            .get(&(target, region))
            .cloned()
            .ok_or_else(|| down("no such replica running"))
    }

    /// Whether the answer may travel back (faults can be injected while a call runs).
    fn answer_gets_back(&self, from: NodeId, target: NodeId) -> Result<(), LinkDown> {
        if self.inner.faults.lock().blocks(target, from) {
            return Err(LinkDown {
                from,
                target,
                why: "link cut before the answer",
            });
        }
        Ok(())
    }
}

/// Makes connections from one replica to the others of its region.
#[derive(Debug, Clone)]
pub struct LocalNetworkFactory {
    router: LocalRouter,
    from: NodeId,
    region: RegionId,
}

impl RaftNetworkFactory<TypeConfig> for LocalNetworkFactory {
    type Network = LocalConnection;

    async fn new_client(&mut self, target: NodeId, _node: &BasicNode) -> LocalConnection {
        LocalConnection {
            router: self.router.clone(),
            from: self.from,
            target,
            region: self.region,
        }
    }
}

/// One replica's connection to another.
#[derive(Debug)]
pub struct LocalConnection {
    router: LocalRouter,
    from: NodeId,
    target: NodeId,
    region: RegionId,
}

fn unreachable<E: std::error::Error + 'static>(error: &E) -> Unreachable<TypeConfig> {
    Unreachable::new(error)
}

impl LocalConnection {
    /// Delivers `request` to the target replica through `handler` if the link is up both
    /// ways: there, and back. A duplicated message is delivered twice (the request copied
    /// only then), the first answer lost as a retransmitted request's would be.
    async fn call<R, T, E, F, Fut>(
        &self,
        request: R,
        handler: F,
    ) -> Result<T, Unreachable<TypeConfig>>
    where
        R: Clone,
        E: std::error::Error + 'static,
        F: Fn(Raft, R) -> Fut,
        Fut: Future<Output = Result<T, E>>,
    {
        let (delay, duplicate) = self.router.next_message();
        if !delay.is_zero() {
            tokio::time::sleep(delay).await;
        }
        let raft = self
            .router
            .reach(self.from, self.target, self.region)
            .map_err(|e| unreachable(&e))?;
        if duplicate {
            let _ = handler(raft.clone(), request.clone()).await;
        }
        let response = handler(raft, request).await.map_err(|e| unreachable(&e))?;
        self.router
            .answer_gets_back(self.from, self.target)
            .map_err(|e| unreachable(&e))?;
        Ok(response)
    }
}

impl RaftNetworkV2<TypeConfig> for LocalConnection {
    type SnapshotData = SnapshotData;

    async fn append_entries(
        &mut self,
        rpc: AppendEntriesRequest<TypeConfig>,
        _option: RPCOption,
    ) -> Result<AppendEntriesResponse<TypeConfig>, RPCError<TypeConfig>> {
        self.call(
            rpc,
            |raft, rpc| async move { raft.append_entries(rpc).await },
        )
        .await
        .map_err(RPCError::Unreachable)
    }

    async fn vote(
        &mut self,
        rpc: VoteRequest<TypeConfig>,
        _option: RPCOption,
    ) -> Result<VoteResponse<TypeConfig>, RPCError<TypeConfig>> {
        self.call(rpc, |raft, rpc| async move { raft.vote(rpc).await })
            .await
            .map_err(RPCError::Unreachable)
    }

    async fn pre_vote(
        &mut self,
        rpc: VoteRequest<TypeConfig>,
        _option: RPCOption,
    ) -> Result<VoteResponse<TypeConfig>, RPCError<TypeConfig>> {
        self.call(rpc, |raft, rpc| async move { raft.pre_vote(rpc).await })
            .await
            .map_err(RPCError::Unreachable)
    }

    async fn full_snapshot(
        &mut self,
        vote: VoteOf<TypeConfig>,
        snapshot: SnapshotOf<TypeConfig, SnapshotData>,
        _cancel: impl Future<Output = ReplicationClosed> + openraft::OptionalSend + 'static,
        _option: RPCOption,
    ) -> Result<SnapshotResponse<TypeConfig>, StreamingError<TypeConfig>> {
        // Snapshots may be delayed or delivered twice too: the follower must take a resent
        // one again without harm.
        self.call(snapshot, |raft, snapshot| async move {
            raft.install_full_snapshot(vote, snapshot).await
        })
        .await
        .map_err(StreamingError::Unreachable)
    }
}
