//! The in-memory global index of a `next` index: one entry per secondary block of every live
//! file, keyed by the block's value range, so a query finds the blocks to read without opening
//! any file (NEXT §3.2).
//!
//! [`GlobalIndex`] is the interface (files come and go whole, as the version listener reports
//! them); [`IntervalIndex`] implements it for one-dimensional values: entries sorted by the
//! lower end of their range, with an implicit balanced tree over that order in which every
//! node knows the largest upper end of its subtree (a static interval tree, rebuilt lazily
//! after changes). Geo attributes use [`super::rtree::RTreeIndex`], an R-tree over the
//! blocks' bounding rectangles, behind the same trait; a search names a [`Region`].

use super::format::DirectoryEntry;
use crate::geo::GeoBox;
use std::collections::HashMap;

/// What a search looks for: a range of encoded values (1-D) or a box (geo, edges inside).
#[derive(Debug, Clone, Copy)]
pub(crate) enum Region<'a> {
    /// `[start, end)` of encoded values (`end == None`: unbounded).
    Range {
        start: &'a [u8],
        end: Option<&'a [u8]>,
    },
    Within(&'a GeoBox),
}

/// A secondary block found by a search.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) struct BlockRef {
    pub file_number: u64,
    pub block: u32,
    /// Newest version in the block.
    pub seq_max: u64,
}

pub(crate) trait GlobalIndex: Send + Sync {
    /// Adds every secondary block of a file (directory order). Replaces the file if present.
    fn insert_file(&mut self, file_number: u64, blocks: &[DirectoryEntry]);
    /// Removes a file's blocks; `false` if it was not there.
    fn remove_file(&mut self, file_number: u64) -> bool;
    fn contains_file(&self, file_number: u64) -> bool;
    /// Calls `visit` for each block that may hold a value in `region` (at least every block
    /// whose range or rectangle meets it; a region of the other dimensionality visits all).
    fn search(&mut self, region: &Region<'_>, visit: &mut dyn FnMut(BlockRef));
    /// The blocks of one file, in directory order (for the invariant check).
    fn file_blocks(&self, file_number: u64) -> Option<Vec<DirectoryEntry>>;
    fn file_numbers(&self) -> Vec<u64>;
    /// Number of entries (secondary blocks indexed).
    fn len(&self) -> usize;
    /// Approximate heap bytes held.
    fn memory_bytes(&self) -> usize;
}

#[derive(Debug, Clone)]
struct Entry {
    min: Box<[u8]>,
    max: Box<[u8]>,
    file_number: u64,
    seq_max: u64,
    block: u32,
    entries: u32,
}

/// Sorted-by-min interval index with max augmentation; see the module documentation.
#[derive(Debug, Default)]
pub(crate) struct IntervalIndex {
    entries: Vec<Entry>,
    /// For the implicit tree over `entries[lo..hi]` rooted at `(lo + hi) / 2`: position of
    /// the entry with the largest `max` in that node's subtree.
    subtree_max: Vec<u32>,
    /// Blocks per file.
    files: HashMap<u64, u32>,
    heap_bytes: usize,
    dirty: bool,
}

impl IntervalIndex {
    pub fn new() -> IntervalIndex {
        IntervalIndex::default()
    }

    fn rebuild(&mut self) {
        if !self.dirty {
            return;
        }
        self.entries.sort_unstable_by(|a, b| {
            a.min
                .cmp(&b.min)
                .then(a.file_number.cmp(&b.file_number))
                .then(a.block.cmp(&b.block))
        });
        self.subtree_max = vec![0; self.entries.len()];
        self.build(0, self.entries.len());
        self.dirty = false;
    }

    /// Fills `subtree_max` for the subtree over `lo..hi`; returns its largest-max position.
    fn build(&mut self, lo: usize, hi: usize) -> Option<usize> {
        if lo >= hi {
            return None;
        }
        let mid = lo + (hi - lo) / 2;
        let mut best = mid;
        for child in [self.build(lo, mid), self.build(mid + 1, hi)]
            .into_iter()
            .flatten()
        {
            if self.entries[child].max > self.entries[best].max {
                best = child;
            }
        }
        // Positions fit in u32: a global index of 4 billion blocks would not fit in memory.
        self.subtree_max[mid] = u32::try_from(best).unwrap_or(u32::MAX);
        Some(best)
    }

