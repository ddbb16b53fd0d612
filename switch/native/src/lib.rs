//! `switch._native`: the Python binding of the software switch's compiled data plane.
//!
//! This crate is the switch's own: the packet path (headers.rs, tables.rs, switch.rs) and
//! its binding. The broker's Kafka fast paths are another crate, shim/native
//! (`shim._native`), so neither layer's build can hold the other's back.
//!
//! One class, `Switch`, built from a JSON plan that switch/native_dataplane.py derives from
//! pipeline.json. Control calls take entries already validated and reduced to integers by
//! the Python control layer. Data calls come in three shapes: one frame (`process`), many
//! frames packed into one buffer with a little-endian u32 length per frame
//! (`process_packed`, returning the copies packed the same way plus a record per copy), and
//! `classify_packed`, the table walk alone (one leaf code per message, no replication), which
//! the benchmark measures. The packed calls release the GIL while they work; one `Switch`
//! is used by one thread at a time (a concurrent call gets PyO3's "already borrowed" error).
//!
//! State (IR 4): data calls take each frame's time in µs (one value, or a packed
//! little-endian u64 per frame; absent: the switch's ingress clock); bind and decide entries
//! have their own install calls (their actions carry several parameters); register cells
//! can be read, written and zeroed (the control plane's resets and P4Runtime's
//! RegisterEntry).

mod headers;
mod state;
mod switch;
mod tables;

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList};

use crate::state::{Bind, Decide, MAX_BOUNDARIES};
use crate::switch::{Copy, Plan};
use crate::tables::Action;

#[pyclass(module = "switch._native")]
struct Switch {
    inner: switch::Switch,
    out: Vec<u8>,
    copies: Vec<Copy>,
    records: Vec<u8>,
}

/// Iterate (start, len) of frames packed as `buf` with u32 little-endian `lengths`.
fn frames<'a>(buf: &'a [u8], lengths: &'a [u8]) -> PyResult<Vec<&'a [u8]>> {
    if lengths.len() % 4 != 0 {
        return Err(PyValueError::new_err(
            "lengths must hold little-endian u32 values",
        ));
    }
    let mut out = Vec::with_capacity(lengths.len() / 4);
    let mut pos = 0usize;
    for c in lengths.chunks_exact(4) {
        let n = u32::from_le_bytes(c.try_into().unwrap()) as usize;
        if pos + n > buf.len() {
            return Err(PyValueError::new_err(
                "lengths run past the end of the buffer",
            ));
        }
        out.push(&buf[pos..pos + n]);
        pos += n;
    }
    Ok(out)
}

/// Per-frame timestamps packed as little-endian u64, one per frame (None: not given).
fn timestamps(ts: Option<&[u8]>, frames: usize) -> PyResult<Option<Vec<u64>>> {
    let Some(ts) = ts else { return Ok(None) };
    if ts.len() != 8 * frames {
        return Err(PyValueError::new_err(
            "timestamps must hold one little-endian u64 per frame",
        ));
    }
    Ok(Some(
        ts.chunks_exact(8)
            .map(|c| u64::from_le_bytes(c.try_into().unwrap()))
            .collect(),
    ))
}

impl Switch {
    /// The application state and the global bank of bind table `table`.
    fn bank_of(&mut self, table: usize) -> PyResult<(&mut state::AppState, usize)> {
        self.inner
            .apps_state_mut()
            .find_map(|st| st.bank_of_table(table).map(|b| (st, b)))
            .ok_or_else(|| PyValueError::new_err("no such bind table"))
    }

    fn decide_of(&mut self, table: usize) -> PyResult<&mut state::AppState> {
        self.inner
            .apps_state_mut()
            .find(|st| st.decide_table == table)
            .ok_or_else(|| PyValueError::new_err("no such decide table"))
    }

    fn register(&mut self, register: usize, first: usize, count: usize) -> PyResult<&mut state::Register> {
        let r = self
            .inner
            .registers
            .get_mut(register)
            .ok_or_else(|| PyValueError::new_err("no such register"))?;
        if first.checked_add(count).is_none_or(|end| end > r.slots()) {
            return Err(PyValueError::new_err(format!(
                "cells {first}..{first}+{count} are outside the register's {} cells",
                r.slots()
            )));
        }
        Ok(r)
    }
}

#[pymethods]
impl Switch {
    #[new]
    fn new(plan: &str) -> PyResult<Self> {
        let plan: Plan =
            serde_json::from_str(plan).map_err(|e| PyValueError::new_err(e.to_string()))?;
        let inner = switch::Switch::new(plan).map_err(PyValueError::new_err)?;
        Ok(Switch {
            inner,
            out: Vec::new(),
            copies: Vec::new(),
            records: Vec::new(),
        })
    }

