//! Iterators that combine components: merging, level (concatenating), and the user-facing
//! `DbIterator`.

/// The user-facing iterator (placeholder until the iterator module lands).
pub struct DbIterator {
    _private: (),
}
