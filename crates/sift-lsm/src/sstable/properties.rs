//! Table properties: the statistics and collector outputs stored in the `sift.properties`
//! meta block, as a block of `name → value` entries in bytewise name order.

use super::block::BlockBuilder;
use crate::coding::{put_length_prefixed, put_varint64, Decoder};
use crate::extension::Properties;
use crate::key::SeqNo;
use crate::options::Compression;
use std::collections::BTreeMap;

pub const PROPERTY_COLLECTOR_NAMES: &str = "sift.collector.names";
pub const PROPERTY_COLLECTOR_TABLE_PROPERTIES: &str = "sift.collector.table_properties";
pub const PROPERTY_COMPRESSION: &str = "sift.compression";
pub const PROPERTY_DATA_BLOCKS: &str = "sift.data_blocks";
pub const PROPERTY_DELETIONS: &str = "sift.deletions";
pub const PROPERTY_ENTRIES: &str = "sift.entries";
pub const PROPERTY_BLOOM_BITS_PER_KEY: &str = "sift.filter.bits_per_key";
pub const PROPERTY_FORMAT_VERSION: &str = "sift.format_version";
pub const PROPERTY_LARGEST_KEY: &str = "sift.largest_key";
pub const PROPERTY_MERGES: &str = "sift.merges";
pub const PROPERTY_RAW_KEY_BYTES: &str = "sift.raw_key_bytes";
pub const PROPERTY_RAW_VALUE_BYTES: &str = "sift.raw_value_bytes";
pub const PROPERTY_SEQ_MAX: &str = "sift.seq_max";
pub const PROPERTY_SEQ_MIN: &str = "sift.seq_min";
pub const PROPERTY_SMALLEST_KEY: &str = "sift.smallest_key";

/// What the properties block of a table records.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TableProperties {
    pub entries: u64,
    pub deletions: u64,
    pub merges: u64,
    pub data_blocks: u64,
    /// Sum of internal key lengths and of value lengths, before prefix compression.
    pub raw_key_bytes: u64,
    pub raw_value_bytes: u64,
    /// Smallest and largest internal keys (empty for an empty table).
    pub smallest: Vec<u8>,
    pub largest: Vec<u8>,
    pub seq_min: SeqNo,
    pub seq_max: SeqNo,
    /// The compression the table was written with (blocks that did not shrink are stored raw).
    pub compression: Compression,
    pub format_version: u32,
    pub bloom_bits_per_key: u32,
    /// Collector names in table order; per-block properties in the index follow this order.
    pub collector_names: Vec<String>,
    /// Each collector's table property, in `collector_names` order.
    #[allow(clippy::struct_field_names)]
    // the collectors' table properties: the name says whose
    pub collector_table_properties: Vec<Vec<u8>>,
}

