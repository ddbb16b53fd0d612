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
/// IR 4: hand the message to the state stages with the context in the parameter.
pub const STATEFUL: u8 = 6;

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

/// A range table's key type: u32 for fields of at most 32 bits (half the cache lines of
/// u64 per interval searched), u64 otherwise.
pub trait Key: Copy + Ord + Default {
    /// The value as a key; `None` if it does not fit (then it is above every interval).
    fn of(v: u64) -> Option<Self>;
}

impl Key for u32 {
    #[inline(always)]
    fn of(v: u64) -> Option<u32> {
        u32::try_from(v).ok()
    }
}

impl Key for u64 {
    #[inline(always)]
    fn of(v: u64) -> Option<u64> {
        Some(v)
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
pub struct RangeSet<K: Key> {
    los: Vec<K>,
    his: Vec<K>,
    acts: Vec<Action>,
    fence: Vec<K>,
}

const BLOCK: usize = 16;
/// Keys per `lookup_chunk` call.
pub const CHUNK: usize = 32;
const LINEAR_FENCE: usize = 64; // beyond this many blocks, bisect the fence instead

/// Ask for the cache line holding `x` ahead of its use (a hint only: no effect on results).
#[inline(always)]
pub fn prefetch<T>(x: *const T) {
    #[cfg(target_arch = "x86_64")]
    unsafe {
        core::arch::x86_64::_mm_prefetch::<{ core::arch::x86_64::_MM_HINT_T0 }>(x as *const i8);
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = x;
}

impl<K: Key> RangeSet<K> {
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

    fn position(&self, lo: K, hi: K) -> (usize, bool) {
        let i = self.los.partition_point(|&x| x < lo);
        (i, i < self.los.len() && self.los[i] == lo && self.his[i] == hi)
    }

    fn insert(&mut self, lo: K, hi: K, act: Action) {
        match self.position(lo, hi) {
            (i, true) => self.acts[i] = act,
            (i, false) => {
                self.los.insert(i, lo);
                self.his.insert(i, hi);
                self.acts.insert(i, act);
                self.refence(i);
            }
        }
    }

    fn remove(&mut self, lo: K, hi: K) {
        if let (i, true) = self.position(lo, hi) {
            self.los.remove(i);
            self.his.remove(i);
            self.acts.remove(i);
            self.refence(i);
        }
    }

    #[inline(always)]
    fn count_le(xs: &[K], v: K) -> usize {
        xs.iter().map(|&x| (x <= v) as usize).sum()
    }

    #[inline(always)]
    fn lookup(&self, v: u64) -> Option<Action> {
        let v = K::of(v)?;
        self.result(self.find_in_block(self.block(v), v), v)
    }

    /// The number of blocks whose first low end is at or below v (0: below every interval).
    #[inline(always)]
    fn block(&self, v: K) -> usize {
        if self.fence.len() <= LINEAR_FENCE {
            Self::count_le(&self.fence, v)
        } else {
            self.fence.partition_point(|&x| x <= v)
        }
    }

    /// One past the index of the last interval starting at or below v (0: none), given
    /// `blocks` from `block`.
    #[inline(always)]
    fn find_in_block(&self, blocks: usize, v: K) -> usize {
        if blocks == 0 {
            return 0; // below the first interval
        }
        let start = (blocks - 1) * BLOCK;
        let end = (start + BLOCK).min(self.los.len());
        // >= start + 1: the block's first low end is its fence value, which is <= v.
        start + Self::count_le(&self.los[start..end], v)
    }

    #[inline(always)]
    fn result(&self, found: usize, v: K) -> Option<Action> {
        if found == 0 || v > self.his[found - 1] {
            None
        } else {
            Some(self.acts[found - 1])
        }
    }

    /// `lookup` for up to CHUNK values at once, in phases (every key's block, then its
    /// interval, then its result), prefetching each phase's next line for every key first,
    /// so that the cache misses of different keys are in flight together rather than one
    /// key's chain of dependent misses after another's.
    #[inline(always)]
    fn lookup_chunk(
        m: &FxHashMap<u64, RangeSet<K>>,
        keys: &[(Option<u64>, u64)],
        out: &mut [Option<Action>],
    ) {
        let mut sets: [Option<&RangeSet<K>>; CHUNK] = [None; CHUNK];
        let mut vals = [K::default(); CHUNK];
        for (k, &(state, v)) in keys.iter().enumerate() {
            // A value too wide for K is above every interval: no result.
            if let (Some(s), Some(v)) = (state, K::of(v)) {
                sets[k] = m.get(&s);
                vals[k] = v;
                if let Some(set) = sets[k] {
                    prefetch(set.fence.as_ptr());
                }
            }
        }
        let mut found = [0usize; CHUNK];
        for k in 0..keys.len() {
            if let Some(set) = sets[k] {
                found[k] = set.block(vals[k]);
                if found[k] > 0 {
                    prefetch(&set.los[(found[k] - 1) * BLOCK]);
                }
            }
        }
        for k in 0..keys.len() {
            if let Some(set) = sets[k] {
                found[k] = set.find_in_block(found[k], vals[k]);
                if found[k] > 0 {
                    prefetch(&set.his[found[k] - 1]);
                    prefetch(&set.acts[found[k] - 1]);
                }
            }
        }
        for k in 0..keys.len() {
            out[k] = sets[k].and_then(|set| set.result(found[k], vals[k]));
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
    /// Fields of at most 32 bits.
    Range32(FxHashMap<u64, RangeSet<u32>>),
    Range(FxHashMap<u64, RangeSet<u64>>),
    Lpm(u32, FxHashMap<u64, LpmSet>),
    Ternary(FxHashMap<u64, Vec<(u32, u64, u64, Action)>>),
    /// A state table (IR 4: bind, decide): its entries live in the application's
    /// `state::AppState`, which looks them up; here it only holds its index (and counters).
    Stateful,
}

impl Table {
    pub fn new(kind: &str, width: u32) -> Option<Table> {
        Some(match kind {
            "state" => Table::State(FxHashMap::default()),
            "exact" => Table::Exact(FxHashMap::default()),
            "range" if width <= 32 => Table::Range32(FxHashMap::default()),
            "range" => Table::Range(FxHashMap::default()),
            "lpm" => Table::Lpm(width, FxHashMap::default()),
            "ternary" => Table::Ternary(FxHashMap::default()),
            "bind" | "decide" => Table::Stateful,
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
            // Entries fit their field's width (validated in switch/dataplane.py).
            Table::Range32(m) => m.entry(state).or_default().insert(a as u32, b as u32, act),
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
            Table::Stateful => {}
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
            Table::Range32(m) => {
                if let (Some(set), Some(a), Some(b)) = (m.get_mut(&state), u32::of(a), u32::of(b)) {
                    set.remove(a, b);
                    if set.los.is_empty() {
                        m.remove(&state);
                    }
                }
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
            Table::Stateful => {}
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
    /// Range tables answer the chunk in phases (`RangeSet::lookup_chunk`).
    #[inline(always)]
    pub fn lookup_chunk(&self, keys: &[(Option<u64>, u64)], out: &mut [Option<Action>]) {
        match self {
            Table::Range32(m) => RangeSet::lookup_chunk(m, keys, out),
            Table::Range(m) => RangeSet::lookup_chunk(m, keys, out),
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
            Table::Range32(m) => m.get(&state).and_then(|s| s.lookup(v)),
            Table::Range(m) => m.get(&state).and_then(|s| s.lookup(v)),
            Table::Lpm(width, m) => m.get(&state).and_then(|s| {
                s.by_len
                    .iter()
                    .find_map(|(plen, map)| map.get(&(v & prefix_mask(*width, *plen))).copied())
            }),
            Table::Ternary(m) => m
                .get(&state)
                .and_then(|list| list.iter().find(|e| v & e.2 == e.1).map(|e| e.3)),
            Table::Stateful => None,
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
    fn range_keys_of_either_width_hold_their_extremes() {
        for width in [8u32, 32, 33, 64] {
            let top = if width == 64 { u64::MAX } else { (1u64 << width) - 1 };
            let mut t = Table::new("range", width).unwrap();
            assert_eq!(matches!(t, Table::Range32(_)), width <= 32);
            t.install(3, 0, 0, 1, A);
            t.install(3, top - 1, top, 1, Action::new(FWD, 9));
            let keys = [
                (Some(3), 0),
                (Some(3), 1),
                (Some(3), top - 2),
                (Some(3), top - 1),
                (Some(3), top),
                (Some(4), top),
                (None, 0),
                (Some(3), u64::MAX),
            ];
            let want = [Some(7), None, None, Some(9), Some(9), None, None];
            let mut out = [None; 8];
            t.lookup_chunk(&keys, &mut out);
            for (k, &(state, v)) in keys.iter().enumerate() {
                let one = state.and_then(|s| t.lookup(s, v));
                assert_eq!(out[k], one, "width={width} key={k}");
                let w = if k < 7 { want[k] } else if width == 64 { Some(9) } else { None };
                assert_eq!(one.map(|a| a.param()), w, "width={width} key={k}");
            }
            t.uninstall(3, top - 1, top, 1);
            assert_eq!(t.lookup(3, top), None);
            assert_eq!(t.lookup(3, 0), Some(A));
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
