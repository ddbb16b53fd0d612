//! The packet path: parse, per-message table walk, replication, MoldUDP64 pruning, egress.
//!
//! Semantics are docs/pipeline-ir.md, as executed by switch/reference.py; the shared test
//! suite (tests/switch/) holds the two together, counters included. The pipeline arrives as a
//! `Plan` (names already resolved to table indices and bit offsets by
//! switch/native_dataplane.py). Copies are written back to back into one output buffer so a
//! batch costs no allocation per copy.

use crate::headers::{
    be16, ipv4_checksum, parse, Extractor, Parsed, Udp, ETH, MOLD, NO_ROUTE, TRUNCATED,
};
use crate::state::{AppState, PlanRegister, PlanState, Register};
use crate::tables::{prefetch, Action, Table, CHUNK, DROP, FWD, MCAST, SET_STATE, STATEFUL};
use rustc_hash::FxHashMap;
use serde::Deserialize;
use std::time::{SystemTime, UNIX_EPOCH};

/// A walk state no message can be in (states have at most 56 bits): "not walking", for
/// messages that are not subscription messages or are already decided.
const NOT_WALKING: u64 = u64::MAX;

#[derive(Deserialize)]
pub struct PlanField {
    pub bit_offset: u32,
    pub width: u32,
}

#[derive(Deserialize)]
pub struct PlanStage {
    pub field: PlanField,
    pub table: usize,
    pub default_table: usize,
}

/// One lane: stages walked from state 0, then its leaf table (docs/pipeline-ir.md, IR 3).
#[derive(Deserialize)]
pub struct PlanLane {
    pub stages: Vec<PlanStage>,
    pub leaf_table: usize,
}

#[derive(Deserialize)]
pub struct PlanApp {
    pub udp_port: u16,
    pub moldudp64: bool,
    pub message_bytes: usize,
    pub type_field: Option<PlanField>,
    pub types: Vec<u64>,
    /// At least one; a message's replicas are the union of every lane's decision's.
    pub lanes: Vec<PlanLane>,
    pub multicast_group: u32,
    /// IR 4: the application's state stages (None: the spec declares no state).
    #[serde(default)]
    pub state: Option<PlanState>,
}

#[derive(Deserialize)]
pub struct PlanTable {
    pub kind: String,
    pub width: u32,
}

#[derive(Deserialize)]
pub struct Plan {
    pub max_frame: usize,
    pub apps: Vec<PlanApp>,
    pub tables: Vec<PlanTable>,
    pub ipv4_table: usize,
    pub egress_table: usize,
    /// IR 4: every register array of every application's states, by index.
    #[serde(default)]
    pub registers: Vec<PlanRegister>,
}

#[derive(Clone, Copy)]
struct Stage {
    field: Extractor,
    table: usize,
    default_table: usize,
}

struct Lane {
    stages: Vec<Stage>,
    leaf_table: usize,
}

struct App {
    udp_port: u16,
    moldudp64: bool,
    message_bytes: usize,
    type_field: Option<Extractor>,
    types: Vec<u64>,
    lanes: Vec<Lane>,
    multicast_group: u32,
    state: Option<AppState>,
}

#[derive(Default, Clone, Copy)]
pub struct PortCounters {
    pub rx: u64,
    pub tx: u64,
}

/// Per-port counters: an array for the low port numbers every real setup uses (a hash
/// lookup per copy was measurable), a map for the rest. A port exists once it counted
/// something, so all-zero slots are simply absent.
pub struct PortTable {
    low: Vec<PortCounters>,
    high: FxHashMap<u32, PortCounters>,
}

const LOW_PORTS: usize = 4096;

impl PortTable {
    fn new() -> PortTable {
        PortTable {
            low: vec![PortCounters::default(); LOW_PORTS],
            high: FxHashMap::default(),
        }
    }

    #[inline(always)]
    fn get(&mut self, port: u32) -> &mut PortCounters {
        if (port as usize) < LOW_PORTS {
            &mut self.low[port as usize]
        } else {
            self.high.entry(port).or_default()
        }
    }

    fn clear(&mut self) {
        self.low
            .iter_mut()
            .for_each(|c| *c = PortCounters::default());
        self.high.clear();
    }

