//! `LogReader`: reassembles records from a log file held in memory, and tells a torn tail
//! (dropped silently) from damage in the middle of the log (an error, or skipped when salvaging).
//! The rules are in `docs/format/wal.md`.

use super::{
    fragment_crc, BLOCK_BYTES, FRAGMENT_FIRST, FRAGMENT_FULL, FRAGMENT_LAST, FRAGMENT_MIDDLE,
    HEADER_BYTES,
};
use crate::options::WalRecovery;
use crate::{Error, Result};
use std::ops::Range;
use std::path::{Path, PathBuf};

/// Reads the records of one log file.
pub struct LogReader {
    bytes: Vec<u8>,
    path: PathBuf,
    recovery: WalRecovery,
    /// Offset of the next fragment to read.
    position: usize,
    /// Set once the end (or a torn tail, or an error) was reached.
    finished: bool,
    dropped_tail_bytes: u64,
    skipped_bytes: u64,
    /// The end of the last record returned.
    valid_bytes: usize,
}

impl std::fmt::Debug for LogReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LogReader")
            .field("path", &self.path)
            .field("file_bytes", &self.bytes.len())
            .field("position", &self.position)
            .field("dropped_tail_bytes", &self.dropped_tail_bytes)
            .field("skipped_bytes", &self.skipped_bytes)
            .finish_non_exhaustive()
    }
}

impl LogReader {
    /// `bytes` is the whole log file; `path` names it in errors.
    pub fn new(bytes: Vec<u8>, path: PathBuf, recovery: WalRecovery) -> Self {
        LogReader {
            bytes,
            path,
            recovery,
            position: 0,
            finished: false,
            dropped_tail_bytes: 0,
            skipped_bytes: 0,
            valid_bytes: 0,
        }
    }

    /// The log's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Bytes at the end of the file that held no complete record and were ignored as a torn
    /// tail (an all-zero remainder counts as padding, not as dropped).
    pub fn dropped_tail_bytes(&self) -> u64 {
        self.dropped_tail_bytes
    }

    /// The offset just past the last record returned so far: where the log's valid records
    /// end once reading has finished.
    pub fn valid_bytes(&self) -> u64 {
        self.valid_bytes as u64
    }

    /// Bytes of damaged records skipped in the middle of the log (`SalvageCorrupted` only).
    pub fn skipped_bytes(&self) -> u64 {
        self.skipped_bytes
    }

    /// The next record: the file offset of its first fragment and its payload. `Ok(None)` at
    /// the end of the log, including after a torn tail. Mid-log damage is `Error::Corruption`
    /// at the damaged record's offset unless the reader salvages.
    pub fn read_record(&mut self) -> Result<Option<(u64, Vec<u8>)>> {
        // Offset of the FIRST fragment while a fragmented record is being assembled.
        let mut record_start: Option<usize> = None;
        let mut payload = Vec::new();
        loop {
            if self.finished {
                return Ok(None);
            }
            if self.position >= self.bytes.len() {
                if let Some(start) = record_start.take() {
                    payload.clear();
                    let end = self.bytes.len();
                    self.damage(
                        start,
                        end,
                        "the file ends before the record's last fragment",
                    )?;
                    continue;
                }
                self.finished = true;
                return Ok(None);
            }
            let left_in_block = BLOCK_BYTES - self.position % BLOCK_BYTES;
            if left_in_block < HEADER_BYTES {
                // Zero-filled block trailer; its bytes are not covered by any checksum.
                self.position = (self.position + left_in_block).min(self.bytes.len());
                continue;
            }
            let position = self.position;
            match parse_fragment(&self.bytes, position) {
                Err(message) => {
                    let damaged_at = record_start.unwrap_or(position);
                    self.damage(damaged_at, position + 1, &message.to_string())?;
                    record_start = None;
                    payload.clear();
                }
                Ok((fragment_type, range)) => match (fragment_type, record_start) {
                    (FRAGMENT_FULL, None) => {
                        self.position = range.end;
                        self.valid_bytes = range.end;
                        return Ok(Some((position as u64, self.bytes[range].to_vec())));
                    }
                    (FRAGMENT_FIRST, None) => {
                        self.position = range.end;
                        record_start = Some(position);
                        payload.extend_from_slice(&self.bytes[range]);
                    }
                    (FRAGMENT_MIDDLE, Some(_)) => {
                        self.position = range.end;
                        payload.extend_from_slice(&self.bytes[range]);
                    }
                    (FRAGMENT_LAST, Some(start)) => {
                        self.position = range.end;
                        self.valid_bytes = range.end;
                        payload.extend_from_slice(&self.bytes[range]);
                        return Ok(Some((start as u64, payload)));
                    }
                    (FRAGMENT_FULL | FRAGMENT_FIRST, Some(start)) => {
                        // This fragment is itself a valid record start, so the search finds it.
                        self.damage(
                            start,
                            position,
                            "record interrupted by the start of another record",
                        )?;
                        record_start = None;
                        payload.clear();
                    }
                    (_, None) => {
                        self.damage(
                            position,
                            position + 1,
                            &format!("fragment of type {fragment_type} without a FIRST fragment"),
                        )?;
                    }
                    (_, Some(start)) => {
                        // Unreachable: `parse_fragment` accepts only the four known types.
                        self.damage(
                            start,
                            position + 1,
                            &format!("unknown fragment type {fragment_type}"),
                        )?;
                        record_start = None;
                        payload.clear();
                    }
                },
            }
        }
    }

