//! The state stages (IR 4, docs/pipeline-ir.md "State"): register arrays, bind tables keyed
//! by context, the decide table, and the per-message read / compare / decide / write.
//!
//! A message whose walk ends in `stateful(ctx)` comes here. For every declared state and
//! each of its banks, the bind table says which rule's instance (if any) the context uses in
//! that bank, where its cells start and which boundaries split its value line; the bank's
//! register cell is read once, the value in the message's window compared with the
//! boundaries (a region, 0..8), and the regions of all banks, with the context, key the
//! decide table, which gives the port set and which banks' update actions fire. Each
//! accessed bank then writes its cell at most once. Nothing allocates per message: the
//! decide key and the pending writes live in scratch buffers kept between messages.
//!
//! Layout, for speed. The entries are kept as installed (`Src`, per context), and compiled
//! into one short run of u32 words per context in an arena (`Run`): its bound banks only,
//! each with its boundaries, then its decisions keyed by those banks' regions alone (a bank
//! the context does not bind always has region 0), as a dense table indexed by the regions
//! in mixed radix when that is small, else sorted by key. A message then costs one lookup
//! in a small map (context -> run), one or two cache lines of run, and its register cells;
//! `run_chunk` fetches those ahead for a whole chunk of messages so their misses overlap.
//! Runs are compiled lazily: an entry change marks its context, and the next packet
//! compiles the marked ones, so a bulk load costs the entries' number, not its square.

use crate::headers::Extractor;
use crate::tables::{prefetch, CHUNK};
use crate::switch::PlanField;
use rustc_hash::FxHashMap;
use serde::Deserialize;

pub const MAX_BOUNDARIES: usize = 8;
const TIMESTAMP_MASK: u64 = (1u64 << 48) - 1;
const N_MAX: u64 = u32::MAX as u64;
/// Regions are 4 bits each in the decide key: 16 banks per 64-bit word.
const BANKS_PER_WORD: usize = 16;

#[derive(Deserialize, Clone, Copy, PartialEq, Eq, Debug)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    Counter,
    Average,
    MeterPackets,
    MeterBytes,
}

#[derive(Deserialize, Clone, Copy, PartialEq, Eq, Debug)]
#[serde(rename_all = "snake_case")]
pub enum TimeUnit {
    Ns,
    Us,
    Ms,
}

#[derive(Deserialize)]
pub struct PlanTime {
    pub field: PlanField,
    pub unit: TimeUnit,
}

#[derive(Deserialize)]
pub struct PlanVar {
    pub kind: Kind,
    pub field: Option<PlanField>,
    pub key: Option<PlanField>,
    pub window_us: u64,
    pub buckets: u64,
    /// One per bank: its bind table's index (for the hit/miss counters) and its register's.
    pub bind_tables: Vec<usize>,
    pub registers: Vec<usize>,
}

#[derive(Deserialize)]
pub struct PlanState {
    pub time: Option<PlanTime>,
    pub vars: Vec<PlanVar>,
    pub decide_table: usize,
}

#[derive(Deserialize)]
pub struct PlanRegister {
    pub slots: usize,
    pub average: bool,
}

/// One register array: `slots` cells of [tag, n] (counters, meters) or [tag, n, s]
/// (averages), flat. Zero-initialised memory, so a large declaration costs address space
/// until its cells are touched.
pub struct Register {
    pub stride: usize,
    pub cells: Vec<u64>,
}

impl Register {
    pub fn new(p: &PlanRegister) -> Register {
        let stride = if p.average { 3 } else { 2 };
        Register {
            stride,
            cells: vec![0u64; p.slots * stride],
        }
    }

    pub fn slots(&self) -> usize {
        self.cells.len() / self.stride
    }

    /// (tag, n, s) of cell `i` (s is 0 for a cell without a sum).
    #[inline(always)]
    pub fn get(&self, i: usize) -> (u64, u64, u64) {
        let at = i * self.stride;
        let s = if self.stride == 3 { self.cells[at + 2] } else { 0 };
        (self.cells[at], self.cells[at + 1], s)
    }

    #[inline(always)]
    pub fn set(&mut self, i: usize, tag: u64, n: u64, s: u64) {
        let at = i * self.stride;
        if self.stride == 3 {
            self.cells[at + 2] = s;
        }
        self.cells[at] = tag;
        self.cells[at + 1] = n;
    }
}

