//! `nc_stream_shuffle` against plain loops: within each 32-partition quadrant, destination
//! partition `i` receives source partition `shuffle_mask[i]`, bit for bit, or keeps its old
//! value where the entry is 255. NKI's three API-page examples (`test_nki_isa_nc_stream_shuffle.py`
//! with its assertions): a rotation in place, a broadcast of one partition, four quadrants with
//! one mask; and a reversed quadrant of bf16 into a quadrant at partition 64, a 255 entry, a
//! uint16 tile with two free axes.

use crate::common;

use nki::ndarray::{Array2, Array3, Ix2};
use nki::prelude::*;

/// NKI's example 1: partition `i` of a `[32, 128]` tile takes partition `(i - 1) mod 32`, in
/// place.
#[kernel]
fn nki_nc_stream_shuffle(in_tensor: Hbm<f32, 32, 128>) -> Hbm<f32, 32, 128> {
    let out_tensor = ndarray([32, 128], f32, SharedHbm);
    let a = load(in_tensor[..]);
    let a_mgrid = mgrid![0..32, 0..128];
    nc_stream_shuffle(
        src = a[[a_mgrid.p, a_mgrid.x]],
        dst = a[[a_mgrid.p, a_mgrid.x]],
        shuffle_mask = [
            31, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22,
            23, 24, 25, 26, 27, 28, 29, 30,
        ],
    );
    store(out_tensor[..], a);
    out_tensor
}

/// NKI's example 2: one partition broadcast to 32.
#[kernel]
fn nki_nc_stream_shuffle_broadcast_partition(in_tensor: Hbm<f32, 1, 128>) -> Hbm<f32, 32, 128> {
    let out_tensor = ndarray([32, 128], f32, SharedHbm);
    let a = load(in_tensor[..]);
    let b = ndarray([32, 128], f32, Sbuf);
    let dst_mgrid = mgrid![0..32, 0..128];
    let src_mgrid = mgrid![0..1, 0..128];
    nc_stream_shuffle(
        // NKI writes `a[0, src_mgrid.x]`; an integer partition index beside a grid is
        // refused here, and the one-partition grid names the same partition.
        src = a[[src_mgrid.p, src_mgrid.x]],
        dst = b[[dst_mgrid.p, dst_mgrid.x]],
        shuffle_mask = [
            0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
            0, 0, 0,
        ],
    );
    store(out_tensor[..], b);
    out_tensor
}

/// NKI's example 3: four quadrants, one mask.
#[kernel]
fn nki_nc_stream_shuffle_broadcast_mask(in_tensor: Hbm<f32, 128, 128>) -> Hbm<f32, 128, 128> {
    let out_tensor = ndarray([128, 128], f32, SharedHbm);
    let a = load(in_tensor[..]);
    let b = ndarray([128, 128], f32, Sbuf);
    let mgrid = mgrid![0..128, 0..128];
    nc_stream_shuffle(
        src = a[[mgrid.p, mgrid.x]],
        dst = b[[mgrid.p, mgrid.x]],
        shuffle_mask = [
            31, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22,
            23, 24, 25, 26, 27, 28, 29, 30,
        ],
    );
    store(out_tensor[..], b);
    out_tensor
}

#[test]
fn nki_api_page_examples() {
    let mut core = NeuronCore::default();
    // Example 1: in_tensor[i] = in_tensor[(i - 1) % 32].
    let x = common::rand_f32(Ix2(32, 128), 81, 0.0, 100.0);
    let out = nki_nc_stream_shuffle::host(&mut core, x.view()).unwrap();
    let want = Array2::from_shape_fn((32, 128), |(i, f)| x[[(i + 31) % 32, f]]);
    assert_eq!(out, want, "rotation in place");
    // Example 2: every partition is partition 0.
    let x = common::rand_f32(Ix2(1, 128), 82, 0.0, 100.0);
    let out = nki_nc_stream_shuffle_broadcast_partition::host(&mut core, x.view()).unwrap();
    let want = Array2::from_shape_fn((32, 128), |(_, f)| x[[0, f]]);
    assert_eq!(out, want, "broadcast of one partition");
    // Example 3: each quadrant rotated on its own.
    let x = common::rand_f32(Ix2(128, 128), 83, 0.0, 100.0);
    let out = nki_nc_stream_shuffle_broadcast_mask::host(&mut core, x.view()).unwrap();
    let want = Array2::from_shape_fn((128, 128), |(p, f)| {
        x[[(p / 32) * 32 + (p % 32 + 31) % 32, f]]
    });
    assert_eq!(out, want, "four quadrants");
}

