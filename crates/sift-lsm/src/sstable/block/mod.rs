//! Blocks: sorted key/value entries with prefix compression and a restart-point array. Data,
//! index, properties and metaindex blocks all use this layout.

mod builder;
mod reader;

pub use builder::BlockBuilder;
pub(crate) use reader::decode_entry_header;
pub use reader::{Block, BlockBytes, BlockCorruption, BlockIter, MappedRange};
