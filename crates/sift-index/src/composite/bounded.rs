//! Composite LOOKUP inside one table component (an L0 file, or the files of a level that
//! overlap the value): the value's blocks are read newest first by their sequence bound (the
//! largest sequence number of the block, `seq.rs`), and reading stops once the K-th
//! hit is at least as new as every block left. A heavy value whose keys fill many blocks of a
//! fully compacted tree then costs the few blocks holding its newest keys, not all of them.
//!
//! Exactness. The component's keys `value ‖ pk` are decided as a scan of the whole component
//! would decide them, for every key in a block read:
//! - A key's versions sit newest first, and may straddle block (or, in a level, file)
//!   boundaries. Only a block's first key can have newer versions in earlier blocks, and only if
//!   the previous block's separator (or the previous file's largest key) has that user key:
//!   then the previous block is read first, before the block's entries count (repeatedly, for a
//!   key spread over several blocks). So a key's first visible version in this component is
//!   always the one taken: no older version in a later block is ever taken for it (the Pebble
//!   trap of a skipped block holding a key's newest version), and a key whose newest version is
//!   a delete is never revived from an older block.
//! - A candidate's entry sequence number bounds its live version's (the entry is written at or
//!   after the version it names: asynchronous indexes insert theirs at the version's own
//!   number); a block's bound bounds its entries'. Candidates are validated newest
//!   entry first once no unread block can hold a newer one, and reading stops only when neither
//!   an unread block nor a pending candidate can enter the top K.
//! - Keys of blocks left unread do not shadow lower components. That is harmless: such a key's
//!   entries below are older than its entry here, which is older than the bound at which this
//!   component stopped, so they cannot enter the top K either (the top K only gets newer).
//!
//! Tables written without the property (before it existed) bound every block by the file's
//! largest sequence number: they are read whole, as the plain component scan did.

//!
//! The buffers are reused across the components of one LOOKUP (`ComponentScratch`): a light
//! value costs a block or two per component, and a dozen allocations per component were a
//! measurable share of that.

use crate::composite::seq::{decode_block_max_seq, COLLECTOR_NAME};
use crate::error::Result;
use crate::kind::query::{Query, Shadows};
use sift_lsm::extension::ComponentView;
use sift_lsm::extension::FileMetaData;
use sift_lsm::extension::{
    compare_internal_keys, make_seek_key, parse_internal_key, user_key, SEQ_MAX,
};
use sift_lsm::extension::{ReadContext, Table};
use sift_lsm::{ComponentId, SeqNo, ValueKind};
use std::collections::BinaryHeap;
use std::ops::Range;
use std::sync::Arc;

/// A data block of the component that may hold keys of the value.
struct BlockRef {
    /// Index in the component's tables.
    table: usize,
    ordinal: usize,
    /// No entry of the block has a larger sequence number.
    bound: SeqNo,
}

/// One entry of a block read: user key at `key_start..key_end` of the scratch buffer.
struct RawEntry {
    key_start: usize,
    key_end: usize,
    seq: SeqNo,
    kind: ValueKind,
}

/// What the scan knows about the last user key of a block read: the key (at
/// `key_start..key_end` of `ComponentScratch::tail_keys`), and whether its first visible
/// version was already taken (then its entries in the next block are older).
#[derive(Clone, Copy)]
struct Tail {
    key_start: usize,
    key_end: usize,
    decided: bool,
}

/// Buffers of `Query::composite_table_component`, made once per LOOKUP and reused by each of
/// its table components (cleared, not freed, between them).
#[derive(Default)]
pub(crate) struct ComponentScratch {
    /// The LOOKUP's seek key, its end, and its read context: the same for every component.
    prepared: bool,
    seek: Vec<u8>,
    end: Option<Vec<u8>>,
    context: ReadContext,
    tables: Vec<(Arc<FileMetaData>, Arc<Table>)>,
    /// In key order across the component's files.
    blocks: Vec<BlockRef>,
    read: Vec<bool>,
    tails: Vec<Option<Tail>>,
    tail_keys: Vec<u8>,
    /// Storage of the unread-block heap and of the pending-candidate heap.
    order: Vec<(SeqNo, usize)>,
    pending: Vec<(SeqNo, usize, usize, usize)>,
    /// User keys of the entries of the blocks read for one chain.
    keys: Vec<u8>,
    entries: Vec<RawEntry>,
    /// (block index, its entries in `entries`), last block of the chain first.
    chain: Vec<(usize, Range<usize>)>,
}