    /// Handles damage starting at `damaged_at`: looks for a valid record start at or after
    /// `search_from` and decides between torn tail (reading stops), corruption error, and
    /// salvage (reading resumes at the next valid record).
    fn damage(&mut self, damaged_at: usize, search_from: usize, message: &str) -> Result<()> {
        let tail = &self.bytes[damaged_at.min(self.bytes.len())..];
        let tail_is_zero = tail.iter().all(|&b| b == 0);
        let next_record = if tail_is_zero {
            None
        } else {
            find_record_start(&self.bytes, search_from)
        };
        match next_record {
            None => {
                // Torn tail: nothing valid follows, so this is a write that never finished.
                self.finished = true;
                if !tail_is_zero {
                    self.dropped_tail_bytes = tail.len() as u64;
                }
                self.position = self.bytes.len();
                Ok(())
            }
            Some(next) => match self.recovery {
                WalRecovery::TolerateTornTail => {
                    self.finished = true;
                    Err(Error::corruption(
                        &self.path,
                        damaged_at as u64,
                        format!(
                            "log record damaged ({message}) but a valid record follows at \
                             offset {next}, so it is not a torn tail"
                        ),
                    ))
                }
                WalRecovery::SalvageCorrupted => {
                    self.skipped_bytes += (next - damaged_at) as u64;
                    self.position = next;
                    Ok(())
                }
            },
        }
    }
}

/// Why a fragment does not verify. Formatted only when it is reported, so that the search for
/// the next valid record does not allocate.
#[derive(Debug, Clone, Copy)]
enum FragmentDamage {
    TruncatedHeader {
        file_has: usize,
    },
    Overrun {
        length: usize,
        room: usize,
    },
    Truncated {
        length: usize,
        file_has: usize,
    },
    ChecksumMismatch,
    UnknownType(u8),
    ShortFragment {
        fragment_type: u8,
        length: usize,
        room: usize,
    },
}

impl std::fmt::Display for FragmentDamage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match *self {
            FragmentDamage::TruncatedHeader { file_has } => {
                write!(
                    f,
                    "truncated fragment header: {file_has} of {HEADER_BYTES} bytes"
                )
            }
            FragmentDamage::Overrun { length, room } => write!(
                f,
                "fragment length {length} overruns its block ({room} bytes left)"
            ),
            FragmentDamage::Truncated { length, file_has } => write!(
                f,
                "truncated fragment: header says {length} bytes, file has {file_has}"
            ),
            FragmentDamage::ChecksumMismatch => write!(f, "fragment checksum mismatch"),
            FragmentDamage::UnknownType(t) => write!(f, "unknown fragment type {t}"),
            FragmentDamage::ShortFragment {
                fragment_type,
                length,
                room,
            } => write!(
                f,
                "fragment of type {fragment_type} holds {length} bytes but must fill its block \
                 ({room} bytes)"
            ),
        }
    }
}

