//! Kafka records as camus packets, in the exact bytes of `shim/reframe.py` (`packets`), and
//! the receiving side's bookkeeping without reassembly.
//!
//! `shim/reframe.py` is the reference: record encoding (timestamp i64, key and value as i32
//! length + bytes with -1 = null, u16 header count, per header u16-length UTF-8 name and a
//! nullable value), fragments of `fragment` bytes each carrying the camus Kafka header
//! (`>IIQHHI8QQII`: topic, partition, offset, fragment index, fragment count, body length,
//! eight slots, the record's timestamp modulo `TIME_MODULUS`, two average lanes), and
//! Ethernet/IPv4/UDP around it (IPv4 checksum over the fixed words plus the total
//! length, UDP checksum 0). The Ethernet/IP/UDP words come from the reference's own framer
//! (a template frame with an empty payload), so addressing is defined in one place.
//! A record larger than `MAX_RECORD`, or one the encoding cannot hold, is one by-reference
//! frame (fragment count `BY_REFERENCE`, no body), as the reference frames it; so is, with
//! `single` (packets fed to a stateful view), a record that needs more than one fragment.
//! Where the
//! reference would raise (an IPv4 length past 65535), the binding answers None and the
//! reference runs.

pub const ETH_IP_UDP: usize = 42;
pub const HEADER: usize = 4 + 4 + 8 + 2 + 2 + 4 + 8 * 8 + 8 + 4 + 4; // 104
/// `reframe.LANES`: the average lanes after the timestamp.
pub const LANES: usize = 2;
/// `reframe.TIME_MODULUS`: the header's timestamp is the record's (ms) modulo 3,257 days.
pub const TIME_MODULUS: i64 = 3257 * 86_400_000;
/// `reframe.MAX_RECORD`: the largest record encoding sent in fragments (1.5 MiB).
pub const MAX_RECORD: usize = (1 << 20) + (1 << 19);
/// `reframe.BY_REFERENCE`: the fragment count of a record's only frame when it is not in it.
pub const BY_REFERENCE: u16 = 0;

/// One record's parts, borrowed from the Python objects.
pub struct Rec<'a> {
    pub offset: u64,
    pub timestamp: i64,
    pub key: Option<&'a [u8]>,
    pub value: Option<&'a [u8]>,
    pub headers: Vec<(&'a [u8], Option<&'a [u8]>)>,
}

/// Appends the record's encoding (`encode_record`) to `out`; false when the reference would
/// raise (a length beyond its struct field).
pub fn encode(r: &Rec, out: &mut Vec<u8>) -> bool {
    fn blob(b: Option<&[u8]>, out: &mut Vec<u8>) -> bool {
        match b {
            None => out.extend_from_slice(&(-1i32).to_be_bytes()),
            Some(b) => {
                let Ok(n) = i32::try_from(b.len()) else {
                    return false;
                };
                out.extend_from_slice(&n.to_be_bytes());
                out.extend_from_slice(b);
            }
        }
        true
    }
    out.extend_from_slice(&r.timestamp.to_be_bytes());
    if !blob(r.key, out) || !blob(r.value, out) {
        return false;
    }
    let Ok(n) = u16::try_from(r.headers.len()) else {
        return false;
    };
    out.extend_from_slice(&n.to_be_bytes());
    for (name, value) in &r.headers {
        let Ok(n) = u16::try_from(name.len()) else {
            return false;
        };
        out.extend_from_slice(&n.to_be_bytes());
        out.extend_from_slice(name);
        if !blob(*value, out) {
            return false;
        }
    }
    true
}

/// Frames records into one packed buffer, as `reframe.packets` would, one after the other.
pub struct Framer {
    template: [u8; ETH_IP_UDP],
    base: u32, // one's-complement sum of the IPv4 header words but total length and checksum
    pub fragment: usize,
    body: Vec<u8>,
    /// per average lane, the slot it carries (`reframe.lane_values`), or None
    pub lanes: [Option<usize>; LANES],
    /// one frame per record: a record needing fragments goes by reference
    pub single: bool,
}

impl Framer {
    /// `template`: the reference framer's frame around an empty payload.
    pub fn new(template: &[u8], fragment: usize) -> Option<Framer> {
        let template: [u8; ETH_IP_UDP] = template.try_into().ok()?;
        if fragment == 0 || template[14] != 0x45 {
            return None;
        }
        let mut ip = template[14..34].to_vec();
        ip[2..4].fill(0);
        ip[10..12].fill(0);
        let base = ip
            .chunks_exact(2)
            .map(|w| u16::from_be_bytes([w[0], w[1]]) as u32)
            .sum();
        Some(Framer {
            template,
            base,
            fragment,
            body: Vec::new(),
            lanes: [None; LANES],
            single: false,
        })
    }

