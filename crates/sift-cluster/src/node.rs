//! A Sift node as its own process: it hosts region replicas, serves the `sift.cluster.Node`
//! gRPC service for their raft traffic and for clients, and joins a cluster through any of
//! its nodes. What the user runs as `sift node` and `sift cluster up`.
//!
//! Layout of a node directory: `NODE` (the node's id, so a directory is never started as
//! another node), `log/` (the node's raft log engine, every region's log in it) and
//! `regions/<region>/` (each region's data, see `state_machine`).

use crate::network::grpc::Peers;
use crate::replica::tuned_region_config;
use crate::rpc::messages::{
    AppendReply, AppendRequest, Document, JoinReply, JoinRequest, NodeError, NodeStatus, Query,
    QueryReply, QueryRequest, ReadReply, ReadRequest, RegionStatus, SnapshotChunk, SnapshotReply,
    StatusReply, StatusRequest, VoteCall, VoteReply, WriteReply, WriteRequest, QUERY_LIMIT_MAX,
};
use crate::rpc::{NodeServer, NodeService, MESSAGE_BYTES_MAX};
use crate::types::{NodeId, RegionId, TypeConfig};
use crate::{Error, LogRetention, Replica};
use openraft::async_runtime::watch::WatchReceiver;
use openraft::{BasicNode, ChangeMembers, ServerState};
use parking_lot::RwLock;
use sift_index::DatabaseOptions;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use tokio_stream::StreamExt;

/// The region every cluster starts with (range partitioning will add others).
pub const FIRST_REGION: RegionId = 1;

/// The file naming the node a directory belongs to.
const NODE_FILE: &str = "NODE";

/// How a node starts.
#[derive(Debug, Clone)]
pub struct NodeOptions {
    /// The node's id in the cluster (not 0).
    pub id: NodeId,
    /// Where its log and data live (created if missing).
    pub dir: PathBuf,
    /// The address the service listens on (port 0: any free port).
    pub listen: SocketAddr,
    /// Any node of the cluster to join; `None` starts a new cluster with this node alone
    /// (or restarts a node that is a member already).
    pub join: Option<String>,
    /// Options of each region's database.
    pub data_options: DatabaseOptions,
    /// When replicas checkpoint and purge their logs.
    pub retention: LogRetention,
}

/// A running node. Dropping it without `shutdown` leaves the process to end it.
pub struct Node {
    inner: Arc<NodeInner>,
    address: SocketAddr,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    server: Option<tokio::task::JoinHandle<Result<(), tonic::transport::Error>>>,
}

impl std::fmt::Debug for Node {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Node")
            .field("id", &self.inner.id)
            .field("address", &self.address)
            .finish_non_exhaustive()
    }
}

struct NodeInner {
    id: NodeId,
    address: String,
    dir: PathBuf,
    regions: RwLock<HashMap<RegionId, Arc<Replica>>>,
}

