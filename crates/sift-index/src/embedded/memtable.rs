//! The in-memory ordered map of recent writes of one `embedded` index (LevelDB++ keeps a
//! B-tree per memtable): `(encoded value, seq) → pk` for every put that carries the
//! attribute, so queries find memtable candidates without scanning the memtables.
//!
//! Instead of one map per engine memtable, one map holds the writes by sequence number and
//! forgets those a flush of the primary tree has put into a table: memtables are filled in
//! sequence order, so after a flush whose file's largest sequence number is `S`, every write
//! `<= S` is in tables. `pruned_through` is the largest sequence number forgotten (or never
//! recorded: writes made before the map existed, or of a failed batch). A query that sees a
//! tree state whose tables do not yet reach `pruned_through` cannot trust the map and scans
//! its memtables instead (see `embedded/query.rs`), so answers stay exact whatever the timing.
//!
//! Layout, chosen so a write costs an append (a B-tree insert of a random key cost about a
//! microsecond, a large part of a put): writes are appended to an unsorted buffer of compact
//! byte records (the entries, with their comparison prefixes, are built later, by the query
//! that needs them). A query first turns the buffer into a sorted run; runs are merged pairwise when a newer run is as large as
//! the one before it (a binary counter), so there are O(log n) runs and every run covers a
//! contiguous range of sequence numbers — which makes pruning drop whole runs. Queries then
//! binary-search each run. The sorting work is done once per written entry (plus the merges),
//! by the first query that needs it.

use parking_lot::{Mutex, MutexGuard};
use sift_lsm::SeqNo;
use std::cmp::Ordering;
use std::sync::atomic::{AtomicU64, Ordering as AtomicOrdering};

/// Bookkeeping bytes charged per entry on top of the value and pk bytes.
const ENTRY_OVERHEAD_BYTES: usize = 48;
/// Value and pk bytes up to this many are kept inside the entry: no allocation per write (an
/// int or time value and a tweet id fit), and pruning frees nothing one by one.
const INLINE_BYTES_MAX: usize = 32;

/// The encoded value then the pk, inline when short.
#[derive(Debug)]
enum EntryBytes {
    Inline {
        length: u8,
        bytes: [u8; INLINE_BYTES_MAX],
    },
    Heap(Box<[u8]>),
}

impl EntryBytes {
    fn new(value: &[u8], pk: &[u8]) -> EntryBytes {
        let length = value.len() + pk.len();
        if length <= INLINE_BYTES_MAX {
            let mut bytes = [0u8; INLINE_BYTES_MAX];
            bytes[..value.len()].copy_from_slice(value);
            bytes[value.len()..length].copy_from_slice(pk);
            return EntryBytes::Inline {
                length: length as u8,
                bytes,
            };
        }
        let mut bytes = Vec::with_capacity(length);
        bytes.extend_from_slice(value);
        bytes.extend_from_slice(pk);
        EntryBytes::Heap(bytes.into_boxed_slice())
    }

    #[inline]
    fn get(&self) -> &[u8] {
        match self {
            EntryBytes::Inline { length, bytes } => &bytes[..usize::from(*length)],
            EntryBytes::Heap(bytes) => bytes,
        }
    }
}

/// One recorded write.
#[derive(Debug)]
struct Entry {
    /// The value's first 8 bytes, big-endian, zero-padded: most comparisons end here.
    prefix: u64,
    seq: SeqNo,
    bytes: EntryBytes,
    value_bytes: u32,
}

impl Entry {
    fn new(value: &[u8], seq: SeqNo, pk: &[u8]) -> Entry {
        Entry {
            prefix: prefix_of(value),
            seq,
            bytes: EntryBytes::new(value, pk),
            value_bytes: value.len() as u32,
        }
    }
    fn value(&self) -> &[u8] {
        &self.bytes.get()[..self.value_bytes as usize]
    }
    fn pk(&self) -> &[u8] {
        &self.bytes.get()[self.value_bytes as usize..]
    }
    fn charge(&self) -> usize {
        charge_of(self.value(), self.pk())
    }
    /// Order of a run: value, then sequence number.
    fn order(&self, other: &Entry) -> Ordering {
        self.prefix
            .cmp(&other.prefix)
            .then_with(|| self.value().cmp(other.value()))
            .then(self.seq.cmp(&other.seq))
    }
    /// How the entry's value compares with `value` (whose prefix is `prefix`).
    fn value_cmp(&self, prefix: u64, value: &[u8]) -> Ordering {
        self.prefix
            .cmp(&prefix)
            .then_with(|| self.value().cmp(value))
    }
}

