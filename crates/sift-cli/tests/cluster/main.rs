//! The cluster as separate `sift node` processes on loopback: kill -9, pauses, restarts and
//! snapshot catch-up under concurrent clients, with every client history checked for
//! linearizability (`sift_cluster::history`), and `sift cluster up` as a user runs it.

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

mod processes;
mod workload;

mod faults;
mod snapshot;
mod up;
