//! NKI 0.6's `dma_compute(dst, srcs, reduce_op = add)` against plain loops: each source widened
//! to fp32, summed left to right with one fp32 rounding per addition, the sum rounded to nearest
//! even into the destination's dtype. HBM to HBM, SBUF to HBM, HBM to SBUF, mixed bf16, f16 and
//! f32 operands, 1 to 16 sources (more than four become a chain of instructions through fp32
//! tiles), `scales` of ones, the accumulate idiom `dst = dst + src` in SBUF and in HBM, and the
//! listing of the instruction.

use crate::common;

use nki::ndarray::{Array2, Ix2};
use nki::prelude::*;

/// Three HBM sources of three dtypes into an HBM bf16 output.
#[kernel]
fn hbm_to_hbm(
    a: Hbm<bf16, 128, 64>,
    b: Hbm<f32, 128, 64>,
    c: Hbm<f16, 128, 64>,
) -> Hbm<bf16, 128, 64> {
    let out = ndarray([128, 64], bf16, SharedHbm);
    nisa::dma_compute(dst = out, srcs = [a, b, c], reduce_op = nl::add);
    out
}

/// SBUF sources (bf16 and f32 tiles) into an f16 HBM output, `scales` all 1.0, positional.
#[kernel]
fn sbuf_to_hbm(a: Hbm<bf16, 96, 40>, b: Hbm<f32, 96, 40>) -> Hbm<f16, 96, 40> {
    let out = ndarray([96, 40], f16, SharedHbm);
    let ta = ndarray([96, 40], bf16, Sbuf);
    nisa::dma_copy(dst = ta, src = a);
    let tb = ndarray([96, 40], f32, Sbuf);
    nisa::dma_copy(dst = tb, src = b);
    nisa::dma_compute(out, [ta, tb], add, [1.0, 1.0]);
    out
}

/// HBM sources into an SBUF f32 tile (a slice of each), then stored; `oob_mode` and
/// `unique_indices` with their defaults.
#[kernel]
fn hbm_to_sbuf(a: Hbm<f16, 64, 100>, b: Hbm<bf16, 64, 100>) -> Hbm<f32, 64, 50> {
    let out = ndarray([64, 50], f32, SharedHbm);
    let t = ndarray([64, 50], f32, Sbuf);
    nisa::dma_compute(
        dst = t,
        srcs = [a[[0..64, 0..50]], b[[0..64, 50..100]]],
        reduce_op = add,
        scales = None,
        unique_indices = true,
        oob_mode = oob_mode::error,
    );
    nisa::dma_copy(dst = out, src = t);
    out
}

/// One source: a conversion (f32 to bf16) on the DMA engines.
#[kernel]
fn one_source(a: Hbm<f32, 32, 16>) -> Hbm<bf16, 32, 16> {
    let out = ndarray([32, 16], bf16, SharedHbm);
    nisa::dma_compute(dst = out, srcs = [a], reduce_op = add);
    out
}

/// Four to sixteen sources: column blocks of one f32 input (bf16 for the odd ones), summed
/// into bf16 tiles; 16 into f32.
#[kernel]
fn many_sources(x: Hbm<f32, 128, 256>, y: Hbm<bf16, 128, 256>) -> Hbm<f32, 4, 128, 16> {
    let out = ndarray([4, 128, 16], f32, SharedHbm);
    let d4 = ndarray([128, 16], f32, Sbuf);
    nisa::dma_compute(
        dst = d4,
        srcs = [
            x[[.., 0..16]],
            y[[.., 16..32]],
            x[[.., 32..48]],
            y[[.., 48..64]],
        ],
        reduce_op = add,
    );
    store(out[[0, .., ..]], d4);
    let d5 = ndarray([128, 16], f32, Sbuf);
    nisa::dma_compute(
        dst = d5,
        srcs = [
            x[[.., 0..16]],
            y[[.., 16..32]],
            x[[.., 32..48]],
            y[[.., 48..64]],
            x[[.., 64..80]],
        ],
        reduce_op = add,
    );
    store(out[[1, .., ..]], d5);
    let d7 = ndarray([128, 16], f32, Sbuf);
    nisa::dma_compute(
        dst = d7,
        srcs = [
            x[[.., 0..16]],
            y[[.., 16..32]],
            x[[.., 32..48]],
            y[[.., 48..64]],
            x[[.., 64..80]],
            y[[.., 80..96]],
            x[[.., 96..112]],
        ],
        reduce_op = add,
    );
    store(out[[2, .., ..]], d7);
    nisa::dma_compute(
        dst = out[[3, .., ..]],
        srcs = [
            x[[.., 0..16]],
            y[[.., 16..32]],
            x[[.., 32..48]],
            y[[.., 48..64]],
            x[[.., 64..80]],
            y[[.., 80..96]],
            x[[.., 96..112]],
            y[[.., 112..128]],
            x[[.., 128..144]],
            y[[.., 144..160]],
            x[[.., 160..176]],
            y[[.., 176..192]],
            x[[.., 192..208]],
            y[[.., 208..224]],
            x[[.., 224..240]],
            y[[.., 240..256]],
        ],
        reduce_op = add,
    );
    out
}