/// A bind entry's action as installed: the rule's first cell, whether the state is scoped
/// for it, and its boundaries (thresholds with strict bits; those from `bounds` on unused).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Bind {
    pub base: u64,
    pub scoped: bool,
    pub bounds: u8,
    pub strict: u8,
    pub t: [u64; MAX_BOUNDARIES],
}

/// A decide entry's action as installed: the port set (an index into the switch's port
/// bitmaps; None for no port) and the update bits, one per bank in global bank order, as
/// 64-bit words.
#[derive(Clone, Debug)]
pub struct Decide {
    pub ports: Option<u32>,
    pub update: Box<[u64]>,
}

/// Bound banks a context may have: its sorted decide key holds 4 bits for each in 128, its
/// update mask a bit for each in 32.
pub const MAX_BOUND: usize = 32;
/// A context's decisions are a dense table when the product of its bound banks' region
/// counts is at most this, else sorted entries.
const DENSE_MAX: usize = 256;
const ABSENT: u32 = u32::MAX; // a dense slot with no entry
const NO_PORTS: u32 = u32::MAX - 1; // an entry whose decision selects no port
const SORTED_WORDS: usize = 6; // key (4 words), ports, update

/// What is installed for one context: its binds by global bank, its decide entries by
/// every bank's region.
#[derive(Default)]
struct Src {
    binds: Vec<(u16, Bind)>,
    decides: FxHashMap<Box<[u64]>, Decide>,
}

/// A bound bank as a run holds it: four header words ([global bank << 16 | bounds << 8 |
/// strict, base | scoped << 31, register | state << 16, the bank's weight in a dense
/// decision index]), then `bounds` thresholds. The register and state are the bank's (also
/// found through the global bank), kept here so the packet path reads one place.
#[derive(Clone, Copy)]
struct Bound {
    global: usize,
    bounds: usize,
    strict: u32,
    base: usize,
    scoped: bool,
    register: usize,
    var: usize,
    weight: usize,
}

const BIND_HEADER: usize = 4;

impl Bound {
    #[inline(always)]
    fn read(r: &[u32], pos: usize) -> Bound {
        let h = &r[pos..pos + BIND_HEADER];
        Bound {
            global: (h[0] >> 16) as usize,
            bounds: ((h[0] >> 8) & 0xFF) as usize,
            strict: h[0] & 0xFF,
            base: (h[1] & 0x7FFF_FFFF) as usize,
            scoped: h[1] >> 31 == 1,
            register: (h[2] & 0xFFFF) as usize,
            var: (h[2] >> 16) as usize,
            weight: h[3] as usize,
        }
    }

    /// The number of boundaries the value (n, s) satisfies (docs/pipeline-ir.md, step 3);
    /// `t` the thresholds.
    ///
    /// Without branches on the data: a counter or meter compares n with t, an average s with
    /// t·n, an empty average (n = 0) its value 0 with t; strict adds one to the right side
    /// (all integers). t < 2^32 and n < 2^32, so t·n + 1 is exact in 64 bits.
    #[inline(always)]
    fn region(&self, t: &[u32], average: bool, n: u64, s: u64) -> u64 {
        let product = average & (n != 0);
        let lhs = if product { s } else if average { 0 } else { n };
        let m = if product { n } else { 1 };
        let mut r = 0u64;
        for (j, &t) in t.iter().enumerate().take(self.bounds) {
            let strict = ((self.strict >> j) & 1) as u64;
            r += (lhs >= t as u64 * m + strict) as u64;
        }
        r
    }
}

struct BankRt {
    bind_table: usize,
    register: usize,
}

/// A bank as the packet path needs it, by global bank: its state, register, bind table.
#[derive(Clone, Copy)]
struct BankInfo {
    var: usize,
    register: usize,
    bind_table: usize,
}

struct VarRt {
    kind: Kind,
    field: Option<Extractor>,
    key: Option<Extractor>,
    key_mask: u64,
    window: u64,
    banks: Vec<BankRt>,
}

