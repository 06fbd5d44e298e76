//! Chrome trace-event JSON (the format chrome://tracing and Perfetto's legacy importer read):
//! one thread per engine, DMA queue and DMA engine, complete (`X`) events for every record,
//! counters (`C`) for SBUF and PSUM use.
//!
//! Timestamps are microseconds (`ts`, `dur`) with picosecond precision; events on one thread
//! never overlap (engines are in-order; a queue's transfers are drawn from their first data or
//! the previous transfer's completion, whichever is later).

use core::fmt::Write as _;
use std::io::{self, Write};

use nki_lang::{MAX_TILE_RANK, Memory};

use super::json::{Num, Str, Us};
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

/// Writes the trace.
pub(crate) fn write<W: Write>(s: &Schedule, w: W) -> Result<(), Error> {
    if s.records().is_empty() {
        return Err(Error::NoRecords);
    }
    let mut w = io::BufWriter::with_capacity(1 << 16, w);
    let p = s.params();
    writeln!(
        w,
        "{{\"displayTimeUnit\":\"ns\",\"otherData\":{{\"kernel\":{},\"model\":{},\"latency_us\":{},\"note\":\"modeled by nki-runtime's timing model; deterministic\"}},\"traceEvents\":[",
        Str(s.kernel()),
        Str(p.generation.name()),
        Num(s.latency_us())
    )?;
    writeln!(
        w,
        "{{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":{PID},\"tid\":0,\"args\":{{\"name\":{}}}}}",
        Str(&format!(
            "NeuronCore {} · {}",
            p.generation.name(),
            s.kernel()
        ))
    )?;
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
        writeln!(
            w,
            ",{{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":{PID},\"tid\":{},\"args\":{{\"name\":{}}}}}",
            tid(*t),
            Str(&t.to_string())
        )?;
        writeln!(
            w,
            ",{{\"name\":\"thread_sort_index\",\"ph\":\"M\",\"pid\":{PID},\"tid\":{},\"args\":{{\"sort_index\":{order}}}}}",
            tid(*t)
        )?;
    }
    // Which records are on the critical path.
    let mut critical = vec![false; s.records().len()];
    if let Some(path) = s.critical_path() {
        for (i, _) in path {
            critical[i as usize] = true;
        }
    }
    let mut prev = [0u64; super::schedule::MAX_DMA];
    let mut args = String::new();
    for (i, r) in s.records().iter().enumerate() {
        let start = queue_start(r, &mut prev);
        let info = r.opcode.info();
        args.clear();
        let _ = write!(
            args,
            "\"opcode\":{},\"engine\":{},\"pc\":{},\"line\":{},\"wait_ns\":{},\"done_us\":{}",
            Str(info.name),
            Str(&r.track.to_string()),
            r.pc,
            r.line,
            Num(r.wait as f64 / 1000.0),
            Us(r.done)
        );
        if critical[i] {
            args.push_str(",\"critical_path\":true");
        }
        let ops = s.operands(r);
        if !ops.is_empty() {
            args.push_str(",\"operands\":{");
            for (k, o) in ops.iter().enumerate() {
                if k > 0 {
                    args.push(',');
                }
                let slot = info
                    .operands
                    .get(o.slot as usize)
                    .map(|sp| sp.name)
                    .filter(|n| !n.is_empty())
                    .map_or_else(|| format!("slot{}", o.slot), str::to_string);
                let _ = write!(args, "{}:{}", Str(&slot), Str(&describe(s, o)));
            }
            args.push('}');
        }
        writeln!(
            w,
            ",{{\"name\":{},\"cat\":{},\"ph\":\"X\",\"ts\":{},\"dur\":{},\"pid\":{PID},\"tid\":{},\"args\":{{{args}}}}}",
            Str(&name(r)),
            Str(&r.track.to_string()),
            Us(start),
            Us(r.end.saturating_sub(start)),
            tid(r.track)
        )?;
    }
    for ph in s.dma_phases() {
        let r = s.records().get(ph.record as usize);
        let (name, line) = r.map_or(("dma", 0), |r| (r.opcode.info().name, r.line));
        writeln!(
            w,
            ",{{\"name\":{},\"cat\":\"DMA\",\"ph\":\"X\",\"ts\":{},\"dur\":{},\"pid\":{PID},\"tid\":{},\"args\":{{\"opcode\":{},\"transfer\":{},\"line\":{line}}}}}",
            Str(name),
            Us(ph.start),
            Us(ph.end.saturating_sub(ph.start)),
            tid(Track::DmaEngine(ph.engine)),
            Str(name),
            ph.record
        )?;
    }
    for (t, sbuf, psum) in s.memory_use() {
        writeln!(
            w,
            ",{{\"name\":\"SBUF usage\",\"ph\":\"C\",\"ts\":{},\"pid\":{PID},\"tid\":0,\"args\":{{\"bytes_per_partition\":{sbuf}}}}}",
            Us(t)
        )?;
        writeln!(
            w,
            ",{{\"name\":\"PSUM usage\",\"ph\":\"C\",\"ts\":{},\"pid\":{PID},\"tid\":0,\"args\":{{\"banks\":{psum}}}}}",
            Us(t)
        )?;
    }
    writeln!(w, "]}}")?;
    w.flush()?;
    Ok(())
}
