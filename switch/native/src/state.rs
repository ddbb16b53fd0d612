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

use crate::headers::Extractor;
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
    pub fn get(&self, i: usize) -> (u64, u64, u64) {
        let c = &self.cells[i * self.stride..(i + 1) * self.stride];
        (c[0], c[1], if self.stride == 3 { c[2] } else { 0 })
    }

    pub fn set(&mut self, i: usize, tag: u64, n: u64, s: u64) {
        let stride = self.stride;
        let c = &mut self.cells[i * stride..(i + 1) * stride];
        c[0] = tag;
        c[1] = n;
        if stride == 3 {
            c[2] = s;
        }
    }
}

/// A bind entry's action: the rule's first cell, whether the state is scoped for it, and
/// its boundaries (thresholds with strict bits; the unused ones never counted).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Bind {
    pub base: u64,
    pub scoped: bool,
    pub bounds: u8,
    pub strict: u8,
    pub t: [u64; MAX_BOUNDARIES],
}

impl Bind {
    /// The number of boundaries the value (n, s) satisfies (docs/pipeline-ir.md, step 3).
    #[inline(always)]
    fn region(&self, average: bool, n: u64, s: u64) -> u64 {
        let mut r = 0u64;
        for j in 0..self.bounds as usize {
            let t = self.t[j];
            let strict = (self.strict >> j) & 1 == 1;
            let ok = if !average {
                if strict {
                    n > t
                } else {
                    n >= t
                }
            } else if n == 0 {
                // An empty average is 0.
                !strict && t == 0
            } else {
                // t < 2^32 and n < 2^32: the product is exact in 64 bits.
                let tn = t * n;
                if strict {
                    s > tn
                } else {
                    s >= tn
                }
            };
            r += ok as u64;
        }
        r
    }
}

/// A decide entry's action: the port set (an index into the switch's port bitmaps; None
/// for no port) and the update bits, one per bank in global bank order.
pub struct Decide {
    pub ports: Option<u32>,
    pub update: Box<[u64]>,
}

impl Decide {
    #[inline(always)]
    fn updates(&self, bank: usize) -> bool {
        self.update
            .get(bank / 64)
            .is_some_and(|w| (w >> (bank % 64)) & 1 == 1)
    }
}

struct BankRt {
    bind_table: usize,
    register: usize,
    global: usize,
}

struct VarRt {
    kind: Kind,
    field: Option<Extractor>,
    key: Option<Extractor>,
    key_mask: u64,
    window: u64,
    banks: Vec<BankRt>,
}

/// One accessed bank's pending write.
#[derive(Clone, Copy)]
struct Pending {
    register: usize,
    idx: usize,
    tag: u64,
    n: u64,
    s: u64,
    scoped: bool,
    global: usize,
}