/// A quadrant of bf16 reversed into partitions 64..96 of another tile whose other partitions
/// hold 7.0, with entry 5 left unmodified (255); a uint16 `[64, 4, 8]` tile shuffled by a
/// scattered mask into a `[64, 32]` tile (the same elements per partition).
#[kernel]
fn shuffle_cases(
    x: Hbm<bf16, 32, 16>,
    y: Hbm<u16, 64, 4, 8>,
) -> (Hbm<bf16, 128, 16>, Hbm<u16, 64, 32>) {
    let o1 = ndarray([128, 16], bf16, SharedHbm);
    let o2 = ndarray([64, 32], u16, SharedHbm);
    let a = load(x[..]);
    let d = ndarray([128, 16], bf16, Sbuf);
    d[..] = 7.0;
    nc_stream_shuffle(
        a,
        d[[64..96, 0..16]],
        [
            31, 30, 29, 28, 27, 255, 25, 24, 23, 22, 21, 20, 19, 18, 17, 16, 15, 14, 13, 12, 11,
            10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0,
        ],
    );
    store(o1[..], d);
    let b = load(y[..]);
    let e = ndarray([64, 32], u16, Sbuf);
    nc_stream_shuffle(
        b,
        e,
        [
            3, 3, 0, 31, 17, 8, 8, 8, 1, 2, 4, 5, 6, 7, 9, 10, 11, 12, 13, 14, 15, 16, 18, 19, 20,
            21, 22, 23, 24, 25, 26, 27,
        ],
    );
    store(o2[..], e);
    (o1, o2)
}

#[test]
fn shuffle_moves_partitions_bit_for_bit() {
    let x = common::rand_f32(Ix2(32, 16), 84, -4.0, 4.0).mapv(bf16::from_f32);
    let mut y = Array3::<u16>::zeros((64, 4, 8));
    for (k, v) in y.iter_mut().enumerate() {
        *v = (k as u16).wrapping_mul(40503);
    }
    let (o1, o2) = shuffle_cases::host(&mut NeuronCore::default(), x.view(), y.view()).unwrap();
    for p in 0..128 {
        for f in 0..16 {
            let want = if (64..96).contains(&p) && p - 64 != 5 {
                x[[31 - (p - 64), f]]
            } else {
                bf16::from_f32(7.0)
            };
            assert_eq!(o1[[p, f]].to_bits(), want.to_bits(), "({p}, {f})");
        }
    }
    let mask = [
        3, 3, 0, 31, 17, 8, 8, 8, 1, 2, 4, 5, 6, 7, 9, 10, 11, 12, 13, 14, 15, 16, 18, 19, 20, 21,
        22, 23, 24, 25, 26, 27,
    ];
    for p in 0..64 {
        let from = (p / 32) * 32 + mask[p % 32];
        for k in 0..32 {
            assert_eq!(o2[[p, k]], y[[from, k / 8, k % 8]], "({p}, {k})");
        }
    }
    let prog = shuffle_cases::KERNEL.program();
    assert!(
        common::has_instr(prog, "Vector", "nc_stream_shuffle"),
        "{prog}"
    );
}

/// A 255 entry leaves a new tile's partition unwritten: strict mode refuses storing it, and
/// accepts the same kernel storing only the partitions the shuffle wrote.
#[kernel]
fn shuffle_keeps_unwritten(x: Hbm<f32, 32, 8>) -> (Hbm<f32, 32, 8>, Hbm<f32, 2, 8>) {
    let o1 = ndarray([32, 8], f32, SharedHbm);
    let o2 = ndarray([2, 8], f32, SharedHbm);
    let a = load(x[..]);
    let d = ndarray([32, 8], f32, Sbuf);
    nc_stream_shuffle(
        a,
        d,
        [
            1, 0, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255,
            255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255,
        ],
    );
    store(o2[..], d[[0..2, 0..8]]);
    store(o1[..], d);
    (o1, o2)
}

#[kernel]
fn shuffle_stores_what_it_wrote(x: Hbm<f32, 32, 8>) -> Hbm<f32, 2, 8> {
    let o2 = ndarray([2, 8], f32, SharedHbm);
    let a = load(x[..]);
    let d = ndarray([32, 8], f32, Sbuf);
    nc_stream_shuffle(
        a,
        d,
        [
            1, 0, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255,
            255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255,
        ],
    );
    store(o2[..], d[[0..2, 0..8]]);
    o2
}

#[test]
fn strict_mode_refuses_storing_a_kept_unwritten_partition() {
    let x = common::rand_f32(Ix2(32, 8), 85, -1.0, 1.0);
    let mut strict = NeuronCore::default().with_strict(true);
    let err = shuffle_keeps_unwritten::host(&mut strict, x.view()).unwrap_err();
    let why = err.to_string();
    assert!(why.contains("store") && why.contains("unwritten"), "{why}");
    let out = shuffle_stores_what_it_wrote::host(&mut strict, x.view()).unwrap();
    let want = Array2::from_shape_fn((2, 8), |(p, f)| x[[1 - p, f]]);
    assert_eq!(out, want);
}
