//! Version edits: the records of the manifest (`docs/format/manifest.md`).
//!
//! An edit is a list of tagged fields (a varint tag, then the field) closed by the end tag 0.
//! Scalar fields appear at most once; list fields repeat their tag once per item. Decoding
//! checks every length, rejects unknown tags and requires the end tag, so a damaged or
//! truncated edit is reported, never misread.

use crate::coding::{put_length_prefixed, put_varint32, put_varint64, Decoder};
use crate::key::{SeqNo, TreeId, SEQ_MAX};
use crate::version::FileMetaData;
use crate::{Error, Result};
use std::path::Path;

/// Tags of the manifest format. The numbers are part of the on-disk format.
/// Closes every edit; nothing may follow it.
pub const TAG_END: u32 = 0;
pub const TAG_LOG_NUMBER: u32 = 1;
pub const TAG_NEXT_FILE_NUMBER: u32 = 2;
pub const TAG_LAST_SEQUENCE: u32 = 3;
pub const TAG_NEXT_TREE_ID: u32 = 4;
pub const TAG_TREE_CREATED: u32 = 5;
pub const TAG_TREE_DROPPED: u32 = 6;
pub const TAG_COMPACTION_POINTER: u32 = 7;
pub const TAG_DELETED_FILE: u32 = 8;
pub const TAG_NEW_FILE: u32 = 9;

/// A change to the set of files and trees, as recorded in one manifest record.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct VersionEdit {
    /// WAL files numbered below this are fully persisted in SSTables.
    pub log_number: Option<u64>,
    pub next_file_number: Option<u64>,
    pub last_sequence: Option<SeqNo>,
    pub next_tree_id: Option<TreeId>,
    pub trees_created: Vec<(TreeId, String)>,
    pub trees_dropped: Vec<TreeId>,
    /// (tree, level, internal key): where the next compaction of that level starts.
    pub compaction_pointers: Vec<(TreeId, usize, Vec<u8>)>,
    /// (tree, level, file number).
    pub deleted_files: Vec<(TreeId, usize, u64)>,
    pub new_files: Vec<(TreeId, usize, NewFile)>,
}

/// The manifest's description of an SSTable: the persistent part of `FileMetaData`.
#[derive(Debug, Clone, PartialEq)]
pub struct NewFile {
    pub number: u64,
    pub file_bytes: u64,
    /// Smallest and largest internal keys in the file.
    pub smallest: Vec<u8>,
    pub largest: Vec<u8>,
    pub seq_min: SeqNo,
    pub seq_max: SeqNo,
    pub entries: u64,
    pub deletions: u64,
    /// Block-property-collector names and their table-level values, pairwise.
    pub property_names: Vec<String>,
    pub property_values: Vec<Vec<u8>>,
}

impl NewFile {
    pub fn to_meta(&self) -> FileMetaData {
        FileMetaData::new(
            self.number,
            self.file_bytes,
            self.smallest.clone(),
            self.largest.clone(),
            self.seq_min,
            self.seq_max,
            self.entries,
            self.deletions,
            self.property_names.clone(),
            self.property_values.clone(),
        )
    }

    pub fn from_meta(meta: &FileMetaData) -> NewFile {
        NewFile {
            number: meta.number,
            file_bytes: meta.file_bytes,
            smallest: meta.smallest.clone(),
            largest: meta.largest.clone(),
            seq_min: meta.seq_min,
            seq_max: meta.seq_max,
            entries: meta.entries,
            deletions: meta.deletions,
            property_names: meta.property_names.clone(),
            property_values: meta.property_values.clone(),
        }
    }
}

/// Levels are stored as varint32; the version set checks them against `levels_max`.
fn put_level(dst: &mut Vec<u8>, level: usize) {
    put_varint32(dst, u32::try_from(level).unwrap_or(u32::MAX));
}

