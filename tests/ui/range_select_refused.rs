use nki::prelude::*;

// NeuronCore-v2 (trn1) has no range_select.
#[kernel]
fn range_select_on_trn1(a: Hbm<f32, 128, 64>, b: Hbm<f32, 128, 1>) -> Hbm<f32, 128, 64> {
    let out = ndarray([128, 64], f32, SharedHbm);
    let x = load(a[..]);
    let l = load(b[..]);
    let d = range_select(x, greater_equal, less, l, l);
    store(out[..], d);
    out
}

#[kernel(target = trn2)]
fn range_select_refused(
    a: Hbm<f32, 128, 64>,
    b: Hbm<f32, 128, 1>,
    c: Hbm<i16, 128, 64>,
    e: Hbm<bf16, 128, 1>,
) -> Hbm<f32, 128, 64> {
    let out = ndarray([128, 64], f32, SharedHbm);
    let x = load(a[..]);
    let l = load(b[..]);
    let ints = load(c[..]);
    let half = load(e[..]);
    let m = ndarray([128, 1], f32, Sbuf);
    // on_true_tile is of a float type.
    let d = range_select(ints, greater_equal, less, l, l);
    // The bounds are fp32 columns.
    let d = range_select(x, greater_equal, less, half, l);
    let d = range_select(x, greater_equal, less, l, x);
    // The comparisons are equal, less, less_equal, greater, greater_equal.
    let d = range_select(x, not_equal, less, l, l);
    // The hardware fills with fp32's lowest value only.
    let d = range_select(x, greater_equal, less, l, l, on_false_value = 0.0);
    // The reduction is a maximum, and the accumulator is not carried between instructions.
    let d = range_select(x, greater_equal, less, l, l, reduce_res = m, reduce_op = add);
    let d = range_select(x, greater_equal, less, l, l, reduce_res = m, reduce_cmd = reduce);
    // range_start plus the free index stays within 2^24 (compared in fp32).
    let d = range_select(x, greater_equal, less, l, l, range_start = 16777200);
    // Only its partitions can be masked.
    let (i_p, i_f) = mgrid![0..128, 0..64];
    let d = range_select(x[[i_p, i_f]], greater_equal, less, l, l, mask = i_f < 10);
    store(out[..], d);
    out
}

fn main() {}