impl TableProperties {
    /// The collectors' table-level properties, by collector name.
    pub fn collector_properties(&self) -> Properties<'_> {
        Properties::new(&self.collector_names, &self.collector_table_properties)
    }

    /// Encodes the properties block (a block with restart interval 1, uncompressed).
    pub fn encode(&self) -> Vec<u8> {
        let mut map: BTreeMap<&str, Vec<u8>> = BTreeMap::new();
        let varint = |v: u64| {
            let mut out = Vec::new();
            put_varint64(&mut out, v);
            out
        };
        let mut names = Vec::new();
        put_varint64(&mut names, self.collector_names.len() as u64);
        for name in &self.collector_names {
            put_length_prefixed(&mut names, name.as_bytes());
        }
        let mut values = Vec::new();
        put_varint64(&mut values, self.collector_table_properties.len() as u64);
        for value in &self.collector_table_properties {
            put_length_prefixed(&mut values, value);
        }
        map.insert(PROPERTY_COLLECTOR_NAMES, names);
        map.insert(PROPERTY_COLLECTOR_TABLE_PROPERTIES, values);
        map.insert(PROPERTY_COMPRESSION, varint(self.compression as u64));
        map.insert(PROPERTY_DATA_BLOCKS, varint(self.data_blocks));
        map.insert(PROPERTY_DELETIONS, varint(self.deletions));
        map.insert(PROPERTY_ENTRIES, varint(self.entries));
        map.insert(
            PROPERTY_BLOOM_BITS_PER_KEY,
            varint(u64::from(self.bloom_bits_per_key)),
        );
        map.insert(
            PROPERTY_FORMAT_VERSION,
            varint(u64::from(self.format_version)),
        );
        map.insert(PROPERTY_LARGEST_KEY, self.largest.clone());
        map.insert(PROPERTY_MERGES, varint(self.merges));
        map.insert(PROPERTY_RAW_KEY_BYTES, varint(self.raw_key_bytes));
        map.insert(PROPERTY_RAW_VALUE_BYTES, varint(self.raw_value_bytes));
        map.insert(PROPERTY_SEQ_MAX, varint(self.seq_max));
        map.insert(PROPERTY_SEQ_MIN, varint(self.seq_min));
        map.insert(PROPERTY_SMALLEST_KEY, self.smallest.clone());
        let mut block = BlockBuilder::new(1);
        for (name, value) in &map {
            block.add(name.as_bytes(), value);
        }
        block.finish().to_vec()
    }

    /// Decodes the entries of a properties block. Unknown names are ignored (written by a
    /// newer minor revision); missing or malformed required ones are errors.
    pub fn decode(entries: &[(Vec<u8>, Vec<u8>)]) -> Result<TableProperties, String> {
        let find = |name: &str| -> Result<&[u8], String> {
            entries
                .iter()
                .find(|(k, _)| k.as_slice() == name.as_bytes())
                .map(|(_, v)| v.as_slice())
                .ok_or_else(|| format!("property {name} missing"))
        };
        let number = |name: &str| -> Result<u64, String> {
            let bytes = find(name)?;
            let mut decoder = Decoder::new(bytes);
            match decoder.varint64() {
                Some(v) if decoder.is_empty() => Ok(v),
                _ => Err(format!("property {name} is not a varint")),
            }
        };
        let small = |name: &str| -> Result<u32, String> {
            u32::try_from(number(name)?).map_err(|_| format!("property {name} out of range"))
        };
        let compression_code = number(PROPERTY_COMPRESSION)?;
        let compression = u8::try_from(compression_code)
            .ok()
            .and_then(Compression::from_u8)
            .ok_or_else(|| format!("unknown compression {compression_code} in properties"))?;

        let list = |name: &str| -> Result<Vec<Vec<u8>>, String> {
            let mut decoder = Decoder::new(find(name)?);
            let bad = || format!("property {name} is malformed");
            let count = decoder.varint64().ok_or_else(bad)?;
            // Each item takes at least one byte: a count beyond the bytes left is damage.
            if count > decoder.remaining().len() as u64 {
                return Err(bad());
            }
            let mut out = Vec::with_capacity(count as usize);
            for _ in 0..count {
                out.push(decoder.length_prefixed().ok_or_else(bad)?.to_vec());
            }
            if !decoder.is_empty() {
                return Err(bad());
            }
            Ok(out)
        };
        let collector_names = list(PROPERTY_COLLECTOR_NAMES)?
            .into_iter()
            .map(|n| String::from_utf8(n).map_err(|_| "collector name is not UTF-8".to_owned()))
            .collect::<Result<Vec<_>, _>>()?;
        let collector_table_properties = list(PROPERTY_COLLECTOR_TABLE_PROPERTIES)?;
        if collector_names.len() != collector_table_properties.len() {
            return Err(format!(
                "{} collector names but {} collector table properties",
                collector_names.len(),
                collector_table_properties.len()
            ));
        }
        Ok(TableProperties {
            entries: number(PROPERTY_ENTRIES)?,
            deletions: number(PROPERTY_DELETIONS)?,
            merges: number(PROPERTY_MERGES)?,
            data_blocks: number(PROPERTY_DATA_BLOCKS)?,
            raw_key_bytes: number(PROPERTY_RAW_KEY_BYTES)?,
            raw_value_bytes: number(PROPERTY_RAW_VALUE_BYTES)?,
            smallest: find(PROPERTY_SMALLEST_KEY)?.to_vec(),
            largest: find(PROPERTY_LARGEST_KEY)?.to_vec(),
            seq_min: number(PROPERTY_SEQ_MIN)?,
            seq_max: number(PROPERTY_SEQ_MAX)?,
            compression,
            format_version: small(PROPERTY_FORMAT_VERSION)?,
            bloom_bits_per_key: small(PROPERTY_BLOOM_BITS_PER_KEY)?,
            collector_names,
            collector_table_properties,
        })
    }
}
