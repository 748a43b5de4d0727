//! Byte layout of the per-SSTable secondary index blocks of the `next` and `sst-local` index
//! kinds: the secondary blocks, the directory block and the table property. The specification
//! is `docs/format/secondary-index-blocks.md`; the constants here are the truth.
//!
//! Every block is stored as an engine meta block, so the engine's block trailer (CRC32C and
//! compression byte) protects it: a damaged block fails its checksum when read and is reported
//! as corruption with the file and the block's offset. The decoders below additionally check
//! the structure and report what is wrong and where (offset inside the block).

use crate::geo::GeoBox;
use sift_lsm::extension::{put_fixed64, put_length_prefixed, put_varint32, put_varint64, Decoder};
use sift_lsm::SeqNo;

/// Name of the block property collector; meta blocks are `sift.next/<name>`.
pub const COLLECTOR_NAME: &str = "sift.next";
/// First byte of every block and of the table property.
pub const FORMAT_VERSION: u8 = 1;
/// Second byte of a secondary block without restart points (written before they existed;
/// still read).
pub const SECONDARY_TAG: u8 = b'S';
/// Second byte of a secondary block ending with restart points (what the collector writes):
/// a query binary-searches them instead of decoding the block from its start.
pub const INDEXED_SECONDARY_TAG: u8 = b'T';
/// Second byte of an indexed secondary block whose entries also carry the CRC32C of the
/// data entry's stored value and where the entry starts in its data block (what the collector
/// writes now): a query takes the value straight out of the data block, without a seek and
/// without a pass over the whole block to check the block's own checksum, and checks just the
/// value against this one.
pub const CHECKSUMMED_SECONDARY_TAG: u8 = b'U';
/// Entries between two restart points of an indexed secondary block.
pub const RESTART_INTERVAL: usize = 16;
/// Second byte of a directory block (one-dimensional attributes).
pub const DIRECTORY_TAG: u8 = b'D';
/// Second byte of a geo directory block (each block also carries its bounding rectangle).
pub const GEO_DIRECTORY_TAG: u8 = b'G';

/// Meta block name of the directory of attribute `attr_id`.
pub fn directory_name(attr_id: u32) -> String {
    format!("d.{attr_id}")
}

/// Meta block name of secondary block `block` of attribute `attr_id`.
pub fn secondary_name(attr_id: u32, block: u32) -> String {
    format!("s.{attr_id}.{block}")
}

/// A structural problem in a block: the offset inside the block and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FormatError {
    pub offset: usize,
    pub message: String,
}

fn fail<T>(decoder: &Decoder<'_>, message: impl Into<String>) -> Result<T, FormatError> {
    Err(FormatError {
        offset: decoder.position(),
        message: message.into(),
    })
}

/// One entry of a secondary block: a version of a document carrying the attribute.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SecondaryEntry {
    /// Memcomparable encoding of the attribute value.
    pub value: Vec<u8>,
    pub pk: Vec<u8>,
    pub seq: SeqNo,
    /// Sequence number of the next newer version of `pk` in the same file (0: none). A query
    /// at a snapshot that sees that version knows this one is stale without reading anything.
    pub next_newer_seq: SeqNo,
    /// Ordinal of the data block holding this version.
    pub data_block: u32,
    /// CRC32C of the version's stored value (`None` in blocks written before entries had one).
    pub value_checksum: Option<u32>,
    /// Where the version's entry starts inside its data block (`None`: not known, e.g. blocks
    /// built for files that existed before the index, or written before entries had one).
    pub entry_offset: Option<u32>,
}

/// One directory entry: the value range, size and newest version of a secondary block.
#[derive(Debug, Clone, PartialEq)]
pub struct DirectoryEntry {
    pub min: Vec<u8>,
    pub max: Vec<u8>,
    pub entries: u32,
    /// The largest sequence number among the block's entries: a top-K query that already
    /// holds K newer hits skips the block.
    pub seq_max: SeqNo,
    /// Geo attributes only: the smallest rectangle holding every point of the block (`min` and
    /// `max` are then the first and last encodings in Z-order).
    pub rect: Option<GeoBox>,
}

