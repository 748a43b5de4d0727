//! The stored form of a document: `header | attribute values | document JSON bytes`.
//!
//! A document's JSON is parsed once, at write time; the indexed attribute values are stored
//! beside it, typed and pre-encoded, so that compaction filters, collectors and query
//! validation read them without parsing JSON. Decoding validates the header and every value
//! once; afterwards the accessors of [`EnvelopeRef`] cannot fail. Byte layout:
//! `docs/format/index-encodings.md`.

use crate::encoding::{decode_value, encode_value, FIXED_VALUE_BYTES};
use crate::error::{IndexError, Result};
use crate::value::{AttrType, AttrValue};

/// First byte of every envelope. Not a byte that can start JSON text, so a raw JSON value
/// stored by mistake is caught at once.
pub const ENVELOPE_MAGIC: u8 = 0xE5;
/// Format version written by this code and the only one it reads.
pub const ENVELOPE_VERSION: u8 = 1;
/// Magic byte and version byte.
pub const ENVELOPE_FIXED_HEADER_BYTES: usize = 2;

/// An envelope being built (or fully decoded).
#[derive(Debug, Clone, PartialEq)]
pub struct Envelope {
    /// Attribute id and value. [`Envelope::encode`] writes them in increasing id order; if an id
    /// occurs twice, the first occurrence (in this vector) is kept.
    pub attrs: Vec<(u32, AttrValue)>,
    /// The JSON text as given by the user.
    pub doc: Vec<u8>,
}

impl Envelope {
    /// The stored bytes (`docs/format/index-encodings.md`).
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.doc.len() + 16 + self.attrs.len() * 16);
        self.encode_into(&mut out);
        out
    }

    /// Appends the encoded envelope to `out`.
    pub fn encode_into(&self, out: &mut Vec<u8>) {
        out.reserve(self.doc.len() + 3 + self.attrs.len() * 16);
        out.push(ENVELOPE_MAGIC);
        out.push(ENVELOPE_VERSION);
        // The parser gives the attributes in increasing id order: no sorted copy needed then.
        if self.attrs.windows(2).all(|pair| pair[0].0 < pair[1].0) {
            put_varint32(out, self.attrs.len() as u32);
            for (id, value) in &self.attrs {
                put_attr(out, *id, value);
            }
        } else {
            let mut sorted: Vec<&(u32, AttrValue)> = self.attrs.iter().collect();
            sorted.sort_by_key(|(id, _)| *id); // stable: the first of equal ids stays first
            sorted.dedup_by_key(|(id, _)| *id);
            put_varint32(out, sorted.len() as u32);
            for (id, value) in sorted {
                put_attr(out, *id, value);
            }
        }
        out.extend_from_slice(&self.doc);
    }

    /// Decodes and validates `bytes`; see [`EnvelopeRef`].
    pub fn decode(bytes: &[u8]) -> Result<EnvelopeRef<'_>> {
        EnvelopeRef::decode(bytes)
    }
}

/// One attribute of a decoded envelope, borrowing its encoded value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RawAttr<'a> {
    /// The attribute id (the index's `attr_id`).
    pub id: u32,
    /// Its type.
    pub attr_type: AttrType,
    /// The value's memcomparable encoding (see [`crate::encoding::encode_value`]); equal values
    /// have equal encodings, so collectors can compare these bytes without decoding.
    pub encoded: &'a [u8],
}

impl RawAttr<'_> {
    /// The decoded value.
    pub fn value(&self) -> Result<AttrValue> {
        decode_value(self.encoded, self.attr_type).map(|(value, _)| value)
    }
}

/// A validated view of an encoded envelope. The JSON bytes are not parsed.
#[derive(Debug, Clone, Copy)]
pub struct EnvelopeRef<'a> {
    /// The attribute records, from just after the count to the start of the document.
    attr_bytes: &'a [u8],
    attr_count: usize,
    doc: &'a [u8],
    doc_offset: usize,
}