    pub fn iter(&self) -> impl Iterator<Item = (u32, PortCounters)> + '_ {
        let low = self
            .low
            .iter()
            .enumerate()
            .filter(|(_, c)| c.rx != 0 || c.tx != 0)
            .map(|(p, c)| (p as u32, *c));
        low.chain(self.high.iter().map(|(p, c)| (*p, *c)))
    }
}

/// The leaf outcome of one message, as the classify call reports it.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Leaf {
    None,
    Port(u32),
    /// An mcast decision: the index of its port bitmap in `Switch::port_sets`.
    Ports(u32),
    /// The walk handed the message to the state stages with this context (IR 4); they
    /// replace it by `Ports` or `None` before anything reads the leaves.
    Stateful(u64),
}

impl Leaf {
    #[inline(always)]
    fn of(a: Action) -> Leaf {
        match a.code() {
            FWD => Leaf::Port(a.param() as u32),
            MCAST => Leaf::Ports(a.param() as u32),
            STATEFUL => Leaf::Stateful(a.param()),
            _ => Leaf::None,
        }
    }

    /// 0 = no selection, 1<<32 | port = fwd, 2<<32 | port-set index = mcast.
    pub fn code(self) -> u64 {
        match self {
            Leaf::None | Leaf::Stateful(_) => 0,
            Leaf::Port(p) => (1u64 << 32) | p as u64,
            Leaf::Ports(i) => (2u64 << 32) | i as u64,
        }
    }
}

/// A multicast group: its replicas, sorted by port, and where each port's replicas lie, so
/// that an mcast decision finds the replicas of each set bit of its bitmap at once.
pub struct Group {
    reps: Vec<(u32, u16)>,
    by_port: Vec<(u32, u32)>, // port -> [start, end) in `reps`, for the 512 9-bit ports
}

impl Group {
    /// `reps` sorted by (port, rid), ports below 512 (the control layer checks both).
    pub fn new(reps: Vec<(u32, u16)>) -> Group {
        let mut by_port = vec![(0u32, 0u32); 512];
        let mut i = 0;
        while i < reps.len() {
            let port = reps[i].0;
            let mut j = i;
            while j < reps.len() && reps[j].0 == port {
                j += 1;
            }
            if let Some(slot) = by_port.get_mut(port as usize) {
                *slot = (i as u32, j as u32);
            }
            i = j;
        }
        Group { reps, by_port }
    }

    #[inline(always)]
    fn of_port(&self, port: u32) -> &[(u32, u16)] {
        match self.by_port.get(port as usize) {
            Some(&(a, b)) => &self.reps[a as usize..b as usize],
            None => &[],
        }
    }
}

pub struct Switch {
    max_frame: usize,
    apps: Vec<App>,
    pub tables: Vec<Table>,
    ipv4_table: usize,
    egress_table: usize,
    pub groups: FxHashMap<u32, Group>,
    /// mcast decisions' port bitmaps, by the index their table entries carry (a bitmap is
    /// up to 512 bits, wider than an entry's packed parameter; the control layer interns
    /// each distinct one here).
    pub port_sets: Vec<Vec<u64>>,
    pub hits: Vec<u64>,
    pub misses: Vec<u64>,
    pub ports: PortTable,
    pub drops: [u64; 4],
    /// IR 4: the register arrays of every application's states, by plan index.
    pub registers: Vec<Register>,
    // Scratch reused across packets: message blocks, walk states, leaves, (port, rid,
    // message) triples.
    blocks: Vec<(usize, usize)>,
    states: Vec<u64>,
    leaves: Vec<Leaf>,
    picks: Vec<(u32, u16, u32)>,
}

/// The time of a frame given none: the real-time clock in µs since the Unix epoch (the
/// state stages keep it modulo 2^48), so that windows on live traffic fall where a replay of
/// its capture, stamped with the capture's times, puts them. Read once per frame, and only
/// for frames with a stateful message.
fn ingress_clock() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_micros() as u64)
}

/// One copy in the output buffer.
pub struct Copy {
    pub port: u32,
    pub start: usize,
    pub len: usize,
}

