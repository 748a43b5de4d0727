//! The internal iterator contract shared by memtables, blocks, tables, levels and merges.
//!
//! Keys are encoded internal keys (`key.rs`). Movement methods return errors (a corrupt
//! block, a failed read); after an error the iterator is invalid.

use crate::Result;

/// An iterator over internal keys (user key, sequence number, kind), in internal-key order.
pub trait InternalIterator: Send {
    /// Whether the iterator is positioned at an entry.
    fn valid(&self) -> bool;
    /// Moves to the first entry.
    fn seek_to_first(&mut self) -> Result<()>;
    /// Moves to the last entry.
    fn seek_to_last(&mut self) -> Result<()>;
    /// Positions at the first entry whose internal key is `>= target`.
    fn seek(&mut self, target: &[u8]) -> Result<()>;
    /// Positions at the last entry whose internal key is `<= target`.
    fn seek_for_prev(&mut self, target: &[u8]) -> Result<()>;
    /// Requires `valid()`.
    fn next(&mut self) -> Result<()>;
    /// Requires `valid()`.
    fn prev(&mut self) -> Result<()>;
    /// The current internal key. Requires `valid()`.
    fn key(&self) -> &[u8];
    /// The current value. Requires `valid()`.
    fn value(&self) -> &[u8];
}

/// An iterator over nothing.
#[derive(Debug, Default)]
pub struct EmptyIterator;

impl InternalIterator for EmptyIterator {
    fn valid(&self) -> bool {
        false
    }
    fn seek_to_first(&mut self) -> Result<()> {
        Ok(())
    }
    fn seek_to_last(&mut self) -> Result<()> {
        Ok(())
    }
    fn seek(&mut self, _target: &[u8]) -> Result<()> {
        Ok(())
    }
    fn seek_for_prev(&mut self, _target: &[u8]) -> Result<()> {
        Ok(())
    }
    fn next(&mut self) -> Result<()> {
        Ok(())
    }
    fn prev(&mut self) -> Result<()> {
        Ok(())
    }
    fn key(&self) -> &[u8] {
        &[]
    }
    fn value(&self) -> &[u8] {
        &[]
    }
}

/// An iterator over a sorted vector of `(internal key, value)` pairs, for tests and for
/// small in-memory components.
#[derive(Debug, Default)]
#[cfg(test)]
pub struct VecIterator {
    entries: Vec<(Vec<u8>, Vec<u8>)>,
    /// `entries.len()` means invalid.
    pos: usize,
}

#[cfg(test)]
impl VecIterator {
    /// `entries` must be sorted by `compare_internal_keys`.
    pub fn new(entries: Vec<(Vec<u8>, Vec<u8>)>) -> Self {
        let pos = entries.len();
        VecIterator { entries, pos }
    }
}

#[cfg(test)]
impl InternalIterator for VecIterator {
    fn valid(&self) -> bool {
        self.pos < self.entries.len()
    }
    fn seek_to_first(&mut self) -> Result<()> {
        self.pos = 0;
        Ok(())
    }
    fn seek_to_last(&mut self) -> Result<()> {
        self.pos = if self.entries.is_empty() {
            0
        } else {
            self.entries.len() - 1
        };
        Ok(())
    }
    fn seek(&mut self, target: &[u8]) -> Result<()> {
        self.pos = self
            .entries
            .partition_point(|(k, _)| crate::key::compare_internal_keys(k, target).is_lt());
        Ok(())
    }
    fn seek_for_prev(&mut self, target: &[u8]) -> Result<()> {
        let n = self
            .entries
            .partition_point(|(k, _)| crate::key::compare_internal_keys(k, target).is_le());
        self.pos = if n == 0 { self.entries.len() } else { n - 1 };
        Ok(())
    }
    fn next(&mut self) -> Result<()> {
        self.pos += 1;
        Ok(())
    }
    fn prev(&mut self) -> Result<()> {
        self.pos = if self.pos == 0 {
            self.entries.len()
        } else {
            self.pos - 1
        };
        Ok(())
    }
    fn key(&self) -> &[u8] {
        &self.entries[self.pos].0
    }
    fn value(&self) -> &[u8] {
        &self.entries[self.pos].1
    }
}
