//! Versions: which files make up each level of each tree, the manifest that records every
//! change, and the version set that installs changes atomically.

pub mod edit;
mod file;
#[cfg(test)]
mod fuzz;
pub mod set;

pub use file::*;
