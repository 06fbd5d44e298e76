//! Chrome trace-event JSON (the format chrome://tracing and Perfetto's legacy importer read):
//! one thread per engine, DMA queue and DMA engine, complete (`X`) events for every record,
//! counters (`C`) for SBUF and PSUM use.
//!
//! Timestamps are microseconds (`ts`, `dur`) with picosecond precision; events on one thread
//! never overlap (engines are in-order; a queue's transfers are drawn from their first data or
//! the previous transfer's completion, whichever is later).
//!
//! Written with serde_json from private serialisation structs: the events are made while they
//! are written (nothing holds the whole trace), one per line.

use core::fmt::Write as _;
use std::io::{self, Write};

use nki_lang::{MAX_TILE_RANK, Memory};
use serde::Serialize;
use serde::ser::{SerializeSeq, Serializer};
use serde_json::ser::Formatter;

use super::model::dir_name;
use super::schedule::{Kind, OperandSummary, Record, Schedule, Track};
use crate::operand::Loc;

/// Why a trace or timeline could not be written.
#[derive(Debug)]
pub(crate) enum Error {
    /// The schedule has no records.
    NoRecords,
    /// The writer failed.
    Io(io::Error),
}

impl From<io::Error> for Error {
    fn from(e: io::Error) -> Self {
        Error::Io(e)
    }
}

/// The process id of the modeled core.
const PID: u32 = 1;

/// Thread id of a track (0 is left to the counters).
fn tid(t: Track) -> usize {
    t.index() + 1
}

/// A record's name on its slice: the profiler's opcode for the parts of instructions, the
/// NKI mnemonic otherwise.
pub(crate) fn name(r: &Record) -> String {
    match r.kind.label() {
        Some(l) if r.kind != Kind::DmaTransfer => l.to_string(),
        _ => r.opcode.info().name.to_string(),
    }
}

/// Where a transfer's slice starts on its queue's row: its first data, or the previous
/// transfer's completion on the queue. `prev` is updated.
pub(crate) fn queue_start(r: &Record, prev: &mut [u64; super::schedule::MAX_DMA]) -> u64 {
    let q = match r.track {
        Track::Queue(q) => q as usize % prev.len(),
        Track::Sync
        | Track::Tensor
        | Track::TensorMatrix
        | Track::Vector
        | Track::Scalar
        | Track::GpSimd
        | Track::DmaEngine(_) => return r.start,
    };
    let s = r.start.saturating_add(r.wait).max(prev[q]).min(r.end);
    prev[q] = r.end;
    s
}

/// `dims` without trailing size-1 dimensions (at least the partition one).
fn dims_text(dims: &[u32; MAX_TILE_RANK]) -> String {
    let last = dims.iter().rposition(|&d| d != 1).unwrap_or(0).max(1);
    let v: Vec<String> = dims[..=last].iter().map(u32::to_string).collect();
    v.join(", ")
}

/// An operand as text: `rhs_tile sbuf:bf16[128, 512] p0 @0x100`, `lhs_t:bf16[128, 128]
/// @1048576`, `imm 1.5`.
pub(crate) fn describe(s: &Schedule, o: &OperandSummary) -> String {
    let mut t = String::new();
    match o.loc {
        Loc::Sbuf | Loc::Psum => {
            let mem = if o.loc == Loc::Sbuf {
                Memory::Sbuf
            } else {
                Memory::Psum
            };
            if let Some(tile) = o.tile.and_then(|i| s.tiles().get(i as usize)) {
                let _ = write!(t, "{} ", tile.name);
            }
            let (p0, off) = if o.partition_stride > 0 {
                (
                    o.base.div_euclid(o.partition_stride),
                    o.base.rem_euclid(o.partition_stride),
                )
            } else {
                (0, o.base)
            };
            let _ = write!(
                t,
                "{mem}:{}[{}] p{p0} @{:#x}",
                o.dtype,
                dims_text(&o.dims),
                off.saturating_mul(i64::from(o.dtype.size()))
            );
        }
        Loc::Hbm(i) => {
            let name = s.tensors().get(i as usize).map_or("hbm", String::as_str);
            let _ = write!(t, "{name}:{}[{}] @{}", o.dtype, dims_text(&o.dims), o.base);
        }
        Loc::Imm(x) => {
            let _ = write!(t, "imm {x:?}");
        }
        Loc::Expr => {
            let _ = write!(t, "expr[{}]", dims_text(&o.dims));
        }
    }
    let _ = write!(t, " ({})", dir_name(o.dir));
    t
}

/// Microseconds from picoseconds (the trace's `ts` and `dur`): exact for any modeled time
/// below 10⁹ µs, whose ps value has at most 15 significant digits.
fn us(ps: u64) -> f64 {
    ps as f64 / 1e6
}

/// The trace's document: its metadata, then the events.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Document<'a> {
    display_time_unit: &'static str,
    other_data: OtherData<'a>,
    trace_events: Events<'a>,
}

/// `otherData`: what Perfetto shows as the trace's metadata.
#[derive(Serialize)]
struct OtherData<'a> {
    kernel: &'a str,
    model: &'a str,
    latency_us: f64,
    note: &'static str,
}

