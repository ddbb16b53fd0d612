//! The values at a few JSON paths of a record value, without building the document.
//!
//! `shim/schema.py` used `json.loads` on every record value to read one or two fields
//! (~3-5 µs per record). This validates the whole value as Python's `json.loads` would
//! (invalid anywhere means every JSON field gets its zero value) and keeps only the
//! leaves the paths select. Where matching Python exactly would take more than a JSON
//! grammar it gives up (`Leaves::Defer`) and the caller runs `json.loads`:
//! - input `json.loads` would not read as plain UTF-8 (a BOM, NUL bytes among the first
//!   four, which select UTF-16/32) or that Rust rejects as UTF-8 (Python decodes with
//!   `surrogatepass`, so encoded surrogates are its call);
//! - an integer literal of more than 4,000 digits (`int()`'s 4,300-digit limit raises);
//! - nesting deeper than 64 (Python's recursion limit is its call).
//!
//! Python-specific grammar that is kept: NaN, Infinity, -Infinity are values; a duplicate
//! key replaces the earlier value (and the subtree a path went through).

use std::borrow::Cow;

/// One step of a path: an object key or a list index.
pub enum Step {
    Key(Vec<u8>),
    Index(u64),
}

/// What a path selects, reduced to what the schema can use: an integer in 0..2^64, an
/// ASCII string, or nothing (missing, or any other value: no field type takes it).
#[derive(Clone, Debug, PartialEq)]
pub enum Leaf {
    Missing,
    Int(u64),
    Str(Vec<u8>),
}

/// The slot value `shim/schema.py` `_json_leaf` gives a leaf for a field of `width` bits
/// (a string field: width / 8 ASCII bytes, space-padded on the right, big-endian); None
/// for a miss.
pub fn slot_value(leaf: &Leaf, is_string: bool, width: u32) -> Option<u64> {
    match (leaf, is_string) {
        (Leaf::Int(v), false) => (width >= 64 || *v < 1u64 << width).then_some(*v),
        (Leaf::Str(b), true) => {
            let size = (width / 8) as usize;
            if b.len() > size || !b.is_ascii() {
                return None;
            }
            Some(
                b.iter()
                    .chain(std::iter::repeat_n(&b' ', size - b.len()))
                    .fold(0u64, |acc, &c| (acc << 8) | c as u64),
            )
        }
        _ => None,
    }
}

/// A missing field's value: 0, or spaces for a string.
pub fn zero_value(is_string: bool, width: u32) -> u64 {
    slot_value(&Leaf::Str(Vec::new()), is_string, width).unwrap_or(0)
}

pub enum Leaves {
    Found(Vec<Leaf>),
    Invalid,
    Defer,
}

const MAX_DEPTH: usize = 64;
const MAX_DIGITS: usize = 4000;

enum Fail {
    Invalid,
    Defer,
}

struct Parser<'a> {
    s: &'a [u8],
    p: usize,
    paths: &'a [Vec<Step>],
    out: Vec<Leaf>,
}

type R<T> = Result<T, Fail>;

pub fn extract(value: &[u8], paths: &[Vec<Step>]) -> Leaves {
    // json.loads(bytes) picks the codec from the first bytes: only plain UTF-8 is ours.
    if value
        .first()
        .is_some_and(|&b| b == 0xEF || b == 0xFE || b == 0xFF)
        || value.iter().take(4).any(|&b| b == 0)
    {
        return Leaves::Defer;
    }
    if std::str::from_utf8(value).is_err() {
        return Leaves::Defer;
    }
    let mut ps = Parser {
        s: value,
        p: 0,
        paths,
        out: vec![Leaf::Missing; paths.len()],
    };
    let all: u32 = if paths.len() >= 32 {
        u32::MAX
    } else {
        (1u32 << paths.len()) - 1
    };
    ps.ws();
    let r = ps.value(0, all).and_then(|_| {
        ps.ws();
        if ps.p == ps.s.len() {
            Ok(())
        } else {
            Err(Fail::Invalid) // "Extra data"
        }
    });
    match r {
        Ok(()) => Leaves::Found(ps.out),
        Err(Fail::Invalid) => Leaves::Invalid,
        Err(Fail::Defer) => Leaves::Defer,
    }
}

