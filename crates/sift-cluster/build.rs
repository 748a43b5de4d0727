//! Generates the gRPC service `sift.cluster.Node` (client and server stubs) from the method
//! list below, with no .proto file: every message is a Rust type carried by the postcard
//! codec in `src/rpc/codec.rs` (spec: docs/format/cluster-rpc.md).

fn method(name: &str, route: &str, input: &str, output: &str) -> tonic_build::manual::Method {
    tonic_build::manual::Method::builder()
        .name(name)
        .route_name(route)
        .input_type(input)
        .output_type(output)
        .codec_path("crate::rpc::codec::PostcardCodec")
        .build()
}

fn main() {
    let node = tonic_build::manual::Service::builder()
        .name("Node")
        .package("sift.cluster")
        .comment(
            "One Sift node: the raft traffic of the region replicas it hosts, and client calls.",
        )
        .method(method(
            "append_entries",
            "AppendEntries",
            "crate::rpc::messages::AppendRequest",
            "crate::rpc::messages::AppendReply",
        ))
        .method(method(
            "vote",
            "Vote",
            "crate::rpc::messages::VoteCall",
            "crate::rpc::messages::VoteReply",
        ))
        .method(
            tonic_build::manual::Method::builder()
                .name("install_snapshot")
                .route_name("InstallSnapshot")
                .input_type("crate::rpc::messages::SnapshotChunk")
                .output_type("crate::rpc::messages::SnapshotReply")
                .codec_path("crate::rpc::codec::PostcardCodec")
                .client_streaming()
                .build(),
        )
        .method(method(
            "write",
            "Write",
            "crate::rpc::messages::WriteRequest",
            "crate::rpc::messages::WriteReply",
        ))
        .method(method(
            "read",
            "Read",
            "crate::rpc::messages::ReadRequest",
            "crate::rpc::messages::ReadReply",
        ))
        .method(method(
            "query",
            "Query",
            "crate::rpc::messages::QueryRequest",
            "crate::rpc::messages::QueryReply",
        ))
        .method(method(
            "join",
            "Join",
            "crate::rpc::messages::JoinRequest",
            "crate::rpc::messages::JoinReply",
        ))
        .method(method(
            "status",
            "Status",
            "crate::rpc::messages::StatusRequest",
            "crate::rpc::messages::StatusReply",
        ))
        .build();
    tonic_build::manual::Builder::new().compile(&[node]);
    println!("cargo:rerun-if-changed=build.rs");
}
