//! A self-contained SVG timeline: one row per engine, DMA queue and DMA engine, the critical
//! path as a row coloured by the engine it runs on, and SBUF/PSUM use below. Busy intervals
//! closer than a pixel are merged, so the file stays small for any kernel; each box's
//! tooltip says how many records it merges.

use core::fmt::Write as _;
use std::io::Write;

use super::schedule::{Kind, MAX_DMA, Schedule, Track};
use super::trace::{Error, queue_start};

const WIDTH: f64 = 1400.0;
const LEFT: f64 = 130.0;
const RIGHT: f64 = 20.0;
const TOP: f64 = 56.0;
const ROW: f64 = 16.0;
const GAP: f64 = 3.0;
const CHART: f64 = 70.0;

/// The fill colour of a track's boxes.
fn colour(t: Track) -> &'static str {
    match t {
        Track::Sync => "#8c8c8c",
        Track::Tensor => "#6baed6",
        Track::TensorMatrix => "#2171b5",
        Track::Vector => "#31a354",
        Track::Scalar => "#fd8d3c",
        Track::GpSimd => "#9e9ac8",
        Track::Queue(_) => "#e7ba52",
        Track::DmaEngine(_) => "#bd9e39",
    }
}

/// `s` with XML's special characters escaped.
fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// A time in ps as text in µs or ms.
fn time(ps: u64) -> String {
    let us = ps as f64 / 1e6;
    if us >= 1000.0 {
        format!("{:.3} ms", us / 1000.0)
    } else {
        format!("{us:.3} µs")
    }
}

/// A step of 1, 2 or 5 × 10ᵏ ps giving about `n` ticks over `total`.
fn tick_step(total: u64, n: u64) -> u64 {
    let raw = (total / n.max(1)).max(1);
    let mut p = 1u64;
    while p <= raw / 10 {
        p *= 10;
    }
    for m in [1u64, 2, 5, 10] {
        if p.saturating_mul(m) >= raw {
            return p.saturating_mul(m);
        }
    }
    p.saturating_mul(10)
}

/// One drawn box: time range, merged records, busy time inside, colour.
struct Span {
    a: u64,
    b: u64,
    n: u64,
    busy: u64,
    fill: &'static str,
}

