//! A decoded (decompressed, checksum-verified) block and its bidirectional iterator.
//!
//! The iterator keeps one reusable key buffer for prefix decoding and exposes values as
//! slices of the shared block, so moving through a block allocates nothing. Damaged entries
//! are reported as `BlockCorruption` (offset inside the block); the table turns that into
//! `Error::Corruption` with its file and the block's offset.

use crate::fs::RandomAccessFile;
use crate::key::compare_internal_keys;
use std::cmp::Ordering;
use std::sync::Arc;

/// Decoded `(key, value)` pairs.
pub type KeyValues = Vec<(Vec<u8>, Vec<u8>)>;

/// Why a block's bytes do not decode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlockCorruption {
    /// Offset inside the decompressed block.
    pub offset: usize,
    pub message: &'static str,
}

fn corruption(offset: usize, message: &'static str) -> BlockCorruption {
    BlockCorruption { offset, message }
}

/// An immutable block whose restart array has been validated.
/// The bytes of a block: owned (read and decompressed), or borrowed in place from a
/// memory-mapped table file that the `Arc` keeps open.
pub enum BlockBytes {
    Owned(Vec<u8>),
    Mapped(MappedRange),
}

/// A range of a memory-mapped file, kept valid by holding the file.
pub struct MappedRange {
    ptr: *const u8,
    len: usize,
    _file: Arc<dyn RandomAccessFile>,
}

// SAFETY: the range is read-only memory of a mapping owned by `_file` (itself Send + Sync),
// which stays mapped and unmodified for as long as `_file` lives.
unsafe impl Send for MappedRange {}
// SAFETY: as for `Send`: shared references only read the mapped bytes.
unsafe impl Sync for MappedRange {}

impl MappedRange {
    /// `None` if the file is not mapped or the range is outside it.
    pub fn new(file: &Arc<dyn RandomAccessFile>, start: usize, end: usize) -> Option<MappedRange> {
        let bytes = file.mapped()?.get(start..end)?;
        Some(MappedRange {
            ptr: bytes.as_ptr(),
            len: bytes.len(),
            _file: Arc::clone(file),
        })
    }
}

impl BlockBytes {
    #[inline]
    fn as_slice(&self) -> &[u8] {
        match self {
            BlockBytes::Owned(v) => v,
            // SAFETY: `ptr..ptr+len` was a valid slice of the mapping when the range was made,
            // and `_file` keeps the mapping alive and unchanged (see `MappedRange`).
            BlockBytes::Mapped(r) => unsafe { std::slice::from_raw_parts(r.ptr, r.len) },
        }
    }
}

impl std::ops::Deref for BlockBytes {
    type Target = [u8];
    #[inline]
    fn deref(&self) -> &[u8] {
        self.as_slice()
    }
}

impl From<Vec<u8>> for BlockBytes {
    fn from(v: Vec<u8>) -> Self {
        BlockBytes::Owned(v)
    }
}

pub struct Block {
    data: BlockBytes,
    /// Where the restart array starts: entries occupy `data[..restarts_offset]`.
    restarts_offset: usize,
    restart_count: usize,
}

impl Block {
    /// Validates the restart array (it fits, starts at 0, increases, points inside the
    /// entries). Entries themselves are checked as they are decoded.
    pub fn new(data: impl Into<BlockBytes>) -> Result<Block, BlockCorruption> {
        let data = data.into();
        let len = data.len();
        if len < 4 {
            return Err(corruption(0, "block shorter than its restart count"));
        }
        let count_bytes = [data[len - 4], data[len - 3], data[len - 2], data[len - 1]];
        let restart_count = u32::from_le_bytes(count_bytes) as usize;
        let restarts_offset = restart_count
            .checked_mul(4)
            .and_then(|array| (len - 4).checked_sub(array))
            .ok_or(corruption(len - 4, "restart array larger than the block"))?;
        if restart_count == 0 {
            return Err(corruption(len - 4, "block has no restart points"));
        }
        let block = Block {
            data,
            restarts_offset,
            restart_count,
        };
        let mut previous = None;
        for i in 0..restart_count {
            let point = block.restart_point(i);
            let ordered = previous.map_or(point == 0, |p| point > p);
            if !ordered || point >= restarts_offset.max(1) {
                return Err(corruption(
                    restarts_offset + 4 * i,
                    "restart points out of order or outside the entries",
                ));
            }
            previous = Some(point);
        }
        Ok(block)
    }

