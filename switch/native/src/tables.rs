//! Match-action tables keyed by (state, value), one structure per match kind.
//!
//! Entries arrive already validated by the Python control layer (switch/dataplane.py):
//! ranges within one state never overlap, equal-priority ternary entries never overlap,
//! values fit their widths. So each structure only has to be fast: exact keys in one hash
//! map, ranges as per-state sorted disjoint intervals searched by bisection, LPM as one hash
//! map per prefix length tried longest first, ternary as a per-state list by priority.

use rustc_hash::FxHashMap;

/// Action codes shared with switch/native_dataplane.py.
pub const SET_STATE: u8 = 1;
pub const FWD: u8 = 2;
pub const MCAST: u8 = 3;
pub const DROP: u8 = 4;
#[allow(dead_code)] // the egress table's only action: its param is read, never its code
pub const SET_UDP_PORT: u8 = 5;

/// An action and its one parameter packed in 8 bytes (code in the top byte): table
/// memory is what the classification rate is bound by, and a 16-byte action made every
/// range entry a third larger. Parameters therefore have at most 56 bits (switch/ir.py
/// caps state_width accordingly; ports, groups and UDP ports are narrower).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Action(u64);

pub const PARAM_BITS: u32 = 56;

impl Action {
    #[inline(always)]
    pub const fn new(code: u8, param: u64) -> Action {
        debug_assert!(param >> PARAM_BITS == 0);
        Action(((code as u64) << PARAM_BITS) | (param & ((1u64 << PARAM_BITS) - 1)))
    }

    #[inline(always)]
    pub fn code(self) -> u8 {
        (self.0 >> PARAM_BITS) as u8
    }

    #[inline(always)]
    pub fn param(self) -> u64 {
        self.0 & ((1u64 << PARAM_BITS) - 1)
    }
}

/// Sorted disjoint inclusive intervals of one state.
///
/// Lookups find the last interval starting at or below the value. A plain binary search
/// over a few hundred intervals is a chain of dependent loads (it was half of the
/// classification time), so the low ends are also sampled every `BLOCK` entries into
/// `fence`: a lookup counts the fence entries at or below the value (a short, branch-free
/// scan), then counts within one block. Both scans issue independent loads.
#[derive(Default)]
pub struct RangeSet {
    los: Vec<u64>,
    // (high end, action) side by side: a hit reads one cache line, not two.
    tails: Vec<(u64, Action)>,
    fence: Vec<u64>,
}

const BLOCK: usize = 16;
/// Keys per `lookup_chunk` call.
pub const CHUNK: usize = 32;
const LINEAR_FENCE: usize = 64; // beyond this many blocks, bisect the fence instead

impl RangeSet {
    fn refence(&mut self, from: usize) {
        let first_block = from / BLOCK;
        self.fence.truncate(first_block);
        self.fence.extend(
            self.los
                .iter()
                .skip(first_block * BLOCK)
                .step_by(BLOCK)
                .copied(),
        );
    }

    fn insert(&mut self, lo: u64, hi: u64, act: Action) {
        let i = self.los.partition_point(|&x| x < lo);
        if i < self.los.len() && self.los[i] == lo && self.tails[i].0 == hi {
            self.tails[i].1 = act;
        } else {
            self.los.insert(i, lo);
            self.tails.insert(i, (hi, act));
            self.refence(i);
        }
    }

    fn remove(&mut self, lo: u64, hi: u64) {
        let i = self.los.partition_point(|&x| x < lo);
        if i < self.los.len() && self.los[i] == lo && self.tails[i].0 == hi {
            self.los.remove(i);
            self.tails.remove(i);
            self.refence(i);
        }
    }

    #[inline(always)]
    fn count_le(xs: &[u64], v: u64) -> usize {
        xs.iter().map(|&x| (x <= v) as usize).sum()
    }

    #[inline(always)]
    fn lookup(&self, v: u64) -> Option<Action> {
        self.result(self.find(v), v)
    }

    /// One past the index of the last interval starting at or below v (0: none).
    #[inline(always)]
    fn find(&self, v: u64) -> usize {
        let blocks = if self.fence.len() <= LINEAR_FENCE {
            Self::count_le(&self.fence, v)
        } else {
            self.fence.partition_point(|&x| x <= v)
        };
        if blocks == 0 {
            return 0; // below the first interval
        }
        let start = (blocks - 1) * BLOCK;
        let end = (start + BLOCK).min(self.los.len());
        // >= start + 1: the block's first low end is its fence value, which is <= v.
        start + Self::count_le(&self.los[start..end], v)
    }