    /// Add an entry or replace the action of the entry with the same key.
    #[allow(clippy::too_many_arguments)]
    fn install(
        &mut self,
        table: usize,
        state: u64,
        a: u64,
        b: u64,
        priority: u32,
        code: u8,
        param: u64,
    ) -> PyResult<()> {
        let t = self
            .inner
            .tables
            .get_mut(table)
            .ok_or_else(|| PyValueError::new_err("no such table"))?;
        t.install(state, a, b, priority, Action::new(code, param));
        Ok(())
    }

    fn uninstall(
        &mut self,
        table: usize,
        state: u64,
        a: u64,
        b: u64,
        priority: u32,
    ) -> PyResult<()> {
        let t = self
            .inner
            .tables
            .get_mut(table)
            .ok_or_else(|| PyValueError::new_err("no such table"))?;
        t.uninstall(state, a, b, priority);
        Ok(())
    }

    /// Add or replace the bind of context `ctx` in bind table `table`.
    #[allow(clippy::too_many_arguments)]
    fn install_bind(
        &mut self,
        table: usize,
        ctx: u64,
        base: u64,
        scoped: bool,
        bounds: u8,
        strict: u8,
        thresholds: Vec<u64>,
    ) -> PyResult<()> {
        if bounds as usize > MAX_BOUNDARIES || thresholds.len() != MAX_BOUNDARIES {
            return Err(PyValueError::new_err(format!(
                "a bind has at most {MAX_BOUNDARIES} boundaries and {MAX_BOUNDARIES} thresholds"
            )));
        }
        let mut t = [0u64; MAX_BOUNDARIES];
        t.copy_from_slice(&thresholds);
        let (st, bank) = self.bank_of(table)?;
        st.install_bind(bank, ctx, Bind { base, scoped, bounds, strict, t });
        Ok(())
    }

    fn uninstall_bind(&mut self, table: usize, ctx: u64) -> PyResult<()> {
        let (st, bank) = self.bank_of(table)?;
        st.uninstall_bind(bank, ctx);
        Ok(())
    }

    /// Add or replace the decide entry (ctx, regions): regions and update as 64-bit words,
    /// low word first; ports the index of a port bitmap (None: no port).
    fn install_decide(
        &mut self,
        table: usize,
        ctx: u64,
        regions: Vec<u64>,
        ports: Option<u32>,
        update: Vec<u64>,
    ) -> PyResult<()> {
        let st = self.decide_of(table)?;
        let key = st.decide_key(ctx, &regions).map_err(PyValueError::new_err)?;
        st.install_decide(key, Decide { ports, update: update.into_boxed_slice() });
        Ok(())
    }

    fn uninstall_decide(&mut self, table: usize, ctx: u64, regions: Vec<u64>) -> PyResult<()> {
        let st = self.decide_of(table)?;
        let key = st.decide_key(ctx, &regions).map_err(PyValueError::new_err)?;
        st.uninstall_decide(&key);
        Ok(())
    }

    /// Set cells first..first+count of register `register` to zero (an empty instance).
    fn reset_cells(&mut self, register: usize, first: usize, count: usize) -> PyResult<()> {
        let r = self.register(register, first, count)?;
        let stride = r.stride;
        r.cells[first * stride..(first + count) * stride].fill(0);
        Ok(())
    }

    /// (tag, n, s) of cells first..first+count of register `register`.
    fn read_cells(&mut self, register: usize, first: usize, count: usize) -> PyResult<Vec<(u64, u64, u64)>> {
        let r = self.register(register, first, count)?;
        Ok((first..first + count).map(|i| r.get(i)).collect())
    }

    fn write_cell(&mut self, register: usize, index: usize, tag: u64, n: u64, s: u64) -> PyResult<()> {
        let r = self.register(register, index, 1)?;
        if tag >> 48 != 0 || n >> 32 != 0 || (r.stride == 2 && s != 0) {
            return Err(PyValueError::new_err(
                "a cell holds a 48-bit tag, a 32-bit count and (averages only) a 64-bit sum",
            ));
        }
        r.set(index, tag, n, s);
        Ok(())
    }

    fn set_group(&mut self, group: u32, replicas: Vec<(u32, u16)>) {
        self.inner.groups.insert(group, switch::Group::new(replicas));
    }

    fn delete_group(&mut self, group: u32) {
        self.inner.groups.remove(&group);
    }

    /// Set port bitmap `index` (64 ports per word, low bits first), which mcast entries
    /// name by index.
    fn set_port_set(&mut self, index: usize, words: Vec<u64>) {
        let sets = &mut self.inner.port_sets;
        if sets.len() <= index {
            sets.resize(index + 1, Vec::new());
        }
        sets[index] = words;
    }