/// The write an update action may make, once the decision says whether it fires: bound
/// bank `bit`'s new cell.
#[derive(Clone, Copy)]
struct Pending {
    bit: u32,
    register: u32,
    idx: u32,
    tag: u64,
    n: u64,
    s: u64,
}

/// The cells of a message's first bound banks, computed when they are prefetched.
const CACHED_CELLS: usize = 4;

/// The state machine of one application.
pub struct AppState {
    time: Option<(Extractor, TimeUnit)>,
    vars: Vec<VarRt>,
    /// (state index, bank) of each bank, in global bank order.
    banks: Vec<(usize, usize)>,
    info: Vec<BankInfo>,
    words: usize,
    pub decide_table: usize,
    /// By context. Contexts arrive as small indices (switch/native_dataplane.py interns
    /// the 24-bit ids), so a context's run is found by indexing `runs`, no hashing.
    src: FxHashMap<u64, Src>,
    /// context -> (start, length) of its run in `arena`; length 0: no run.
    runs: Vec<(u32, u32)>,
    arena: Vec<u32>,
    garbage: usize,
    /// Contexts whose entries changed since their run was compiled.
    dirty: Vec<u64>,
    /// Messages that reached the state stages since the counters were reset: each looked up
    /// every bind table and the decide table once, so the misses are this less the hits
    /// (counted as such, not one increment per bank and message).
    lookups: u64,
    /// Messages per context since its run was compiled (or the counters reset): each hit the
    /// bind table of every bank the run binds. Folded into `bind_hits` (by global bank) when
    /// the run changes; the counters add the two up. One increment per message, not one per
    /// bound bank.
    ctx_msgs: Vec<u64>,
    bind_hits: Vec<u64>,
    pending: Vec<Pending>,
    /// Each state's window index at the frame's time (without a time field every message
    /// of a frame has the frame's time: one division per state and frame, not per bank
    /// and message).
    windows: Vec<u64>,
}

impl AppState {
    pub fn new(
        p: &PlanState,
        tables: usize,
        registers: &[Register],
    ) -> Result<AppState, String> {
        let check = |i: usize| {
            if i < tables {
                Ok(i)
            } else {
                Err(format!("table index {i} out of range"))
            }
        };
        if p.vars.len() > 256 {
            return Err("the native switch runs at most 256 declared states".into());
        }
        let mut vars = Vec::new();
        let mut banks = Vec::new();
        for (vi, v) in p.vars.iter().enumerate() {
            if v.bind_tables.len() != v.registers.len()
                || v.bind_tables.is_empty()
                || v.bind_tables.len() > 256
            {
                return Err("a state needs one bind table per register, 1..256 of them".into());
            }
            if v.window_us == 0 || !v.buckets.is_power_of_two() {
                return Err("a state's window is at least 1 µs, its buckets a power of two".into());
            }
            if (v.kind == Kind::Average) != v.field.is_some() {
                return Err("an average, and only an average, has a field".into());
            }
            let mut var_banks = Vec::new();
            for (bi, (&t, &r)) in v.bind_tables.iter().zip(&v.registers).enumerate() {
                let reg = registers
                    .get(r)
                    .ok_or_else(|| format!("register index {r} out of range"))?;
                if (reg.stride == 3) != (v.kind == Kind::Average) {
                    return Err("an average's registers hold sums, and only an average's".into());
                }
                if reg.slots() > 1 << 31 || r > u16::MAX as usize {
                    return Err("the native switch runs at most 65,536 registers of 2^31 cells".into());
                }
                var_banks.push(BankRt {
                    bind_table: check(t)?,
                    register: r,
                });
                banks.push((vi, bi));
            }
            vars.push(VarRt {
                kind: v.kind,
                field: v.field.as_ref().map(Extractor::new),
                key: v.key.as_ref().map(Extractor::new),
                key_mask: v.buckets - 1,
                window: v.window_us,
                banks: var_banks,
            });
        }
        if banks.len() > u16::MAX as usize {
            return Err("too many banks".into());
        }
        let info = banks
            .iter()
            .map(|&(v, b): &(usize, usize)| BankInfo {
                var: v,
                register: vars[v].banks[b].register,
                bind_table: vars[v].banks[b].bind_table,
            })
            .collect();
        let nbanks = banks.len();
        Ok(AppState {
            time: p.time.as_ref().map(|t| (Extractor::new(&t.field), t.unit)),
            vars,
            words: banks.len().div_ceil(BANKS_PER_WORD),
            banks,
            info,
            decide_table: check(p.decide_table)?,
            src: FxHashMap::default(),
            runs: Vec::new(),
            arena: Vec::new(),
            garbage: 0,
            dirty: Vec::new(),
            lookups: 0,
            ctx_msgs: Vec::new(),
            bind_hits: vec![0; nbanks],
            pending: Vec::with_capacity(MAX_BOUND),
            windows: Vec::new(),
        })
    }