    #[inline(always)]
    fn result(&self, found: usize, v: u64) -> Option<Action> {
        if found == 0 {
            return None;
        }
        let (hi, act) = self.tails[found - 1];
        if v <= hi {
            Some(act)
        } else {
            None
        }
    }
}

/// Prefixes of one state: (prefix length, masked value -> action), longest first.
#[derive(Default)]
pub struct LpmSet {
    by_len: Vec<(u32, FxHashMap<u64, Action>)>,
}

fn prefix_mask(width: u32, plen: u32) -> u64 {
    if plen == 0 {
        0
    } else {
        let ones = if plen >= 64 {
            u64::MAX
        } else {
            (1u64 << plen) - 1
        };
        ones << (width - plen)
    }
}

pub enum Table {
    /// Keyed by the state alone: default and leaf tables.
    State(FxHashMap<u64, Action>),
    /// Keyed by (state, value): exact stage tables and the egress table (port, rid).
    Exact(FxHashMap<(u64, u64), Action>),
    Range(FxHashMap<u64, RangeSet>),
    Lpm(u32, FxHashMap<u64, LpmSet>),
    Ternary(FxHashMap<u64, Vec<(u32, u64, u64, Action)>>),
}

impl Table {
    pub fn new(kind: &str, width: u32) -> Option<Table> {
        Some(match kind {
            "state" => Table::State(FxHashMap::default()),
            "exact" => Table::Exact(FxHashMap::default()),
            "range" => Table::Range(FxHashMap::default()),
            "lpm" => Table::Lpm(width, FxHashMap::default()),
            "ternary" => Table::Ternary(FxHashMap::default()),
            _ => return None,
        })
    }

    /// Add an entry or replace the action of the entry with the same key.
    pub fn install(&mut self, state: u64, a: u64, b: u64, priority: u32, act: Action) {
        match self {
            Table::State(m) => {
                m.insert(state, act);
            }
            Table::Exact(m) => {
                m.insert((state, a), act);
            }
            Table::Range(m) => m.entry(state).or_default().insert(a, b, act),
            Table::Lpm(width, m) => {
                let set = m.entry(state).or_default();
                let plen = b as u32;
                let mask = prefix_mask(*width, plen);
                match set.by_len.iter_mut().find(|(l, _)| *l == plen) {
                    Some((_, map)) => {
                        map.insert(a & mask, act);
                    }
                    None => {
                        let mut map = FxHashMap::default();
                        map.insert(a & mask, act);
                        set.by_len.push((plen, map));
                        set.by_len.sort_by_key(|x| std::cmp::Reverse(x.0));
                    }
                }
            }
            Table::Ternary(m) => {
                let list = m.entry(state).or_default();
                match list
                    .iter_mut()
                    .find(|e| e.0 == priority && e.1 == a && e.2 == b)
                {
                    Some(e) => e.3 = act,
                    None => {
                        list.push((priority, a, b, act));
                        list.sort_by_key(|x| std::cmp::Reverse(x.0));
                    }
                }
            }
        }
    }

    pub fn uninstall(&mut self, state: u64, a: u64, b: u64, priority: u32) {
        match self {
            Table::State(m) => {
                m.remove(&state);
            }
            Table::Exact(m) => {
                m.remove(&(state, a));
            }
            Table::Range(m) => {
                if let Some(set) = m.get_mut(&state) {
                    set.remove(a, b);
                    if set.los.is_empty() {
                        m.remove(&state);
                    }
                }
            }
            Table::Lpm(_, m) => {
                if let Some(set) = m.get_mut(&state) {
                    let plen = b as u32;
                    if let Some(pos) = set.by_len.iter().position(|(l, _)| *l == plen) {
                        set.by_len[pos].1.remove(&a);
                        if set.by_len[pos].1.is_empty() {
                            set.by_len.remove(pos);
                        }
                    }
                    if set.by_len.is_empty() {
                        m.remove(&state);
                    }
                }
            }
            Table::Ternary(m) => {
                if let Some(list) = m.get_mut(&state) {
                    list.retain(|e| !(e.0 == priority && e.1 == a && e.2 == b));
                    if list.is_empty() {
                        m.remove(&state);
                    }
                }
            }
        }
    }