impl Switch {
    pub fn new(plan: Plan) -> Result<Switch, String> {
        let mut tables = Vec::new();
        for t in &plan.tables {
            tables.push(
                Table::new(&t.kind, t.width)
                    .ok_or_else(|| format!("unknown table kind {}", t.kind))?,
            );
        }
        let n = tables.len();
        let check = |i: usize| {
            if i < n {
                Ok(i)
            } else {
                Err(format!("table index {i} out of range"))
            }
        };
        let registers: Vec<Register> = plan.registers.iter().map(Register::new).collect();
        let mut apps = Vec::new();
        for a in &plan.apps {
            if a.lanes.is_empty() {
                return Err("an application needs at least one lane".to_string());
            }
            let mut lanes = Vec::new();
            for l in &a.lanes {
                let mut stages = Vec::new();
                for s in &l.stages {
                    stages.push(Stage {
                        field: Extractor::new(&s.field),
                        table: check(s.table)?,
                        default_table: check(s.default_table)?,
                    });
                }
                lanes.push(Lane {
                    stages,
                    leaf_table: check(l.leaf_table)?,
                });
            }
            apps.push(App {
                udp_port: a.udp_port,
                moldudp64: a.moldudp64,
                message_bytes: a.message_bytes,
                type_field: a.type_field.as_ref().map(Extractor::new),
                types: a.types.clone(),
                lanes,
                multicast_group: a.multicast_group,
                state: match &a.state {
                    Some(s) => Some(AppState::new(s, n, &registers)?),
                    None => None,
                },
            });
        }
        Ok(Switch {
            max_frame: plan.max_frame,
            apps,
            hits: vec![0; n],
            misses: vec![0; n],
            tables,
            ipv4_table: check(plan.ipv4_table)?,
            egress_table: check(plan.egress_table)?,
            groups: FxHashMap::default(),
            port_sets: Vec::new(),
            ports: PortTable::new(),
            drops: [0; 4],
            registers,
            blocks: Vec::new(),
            states: Vec::new(),
            leaves: Vec::new(),
            picks: Vec::new(),
        })
    }

    /// The state machines of the applications that have state.
    pub fn apps_state_mut(&mut self) -> impl Iterator<Item = &mut AppState> {
        self.apps.iter_mut().filter_map(|a| a.state.as_mut())
    }

    pub fn reset_counters(&mut self) {
        self.hits.iter_mut().for_each(|x| *x = 0);
        self.misses.iter_mut().for_each(|x| *x = 0);
        self.ports.clear();
        self.drops = [0; 4];
    }

    #[inline(always)]
    fn lookup(&mut self, table: usize, state: u64, v: u64) -> Option<Action> {
        let hit = self.tables[table].lookup(state, v);
        if hit.is_some() {
            self.hits[table] += 1;
        } else {
            self.misses[table] += 1;
        }
        hit
    }

    fn app_index(&self, dport: u16) -> Option<usize> {
        self.apps.iter().position(|a| a.udp_port == dport)
    }

    /// Split the datagram into message blocks (into self.blocks); the MoldUDP64 sequence.
    fn split(&mut self, frame: &[u8], app: usize, u: &Udp) -> Result<u64, usize> {
        self.blocks.clear();
        if !self.apps[app].moldudp64 {
            self.blocks.push((u.start, u.end - u.start));
            return Ok(0);
        }
        if u.end - u.start < MOLD {
            return Err(TRUNCATED);
        }
        let seq = u64::from_be_bytes(frame[u.start + 10..u.start + 18].try_into().unwrap());
        let count = be16(frame, u.start + 18);
        let count = if count == 0xFFFF { 0 } else { count };
        let mut pos = u.start + MOLD;
        for _ in 0..count {
            if pos + 2 > u.end {
                return Err(TRUNCATED);
            }
            let n = be16(frame, pos);
            if pos + 2 + n > u.end {
                return Err(TRUNCATED);
            }
            self.blocks.push((pos + 2, n));
            pos += 2 + n;
        }
        Ok(seq)
    }

