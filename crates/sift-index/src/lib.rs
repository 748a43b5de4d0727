//! Sift's secondary-index layer: collections of JSON documents with secondary indexes, over
//! one `sift_lsm::Db`.
//!
//! Three layers, imported downwards only (`ARCHITECTURE.md`, "crates/sift-index"):
//! foundations (typed values, encodings, paths, the document envelope and parser, the catalog's
//! records and specs); `kind/`, the `SecondaryIndex` trait every index kind implements, with the
//! types the kinds share, and one folder per kind (`composite/`, `eager/`, `lazy/`, `memory/`,
//! `embedded/`, `next/`, `deferred/`); and the [`Database`] (`database/`), which reaches a kind
//! only through the trait. Byte layouts: `docs/format/index-encodings.md`.
//!
//! # Storage
//! - Catalog tree `sift.catalog`: JSON records of collections and indexes (state
//!   `building`/`ready`, attribute id, `first_seq`, tree name).
//! - Primary tree per collection (`sift.c{id}.docs`): key = primary key bytes, value = envelope
//!   (pre-encoded attribute values + the JSON text; the JSON is parsed once, at write).
//! - One tree per stand-alone index (`sift.c{id}.i{index id}`): `composite` keys
//!   `enc(value) ‖ encode_pk(pk)` with empty values; `eager` and `lazy` keys `enc(value)` with
//!   posting lists / fragments. `memory` indexes have no tree: `Database::close` saves each to
//!   a snapshot file, loaded at the next open if it matches the engine's state; otherwise
//!   (crash, damage) they are rebuilt by a scan at open (`memory/snapshot.rs`).
//! - `sst-local` and `next` indexes have no tree: a block property collector writes sorted
//!   secondary index blocks into every SSTable of the primary tree, and `next` keeps an
//!   in-memory global index over them, rebuilt at open (`next/`;
//!   `docs/format/secondary-index-blocks.md`).
//! - `embedded` indexes have no tree either: bloom filters and zone maps in the primary tree's
//!   SSTables, written by a block property collector, plus an in-memory map of recent writes
//!   (`embedded/`, `docs/format/embedded-index.md`). Creating one needs no back-fill.
//! - `deferred` composite indexes key each version's entry `enc(value) ‖ !seq ‖ encode_pk(pk)`
//!   and are cleaned by DELETEs that the primary's flushes and compactions emit through a
//!   compaction observer (`deferred/`).
//! - Unique indexes (composite or eager, sync-full) reject a write whose value another live
//!   document holds (`kind/unique.rs`).
//! - Every write (a put, a delete, or a batch of them) is ONE engine `WriteBatch` over the
//!   primary tree and every stand-alone index tree. Per document the primary entry comes
//!   first, so the document's sequence number is the one its entry got.
//!
//! # Concurrency and sequence numbers
//! All writes of this layer are serialised by one database-wide mutex. Each write's engine
//! batch is built by `Db::write_sequenced`, which hands the builder the first sequence number
//! the batch will get while the engine's commit lock is held, so postings and memory entries
//! carry the sequence number of the version they index even when other writers (compaction
//! observers, background index workers, direct users of [`Database::engine`](crate::Database::engine)) take sequence
//! numbers too. The same mutex makes eager read-modify-write of posting lists lossless, and
//! read repair re-checks the live state under it. Indexes with asynchronous maintenance are
//! written only by the background workers of `async_index/`, outside that mutex (each
//! document's updates by one worker, in order). Parsing happens before the mutex is taken
//! (and is redone if the catalog changed meanwhile). Queries take no lock: each reads one
//! engine snapshot.
//!
//! The lazy merge operator is installed as the engine's *default* tree option at every open
//! (the catalog that names the lazy trees is itself in the engine, so their names are not
//! known before opening); only lazy trees ever hold merge operands.
//!
//! # Index creation
//! `create_index` records the index as `building`, back-fills it from a scan of the primary
//! tree while holding the write mutex (writes to the whole database wait), then records it
//! `ready`; only ready indexes are used by writes and queries. At open, a `building` index (a
//! crash interrupted its back-fill) gets a fresh tree and is back-filled again. Documents
//! written before the index existed lack its attribute in their envelopes; for them (live
//! sequence `<= first_seq`) the value is taken from the JSON when needed. Eager and lazy
//! back-fills gather each value's list in memory and write it whole, newest first.
//! `next` and `sst-local` indexes are created online: registered under the mutex, then the
//! older tables get their secondary blocks with writes going on (`next/`, `next/build.rs`);
//! a build interrupted by a restart resumes at the next open, in a background thread that the
//! database stops and joins when dropped or closed (`DatabaseOptions::index_builds_at_open`,
//! `Database::wait_for_index_builds`). A build that fails with a recoverable error (I/O, writes
//! stopped by a recoverable engine error) is retried by that thread after a backoff, when the
//! engine recovers, or at `Database::resume`; fatal errors are reported (`IndexBuildStatus`).
//!
//! # Validation
//! A candidate is a hit only if the pk's live version at the query snapshot carries a value in
//! the query's range and, for postings (eager, lazy, memory), only if the posting names that
//! live version's sequence number. Results are newest first by live sequence number; stale
//! entries never count toward K; no document is returned twice.
//!
//! # Example
//!
//! The ten newest tweets of user 42, tweets in a range of likes, tweets inside a box, a
//! read-your-writes session over an asynchronous index:
//!
//! ```
//! use sift_index::{
//!     AttrType, AttrValue, Database, DatabaseOptions, GeoBox, IndexKind, IndexSpec, Maintenance,
//! };
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let dir = tempfile::tempdir()?;
//! let db = Database::open(dir.path(), DatabaseOptions::default())?;
//! db.create_collection("tweets", "id")?;
//! db.create_index("tweets", IndexSpec::new("by_user", "user", AttrType::Int, IndexKind::Composite))?;
//! db.create_index("tweets", IndexSpec::new("by_likes", "likes", AttrType::Int, IndexKind::Next))?;
//! db.create_index("tweets", IndexSpec::new("by_place", "place", AttrType::Geo, IndexKind::Composite))?;
//! db.put("tweets", br#"{"id": "t1", "user": 42, "likes": 3, "place": [-73.97, 40.78]}"#)?;
//! db.put("tweets", br#"{"id": "t2", "user": 42, "likes": 250, "place": [2.35, 48.86]}"#)?;
//! db.put("tweets", br#"{"id": "t3", "user": 7, "likes": 12, "place": [-73.99, 40.75]}"#)?;
//!
//! // LOOKUP: newest first, at most 10.
//! let by_user = db.lookup("tweets", "by_user", &AttrValue::Int(42), Some(10))?;
//! let pks: Vec<&[u8]> = by_user.hits.iter().map(|hit| hit.pk.as_slice()).collect();
//! assert_eq!(pks, [b"t2".as_slice(), b"t1"]);
//!
//! // RANGE (both ends included), every match.
//! let liked = db.range("tweets", "by_likes", &AttrValue::Int(10), &AttrValue::Int(1000), None)?;
//! assert_eq!(liked.hits.len(), 2);
//!
//! // WITHIN a box of longitudes and latitudes (New York).
//! let new_york = GeoBox::new(-74.3, 40.5, -73.7, 40.9)?;
//! let near = db.within("tweets", "by_place", &new_york, None)?;
//! let pks: Vec<&[u8]> = near.hits.iter().map(|hit| hit.pk.as_slice()).collect();
//! assert_eq!(pks, [b"t3".as_slice(), b"t1"]);
//!
//! // A replace moves the document in every index; a delete removes it.
//! db.put("tweets", br#"{"id": "t1", "user": 7, "likes": 3, "place": [-73.97, 40.78]}"#)?;
//! db.delete("tweets", b"t2")?;
//! assert!(db.lookup("tweets", "by_user", &AttrValue::Int(42), None)?.hits.is_empty());
//!
//! // An index maintained in the background: a session sees its own writes at once.
//! db.create_index(
//!     "tweets",
//!     IndexSpec::new("by_lang", "lang", AttrType::String, IndexKind::Composite)
//!         .with_maintenance(Maintenance::AsyncSession),
//! )?;
//! let session = db.session();
//! session.put("tweets", br#"{"id": "t4", "user": 9, "lang": "fr"}"#)?;
//! let french = session.lookup("tweets", "by_lang", &AttrValue::String("fr".into()), None)?;
//! assert_eq!(french.hits.len(), 1);
//! session.end();
//!
//! db.close()?;
//! # Ok(())
//! # }
//! ```

