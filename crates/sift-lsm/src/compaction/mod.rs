//! Compaction: picking work, merging inputs, dropping what no reader can see.

pub mod iter;
