//! Engine entry points for layers that do background work tied to flushes (see `hooks.rs`):
//! reads at an explicit sequence number, writes that never wait for a flush, and unlogged
//! inserts at the sequence number of an earlier write.
//!
//! # Unlogged inserts
//! [`Db::insert_unlogged_at_sequence`] puts entries straight into the memtable whose sequence
//! range holds their (explicit, already handed out) sequence numbers: no WAL record, no new
//! sequence number, no commit lock. Each memtable knows its range (`Memtable::sequence_floor`,
//! fixed when it becomes active; `Memtable::sequence_ceiling`, set when a switch freezes it,
//! both under the commit lock), so an entry at sequence number `s` lands in the same memtable
//! as the write that got `s`, and is durable exactly when that memtable's flush is installed
//! ([`Db::flushed_through`] tells how far that is). A flush seals its memtable and waits for
//! the inserts running into it before it reads it (`Memtable::seal_for_flush`); an insert
//! whose memtable is sealed, or older than every memtable, is refused and writes nothing, so
//! the caller can write through the log instead.

use crate::db::state::DbInner;
use crate::db::{Db, Entry};
use crate::key::{SeqNo, ValueKind};
use crate::memtable::Memtable;
use crate::options::{ReadOptions, WriteOptions};
use crate::stats::EngineCounters;
use crate::write_batch::WriteBatch;
use crate::{Error, Result};

impl Db {
    /// Reads `key` as of sequence number `seq` without registering a snapshot. Only versions
    /// that no flush or compaction could have dropped are certain to be found: the caller must
    /// know that the version visible at `seq` is still stored (for instance because a newer
    /// version of the key is still in a memtable and its flush waits for a `FlushListener`).
    pub fn get_at(&self, tree: &crate::Tree, key: &[u8], seq: SeqNo) -> Result<Option<Entry>> {
        self.inner.get_at(tree, key, seq, &ReadOptions::default())
    }

    /// Applies the batch atomically like `write`, but without queueing behind other writers
    /// and without waiting for room in the memtable, L0 slowdowns or stops: the active memtable
    /// may grow past `memtable_bytes_max` until the next ordinary write freezes it. For writes
    /// that a `FlushListener` waits for; anything else should use `write`.
    pub fn write_unthrottled(&self, batch: WriteBatch, options: &WriteOptions) -> Result<SeqNo> {
        self.inner.write_unthrottled(batch, options.sync)
    }

    /// Inserts entry `i` of `batch` (its sequence number is ignored) at sequence number
    /// `sequences[i]` into the memtable whose sequence range holds that number — without
    /// writing the WAL, taking a new sequence number or taking the commit lock, so it never
    /// waits for writers nor they for it. All or nothing: either every entry is inserted
    /// ([`UnloggedInsert::Inserted`]) or none is ([`UnloggedInsert::Refused`], with why).
    ///
    /// For entries that belong with an earlier write (the one that got the sequence number)
    /// and may be lost with it: they are durable exactly when that write's memtable is flushed
    /// (see [`Db::flushed_through`]); a crash before loses them while the earlier write is
    /// replayed from its log. What the caller must ensure:
    /// - every sequence number was handed out to a committed write (a number not handed out
    ///   yet is refused);
    /// - for each key, the entries it inserts (and any it writes otherwise) get sequence
    ///   numbers in the order they are meant to apply: an entry at an older number than a
    ///   version already stored is shadowed by it;
    /// - it accepts that an entry at `s <= ` a snapshot's sequence number appears in that
    ///   snapshot once inserted, though it was not there when the snapshot was taken.
    ///
    /// The same `(tree, key, sequence number, kind)` inserted twice keeps the last value.
    pub fn insert_unlogged_at_sequence(
        &self,
        batch: &WriteBatch,
        sequences: &[SeqNo],
    ) -> Result<UnloggedInsert> {
        self.inner.insert_unlogged_at_sequence(batch, sequences)
    }

    /// Every entry with a sequence number `<=` the result that was put into a memtable (by a
    /// write or an unlogged insert) is in a table of the installed version now: the memtables
    /// holding those numbers are flushed. Never decreases while the database is open.
    pub fn flushed_through(&self) -> SeqNo {
        let current = self.inner.super_version.load();
        let oldest = current.imms.last().unwrap_or(&current.mem);
        match oldest.sequence_floor() {
            SeqNo::MAX => 0,
            floor => floor.saturating_sub(1),
        }
    }
}

/// What [`Db::insert_unlogged_at_sequence`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UnloggedInsert {
    /// Every entry is in the memtable holding its sequence number.
    Inserted,
    /// Nothing was inserted.
    Refused(UnloggedRefusal),
}

