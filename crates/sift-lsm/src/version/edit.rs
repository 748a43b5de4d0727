//! Version edits: the records of the manifest (`docs/format/manifest.md`).
