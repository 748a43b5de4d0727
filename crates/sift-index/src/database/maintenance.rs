//! Maintenance beside the write path: asynchronous index workers (started at open, stopped at
//! close, waited on), deferred indexes' pending drops and marker.

use super::Database;
use crate::async_index::queue::{Item, RecoveredVersions};
use crate::async_index::{has_async_index, stored_watermark, worker, AsyncIndexStats, Version};
use crate::deferred::{split_pending_key, write_marker, PENDING_BATCH_RECORDS, PENDING_PREFIX};
use crate::error::{IndexError, Result};
use crate::kind::Collection;
use sift_lsm::{ComponentId, ReadOptions, SeqNo, TreeId, ValueKind, WriteBatch};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

impl Database {
    /// Connects the indexer to the opened engine, starts the workers and queues again the
    /// base writes above the durable watermark (see the module documentation).
    pub(crate) fn start_async_index(&self) -> Result<()> {
        let core = &self.async_index.core;
        let watermark = match stored_watermark(&self.engine, &self.catalog_tree)? {
            Some(watermark) => {
                core.active.store(true, Ordering::Release);
                watermark
            }
            None => 0,
        };
        core.durable_watermark.store(watermark, Ordering::Release);
        core.watermark_written.store(watermark, Ordering::Release);
        let _ = core.catalog_tree.set(self.catalog_tree.clone());
        let catalog = Arc::clone(&self.catalog.read());
        let collections: Vec<_> = catalog
            .collections
            .values()
            .filter(|c| has_async_index(c))
            .cloned()
            .collect();
        if !collections.is_empty() {
            core.active.store(true, Ordering::Release);
        }
        let mut workers = self.async_index.workers.lock();
        for shard in 0..core.options.workers.max(1) {
            let worker = worker::Worker {
                core: Arc::clone(core),
                engine: Arc::clone(&self.engine),
                catalog: Arc::clone(&self.catalog),
                shard,
                recent: worker::RecentVersions::default(),
                // Every entry written before this open (and every update queued again below)
                // is at or below it: those take the logged path (see `worker.rs`).
                logged_through: std::cell::Cell::new(self.engine.latest_sequence()),
            };
            let handle = std::thread::Builder::new()
                .name(format!("sift-index-async-{shard}"))
                .spawn(move || worker.run())
                .map_err(|source| IndexError::Io {
                    context: "cannot start an asynchronous index worker".to_string(),
                    source,
                })?;
            workers.push(handle);
        }
        drop(workers);
        if let Some(hook) = &core.options.before_replay_scan {
            (hook.0)(&self.engine);
        }
        for collection in collections {
            let floor = collection
                .indexes
                .iter()
                .filter(|index| index.record.maintenance.is_async())
                .map(|index| index.record.first_seq)
                .min()
                .unwrap_or(0)
                .max(watermark);
            let items = self.writes_above(&collection, floor)?;
            let pushed = core.queue.push(items) as u64;
            core.counters.recovered.fetch_add(pushed, Ordering::Relaxed);
        }
        self.async_index.committed();
        Ok(())
    }

