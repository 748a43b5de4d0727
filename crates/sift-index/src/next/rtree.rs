//! The global index of a `next` index on a geo attribute: an R-tree (the `rstar` crate) over
//! the bounding rectangles of every live file's secondary blocks, one item per block (NEXT
//! §3.2: "for multi-dimensional values … an R-tree"). Files come and go whole, as the version
//! listener reports them; a box search finds the blocks whose rectangle meets the box, edges
//! included (rstar's envelope intersection is closed).

use super::format::DirectoryEntry;
use super::global::{BlockRef, GlobalIndex, Region};
use crate::geo::GeoBox;
use rstar::primitives::{GeomWithData, Rectangle};
use rstar::{RTree, AABB};
use std::collections::HashMap;

type Item = GeomWithData<Rectangle<[f64; 2]>, BlockRef>;

/// R-tree of secondary blocks; see the module documentation.
#[derive(Debug, Default)]
pub(crate) struct RTreeIndex {
    tree: RTree<Item>,
    /// Each file's blocks in directory order (what was inserted, so removal finds the same
    /// items and the invariant check can compare with the directories).
    files: HashMap<u64, Vec<DirectoryEntry>>,
    /// Bytes of the values kept in `files`.
    heap_bytes: usize,
}

/// The rectangle of a block (the whole world if it has none, which no collector writes: such
/// a block is then never pruned).
fn rectangle(block: &DirectoryEntry) -> Rectangle<[f64; 2]> {
    let rect = block.rect.unwrap_or(GeoBox {
        min_lon: -180.0,
        min_lat: -90.0,
        max_lon: 180.0,
        max_lat: 90.0,
    });
    Rectangle::from_corners([rect.min_lon, rect.min_lat], [rect.max_lon, rect.max_lat])
}

fn item(file_number: u64, position: usize, block: &DirectoryEntry) -> Item {
    GeomWithData::new(
        rectangle(block),
        BlockRef {
            file_number,
            block: u32::try_from(position).unwrap_or(u32::MAX),
            seq_max: block.seq_max,
        },
    )
}

/// Allocator bookkeeping charged per allocation.
const ALLOCATION_OVERHEAD_BYTES: usize = 16;

fn entry_heap_bytes(block: &DirectoryEntry) -> usize {
    block.min.len() + block.max.len() + 2 * ALLOCATION_OVERHEAD_BYTES
}

impl RTreeIndex {
    pub fn new() -> RTreeIndex {
        RTreeIndex::default()
    }
}

impl GlobalIndex for RTreeIndex {
    fn insert_file(&mut self, file_number: u64, blocks: &[DirectoryEntry]) {
        self.remove_file(file_number);
        for (position, block) in blocks.iter().enumerate() {
            self.tree.insert(item(file_number, position, block));
            self.heap_bytes += entry_heap_bytes(block);
        }
        self.files.insert(file_number, blocks.to_vec());
    }

    fn remove_file(&mut self, file_number: u64) -> bool {
        let Some(blocks) = self.files.remove(&file_number) else {
            return false;
        };
        for (position, block) in blocks.iter().enumerate() {
            // The item inserted for this block, bit for bit, so `remove` finds it. A miss
            // would leave the tree larger than the files' blocks, which the invariant check
            // (`len` against the directories) reports.
            self.tree.remove(&item(file_number, position, block));
            self.heap_bytes -= entry_heap_bytes(block);
        }
        true
    }

    fn contains_file(&self, file_number: u64) -> bool {
        self.files.contains_key(&file_number)
    }

    fn search(&mut self, region: &Region<'_>, visit: &mut dyn FnMut(BlockRef)) {
        match region {
            Region::Within(geo_box) => {
                let envelope = AABB::from_corners(
                    [geo_box.min_lon, geo_box.min_lat],
                    [geo_box.max_lon, geo_box.max_lat],
                );
                for found in self.tree.locate_in_envelope_intersecting(&envelope) {
                    visit(found.data);
                }
            }
            // Not a 2-D question: every block may answer it.
            Region::Range { .. } => {
                for found in &self.tree {
                    visit(found.data);
                }
            }
        }
    }