/// Why [`Db::insert_unlogged_at_sequence`] inserted nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UnloggedRefusal {
    /// A sequence number is 0 or was not handed out yet.
    SequenceNotAllocated,
    /// A sequence number is older than every memtable: its memtable was flushed.
    MemtableFlushed,
    /// The memtable holding a sequence number is sealed: its flush has started.
    MemtableSealed,
    /// The memtable holding a sequence number does not know its range (it was filled by the
    /// log replay at open).
    SequenceRangeUnknown,
}

impl DbInner {
    /// Fails if writes stopped (a background error, or closing).
    fn check_writes_allowed(&self) -> Result<()> {
        if self
            .writes_stopped
            .load(std::sync::atomic::Ordering::Acquire)
        {
            let state = self.state.lock();
            if let Some(e) = &state.bg_error {
                return Err(Error::Closed(format!(
                    "writes stopped after a background error: {e}"
                )));
            }
            if state.shutting_down {
                return Err(Error::Closed("the database is closing".into()));
            }
        }
        Ok(())
    }

    fn insert_unlogged_at_sequence(
        &self,
        batch: &WriteBatch,
        sequences: &[SeqNo],
    ) -> Result<UnloggedInsert> {
        self.check_open()?;
        if sequences.len() != batch.len() {
            return Err(Error::InvalidArgument(format!(
                "unlogged insert of {} entries given {} sequence numbers",
                batch.len(),
                sequences.len()
            )));
        }
        self.validate_batch(batch)?;
        self.check_writes_allowed()?;
        if batch.is_empty() {
            return Ok(UnloggedInsert::Inserted);
        }
        let refuse = |why| {
            EngineCounters::add(&self.counters.unlogged_insert_refusals, 1);
            Ok(UnloggedInsert::Refused(why))
        };
        let allocated = self
            .allocated_sequence
            .load(std::sync::atomic::Ordering::Acquire);
        if sequences.iter().any(|&seq| seq == 0 || seq > allocated) {
            return refuse(UnloggedRefusal::SequenceNotAllocated);
        }
        // Loaded after `allocated`: the memtable holding a number handed out is in this super
        // version (it became active, under the commit lock, before the number was handed out)
        // unless its flush was installed since.
        let current = self.super_version.load();
        // Newest first; ranges are contiguous and descending, so the first memtable whose
        // floor is at or below a number is the one holding it.
        let memtables: Vec<&std::sync::Arc<Memtable>> = std::iter::once(&current.mem)
            .chain(current.imms.iter())
            .collect();
        let mut targets = Vec::with_capacity(sequences.len());
        for &seq in sequences {
            let Some(index) = memtables.iter().position(|m| m.sequence_floor() <= seq) else {
                let known = memtables.iter().all(|m| m.sequence_floor() != SeqNo::MAX);
                return refuse(if known {
                    UnloggedRefusal::MemtableFlushed
                } else {
                    UnloggedRefusal::SequenceRangeUnknown
                });
            };
            if !memtables[index].holds_sequence(seq) {
                return refuse(UnloggedRefusal::SequenceRangeUnknown);
            }
            targets.push(index);
        }
        let mut entered: Vec<usize> = targets.clone();
        entered.sort_unstable();
        entered.dedup();
        for (done, &index) in entered.iter().enumerate() {
            if !memtables[index].begin_unlogged_insert() {
                for &begun in &entered[..done] {
                    memtables[begun].end_unlogged_insert();
                }
                return refuse(UnloggedRefusal::MemtableSealed);
            }
        }
        // Ends the registrations however the inserts end: a flush waiting for a registration
        // that is never ended would wait forever.
        struct Registrations<'a> {
            memtables: &'a [&'a std::sync::Arc<Memtable>],
            entered: &'a [usize],
        }
        impl Drop for Registrations<'_> {
            fn drop(&mut self) {
                for &index in self.entered {
                    self.memtables[index].end_unlogged_insert();
                }
            }
        }
        let registrations = Registrations {
            memtables: &memtables,
            entered: &entered,
        };
        // Every entry decoded (`validate_batch` above), so none is skipped and each gets its
        // own sequence number.
        for ((entry, &seq), &index) in batch.iter().zip(sequences).zip(&targets) {
            let entry = entry.map_err(Error::InvalidArgument)?;
            let value = if entry.kind == ValueKind::Delete {
                &[][..]
            } else {
                entry.value
            };
            memtables[index].add(entry.tree, seq, entry.kind, entry.key, value);
        }
        drop(registrations);
        EngineCounters::add(&self.counters.unlogged_inserts, 1);
        EngineCounters::add(&self.counters.unlogged_insert_entries, batch.len() as u64);
        Ok(UnloggedInsert::Inserted)
    }

    fn write_unthrottled(&self, batch: WriteBatch, sync: bool) -> Result<SeqNo> {
        self.check_open()?;
        self.validate_batch(&batch)?;
        if batch.is_empty() {
            return Ok(self.latest_sequence());
        }
        self.check_writes_allowed()?;
        self.write_internal(batch, sync, None)
    }
}