fn prefix_of(value: &[u8]) -> u64 {
    let mut prefix = [0u8; 8];
    let n = value.len().min(8);
    prefix[..n].copy_from_slice(&value[..n]);
    u64::from_be_bytes(prefix)
}

/// Entries sorted by `Entry::order`, with sequence numbers in `[seq_min, seq_max]`.
#[derive(Debug)]
struct Run {
    entries: Vec<Entry>,
    seq_min: SeqNo,
    seq_max: SeqNo,
}

/// Writes not yet sorted, as records `seq (8 bytes, little-endian) | value length (varint) |
/// pk length (varint) | value | pk` in one byte vector: a write appends a few dozen bytes (no
/// entry is built, nothing is allocated for it), and the first query that needs the writes
/// turns them into entries and a run.
#[derive(Debug, Default)]
struct Buffer {
    bytes: Vec<u8>,
    /// Where every `MARK_EVERY_RECORDS`-th record starts, so a prune finds its cut without
    /// reading all the records before it (long since out of the cache).
    marks: Vec<Mark>,
    records: usize,
    /// The records' charge (see `charge_of`).
    charge: usize,
    /// The sequence number of the last record.
    last_seq: SeqNo,
    /// An insert came with a smaller sequence number than the one before it (not expected:
    /// writes are recorded under the database's write lock; then pruning filters the records
    /// instead of cutting a prefix).
    unordered: bool,
}

const MARK_EVERY_RECORDS: usize = 64;

/// The buffer's first allocation. Large enough that the allocator maps it outside its heap
/// (glibc maps blocks of 128 KiB and more), so the buffer's growth by doubling leaves no freed
/// blocks in the heap for every other allocation of the write path to work around.
const BUFFER_FIRST_CAPACITY_BYTES: usize = 256 * 1024;

/// A record of a [`Buffer`] and what the records before it hold.
#[derive(Debug, Clone, Copy)]
struct Mark {
    seq: SeqNo,
    offset: usize,
    records_before: usize,
    charge_before: usize,
}

/// One record of a [`Buffer`]: `(seq, value, pk, bytes taken)`.
type BufferRecord<'a> = (SeqNo, &'a [u8], &'a [u8], usize);

impl Buffer {
    /// Appends a record. The usual record (an 8-byte int or time value, a short pk, not the
    /// first of a mark's stretch, in sequence order, room already reserved) is written by a
    /// short straight-line path; everything else by [`Buffer::push_general`], kept out of line
    /// so the write path's code stays small.
    #[inline]
    fn push(&mut self, value: &[u8], seq: SeqNo, pk: &[u8]) {
        const HEAD_BYTES: usize = 8 + 1 + 1 + 8;
        if let (Some(value_head), Ok(pk_length @ 0..0x80)) =
            (value.first_chunk::<8>(), u8::try_from(pk.len()))
        {
            if value.len() == 8
                && !self.records.is_multiple_of(MARK_EVERY_RECORDS)
                && self.last_seq <= seq
                && self.bytes.capacity() - self.bytes.len() >= HEAD_BYTES + pk.len()
            {
                let mut head = [0u8; HEAD_BYTES];
                head[..8].copy_from_slice(&seq.to_le_bytes());
                head[8] = 8;
                head[9] = pk_length;
                head[10..].copy_from_slice(value_head);
                self.bytes.extend_from_slice(&head);
                self.bytes.extend_from_slice(pk);
                self.last_seq = seq;
                self.records += 1;
                self.charge += charge_of(value, pk);
                return;
            }
        }
        self.push_general(value, seq, pk);
    }

