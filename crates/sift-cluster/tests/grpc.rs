//! Nodes on loopback gRPC, in one process: the routing client, joining, and a peer sending
//! bad input (malformed, oversized or inconsistent messages), which gets a clear refusal
//! while the node goes on serving.

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

use bytes::{Buf, BufMut};
use sift_cluster::rpc::messages::{
    JoinRequest, NodeError, SnapshotChunk, SnapshotHeader, StatusRequest,
};
use sift_cluster::rpc::{NodeClient, MESSAGE_BYTES_MAX};
use sift_cluster::{
    ClusterClient, Command, CommandResult, LogRetention, Node, NodeOptions, ReadConsistency,
};
use std::path::Path;
use std::time::Duration;
use tonic::codec::{Codec, DecodeBuf, Decoder, EncodeBuf, Encoder};
use tonic::codegen::http::uri::PathAndQuery;

fn options(dir: &Path, id: u64, join: Option<String>) -> NodeOptions {
    NodeOptions {
        id,
        dir: dir.join(format!("node-{id}")),
        listen: "127.0.0.1:0".parse().unwrap(),
        join,
        data_options: sift_index::DatabaseOptions::default(),
        retention: LogRetention::default(),
    }
}

async fn three_nodes(dir: &Path) -> Vec<Node> {
    let first = Node::start(options(dir, 1, None)).await.unwrap();
    let seed = first.address().to_string();
    let second = Node::start(options(dir, 2, Some(seed.clone())))
        .await
        .unwrap();
    let third = Node::start(options(dir, 3, Some(seed))).await.unwrap();
    vec![first, second, third]
}

/// Sends bytes as they are.
#[derive(Debug, Default, Clone)]
struct RawCodec;

impl Codec for RawCodec {
    type Encode = Vec<u8>;
    type Decode = Vec<u8>;
    type Encoder = RawCodec;
    type Decoder = RawCodec;
    fn encoder(&mut self) -> RawCodec {
        RawCodec
    }
    fn decoder(&mut self) -> RawCodec {
        RawCodec
    }
}

impl Encoder for RawCodec {
    type Item = Vec<u8>;
    type Error = tonic::Status;
    fn encode(
        &mut self,
        item: Vec<u8>,
        destination: &mut EncodeBuf<'_>,
    ) -> Result<(), tonic::Status> {
        destination.put_slice(&item);
        Ok(())
    }
}

impl Decoder for RawCodec {
    type Item = Vec<u8>;
    type Error = tonic::Status;
    fn decode(&mut self, source: &mut DecodeBuf<'_>) -> Result<Option<Vec<u8>>, tonic::Status> {
        Ok(Some(source.copy_to_bytes(source.remaining()).to_vec()))
    }
}

async fn raw_call(
    address: &str,
    method: &'static str,
    body: Vec<u8>,
) -> Result<Vec<u8>, tonic::Status> {
    let channel = tonic::transport::Endpoint::from_shared(format!("http://{address}"))
        .unwrap()
        .connect()
        .await
        .unwrap();
    let mut grpc = tonic::client::Grpc::new(channel).max_encoding_message_size(usize::MAX);
    grpc.ready().await.unwrap();
    grpc.unary(
        tonic::Request::new(body),
        PathAndQuery::from_static(method),
        RawCodec,
    )
    .await
    .map(tonic::Response::into_inner)
}

async fn client_of(address: &str) -> NodeClient<tonic::transport::Channel> {
    let channel = tonic::transport::Endpoint::from_shared(format!("http://{address}"))
        .unwrap()
        .connect()
        .await
        .unwrap();
    NodeClient::new(channel)
}

