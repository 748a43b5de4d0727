//! Snapshots of `memory` indexes: written by `Database::close`, loaded at open instead of
//! scanning the collection when they match the engine's state exactly.
//!
//! One file per memory index in the database directory (`sift-memory-index-{id}.snapshot`),
//! CRC-protected, recording the engine sequence number it reflects (layout:
//! `docs/format/index-encodings.md`, section "Memory-index snapshots"). At open a snapshot is
//! used only if its CRC, header and every entry check out and its sequence number equals the
//! engine's latest sequence number right after recovery: every write (documents, catalog
//! changes, read repairs) takes a new sequence number, so equality means nothing was written
//! since the close that wrote it. Anything else (no file, a stale or corrupt one) makes the
//! index be rebuilt by a scan, with the reason recorded in [`MemoryIndexOrigin`]. After open,
//! every snapshot file is removed, so a crash later can never leave one behind that looks
//! current.

use crate::catalog::IndexRecord;
use crate::encoding::decode_value;
use crate::error::{IndexError, Result, MAX_PRIMARY_KEY_BYTES};
use crate::memory::MemoryIndex;
use sift_lsm::extension::{put_fixed32, put_fixed64, Decoder};
use sift_lsm::fs::FileSystem;
use sift_lsm::SeqNo;
use std::collections::HashSet;
use std::path::{Path, PathBuf};

/// First bytes of every snapshot file.
pub const SNAPSHOT_MAGIC: &[u8; 8] = b"SIFTMEMI";
/// Layout version written after the magic.
pub const SNAPSHOT_FORMAT_VERSION: u32 = 1;
const SNAPSHOT_FILE_PREFIX: &str = "sift-memory-index-";
const SNAPSHOT_FILE_SUFFIX: &str = ".snapshot";
const TEMPORARY_SUFFIX: &str = ".tmp";
/// magic 8 + version 4 + index id 8 + attr id 4 + type byte 1 + reserved 3 + seq 8 + count 8.
const HEADER_BYTES: usize = 44;
const CRC_BYTES: usize = 4;

/// How a memory index got its contents.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum MemoryIndexOrigin {
    /// Filled by a back-fill: `create_index`, or at open resuming a back-fill a crash
    /// interrupted.
    #[default]
    Backfilled,
    /// Loaded from the snapshot written by the last clean close.
    Snapshot {
        /// The engine sequence number the snapshot reflects.
        seq: SeqNo,
        /// Entries loaded.
        entries: u64,
    },
    /// Rebuilt at open by scanning the collection, because no usable snapshot existed.
    Rebuilt {
        /// Why the snapshot could not be used.
        reason: String,
    },
}

/// The file holding index `index_id`'s snapshot.
pub fn snapshot_path(directory: &Path, index_id: u64) -> PathBuf {
    directory.join(format!(
        "{SNAPSHOT_FILE_PREFIX}{index_id}{SNAPSHOT_FILE_SUFFIX}"
    ))
}

/// Serialises `memory` (the index described by `record`) as a snapshot reflecting engine
/// sequence number `seq`.
pub fn encode_snapshot(record: &IndexRecord, memory: &MemoryIndex, seq: SeqNo) -> Vec<u8> {
    let mut entries = Vec::new();
    let mut count: u64 = 0;
    memory.for_each_entry(|pk, value, entry_seq| {
        put_fixed32(&mut entries, pk.len() as u32);
        entries.extend_from_slice(pk);
        put_fixed32(&mut entries, value.len() as u32);
        entries.extend_from_slice(value);
        put_fixed64(&mut entries, entry_seq);
        count += 1;
    });
    let mut out = Vec::with_capacity(HEADER_BYTES + entries.len() + CRC_BYTES);
    out.extend_from_slice(SNAPSHOT_MAGIC);
    put_fixed32(&mut out, SNAPSHOT_FORMAT_VERSION);
    put_fixed64(&mut out, record.id);
    put_fixed32(&mut out, record.attr_id);
    out.push(record.attr_type.type_byte());
    out.extend_from_slice(&[0; 3]);
    put_fixed64(&mut out, seq);
    put_fixed64(&mut out, count);
    out.extend_from_slice(&entries);
    let crc = crc32c::crc32c(&out);
    put_fixed32(&mut out, crc);
    out
}

