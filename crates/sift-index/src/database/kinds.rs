//! The one place that knows every index kind: which implementation of `SecondaryIndex` an
//! index record gets, created (`create_index`, or the rebuild of an index a crash left
//! `building`) or opened (a `ready` index at open). Adding a kind is a folder that implements
//! the trait and one arm of [`Database::kind_for`](crate::Database::kind_for).

use super::Database;
use crate::catalog::{index_key, IndexKind, IndexRecord, Maintenance};
use crate::composite::Composite;
use crate::deferred::DeferredComposite;
use crate::document::DocumentParser;
use crate::eager::Eager;
use crate::embedded::Embedded;
use crate::error::{IndexError, Result};
use crate::kind::{missing_tree, SecondaryIndex};
use crate::lazy::Lazy;
use crate::memory::MemoryIndex;
use crate::next::Next;
use sift_lsm::{Tree, TreeId, TreeOptions};
use std::sync::Arc;

/// Whether a kind is being created (its tree is made) or opened (its tree exists).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Phase {
    Create,
    Open,
}

impl Database {
    /// The kind of the index `record` describes, over the collection's primary tree `primary`.
    /// Kinds that need no back-fill scan are not started here (see
    /// `SecondaryIndex::build_without_scan`); a memory index is empty.
    pub(super) fn kind_for(
        &self,
        record: &IndexRecord,
        reader: &DocumentParser,
        primary: TreeId,
        phase: Phase,
    ) -> Result<Arc<dyn SecondaryIndex>> {
        let composite_options = || Composite::tree_options(&self.composite_seq);
        Ok(match (record.kind, record.maintenance) {
            (IndexKind::Composite, Maintenance::Deferred) => Arc::new(DeferredComposite::new(
                self.index_tree(record, phase, composite_options)?,
                &self.composite_seq,
            )),
            (IndexKind::Composite, _) => Arc::new(Composite::new(
                self.index_tree(record, phase, composite_options)?,
                &self.composite_seq,
            )),
            (IndexKind::Eager, _) => Arc::new(Eager::new(self.index_tree(
                record,
                phase,
                TreeOptions::default,
            )?)),
            (IndexKind::Lazy, _) => Arc::new(Lazy::new(self.index_tree(
                record,
                phase,
                Lazy::tree_options,
            )?)),
            (IndexKind::Memory, _) => Arc::new(MemoryIndex::default()),
            (IndexKind::Embedded, _) => Arc::new(Embedded::new(record, reader, &self.embedded)),
            (IndexKind::SstLocal | IndexKind::Next, _) => Arc::new(Next::new(&self.next, primary)),
        })
    }

    /// The index's own tree: created with the kind's options, or opened.
    fn index_tree(
        &self,
        record: &IndexRecord,
        phase: Phase,
        options: impl FnOnce() -> TreeOptions,
    ) -> Result<Tree> {
        let name = record.tree.as_deref().ok_or_else(|| missing_tree(record))?;
        match phase {
            Phase::Create => Ok(self.engine.create_tree(name, options())?),
            Phase::Open => self
                .engine
                .tree(name)
                .map_err(|e| IndexError::CorruptCatalog {
                    key: String::from_utf8_lossy(&index_key(&record.collection, &record.name))
                        .into_owned(),
                    message: format!("index tree missing: {e}"),
                }),
        }
    }
}
