//! The memtable: a concurrent skiplist of internal keys of all trees.