/// Encodes a secondary block (entries in value order), with restart points: the offset of
/// every [`RESTART_INTERVAL`]-th entry (fixed32 each), then their count (fixed32). When every
/// entry has its value checksum the block is a [`CHECKSUMMED_SECONDARY_TAG`] block (each entry
/// ends with it, fixed32), else an [`INDEXED_SECONDARY_TAG`] block without checksums.
pub fn encode_secondary_block<'a>(
    attr_id: u32,
    entries: impl ExactSizeIterator<Item = SecondaryEntryRef<'a>> + Clone,
) -> Vec<u8> {
    let checksummed = entries.clone().all(|e| e.value_checksum.is_some());
    let tag = if checksummed {
        CHECKSUMMED_SECONDARY_TAG
    } else {
        INDEXED_SECONDARY_TAG
    };
    // Room for typical entries (a short value, a pk of a few dozen bytes, three numbers, a
    // checksum), so the block is not regrown entry by entry.
    let mut out = Vec::with_capacity(16 + entries.len() * 44 + restart_bytes(entries.len()));
    out.push(FORMAT_VERSION);
    out.push(tag);
    put_varint32(&mut out, attr_id);
    put_varint64(&mut out, entries.len() as u64);
    let mut restarts: Vec<u32> = Vec::with_capacity(entries.len() / RESTART_INTERVAL + 1);
    for (i, entry) in entries.enumerate() {
        if i % RESTART_INTERVAL == 0 {
            restarts.push(u32::try_from(out.len()).unwrap_or(u32::MAX));
        }
        entry.encode_to(&mut out, checksummed);
    }
    for restart in &restarts {
        out.extend_from_slice(&restart.to_le_bytes());
    }
    out.extend_from_slice(
        &u32::try_from(restarts.len())
            .unwrap_or(u32::MAX)
            .to_le_bytes(),
    );
    out
}

/// Bytes the restart points add to a block of `entries` entries.
pub fn restart_bytes(entries: usize) -> usize {
    4 * (entries.div_ceil(RESTART_INTERVAL) + 1)
}

/// A borrowed secondary entry (what the collector writes from its arena).
#[derive(Debug, Clone, Copy)]
pub struct SecondaryEntryRef<'a> {
    pub value: &'a [u8],
    pub pk: &'a [u8],
    pub seq: SeqNo,
    pub next_newer_seq: SeqNo,
    pub data_block: u32,
    pub value_checksum: Option<u32>,
    pub entry_offset: Option<u32>,
}

impl SecondaryEntryRef<'_> {
    fn encode_to(&self, out: &mut Vec<u8>, checksummed: bool) {
        put_length_prefixed(out, self.value);
        put_length_prefixed(out, self.pk);
        put_varint64(out, self.seq);
        put_varint64(out, self.next_newer_seq);
        put_varint32(out, self.data_block);
        if checksummed {
            out.extend_from_slice(&self.value_checksum.unwrap_or(0).to_le_bytes());
            put_varint32(out, self.entry_offset.map_or(0, |o| o.saturating_add(1)));
        }
    }

    /// Bytes this entry takes in a block.
    pub fn encoded_bytes(&self) -> usize {
        use sift_lsm::extension::varint_length;
        varint_length(self.value.len() as u64)
            + self.value.len()
            + varint_length(self.pk.len() as u64)
            + self.pk.len()
            + varint_length(self.seq)
            + varint_length(self.next_newer_seq)
            + varint_length(u64::from(self.data_block))
            + if self.value_checksum.is_some() {
                4 + varint_length(u64::from(
                    self.entry_offset.map_or(0, |o| o.saturating_add(1)),
                ))
            } else {
                0
            }
    }
}

fn check_header(decoder: &mut Decoder<'_>, tag: u8, attr_id: u32) -> Result<(), FormatError> {
    match decoder.u8() {
        Some(FORMAT_VERSION) => {}
        Some(other) => return fail(decoder, format!("unknown format version {other}")),
        None => return fail(decoder, "empty block"),
    }
    match decoder.u8() {
        Some(found) if found == tag => {}
        Some(found) => {
            return fail(
                decoder,
                format!("block tag 0x{found:02X}, expected 0x{tag:02X}"),
            )
        }
        None => return fail(decoder, "truncated header"),
    }
    match decoder.varint32() {
        Some(found) if found == attr_id => Ok(()),
        Some(found) => fail(
            decoder,
            format!("block is for attribute {found}, expected {attr_id}"),
        ),
        None => fail(decoder, "truncated attribute id"),
    }
}

