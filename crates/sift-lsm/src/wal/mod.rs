//! The write-ahead log (`docs/format/wal.md`): record framing shared with the manifest.
//!
//! A log file is a sequence of 32 KiB blocks. A record is split into fragments that never cross
//! a block boundary; each fragment has a 7-byte header `masked_crc: u32 LE | length: u16 LE |
//! type: u8`. `writer` appends records, `reader` reads them back and decides whether damage is a
//! torn tail (a write that never finished) or corruption in the middle of the log.

mod reader;
mod writer;

pub use reader::LogReader;
pub use writer::LogWriter;

/// Size of one log block. Fragments never cross a block boundary.
pub const BLOCK_BYTES: usize = 32 * 1024;

/// Fragment header: masked CRC32C (4 bytes LE), payload length (2 bytes LE), type (1 byte).
pub const HEADER_BYTES: usize = 7;

/// The whole record is in this one fragment.
pub const FRAGMENT_FULL: u8 = 1;
/// First fragment of a record that continues in later blocks.
pub const FRAGMENT_FIRST: u8 = 2;
/// A fragment that neither starts nor ends its record.
pub const FRAGMENT_MIDDLE: u8 = 3;
/// Last fragment of a record that started in an earlier block.
pub const FRAGMENT_LAST: u8 = 4;

/// The masked CRC32C stored in a fragment header: it covers the type byte, then the payload.
pub fn fragment_crc(fragment_type: u8, payload: &[u8]) -> u32 {
    let crc = crc32c::crc32c_append(crc32c::crc32c(&[fragment_type]), payload);
    crate::coding::mask_crc(crc)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::options::WalRecovery;
    use crate::write_batch::WriteBatch;
    use std::path::PathBuf;

    /// The example in docs/format/wal.md, byte for byte.
    #[test]
    fn documented_write_batch_record() {
        let mut batch = WriteBatch::new();
        batch.put_in(0, b"k", b"v");
        batch.set_sequence(42);
        let expected_payload = [
            0x2a, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0x01, 0x00, 0x01, b'k', 0x01, b'v',
        ];
        assert_eq!(batch.encoded(), &expected_payload[..]);

        let (mut writer, file) = writer::tests::memory_writer();
        writer.add_record(batch.encoded()).unwrap();
        let bytes = file.bytes.lock().clone();
        assert_eq!(bytes.len(), HEADER_BYTES + 18);
        assert_eq!(&bytes[4..7], &[18, 0, FRAGMENT_FULL]);

        let mut reader = LogReader::new(bytes, PathBuf::from("000007.wal"), WalRecovery::default());
        let (offset, payload) = reader.read_record().unwrap().unwrap();
        assert_eq!(offset, 0);
        let decoded = WriteBatch::decode(&payload, reader.path(), offset).unwrap();
        assert_eq!(decoded.sequence(), 42);
        assert!(reader.read_record().unwrap().is_none());
    }
}