/// Parses and verifies the fragment at `position` (which leaves at least a header's worth of
/// room in its block). Returns its type and payload range, or why it is damaged.
fn parse_fragment(
    bytes: &[u8],
    position: usize,
) -> std::result::Result<(u8, Range<usize>), FragmentDamage> {
    let header =
        bytes
            .get(position..position + HEADER_BYTES)
            .ok_or(FragmentDamage::TruncatedHeader {
                file_has: bytes.len().saturating_sub(position),
            })?;
    let stored_crc = u32::from_le_bytes([header[0], header[1], header[2], header[3]]);
    let length = usize::from(u16::from_le_bytes([header[4], header[5]]));
    let fragment_type = header[6];
    let room = BLOCK_BYTES - position % BLOCK_BYTES - HEADER_BYTES;
    if length > room {
        return Err(FragmentDamage::Overrun { length, room });
    }
    // The writer ends a fragment before the block end only when the record ends there.
    if (fragment_type == FRAGMENT_FIRST || fragment_type == FRAGMENT_MIDDLE) && length != room {
        return Err(FragmentDamage::ShortFragment {
            fragment_type,
            length,
            room,
        });
    }
    let start = position + HEADER_BYTES;
    let end = start + length;
    let payload = bytes.get(start..end).ok_or(FragmentDamage::Truncated {
        length,
        file_has: bytes.len() - start,
    })?;
    if fragment_crc(fragment_type, payload) != stored_crc {
        return Err(FragmentDamage::ChecksumMismatch);
    }
    if !(FRAGMENT_FULL..=FRAGMENT_LAST).contains(&fragment_type) {
        return Err(FragmentDamage::UnknownType(fragment_type));
    }
    Ok((fragment_type, start..end))
}