    /// Walk the stages for every message block of one frame, leaving one leaf per block and
    /// lane in `self.leaves`, lane-major (lane l's leaf of block k at `l * blocks + k`).
    ///
    /// The walk is stage-major: one stage is looked up for every message before the next
    /// stage. Lookups of different messages are independent, so their cache misses (large
    /// range tables do not fit in L2) overlap instead of queueing behind one another. The
    /// lookups made, and so the counters, are exactly those of walking each message alone.
    /// Messages go to the tables in chunks (`Table::lookup_chunk`), which range tables
    /// answer in phases for the same reason.
    fn classify_blocks(&mut self, app: usize, frame: &[u8], ts: Option<u64>) {
        let mut states = std::mem::take(&mut self.states);
        let mut leaves = std::mem::take(&mut self.leaves);
        leaves.clear();
        let nblocks = self.blocks.len();
        for lane in 0..self.apps[app].lanes.len() {
            states.clear();
            let a = &self.apps[app];
            for &(off, n) in &self.blocks {
                let msg = &frame[off..off + n];
                let subscription = n >= a.message_bytes
                    && a.type_field
                        .as_ref()
                        .map_or(true, |t| a.types.contains(&t.get(msg)));
                states.push(if subscription { 0 } else { NOT_WALKING });
                leaves.push(Leaf::None);
            }
            let first = lane * nblocks;
            self.walk_lane(
                app,
                lane,
                frame,
                &mut states,
                &mut leaves[first..first + nblocks],
            );
        }
        self.states = states;
        self.leaves = leaves;
        if self.apps[app].state.is_some() {
            self.run_state(app, frame, ts);
        }
    }

    /// The state stages (IR 4) for the messages whose walk decided `stateful(ctx)`, one
    /// message after another in packet order, since each sees the cells the one before it
    /// wrote. An application with state has one lane, so `leaves` is one per block.
    fn run_state(&mut self, app: usize, frame: &[u8], ts: Option<u64>) {
        let mut packet_ts = ts;
        let Switch {
            apps,
            blocks,
            leaves,
            registers,
            hits,
            misses,
            ..
        } = self;
        let Some(st) = apps[app].state.as_mut() else {
            return;
        };
        for (k, &(off, n)) in blocks.iter().enumerate() {
            if let Leaf::Stateful(ctx) = leaves[k] {
                let t = *packet_ts.get_or_insert_with(ingress_clock);
                let msg = &frame[off..off + n];
                leaves[k] = match st.run(ctx, msg, n as u64, t, registers, hits, misses) {
                    Some(set) => Leaf::Ports(set),
                    None => Leaf::None,
                };
            }
        }
    }

    /// One lane's stage-major walk (see `classify_blocks`) over `states`, deciding `leaves`.
    fn walk_lane(
        &mut self,
        app: usize,
        lane: usize,
        frame: &[u8],
        states: &mut [u64],
        leaves: &mut [Leaf],
    ) {
        for si in 0..self.apps[app].lanes[lane].stages.len() {
            let st = self.apps[app].lanes[lane].stages[si];
            for base in (0..states.len()).step_by(CHUNK) {
                let n = CHUNK.min(states.len() - base);
                let mut keys = [(None, 0u64); CHUNK];
                for k in 0..n {
                    if states[base + k] != NOT_WALKING {
                        let (off, len) = self.blocks[base + k];
                        keys[k] = (Some(states[base + k]), st.field.get(&frame[off..off + len]));
                    }
                }
                let mut hits = [None; CHUNK];
                self.tables[st.table].lookup_chunk(&keys[..n], &mut hits[..n]);
                for k in 0..n {
                    let Some(state) = keys[k].0 else { continue };
                    let hit = match hits[k] {
                        Some(h) => {
                            self.hits[st.table] += 1;
                            Some(h)
                        }
                        None => {
                            self.misses[st.table] += 1;
                            self.lookup(st.default_table, state, 0)
                        }
                    };
                    match hit {
                        None => {} // a miss in both keeps the state
                        Some(h) if h.code() == SET_STATE => states[base + k] = h.param(),
                        Some(h) => {
                            // fwd/mcast decide: later stages and the leaf are skipped.
                            leaves[base + k] = Leaf::of(h);
                            states[base + k] = NOT_WALKING;
                        }
                    }
                }
            }
        }
        let leaf_table = self.apps[app].lanes[lane].leaf_table;
        for k in 0..states.len() {
            if states[k] != NOT_WALKING {
                leaves[k] = self
                    .lookup(leaf_table, states[k], 0)
                    .map_or(Leaf::None, Leaf::of);
            }
        }
    }