impl VersionEdit {
    pub fn encode(&self) -> Vec<u8> {
        let mut dst = Vec::new();
        if let Some(v) = self.log_number {
            put_varint32(&mut dst, TAG_LOG_NUMBER);
            put_varint64(&mut dst, v);
        }
        if let Some(v) = self.next_file_number {
            put_varint32(&mut dst, TAG_NEXT_FILE_NUMBER);
            put_varint64(&mut dst, v);
        }
        if let Some(v) = self.last_sequence {
            put_varint32(&mut dst, TAG_LAST_SEQUENCE);
            put_varint64(&mut dst, v);
        }
        if let Some(v) = self.next_tree_id {
            put_varint32(&mut dst, TAG_NEXT_TREE_ID);
            put_varint32(&mut dst, v);
        }
        for (tree, name) in &self.trees_created {
            put_varint32(&mut dst, TAG_TREE_CREATED);
            put_varint32(&mut dst, *tree);
            put_length_prefixed(&mut dst, name.as_bytes());
        }
        for tree in &self.trees_dropped {
            put_varint32(&mut dst, TAG_TREE_DROPPED);
            put_varint32(&mut dst, *tree);
        }
        for (tree, level, key) in &self.compaction_pointers {
            put_varint32(&mut dst, TAG_COMPACTION_POINTER);
            put_varint32(&mut dst, *tree);
            put_level(&mut dst, *level);
            put_length_prefixed(&mut dst, key);
        }
        for (tree, level, number) in &self.deleted_files {
            put_varint32(&mut dst, TAG_DELETED_FILE);
            put_varint32(&mut dst, *tree);
            put_level(&mut dst, *level);
            put_varint64(&mut dst, *number);
        }
        for (tree, level, file) in &self.new_files {
            put_varint32(&mut dst, TAG_NEW_FILE);
            put_varint32(&mut dst, *tree);
            put_level(&mut dst, *level);
            put_varint64(&mut dst, file.number);
            put_varint64(&mut dst, file.file_bytes);
            put_length_prefixed(&mut dst, &file.smallest);
            put_length_prefixed(&mut dst, &file.largest);
            put_varint64(&mut dst, file.seq_min);
            put_varint64(&mut dst, file.seq_max);
            put_varint64(&mut dst, file.entries);
            put_varint64(&mut dst, file.deletions);
            debug_assert_eq!(file.property_names.len(), file.property_values.len());
            let pairs = file.property_names.len().min(file.property_values.len());
            put_varint32(&mut dst, u32::try_from(pairs).unwrap_or(u32::MAX));
            for (name, value) in file.property_names.iter().zip(&file.property_values) {
                put_length_prefixed(&mut dst, name.as_bytes());
                put_length_prefixed(&mut dst, value);
            }
        }
        put_varint32(&mut dst, TAG_END);
        dst
    }

    /// Decodes one manifest record. `file` and `offset` (the record's offset in the manifest)
    /// name it in the corruption error; the message gives the byte inside the edit.
    pub fn decode(bytes: &[u8], file: &Path, offset: u64) -> Result<VersionEdit> {
        let mut decoder = Decoder::new(bytes);
        let mut edit = VersionEdit::default();
        loop {
            let field_at = decoder.position();
            let corrupt = |message: String| {
                Error::corruption(
                    file,
                    offset,
                    format!("version edit: {message} (field at byte {field_at} of the edit)"),
                )
            };
            if decoder.is_empty() {
                return Err(corrupt("missing end tag (edit truncated)".to_owned()));
            }
            if decode_field(&mut decoder, &mut edit).map_err(corrupt)? == Field::End {
                break;
            }
        }
        if !decoder.is_empty() {
            return Err(Error::corruption(
                file,
                offset,
                format!(
                    "version edit: {} bytes after the end tag",
                    decoder.remaining().len()
                ),
            ));
        }
        Ok(edit)
    }
}

#[derive(Debug, PartialEq, Eq)]
enum Field {
    Decoded,
    End,
}