impl<'a> EnvelopeRef<'a> {
    /// Validates the header and every attribute record (ids strictly increasing, known type
    /// bytes, lengths within the input, canonical value encodings that fill their length
    /// exactly). Any problem is [`IndexError::Corrupt`] with the offset inside `bytes`.
    pub fn decode(bytes: &'a [u8]) -> Result<EnvelopeRef<'a>> {
        // The usual envelope of a collection with one int or time index (see
        // `validated_attr_encoded`): its one record is the whole of what the general pass checks.
        if let [ENVELOPE_MAGIC, ENVELOPE_VERSION, 1, record_id, type_byte, length, rest @ ..] =
            bytes
        {
            if *record_id < 0x80
                && usize::from(*length) == FIXED_VALUE_BYTES
                && is_fixed_integer_type_byte(*type_byte)
                && rest.len() >= FIXED_VALUE_BYTES
            {
                const DOC_OFFSET: usize = ENVELOPE_FIXED_HEADER_BYTES + 1 + 3 + FIXED_VALUE_BYTES;
                return Ok(EnvelopeRef {
                    attr_bytes: &bytes[ENVELOPE_FIXED_HEADER_BYTES + 1..DOC_OFFSET],
                    attr_count: 1,
                    doc: &bytes[DOC_OFFSET..],
                    doc_offset: DOC_OFFSET,
                });
            }
        }
        Self::decode_general(bytes)
    }

    /// [`EnvelopeRef::decode`] for every envelope.
    #[inline(never)]
    fn decode_general(bytes: &'a [u8]) -> Result<EnvelopeRef<'a>> {
        Self::decode_visiting(bytes, |_| {})
    }

    /// Validates `bytes` as [`EnvelopeRef::decode`] does and returns the encoded value of
    /// attribute `id` (`None`: the envelope does not carry it), found during the validating pass
    /// (the table collectors read one attribute of every version they see; a second walk of the
    /// records would cost as much as the validation).
    #[inline]
    pub fn validated_attr_encoded(bytes: &'a [u8], id: u32) -> Result<Option<&'a [u8]>> {
        // The usual envelope of a collection with one int or time index: header, count 1, one
        // fixed-width record of one-byte id. Those bytes are the whole of what the general pass
        // validates for it (a fixed-width integer is canonical whatever its bits).
        if let [ENVELOPE_MAGIC, ENVELOPE_VERSION, 1, record_id, type_byte, length, rest @ ..] =
            bytes
        {
            if u32::from(*record_id) == id
                && *record_id < 0x80
                && usize::from(*length) == FIXED_VALUE_BYTES
                && is_fixed_integer_type_byte(*type_byte)
            {
                if let Some(value) = rest.get(..FIXED_VALUE_BYTES) {
                    return Ok(Some(value));
                }
            }
        }
        Self::validated_attr_encoded_general(bytes, id)
    }

    /// [`EnvelopeRef::validated_attr_encoded`] for every envelope.
    #[inline(never)]
    fn validated_attr_encoded_general(bytes: &'a [u8], id: u32) -> Result<Option<&'a [u8]>> {
        let mut found = None;
        Self::decode_visiting(bytes, |attr| {
            if attr.id == id {
                found = Some(attr.encoded);
            }
        })?;
        Ok(found)
    }

    /// The decoding of [`EnvelopeRef::decode`], calling `visit` with each valid attribute.
    #[inline]
    fn decode_visiting(
        bytes: &'a [u8],
        mut visit: impl FnMut(&RawAttr<'a>),
    ) -> Result<EnvelopeRef<'a>> {
        match bytes.first() {
            None => return Err(IndexError::corrupt(0, "empty envelope")),
            Some(&ENVELOPE_MAGIC) => {}
            Some(other) => {
                return Err(IndexError::corrupt(
                    0,
                    format!(
                        "envelope magic byte is 0x{other:02X}, expected 0x{ENVELOPE_MAGIC:02X}"
                    ),
                ))
            }
        }
        match bytes.get(1) {
            None => {
                return Err(IndexError::corrupt(
                    1,
                    "envelope ends before its version byte",
                ))
            }
            Some(&ENVELOPE_VERSION) => {}
            Some(other) => {
                return Err(IndexError::corrupt(
                    1,
                    format!(
                    "unsupported envelope version {other} (this build reads {ENVELOPE_VERSION})"
                ),
                ))
            }
        }
        let mut pos = ENVELOPE_FIXED_HEADER_BYTES;
        let (count, count_bytes) = get_varint32(&bytes[pos..])
            .ok_or_else(|| IndexError::corrupt(pos, "bad attribute count varint"))?;
        pos += count_bytes;
        let attrs_start = pos;
        let mut previous_id: Option<u32> = None;
        for index in 0..count {
            // A fixed-width int or time record of one-byte id (the usual one) is read in place;
            // `parse_attr` reads the same from it, and every other record.
            let (attr, next) = match bytes.get(pos..pos + 3 + FIXED_VALUE_BYTES) {
                Some([id, type_byte, length, value @ ..])
                    if *id < 0x80
                        && usize::from(*length) == FIXED_VALUE_BYTES
                        && is_fixed_integer_type_byte(*type_byte) =>
                {
                    let attr_type = if *type_byte == AttrType::Int.type_byte() {
                        AttrType::Int
                    } else {
                        AttrType::Time
                    };
                    let attr = RawAttr {
                        id: u32::from(*id),
                        attr_type,
                        encoded: value,
                    };
                    (attr, pos + 3 + FIXED_VALUE_BYTES)
                }
                _ => parse_attr(bytes, pos)?,
            };
            if previous_id.is_some_and(|previous| attr.id <= previous) {
                return Err(IndexError::corrupt(
                    pos,
                    format!(
                        "attribute {index} has id {} after id {previous_id:?}; ids must increase",
                        attr.id
                    ),
                ));
            }
            let value_offset = next - attr.encoded.len();
            // Fixed-width integers are canonical whatever their bits: their length is the
            // whole check (anything else takes the full decoding and its error message).
            let fixed_integer = matches!(attr.attr_type, AttrType::Int | AttrType::Time)
                && attr.encoded.len() == FIXED_VALUE_BYTES;
            let consumed = if fixed_integer {
                FIXED_VALUE_BYTES
            } else {
                decode_value(attr.encoded, attr.attr_type)
                    .map_err(|e| e.shift_offset(value_offset))?
                    .1
            };
            if consumed != attr.encoded.len() {
                return Err(IndexError::corrupt(
                    value_offset + consumed,
                    format!(
                        "attribute {} value is {consumed} bytes but its length says {}",
                        attr.id,
                        attr.encoded.len()
                    ),
                ));
            }
            previous_id = Some(attr.id);
            visit(&attr);
            pos = next;
        }
        Ok(EnvelopeRef {
            attr_bytes: &bytes[attrs_start..pos],
            attr_count: count as usize,
            doc: &bytes[pos..],
            doc_offset: pos,
        })
    }

    /// Attributes in the envelope.
    pub fn attr_count(&self) -> usize {
        self.attr_count
    }

    /// The attributes in increasing id order.
    pub fn attrs(&self) -> Attrs<'a> {
        Attrs {
            bytes: self.attr_bytes,
            pos: 0,
        }
    }

    /// Attribute `id`, still encoded, if the envelope has it.
    pub fn raw_attr(&self, id: u32) -> Option<RawAttr<'a>> {
        self.attrs()
            .take_while(|attr| attr.id <= id)
            .find(|attr| attr.id == id)
    }

    /// The value of attribute `id`, or `None` if the document does not carry it (absent from the
    /// document, or stored unindexed).
    pub fn attr(&self, id: u32) -> Option<AttrValue> {
        self.raw_attr(id).and_then(|attr| attr.value().ok())
    }

    /// The encoded value of attribute `id`, without decoding it.
    #[inline]
    pub fn attr_encoded(&self, id: u32) -> Option<&'a [u8]> {
        // The usual first record, a fixed-width int or time of one-byte id (validated by
        // `decode`): its value without walking the records.
        if let [record_id, type_byte, length, rest @ ..] = self.attr_bytes {
            if u32::from(*record_id) == id
                && *record_id < 0x80
                && usize::from(*length) == FIXED_VALUE_BYTES
                && is_fixed_integer_type_byte(*type_byte)
            {
                return rest.get(..FIXED_VALUE_BYTES);
            }
        }
        self.raw_attr(id).map(|attr| attr.encoded)
    }

    /// The document's JSON text as given at write time (not parsed here).
    pub fn doc(&self) -> &'a [u8] {
        self.doc
    }