    /// Classify every message of one frame, appending one leaf code per message block (with
    /// several lanes, one per block and lane, lane-major). Returns the number of codes (0 for
    /// a dropped or non-subscription frame).
    /// Codes are appended as little-endian u64 bytes, ready to hand to Python.
    pub fn classify(&mut self, frame: &[u8], in_port: u32, ts: Option<u64>, out: &mut Vec<u8>) -> u32 {
        self.ports.get(in_port).rx += 1;
        // Batches lay frames back to back: ask for the lines after this frame (where the
        // next one usually lies) while this one is walked. A hint only, never dereferenced.
        let next = frame.as_ptr().wrapping_add(frame.len());
        for line in 0..frame.len().min(2048).div_ceil(64) {
            prefetch(next.wrapping_add(64 * line));
        }
        let u = match parse(frame, self.max_frame) {
            Parsed::Udp(u) => u,
            _ => return 0,
        };
        let app = match self.app_index(u.dport) {
            Some(a) => a,
            None => return 0,
        };
        if self.split(frame, app, &u).is_err() {
            return 0;
        }
        self.classify_blocks(app, frame, ts);
        for leaf in &self.leaves {
            out.extend_from_slice(&leaf.code().to_le_bytes());
        }
        self.leaves.len() as u32
    }

    /// Forward one frame: append its copies to `buf`/`copies`, count everything.
    /// `ts`: the frame's time in µs (None: the ingress clock), which the state stages read
    /// unless the application declares a time field.
    pub fn process(
        &mut self,
        frame: &[u8],
        in_port: u32,
        ts: Option<u64>,
        buf: &mut Vec<u8>,
        copies: &mut Vec<Copy>,
    ) {
        self.ports.get(in_port).rx += 1;
        let first_copy = copies.len();
        match self.forward(frame, ts, buf, copies) {
            Ok(()) => {
                for c in &copies[first_copy..] {
                    self.ports.get(c.port).tx += 1;
                }
            }
            Err(reason) => self.drops[reason] += 1,
        }
    }

    fn forward(
        &mut self,
        frame: &[u8],
        ts: Option<u64>,
        buf: &mut Vec<u8>,
        copies: &mut Vec<Copy>,
    ) -> Result<(), usize> {
        match parse(frame, self.max_frame) {
            Parsed::Drop(reason) => return Err(reason),
            Parsed::Ip => {}
            Parsed::Udp(u) => {
                if let Some(app) = self.app_index(u.dport) {
                    if self.subscription(frame, app, &u, ts, buf, copies)? {
                        return Ok(());
                    }
                }
            }
        }
        self.ipv4(frame, buf, copies)
    }

    fn ipv4(
        &mut self,
        frame: &[u8],
        buf: &mut Vec<u8>,
        copies: &mut Vec<Copy>,
    ) -> Result<(), usize> {
        let dst = u32::from_be_bytes(frame[ETH + 16..ETH + 20].try_into().unwrap()) as u64;
        match self.lookup(self.ipv4_table, 0, dst) {
            Some(a) if a.code() != DROP => {
                copies.push(Copy {
                    port: a.param() as u32,
                    start: buf.len(),
                    len: frame.len(),
                });
                buf.extend_from_slice(frame);
                Ok(())
            }
            _ => Err(NO_ROUTE),
        }
    }