/// Decodes one tagged field into `edit`; the error is a message.
fn decode_field(decoder: &mut Decoder<'_>, edit: &mut VersionEdit) -> Result<Field, String> {
    fn set_once<T>(slot: &mut Option<T>, value: T, name: &str) -> Result<(), String> {
        if slot.is_some() {
            return Err(format!("{name} appears twice"));
        }
        *slot = Some(value);
        Ok(())
    }
    fn sequence(value: u64, name: &str) -> Result<SeqNo, String> {
        if value > SEQ_MAX {
            return Err(format!("{name} {value} exceeds the 56-bit sequence space"));
        }
        Ok(value)
    }
    let truncated = |what: &str| format!("truncated or overlong {what}");
    let tree = |d: &mut Decoder<'_>| d.varint32().ok_or_else(|| truncated("tree id"));
    let level = |d: &mut Decoder<'_>| {
        d.varint32()
            .map(|l| l as usize)
            .ok_or_else(|| truncated("level"))
    };
    let number = |d: &mut Decoder<'_>, what: &str| d.varint64().ok_or_else(|| truncated(what));
    let bytes = |d: &mut Decoder<'_>, what: &str| {
        d.length_prefixed()
            .map(<[u8]>::to_vec)
            .ok_or_else(|| truncated(what))
    };
    let text = |d: &mut Decoder<'_>, what: &str| {
        let raw = d.length_prefixed().ok_or_else(|| truncated(what))?;
        String::from_utf8(raw.to_vec()).map_err(|_| format!("{what} is not valid UTF-8"))
    };

    let tag = decoder.varint32().ok_or_else(|| truncated("tag"))?;
    match tag {
        TAG_END => return Ok(Field::End),
        TAG_LOG_NUMBER => {
            let v = number(decoder, "log number")?;
            set_once(&mut edit.log_number, v, "log number")
        }
        TAG_NEXT_FILE_NUMBER => {
            let v = number(decoder, "next file number")?;
            set_once(&mut edit.next_file_number, v, "next file number")
        }
        TAG_LAST_SEQUENCE => {
            let v = sequence(number(decoder, "last sequence")?, "last sequence")?;
            set_once(&mut edit.last_sequence, v, "last sequence")
        }
        TAG_NEXT_TREE_ID => {
            let v = tree(decoder)?;
            set_once(&mut edit.next_tree_id, v, "next tree id")
        }
        TAG_TREE_CREATED => {
            let id = tree(decoder)?;
            let name = text(decoder, "tree name")?;
            edit.trees_created.push((id, name));
            Ok(())
        }
        TAG_TREE_DROPPED => {
            let id = tree(decoder)?;
            edit.trees_dropped.push(id);
            Ok(())
        }
        TAG_COMPACTION_POINTER => {
            let id = tree(decoder)?;
            let lvl = level(decoder)?;
            let key = bytes(decoder, "compaction pointer key")?;
            edit.compaction_pointers.push((id, lvl, key));
            Ok(())
        }
        TAG_DELETED_FILE => {
            let id = tree(decoder)?;
            let lvl = level(decoder)?;
            let file_number = number(decoder, "deleted file number")?;
            edit.deleted_files.push((id, lvl, file_number));
            Ok(())
        }
        TAG_NEW_FILE => {
            let id = tree(decoder)?;
            let lvl = level(decoder)?;
            let file_number = number(decoder, "file number")?;
            let file_bytes = number(decoder, "file size")?;
            let smallest = bytes(decoder, "smallest key")?;
            let largest = bytes(decoder, "largest key")?;
            let seq_min = sequence(number(decoder, "smallest sequence")?, "smallest sequence")?;
            let seq_max = sequence(number(decoder, "largest sequence")?, "largest sequence")?;
            let entries = number(decoder, "entry count")?;
            let deletions = number(decoder, "deletion count")?;
            let pairs = decoder
                .varint32()
                .ok_or_else(|| truncated("property count"))?;
            // No preallocation from `pairs`: a damaged count must not allocate gigabytes.
            let mut property_names = Vec::new();
            let mut property_values = Vec::new();
            for _ in 0..pairs {
                property_names.push(text(decoder, "property name")?);
                property_values.push(bytes(decoder, "property value")?);
            }
            edit.new_files.push((
                id,
                lvl,
                NewFile {
                    number: file_number,
                    file_bytes,
                    smallest,
                    largest,
                    seq_min,
                    seq_max,
                    entries,
                    deletions,
                    property_names,
                    property_values,
                },
            ));
            Ok(())
        }
        unknown => return Err(format!("unknown tag {unknown}")),
    }?;
    Ok(Field::Decoded)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};

    fn random_bytes(rng: &mut StdRng, len_max: usize) -> Vec<u8> {
        let len = rng.gen_range(0..=len_max);
        (0..len).map(|_| rng.gen()).collect()
    }

    fn random_name(rng: &mut StdRng) -> String {
        let len = rng.gen_range(0..12);
        // Include multi-byte characters to exercise UTF-8 handling.
        (0..len)
            .map(|_| ['a', 'z', '_', 'é', '木', '🦀'][rng.gen_range(0..6)])
            .collect()
    }

    fn big_u64(rng: &mut StdRng) -> u64 {
        // Varints of every length.
        rng.gen::<u64>() >> rng.gen_range(0..64)
    }

    fn random_edit(rng: &mut StdRng) -> VersionEdit {
        let mut edit = VersionEdit::default();
        if rng.gen_bool(0.5) {
            edit.log_number = Some(big_u64(rng));
        }
        if rng.gen_bool(0.5) {
            edit.next_file_number = Some(big_u64(rng));
        }
        if rng.gen_bool(0.5) {
            edit.last_sequence = Some(big_u64(rng) & SEQ_MAX);
        }
        if rng.gen_bool(0.5) {
            edit.next_tree_id = Some(rng.gen());
        }
        for _ in 0..rng.gen_range(0..3) {
            edit.trees_created.push((rng.gen(), random_name(rng)));
        }
        for _ in 0..rng.gen_range(0..3) {
            edit.trees_dropped.push(rng.gen());
        }
        for _ in 0..rng.gen_range(0..3) {
            edit.compaction_pointers
                .push((rng.gen(), rng.gen_range(0..7), random_bytes(rng, 30)));
        }
        for _ in 0..rng.gen_range(0..4) {
            edit.deleted_files
                .push((rng.gen(), rng.gen_range(0..7), big_u64(rng)));
        }
        for _ in 0..rng.gen_range(0..4) {
            let properties = rng.gen_range(0..3);
            let seq_a = big_u64(rng) & SEQ_MAX;
            let seq_b = big_u64(rng) & SEQ_MAX;
            let file = NewFile {
                number: big_u64(rng),
                file_bytes: big_u64(rng),
                smallest: random_bytes(rng, 40),
                largest: random_bytes(rng, 40),
                seq_min: seq_a.min(seq_b),
                seq_max: seq_a.max(seq_b),
                entries: big_u64(rng),
                deletions: big_u64(rng),
                property_names: (0..properties).map(|_| random_name(rng)).collect(),
                property_values: (0..properties).map(|_| random_bytes(rng, 20)).collect(),
            };
            edit.new_files.push((rng.gen(), rng.gen_range(0..7), file));
        }
        edit
    }

    const PATH: &str = "MANIFEST-000005";

    #[test]
    fn random_edits_round_trip() {
        for seed in 0..500u64 {
            let mut rng = StdRng::seed_from_u64(seed);
            let edit = random_edit(&mut rng);
            let encoded = edit.encode();
            let decoded = VersionEdit::decode(&encoded, Path::new(PATH), 77)
                .unwrap_or_else(|e| panic!("seed {seed}: {e}"));
            assert_eq!(decoded, edit, "seed {seed}");
        }
    }

    #[test]
    fn every_truncation_is_corruption() {
        for seed in 0..100u64 {
            let mut rng = StdRng::seed_from_u64(seed);
            let encoded = random_edit(&mut rng).encode();
            for cut in 0..encoded.len() {
                match VersionEdit::decode(&encoded[..cut], Path::new(PATH), 77) {
                    Err(Error::Corruption { file, offset, .. }) => {
                        assert_eq!((file.as_path(), offset), (Path::new(PATH), 77));
                    }
                    other => panic!("seed {seed} cut {cut}: expected corruption, got {other:?}"),
                }
            }
            // Bytes after the end tag are damage too.
            let mut longer = encoded.clone();
            longer.push(TAG_LOG_NUMBER as u8);
            assert!(VersionEdit::decode(&longer, Path::new(PATH), 0).is_err());
        }
    }

    #[test]
    fn rejects_unknown_tags_bad_utf8_duplicates_and_big_sequences() {
        let path = Path::new(PATH);
        let is_corruption =
            |bytes: &[u8]| VersionEdit::decode(bytes, path, 0).is_err_and(|e| e.is_corruption());
        assert!(is_corruption(&[99, 0]));
        assert!(is_corruption(&[
            TAG_TREE_CREATED as u8,
            1,
            2,
            0xff,
            0xfe,
            0
        ]));
        assert!(is_corruption(&[
            TAG_LOG_NUMBER as u8,
            5,
            TAG_LOG_NUMBER as u8,
            6,
            0
        ]));
        let mut big = vec![TAG_LAST_SEQUENCE as u8];
        put_varint64(&mut big, SEQ_MAX + 1);
        big.push(0);
        assert!(is_corruption(&big));
        assert!(is_corruption(&[]));
        assert_eq!(VersionEdit::default().encode(), vec![0]);
        assert_eq!(
            VersionEdit::decode(&[0], path, 0).unwrap(),
            VersionEdit::default()
        );
        // The exact bytes of a small edit, as documented in docs/format/manifest.md.
        let edit = VersionEdit {
            log_number: Some(7),
            trees_created: vec![(1, "idx".to_owned())],
            deleted_files: vec![(1, 2, 300)],
            ..VersionEdit::default()
        };
        assert_eq!(
            edit.encode(),
            vec![1, 7, 5, 1, 3, b'i', b'd', b'x', 8, 1, 2, 0xac, 0x02, 0]
        );
    }

    #[test]
    fn random_garbage_never_panics() {
        let mut rng = StdRng::seed_from_u64(2024);
        let mut decoded_ok = 0;
        for _ in 0..20_000 {
            let mut bytes = random_bytes(&mut rng, 64);
            // Bias the first byte toward real tags so decoding gets past the tag often.
            if let Some(first) = bytes.first_mut() {
                *first = rng.gen_range(0..11);
            }
            if VersionEdit::decode(&bytes, Path::new(PATH), 3).is_ok() {
                decoded_ok += 1;
            }
        }
        // Also mutate valid encodings, which reach deeper into the field decoders.
        for seed in 0..2_000u64 {
            let mut rng = StdRng::seed_from_u64(seed);
            let mut encoded = random_edit(&mut rng).encode();
            if encoded.is_empty() {
                continue;
            }
            let at = rng.gen_range(0..encoded.len());
            encoded[at] = rng.gen();
            if let Ok(edit) = VersionEdit::decode(&encoded, Path::new(PATH), 3) {
                let _ = edit.encode();
            }
        }
        assert!(decoded_ok < 20_000);
    }

    #[test]
    fn new_file_meta_round_trip() {
        let file = NewFile {
            number: 12,
            file_bytes: 3 << 20,
            smallest: b"apple\x01\0\0\0\0\0\0\0".to_vec(),
            largest: b"pear\x01\0\0\0\0\0\0\0".to_vec(),
            seq_min: 1,
            seq_max: 90,
            entries: 1000,
            deletions: 7,
            property_names: vec!["p".to_owned()],
            property_values: vec![vec![9]],
        };
        let meta = file.to_meta();
        assert_eq!(meta.number, 12);
        assert_eq!(meta.smallest_user_key(), b"apple");
        assert_eq!(NewFile::from_meta(&meta), file);
    }
}