    /// Appends the record's frames to `buf` and their lengths (u32 LE) to `lengths`; the
    /// number of frames, or None when the reference would raise.
    pub fn frame(
        &mut self,
        topic: u32,
        partition: u32,
        r: &Rec,
        slots: &[u64; 8],
        buf: &mut Vec<u8>,
        lengths: &mut Vec<u8>,
    ) -> Option<usize> {
        self.body.clear();
        let encoded = encode(r, &mut self.body);
        let fragments = self.body.len().div_ceil(self.fragment).max(1);
        // (frames, the header's fragment count, its body length)
        let (count, count_field, length) =
            if !encoded
                || self.body.len() > MAX_RECORD
                || fragments > 0xFFFF
                || (self.single && fragments > 1)
            {
                self.body.clear(); // by reference: the header alone
                (1, BY_REFERENCE, 0u32)
            } else {
                (fragments, fragments as u16, self.body.len() as u32)
            };
        let len = self.body.len();
        let mut head = [0u8; HEADER];
        head[0..4].copy_from_slice(&topic.to_be_bytes());
        head[4..8].copy_from_slice(&partition.to_be_bytes());
        head[8..16].copy_from_slice(&r.offset.to_be_bytes());
        head[18..20].copy_from_slice(&count_field.to_be_bytes());
        head[20..24].copy_from_slice(&length.to_be_bytes());
        for (k, s) in slots.iter().enumerate() {
            head[24 + 8 * k..32 + 8 * k].copy_from_slice(&s.to_be_bytes());
        }
        head[88..96].copy_from_slice(&r.timestamp.rem_euclid(TIME_MODULUS).to_be_bytes());
        for (i, lane) in self.lanes.iter().enumerate() {
            let v = lane.map_or(0, |k| slots[k] as u32);
            head[96 + 4 * i..100 + 4 * i].copy_from_slice(&v.to_be_bytes());
        }
        for i in 0..count {
            let chunk = &self.body[(i * self.fragment).min(len)..((i + 1) * self.fragment).min(len)];
            let udp_len = 8 + HEADER + chunk.len();
            let total = 20 + udp_len;
            if total > 0xFFFF {
                return None; // the reference's struct.pack raises
            }
            let mut csum = self.base + total as u32;
            csum = (csum & 0xFFFF) + (csum >> 16);
            let csum = !((csum & 0xFFFF) + (csum >> 16)) as u16;
            let start = buf.len();
            buf.extend_from_slice(&self.template);
            buf[start + 16..start + 18].copy_from_slice(&(total as u16).to_be_bytes());
            buf[start + 24..start + 26].copy_from_slice(&csum.to_be_bytes());
            buf[start + 38..start + 40].copy_from_slice(&(udp_len as u16).to_be_bytes());
            head[16..18].copy_from_slice(&(i as u16).to_be_bytes());
            buf.extend_from_slice(&head);
            buf.extend_from_slice(chunk);
            lengths.extend_from_slice(&((ETH_IP_UDP + HEADER + chunk.len()) as u32).to_le_bytes());
        }
        Some(count)
    }
}

/// What the receiving side of `DataPath.send` learns from the switch's copies.
pub struct Tally {
    /// (port, copies) in the order ports first received a copy.
    pub counts: Vec<(u32, u64)>,
    /// (port, record index) per record a log port received whole, in the order the
    /// reference's reassembly completes them; None when the reference must reassemble.
    pub deliveries: Option<Vec<(u32, u32)>>,
}

