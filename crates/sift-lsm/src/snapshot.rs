//! Snapshots: a sequence number that reads see the database as of, kept registered so that
//! compaction preserves every version some snapshot can still see.

use crate::key::SeqNo;
use parking_lot::Mutex;
use std::collections::BTreeMap;
use std::sync::{Arc, Weak};

/// The registry of live snapshots (sequence number -> how many handles hold it).
#[derive(Debug, Default)]
pub struct SnapshotList {
    live: Mutex<BTreeMap<SeqNo, usize>>,
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

    pub fn oldest(&self) -> Option<SeqNo> {
        self.live.lock().keys().next().copied()
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
}
