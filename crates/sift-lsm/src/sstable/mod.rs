//! SSTables: immutable sorted files of internal keys (`docs/format/sstable.md`).
//!
//! `TableBuilder` writes them, `Table` reads them (index, filter and properties held in memory),
//! `TableIterator` walks them, `BlockCache` shares decompressed data blocks between readers.

mod block;
mod bloom;
mod builder;
mod cache;
mod format;
#[cfg(test)]
mod fuzz;
mod iter;
mod properties;
mod reader;
#[cfg(test)]
pub(crate) mod test_util;
#[cfg(test)]
mod tests;

pub use builder::{TableBuilder, TableBuilderOptions, TableSummary};
pub use cache::BlockCache;
pub use format::BLOCK_TRAILER_BYTES;
#[cfg(test)]
use format::{FOOTER_BYTES, FORMAT_VERSION};
#[cfg(test)]
use iter::TableIterator;
#[cfg(test)]
use properties::TableProperties;
pub use reader::{read_meta_block_unopened, DataBlock, LiveMetaBlock, ReadContext, Table};

/// Metaindex name of the bloom filter block.
pub const META_FILTER: &str = "sift.filter.bloom";
/// Metaindex name of the properties block.
pub const META_PROPERTIES: &str = "sift.properties";
/// Collector meta blocks are named `<collector name>/<block name>`; engine names contain no `/`.
pub const META_BLOCK_SEPARATOR: char = '/';

/// Where a block lives in a table file. `size` excludes the 5-byte block trailer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct BlockHandle {
    /// Offset of the block in the file.
    pub offset: u64,
    /// Bytes of the block, without its trailer.
    pub size: u64,
}
