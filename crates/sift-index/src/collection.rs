//! The collections and indexes in use, as every part of the layer sees them: the database's
//! catalog of ready collections (`Catalog`), each with its primary tree, parser and ready
//! indexes (`Collection`), each index with its record and what it keeps in use (`Index`).
//! Below the index kinds and the database, so that they can share these types without
//! importing each other.

use crate::catalog::{CollectionRecord, IndexRecord};
use crate::document::DocumentParser;
use crate::encoding::encode_value_to_vec;
use crate::envelope::EnvelopeRef;
use crate::error::{IndexError, Result};
use crate::memory::MemoryIndex;
use crate::path::AttrPath;
use crate::value::AttrValue;
use sift_lsm::{SeqNo, Tree};
use std::borrow::Cow;
use std::collections::BTreeMap;
use std::sync::Arc;

/// An index in use.
#[derive(Debug)]
pub(crate) struct Index {
    pub(crate) record: IndexRecord,
    pub(crate) path: AttrPath,
    pub(crate) tree: Option<Tree>,
    pub(crate) memory: Option<MemoryIndex>,
    /// `embedded` only: the map of recent writes and what the collector gathers.
    pub(crate) embedded: Option<Arc<crate::embedded::EmbeddedIndex>>,
}

impl Index {
    /// The encoded value of this index's attribute in a stored document version written at
    /// `seq`, or `None` if the version does not carry it. Versions written before the index
    /// existed lack the attribute in their envelope; their JSON is parsed instead (a value
    /// that does not convert to the index type counts as absent).
    #[inline]
    pub(crate) fn encoded_value<'a>(
        &self,
        envelope: &EnvelopeRef<'a>,
        seq: SeqNo,
    ) -> Option<Cow<'a, [u8]>> {
        if let Some(encoded) = envelope.attr_encoded(self.record.attr_id) {
            return Some(Cow::Borrowed(encoded));
        }
        if seq > self.record.first_seq {
            return None;
        }
        self.value_from_json(envelope)
    }

    /// [`Index::encoded_value`] of a version older than the index (rare: out of line).
    #[cold]
    #[inline(never)]
    fn value_from_json<'a>(&self, envelope: &EnvelopeRef<'a>) -> Option<Cow<'a, [u8]>> {
        let document: serde_json::Value = serde_json::from_slice(envelope.doc()).ok()?;
        let json = self.path.lookup(&document)?;
        if json.is_null() {
            return None;
        }
        let value = AttrValue::from_json(json, self.record.attr_type, self.path.as_str()).ok()?;
        Some(Cow::Owned(encode_value_to_vec(&value)))
    }

    pub(crate) fn embedded_state(&self) -> Result<&crate::embedded::EmbeddedIndex> {
        self.embedded.as_deref().ok_or_else(|| {
            IndexError::Internal(format!("index `{}` is not embedded", self.record.name))
        })
    }

    pub(crate) fn stand_alone_tree(&self) -> Result<&Tree> {
        self.tree.as_ref().ok_or_else(|| {
            IndexError::Internal(format!("index `{}` has no tree", self.record.name))
        })
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

impl Collection {
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