/// Most entries a block may claim before any is decoded (bounds the allocation on bad input).
fn claimed_count(decoder: &mut Decoder<'_>, what: &str) -> Result<usize, FormatError> {
    let Some(count) = decoder.varint64() else {
        return fail(decoder, format!("truncated {what} count"));
    };
    // Every entry takes at least one byte per field, so a count above the bytes left is a lie.
    match usize::try_from(count) {
        Ok(count) if count <= decoder.remaining().len() => Ok(count),
        _ => fail(
            decoder,
            format!(
                "{what} count {count} exceeds the {} bytes left",
                decoder.remaining().len()
            ),
        ),
    }
}

/// Decodes a secondary block of `attr_id` (entries must be in value order) into owned entries.
pub fn decode_secondary_block(
    bytes: &[u8],
    attr_id: u32,
) -> Result<Vec<SecondaryEntry>, FormatError> {
    let mut entries = Vec::new();
    visit_secondary_block(bytes, attr_id, &mut |entry| {
        entries.push(SecondaryEntry {
            value: entry.value.to_vec(),
            pk: entry.pk.to_vec(),
            seq: entry.seq,
            next_newer_seq: entry.next_newer_seq,
            data_block: entry.data_block,
            value_checksum: entry.value_checksum,
            entry_offset: entry.entry_offset,
        });
        true
    })?;
    Ok(entries)
}

/// A secondary block's header, parsed: where its entries start and end, and its restart
/// points (indexed blocks only).
struct SecondaryLayout<'a> {
    count: usize,
    entries_start: usize,
    entries_end: usize,
    /// The restart array (fixed32 each), empty for an unindexed block.
    restarts: &'a [u8],
    /// Entries end with their value checksum.
    checksummed: bool,
}

impl SecondaryLayout<'_> {
    fn restart_count(&self) -> usize {
        self.restarts.len() / 4
    }
    fn restart(&self, index: usize) -> usize {
        let at = 4 * index;
        match self.restarts.get(at..at + 4) {
            Some(b) => u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize,
            None => usize::MAX,
        }
    }
}

fn parse_secondary_layout(bytes: &[u8], attr_id: u32) -> Result<SecondaryLayout<'_>, FormatError> {
    let checksummed = bytes.get(1) == Some(&CHECKSUMMED_SECONDARY_TAG);
    let indexed = checksummed || bytes.get(1) == Some(&INDEXED_SECONDARY_TAG);
    let mut decoder = Decoder::new(bytes);
    let tag = match bytes.get(1) {
        Some(&CHECKSUMMED_SECONDARY_TAG) => CHECKSUMMED_SECONDARY_TAG,
        Some(&INDEXED_SECONDARY_TAG) => INDEXED_SECONDARY_TAG,
        _ => SECONDARY_TAG,
    };
    check_header(&mut decoder, tag, attr_id)?;
    let count = claimed_count(&mut decoder, "entry")?;
    let entries_start = decoder.position();
    if !indexed {
        return Ok(SecondaryLayout {
            count,
            entries_start,
            entries_end: bytes.len(),
            restarts: &[],
            checksummed: false,
        });
    }
    let corrupt = |offset: usize, message: String| FormatError { offset, message };
    let Some(count_at) = bytes.len().checked_sub(4).filter(|&at| at >= entries_start) else {
        return Err(corrupt(bytes.len(), "truncated restart count".to_string()));
    };
    let tail = &bytes[count_at..];
    let restart_count = u32::from_le_bytes([tail[0], tail[1], tail[2], tail[3]]) as usize;
    if restart_count != count.div_ceil(RESTART_INTERVAL) {
        return Err(corrupt(
            count_at,
            format!("{restart_count} restart points for {count} entries"),
        ));
    }
    let Some(entries_end) = count_at
        .checked_sub(4 * restart_count)
        .filter(|&end| end >= entries_start)
    else {
        return Err(corrupt(
            count_at,
            "restart array larger than the block".to_string(),
        ));
    };
    let layout = SecondaryLayout {
        count,
        entries_start,
        entries_end,
        restarts: &bytes[entries_end..count_at],
        checksummed,
    };
    // Restart points increase, start at the first entry and point inside the entries.
    let mut previous = None;
    for index in 0..restart_count {
        let point = layout.restart(index);
        let ordered = previous.map_or(point == entries_start, |p| point > p);
        if !ordered || point >= entries_end {
            return Err(corrupt(
                entries_end + 4 * index,
                format!("restart point {index} ({point}) out of order or outside the entries"),
            ));
        }
        previous = Some(point);
    }
    Ok(layout)
}

