//! The fixed pieces of the table file format: block handles, the 5-byte block trailer
//! (compression type + masked CRC32C), block compression, and the footer.
//!
//! The constants here are the truth; `docs/format/sstable.md` describes them byte by byte.

use super::block::{BlockBytes, MappedRange};
use super::BlockHandle;
use crate::coding::{self, put_varint64, Decoder};
use crate::fs::RandomAccessFile;
use crate::options::Compression;
use crate::{Error, Result};
use std::path::Path;
use std::sync::Arc;

/// Bytes after every block: compression type (u8) then masked CRC32C (u32 LE) of the block
/// bytes followed by the type byte.
pub const BLOCK_TRAILER_BYTES: usize = 5;

/// The last 8 bytes of every table are the ASCII bytes `SIFTSST1` (this value, little-endian).
pub const TABLE_MAGIC: u64 = u64::from_le_bytes(*b"SIFTSST1");

/// The only table format version this code writes and reads.
pub const FORMAT_VERSION: u32 = 1;

/// metaindex handle (2 × u64) + index handle (2 × u64) + format version (u32) + masked CRC32C
/// of the preceding 36 bytes (u32) + magic (u64).
pub const FOOTER_BYTES: usize = 48;

/// Largest decompressed block accepted; protects against huge allocations from a damaged
/// length that happens to pass its checksum. A block holds at most one entry beyond the block
/// target, and values are bounded by `Options::value_bytes_max` (64 MiB by default).
pub const MAX_UNCOMPRESSED_BLOCK_BYTES: usize = 1 << 30;

impl BlockHandle {
    /// Appends `offset varint | size varint`.
    pub fn encode_to(&self, dst: &mut Vec<u8>) {
        put_varint64(dst, self.offset);
        put_varint64(dst, self.size);
    }

    /// A handle (two varints); `None` if truncated.
    pub fn decode_from(decoder: &mut Decoder<'_>) -> Option<BlockHandle> {
        let offset = decoder.varint64()?;
        let size = decoder.varint64()?;
        Some(BlockHandle { offset, size })
    }

    /// The offset just past the block's trailer, `None` on overflow.
    pub fn end_with_trailer(&self) -> Option<u64> {
        self.offset
            .checked_add(self.size)?
            .checked_add(BLOCK_TRAILER_BYTES as u64)
    }
}

/// The checksum stored in a block trailer: masked CRC32C of the block bytes then the type byte.
pub fn block_checksum(block: &[u8], compression_type: u8) -> u32 {
    let crc = crc32c::crc32c(block);
    coding::mask_crc(crc32c::crc32c_append(crc, &[compression_type]))
}

/// Builds the 5-byte trailer for `block` stored with `compression_type`.
pub fn block_trailer(block: &[u8], compression_type: u8) -> [u8; BLOCK_TRAILER_BYTES] {
    let crc = block_checksum(block, compression_type).to_le_bytes();
    [compression_type, crc[0], crc[1], crc[2], crc[3]]
}

/// Reusable state for compressing blocks while a table is built.
#[derive(Default)]
pub struct Compressor {
    scratch: Vec<u8>,
    snappy: Option<snap::raw::Encoder>,
}

impl Compressor {
    /// Compresses `raw` if `compression` asks for it and saves at least 1/8 of the bytes.
    /// Returns the bytes to store and the compression type byte for the trailer.
    pub fn compress<'a>(&'a mut self, raw: &'a [u8], compression: Compression) -> (&'a [u8], u8) {
        let limit = raw.len() - raw.len() / 8;
        match compression {
            Compression::None => (raw, Compression::None as u8),
            Compression::Snappy => {
                let encoder = self.snappy.get_or_insert_with(snap::raw::Encoder::new);
                self.scratch.clear();
                self.scratch
                    .resize(snap::raw::max_compress_len(raw.len()), 0);
                match encoder.compress(raw, &mut self.scratch) {
                    Ok(n) if n < limit => (&self.scratch[..n], Compression::Snappy as u8),
                    _ => (raw, Compression::None as u8),
                }
            }
            Compression::Lz4 => {
                // LZ4 block format does not record the decompressed length: prefix it as a varint.
                self.scratch.clear();
                put_varint64(&mut self.scratch, raw.len() as u64);
                let prefix = self.scratch.len();
                self.scratch.resize(
                    prefix + lz4_flex::block::get_maximum_output_size(raw.len()),
                    0,
                );
                match lz4_flex::block::compress_into(raw, &mut self.scratch[prefix..]) {
                    Ok(n) if prefix + n < limit => {
                        (&self.scratch[..prefix + n], Compression::Lz4 as u8)
                    }
                    _ => (raw, Compression::None as u8),
                }
            }
        }
    }
}