impl<'a> Parser<'a> {
    #[inline]
    fn ws(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.s.get(self.p) {
            self.p += 1;
        }
    }

    #[inline]
    fn peek(&self) -> R<u8> {
        self.s.get(self.p).copied().ok_or(Fail::Invalid)
    }

    fn literal(&mut self, word: &[u8]) -> R<()> {
        if self.s[self.p..].starts_with(word) {
            self.p += word.len();
            Ok(())
        } else {
            Err(Fail::Invalid)
        }
    }

    /// The value at `self.p`, `depth` steps into every path in `active` (a bit per path
    /// whose first `depth` steps led here).
    fn value(&mut self, depth: usize, active: u32) -> R<()> {
        if depth > MAX_DEPTH {
            return Err(Fail::Defer);
        }
        // Paths that end here take this value; the others need a container.
        let mut ending = 0u32;
        for (i, path) in self.paths.iter().enumerate() {
            if active >> i & 1 == 1 && path.len() == depth {
                ending |= 1 << i;
            }
        }
        let deeper = active & !ending;
        let leaf = match self.peek()? {
            b'{' => {
                self.object(depth, deeper)?;
                Leaf::Missing
            }
            b'[' => {
                self.array(depth, deeper)?;
                Leaf::Missing
            }
            b'"' => {
                let (ascii, text) = self.string(ending != 0)?;
                if ascii && ending != 0 {
                    Leaf::Str(text.into_owned())
                } else {
                    Leaf::Missing
                }
            }
            b'n' => self.literal(b"null").map(|_| Leaf::Missing)?,
            b't' => self.literal(b"true").map(|_| Leaf::Missing)?,
            b'f' => self.literal(b"false").map(|_| Leaf::Missing)?,
            b'N' => self.literal(b"NaN").map(|_| Leaf::Missing)?,
            b'I' => self.literal(b"Infinity").map(|_| Leaf::Missing)?,
            b'-' if self.s[self.p..].starts_with(b"-Infinity") => {
                self.p += 9;
                Leaf::Missing
            }
            _ => self.number()?,
        };
        for i in 0..self.paths.len() {
            if ending >> i & 1 == 1 {
                self.out[i] = leaf.clone();
            }
        }
        Ok(())
    }

    /// A number as Python's scanner reads it: -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][-+]?[0-9]+)?,
    /// where a '.' or exponent without digits is not part of it (what follows then fails).
    fn number(&mut self) -> R<Leaf> {
        let s = self.s;
        let start = self.p;
        let mut p = self.p;
        let negative = s.get(p) == Some(&b'-');
        if negative {
            p += 1;
        }
        match s.get(p) {
            Some(b'0') => p += 1,
            Some(b'1'..=b'9') => {
                while let Some(b'0'..=b'9') = s.get(p) {
                    p += 1;
                }
            }
            _ => return Err(Fail::Invalid),
        }
        let int_end = p;
        let mut float = false;
        if s.get(p) == Some(&b'.') && matches!(s.get(p + 1), Some(b'0'..=b'9')) {
            float = true;
            p += 2;
            while let Some(b'0'..=b'9') = s.get(p) {
                p += 1;
            }
        }
        if let Some(b'e' | b'E') = s.get(p) {
            let mut q = p + 1;
            if let Some(b'-' | b'+') = s.get(q) {
                q += 1;
            }
            let digits = q;
            while let Some(b'0'..=b'9') = s.get(q) {
                q += 1;
            }
            if q > digits {
                float = true;
                p = q;
            }
        }
        self.p = p;
        if float {
            return Ok(Leaf::Missing); // a float: no field type takes it
        }
        let digits = &s[start + negative as usize..int_end];
        if digits.len() > MAX_DIGITS {
            return Err(Fail::Defer);
        }
        let mut v: u64 = 0;
        for &d in digits {
            match v
                .checked_mul(10)
                .and_then(|x| x.checked_add((d - b'0') as u64))
            {
                Some(x) => v = x,
                None => return Ok(Leaf::Missing), // >= 2^64: outside every field type
            }
        }
        if negative && v != 0 {
            return Ok(Leaf::Missing); // -0 is int 0 in Python
        }
        Ok(Leaf::Int(v))
    }

