//! `MergingIterator`: one sorted, bidirectional view over several sorted children.
//!
//! Follows LevelDB's MergingIterator: a heap of the valid children keyed by their current
//! internal key (a min-heap going forward, a max-heap going backward). When the direction
//! changes, every child other than the current one is repositioned relative to the current key,
//! so that all children sit on the same side of it.

use crate::iterator::InternalIterator;
use crate::key::compare_internal_keys;
use crate::Result;
use std::cmp::Ordering;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Direction {
    Forward,
    Reverse,
}

/// Merges children ordered newest component first. Equal internal keys cannot occur (sequence
/// numbers are unique); if they did, the child with the lower index comes first going forward.
pub struct MergingIterator {
    children: Vec<Box<dyn InternalIterator>>,
    /// Indexes of the valid children, as a binary heap whose top (index 0) is the current child.
    heap: Vec<usize>,
    direction: Direction,
    /// The current key, copied while children are repositioned on a direction change.
    saved_key: Vec<u8>,
}

impl MergingIterator {
    pub fn new(children: Vec<Box<dyn InternalIterator>>) -> Self {
        let heap = Vec::with_capacity(children.len());
        MergingIterator {
            children,
            heap,
            direction: Direction::Forward,
            saved_key: Vec::new(),
        }
    }

    /// Whether child `a` belongs above child `b` in the heap.
    fn above(
        children: &[Box<dyn InternalIterator>],
        direction: Direction,
        a: usize,
        b: usize,
    ) -> bool {
        let order = compare_internal_keys(children[a].key(), children[b].key()).then(a.cmp(&b));
        match direction {
            Direction::Forward => order == Ordering::Less,
            Direction::Reverse => order == Ordering::Greater,
        }
    }

    fn sift_down(&mut self, mut position: usize) {
        let count = self.heap.len();
        loop {
            let left = 2 * position + 1;
            if left >= count {
                return;
            }
            let right = left + 1;
            let mut best = left;
            if right < count
                && Self::above(
                    &self.children,
                    self.direction,
                    self.heap[right],
                    self.heap[left],
                )
            {
                best = right;
            }
            if !Self::above(
                &self.children,
                self.direction,
                self.heap[best],
                self.heap[position],
            ) {
                return;
            }
            self.heap.swap(position, best);
            position = best;
        }
    }

    /// Rebuilds the heap from every valid child, for the current direction.
    fn rebuild_heap(&mut self) {
        self.heap.clear();
        self.heap
            .extend((0..self.children.len()).filter(|&i| self.children[i].valid()));
        for position in (0..self.heap.len() / 2).rev() {
            self.sift_down(position);
        }
    }

    /// The top child moved: restore the heap order (or drop it if it ran out).
    fn top_moved(&mut self) {
        let Some(&top) = self.heap.first() else {
            return;
        };
        if self.children[top].valid() {
            self.sift_down(0);
        } else {
            self.heap.swap_remove(0);
            self.sift_down(0);
        }
    }

    /// Runs a positioning step on every child and rebuilds the heap for `direction`. On error
    /// the iterator becomes invalid.
    fn position_all(
        &mut self,
        direction: Direction,
        mut step: impl FnMut(&mut dyn InternalIterator) -> Result<()>,
    ) -> Result<()> {
        self.direction = direction;
        for child in &mut self.children {
            if let Err(error) = step(child.as_mut()) {
                self.heap.clear();
                return Err(error);
            }
        }
        self.rebuild_heap();
        Ok(())
    }

    fn fail(&mut self, error: crate::Error) -> crate::Error {
        self.heap.clear();
        error
    }

    /// Moves every non-current child to the first entry after the current key.
    fn switch_to_forward(&mut self) -> Result<()> {
        let current = self.heap[0];
        self.saved_key.clear();
        self.saved_key
            .extend_from_slice(self.children[current].key());
        for (index, child) in self.children.iter_mut().enumerate() {
            if index == current {
                continue;
            }
            child.seek(&self.saved_key)?;
            if child.valid() && compare_internal_keys(child.key(), &self.saved_key).is_eq() {
                child.next()?;
            }
        }
        self.direction = Direction::Forward;
        self.rebuild_heap();
        Ok(())
    }

    /// Moves every non-current child to the last entry before the current key.
    fn switch_to_reverse(&mut self) -> Result<()> {
        let current = self.heap[0];
        self.saved_key.clear();
        self.saved_key
            .extend_from_slice(self.children[current].key());
        for (index, child) in self.children.iter_mut().enumerate() {
            if index == current {
                continue;
            }
            child.seek_for_prev(&self.saved_key)?;
            if child.valid() && compare_internal_keys(child.key(), &self.saved_key).is_eq() {
                child.prev()?;
            }
        }
        self.direction = Direction::Reverse;
        self.rebuild_heap();
        Ok(())
    }

    fn current(&self) -> Option<&dyn InternalIterator> {
        self.heap.first().map(|&i| self.children[i].as_ref())
    }
}

impl InternalIterator for MergingIterator {
    fn valid(&self) -> bool {
        !self.heap.is_empty()
    }

    fn seek_to_first(&mut self) -> Result<()> {
        self.position_all(Direction::Forward, |c| c.seek_to_first())
    }

