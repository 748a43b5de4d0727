//! Snapshots: a sequence number that reads see the database as of, kept registered so that
//! compaction preserves every version some snapshot can still see. Also version retentions: a
//! sequence number above which compaction keeps every version (see [`VersionRetention`]).

use crate::key::SeqNo;
use parking_lot::Mutex;
use std::collections::BTreeMap;
use std::sync::{Arc, Weak};

/// The registry of live snapshots (sequence number -> how many handles hold it).
#[derive(Debug, Default)]
pub struct SnapshotList {
    live: Mutex<BTreeMap<SeqNo, usize>>,
    /// Floors of live version retentions (floor -> how many guards hold it).
    retentions: Mutex<BTreeMap<SeqNo, usize>>,
}

impl SnapshotList {
    pub fn acquire(self: &Arc<Self>, seq: SeqNo) -> Snapshot {
        *self.live.lock().entry(seq).or_insert(0) += 1;
        Snapshot {
            inner: Arc::new(SnapshotInner {
                seq,
                list: Arc::downgrade(self),
            }),
        }
    }

    /// Sequence numbers of live snapshots, ascending.
    pub fn sequences(&self) -> Vec<SeqNo> {
        self.live.lock().keys().copied().collect()
    }

    #[cfg(test)]
    pub fn oldest(&self) -> Option<SeqNo> {
        self.live.lock().keys().next().copied()
    }

    /// Registers a retention of every version above `floor` (and of the newest at or below it).
    pub fn retain_above(self: &Arc<Self>, floor: SeqNo) -> VersionRetention {
        *self.retentions.lock().entry(floor).or_insert(0) += 1;
        VersionRetention {
            floor,
            list: Arc::downgrade(self),
        }
    }

    /// The lowest floor of the live retentions: compaction keeps every version above it.
    pub fn retention_floor(&self) -> Option<SeqNo> {
        self.retentions.lock().keys().next().copied()
    }

    fn release(&self, seq: SeqNo) {
        let mut live = self.live.lock();
        if let Some(n) = live.get_mut(&seq) {
            *n -= 1;
            if *n == 0 {
                live.remove(&seq);
            }
        }
    }
}

#[derive(Debug)]
struct SnapshotInner {
    seq: SeqNo,
    list: Weak<SnapshotList>,
}

impl Drop for SnapshotInner {
    fn drop(&mut self) {
        if let Some(list) = self.list.upgrade() {
            list.release(self.seq);
        }
    }
}

/// A consistent read view. Cheap to clone; released when the last clone drops.
#[derive(Debug, Clone)]
pub struct Snapshot {
    inner: Arc<SnapshotInner>,
}

impl Snapshot {
    /// Reads at this snapshot see every write with a sequence number `<=` this.
    pub fn sequence(&self) -> SeqNo {
        self.inner.seq
    }
}

/// While alive, flushes and compactions keep every version with a sequence number above
/// `floor`, and for each key the newest version at or below it: as if there were a snapshot at
/// `floor` and at every sequence number above it. A layer that must be able to look at the
/// versions written since some durable point of its own (say, to redo work after a crash)
/// holds one; releasing it (drop) lets later jobs drop those versions again.
///
/// Jobs read the floor when they start, so a retention registered while a job runs protects
/// only from the next job on: register it before the versions it protects can be shadowed
/// (for instance while compactions are paused at open, `Options::compactions_paused_at_open`).
#[derive(Debug)]
pub struct VersionRetention {
    floor: SeqNo,
    list: Weak<SnapshotList>,
}

impl VersionRetention {
    /// Versions above this sequence number are kept.
    pub fn floor(&self) -> SeqNo {
        self.floor
    }
}

impl Drop for VersionRetention {
    fn drop(&mut self) {
        if let Some(list) = self.list.upgrade() {
            let mut retentions = list.retentions.lock();
            if let Some(n) = retentions.get_mut(&self.floor) {
                *n -= 1;
                if *n == 0 {
                    retentions.remove(&self.floor);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn snapshots_register_and_release() {
        let list = Arc::new(SnapshotList::default());
        let a = list.acquire(5);
        let b = list.acquire(5);
        let c = list.acquire(9);
        assert_eq!(list.sequences(), vec![5, 9]);
        drop(a);
        assert_eq!(list.oldest(), Some(5));
        drop(b);
        assert_eq!(list.sequences(), vec![9]);
        let c2 = c.clone();
        drop(c);
        assert_eq!(list.sequences(), vec![9]);
        drop(c2);
        assert!(list.sequences().is_empty());
    }

    #[test]
    fn retentions_register_and_release_the_lowest_floor() {
        let list = Arc::new(SnapshotList::default());
        assert_eq!(list.retention_floor(), None);
        let high = list.retain_above(20);
        let low = list.retain_above(7);
        let low_again = list.retain_above(7);
        assert_eq!(list.retention_floor(), Some(7));
        assert_eq!(low.floor(), 7);
        drop(low);
        assert_eq!(
            list.retention_floor(),
            Some(7),
            "another guard still holds 7"
        );
        drop(low_again);
        assert_eq!(list.retention_floor(), Some(20));
        drop(high);
        assert_eq!(list.retention_floor(), None);
        assert!(list.sequences().is_empty(), "retentions are not snapshots");
    }
}
