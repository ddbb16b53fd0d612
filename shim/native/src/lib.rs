//! `shim._native`: the broker's Kafka fast paths, each the compiled twin of a pure-Python
//! reference that stays authoritative (a call answers None wherever the reference must decide).
//!
//! - The record-batch walk (`check_records`, `decode_records`; src/records.rs) for
//!   shim/protocol/records.py.
//! - JSON slots (`JsonPaths`; src/json.rs) for shim/schema.py.
//! - Reframing (`frame_records`, `frame_body`; src/reframe.rs) for shim/reframe.py, and the
//!   receiving side's bookkeeping (`tally_copies`) for shim/datapath.py.
//!
//! This crate is the broker's own; the software switch's packet path is another crate,
//! switch/native (`switch._native`). Python reaches this module only through
//! shim/native_kafka.py, which checks `ABI_VERSION` and warns once when it falls back.

mod json;
mod records;
mod reframe;

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyInt, PyList, PyString, PyTuple};
use pyo3::PyTypeInfo;
use pyo3::{ffi, intern};

/// Validate a batch's (decompressed) records section without building records: None when
/// the Python reference must decide (an error, or values beyond i64), else whether the
/// offset deltas run 0, 1, 2, ... (what `validate_produce_batch` checks).
#[pyfunction]
fn check_records(py: Python<'_>, body: &[u8], record_count: i64) -> Option<bool> {
    py.detach(|| {
        let (mut spans, mut headers) = (Vec::new(), Vec::new());
        if !records::scan(body, record_count, &mut spans, &mut headers) {
            return None;
        }
        Some(
            spans
                .iter()
                .enumerate()
                .all(|(i, s)| s.off_delta == i as i64),
        )
    })
}

/// The fields of shim's `Record`, in its order.
fn record_fields(py: Python<'_>) -> [&Bound<'_, PyString>; 6] {
    [
        intern!(py, "offset"),
        intern!(py, "timestamp"),
        intern!(py, "key"),
        intern!(py, "value"),
        intern!(py, "headers"),
        intern!(py, "attributes"),
    ]
}

fn bytes_or_none<'py>(
    py: Python<'py>,
    body: &[u8],
    part: Option<(usize, usize)>,
) -> Bound<'py, PyAny> {
    match part {
        Some((start, len)) => PyBytes::new(py, &body[start..start + len]).into_any(),
        None => py.None().into_bound(py),
    }
}

/// Decode a batch's (decompressed) records section into a tuple of `cls` (shim's `Record`:
/// offset, timestamp, key, value, headers, attributes), or None when the Python reference
/// must decide (see `check_records`).
/// `only`: build just these records (by index, in this order), as
/// `batch_records_at` wants them for the few a view receives.
#[pyfunction]
#[pyo3(signature = (body, record_count, base_offset, base_timestamp, cls, only=None))]
fn decode_records<'py>(
    py: Python<'py>,
    body: &[u8],
    record_count: i64,
    base_offset: i64,
    base_timestamp: i64,
    cls: &Bound<'py, PyAny>,
    only: Option<Vec<usize>>,
) -> PyResult<Option<Bound<'py, PyTuple>>> {
    let (mut spans, mut headers) = (Vec::new(), Vec::new());
    if !py.detach(|| records::scan(body, record_count, &mut spans, &mut headers)) {
        return Ok(None);
    }
    // `Record` is a frozen slots dataclass whose __init__ (object.__setattr__ per field)
    // cost 1.5 µs per record, more than the whole walk; the instances are made as its
    // __init__ would leave them, with object.__new__ and the generic setattr that
    // object.__setattr__ is. The differential tests compare them with the reference's.
    let new = py
        .import("builtins")?
        .getattr("object")?
        .getattr("__new__")?;
    let names = record_fields(py);
    let empty = PyTuple::empty(py);
    let chosen: Vec<&records::Span> = match &only {
        None => spans.iter().collect(),
        Some(idx) => match idx.iter().map(|&j| spans.get(j)).collect::<Option<_>>() {
            Some(v) => v,
            None => return Ok(None), // an index past the batch: the caller's reference raises
        },
    };
    let mut out = Vec::with_capacity(chosen.len());
    for s in chosen {
        let (Some(offset), Some(timestamp)) = (
            base_offset.checked_add(s.off_delta),
            base_timestamp.checked_add(s.ts_delta),
        ) else {
            return Ok(None); // Python's ints would not overflow: let the reference decide
        };
        let hdrs = if s.headers.1 == 0 {
            empty.clone()
        } else {
            PyTuple::new(
                py,
                headers[s.headers.0..s.headers.0 + s.headers.1]
                    .iter()
                    .map(|h| {
                        let k = &body[h.key.0..h.key.0 + h.key.1];
                        // scan() checked the key is UTF-8
                        let name = PyString::new(py, std::str::from_utf8(k).unwrap_or_default());
                        (name, bytes_or_none(py, body, h.value))
                    }),
            )?
        };
        let values: [Bound<'py, PyAny>; 6] = [
            offset.into_pyobject(py)?.into_any(),
            timestamp.into_pyobject(py)?.into_any(),
            bytes_or_none(py, body, s.key),
            bytes_or_none(py, body, s.value),
            hdrs.into_any(),
            s.attributes.into_pyobject(py)?.into_any(),
        ];
        let rec = new.call1((cls,))?;
        for (name, v) in names.iter().zip(values.iter()) {
            // SAFETY: all three are live objects we hold references to.
            if unsafe { ffi::PyObject_GenericSetAttr(rec.as_ptr(), name.as_ptr(), v.as_ptr()) } < 0
            {
                return Err(PyErr::fetch(py));
            }
        }
        out.push(rec);
    }
    Ok(Some(PyTuple::new(py, out)?))
}

