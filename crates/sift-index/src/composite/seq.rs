//! The largest sequence number of each data block of a composite index tree: a block property
//! collector registered for those trees, and its decoder. A composite LOOKUP reads a table's
//! blocks newest first by this bound and stops once its K-th hit is at least as new as every
//! block left (`bounded.rs`). Byte layout: `docs/format/index-encodings.md`,
//! "Per-block sequence bound of composite trees" (the constants here are the truth).
//!
//! The engine builds every tree's tables with the collectors of its options; options are fixed
//! when the engine opens, before the catalog says which trees are composite indexes. So ONE
//! factory sits in the engine's default tree options (and in a composite tree's options when
//! the tree is created) and looks the tree being written up in a registry the database fills
//! from its catalog: other trees get a collector that writes nothing. A table written while
//! its tree was not registered (before this collector existed, or flushed during the engine's
//! own recovery before the catalog was read) has no bytes for it: readers then bound each of
//! its blocks by the file's largest sequence number, which reads the table whole, as before.

use parking_lot::RwLock;
use sift_lsm::extension::{
    BlockPropertyCollector, BlockPropertyCollectorFactory, CollectorEntry, FinishedBlock,
    TableCollectorOutput, TableContext,
};
use sift_lsm::{SeqNo, TreeId};
use std::collections::HashSet;
use std::sync::Arc;

/// Name of the collector; identifies its bytes in every table. Stable across restarts.
pub const COLLECTOR_NAME: &str = "sift.composite-seq";
/// First byte of every block property this collector writes (and the only one it reads).
pub const PROPERTY_FORMAT_VERSION: u8 = 1;
/// Longest LEB128 encoding of a `u64`.
const VARINT_BYTES_MAX: usize = 10;

/// The composite index trees, by engine tree id: what the factory collects for.
#[derive(Debug, Default)]
pub struct CompositeSeqRegistry {
    trees: RwLock<HashSet<TreeId>>,
}

impl CompositeSeqRegistry {
    /// From now on, tables written for `tree` carry each block's largest sequence number.
    pub(crate) fn register(&self, tree: TreeId) {
        self.trees.write().insert(tree);
    }

    fn contains(&self, tree: TreeId) -> bool {
        self.trees.read().contains(&tree)
    }
}

/// Makes a [`MaxSeqCollector`] for registered trees, a collector that writes nothing for the
/// others.
pub struct CompositeSeqCollectorFactory {
    registry: Arc<CompositeSeqRegistry>,
}

impl CompositeSeqCollectorFactory {
    pub(crate) fn new(registry: Arc<CompositeSeqRegistry>) -> CompositeSeqCollectorFactory {
        CompositeSeqCollectorFactory { registry }
    }
}

impl BlockPropertyCollectorFactory for CompositeSeqCollectorFactory {
    fn name(&self) -> &str {
        COLLECTOR_NAME
    }

    fn create(&self, context: &TableContext) -> Box<dyn BlockPropertyCollector> {
        if self.registry.contains(context.tree) {
            Box::new(MaxSeqCollector::default())
        } else {
            Box::new(NothingCollector)
        }
    }
}

/// Records the largest sequence number of each block's entries (every entry: puts, deletes,
/// versions only old snapshots see).
#[derive(Debug, Default)]
pub struct MaxSeqCollector {
    /// Largest sequence number of the current block; `None` before its first entry.
    block_max: Option<SeqNo>,
}

impl BlockPropertyCollector for MaxSeqCollector {
    fn add(&mut self, entry: &CollectorEntry<'_>) {
        self.block_max = Some(self.block_max.map_or(entry.seq, |max| max.max(entry.seq)));
    }

    fn finish_block(&mut self, _block: &FinishedBlock) -> Vec<u8> {
        // A block has at least one entry; an empty one (never written) gets no bytes, which
        // readers treat as "unknown".
        self.block_max
            .take()
            .map(encode_block_max_seq)
            .unwrap_or_default()
    }

