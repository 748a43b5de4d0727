//! Builds one block: entries `shared varint | unshared varint | value_len varint | key delta |
//! value`, a full key every `restart_interval` entries, then the restart offsets (u32 LE each)
//! and their count (u32 LE).

use crate::coding::{put_fixed32, put_varint32};

pub struct BlockBuilder {
    buffer: Vec<u8>,
    restarts: Vec<u32>,
    /// Entries since the last restart point.
    since_restart: usize,
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
        if self.since_restart < self.restart_interval {
            shared = self
                .last_key
                .iter()
                .zip(key)
                .take_while(|(a, b)| a == b)
                .count();
        } else {
            self.restarts.push(self.buffer.len() as u32);
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