/// The JSON paths of a topic schema, compiled once: `extract(value)` gives, per path, an
/// int (0..2^64), an ASCII str or None (missing or any other value); every path None when
/// the value is not JSON; or None as a whole when Python's `json.loads` must decide (see
/// src/json.rs).
#[pyclass(module = "shim._native", frozen)]
struct JsonPaths {
    paths: Vec<Vec<json::Step>>,
}

#[derive(FromPyObject)]
enum PathStep {
    Index(u64),
    Key(String),
}

#[pymethods]
impl JsonPaths {
    #[new]
    fn new(paths: Vec<Vec<PathStep>>) -> PyResult<Self> {
        if paths.len() > 32 {
            return Err(PyValueError::new_err("at most 32 paths"));
        }
        let paths = paths
            .into_iter()
            .map(|p| {
                p.into_iter()
                    .map(|s| match s {
                        PathStep::Index(i) => json::Step::Index(i),
                        PathStep::Key(k) => json::Step::Key(k.into_bytes()),
                    })
                    .collect()
            })
            .collect();
        Ok(JsonPaths { paths })
    }

    /// The slot values of many record values, when every field of the schema is one of
    /// these paths: `fields` holds per path (slot, is_string, width in bits). Returns the
    /// slots packed (eight u64 LE per value) and [(path index, misses)] in the order the
    /// paths first missed, as `Schema.extract` record by record would fill them (a miss
    /// gets the zero value: 0, or spaces); None when a value is neither bytes nor None or
    /// `json.loads` must decide, so the caller runs `Schema.extract`.
    #[allow(clippy::type_complexity)]
    fn slots<'py>(
        &self,
        py: Python<'py>,
        values: Vec<Bound<'py, PyAny>>,
        fields: Vec<(usize, bool, u32)>,
    ) -> PyResult<Option<(Bound<'py, PyBytes>, Vec<(usize, u64)>)>> {
        if !self.fields_fit(&fields) {
            return Ok(None);
        }
        let mut raw: Vec<Option<&[u8]>> = Vec::with_capacity(values.len());
        for v in &values {
            if v.is_none() {
                raw.push(None);
            } else if let Ok(b) = v.cast_exact::<PyBytes>() {
                raw.push(Some(b.as_bytes()));
            } else {
                return Ok(None);
            }
        }
        let got = py.detach(|| self.packed_slots(raw.iter().copied(), raw.len(), &fields));
        Ok(got.map(|(out, misses)| (PyBytes::new(py, &out), misses)))
    }

    fn extract<'py>(&self, py: Python<'py>, value: &[u8]) -> PyResult<Option<Bound<'py, PyList>>> {
        let leaves = match json::extract(value, &self.paths) {
            json::Leaves::Defer => return Ok(None),
            json::Leaves::Invalid => vec![json::Leaf::Missing; self.paths.len()],
            json::Leaves::Found(v) => v,
        };
        let items = leaves.into_iter().map(|l| -> PyResult<Bound<'py, PyAny>> {
            Ok(match l {
                json::Leaf::Missing => py.None().into_bound(py),
                json::Leaf::Int(v) => v.into_pyobject(py)?.into_any(),
                // ASCII, so valid UTF-8
                json::Leaf::Str(b) => {
                    PyString::new(py, std::str::from_utf8(&b).unwrap_or_default()).into_any()
                }
            })
        });
        Ok(Some(PyList::new(py, items.collect::<PyResult<Vec<_>>>()?)?))
    }
}

