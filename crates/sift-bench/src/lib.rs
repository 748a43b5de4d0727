//! `sift-bench`: the engine-neutral benchmark harness shared by the `sift` CLI, the peer
//! engines' binary (`crates/sift-peers`) and the study (`crates/sift-study`).
//!
//! `kv` is a db_bench-style key-value benchmark over an `Engine` trait, so Sift, RocksDB and
//! LevelDB run the same operations with the same keys and values and report the same rows.
//! `index` is the secondary-index benchmark over an `IndexEngine` trait (Sift's collections,
//! SQLite and RocksDB-with-a-composite-index), on the synthetic tweets of `sift-workload`.
//! `pinning` places a benchmark's threads on CPUs; `noise` measures what the machine does to
//! a run (pauses, other processes' CPU). The crate knows no engine: Sift's adapters live in
//! `sift-study`, the peers' in `sift-peers`.

#![deny(clippy::unwrap_used, clippy::expect_used)]
#![forbid(unsafe_code)]

pub use error::BenchError;

mod error;
pub mod index;
pub mod kv;
pub mod noise;
pub mod pinning;

/// `value` rounded to `decimals` decimal places: how every figure of a report is rounded.
pub fn round_to(value: f64, decimals: i32) -> f64 {
    let scale = 10_f64.powi(decimals);
    (value * scale).round() / scale
}
