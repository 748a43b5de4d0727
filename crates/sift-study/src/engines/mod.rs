//! Sift behind the harness's engine traits: `kv` for `sift bench kv` (the key-value
//! benchmark's `Engine`), `index` for `sift bench index` and the study (`IndexEngine` over a
//! Sift collection), `blocks` for counting the data blocks a query's results occupy.

pub mod blocks;
pub mod index;
pub mod kv;
