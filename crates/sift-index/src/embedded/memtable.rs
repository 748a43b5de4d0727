//! The in-memory ordered map of recent writes of one `embedded` index (LevelDB++ keeps a
//! B-tree per memtable): `(encoded value, seq) → pk` for every put that carries the
//! attribute, so queries find memtable candidates without scanning the memtables.
//!
//! Instead of one map per engine memtable, one map holds the writes by sequence number and
//! forgets those a flush of the primary tree has put into a table: memtables are filled in
//! sequence order, so after a flush whose file's largest sequence number is `S`, every write
//! `<= S` is in tables. `pruned_through` is the largest sequence number forgotten (or never
//! recorded: writes made before the map existed, or of a failed batch). A query that sees a
//! tree state whose tables do not yet reach `pruned_through` cannot trust the map and scans
//! its memtables instead (see `query.rs`), so answers stay exact whatever the timing.

use parking_lot::Mutex;
use sift_lsm::SeqNo;
use std::collections::{BTreeMap, VecDeque};
use std::ops::Bound;
use std::sync::Arc;

/// Bookkeeping bytes charged per entry on top of the value and pk bytes (node and deque slot
/// overhead, roughly).
const ENTRY_OVERHEAD_BYTES: usize = 64;

/// `(encoded value, seq)`: a map key.
type ValueSeq = (Arc<[u8]>, SeqNo);

#[derive(Debug, Default)]
struct Maps {
    by_value: BTreeMap<ValueSeq, Box<[u8]>>,
    /// In increasing sequence order (writes are recorded under the database's write lock).
    by_seq: VecDeque<(SeqNo, Arc<[u8]>)>,
    pruned_through: SeqNo,
    bytes: usize,
}

#[derive(Debug, Default)]
pub struct MemtableMap {
    maps: Mutex<Maps>,
}

impl MemtableMap {
    /// Records a put of `pk` at `seq` carrying `value`. Called before the write reaches the
    /// engine, so no query can see the version without the map knowing it.
    pub fn insert(&self, value: &[u8], seq: SeqNo, pk: &[u8]) {
        let mut maps = self.maps.lock();
        if seq <= maps.pruned_through {
            return;
        }
        let value: Arc<[u8]> = Arc::from(value);
        maps.bytes += value.len() + pk.len() + ENTRY_OVERHEAD_BYTES;
        maps.by_value
            .insert((Arc::clone(&value), seq), Box::from(pk));
        if maps.by_seq.back().is_some_and(|(last, _)| *last > seq) {
            // Out of order (only the rebuild at open does this): keep the deque sorted.
            let at = maps.by_seq.partition_point(|(s, _)| *s < seq);
            maps.by_seq.insert(at, (seq, value));
        } else {
            maps.by_seq.push_back((seq, value));
        }
    }

    /// Forgets every write `<= seq` (they are in tables now, or cannot be trusted).
    pub fn prune_through(&self, seq: SeqNo) {
        let mut maps = self.maps.lock();
        let maps = &mut *maps;
        if seq <= maps.pruned_through {
            return;
        }
        maps.pruned_through = seq;
        while maps.by_seq.front().is_some_and(|(s, _)| *s <= seq) {
            if let Some((s, value)) = maps.by_seq.pop_front() {
                if let Some(pk) = maps.by_value.remove(&(Arc::clone(&value), s)) {
                    maps.bytes = maps
                        .bytes
                        .saturating_sub(value.len() + pk.len() + ENTRY_OVERHEAD_BYTES);
                }
            }
        }
    }

    /// `(seq, pk)` of the recorded writes with encoded value in `[start, end)` and sequence
    /// number in `(above, through]`, and the map's `pruned_through`, read together.
    pub fn candidates(
        &self,
        start: &[u8],
        end: Option<&[u8]>,
        above: SeqNo,
        through: SeqNo,
    ) -> (Vec<(SeqNo, Vec<u8>)>, SeqNo) {
        let maps = self.maps.lock();
        let from: Arc<[u8]> = Arc::from(start);
        let found = maps
            .by_value
            .range((Bound::Included((from, 0)), Bound::Unbounded))
            .take_while(|((value, _), _)| end.is_none_or(|end| &**value < end))
            .filter(|((_, seq), _)| *seq > above && *seq <= through)
            .map(|((_, seq), pk)| (*seq, pk.to_vec()))
            .collect();
        (found, maps.pruned_through)
    }

    pub fn pruned_through(&self) -> SeqNo {
        self.maps.lock().pruned_through
    }

    pub fn len(&self) -> usize {
        self.maps.lock().by_value.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Approximate heap bytes held.
    pub fn memory_bytes(&self) -> u64 {
        self.maps.lock().bytes as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn candidates_prune_and_order() {
        let map = MemtableMap::default();
        map.insert(b"b", 1, b"p1");
        map.insert(b"a", 2, b"p2");
        map.insert(b"b", 3, b"p3");
        map.insert(b"c", 4, b"p4");
        let (found, pruned) = map.candidates(b"b", Some(b"c"), 0, 10);
        assert_eq!(found, vec![(1, b"p1".to_vec()), (3, b"p3".to_vec())]);
        assert_eq!(pruned, 0);
        assert_eq!(map.candidates(b"a", None, 1, 3).0.len(), 2);
        map.prune_through(2);
        assert_eq!(map.len(), 2);
        assert_eq!(map.pruned_through(), 2);
        let (found, pruned) = map.candidates(b"", None, 0, 10);
        assert_eq!(found.len(), 2);
        assert_eq!(pruned, 2);
        // Writes at or below the pruned sequence are not recorded again.
        map.insert(b"z", 2, b"late");
        assert_eq!(map.len(), 2);
        map.prune_through(100);
        assert!(map.is_empty());
        assert_eq!(map.memory_bytes(), 0);
    }

    #[test]
    fn out_of_order_inserts_stay_prunable() {
        let map = MemtableMap::default();
        map.insert(b"a", 5, b"x");
        map.insert(b"a", 3, b"y");
        map.insert(b"a", 4, b"z");
        map.prune_through(4);
        assert_eq!(
            map.candidates(b"a", None, 0, 10).0,
            vec![(5, b"x".to_vec())]
        );
    }
}
