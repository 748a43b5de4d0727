//! `LogWriter`: frames records into fragments and appends them to a log file (WAL or manifest).

use super::{
    fragment_crc, BLOCK_BYTES, FRAGMENT_FIRST, FRAGMENT_FULL, FRAGMENT_LAST, FRAGMENT_MIDDLE,
    HEADER_BYTES,
};
use crate::fs::WritableFile;
use crate::{Error, Result};
use std::path::{Path, PathBuf};

/// The framing buffer keeps its capacity between records, but not beyond this, so one huge
/// batch does not pin its memory for the life of the log.
const RETAINED_BUFFER_BYTES_MAX: usize = 1 << 20;

/// Appends records to one log file.
pub struct LogWriter {
    file: Box<dyn WritableFile>,
    path: PathBuf,
    /// Where the next fragment starts inside the current block.
    block_offset: usize,
    /// The framed bytes of the record being added; reused so a record costs one `append`.
    framed: Vec<u8>,
    /// Set when an append failed: the file may hold part of a record, so the block position we
    /// track may be wrong and every later record would be misframed.
    failed: bool,
}

impl std::fmt::Debug for LogWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LogWriter")
            .field("path", &self.path)
            .field("file_bytes", &self.file_bytes())
            .field("failed", &self.failed)
            .finish_non_exhaustive()
    }
}

impl LogWriter {
    /// Starts writing at the end of `file` (normally empty; a non-empty file is continued at
    /// its current block position).
    pub fn new(file: Box<dyn WritableFile>, path: PathBuf) -> Self {
        let block_offset = (file.len() % BLOCK_BYTES as u64) as usize;
        LogWriter {
            file,
            path,
            block_offset,
            framed: Vec::new(),
            failed: false,
        }
    }

    /// Appends one record (any length, including zero). The record is not durable until
    /// `sync`. After a failed append every later call fails too: the log must be abandoned.
    pub fn add_record(&mut self, payload: &[u8]) -> Result<()> {
        if self.failed {
            return Err(Error::io(
                &self.path,
                std::io::Error::other("an earlier append to this log failed; the log is unusable"),
            ));
        }
        self.framed.clear();
        let block_offset = frame_record(&mut self.framed, self.block_offset, payload);
        let result = self.file.append(&self.framed);
        if self.framed.capacity() > RETAINED_BUFFER_BYTES_MAX {
            self.framed = Vec::new();
        }
        match result {
            Ok(()) => {
                self.block_offset = block_offset;
                Ok(())
            }
            Err(e) => {
                self.failed = true;
                Err(e)
            }
        }
    }

    /// Hands buffered bytes to the operating system.
    pub fn flush(&mut self) -> Result<()> {
        self.file.flush()
    }

    /// Makes every record added so far durable.
    pub fn sync(&mut self) -> Result<()> {
        self.file.sync()
    }

