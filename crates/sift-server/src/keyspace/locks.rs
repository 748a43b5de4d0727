//! Striped key locks: commands that read a key and then write it (HSET, DEL, JSON.SET NX, …)
//! hold its stripe, so two clients' read-modify-writes of one key never interleave. Redis
//! gets this from running one command at a time; Sift runs commands in parallel.

use parking_lot::{Mutex, MutexGuard};

/// Stripes: enough that unrelated keys rarely share one.
const STRIPES: usize = 1024;

/// The lock table.
#[derive(Debug)]
pub struct KeyLocks {
    stripes: Vec<Mutex<()>>,
}

/// Held stripes; dropping it releases them.
#[derive(Debug)]
pub struct KeyGuard<'a> {
    _guards: Vec<MutexGuard<'a, ()>>,
}

impl KeyLocks {
    /// A table of unlocked stripes.
    pub fn new() -> KeyLocks {
        KeyLocks {
            stripes: (0..STRIPES).map(|_| Mutex::new(())).collect(),
        }
    }

    /// Locks the stripes of `keys`, in stripe order (so two multi-key commands cannot
    /// deadlock), each once.
    pub fn lock<'a, K: AsRef<[u8]>>(&'a self, keys: &[K]) -> KeyGuard<'a> {
        let mut stripes: Vec<usize> = keys.iter().map(|key| stripe_of(key.as_ref())).collect();
        stripes.sort_unstable();
        stripes.dedup();
        KeyGuard {
            _guards: stripes
                .into_iter()
                .map(|stripe| self.stripes[stripe].lock())
                .collect(),
        }
    }

    /// Locks every stripe (FLUSHDB).
    pub fn lock_all(&self) -> KeyGuard<'_> {
        KeyGuard {
            _guards: self.stripes.iter().map(Mutex::lock).collect(),
        }
    }
}

impl Default for KeyLocks {
    fn default() -> Self {
        KeyLocks::new()
    }
}

fn stripe_of(key: &[u8]) -> usize {
    (xxhash_rust::xxh3::xxh3_64(key) % STRIPES as u64) as usize
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn multi_key_locks_taken_in_opposite_orders_do_not_deadlock() {
        let locks = std::sync::Arc::new(KeyLocks::new());
        let threads: Vec<_> = (0..4)
            .map(|thread| {
                let locks = std::sync::Arc::clone(&locks);
                std::thread::spawn(move || {
                    for round in 0..2000 {
                        let a = format!("key{}", round % 7);
                        let b = format!("key{}", (round + 3) % 7);
                        let keys = if thread % 2 == 0 { [a, b] } else { [b, a] };
                        let _guard = locks.lock(&keys);
                    }
                })
            })
            .collect();
        for thread in threads {
            assert!(thread.join().is_ok());
        }
        // Every stripe is free again.
        assert!(locks
            .stripes
            .iter()
            .all(|stripe| stripe.try_lock().is_some()));
    }
}
