//! `LevelIterator`: concatenates the sorted, non-overlapping files of one level, opening each
//! file's iterator only when the scan reaches it, and skipping files a block filter rules out.

use crate::extension::BlockFilter;
use crate::iterator::{EmptyIterator, InternalIterator};
use crate::key::compare_internal_keys;
use crate::stats::ReadStats;
use crate::version::FileMetaData;
use crate::Result;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;

/// Opens the iterator of one table file.
pub type OpenTable =
    Arc<dyn Fn(&Arc<FileMetaData>) -> Result<Box<dyn InternalIterator>> + Send + Sync>;

/// What the filter said about a file, decided at most once per iterator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum FilterVerdict {
    Unknown,
    Read,
    Skip,
}

pub struct LevelIterator {
    /// Sorted by smallest key; ranges do not overlap.
    files: Vec<Arc<FileMetaData>>,
    open: OpenTable,
    filter: Option<Arc<dyn BlockFilter>>,
    stats: Option<Arc<ReadStats>>,
    verdicts: Vec<FilterVerdict>,
    /// The iterator of the open file (`EmptyIterator` if none) and the file's index in `files`.
    current: Box<dyn InternalIterator>,
    current_index: Option<usize>,
}

impl LevelIterator {
    pub fn new(
        files: Vec<Arc<FileMetaData>>,
        open: OpenTable,
        filter: Option<Arc<dyn BlockFilter>>,
        stats: Option<Arc<ReadStats>>,
    ) -> Self {
        let verdicts = vec![FilterVerdict::Unknown; files.len()];
        LevelIterator {
            files,
            open,
            filter,
            stats,
            verdicts,
            current: Box::new(EmptyIterator),
            current_index: None,
        }
    }

    /// Whether the scan must read file `index` (asks the filter once, counting skips).
    fn must_read(&mut self, index: usize) -> bool {
        if self.verdicts[index] == FilterVerdict::Unknown {
            let read = self
                .filter
                .as_ref()
                .is_none_or(|f| f.table_may_match(&self.files[index].properties()));
            self.verdicts[index] = if read {
                FilterVerdict::Read
            } else {
                if let Some(stats) = &self.stats {
                    stats.tables_skipped.fetch_add(1, Relaxed);
                }
                FilterVerdict::Skip
            };
        }
        self.verdicts[index] == FilterVerdict::Read
    }

    /// Makes file `index` the current one, reusing its iterator if it is already open.
    fn open_file(&mut self, index: usize) -> Result<&mut dyn InternalIterator> {
        if self.current_index != Some(index) {
            // Release the previous file before opening the next one.
            self.invalidate();
            self.current = (self.open)(&self.files[index])?;
            self.current_index = Some(index);
        }
        Ok(self.current.as_mut())
    }

    fn invalidate(&mut self) {
        self.current = Box::new(EmptyIterator);
        self.current_index = None;
    }

    /// Positions at the first entry of the first readable file at or after `index`.
    fn forward_from(&mut self, mut index: usize) -> Result<()> {
        while index < self.files.len() {
            if self.must_read(index) {
                let iterator = self.open_file(index)?;
                iterator.seek_to_first()?;
                if iterator.valid() {
                    return Ok(());
                }
            }
            index += 1;
        }
        self.invalidate();
        Ok(())
    }

    /// Positions at the last entry of the last readable file at or before `index`
    /// (`None` = before the first file).
    fn backward_from(&mut self, mut index: Option<usize>) -> Result<()> {
        while let Some(i) = index {
            if self.must_read(i) {
                let iterator = self.open_file(i)?;
                iterator.seek_to_last()?;
                if iterator.valid() {
                    return Ok(());
                }
            }
            index = i.checked_sub(1);
        }
        self.invalidate();
        Ok(())
    }

    /// Runs `step`, leaving the iterator invalid if it fails.
    fn guarded(&mut self, step: impl FnOnce(&mut Self) -> Result<()>) -> Result<()> {
        let result = step(self);
        if result.is_err() {
            self.invalidate();
        }
        result
    }
}

impl InternalIterator for LevelIterator {
    fn valid(&self) -> bool {
        self.current.valid()
    }

    fn seek_to_first(&mut self) -> Result<()> {
        self.guarded(|this| this.forward_from(0))
    }

    fn seek_to_last(&mut self) -> Result<()> {
        self.guarded(|this| this.backward_from(this.files.len().checked_sub(1)))
    }