impl Node {
    /// Starts the node: opens (or creates) its directory, starts its replicas, listens, and
    /// joins the cluster if asked to. Returns once it serves and, when joining, is a voter of
    /// the first region.
    pub async fn start(options: NodeOptions) -> Result<Node, Error> {
        if options.id == 0 {
            return Err(Error::Node("node ids start at 1".into()));
        }
        claim_directory(&options.dir, options.id)?;
        let listener = tokio::net::TcpListener::bind(options.listen)
            .await
            .map_err(|e| Error::Node(format!("cannot listen on {}: {e}", options.listen)))?;
        let address = listener
            .local_addr()
            .map_err(|e| Error::Node(format!("cannot read the listening address: {e}")))?;

        let log_dir = options.dir.join("log");
        let log_db = sift_lsm::Db::open(&log_dir, sift_lsm::Options::default()).map_err(|e| {
            Error::Data {
                path: log_dir.display().to_string(),
                detail: e.to_string(),
            }
        })?;
        let peers = Peers::new();
        let replica = Replica::start_with(
            options.id,
            FIRST_REGION,
            Arc::new(log_db),
            &region_dir(&options.dir, FIRST_REGION),
            options.data_options.clone(),
            peers.network(FIRST_REGION),
            tuned_region_config(options.retention)?,
        )
        .await?;
        let inner = Arc::new(NodeInner {
            id: options.id,
            address: address.to_string(),
            dir: options.dir.clone(),
            regions: RwLock::new(HashMap::from([(FIRST_REGION, Arc::new(replica))])),
        });

        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let service = NodeServer::new(Service {
            inner: Arc::clone(&inner),
        })
        .max_decoding_message_size(MESSAGE_BYTES_MAX)
        .max_encoding_message_size(MESSAGE_BYTES_MAX);
        // Raft messages and answers are small and latency-bound: no Nagle delay (the
        // server's own `tcp_nodelay` applies only to listeners it opens itself).
        let incoming = tokio_stream::wrappers::TcpListenerStream::new(listener).map(|stream| {
            if let Ok(stream) = &stream {
                let _ = stream.set_nodelay(true);
            }
            stream
        });
        let server = tokio::spawn(
            tonic::transport::Server::builder()
                .add_service(service)
                .serve_with_incoming_shutdown(incoming, async {
                    let _ = stopped.await;
                }),
        );
        let node = Node {
            inner,
            address,
            stop: Some(stop),
            server: Some(server),
        };
        let replica = node.replica(FIRST_REGION)?;
        let is_voter = {
            let metrics = replica.raft.metrics();
            let membership = metrics.borrow_watched().membership_config.clone();
            let is_voter = membership.voter_ids().any(|voter| voter == options.id);
            is_voter
        };
        match (&options.join, is_voter) {
            (_, true) => {}
            (None, false) => {
                let members = BTreeMap::from([(options.id, BasicNode::new(address.to_string()))]);
                if let Err(e) = replica.raft.initialize(members).await {
                    // A node restarted before it was told it is a voter has a log already.
                    if !matches!(
                        e.api_error(),
                        Some(openraft::error::InitializeError::NotAllowed(_))
                    ) {
                        return Err(Error::Raft(format!("cannot start a new cluster: {e}")));
                    }
                }
            }
            (Some(seed), false) => {
                join(
                    &Peers::new(),
                    seed,
                    FIRST_REGION,
                    options.id,
                    &address.to_string(),
                )
                .await?;
            }
        }
        Ok(node)
    }

    /// The node's id.
    pub fn id(&self) -> NodeId {
        self.inner.id
    }

    /// The address the node serves on.
    pub fn address(&self) -> SocketAddr {
        self.address
    }

    /// The node's replica of `region`.
    pub fn replica(&self, region: RegionId) -> Result<Arc<Replica>, Error> {
        self.inner
            .replica(region)
            .map_err(|e| Error::Raft(e.to_string()))
    }

    /// What `sift cluster status` shows of this node.
    pub fn status(&self) -> NodeStatus {
        self.inner.status()
    }

    /// Stops serving, then stops every replica (waiting until they let go of their storage).
    pub async fn shutdown(mut self) -> Result<(), Error> {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(server) = self.server.take() {
            match server.await {
                Ok(Ok(())) => {}
                Ok(Err(e)) => tracing::warn!("node {}: server stopped with {e}", self.inner.id),
                Err(e) => tracing::warn!("node {}: server task failed: {e}", self.inner.id),
            }
        }
        let replicas: Vec<Arc<Replica>> =
            self.inner.regions.write().drain().map(|(_, r)| r).collect();
        for replica in replicas {
            replica.shutdown().await?;
        }
        Ok(())
    }
}

/// The data directory of `region` under a node directory.
fn region_dir(node_dir: &Path, region: RegionId) -> PathBuf {
    node_dir.join("regions").join(region.to_string())
}