    /// Where the JSON text starts inside the envelope bytes.
    pub fn doc_offset(&self) -> usize {
        self.doc_offset
    }

    /// An owned copy with decoded values.
    pub fn to_envelope(&self) -> Result<Envelope> {
        let attrs = self
            .attrs()
            .map(|attr| attr.value().map(|value| (attr.id, value)))
            .collect::<Result<_>>()?;
        Ok(Envelope {
            attrs,
            doc: self.doc.to_vec(),
        })
    }
}

/// Whether `type_byte` is that of `int` or `time` (fixed-width values, canonical whatever their
/// bits).
#[inline]
fn is_fixed_integer_type_byte(type_byte: u8) -> bool {
    type_byte == AttrType::Int.type_byte() || type_byte == AttrType::Time.type_byte()
}

/// Iterator over the attributes of an [`EnvelopeRef`]. The records were validated by
/// [`EnvelopeRef::decode`], so parsing here cannot fail; if it somehow did, iteration stops.
#[derive(Debug, Clone)]
pub struct Attrs<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl<'a> Iterator for Attrs<'a> {
    type Item = RawAttr<'a>;

    fn next(&mut self) -> Option<RawAttr<'a>> {
        if self.pos >= self.bytes.len() {
            return None;
        }
        if let Ok((attr, next)) = parse_attr(self.bytes, self.pos) {
            self.pos = next;
            Some(attr)
        } else {
            self.pos = self.bytes.len();
            None
        }
    }
}

