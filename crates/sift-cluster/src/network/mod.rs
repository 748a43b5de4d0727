//! How region replicas reach each other. `local`: an in-process router with injected faults,
//! for tests and single-process clusters; gRPC between processes comes next (see the crate
//! docs).

pub mod local;
