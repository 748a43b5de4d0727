//! The routing client: sends each operation to its region's leader, learns the leader from
//! not-leader answers, and moves on to other nodes when one cannot be reached. Used by tests,
//! the benchmark and the CLI's `--cluster` commands.
//!
//! Retries are only made where the request certainly did nothing: a node that answered it
//! does not lead (nothing was proposed), or a connection that could not be opened (nothing
//! was sent). A write whose connection broke after sending, or that got no answer in time,
//! may or may not have been applied: the client says so ([`ClientError::OutcomeUnknown`])
//! instead of sending it again, since a replayed write could overwrite a later one.

use crate::network::grpc::Peers;
use crate::node::FIRST_REGION;
use crate::rpc::messages::{
    Document, NodeError, NodeStatus, Query, QueryRequest, ReadRequest, StatusRequest, WriteRequest,
};
use crate::rpc::NodeClient;
use crate::types::{Command, CommandResult, RegionId};
use crate::ReadConsistency;
use parking_lot::Mutex;
use std::time::Duration;
use tokio::time::Instant;
use tonic::transport::Channel;

/// Why an operation failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ClientError {
    /// The write may or may not have been applied: the node was reached, then the call
    /// failed or timed out before it answered.
    #[error("outcome unknown: {0}")]
    OutcomeUnknown(String),
    /// No node could serve the operation before the deadline; nothing was applied by it.
    #[error("no node could serve the request within {waited:?}: {last}")]
    Unavailable { waited: Duration, last: String },
    /// The node at this address did not answer.
    #[error("{address}: {detail}")]
    Unreachable { address: String, detail: String },
    /// The cluster refused the request itself.
    #[error("{0}")]
    Refused(NodeError),
    /// The address list was unusable.
    #[error("{0}")]
    Config(String),
}

/// A client of a cluster, starting from the addresses of some of its nodes.
#[derive(Debug)]
pub struct ClusterClient {
    peers: Peers,
    nodes: Mutex<Vec<String>>,
    leader: Mutex<Option<String>>,
    deadline: Duration,
}

/// Whether the failed call certainly never reached the node (the connection was not made).
fn never_sent(status: &tonic::Status) -> bool {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(status);
    while let Some(error) = source {
        if error.downcast_ref::<tonic::ConnectError>().is_some() {
            return true;
        }
        source = error.source();
    }
    false
}

enum Attempt<T> {
    Done(T),
    /// Nothing happened; try `next` (or another node), with this reason if it is the last.
    Retry {
        next: Option<String>,
        reason: String,
    },
}

impl ClusterClient {
    /// A client that starts from `nodes` (`host:port`), giving up on an operation after
    /// `deadline` (10 s if `None`).
    pub fn new(
        nodes: Vec<String>,
        deadline: Option<Duration>,
    ) -> Result<ClusterClient, ClientError> {
        if nodes.is_empty() {
            return Err(ClientError::Config("no node address given".into()));
        }
        Ok(ClusterClient {
            peers: Peers::new(),
            nodes: Mutex::new(nodes),
            leader: Mutex::new(None),
            deadline: deadline.unwrap_or(Duration::from_secs(10)),
        })
    }

    /// The nodes to try, the last known leader first.
    fn candidates(&self) -> Vec<String> {
        let mut candidates = Vec::new();
        if let Some(leader) = self.leader.lock().clone() {
            candidates.push(leader);
        }
        for node in self.nodes.lock().iter() {
            if !candidates.contains(node) {
                candidates.push(node.clone());
            }
        }
        candidates
    }

    /// After `address` failed to answer: it is no longer taken for the leader, and it is
    /// tried last from now on (a stopped or cut-off node would cost a timeout each time).
    fn demote(&self, address: &str) {
        let mut leader = self.leader.lock();
        if leader.as_deref() == Some(address) {
            *leader = None;
        }
        let mut nodes = self.nodes.lock();
        if let Some(position) = nodes.iter().position(|n| n == address) {
            let node = nodes.remove(position);
            nodes.push(node);
        }
    }

    fn learn(&self, address: &str) {
        let mut nodes = self.nodes.lock();
        if !nodes.iter().any(|n| n == address) {
            nodes.push(address.to_string());
        }
    }