    /// The global bank of bind table `table`, if it is one of this application's.
    pub fn bank_of_table(&self, table: usize) -> Option<usize> {
        self.banks
            .iter()
            .position(|&(v, b)| self.vars[v].banks[b].bind_table == table)
    }

    fn touch(&mut self, ctx: u64) -> &mut Src {
        self.dirty.push(ctx);
        self.src.entry(ctx).or_default()
    }

    pub fn install_bind(&mut self, bank: usize, ctx: u64, bind: Bind) -> Result<(), String> {
        if bind.t.iter().any(|&t| t > u32::MAX as u64) || bind.base >= 1 << 31 {
            return Err("a bind's thresholds have 32 bits, its base 31".into());
        }
        let g = bank as u16;
        let src = self.src.entry(ctx).or_default();
        match src.binds.binary_search_by_key(&g, |x| x.0) {
            Ok(i) => src.binds[i].1 = bind,
            Err(i) => {
                if src.binds.len() == MAX_BOUND {
                    return Err(format!(
                        "context {ctx} would bind more than {MAX_BOUND} banks, the most the \
                         native switch compares per context"
                    ));
                }
                src.binds.insert(i, (g, bind));
            }
        }
        self.dirty.push(ctx);
        Ok(())
    }

    pub fn uninstall_bind(&mut self, bank: usize, ctx: u64) {
        let src = self.touch(ctx);
        if let Ok(i) = src.binds.binary_search_by_key(&(bank as u16), |x| x.0) {
            src.binds.remove(i);
        }
    }

    /// Every bank's region as words (low first), checked against this application's banks.
    pub fn regions(&self, regions: &[u64]) -> Result<Box<[u64]>, String> {
        if regions.iter().skip(self.words).any(|&w| w != 0) {
            return Err(format!("regions wider than {} banks", self.banks.len()));
        }
        let mut key = vec![0u64; self.words];
        for (k, &w) in regions.iter().take(self.words).enumerate() {
            key[k] = w;
        }
        Ok(key.into_boxed_slice())
    }

    pub fn install_decide(&mut self, ctx: u64, regions: Box<[u64]>, d: Decide) {
        self.touch(ctx).decides.insert(regions, d);
    }

    pub fn uninstall_decide(&mut self, ctx: u64, regions: &[u64]) {
        self.touch(ctx).decides.remove(regions);
    }

    /// Compile the runs of the contexts whose entries changed (before a packet reads them).
    #[inline(always)]
    fn flush(&mut self) {
        if !self.dirty.is_empty() {
            self.compile_dirty();
        }
    }

    #[cold]
    fn compile_dirty(&mut self) {
        let mut dirty = std::mem::take(&mut self.dirty);
        dirty.sort_unstable();
        dirty.dedup();
        for &ctx in &dirty {
            let c = ctx as usize;
            if c >= self.runs.len() {
                self.runs.resize(c + 1, (0, 0));
                self.ctx_msgs.resize(c + 1, 0);
            }
            // The run's messages hit its binds: count them before the binds change.
            let msgs = std::mem::take(&mut self.ctx_msgs[c]);
            let (start, len) = self.runs[c];
            if msgs != 0 && len != 0 {
                let run = &self.arena[start as usize..(start + len) as usize];
                for_each_bound(run, |b| self.bind_hits[b.global] += msgs);
            }
            self.garbage += self.runs[c].1 as usize;
            self.runs[c] = (0, 0);
            let run = match self.src.get(&ctx) {
                Some(src) if src.binds.is_empty() && src.decides.is_empty() => {
                    self.src.remove(&ctx);
                    continue;
                }
                Some(src) => self.compile(src),
                None => continue,
            };
            self.runs[c] = (self.arena.len() as u32, run.len() as u32);
            self.arena.extend_from_slice(&run);
        }
        if self.garbage > 4096 && self.garbage * 2 > self.arena.len() {
            // Most of the arena is runs since replaced: copy the live ones to a new one.
            let mut arena = Vec::with_capacity(self.arena.len() - self.garbage);
            for (start, len) in self.runs.iter_mut().filter(|r| r.1 != 0) {
                let from = *start as usize;
                *start = arena.len() as u32;
                arena.extend_from_slice(&self.arena[from..from + *len as usize]);
            }
            self.arena = arena;
            self.garbage = 0;
        }
        dirty.clear();
        self.dirty = dirty;
    }