/// The first offset at or after `from` holding a FULL or FIRST fragment that verifies.
/// Every byte offset is tried (except block trailers too short for a header), so a record that
/// follows damage in the same block is found too.
fn find_record_start(bytes: &[u8], from: usize) -> Option<usize> {
    let mut position = from;
    while position + HEADER_BYTES <= bytes.len() {
        let block_end = (position / BLOCK_BYTES + 1) * BLOCK_BYTES;
        // The last offset in this block (and file) where a whole header fits.
        let last_candidate = (block_end - HEADER_BYTES).min(bytes.len() - HEADER_BYTES);
        if position > last_candidate {
            position = block_end;
            continue;
        }
        // Cheap test of the type bytes before any checksum.
        let type_bytes = &bytes[position + 6..=last_candidate + 6];
        match type_bytes
            .iter()
            .position(|&t| t == FRAGMENT_FULL || t == FRAGMENT_FIRST)
        {
            None => position = last_candidate + 1,
            Some(index) => {
                let candidate = position + index;
                if parse_fragment(bytes, candidate).is_ok() {
                    return Some(candidate);
                }
                position = candidate + 1;
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::super::writer::tests::memory_writer;
    use super::*;
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};

    const PATH: &str = "000001.wal";

    /// Writes `records` and returns the file bytes and each record's offset.
    fn write_log(records: &[Vec<u8>]) -> (Vec<u8>, Vec<u64>) {
        let (mut writer, file) = memory_writer();
        let mut offsets = Vec::new();
        for record in records {
            let before = writer.file_bytes();
            writer.add_record(record).unwrap();
            // The record starts after any block trailer the writer skipped.
            let left = BLOCK_BYTES as u64 - before % BLOCK_BYTES as u64;
            offsets.push(if left < HEADER_BYTES as u64 {
                before + left
            } else {
                before
            });
        }
        let bytes = file.bytes.lock().clone();
        (bytes, offsets)
    }

    /// Records read (offset, payload), or the error that stopped reading.
    type ReadOutcome = Result<Vec<(u64, Vec<u8>)>>;

    /// Reads every record; also returns the dropped-tail and skipped byte counts.
    fn read_all(bytes: Vec<u8>, recovery: WalRecovery) -> (ReadOutcome, u64, u64) {
        let mut reader = LogReader::new(bytes, PathBuf::from(PATH), recovery);
        let mut out = Vec::new();
        let result = loop {
            match reader.read_record() {
                Ok(Some(r)) => out.push(r),
                Ok(None) => break Ok(out),
                Err(e) => break Err(e),
            }
        };
        (result, reader.dropped_tail_bytes(), reader.skipped_bytes())
    }

    fn random_records(rng: &mut StdRng, count: usize, bytes_max: usize) -> Vec<Vec<u8>> {
        (0..count)
            .map(|_| {
                // Mostly small records, some large enough to span several blocks.
                let len = if rng.gen_bool(0.3) {
                    rng.gen_range(0..=bytes_max)
                } else {
                    rng.gen_range(0..200)
                };
                (0..len).map(|_| rng.gen()).collect()
            })
            .collect()
    }

    fn expect_records(got: &[(u64, Vec<u8>)], records: &[Vec<u8>], offsets: &[u64], seed: u64) {
        assert_eq!(got.len(), records.len(), "seed {seed}");
        for (i, ((offset, payload), (record, expected_offset))) in
            got.iter().zip(records.iter().zip(offsets)).enumerate()
        {
            assert_eq!(offset, expected_offset, "record {i}, seed {seed}");
            assert!(payload == record, "record {i} differs, seed {seed}");
        }
    }

    #[test]
    fn random_records_round_trip_across_blocks() {
        for seed in 0..8u64 {
            let mut rng = StdRng::seed_from_u64(seed);
            let records = random_records(&mut rng, 60, 100 << 10);
            let (bytes, offsets) = write_log(&records);
            for recovery in [WalRecovery::TolerateTornTail, WalRecovery::SalvageCorrupted] {
                let (got, dropped, skipped) = read_all(bytes.clone(), recovery);
                expect_records(&got.unwrap(), &records, &offsets, seed);
                assert_eq!((dropped, skipped), (0, 0), "seed {seed}");
            }
        }
    }

    #[test]
    fn record_ending_at_block_boundary_and_short_trailers() {
        for leave in 0..=HEADER_BYTES {
            // First record leaves `leave` bytes in block 0; 0..6 of them become a trailer.
            let first = vec![1u8; BLOCK_BYTES - HEADER_BYTES - leave];
            let records = vec![first, b"second".to_vec(), Vec::new(), vec![3u8; 40_000]];
            let (bytes, offsets) = write_log(&records);
            if leave < HEADER_BYTES {
                assert_eq!(offsets[1], BLOCK_BYTES as u64, "leave {leave}");
            } else {
                assert_eq!(offsets[1], (BLOCK_BYTES - HEADER_BYTES) as u64);
            }
            let (got, dropped, _) = read_all(bytes, WalRecovery::TolerateTornTail);
            expect_records(&got.unwrap(), &records, &offsets, leave as u64);
            assert_eq!(dropped, 0);
        }
    }

    #[test]
    fn every_truncation_of_the_last_record_is_a_torn_tail() {
        let mut rng = StdRng::seed_from_u64(11);
        // Earlier records fill block 0 to about 32,700 bytes, so the last record is FIRST (a few
        // bytes), MIDDLE (all of block 1) and LAST (a few bytes), and every cut can be tried.
        let mut records = Vec::new();
        let mut written = 0;
        while written < 32_600 {
            let len = rng.gen_range(0..400);
            records.push((0..len).map(|_| rng.gen()).collect::<Vec<u8>>());
            written += len + HEADER_BYTES;
        }
        let first_room = BLOCK_BYTES - written - HEADER_BYTES;
        let last_len = first_room + (BLOCK_BYTES - HEADER_BYTES) + 50;
        records.push((0..last_len).map(|_| rng.gen()).collect());
        let (bytes, offsets) = write_log(&records);
        assert_eq!(bytes.len(), 2 * BLOCK_BYTES + HEADER_BYTES + 50);
        let last_start = *offsets.last().unwrap() as usize;
        let earlier = records.len() - 1;
        for cut in last_start..bytes.len() {
            let recoveries: &[WalRecovery] = if cut % 7 == 0 {
                &[WalRecovery::TolerateTornTail, WalRecovery::SalvageCorrupted]
            } else {
                &[WalRecovery::TolerateTornTail]
            };
            for &recovery in recoveries {
                let (got, dropped, skipped) = read_all(bytes[..cut].to_vec(), recovery);
                let got = got.unwrap_or_else(|e| panic!("cut {cut}: {e}"));
                expect_records(&got, &records[..earlier], &offsets[..earlier], cut as u64);
                let tail_is_zero = bytes[last_start..cut].iter().all(|&b| b == 0);
                let expected_dropped = if tail_is_zero { 0 } else { cut - last_start };
                assert_eq!(dropped, expected_dropped as u64, "cut {cut}");
                assert_eq!(skipped, 0);
            }
        }
        // The whole file reads back completely.
        let (got, _, _) = read_all(bytes, WalRecovery::TolerateTornTail);
        expect_records(&got.unwrap(), &records, &offsets, 0);
    }

    #[test]
    fn every_truncation_of_a_small_last_record_is_a_torn_tail() {
        let records = vec![b"alpha".to_vec(), b"beta".to_vec(), vec![9u8; 300]];
        let (bytes, offsets) = write_log(&records);
        for cut in offsets[2] as usize..bytes.len() {
            let (got, _, _) = read_all(bytes[..cut].to_vec(), WalRecovery::TolerateTornTail);
            expect_records(&got.unwrap(), &records[..2], &offsets[..2], cut as u64);
        }
    }

    #[test]
    fn flipped_byte_in_a_middle_record_is_corruption_or_salvaged() {
        let mut rng = StdRng::seed_from_u64(5);
        let records = random_records(&mut rng, 30, 80_000);
        let (bytes, offsets) = write_log(&records);
        for trial in 0..60u64 {
            let mut rng = StdRng::seed_from_u64(trial);
            let victim = rng.gen_range(0..records.len() - 1);
            let start = offsets[victim] as usize;
            let end = offsets[victim + 1] as usize;
            // Any byte of the record: headers, payload (trailer bytes are not checked, so
            // stop before the next record's block trailer if any).
            let mut at = rng.gen_range(start..end);
            if BLOCK_BYTES - at % BLOCK_BYTES < HEADER_BYTES {
                at = start; // a block trailer byte is not checked: flip a header byte instead
            }
            let mut damaged = bytes.clone();
            damaged[at] ^= 1 << rng.gen_range(0..8);

            let (got, _, _) = read_all(damaged.clone(), WalRecovery::TolerateTornTail);
            match got {
                Err(Error::Corruption { offset, file, .. }) => {
                    assert_eq!(offset, start as u64, "trial {trial} byte {at}");
                    assert_eq!(file, PathBuf::from(PATH));
                }
                other => panic!("trial {trial} byte {at}: expected corruption, got {other:?}"),
            }

            let (got, dropped, skipped) = read_all(damaged, WalRecovery::SalvageCorrupted);
            let mut expected = records.clone();
            expected.remove(victim);
            let mut expected_offsets = offsets.clone();
            expected_offsets.remove(victim);
            expect_records(&got.unwrap(), &expected, &expected_offsets, trial);
            assert_eq!(dropped, 0);
            assert_eq!(skipped, (end - start) as u64, "trial {trial}");
        }
    }

    #[test]
    fn flipped_byte_in_the_last_record_is_a_torn_tail() {
        let mut rng = StdRng::seed_from_u64(8);
        let mut records = random_records(&mut rng, 10, 3_000);
        records.push((0..50_000).map(|_| rng.gen()).collect());
        let (bytes, offsets) = write_log(&records);
        let start = *offsets.last().unwrap() as usize;
        for trial in 0..40u64 {
            let mut rng = StdRng::seed_from_u64(trial);
            let at = rng.gen_range(start..bytes.len());
            let mut damaged = bytes.clone();
            damaged[at] ^= 0x80;
            for recovery in [WalRecovery::TolerateTornTail, WalRecovery::SalvageCorrupted] {
                let (got, dropped, _) = read_all(damaged.clone(), recovery);
                let n = records.len() - 1;
                expect_records(&got.unwrap(), &records[..n], &offsets[..n], trial);
                assert_eq!(dropped, (bytes.len() - start) as u64, "trial {trial}");
            }
        }
    }

    #[test]
    fn zero_filled_tail_is_the_end() {
        let records = vec![b"one".to_vec(), vec![2u8; 40_000], b"three".to_vec()];
        let (mut bytes, offsets) = write_log(&records);
        // Preallocated space after the last record, within the block and across blocks.
        for extra in [1usize, 6, 7, 100, 3 * BLOCK_BYTES] {
            let mut padded = bytes.clone();
            padded.resize(padded.len() + extra, 0);
            let (got, dropped, _) = read_all(padded, WalRecovery::TolerateTornTail);
            expect_records(&got.unwrap(), &records, &offsets, extra as u64);
            assert_eq!(dropped, 0);
        }
        // A zeroed-out last record (file size updated, data never written) is dropped too.
        let last = offsets[2] as usize;
        bytes[last..].fill(0);
        let (got, dropped, _) = read_all(bytes, WalRecovery::TolerateTornTail);
        expect_records(&got.unwrap(), &records[..2], &offsets[..2], 0);
        assert_eq!(dropped, 0);
    }

    #[test]
    fn orphan_fragments_and_garbage_never_panic() {
        let mut rng = StdRng::seed_from_u64(99);
        for trial in 0..200 {
            let len = rng.gen_range(0..3 * BLOCK_BYTES);
            let mut bytes: Vec<u8> = (0..len).map(|_| rng.gen()).collect();
            // Sprinkle plausible headers so some fragments parse.
            if len > 100 {
                let at = rng.gen_range(0..len - 20);
                let payload_len = rng.gen_range(0..12usize);
                let fragment_type = rng.gen_range(0..6u8);
                let payload = bytes[at + 7..at + 7 + payload_len].to_vec();
                bytes[at..at + 4]
                    .copy_from_slice(&fragment_crc(fragment_type, &payload).to_le_bytes());
                bytes[at + 4..at + 6].copy_from_slice(&(payload_len as u16).to_le_bytes());
                bytes[at + 6] = fragment_type;
            }
            for recovery in [WalRecovery::TolerateTornTail, WalRecovery::SalvageCorrupted] {
                let (got, dropped, skipped) = read_all(bytes.clone(), recovery);
                if let Ok(records) = got {
                    assert!(dropped + skipped <= len as u64, "trial {trial}");
                    assert!(records.len() <= 1, "trial {trial}");
                }
            }
        }
    }

    #[test]
    fn middle_fragment_without_first_is_damage() {
        let records = vec![b"a".to_vec(), vec![5u8; 40_000], b"b".to_vec()];
        let (bytes, offsets) = write_log(&records);
        // Destroy the FIRST fragment's checksum: its LAST fragment becomes an orphan, and
        // record "b" follows, so this is mid-log corruption at the big record's offset.
        let mut damaged = bytes.clone();
        damaged[offsets[1] as usize] ^= 0xff;
        let (got, _, _) = read_all(damaged.clone(), WalRecovery::TolerateTornTail);
        assert!(matches!(got, Err(Error::Corruption { offset, .. }) if offset == offsets[1]));
        let (got, _, skipped) = read_all(damaged, WalRecovery::SalvageCorrupted);
        let got = got.unwrap();
        assert_eq!(got.len(), 2);
        assert_eq!(got[1], (offsets[2], b"b".to_vec()));
        assert_eq!(skipped, offsets[2] - offsets[1]);
    }

    #[test]
    fn first_fragment_that_does_not_fill_its_block_is_damage() {
        let (mut bytes, offsets) = write_log(&[b"a".to_vec()]);
        let forged_at = bytes.len() as u64;
        // A FIRST fragment with a valid checksum that stops short of the block end.
        bytes.extend_from_slice(&fragment_crc(FRAGMENT_FIRST, b"xyz").to_le_bytes());
        bytes.extend_from_slice(&[3, 0, FRAGMENT_FIRST]);
        bytes.extend_from_slice(b"xyz");
        let (got, dropped, _) = read_all(bytes.clone(), WalRecovery::TolerateTornTail);
        expect_records(&got.unwrap(), &[b"a".to_vec()], &offsets, 0);
        assert_eq!(dropped, 10);
        // Followed by a valid record, it is mid-log corruption at the forged fragment.
        let next_at = bytes.len() as u64;
        bytes.extend_from_slice(&fragment_crc(FRAGMENT_FULL, b"b").to_le_bytes());
        bytes.extend_from_slice(&[1, 0, FRAGMENT_FULL, b'b']);
        let (got, _, _) = read_all(bytes.clone(), WalRecovery::TolerateTornTail);
        assert!(matches!(got, Err(Error::Corruption { offset, .. }) if offset == forged_at));
        let (got, _, skipped) = read_all(bytes, WalRecovery::SalvageCorrupted);
        assert_eq!(got.unwrap()[1], (next_at, b"b".to_vec()));
        assert_eq!(skipped, 10);
    }
}