/// One trace event: metadata (`M`), complete (`X`) or counter (`C`), with its `args`.
#[derive(Serialize)]
struct Event<'a, A> {
    name: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    cat: Option<&'a str>,
    ph: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    ts: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    dur: Option<f64>,
    pid: u32,
    tid: usize,
    args: A,
}

impl<'a, A> Event<'a, A> {
    /// A metadata event.
    fn meta(name: &'a str, tid: usize, args: A) -> Self {
        Event {
            name,
            cat: None,
            ph: "M",
            ts: None,
            dur: None,
            pid: PID,
            tid,
            args,
        }
    }

    /// A complete event from `start` to `end` (ps).
    fn complete(name: &'a str, cat: &'a str, start: u64, end: u64, tid: usize, args: A) -> Self {
        Event {
            name,
            cat: Some(cat),
            ph: "X",
            ts: Some(us(start)),
            dur: Some(us(end.saturating_sub(start))),
            pid: PID,
            tid,
            args,
        }
    }

    /// A counter's value at `t` (ps).
    fn counter(name: &'a str, t: u64, args: A) -> Self {
        Event {
            name,
            cat: None,
            ph: "C",
            ts: Some(us(t)),
            dur: None,
            pid: PID,
            tid: 0,
            args,
        }
    }
}

/// `args` of `process_name` and `thread_name`.
#[derive(Serialize)]
struct NameArgs<'a> {
    name: &'a str,
}

/// `args` of `thread_sort_index`.
#[derive(Serialize)]
struct SortArgs {
    sort_index: usize,
}

/// `args` of a record's event.
#[derive(Serialize)]
struct RecordArgs<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    instr_name: Option<&'a str>,
    opcode: &'a str,
    engine: &'a str,
    pc: u32,
    line: u32,
    wait_ns: f64,
    done_us: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    critical_path: Option<bool>,
    #[serde(skip_serializing_if = "Pairs::is_empty")]
    operands: Pairs,
}

/// `args` of a DMA engine's part of a transfer.
#[derive(Serialize)]
struct PhaseArgs<'a> {
    opcode: &'a str,
    transfer: u32,
    line: u32,
}

/// `args` of the SBUF counter.
#[derive(Serialize)]
struct SbufArgs {
    bytes_per_partition: u64,
}

/// `args` of the PSUM counter.
#[derive(Serialize)]
struct PsumArgs {
    banks: u64,
}

/// A JSON object from key–value pairs, in their order.
struct Pairs(Vec<(String, String)>);

impl Pairs {
    fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl Serialize for Pairs {
    fn serialize<S: Serializer>(&self, ser: S) -> Result<S::Ok, S::Error> {
        ser.collect_map(self.0.iter().map(|(k, v)| (k, v)))
    }
}

/// The events, made while they are written.
struct Events<'a>(&'a Schedule);

impl Serialize for Events<'_> {
    fn serialize<S: Serializer>(&self, ser: S) -> Result<S::Ok, S::Error> {
        let s = self.0;
        let p = s.params();
        let mut seq = ser.serialize_seq(None)?;
        let process = format!("NeuronCore {} · {}", p.generation.name(), s.kernel());
        seq.serialize_element(&Event::meta("process_name", 0, NameArgs { name: &process }))?;
        // The rows in use, in the profiler's order.
        let mut used = [false; Track::COUNT];
        for r in s.records() {
            used[r.track.index()] = true;
        }
        for ph in s.dma_phases() {
            used[Track::DmaEngine(ph.engine).index()] = true;
        }
        let mut tracks: Vec<Track> = Track::ENGINES.to_vec();
        tracks.extend((0..super::schedule::MAX_DMA as u8).map(Track::Queue));
        tracks.extend((0..super::schedule::MAX_DMA as u8).map(Track::DmaEngine));
        for (order, t) in tracks.iter().filter(|t| used[t.index()]).enumerate() {
            let name = t.to_string();
            seq.serialize_element(&Event::meta(
                "thread_name",
                tid(*t),
                NameArgs { name: &name },
            ))?;
            seq.serialize_element(&Event::meta(
                "thread_sort_index",
                tid(*t),
                SortArgs { sort_index: order },
            ))?;
        }
        // Which records are on the critical path.
        let mut critical = vec![false; s.records().len()];
        if let Some(path) = s.critical_path() {
            for (i, _) in path {
                critical[i as usize] = true;
            }
        }
        let mut prev = [0u64; super::schedule::MAX_DMA];
        for (i, r) in s.records().iter().enumerate() {
            let start = queue_start(r, &mut prev);
            let info = r.opcode.info();
            let operands = s
                .operands(r)
                .iter()
                .map(|o| {
                    let slot = info
                        .operands
                        .get(o.slot as usize)
                        .map(|sp| sp.name)
                        .filter(|n| !n.is_empty())
                        .map_or_else(|| format!("slot{}", o.slot), str::to_string);
                    (slot, describe(s, o))
                })
                .collect();
            let (mut name, track) = (name(r), r.track.to_string());
            // A named instruction's slices carry its name first, to find it by.
            let instr_name = s.instr_name(r.pc);
            if let Some(n) = instr_name {
                name = format!("{n} · {name}");
            }
            let args = RecordArgs {
                instr_name,
                opcode: info.name,
                engine: &track,
                pc: r.pc,
                line: r.line,
                wait_ns: r.wait as f64 / 1000.0,
                done_us: us(r.done),
                critical_path: critical[i].then_some(true),
                operands: Pairs(operands),
            };
            seq.serialize_element(&Event::complete(
                &name,
                &track,
                start,
                r.end,
                tid(r.track),
                args,
            ))?;
        }
        for ph in s.dma_phases() {
            let r = s.records().get(ph.record as usize);
            let (name, line) = r.map_or(("dma", 0), |r| (r.opcode.info().name, r.line));
            let args = PhaseArgs {
                opcode: name,
                transfer: ph.record,
                line,
            };
            seq.serialize_element(&Event::complete(
                name,
                "DMA",
                ph.start,
                ph.end,
                tid(Track::DmaEngine(ph.engine)),
                args,
            ))?;
        }
        for (t, sbuf, psum) in s.memory_use() {
            let sbuf = SbufArgs {
                bytes_per_partition: sbuf,
            };
            seq.serialize_element(&Event::counter("SBUF usage", t, sbuf))?;
            seq.serialize_element(&Event::counter("PSUM usage", t, PsumArgs { banks: psum }))?;
        }
        seq.end()
    }
}