/// The accumulate idiom: `t = t + u` in SBUF (bf16), then `out = out + b` in HBM.
#[kernel]
fn accumulate(a: Hbm<bf16, 128, 32>, b: Hbm<f32, 128, 32>) -> Hbm<bf16, 128, 32> {
    let out = ndarray([128, 32], bf16, SharedHbm);
    let t = ndarray([128, 32], bf16, Sbuf);
    nisa::dma_copy(dst = t, src = a);
    let u = ndarray([128, 32], f32, Sbuf);
    nisa::dma_copy(dst = u, src = b);
    nisa::dma_compute(dst = t, srcs = [t, u], reduce_op = add);
    nisa::dma_copy(dst = out, src = t);
    nisa::dma_compute(dst = out, srcs = [out, b], reduce_op = add);
    out
}

/// The model's sum: `((s0 + s1) + s2) + …` with one round to fp32 per addition (an f64 sum of
/// two fp32 values rounded to fp32: exact before the one rounding for the magnitudes used).
fn fp32_sum(terms: &[f64]) -> f32 {
    let mut acc = terms[0] as f32;
    for &t in &terms[1..] {
        acc = (f64::from(acc) + t) as f32;
    }
    acc
}

/// `n` values in `[lo, hi)` with many bits (so that the roundings matter).
fn data(rows: usize, cols: usize, seed: u64) -> Array2<f32> {
    common::rand_f32(Ix2(rows, cols), seed, -300.0, 300.0)
}

fn to_bf16(x: &Array2<f32>) -> Array2<bf16> {
    x.mapv(bf16::from_f32)
}

fn to_f16(x: &Array2<f32>) -> Array2<f16> {
    x.mapv(f16::from_f32)
}

#[test]
fn three_hbm_sources_of_three_dtypes_into_bf16() {
    let a = to_bf16(&data(128, 64, 1));
    let b = data(128, 64, 2);
    let c = to_f16(&data(128, 64, 3));
    for strict in [false, true] {
        let mut core = NeuronCore::default().with_strict(strict);
        let out = hbm_to_hbm::host(&mut core, a.view(), b.view(), c.view()).unwrap();
        for p in 0..128 {
            for k in 0..64 {
                let want = fp32_sum(&[
                    f64::from(a[[p, k]].to_f32()),
                    f64::from(b[[p, k]]),
                    f64::from(c[[p, k]].to_f32()),
                ]);
                assert_eq!(
                    out[[p, k]].to_bits(),
                    bf16::from_f32(want).to_bits(),
                    "[{p}, {k}]"
                );
            }
        }
    }
}

#[test]
fn sbuf_sources_into_f16_hbm() {
    let a = to_bf16(&data(96, 40, 4));
    let b = data(96, 40, 5);
    let mut core = NeuronCore::default();
    let out = sbuf_to_hbm::host(&mut core, a.view(), b.view()).unwrap();
    for p in 0..96 {
        for k in 0..40 {
            let want = fp32_sum(&[f64::from(a[[p, k]].to_f32()), f64::from(b[[p, k]])]);
            assert_eq!(
                out[[p, k]].to_bits(),
                f16::from_f32(want).to_bits(),
                "[{p}, {k}]"
            );
        }
    }
}

