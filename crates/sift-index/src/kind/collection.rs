//! The collections and indexes in use, as every part of the layer sees them: the database's
//! catalog of ready collections (`Catalog`), each with its primary tree, parser and ready
//! indexes (`Collection`), each index with its record and what it keeps in use (`Index`).
//! Below the index kinds and the database, so that they can share these types without
//! importing each other; each index reaches its kind through [`SecondaryIndex`].

use super::SecondaryIndex;
use crate::catalog::{CollectionRecord, IndexRecord};
use crate::document::{DocumentParser, IndexedAttribute};
use crate::encoding::encode_value_to_vec;
use crate::envelope::EnvelopeRef;
use crate::error::{IndexError, Result};
use crate::path::AttrPath;
use sift_lsm::{SeqNo, Tree};
use std::borrow::Cow;
use std::collections::BTreeMap;
use std::sync::Arc;

/// The encoded value of an index's attribute in a stored document version written at `seq`,
/// or `None` if the version does not carry it. Versions written before the index existed lack
/// the attribute in their envelope; their JSON is read instead by `reader` (the index's
/// one-attribute parser: the same path, conversion and key prefixes as writes; a value that
/// does not convert counts as absent).
#[inline]
pub(crate) fn encoded_value<'a>(
    attr_id: u32,
    first_seq: SeqNo,
    reader: &DocumentParser,
    envelope: &EnvelopeRef<'a>,
    seq: SeqNo,
) -> Option<Cow<'a, [u8]>> {
    if let Some(encoded) = envelope.attr_encoded(attr_id) {
        return Some(Cow::Borrowed(encoded));
    }
    if seq > first_seq {
        return None;
    }
    value_from_json(reader, envelope)
}

/// [`encoded_value`] of a version older than the index (rare: out of line).
#[cold]
#[inline(never)]
fn value_from_json<'a>(
    reader: &DocumentParser,
    envelope: &EnvelopeRef<'a>,
) -> Option<Cow<'a, [u8]>> {
    let parsed = reader.parse(envelope.doc()).ok()?;
    let (_, value) = parsed.envelope.attrs.first()?;
    Some(Cow::Owned(encode_value_to_vec(value)))
}

/// The parser that reads one index's attribute from a document's JSON (for versions written
/// before the index existed), with the collection's primary-key path for key prefixes.
pub(crate) fn attribute_reader(
    record: &IndexRecord,
    path: &AttrPath,
    pk_path: &str,
) -> Result<DocumentParser> {
    let attribute = IndexedAttribute::new(record.attr_id, path.clone(), record.attr_type)
        .with_source(record.conversion, &record.key_prefixes);
    DocumentParser::new(AttrPath::parse(pk_path)?, vec![attribute])
}

/// An index in use.
#[derive(Debug)]
pub(crate) struct Index {
    pub(crate) record: IndexRecord,
    pub(crate) path: AttrPath,
    /// What the kind keeps (tree, map, registry handle) and does.
    pub(crate) kind: Arc<dyn SecondaryIndex>,
    /// Reads the attribute from the JSON of versions older than the index.
    pub(crate) reader: DocumentParser,
}

impl Index {
    /// The index of `record`, with its `attribute_reader`.
    pub(crate) fn new(
        record: IndexRecord,
        path: AttrPath,
        kind: Arc<dyn SecondaryIndex>,
        reader: DocumentParser,
    ) -> Index {
        Index {
            record,
            path,
            kind,
            reader,
        }
    }

    /// The encoded value of this index's attribute in a stored document version written at
    /// `seq` ([`encoded_value`]).
    #[inline]
    pub(crate) fn encoded_value<'a>(
        &self,
        envelope: &EnvelopeRef<'a>,
        seq: SeqNo,
    ) -> Option<Cow<'a, [u8]>> {
        encoded_value(
            self.record.attr_id,
            self.record.first_seq,
            &self.reader,
            envelope,
            seq,
        )
    }

    pub(crate) fn stand_alone_tree(&self) -> Result<&Tree> {
        self.kind.tree().ok_or_else(|| {
            IndexError::Internal(format!("index `{}` has no tree", self.record.name))
        })
    }

    /// The kind's own state, if it is a `T`.
    pub(crate) fn state<T: 'static>(&self) -> Option<&T> {
        self.kind.as_any().downcast_ref::<T>()
    }
}

/// A collection in use.
#[derive(Debug)]
pub(crate) struct Collection {
    pub(crate) record: CollectionRecord,
    pub(crate) primary: Tree,
    pub(crate) parser: DocumentParser,
    /// Ready indexes only.
    pub(crate) indexes: Vec<Arc<Index>>,
}

/// The error for a stored document that does not decode.
pub(crate) fn corrupt_document(collection: &str, pk: &[u8], error: &IndexError) -> IndexError {
    IndexError::CorruptDocument {
        collection: collection.to_string(),
        pk: String::from_utf8_lossy(pk).into_owned(),
        message: error.to_string(),
    }
}

/// The error for an entry of `index` that does not decode.
pub(crate) fn corrupt_entry(
    collection: &Collection,
    index: &Index,
    what: &str,
    error: &IndexError,
) -> IndexError {
    IndexError::CorruptIndexEntry {
        collection: collection.record.name.clone(),
        index: index.record.name.clone(),
        what: what.to_string(),
        message: error.to_string(),
    }
}

impl Collection {
    pub(crate) fn corrupt_document(&self, pk: &[u8], error: &IndexError) -> IndexError {
        corrupt_document(&self.record.name, pk, error)
    }

    pub(crate) fn index(&self, name: &str) -> Result<&Arc<Index>> {
        self.indexes
            .iter()
            .find(|index| index.record.name == name)
            .ok_or_else(|| IndexError::UnknownIndex {
                collection: self.record.name.clone(),
                name: name.to_string(),
            })
    }
}

#[derive(Debug, Clone, Default)]
pub(crate) struct Catalog {
    pub(crate) collections: BTreeMap<String, Arc<Collection>>,
    pub(crate) next_id: u64,
}
