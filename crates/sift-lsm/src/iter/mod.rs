//! Iterators that combine components: merging (`MergingIterator`), level-concatenating
//! (`LevelIterator`), and the user-facing `DbIterator` that resolves versions, deletes and
//! merge operands at a snapshot.

mod db_iter;
mod level;
mod merging;

pub use db_iter::DbIterator;
pub use level::LevelIterator;
pub use merging::MergingIterator;

#[cfg(test)]
pub(crate) mod test_support;
