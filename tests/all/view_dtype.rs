//! NKI 0.6's `t.view(dtype)` on SBUF and PSUM tiles and HBM tensors: the same bytes read as
//! another dtype, no copy, the last dimension scaled by the ratio of the sizes. Checked against NumPy's
//! `ndarray.view` written out by hand (`f32::to_bits`, little-endian byte splitting) on every
//! host path (portable, threaded, strict), and strict mode's definedness per byte.

use crate::common;

use common::*;
use nki::ndarray::{Array2, Ix2};
use nki::prelude::*;

/// An f32 tile read as bytes, as `i32`, as `u16` halves (the high half of each, through a
/// stepped slice of the view), slice by slice in a loop (a loop-affine offset scaled by the
/// ratio), and a byte tile read as `f32`; all moved by DMA, which converts nothing.
#[kernel]
fn reads(
    x: Hbm<f32, 128, 16>,
    b: Hbm<u8, 128, 64>,
) -> (
    Hbm<u8, 128, 64>,
    Hbm<i32, 128, 16>,
    Hbm<u16, 128, 16>,
    Hbm<u8, 128, 64>,
    Hbm<f32, 128, 16>,
) {
    let o_bytes = ndarray([128, 64], u8, SharedHbm);
    let o_int = ndarray([128, 16], i32, SharedHbm);
    let o_high = ndarray([128, 16], u16, SharedHbm);
    let o_loop = ndarray([128, 64], u8, SharedHbm);
    let o_float = ndarray([128, 16], f32, SharedHbm);
    let t = ndarray([128, 16], f32, Sbuf);
    nisa::dma_copy(dst = t, src = x);
    nisa::dma_copy(dst = o_bytes, src = t.view(u8));
    nisa::dma_copy(dst = o_int, src = t.view(dtype = i32));
    nisa::dma_copy(dst = o_high, src = t.view(u16).slice(1, 1, 32, 2));
    for k in affine_range(4) {
        nisa::dma_copy(
            dst = o_loop.slice(1, k * 16, k * 16 + 16),
            src = t.slice(1, k * 4, k * 4 + 4).view(u8),
        );
    }
    let u = ndarray([128, 64], u8, Sbuf);
    nisa::dma_copy(dst = u, src = b);
    nisa::dma_copy(dst = o_float, src = u.view(f32));
    (o_bytes, o_int, o_high, o_loop, o_float)
}

/// Writes through views: bytes into an f32 tile, `u16` halves (low ones, then high ones) into
/// another; an engine reads a PSUM tile's f32s as `u16`s (exact integers below 2¹⁶ through its
/// fp32 datapath).
#[kernel]
fn writes(
    b: Hbm<u8, 128, 64>,
    lo: Hbm<u16, 128, 16>,
    hi: Hbm<u16, 128, 16>,
    x: Hbm<f32, 128, 16>,
) -> (Hbm<f32, 128, 16>, Hbm<f32, 128, 16>, Hbm<u16, 128, 32>) {
    let o_bytes = ndarray([128, 16], f32, SharedHbm);
    let o_halves = ndarray([128, 16], f32, SharedHbm);
    let o_psum = ndarray([128, 32], u16, SharedHbm);
    let w = ndarray([128, 16], f32, Sbuf);
    nisa::dma_copy(dst = w.view(u8), src = b);
    nisa::dma_copy(dst = o_bytes, src = w);
    let h = ndarray([128, 16], f32, Sbuf);
    nisa::dma_copy(dst = h.view(u16).slice(1, 0, 32, 2), src = lo);
    nisa::dma_copy(dst = h.view(u16).slice(1, 1, 32, 2), src = hi);
    nisa::dma_copy(dst = o_halves, src = h);
    let t = ndarray([128, 16], f32, Sbuf);
    nisa::dma_copy(dst = t, src = x);
    let acc = ndarray([128, 16], f32, Psum);
    nisa::tensor_copy(dst = acc, src = t);
    let s = ndarray([128, 32], u16, Sbuf);
    nisa::tensor_copy(dst = s, src = acc.view(u16));
    nisa::dma_copy(dst = o_psum, src = s);
    (o_bytes, o_halves, o_psum)
}

/// The cores every test runs on: each host path, and strict mode.
fn cores() -> Vec<(&'static str, NeuronCore)> {
    vec![
        ("default", NeuronCore::default()),
        (
            "portable",
            NeuronCore::default().with_isa(nki::Isa::Portable).unwrap(),
        ),
        ("threads", NeuronCore::default().with_host_threads(4)),
        ("strict", NeuronCore::default().with_strict(true)),
    ]
}

fn random_bytes(rows: usize, cols: usize, seed: u64) -> Array2<u8> {
    let v = rand_int(Ix2(rows, cols), seed, 0, 255);
    v.mapv(|x| x as u8)
}