    /// [`Buffer::push`] for every record.
    #[inline(never)]
    fn push_general(&mut self, value: &[u8], seq: SeqNo, pk: &[u8]) {
        if !self.bytes.is_empty() && self.last_seq > seq {
            self.unordered = true;
        }
        self.last_seq = seq;
        if self.records.is_multiple_of(MARK_EVERY_RECORDS) {
            self.marks.push(Mark {
                seq,
                offset: self.bytes.len(),
                records_before: self.records,
                charge_before: self.charge,
            });
        }
        self.records += 1;
        self.charge += charge_of(value, pk);
        let record_bytes_max = 8 + 10 + 10 + value.len() + pk.len();
        if self.bytes.capacity() == 0 {
            self.bytes
                .reserve(record_bytes_max.max(BUFFER_FIRST_CAPACITY_BYTES));
        } else {
            self.bytes.reserve(record_bytes_max);
        }
        if let (Ok(value_length @ 0..0x80), Ok(pk_length @ 0..0x80)) =
            (u8::try_from(value.len()), u8::try_from(pk.len()))
        {
            // One-byte lengths (the usual record): the header in one copy.
            let mut header = [0u8; 10];
            header[..8].copy_from_slice(&seq.to_le_bytes());
            header[8] = value_length;
            header[9] = pk_length;
            self.bytes.extend_from_slice(&header);
        } else {
            self.bytes.extend_from_slice(&seq.to_le_bytes());
            put_varint(&mut self.bytes, value.len() as u64);
            put_varint(&mut self.bytes, pk.len() as u64);
        }
        self.bytes.extend_from_slice(value);
        self.bytes.extend_from_slice(pk);
    }

    /// Heap bytes the buffer holds: its reserved capacity (a first reservation is
    /// `BUFFER_FIRST_CAPACITY_BYTES`, whatever is written into it) and its marks.
    fn reserved_bytes(&self) -> usize {
        self.bytes.capacity() + self.marks.capacity() * std::mem::size_of::<Mark>()
    }

    /// What the buffer is charged: its records' charge, or the memory it holds if that is more.
    fn memory_charge(&self) -> usize {
        self.charge.max(self.reserved_bytes())
    }

    fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }

    fn clear(&mut self) {
        self.bytes.clear();
        self.marks.clear();
        self.records = 0;
        self.charge = 0;
        self.unordered = false;
    }

    /// Drops the records `<= seq` of a buffer in sequence order (not `unordered`): they are a
    /// prefix. Returns how many records and how much charge it dropped.
    fn cut_through(&mut self, seq: SeqNo) -> (usize, usize) {
        if self.records == 0 {
            return (0, 0);
        }
        if self.last_seq <= seq {
            let dropped = (self.records, self.charge);
            self.clear();
            return dropped;
        }
        // The cut is at or after the last mark `<= seq`.
        let start = self
            .marks
            .partition_point(|mark| mark.seq <= seq)
            .checked_sub(1)
            .and_then(|position| self.marks.get(position));
        let (mut cut, mut records, mut charge) = start.map_or((0, 0, 0), |mark| {
            (mark.offset, mark.records_before, mark.charge_before)
        });
        while let Some((record_seq, value, pk, length)) =
            self.bytes.get(cut..).and_then(parse_record)
        {
            if record_seq > seq {
                break;
            }
            cut += length;
            records += 1;
            charge += charge_of(value, pk);
        }
        self.bytes.drain(..cut);
        self.marks.retain(|mark| mark.offset >= cut);
        for mark in &mut self.marks {
            mark.offset -= cut;
            mark.records_before = mark.records_before.saturating_sub(records);
            mark.charge_before = mark.charge_before.saturating_sub(charge);
        }
        self.records = self.records.saturating_sub(records);
        self.charge = self.charge.saturating_sub(charge);
        (records, charge)
    }

    /// The records, oldest first. The bytes were written by `push`; a record that does not
    /// parse (it cannot happen) ends the iteration rather than panicking.
    fn records(&self) -> impl Iterator<Item = BufferRecord<'_>> {
        let mut at = 0;
        std::iter::from_fn(move || {
            let rest = self.bytes.get(at..)?;
            let record = parse_record(rest)?;
            at += record.3;
            Some(record)
        })
    }
}

