//! The real file system (placeholder).
use super::{FileLock, FileSystem, RandomAccessFile, WritableFile};
use crate::Result;
use std::path::Path;
use std::sync::Arc;

#[derive(Debug, Default, Clone, Copy)]
pub struct StdFileSystem;

impl FileSystem for StdFileSystem {
    fn create(&self, _path: &Path) -> Result<Box<dyn WritableFile>> {
        todo!()
    }
    fn open(&self, _path: &Path, _direct: bool) -> Result<Arc<dyn RandomAccessFile>> {
        todo!()
    }
    fn read_all(&self, _path: &Path) -> Result<Vec<u8>> {
        todo!()
    }
    fn rename(&self, _from: &Path, _to: &Path) -> Result<()> {
        todo!()
    }
    fn remove(&self, _path: &Path) -> Result<()> {
        todo!()
    }
    fn exists(&self, _path: &Path) -> bool {
        todo!()
    }
    fn create_dir_all(&self, _path: &Path) -> Result<()> {
        todo!()
    }
    fn list(&self, _dir: &Path) -> Result<Vec<String>> {
        todo!()
    }
    fn sync_dir(&self, _dir: &Path) -> Result<()> {
        todo!()
    }
    fn lock(&self, _path: &Path) -> Result<Box<dyn FileLock>> {
        todo!()
    }
    fn file_size(&self, _path: &Path) -> Result<u64> {
        todo!()
    }
}
