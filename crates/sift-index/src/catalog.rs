//! The persisted catalog: collections and their indexes, stored as JSON records in the engine
//! tree `sift.catalog` (layout: `docs/format/index-encodings.md`, section "Catalog").

use crate::conversion::ValueConversion;
use crate::error::{IndexError, Result};
use crate::value::AttrType;
use serde::{Deserialize, Serialize};
use sift_lsm::SeqNo;
use std::fmt;
use std::str::FromStr;
use std::sync::Arc;

/// Name of the engine tree holding the catalog.
pub const CATALOG_TREE: &str = "sift.catalog";
/// Every engine tree the index layer creates starts with this.
pub const TREE_PREFIX: &str = "sift.";
/// Catalog key of the id counter (collections and indexes share it).
pub const NEXT_ID_KEY: &[u8] = b"next_id";
/// Longest collection or index name, in bytes.
pub const MAX_NAME_BYTES: usize = 128;

/// How an index stores its entries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum IndexKind {
    /// Key `value ‖ pk`, empty value.
    Composite,
    /// Key `value`, value = posting list, read-modify-written on every write.
    Eager,
    /// Key `value`, value = posting-list fragments combined by a merge operator.
    Lazy,
    /// In memory only: loaded at open from the snapshot of a clean close, else rebuilt from the
    /// collection.
    Memory,
    /// Sorted secondary blocks inside every SSTable of the primary tree, no global index:
    /// queries consult every live table (`next/`).
    SstLocal,
    /// NEXT: the per-table secondary blocks plus an in-memory global index over them
    /// (`next/`).
    Next,
    /// No index tree: bloom filters and zone maps in the primary tree's SSTables (LevelDB++
    /// Embedded Index; see `embedded/mod.rs`).
    Embedded,
}

impl IndexKind {
    /// Why asynchronous maintenance does not apply to this kind, if it does not.
    pub(crate) fn async_unsupported(self) -> Option<&'static str> {
        match self {
            IndexKind::Composite => None,
            _ => Some(
                "asynchronous maintenance (async-simple, async-session) is implemented for composite indexes only",
            ),
        }
    }

    /// `next` and `sst-local`: created online (writes go on while older tables get their
    /// secondary blocks), with their own progress reports.
    pub fn builds_online(self) -> bool {
        matches!(self, IndexKind::SstLocal | IndexKind::Next)
    }

    /// The name used in specs, the CLI and messages.
    pub fn name(self) -> &'static str {
        match self {
            IndexKind::Composite => "composite",
            IndexKind::Eager => "eager",
            IndexKind::Lazy => "lazy",
            IndexKind::Memory => "memory",
            IndexKind::SstLocal => "sst-local",
            IndexKind::Next => "next",
            IndexKind::Embedded => "embedded",
        }
    }

    /// The maintenance used when the spec does not name one.
    pub fn default_maintenance(self) -> Maintenance {
        match self {
            IndexKind::Eager | IndexKind::Memory => Maintenance::SyncFull,
            // Embedded: nothing is written at write time; queries validate every candidate.
            IndexKind::Composite
            | IndexKind::Lazy
            | IndexKind::SstLocal
            | IndexKind::Next
            | IndexKind::Embedded => Maintenance::SyncInsert,
        }
    }

    /// Whether the index has its own engine tree (`sst-local` and `next` live inside the
    /// primary tree's tables, `memory` in memory).
    pub fn has_tree(self) -> bool {
        matches!(
            self,
            IndexKind::Composite | IndexKind::Eager | IndexKind::Lazy
        )
    }
}

impl fmt::Display for IndexKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for IndexKind {
    type Err = String;
    fn from_str(text: &str) -> std::result::Result<Self, String> {
        match text {
            "composite" => Ok(IndexKind::Composite),
            "eager" => Ok(IndexKind::Eager),
            "lazy" => Ok(IndexKind::Lazy),
            "memory" => Ok(IndexKind::Memory),
            "sst-local" => Ok(IndexKind::SstLocal),
            "next" => Ok(IndexKind::Next),
            "embedded" => Ok(IndexKind::Embedded),
            other => Err(format!(
                "unknown index kind {other:?} (expected composite, eager, lazy, memory, \
                 embedded, sst-local or next)"
            )),
        }
    }
}

