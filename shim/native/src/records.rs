//! Kafka magic-v2 record sections (the records of one batch, already decompressed).
//!
//! The produce path used to decode every record in Python (`shim/protocol/records.py`
//! `_decode_records`, ~6 µs per record). This walks the same layout in Rust:
//!
//!     length varint | attributes i8 | timestamp_delta varlong | offset_delta varint |
//!     key (varint length, -1 = null) | value (same) | header count varint |
//!     headers (key varint-length UTF-8, value nullable)
//!
//! Contract with the Python reference: a walk that succeeds accepts exactly what the
//! reference accepts and yields the same records. Anything else (a structural error, or a
//! varint whose value does not fit i64, which Python's unbounded ints still accept) answers
//! `None`, and the caller reruns the reference, so error messages and codes stay the
//! reference's own without being duplicated here. Each record is parsed inside its own
//! declared length: the reference reads past it and then fails on `pos != end` (or on a
//! later field), so rejecting earlier rejects the same inputs.

/// Where one record's parts lie in the section (byte ranges are start, length).
pub struct Span {
    pub attributes: u8,
    pub ts_delta: i64,
    pub off_delta: i64,
    pub key: Option<(usize, usize)>,
    pub value: Option<(usize, usize)>,
    pub headers: (usize, usize), // first index into the header list, count
}

pub struct Header {
    pub key: (usize, usize), // valid UTF-8
    pub value: Option<(usize, usize)>,
}

/// A zigzag varint (varlong: at most 10 bytes) at `*pos` of `b`; None if truncated, longer
/// than 10 bytes, or outside i64.
#[inline]
fn varint(b: &[u8], pos: &mut usize) -> Option<i64> {
    let first = *b.get(*pos)?;
    *pos += 1;
    if first < 0x80 {
        // most lengths and deltas fit one byte
        return Some(((first >> 1) as i64) ^ -((first & 1) as i64));
    }
    let mut result = (first & 0x7F) as u128;
    let mut shift = 7;
    for _ in 1..10 {
        let byte = *b.get(*pos)?;
        *pos += 1;
        result |= ((byte & 0x7F) as u128) << shift;
        if byte & 0x80 == 0 {
            if result >> 64 != 0 {
                return None; // Python decodes it to an int beyond i64: let it decide
            }
            let r = result as u64;
            return Some(((r >> 1) as i64) ^ -((r & 1) as i64));
        }
        shift += 7;
    }
    None
}

/// Length-prefixed bytes at `*pos` of the record `r`: Some(None) for a null (-1) when
/// `nullable`, None when invalid.
#[inline]
fn blob(r: &[u8], base: usize, pos: &mut usize, nullable: bool) -> Option<Option<(usize, usize)>> {
    let n = varint(r, pos)?;
    if n < 0 {
        return if n == -1 && nullable {
            Some(None)
        } else {
            None
        };
    }
    let n = n as u64;
    if n > (r.len() - *pos) as u64 {
        return None;
    }
    let start = *pos;
    *pos += n as usize;
    Some(Some((base + start, n as usize)))
}

/// Walk `record_count` records filling `spans` and `headers`; false when the reference
/// must decide (see the module text).
pub fn scan(
    body: &[u8],
    record_count: i64,
    spans: &mut Vec<Span>,
    headers: &mut Vec<Header>,
) -> bool {
    spans.clear();
    headers.clear();
    // The reference's bound: every record takes bytes, so more records than bytes is a lie.
    if record_count < 0 || record_count as u64 > body.len() as u64 {
        return false;
    }
    spans.reserve(record_count as usize);
    let mut pos = 0usize;
    for _ in 0..record_count {
        let Some(length) = varint(body, &mut pos) else {
            return false;
        };
        if length < 0 || length as u64 > (body.len() - pos) as u64 {
            return false;
        }
        let base = pos;
        let r = &body[base..base + length as usize];
        pos = base + r.len();
        match record(r, base, headers) {
            Some(span) => spans.push(span),
            None => return false,
        }
    }
    pos == body.len() // else stray bytes after the last record
}

fn record(r: &[u8], base: usize, headers: &mut Vec<Header>) -> Option<Span> {
    let attributes = *r.first()?;
    let mut p = 1usize;
    let ts_delta = varint(r, &mut p)?;
    let off_delta = varint(r, &mut p)?;
    let key = blob(r, base, &mut p, true)?;
    let value = blob(r, base, &mut p, true)?;
    let count = varint(r, &mut p)?;
    if count < 0 || count as u64 > (r.len() - p) as u64 {
        return None;
    }
    let first = headers.len();
    for _ in 0..count {
        let k = blob(r, base, &mut p, false)??;
        std::str::from_utf8(&r[k.0 - base..k.0 - base + k.1]).ok()?;
        let v = blob(r, base, &mut p, true)?;
        headers.push(Header { key: k, value: v });
    }
    if p != r.len() {
        return None; // the record holds more or less than it declares
    }
    Some(Span {
        attributes,
        ts_delta,
        off_delta,
        key,
        value,
        headers: (first, count as usize),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn zig(v: i64) -> Vec<u8> {
        let mut u = ((v << 1) ^ (v >> 63)) as u64;
        let mut out = Vec::new();
        while u > 0x7F {
            out.push((u as u8 & 0x7F) | 0x80);
            u >>= 7;
        }
        out.push(u as u8);
        out
    }

    #[test]
    fn varints_round_trip_over_i64() {
        for v in [0i64, 1, -1, 63, -64, 64, 300, -300, i64::MAX, i64::MIN] {
            let b = zig(v);
            let mut p = 0;
            assert_eq!(varint(&b, &mut p), Some(v));
            assert_eq!(p, b.len());
        }
        // 10 bytes whose value exceeds 64 bits: deferred, not truncated
        let mut p = 0;
        assert_eq!(
            varint(
                &[0xFF; 9].iter().copied().chain([0x7F]).collect::<Vec<_>>(),
                &mut p
            ),
            None
        );
    }

    #[test]
    fn one_record_and_its_errors() {
        let mut rec = vec![0u8];
        for v in [5i64, 0, 1] {
            rec.extend(zig(v));
        }
        rec.push(b'k');
        rec.extend(zig(-1)); // null value
        rec.extend(zig(0)); // no headers
        let mut body = zig(rec.len() as i64);
        body.extend(&rec);
        let (mut s, mut h) = (Vec::new(), Vec::new());
        assert!(scan(&body, 1, &mut s, &mut h));
        assert_eq!(
            (s[0].ts_delta, s[0].off_delta, s[0].key, s[0].value),
            (5, 0, Some((5, 1)), None)
        );
        assert!(!scan(&body, 2, &mut s, &mut h));
        body.push(0);
        assert!(!scan(&body, 1, &mut s, &mut h));
    }
}