/// The state machine of one application.
pub struct AppState {
    time: Option<(Extractor, TimeUnit)>,
    vars: Vec<VarRt>,
    banks: usize,
    pub decide_table: usize,
    /// ctx -> the bind of each bank (global bank order); a context is absent when no bank
    /// binds it. One lookup gives every bank's bind (each still counts as its own table's
    /// lookup).
    binds: FxHashMap<u64, Box<[Option<Bind>]>>,
    /// [ctx, region words...] -> decision.
    decide: FxHashMap<Box<[u64]>, Decide>,
    key: Vec<u64>,
    pending: Vec<Pending>,
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
        let mut vars = Vec::new();
        let mut global = 0usize;
        for v in &p.vars {
            if v.bind_tables.len() != v.registers.len() || v.bind_tables.is_empty() {
                return Err("a state needs one bind table per register, at least one".into());
            }
            if v.window_us == 0 || !v.buckets.is_power_of_two() {
                return Err("a state's window is at least 1 µs, its buckets a power of two".into());
            }
            if (v.kind == Kind::Average) != v.field.is_some() {
                return Err("an average, and only an average, has a field".into());
            }
            let mut banks = Vec::new();
            for (&t, &r) in v.bind_tables.iter().zip(&v.registers) {
                let reg = registers
                    .get(r)
                    .ok_or_else(|| format!("register index {r} out of range"))?;
                if (reg.stride == 3) != (v.kind == Kind::Average) {
                    return Err("an average's registers hold sums, and only an average's".into());
                }
                banks.push(BankRt {
                    bind_table: check(t)?,
                    register: r,
                    global,
                });
                global += 1;
            }
            vars.push(VarRt {
                kind: v.kind,
                field: v.field.as_ref().map(Extractor::new),
                key: v.key.as_ref().map(Extractor::new),
                key_mask: v.buckets - 1,
                window: v.window_us,
                banks,
            });
        }
        let words = global.div_ceil(BANKS_PER_WORD);
        Ok(AppState {
            time: p.time.as_ref().map(|t| (Extractor::new(&t.field), t.unit)),
            vars,
            banks: global,
            decide_table: check(p.decide_table)?,
            binds: FxHashMap::default(),
            decide: FxHashMap::default(),
            key: vec![0; 1 + words],
            pending: Vec::with_capacity(global),
        })
    }

    /// The (state index, bank) of bind table `table`, if it is one of this application's.
    pub fn bank_of_table(&self, table: usize) -> Option<usize> {
        self.vars
            .iter()
            .flat_map(|v| v.banks.iter())
            .find(|b| b.bind_table == table)
            .map(|b| b.global)
    }

    pub fn install_bind(&mut self, bank: usize, ctx: u64, bind: Bind) {
        let n = self.banks;
        let slot = self
            .binds
            .entry(ctx)
            .or_insert_with(|| vec![None; n].into_boxed_slice());
        slot[bank] = Some(bind);
    }

    pub fn uninstall_bind(&mut self, bank: usize, ctx: u64) {
        if let Some(slot) = self.binds.get_mut(&ctx) {
            slot[bank] = None;
            if slot.iter().all(Option::is_none) {
                self.binds.remove(&ctx);
            }
        }
    }

    /// The decide key of (ctx, regions given as 64-bit words, low first).
    pub fn decide_key(&self, ctx: u64, regions: &[u64]) -> Result<Box<[u64]>, String> {
        let words = self.key.len() - 1;
        if regions.iter().skip(words).any(|&w| w != 0) {
            return Err(format!("regions wider than {} banks", self.banks));
        }
        let mut key = vec![0u64; 1 + words];
        key[0] = ctx;
        for (k, &w) in regions.iter().take(words).enumerate() {
            key[1 + k] = w;
        }
        Ok(key.into_boxed_slice())
    }

    pub fn install_decide(&mut self, key: Box<[u64]>, d: Decide) {
        self.decide.insert(key, d);
    }

    pub fn uninstall_decide(&mut self, key: &[u64]) {
        self.decide.remove(key);
    }

    /// The message's time in µs (48 bits): its declared time field's, else the packet's.
    #[inline(always)]
    pub fn ts_us(&self, msg: &[u8], packet_ts: u64) -> u64 {
        let ts = match &self.time {
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

    /// Run the state stages for one message whose walk decided `stateful(ctx)`: read,
    /// compare, decide, write. Returns the decision's port-set index (None: no port).
    /// `length` is what a bytes meter adds; `hits`/`misses` are the per-table counters.
    #[inline]
    pub fn run(
        &mut self,
        ctx: u64,
        msg: &[u8],
        length: u64,
        packet_ts: u64,
        registers: &mut [Register],
        hits: &mut [u64],
        misses: &mut [u64],
    ) -> Option<u32> {
        let ts = self.ts_us(msg, packet_ts);
        let binds = self.binds.get(&ctx);
        let key = &mut self.key;
        key.iter_mut().for_each(|w| *w = 0);
        key[0] = ctx;
        self.pending.clear();
        for var in &self.vars {
            let average = var.kind == Kind::Average;
            // Computed once the first bank binds: most states of most contexts bind nothing.
            let mut facts: Option<(u64, u64, u64, u64)> = None; // (w, bucket, dn, ds)
            for bank in &var.banks {
                let Some(b) = binds.and_then(|bs| bs[bank.global].as_ref()) else {
                    misses[bank.bind_table] += 1;
                    continue;
                };
                hits[bank.bind_table] += 1;
                let (w, bucket, dn, ds) = *facts.get_or_insert_with(|| {
                    let dn = if var.kind == Kind::MeterBytes { length } else { 1 };
                    (
                        ts / var.window,
                        var.key.as_ref().map_or(0, |k| k.get(msg) & var.key_mask),
                        dn,
                        var.field.as_ref().map_or(0, |f| f.get(msg)),
                    )
                });
                let idx = b.base as usize + bucket as usize;
                let reg = &registers[bank.register];
                let (tag, n, s) = reg.get(idx);
                let (cn, cs) = if tag == w { (n, s) } else { (0, 0) };
                // Whole saturation: an addition past either maximum is not made at all.
                let (an, asum) = match (cn.checked_add(dn), cs.checked_add(ds)) {
                    (Some(an), Some(asum)) if an <= N_MAX => (an, asum),
                    _ => (cn, cs),
                };
                let (vn, vs) = if b.scoped { (an, asum) } else { (cn, cs) };
                let r = b.region(average, vn, vs);
                let g = bank.global;
                key[1 + g / BANKS_PER_WORD] |= r << (4 * (g % BANKS_PER_WORD));
                self.pending.push(Pending {
                    register: bank.register,
                    idx,
                    tag: w,
                    n: an,
                    s: asum,
                    scoped: b.scoped,
                    global: g,
                });
            }
        }
        let decision = self.decide.get(&key[..]);
        match decision {
            Some(_) => hits[self.decide_table] += 1,
            None => misses[self.decide_table] += 1,
        }
        for p in &self.pending {
            if p.scoped || decision.is_some_and(|d| d.updates(p.global)) {
                registers[p.register].set(p.idx, p.tag, p.n, p.s);
            }
        }
        decision.and_then(|d| d.ports)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bind(t: &[(u64, bool)], scoped: bool) -> Bind {
        let mut b = Bind {
            base: 0,
            scoped,
            bounds: t.len() as u8,
            strict: 0,
            t: [0; MAX_BOUNDARIES],
        };
        for (j, &(v, s)) in t.iter().enumerate() {
            b.t[j] = v;
            b.strict |= (s as u8) << j;
        }
        b
    }

    #[test]
    fn regions_count_satisfied_boundaries() {
        let b = bind(&[(5, false), (5, true), (9, false)], true);
        assert_eq!(b.region(false, 4, 0), 0);
        assert_eq!(b.region(false, 5, 0), 1);
        assert_eq!(b.region(false, 6, 0), 2);
        assert_eq!(b.region(false, 9, 0), 3);
        // Averages: s / n against t, exactly; an empty average is 0.
        assert_eq!(b.region(true, 2, 10), 1); // avg 5
        assert_eq!(b.region(true, 2, 11), 2); // avg 5.5
        assert_eq!(b.region(true, 0, 0), 0);
        let z = bind(&[(0, false), (0, true)], true);
        assert_eq!(z.region(true, 0, 0), 1);
        assert_eq!(z.region(true, 3, 0), 1);
        assert_eq!(z.region(true, 3, 1), 2);
        // The largest operands: the product stays exact.
        let big = bind(&[(u32::MAX as u64, false)], true);
        assert_eq!(big.region(true, N_MAX, N_MAX * N_MAX), 1);
        assert_eq!(big.region(true, N_MAX, N_MAX * N_MAX - 1), 0);
    }
}