/// Creates the node directory, or checks that it is `id`'s.
fn claim_directory(dir: &Path, id: NodeId) -> Result<(), Error> {
    let path = dir.join(NODE_FILE);
    let described = || path.display().to_string();
    match std::fs::read_to_string(&path) {
        Ok(text) => match text.trim().parse::<NodeId>() {
            Ok(owner) if owner == id => Ok(()),
            Ok(owner) => Err(Error::Node(format!(
                "{} belongs to node {owner}, not node {id}",
                dir.display()
            ))),
            Err(_) => Err(Error::Data {
                path: described(),
                detail: format!("expected a node id, found {:?}", text.trim()),
            }),
        },
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            std::fs::create_dir_all(dir).map_err(|e| Error::Data {
                path: dir.display().to_string(),
                detail: e.to_string(),
            })?;
            let temporary = dir.join(format!("{NODE_FILE}.tmp"));
            let written = std::fs::write(&temporary, format!("{id}\n"))
                .and_then(|()| std::fs::File::open(&temporary)?.sync_all())
                .and_then(|()| std::fs::rename(&temporary, &path))
                .and_then(|()| std::fs::File::open(dir)?.sync_all());
            written.map_err(|e| Error::Data {
                path: described(),
                detail: e.to_string(),
            })
        }
        Err(e) => Err(Error::Data {
            path: described(),
            detail: e.to_string(),
        }),
    }
}