    fn visit(
        &self,
        lo: usize,
        hi: usize,
        start: &[u8],
        end: Option<&[u8]>,
        visit: &mut dyn FnMut(BlockRef),
    ) {
        if lo >= hi {
            return;
        }
        let mid = lo + (hi - lo) / 2;
        let best = self.subtree_max[mid] as usize;
        if self.entries.get(best).is_none_or(|e| &*e.max < start) {
            return; // nothing in this subtree reaches the query range
        }
        self.visit(lo, mid, start, end, visit);
        let entry = &self.entries[mid];
        if end.is_some_and(|end| &*entry.min >= end) {
            return; // this entry and everything right of it start past the range
        }
        if &*entry.max >= start {
            visit(BlockRef {
                file_number: entry.file_number,
                block: entry.block,
                seq_max: entry.seq_max,
            });
        }
        self.visit(mid + 1, hi, start, end, visit);
    }
}

const ENTRY_BYTES: usize = std::mem::size_of::<Entry>() + std::mem::size_of::<u32>();
/// Allocator bookkeeping charged per boxed slice.
const ALLOCATION_OVERHEAD_BYTES: usize = 16;

impl GlobalIndex for IntervalIndex {
    fn insert_file(&mut self, file_number: u64, blocks: &[DirectoryEntry]) {
        self.remove_file(file_number);
        for (block, entry) in blocks.iter().enumerate() {
            self.heap_bytes += entry.min.len() + entry.max.len() + 2 * ALLOCATION_OVERHEAD_BYTES;
            self.entries.push(Entry {
                min: entry.min.clone().into_boxed_slice(),
                max: entry.max.clone().into_boxed_slice(),
                file_number,
                seq_max: entry.seq_max,
                block: u32::try_from(block).unwrap_or(u32::MAX),
                entries: entry.entries,
            });
        }
        self.files
            .insert(file_number, u32::try_from(blocks.len()).unwrap_or(u32::MAX));
        self.dirty = true;
    }

    fn remove_file(&mut self, file_number: u64) -> bool {
        if self.files.remove(&file_number).is_none() {
            return false;
        }
        let mut freed = 0;
        self.entries.retain(|e| {
            let keep = e.file_number != file_number;
            if !keep {
                freed += e.min.len() + e.max.len() + 2 * ALLOCATION_OVERHEAD_BYTES;
            }
            keep
        });
        self.heap_bytes -= freed;
        self.dirty = true;
        true
    }

    fn contains_file(&self, file_number: u64) -> bool {
        self.files.contains_key(&file_number)
    }

    fn search(&mut self, region: &Region<'_>, visit: &mut dyn FnMut(BlockRef)) {
        self.rebuild();
        let (start, end) = match *region {
            Region::Range { start, end } => (start, end),
            // Not a 1-D question: every block may answer it.
            Region::Within(_) => (&[][..], None),
        };
        self.visit(0, self.entries.len(), start, end, visit);
    }

    fn file_blocks(&self, file_number: u64) -> Option<Vec<DirectoryEntry>> {
        let count = *self.files.get(&file_number)?;
        let mut found: Vec<&Entry> = self
            .entries
            .iter()
            .filter(|e| e.file_number == file_number)
            .collect();
        found.sort_by_key(|e| e.block);
        let blocks: Vec<DirectoryEntry> = found
            .into_iter()
            .map(|e| DirectoryEntry {
                min: e.min.to_vec(),
                max: e.max.to_vec(),
                entries: e.entries,
                seq_max: e.seq_max,
                rect: None,
            })
            .collect();
        (blocks.len() == count as usize).then_some(blocks)
    }

    fn file_numbers(&self) -> Vec<u64> {
        let mut numbers: Vec<u64> = self.files.keys().copied().collect();
        numbers.sort_unstable();
        numbers
    }

    fn len(&self) -> usize {
        self.entries.len()
    }

    fn memory_bytes(&self) -> usize {
        self.entries.capacity() * ENTRY_BYTES
            + self.heap_bytes
            + self.files.capacity() * (std::mem::size_of::<(u64, u32)>() + 8)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};

    #[test]
    fn search_matches_brute_force() {
        let seed: u64 = rand::thread_rng().gen();
        let mut rng = StdRng::seed_from_u64(seed);
        let mut index = IntervalIndex::new();
        let mut model: HashMap<u64, Vec<DirectoryEntry>> = HashMap::new();
        for round in 0..300 {
            if rng.gen_bool(0.6) || model.is_empty() {
                let file = rng.gen_range(0..40u64);
                let mut blocks = Vec::new();
                let mut at = rng.gen_range(0..50u8);
                for _ in 0..rng.gen_range(0..5) {
                    let min = at;
                    let max = min.saturating_add(rng.gen_range(0..20));
                    blocks.push(DirectoryEntry {
                        min: vec![min],
                        max: vec![max],
                        entries: 1,
                        seq_max: u64::from(min),
                        rect: None,
                    });
                    at = max.saturating_add(rng.gen_range(0..10));
                }
                index.insert_file(file, &blocks);
                model.insert(file, blocks);
            } else {
                let file = *model.keys().next().unwrap();
                assert!(index.remove_file(file));
                model.remove(&file);
            }
            let start = vec![rng.gen_range(0..200u8)];
            let end = rng
                .gen_bool(0.8)
                .then(|| vec![start[0].saturating_add(rng.gen_range(0..40))]);
            let mut got = Vec::new();
            let region = Region::Range {
                start: &start,
                end: end.as_deref(),
            };
            index.search(&region, &mut |b| got.push(b));
            got.sort();
            let mut want = Vec::new();
            for (file, blocks) in &model {
                for (i, b) in blocks.iter().enumerate() {
                    if b.max >= start && end.as_ref().is_none_or(|e| &b.min < e) {
                        want.push(BlockRef {
                            file_number: *file,
                            block: i as u32,
                            seq_max: u64::from(b.min[0]),
                        });
                    }
                }
            }
            want.sort();
            assert_eq!(got, want, "seed {seed} round {round}");
            for (file, blocks) in &model {
                assert_eq!(index.file_blocks(*file).as_ref(), Some(blocks));
            }
        }
    }
}