/// Decodes the entry at the decoder's position (entry number `i`, for messages).
fn decode_entry<'a>(
    decoder: &mut Decoder<'a>,
    i: usize,
    checksummed: bool,
) -> Result<SecondaryEntryRef<'a>, FormatError> {
    let start = decoder.position();
    let (Some(value), Some(pk)) = (decoder.length_prefixed(), decoder.length_prefixed()) else {
        return fail(decoder, format!("entry {i}: truncated value or key"));
    };
    let (Some(seq), Some(next_newer_seq), Some(data_block)) =
        (decoder.varint64(), decoder.varint64(), decoder.varint32())
    else {
        return fail(decoder, format!("entry {i}: truncated numbers"));
    };
    let (value_checksum, entry_offset) = if checksummed {
        let (Some(bytes), Some(offset)) = (decoder.bytes(4), decoder.varint32()) else {
            return fail(
                decoder,
                format!("entry {i}: truncated value checksum or entry offset"),
            );
        };
        (
            Some(u32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]])),
            offset.checked_sub(1),
        )
    } else {
        (None, None)
    };
    if next_newer_seq != 0 && next_newer_seq <= seq {
        return Err(FormatError {
            offset: start,
            message: format!(
                "entry {i}: next newer sequence number {next_newer_seq} is not above {seq}"
            ),
        });
    }
    Ok(SecondaryEntryRef {
        value,
        pk,
        seq,
        next_newer_seq,
        data_block,
        value_checksum,
        entry_offset,
    })
}

/// Decodes entries `first..` of a block from byte `from` (where entry `first` starts), calling
/// `visit` until it returns `false`; with `whole`, every entry is checked even after that.
fn decode_entries<'a>(
    bytes: &'a [u8],
    layout: &SecondaryLayout<'_>,
    first: usize,
    from: usize,
    whole: bool,
    visit: &mut dyn FnMut(SecondaryEntryRef<'a>) -> bool,
) -> Result<(), FormatError> {
    let entries = bytes.get(..layout.entries_end).unwrap_or_default();
    let mut decoder = Decoder::new(entries);
    if decoder.bytes(from).is_none() {
        return Err(FormatError {
            offset: from,
            message: "entry offset outside the block".to_string(),
        });
    }
    let mut previous: Option<&[u8]> = None;
    let mut visiting = true;
    for i in first..layout.count {
        let start = decoder.position();
        if i % RESTART_INTERVAL == 0
            && layout.restart_count() > 0
            && layout.restart(i / RESTART_INTERVAL) != start
        {
            return Err(FormatError {
                offset: start,
                message: format!("entry {i} does not start at its restart point"),
            });
        }
        let entry = decode_entry(&mut decoder, i, layout.checksummed)?;
        if previous.is_some_and(|previous| previous > entry.value) {
            return Err(FormatError {
                offset: start,
                message: format!("entry {i}: values out of order"),
            });
        }
        previous = Some(entry.value);
        if visiting {
            visiting = visit(entry);
            if !visiting && !whole {
                return Ok(());
            }
        }
    }
    if !decoder.is_empty() {
        return fail(&decoder, "bytes after the last entry");
    }
    Ok(())
}

/// Decodes a secondary block of `attr_id` without copying, calling `visit` for each entry in
/// value order until it returns `false`. The whole block is checked even after `visit` stops,
/// so damage anywhere is reported.
pub fn visit_secondary_block<'a>(
    bytes: &'a [u8],
    attr_id: u32,
    visit: &mut dyn FnMut(SecondaryEntryRef<'a>) -> bool,
) -> Result<(), FormatError> {
    let layout = parse_secondary_layout(bytes, attr_id)?;
    decode_entries(bytes, &layout, 0, layout.entries_start, true, visit)
}