/// Counts every copy per port and, for the `log` ports, which records they received whole.
///
/// `frames`/`starts`: the input frames (packed, each frame's start and the end as the last
/// entry) and `owner`, the record index of each; `out`/`copies`: the switch's output
/// (`process_packed`: per copy input index, port, offset, length as u32 LE). A log port
/// receives record j when its copies of j's frames are exactly fragments 0..count-1 in
/// order, each with the input frame's bytes from the IPv4 header length on (what
/// `reframe.Reassembler` reads); then reassembly yields j itself. Anything else (a partial
/// or repeated record, rewritten bytes, a record beyond `max_record`) answers no deliveries
/// and the caller reassembles with the reference.
pub fn tally(
    frames: &[u8],
    starts: &[usize],
    owner: &[u32],
    out: &[u8],
    copies: &[u8],
    log: &[u32],
    max_record: u32,
) -> Tally {
    let mut counts: Vec<(u32, u64)> = Vec::new();
    let mut ok = true;
    let mut deliveries = Vec::new();
    // per log port: (record, next fragment) of a record under way
    let mut pending: Vec<Option<(u32, u16)>> = vec![None; log.len()];
    for c in copies.chunks_exact(16) {
        let word = |k: usize| u32::from_le_bytes(c[4 * k..4 * k + 4].try_into().unwrap());
        let (i, port, off, len) = (word(0) as usize, word(1), word(2) as usize, word(3) as usize);
        match counts.iter_mut().find(|(p, _)| *p == port) {
            Some((_, n)) => *n += 1,
            None => counts.push((port, 1)),
        }
        if !ok {
            continue;
        }
        let Some(slot) = log.iter().position(|p| *p == port) else {
            continue;
        };
        let (Some(&j), Some(&s), Some(&e), Some(copy)) = (
            owner.get(i),
            starts.get(i),
            starts.get(i + 1),
            out.get(off..off + len),
        ) else {
            ok = false;
            continue;
        };
        let input = &frames[s..e];
        if copy.len() != input.len()
            || copy.len() < ETH_IP_UDP + HEADER
            || copy[14] & 0x0F != 5
            || copy[ETH_IP_UDP..] != input[ETH_IP_UDP..]
        {
            ok = false;
            continue;
        }
        let h = &input[ETH_IP_UDP..];
        let index = u16::from_be_bytes([h[16], h[17]]);
        let count = u16::from_be_bytes([h[18], h[19]]);
        let length = u32::from_be_bytes([h[20], h[21], h[22], h[23]]);
        let expect = match pending[slot] {
            None => (j, 0),
            Some(p) => p,
        };
        if (j, index) != expect || length > max_record {
            ok = false;
            continue;
        }
        if count == BY_REFERENCE || index + 1 == count {
            pending[slot] = None;
            deliveries.push((port, j));
        } else {
            pending[slot] = Some((j, index + 1));
        }
    }
    let whole = ok && pending.iter().all(Option::is_none);
    Tally {
        counts,
        deliveries: whole.then_some(deliveries),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn template() -> Vec<u8> {
        let mut t = vec![0u8; ETH_IP_UDP];
        t[12] = 8;
        t[14] = 0x45;
        t[20] = 0x40;
        t[22] = 64;
        t[23] = 17;
        t
    }

    #[test]
    fn a_record_past_max_record_is_one_frame_by_reference() {
        let mut f = Framer::new(&template(), 1400).unwrap();
        let value = vec![7u8; MAX_RECORD + 1];
        let r = Rec {
            offset: 9,
            timestamp: 1,
            key: None,
            value: Some(&value),
            headers: vec![],
        };
        let (mut buf, mut lengths) = (Vec::new(), Vec::new());
        assert_eq!(f.frame(1, 2, &r, &[5; 8], &mut buf, &mut lengths), Some(1));
        assert_eq!(buf.len(), ETH_IP_UDP + HEADER);
        let h = &buf[ETH_IP_UDP..];
        assert_eq!(&h[8..16], &9u64.to_be_bytes());
        assert_eq!(&h[16..24], &[0, 0, 0, 0, 0, 0, 0, 0]); // index 0, count 0, length 0
        // a log port that receives it unaltered receives record 0 itself
        let starts = [0, buf.len()];
        let mut copies = Vec::new();
        for w in [0u32, 3, 0, buf.len() as u32] {
            copies.extend_from_slice(&w.to_le_bytes());
        }
        let t = tally(&buf, &starts, &[0], &buf, &copies, &[3], MAX_RECORD as u32);
        assert_eq!(t.deliveries, Some(vec![(3, 0)]));
    }

    #[test]
    fn fragments_and_tally() {
        let mut f = Framer::new(&template(), 10).unwrap();
        let value = [7u8; 25];
        let r = Rec {
            offset: 3,
            timestamp: 1,
            key: None,
            value: Some(&value),
            headers: vec![(b"h", None)],
        };
        let (mut buf, mut lengths) = (Vec::new(), Vec::new());
        // 8 + 4 + 4 + 25 + 2 + 2 + 1 + 4 = 50 bytes: 5 fragments of 10
        assert_eq!(f.frame(1, 0, &r, &[0; 8], &mut buf, &mut lengths), Some(5));
        assert_eq!(buf.len(), 5 * (ETH_IP_UDP + HEADER + 10));
        let starts: Vec<usize> = (0..=5).map(|i| i * (ETH_IP_UDP + HEADER + 10)).collect();
        let owner = [0u32; 5];
        let mut copies = Vec::new();
        for i in 0..5u32 {
            let off = starts[i as usize] as u32;
            for v in [i, 9, off, (ETH_IP_UDP + HEADER + 10) as u32] {
                copies.extend_from_slice(&v.to_le_bytes());
            }
        }
        let t = tally(&buf, &starts, &owner, &buf, &copies, &[9], 1 << 20);
        assert_eq!(t.counts, vec![(9, 5)]);
        assert_eq!(t.deliveries, Some(vec![(9, 0)]));
        // a missing fragment: the reference decides
        let t = tally(&buf, &starts, &owner, &buf, &copies[16..], &[9], 1 << 20);
        assert_eq!(t.counts, vec![(9, 4)]);
        assert_eq!(t.deliveries, None);
        // not a log port: counted only
        let t = tally(&buf, &starts, &owner, &buf, &copies[16..], &[], 1 << 20);
        assert_eq!(t.deliveries, Some(vec![]));
    }
}