#[test]
fn hbm_sources_into_an_sbuf_tile() {
    let a = to_f16(&data(64, 100, 6));
    let b = to_bf16(&data(64, 100, 7));
    let mut core = NeuronCore::default().with_strict(true);
    let out = hbm_to_sbuf::host(&mut core, a.view(), b.view()).unwrap();
    for p in 0..64 {
        for k in 0..50 {
            let want = fp32_sum(&[
                f64::from(a[[p, k]].to_f32()),
                f64::from(b[[p, 50 + k]].to_f32()),
            ]);
            assert_eq!(out[[p, k]].to_bits(), want.to_bits(), "[{p}, {k}]");
        }
    }
}

#[test]
fn one_source_converts_to_nearest_even() {
    // Values halfway between two bf16 values (ties to even) and others.
    let a = Array2::from_shape_fn((32, 16), |(p, k)| {
        let base = 1.0f32 + (p * 16 + k) as f32 / 64.0;
        f32::from_bits(base.to_bits() | 0x8000)
    });
    let mut core = NeuronCore::default();
    let out = one_source::host(&mut core, a.view()).unwrap();
    for p in 0..32 {
        for k in 0..16 {
            // Round half to even on the upper 16 bits, by hand.
            let bits = a[[p, k]].to_bits();
            let (hi, lo) = (bits >> 16, bits & 0xffff);
            let want = if lo > 0x8000 || (lo == 0x8000 && hi & 1 == 1) {
                hi + 1
            } else {
                hi
            };
            assert_eq!(u32::from(out[[p, k]].to_bits()), want, "[{p}, {k}]");
        }
    }
}

#[test]
fn four_to_sixteen_sources_sum_left_to_right() {
    let x = data(128, 256, 8);
    let y = to_bf16(&data(128, 256, 9));
    let mut core = NeuronCore::default().with_strict(true);
    let out = many_sources::host(&mut core, x.view(), y.view()).unwrap();
    // Source j is column block j: x's for even j, y's for odd j.
    let term = |j: usize, p: usize, k: usize| {
        if j.is_multiple_of(2) {
            f64::from(x[[p, 16 * j + k]])
        } else {
            f64::from(y[[p, 16 * j + k]].to_f32())
        }
    };
    for (slot, n) in [(0, 4), (1, 5), (2, 7), (3, 16)] {
        for p in 0..128 {
            for k in 0..16 {
                let terms: Vec<f64> = (0..n).map(|j| term(j, p, k)).collect();
                let want = fp32_sum(&terms);
                assert_eq!(
                    out[[slot, p, k]].to_bits(),
                    want.to_bits(),
                    "{n} sources [{p}, {k}]"
                );
            }
        }
    }
    // More than four sources: a chain of instructions, each adding at most four.
    let listing = many_sources::KERNEL.program().to_string();
    let count = listing.matches("dma_compute(").count();
    // 1 + 2 + 2 + 5 instructions (16 = 4 + 3 + 3 + 3 + 3).
    assert_eq!(count, 10, "{listing}");
}

#[test]
fn the_accumulate_idiom_reads_before_it_writes() {
    let a = to_bf16(&data(128, 32, 10));
    let b = data(128, 32, 11);
    for strict in [false, true] {
        let mut core = NeuronCore::default().with_strict(strict);
        let out = accumulate::host(&mut core, a.view(), b.view()).unwrap();
        for p in 0..128 {
            for k in 0..32 {
                let once = fp32_sum(&[f64::from(a[[p, k]].to_f32()), f64::from(b[[p, k]])]);
                let once = bf16::from_f32(once);
                let twice = fp32_sum(&[f64::from(once.to_f32()), f64::from(b[[p, k]])]);
                assert_eq!(
                    out[[p, k]].to_bits(),
                    bf16::from_f32(twice).to_bits(),
                    "[{p}, {k}]"
                );
            }
        }
    }
}

#[test]
fn the_listing_shows_the_dma_engines_sum() {
    let program = hbm_to_hbm::KERNEL.program();
    assert!(common::has_instr(program, "DMA", "dma_compute"));
    let listing = program.to_string();
    assert!(listing.contains(" + "), "{listing}");
    assert!(listing.contains("in fp32"), "{listing}");
}