    /// A string at `self.p` (the opening quote): whether it is all ASCII, and its decoded
    /// UTF-8 when `keep` (else empty). \u escapes decode as Python's scanner does
    /// (a high surrogate escape followed by a low one joins them); a lone surrogate
    /// makes the string non-ASCII and never equal to a path step.
    /// The common case, a string without escapes, is borrowed from the value.
    fn string(&mut self, keep: bool) -> R<(bool, Cow<'a, [u8]>)> {
        let s = self.s;
        let start = self.p + 1;
        let plain = s[start..]
            .iter()
            .position(|&b| b == b'"' || b == b'\\' || b < 0x20)
            .ok_or(Fail::Invalid)?;
        if s[start + plain] == b'"' {
            let text = &s[start..start + plain];
            self.p = start + plain + 1;
            return Ok((text.is_ascii(), Cow::Borrowed(if keep { text } else { &[] })));
        }
        let mut p = start;
        let mut ascii = true;
        let mut out = Vec::new();
        loop {
            let b = *s.get(p).ok_or(Fail::Invalid)?;
            match b {
                b'"' => break,
                b'\\' => {
                    let e = *s.get(p + 1).ok_or(Fail::Invalid)?;
                    p += 2;
                    let c = match e {
                        b'"' => b'"',
                        b'\\' => b'\\',
                        b'/' => b'/',
                        b'b' => 8,
                        b'f' => 12,
                        b'n' => b'\n',
                        b'r' => b'\r',
                        b't' => b'\t',
                        b'u' => {
                            let mut cp = hex4(s, p)?;
                            p += 4;
                            if (0xD800..0xDC00).contains(&cp)
                                && s.get(p) == Some(&b'\\')
                                && s.get(p + 1) == Some(&b'u')
                            {
                                if let Ok(lo) = hex4(s, p + 2) {
                                    if (0xDC00..0xE000).contains(&lo) {
                                        cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                                        p += 6;
                                    }
                                }
                            }
                            if cp >= 0x80 {
                                ascii = false;
                                if keep {
                                    out.extend_from_slice(&utf8_or_surrogate(cp));
                                }
                                continue;
                            }
                            cp as u8
                        }
                        _ => return Err(Fail::Invalid), // "Invalid \\escape"
                    };
                    if keep {
                        out.push(c);
                    }
                }
                0..=0x1F => return Err(Fail::Invalid), // "Invalid control character"
                _ => {
                    if b >= 0x80 {
                        ascii = false;
                    }
                    if keep {
                        out.push(b);
                    }
                    p += 1;
                }
            }
        }
        self.p = p + 1;
        Ok((ascii, Cow::Owned(out)))
    }

    /// Past the opening bracket; true when `close` follows at once (an empty container).
    fn open(&mut self, close: u8) -> R<bool> {
        self.p += 1;
        self.ws();
        let empty = self.peek()? == close;
        if empty {
            self.p += 1;
        }
        Ok(empty)
    }

    /// The paths of `active` whose step at `depth` satisfies `takes`.
    fn taking(&self, active: u32, depth: usize, takes: impl Fn(&Step) -> bool) -> u32 {
        let mut next = 0u32;
        for (i, path) in self.paths.iter().enumerate() {
            if active >> i & 1 == 1 && path.get(depth).is_some_and(&takes) {
                next |= 1 << i;
            }
        }
        next
    }

    fn object(&mut self, depth: usize, active: u32) -> R<()> {
        if self.open(b'}')? {
            return Ok(());
        }
        loop {
            if self.peek()? != b'"' {
                return Err(Fail::Invalid);
            }
            // Which active paths take this key as their next step.
            let next = if active != 0 {
                let (_, key) = self.string(true)?;
                self.taking(active, depth, |s| matches!(s, Step::Key(k) if **k == *key))
            } else {
                self.string(false)?;
                0
            };
            self.ws();
            if self.peek()? != b':' {
                return Err(Fail::Invalid);
            }
            self.p += 1;
            self.ws();
            if self.member(depth, next, b'}')? {
                return Ok(());
            }
        }
    }