/// The blocks of one table component and its reads so far.
struct ComponentScan<'s> {
    tables: &'s [(Arc<FileMetaData>, Arc<Table>)],
    blocks: &'s [BlockRef],
    read: &'s mut [bool],
    context: &'s ReadContext,
}

impl ComponentScan<'_> {
    /// Whether block `index - 1` may end with user key `key` (so may hold newer versions of
    /// the first key of block `index`).
    fn previous_may_end_with(&self, index: usize, key: &[u8]) -> bool {
        let Some(previous) = index.checked_sub(1).and_then(|i| self.blocks.get(i)) else {
            return false;
        };
        let Some(current) = self.blocks.get(index) else {
            return false;
        };
        let (file, table) = &self.tables[previous.table];
        if previous.table == current.table {
            // Within a table the separator is >= the block's last key and < the next block's
            // first key: if both have user key `key`, so has the separator.
            table
                .block_separator(previous.ordinal)
                .is_some_and(|separator| user_key(separator) == key)
        } else {
            file.largest_user_key() == key
        }
    }

    /// The entries of block `index` from the first one `>= seek` (an internal key) to the
    /// last one below `end` (a user key), visible at the view's sequence number or not, in
    /// block order: appended to `entries` (the range returned), their user keys to `keys`.
    fn read_block(
        &mut self,
        index: usize,
        seek: &[u8],
        end: Option<&[u8]>,
        keys: &mut Vec<u8>,
        entries: &mut Vec<RawEntry>,
    ) -> Result<Range<usize>> {
        self.read[index] = true;
        let block = &self.blocks[index];
        let (_, table) = &self.tables[block.table];
        let first = entries.len();
        let path = table.path();
        let visit = |internal_key: &[u8], _: &[u8], offset: usize| {
            let parsed = parse_internal_key(internal_key).ok_or_else(|| {
                let block_offset = table.block_handle(block.ordinal).map_or(0, |h| h.offset);
                sift_lsm::Error::corruption(
                    path,
                    block_offset,
                    format!(
                        "malformed internal key in data block {} (byte {offset} of the \
                         decompressed block)",
                        block.ordinal
                    ),
                )
            })?;
            if end.is_some_and(|end| parsed.user_key >= end) {
                return Ok(false);
            }
            let key_start = keys.len();
            keys.extend_from_slice(parsed.user_key);
            entries.push(RawEntry {
                key_start,
                key_end: keys.len(),
                seq: parsed.seq,
                kind: parsed.kind,
            });
            Ok(true)
        };
        table.visit_block_entries_from(block.ordinal, self.context, seek, visit)?;
        Ok(first..entries.len())
    }
}

