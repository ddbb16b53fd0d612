//! Header parsing: Ethernet/IPv4/UDP checks with a drop reason for every way a frame can be
//! bad, the IPv4 header checksum, and field extraction at arbitrary bit offsets.
//!
//! The checks mirror switch/reference.py `_forward` one for one (same order, same reasons),
//! which the shared differential tests hold to byte-for-byte agreement.

use crate::switch::PlanField;

pub const ETH: usize = 14;
pub const UDP: usize = 8;
pub const MOLD: usize = 20;

/// Drop reasons, indices into the drop counters (order as in switch/dataplane.py).
pub const MALFORMED: usize = 0;
pub const TRUNCATED: usize = 1;
pub const OVERSIZED: usize = 2;
pub const NO_ROUTE: usize = 3;

/// Where a field sits: the bytes to read and how to cut the value out of them.
#[derive(Clone, Copy)]
pub struct Extractor {
    first: usize,
    nbytes: usize,
    shift: u32,
    mask: u64,
    /// The 8-byte big-endian window read when the field fits one: it starts at `window`
    /// (ending at the field's last byte, or at byte 8 for a field nearer the start) and the
    /// field is `window_shift` bits up from its low end.
    window: usize,
    window_shift: u32,
}

impl Extractor {
    pub fn new(f: &PlanField) -> Extractor {
        let first = (f.bit_offset / 8) as usize;
        let end = (f.bit_offset + f.width).div_ceil(8) as usize;
        let shift = (end * 8) as u32 - f.bit_offset - f.width;
        let window = end.saturating_sub(8);
        Extractor {
            first,
            nbytes: end - first,
            shift,
            mask: if f.width >= 64 {
                u64::MAX
            } else {
                (1u64 << f.width) - 1
            },
            window,
            window_shift: ((window + 8 - end) * 8) as u32 + shift,
        }
    }

    /// The field's value; `msg` is at least message_bytes long, which covers the field.
    #[inline(always)]
    pub fn get(&self, msg: &[u8]) -> u64 {
        if self.nbytes <= 8 && msg.len() >= self.window + 8 {
            // One load, one shift, one mask (a byte loop with u128 shifts was a tenth of
            // the classification time).
            let w = u64::from_be_bytes(msg[self.window..self.window + 8].try_into().unwrap());
            return (w >> self.window_shift) & self.mask;
        }
        let bytes = &msg[self.first..self.first + self.nbytes];
        let mut raw: u128 = 0;
        for &b in bytes {
            raw = (raw << 8) | b as u128;
        }
        ((raw >> self.shift) as u64) & self.mask
    }
}

/// Where a frame's UDP datagram lies, once the headers have been checked.
pub struct Udp {
    pub l4: usize,    // offset of the UDP header
    pub start: usize, // first payload byte
    pub end: usize,   // one past the last payload byte
    pub dport: u16,
}

pub enum Parsed {
    Drop(usize),
    /// Plain IPv4 (not UDP, a fragment, or a UDP port no application uses).
    Ip,
    Udp(Udp),
}

#[inline(always)]
pub fn be16(b: &[u8], i: usize) -> usize {
    ((b[i] as usize) << 8) | b[i + 1] as usize
}

pub fn ipv4_checksum(h: &[u8]) -> u16 {
    let mut sum: u32 = 0;
    let mut i = 0;
    while i + 1 < h.len() {
        if i != 10 {
            sum += ((h[i] as u32) << 8) | h[i + 1] as u32;
        }
        i += 2;
    }
    if i < h.len() {
        sum += (h[i] as u32) << 8;
    }
    while sum >> 16 != 0 {
        sum = (sum & 0xFFFF) + (sum >> 16);
    }
    !(sum as u16)
}

pub fn parse(frame: &[u8], max_frame: usize) -> Parsed {
    if frame.len() > max_frame {
        return Parsed::Drop(OVERSIZED);
    }
    if frame.len() < ETH {
        return Parsed::Drop(TRUNCATED);
    }
    if be16(frame, 12) != 0x0800 {
        return Parsed::Drop(NO_ROUTE);
    }
    if frame.len() < ETH + 20 {
        return Parsed::Drop(TRUNCATED);
    }
    let v = frame[ETH];
    if v >> 4 != 4 || v & 0x0F < 5 {
        return Parsed::Drop(MALFORMED);
    }
    let ihl = ((v & 0x0F) as usize) * 4;
    let total = be16(frame, ETH + 2);
    if total < ihl {
        return Parsed::Drop(MALFORMED);
    }
    if frame.len() < ETH + total {
        return Parsed::Drop(TRUNCATED);
    }
    let ip_end = ETH + total;
    let fragment = be16(frame, ETH + 6) & 0x3FFF != 0;
    if frame[ETH + 9] != 17 || fragment {
        return Parsed::Ip;
    }
    let l4 = ETH + ihl;
    if l4 + UDP > ip_end {
        return Parsed::Drop(TRUNCATED);
    }
    let ulen = be16(frame, l4 + 4);
    if ulen < UDP {
        return Parsed::Drop(MALFORMED);
    }
    if l4 + ulen > ip_end {
        return Parsed::Drop(TRUNCATED);
    }
    Parsed::Udp(Udp {
        l4,
        start: l4 + UDP,
        end: l4 + ulen,
        dport: be16(frame, l4 + 2) as u16,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn extractor_agrees_with_bit_by_bit_reading() {
        let bytes: Vec<u8> = (0..40u32).map(|i| (i * 73 + 19) as u8 ^ 0xA5).collect();
        let bit = |i: u32| ((bytes[(i / 8) as usize] >> (7 - i % 8)) & 1) as u64;
        for bit_offset in 0..80u32 {
            for width in 1..=64u32 {
                let end = (bit_offset + width).div_ceil(8) as usize;
                let want = (bit_offset..bit_offset + width).fold(0u64, |v, i| (v << 1) | bit(i));
                let e = Extractor::new(&PlanField { bit_offset, width });
                // Messages from exactly covering the field (no room for a window) to longer.
                for len in end..(end + 9).min(bytes.len()) {
                    assert_eq!(e.get(&bytes[..len]), want, "offset={bit_offset} width={width} len={len}");
                }
            }
        }
    }
}