    /// The bytes `range` of the block (a value range from [`BlockIter::value_range`]).
    pub(crate) fn value_at(&self, range: std::ops::Range<usize>) -> &[u8] {
        self.data.get(range).unwrap_or_default()
    }

    /// Bytes held in memory (for cache weighing).
    pub fn size_bytes(&self) -> usize {
        self.data.len()
    }

    fn restart_point(&self, index: usize) -> usize {
        let at = self.restarts_offset + 4 * index;
        let d = &self.data;
        u32::from_le_bytes([d[at], d[at + 1], d[at + 2], d[at + 3]]) as usize
    }

    /// All entries, in block order (for meta blocks and whole-block reads).
    pub fn entries(self: &Arc<Self>) -> Result<KeyValues, BlockCorruption> {
        let mut iter = BlockIter::new(Arc::clone(self));
        let mut out = Vec::new();
        iter.seek_to_first()?;
        while iter.valid() {
            out.push((iter.key().to_vec(), iter.value().to_vec()));
            iter.next()?;
        }
        Ok(out)
    }
}

/// Decodes the three varint32 lengths of an entry header at the start of `src`.
/// Returns `(shared, unshared, value_len, header_bytes)`.
#[inline]
pub(crate) fn decode_entry_header(src: &[u8]) -> Option<(usize, usize, usize, usize)> {
    if src.len() >= 3 && (src[0] | src[1] | src[2]) < 0x80 {
        // Fast path: all three fit in one byte each (the common case for small entries).
        return Some((
            usize::from(src[0]),
            usize::from(src[1]),
            usize::from(src[2]),
            3,
        ));
    }
    let (shared, a) = crate::coding::decode_varint32(src)?;
    let (unshared, b) = crate::coding::decode_varint32(src.get(a..)?)?;
    let (value_len, c) = crate::coding::decode_varint32(src.get(a + b..)?)?;
    Some((
        shared as usize,
        unshared as usize,
        value_len as usize,
        a + b + c,
    ))
}

/// A cursor over one block. Keys are compared as internal keys when seeking.
pub struct BlockIter {
    block: Arc<Block>,
    /// Offset of the current entry; `restarts_offset` means not positioned.
    current: usize,
    /// Offset just past the current entry.
    next_offset: usize,
    /// Restart region holding `current`.
    restart_index: usize,
    key: Vec<u8>,
    value_start: usize,
    value_end: usize,
}

impl BlockIter {
    pub fn new(block: Arc<Block>) -> Self {
        let end = block.restarts_offset;
        BlockIter {
            block,
            current: end,
            next_offset: end,
            restart_index: 0,
            key: Vec::new(),
            value_start: 0,
            value_end: 0,
        }
    }

    /// Makes room in the key buffer for keys of about `bytes` bytes.
    pub fn reserve_key(&mut self, bytes: usize) {
        self.key.reserve(bytes);
    }

    /// Points the iterator at another block, keeping the key buffer's allocation.
    pub fn reset(&mut self, block: Arc<Block>) {
        self.block = block;
        self.invalidate();
    }

    pub fn invalidate(&mut self) {
        self.current = self.block.restarts_offset;
        self.next_offset = self.current;
        self.key.clear();
    }

    #[inline]
    pub fn valid(&self) -> bool {
        self.current < self.block.restarts_offset
    }

    #[inline]
    pub fn key(&self) -> &[u8] {
        &self.key
    }

    #[inline]
    pub fn value(&self) -> &[u8] {
        &self.block.data[self.value_start..self.value_end]
    }

    /// Where the current entry starts in the block (the table builder's
    /// `CollectorEntry::block_offset` for it).
    #[inline]
    pub fn entry_offset(&self) -> usize {
        self.current
    }

    /// Where the current entry's value lies in the block (see [`Block::value_at`]).
    pub(crate) fn value_range(&self) -> std::ops::Range<usize> {
        self.value_start..self.value_end
    }

