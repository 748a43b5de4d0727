//! SCAN cursors. Redis clients parse a cursor as an integer and send it back, possibly on
//! another connection of their pool; Sift's scan position is a key. So the server hands out
//! numbers and remembers, for each, the key the next page starts at. The table is bounded:
//! the oldest cursors are forgotten first, and a forgotten cursor is an error, never a silent
//! restart (which would return keys twice).

use std::collections::{HashMap, VecDeque};

use parking_lot::Mutex;

/// Cursors remembered at most.
pub const CURSORS_MAX: usize = 100_000;

/// The table.
#[derive(Debug, Default)]
pub struct Cursors {
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    next: u64,
    positions: HashMap<u64, Vec<u8>>,
    /// Cursor numbers, oldest first (numbers already used are skipped when forgetting).
    order: VecDeque<u64>,
}

impl Cursors {
    /// A cursor for a scan to resume at `position`.
    pub fn save(&self, position: Vec<u8>) -> u64 {
        let mut state = self.state.lock();
        // 0 means "start" and "done"; numbers grow, so a client never gets one back twice.
        state.next += 1;
        let cursor = state.next;
        state.positions.insert(cursor, position);
        state.order.push_back(cursor);
        while state.positions.len() > CURSORS_MAX {
            if let Some(oldest) = state.order.pop_front() {
                state.positions.remove(&oldest);
            }
        }
        // Entries already taken by `take` linger in `order`; drop them once they dominate.
        if state.order.len() > 2 * CURSORS_MAX {
            let State {
                order, positions, ..
            } = &mut *state;
            order.retain(|cursor| positions.contains_key(cursor));
        }
        cursor
    }

    /// Where cursor `cursor` resumes (the cursor is used up), or `None` if it is unknown.
    pub fn take(&self, cursor: u64) -> Option<Vec<u8>> {
        self.state.lock().positions.remove(&cursor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cursor_resumes_once_and_the_oldest_are_forgotten_first() {
        let cursors = Cursors::default();
        let first = cursors.save(b"a".to_vec());
        assert_ne!(first, 0);
        assert_eq!(cursors.take(first), Some(b"a".to_vec()));
        assert_eq!(cursors.take(first), None);
        let numbers: Vec<u64> = (0..CURSORS_MAX + 10)
            .map(|i| cursors.save(i.to_string().into_bytes()))
            .collect();
        assert_eq!(
            cursors.take(numbers[5]),
            None,
            "among the oldest: forgotten"
        );
        assert_eq!(cursors.take(numbers[10]), Some(b"10".to_vec()));
        assert_eq!(
            cursors.take(*numbers.last().expect("saved")),
            Some((CURSORS_MAX + 9).to_string().into_bytes())
        );
    }
}