    fn array(&mut self, depth: usize, active: u32) -> R<()> {
        if self.open(b']')? {
            return Ok(());
        }
        let mut index = 0u64;
        loop {
            let next = self.taking(
                active,
                depth,
                |s| matches!(s, Step::Index(k) if *k == index),
            );
            if self.member(depth, next, b']')? {
                return Ok(());
            }
            index += 1;
        }
    }

    /// A member of an object or array, taken by the paths in `next`, and the ',' or
    /// `close` after it; true when it was the last.
    fn member(&mut self, depth: usize, next: u32, close: u8) -> R<bool> {
        self.enter(next);
        self.value(depth + 1, next)?;
        self.ws();
        match self.peek()? {
            b',' => {
                self.p += 1;
                self.ws();
                Ok(false)
            }
            c if c == close => {
                self.p += 1;
                Ok(true)
            }
            _ => Err(Fail::Invalid),
        }
    }

    /// The paths in `next` go through a new value: what an earlier duplicate key gave
    /// them is gone (a dict keeps the last value).
    fn enter(&mut self, next: u32) {
        for i in 0..self.paths.len() {
            if next >> i & 1 == 1 {
                self.out[i] = Leaf::Missing;
            }
        }
    }
}

fn hex4(s: &[u8], p: usize) -> R<u32> {
    let h = s.get(p..p + 4).ok_or(Fail::Invalid)?;
    let mut v = 0u32;
    for &c in h {
        let d = (c as char).to_digit(16).ok_or(Fail::Invalid)?;
        v = v * 16 + d;
    }
    Ok(v)
}

/// UTF-8 of a code point; a lone surrogate (which UTF-8 cannot hold) as 0xFF, a byte no
/// UTF-8 key from Python holds, so such a key never equals a path step.
fn utf8_or_surrogate(cp: u32) -> Vec<u8> {
    match char::from_u32(cp) {
        Some(c) => c.to_string().into_bytes(),
        None => vec![0xFF],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(k: &str) -> Step {
        Step::Key(k.as_bytes().to_vec())
    }

    fn run(doc: &str, paths: &[Vec<Step>]) -> Option<Vec<Leaf>> {
        match extract(doc.as_bytes(), paths) {
            Leaves::Found(v) => Some(v),
            Leaves::Invalid => None,
            Leaves::Defer => panic!("deferred"),
        }
    }

    #[test]
    fn paths_duplicates_and_types() {
        let paths = vec![
            vec![key("a"), key("b")],
            vec![key("n")],
            vec![key("l"), Step::Index(1)],
        ];
        let got = run(
            r#"{"a":{"b":1},"n":"x\u0041","l":[5,7],"a":{"c":2}}"#,
            &paths,
        )
        .unwrap();
        assert_eq!(
            got,
            vec![Leaf::Missing, Leaf::Str(b"xA".to_vec()), Leaf::Int(7)]
        );
        assert_eq!(run(r#"{"n":-0}"#, &paths).unwrap()[1], Leaf::Int(0));
        assert_eq!(run(r#"{"n":1.0}"#, &paths).unwrap()[1], Leaf::Missing);
        assert_eq!(run(r#"{"n":NaN}"#, &paths).unwrap()[1], Leaf::Missing);
        assert!(run(r#"{"n":1,}"#, &paths).is_none());
        assert!(run(r#"{"n":01}"#, &paths).is_none());
        assert!(run("{\"n\":\"\t\"}", &paths).is_none());
    }

    #[test]
    fn slot_values_as_the_schema_reads_them() {
        assert_eq!(slot_value(&Leaf::Int(255), false, 8), Some(255));
        assert_eq!(slot_value(&Leaf::Int(256), false, 8), None);
        assert_eq!(slot_value(&Leaf::Int(u64::MAX), false, 64), Some(u64::MAX));
        assert_eq!(slot_value(&Leaf::Int(1), true, 8), None);
        assert_eq!(slot_value(&Leaf::Str(b"ab".to_vec()), true, 24), Some(0x616220));
        assert_eq!(slot_value(&Leaf::Str(b"abcd".to_vec()), true, 24), None);
        assert_eq!(slot_value(&Leaf::Str(b"a".to_vec()), false, 8), None);
        assert_eq!(zero_value(true, 16), 0x2020);
        assert_eq!(zero_value(false, 16), 0);
    }
}
