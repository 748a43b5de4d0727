//! `TableIterator`: a bidirectional `InternalIterator` over one table. It picks blocks from the
//! in-memory index, skips blocks the read's `BlockFilter` rejects (without reading them), and
//! reuses one block cursor (and its key buffer) across blocks. Values are slices of the
//! current block; nothing is copied per entry.

use super::block::{BlockCorruption, BlockIter};
use super::reader::{ReadContext, Table};
use crate::iterator::InternalIterator;
use crate::key::compare_internal_keys;
use crate::Result;
use std::sync::Arc;

pub struct TableIterator {
    table: Arc<Table>,
    ctx: ReadContext,
    /// Cursor over the loaded block; `None` until the first block is loaded.
    block_iter: Option<BlockIter>,
    /// Ordinal of the block `block_iter` holds.
    loaded: Option<usize>,
}

impl TableIterator {
    pub(crate) fn new(table: Arc<Table>, ctx: ReadContext) -> Self {
        TableIterator {
            table,
            ctx,
            block_iter: None,
            loaded: None,
        }
    }

    /// The table this iterator reads.
    pub fn table(&self) -> &Arc<Table> {
        &self.table
    }

    /// Ordinal of the data block holding the current entry, if positioned.
    pub fn block_ordinal(&self) -> Option<usize> {
        if self.valid() {
            self.loaded
        } else {
            None
        }
    }

    fn invalidate(&mut self) {
        if let Some(iter) = &mut self.block_iter {
            iter.invalidate();
        }
    }

    /// Makes `block_iter` a (unpositioned) cursor over block `ordinal`, reusing the loaded
    /// block when it is the same one.
    fn load(&mut self, ordinal: usize) -> Result<()> {
        if self.loaded == Some(ordinal) && self.block_iter.is_some() {
            return Ok(());
        }
        let block = match self.table.read_data_block(ordinal, &self.ctx) {
            Ok(block) => block,
            Err(e) => {
                self.invalidate();
                return Err(e);
            }
        };
        if let Some(iter) = &mut self.block_iter {
            iter.reset(block);
        } else {
            self.block_iter = Some(BlockIter::new(block));
        }
        self.loaded = Some(ordinal);
        Ok(())
    }

    /// Runs `op` on the loaded block's cursor; returns whether it is positioned afterwards.
    fn run<F>(&mut self, op: F) -> Result<bool>
    where
        F: FnOnce(&mut BlockIter) -> Result<(), BlockCorruption>,
    {
        let (Some(iter), Some(ordinal)) = (self.block_iter.as_mut(), self.loaded) else {
            return Ok(false);
        };
        match op(iter) {
            Ok(()) => Ok(iter.valid()),
            Err(e) => {
                iter.invalidate();
                Err(self.table.block_error(ordinal, e))
            }
        }
    }

    /// Positions at the first entry of the first unfiltered, non-empty block `>= ordinal`.
    fn forward_from(&mut self, mut ordinal: usize) -> Result<()> {
        let count = self.table.block_count();
        while ordinal < count {
            if self.table.block_passes_filter(ordinal, &self.ctx) {
                self.load(ordinal)?;
                if self.run(BlockIter::seek_to_first)? {
                    return Ok(());
                }
            }
            ordinal += 1;
        }
        self.invalidate();
        Ok(())
    }

    /// Positions at the last entry of the last unfiltered, non-empty block `< end`.
    fn backward_from(&mut self, mut end: usize) -> Result<()> {
        while end > 0 {
            let ordinal = end - 1;
            if self.table.block_passes_filter(ordinal, &self.ctx) {
                self.load(ordinal)?;
                if self.run(BlockIter::seek_to_last)? {
                    return Ok(());
                }
            }
            end = ordinal;
        }
        self.invalidate();
        Ok(())
    }
}

impl InternalIterator for TableIterator {
    #[inline]
    fn valid(&self) -> bool {
        self.block_iter.as_ref().is_some_and(BlockIter::valid)
    }

    fn seek_to_first(&mut self) -> Result<()> {
        self.forward_from(0)
    }

    fn seek_to_last(&mut self) -> Result<()> {
        self.backward_from(self.table.block_count())
    }

    fn seek(&mut self, target: &[u8]) -> Result<()> {
        let ordinal = self.table.find_block(target);
        if ordinal >= self.table.block_count() {
            self.invalidate();
            return Ok(());
        }
        if self.table.block_passes_filter(ordinal, &self.ctx) {
            self.load(ordinal)?;
            if self.run(|iter| iter.seek(target))? {
                return Ok(());
            }
        }
        self.forward_from(ordinal + 1)
    }

    fn seek_for_prev(&mut self, target: &[u8]) -> Result<()> {
        let count = self.table.block_count();
        if count == 0 {
            self.invalidate();
            return Ok(());
        }
        // Entries <= target are in this block or earlier ones.
        let ordinal = self.table.find_block(target).min(count - 1);
        if self.table.block_passes_filter(ordinal, &self.ctx) {
            self.load(ordinal)?;
            let positioned = self.run(|iter| {
                iter.seek(target)?;
                if !iter.valid() {
                    iter.seek_to_last()
                } else if compare_internal_keys(iter.key(), target).is_gt() {
                    iter.prev()
                } else {
                    Ok(())
                }
            })?;
            if positioned {
                return Ok(());
            }
        }
        self.backward_from(ordinal)
    }

    fn next(&mut self) -> Result<()> {
        if !self.valid() {
            return Ok(());
        }
        if self.run(BlockIter::next)? {
            return Ok(());
        }
        match self.loaded {
            Some(ordinal) => self.forward_from(ordinal + 1),
            None => Ok(()),
        }
    }

    fn prev(&mut self) -> Result<()> {
        if !self.valid() {
            return Ok(());
        }
        if self.run(BlockIter::prev)? {
            return Ok(());
        }
        match self.loaded {
            Some(ordinal) => self.backward_from(ordinal),
            None => Ok(()),
        }
    }

    #[inline]
    fn key(&self) -> &[u8] {
        self.block_iter.as_ref().map_or(&[], BlockIter::key)
    }

    #[inline]
    fn value(&self) -> &[u8] {
        self.block_iter.as_ref().map_or(&[], BlockIter::value)
    }
}
