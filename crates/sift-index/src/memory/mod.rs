//! The `memory` index kind: an ordered map `(encoded value, pk) -> seq` plus a hash map
//! `pk -> (encoded value, seq)`, maintained under the write path. Saved to a snapshot at clean
//! close and loaded from it at open, or rebuilt by scanning the collection
//! (`memory/snapshot.rs`).

mod kind;
pub mod snapshot;

use parking_lot::{Mutex, RwLock};
use sift_lsm::SeqNo;
use snapshot::MemoryIndexOrigin;
use std::collections::{BTreeMap, HashMap};
use std::ops::Bound;

/// Bookkeeping bytes charged per entry on top of keys (tree node and hash slot overhead,
/// roughly).
const ENTRY_OVERHEAD_BYTES: usize = 96;

#[derive(Debug, Default)]
struct Maps {
    by_value: BTreeMap<(Vec<u8>, Vec<u8>), SeqNo>,
    by_pk: HashMap<Vec<u8>, (Vec<u8>, SeqNo)>,
    key_bytes: usize,
}

#[derive(Debug, Default)]
pub struct MemoryIndex {
    maps: RwLock<Maps>,
    /// How the contents were obtained at open (or by `create_index`).
    origin: Mutex<MemoryIndexOrigin>,
}

impl MemoryIndex {
    /// Records that `pk`'s live version is `seq` carrying `value` (`None`: deleted or not
    /// carrying the attribute).
    pub fn set(&self, pk: &[u8], value: Option<(&[u8], SeqNo)>) {
        let mut maps = self.maps.write();
        let maps = &mut *maps;
        if let Some((old_value, _)) = maps.by_pk.remove(pk) {
            maps.key_bytes -= 2 * pk.len() + 2 * old_value.len();
            maps.by_value.remove(&(old_value, pk.to_vec()));
        }
        if let Some((value, seq)) = value {
            maps.key_bytes += 2 * pk.len() + 2 * value.len();
            maps.by_value.insert((value.to_vec(), pk.to_vec()), seq);
            maps.by_pk.insert(pk.to_vec(), (value.to_vec(), seq));
        }
    }

    /// Entries with encoded value in `[start, end)` (`end == None`: unbounded), as
    /// `(seq, pk)`.
    pub fn candidates(&self, start: &[u8], end: Option<&[u8]>) -> Vec<(SeqNo, Vec<u8>)> {
        let maps = self.maps.read();
        maps.by_value
            .range((
                Bound::Included((start.to_vec(), Vec::new())),
                Bound::Unbounded,
            ))
            .take_while(|((value, _), _)| end.is_none_or(|end| value.as_slice() < end))
            .map(|((_, pk), seq)| (*seq, pk.clone()))
            .collect()
    }

    /// Entries with encoded value in `[start, end)` (`end == None`: unbounded), as
    /// `(encoded value, pk, seq)`.
    pub fn entries_in(&self, start: &[u8], end: Option<&[u8]>) -> Vec<(Vec<u8>, Vec<u8>, SeqNo)> {
        let maps = self.maps.read();
        maps.by_value
            .range((
                Bound::Included((start.to_vec(), Vec::new())),
                Bound::Unbounded,
            ))
            .take_while(|((value, _), _)| end.is_none_or(|end| value.as_slice() < end))
            .map(|((value, pk), seq)| (value.clone(), pk.clone(), *seq))
            .collect()
    }

    /// Calls `visit(pk, encoded value, seq)` for every entry, in value order, under the read
    /// lock (writers wait meanwhile).
    pub fn for_each_entry(&self, mut visit: impl FnMut(&[u8], &[u8], SeqNo)) {
        let maps = self.maps.read();
        for ((value, pk), seq) in &maps.by_value {
            visit(pk, value, *seq);
        }
    }

    /// Empties the maps.
    pub fn clear(&self) {
        *self.maps.write() = Maps::default();
    }

    pub fn origin(&self) -> MemoryIndexOrigin {
        self.origin.lock().clone()
    }

    pub(crate) fn set_origin(&self, origin: MemoryIndexOrigin) {
        *self.origin.lock() = origin;
    }

    /// Approximate heap bytes held.
    pub fn memory_bytes(&self) -> u64 {
        let maps = self.maps.read();
        (maps.key_bytes + maps.by_pk.len() * ENTRY_OVERHEAD_BYTES) as u64
    }

    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.maps.read().by_pk.len()
    }

    #[cfg(test)]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}