/// NKI's scatter read-modify-write: `dst(HBM)[idx] = dst(HBM)[idx] + src(SBUF)`, the rows named
/// by `vector_offset`, on a bf16 table copied into the output first.
#[kernel]
fn scatter_rmw(
    table: Hbm<bf16, 100, 32>,
    rows: Hbm<f32, 64, 32>,
    indices: Hbm<u32, 64, 1>,
) -> Hbm<bf16, 100, 32> {
    let out = ndarray([100, 32], bf16, SharedHbm);
    let t = ndarray([100, 32], bf16, Sbuf);
    nisa::dma_copy(dst = t, src = table);
    nisa::dma_copy(dst = out, src = t);
    let idx = ndarray([64, 1], u32, Sbuf);
    nisa::dma_copy(dst = idx, src = indices);
    let d = ndarray([64, 32], f32, Sbuf);
    nisa::dma_copy(dst = d, src = rows);
    nisa::dma_compute(
        dst = out.ap(
            pattern = [[32, 64], [1, 32]],
            vector_offset = idx,
            indirect_dim = 0,
        ),
        srcs = [
            out.ap(
                pattern = [[32, 64], [1, 32]],
                vector_offset = idx,
                indirect_dim = 0,
            ),
            d,
        ],
        reduce_op = add,
    );
    out
}

/// NKI's gather read-modify-write: `dst(SBUF) = dst(SBUF) + src(HBM)[idx]`, the rows named by
/// `vector_offset` (and in NKI 2.26's spelling, `data[[idx, iy]]`, into a second tile).
#[kernel]
fn gather_rmw(
    data: Hbm<f32, 100, 32>,
    acc: Hbm<bf16, 64, 32>,
    indices: Hbm<u32, 64, 1>,
) -> (Hbm<bf16, 64, 32>, Hbm<bf16, 64, 32>) {
    let out = ndarray([64, 32], bf16, SharedHbm);
    let out2 = ndarray([64, 32], bf16, SharedHbm);
    let idx = ndarray([64, 1], u32, Sbuf);
    nisa::dma_copy(dst = idx, src = indices);
    let t = ndarray([64, 32], bf16, Sbuf);
    nisa::dma_copy(dst = t, src = acc);
    let u = ndarray([64, 32], bf16, Sbuf);
    nisa::dma_copy(dst = u, src = acc);
    nisa::dma_compute(
        dst = t,
        srcs = [
            t,
            data.ap(
                pattern = [[32, 64], [1, 32]],
                vector_offset = idx,
                indirect_dim = 0,
            ),
        ],
        reduce_op = add,
        unique_indices = true,
    );
    let iy = arange(32).x();
    nisa::dma_compute(
        dst = u,
        srcs = [data[[idx[[arange(64).p(), 0]], iy]], u],
        reduce_op = add,
    );
    nisa::dma_copy(dst = out, src = t);
    nisa::dma_copy(dst = out2, src = u);
    (out, out2)
}

/// Distinct row indices in a mixed order (NKI's read-modify-write needs unique indices).
fn rows_of(n: u32) -> Array2<u32> {
    Array2::from_shape_fn((64, 1), |(k, _)| (k as u32 * 37 + 11) % n)
}

#[test]
fn scatter_rmw_adds_the_sbuf_rows_into_the_named_hbm_rows() {
    let table = to_bf16(&data(100, 32, 20));
    let rows = data(64, 32, 21);
    let idx = rows_of(100);
    for strict in [false, true] {
        let mut core = NeuronCore::default().with_strict(strict);
        let out = scatter_rmw::host(&mut core, table.view(), rows.view(), idx.view()).unwrap();
        let mut want = table.clone();
        for k in 0..64 {
            let r = idx[[k, 0]] as usize;
            for j in 0..32 {
                let s = fp32_sum(&[f64::from(table[[r, j]].to_f32()), f64::from(rows[[k, j]])]);
                want[[r, j]] = bf16::from_f32(s);
            }
        }
        assert_eq!(
            out.mapv(bf16::to_bits),
            want.mapv(bf16::to_bits),
            "strict {strict}"
        );
    }
    let listing = scatter_rmw::KERNEL.program().to_string();
    assert!(listing.contains("atomic_rmw"), "{listing}");
}