    fn seek_to_last(&mut self) -> Result<()> {
        self.position_all(Direction::Reverse, |c| c.seek_to_last())
    }

    fn seek(&mut self, target: &[u8]) -> Result<()> {
        self.position_all(Direction::Forward, |c| c.seek(target))
    }

    fn seek_for_prev(&mut self, target: &[u8]) -> Result<()> {
        self.position_all(Direction::Reverse, |c| c.seek_for_prev(target))
    }

    fn next(&mut self) -> Result<()> {
        if self.heap.is_empty() {
            return Ok(());
        }
        if self.direction != Direction::Forward {
            // After the switch the current child is still on top: every other child is past
            // the current key.
            self.switch_to_forward().map_err(|e| self.fail(e))?;
        }
        let top = self.heap[0];
        self.children[top].next().map_err(|e| self.fail(e))?;
        self.top_moved();
        Ok(())
    }

    fn prev(&mut self) -> Result<()> {
        if self.heap.is_empty() {
            return Ok(());
        }
        if self.direction != Direction::Reverse {
            self.switch_to_reverse().map_err(|e| self.fail(e))?;
        }
        let top = self.heap[0];
        self.children[top].prev().map_err(|e| self.fail(e))?;
        self.top_moved();
        Ok(())
    }

    fn key(&self) -> &[u8] {
        self.current().map_or(&[], InternalIterator::key)
    }

    fn value(&self) -> &[u8] {
        self.current().map_or(&[], InternalIterator::value)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::iter::test_support::{
        check_internal_iterator, random_versions, seed, split_randomly,
    };
    use crate::iterator::VecIterator;
    use crate::Error;
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};

    fn merged(parts: Vec<Vec<(Vec<u8>, Vec<u8>)>>) -> MergingIterator {
        MergingIterator::new(
            parts
                .into_iter()
                .map(|p| Box::new(VecIterator::new(p)) as Box<dyn InternalIterator>)
                .collect(),
        )
    }

    #[test]
    fn matches_sorted_union_under_random_moves() {
        let seed = seed();
        println!("merging iterator test seed {seed} (replay with SIFT_SEED={seed})");
        let mut rng = StdRng::seed_from_u64(seed);
        for trial in 0..40 {
            let key_space = rng.gen_range(1..60);
            let count = rng.gen_range(0..300);
            let data = random_versions(&mut rng, key_space, count);
            // Up to 20 children, as with many L0 files plus levels; some children are empty.
            let children = rng.gen_range(1..=20);
            let parts = split_randomly(&mut rng, &data, children);
            let mut iterator = merged(parts);
            assert!(!iterator.valid());
            let context = format!("seed {seed} trial {trial} children {children}");
            check_internal_iterator(&mut rng, &mut iterator, &data, key_space, 400, &context);

            // A full scan in each direction.
            let mut forward = Vec::new();
            iterator.seek_to_first().unwrap();
            while iterator.valid() {
                forward.push((iterator.key().to_vec(), iterator.value().to_vec()));
                iterator.next().unwrap();
            }
            assert_eq!(forward, data, "{context}");
            let mut backward = Vec::new();
            iterator.seek_to_last().unwrap();
            while iterator.valid() {
                backward.push((iterator.key().to_vec(), iterator.value().to_vec()));
                iterator.prev().unwrap();
            }
            backward.reverse();
            assert_eq!(backward, data, "{context}");
        }
    }

    /// A child that fails every seek, to check errors propagate and invalidate the merge.
    struct FailingIterator;
    impl InternalIterator for FailingIterator {
        fn valid(&self) -> bool {
            false
        }
        fn seek_to_first(&mut self) -> Result<()> {
            Err(Error::corruption("000009.sst", 42, "bad block"))
        }
        fn seek_to_last(&mut self) -> Result<()> {
            self.seek_to_first()
        }
        fn seek(&mut self, _target: &[u8]) -> Result<()> {
            self.seek_to_first()
        }
        fn seek_for_prev(&mut self, _target: &[u8]) -> Result<()> {
            self.seek_to_first()
        }
        fn next(&mut self) -> Result<()> {
            Ok(())
        }
        fn prev(&mut self) -> Result<()> {
            Ok(())
        }
        fn key(&self) -> &[u8] {
            &[]
        }
        fn value(&self) -> &[u8] {
            &[]
        }
    }

    #[test]
    fn child_error_propagates_and_invalidates() {
        let mut rng = StdRng::seed_from_u64(1);
        let data = random_versions(&mut rng, 10, 20);
        let mut iterator = MergingIterator::new(vec![
            Box::new(VecIterator::new(data.clone())),
            Box::new(FailingIterator),
        ]);
        let error = iterator.seek_to_first().unwrap_err();
        assert!(error.is_corruption());
        assert!(!iterator.valid());
        // Switching direction re-seeks the failing child too.
        let mut iterator = MergingIterator::new(vec![
            Box::new(VecIterator::new(data)),
            Box::new(FailingIterator),
        ]);
        assert!(iterator.children[0].seek_to_first().is_ok());
        iterator.heap = vec![0];
        iterator.direction = Direction::Reverse;
        assert!(iterator.next().is_err());
        assert!(!iterator.valid());
    }
}
