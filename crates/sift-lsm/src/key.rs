//! Internal keys: a user key followed by an 8-byte trailer `(sequence << 8) | kind`.
//!
//! Internal keys sort by user key ascending (bytewise), then by trailer descending, so the
//! newest version of a user key comes first. See `docs/format/sstable.md`.

use std::cmp::Ordering;

/// A global, monotonically increasing write sequence number. Only the low 56 bits are usable.
pub type SeqNo = u64;

/// The largest sequence number an entry can carry.
pub const SEQ_MAX: SeqNo = (1 << 56) - 1;

/// Identifies a tree (column family) inside one database.
pub type TreeId = u32;

/// Length of the trailer appended to every user key.
pub const TRAILER_BYTES: usize = 8;

/// What an entry means. The numeric values are part of the on-disk format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u8)]
pub enum ValueKind {
    /// A tombstone.
    Delete = 0,
    /// A value.
    Put = 1,
    /// A merge operand.
    Merge = 2,
}

/// The kind used when building a seek key: the largest kind value, so that a seek to
/// `(user_key, seq)` lands on the first entry with sequence `<= seq`.
pub const KIND_FOR_SEEK: u8 = 0xff;

impl ValueKind {
    /// The kind a stored byte names, if any.
    pub fn from_u8(v: u8) -> Option<ValueKind> {
        match v {
            0 => Some(ValueKind::Delete),
            1 => Some(ValueKind::Put),
            2 => Some(ValueKind::Merge),
            _ => None,
        }
    }
}

pub fn pack_trailer(seq: SeqNo, kind: u8) -> u64 {
    debug_assert!(seq <= SEQ_MAX);
    (seq << 8) | u64::from(kind)
}

/// Appends the internal key `(user_key, seq, kind)` to `dst`.
pub fn append_internal_key(dst: &mut Vec<u8>, user_key: &[u8], seq: SeqNo, kind: ValueKind) {
    dst.extend_from_slice(user_key);
    dst.extend_from_slice(&pack_trailer(seq, kind as u8).to_le_bytes());
}

pub fn make_internal_key(user_key: &[u8], seq: SeqNo, kind: ValueKind) -> Vec<u8> {
    let mut k = Vec::with_capacity(user_key.len() + TRAILER_BYTES);
    append_internal_key(&mut k, user_key, seq, kind);
    k
}

/// The smallest internal key for `user_key` visible at `seq`: seeking to it finds the newest
/// version with sequence `<= seq`.
pub fn make_seek_key(user_key: &[u8], seq: SeqNo) -> Vec<u8> {
    let mut k = Vec::with_capacity(user_key.len() + TRAILER_BYTES);
    k.extend_from_slice(user_key);
    k.extend_from_slice(&pack_trailer(seq, KIND_FOR_SEEK).to_le_bytes());
    k
}

/// A decoded view of an internal key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ParsedKey<'a> {
    pub user_key: &'a [u8],
    pub seq: SeqNo,
    pub kind: ValueKind,
}

/// Splits an internal key; `None` if it is shorter than the trailer or the kind is unknown.
pub fn parse_internal_key(ikey: &[u8]) -> Option<ParsedKey<'_>> {
    let split = ikey.len().checked_sub(TRAILER_BYTES)?;
    let trailer = u64::from_le_bytes(ikey[split..].try_into().ok()?);
    let kind = ValueKind::from_u8((trailer & 0xff) as u8)?;
    Some(ParsedKey {
        user_key: &ikey[..split],
        seq: trailer >> 8,
        kind,
    })
}

/// The user-key part of a well-formed internal key (the whole slice if it is too short).
pub fn user_key(ikey: &[u8]) -> &[u8] {
    &ikey[..ikey.len().saturating_sub(TRAILER_BYTES)]
}

fn trailer(ikey: &[u8]) -> u64 {
    let split = ikey.len().saturating_sub(TRAILER_BYTES);
    ikey.get(split..)
        .and_then(|t| t.try_into().ok())
        .map_or(0, u64::from_le_bytes)
}

/// The order of internal keys: user key ascending, then `(seq, kind)` descending.
pub fn compare_internal_keys(a: &[u8], b: &[u8]) -> Ordering {
    user_key(a)
        .cmp(user_key(b))
        .then_with(|| trailer(b).cmp(&trailer(a)))
}

/// An owned internal key with the internal-key order, for use in ordered maps (memtable).
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg(test)]
pub struct InternalKey(pub Vec<u8>);

#[cfg(test)]
impl Ord for InternalKey {
    fn cmp(&self, other: &Self) -> Ordering {
        compare_internal_keys(&self.0, &other.0)
    }
}

#[cfg(test)]
impl PartialOrd for InternalKey {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn newest_version_sorts_first_and_user_keys_ascend() {
        let a5 = make_internal_key(b"a", 5, ValueKind::Put);
        let a7 = make_internal_key(b"a", 7, ValueKind::Delete);
        let b1 = make_internal_key(b"b", 1, ValueKind::Put);
        let ab = make_internal_key(b"ab", 100, ValueKind::Put);
        assert_eq!(compare_internal_keys(&a7, &a5), Ordering::Less);
        assert_eq!(compare_internal_keys(&a5, &ab), Ordering::Less);
        assert_eq!(compare_internal_keys(&ab, &b1), Ordering::Less);
        // A seek key at 6 sorts after the version at 7 and before the one at 5.
        let seek6 = make_seek_key(b"a", 6);
        assert_eq!(compare_internal_keys(&a7, &seek6), Ordering::Less);
        assert_eq!(compare_internal_keys(&seek6, &a5), Ordering::Less);
    }

    #[test]
    fn parse_round_trip_and_rejects_garbage() {
        let k = make_internal_key(b"key", SEQ_MAX, ValueKind::Merge);
        let p = parse_internal_key(&k).expect("well-formed key parses");
        assert_eq!(
            (p.user_key, p.seq, p.kind),
            (&b"key"[..], SEQ_MAX, ValueKind::Merge)
        );
        assert!(parse_internal_key(b"short").is_none());
        let mut bad = make_internal_key(b"k", 1, ValueKind::Put);
        let n = bad.len();
        bad[n - 8] = 9; // unknown kind
        assert!(parse_internal_key(&bad).is_none());
    }
}