    /// A context's run: [nbinds | dense << 8, decisions], per bound bank [global bank << 16
    /// | bounds << 8 | strict, base | scoped << 31, thresholds...], then the
    /// decisions: dense, a [ports, update] pair per combination of the bound banks' regions
    /// (bank i's region r_i counts sum_i r_i * prod_{j<i} (bounds_j + 1)); or sorted, [key
    /// as 4 words low first, ports, update] per entry, key = sum_i r_i << 4i. Update bit i
    /// is the i-th bound bank's.
    fn compile(&self, src: &Src) -> Vec<u32> {
        let mut run = vec![src.binds.len() as u32, 0];
        let mut radix = Vec::with_capacity(src.binds.len());
        let mut weight = 1usize;
        for &(g, b) in &src.binds {
            let info = self.info[g as usize];
            run.push((g as u32) << 16 | (b.bounds as u32) << 8 | b.strict as u32);
            run.push(b.base as u32 | (b.scoped as u32) << 31);
            run.push(info.register as u32 | (info.var as u32) << 16);
            run.push(weight.min(u32::MAX as usize) as u32);
            weight = weight.saturating_mul(b.bounds as usize + 1);
            run.extend(b.t.iter().take(b.bounds as usize).map(|&t| t as u32));
            radix.push(b.bounds as usize + 1);
        }
        // The entries that can match, as (regions of the bound banks, ports, update).
        let mut local: Vec<(Vec<u32>, u32, u32)> = Vec::new();
        'entries: for (regions, d) in &src.decides {
            let mut rest = regions.to_vec();
            let mut rs = Vec::with_capacity(src.binds.len());
            let mut update = 0u32;
            for (i, &(g, b)) in src.binds.iter().enumerate() {
                let g = g as usize;
                let (w, shift) = (g / BANKS_PER_WORD, 4 * (g % BANKS_PER_WORD));
                let r = rest.get(w).map_or(0, |x| (x >> shift) & 0xF) as u32;
                if let Some(x) = rest.get_mut(w) {
                    *x &= !(0xFu64 << shift);
                }
                if r as u8 > b.bounds {
                    continue 'entries; // a region the bank never reaches
                }
                rs.push(r);
                if d.update.get(g / 64).is_some_and(|x| (x >> (g % 64)) & 1 == 1) {
                    update |= 1 << i;
                }
            }
            if rest.iter().any(|&x| x != 0) {
                continue; // a region for a bank this context does not bind: never matches
            }
            local.push((rs, d.ports.unwrap_or(NO_PORTS), update));
        }
        let slots: usize = radix.iter().product();
        if slots <= DENSE_MAX {
            run[0] |= 1 << 8;
            run[1] = slots as u32;
            let at = run.len();
            run.resize(at + 2 * slots, 0);
            for k in 0..slots {
                run[at + 2 * k] = ABSENT;
            }
            for (rs, ports, update) in local {
                let (mut idx, mut stride) = (0usize, 1usize);
                for (r, m) in rs.iter().zip(&radix) {
                    idx += *r as usize * stride;
                    stride *= m;
                }
                run[at + 2 * idx] = ports;
                run[at + 2 * idx + 1] = update;
            }
        } else {
            let mut keyed: Vec<(u128, u32, u32)> = local
                .into_iter()
                .map(|(rs, p, u)| {
                    let key = rs
                        .iter()
                        .enumerate()
                        .fold(0u128, |k, (i, &r)| k | (r as u128) << (4 * i));
                    (key, p, u)
                })
                .collect();
            keyed.sort_unstable_by_key(|e| e.0);
            run[1] = keyed.len() as u32;
            for (key, ports, update) in keyed {
                for w in 0..4 {
                    run.push((key >> (32 * w)) as u32);
                }
                run.push(ports);
                run.push(update);
            }
        }
        run
    }

    /// The hits of the bind tables (their entries in `hits` are not counted per message).
    pub fn hits(&self, hits: &mut [u64]) {
        let mut by_bank = self.bind_hits.clone();
        for (c, &(start, len)) in self.runs.iter().enumerate() {
            let msgs = self.ctx_msgs.get(c).copied().unwrap_or(0);
            if msgs != 0 && len != 0 {
                let run = &self.arena[start as usize..(start + len) as usize];
                for_each_bound(run, |b| by_bank[b.global] += msgs);
            }
        }
        for (g, &n) in by_bank.iter().enumerate() {
            hits[self.info[g].bind_table] = n;
        }
    }

    /// The misses of the bind and decide tables, from the lookups and the hits (`hits` as
    /// `hits` made them).
    pub fn misses(&self, hits: &[u64], misses: &mut [u64]) {
        for v in &self.vars {
            for b in &v.banks {
                misses[b.bind_table] = self.lookups - hits[b.bind_table];
            }
        }
        misses[self.decide_table] = self.lookups - hits[self.decide_table];
    }

    pub fn reset_counters(&mut self) {
        self.lookups = 0;
        self.ctx_msgs.iter_mut().for_each(|n| *n = 0);
        self.bind_hits.iter_mut().for_each(|n| *n = 0);
    }

    /// Run the state stages for up to `CHUNK` messages whose walks decided `stateful(ctx)`,
    /// in order: `items` are (ctx, offset, length) of each message in `frame`, all at
    /// `packet_ts` (µs). For each: read, compare, decide, write; `out` gets the decision's
    /// port-set index (None: no port). `hits` are the per-table hit counters.
    ///
    /// Messages follow one another (each sees the cells the one before it wrote), but where
    /// their data lie does not depend on that: the runs and the register cells are looked
    /// up and prefetched for every message of the chunk first, so that their cache misses
    /// overlap instead of coming one after another.
    pub fn run_chunk(
        &mut self,
        items: &[(u64, usize, usize)],
        frame: &[u8],
        packet_ts: u64,
        registers: &mut [Register],
        hits: &mut [u64],
        out: &mut [Option<u32>],
    ) {
        self.flush();
        let AppState {
            time,
            vars,
            runs,
            arena,
            lookups,
            decide_table,
            windows,
            pending,
            ctx_msgs,
            ..
        } = self;
        *lookups += items.len() as u64;
        for &(ctx, _, _) in items {
            if let Some(r) = runs.get(ctx as usize) {
                prefetch(r);
            }
        }
        let mut at: [Option<(u32, u32)>; CHUNK] = [None; CHUNK];
        for (j, &(ctx, _, _)) in items.iter().enumerate() {
            at[j] = runs.get(ctx as usize).copied().filter(|r| r.1 != 0);
            if let Some((start, len)) = at[j] {
                // The run's first two lines: its binds and, for most contexts, decisions.
                prefetch(&arena[start as usize]);
                if len > 16 {
                    prefetch(&arena[start as usize + 16]);
                }
            }
        }
        // The cells of each message's first bound banks, fetched ahead (and kept, so the
        // key is read once).
        let mut cells = [[0u32; CACHED_CELLS]; CHUNK];
        for (j, &(_, off, n)) in items.iter().enumerate() {
            let Some((start, len)) = at[j] else { continue };
            let run = &arena[start as usize..(start + len) as usize];
            let msg = &frame[off..off + n];
            let mut pos = 2;
            for i in 0..((run[0] & 0xFF) as usize).min(CACHED_CELLS) {
                let b = Bound::read(run, pos);
                pos += BIND_HEADER + b.bounds;
                let cell = cell_of(&vars[b.var], &b, msg);
                cells[j][i] = cell as u32;
                let reg = &registers[b.register];
                if let Some(c) = reg.cells.get(cell * reg.stride) {
                    prefetch(c);
                }
            }
        }
        let frame_windows = if time.is_none() {
            let ts = packet_ts & TIMESTAMP_MASK;
            windows.clear();
            windows.extend(vars.iter().map(|v| ts / v.window));
            Some(&windows[..])
        } else {
            None
        };
        for (j, &(ctx, off, n)) in items.iter().enumerate() {
            out[j] = match at[j] {
                None => None, // nothing bound, no decision: no port, no write
                Some((start, len)) => {
                    ctx_msgs[ctx as usize] += 1;
                    let run = &arena[start as usize..(start + len) as usize];
                    let msg = &frame[off..off + n];
                    let clock = match frame_windows {
                        Some(w) => Clock::Windows(w),
                        None => Clock::Ts(ts_us(time, msg, packet_ts)),
                    };
                    let m = Message { bytes: msg, length: n as u64, clock, cells: &cells[j] };
                    run_one(run, vars, *decide_table, &m, registers, hits, pending)
                }
            };
        }
    }
}