/// When stale index entries are removed (Diff-Index vocabulary).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Maintenance {
    /// At write, read the previous version and remove its entry in the same batch.
    SyncFull,
    /// Never read at write; queries validate every candidate against the primary.
    SyncInsert,
    /// Never read at write (blind replaces and deletes); entries carry their version's
    /// sequence number and the primary's flushes and compactions emit DELETEs for the versions
    /// they drop (Vinyl). Non-unique composite indexes only; see `deferred/`.
    Deferred,
    /// The write only queues the index work; background workers do the sync-full work later
    /// (`async_index`). Queries validate candidates; results may omit recent writes.
    AsyncSimple,
    /// `AsyncSimple`, and writes made through a `Session` are also kept in the session's
    /// overlay so the session's queries see them (read your writes).
    AsyncSession,
}

impl Maintenance {
    /// The name used in specs, the CLI and messages.
    pub fn name(self) -> &'static str {
        match self {
            Maintenance::SyncFull => "sync-full",
            Maintenance::SyncInsert => "sync-insert",
            Maintenance::Deferred => "deferred",
            Maintenance::AsyncSimple => "async-simple",
            Maintenance::AsyncSession => "async-session",
        }
    }

    /// Whether background workers maintain the index (`async_index`).
    pub fn is_async(self) -> bool {
        matches!(self, Maintenance::AsyncSimple | Maintenance::AsyncSession)
    }
}

impl fmt::Display for Maintenance {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Maintenance {
    type Err = String;
    fn from_str(text: &str) -> std::result::Result<Self, String> {
        match text {
            "sync-full" => Ok(Maintenance::SyncFull),
            "sync-insert" => Ok(Maintenance::SyncInsert),
            "deferred" => Ok(Maintenance::Deferred),
            "async-simple" => Ok(Maintenance::AsyncSimple),
            "async-session" => Ok(Maintenance::AsyncSession),
            other => Err(format!(
                "unknown maintenance {other:?} (expected sync-full, sync-insert, deferred, \
                 async-simple or async-session)"
            )),
        }
    }
}

/// Whether an index may serve queries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum IndexState {
    /// Back-fill not finished; never used by queries. Restarted at open after a crash.
    Building,
    /// Back-filled and in use by writes and queries.
    Ready,
}

/// What `create_index` is asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IndexSpec {
    /// The index's name, unique in its collection.
    pub name: String,
    /// Attribute path (`user.id` or `/user/id`).
    pub path: String,
    /// The attribute's type.
    pub attr_type: AttrType,
    /// The index kind.
    pub kind: IndexKind,
    /// `None`: the kind's default (`IndexKind::default_maintenance`).
    pub maintenance: Option<Maintenance>,
    /// sync-insert only: queries delete the stale entries they meet.
    pub read_repair: bool,
    /// `next` / `sst-local`: δ of the value-aware split (`None`: blocks are cut by size only).
    pub split_delta: Option<SplitDelta>,
    /// `next` / `sst-local`: how queries validate candidates (`None`: GetLite).
    pub validation: Option<Validation>,
    /// `embedded` only: bits per value of the per-block bloom filters (`None`: 10).
    pub bloom_bits_per_key: Option<u32>,
    /// No two live documents may share a value (composite or eager, sync-full only).
    pub unique: bool,
    /// Only documents whose primary key starts with one of these are indexed (a partial
    /// index, as RediSearch's `PREFIX`); empty: every document.
    pub key_prefixes: Vec<String>,
    /// How the attribute's JSON value becomes the index value.
    pub conversion: ValueConversion,
}

