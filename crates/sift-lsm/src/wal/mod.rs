//! The write-ahead log (`docs/format/wal.md`): record framing shared with the manifest.
//!
//! A log file is a sequence of 32 KiB blocks. A record is split into fragments that never cross
//! a block boundary; each fragment has a 7-byte header `masked_crc: u32 LE | length: u16 LE |
//! type: u8`. `writer` appends records, `reader` reads them back and decides whether damage is a
//! torn tail (a write that never finished) or corruption in the middle of the log.

mod reader;
mod writer;

use crate::{Error, Result};
use std::path::Path;

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

/// The first 8 bytes of a control record's payload. A write batch starts with its first
/// sequence number there, and sequence numbers stay below 2^56, so no batch starts this way.
pub const CONTROL_RECORD_MARKER: [u8; 8] = [0xFF; 8];
/// Control record kind: the log this one follows, and that log's length at the switch.
pub const CONTROL_PREVIOUS_LOG: u8 = 1;
/// Control record kind: an older log is complete and synced at the given length.
pub const CONTROL_LOG_SYNCED: u8 = 2;
/// Payload bytes of every control record: marker, kind, log number, log bytes.
pub const CONTROL_RECORD_BYTES: usize = 8 + 1 + 8 + 8;

/// A WAL record that carries no writes but facts about other logs, which recovery uses to
/// tell a log cut short by a crash from a damaged one (`docs/format/wal.md`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ControlRecord {
    /// The first record of a log started by a memtable switch: the log that was active before
    /// it, and that log's length when the switch closed it. Written without a sync.
    PreviousLog { number: u64, bytes: u64 },
    /// Log `number` was synced while it held `bytes` bytes, all of them, after it was closed.
    LogSynced { number: u64, bytes: u64 },
}

impl ControlRecord {
    pub fn encode(&self) -> [u8; CONTROL_RECORD_BYTES] {
        let (kind, number, bytes) = match *self {
            ControlRecord::PreviousLog { number, bytes } => (CONTROL_PREVIOUS_LOG, number, bytes),
            ControlRecord::LogSynced { number, bytes } => (CONTROL_LOG_SYNCED, number, bytes),
        };
        let mut out = [0u8; CONTROL_RECORD_BYTES];
        out[..8].copy_from_slice(&CONTROL_RECORD_MARKER);
        out[8] = kind;
        out[9..17].copy_from_slice(&number.to_le_bytes());
        out[17..25].copy_from_slice(&bytes.to_le_bytes());
        out
    }

    /// The control record in `payload`, `None` if the payload is not one (a write batch), and
    /// a corruption error (at `offset` of `path`) if it starts with the marker but is not a
    /// control record this version knows.
    pub fn decode(payload: &[u8], path: &Path, offset: u64) -> Result<Option<ControlRecord>> {
        if !payload.starts_with(&CONTROL_RECORD_MARKER) {
            return Ok(None);
        }
        let field = |range: std::ops::Range<usize>| -> Option<u64> {
            let bytes: [u8; 8] = payload.get(range)?.try_into().ok()?;
            Some(u64::from_le_bytes(bytes))
        };
        let (Some(number), Some(bytes), true) = (
            field(9..17),
            field(17..25),
            payload.len() == CONTROL_RECORD_BYTES,
        ) else {
            return Err(Error::corruption(
                path,
                offset,
                format!(
                    "control record of {} bytes, expected {CONTROL_RECORD_BYTES}",
                    payload.len()
                ),
            ));
        };
        match payload[8] {
            CONTROL_PREVIOUS_LOG => Ok(Some(ControlRecord::PreviousLog { number, bytes })),
            CONTROL_LOG_SYNCED => Ok(Some(ControlRecord::LogSynced { number, bytes })),
            kind => Err(Error::corruption(
                path,
                offset,
                format!("unknown control record kind {kind}"),
            )),
        }
    }
}

#[cfg(test)]
mod fuzz;
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