/// Writes `bytes` to `path` atomically: a temporary file, synced, renamed, directory synced.
fn write_atomically(file_system: &dyn FileSystem, path: &Path, bytes: &[u8]) -> Result<()> {
    let mut temporary = path.as_os_str().to_owned();
    temporary.push(TEMPORARY_SUFFIX);
    let temporary = PathBuf::from(temporary);
    let written = (|| -> Result<()> {
        let mut file = file_system.create(&temporary)?;
        file.append(bytes)?;
        file.sync()?;
        drop(file);
        file_system.rename(&temporary, path)?;
        if let Some(directory) = path.parent() {
            file_system.sync_dir(directory)?;
        }
        Ok(())
    })();
    if written.is_err() && file_system.exists(&temporary) {
        let _ = file_system.remove(&temporary);
    }
    written
}

/// Writes one snapshot per memory index. Called by `Database::close` after the engine has
/// synced its WAL, with the sequence number of the last write.
pub(crate) fn write_snapshots<'a>(
    file_system: &dyn FileSystem,
    directory: &Path,
    indexes: impl IntoIterator<Item = (&'a IndexRecord, &'a MemoryIndex)>,
    seq: SeqNo,
) -> Result<()> {
    let mut first_error = None;
    for (record, memory) in indexes {
        let bytes = encode_snapshot(record, memory, seq);
        if let Err(error) =
            write_atomically(file_system, &snapshot_path(directory, record.id), &bytes)
        {
            first_error.get_or_insert(error);
        }
    }
    first_error.map_or(Ok(()), Err)
}

/// Why a snapshot was not used.
#[derive(Debug)]
pub enum SnapshotRejection {
    Missing,
    /// Valid, but written at another sequence number than the engine's state.
    Stale {
        snapshot_seq: SeqNo,
        engine_seq: SeqNo,
    },
    /// Unreadable, damaged, or describing another index; names the file and offset.
    Corrupt(IndexError),
}

impl std::fmt::Display for SnapshotRejection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SnapshotRejection::Missing => {
                f.write_str("no snapshot (the database was not closed cleanly)")
            }
            SnapshotRejection::Stale {
                snapshot_seq,
                engine_seq,
            } => write!(
                f,
                "stale snapshot: written at sequence number {snapshot_seq}, the database is at \
                 {engine_seq}"
            ),
            SnapshotRejection::Corrupt(error) => write!(f, "unusable snapshot: {error}"),
        }
    }
}

fn corrupt(path: &Path, offset: usize, message: impl Into<String>) -> SnapshotRejection {
    SnapshotRejection::Corrupt(IndexError::Engine(sift_lsm::Error::corruption(
        path,
        offset as u64,
        message,
    )))
}

/// Checks `bytes` (the snapshot file at `path`) against `record` and `engine_seq` and fills
/// `memory` from it. On rejection `memory` is left empty. Returns the number of entries.
pub fn load_snapshot(
    path: &Path,
    bytes: &[u8],
    record: &IndexRecord,
    engine_seq: SeqNo,
    memory: &MemoryIndex,
) -> std::result::Result<u64, SnapshotRejection> {
    let loaded = decode_into(path, bytes, record, engine_seq, memory);
    if loaded.is_err() {
        memory.clear();
    }
    loaded
}