    /// One frame in (at time `ts` µs; None: the ingress clock); a list of (egress_port,
    /// frame) copies out.
    #[pyo3(signature = (packet, in_port, ts=None))]
    fn process<'py>(
        &mut self,
        py: Python<'py>,
        packet: &[u8],
        in_port: u32,
        ts: Option<u64>,
    ) -> PyResult<Bound<'py, PyList>> {
        let mut buf = Vec::new();
        let mut copies: Vec<Copy> = Vec::new();
        self.inner.process(packet, in_port, ts, &mut buf, &mut copies);
        PyList::new(
            py,
            copies
                .iter()
                .map(|c| (c.port, PyBytes::new(py, &buf[c.start..c.start + c.len]))),
        )
    }

    /// Many frames in (packed; `ts` one little-endian u64 per frame, or None: the ingress
    /// clock); returns (copies buffer, records) where records holds, per copy, four
    /// little-endian u32: input frame index, egress port, offset, length.
    #[pyo3(signature = (buf, lengths, in_port, ts=None))]
    fn process_packed<'py>(
        &mut self,
        py: Python<'py>,
        buf: &[u8],
        lengths: &[u8],
        in_port: u32,
        ts: Option<&[u8]>,
    ) -> PyResult<(Bound<'py, PyBytes>, Bound<'py, PyBytes>)> {
        let input = frames(buf, lengths)?;
        let ts = timestamps(ts, input.len())?;
        // Buffers are kept between calls: growing fresh multi-megabyte vectors every batch
        // cost more in page faults and copies than the copies themselves.
        let (inner, out, copies, records) = (
            &mut self.inner,
            &mut self.out,
            &mut self.copies,
            &mut self.records,
        );
        // Other Python threads run while the batch is processed (the input is immutable bytes).
        py.detach(|| {
            out.clear();
            copies.clear();
            records.clear();
            for (i, frame) in input.iter().enumerate() {
                let before = copies.len();
                inner.process(frame, in_port, ts.as_ref().map(|t| t[i]), out, copies);
                for c in &copies[before..] {
                    let mut rec = [0u8; 16];
                    for (k, v) in [i as u32, c.port, c.start as u32, c.len as u32]
                        .into_iter()
                        .enumerate()
                    {
                        rec[4 * k..4 * k + 4].copy_from_slice(&v.to_le_bytes());
                    }
                    records.extend_from_slice(&rec);
                }
            }
        });
        if out.len() > u32::MAX as usize {
            return Err(PyValueError::new_err(
                "batch output exceeds 4 GiB: pass fewer frames per call",
            ));
        }
        Ok((PyBytes::new(py, out), PyBytes::new(py, records)))
    }

    /// The table walk alone: returns (leaf codes, one little-endian u64 per message block;
    /// block counts, one little-endian u32 per frame). A code is 0 (nothing selected),
    /// 1<<32 | port (fwd) or 2<<32 | group (mcast). The state stages run (and write their
    /// registers) as in `process_packed`, with the same `ts`.
    #[pyo3(signature = (buf, lengths, in_port, ts=None))]
    fn classify_packed<'py>(
        &mut self,
        py: Python<'py>,
        buf: &[u8],
        lengths: &[u8],
        in_port: u32,
        ts: Option<&[u8]>,
    ) -> PyResult<(Bound<'py, PyBytes>, Bound<'py, PyBytes>)> {
        let input = frames(buf, lengths)?;
        let ts = timestamps(ts, input.len())?;
        let (inner, codes, counts) = (&mut self.inner, &mut self.out, &mut self.records);
        py.detach(|| {
            codes.clear();
            counts.clear();
            for (i, frame) in input.iter().enumerate() {
                let n = inner.classify(frame, in_port, ts.as_ref().map(|t| t[i]), codes);
                counts.extend_from_slice(&n.to_le_bytes());
            }
        });
        Ok((PyBytes::new(py, codes), PyBytes::new(py, counts)))
    }

    /// (hits per table index, misses per table index, {port: (rx, tx)}, drops by reason
    /// [malformed, truncated, oversized, no_route]).
    #[allow(clippy::type_complexity)]
    fn counters<'py>(
        &self,
        py: Python<'py>,
    ) -> PyResult<(Vec<u64>, Vec<u64>, Bound<'py, PyDict>, [u64; 4])> {
        let ports = PyDict::new(py);
        for (p, c) in self.inner.ports.iter() {
            ports.set_item(p, (c.rx, c.tx))?;
        }
        Ok((
            self.inner.hits.clone(),
            self.inner.misses.clone(),
            ports,
            self.inner.drops,
        ))
    }

    fn reset_counters(&mut self) {
        self.inner.reset_counters();
    }
}

/// The interface version switch/native_switch.py checks at import, so a build from older
/// source is refused instead of misbehaving: bump both together whenever a method of `Switch`
/// (or the plan it takes) changes its signature or meaning.
const ABI_VERSION: u32 = 4;

#[pymodule(name = "_native")]
fn camus_switch_native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("ABI_VERSION", ABI_VERSION)?;
    m.add_class::<Switch>()?;
    Ok(())
}