impl JsonPaths {
    /// Whether `fields` (per path: slot, is_string, width in bits) is one `slots` can fill.
    fn fields_fit(&self, fields: &[(usize, bool, u32)]) -> bool {
        fields.len() == self.paths.len()
            && !fields.iter().any(|&(slot, s, w)| slot >= 8 || w == 0 || w > 64 || (s && w % 8 != 0))
    }

    /// `slots`' work on `n` values: eight u64 LE per value and the misses per path, or None
    /// when `json.loads` must decide.
    #[allow(clippy::type_complexity)]
    fn packed_slots<'a>(
        &self,
        values: impl Iterator<Item = Option<&'a [u8]>>,
        n: usize,
        fields: &[(usize, bool, u32)],
    ) -> Option<(Vec<u8>, Vec<(usize, u64)>)> {
        let paths = &self.paths;
        let mut out = Vec::with_capacity(64 * n);
        let mut misses: Vec<(usize, u64)> = Vec::new();
        for value in values {
            let leaves = match value.map(|v| json::extract(v, paths)) {
                Some(json::Leaves::Defer) => return None,
                Some(json::Leaves::Found(v)) => v,
                _ => vec![json::Leaf::Missing; paths.len()],
            };
            let mut slots = [0u64; 8];
            for (i, (&(slot, is_string, width), leaf)) in fields.iter().zip(&leaves).enumerate() {
                slots[slot] = match json::slot_value(leaf, is_string, width) {
                    Some(v) => v,
                    None => {
                        match misses.iter_mut().find(|(p, _)| *p == i) {
                            Some((_, n)) => *n += 1,
                            None => misses.push((i, 1)),
                        }
                        json::zero_value(is_string, width)
                    }
                };
            }
            for v in slots {
                out.extend_from_slice(&v.to_le_bytes());
            }
        }
        Some((out, misses))
    }
}

// Framing buffers kept between calls, as `Switch.process_packed` keeps its own: fresh
// multi-megabyte vectors each batch cost page faults and regrowth copies. Taken out while
// in use (`std::mem::take`): a record's attribute could run Python that frames too.
thread_local! {
    static BUFS: std::cell::RefCell<[Vec<u8>; 3]> = const { std::cell::RefCell::new([Vec::new(), Vec::new(), Vec::new()]) };
}

/// The framing calls' common arguments read as the reference's struct fields hold them
/// (topic and partition u32, shift i64) and their framer; None when the reference decides.
fn framing(
    topic: &Bound<'_, PyAny>,
    partition: &Bound<'_, PyAny>,
    shift: &Bound<'_, PyAny>,
    template: &[u8],
    fragment: usize,
    lanes: [i64; reframe::LANES],
    single: bool,
) -> Option<(u32, u32, i64, reframe::Framer)> {
    let mut framer = reframe::Framer::new(template, fragment)?;
    for (i, &k) in lanes.iter().enumerate() {
        framer.lanes[i] = match k {
            -1 => None,
            0..=7 => Some(k as usize),
            _ => return None,
        };
    }
    framer.single = single;
    Some((
        topic.extract::<u32>().ok()?,
        partition.extract::<u32>().ok()?,
        shift.extract::<i64>().ok()?,
        framer,
    ))
}

