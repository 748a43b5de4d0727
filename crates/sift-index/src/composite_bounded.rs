//! Composite LOOKUP inside one table component (an L0 file, or the files of a level that
//! overlap the value): the value's blocks are read newest first by their sequence bound (the
//! largest sequence number of the block, `composite_seq.rs`), and reading stops once the K-th
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
//! - A candidate's entry sequence number bounds its live version's (the entry is written after
//!   the version it names); a block's bound bounds its entries'. Candidates are validated newest
//!   entry first once no unread block can hold a newer one, and reading stops only when neither
//!   an unread block nor a pending candidate can enter the top K.
//! - Keys of blocks left unread do not shadow lower components. That is harmless: such a key's
//!   entries below are older than its entry here, which is older than the bound at which this
//!   component stopped, so they cannot enter the top K either (the top K only gets newer).
//!
//! Tables written without the property (before it existed) bound every block by the file's
//! largest sequence number: they are read whole, as the plain component scan did.

use super::Query;
use crate::composite_seq::{decode_block_max_seq, COLLECTOR_NAME};
use crate::encoding::{decode_pk, decode_value};
use crate::error::{IndexError, Result};
use sift_lsm::db::ComponentView;
use sift_lsm::key::{compare_internal_keys, make_seek_key, parse_internal_key, user_key, SEQ_MAX};
use sift_lsm::sstable::{ReadContext, Table};
use sift_lsm::version::FileMetaData;
use sift_lsm::{ComponentId, SeqNo, ValueKind};
use std::collections::BinaryHeap;
use std::sync::Arc;

/// Keys of the components above (each in its own arena): `(arena, start, end)`, sorted by key.
type Shadows<'a> = (&'a [Vec<u8>], &'a [(usize, usize, usize)]);

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

/// What the scan knows about the last user key of a block read: the key, and whether its
/// first visible version was already taken (then its entries in the next block are older).
struct Tail {
    key: Vec<u8>,
    decided: bool,
}