fn decode_into(
    path: &Path,
    bytes: &[u8],
    record: &IndexRecord,
    engine_seq: SeqNo,
    memory: &MemoryIndex,
) -> std::result::Result<u64, SnapshotRejection> {
    if bytes.len() < HEADER_BYTES + CRC_BYTES {
        return Err(corrupt(
            path,
            bytes.len(),
            format!(
                "snapshot of {} bytes is shorter than header and checksum",
                bytes.len()
            ),
        ));
    }
    let body_bytes = bytes.len() - CRC_BYTES;
    let (body, stored_crc) = bytes.split_at(body_bytes);
    let stored_crc = Decoder::new(stored_crc).fixed32().unwrap_or_default();
    if crc32c::crc32c(body) != stored_crc {
        return Err(corrupt(path, body_bytes, "snapshot checksum mismatch"));
    }
    let mut decoder = Decoder::new(body);
    let truncated = |at: usize| corrupt(path, at, "snapshot truncated");
    if decoder.bytes(SNAPSHOT_MAGIC.len()) != Some(SNAPSHOT_MAGIC.as_slice()) {
        return Err(corrupt(path, 0, "not a memory-index snapshot (bad magic)"));
    }
    let version = decoder.fixed32().ok_or_else(|| truncated(8))?;
    if version != SNAPSHOT_FORMAT_VERSION {
        return Err(corrupt(
            path,
            8,
            format!("unknown snapshot format version {version}"),
        ));
    }
    let index_id = decoder.fixed64().ok_or_else(|| truncated(12))?;
    let attr_id = decoder.fixed32().ok_or_else(|| truncated(20))?;
    let type_byte = decoder.u8().ok_or_else(|| truncated(24))?;
    decoder.bytes(3).ok_or_else(|| truncated(25))?;
    if index_id != record.id
        || attr_id != record.attr_id
        || type_byte != record.attr_type.type_byte()
    {
        return Err(corrupt(
            path,
            12,
            format!(
                "snapshot describes index {index_id} (attribute {attr_id}, type byte \
                 {type_byte}), not index {} (attribute {}, type {})",
                record.id, record.attr_id, record.attr_type
            ),
        ));
    }
    let snapshot_seq = decoder.fixed64().ok_or_else(|| truncated(28))?;
    let count = decoder.fixed64().ok_or_else(|| truncated(36))?;
    if snapshot_seq != engine_seq {
        return Err(SnapshotRejection::Stale {
            snapshot_seq,
            engine_seq,
        });
    }
    let mut pks: HashSet<Vec<u8>> = HashSet::new();
    for _ in 0..count {
        let at = decoder.position();
        let pk_bytes = decoder.fixed32().ok_or_else(|| truncated(at))? as usize;
        let pk = decoder.bytes(pk_bytes).ok_or_else(|| truncated(at))?;
        if pk.is_empty() || pk.len() > MAX_PRIMARY_KEY_BYTES {
            return Err(corrupt(
                path,
                at,
                format!("primary key of {} bytes", pk.len()),
            ));
        }
        let value_at = decoder.position();
        let value_bytes = decoder.fixed32().ok_or_else(|| truncated(value_at))? as usize;
        let value = decoder
            .bytes(value_bytes)
            .ok_or_else(|| truncated(value_at))?;
        match decode_value(value, record.attr_type) {
            Ok((_, consumed)) if consumed == value.len() => {}
            Ok(_) => {
                return Err(corrupt(path, value_at, "trailing bytes after the value"));
            }
            Err(error) => {
                return Err(corrupt(
                    path,
                    value_at + 4,
                    format!("bad {} value: {error}", record.attr_type),
                ));
            }
        }
        let seq_at = decoder.position();
        let seq = decoder.fixed64().ok_or_else(|| truncated(seq_at))?;
        if seq == 0 || seq > snapshot_seq {
            return Err(corrupt(
                path,
                seq_at,
                format!("entry sequence number {seq} outside 1..={snapshot_seq}"),
            ));
        }
        if !pks.insert(pk.to_vec()) {
            return Err(corrupt(path, at, "primary key listed twice"));
        }
        memory.set(pk, Some((value, seq)));
    }
    if !decoder.is_empty() {
        return Err(corrupt(
            path,
            decoder.position(),
            "bytes after the last entry",
        ));
    }
    Ok(count)
}

/// Fills a ready memory index at open: from its snapshot if one matches `engine_seq`,
/// otherwise it is left empty and the reason returned (the caller rebuilds it by a scan).
pub(crate) fn restore(
    file_system: &dyn FileSystem,
    directory: &Path,
    record: &IndexRecord,
    engine_seq: SeqNo,
    memory: &MemoryIndex,
) -> std::result::Result<u64, SnapshotRejection> {
    let path = snapshot_path(directory, record.id);
    if !file_system.exists(&path) {
        return Err(SnapshotRejection::Missing);
    }
    let bytes = file_system
        .read_all(&path)
        .map_err(|error| SnapshotRejection::Corrupt(error.into()))?;
    load_snapshot(&path, &bytes, record, engine_seq, memory)
}