impl Query<'_> {
    /// Appends to `tables` the tables of a table component that may hold visible keys of the
    /// value.
    fn component_tables(
        &self,
        view: &ComponentView,
        id: ComponentId,
        tables: &mut Vec<(Arc<FileMetaData>, Arc<Table>)>,
    ) -> Result<()> {
        let files = match id {
            ComponentId::Level0File(number) => view
                .files(0)
                .into_iter()
                .filter(|f| f.number == number)
                .collect(),
            ComponentId::Level(level) => view.files(level),
            ComponentId::Memtable | ComponentId::ImmutableMemtable(_) => Vec::new(),
        };
        for file in files {
            if file.seq_min > view.sequence()
                || !file.overlaps(Some(&self.start), self.end.as_deref())
            {
                continue;
            }
            let table = view.table(&file)?;
            tables.push((file, table));
        }
        Ok(())
    }

    /// Appends to `blocks` the blocks of `tables` that may hold keys in `[start, end)`, in key
    /// order, each with its sequence bound. `seek`: the seek key of `start`.
    fn value_blocks(
        &self,
        tables: &[(Arc<FileMetaData>, Arc<Table>)],
        seek: &[u8],
        blocks: &mut Vec<BlockRef>,
    ) -> Result<()> {
        for (table_index, (file, table)) in tables.iter().enumerate() {
            // Without the property (a table written before it existed) every block is bounded
            // by the file's largest sequence number: the table is read whole, as before.
            let collector = table
                .properties()
                .collector_names
                .iter()
                .position(|name| name == COLLECTOR_NAME);
            // The first block whose separator is >= the seek key: the only one that can hold
            // the first entry of the range.
            let (mut low, mut high) = (0, table.block_count());
            while low < high {
                let middle = low + (high - low) / 2;
                let below = table
                    .block_separator(middle)
                    .is_some_and(|s| compare_internal_keys(s, seek).is_lt());
                if below {
                    low = middle + 1;
                } else {
                    high = middle;
                }
            }
            for ordinal in low..table.block_count() {
                let mut bound = file.seq_max;
                if let Some(collector) = collector {
                    let bytes = table
                        .block_properties(ordinal)
                        .and_then(|p| p.iter().nth(collector))
                        .map_or(&[][..], |(_, bytes)| bytes);
                    match decode_block_max_seq(bytes) {
                        Ok(Some(max_seq)) => bound = bound.min(max_seq),
                        Ok(None) => {}
                        Err((offset, message)) => {
                            let block_offset = table.block_handle(ordinal).map_or(0, |h| h.offset);
                            return Err(sift_lsm::Error::corruption(
                                table.path(),
                                block_offset,
                                format!(
                                    "sequence bound of data block {ordinal} (index entry): \
                                     {message} (byte {offset} of the property)"
                                ),
                            )
                            .into());
                        }
                    }
                }
                blocks.push(BlockRef {
                    table: table_index,
                    ordinal,
                    bound,
                });
                // Later blocks start after this one's separator.
                let past_end = table
                    .block_separator(ordinal)
                    .zip(self.end.as_deref())
                    .is_some_and(|(separator, end)| user_key(separator) >= end);
                if past_end {
                    break;
                }
            }
        }
        Ok(())
    }

    /// A composite LOOKUP's work in one table component (see the module docs): validates its
    /// candidates that can enter the top K; appends the keys it decided to `arena` and `keys`
    /// (they shadow lower components). `arenas`/`seen`: keys of the components above, sorted.
    /// `buffers`: made once per LOOKUP, shared by its components.
    pub(crate) fn composite_table_component(
        &mut self,
        view: &ComponentView,
        id: ComponentId,
        (arenas, seen): Shadows<'_>,
        arena: &mut Vec<u8>,
        keys: &mut Vec<(usize, usize)>,
        buffers: &mut ComponentScratch,
    ) -> Result<()> {
        if !buffers.prepared {
            // Blocks are read from the value's first key on (the block holding it starts
            // lower) and up to its end: the entries outside are not decoded.
            buffers.seek = make_seek_key(&self.start, SEQ_MAX);
            buffers.end.clone_from(&self.end);
            buffers.context = ReadContext::from_read_options(&self.read);
            // Sized for a light value's blocks, so the first component rarely grows them.
            buffers.blocks.reserve(16);
            buffers.read.reserve(16);
            buffers.tails.reserve(16);
            buffers.tail_keys.reserve(512);
            buffers.order.reserve(16);
            buffers.pending.reserve(128);
            buffers.keys.reserve(8 << 10);
            buffers.entries.reserve(128);
            buffers.chain.reserve(4);
            buffers.prepared = true;
        }
        let ComponentScratch {
            prepared: _,
            seek,
            end,
            context,
            tables,
            blocks,
            read,
            tails,
            tail_keys,
            order: order_storage,
            pending: pending_storage,
            keys: block_keys,
            entries,
            chain,
        } = buffers;
        let seek = seek.as_slice();
        let end = end.as_deref();
        tables.clear();
        blocks.clear();
        self.component_tables(view, id, tables)?;
        self.value_blocks(tables, seek, blocks)?;
        let block_count = blocks.len();
        read.clear();
        read.resize(block_count, false);
        tails.clear();
        tails.resize(block_count, None);
        tail_keys.clear();
        // Unread blocks, newest bound first; among equal bounds the last first (keys of a value
        // tend to come in pk order, and pks often grow with time).
        // A heap, not a sort: a heavy value has many blocks and a LOOKUP reads a few.
        order_storage.clear();
        order_storage.extend(blocks.iter().enumerate().map(|(i, b)| (b.bound, i)));
        let mut order = BinaryHeap::from(std::mem::take(order_storage));
        // (entry seq, key start, value end, key end) in `arena`, newest entry on top.
        pending_storage.clear();
        let mut pending_heap = BinaryHeap::from(std::mem::take(pending_storage));
        let mut scan = ComponentScan {
            tables,
            blocks,
            read,
            context,
        };
        let sequence = view.sequence();
        loop {
            while order.peek().is_some_and(|&(_, i)| scan.read[i]) {
                order.pop();
            }
            let next = order.peek().map(|&(_, i)| i);
            let next_bound = order.peek().map(|&(bound, _)| bound);
            // Candidates at least as new as every unread block, newest first.
            while let Some(&(entry_seq, start, value_end, end)) = pending_heap.peek() {
                if next_bound.is_some_and(|bound| entry_seq < bound) {
                    break;
                }
                pending_heap.pop();
                if !self.top.would_accept(entry_seq) {
                    // Every other pending candidate and every unread block is older.
                    pending_heap.clear();
                    break;
                }
                self.validate_point_key(&arena[start..end], value_end - start)?;
            }
            let Some(bound) = next_bound else {
                break;
            };
            if !self.top.would_accept(bound) {
                // No unread block, and no pending candidate (all older than `bound`), can enter.
                break;
            }
            // The block, preceded by the blocks that may hold newer versions of its first key.
            let Some(next) = next else {
                break;
            };
            block_keys.clear();
            entries.clear();
            chain.clear();
            let first_read = scan.read_block(next, seek, end, block_keys, entries)?;
            chain.push((next, first_read));
            loop {
                let (index, range) = &chain[chain.len() - 1];
                let index = *index;
                let Some(first) = entries.get(range.start).filter(|_| !range.is_empty()) else {
                    break;
                };
                let first_key = &block_keys[first.key_start..first.key_end];
                if index == 0
                    || scan.read[index - 1]
                    || !self.in_range(first_key)
                    || !scan.previous_may_end_with(index, first_key)
                {
                    break;
                }
                let range = scan.read_block(index - 1, seek, end, block_keys, entries)?;
                chain.push((index - 1, range));
            }
            // The scan state at the start of the chain: the last key of the block before it,
            // if that was read (copied into `block_keys`: keys are compared as ranges of it).
            let (mut current, mut decided): (Option<(usize, usize)>, bool) = chain
                .last()
                .and_then(|(index, _)| index.checked_sub(1))
                .and_then(|previous| tails[previous].take())
                .map_or((None, false), |tail| {
                    let start = block_keys.len();
                    block_keys.extend_from_slice(&tail_keys[tail.key_start..tail.key_end]);
                    (Some((start, block_keys.len())), tail.decided)
                });
            // In key order: the chain was collected last block first.
            for (index, range) in chain.iter().rev() {
                for entry in &entries[range.clone()] {
                    let key = &block_keys[entry.key_start..entry.key_end];
                    let same = current.is_some_and(|(s, e)| &block_keys[s..e] == key);
                    if !same {
                        current = Some((entry.key_start, entry.key_end));
                        decided = false;
                    }
                    // Invisible versions, older versions of a decided key, keys below the range.
                    if entry.seq > sequence || decided || key < self.start.as_slice() {
                        continue;
                    }
                    decided = true;
                    let candidate = self.take_point_key(
                        key,
                        entry.seq,
                        entry.kind,
                        (arenas, seen),
                        arena,
                        keys,
                    )?;
                    pending_heap.extend(candidate);
                }
                // Only the key the block ends with can continue in the next block.
                tails[*index] = current.map(|(s, e)| {
                    let key_start = tail_keys.len();
                    tail_keys.extend_from_slice(&block_keys[s..e]);
                    Tail {
                        key_start,
                        key_end: tail_keys.len(),
                        decided,
                    }
                });
            }
        }
        let unread = scan.read.iter().filter(|read| !**read).count();
        self.stats.blocks_skipped += unread as u64;
        *order_storage = order.into_vec();
        *pending_storage = pending_heap.into_vec();
        Ok(())
    }
}