async fn leader_index(nodes: &[Node]) -> usize {
    for _ in 0..200 {
        if let Some(index) = nodes.iter().position(|n| n.replica(1).unwrap().is_leader()) {
            return index;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("no leader");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_routing_client_follows_the_leader_from_any_node_and_reads_are_served_by_it() {
    let dir = tempfile::tempdir().unwrap();
    let nodes = three_nodes(dir.path()).await;
    let leader = leader_index(&nodes).await;
    let follower = (0..3).find(|&i| i != leader).unwrap();
    // Knowing only a follower, the client learns the leader from its not-leader answer.
    let client = ClusterClient::new(vec![nodes[follower].address().to_string()], None).unwrap();
    let created = client
        .write(Command::CreateCollection {
            name: "docs".into(),
            pk_path: "id".into(),
        })
        .await
        .unwrap();
    assert_eq!(created, CommandResult::Applied);
    let written = client
        .write(Command::Put {
            collection: "docs".into(),
            document: br#"{"id":"a","n":1}"#.to_vec(),
        })
        .await
        .unwrap();
    assert!(
        matches!(written, CommandResult::Written { .. }),
        "{written:?}"
    );
    let refused = client
        .write(Command::Put {
            collection: "docs".into(),
            document: b"{not json".to_vec(),
        })
        .await
        .unwrap();
    assert!(
        matches!(refused, CommandResult::Rejected { .. }),
        "{refused:?}"
    );
    let read = client
        .get("docs", b"a", ReadConsistency::Linearizable)
        .await
        .unwrap();
    assert_eq!(read.unwrap().json, br#"{"id":"a","n":1}"#.to_vec());
    let missing = client
        .get("nope", b"a", ReadConsistency::Linearizable)
        .await;
    assert!(
        matches!(&missing, Err(sift_cluster::ClientError::Refused(NodeError::BadRequest(reason))) if reason.contains("nope")),
        "{missing:?}"
    );

    // Straight to the follower: a linearizable read is refused with the leader's address.
    let mut direct = client_of(&nodes[follower].address().to_string()).await;
    let answer = direct
        .read(sift_cluster::rpc::messages::ReadRequest {
            region: 1,
            collection: "docs".into(),
            pk: b"a".to_vec(),
            consistency: ReadConsistency::Linearizable,
        })
        .await
        .unwrap()
        .into_inner();
    match answer {
        Err(NodeError::NotLeader { leader_address, .. }) => {
            assert_eq!(leader_address, Some(nodes[leader].address().to_string()));
        }
        other => panic!("expected not-leader, got {other:?}"),
    }
    let status = direct.status(StatusRequest {}).await.unwrap().into_inner();
    assert_eq!(status.node, nodes[follower].id());
    assert_eq!(status.regions[0].members.len(), 3);
    assert!(status.regions[0].members.iter().all(|(_, _, voter)| *voter));
    for node in nodes {
        node.shutdown().await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn joining_is_idempotent_and_a_conflicting_or_bad_join_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let nodes = three_nodes(dir.path()).await;
    let leader = leader_index(&nodes).await;
    let mut client = client_of(&nodes[leader].address().to_string()).await;
    let join = |node: u64, address: String| JoinRequest {
        region: 1,
        node,
        address,
    };
    let again = client
        .join(join(2, nodes[1].address().to_string()))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(again, Ok(()));
    let moved = client
        .join(join(2, "127.0.0.1:1".into()))
        .await
        .unwrap()
        .into_inner();
    assert!(
        matches!(&moved, Err(NodeError::BadRequest(reason)) if reason.contains("is a member at")),
        "{moved:?}"
    );
    let zero = client
        .join(join(0, "127.0.0.1:1".into()))
        .await
        .unwrap()
        .into_inner();
    assert!(matches!(zero, Err(NodeError::BadRequest(_))), "{zero:?}");
    let unknown = client
        .join(JoinRequest {
            region: 9,
            node: 4,
            address: "127.0.0.1:1".into(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        unknown,
        Err(NodeError::NoSuchRegion {
            node: nodes[leader].id(),
            region: 9
        })
    );

    // A directory belongs to the node that created it.
    let taken = Node::start(NodeOptions {
        id: 7,
        ..options(dir.path(), 1, None)
    })
    .await;
    let error = taken.err().map(|e| e.to_string()).unwrap_or_default();
    assert!(error.contains("belongs to node 1, not node 7"), "{error}");
    for node in nodes {
        node.shutdown().await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_peer_sending_malformed_oversized_or_inconsistent_messages_is_refused_and_the_node_goes_on(
) {
    let dir = tempfile::tempdir().unwrap();
    let nodes = three_nodes(dir.path()).await;
    let address = nodes[0].address().to_string();

    let garbage = raw_call(&address, "/sift.cluster.Node/AppendEntries", vec![0xff; 64]).await;
    let status = garbage.unwrap_err();
    assert_eq!(status.code(), tonic::Code::InvalidArgument, "{status:?}");
    assert!(
        status.message().contains("malformed 64-byte message"),
        "{status:?}"
    );
    // A valid message with bytes after it.
    let mut trailing = postcard::to_stdvec(&StatusRequest {}).unwrap();
    trailing.extend_from_slice(b"xyz");
    let status = raw_call(&address, "/sift.cluster.Node/Status", trailing)
        .await
        .unwrap_err();
    assert!(
        status.message().contains("3 bytes after its end"),
        "{status:?}"
    );
    let status = raw_call(
        &address,
        "/sift.cluster.Node/Write",
        vec![0; MESSAGE_BYTES_MAX + 1],
    )
    .await
    .unwrap_err();
    assert_eq!(status.code(), tonic::Code::OutOfRange, "{status:?}");
    let status = raw_call(&address, "/sift.cluster.Node/NoSuchMethod", vec![])
        .await
        .unwrap_err();
    assert_eq!(status.code(), tonic::Code::Unimplemented, "{status:?}");

    let mut client = client_of(&address).await;
    let header = |total_bytes| SnapshotHeader {
        region: 1,
        vote: openraft::Vote::new(1, 1),
        meta: openraft::alias::SnapshotMetaOf::<sift_cluster::TypeConfig>::default(),
        total_bytes,
    };
    let chunk = |header, data: &[u8]| SnapshotChunk {
        header,
        data: data.to_vec(),
    };
    let cases = [
        (vec![chunk(None, b"abc")], "must start with its header"),
        (
            vec![chunk(Some(header(10)), b"abcde")],
            "cut short: 5 of 10 bytes",
        ),
        (
            vec![chunk(Some(header(4)), b"abc"), chunk(None, b"de")],
            "longer than its announced 4 bytes",
        ),
        (
            vec![
                chunk(Some(header(6)), b"abc"),
                chunk(Some(header(6)), b"def"),
            ],
            "one header",
        ),
    ];
    for (chunks, expected) in cases {
        let answer = client
            .install_snapshot(futures_util::stream::iter(chunks))
            .await
            .unwrap()
            .into_inner();
        match answer {
            Err(NodeError::BadRequest(reason)) => assert!(reason.contains(expected), "{reason}"),
            other => panic!("expected a refusal containing {expected:?}, got {other:?}"),
        }
    }

    // Nothing of that reached the region: it still takes writes and every node agrees.
    let writer = ClusterClient::new(vec![address.clone()], None).unwrap();
    writer
        .write(Command::CreateCollection {
            name: "docs".into(),
            pk_path: "id".into(),
        })
        .await
        .unwrap();
    let written = writer
        .write(Command::Put {
            collection: "docs".into(),
            document: br#"{"id":"z"}"#.to_vec(),
        })
        .await
        .unwrap();
    assert!(
        matches!(written, CommandResult::Written { .. }),
        "{written:?}"
    );
    for node in &nodes {
        let local = node.replica(1).unwrap();
        for _ in 0..200 {
            if local
                .get("docs", b"z", ReadConsistency::Local)
                .await
                .ok()
                .flatten()
                .is_some()
            {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert!(local
            .get("docs", b"z", ReadConsistency::Local)
            .await
            .unwrap()
            .is_some());
    }
    for node in nodes {
        node.shutdown().await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn indexes_are_created_on_every_replica_and_queries_match_a_brute_force_filter() {
    use sift_cluster::rpc::messages::{Query, QUERY_LIMIT_MAX};
    use sift_cluster::IndexDefinition;
    let dir = tempfile::tempdir().unwrap();
    let nodes = three_nodes(dir.path()).await;
    let client = ClusterClient::new(vec![nodes[0].address().to_string()], None).unwrap();
    client
        .write(Command::CreateCollection {
            name: "docs".into(),
            pk_path: "id".into(),
        })
        .await
        .unwrap();
    // 300 documents in batches; one invalid document in the middle of a batch.
    let mut model: Vec<(u32, i64)> = Vec::new(); // (id, user) in write order
    for batch in 0..3u32 {
        let mut documents = Vec::new();
        for i in 0..100u32 {
            let id = batch * 100 + i;
            let user = i64::from((id * 7) % 13);
            documents.push(format!(r#"{{"id":"{id:04}","user":{user}}}"#).into_bytes());
            model.push((id, user));
        }
        if batch == 1 {
            documents.insert(50, b"{\"user\":1}".to_vec());
        }
        let result = client
            .write(Command::PutMany {
                collection: "docs".into(),
                documents,
            })
            .await
            .unwrap();
        match result {
            CommandResult::Batch { written, rejected } => {
                assert_eq!(written, 100);
                let expected: Vec<u32> = if batch == 1 { vec![50] } else { vec![] };
                assert_eq!(
                    rejected.iter().map(|(p, _)| *p).collect::<Vec<_>>(),
                    expected
                );
                assert!(
                    rejected.iter().all(|(_, reason)| reason.contains("id")),
                    "{rejected:?}"
                );
            }
            other => panic!("{other:?}"),
        }
    }
    let definition = |kind: &str| IndexDefinition {
        name: "by_user".into(),
        path: "user".into(),
        attr_type: "int".into(),
        kind: kind.into(),
        ..IndexDefinition::default()
    };
    let create = |definition| Command::CreateIndex {
        collection: "docs".into(),
        definition,
    };
    assert_eq!(
        client.write(create(definition("composite"))).await.unwrap(),
        CommandResult::Applied
    );
    // The same again is no error; another index under the name is.
    assert_eq!(
        client.write(create(definition("composite"))).await.unwrap(),
        CommandResult::Applied
    );
    let other = client.write(create(definition("lazy"))).await.unwrap();
    assert!(
        matches!(&other, CommandResult::Rejected { reason } if reason.contains("another index")),
        "{other:?}"
    );
    let bad = client
        .write(create(IndexDefinition {
            attr_type: "integer".into(),
            ..definition("composite")
        }))
        .await
        .unwrap();
    assert!(
        matches!(&bad, CommandResult::Rejected { reason } if reason.contains("\"integer\"")),
        "{bad:?}"
    );

    let newest_first = |keep: &dyn Fn(i64) -> bool, limit: usize| -> Vec<Vec<u8>> {
        model
            .iter()
            .rev()
            .filter(|(_, user)| keep(*user))
            .take(limit)
            .map(|(id, _)| format!("{id:04}").into_bytes())
            .collect()
    };
    let pks = |documents: Vec<sift_cluster::rpc::messages::Document>| -> Vec<Vec<u8>> {
        documents.into_iter().map(|d| d.pk).collect()
    };
    for user in [0, 5, 12, 13] {
        let found = client
            .query(
                "docs",
                "by_user",
                Query::Lookup {
                    value: user.to_string(),
                },
                10,
                ReadConsistency::Linearizable,
            )
            .await
            .unwrap();
        assert_eq!(
            pks(found),
            newest_first(&|u| u == user, 10),
            "lookup {user}"
        );
    }
    let found = client
        .query(
            "docs",
            "by_user",
            Query::Range {
                from: "3".into(),
                to: "5".into(),
            },
            1000,
            ReadConsistency::Linearizable,
        )
        .await
        .unwrap();
    assert_eq!(pks(found), newest_first(&|u| (3..=5).contains(&u), 1000));

    // Every replica built the index from its own copy of the data: local queries agree.
    let expected = newest_first(&|u| u == 4, 50);
    for node in &nodes {
        let replica = node.replica(1).unwrap();
        let mut local = Vec::new();
        for _ in 0..200 {
            let database = replica.readable(ReadConsistency::Local).await.unwrap();
            local = match database.lookup(
                "docs",
                "by_user",
                &sift_index::AttrValue::Int(4),
                Some(50),
            ) {
                Ok(result) => result.hits.into_iter().map(|h| h.pk).collect(),
                Err(_) => Vec::new(),
            };
            if local == expected {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert_eq!(local, expected, "node {}", node.id());
    }

    let too_many = client
        .query(
            "docs",
            "by_user",
            Query::Lookup { value: "1".into() },
            QUERY_LIMIT_MAX + 1,
            ReadConsistency::Linearizable,
        )
        .await;
    assert!(
        matches!(&too_many, Err(sift_cluster::ClientError::Refused(NodeError::BadRequest(r))) if r.contains("at most")),
        "{too_many:?}"
    );
    let not_int = client
        .query(
            "docs",
            "by_user",
            Query::Lookup { value: "x".into() },
            1,
            ReadConsistency::Linearizable,
        )
        .await;
    assert!(
        matches!(
            &not_int,
            Err(sift_cluster::ClientError::Refused(NodeError::BadRequest(_)))
        ),
        "{not_int:?}"
    );

    let drop = || Command::DropIndex {
        collection: "docs".into(),
        name: "by_user".into(),
    };
    assert_eq!(client.write(drop()).await.unwrap(), CommandResult::Applied);
    assert_eq!(client.write(drop()).await.unwrap(), CommandResult::NotFound);
    let gone = client
        .query(
            "docs",
            "by_user",
            Query::Lookup { value: "1".into() },
            1,
            ReadConsistency::Linearizable,
        )
        .await;
    assert!(
        matches!(&gone, Err(sift_cluster::ClientError::Refused(NodeError::BadRequest(r))) if r.contains("no index")),
        "{gone:?}"
    );
    for node in nodes {
        node.shutdown().await.unwrap();
    }
}
