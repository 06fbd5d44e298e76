//! `local_gather` against plain loops: each group of 16 partitions gathers, from each of its
//! partitions of `src_buffer` (free elements flattened row-major), `num_elem_per_idx`
//! contiguous elements at each of its `num_valid_indices` uint16 indices, taken from the
//! group's partitions of `index` partition first. NKI's API-page example
//! (`test_nki_isa_local_gather.py`, with its NumPy reference: `np.take` of each group's indices
//! flattened in column order), groups with different indices, the default count, one element
//! per index, and an index past the partition stopping the launch.

use crate::common;

use nki::ndarray::{Array2, Array3, Array4, Ix2, Ix3};
use nki::prelude::*;

/// NKI's example: `src_buffer` `[128, 512, 4]`, `index` `[128, 4]` (one group's indices
/// replicated 8 times, times `num_elem_per_idx`), 64 valid indices of 4 elements each.
#[kernel]
fn nki_local_gather(
    src_buffer: Hbm<f32, 128, 512, 4>,
    index: Hbm<u16, 128, 4>,
) -> Hbm<f32, 128, 4, 16, 4> {
    let output = ndarray([128, 4, 16, 4], f32, SharedHbm);
    let src_buffer_tile = load(src_buffer[..]);
    let index_tile = load(index[..]);
    let output_tile = ndarray([128, 4, 16, 4], f32, Sbuf);
    output_tile[..] = local_gather(src_buffer_tile, index_tile, 4, 64);
    store(output[..], output_tile);
    output
}

#[test]
fn nki_api_page_example() {
    let src_buffer = common::rand_f32(Ix3(128, 512, 4), 91, 0.0, 100.0);
    let index_per_core = common::rand_int(Ix2(16, 4), 92, 0, 511).mapv(|v| v as u16);
    // Replicated for the 8 GpSimd cores; the hardware indices count elements.
    let index = Array2::from_shape_fn((128, 4), |(p, c)| index_per_core[[p % 16, c]]);
    let (num_elem_per_idx, num_valid_indices) = (4usize, 64usize);
    let index_hw = index.mapv(|v| v * num_elem_per_idx as u16);
    let out = nki_local_gather::host(
        &mut NeuronCore::default(),
        src_buffer.view(),
        index_hw.view(),
    )
    .unwrap();
    // NumPy's reference: per core, the 16 partitions' indices flattened in column order
    // (order='F'), then np.take along the 512 axis.
    let mut want = Array3::<f32>::zeros((128, num_valid_indices, num_elem_per_idx));
    for core in 0..8 {
        let rows = core * 16..(core + 1) * 16;
        let indices_1d: Vec<usize> = (0..4)
            .flat_map(|c| rows.clone().map(move |p| (p, c)))
            .map(|(p, c)| index[[p, c]] as usize)
            .take(num_valid_indices)
            .collect();
        for p in rows.clone() {
            for (j, &ix) in indices_1d.iter().enumerate() {
                for e in 0..num_elem_per_idx {
                    want[[p, j, e]] = src_buffer[[p, ix, e]];
                }
            }
        }
    }
    let want: Array4<f32> = want.into_shape_with_order((128, 4, 16, 4)).unwrap();
    assert_eq!(out, want);
    let prog = nki_local_gather::KERNEL.program();
    assert!(common::has_instr(prog, "GpSimd", "local_gather"), "{prog}");
}

/// Two groups with their own indices (not replicated), the default count (every index of a
/// group: 16 · 3), one element each, into bf16; and two elements at each of 20 indices.
#[kernel]
fn local_gather_cases(
    x: Hbm<bf16, 32, 40>,
    ix: Hbm<u16, 32, 3>,
) -> (Hbm<bf16, 32, 48>, Hbm<bf16, 32, 40>) {
    let o1 = ndarray([32, 48], bf16, SharedHbm);
    let o2 = ndarray([32, 40], bf16, SharedHbm);
    let t = load(x[..]);
    let i = load(ix[..]);
    let g1 = local_gather(t, i);
    store(o1[..], g1);
    let g2 = local_gather(
        src_buffer = t,
        index = i,
        num_elem_per_idx = 2,
        num_valid_indices = 20,
    );
    store(o2[..], g2);
    (o1, o2)
}

/// Index `j` of the group of partition `p`: partition `16·(p / 16) + j mod 16`, column `j / 16`.
fn group_index(ix: &Array2<u16>, p: usize, j: usize) -> usize {
    ix[[(p / 16) * 16 + j % 16, j / 16]] as usize
}

#[test]
fn local_gather_matches_plain_loops() {
    let x = common::rand_f32(Ix2(32, 40), 93, -8.0, 8.0).mapv(bf16::from_f32);
    let ix = common::rand_int(Ix2(32, 3), 94, 0, 38).mapv(|v| v as u16);
    let (o1, o2) =
        local_gather_cases::host(&mut NeuronCore::default(), x.view(), ix.view()).unwrap();
    for p in 0..32 {
        for j in 0..48 {
            assert_eq!(o1[[p, j]], x[[p, group_index(&ix, p, j)]], "({p}, {j})");
        }
        for j in 0..20 {
            for e in 0..2 {
                let want = x[[p, group_index(&ix, p, j) + e]];
                assert_eq!(o2[[p, 2 * j + e]], want, "({p}, {j}, {e})");
            }
        }
    }
}

#[kernel]
fn local_gather_past_the_partition(x: Hbm<f32, 16, 8>, ix: Hbm<u16, 16, 1>) -> Hbm<f32, 16, 32> {
    let out = ndarray([16, 32], f32, SharedHbm);
    let t = load(x[..]);
    let i = load(ix[..]);
    let g = local_gather(t, i, 2);
    store(out[..], g);
    out
}

#[test]
fn an_index_past_its_partition_stops_the_launch() {
    let x = common::rand_f32(Ix2(16, 8), 95, -1.0, 1.0);
    // Index 7 with two elements per index reads elements 7 and 8 of an 8-element partition.
    let mut ix = Array2::<u16>::zeros((16, 1));
    ix[[9, 0]] = 7;
    let err =
        local_gather_past_the_partition::host(&mut NeuronCore::default(), x.view(), ix.view())
            .unwrap_err()
            .to_string();
    assert!(
        err.contains("local_gather index 7") && err.contains("which has 8"),
        "{err}"
    );
    // Index 6 reads elements 6 and 7: the last two.
    ix[[9, 0]] = 6;
    let out =
        local_gather_past_the_partition::host(&mut NeuronCore::default(), x.view(), ix.view())
            .unwrap();
    for p in 0..16 {
        assert_eq!(out[[p, 18]], x[[p, 6]]);
        assert_eq!(out[[p, 19]], x[[p, 7]]);
        assert_eq!(out[[p, 0]], x[[p, 0]]);
    }
}
