//! In-memory files for the table tests (the real file system lives in `fs`).

use crate::fs::{RandomAccessFile, WritableFile};
use crate::{Error, Result};
use parking_lot::Mutex;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The bytes of one in-memory file, shared by its writer and readers.
#[derive(Clone, Default)]
pub struct MemFile {
    pub bytes: Arc<Mutex<Vec<u8>>>,
    pub syncs: Arc<Mutex<u32>>,
}

impl MemFile {
    pub fn writer(&self) -> Box<dyn WritableFile> {
        Box::new(MemWriter { file: self.clone() })
    }

    pub fn contents(&self) -> Vec<u8> {
        self.bytes.lock().clone()
    }
}

struct MemWriter {
    file: MemFile,
}

impl WritableFile for MemWriter {
    fn append(&mut self, data: &[u8]) -> Result<()> {
        self.file.bytes.lock().extend_from_slice(data);
        Ok(())
    }
    fn flush(&mut self) -> Result<()> {
        Ok(())
    }
    fn sync(&mut self) -> Result<()> {
        *self.file.syncs.lock() += 1;
        Ok(())
    }
    fn len(&self) -> u64 {
        self.file.bytes.lock().len() as u64
    }
}

/// A read-only in-memory file.
pub struct MemReader {
    pub bytes: Vec<u8>,
    pub path: PathBuf,
}

impl MemReader {
    pub fn open(bytes: Vec<u8>, path: &Path) -> Arc<dyn RandomAccessFile> {
        Arc::new(MemReader {
            bytes,
            path: path.to_path_buf(),
        })
    }
}

impl RandomAccessFile for MemReader {
    fn read_at(&self, offset: u64, len: usize) -> Result<Vec<u8>> {
        let start = usize::try_from(offset).unwrap_or(usize::MAX);
        match start
            .checked_add(len)
            .and_then(|end| self.bytes.get(start..end))
        {
            Some(slice) => Ok(slice.to_vec()),
            None => Err(Error::io(
                &self.path,
                std::io::Error::new(std::io::ErrorKind::UnexpectedEof, "short read"),
            )),
        }
    }
    fn size(&self) -> u64 {
        self.bytes.len() as u64
    }
    fn path(&self) -> &Path {
        &self.path
    }
}

/// A read-only in-memory file that also offers its bytes as a memory map would.
pub struct MappedMemReader(pub MemReader);

impl RandomAccessFile for MappedMemReader {
    fn read_at(&self, offset: u64, len: usize) -> Result<Vec<u8>> {
        self.0.read_at(offset, len)
    }
    fn size(&self) -> u64 {
        self.0.size()
    }
    fn path(&self) -> &Path {
        self.0.path()
    }
    fn mapped(&self) -> Option<&[u8]> {
        Some(&self.0.bytes)
    }
}
