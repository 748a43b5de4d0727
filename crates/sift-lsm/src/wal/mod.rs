//! The write-ahead log (`docs/format/wal.md`): record framing shared with the manifest.