/// serde_json's compact output with numbers in plain decimal, as Rust prints them: the shortest
/// digits that read back to the same value, never an exponent (`0.000005`, not `5e-6`; `1300`,
/// not `1300.0`). NaN and infinities are `null` (serde_json writes those itself).
pub(super) struct Decimal;

impl Formatter for Decimal {
    fn write_f64<W: ?Sized + Write>(&mut self, w: &mut W, value: f64) -> io::Result<()> {
        write!(w, "{value}")
    }
}

/// [`Decimal`] with each element of an array on a line of its own: the trace's one array is
/// its events, so one event per line, the separating comma at the line's start.
struct EventPerLine;

impl Formatter for EventPerLine {
    fn write_f64<W: ?Sized + Write>(&mut self, w: &mut W, value: f64) -> io::Result<()> {
        Decimal.write_f64(w, value)
    }

    fn begin_array_value<W: ?Sized + Write>(&mut self, w: &mut W, first: bool) -> io::Result<()> {
        w.write_all(if first { b"\n" } else { b"\n," })
    }

    fn end_array<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        w.write_all(b"\n]")
    }
}

/// Writes the trace.
pub(crate) fn write<W: Write>(s: &Schedule, w: W) -> Result<(), Error> {
    if s.records().is_empty() {
        return Err(Error::NoRecords);
    }
    let mut w = io::BufWriter::with_capacity(1 << 16, w);
    let doc = Document {
        display_time_unit: "ns",
        other_data: OtherData {
            kernel: s.kernel(),
            model: s.params().generation.name(),
            latency_us: s.latency_us(),
            note: "modeled by nki-runtime's timing model; deterministic",
        },
        trace_events: Events(s),
    };
    doc.serialize(&mut serde_json::Serializer::with_formatter(
        &mut w,
        EventPerLine,
    ))
    .map_err(io::Error::from)?;
    writeln!(w)?;
    w.flush()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn microseconds_are_the_picoseconds_exactly() {
        // Each µs value is written as the ps count in µs, the trailing zeros of six decimals
        // dropped, never with an exponent.
        let text = |x: f64| {
            let mut out = Vec::new();
            x.serialize(&mut serde_json::Serializer::with_formatter(
                &mut out, Decimal,
            ))
            .unwrap();
            String::from_utf8(out).unwrap()
        };
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let sweep = (0..10_000).map(|_| {
            x = x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
            (x >> 14) % 1_000_000_000_000_000
        });
        for ps in [
            0u64,
            1,
            5,
            999_999,
            1_000_000,
            1_234_567,
            999_999_999_999_999,
        ]
        .into_iter()
        .chain(sweep)
        {
            let fixed = format!("{}.{:06}", ps / 1_000_000, ps % 1_000_000);
            let want = fixed.trim_end_matches('0').trim_end_matches('.');
            assert_eq!(text(us(ps)), want, "{ps}");
        }
        assert_eq!(text(us(5)), "0.000005");
        assert_eq!(text(f64::NAN), "null");
        assert_eq!(text(1300.0), "1300");
    }

    #[test]
    fn one_event_per_line() {
        let mut out = Vec::new();
        let doc = serde_json::json!({"a": "x\"y", "traceEvents": [{"b": 1.0}, {"c": [2]}]});
        doc.serialize(&mut serde_json::Serializer::with_formatter(
            &mut out,
            EventPerLine,
        ))
        .unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "{\"a\":\"x\\\"y\",\"traceEvents\":[\n{\"b\":1}\n,{\"c\":[\n2\n]}\n]}"
        );
    }
}
