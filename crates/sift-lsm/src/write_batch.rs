//! `WriteBatch`: writes to one or more trees applied atomically. Its encoding is the WAL
//! record payload (`docs/format/wal.md`).
//!
//! Layout: `sequence: fixed64 | count: fixed32 | entry*`, each entry
//! `kind: u8 | tree: varint32 | key: varint len + bytes | [value: varint len + bytes]`
//! (no value for deletes). Entry `i` gets sequence number `sequence + i`.

use crate::coding::{put_length_prefixed, put_varint32, Decoder};
use crate::key::{SeqNo, TreeId, ValueKind};
use crate::{Error, Result};

pub const BATCH_HEADER_BYTES: usize = 12;
/// An entry's bytes besides its key and value: kind, and varints of tree id, key length and
/// value length (5 bytes each at most).
pub const ENTRY_OVERHEAD_BYTES_MAX: usize = 1 + 3 * 5;

/// Writes applied atomically, in order, across trees.
#[derive(Debug, Clone)]
pub struct WriteBatch {
    rep: Vec<u8>,
    count: u32,
    /// The database (its `DbInner::instance`) whose `Db::check_batch` this batch passed since
    /// its last change: that database's sequenced commit does not check it again; any other
    /// database does.
    checked_by: Option<u64>,
}

impl Default for WriteBatch {
    fn default() -> Self {
        Self::new()
    }
}

/// One decoded entry of a batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchEntry<'a> {
    pub kind: ValueKind,
    pub tree: TreeId,
    pub key: &'a [u8],
    pub value: &'a [u8],
}

impl WriteBatch {
    /// An empty batch.
    pub fn new() -> Self {
        WriteBatch {
            rep: vec![0; BATCH_HEADER_BYTES],
            count: 0,
            checked_by: None,
        }
    }

    /// An empty batch with room for `entry_bytes` bytes of entries (each takes its key and
    /// value plus at most [`ENTRY_OVERHEAD_BYTES_MAX`]): a batch built to a known size grows
    /// without reallocating.
    pub fn with_capacity(entry_bytes: usize) -> Self {
        let mut rep = Vec::with_capacity(BATCH_HEADER_BYTES.saturating_add(entry_bytes));
        rep.resize(BATCH_HEADER_BYTES, 0);
        WriteBatch {
            rep,
            count: 0,
            checked_by: None,
        }
    }

    /// A put into the tree with id `tree`.
    pub fn put_in(&mut self, tree: TreeId, key: &[u8], value: &[u8]) {
        self.push(ValueKind::Put, tree, key, Some(value));
    }
    /// A delete in the tree with id `tree`.
    pub fn delete_in(&mut self, tree: TreeId, key: &[u8]) {
        self.push(ValueKind::Delete, tree, key, None);
    }
    /// A merge in the tree with id `tree`.
    pub fn merge_in(&mut self, tree: TreeId, key: &[u8], operand: &[u8]) {
        self.push(ValueKind::Merge, tree, key, Some(operand));
    }
    /// Adds a put to the tree behind `tree`.
    pub fn put(&mut self, tree: &crate::Tree, key: &[u8], value: &[u8]) {
        self.put_in(tree.id(), key, value);
    }
    /// A delete.
    pub fn delete(&mut self, tree: &crate::Tree, key: &[u8]) {
        self.delete_in(tree.id(), key);
    }
    /// A merge of `operand` into `key`.
    pub fn merge(&mut self, tree: &crate::Tree, key: &[u8], operand: &[u8]) {
        self.merge_in(tree.id(), key, operand);
    }

    fn push(&mut self, kind: ValueKind, tree: TreeId, key: &[u8], value: Option<&[u8]>) {
        // One growth per entry at most, instead of one per field.
        let value_bytes = value.map_or(0, <[u8]>::len);
        self.rep
            .reserve(ENTRY_OVERHEAD_BYTES_MAX + key.len() + value_bytes);
        self.rep.push(kind as u8);
        put_varint32(&mut self.rep, tree);
        put_length_prefixed(&mut self.rep, key);
        if let Some(v) = value {
            put_length_prefixed(&mut self.rep, v);
        }
        self.count += 1;
        self.checked_by = None;
        self.rep[8..12].copy_from_slice(&self.count.to_le_bytes());
    }