/// `reframe.packets` for many records at once: (frames packed, u32 LE length per frame, u32
/// LE record index per frame), or None when the reference must run (see src/reframe.rs).
/// `slots`: per record a sequence of eight ints, or eight u64 LE per record packed in one
/// bytes (`Schema.extract_packed`), or None for all zero; `template`: the reference framer's
/// frame around an empty payload; `lanes`: per average lane its slot or -1; `single`: one
/// frame per record (`reframe.packets`).
#[pyfunction]
#[pyo3(signature = (records, slots, topic, partition, shift, template, fragment, lanes=[-1, -1], single=false))]
#[allow(clippy::too_many_arguments, clippy::type_complexity)]
fn frame_records<'py>(
    py: Python<'py>,
    records: &Bound<'py, PyAny>,
    slots: &Bound<'py, PyAny>,
    topic: &Bound<'py, PyAny>,
    partition: &Bound<'py, PyAny>,
    shift: &Bound<'py, PyAny>,
    template: &[u8],
    fragment: usize,
    lanes: [i64; reframe::LANES],
    single: bool,
) -> PyResult<Option<(Bound<'py, PyBytes>, Bound<'py, PyBytes>, Bound<'py, PyBytes>)>> {
    let Some((topic, partition, shift, mut framer)) =
        framing(topic, partition, shift, template, fragment, lanes, single)
    else {
        return Ok(None);
    };
    let records: Vec<Bound<'py, PyAny>> = match records.try_iter() {
        Ok(it) => it.collect::<PyResult<_>>()?,
        Err(_) => return Ok(None),
    };
    let slots: Option<Vec<[u64; 8]>> = if slots.is_none() {
        None
    } else if let Ok(packed) = slots.cast_exact::<PyBytes>() {
        let packed = packed.as_bytes();
        if packed.len() != 64 * records.len() {
            return Ok(None);
        }
        Some(
            packed
                .chunks_exact(64)
                .map(|c| std::array::from_fn(|k| u64::from_le_bytes(c[8 * k..8 * k + 8].try_into().unwrap())))
                .collect(),
        )
    } else {
        match slots.extract::<Vec<[u64; 8]>>() {
            Ok(v) if v.len() == records.len() => Some(v),
            _ => return Ok(None),
        }
    };
    let names = &record_fields(py)[..5];
    let [mut buf, mut lengths, mut owner] = BUFS.with_borrow_mut(std::mem::take);
    buf.clear();
    lengths.clear();
    owner.clear();
    let done = frame_all(
        &records,
        slots.as_deref(),
        names,
        shift,
        (topic, partition),
        &mut framer,
        [&mut buf, &mut lengths, &mut owner],
    )?;
    let result = done.then(|| {
        (
            PyBytes::new(py, &buf),
            PyBytes::new(py, &lengths),
            PyBytes::new(py, &owner),
        )
    });
    BUFS.with_borrow_mut(|b| *b = [buf, lengths, owner]);
    Ok(result)
}