impl IndexSpec {
    /// The maintenance this spec asks for (or its kind's default), once the combination of
    /// kind, maintenance and options is checked; `Err` says what is wrong.
    pub fn checked_maintenance(&self) -> std::result::Result<Maintenance, String> {
        let maintenance = self
            .maintenance
            .unwrap_or_else(|| self.kind.default_maintenance());
        let invalid = |reason: &str| reason.to_string();
        match (self.kind, maintenance) {
            (IndexKind::Eager, Maintenance::SyncInsert) => {
                return Err(invalid(
                    "an eager index is maintained sync-full (its posting lists are read-modify-written)",
                ))
            }
            (IndexKind::Memory, Maintenance::SyncInsert) => {
                return Err(invalid("a memory index is always exact (sync-full)"))
            }
            (IndexKind::SstLocal | IndexKind::Next, Maintenance::SyncFull) => {
                return Err(invalid(
                    "sst-local and next indexes are maintained sync-insert (queries validate)",
                ))
            }
            (IndexKind::Embedded, Maintenance::SyncFull) => {
                return Err(invalid(
                    "an embedded index writes nothing at write time, so there is nothing to \
                     remove (sync-full); queries validate every candidate (sync-insert)",
                ))
            }
            (
                IndexKind::Eager
                | IndexKind::Lazy
                | IndexKind::Memory
                | IndexKind::SstLocal
                | IndexKind::Next
                | IndexKind::Embedded,
                Maintenance::Deferred,
            ) => {
                return Err(invalid(
                    "deferred maintenance applies to composite indexes only (its DELETEs cancel entries that carry their version's sequence number)",
                ))
            }
            _ => {}
        }
        self.check_next_options()?;
        if let Some(required) = self.conversion.required_type() {
            if required != self.attr_type {
                return Err(format!(
                    "this value conversion makes {required} values, but the index is declared {}",
                    self.attr_type
                ));
            }
        }
        if self.key_prefixes.iter().any(String::is_empty) {
            return Err(invalid(
                "a key prefix must not be empty (leave the prefixes out to index every document)",
            ));
        }
        match (self.kind, self.bloom_bits_per_key) {
            (IndexKind::Embedded, Some(bits)) if bits == 0 || bits > BLOOM_BITS_PER_KEY_MAX => {
                return Err(invalid(&format!(
                    "bloom bits per key must be 1 to {BLOOM_BITS_PER_KEY_MAX}, got {bits}"
                )))
            }
            (IndexKind::Embedded, _) | (_, None) => {}
            (_, Some(_)) => {
                return Err(invalid("bloom bits per key apply to embedded indexes only"))
            }
        }
        if self.read_repair && self.kind == IndexKind::Embedded {
            return Err(invalid(
                "an embedded index has no entries to repair (read repair does not apply)",
            ));
        }
        let maintenance = if self.unique && self.maintenance.is_none() {
            Maintenance::SyncFull
        } else {
            maintenance
        };
        if self.unique {
            if maintenance != Maintenance::SyncFull {
                return Err(invalid(
                    "a unique index must be sync-full: checking that no other live document has the value needs an exact index, read at write (deferred and insert-only maintenance leave stale entries that would make the check wrong)",
                ));
            }
            if !matches!(self.kind, IndexKind::Composite | IndexKind::Eager) {
                return Err(invalid(
                    "unique indexes are composite or eager (the kinds whose sync-full entries are read at write)",
                ));
            }
        }
        if let (true, Some(reason)) = (maintenance.is_async(), self.kind.async_unsupported()) {
            return Err(invalid(reason));
        }
        if self.read_repair && maintenance != Maintenance::SyncInsert {
            return Err(invalid(
                "read repair applies to sync-insert maintenance only",
            ));
        }
        Ok(maintenance)
    }

    /// `next` / `sst-local` options: split delta and validation only for them, no read repair.
    fn check_next_options(&self) -> std::result::Result<(), String> {
        let ours = matches!(self.kind, IndexKind::SstLocal | IndexKind::Next);
        if !ours {
            if self.split_delta.is_some() || self.validation.is_some() {
                return Err(format!(
                    "split delta and validation apply to sst-local and next indexes, not {}",
                    self.kind
                ));
            }
            return Ok(());
        }
        if self.read_repair {
            return Err(format!(
                "{} indexes have no entries to repair (they live in the primary tree's tables)",
                self.kind
            ));
        }
        if let (AttrType::String, Some(delta)) = (self.attr_type, self.split_delta) {
            if delta.get().fract() != 0.0 {
                return Err(format!(
                    "for a string attribute the split delta is a prefix length in bytes, not {delta}"
                ));
            }
        }
        Ok(())
    }
}