    fn seek(&mut self, target: &[u8]) -> Result<()> {
        self.guarded(|this| {
            // The first file whose largest key is >= target holds the answer, if any does.
            let index = this
                .files
                .partition_point(|f| compare_internal_keys(&f.largest, target).is_lt());
            if index < this.files.len() && this.must_read(index) {
                let iterator = this.open_file(index)?;
                iterator.seek(target)?;
                if iterator.valid() {
                    return Ok(());
                }
            }
            this.forward_from(index + 1)
        })
    }

    fn seek_for_prev(&mut self, target: &[u8]) -> Result<()> {
        self.guarded(|this| {
            // The last file whose smallest key is <= target holds the answer, if any does.
            let count = this
                .files
                .partition_point(|f| compare_internal_keys(&f.smallest, target).is_le());
            let Some(index) = count.checked_sub(1) else {
                this.invalidate();
                return Ok(());
            };
            if this.must_read(index) {
                let iterator = this.open_file(index)?;
                iterator.seek_for_prev(target)?;
                if iterator.valid() {
                    return Ok(());
                }
            }
            this.backward_from(index.checked_sub(1))
        })
    }

    fn next(&mut self) -> Result<()> {
        self.guarded(|this| {
            let Some(index) = this.current_index else {
                return Ok(());
            };
            this.current.next()?;
            if this.current.valid() {
                return Ok(());
            }
            this.forward_from(index + 1)
        })
    }

    fn prev(&mut self) -> Result<()> {
        self.guarded(|this| {
            let Some(index) = this.current_index else {
                return Ok(());
            };
            this.current.prev()?;
            if this.current.valid() {
                return Ok(());
            }
            this.backward_from(index.checked_sub(1))
        })
    }

    fn key(&self) -> &[u8] {
        self.current.key()
    }

    fn value(&self) -> &[u8] {
        self.current.value()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::extension::Properties;
    use crate::iter::test_support::{check_internal_iterator, random_versions, seed, Entries};
    use crate::iterator::VecIterator;
    use crate::key::{make_seek_key, SEQ_MAX};
    use crate::Error;
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};
    use std::collections::HashMap;
    use std::sync::atomic::AtomicUsize;

    const PARITY: &str = "parity";

    /// Splits sorted `data` into consecutive non-empty files numbered from 1; each file's
    /// `parity` property is its number modulo 2.
    fn make_level(
        rng: &mut StdRng,
        data: &Entries,
    ) -> (Vec<Arc<FileMetaData>>, HashMap<u64, Entries>) {
        let mut files = Vec::new();
        let mut contents = HashMap::new();
        let mut rest = data.as_slice();
        let mut number = 1u64;
        while !rest.is_empty() {
            let take = rng.gen_range(1..=rest.len().min(25));
            let (chunk, tail) = rest.split_at(take);
            rest = tail;
            files.push(Arc::new(FileMetaData::new(
                number,
                100,
                chunk[0].0.clone(),
                chunk[take - 1].0.clone(),
                0,
                0,
                take as u64,
                0,
                vec![PARITY.to_owned()],
                vec![vec![(number % 2) as u8]],
            )));
            contents.insert(number, chunk.to_vec());
            number += 1;
        }
        (files, contents)
    }

    fn opener(contents: HashMap<u64, Entries>, opens: Arc<AtomicUsize>) -> OpenTable {
        Arc::new(move |file: &Arc<FileMetaData>| {
            opens.fetch_add(1, Relaxed);
            let entries = contents.get(&file.number).cloned().ok_or_else(|| {
                Error::corruption(crate::version::table_file_name(file.number), 0, "missing")
            })?;
            Ok(Box::new(VecIterator::new(entries)) as Box<dyn InternalIterator>)
        })
    }

    /// Reads only files with an even number.
    struct EvenFiles;
    impl BlockFilter for EvenFiles {
        fn table_may_match(&self, properties: &Properties<'_>) -> bool {
            properties.get(PARITY) == Some(&[0][..])
        }
        fn block_may_match(&self, _properties: &Properties<'_>) -> bool {
            true
        }
    }

