//! Online builds of `next` / `sst-local` secondary blocks, as the database runs them: on
//! request, resumed at open, retried after a recoverable failure (`next/build.rs` builds).

use super::{BackfillProgress, Database};
use crate::catalog::IndexRecord;
use crate::error::{IndexError, Result};
use crate::kind::Collection;
use crate::next::build::{
    build_online, classify, unindexed_files, IndexBuildStatus, Outcome, Resumed,
};
use sift_lsm::ReadOptions;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

impl Database {
    /// Builds, online, the secondary blocks a `next` or `sst-local` index lacks for the live
    /// tables written before it existed (largest level first; writes go on meanwhile, and
    /// queries are exact throughout since unindexed tables are scanned). `create_index` does
    /// this already, and [`Database::open`](crate::Database::open) resumes an interrupted build in the background
    /// (`DatabaseOptions::index_builds_at_open`). Returns when done.
    pub fn build_secondary_blocks(
        &self,
        collection: &str,
        index: &str,
        progress: &mut dyn FnMut(&BackfillProgress),
    ) -> Result<()> {
        let (collection, record) = self.next_index(collection, index)?;
        let never = AtomicBool::new(false);
        build_online(
            &self.engine,
            &self.next,
            &collection,
            &record,
            &never,
            progress,
        )?;
        Ok(())
    }

    /// The collection and the record of a `next` or `sst-local` index.
    pub(super) fn next_index(
        &self,
        collection: &str,
        index: &str,
    ) -> Result<(Arc<Collection>, IndexRecord)> {
        let collection = self.collection_arc(collection)?;
        let index = collection.index(index)?;
        if !index.record.kind.builds_online() {
            return Err(IndexError::UnsupportedQuery {
                index: index.record.name.clone(),
                reason: format!(
                    "secondary blocks belong to next and sst-local indexes, not {}",
                    index.record.kind
                ),
            });
        }
        let record = index.record.clone();
        Ok((collection, record))
    }

    /// At open: starts, in a background thread, the builds of the `next` and `sst-local`
    /// indexes that some live table still lacks blocks for.
    pub(crate) fn resume_index_builds(&self) -> Result<()> {
        let catalog = Arc::clone(&self.catalog.read());
        let mut todo = Vec::new();
        for collection in catalog.collections.values() {
            let primary = &collection.primary;
            // The collection's live tables, taken once for all its indexes (and only if one
            // of them is a next or sst-local index).
            let mut view = None;
            for index in &collection.indexes {
                let Some(state) = self.next.index(primary.id(), index.record.id) else {
                    continue; // not a next or sst-local index
                };
                let view = match &mut view {
                    Some(view) => view,
                    None => view.insert(self.engine.components(primary, &ReadOptions::default())?),
                };
                if !unindexed_files(view, &state).is_empty() {
                    todo.push(Resumed {
                        collection: Arc::clone(collection),
                        record: index.record.clone(),
                        failed: None,
                    });
                }
            }
        }
        if !todo.is_empty() {
            self.index_builds.start(
                Arc::clone(&self.engine),
                Arc::clone(&self.next),
                todo,
                self.progress.clone(),
            );
        }
        Ok(())
    }

    /// Where the background builds stand (resumed at open, or handed over by
    /// `create_index` after a recoverable failure; none: all zero).
    pub fn index_build_status(&self) -> IndexBuildStatus {
        self.index_builds.status()
    }

    /// Waits until the background builds end, or one waits to retry after a recoverable
    /// failure (`retry_pending`: it goes on by itself, see [`IndexBuildStatus`]), and says
    /// where they stand.
    pub fn wait_for_index_builds(&self) -> IndexBuildStatus {
        self.index_builds.wait()
    }

    /// Retries now what waits for a retry after a recoverable error: the engine's failed
    /// background work (`Db::resume`: its error, if it failed again or is fatal, is
    /// returned), then — whatever the engine's answer — the background index build waiting
    /// to retry, if any (it waits on if the engine still refuses writes).
    pub fn resume(&self) -> Result<()> {
        let engine = self.engine.resume();
        self.index_builds.wake();
        engine?;
        Ok(())
    }

    /// `create_index`'s online build failed: a recoverable failure hands the rest of the
    /// build to the background thread, which retries (true); a fatal one is returned.
    pub(crate) fn hand_over_failed_build(
        &self,
        collection: &Arc<Collection>,
        record: &IndexRecord,
        error: &IndexError,
    ) -> bool {
        if matches!(classify(&self.engine, error), Outcome::Fatal(_)) {
            return false;
        }
        self.index_builds.start(
            Arc::clone(&self.engine),
            Arc::clone(&self.next),
            vec![Resumed {
                collection: Arc::clone(collection),
                record: record.clone(),
                failed: Some(error.to_string()),
            }],
            self.progress.clone(),
        );
        true
    }
}