#![forbid(unsafe_code)]
#![deny(missing_docs)]
mod async_index;
mod attr_type;
mod catalog;
mod composite;
mod conversion;
mod database;
mod deferred;
mod document;
mod eager;
mod embedded;
mod encoding;
mod envelope;
mod error;
#[cfg(test)]
mod fuzz;
mod geo;
mod kind;
mod lazy;
mod memory;
mod next;
mod path;
mod postings;
mod projection;
mod session;
mod time;
mod value;
mod zorder;

pub mod format;

pub use async_index::{AsyncIndexOptions, AsyncIndexStats, TestHook};
pub use attr_type::UnknownAttrType;
pub use catalog::{
    CollectionRecord, IndexKind, IndexRecord, IndexSpec, IndexState, Maintenance, SplitDelta,
    Validation,
};
pub use conversion::ValueConversion;
pub use database::{
    BackfillProgress, CollectionInfo, Database, DatabaseOptions, OpenTimings, ProgressCallback,
    WriteOp,
};
pub use deferred::DeferredGarbage;
pub use document::TypeMismatchPolicy;
pub use error::{
    IndexError, Result, MAX_ATTRIBUTE_PATH_BYTES, MAX_ATTRIBUTE_PATH_SEGMENTS, MAX_DOCUMENT_BYTES,
    MAX_PRIMARY_KEY_BYTES, MAX_STRING_VALUE_BYTES,
};
pub use geo::GeoBox;
pub use kind::query::{Hit, QueryResult, QueryStats};
pub use memory::snapshot::MemoryIndexOrigin;
pub use next::{
    GlobalIndexReport, GlobalIndexStats, IndexBuildFailure, IndexBuildStatus, IndexBuildsAtOpen,
    SecondaryBlocksReport,
};
pub use path::AttrPath;
pub use session::{Session, SessionConsistency, SessionHandle, SessionQueryResult};
pub use sift_lsm::SeqNo;
pub use value::{AttrType, AttrValue};