/// Like [`visit_secondary_block`], for a query: starts at the entries with value `>= start`
/// (found by binary search over the restart points of an indexed block) and stops decoding
/// when `visit` returns `false`. The header, the restart points and every entry decoded are
/// checked (the engine's block checksum covers the rest); the first entry visited may be up
/// to [`RESTART_INTERVAL`] entries before the first one `>= start`.
pub fn visit_secondary_from<'a>(
    bytes: &'a [u8],
    attr_id: u32,
    start: &[u8],
    visit: &mut dyn FnMut(SecondaryEntryRef<'a>) -> bool,
) -> Result<(), FormatError> {
    let layout = parse_secondary_layout(bytes, attr_id)?;
    let restart_count = layout.restart_count();
    if restart_count == 0 {
        return decode_entries(bytes, &layout, 0, layout.entries_start, false, visit);
    }
    // The last restart point whose value is < start (entries before it are all < start).
    let value_at = |index: usize| -> Result<&'a [u8], FormatError> {
        let point = layout.restart(index);
        let mut decoder = Decoder::new(bytes.get(..layout.entries_end).unwrap_or_default());
        decoder
            .bytes(point)
            .and_then(|_| decoder.length_prefixed())
            .ok_or(FormatError {
                offset: point,
                message: format!("restart point {index}: truncated value"),
            })
    };
    let (mut low, mut high) = (0, restart_count - 1);
    while low < high {
        let mid = low + (high - low).div_ceil(2);
        if value_at(mid)? < start {
            low = mid;
        } else {
            high = mid - 1;
        }
    }
    decode_entries(
        bytes,
        &layout,
        low * RESTART_INTERVAL,
        layout.restart(low),
        false,
        visit,
    )
}

/// The whole world: the rectangle written for a geo block that (against every rule) has none,
/// so it is never pruned.
const WORLD: GeoBox = GeoBox {
    min_lon: -180.0,
    min_lat: -90.0,
    max_lon: 180.0,
    max_lat: 90.0,
};

/// Encodes the directory of one attribute's secondary blocks (block `i` is entry `i`). With
/// `geo`, the geo layout: each entry is followed by its bounding rectangle.
pub fn encode_directory(attr_id: u32, blocks: &[DirectoryEntry], geo: bool) -> Vec<u8> {
    let tag = if geo {
        GEO_DIRECTORY_TAG
    } else {
        DIRECTORY_TAG
    };
    let mut out = vec![FORMAT_VERSION, tag];
    put_varint32(&mut out, attr_id);
    put_varint64(&mut out, blocks.len() as u64);
    for block in blocks {
        put_varint32(&mut out, block.entries);
        put_varint64(&mut out, block.seq_max);
        put_length_prefixed(&mut out, &block.min);
        put_length_prefixed(&mut out, &block.max);
        if geo {
            let rect = block.rect.unwrap_or(WORLD);
            for x in [rect.min_lon, rect.min_lat, rect.max_lon, rect.max_lat] {
                put_fixed64(&mut out, x.to_bits());
            }
        }
    }
    out
}

/// Decodes a bounding rectangle: four finite coordinates in range, each minimum at most its
/// maximum.
fn decode_rect(decoder: &mut Decoder<'_>, block: usize) -> Result<GeoBox, FormatError> {
    let start = decoder.position();
    let mut coordinates = [0.0f64; 4];
    for x in &mut coordinates {
        let Some(bits) = decoder.fixed64() else {
            return fail(decoder, format!("block {block}: truncated rectangle"));
        };
        *x = f64::from_bits(bits);
    }
    let [min_lon, min_lat, max_lon, max_lat] = coordinates;
    GeoBox::new(min_lon, min_lat, max_lon, max_lat).map_err(|e| FormatError {
        offset: start,
        message: format!("block {block}: bad rectangle: {e}"),
    })
}

/// Decodes a directory block; block ranges must be in order and not overlap. `geo` says which
/// layout the attribute must have (a geo directory also carries each block's rectangle).
pub fn decode_directory(
    bytes: &[u8],
    attr_id: u32,
    geo: bool,
) -> Result<Vec<DirectoryEntry>, FormatError> {
    let mut decoder = Decoder::new(bytes);
    let tag = if geo {
        GEO_DIRECTORY_TAG
    } else {
        DIRECTORY_TAG
    };
    check_header(&mut decoder, tag, attr_id)?;
    let count = claimed_count(&mut decoder, "block")?;
    let mut blocks: Vec<DirectoryEntry> = Vec::with_capacity(count);
    for i in 0..count {
        let start = decoder.position();
        let (Some(entries), Some(seq_max)) = (decoder.varint32(), decoder.varint64()) else {
            return fail(
                &decoder,
                format!("block {i}: truncated entry count or sequence"),
            );
        };
        let (Some(min), Some(max)) = (decoder.length_prefixed(), decoder.length_prefixed()) else {
            return fail(&decoder, format!("block {i}: truncated value range"));
        };
        let out_of_order = min > max
            || entries == 0
            || blocks.last().is_some_and(|last| last.max.as_slice() > min);
        if out_of_order {
            return Err(FormatError {
                offset: start,
                message: format!("block {i}: empty, reversed or overlapping value range"),
            });
        }
        let rect = if geo {
            Some(decode_rect(&mut decoder, i)?)
        } else {
            None
        };
        blocks.push(DirectoryEntry {
            min: min.to_vec(),
            max: max.to_vec(),
            entries,
            seq_max,
            rect,
        });
    }
    if !decoder.is_empty() {
        return fail(&decoder, "bytes after the last block");
    }
    Ok(blocks)
}

