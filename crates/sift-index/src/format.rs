//! The byte layouts this layer writes, as codecs and constants: for tools that read Sift's
//! files and for the tests that hold the code to its specs (`docs/format/index-encodings.md`,
//! `secondary-index-blocks.md`, `embedded-index.md`). Using a database needs none of this.

pub use crate::deferred::{deferred_key, split_deferred_key, MARKER_FILE, PENDING_PREFIX};
pub use crate::document::{DocumentParser, IndexedAttribute, ParsedDocument};
pub use crate::embedded::collector::{
    bloom_may_contain, bloom_probes, build_bloom, value_hash,
    COLLECTOR_NAME as EMBEDDED_COLLECTOR_NAME,
};
pub use crate::encoding::{
    checked_range_bounds, composite_key, decode_pk, decode_value, encode_pk, encode_value,
    encode_value_to_vec, float_from_order_bits, float_order_bits, prefix_successor, range_bounds,
    split_composite_key, value_bounds, value_prefix, zorder, zorder_cell, GeoCell,
};
pub use crate::envelope::{Envelope, EnvelopeRef, RawAttr, ENVELOPE_MAGIC, ENVELOPE_VERSION};
pub use crate::memory::snapshot::{SNAPSHOT_FORMAT_VERSION, SNAPSHOT_MAGIC};
pub use crate::next::format::{
    decode_directory, decode_secondary_block, CHECKSUMMED_SECONDARY_TAG,
    COLLECTOR_NAME as NEXT_COLLECTOR_NAME,
};
pub use crate::postings::{decode_postings, encode_postings, Posting, POSTING_MERGE_OPERATOR_NAME};
pub use crate::zorder::{lat_of_cell, lon_of_cell, quantize_lat, quantize_lon};