    /// Writes in the batch.
    pub fn len(&self) -> usize {
        self.count as usize
    }
    /// Whether the batch holds no write.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }
    /// Size of the encoding in bytes.
    pub fn encoded_bytes(&self) -> usize {
        self.rep.len()
    }
    /// Removes every write.
    pub fn clear(&mut self) {
        self.rep.truncate(BATCH_HEADER_BYTES);
        self.rep[..BATCH_HEADER_BYTES].fill(0);
        self.count = 0;
        self.checked_by = None;
    }

    /// Appends all entries of `other`.
    pub fn append(&mut self, other: &WriteBatch) {
        self.rep.extend_from_slice(&other.rep[BATCH_HEADER_BYTES..]);
        self.count += other.count;
        self.checked_by = None;
        self.rep[8..12].copy_from_slice(&self.count.to_le_bytes());
    }

    pub(crate) fn mark_checked_by(&mut self, database: u64) {
        self.checked_by = Some(database);
    }
    pub(crate) fn is_checked_by(&self, database: u64) -> bool {
        self.checked_by == Some(database)
    }

    /// The sequence number of the first write.
    pub fn sequence(&self) -> SeqNo {
        crate::coding::decode_fixed64(&self.rep).unwrap_or(0)
    }
    /// Sets the sequence number of the first write.
    pub fn set_sequence(&mut self, seq: SeqNo) {
        // In place: called for every batch of every commit, under the commit lock.
        self.rep[..8].copy_from_slice(&seq.to_le_bytes());
    }

    /// The encoding written to the WAL.
    pub fn encoded(&self) -> &[u8] {
        &self.rep
    }

    /// Decodes a WAL payload, validating every entry. `file`/`offset` name where it came from,
    /// for the corruption error.
    pub fn decode(bytes: &[u8], file: &std::path::Path, offset: u64) -> Result<WriteBatch> {
        let corrupt = |m: &str| Error::corruption(file, offset, format!("write batch: {m}"));
        if bytes.len() < BATCH_HEADER_BYTES {
            return Err(corrupt("shorter than its header"));
        }
        let count =
            crate::coding::decode_fixed32(&bytes[8..]).ok_or_else(|| corrupt("no count"))?;
        let batch = WriteBatch {
            rep: bytes.to_vec(),
            count,
            checked_by: None,
        };
        let mut seen = 0u32;
        for entry in &batch {
            entry.map_err(|m| corrupt(&m))?;
            seen += 1;
        }
        if seen != count {
            return Err(corrupt(&format!(
                "header says {count} entries, found {seen}"
            )));
        }
        Ok(batch)
    }

    /// The entries in order. Each item is an error message if the encoding is damaged.
    pub fn iter(&self) -> BatchIter<'_> {
        BatchIter {
            decoder: Decoder::new(&self.rep[BATCH_HEADER_BYTES..]),
            failed: false,
        }
    }
}

impl<'a> IntoIterator for &'a WriteBatch {
    type Item = std::result::Result<BatchEntry<'a>, String>;
    type IntoIter = BatchIter<'a>;
    fn into_iter(self) -> BatchIter<'a> {
        self.iter()
    }
}

pub struct BatchIter<'a> {
    decoder: Decoder<'a>,
    failed: bool,
}