/// Like `read_block`, but an uncompressed block of a memory-mapped file is checked in place
/// and returned without copying (LevelDB does the same for mapped tables). With
/// `mapped_checksum_verified` (the caller checked this mapped block's checksum before) the
/// checksum is not computed again: a mapped block is never copied into the block cache, so
/// without this every read of it would hash the whole block.
pub fn read_block_shared(
    file: &Arc<dyn RandomAccessFile>,
    path: &Path,
    handle: BlockHandle,
    data_end: u64,
    what: &str,
    mapped_checksum_verified: bool,
) -> Result<BlockBytes> {
    let start = usize::try_from(handle.offset).ok();
    let size = usize::try_from(handle.size).ok();
    if let (Some(mapped), Some(start), Some(size)) = (file.mapped(), start, size) {
        let within = handle.end_with_trailer().is_some_and(|end| end <= data_end);
        if let Some(bytes) = within
            .then(|| mapped.get(start..start + size + BLOCK_TRAILER_BYTES))
            .flatten()
        {
            if Compression::from_u8(bytes[size]) == Some(Compression::None) {
                let stored = u32::from_le_bytes([
                    bytes[size + 1],
                    bytes[size + 2],
                    bytes[size + 3],
                    bytes[size + 4],
                ]);
                let actual = if mapped_checksum_verified {
                    stored
                } else {
                    coding::mask_crc(crc32c::crc32c(&bytes[..=size]))
                };
                if stored != actual {
                    return Err(Error::corruption(
                        path,
                        handle.offset,
                        format!("{what} checksum mismatch (stored {stored:#010x}, computed {actual:#010x})"),
                    ));
                }
                if let Some(range) = MappedRange::new(file, start, start + size) {
                    return Ok(BlockBytes::Mapped(range));
                }
            }
        }
    }
    read_block(&**file, path, handle, data_end, what).map(BlockBytes::Owned)
}

/// Reads the block at `handle`, verifies its trailer and returns the decompressed bytes.
/// `data_end` is the offset no block may extend past (the footer's start).
pub fn read_block(
    file: &dyn RandomAccessFile,
    path: &Path,
    handle: BlockHandle,
    data_end: u64,
    what: &str,
) -> Result<Vec<u8>> {
    let corrupt = |message: String| Error::corruption(path, handle.offset, message);
    match handle.end_with_trailer() {
        Some(end) if end <= data_end => {}
        _ => {
            return Err(corrupt(format!(
            "{what} handle (offset {}, size {}) points past the end of the block area ({data_end})",
            handle.offset, handle.size
        )))
        }
    }
    let size = handle.size as usize;
    let mut bytes = file.read_at(handle.offset, size + BLOCK_TRAILER_BYTES)?;
    if bytes.len() != size + BLOCK_TRAILER_BYTES {
        return Err(corrupt(format!("short read of {what}")));
    }
    let compression_type = bytes[size];
    let stored = u32::from_le_bytes([
        bytes[size + 1],
        bytes[size + 2],
        bytes[size + 3],
        bytes[size + 4],
    ]);
    // The CRC covers the block bytes and the type byte, which are contiguous.
    let actual = coding::mask_crc(crc32c::crc32c(&bytes[..=size]));
    if stored != actual {
        return Err(corrupt(format!(
            "{what} checksum mismatch (stored {stored:#010x}, computed {actual:#010x})"
        )));
    }
    match Compression::from_u8(compression_type) {
        Some(Compression::None) => {
            bytes.truncate(size);
            Ok(bytes)
        }
        Some(Compression::Snappy) => {
            let input = &bytes[..size];
            let length = snap::raw::decompress_len(input)
                .map_err(|e| corrupt(format!("{what}: bad snappy header: {e}")))?;
            if length > MAX_UNCOMPRESSED_BLOCK_BYTES {
                return Err(corrupt(format!(
                    "{what}: decompressed size {length} too large"
                )));
            }
            let mut out = vec![0; length];
            let n = snap::raw::Decoder::new()
                .decompress(input, &mut out)
                .map_err(|e| corrupt(format!("{what}: snappy decompression failed: {e}")))?;
            out.truncate(n);
            Ok(out)
        }
        Some(Compression::Lz4) => {
            let mut decoder = Decoder::new(&bytes[..size]);
            let length = decoder
                .varint64()
                .and_then(|l| usize::try_from(l).ok())
                .filter(|&l| l <= MAX_UNCOMPRESSED_BLOCK_BYTES)
                .ok_or_else(|| corrupt(format!("{what}: bad lz4 length prefix")))?;
            let mut out = vec![0; length];
            let n = lz4_flex::block::decompress_into(decoder.remaining(), &mut out)
                .map_err(|e| corrupt(format!("{what}: lz4 decompression failed: {e}")))?;
            if n != length {
                return Err(corrupt(format!(
                    "{what}: lz4 decompressed {n} bytes, expected {length}"
                )));
            }
            Ok(out)
        }
        None => Err(corrupt(format!(
            "{what} has unknown compression type {compression_type}"
        ))),
    }
}

