//! `nl.where` is a Rust keyword: a kernel calls it as `r#where`. Run by `tests/pending.rs`.

use nki::ndarray::Array2;
use nki::prelude::*;

#[kernel]
fn select_where(a: Hbm<f32, 128, 512>, b: Hbm<f32, 128, 512>) -> Hbm<f32, 3, 128, 512> {
    let out = ndarray([3, 128, 512], f32, SharedHbm);
    let x = load(a[..]);
    let y = load(b[..]);
    let m = x > y;
    store(out[[0, 0..128, 0..512]], r#where(x > y, x, y));
    store(out[[1, 0..128, 0..512]], r#where(m, x, 0.0));
    store(out[[2, 0..128, 0..512]], r#where(condition = x < 0.0, x = -1.0, y = 1.0));
    out
}

fn main() {
    let a = Array2::from_shape_fn((128, 512), |(p, f)| ((p * 37 + f * 11) % 41) as f32 - 20.0);
    let b = Array2::from_shape_fn((128, 512), |(p, f)| ((p * 13 + f * 7) % 43) as f32 - 21.0);
    let out = select_where::host(&mut NeuronCore::default(), a.view(), b.view()).unwrap();
    for ((p, f), &x) in a.indexed_iter() {
        let y = b[[p, f]];
        assert_eq!(out[[0, p, f]], if x > y { x } else { y });
        assert_eq!(out[[1, p, f]], if x > y { x } else { 0.0 });
        assert_eq!(out[[2, p, f]], if x < 0.0 { -1.0 } else { 1.0 });
    }
    assert!(select_where::KERNEL.program().to_string().contains("select"));
}
