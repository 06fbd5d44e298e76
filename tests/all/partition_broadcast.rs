//! Broadcasts across partitions of integer tiles (NKI's `broadcast_to` of an int32 `[1, F]` tile
//! to `[128, F]`): bit for bit for every 8-, 16- and 32-bit integer type, the extremes included,
//! through `broadcast_to` and through an operator with a one-partition operand.

use nki::ndarray::{Array2, s};
use nki::prelude::*;

macro_rules! broadcast_kernels {
    ($($name:ident: $t:ident),* $(,)?) => {$(
        /// Row 0 of `x` broadcast to 128 partitions, and added to every row of `x`.
        #[kernel]
        fn $name(x: Hbm<$t, 128, 600>) -> (Hbm<$t, 128, 600>, Hbm<$t, 128, 600>) {
            let out = ndarray([128, 600], $t, SharedHbm);
            let sum = ndarray([128, 600], $t, SharedHbm);
            let row = load(x[[0..1, 0..600]]);
            store(out[..], broadcast_to(row, [128, 600]));
            let t = load(x[..]);
            store(sum[..], t + row);
            (out, sum)
        }
    )*};
}

broadcast_kernels!(b_i32: i32, b_u32: u32, b_i16: i16, b_u16: u16, b_i8: i8, b_u8: u8);

/// Values over the whole range of the type, its extremes in the first columns of row 0.
fn values<T: Copy>(extremes: [T; 4], mut next: impl FnMut(u64) -> T) -> Array2<T> {
    let mut x = Array2::from_shape_fn((128, 600), |(r, c)| next((r * 600 + c) as u64));
    for (c, v) in extremes.into_iter().enumerate() {
        x[[0, c]] = v;
    }
    x
}

/// A scrambled 64-bit value of `i` (splitmix64's finaliser).
fn mix(i: u64) -> u64 {
    let mut z = i.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

macro_rules! check {
    ($kernel:ident, $t:ty) => {{
        let x = values::<$t>([<$t>::MIN, <$t>::MAX, 0, 1], |i| mix(i) as $t);
        let mut core = NeuronCore::default();
        let (out, sum) = $kernel::host(&mut core, x.view()).unwrap();
        let row = x.slice(s![0, ..]);
        for ((r, c), &v) in out.indexed_iter() {
            assert_eq!(v, row[c], "{} broadcast [{r}, {c}]", stringify!($t));
        }
        for ((r, c), &v) in sum.indexed_iter() {
            // 32-bit integers add in two's-complement lanes, wrapping (GpSimd's int32 `add`);
            // narrower ones exactly, then saturate to the dtype (docs/language.md, "Numerics").
            let want = if std::mem::size_of::<$t>() == 4 {
                (x[[r, c]] as i32).wrapping_add(row[c] as i32) as $t
            } else {
                let wide = (x[[r, c]] as i64) + (row[c] as i64);
                wide.clamp(<$t>::MIN as i64, <$t>::MAX as i64) as $t
            };
            assert_eq!(v, want, "{} sum [{r}, {c}]", stringify!($t));
        }
    }};
}

#[test]
fn integer_tiles_broadcast_across_partitions_bit_for_bit() {
    check!(b_i32, i32);
    check!(b_u32, u32);
    check!(b_i16, i16);
    check!(b_u16, u16);
    check!(b_i8, i8);
    check!(b_u8, u8);
}