    /// Decodes the entry at `self.next_offset`; invalidates at the end of the entries.
    #[inline]
    fn parse_next(&mut self) -> Result<bool, BlockCorruption> {
        let offset = self.next_offset;
        let end = self.block.restarts_offset;
        if offset >= end {
            self.invalidate();
            return Ok(false);
        }
        let data = &self.block.data[..end];
        let fail = |message| {
            // Leave the iterator invalid after an error.
            Err(corruption(offset, message))
        };
        let Some((shared, unshared, value_len, header)) = decode_entry_header(&data[offset..])
        else {
            self.current = end;
            return fail("bad entry header");
        };
        let key_start = offset + header;
        let bounds = key_start
            .checked_add(unshared)
            .and_then(|key_end| Some((key_end, key_end.checked_add(value_len)?)));
        let (key_end, value_end) = match bounds {
            Some((k, v)) if v <= end => (k, v),
            _ => {
                self.current = end;
                return fail("entry extends past the block's entries");
            }
        };
        if shared > self.key.len() {
            self.current = end;
            return fail("entry shares more key bytes than the previous key has");
        }
        self.key.truncate(shared);
        self.key.extend_from_slice(&data[key_start..key_end]);
        self.current = offset;
        self.value_start = key_end;
        self.value_end = value_end;
        self.next_offset = value_end;
        while self.restart_index + 1 < self.block.restart_count
            && self.block.restart_point(self.restart_index + 1) <= offset
        {
            self.restart_index += 1;
        }
        Ok(true)
    }

    fn seek_to_restart(&mut self, index: usize) {
        self.key.clear();
        self.restart_index = index;
        self.next_offset = self.block.restart_point(index);
        self.current = self.block.restarts_offset;
    }

    /// The full key stored at restart point `index` (restart entries share nothing).
    fn restart_key(&self, index: usize) -> Result<&[u8], BlockCorruption> {
        let offset = self.block.restart_point(index);
        let data = &self.block.data[..self.block.restarts_offset];
        let src = data.get(offset..).unwrap_or_default();
        let (shared, unshared, _, header) =
            decode_entry_header(src).ok_or(corruption(offset, "bad entry header"))?;
        if shared != 0 {
            return Err(corruption(offset, "restart entry shares key bytes"));
        }
        src.get(header..header + unshared)
            .ok_or(corruption(offset, "restart key extends past the entries"))
    }

    pub fn seek_to_first(&mut self) -> Result<(), BlockCorruption> {
        self.seek_to_restart(0);
        self.parse_next().map(drop)
    }

    pub fn seek_to_last(&mut self) -> Result<(), BlockCorruption> {
        self.seek_to_restart(self.block.restart_count - 1);
        while self.parse_next()? && self.next_offset < self.block.restarts_offset {}
        Ok(())
    }

    /// Positions at the first entry whose internal key is `>= target`.
    pub fn seek(&mut self, target: &[u8]) -> Result<(), BlockCorruption> {
        let mut left = 0;
        let mut right = self.block.restart_count - 1;
        // Sequential seeks often land just after the current entry: start the search there.
        if self.valid() && compare_internal_keys(&self.key, target) == Ordering::Less {
            left = self.restart_index;
        }
        while left < right {
            let mid = left + (right - left).div_ceil(2);
            if compare_internal_keys(self.restart_key(mid)?, target) == Ordering::Less {
                left = mid;
            } else {
                right = mid - 1;
            }
        }
        // Keep scanning from the current entry when it is in the chosen region and before
        // the target; otherwise restart the region.
        if !(self.valid()
            && self.restart_index == left
            && compare_internal_keys(&self.key, target) == Ordering::Less)
        {
            self.seek_to_restart(left);
            if !self.parse_next()? {
                return Ok(());
            }
        }
        while compare_internal_keys(&self.key, target) == Ordering::Less {
            if !self.parse_next()? {
                return Ok(());
            }
        }
        Ok(())
    }

    /// Requires `valid()`.
    pub fn next(&mut self) -> Result<(), BlockCorruption> {
        debug_assert!(self.valid());
        self.parse_next().map(drop)
    }

    /// Requires `valid()`. Rescans the restart region before the current entry.
    pub fn prev(&mut self) -> Result<(), BlockCorruption> {
        debug_assert!(self.valid());
        let original = self.current;
        while self.block.restart_point(self.restart_index) >= original {
            if self.restart_index == 0 {
                self.invalidate();
                return Ok(());
            }
            self.restart_index -= 1;
        }
        self.seek_to_restart(self.restart_index);
        while self.parse_next()? && self.next_offset < original {}
        Ok(())
    }
}