/// Merges sorted intervals closer than `eps` (same colour) into spans.
fn merge(mut iv: Vec<(u64, u64, &'static str)>, eps: u64) -> Vec<Span> {
    iv.sort_by_key(|&(a, _, _)| a);
    let mut out: Vec<Span> = Vec::new();
    for (a, b, fill) in iv {
        match out.last_mut() {
            Some(s) if s.fill == fill && a <= s.b.saturating_add(eps) => {
                s.b = s.b.max(b);
                s.n += 1;
                s.busy = s.busy.saturating_add(b.saturating_sub(a));
            }
            _ => out.push(Span {
                a,
                b,
                n: 1,
                busy: b.saturating_sub(a),
                fill,
            }),
        }
    }
    out
}

/// The critical path drawn per pixel column: each column takes the colour that covers most
/// of it, and runs of columns of one colour become one span (whatever the path's length, at
/// most one box per pixel).
fn dominant(path: &[(u64, u64, &'static str)], total: u64, columns: usize) -> Vec<Span> {
    let columns = columns.max(1);
    let width = total.div_ceil(columns as u64).max(1);
    // Per column: time per colour (a path uses at most 8 colours).
    let mut cols: Vec<Vec<(&'static str, u64)>> = vec![Vec::new(); columns];
    for &(a, b, fill) in path {
        let mut t = a;
        while t < b {
            let c = ((t / width) as usize).min(columns - 1);
            let end = b.min((c as u64 + 1).saturating_mul(width)).max(t + 1);
            let slot = &mut cols[c];
            match slot.iter_mut().find(|(f, _)| *f == fill) {
                Some((_, v)) => *v += end - t,
                None => slot.push((fill, end - t)),
            }
            t = end;
        }
    }
    let mut out: Vec<Span> = Vec::new();
    for (c, slot) in cols.iter().enumerate() {
        let Some(&(fill, busy)) = slot.iter().max_by_key(|(_, v)| *v) else {
            continue;
        };
        let (a, b) = (
            (c as u64).saturating_mul(width),
            (c as u64 + 1).saturating_mul(width),
        );
        match out.last_mut() {
            Some(sp) if sp.fill == fill && sp.b == a => {
                sp.b = b;
                sp.n += 1;
                sp.busy += busy;
            }
            _ => out.push(Span {
                a,
                b,
                n: 1,
                busy,
                fill,
            }),
        }
    }
    out
}

/// Writes the timeline.
/// Most marks of named instructions drawn (a loop's executions beyond are left out).
const MAX_MARKS: usize = 4096;

pub(crate) fn write<W: Write>(s: &Schedule, w: W) -> Result<(), Error> {
    if s.records().is_empty() {
        return Err(Error::NoRecords);
    }
    let total = s.total_ps().max(1);
    let plot = WIDTH - LEFT - RIGHT;
    let x = |t: u64| LEFT + plot * (t.min(total) as f64 / total as f64);
    // A pixel of time: closer boxes merge.
    let eps = (total as f64 / plot) as u64;
    // Intervals per row.
    let mut rows: Vec<Vec<(u64, u64, &'static str)>> = vec![Vec::new(); Track::COUNT];
    let mut prev = [0u64; MAX_DMA];
    for r in s.records() {
        let a = queue_start(r, &mut prev);
        let fill = if r.kind == Kind::TableLoad {
            "#d62728"
        } else {
            colour(r.track)
        };
        rows[r.track.index()].push((a, r.end.max(a), fill));
    }
    for ph in s.dma_phases() {
        let t = Track::DmaEngine(ph.engine);
        rows[t.index()].push((ph.start, ph.end, colour(t)));
    }
    let mut order: Vec<Track> = Track::ENGINES.to_vec();
    order.extend((0..MAX_DMA as u8).map(Track::Queue));
    order.extend((0..MAX_DMA as u8).map(Track::DmaEngine));
    let order: Vec<Track> = order
        .into_iter()
        .filter(|t| !rows[t.index()].is_empty())
        .collect();
    // The critical path, coloured by track.
    let mut path = Vec::new();
    if let Some(p) = s.critical_path() {
        let mut cursor = s.total_ps();
        for (i, charge) in p {
            let r = &s.records()[i as usize];
            path.push((cursor.saturating_sub(charge), cursor, colour(r.track)));
            cursor = cursor.saturating_sub(charge);
        }
    }
    let n_rows = order.len() + 1;
    let chart_top = TOP + n_rows as f64 * (ROW + GAP) + 24.0;
    let height = chart_top + CHART + 40.0;
    let mut o = String::with_capacity(1 << 16);
    let _ = writeln!(
        o,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height:.0}" viewBox="0 0 {WIDTH} {height:.0}" font-family="sans-serif" font-size="11">"#
    );
    let _ = writeln!(o, r#"<rect width="100%" height="100%" fill="white"/>"#);
    let prof = s.profile();
    let _ = writeln!(
        o,
        r#"<text x="{LEFT}" y="18" font-size="14" font-weight="bold">{} — {} modeled on {} (MFU {:.1} %)</text>"#,
        esc(s.kernel()),
        esc(&time(s.total_ps())),
        esc(s.params().generation.name()),
        100.0 * prof.mfu
    );
    let _ = writeln!(
        o,
        r##"<text x="{LEFT}" y="34" fill="#555">boxes merge records closer than a pixel ({}), shaded by how busy they are; hover for counts. Red on Scalar: activation-table loads.</text>"##,
        esc(&time(eps))
    );
    // Time axis.
    let step = tick_step(total, 10);
    let mut t = 0u64;
    while t <= total {
        let xt = x(t);
        let _ = writeln!(
            o,
            r##"<line x1="{xt:.2}" y1="{:.1}" x2="{xt:.2}" y2="{:.1}" stroke="#ddd"/><text x="{xt:.2}" y="{:.1}" text-anchor="middle" fill="#555">{}</text>"##,
            TOP - 4.0,
            chart_top + CHART,
            TOP - 8.0,
            esc(&time(t))
        );
        t = match t.checked_add(step) {
            Some(n) => n,
            None => break,
        };
    }
    // Rows.
    let draw_row = |o: &mut String, i: usize, label: &str, spans: Vec<Span>| {
        let y = TOP + i as f64 * (ROW + GAP);
        let _ = writeln!(
            o,
            r#"<text x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"#,
            LEFT - 6.0,
            y + ROW - 4.0,
            esc(label)
        );
        for sp in spans {
            let (xa, xb) = (x(sp.a), x(sp.b));
            // A box is as opaque as its span is busy (at least faintly visible).
            let span = sp.b.saturating_sub(sp.a).max(1);
            let opacity = (sp.busy as f64 / span as f64).clamp(0.2, 1.0);
            let _ = writeln!(
                o,
                r#"<rect x="{xa:.2}" y="{y:.1}" width="{:.2}" height="{ROW}" fill="{}" fill-opacity="{opacity:.2}"><title>{}: {} record(s), {} – {}, busy {}</title></rect>"#,
                (xb - xa).max(0.5),
                sp.fill,
                esc(label),
                sp.n,
                esc(&time(sp.a)),
                esc(&time(sp.b)),
                esc(&time(sp.busy))
            );
        }
    };
    for (i, t) in order.iter().enumerate() {
        let iv = std::mem::take(&mut rows[t.index()]);
        draw_row(&mut o, i, &t.to_string(), merge(iv, eps));
    }
    draw_row(
        &mut o,
        order.len(),
        "critical path",
        dominant(&path, total, plot as usize),
    );
    // Named instructions (`name = "..."`): a mark on their row under each execution, with
    // the name at the first.
    let mut labelled: Vec<&str> = Vec::new();
    let mut marks = 0usize;
    let mut prev = [0u64; MAX_DMA];
    for r in s.records() {
        let a = queue_start(r, &mut prev);
        let (Some(n), Some(i)) = (s.instr_name(r.pc), order.iter().position(|t| *t == r.track))
        else {
            continue;
        };
        if marks >= MAX_MARKS {
            break;
        }
        marks += 1;
        let y = TOP + i as f64 * (ROW + GAP) + ROW - 3.0;
        let (xa, xb) = (x(a), x(r.end.max(a)));
        let _ = writeln!(
            o,
            r##"<rect x="{xa:.2}" y="{y:.1}" width="{:.2}" height="3" fill="#111"><title>{}: {} on {}, {} – {}</title></rect>"##,
            (xb - xa).max(1.0),
            esc(n),
            esc(r.opcode.info().name),
            esc(&r.track.to_string()),
            esc(&time(a)),
            esc(&time(r.end))
        );
        if !labelled.contains(&n) {
            labelled.push(n);
            let _ = writeln!(
                o,
                r##"<text x="{xa:.2}" y="{:.1}" font-size="9" fill="#111">{}</text>"##,
                y - ROW + 10.0,
                esc(n)
            );
        }
    }
    // SBUF and PSUM use.
    let cap = f64::from(s.params().sbuf_partition_bytes.max(1));
    let banks = f64::from(s.params().psum_banks.max(1));
    let mem = s.memory_use();
    let _ = writeln!(
        o,
        r##"<text x="{:.1}" y="{:.1}" text-anchor="end">on-chip use</text><rect x="{LEFT}" y="{chart_top:.1}" width="{plot:.1}" height="{CHART}" fill="none" stroke="#ccc"/>"##,
        LEFT - 6.0,
        chart_top + CHART / 2.0
    );
    for (label, fill, f) in [
        (
            "SBUF (share of capacity)",
            "#2171b5",
            Box::new(|v: &(u64, u64, u64)| v.1 as f64 / cap)
                as Box<dyn Fn(&(u64, u64, u64)) -> f64>,
        ),
        (
            "PSUM (share of banks)",
            "#d62728",
            Box::new(|v: &(u64, u64, u64)| v.2 as f64 / banks),
        ),
    ] {
        let mut pts = format!("{LEFT:.2},{:.2}", chart_top + CHART);
        let mut level = chart_top + CHART;
        for v in &mem {
            let xv = x(v.0);
            let _ = write!(pts, " {xv:.2},{level:.2}");
            level = chart_top + CHART * (1.0 - f(v).clamp(0.0, 1.0));
            let _ = write!(pts, " {xv:.2},{level:.2}");
        }
        let _ = write!(pts, " {:.2},{level:.2}", x(total));
        let _ = writeln!(
            o,
            r#"<polyline points="{pts}" fill="none" stroke="{fill}" stroke-width="1.2"><title>{label}</title></polyline>"#
        );
    }
    let (peak_s, peak_p) = s.peak_memory();
    let _ = writeln!(
        o,
        r##"<text x="{LEFT}" y="{:.1}" fill="#555"><tspan fill="#2171b5">SBUF</tspan> peak {:.1} KiB of {:.0} KiB per partition; <tspan fill="#d62728">PSUM</tspan> peak {} of {} banks</text>"##,
        chart_top + CHART + 16.0,
        peak_s as f64 / 1024.0,
        cap / 1024.0,
        peak_p,
        banks
    );
    let _ = writeln!(o, "</svg>");
    let mut w = w;
    w.write_all(o.as_bytes())?;
    w.flush()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_and_merging() {
        assert_eq!(tick_step(1_000_000, 10), 100_000);
        assert_eq!(tick_step(1_300_000, 10), 200_000);
        assert_eq!(tick_step(0, 10), 1);
        assert!(tick_step(u64::MAX, 1) >= u64::MAX / 10);
        let m = merge(vec![(0, 10, "a"), (12, 20, "a"), (40, 50, "a")], 5);
        assert_eq!(m.len(), 2);
        assert_eq!((m[0].a, m[0].b, m[0].n, m[0].busy), (0, 20, 2, 18));
        assert_eq!(esc("<a&b>"), "&lt;a&amp;b&gt;");
        // 1000 alternating segments over 10 columns: one box per column at most.
        let path: Vec<_> = (0..1000u64)
            .map(|i| (i * 10, i * 10 + 10, if i % 3 == 0 { "a" } else { "b" }))
            .collect();
        let d = dominant(&path, 10_000, 10);
        assert_eq!(d.len(), 1);
        assert_eq!((d[0].a, d[0].b, d[0].fill), (0, 10_000, "b"));
    }
}