fn put_varint(out: &mut Vec<u8>, mut value: u64) {
    while value >= 0x80 {
        out.push((value as u8) | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

/// A varint and the bytes it took.
fn get_varint(bytes: &[u8]) -> Option<(u64, usize)> {
    let mut value: u64 = 0;
    for (index, &byte) in bytes.iter().enumerate().take(10) {
        value |= u64::from(byte & 0x7F) << (7 * index);
        if byte & 0x80 == 0 {
            return Some((value, index + 1));
        }
    }
    None
}

fn parse_record(bytes: &[u8]) -> Option<BufferRecord<'_>> {
    let seq = SeqNo::from_le_bytes(bytes.get(..8)?.try_into().ok()?);
    let (value_bytes, value_length_bytes) = get_varint(bytes.get(8..)?)?;
    let (pk_bytes, pk_length_bytes) = get_varint(bytes.get(8 + value_length_bytes..)?)?;
    let value_start = 8 + value_length_bytes + pk_length_bytes;
    let pk_start = value_start.checked_add(usize::try_from(value_bytes).ok()?)?;
    let end = pk_start.checked_add(usize::try_from(pk_bytes).ok()?)?;
    Some((
        seq,
        bytes.get(value_start..pk_start)?,
        bytes.get(pk_start..end)?,
        end,
    ))
}

/// Bytes charged for a recorded write (see `ENTRY_OVERHEAD_BYTES`).
fn charge_of(value: &[u8], pk: &[u8]) -> usize {
    value.len() + pk.len() + ENTRY_OVERHEAD_BYTES
}

#[derive(Debug, Default)]
struct Maps {
    /// Writes not yet in a run.
    buffer: Buffer,
    /// Oldest first; sequence ranges do not overlap and increase.
    runs: Vec<Run>,
    pruned_through: SeqNo,
    /// The runs' charge and entry count (the buffer keeps its own).
    runs_bytes: usize,
    runs_entries: usize,
}

impl Maps {
    /// Forgets every write `<= seq`. Out of line: it runs once per flush, not per write.
    #[cold]
    #[inline(never)]
    fn prune_through(&mut self, seq: SeqNo) {
        let maps = self;
        if seq <= maps.pruned_through {
            return;
        }
        maps.pruned_through = seq;
        let mut freed_bytes = 0;
        let mut freed_entries = 0;
        let mut forget = |entry: &Entry| {
            freed_bytes += entry.charge();
            freed_entries += 1;
        };
        let whole = maps
            .runs
            .iter()
            .take_while(|run| run.seq_max <= seq)
            .count();
        for run in maps.runs.drain(..whole) {
            run.entries.iter().for_each(&mut forget);
        }
        if let Some(run) = maps.runs.first_mut().filter(|run| run.seq_min <= seq) {
            run.entries.retain(|entry| {
                let keep = entry.seq > seq;
                if !keep {
                    forget(entry);
                }
                keep
            });
            run.seq_min = seq + 1;
        }
        maps.runs_bytes = maps.runs_bytes.saturating_sub(freed_bytes);
        maps.runs_entries = maps.runs_entries.saturating_sub(freed_entries);
        if maps.buffer.unordered {
            let mut kept = Buffer::default();
            for (record_seq, value, pk, _) in maps.buffer.records() {
                if record_seq > seq {
                    kept.push(value, record_seq, pk);
                }
            }
            maps.buffer = kept;
        } else {
            maps.buffer.cut_through(seq);
        }
        if maps.buffer.records == 0 {
            // Nothing left to sort: the buffer's memory goes (an idle map holds nothing), and
            // the next write reserves again.
            maps.buffer = Buffer {
                last_seq: maps.buffer.last_seq,
                ..Buffer::default()
            };
        }
    }

    /// Recorded writes (in runs and in the buffer).
    #[cfg(test)]
    fn entries(&self) -> usize {
        self.runs_entries + self.buffer.records
    }

    /// Heap bytes charged: the runs' entries, and the buffer's records or reservation.
    fn memory_charge(&self) -> usize {
        self.runs_bytes + self.buffer.memory_charge()
    }

    fn seal_buffer(&mut self) {
        if self.buffer.is_empty() {
            return;
        }
        let mut entries: Vec<Entry> = self
            .buffer
            .records()
            .map(|(seq, value, pk, _)| Entry::new(value, seq, pk))
            .collect();
        self.runs_bytes += self.buffer.charge;
        self.runs_entries += self.buffer.records;
        self.buffer.clear();
        entries.sort_unstable_by(Entry::order);
        let seq_min = entries.iter().map(|e| e.seq).min().unwrap_or(0);
        let seq_max = entries.iter().map(|e| e.seq).max().unwrap_or(0);
        self.runs.push(Run {
            entries,
            seq_min,
            seq_max,
        });
        while self.runs.len() >= 2 {
            let last = self.runs.len() - 1;
            if self.runs[last].entries.len() < self.runs[last - 1].entries.len() {
                break;
            }
            let (Some(newer), Some(older)) = (self.runs.pop(), self.runs.pop()) else {
                break;
            };
            self.runs.push(merge(older, newer));
        }
    }
}

fn merge(older: Run, newer: Run) -> Run {
    let mut entries = Vec::with_capacity(older.entries.len() + newer.entries.len());
    let mut a = older.entries.into_iter().peekable();
    let mut b = newer.entries.into_iter().peekable();
    loop {
        let take_a = match (a.peek(), b.peek()) {
            (Some(x), Some(y)) => x.order(y) != Ordering::Greater,
            (Some(_), None) => true,
            (None, Some(_)) => false,
            (None, None) => break,
        };
        let next = if take_a { a.next() } else { b.next() };
        entries.extend(next);
    }
    Run {
        entries,
        seq_min: older.seq_min.min(newer.seq_min),
        seq_max: older.seq_max.max(newer.seq_max),
    }
}

/// What [`MemtableMap::visit`] calls: `(value, seq, pk)`.
pub type MapVisitor<'a> = dyn FnMut(&[u8], SeqNo, &[u8]) + 'a;

#[derive(Debug, Default)]
pub struct MemtableMap {
    maps: Mutex<Maps>,
    /// A prune asked for (see `prune_through`), applied by the next user of `maps`.
    prune_requested: AtomicU64,
}

impl MemtableMap {
    /// Records a put of `pk` at `seq` carrying `value`. Called before the write reaches the
    /// engine, so no query can see the version without the map knowing it.
    ///
    /// One function, out of line, with the buffer's usual record written inline: it runs on
    /// every put, where the code it touches counts as much as its instructions.
    #[inline(never)]
    pub fn insert(&self, value: &[u8], seq: SeqNo, pk: &[u8]) {
        let mut maps = self.lock();
        if seq <= maps.pruned_through {
            return;
        }
        maps.buffer.push(value, seq, pk);
    }

    /// The maps, with any requested prune applied.
    #[inline]
    fn lock(&self) -> MutexGuard<'_, Maps> {
        let mut maps = self.maps.lock();
        let requested = self.prune_requested.load(AtomicOrdering::Acquire);
        if requested > maps.pruned_through {
            maps.prune_through(requested);
        }
        maps
    }

    /// Forgets every write `<= seq` (they are in tables now, or cannot be trusted), at the
    /// latest when the map is next used: the flush listener calls this inside the engine's
    /// version install, which must not wait for a query holding the map.
    pub fn prune_through(&self, seq: SeqNo) {
        self.prune_requested.fetch_max(seq, AtomicOrdering::AcqRel);
    }

    /// `(seq, pk)` of the recorded writes with encoded value in `[start, end)` and sequence
    /// number in `(above, through]`, and the map's `pruned_through`, read together.
    pub fn candidates(
        &self,
        start: &[u8],
        end: Option<&[u8]>,
        above: SeqNo,
        through: SeqNo,
    ) -> (Vec<(SeqNo, Vec<u8>)>, SeqNo) {
        let mut found = Vec::new();
        let pruned_through = self.visit(&[(start, end)], above, through, &mut |_, seq, pk| {
            found.push((seq, pk.to_vec()));
        });
        (found, pruned_through)
    }

    /// Calls `visit(value, seq, pk)` for each recorded write with encoded value in one of the
    /// `[start, end)` ranges (which must not overlap) and sequence number in
    /// `(above, through]`; returns the map's `pruned_through`, read together with the writes.
    pub fn visit(
        &self,
        ranges: &[(&[u8], Option<&[u8]>)],
        above: SeqNo,
        through: SeqNo,
        visit: &mut MapVisitor<'_>,
    ) -> SeqNo {
        let mut maps = self.lock();
        maps.seal_buffer();
        for run in &maps.runs {
            if run.seq_max <= above || run.seq_min > through {
                continue;
            }
            for &(start, end) in ranges {
                let start_prefix = prefix_of(start);
                let end_prefix = end.map(prefix_of);
                let first = run
                    .entries
                    .partition_point(|e| e.value_cmp(start_prefix, start) == Ordering::Less);
                for entry in run.entries[first..].iter().take_while(|e| {
                    end.zip(end_prefix)
                        .is_none_or(|(end, p)| e.value_cmp(p, end) == Ordering::Less)
                }) {
                    if entry.seq > above && entry.seq <= through {
                        visit(entry.value(), entry.seq, entry.pk());
                    }
                }
            }
        }
        maps.pruned_through
    }

    #[cfg(test)]
    pub fn pruned_through(&self) -> SeqNo {
        self.lock().pruned_through
    }

    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.lock().entries()
    }

    #[cfg(test)]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Approximate heap bytes held: the recorded writes' charge, and at least the memory the
    /// buffer of unsorted writes has reserved.
    pub fn memory_bytes(&self) -> u64 {
        self.lock().memory_charge() as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};
    use std::collections::BTreeMap;

    /// Every record `Buffer::push` writes (the one-copy 8-byte-value record included) is the
    /// layout's record, byte for byte, and reads back as what was pushed.
    #[test]
    fn buffer_records_are_the_layout_byte_for_byte() {
        let seed = 0xB0F_u64;
        let mut rng = StdRng::seed_from_u64(seed);
        let mut buffer = Buffer::default();
        let mut want_bytes = Vec::new();
        let mut want_records = Vec::new();
        for seq in 0..2000u64 {
            let value_length = [8, 8, 8, 0, 7, 9, 200][rng.gen_range(0..7)];
            let pk_length = [16, 16, 1, 0, 127, 128, 300][rng.gen_range(0..7)];
            let value: Vec<u8> = (0..value_length).map(|_| rng.gen()).collect();
            let pk: Vec<u8> = (0..pk_length).map(|_| rng.gen()).collect();
            buffer.push(&value, seq, &pk);
            want_bytes.extend_from_slice(&seq.to_le_bytes());
            put_varint(&mut want_bytes, value.len() as u64);
            put_varint(&mut want_bytes, pk.len() as u64);
            want_bytes.extend_from_slice(&value);
            want_bytes.extend_from_slice(&pk);
            want_records.push((seq, value, pk));
        }
        assert_eq!(buffer.bytes, want_bytes, "seed {seed}");
        let got: Vec<(SeqNo, Vec<u8>, Vec<u8>)> = buffer
            .records()
            .map(|(seq, value, pk, _)| (seq, value.to_vec(), pk.to_vec()))
            .collect();
        assert_eq!(got, want_records, "seed {seed}");
    }

    /// `Buffer::push` (its short path for the usual record) leaves the buffer exactly as
    /// `Buffer::push_general` does: bytes, marks, counts, charge and order flag, with sequence
    /// numbers mostly increasing (sometimes repeated or going back) and every kind of record.
    #[test]
    fn push_matches_the_general_push() {
        for seed in [1u64, 2, 3] {
            let mut rng = StdRng::seed_from_u64(seed);
            let mut fast = Buffer::default();
            let mut general = Buffer::default();
            let mut seq: SeqNo = 1000;
            for step in 0..5000 {
                seq = match rng.gen_range(0..20) {
                    0 => seq.saturating_sub(rng.gen_range(1..50)),
                    1 => seq,
                    _ => seq + rng.gen_range(1..3),
                };
                let value_length = [8, 8, 8, 8, 0, 7, 9, 130][rng.gen_range(0..8)];
                let pk_length = [16, 16, 16, 1, 0, 127, 128, 300][rng.gen_range(0..8)];
                let value: Vec<u8> = (0..value_length).map(|_| rng.gen()).collect();
                let pk: Vec<u8> = (0..pk_length).map(|_| rng.gen()).collect();
                fast.push(&value, seq, &pk);
                general.push_general(&value, seq, &pk);
                assert_eq!(fast.bytes, general.bytes, "step {step} seed {seed}");
                assert_eq!(fast.records, general.records, "step {step} seed {seed}");
                assert_eq!(fast.charge, general.charge, "step {step} seed {seed}");
                assert_eq!(fast.last_seq, general.last_seq, "step {step} seed {seed}");
                assert_eq!(fast.unordered, general.unordered, "step {step} seed {seed}");
                let marks = |buffer: &Buffer| -> Vec<(SeqNo, usize, usize, usize)> {
                    buffer
                        .marks
                        .iter()
                        .map(|m| (m.seq, m.offset, m.records_before, m.charge_before))
                        .collect()
                };
                assert_eq!(marks(&fast), marks(&general), "step {step} seed {seed}");
                if rng.gen_ratio(1, 700) {
                    // A prune cuts both the same way (records no longer a multiple of the
                    // mark stride afterwards).
                    let cut = seq.saturating_sub(rng.gen_range(0..200));
                    if !fast.unordered {
                        assert_eq!(
                            fast.cut_through(cut),
                            general.cut_through(cut),
                            "step {step} seed {seed}"
                        );
                    }
                }
            }
        }
    }

    /// The map's memory charge covers what its buffer has reserved (the first write reserves
    /// `BUFFER_FIRST_CAPACITY_BYTES`), and a prune of every write gives the memory back.
    #[test]
    fn memory_charge_covers_the_reserved_buffer() {
        let seed = 11;
        let mut rng = StdRng::seed_from_u64(seed);
        let map = MemtableMap::default();
        assert_eq!(map.memory_bytes(), 0);
        map.insert(&7u64.to_be_bytes(), 1, b"pk1");
        let reserved = |map: &MemtableMap| map.lock().buffer.reserved_bytes() as u64;
        assert!(reserved(&map) >= BUFFER_FIRST_CAPACITY_BYTES as u64);
        assert!(map.memory_bytes() >= reserved(&map));
        let mut seq = 1;
        for round in 0..30 {
            for _ in 0..rng.gen_range(1..3000) {
                seq += 1;
                let value: Vec<u8> = (0..rng.gen_range(0..40)).map(|_| rng.gen()).collect();
                map.insert(&value, seq, format!("pk{seq}").as_bytes());
            }
            if rng.gen_ratio(1, 3) {
                map.prune_through(seq - rng.gen_range(0..seq.min(500)));
            }
            if rng.gen_ratio(1, 5) {
                map.candidates(b"", None, 0, SeqNo::MAX);
            }
            let maps = map.lock();
            let held = maps.buffer.reserved_bytes() + maps.runs_bytes;
            let charge = maps.runs_bytes + maps.buffer.charge;
            drop(maps);
            assert!(
                map.memory_bytes() >= held as u64,
                "round {round} seed {seed}: charge {} below reserved {held}",
                map.memory_bytes()
            );
            assert!(
                map.memory_bytes() >= charge as u64,
                "round {round} seed {seed}"
            );
        }
        map.prune_through(seq);
        assert_eq!(map.memory_bytes(), 0);
        assert!(map.is_empty());
    }

    fn sorted(mut v: Vec<(SeqNo, Vec<u8>)>) -> Vec<(SeqNo, Vec<u8>)> {
        v.sort();
        v
    }

    #[test]
    fn candidates_prune_and_order() {
        let map = MemtableMap::default();
        map.insert(b"b", 1, b"p1");
        map.insert(b"a", 2, b"p2");
        map.insert(b"b", 3, b"p3");
        map.insert(b"c", 4, b"p4");
        let (found, pruned) = map.candidates(b"b", Some(b"c"), 0, 10);
        assert_eq!(
            sorted(found),
            vec![(1, b"p1".to_vec()), (3, b"p3".to_vec())]
        );
        assert_eq!(pruned, 0);
        assert_eq!(map.candidates(b"a", None, 1, 3).0.len(), 2);
        map.prune_through(2);
        assert_eq!(map.len(), 2);
        assert_eq!(map.pruned_through(), 2);
        let (found, pruned) = map.candidates(b"", None, 0, 10);
        assert_eq!(found.len(), 2);
        assert_eq!(pruned, 2);
        // Writes at or below the pruned sequence are not recorded again.
        map.insert(b"z", 2, b"late");
        assert_eq!(map.len(), 2);
        map.prune_through(100);
        assert!(map.is_empty());
        assert_eq!(map.memory_bytes(), 0);
    }

    /// Inline and heap entries read back the same bytes; inserts out of sequence order (not
    /// made by the write path, but allowed) are pruned by sequence number, not by position.
    #[test]
    fn long_entries_and_out_of_order_inserts() {
        let map = MemtableMap::default();
        let long_value = vec![7u8; 300]; // its length takes a two-byte varint in the buffer
        let long_pk = vec![b'p'; 30];
        map.insert(&long_value, 5, &long_pk);
        map.insert(b"short", 3, b"k3");
        map.insert(b"short", 9, b"k9");
        map.insert(b"", 4, b"");
        assert_eq!(
            sorted(map.candidates(&long_value, Some(&[8u8]), 0, 100).0),
            vec![(5, long_pk.clone())]
        );
        map.prune_through(4);
        assert_eq!(
            sorted(map.candidates(b"", None, 0, 100).0),
            vec![(5, long_pk.clone()), (9, b"k9".to_vec())]
        );
        assert_eq!(map.len(), 2);
        // After a query sealed the buffer, new inserts are in order again: a prefix is cut.
        map.insert(b"a", 10, b"k10");
        map.insert(b"b", 11, b"k11");
        map.prune_through(10);
        assert_eq!(
            sorted(map.candidates(b"", None, 0, 100).0),
            vec![(11, b"k11".to_vec())]
        );
        // The sorted entry, and the buffer's reservation (kept for the writes to come).
        let reserved = map.lock().buffer.reserved_bytes();
        assert!(reserved > 0);
        assert_eq!(
            map.memory_bytes(),
            (b"b".len() + b"k11".len() + ENTRY_OVERHEAD_BYTES + reserved) as u64
        );
    }

    /// Prunes of a buffer no query has sealed (many marks) cut exactly at the pruned sequence
    /// number and account for what they drop.
    #[test]
    fn prunes_of_a_long_buffer_cut_at_the_right_record() {
        let seed = 5;
        let mut rng = StdRng::seed_from_u64(seed);
        let map = MemtableMap::default();
        let mut model: BTreeMap<SeqNo, (Vec<u8>, Vec<u8>)> = BTreeMap::new();
        let mut seq = 0;
        let mut pruned = 0;
        for round in 0..20 {
            for _ in 0..rng.gen_range(0..400) {
                seq += 1;
                let value: Vec<u8> = (0..rng.gen_range(0..200)).map(|_| rng.gen()).collect();
                let pk = format!("pk{seq}").into_bytes();
                map.insert(&value, seq, &pk);
                model.insert(seq, (value, pk));
            }
            pruned = rng.gen_range(pruned..=seq + 2);
            map.prune_through(pruned);
            model.retain(|s, _| *s > pruned);
            let charge: usize = model.values().map(|(v, pk)| charge_of(v, pk)).sum();
            assert_eq!(map.len(), model.len(), "round {round} seed {seed}");
            // At least the records' charge and the buffer's reservation, at most both.
            let reserved = map.lock().buffer.reserved_bytes() as u64;
            let charged = map.memory_bytes();
            let charge = charge as u64;
            assert!(
                charged >= charge.max(reserved) && charged <= charge + reserved,
                "round {round} seed {seed}: charged {charged}, records {charge}, reserved {reserved}"
            );
            if round % 5 == 4 {
                let want: Vec<(SeqNo, Vec<u8>)> =
                    model.iter().map(|(s, (_, pk))| (*s, pk.clone())).collect();
                assert_eq!(
                    sorted(map.candidates(b"", None, 0, SeqNo::MAX).0),
                    want,
                    "round {round} seed {seed}"
                );
            }
        }
    }

    /// Against a BTreeMap model, through many runs, merges and prunes.
    #[test]
    fn matches_a_model() {
        let seed = 7;
        let mut rng = StdRng::seed_from_u64(seed);
        let map = MemtableMap::default();
        let mut model: BTreeMap<(Vec<u8>, SeqNo), Vec<u8>> = BTreeMap::new();
        let mut seq = 0;
        let mut pruned = 0;
        // Mostly short values (entries kept inline), some longer than an inline entry holds.
        let value = |rng: &mut StdRng| -> Vec<u8> {
            let len = if rng.gen_ratio(1, 8) {
                rng.gen_range(20..60)
            } else {
                rng.gen_range(0..12)
            };
            (0..len).map(|_| rng.gen_range(0..4u8)).collect()
        };
        for step in 0..6000 {
            seq += 1;
            let v = value(&mut rng);
            map.insert(&v, seq, format!("pk{step}").as_bytes());
            model.insert((v, seq), format!("pk{step}").into_bytes());
            if rng.gen_ratio(1, 500) {
                pruned = rng.gen_range(pruned..=seq);
                map.prune_through(pruned);
                model.retain(|(_, s), _| *s > pruned);
            }
            if step % 97 == 0 {
                let mut bounds = [value(&mut rng), value(&mut rng)];
                bounds.sort();
                let [start, end] = bounds;
                let above = rng.gen_range(0..=seq);
                let (found, p) = map.candidates(&start, Some(&end), above, seq);
                assert_eq!(p, pruned);
                let want: Vec<(SeqNo, Vec<u8>)> = model
                    .iter()
                    .filter(|((v, s), _)| *v >= start && *v < end && *s > above)
                    .map(|((_, s), pk)| (*s, pk.clone()))
                    .collect();
                assert_eq!(sorted(found), sorted(want), "step {step} seed {seed}");
                assert_eq!(map.len(), model.len());
            }
        }
    }
}
