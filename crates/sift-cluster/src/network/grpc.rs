//! The network between processes: each replica reaches the others of its region through the
//! `sift.cluster.Node` gRPC service of their nodes (addresses from the region's membership).
//! One HTTP/2 connection per peer node, shared by all of a node's regions; it is opened
//! lazily and reopened by tonic after a failure. A call that fails to connect or times out
//! is `Unreachable` to openraft, which backs off and retries.

use crate::rpc::messages::{AppendRequest, NodeError, SnapshotChunk, SnapshotHeader, VoteCall};
use crate::rpc::{NodeClient, MESSAGE_BYTES_MAX, SNAPSHOT_CHUNK_BYTES};
use crate::types::{NodeId, RegionId, SnapshotData, TypeConfig};
use openraft::alias::{SnapshotOf, VoteOf};
use openraft::error::{NetworkError, RPCError, ReplicationClosed, StreamingError, Unreachable};
use openraft::network::{RPCOption, RaftNetworkFactory, RaftNetworkV2};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, SnapshotResponse, VoteRequest, VoteResponse,
};
use openraft::BasicNode;
use parking_lot::Mutex;
use std::collections::HashMap;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;
use tonic::transport::{Channel, Endpoint};

/// How long opening a connection to a peer may take before the call counts as unreachable.
const CONNECT_TIMEOUT: Duration = Duration::from_millis(500);

/// The connections of one node to its peers, keyed by address.
#[derive(Debug, Clone, Default)]
pub struct Peers {
    channels: Arc<Mutex<HashMap<String, Channel>>>,
}

impl Peers {
    pub fn new() -> Peers {
        Peers::default()
    }

    /// A client of the node at `address` (`host:port`), on the shared connection.
    pub fn client(&self, address: &str) -> Result<NodeClient<Channel>, String> {
        let mut channels = self.channels.lock();
        let channel = if let Some(channel) = channels.get(address) {
            channel.clone()
        } else {
            let channel = Endpoint::from_shared(format!("http://{address}"))
                .map_err(|e| format!("bad node address {address:?}: {e}"))?
                .connect_timeout(CONNECT_TIMEOUT)
                .tcp_nodelay(true)
                .connect_lazy();
            channels.insert(address.to_string(), channel.clone());
            channel
        };
        Ok(NodeClient::new(channel)
            .max_decoding_message_size(MESSAGE_BYTES_MAX)
            .max_encoding_message_size(MESSAGE_BYTES_MAX))
    }

    /// The network factory of this node's replica of `region`.
    pub fn network(&self, region: RegionId) -> GrpcNetworkFactory {
        GrpcNetworkFactory {
            peers: self.clone(),
            region,
        }
    }
}

/// Makes connections from one replica to the others of its region.
#[derive(Debug, Clone)]
pub struct GrpcNetworkFactory {
    peers: Peers,
    region: RegionId,
}

impl RaftNetworkFactory<TypeConfig> for GrpcNetworkFactory {
    type Network = GrpcConnection;

    async fn new_client(&mut self, target: NodeId, node: &BasicNode) -> GrpcConnection {
        GrpcConnection {
            client: self.peers.client(&node.addr),
            target,
            region: self.region,
        }
    }
}

/// One replica's connection to another (the client fails each call if the address was bad).
#[derive(Debug)]
pub struct GrpcConnection {
    client: Result<NodeClient<Channel>, String>,
    target: NodeId,
    region: RegionId,
}

#[derive(Debug, thiserror::Error)]
#[error("node {target}: {detail}")]
struct CallFailed {
    target: NodeId,
    detail: String,
}

/// A failed call as openraft sees it: a connection that could not be made, was lost or timed
/// out is unreachable (back off); an answer that says the peer cannot serve is a network
/// error (retry).
fn rpc_error(target: NodeId, failure: Failure) -> RPCError<TypeConfig> {
    match failure {
        Failure::Transport(detail) => {
            RPCError::Unreachable(Unreachable::new(&CallFailed { target, detail }))
        }
        Failure::Refused(error) => RPCError::Network(NetworkError::new(&error)),
    }
}

fn streaming_error(target: NodeId, failure: Failure) -> StreamingError<TypeConfig> {
    match failure {
        Failure::Transport(detail) => {
            StreamingError::Unreachable(Unreachable::new(&CallFailed { target, detail }))
        }
        Failure::Refused(error) => StreamingError::Network(NetworkError::new(&error)),
    }
}

enum Failure {
    Transport(String),
    Refused(NodeError),
}