    /// Runs `attempt` on nodes in turn until one does it, following leader hints, backing
    /// off a little after each round of failures, until the deadline.
    async fn run<T, F, Fut>(&self, mut attempt: F) -> Result<T, ClientError>
    where
        F: FnMut(String) -> Fut,
        Fut: std::future::Future<Output = Result<Attempt<T>, ClientError>>,
    {
        let started = Instant::now();
        let mut last = String::from("no node tried");
        let mut backoff = Duration::from_millis(10);
        loop {
            let mut queue = self.candidates();
            let mut tried = 0;
            while let Some(address) = (!queue.is_empty()).then(|| queue.remove(0)) {
                if started.elapsed() >= self.deadline || tried > 16 {
                    break;
                }
                tried += 1;
                match attempt(address.clone()).await? {
                    Attempt::Done(value) => {
                        *self.leader.lock() = Some(address);
                        return Ok(value);
                    }
                    Attempt::Retry { next, reason } => {
                        last = format!("{address}: {reason}");
                        if let Some(next) = next {
                            self.learn(&next);
                            *self.leader.lock() = Some(next.clone());
                            queue.retain(|a| *a != next);
                            queue.insert(0, next);
                        } else if self.leader.lock().as_deref() == Some(address.as_str()) {
                            *self.leader.lock() = None;
                        }
                    }
                }
            }
            if started.elapsed() >= self.deadline {
                return Err(ClientError::Unavailable {
                    waited: started.elapsed(),
                    last,
                });
            }
            tokio::time::sleep(backoff).await;
            backoff = (backoff * 2).min(Duration::from_millis(200));
        }
    }

    /// What to do after a node answered with `error`: retry where it points, or give up.
    fn after<T>(error: NodeError) -> Result<Attempt<T>, ClientError> {
        match error {
            NodeError::NotLeader { leader_address, .. } => Ok(Attempt::Retry {
                reason: "not the leader".into(),
                next: leader_address,
            }),
            NodeError::NoSuchRegion { .. } => Ok(Attempt::Retry {
                next: None,
                reason: error.to_string(),
            }),
            other => Err(ClientError::Refused(other)),
        }
    }

    /// Proposes `command` to the first region's leader; its result once applied there.
    pub async fn write(&self, command: Command) -> Result<CommandResult, ClientError> {
        self.write_to(FIRST_REGION, command).await
    }

    /// Proposes `command` to `region`'s leader.
    pub async fn write_to(
        &self,
        region: RegionId,
        command: Command,
    ) -> Result<CommandResult, ClientError> {
        let deadline = self.deadline;
        self.run(|address| {
            let command = command.clone();
            async move {
                let mut client = self.peers.client(&address).map_err(ClientError::Config)?;
                let request = WriteRequest { region, command };
                match tokio::time::timeout(deadline, client.write(request)).await {
                    Err(_) => {
                        self.demote(&address);
                        Err(ClientError::OutcomeUnknown(format!(
                            "{address}: no answer within {deadline:?}"
                        )))
                    }
                    Ok(Err(status)) if never_sent(&status) => {
                        self.demote(&address);
                        Ok(Attempt::Retry {
                            next: None,
                            reason: status.message().to_string(),
                        })
                    }
                    Ok(Err(status)) => {
                        self.demote(&address);
                        Err(ClientError::OutcomeUnknown(format!("{address}: {status}")))
                    }
                    Ok(Ok(reply)) => match reply.into_inner() {
                        Ok(result) => Ok(Attempt::Done(result)),
                        // A failure after proposing (the leader stepped down or stopped
                        // meanwhile) leaves the entry possibly committed.
                        Err(NodeError::Unavailable { reason, .. }) => {
                            Err(ClientError::OutcomeUnknown(format!("{address}: {reason}")))
                        }
                        Err(e) => Self::after(e),
                    },
                }
            }
        })
        .await
    }

    /// The document with primary key `pk` in `collection`, read as `consistency` says (from
    /// the leader, or for `Local` from whichever node answers first).
    pub async fn get(
        &self,
        collection: &str,
        pk: &[u8],
        consistency: ReadConsistency,
    ) -> Result<Option<Document>, ClientError> {
        self.read_with(|mut client| {
            let request = ReadRequest {
                region: FIRST_REGION,
                collection: collection.to_string(),
                pk: pk.to_vec(),
                consistency,
            };
            async move { client.read(request).await }
        })
        .await
    }