/// Parses the attribute record at `pos` of `bytes`: id varint, type byte, length varint, value.
/// Returns it and the position after it. Offsets in errors are positions in `bytes`.
#[inline]
fn parse_attr(bytes: &[u8], pos: usize) -> Result<(RawAttr<'_>, usize)> {
    let mut at = pos;
    let (id, id_bytes) = get_varint32(&bytes[at..])
        .ok_or_else(|| IndexError::corrupt(at, "bad attribute id varint"))?;
    at += id_bytes;
    let type_byte = *bytes.get(at).ok_or_else(|| {
        IndexError::corrupt(at, format!("attribute {id} ends before its type byte"))
    })?;
    let attr_type = AttrType::from_type_byte(type_byte).ok_or_else(|| {
        IndexError::corrupt(
            at,
            format!("attribute {id} has unknown type byte {type_byte}"),
        )
    })?;
    at += 1;
    let (length, length_bytes) = get_varint32(&bytes[at..]).ok_or_else(|| {
        IndexError::corrupt(at, format!("attribute {id} has a bad length varint"))
    })?;
    at += length_bytes;
    let end = at
        .checked_add(length as usize)
        .filter(|&end| end <= bytes.len())
        .ok_or_else(|| {
            IndexError::corrupt(
                at,
                format!(
                    "attribute {id} value of {length} bytes runs past the end ({} bytes left)",
                    bytes.len() - at
                ),
            )
        })?;
    Ok((
        RawAttr {
            id,
            attr_type,
            encoded: &bytes[at..end],
        },
        end,
    ))
}

/// Unsigned LEB128, as everywhere in Sift: 7 bits per byte, low groups first.
/// Appends one attribute record: id, type byte, length, encoded value. The value is encoded in
/// place after a one-byte length, which is widened in the rare case it does not fit.
#[inline]
pub(crate) fn put_attr(out: &mut Vec<u8>, id: u32, value: &AttrValue) {
    // An int or time of one-byte id (the usual record): its 11 bytes in one copy.
    if let (AttrValue::Int(v) | AttrValue::Time(v), Ok(id @ 0..0x80)) = (value, u8::try_from(id)) {
        let mut record = [0u8; 3 + FIXED_VALUE_BYTES];
        record[0] = id;
        record[1] = value.attr_type().type_byte();
        record[2] = FIXED_VALUE_BYTES as u8;
        record[3..].copy_from_slice(&crate::encoding::encode_i64_bytes(*v));
        out.extend_from_slice(&record);
        return;
    }
    put_attr_general(out, id, value);
}

/// [`put_attr`] for every record.
#[inline(never)]
fn put_attr_general(out: &mut Vec<u8>, id: u32, value: &AttrValue) {
    put_varint32(out, id);
    out.push(value.attr_type().type_byte());
    let length_at = out.len();
    out.push(0);
    encode_value(value, out);
    let length = out.len() - length_at - 1;
    if length < 0x80 {
        out[length_at] = length as u8;
    } else {
        let mut varint = Vec::with_capacity(5);
        put_varint32(&mut varint, length as u32);
        out.splice(length_at..=length_at, varint);
    }
}