impl IndexSpec {
    /// An index named `name` on the attribute at `path`, with the kind's default maintenance and no options.
    pub fn new(name: &str, path: &str, attr_type: AttrType, kind: IndexKind) -> IndexSpec {
        IndexSpec {
            name: name.to_string(),
            path: path.to_string(),
            attr_type,
            kind,
            maintenance: None,
            read_repair: false,
            split_delta: None,
            validation: None,
            bloom_bits_per_key: None,
            unique: false,
            key_prefixes: Vec::new(),
            conversion: ValueConversion::Json,
        }
    }
    /// Indexes only the documents whose primary key starts with one of `prefixes`.
    pub fn with_key_prefixes(mut self, prefixes: Vec<String>) -> IndexSpec {
        self.key_prefixes = prefixes;
        self
    }
    /// How the attribute's JSON value becomes the index value (`ValueConversion`).
    pub fn with_conversion(mut self, conversion: ValueConversion) -> IndexSpec {
        self.conversion = conversion;
        self
    }
    /// Bloom filter bits per key (`embedded` only).
    pub fn with_bloom_bits_per_key(mut self, bits_per_key: u32) -> IndexSpec {
        self.bloom_bits_per_key = Some(bits_per_key);
        self
    }
    /// The maintenance scheme.
    pub fn with_maintenance(mut self, maintenance: Maintenance) -> IndexSpec {
        self.maintenance = Some(maintenance);
        self
    }
    /// Whether queries delete the stale entries they meet (`sync-insert` only).
    pub fn with_read_repair(mut self, read_repair: bool) -> IndexSpec {
        self.read_repair = read_repair;
        self
    }
    /// The split delta of secondary blocks (`next` / `sst-local` only).
    pub fn with_split_delta(mut self, delta: SplitDelta) -> IndexSpec {
        self.split_delta = Some(delta);
        self
    }
    /// How candidates are validated (`next` / `sst-local` only).
    pub fn with_validation(mut self, validation: Validation) -> IndexSpec {
        self.validation = Some(validation);
        self
    }
    /// Whether a value may belong to one live document only (composite or eager, `sync-full`).
    pub fn with_unique(mut self, unique: bool) -> IndexSpec {
        self.unique = unique;
        self
    }
}

/// A collection as stored in the catalog.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CollectionRecord {
    /// The collection's name.
    pub name: String,
    /// Its id (names its trees).
    pub id: u64,
    /// Path of the primary-key field.
    pub pk_path: String,
}

impl CollectionRecord {
    /// The engine tree holding the collection's documents.
    pub fn primary_tree_name(&self) -> String {
        format!("{TREE_PREFIX}c{}.docs", self.id)
    }
}

/// An index as stored in the catalog.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IndexRecord {
    /// The index's name.
    pub name: String,
    /// The collection's name.
    pub collection: String,
    /// Its id (names its tree).
    pub id: u64,
    /// The attribute path, as given.
    pub path: String,
    /// The attribute's type.
    pub attr_type: AttrType,
    /// The index kind.
    pub kind: IndexKind,
    /// The maintenance scheme.
    pub maintenance: Maintenance,
    /// Whether queries delete the stale entries they meet.
    pub read_repair: bool,
    /// Building or ready.
    pub state: IndexState,
    /// The attribute id this index's values carry in envelopes.
    pub attr_id: u32,
    /// Documents whose live version has a sequence number `<=` this were written before the
    /// index existed: their envelopes lack `attr_id`, so the value is taken from their JSON.
    pub first_seq: SeqNo,
    /// Engine tree of a stand-alone index (`None` for `memory`, `embedded`, `sst-local`, `next`).
    pub tree: Option<String>,
    /// `next` / `sst-local`: δ of the value-aware split.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub split_delta: Option<SplitDelta>,
    /// `next` / `sst-local`: validation strategy (`None`: GetLite).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub validation: Option<Validation>,
    /// `embedded` only: bits per value of the per-block bloom filters (`None`: the default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bloom_bits_per_key: Option<u32>,
    /// Writes giving a value that another live document holds are rejected.
    #[serde(default)]
    pub unique: bool,
    /// Only documents whose primary key starts with one of these are indexed (empty: all).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub key_prefixes: Vec<String>,
    /// How the attribute's JSON value becomes the index value.
    #[serde(default, skip_serializing_if = "ValueConversion::is_json")]
    pub conversion: ValueConversion,
}

impl IndexRecord {
    /// Bits per value of an embedded index's bloom filters.
    pub fn bloom_bits_per_key(&self) -> u32 {
        self.bloom_bits_per_key
            .unwrap_or(DEFAULT_BLOOM_BITS_PER_KEY)
    }
}

pub fn collection_key(name: &str) -> Vec<u8> {
    let mut key = b"collection/".to_vec();
    key.extend_from_slice(name.as_bytes());
    key
}

pub fn index_key(collection: &str, name: &str) -> Vec<u8> {
    let mut key = b"index/".to_vec();
    key.extend_from_slice(collection.as_bytes());
    key.push(0);
    key.extend_from_slice(name.as_bytes());
    key
}