/// The fixed-size record at the end of every table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Footer {
    pub metaindex: BlockHandle,
    pub index: BlockHandle,
    pub format_version: u32,
}

impl Footer {
    pub fn encode(&self) -> [u8; FOOTER_BYTES] {
        let mut out = Vec::with_capacity(FOOTER_BYTES);
        coding::put_fixed64(&mut out, self.metaindex.offset);
        coding::put_fixed64(&mut out, self.metaindex.size);
        coding::put_fixed64(&mut out, self.index.offset);
        coding::put_fixed64(&mut out, self.index.size);
        coding::put_fixed32(&mut out, self.format_version);
        let crc = coding::mask_crc(crc32c::crc32c(&out));
        coding::put_fixed32(&mut out, crc);
        coding::put_fixed64(&mut out, TABLE_MAGIC);
        let mut footer = [0; FOOTER_BYTES];
        footer.copy_from_slice(&out);
        footer
    }

    /// Decodes the footer found at `offset` of `path`; checks magic, checksum and version in
    /// that order so the message says the most likely cause.
    pub fn decode(bytes: &[u8], path: &Path, offset: u64) -> Result<Footer> {
        let corrupt = |message: String| Error::corruption(path, offset, message);
        if bytes.len() != FOOTER_BYTES {
            return Err(corrupt(format!(
                "footer is {} bytes, expected {FOOTER_BYTES}",
                bytes.len()
            )));
        }
        let mut decoder = Decoder::new(bytes);
        let (Some(meta_offset), Some(meta_size), Some(index_offset), Some(index_size)) = (
            decoder.fixed64(),
            decoder.fixed64(),
            decoder.fixed64(),
            decoder.fixed64(),
        ) else {
            return Err(corrupt("truncated footer".into()));
        };
        let (Some(format_version), Some(stored_crc), Some(magic)) =
            (decoder.fixed32(), decoder.fixed32(), decoder.fixed64())
        else {
            return Err(corrupt("truncated footer".into()));
        };
        if magic != TABLE_MAGIC {
            return Err(corrupt(format!(
                "bad table magic {magic:#018x} (expected {TABLE_MAGIC:#018x}): not a sift table or truncated"
            )));
        }
        let actual_crc = coding::mask_crc(crc32c::crc32c(&bytes[..36]));
        if stored_crc != actual_crc {
            return Err(corrupt(format!(
                "footer checksum mismatch (stored {stored_crc:#010x}, computed {actual_crc:#010x})"
            )));
        }
        if format_version != FORMAT_VERSION {
            return Err(corrupt(format!(
                "unsupported table format version {format_version} (this build reads {FORMAT_VERSION})"
            )));
        }
        Ok(Footer {
            metaindex: BlockHandle {
                offset: meta_offset,
                size: meta_size,
            },
            index: BlockHandle {
                offset: index_offset,
                size: index_size,
            },
            format_version,
        })
    }
}