    /// Look up up to CHUNK keys at once; `None` states are skipped (their result is None).
    ///
    /// Range tables go in phases (find every key's interval set, then its block, then its
    /// interval), so the cache misses of different keys are in flight together rather than
    /// one key's chain of dependent misses after another's.
    #[inline(always)]
    pub fn lookup_chunk(&self, keys: &[(Option<u64>, u64)], out: &mut [Option<Action>]) {
        match self {
            Table::Range(m) => {
                let mut sets: [Option<&RangeSet>; CHUNK] = [None; CHUNK];
                for (k, &(state, _)) in keys.iter().enumerate() {
                    sets[k] = state.and_then(|s| m.get(&s));
                }
                let mut found = [0usize; CHUNK];
                for (k, &(_, v)) in keys.iter().enumerate() {
                    if let Some(set) = sets[k] {
                        found[k] = set.find(v);
                    }
                }
                for (k, &(_, v)) in keys.iter().enumerate() {
                    out[k] = sets[k].and_then(|set| set.result(found[k], v));
                }
            }
            _ => {
                for (k, &(state, v)) in keys.iter().enumerate() {
                    out[k] = state.and_then(|s| self.lookup(s, v));
                }
            }
        }
    }

    #[inline(always)]
    pub fn lookup(&self, state: u64, v: u64) -> Option<Action> {
        match self {
            Table::State(m) => m.get(&state).copied(),
            Table::Exact(m) => m.get(&(state, v)).copied(),
            Table::Range(m) => m.get(&state).and_then(|s| s.lookup(v)),
            Table::Lpm(width, m) => m.get(&state).and_then(|s| {
                s.by_len
                    .iter()
                    .find_map(|(plen, map)| map.get(&(v & prefix_mask(*width, *plen))).copied())
            }),
            Table::Ternary(m) => m
                .get(&state)
                .and_then(|list| list.iter().find(|e| v & e.2 == e.1).map(|e| e.3)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: Action = Action::new(SET_STATE, 7);

    #[test]
    fn range_bisection_finds_only_covering_interval() {
        let mut t = Table::new("range", 32).unwrap();
        t.install(0, 10, 20, 1, A);
        t.install(0, 30, 30, 1, Action::new(SET_STATE, 8));
        assert_eq!(t.lookup(0, 9), None);
        assert_eq!(t.lookup(0, 10), Some(A));
        assert_eq!(t.lookup(0, 20), Some(A));
        assert_eq!(t.lookup(0, 25), None);
        assert_eq!(t.lookup(0, 30).unwrap().param(), 8);
        assert_eq!(t.lookup(1, 15), None);
        t.uninstall(0, 10, 20, 1);
        assert_eq!(t.lookup(0, 15), None);
    }

    #[test]
    fn range_lookup_agrees_with_a_scan_across_block_sizes() {
        for n in [1usize, 15, 16, 17, 100, 2000] {
            let mut t = Table::new("range", 32).unwrap();
            // Intervals [10k, 10k + 4] in shuffled insertion order, one removed.
            let mut order: Vec<usize> = (0..n).collect();
            order.reverse();
            order.rotate_left(n / 3);
            for &k in &order {
                t.install(
                    0,
                    10 * k as u64,
                    10 * k as u64 + 4,
                    1,
                    Action::new(FWD, k as u64),
                );
            }
            t.uninstall(0, 10 * (n as u64 / 2), 10 * (n as u64 / 2) + 4, 1);
            for v in 0..(10 * n as u64 + 20) {
                let k = v / 10;
                let want = if v % 10 <= 4 && (k as usize) < n && k != n as u64 / 2 {
                    Some(k)
                } else {
                    None
                };
                assert_eq!(t.lookup(0, v).map(|a| a.param()), want, "n={n} v={v}");
            }
        }
    }

    #[test]
    fn lpm_prefers_longest_prefix() {
        let mut t = Table::new("lpm", 32).unwrap();
        t.install(0, 0x0A00_0000, 8, 0, A);
        t.install(0, 0x0A01_0000, 16, 0, Action::new(FWD, 2));
        t.install(0, 0, 0, 0, Action::new(DROP, 0));
        assert_eq!(t.lookup(0, 0x0A01_0203).unwrap().param(), 2);
        assert_eq!(t.lookup(0, 0x0A02_0203), Some(A));
        assert_eq!(t.lookup(0, 0x0B00_0000).unwrap().code(), DROP);
    }

    #[test]
    fn ternary_prefers_highest_priority() {
        let mut t = Table::new("ternary", 16).unwrap();
        t.install(0, 0x00, 0x00, 1, A);
        t.install(0, 0x10, 0xF0, 5, Action::new(SET_STATE, 9));
        assert_eq!(t.lookup(0, 0x12).unwrap().param(), 9);
        assert_eq!(t.lookup(0, 0x22), Some(A));
    }
}