    fn file_blocks(&self, file_number: u64) -> Option<Vec<DirectoryEntry>> {
        self.files.get(&file_number).cloned()
    }

    fn file_numbers(&self) -> Vec<u64> {
        let mut numbers: Vec<u64> = self.files.keys().copied().collect();
        numbers.sort_unstable();
        numbers
    }

    /// Items in the R-tree itself (not the per-file lists), so the invariant check sees a
    /// tree that drifted from them.
    fn len(&self) -> usize {
        self.tree.size()
    }

    fn memory_bytes(&self) -> usize {
        // An R-tree node holds up to 6 children; with inner nodes and slack, about 1.5 node
        // slots per item.
        let tree = self.tree.size() * std::mem::size_of::<rstar::RTreeNode<Item>>() * 3 / 2;
        let lists = self
            .files
            .values()
            .map(|blocks| blocks.capacity() * std::mem::size_of::<DirectoryEntry>())
            .sum::<usize>();
        tree + lists
            + self.heap_bytes
            + self.files.capacity() * (std::mem::size_of::<(u64, Vec<DirectoryEntry>)>() + 8)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};

    fn block(rng: &mut StdRng) -> DirectoryEntry {
        // On a coarse grid, so rectangles and boxes often share edges.
        let mut axis = |limit: i32| {
            let a = f64::from(rng.gen_range(-limit..=limit));
            let b = f64::from(rng.gen_range(-limit..=limit));
            (a.min(b), a.max(b))
        };
        let (min_lon, max_lon) = axis(18);
        let (min_lat, max_lat) = axis(9);
        DirectoryEntry {
            min: vec![1],
            max: vec![2],
            entries: 1,
            seq_max: rng.gen_range(1..1000),
            rect: Some(GeoBox {
                min_lon: min_lon * 10.0,
                min_lat: min_lat * 10.0,
                max_lon: max_lon * 10.0,
                max_lat: max_lat * 10.0,
            }),
        }
    }

    #[test]
    fn search_matches_brute_force_edges_included() {
        let seed: u64 = rand::thread_rng().gen();
        let mut rng = StdRng::seed_from_u64(seed);
        let mut index = RTreeIndex::new();
        let mut model: HashMap<u64, Vec<DirectoryEntry>> = HashMap::new();
        for round in 0..300 {
            if rng.gen_bool(0.6) || model.is_empty() {
                let file = rng.gen_range(0..40u64);
                let blocks: Vec<DirectoryEntry> =
                    (0..rng.gen_range(0..5)).map(|_| block(&mut rng)).collect();
                index.insert_file(file, &blocks);
                model.insert(file, blocks);
            } else {
                let file = *model.keys().next().unwrap();
                assert!(index.remove_file(file));
                model.remove(&file);
            }
            let query = block(&mut rng).rect.unwrap();
            let mut got = Vec::new();
            index.search(&Region::Within(&query), &mut |b| got.push(b));
            got.sort();
            let mut want = Vec::new();
            for (file, blocks) in &model {
                for (i, b) in blocks.iter().enumerate() {
                    let r = b.rect.unwrap();
                    let meets = r.min_lon <= query.max_lon
                        && query.min_lon <= r.max_lon
                        && r.min_lat <= query.max_lat
                        && query.min_lat <= r.max_lat;
                    if meets {
                        want.push(BlockRef {
                            file_number: *file,
                            block: i as u32,
                            seq_max: b.seq_max,
                        });
                    }
                }
            }
            want.sort();
            assert_eq!(got, want, "seed {seed} round {round}");
            let total: usize = model.values().map(Vec::len).sum();
            assert_eq!(index.len(), total, "seed {seed} round {round}");
            for (file, blocks) in &model {
                assert_eq!(index.file_blocks(*file).as_ref(), Some(blocks));
            }
        }
    }
}