pub fn index_tree_name(collection_id: u64, index_id: u64) -> String {
    format!("{TREE_PREFIX}c{collection_id}.i{index_id}")
}

pub fn encode_record<T: Serialize>(record: &T) -> Result<Vec<u8>> {
    serde_json::to_vec(record).map_err(|e| IndexError::Internal(format!("catalog encode: {e}")))
}

pub fn decode_record<T: for<'de> Deserialize<'de>>(key: &[u8], bytes: &[u8]) -> Result<T> {
    serde_json::from_slice(bytes).map_err(|e| IndexError::CorruptCatalog {
        key: String::from_utf8_lossy(key).into_owned(),
        message: e.to_string(),
    })
}

/// Checks a collection or index name.
pub fn check_name(what: &str, name: &str) -> Result<()> {
    if name.is_empty() || name.len() > MAX_NAME_BYTES || name.contains('\0') {
        return Err(IndexError::InvalidIndexSpec {
            name: name.to_string(),
            reason: format!(
                "{what} names must be 1 to {MAX_NAME_BYTES} bytes without NUL characters"
            ),
        });
    }
    Ok(())
}

/// Bits per key of an embedded index that does not name its own.
pub const DEFAULT_BLOOM_BITS_PER_KEY: u32 = 10;

/// Largest bloom bits per key an embedded index accepts.
pub const BLOOM_BITS_PER_KEY_MAX: u32 = 1000;

/// δ of the value-aware split (NEXT §4): a secondary block ends when the next entry would
/// widen its value range by more than δ. int and time: a numeric gap (time in milliseconds);
/// float: a numeric gap; string: a prefix length in bytes (every block keeps one prefix of that
/// length of the encoded value); geo: degrees by which the point would widen or heighten the
/// block's bounding rectangle. Finite and `>= 0` (a whole number for strings).
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize)]
#[serde(transparent)]
pub struct SplitDelta(f64);

impl SplitDelta {
    /// A delta, if it is finite and positive.
    pub fn new(delta: f64) -> Option<SplitDelta> {
        (delta.is_finite() && delta >= 0.0).then_some(SplitDelta(delta))
    }
    /// The delta.
    pub fn get(self) -> f64 {
        self.0
    }
}

impl PartialEq for SplitDelta {
    fn eq(&self, other: &Self) -> bool {
        self.0.to_bits() == other.0.to_bits()
    }
}
impl Eq for SplitDelta {}

impl fmt::Display for SplitDelta {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

impl FromStr for SplitDelta {
    type Err = String;
    fn from_str(text: &str) -> std::result::Result<Self, String> {
        text.parse::<f64>()
            .ok()
            .and_then(SplitDelta::new)
            .ok_or_else(|| format!("bad split delta {text:?} (expected a number >= 0)"))
    }
}

/// How `next` and `sst-local` queries tell a live version from a stale one.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Validation {
    /// The update memo (pk → newest sequence number), GetLite where it cannot tell. Costs
    /// every write a memory-only GetLite check (is there an older version?) to keep the memo.
    Memo,
    /// The engine's memory-only GetLite check; a primary read where it answers "maybe".
    /// The default: writes cost nothing beyond the primary write, and queries measured as
    /// fast as with the memo (`docs/format/secondary-index-blocks.md`, "Validation").
    #[default]
    GetLite,
}

impl Validation {
    /// The name used in specs, the CLI and messages.
    pub fn name(self) -> &'static str {
        match self {
            Validation::Memo => "memo",
            Validation::GetLite => "get-lite",
        }
    }
}

impl fmt::Display for Validation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Validation {
    type Err = String;
    fn from_str(text: &str) -> std::result::Result<Self, String> {
        match text {
            "memo" => Ok(Validation::Memo),
            "get-lite" | "getlite" => Ok(Validation::GetLite),
            other => Err(format!(
                "unknown validation {other:?} (expected memo or get-lite)"
            )),
        }
    }
}

/// Progress of an index back-fill (at `create_index`, or at open for a `building` index) or of
/// a memory-index rebuild at open.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BackfillProgress {
    /// The collection's name.
    pub collection: String,
    /// The index's name.
    pub index: String,
    /// Documents read so far.
    pub documents_done: u64,
    /// Whether this is the last report.
    pub finished: bool,
}

/// Told about back-fills and rebuilds ([`BackfillProgress`]).
pub type ProgressCallback = Arc<dyn Fn(&BackfillProgress) + Send + Sync>;