#[test]
fn reads_through_a_view_are_numpy_view_bit_for_bit() {
    let x = rand_f32(Ix2(128, 16), 31, -1.0e6, 1.0e6);
    let b = random_bytes(128, 64, 32);
    for (name, mut core) in cores() {
        let (o_bytes, o_int, o_high, o_loop, o_float) =
            reads::host(&mut core, x.view(), b.view()).unwrap();
        for p in 0..128 {
            for j in 0..16 {
                let bits = x[[p, j]].to_bits();
                let le = bits.to_le_bytes();
                for (k, &byte) in le.iter().enumerate() {
                    assert_eq!(
                        o_bytes[[p, 4 * j + k]],
                        byte,
                        "{name} bytes ({p}, {j}, {k})"
                    );
                    assert_eq!(o_loop[[p, 4 * j + k]], byte, "{name} loop ({p}, {j}, {k})");
                }
                assert_eq!(o_int[[p, j]], bits as i32, "{name} i32 ({p}, {j})");
                assert_eq!(
                    o_high[[p, j]],
                    (bits >> 16) as u16,
                    "{name} high ({p}, {j})"
                );
                let four = [
                    b[[p, 4 * j]],
                    b[[p, 4 * j + 1]],
                    b[[p, 4 * j + 2]],
                    b[[p, 4 * j + 3]],
                ];
                assert_eq!(
                    o_float[[p, j]].to_bits(),
                    u32::from_le_bytes(four),
                    "{name} f32 ({p}, {j})"
                );
            }
        }
    }
}

#[test]
fn writes_through_a_view_land_on_the_bytes_numpy_names() {
    let b = random_bytes(128, 64, 33);
    let lo = rand_int(Ix2(128, 16), 34, 0, 65535).mapv(|v| v as u16);
    // High halves of normal floats (no NaN, which a DMA moves unchanged anyway).
    let hi = rand_int(Ix2(128, 16), 35, 0x0080, 0x7f00).mapv(|v| v as u16);
    let x = rand_f32(Ix2(128, 16), 36, -1.0e4, 1.0e4);
    for (name, mut core) in cores() {
        let (o_bytes, o_halves, o_psum) =
            writes::host(&mut core, b.view(), lo.view(), hi.view(), x.view()).unwrap();
        for p in 0..128 {
            for j in 0..16 {
                let four = [
                    b[[p, 4 * j]],
                    b[[p, 4 * j + 1]],
                    b[[p, 4 * j + 2]],
                    b[[p, 4 * j + 3]],
                ];
                assert_eq!(
                    o_bytes[[p, j]].to_bits(),
                    u32::from_le_bytes(four),
                    "{name} bytes ({p}, {j})"
                );
                let want = u32::from(lo[[p, j]]) | (u32::from(hi[[p, j]]) << 16);
                assert_eq!(o_halves[[p, j]].to_bits(), want, "{name} halves ({p}, {j})");
                let bits = x[[p, j]].to_bits();
                assert_eq!(
                    o_psum[[p, 2 * j]],
                    (bits & 0xffff) as u16,
                    "{name} psum low ({p}, {j})"
                );
                assert_eq!(
                    o_psum[[p, 2 * j + 1]],
                    (bits >> 16) as u16,
                    "{name} psum high ({p}, {j})"
                );
            }
        }
    }
}

#[test]
fn a_view_reads_the_same_storage_and_adds_no_instruction() {
    let p = reads::KERNEL.program();
    let listing = p.to_string();
    // Two loads, five stores (one in the loop): views copy nothing.
    assert_eq!(p.instrs().len(), 9, "{listing}");
    assert!(listing.contains("f32 as u8"), "{listing}");
    assert!(listing.contains("u8 as f32"), "{listing}");
}

/// Writes the low `u16` half of every f32 of a tile, then stores the f32s: their high halves
/// were never written.
#[kernel]
fn half_written(lo: Hbm<u16, 128, 16>) -> Hbm<f32, 128, 16> {
    let out = ndarray([128, 16], f32, SharedHbm);
    let h = ndarray([128, 16], f32, Sbuf);
    nisa::dma_copy(dst = h.view(u16).slice(1, 0, 32, 2), src = lo);
    nisa::dma_copy(dst = out, src = h);
    out
}

#[test]
fn strict_mode_follows_definedness_byte_by_byte_across_views() {
    let lo = rand_int(Ix2(128, 16), 37, 0, 65535).mapv(|v| v as u16);
    let mut strict = NeuronCore::default().with_strict(true);
    let err = half_written::host(&mut strict, lo.view()).unwrap_err();
    let why = err.to_string();
    // Byte 2 of the first f32: its high half, which no view wrote.
    assert!(
        why.contains("no instruction of this launch wrote") && why.contains("byte 2 of SBUF"),
        "{why}"
    );
    // Both halves written (the `writes` kernel): defined, as its strict run above shows.
    let b = random_bytes(128, 64, 38);
    let x = rand_f32(Ix2(128, 16), 39, -1.0, 1.0);
    assert!(writes::host(&mut strict, b.view(), lo.view(), lo.view(), x.view()).is_ok());
}