/// Call `f` with each bound bank of a run.
fn for_each_bound(run: &[u32], mut f: impl FnMut(&Bound)) {
    let mut pos = 2;
    for _ in 0..run[0] & 0xFF {
        let b = Bound::read(run, pos);
        pos += BIND_HEADER + b.bounds;
        f(&b);
    }
}

/// The cell a bound bank's instance uses for a message: its base plus the key's bucket.
#[inline(always)]
fn cell_of(var: &VarRt, b: &Bound, msg: &[u8]) -> usize {
    b.base + var.key.as_ref().map_or(0, |k| (k.get(msg) & var.key_mask) as usize)
}

/// The message's time in µs (48 bits): its declared time field's, else the packet's.
#[inline(always)]
fn ts_us(time: &Option<(Extractor, TimeUnit)>, msg: &[u8], packet_ts: u64) -> u64 {
    let ts = match time {
        None => packet_ts,
        Some((f, unit)) => {
            let v = f.get(msg);
            match unit {
                TimeUnit::Ns => v / 1000,
                TimeUnit::Us => v,
                // Modulo 2^48 of the exact product: 2^48 divides 2^64, so wrapping is exact.
                TimeUnit::Ms => v.wrapping_mul(1000),
            }
        }
    };
    ts & TIMESTAMP_MASK
}