    #[test]
    fn matches_flat_data_under_random_moves() {
        let seed = seed();
        println!("level iterator test seed {seed} (replay with SIFT_SEED={seed})");
        let mut rng = StdRng::seed_from_u64(seed);
        for trial in 0..30 {
            let key_space = rng.gen_range(1..80);
            let count = rng.gen_range(0..300);
            let data = random_versions(&mut rng, key_space, count);
            let (files, contents) = make_level(&mut rng, &data);
            let opens = Arc::new(AtomicUsize::new(0));
            let mut iterator =
                LevelIterator::new(files, opener(contents, Arc::clone(&opens)), None, None);
            assert!(!iterator.valid());
            assert_eq!(opens.load(Relaxed), 0, "files open lazily");
            let context = format!("seed {seed} trial {trial}");
            check_internal_iterator(&mut rng, &mut iterator, &data, key_space, 400, &context);
        }
    }

    #[test]
    fn seek_opens_only_the_file_it_lands_in() {
        let mut rng = StdRng::seed_from_u64(7);
        let data = random_versions(&mut rng, 200, 400);
        let (files, contents) = make_level(&mut rng, &data);
        assert!(files.len() > 3);
        let opens = Arc::new(AtomicUsize::new(0));
        let middle = Arc::clone(&files[files.len() / 2]);
        let mut iterator =
            LevelIterator::new(files, opener(contents, Arc::clone(&opens)), None, None);
        iterator.seek(&middle.smallest).unwrap();
        assert_eq!(iterator.key(), middle.smallest.as_slice());
        assert_eq!(opens.load(Relaxed), 1);
        // Seeking again inside the same file reuses its iterator.
        iterator.seek_for_prev(&middle.largest).unwrap();
        assert_eq!(iterator.key(), middle.largest.as_slice());
        assert_eq!(opens.load(Relaxed), 1);
    }

    #[test]
    fn filter_skips_files_and_counts_them_once() {
        let seed = seed();
        println!("level filter test seed {seed} (replay with SIFT_SEED={seed})");
        let mut rng = StdRng::seed_from_u64(seed);
        let key_space = 100;
        let data = random_versions(&mut rng, key_space, 400);
        let (files, contents) = make_level(&mut rng, &data);
        let odd_files = files.iter().filter(|f| f.number % 2 == 1).count() as u64;
        let expected: Entries = files
            .iter()
            .filter(|f| f.number % 2 == 0)
            .flat_map(|f| contents[&f.number].clone())
            .collect();
        let opens = Arc::new(AtomicUsize::new(0));
        let stats = Arc::new(ReadStats::default());
        let filter: Arc<dyn BlockFilter> = Arc::new(EvenFiles);
        let mut iterator = LevelIterator::new(
            files,
            opener(contents, Arc::clone(&opens)),
            Some(filter),
            Some(Arc::clone(&stats)),
        );
        let context = format!("seed {seed}");
        check_internal_iterator(
            &mut rng,
            &mut iterator,
            &expected,
            key_space,
            2000,
            &context,
        );
        // A full scan in both directions visits every file; each skipped file counts once.
        for backward in [false, true] {
            let mut seen = 0;
            if backward {
                iterator.seek_to_last().unwrap();
            } else {
                iterator.seek_to_first().unwrap();
            }
            while iterator.valid() {
                seen += 1;
                if backward {
                    iterator.prev().unwrap();
                } else {
                    iterator.next().unwrap();
                }
            }
            assert_eq!(seen, expected.len(), "{context}");
        }
        assert_eq!(stats.tables_skipped.load(Relaxed), odd_files, "{context}");
        iterator.seek(&make_seek_key(b"", SEQ_MAX)).unwrap();
        assert_eq!(stats.tables_skipped.load(Relaxed), odd_files, "{context}");
    }

    #[test]
    fn open_error_propagates_and_invalidates() {
        let mut rng = StdRng::seed_from_u64(3);
        let data = random_versions(&mut rng, 50, 100);
        let (files, mut contents) = make_level(&mut rng, &data);
        assert!(files.len() >= 2);
        contents.remove(&files[1].number);
        let mut iterator = LevelIterator::new(
            files,
            opener(contents, Arc::new(AtomicUsize::new(0))),
            None,
            None,
        );
        iterator.seek_to_first().unwrap();
        let mut result = Ok(());
        while iterator.valid() && result.is_ok() {
            result = iterator.next();
        }
        let error = result.unwrap_err();
        assert!(error.is_corruption(), "{error}");
        assert!(!iterator.valid());
    }
}