/// Asks the cluster at `seed` to make `node` (at `address`) a voter of `region`, following
/// the leader it is pointed to; retries while no leader is known or the leader is busy
/// changing membership, for up to a minute.
pub async fn join(
    peers: &Peers,
    seed: &str,
    region: RegionId,
    node: NodeId,
    address: &str,
) -> Result<(), Error> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    let mut target = seed.to_string();
    let mut last_failure = String::from("no answer yet");
    while tokio::time::Instant::now() < deadline {
        let request = JoinRequest {
            region,
            node,
            address: address.to_string(),
        };
        let answer = match peers.client(&target) {
            Ok(mut client) => tokio::time::timeout(Duration::from_secs(30), client.join(request))
                .await
                .map_err(|_| "no answer within 30 s".to_string())
                .and_then(|r| r.map_err(|status| status.to_string())),
            Err(e) => return Err(Error::Node(e)),
        };
        match answer.map(tonic::Response::into_inner) {
            Ok(Ok(())) => return Ok(()),
            Ok(Err(NodeError::NotLeader {
                leader_address: Some(leader),
                ..
            })) => {
                target = leader;
                continue;
            }
            Ok(Err(NodeError::BadRequest(reason))) => {
                return Err(Error::Node(format!("{seed} refused the join: {reason}")))
            }
            Ok(Err(e)) => last_failure = e.to_string(),
            Err(e) => {
                last_failure = format!("{target}: {e}");
                target = seed.to_string();
            }
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    Err(Error::Node(format!(
        "could not join the cluster through {seed} within 60 s: {last_failure}"
    )))
}

impl NodeInner {
    fn replica(&self, region: RegionId) -> Result<Arc<Replica>, NodeError> {
        self.regions
            .read()
            .get(&region)
            .cloned()
            .ok_or(NodeError::NoSuchRegion {
                node: self.id,
                region,
            })
    }

    fn unavailable(&self, region: RegionId, reason: impl ToString) -> NodeError {
        NodeError::Unavailable {
            node: self.id,
            region,
            reason: reason.to_string(),
        }
    }

    /// The not-leader answer, with the leader's address from the region's membership.
    fn not_leader(&self, replica: &Replica, leader: Option<NodeId>) -> NodeError {
        let metrics = replica.raft.metrics();
        let metrics = metrics.borrow_watched();
        let leader_address = leader.and_then(|leader| {
            metrics
                .membership_config
                .nodes()
                .find(|(id, _)| **id == leader)
                .map(|(_, node)| node.addr.clone())
        });
        NodeError::NotLeader {
            node: self.id,
            region: replica.region,
            leader,
            leader_address,
        }
    }

    fn answer(&self, replica: &Replica, error: Error) -> NodeError {
        match error {
            Error::NotLeader { leader, .. } => self.not_leader(replica, leader),
            other => self.unavailable(replica.region, other),
        }
    }

    fn status(&self) -> NodeStatus {
        let mut replicas: Vec<Arc<Replica>> = self.regions.read().values().cloned().collect();
        replicas.sort_by_key(|r| r.region);
        let regions = replicas
            .iter()
            .map(|replica| {
                let metrics = replica.raft.metrics();
                let metrics = metrics.borrow_watched();
                let membership = metrics.membership_config.membership();
                let voters: BTreeSet<NodeId> = membership.voter_ids().collect();
                RegionStatus {
                    region: replica.region,
                    role: match metrics.state {
                        ServerState::Leader => "leader",
                        ServerState::Follower => "follower",
                        ServerState::Candidate => "candidate",
                        ServerState::Learner => "learner",
                        ServerState::Shutdown => "shutdown",
                    }
                    .to_string(),
                    term: metrics.current_term,
                    leader: metrics.current_leader,
                    last_log_index: metrics.last_log_index,
                    applied_index: metrics.last_applied.map(|id| id.index()),
                    snapshot_index: metrics.snapshot.map(|id| id.index()),
                    members: membership
                        .nodes()
                        .map(|(id, node)| (*id, node.addr.clone(), voters.contains(id)))
                        .collect(),
                    matched: metrics
                        .replication
                        .iter()
                        .flatten()
                        .map(|(id, matched)| (*id, matched.map(|m| m.index())))
                        .collect(),
                    data_bytes: directory_bytes(&region_dir(&self.dir, replica.region)),
                }
            })
            .collect();
        NodeStatus {
            node: self.id,
            address: self.address.clone(),
            regions,
        }
    }
}

/// Bytes of the files under `dir` (0 where it cannot be read: a status figure, not a check).
fn directory_bytes(dir: &Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .flatten()
        .map(|entry| match entry.file_type() {
            Ok(kind) if kind.is_dir() => directory_bytes(&entry.path()),
            Ok(_) => entry.metadata().map_or(0, |m| m.len()),
            Err(_) => 0,
        })
        .sum()
}

/// Numbers the snapshot files being received, so that two streams never share one.
static RECEIVING: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// Writes a snapshot stream to `path`: `first` then every chunk, checked against `total`
/// bytes. The outer error is the node's (disk); the inner one the sender's (a bad stream).
async fn receive_archive(
    path: &Path,
    total: u64,
    first: Vec<u8>,
    stream: &mut tonic::Streaming<SnapshotChunk>,
) -> std::io::Result<Result<crate::snapshot_file::SnapshotArchive, NodeError>> {
    use tokio::io::AsyncWriteExt;
    let refuse = |reason: String| Ok(Err(NodeError::BadRequest(reason)));
    let mut file = tokio::fs::File::create(path).await?;
    let mut received = first.len() as u64;
    if received > total {
        return refuse(format!(
            "snapshot stream longer than its announced {total} bytes"
        ));
    }
    file.write_all(&first).await?;
    while let Some(chunk) = stream.next().await {
        let chunk = match chunk {
            Ok(chunk) => chunk,
            Err(status) => return refuse(format!("snapshot stream failed: {}", status.message())),
        };
        if chunk.header.is_some() {
            return refuse("a snapshot stream has one header".into());
        }
        received += chunk.data.len() as u64;
        if received > total {
            return refuse(format!(
                "snapshot stream longer than its announced {total} bytes"
            ));
        }
        file.write_all(&chunk.data).await?;
    }
    if received != total {
        return refuse(format!(
            "snapshot stream cut short: {received} of {total} bytes"
        ));
    }
    file.sync_all().await?;
    drop(file);
    Ok(Ok(crate::snapshot_file::SnapshotArchive::open(path)?))
}

/// Runs a secondary-index query on a region's database. Errors are the request's (unknown
/// collection or index, a value that does not parse as the index's type).
fn run_query(database: &sift_index::Database, request: &QueryRequest) -> QueryReply {
    let bad = |e: &dyn std::fmt::Display| NodeError::BadRequest(e.to_string());
    let attr_type = database
        .index_type(&request.collection, &request.index)
        .map_err(|e| bad(&e))?;
    let parse = |what: &str, text: &str| {
        sift_index::AttrValue::parse_cli(text, attr_type)
            .map_err(|e| NodeError::BadRequest(format!("{what}: {e}")))
    };
    let limit = Some(request.limit as usize);
    let (collection, index) = (&request.collection, &request.index);
    let result = match &request.query {
        Query::Lookup { value } => {
            database.lookup(collection, index, &parse("value", value)?, limit)
        }
        Query::Range { from, to } => database.range(
            collection,
            index,
            &parse("from", from)?,
            &parse("to", to)?,
            limit,
        ),
        Query::Within { bbox } => {
            let geo_box = sift_index::GeoBox::parse(bbox).map_err(|e| bad(&e))?;
            database.within(collection, index, &geo_box, limit)
        }
    };
    let result = result.map_err(|e| bad(&e))?;
    Ok(result
        .hits
        .into_iter()
        .map(|hit| Document {
            pk: hit.pk,
            json: hit.doc,
        })
        .collect())
}

/// The gRPC service of a node.
struct Service {
    inner: Arc<NodeInner>,
}

type Answer<T> = Result<tonic::Response<T>, tonic::Status>;

#[allow(clippy::unnecessary_wraps)] // every handler's answer is a `Result` for tonic
fn answer<T>(value: T) -> Answer<T> {
    Ok(tonic::Response::new(value))
}

#[tonic::async_trait]
impl NodeService for Service {
    async fn append_entries(&self, request: tonic::Request<AppendRequest>) -> Answer<AppendReply> {
        let AppendRequest { region, request } = request.into_inner();
        let reply = match self.inner.replica(region) {
            Ok(replica) => replica
                .raft
                .append_entries(request)
                .await
                .map_err(|e| self.inner.unavailable(region, e)),
            Err(e) => Err(e),
        };
        answer(reply)
    }

    async fn vote(&self, request: tonic::Request<VoteCall>) -> Answer<VoteReply> {
        let VoteCall {
            region,
            pre_vote,
            request,
        } = request.into_inner();
        let reply = match self.inner.replica(region) {
            Ok(replica) if pre_vote => replica.raft.pre_vote(request).await,
            Ok(replica) => replica.raft.vote(request).await,
            Err(e) => return answer(Err(e)),
        };
        answer(reply.map_err(|e| self.inner.unavailable(region, e)))
    }

    async fn install_snapshot(
        &self,
        request: tonic::Request<tonic::Streaming<SnapshotChunk>>,
    ) -> Answer<SnapshotReply> {
        let mut stream = request.into_inner();
        let first = match stream.next().await {
            Some(chunk) => chunk?,
            None => return answer(Err(NodeError::BadRequest("empty snapshot stream".into()))),
        };
        let Some(header) = first.header else {
            return answer(Err(NodeError::BadRequest(
                "a snapshot stream must start with its header".into(),
            )));
        };
        let replica = match self.inner.replica(header.region) {
            Ok(replica) => replica,
            Err(e) => return answer(Err(e)),
        };
        // The archive goes to a file under the region's data root as it arrives, its
        // announced size checked chunk by chunk; only a complete one is installed.
        let path = region_dir(&self.inner.dir, header.region).join(format!(
            "snapshot.receiving-{}-{}.tar",
            std::process::id(),
            RECEIVING.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
        ));
        let received = receive_archive(&path, header.total_bytes, first.data, &mut stream).await;
        let reply = match received {
            Ok(Ok(archive)) => {
                let snapshot =
                    openraft::alias::SnapshotOf::<TypeConfig, crate::types::SnapshotData> {
                        meta: header.meta,
                        snapshot: archive,
                    };
                replica
                    .raft
                    .install_full_snapshot(header.vote, snapshot)
                    .await
                    .map_err(|e| self.inner.unavailable(header.region, e))
            }
            Ok(Err(refusal)) => Err(refusal),
            Err(e) => Err(self.inner.unavailable(
                header.region,
                format!("cannot store the snapshot at {}: {e}", path.display()),
            )),
        };
        // Installed (the state machine keeps its own link or copy) or refused: the received
        // file is no longer needed.
        let _ = tokio::fs::remove_file(&path).await;
        answer(reply)
    }

    async fn write(&self, request: tonic::Request<WriteRequest>) -> Answer<WriteReply> {
        let WriteRequest { region, command } = request.into_inner();
        let replica = match self.inner.replica(region) {
            Ok(replica) => replica,
            Err(e) => return answer(Err(e)),
        };
        let reply = replica
            .propose(command)
            .await
            .map_err(|e| self.inner.answer(&replica, e));
        answer(reply)
    }

    async fn read(&self, request: tonic::Request<ReadRequest>) -> Answer<ReadReply> {
        let ReadRequest {
            region,
            collection,
            pk,
            consistency,
        } = request.into_inner();
        let replica = match self.inner.replica(region) {
            Ok(replica) => replica,
            Err(e) => return answer(Err(e)),
        };
        let reply = match replica.get(&collection, &pk, consistency).await {
            Ok(hit) => Ok(hit.map(|hit| Document {
                pk: hit.pk,
                json: hit.doc,
            })),
            // A read of a collection the region does not have is the client's mistake.
            Err(Error::Read(reason)) => Err(NodeError::BadRequest(reason)),
            Err(e) => Err(self.inner.answer(&replica, e)),
        };
        answer(reply)
    }

    async fn query(&self, request: tonic::Request<QueryRequest>) -> Answer<QueryReply> {
        let request = request.into_inner();
        if request.limit > QUERY_LIMIT_MAX {
            return answer(Err(NodeError::BadRequest(format!(
                "a query returns at most {QUERY_LIMIT_MAX} documents, not {}",
                request.limit
            ))));
        }
        let replica = match self.inner.replica(request.region) {
            Ok(replica) => replica,
            Err(e) => return answer(Err(e)),
        };
        let database = match replica.readable(request.consistency).await {
            Ok(database) => database,
            Err(e) => return answer(Err(self.inner.answer(&replica, e))),
        };
        // The query runs on a blocking thread: it reads the engine, which may wait on disk.
        let reply = tokio::task::spawn_blocking(move || run_query(&database, &request))
            .await
            .unwrap_or_else(|e| Err(NodeError::BadRequest(format!("the query failed: {e}"))));
        answer(reply)
    }

    async fn join(&self, request: tonic::Request<JoinRequest>) -> Answer<JoinReply> {
        let JoinRequest {
            region,
            node,
            address,
        } = request.into_inner();
        if node == 0 {
            return answer(Err(NodeError::BadRequest("node ids start at 1".into())));
        }
        let replica = match self.inner.replica(region) {
            Ok(replica) => replica,
            Err(e) => return answer(Err(e)),
        };
        if !replica.is_leader() {
            let leader = replica.raft.current_leader().await;
            return answer(Err(self.inner.not_leader(&replica, leader)));
        }
        let (is_voter, known_address) = {
            let metrics = replica.raft.metrics();
            let metrics = metrics.borrow_watched();
            let membership = &metrics.membership_config;
            let known_address = membership
                .nodes()
                .find(|(id, _)| **id == node)
                .map(|(_, n)| n.addr.clone());
            let is_voter = membership.voter_ids().any(|v| v == node);
            (is_voter, known_address)
        };
        if let Some(known) = &known_address {
            if *known != address {
                return answer(Err(NodeError::BadRequest(format!(
                    "node {node} is a member at {known}, not at {address}"
                ))));
            }
        }
        if is_voter {
            return answer(Ok(()));
        }
        let unavailable = |e: &dyn std::fmt::Display| self.inner.unavailable(region, e);
        if known_address.is_none() {
            if let Err(e) = replica
                .raft
                .add_learner(node, BasicNode::new(address), true)
                .await
            {
                return answer(Err(unavailable(&e)));
            }
        }
        let voters = ChangeMembers::AddVoterIds(BTreeSet::from([node]));
        answer(
            replica
                .raft
                .change_membership(voters, false)
                .await
                .map(|_| ())
                .map_err(|e| unavailable(&e)),
        )
    }

    async fn status(&self, _request: tonic::Request<StatusRequest>) -> Answer<StatusReply> {
        answer(self.inner.status())
    }
}
