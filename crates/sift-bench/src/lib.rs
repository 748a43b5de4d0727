//! `sift-bench`: benchmark runners shared by the `sift` CLI, the peer engines binary
//! (`crates/sift-peers`) and the study.
//!
//! `kv` is a db_bench-style key-value benchmark over an `Engine` trait, so Sift, RocksDB and
//! LevelDB run the same operations with the same keys and values and report the same rows.
//! `index` is the secondary-index benchmark over an `IndexEngine` trait (Sift's collections,
//! SQLite and RocksDB-with-a-composite-index), on the synthetic tweets of `sift-workload`.

#![deny(clippy::unwrap_used, clippy::expect_used)]

#[cfg(feature = "sift")]
pub mod diff_index;
pub mod hiccup;
pub mod index;
pub mod kv;
pub mod other_cpu;
pub mod pinning;
#[cfg(feature = "sift")]
pub mod study;
#[cfg(feature = "sift")]
pub mod vinyl;