#[test]
fn gather_rmw_adds_the_named_hbm_rows_into_the_tile() {
    let d = data(100, 32, 22);
    let acc = to_bf16(&data(64, 32, 23));
    let idx = rows_of(100);
    for strict in [false, true] {
        let mut core = NeuronCore::default().with_strict(strict);
        let (out, out2) = gather_rmw::host(&mut core, d.view(), acc.view(), idx.view()).unwrap();
        for k in 0..64 {
            let r = idx[[k, 0]] as usize;
            for j in 0..32 {
                let s = fp32_sum(&[f64::from(acc[[k, j]].to_f32()), f64::from(d[[r, j]])]);
                let want = bf16::from_f32(s).to_bits();
                assert_eq!(out[[k, j]].to_bits(), want, "[{k}, {j}] strict {strict}");
                assert_eq!(out2[[k, j]].to_bits(), want, "[{k}, {j}] 2.26 spelling");
            }
        }
    }
}

#[test]
fn a_scatter_rmw_row_past_the_table_is_a_launch_error() {
    let table = Array2::from_elem((100, 32), bf16::ZERO);
    let rows = Array2::zeros((64, 32));
    let mut idx = rows_of(100);
    idx[[5, 0]] = 100;
    let err = scatter_rmw::host(
        &mut NeuronCore::default(),
        table.view(),
        rows.view(),
        idx.view(),
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("out of bounds"), "{err}");
}

/// Four loads, then `dma_compute` of the four tiles: the sum waits for every one of them.
#[kernel(target = trn2)]
fn four_loads(
    a: Hbm<f32, 128, 512>,
    b: Hbm<f32, 128, 512>,
    c: Hbm<f32, 128, 2048>,
    d: Hbm<f32, 128, 4096>,
) -> Hbm<f32, 128, 512> {
    let out = ndarray([128, 512], f32, SharedHbm);
    let ta = load(a[..]);
    let tb = load(b[..]);
    let tc = load(c[..]);
    let td = load(d[..]);
    nisa::dma_compute(
        dst = ta,
        srcs = [ta, tb, tc[[.., 0..512]], td[[.., 1024..1536]]],
        reduce_op = add,
    );
    store(out[..], ta);
    out
}

/// The timing model (`docs/timing.md`): `dma_compute` is one DMA transfer that starts after
/// every load it reads (the largest, into its fourth source, last) and moves the bytes of its
/// four sources and its destination, more than a copy of one tile.
#[test]
fn the_timing_model_waits_for_every_source() {
    use nki::program::{Engine, Opcode};
    use nki::timing::{Detail, Kind, Timing};
    let mut core = NeuronCore::new(Target::Trn2);
    let s = Timing::new()
        .detail(Detail::Trace)
        .run_shapes(
            &mut core,
            &four_loads::KERNEL,
            &[&[128, 512], &[128, 512], &[128, 2048], &[128, 4096]],
        )
        .unwrap();
    assert_eq!(s.opcode_count(Engine::Dma, Opcode::DmaCompute), 1);
    let transfers = |opcode| {
        s.records()
            .iter()
            .filter(move |r| r.opcode == opcode && r.kind == Kind::DmaTransfer)
            .map(|r| (r.start, r.end))
            .collect::<Vec<_>>()
    };
    let loads = transfers(Opcode::Load);
    let sum = transfers(Opcode::DmaCompute);
    assert_eq!((loads.len(), sum.len()), (4, 1));
    let last_load = loads.iter().map(|&(_, end)| end).max().unwrap();
    assert!(
        sum[0].0 >= last_load,
        "{sum:?} starts before the loads end {loads:?}"
    );
    let stores = transfers(Opcode::Store);
    let (store_busy, sum_busy) = (stores[0].1 - stores[0].0, sum[0].1 - sum[0].0);
    assert!(
        sum_busy > store_busy,
        "dma_compute {sum_busy} ps, a store {store_busy} ps"
    );
}