/// `frame_records` straight from a batch's (decompressed) records section, without a
/// `Record` object per record: the records `decode_records(*section)` would build (section:
/// body, record_count, base_offset, base_timestamp), numbered `offset + shift`, their slots read by `paths`
/// (`JsonPaths.slots` with `fields`; None: all 0). (frames, lengths, owner, misses as
/// `slots` counts them), or None when `decode_records`, `JsonPaths.slots` or the framing
/// would defer; then the caller runs that path (and counts no misses from here). `lanes`,
/// `single`: as `frame_records` takes them.
#[pyfunction]
#[pyo3(signature = (section, paths, fields, topic, partition, shift, template, fragment, lanes=[-1, -1], single=false))]
#[allow(clippy::too_many_arguments, clippy::type_complexity)]
fn frame_body<'py>(
    py: Python<'py>,
    section: (Bound<'py, PyBytes>, i64, i64, i64),
    paths: Option<PyRef<'py, JsonPaths>>,
    fields: Vec<(usize, bool, u32)>,
    topic: &Bound<'py, PyAny>,
    partition: &Bound<'py, PyAny>,
    shift: &Bound<'py, PyAny>,
    template: &[u8],
    fragment: usize,
    lanes: [i64; reframe::LANES],
    single: bool,
) -> PyResult<
    Option<(Bound<'py, PyBytes>, Bound<'py, PyBytes>, Bound<'py, PyBytes>, Vec<(usize, u64)>)>,
> {
    let Some((topic, partition, shift, mut framer)) =
        framing(topic, partition, shift, template, fragment, lanes, single)
    else {
        return Ok(None);
    };
    if paths.as_ref().is_some_and(|p| !p.fields_fit(&fields)) {
        return Ok(None);
    }
    let paths = paths.as_deref();
    let (body, record_count, base_offset, base_timestamp) = section;
    let body = body.as_bytes();
    let [mut buf, mut lengths, mut owner] = BUFS.with_borrow_mut(std::mem::take);
    let got = py.detach(|| {
        buf.clear();
        lengths.clear();
        owner.clear();
        let (mut spans, mut headers) = (Vec::new(), Vec::new());
        if !records::scan(body, record_count, &mut spans, &mut headers) {
            return None;
        }
        let part = |p: Option<(usize, usize)>| p.map(|(s, n)| &body[s..s + n]);
        let (slots, misses) = match paths {
            None => (Vec::new(), Vec::new()),
            Some(p) => p.packed_slots(spans.iter().map(|s| part(s.value)), spans.len(), &fields)?,
        };
        for (j, s) in spans.iter().enumerate() {
            // the reference's unbounded ints: offset + shift must fit the header's u64, the
            // timestamp its i64
            let offset = base_offset as i128 + s.off_delta as i128 + shift as i128;
            let rec = reframe::Rec {
                offset: u64::try_from(offset).ok()?,
                timestamp: base_timestamp.checked_add(s.ts_delta)?,
                key: part(s.key),
                value: part(s.value),
                headers: headers[s.headers.0..s.headers.0 + s.headers.1]
                    .iter()
                    .map(|h| (&body[h.key.0..h.key.0 + h.key.1], part(h.value)))
                    .collect(),
            };
            let slot: [u64; 8] = match slots.get(64 * j..64 * j + 64) {
                Some(c) => std::array::from_fn(|k| u64::from_le_bytes(c[8 * k..8 * k + 8].try_into().unwrap())),
                None => [0; 8],
            };
            let n = framer.frame(topic, partition, &rec, &slot, &mut buf, &mut lengths)?;
            for _ in 0..n {
                owner.extend_from_slice(&(j as u32).to_le_bytes());
            }
        }
        Some(misses)
    });
    let result = got.map(|misses| {
        (
            PyBytes::new(py, &buf),
            PyBytes::new(py, &lengths),
            PyBytes::new(py, &owner),
            misses,
        )
    });
    BUFS.with_borrow_mut(|b| *b = [buf, lengths, owner]);
    Ok(result)
}

/// `frame_records`' loop: false when the reference must run.
fn frame_all(
    records: &[Bound<'_, PyAny>],
    slots: Option<&[[u64; 8]]>,
    names: &[&Bound<'_, PyString>],
    shift: i64,
    (topic, partition): (u32, u32),
    framer: &mut reframe::Framer,
    [buf, lengths, owner]: [&mut Vec<u8>; 3],
) -> PyResult<bool> {
    let zero = [0u64; 8];
    for (j, r) in records.iter().enumerate() {
        let mut got = Vec::with_capacity(7);
        for n in names.iter() {
            got.push(r.getattr(n)?);
        }
        // the header pairs' items after the five fields, so `parts` can borrow them all
        let Ok(headers) = got[4].cast_exact::<PyTuple>() else {
            return Ok(false);
        };
        let mut items = Vec::with_capacity(2 * headers.len());
        for h in headers.iter() {
            match h.cast_exact::<PyTuple>() {
                Ok(pair) if pair.len() == 2 => {
                    items.push(pair.get_item(0)?);
                    items.push(pair.get_item(1)?);
                }
                _ => return Ok(false),
            }
        }
        got.extend(items);
        let Some(rec) = parts(&got, shift) else {
            return Ok(false);
        };
        let s: &[u64; 8] = match &slots {
            Some(v) => &v[j],
            None => &zero,
        };
        let Some(n) = framer.frame(topic, partition, &rec, s, buf, lengths) else {
            return Ok(false);
        };
        for _ in 0..n {
            owner.extend_from_slice(&(j as u32).to_le_bytes());
        }
    }
    Ok(true)
}

/// offset, timestamp, key, value, headers, then each header's name and value, of a record
/// (see `frame_records`).
fn parts<'a>(got: &'a [Bound<'_, PyAny>], shift: i64) -> Option<reframe::Rec<'a>> {
    fn blob<'a>(v: &'a Bound<'_, PyAny>) -> Option<Option<&'a [u8]>> {
        if v.is_none() {
            return Some(None);
        }
        Some(Some(v.cast_exact::<PyBytes>().ok()?.as_bytes()))
    }
    if !PyInt::is_exact_type_of(&got[0]) || !PyInt::is_exact_type_of(&got[1]) {
        return None;
    }
    let offset = got[0].extract::<i64>().ok()?.checked_add(shift)?;
    let offset = u64::try_from(offset).ok()?;
    let timestamp = got[1].extract::<i64>().ok()?;
    let mut hs = Vec::with_capacity((got.len() - 5) / 2);
    for pair in got[5..].chunks_exact(2) {
        let name = pair[0].cast_exact::<PyString>().ok()?.to_str().ok()?;
        hs.push((name.as_bytes(), blob(&pair[1])?));
    }
    Some(reframe::Rec {
        offset,
        timestamp,
        key: blob(&got[2])?,
        value: blob(&got[3])?,
        headers: hs,
    })
}

/// Where each frame packed with little-endian u32 `lengths` (as `Switch.process_packed`
/// takes them) starts in a buffer of `total` bytes, and where the last one ends.
fn frame_starts(total: usize, lengths: &[u8]) -> PyResult<Vec<usize>> {
    if lengths.len() % 4 != 0 {
        return Err(PyValueError::new_err(
            "lengths must hold little-endian u32 values",
        ));
    }
    let mut starts = Vec::with_capacity(lengths.len() / 4 + 1);
    let mut pos = 0usize;
    starts.push(pos);
    for c in lengths.chunks_exact(4) {
        pos += u32::from_le_bytes(c.try_into().unwrap()) as usize;
        if pos > total {
            return Err(PyValueError::new_err(
                "lengths run past the end of the buffer",
            ));
        }
        starts.push(pos);
    }
    Ok(starts)
}

/// The receiving side of a framed batch through `Switch.process_packed`: ([(port, copies)]
/// in the order ports first got one, [(port, record index)] the `log` ports received whole,
/// or None when the reference must reassemble). See src/reframe.rs `tally`.
#[pyfunction]
#[allow(clippy::too_many_arguments, clippy::type_complexity)]
fn tally_copies(
    py: Python<'_>,
    frames_buf: &[u8],
    lengths: &[u8],
    owner: &[u8],
    out: &[u8],
    copies: &[u8],
    log: Vec<u32>,
    max_record: u32,
) -> PyResult<(Vec<(u32, u64)>, Option<Vec<(u32, u32)>>)> {
    let starts = frame_starts(frames_buf.len(), lengths)?;
    let owner: Vec<u32> = owner
        .chunks_exact(4)
        .map(|c| u32::from_le_bytes(c.try_into().unwrap()))
        .collect();
    let t = py.detach(|| reframe::tally(frames_buf, &starts, &owner, out, copies, &log, max_record));
    Ok((t.counts, t.deliveries))
}

/// The interface version shim/native_kafka.py checks at import, so a build from older source
/// falls back loudly instead of misbehaving: bump both together whenever a function or class
/// here changes its signature or meaning.
const ABI_VERSION: u32 = 3;

#[pymodule(name = "_native")]
fn camus_shim_native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("ABI_VERSION", ABI_VERSION)?;
    m.add("MAX_RECORD", reframe::MAX_RECORD)?;
    m.add("BY_REFERENCE", reframe::BY_REFERENCE)?;
    m.add_class::<JsonPaths>()?;
    m.add_function(wrap_pyfunction!(check_records, m)?)?;
    m.add_function(wrap_pyfunction!(decode_records, m)?)?;
    m.add_function(wrap_pyfunction!(frame_records, m)?)?;
    m.add_function(wrap_pyfunction!(frame_body, m)?)?;
    m.add_function(wrap_pyfunction!(tally_copies, m)?)?;
    Ok(())
}
