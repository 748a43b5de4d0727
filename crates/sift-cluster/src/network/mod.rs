//! How region replicas reach each other. `grpc`: between processes, through each node's
//! `sift.cluster.Node` service. `local`: an in-process router with injected faults, for tests
//! and single-process clusters.

pub mod grpc;
pub mod local;