    fn finish_table(&mut self) -> TableCollectorOutput {
        // The file's largest sequence number is already in the manifest.
        TableCollectorOutput::default()
    }
}

/// The collector of trees that are not composite indexes.
struct NothingCollector;

impl BlockPropertyCollector for NothingCollector {
    fn add(&mut self, _entry: &CollectorEntry<'_>) {}
    fn finish_block(&mut self, _block: &FinishedBlock) -> Vec<u8> {
        Vec::new()
    }
    fn finish_table(&mut self) -> TableCollectorOutput {
        TableCollectorOutput::default()
    }
}

/// A block's property bytes: [`PROPERTY_FORMAT_VERSION`], then the largest sequence number as
/// an unsigned LEB128 varint.
pub fn encode_block_max_seq(max_seq: SeqNo) -> Vec<u8> {
    let mut out = Vec::with_capacity(1 + VARINT_BYTES_MAX);
    out.push(PROPERTY_FORMAT_VERSION);
    let mut value = max_seq;
    while value >= 0x80 {
        out.push((value as u8) | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
    out
}

/// The largest sequence number stored in a block's property bytes. `Ok(None)`: no bytes (the
/// block was written without the collector's knowledge of its tree). `Err((offset, message))`:
/// the bytes are malformed, `offset` inside them.
pub fn decode_block_max_seq(bytes: &[u8]) -> Result<Option<SeqNo>, (usize, String)> {
    let Some((&version, varint)) = bytes.split_first() else {
        return Ok(None);
    };
    if version != PROPERTY_FORMAT_VERSION {
        return Err((
            0,
            format!("unknown sequence-bound format version {version}"),
        ));
    }
    let mut value: u64 = 0;
    for (position, &byte) in varint.iter().enumerate() {
        if position >= VARINT_BYTES_MAX || (position == VARINT_BYTES_MAX - 1 && byte > 1) {
            return Err((1 + position, "sequence number overflows 64 bits".into()));
        }
        value |= u64::from(byte & 0x7f) << (7 * position);
        if byte & 0x80 == 0 {
            if position + 1 != varint.len() {
                return Err((2 + position, "bytes after the sequence number".into()));
            }
            return Ok(Some(value));
        }
    }
    Err((bytes.len(), "truncated sequence number".into()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn block_max_seq_round_trips_and_rejects_damage() {
        for seq in [0, 1, 127, 128, 300, 1 << 40, (1 << 56) - 1, u64::MAX] {
            let bytes = encode_block_max_seq(seq);
            assert_eq!(decode_block_max_seq(&bytes), Ok(Some(seq)), "{seq}");
            assert!(decode_block_max_seq(&bytes[..bytes.len() - 1]).is_err());
            let mut longer = bytes.clone();
            longer.push(0);
            assert!(decode_block_max_seq(&longer).is_err());
        }
        assert_eq!(encode_block_max_seq(300), vec![1, 0xac, 0x02]);
        assert_eq!(decode_block_max_seq(&[]), Ok(None));
        assert!(decode_block_max_seq(&[2, 5]).is_err());
        assert!(decode_block_max_seq(&[
            1, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02
        ])
        .is_err());
    }

    #[test]
    fn collector_keeps_each_blocks_largest_sequence_number() {
        let mut collector = MaxSeqCollector::default();
        let block = FinishedBlock {
            ordinal: 0,
            handle: sift_lsm::extension::BlockHandle::default(),
        };
        for seq in [5, 9, 3] {
            collector.add(&CollectorEntry {
                user_key: b"k",
                seq,
                kind: sift_lsm::ValueKind::Put,
                value: b"",
                block_offset: None,
            });
        }
        assert_eq!(collector.finish_block(&block), encode_block_max_seq(9));
        collector.add(&CollectorEntry {
            user_key: b"l",
            seq: 2,
            kind: sift_lsm::ValueKind::Delete,
            value: b"",
            block_offset: None,
        });
        assert_eq!(collector.finish_block(&block), encode_block_max_seq(2));
        assert!(collector.finish_block(&block).is_empty());
    }
}