    /// Size of the log file in bytes (framing included).
    pub fn file_bytes(&self) -> u64 {
        self.file.len()
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// Appends the fragments of `payload` to `dst`, starting at `block_offset` inside a block, and
/// returns the block offset after the record.
fn frame_record(dst: &mut Vec<u8>, mut block_offset: usize, payload: &[u8]) -> usize {
    dst.reserve(payload.len() + HEADER_BYTES * (payload.len() / BLOCK_BYTES + 2));
    let mut rest = payload;
    let mut first = true;
    loop {
        let left_in_block = BLOCK_BYTES - block_offset;
        if left_in_block < HEADER_BYTES {
            // Too small for a header: zero-fill the block trailer and start the next block.
            dst.resize(dst.len() + left_in_block, 0);
            block_offset = 0;
            continue;
        }
        let room = left_in_block - HEADER_BYTES;
        let take = rest.len().min(room);
        let last = take == rest.len();
        let fragment_type = match (first, last) {
            (true, true) => FRAGMENT_FULL,
            (true, false) => FRAGMENT_FIRST,
            (false, true) => FRAGMENT_LAST,
            (false, false) => FRAGMENT_MIDDLE,
        };
        let (fragment, remainder) = rest.split_at(take);
        dst.extend_from_slice(&fragment_crc(fragment_type, fragment).to_le_bytes());
        // `take <= BLOCK_BYTES - HEADER_BYTES`, which fits in u16.
        dst.extend_from_slice(&(take as u16).to_le_bytes());
        dst.push(fragment_type);
        dst.extend_from_slice(fragment);
        block_offset += HEADER_BYTES + take;
        rest = remainder;
        first = false;
        if last {
            return block_offset;
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use parking_lot::Mutex;
    use std::sync::Arc;

    /// An in-memory writable file whose bytes the test can read back; can be told to fail.
    #[derive(Clone, Default)]
    pub(crate) struct MemoryFile {
        pub(crate) bytes: Arc<Mutex<Vec<u8>>>,
        pub(crate) appends: Arc<Mutex<usize>>,
        pub(crate) fail_appends: Arc<Mutex<bool>>,
    }

    impl WritableFile for MemoryFile {
        fn append(&mut self, data: &[u8]) -> Result<()> {
            if *self.fail_appends.lock() {
                // Simulate a partial write before the failure.
                let half = data.len() / 2;
                self.bytes.lock().extend_from_slice(&data[..half]);
                return Err(Error::io("memory", std::io::Error::other("injected")));
            }
            *self.appends.lock() += 1;
            self.bytes.lock().extend_from_slice(data);
            Ok(())
        }
        fn flush(&mut self) -> Result<()> {
            Ok(())
        }
        fn sync(&mut self) -> Result<()> {
            Ok(())
        }
        fn len(&self) -> u64 {
            self.bytes.lock().len() as u64
        }
    }

    pub(crate) fn memory_writer() -> (LogWriter, MemoryFile) {
        let file = MemoryFile::default();
        let writer = LogWriter::new(Box::new(file.clone()), PathBuf::from("000001.wal"));
        (writer, file)
    }

    #[test]
    fn one_append_per_record_and_headers_as_specified() {
        let (mut writer, file) = memory_writer();
        writer.add_record(b"hello").unwrap();
        let big = vec![7u8; BLOCK_BYTES * 2];
        writer.add_record(&big).unwrap();
        assert_eq!(*file.appends.lock(), 2);
        let bytes = file.bytes.lock().clone();
        assert_eq!(writer.file_bytes(), bytes.len() as u64);
        // First record: one FULL fragment.
        assert_eq!(&bytes[4..7], &[5, 0, FRAGMENT_FULL]);
        assert_eq!(&bytes[7..12], b"hello");
        let crc = u32::from_le_bytes(bytes[0..4].try_into().unwrap());
        assert_eq!(
            crate::coding::unmask_crc(crc),
            crc32c::crc32c(&[FRAGMENT_FULL, b'h', b'e', b'l', b'l', b'o'])
        );
        // Second record: FIRST filling block 0, MIDDLE filling block 1, LAST in block 2.
        assert_eq!(bytes[12 + 6], FRAGMENT_FIRST);
        let first_len = u16::from_le_bytes([bytes[16], bytes[17]]) as usize;
        assert_eq!(12 + HEADER_BYTES + first_len, BLOCK_BYTES);
        assert_eq!(bytes[BLOCK_BYTES + 6], FRAGMENT_MIDDLE);
        assert_eq!(bytes[2 * BLOCK_BYTES + 6], FRAGMENT_LAST);
        let total_payload = bytes.len() - 12 - 3 * HEADER_BYTES;
        assert_eq!(total_payload, big.len());
    }

    #[test]
    fn short_block_trailer_is_zero_filled() {
        let (mut writer, file) = memory_writer();
        // Leave exactly 3 bytes in the first block.
        let payload = vec![0xabu8; BLOCK_BYTES - HEADER_BYTES - 3];
        writer.add_record(&payload).unwrap();
        writer.add_record(b"x").unwrap();
        let bytes = file.bytes.lock().clone();
        assert_eq!(&bytes[BLOCK_BYTES - 3..BLOCK_BYTES], &[0, 0, 0]);
        assert_eq!(bytes[BLOCK_BYTES + 6], FRAGMENT_FULL);
        assert_eq!(bytes.len(), BLOCK_BYTES + HEADER_BYTES + 1);
    }

    #[test]
    fn failed_append_poisons_the_writer() {
        let (mut writer, file) = memory_writer();
        writer.add_record(b"ok").unwrap();
        *file.fail_appends.lock() = true;
        assert!(writer.add_record(b"lost").is_err());
        *file.fail_appends.lock() = false;
        assert!(writer.add_record(b"later").is_err());
    }
}