/// The blocks of one table component, its reads so far, and the keys it decided.
struct ComponentScan<'v> {
    tables: Vec<(Arc<FileMetaData>, Arc<Table>)>,
    /// In key order across the component's files.
    blocks: Vec<BlockRef>,
    read: Vec<bool>,
    tails: Vec<Option<Tail>>,
    view: &'v ComponentView,
    context: ReadContext,
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
    /// block order; their user keys are appended to `scratch`.
    fn read_block(
        &mut self,
        index: usize,
        seek: &[u8],
        end: Option<&[u8]>,
        scratch: &mut Vec<u8>,
    ) -> Result<Vec<RawEntry>> {
        self.read[index] = true;
        let block = &self.blocks[index];
        let (_, table) = &self.tables[block.table];
        let mut entries = Vec::with_capacity(64);
        let path = table.path();
        let block_offset = table.block_handle(block.ordinal).map_or(0, |h| h.offset);
        let visit = |internal_key: &[u8], _: &[u8], offset: usize| {
            let parsed = parse_internal_key(internal_key).ok_or_else(|| {
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
            let key_start = scratch.len();
            scratch.extend_from_slice(parsed.user_key);
            entries.push(RawEntry {
                key_start,
                key_end: scratch.len(),
                seq: parsed.seq,
                kind: parsed.kind,
            });
            Ok(true)
        };
        table.visit_block_entries_from(block.ordinal, &self.context, seek, visit)?;
        Ok(entries)
    }
}

impl Query<'_> {
    /// The tables of a table component that may hold visible keys of the value.
    fn component_tables(
        &self,
        view: &ComponentView,
        id: ComponentId,
    ) -> Result<Vec<(Arc<FileMetaData>, Arc<Table>)>> {
        let files = match id {
            ComponentId::Level0File(number) => view
                .files(0)
                .into_iter()
                .filter(|f| f.number == number)
                .collect(),
            ComponentId::Level(level) => view.files(level),
            ComponentId::Memtable | ComponentId::ImmutableMemtable(_) => Vec::new(),
        };
        let mut tables = Vec::new();
        for file in files {
            if file.seq_min > view.sequence()
                || !file.overlaps(Some(&self.start), self.end.as_deref())
            {
                continue;
            }
            let table = view.table(&file)?;
            tables.push((file, table));
        }
        Ok(tables)
    }

    /// The blocks of `tables` that may hold keys in `[start, end)`, in key order, each with
    /// its sequence bound.
    fn value_blocks(&self, tables: &[(Arc<FileMetaData>, Arc<Table>)]) -> Result<Vec<BlockRef>> {
        let seek = make_seek_key(&self.start, SEQ_MAX);
        let mut blocks = Vec::new();
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
                    .is_some_and(|s| compare_internal_keys(s, &seek).is_lt());
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
        Ok(blocks)
    }

    /// A composite LOOKUP's work in one table component (see the module docs): validates its
    /// candidates that can enter the top K; appends the keys it decided to `arena` and `keys`
    /// (they shadow lower components). `arenas`/`seen`: keys of the components above, sorted.
    pub(super) fn composite_table_component(
        &mut self,
        view: &ComponentView,
        id: ComponentId,
        (arenas, seen): Shadows<'_>,
        arena: &mut Vec<u8>,
        keys: &mut Vec<(usize, usize)>,
    ) -> Result<()> {
        let tables = self.component_tables(view, id)?;
        let blocks = self.value_blocks(&tables)?;
        let block_count = blocks.len();
        // Unread blocks, newest bound first; among equal bounds the last first (keys of a value
        // tend to come in pk order, and pks often grow with time).
        // A heap, not a sort: a heavy value has many blocks and a LOOKUP reads a few.
        let mut order: BinaryHeap<(SeqNo, usize)> = blocks
            .iter()
            .enumerate()
            .map(|(i, b)| (b.bound, i))
            .collect();
        let mut scan = ComponentScan {
            tables,
            blocks,
            read: vec![false; block_count],
            tails: (0..block_count).map(|_| None).collect(),
            view,
            context: ReadContext::from_read_options(&self.read),
        };
        let sequence = scan.view.sequence();
        let attr_type = self.index.record.attr_type;
        // (entry seq, key start, value end, key end) in `arena`, newest entry on top.
        let mut pending: BinaryHeap<(SeqNo, usize, usize, usize)> = BinaryHeap::new();
        let mut scratch: Vec<u8> = Vec::new();
        // Blocks are read from the value's first key on (the block holding it starts lower)
        // and up to its end: the entries outside are not decoded.
        let seek = make_seek_key(&self.start, SEQ_MAX);
        let end_key = self.end.clone();
        let end = end_key.as_deref();
        loop {
            while order.peek().is_some_and(|&(_, i)| scan.read[i]) {
                order.pop();
            }
            let next = order.peek().map(|&(_, i)| i);
            let next_bound = order.peek().map(|&(bound, _)| bound);
            // Candidates at least as new as every unread block, newest first.
            while let Some(&(entry_seq, start, value_end, end)) = pending.peek() {
                if next_bound.is_some_and(|bound| entry_seq < bound) {
                    break;
                }
                pending.pop();
                if !self.top.would_accept(entry_seq.saturating_sub(1)) {
                    // Every other pending candidate and every unread block is older.
                    pending.clear();
                    break;
                }
                let (pk, pk_bytes) = decode_pk(&arena[value_end..end])
                    .map_err(|e| self.corrupt("composite key", &e))?;
                // Distinct keys of one value name distinct pks only if each key is exactly
                // `value ‖ pk`.
                if value_end + pk_bytes != end {
                    return Err(self.corrupt(
                        "composite key",
                        &IndexError::corrupt(value_end + pk_bytes, "bytes after the primary key"),
                    ));
                }
                self.validate_owned(pk, &arena[start..value_end], None, true)?;
            }
            let Some(bound) = next_bound else {
                break;
            };
            if !self.top.would_accept(bound.saturating_sub(1)) {
                // No unread block, and no pending candidate (all older than `bound`), can enter.
                break;
            }
            // The block, preceded by the blocks that may hold newer versions of its first key.
            scratch.clear();
            let Some(next) = next else {
                break;
            };
            let first_read = scan.read_block(next, &seek, end, &mut scratch)?;
            let mut chain = vec![(next, first_read)];
            loop {
                let (index, entries) = &chain[chain.len() - 1];
                let index = *index;
                let Some(first) = entries.first() else {
                    break;
                };
                let first_key = &scratch[first.key_start..first.key_end];
                if index == 0
                    || scan.read[index - 1]
                    || !self.in_range(first_key)
                    || !scan.previous_may_end_with(index, first_key)
                {
                    break;
                }
                let entries = scan.read_block(index - 1, &seek, end, &mut scratch)?;
                chain.push((index - 1, entries));
            }
            chain.reverse();
            // The scan state at the start of the chain: the last key of the block before it,
            // if that was read.
            // The scan state at the start of the chain: the last key of the block before it,
            // if that was read (copied into `scratch`: keys are compared as ranges of it).
            let (mut current, mut decided): (Option<(usize, usize)>, bool) = chain
                .first()
                .and_then(|(index, _)| index.checked_sub(1))
                .and_then(|previous| scan.tails[previous].take())
                .map_or((None, false), |tail| {
                    let start = scratch.len();
                    scratch.extend_from_slice(&tail.key);
                    (Some((start, scratch.len())), tail.decided)
                });
            for (index, entries) in &chain {
                for entry in entries {
                    let key = &scratch[entry.key_start..entry.key_end];
                    let same = current.is_some_and(|(s, e)| &scratch[s..e] == key);
                    if !same {
                        current = Some((entry.key_start, entry.key_end));
                        decided = false;
                    }
                    // Invisible versions, older versions of a decided key, keys below the range.
                    if entry.seq > sequence || decided || key < self.start.as_slice() {
                        continue;
                    }
                    decided = true;
                    let shadowed = !seen.is_empty()
                        && seen
                            .binary_search_by(|&(a, s, e)| arenas[a][s..e].cmp(key))
                            .is_ok();
                    let start = arena.len();
                    arena.extend_from_slice(key);
                    keys.push((start, arena.len()));
                    if !shadowed && entry.kind != ValueKind::Delete {
                        self.stats.candidates_examined += 1;
                        let (_, value_bytes) = decode_value(key, attr_type)
                            .map_err(|e| self.corrupt("composite key", &e))?;
                        pending.push((entry.seq, start, start + value_bytes, arena.len()));
                    }
                }
                // Only the key the block ends with can continue in the next block.
                scan.tails[*index] = current.map(|(s, e)| Tail {
                    key: scratch[s..e].to_vec(),
                    decided,
                });
            }
        }
        let unread = scan.read.iter().filter(|read| !**read).count();
        self.stats.blocks_skipped += unread as u64;
        Ok(())
    }
}