/// Removes every snapshot file (and leftover temporary) in `directory`. Called once open has
/// restored the indexes: from then on the files would describe a past state.
pub(crate) fn remove_snapshots(file_system: &dyn FileSystem, directory: &Path) -> Result<()> {
    for name in file_system.list(directory)? {
        if name.starts_with(SNAPSHOT_FILE_PREFIX)
            && (name.ends_with(SNAPSHOT_FILE_SUFFIX) || name.ends_with(TEMPORARY_SUFFIX))
        {
            file_system.remove(&directory.join(&name))?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::{IndexKind, IndexState, Maintenance};
    use crate::encoding::encode_value_to_vec;
    use crate::value::{AttrType, AttrValue};

    fn record() -> IndexRecord {
        IndexRecord {
            name: "m".into(),
            collection: "c".into(),
            id: 7,
            path: "n".into(),
            attr_type: AttrType::Int,
            kind: IndexKind::Memory,
            maintenance: Maintenance::SyncFull,
            read_repair: false,
            state: IndexState::Ready,
            attr_id: 7,
            first_seq: 0,
            tree: None,
            split_delta: None,
            validation: None,
            bloom_bits_per_key: None,
            unique: false,
            key_prefixes: Vec::new(),
            conversion: crate::ValueConversion::Json,
        }
    }

    fn sample() -> MemoryIndex {
        let memory = MemoryIndex::default();
        for i in 0..20_u64 {
            let value = encode_value_to_vec(&AttrValue::Int(i as i64 % 3 - 1));
            memory.set(format!("pk{i}").as_bytes(), Some((&value, i + 1)));
        }
        memory
    }

    fn entries(memory: &MemoryIndex) -> Vec<(Vec<u8>, Vec<u8>, SeqNo)> {
        let mut out = Vec::new();
        memory.for_each_entry(|pk, value, seq| out.push((pk.to_vec(), value.to_vec(), seq)));
        out
    }

    #[test]
    fn round_trip_and_staleness() {
        let memory = sample();
        let bytes = encode_snapshot(&record(), &memory, 40);
        let loaded = MemoryIndex::default();
        let path = Path::new("snap");
        assert_eq!(
            load_snapshot(path, &bytes, &record(), 40, &loaded).ok(),
            Some(20)
        );
        assert_eq!(entries(&loaded), entries(&memory));
        let stale = MemoryIndex::default();
        assert!(matches!(
            load_snapshot(path, &bytes, &record(), 41, &stale),
            Err(SnapshotRejection::Stale {
                snapshot_seq: 40,
                engine_seq: 41
            })
        ));
        assert!(stale.is_empty());
    }

    #[test]
    fn every_damaged_byte_and_truncation_is_rejected() {
        let bytes = encode_snapshot(&record(), &sample(), 40);
        for at in 0..bytes.len() {
            let mut damaged = bytes.clone();
            damaged[at] ^= 0x20;
            let memory = MemoryIndex::default();
            let result = load_snapshot(Path::new("snap"), &damaged, &record(), 40, &memory);
            assert!(
                matches!(result, Err(SnapshotRejection::Corrupt(_))),
                "flip at {at}"
            );
            assert!(memory.is_empty(), "flip at {at} left entries behind");
        }
        for length in 0..bytes.len() {
            let memory = MemoryIndex::default();
            let result = load_snapshot(Path::new("snap"), &bytes[..length], &record(), 40, &memory);
            assert!(
                matches!(result, Err(SnapshotRejection::Corrupt(_))),
                "cut at {length}"
            );
        }
    }

    #[test]
    fn checksum_valid_but_inconsistent_entries_are_rejected() {
        // A correctly checksummed file whose entry names a version newer than the snapshot.
        let memory = MemoryIndex::default();
        memory.set(b"pk", Some((&encode_value_to_vec(&AttrValue::Int(1)), 50)));
        let bytes = encode_snapshot(&record(), &memory, 40);
        let loaded = MemoryIndex::default();
        let result = load_snapshot(Path::new("snap"), &bytes, &record(), 40, &loaded);
        assert!(matches!(result, Err(SnapshotRejection::Corrupt(_))));
        assert!(loaded.is_empty());
    }
}