impl<'a> Iterator for BatchIter<'a> {
    type Item = std::result::Result<BatchEntry<'a>, String>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed || self.decoder.is_empty() {
            return None;
        }
        let at = self.decoder.position();
        let result = (|| {
            let kind_byte = self.decoder.u8().ok_or("truncated kind")?;
            let kind = ValueKind::from_u8(kind_byte).ok_or("unknown entry kind")?;
            let tree = self.decoder.varint32().ok_or("bad tree id")?;
            let key = self.decoder.length_prefixed().ok_or("truncated key")?;
            let value = if kind == ValueKind::Delete {
                &[][..]
            } else {
                self.decoder.length_prefixed().ok_or("truncated value")?
            };
            Ok::<_, &str>(BatchEntry {
                kind,
                tree,
                key,
                value,
            })
        })();
        match result {
            Ok(e) => Some(Ok(e)),
            Err(m) => {
                self.failed = true;
                Some(Err(format!(
                    "{m} at batch byte {}",
                    at + BATCH_HEADER_BYTES
                )))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A batch checked by `Db::check_batch` counts as checked only until it changes.
    #[test]
    fn a_change_clears_the_checked_mark() {
        let mut batch = WriteBatch::new();
        batch.put_in(0, b"k", b"v");
        assert!(!batch.is_checked_by(1));
        batch.mark_checked_by(1);
        assert!(!batch.is_checked_by(2), "checked by one database only");
        batch.set_sequence(7);
        assert!(batch.is_checked_by(1), "the sequence number is not checked");
        batch.delete_in(1, b"k");
        assert!(!batch.is_checked_by(1));
        batch.mark_checked_by(1);
        batch.append(&WriteBatch::new());
        assert!(!batch.is_checked_by(1));
        batch.mark_checked_by(1);
        batch.clear();
        assert!(!batch.is_checked_by(1));
        let mut decoded =
            WriteBatch::decode(batch.encoded(), std::path::Path::new("log"), 0).expect("decodes");
        assert!(!decoded.is_checked_by(1));
        decoded.mark_checked_by(1);
        assert!(decoded.clone().is_checked_by(1));
    }

    /// The header after `set_sequence` is the spec's (`docs/format/wal.md`): the sequence as
    /// u64 LE, the count as u32 LE, then the entries unchanged, whatever the batch held before.
    #[test]
    fn set_sequence_writes_the_header_the_spec_describes() {
        for entries in [0u32, 1, 3, 200] {
            let mut batch = WriteBatch::new();
            let mut body = Vec::new();
            for i in 0..entries {
                let key = format!("key{i}");
                batch.put_in(i % 3, key.as_bytes(), b"v");
                // kind Put, tree varint (< 128), key and value with one-byte lengths.
                body.extend_from_slice(&[1, (i % 3) as u8, key.len() as u8]);
                body.extend_from_slice(key.as_bytes());
                body.extend_from_slice(&[1, b'v']);
            }
            for sequence in [0u64, 1, 42, 0x0102_0304_0506_0708, (1 << 56) - 1] {
                batch.set_sequence(sequence);
                let mut expected = Vec::new();
                for byte in 0..8 {
                    expected.push((sequence >> (8 * byte)) as u8);
                }
                for byte in 0..4 {
                    expected.push((entries >> (8 * byte)) as u8);
                }
                expected.extend_from_slice(&body);
                assert_eq!(
                    batch.encoded(),
                    &expected[..],
                    "{entries} entries, sequence {sequence}"
                );
                assert_eq!(batch.sequence(), sequence);
            }
        }
        // The spec's worked example.
        let mut batch = WriteBatch::new();
        batch.put_in(0, b"k", b"v");
        batch.set_sequence(42);
        assert_eq!(
            batch.encoded(),
            &[42, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 1, 0, 1, b'k', 1, b'v'][..]
        );
    }

    #[test]
    fn encode_decode_round_trip() {
        let mut b = WriteBatch::new();
        b.put_in(0, b"k1", b"v1");
        b.delete_in(3, b"k2");
        b.merge_in(7, b"", b"op");
        b.set_sequence(42);
        let d = WriteBatch::decode(b.encoded(), std::path::Path::new("x"), 0).unwrap();
        assert_eq!(d.sequence(), 42);
        let entries: Vec<_> = d.iter().map(|e| e.unwrap()).collect();
        assert_eq!(entries.len(), 3);
        assert_eq!(entries[1].kind, ValueKind::Delete);
        assert_eq!(entries[1].tree, 3);
        assert_eq!(entries[2].value, b"op");
    }

    #[test]
    fn truncated_batch_is_corruption() {
        let mut b = WriteBatch::new();
        b.put_in(0, b"key", b"value");
        let enc = b.encoded();
        for cut in 0..enc.len() {
            let r = WriteBatch::decode(&enc[..cut], std::path::Path::new("wal"), 9);
            assert!(r.is_err_and(|e| e.is_corruption()), "cut at {cut}");
        }
    }
}