    /// An update for every version in `collection`'s primary with a sequence number above
    /// `floor`, oldest first, each with its version and the previous one as found now. Only
    /// components whose sequence range reaches above `floor` are read.
    fn writes_above(&self, collection: &Collection, floor: SeqNo) -> Result<Vec<Item>> {
        let primary = &collection.primary;
        let view = self.engine.components(primary, &ReadOptions::default())?;
        // pk -> versions above the floor (seq, value; None: delete), and the newest at or
        // below it seen in the same components.
        let mut above: HashMap<Vec<u8>, Vec<Version>> = HashMap::new();
        let mut below: HashMap<Vec<u8>, Version> = HashMap::new();
        for id in view.ids() {
            let reaches_above = match id {
                ComponentId::Memtable | ComponentId::ImmutableMemtable(_) => true,
                ComponentId::Level0File(number) => view
                    .files(0)
                    .iter()
                    .any(|file| file.number == number && file.seq_max > floor),
                ComponentId::Level(level) => {
                    view.files(level).iter().any(|file| file.seq_max > floor)
                }
            };
            if !reaches_above {
                continue;
            }
            let mut iter = view.iter(id)?;
            iter.seek_to_first()?;
            while iter.valid() {
                let seq = iter.seq();
                let value = (iter.kind() != ValueKind::Delete).then(|| iter.value().to_vec());
                if seq > floor {
                    above
                        .entry(iter.user_key().to_vec())
                        .or_default()
                        .push((seq, value));
                } else if below
                    .get(iter.user_key())
                    .is_none_or(|(newest, _)| *newest < seq)
                {
                    below.insert(iter.user_key().to_vec(), (seq, value));
                }
                iter.next()?;
            }
        }
        let collection_name: Arc<str> = Arc::from(collection.record.name.as_str());
        let now = Instant::now();
        let mut items = Vec::new();
        for (pk, mut versions) in above {
            versions.sort_by_key(|(seq, _)| *seq);
            // The version before the first one above the floor: from the scan, or from a
            // component the scan skipped.
            let mut previous = match (below.remove(&pk), self.engine.get_at(primary, &pk, floor)?) {
                (Some((seq, _)), Some(entry)) if entry.seq > seq => Some((entry.value, entry.seq)),
                (Some((seq, value)), _) => value.map(|value| (value, seq)),
                (None, entry) => entry.map(|entry| (entry.value, entry.seq)),
            };
            for (seq, version) in versions {
                let next_previous = version.clone().map(|value| (value, seq));
                let mut item = Item::new(
                    Arc::clone(&collection_name),
                    &pk,
                    seq,
                    version.is_none(),
                    None,
                    now,
                );
                item.recovered = Some(Arc::new(RecoveredVersions { version, previous }));
                items.push(item);
                previous = next_previous;
            }
        }
        items.sort_by_key(|item| item.seq);
        Ok(items)
    }

    /// Drains the queue (unless a batch fails persistently), records the watermark and stops
    /// the workers. Part of `close`.
    pub(crate) fn stop_async_index(&self) {
        let visible = self.engine.latest_sequence();
        let core = &self.async_index.core;
        let _ = core.wait_for(visible, None, true);
        if core.unlogged_through.load(Ordering::Acquire) > self.engine.flushed_through() {
            // Entries inserted unlogged are in memtables only, which a close does not flush:
            // flush them, so the watermark covers everything and the next open queues nothing
            // again (if the flush fails, the watermark stays below them and the open does).
            let _ = self.engine.flush();
        }
        let _ = self
            .async_index
            .core
            .persist_watermark(&self.engine, visible);
        self.async_index.stop();
    }

    /// Blocks until every asynchronous index update of the writes acknowledged before the
    /// call is applied. Fails (naming the error) if one of them keeps failing; the workers keep
    /// retrying it.
    pub fn wait_until_indexed(&self) -> Result<()> {
        self.wait_until_indexed_for(None).map(|_| ())
    }

    /// Writes the durable watermark now (as a worker does after a flush), if it moved.
    /// Testing aid: lets a test record the watermark at a chosen moment, such as while a
    /// flush is held.
    #[doc(hidden)]
    pub fn write_index_watermark(&self) -> Result<()> {
        let visible = self.engine.latest_sequence();
        self.async_index
            .core
            .persist_watermark(&self.engine, visible)
    }

    /// [`Database::wait_until_indexed`](crate::Database::wait_until_indexed) giving up after `timeout`: `Ok(false)` if updates are
    /// still pending then.
    pub fn wait_until_indexed_for(&self, timeout: Option<Duration>) -> Result<bool> {
        let target = self.engine.latest_sequence();
        match self.async_index.core.wait_for(target, timeout, true) {
            Ok(done) => Ok(done),
            Err((attempts, message)) => Err(IndexError::IndexingFailed { attempts, message }),
        }
    }