fn put_varint32(out: &mut Vec<u8>, mut value: u32) {
    while value >= 0x80 {
        out.push((value as u8) | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

/// Decodes a varint that must fit in u32 (at most 5 bytes); `None` if truncated or too large.
#[inline]
fn get_varint32(bytes: &[u8]) -> Option<(u32, usize)> {
    // Ids, counts and lengths are nearly always one byte.
    if let Some(&byte) = bytes.first() {
        if byte < 0x80 {
            return Some((u32::from(byte), 1));
        }
    }
    let mut value: u64 = 0;
    for (index, &byte) in bytes.iter().enumerate().take(5) {
        value |= u64::from(byte & 0x7F) << (7 * index);
        if byte & 0x80 == 0 {
            return Some((u32::try_from(value).ok()?, index + 1));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The one-copy int and time records are the general rule's bytes, for ids around the
    /// one-byte limit and values of every sign and size.
    #[test]
    fn fixed_width_records_are_the_general_bytes() {
        use rand::{Rng, SeedableRng};
        let seed = 0x11_A77_u64;
        let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
        for _ in 0..2000 {
            let id = [0, 1, 0x7F, 0x80, 300, rng.gen()][rng.gen_range(0..6)];
            let v = [0, -1, 1, i64::MIN, i64::MAX, rng.gen()][rng.gen_range(0..6)];
            let value = if rng.gen_bool(0.5) {
                AttrValue::Int(v)
            } else {
                AttrValue::Time(v)
            };
            let mut got = vec![0xEE];
            put_attr(&mut got, id, &value);
            let mut want = vec![0xEE];
            put_attr_general(&mut want, id, &value);
            assert_eq!(got, want, "seed {seed}: id {id} {value:?}");
        }
    }

    #[test]
    fn varints() {
        for value in [0u32, 1, 127, 128, 300, 16_383, 16_384, u32::MAX] {
            let mut out = Vec::new();
            put_varint32(&mut out, value);
            assert_eq!(get_varint32(&out), Some((value, out.len())));
            assert_eq!(get_varint32(&out[..out.len() - 1]), None);
        }
        assert_eq!(get_varint32(&[0xFF, 0xFF, 0xFF, 0xFF, 0x10]), None); // 2^32 + ...
        assert_eq!(get_varint32(&[0x80, 0x80, 0x80, 0x80, 0x80, 0x00]), None);
    }

    #[test]
    fn layout_of_a_small_envelope() {
        let envelope = Envelope {
            attrs: vec![
                (300, AttrValue::Int(1)),
                (2, AttrValue::String("a".to_string())),
            ],
            doc: b"{}".to_vec(),
        };
        let bytes = envelope.encode();
        let mut expected = vec![ENVELOPE_MAGIC, ENVELOPE_VERSION, 2];
        expected.extend_from_slice(&[2, AttrType::String.type_byte(), 3, b'a', 0x00, 0x01]);
        expected.extend_from_slice(&[
            0xAC,
            0x02,
            AttrType::Int.type_byte(),
            8,
            0x80,
            0,
            0,
            0,
            0,
            0,
            0,
            1,
        ]);
        expected.extend_from_slice(b"{}");
        assert_eq!(bytes, expected);
        let decoded = Envelope::decode(&bytes).unwrap();
        assert_eq!(decoded.attr(300), Some(AttrValue::Int(1)));
        assert_eq!(decoded.attr(2), Some(AttrValue::String("a".to_string())));
        assert_eq!(decoded.attr(3), None);
        assert_eq!(decoded.doc(), b"{}");
        assert_eq!(decoded.doc_offset(), bytes.len() - 2);
    }

    #[test]
    fn duplicate_ids_keep_the_first() {
        let envelope = Envelope {
            attrs: vec![(1, AttrValue::Int(1)), (1, AttrValue::Int(2))],
            doc: Vec::new(),
        };
        let bytes = envelope.encode();
        let decoded = Envelope::decode(&bytes).unwrap();
        assert_eq!(decoded.attr_count(), 1);
        assert_eq!(decoded.attr(1), Some(AttrValue::Int(1)));
    }

    /// The one-record fast path of `validated_attr_encoded` answers as the general pass does,
    /// on envelopes of every shape and on every single-byte change and cut of them.
    #[test]
    fn validated_attr_encoded_fast_path_agrees_with_the_general_pass() {
        use rand::{Rng, SeedableRng};
        let seed = 0xE5_u64;
        let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
        let shapes: Vec<Vec<(u32, AttrValue)>> = vec![
            vec![(1, AttrValue::Int(-7))],
            vec![(3, AttrValue::Time(1_577_836_800_000))],
            vec![(200, AttrValue::Int(5))],
            vec![(1, AttrValue::String("ab".to_string()))],
            vec![(1, AttrValue::Float(1.5))],
            vec![(1, AttrValue::Int(5)), (2, AttrValue::Int(6))],
            vec![],
        ];
        let same = |bytes: &[u8], id: u32| {
            let fast = EnvelopeRef::validated_attr_encoded(bytes, id);
            let general = EnvelopeRef::validated_attr_encoded_general(bytes, id);
            match (&fast, &general) {
                (Ok(a), Ok(b)) => assert_eq!(a, b, "seed {seed}: {bytes:?} id {id}"),
                (Err(a), Err(b)) => assert_eq!(a.to_string(), b.to_string(), "seed {seed}"),
                _ => panic!("seed {seed}: {bytes:?} id {id}: {fast:?} vs {general:?}"),
            }
            // `decode`'s one-record fast path, against the general pass.
            let view = |envelope: &EnvelopeRef<'_>| {
                (
                    envelope.attr_bytes.to_vec(),
                    envelope.attr_count,
                    envelope.doc.to_vec(),
                    envelope.doc_offset,
                )
            };
            match (
                EnvelopeRef::decode(bytes),
                EnvelopeRef::decode_general(bytes),
            ) {
                (Ok(a), Ok(b)) => assert_eq!(view(&a), view(&b), "seed {seed}: {bytes:?}"),
                (Err(a), Err(b)) => assert_eq!(a.to_string(), b.to_string(), "seed {seed}"),
                (a, b) => panic!("seed {seed}: {bytes:?}: {a:?} vs {b:?}"),
            }
            if let Ok(decoded) = EnvelopeRef::decode(bytes) {
                // `attr_encoded`'s first-record fast path, against the walk of the records.
                assert_eq!(
                    decoded.attr_encoded(id),
                    decoded.raw_attr(id).map(|attr| attr.encoded),
                    "seed {seed}: {bytes:?} id {id}"
                );
                assert_eq!(
                    fast.as_ref().ok().copied().flatten(),
                    decoded.attr_encoded(id)
                );
            }
            fast.is_ok_and(|found| found.is_some())
        };
        let mut found = 0;
        for attrs in shapes {
            let good = Envelope {
                attrs,
                doc: b"{\"a\":1}".to_vec(),
            }
            .encode();
            for id in [1, 2, 3, 200] {
                if same(&good, id) {
                    found += 1;
                }
                for cut in 0..good.len() {
                    same(&good[..cut], id);
                }
                for _ in 0..400 {
                    let mut bad = good.clone();
                    let position = rng.gen_range(0..bad.len().min(20));
                    bad[position] = if rng.gen_bool(0.5) {
                        rng.gen()
                    } else {
                        rng.gen_range(0..12)
                    };
                    same(&bad, id);
                }
            }
        }
        assert!(found >= 6, "only {found} envelopes carried the attribute");
        // `decode`'s in-place reading of a fixed-width record is what `parse_attr` reads.
        for id in 0..0x80u8 {
            for attr_type in [AttrType::Int, AttrType::Time] {
                let mut record = vec![id, attr_type.type_byte(), 8];
                record.extend((0..8).map(|_| rng.gen::<u8>()));
                let (attr, next) = parse_attr(&record, 0).unwrap();
                assert_eq!((attr.id, attr.attr_type), (u32::from(id), attr_type));
                assert_eq!((attr.encoded, next), (&record[3..], record.len()));
                let envelope =
                    [&[ENVELOPE_MAGIC, ENVELOPE_VERSION, 1][..], &record, b"{}"].concat();
                let decoded = EnvelopeRef::decode(&envelope).unwrap();
                assert_eq!(decoded.attrs().collect::<Vec<_>>(), vec![attr]);
                assert_eq!(decoded.doc(), b"{}");
            }
        }
    }

    #[test]
    fn specific_corruptions_report_offsets() {
        let good = Envelope {
            attrs: vec![(1, AttrValue::Int(5)), (2, AttrValue::Int(6))],
            doc: b"{}".to_vec(),
        }
        .encode();
        let corrupt_offset = |bytes: &[u8]| match Envelope::decode(bytes) {
            Err(IndexError::Corrupt { offset, .. }) => offset,
            other => panic!("expected Corrupt, got {other:?}"),
        };
        let mut bad_magic = good.clone();
        bad_magic[0] = b'{';
        assert_eq!(corrupt_offset(&bad_magic), 0);
        let mut bad_version = good.clone();
        bad_version[1] = 2;
        assert_eq!(corrupt_offset(&bad_version), 1);
        let mut bad_type = good.clone();
        bad_type[4] = 9;
        assert_eq!(corrupt_offset(&bad_type), 4);
        let mut decreasing_ids = good.clone();
        decreasing_ids[3 + 11] = 1; // second record's id
        assert_eq!(corrupt_offset(&decreasing_ids), 14);
        let mut short_length = good.clone();
        short_length[5] = 7; // int value needs 8 bytes
        assert_eq!(corrupt_offset(&short_length), 6);
    }
}