/// Encodes the table property: the attributes this file has secondary blocks for.
pub fn encode_table_property(attr_ids: &[u32]) -> Vec<u8> {
    let mut out = vec![FORMAT_VERSION];
    put_varint64(&mut out, attr_ids.len() as u64);
    for &id in attr_ids {
        put_varint32(&mut out, id);
    }
    out
}

/// Whether a table property lists `attr_id`. An absent or unreadable property means "not
/// indexed": the file is then scanned, which is always correct.
pub fn property_lists(property: Option<&[u8]>, attr_id: u32) -> bool {
    let Some(bytes) = property else {
        return false;
    };
    let mut decoder = Decoder::new(bytes);
    if decoder.u8() != Some(FORMAT_VERSION) {
        return false;
    }
    let Some(count) = decoder.varint64() else {
        return false;
    };
    for _ in 0..count {
        match decoder.varint32() {
            Some(id) if id == attr_id => return true,
            Some(_) => {}
            None => return false,
        }
    }
    false
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};

    fn entry(value: &[u8], pk: &[u8], seq: u64, next: u64, block: u32) -> SecondaryEntry {
        SecondaryEntry {
            value: value.to_vec(),
            pk: pk.to_vec(),
            seq,
            next_newer_seq: next,
            data_block: block,
            value_checksum: None,
            entry_offset: None,
        }
    }

    fn as_refs(
        entries: &[SecondaryEntry],
    ) -> impl ExactSizeIterator<Item = SecondaryEntryRef<'_>> + Clone {
        entries.iter().map(|e| SecondaryEntryRef {
            value: &e.value,
            pk: &e.pk,
            seq: e.seq,
            next_newer_seq: e.next_newer_seq,
            data_block: e.data_block,
            value_checksum: e.value_checksum,
            entry_offset: e.entry_offset,
        })
    }

    #[test]
    fn checksummed_secondary_block_golden_bytes() {
        let mut entries = vec![entry(&[0x80, 0, 0, 0, 0, 0, 0, 5], b"k1", 300, 0, 2)];
        entries[0].value_checksum = Some(0x0403_0201);
        entries[0].entry_offset = Some(130);
        let bytes = encode_secondary_block(7, as_refs(&entries));
        let entry_bytes = [
            8, 0x80, 0, 0, 0, 0, 0, 0, 5, // value
            2, b'k', b'1', // pk
            0xAC, 0x02, // seq 300
            0,    // no newer version in the file
            2,    // data block 2
            1, 2, 3, 4, // value checksum, fixed32
            131, 1, // entry offset 130, plus one (0: unknown)
        ];
        let mut expected = vec![1, b'U', 7, 1]; // version, tag, attribute 7, one entry
        expected.extend_from_slice(&entry_bytes);
        expected.extend_from_slice(&[4, 0, 0, 0, 1, 0, 0, 0]); // restart at byte 4; one restart
        assert_eq!(bytes, expected);
        assert_eq!(decode_secondary_block(&bytes, 7).unwrap(), entries);
        assert_eq!(
            as_refs(&entries).map(|e| e.encoded_bytes()).sum::<usize>() + restart_bytes(1),
            bytes.len() - 4
        );
        // A block cut inside the last checksum is reported, not read short.
        let mut cut = bytes[..4 + entry_bytes.len() - 1].to_vec();
        cut.extend_from_slice(&[4, 0, 0, 0, 1, 0, 0, 0]);
        assert!(decode_secondary_block(&cut, 7).is_err());
    }

    #[test]
    fn secondary_block_golden_bytes() {
        let entries = vec![entry(&[0x80, 0, 0, 0, 0, 0, 0, 5], b"k1", 300, 0, 2)];
        let bytes = encode_secondary_block(7, as_refs(&entries));
        let entry_bytes = [
            8, 0x80, 0, 0, 0, 0, 0, 0, 5, // value
            2, b'k', b'1', // pk
            0xAC, 0x02, // seq 300
            0,    // no newer version in the file
            2,    // data block 2
        ];
        let mut expected = vec![1, b'T', 7, 1]; // version, tag, attribute 7, one entry
        expected.extend_from_slice(&entry_bytes);
        expected.extend_from_slice(&[4, 0, 0, 0, 1, 0, 0, 0]); // restart at byte 4; one restart
        assert_eq!(bytes, expected);
        assert_eq!(decode_secondary_block(&bytes, 7).unwrap(), entries);
        assert_eq!(
            as_refs(&entries).map(|e| e.encoded_bytes()).sum::<usize>() + restart_bytes(1),
            bytes.len() - 4
        );
        // A block written before restart points existed still decodes.
        let mut legacy = vec![1, b'S', 7, 1];
        legacy.extend_from_slice(&entry_bytes);
        assert_eq!(decode_secondary_block(&legacy, 7).unwrap(), entries);
        let mut found = Vec::new();
        visit_secondary_from(&legacy, 7, &[0x80], &mut |e| {
            found.push(e.seq);
            true
        })
        .unwrap();
        assert_eq!(found, vec![300]);
    }

    /// `visit_secondary_from` finds the same entries `>= start` as a full decode, for blocks
    /// of every size around the restart interval.
    #[test]
    fn visit_from_matches_a_full_decode() {
        let seed = 11;
        let mut rng = StdRng::seed_from_u64(seed);
        for count in [0, 1, 2, 15, 16, 17, 31, 32, 33, 100, 257] {
            let mut values: Vec<Vec<u8>> = (0..count)
                .map(|_| vec![rng.gen_range(0..40u8), rng.gen_range(0..4u8)])
                .collect();
            values.sort();
            let entries: Vec<SecondaryEntry> = values
                .iter()
                .enumerate()
                .map(|(i, v)| entry(v, format!("k{i}").as_bytes(), i as u64 + 1, 0, 0))
                .collect();
            let bytes = encode_secondary_block(3, as_refs(&entries));
            for start in 0..42u8 {
                let start = [start];
                let mut found = Vec::new();
                visit_secondary_from(&bytes, 3, &start, &mut |e| {
                    if e.value >= &start[..] {
                        found.push(e.seq);
                    }
                    true
                })
                .unwrap();
                let want: Vec<u64> = entries
                    .iter()
                    .filter(|e| e.value.as_slice() >= &start[..])
                    .map(|e| e.seq)
                    .collect();
                assert_eq!(found, want, "count {count} start {start:?} seed {seed}");
            }
        }
    }

    #[test]
    fn damaged_restart_points_are_rejected() {
        let entries: Vec<SecondaryEntry> = (0..40u8)
            .map(|i| entry(&[i], format!("k{i}").as_bytes(), u64::from(i) + 1, 0, 0))
            .collect();
        let bytes = encode_secondary_block(1, as_refs(&entries));
        let restarts_at = bytes.len() - restart_bytes(entries.len());
        // Every byte of the restart array and its count, changed.
        for at in restarts_at..bytes.len() {
            let mut damaged = bytes.clone();
            damaged[at] ^= 0x21;
            assert!(decode_secondary_block(&damaged, 1).is_err(), "byte {at}");
            let visited = visit_secondary_from(&damaged, 1, &[20], &mut |_| true);
            assert!(visited.is_err(), "byte {at}");
        }
    }

    #[test]
    fn directory_and_property_golden_bytes() {
        let blocks = vec![
            DirectoryEntry {
                min: b"a".to_vec(),
                max: b"b".to_vec(),
                entries: 3,
                seq_max: 9,
                rect: None,
            },
            DirectoryEntry {
                min: b"c".to_vec(),
                max: b"c".to_vec(),
                entries: 1,
                seq_max: 300,
                rect: None,
            },
        ];
        let bytes = encode_directory(300, &blocks, false);
        assert_eq!(
            bytes,
            vec![
                1, b'D', 0xAC, 0x02, 2, // version, tag, attribute 300, two blocks
                3, 9, 1, b'a', 1, b'b', // 3 entries, newest seq 9, range a..=b
                1, 0xAC, 0x02, 1, b'c', 1, b'c', // 1 entry, newest seq 300, range c..=c
            ]
        );
        assert_eq!(decode_directory(&bytes, 300, false).unwrap(), blocks);
        let property = encode_table_property(&[4, 300]);
        assert_eq!(property, vec![1, 2, 4, 0xAC, 0x02]);
        assert!(property_lists(Some(&property), 300));
        assert!(!property_lists(Some(&property), 5));
        assert!(!property_lists(None, 4));
        assert!(!property_lists(Some(&[9]), 4));
    }

    #[test]
    fn damaged_blocks_are_rejected_with_an_offset() {
        let entries = vec![entry(b"a", b"k1", 5, 9, 0), entry(b"b", b"k2", 6, 0, 1)];
        let bytes = encode_secondary_block(1, as_refs(&entries));
        assert!(
            decode_secondary_block(&bytes, 2).is_err(),
            "wrong attribute"
        );
        for cut in 0..bytes.len() {
            assert!(
                decode_secondary_block(&bytes[..cut], 1).is_err(),
                "cut {cut}"
            );
        }
        let mut longer = bytes.clone();
        longer.push(0);
        assert!(decode_secondary_block(&longer, 1).is_err());
        let mut legacy_longer = vec![1, b'S', 1, 1, 1, b'a', 1, b'k', 5, 0, 0];
        assert_eq!(decode_secondary_block(&legacy_longer, 1).unwrap().len(), 1);
        legacy_longer.push(0);
        assert_eq!(
            decode_secondary_block(&legacy_longer, 1)
                .unwrap_err()
                .offset,
            legacy_longer.len() - 1
        );
        let reversed = vec![entry(b"b", b"k1", 5, 0, 0), entry(b"a", b"k2", 6, 0, 0)];
        let bytes = encode_secondary_block(1, as_refs(&reversed));
        assert!(decode_secondary_block(&bytes, 1).is_err());
        let huge_count = [1, b'S', 1, 0xFF, 0xFF, 0xFF, 0x0F];
        assert!(decode_secondary_block(&huge_count, 1).is_err());
        let overlapping = vec![
            DirectoryEntry {
                min: b"a".to_vec(),
                max: b"c".to_vec(),
                entries: 1,
                seq_max: 1,
                rect: None,
            },
            DirectoryEntry {
                min: b"b".to_vec(),
                max: b"d".to_vec(),
                entries: 1,
                seq_max: 1,
                rect: None,
            },
        ];
        assert!(decode_directory(&encode_directory(1, &overlapping, false), 1, false).is_err());
    }

    #[test]
    fn geo_directory_golden_bytes() {
        let rect = GeoBox::new(-1.5, 2.0, 3.0, 4.25).unwrap();
        let blocks = vec![DirectoryEntry {
            min: b"a".to_vec(),
            max: b"b".to_vec(),
            entries: 2,
            seq_max: 5,
            rect: Some(rect),
        }];
        let bytes = encode_directory(3, &blocks, true);
        let mut want = vec![1, b'G', 3, 1, 2, 5, 1, b'a', 1, b'b'];
        for x in [-1.5f64, 2.0, 3.0, 4.25] {
            want.extend_from_slice(&x.to_bits().to_le_bytes());
        }
        assert_eq!(bytes, want);
        assert_eq!(decode_directory(&bytes, 3, true).unwrap(), blocks);
        // The layout must match the attribute: a geo directory is not a 1-D one and back.
        assert!(decode_directory(&bytes, 3, false).is_err());
        assert!(decode_directory(&encode_directory(3, &blocks, false), 3, true).is_err());
        for cut in 0..bytes.len() {
            assert!(
                decode_directory(&bytes[..cut], 3, true).is_err(),
                "cut {cut}"
            );
        }
        // A reversed or out-of-range rectangle is rejected where it starts.
        let mut reversed = bytes.clone();
        let at = bytes.len() - 32;
        reversed[at..at + 8].copy_from_slice(&10.0f64.to_bits().to_le_bytes());
        assert_eq!(decode_directory(&reversed, 3, true).unwrap_err().offset, at);
        let mut nan = bytes.clone();
        nan[at + 8..at + 16].copy_from_slice(&f64::NAN.to_bits().to_le_bytes());
        assert!(decode_directory(&nan, 3, true).is_err());
    }
}