    /// Replicate and prune; Ok(false) when no message was selected (IPv4 forwarding then).
    fn subscription(
        &mut self,
        frame: &[u8],
        app: usize,
        u: &Udp,
        ts: Option<u64>,
        buf: &mut Vec<u8>,
        copies: &mut Vec<Copy>,
    ) -> Result<bool, usize> {
        let seq = self.split(frame, app, u)?;
        self.classify_blocks(app, frame, ts);
        let blocks = std::mem::take(&mut self.blocks);
        let leaves = std::mem::take(&mut self.leaves);
        let mut picks = std::mem::take(&mut self.picks);
        picks.clear();
        let nblocks = blocks.len().max(1);
        for (slot, leaf) in leaves.iter().enumerate() {
            let i = slot % nblocks; // the message; slot / nblocks is the lane
            match *leaf {
                Leaf::None | Leaf::Stateful(_) => {}
                Leaf::Port(p) => picks.push((p, 0, i as u32)),
                Leaf::Ports(set) => {
                    // Egress pruning: of the application's group, the replicas whose port's
                    // bit is set.
                    let group = self.apps[app].multicast_group;
                    if let (Some(reps), Some(bits)) =
                        (self.groups.get(&group), self.port_sets.get(set as usize))
                    {
                        for (w, &word) in bits.iter().enumerate() {
                            let mut word = word;
                            while word != 0 {
                                let port = (w as u32) * 64 + word.trailing_zeros();
                                word &= word - 1;
                                for &(p, r) in reps.of_port(port) {
                                    picks.push((p, r, i as u32));
                                }
                            }
                        }
                    }
                }
            }
        }
        let selected = !picks.is_empty();
        if selected {
            picks.sort_unstable();
            if self.apps[app].lanes.len() > 1 {
                picks.dedup(); // a replica two lanes select carries the message once
            }
            let mold = self.apps[app].moldudp64;
            let mut i = 0;
            while i < picks.len() {
                let (port, rid) = (picks[i].0, picks[i].1);
                let mut j = i;
                while j < picks.len() && picks[j].0 == port && picks[j].1 == rid {
                    j += 1;
                }
                let dport = self
                    .lookup(self.egress_table, port as u64, rid as u64)
                    .map(|a| a.param() as u16);
                let start = buf.len();
                self.write_copy(frame, u, mold, seq, &blocks, &picks[i..j], dport, buf);
                copies.push(Copy {
                    port,
                    start,
                    len: buf.len() - start,
                });
                i = j;
            }
        }
        self.blocks = blocks;
        self.leaves = leaves;
        self.picks = picks;
        Ok(selected)
    }

    /// Append one copy: headers of `frame`, then the kept messages (`kept` sorted by index).
    #[allow(clippy::too_many_arguments)]
    fn write_copy(
        &self,
        frame: &[u8],
        u: &Udp,
        mold: bool,
        seq: u64,
        blocks: &[(usize, usize)],
        kept: &[(u32, u16, u32)],
        dport: Option<u16>,
        buf: &mut Vec<u8>,
    ) {
        let start = buf.len();
        buf.extend_from_slice(&frame[..u.start]);
        if mold {
            let first = kept[0].2 as usize;
            let last = kept[kept.len() - 1].2 as usize;
            buf.extend_from_slice(&frame[u.start..u.start + 10]);
            buf.extend_from_slice(&seq.wrapping_add(first as u64).to_be_bytes());
            buf.extend_from_slice(&((last - first + 1) as u16).to_be_bytes());
            let mut k = 0;
            for (i, &(off, n)) in blocks.iter().enumerate().take(last + 1).skip(first) {
                if kept[k].2 as usize == i {
                    buf.extend_from_slice(&frame[off - 2..off + n]);
                    k += 1;
                } else {
                    buf.extend_from_slice(&[0, 0]);
                }
            }
        } else {
            buf.extend_from_slice(&frame[u.start..u.end]);
        }
        // Fix IPv4 total length and checksum, UDP length, destination port and checksum.
        let ip = start + ETH;
        let l4 = start + u.l4;
        let total = buf.len() - ip;
        buf[ip + 2..ip + 4].copy_from_slice(&(total as u16).to_be_bytes());
        let csum = ipv4_checksum(&buf[ip..l4]);
        buf[ip + 10..ip + 12].copy_from_slice(&csum.to_be_bytes());
        let ulen = (buf.len() - l4) as u16;
        buf[l4 + 4..l4 + 6].copy_from_slice(&ulen.to_be_bytes());
        if let Some(p) = dport {
            buf[l4 + 2..l4 + 4].copy_from_slice(&p.to_be_bytes());
        }
        buf[l4 + 6..l4 + 8].copy_from_slice(&[0, 0]);
    }
}