/// Views of HBM tensors: loaded whole (into a new tile, and into a given one), a slice of whole
/// elements, a byte tensor read as f32, and an output written through a byte view.
#[kernel]
fn hbm(
    x: Hbm<f32, 128, 16>,
    b: Hbm<u8, 128, 64>,
) -> (
    Hbm<u8, 128, 64>,
    Hbm<u16, 128, 32>,
    Hbm<u8, 128, 16>,
    Hbm<f32, 128, 16>,
    Hbm<f32, 128, 16>,
) {
    let o_bytes = ndarray([128, 64], u8, SharedHbm);
    let o_halves = ndarray([128, 32], u16, SharedHbm);
    let o_part = ndarray([128, 16], u8, SharedHbm);
    let o_float = ndarray([128, 16], f32, SharedHbm);
    let o_written = ndarray([128, 16], f32, SharedHbm);
    let t = load(x.view(u8));
    store(o_bytes, t);
    let h = ndarray([128, 32], u16, Sbuf);
    nisa::dma_copy(dst = h, src = x.view(u16));
    nisa::dma_copy(dst = o_halves, src = h);
    // f32 elements 4..8 of each row: bytes 16..32.
    let p = ndarray([128, 16], u8, Sbuf);
    nisa::dma_copy(dst = p, src = x.view(u8).slice(1, 16, 32));
    nisa::dma_copy(dst = o_part, src = p);
    let f = ndarray([128, 16], f32, Sbuf);
    nisa::dma_copy(dst = f, src = b.view(f32));
    nisa::dma_copy(dst = o_float, src = f);
    let u = ndarray([128, 64], u8, Sbuf);
    nisa::dma_copy(dst = u, src = b);
    nisa::dma_copy(dst = o_written.view(u8), src = u);
    (o_bytes, o_halves, o_part, o_float, o_written)
}

#[test]
fn hbm_views_move_the_bytes_numpy_names() {
    let x = rand_f32(Ix2(128, 16), 40, -1.0e6, 1.0e6);
    let b = random_bytes(128, 64, 41);
    for (name, mut core) in cores() {
        let (o_bytes, o_halves, o_part, o_float, o_written) =
            hbm::host(&mut core, x.view(), b.view()).unwrap();
        for p in 0..128 {
            for j in 0..16 {
                let bits = x[[p, j]].to_bits();
                for (k, &byte) in bits.to_le_bytes().iter().enumerate() {
                    assert_eq!(
                        o_bytes[[p, 4 * j + k]],
                        byte,
                        "{name} bytes ({p}, {j}, {k})"
                    );
                    if (4..8).contains(&j) {
                        assert_eq!(
                            o_part[[p, 4 * (j - 4) + k]],
                            byte,
                            "{name} part ({p}, {j}, {k})"
                        );
                    }
                }
                assert_eq!(
                    o_halves[[p, 2 * j]],
                    (bits & 0xffff) as u16,
                    "{name} low ({p}, {j})"
                );
                assert_eq!(
                    o_halves[[p, 2 * j + 1]],
                    (bits >> 16) as u16,
                    "{name} high ({p}, {j})"
                );
                let four = [
                    b[[p, 4 * j]],
                    b[[p, 4 * j + 1]],
                    b[[p, 4 * j + 2]],
                    b[[p, 4 * j + 3]],
                ];
                let want = u32::from_le_bytes(four);
                assert_eq!(o_float[[p, j]].to_bits(), want, "{name} f32 ({p}, {j})");
                assert_eq!(
                    o_written[[p, j]].to_bits(),
                    want,
                    "{name} written ({p}, {j})"
                );
            }
        }
    }
}

/// The timing model runs programs with views of bytes (tile views, a PSUM view, HBM views moved
/// to the tile side), and a timing-only run agrees with a computing one.
#[test]
fn the_timing_model_times_views_of_bytes() {
    use nki::timing::{Mode, Timing};
    let mut core = NeuronCore::default();
    let shapes: [&[usize]; 4] = [&[128, 64], &[128, 16], &[128, 16], &[128, 16]];
    let only = Timing::new()
        .mode(Mode::TimingOnly)
        .run_shapes(&mut core, &writes::KERNEL, &shapes)
        .unwrap();
    let full = Timing::new()
        .mode(Mode::Compute)
        .run_shapes(&mut core, &writes::KERNEL, &shapes)
        .unwrap();
    assert!(only.total_ps() > 0);
    assert_eq!(only.total_ps(), full.total_ps());
    let hbm_shapes: [&[usize]; 2] = [&[128, 16], &[128, 64]];
    let t = Timing::new()
        .run_shapes(&mut core, &hbm::KERNEL, &hbm_shapes)
        .unwrap();
    assert!(t.total_ps() > 0);
}