/// A message's time as the banks need it: its window index per state, or its time in µs.
#[derive(Clone, Copy)]
enum Clock<'a> {
    Windows(&'a [u64]),
    Ts(u64),
}

/// One message as the state stages see it.
struct Message<'a> {
    bytes: &'a [u8],
    length: u64,
    clock: Clock<'a>,
    /// The cells of its first bound banks (`CACHED_CELLS`).
    cells: &'a [u32; CACHED_CELLS],
}

/// Steps 3-5 of the per-message algorithm for one message of a context with a run.
///
/// A scoped bank's cell is written as soon as it is read (it is written whatever the
/// decision, and no other bank reads it); an update action's waits for the decision.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn run_one(
    run: &[u32],
    vars: &[VarRt],
    decide_table: usize,
    m: &Message,
    registers: &mut [Register],
    hits: &mut [u64],
    pending: &mut Vec<Pending>,
) -> Option<u32> {
    let dense = (run[0] >> 8) & 1 == 1;
    let (mut idx, mut key) = (0usize, 0u128);
    let mut pos = 2;
    pending.clear();
    // Per state, computed at its first bound bank (binds come in state order).
    let mut facts = (usize::MAX, 0u64, 0u64, 0u64); // (var, w, dn, ds)
    for i in 0..(run[0] & 0xFF) as usize {
        let b = Bound::read(run, pos);
        let t = &run[pos + BIND_HEADER..pos + BIND_HEADER + b.bounds];
        pos += BIND_HEADER + b.bounds;
        let var = &vars[b.var];
        if facts.0 != b.var {
            facts = (
                b.var,
                match m.clock {
                    Clock::Windows(w) => w[b.var],
                    Clock::Ts(ts) => ts / var.window,
                },
                if var.kind == Kind::MeterBytes { m.length } else { 1 },
                var.field.as_ref().map_or(0, |f| f.get(m.bytes)),
            );
        }
        let (_, w, dn, ds) = facts;
        let cell = match m.cells.get(i) {
            Some(&c) => c as usize,
            None => cell_of(var, &b, m.bytes),
        };
        let reg = &mut registers[b.register];
        let (tag, n, s) = reg.get(cell);
        let (cn, cs) = if tag == w { (n, s) } else { (0, 0) };
        // Whole saturation: an addition past either maximum is not made at all.
        let (an, asum) = match (cn.checked_add(dn), cs.checked_add(ds)) {
            (Some(an), Some(asum)) if an <= N_MAX => (an, asum),
            _ => (cn, cs),
        };
        let r = if b.scoped {
            reg.set(cell, w, an, asum);
            b.region(t, var.kind == Kind::Average, an, asum)
        } else {
            pending.push(Pending {
                bit: i as u32,
                register: b.register as u32,
                idx: cell as u32,
                tag: w,
                n: an,
                s: asum,
            });
            b.region(t, var.kind == Kind::Average, cn, cs)
        };
        if dense {
            idx += r as usize * b.weight;
        } else {
            key |= (r as u128) << (4 * i);
        }
    }
    let found = if dense {
        let (ports, update) = (run[pos + 2 * idx], run[pos + 2 * idx + 1]);
        (ports != ABSENT).then_some((ports, update))
    } else {
        let n = run[1] as usize;
        let entry = |e: usize| {
            let w = &run[pos + SORTED_WORDS * e..pos + SORTED_WORDS * e + 4];
            w.iter()
                .enumerate()
                .fold(0u128, |k, (i, &x)| k | (x as u128) << (32 * i))
        };
        search(n, entry, key).map(|e| {
            let at = pos + SORTED_WORDS * e + 4;
            (run[at], run[at + 1])
        })
    };
    let (ports, update) = found?;
    hits[decide_table] += 1;
    for p in pending.iter() {
        if (update >> p.bit) & 1 == 1 {
            registers[p.register as usize].set(p.idx as usize, p.tag, p.n, p.s);
        }
    }
    (ports != NO_PORTS).then_some(ports)
}