    /// The newest `limit` documents (at most `QUERY_LIMIT_MAX`) that `query` finds with
    /// `index` of `collection`, read as `consistency` says.
    pub async fn query(
        &self,
        collection: &str,
        index: &str,
        query: Query,
        limit: u32,
        consistency: ReadConsistency,
    ) -> Result<Vec<Document>, ClientError> {
        self.read_with(|mut client| {
            let request = QueryRequest {
                region: FIRST_REGION,
                collection: collection.to_string(),
                index: index.to_string(),
                query: query.clone(),
                limit,
                consistency,
            };
            async move { client.query(request).await }
        })
        .await
    }

    /// Runs a read `call` on nodes in turn until one answers. A read changes nothing, so any
    /// failure can be retried elsewhere; each attempt gets a third of the deadline, so a node
    /// that stopped answering costs one attempt, not the whole read.
    async fn read_with<T, F, Fut>(&self, call: F) -> Result<T, ClientError>
    where
        F: Fn(NodeClient<Channel>) -> Fut,
        Fut: std::future::Future<
            Output = Result<tonic::Response<Result<T, NodeError>>, tonic::Status>,
        >,
    {
        let deadline = self.deadline / 3;
        let call = &call;
        self.run(|address| async move {
            let client = self.peers.client(&address).map_err(ClientError::Config)?;
            match tokio::time::timeout(deadline, call(client)).await {
                Err(_) => {
                    self.demote(&address);
                    Ok(Attempt::Retry {
                        next: None,
                        reason: format!("no answer within {deadline:?}"),
                    })
                }
                Ok(Err(status)) => {
                    self.demote(&address);
                    Ok(Attempt::Retry {
                        next: None,
                        reason: status.message().to_string(),
                    })
                }
                Ok(Ok(reply)) => match reply.into_inner() {
                    Ok(value) => Ok(Attempt::Done(value)),
                    Err(NodeError::Unavailable { reason, .. }) => {
                        Ok(Attempt::Retry { next: None, reason })
                    }
                    Err(e) => Self::after(e),
                },
            }
        })
        .await
    }

    /// The status of the node at `address`.
    pub async fn status_of(&self, address: &str) -> Result<NodeStatus, ClientError> {
        let mut client = self.peers.client(address).map_err(ClientError::Config)?;
        match tokio::time::timeout(self.deadline, client.status(StatusRequest {})).await {
            Err(_) => Err(ClientError::Unreachable {
                address: address.to_string(),
                detail: format!("no answer within {:?}", self.deadline),
            }),
            Ok(Err(status)) => Err(ClientError::Unreachable {
                address: address.to_string(),
                detail: status.message().to_string(),
            }),
            Ok(Ok(reply)) => Ok(reply.into_inner()),
        }
    }

    /// The status of every node the first region's membership names (as the first node that
    /// answers knows it), each with its own answer or why it gave none.
    pub async fn cluster_status(
        &self,
    ) -> Result<Vec<(String, Result<NodeStatus, ClientError>)>, ClientError> {
        let mut first = None;
        let mut last = String::from("no node tried");
        for address in self.candidates() {
            match self.status_of(&address).await {
                Ok(status) => {
                    first = Some(status);
                    break;
                }
                Err(e) => last = e.to_string(),
            }
        }
        let Some(first) = first else {
            return Err(ClientError::Unavailable {
                waited: self.deadline,
                last,
            });
        };
        let mut members: Vec<String> = first
            .regions
            .iter()
            .flat_map(|r| r.members.iter().map(|(_, address, _)| address.clone()))
            .collect();
        members.sort();
        members.dedup();
        if !members.contains(&first.address) {
            members.insert(0, first.address.clone());
        }
        let mut statuses = Vec::new();
        for address in members {
            if address == first.address {
                statuses.push((address, Ok(first.clone())));
            } else {
                let status = self.status_of(&address).await;
                statuses.push((address, status));
            }
        }
        Ok(statuses)
    }
}
