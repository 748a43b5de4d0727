//! An in-memory file system with fault injection (placeholder).
#[derive(Debug, Default)]
pub struct FaultFileSystem;
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FaultKind {
    Write,
    Sync,
}