    /// Queue length, lag histogram and failures of asynchronous maintenance.
    pub fn async_index_stats(&self) -> AsyncIndexStats {
        let core = &self.async_index.core;
        let (queue_length, oldest_pending_us, persistent_failure, updates_queued) = {
            let state = core.queue.lock();
            let oldest = state
                .shards
                .iter()
                .filter_map(|shard| shard.items.front().map(|item| item.queued_at))
                .min()
                .map_or(0, |at| {
                    u64::try_from(at.elapsed().as_micros()).unwrap_or(u64::MAX)
                });
            let failing = state
                .failure_up_to(SeqNo::MAX, core.options.failures_reported_after.max(1), &[])
                .is_some();
            (state.length() as u64, oldest, failing, state.queued_total)
        };
        let (sessions_live, session_overlay_bytes) =
            crate::async_index::sessions::live_sessions(core);
        let load = |counter: &AtomicU64| counter.load(Ordering::Relaxed);
        AsyncIndexStats {
            queue_length,
            oldest_pending_us,
            updates_queued,
            updates_recovered: load(&core.counters.recovered),
            updates_applied: load(&core.counters.applied),
            batches_written: load(&core.counters.batches),
            failed_attempts: load(&core.counters.failed_attempts),
            last_error: core.last_error.lock().clone(),
            persistent_failure,
            flush_drains: load(&core.counters.flush_drains),
            flush_drain_wait_us: load(&core.counters.flush_drain_wait_us),
            flush_drains_abandoned: load(&core.counters.flush_drains_abandoned),
            durable_watermark: core.durable_watermark.load(Ordering::Acquire),
            watermark_written: core.watermark_written.load(Ordering::Acquire),
            lag_us_p50: core.lag.quantile_us(0.5),
            lag_us_p90: core.lag.quantile_us(0.9),
            lag_us_p99: core.lag.quantile_us(0.99),
            lag_us_p999: core.lag.quantile_us(0.999),
            lag_us_max: core.lag.max_us(),
            lag_histogram: core.lag.buckets(),
            sessions_live,
            session_overlay_bytes,
        }
    }
}

impl Database {
    /// Rewrites the marker file if it must name `extra` (an index being created) or, without
    /// `extra`, if it differs from the primaries that have deferred indexes now.
    pub(crate) fn update_deferred_marker(&self, extra: Option<TreeId>) -> Result<()> {
        if let Some(primaries) = self.deferred.marker_update(extra) {
            write_marker(self.file_system.as_ref(), self.engine.path(), &primaries)?;
            self.deferred.marker_written(primaries);
        }
        Ok(())
    }

    /// Turns the versions recorded under [`PENDING_PREFIX`] (dropped before the catalog was
    /// loaded) into deletes of their index entries, each record removed in the same batch.
    /// Called at open, under the write lock, after the catalog is loaded.
    pub(crate) fn apply_pending_drops(&self) -> Result<u64> {
        let default_tree = self.engine.default_tree();
        let mut upper = PENDING_PREFIX.to_vec();
        if let Some(last) = upper.last_mut() {
            *last += 1;
        }
        let mut applied = 0;
        loop {
            let mut iter = self.engine.iter(
                &default_tree,
                ReadOptions {
                    lower_bound: Some(PENDING_PREFIX.to_vec()),
                    upper_bound: Some(upper.clone()),
                    ..ReadOptions::default()
                },
            )?;
            iter.seek(PENDING_PREFIX)?;
            let mut batch = WriteBatch::new();
            let mut records = 0;
            {
                let state = self.deferred.state.read();
                while iter.valid() && records < PENDING_BATCH_RECORDS {
                    if let Some((tree, seq, pk)) = split_pending_key(iter.key()) {
                        if let Some(indexes) = state.by_primary.get(&tree) {
                            self.deferred
                                .emit_deletes(indexes, pk, seq, iter.value(), &mut batch);
                        }
                    }
                    batch.delete(&default_tree, iter.key());
                    records += 1;
                    iter.next()?;
                }
            }
            if records == 0 {
                return Ok(applied);
            }
            applied += records as u64;
            self.deferred
                .pending_applied
                .fetch_add(records as u64, Ordering::Relaxed);
            self.engine
                .write(batch, &sift_lsm::WriteOptions { sync: true })?;
        }
    }
}