/// The index among 0..n whose key (`key_of`, ascending) is `key`, by bisection.
#[inline(always)]
fn search(n: usize, key_of: impl Fn(usize) -> u128, key: u128) -> Option<usize> {
    let (mut lo, mut hi) = (0usize, n);
    while lo < hi {
        let mid = (lo + hi) / 2;
        match key_of(mid).cmp(&key) {
            std::cmp::Ordering::Equal => return Some(mid),
            std::cmp::Ordering::Less => lo = mid + 1,
            std::cmp::Ordering::Greater => hi = mid,
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bound(t: &[(u32, bool)]) -> (Bound, Vec<u32>) {
        let mut b = Bound {
            global: 0,
            bounds: t.len(),
            strict: 0,
            base: 0,
            scoped: true,
        };
        for (j, &(_, s)) in t.iter().enumerate() {
            b.strict |= (s as u32) << j;
        }
        (b, t.iter().map(|x| x.0).collect())
    }

    #[test]
    fn regions_count_satisfied_boundaries() {
        let (b, t) = bound(&[(5, false), (5, true), (9, false)]);
        assert_eq!(b.region(&t, false, 4, 0), 0);
        assert_eq!(b.region(&t, false, 5, 0), 1);
        assert_eq!(b.region(&t, false, 6, 0), 2);
        assert_eq!(b.region(&t, false, 9, 0), 3);
        // Averages: s / n against t, exactly; an empty average is 0.
        assert_eq!(b.region(&t, true, 2, 10), 1); // avg 5
        assert_eq!(b.region(&t, true, 2, 11), 2); // avg 5.5
        assert_eq!(b.region(&t, true, 0, 0), 0);
        let (z, tz) = bound(&[(0, false), (0, true)]);
        assert_eq!(z.region(&tz, true, 0, 0), 1);
        assert_eq!(z.region(&tz, true, 3, 0), 1);
        assert_eq!(z.region(&tz, true, 3, 1), 2);
        // The largest operands: the product stays exact.
        let (big, tb) = bound(&[(u32::MAX, false)]);
        assert_eq!(big.region(&tb, true, N_MAX, N_MAX * N_MAX), 1);
        assert_eq!(big.region(&tb, true, N_MAX, N_MAX * N_MAX - 1), 0);
    }
}
