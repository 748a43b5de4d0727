//! SSTables: immutable sorted files of internal keys (`docs/format/sstable.md`).

/// Where a block lives in a table file. `size` excludes the 5-byte block trailer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct BlockHandle {
    pub offset: u64,
    pub size: u64,
}
