//! Builds one block: entries `shared varint | unshared varint | value_len varint | key delta |
//! value`, a full key (a restart point) every `restart_interval` entries or `RESTART_BYTES_TARGET`
//! bytes, whichever comes first, then the restart offsets (u32 LE each) and their count (u32 LE).

use crate::coding::{put_fixed32, put_varint32};

/// Bytes of entries after which the next entry starts a restart region even before
/// `restart_interval` entries: a seek scans one region entry by entry, and with large values
/// sixteen entries are a whole block.
const RESTART_BYTES_TARGET: usize = 1024;

pub struct BlockBuilder {
    buffer: Vec<u8>,
    restarts: Vec<u32>,
    /// Entries since the last restart point.
    since_restart: usize,
    /// Where the last restart point's entry starts.
    last_restart: usize,
    restart_interval: usize,
    last_key: Vec<u8>,
    entries: usize,
    finished: bool,
}

impl BlockBuilder {
    pub fn new(restart_interval: usize) -> Self {
        BlockBuilder {
            buffer: Vec::new(),
            restarts: vec![0],
            since_restart: 0,
            last_restart: 0,
            restart_interval: restart_interval.max(1),
            last_key: Vec::new(),
            entries: 0,
            finished: false,
        }
    }

    /// Clears the builder for the next block, keeping its allocations.
    pub fn reset(&mut self) {
        self.buffer.clear();
        self.restarts.clear();
        self.restarts.push(0);
        self.since_restart = 0;
        self.last_restart = 0;
        self.last_key.clear();
        self.entries = 0;
        self.finished = false;
    }

    pub fn is_empty(&self) -> bool {
        self.entries == 0
    }

    /// Bytes of the entries added so far: where the next entry will start in the block.
    pub fn entries_bytes(&self) -> usize {
        self.buffer.len()
    }

    /// The size the block would have if finished now.
    pub fn size_estimate(&self) -> usize {
        self.buffer.len() + self.restarts.len() * 4 + 4
    }

    /// Appends an entry. Keys need not be ordered by the builder, but data and index blocks
    /// are always fed in internal-key order so that readers can seek.
    pub fn add(&mut self, key: &[u8], value: &[u8]) {
        debug_assert!(!self.finished);
        let mut shared = 0;
        if self.since_restart < self.restart_interval
            && self.buffer.len() - self.last_restart < RESTART_BYTES_TARGET
        {
            shared = self
                .last_key
                .iter()
                .zip(key)
                .take_while(|(a, b)| a == b)
                .count();
        } else {
            self.restarts.push(self.buffer.len() as u32);
            self.last_restart = self.buffer.len();
            self.since_restart = 0;
        }
        let unshared = key.len() - shared;
        put_varint32(&mut self.buffer, shared as u32);
        put_varint32(&mut self.buffer, unshared as u32);
        put_varint32(&mut self.buffer, value.len() as u32);
        self.buffer.extend_from_slice(&key[shared..]);
        self.buffer.extend_from_slice(value);
        self.last_key.truncate(shared);
        self.last_key.extend_from_slice(&key[shared..]);
        self.since_restart += 1;
        self.entries += 1;
    }

    /// Appends the restart array and returns the finished block bytes.
    pub fn finish(&mut self) -> &[u8] {
        if !self.finished {
            for &restart in &self.restarts {
                put_fixed32(&mut self.buffer, restart);
            }
            put_fixed32(&mut self.buffer, self.restarts.len() as u32);
            self.finished = true;
        }
        &self.buffer
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::key::make_internal_key;
    use crate::key::ValueKind;
    use crate::sstable::block::{Block, BlockIter};
    use std::sync::Arc;

    /// Entry offsets and restart offsets of a block of `count` entries of `value_bytes` each.
    fn build(count: usize, value_bytes: usize) -> (Vec<u8>, Vec<usize>, Vec<Vec<u8>>) {
        let mut builder = BlockBuilder::new(16);
        let mut offsets = Vec::new();
        let mut keys = Vec::new();
        for i in 0..count {
            let key = make_internal_key(format!("key{i:06}").as_bytes(), 7, ValueKind::Put);
            offsets.push(builder.entries_bytes());
            builder.add(&key, &vec![b'v'; value_bytes]);
            keys.push(key);
        }
        (builder.finish().to_vec(), offsets, keys)
    }

    fn restarts(block: &[u8]) -> Vec<usize> {
        let count_at = block.len() - 4;
        let count = u32::from_le_bytes(block[count_at..].try_into().unwrap()) as usize;
        (0..count)
            .map(|i| {
                let at = count_at - 4 * (count - i);
                u32::from_le_bytes(block[at..at + 4].try_into().unwrap()) as usize
            })
            .collect()
    }

    /// Restart points come after 16 entries or 1024 bytes, whichever is first, and not earlier;
    /// every key is found by a seek.
    #[test]
    fn restart_points_come_every_sixteen_entries_or_every_kilobyte() {
        for (count, value_bytes) in [(40, 10), (13, 300), (30, 100), (5, 2000)] {
            let (bytes, offsets, keys) = build(count, value_bytes);
            let restarts = restarts(&bytes);
            let mut expected = vec![0];
            let mut since = 0;
            for &offset in &offsets[1..] {
                since += 1;
                if since == 16 || offset - expected.last().unwrap() >= RESTART_BYTES_TARGET {
                    expected.push(offset);
                    since = 0;
                }
            }
            assert_eq!(
                restarts, expected,
                "{count} entries of {value_bytes}-byte values"
            );
            let block = Arc::new(Block::new(bytes).unwrap());
            let mut iter = BlockIter::new(block);
            for key in &keys {
                iter.seek(key).unwrap();
                assert_eq!(iter.key(), key.as_slice());
            }
        }
        // Large values: more than one region in a block of 13 entries (one by count alone).
        assert!(restarts(&build(13, 300).0).len() >= 4);
        // Small entries: the count rule decides.
        assert_eq!(restarts(&build(40, 10).0).len(), 3);
    }
}