impl GrpcConnection {
    /// Runs `call` on the client with a deadline of `ttl`; unwraps the node's answer.
    async fn call<T, F, Fut>(&mut self, ttl: Duration, call: F) -> Result<T, Failure>
    where
        F: FnOnce(NodeClient<Channel>) -> Fut,
        Fut: Future<Output = Result<tonic::Response<Result<T, NodeError>>, tonic::Status>>,
    {
        let client = self.client.clone().map_err(Failure::Transport)?;
        match tokio::time::timeout(ttl, call(client)).await {
            Err(_) => Err(Failure::Transport(format!("no answer within {ttl:?}"))),
            Ok(Err(status)) => Err(Failure::Transport(status.to_string())),
            Ok(Ok(response)) => response.into_inner().map_err(Failure::Refused),
        }
    }

    /// A vote or pre-vote request (one method, told apart by a flag).
    async fn send_vote(
        &mut self,
        request: VoteRequest<TypeConfig>,
        pre_vote: bool,
        option: RPCOption,
    ) -> Result<VoteResponse<TypeConfig>, RPCError<TypeConfig>> {
        let message = VoteCall {
            region: self.region,
            pre_vote,
            request,
        };
        let target = self.target;
        self.call(option.hard_ttl(), |mut client| async move {
            client.vote(message).await
        })
        .await
        .map_err(|failure| rpc_error(target, failure))
    }

    /// Sends `snapshot` as a stream of chunks: a header, then the archive in slices.
    async fn send_snapshot(
        &mut self,
        vote: VoteOf<TypeConfig>,
        snapshot: SnapshotOf<TypeConfig, SnapshotData>,
        ttl: Duration,
    ) -> Result<SnapshotResponse<TypeConfig>, Failure> {
        let archive = snapshot.snapshot;
        let header = SnapshotHeader {
            region: self.region,
            vote,
            meta: snapshot.meta,
            total_bytes: archive.len(),
        };
        // Slices are read from the archive file as the stream is polled: one in memory at a
        // time. A read failure ends the stream early, which the receiver refuses as short.
        let count = archive.len().div_ceil(SNAPSHOT_CHUNK_BYTES as u64).max(1);
        let mut header = Some(header);
        let chunks = futures_util::stream::iter((0..count).map_while(move |i| {
            let data = archive
                .read_slice(i * SNAPSHOT_CHUNK_BYTES as u64, SNAPSHOT_CHUNK_BYTES)
                .map_err(|e| tracing::warn!("cannot read a snapshot archive: {e}"))
                .ok()?;
            Some(SnapshotChunk {
                header: header.take(),
                data,
            })
        }));
        self.call(ttl, move |mut client| async move {
            client.install_snapshot(chunks).await
        })
        .await
    }
}

impl RaftNetworkV2<TypeConfig> for GrpcConnection {
    type SnapshotData = SnapshotData;

    async fn append_entries(
        &mut self,
        request: AppendEntriesRequest<TypeConfig>,
        option: RPCOption,
    ) -> Result<AppendEntriesResponse<TypeConfig>, RPCError<TypeConfig>> {
        let message = AppendRequest {
            region: self.region,
            request,
        };
        let target = self.target;
        self.call(option.hard_ttl(), |mut client| async move {
            client.append_entries(message).await
        })
        .await
        .map_err(|failure| rpc_error(target, failure))
    }

    async fn vote(
        &mut self,
        request: VoteRequest<TypeConfig>,
        option: RPCOption,
    ) -> Result<VoteResponse<TypeConfig>, RPCError<TypeConfig>> {
        self.send_vote(request, false, option).await
    }

    async fn pre_vote(
        &mut self,
        request: VoteRequest<TypeConfig>,
        option: RPCOption,
    ) -> Result<VoteResponse<TypeConfig>, RPCError<TypeConfig>> {
        self.send_vote(request, true, option).await
    }

    async fn full_snapshot(
        &mut self,
        vote: VoteOf<TypeConfig>,
        snapshot: SnapshotOf<TypeConfig, SnapshotData>,
        cancel: impl Future<Output = ReplicationClosed> + openraft::OptionalSend + 'static,
        option: RPCOption,
    ) -> Result<SnapshotResponse<TypeConfig>, StreamingError<TypeConfig>> {
        let target = self.target;
        // A snapshot may take long to send: the soft deadline is per message, so allow one
        // per chunk, at least a minute.
        let chunks = snapshot.snapshot.len() / SNAPSHOT_CHUNK_BYTES as u64 + 1;
        let ttl = (option.hard_ttl() * chunks as u32).max(Duration::from_secs(60));
        tokio::select! {
            closed = cancel => Err(StreamingError::Closed(closed)),
            sent = self.send_snapshot(vote, snapshot, ttl) => {
                sent.map_err(|failure| streaming_error(target, failure))
            }
        }
    }
}
