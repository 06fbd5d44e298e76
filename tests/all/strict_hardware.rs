//! `#[kernel(strict_hardware)]`: what NKI 0.3+ simulates but the device cannot run (the
//! release notes' known issues, `nki_lang::device_support`) is refused at compile time
//! (`tests/ui/strict_hardware_refused.rs`); what the device runs compiles and computes as
//! without the attribute (checked against plain f64 loops). The rules themselves are checked
//! here through `nki::program::device_support`.

use nki::ndarray::Array2;
use nki::prelude::*;
use nki::program::device_support::{self, Unsupported};
use nki::program::{Alu, TileShape};

/// The release note's workarounds: multiply by the reciprocal, same shapes, `matmul` with
/// `transpose_x`, numbers as operands.
#[kernel(strict_hardware)]
fn workarounds(
    a: Hbm<f32, 128, 512>,
    b: Hbm<f32, 128, 512>,
    w: Hbm<f32, 128, 128>,
) -> (Hbm<f32, 128, 512>, Hbm<f32, 128, 512>) {
    let x = load(a[..]);
    let y = load(b[..]);
    let wt = load(w[..]);
    let q = x * reciprocal(y) + x * 0.5;
    let m = matmul(wt, x, transpose_x = true);
    let out_q = ndarray([128, 512], f32, SharedHbm);
    let out_m = ndarray([128, 512], f32, SharedHbm);
    store(out_q[..], q);
    store(out_m[..], copy(m, f32));
    (out_q, out_m)
}

/// With `target` and instantiations: the attribute combines.
#[kernel(strict_hardware, target = trn2, halved(S = 0.5), quartered(S = 0.25))]
fn scaled<const S: f32>(a: Hbm<f32, 128, 512>) -> Hbm<f32, 128, 512> {
    let x = load(a[..]);
    let out = ndarray([128, 512], f32, SharedHbm);
    store(out[..], x * S);
    out
}

fn input(rows: usize, cols: usize, seed: u64, lo: f32) -> Array2<f32> {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    Array2::from_shape_fn((rows, cols), |_| {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        lo + (s >> 40) as f32 / (1u64 << 24) as f32
    })
}

#[test]
fn what_the_device_runs_compiles_and_computes() {
    let (a, b, w) = (
        input(128, 512, 1, -1.0),
        input(128, 512, 2, 0.5),
        input(128, 128, 3, -1.0),
    );
    let (q, m) =
        workarounds::host(&mut NeuronCore::default(), a.view(), b.view(), w.view()).unwrap();
    for i in 0..128 {
        for j in 0..512 {
            let (x, y) = (f64::from(a[[i, j]]), f64::from(b[[i, j]]));
            let want = x / y + x * 0.5;
            let got = f64::from(q[[i, j]]);
            assert!(
                (got - want).abs() <= 1e-5 * want.abs().max(1.0),
                "{got} vs {want}"
            );
            let want: f64 = (0..128)
                .map(|k| f64::from(w[[k, i]]) * f64::from(a[[k, j]]))
                .sum();
            let got = f64::from(m[[i, j]]);
            assert!((got - want).abs() <= 1e-4, "{got} vs {want}");
        }
    }
    let x = input(128, 512, 4, -1.0);
    let mut core = NeuronCore::new(Target::Trn2);
    let h = halved::host(&mut core, x.view()).unwrap();
    let t = quartered::host(&mut core, x.view()).unwrap();
    for ((&v, &hv), &tv) in x.iter().zip(&h).zip(&t) {
        assert_eq!(f64::from(hv), f64::from(v) * 0.5);
        assert_eq!(f64::from(tv), f64::from(v) * 0.25);
    }
}

#[test]
fn the_rules_are_the_release_notes_known_issues() {
    assert_eq!(
        device_support::check_alu(Alu::Divide),
        Err(Unsupported::Divide)
    );
    assert!(matches!(
        device_support::check_alu(Alu::Mod),
        Err(Unsupported::Modulo { name: "mod" })
    ));
    assert!(matches!(
        device_support::check_alu(Alu::Fmod),
        Err(Unsupported::Modulo { name: "fmod" })
    ));
    for ok in [Alu::Add, Alu::Subtract, Alu::Multiply, Alu::Max, Alu::Pow] {
        assert_eq!(device_support::check_alu(ok), Ok(()));
    }
    let big = TileShape::new(&[128, 512]).unwrap();
    let col = TileShape::new(&[128, 1]).unwrap();
    assert_eq!(device_support::check_binary_shapes(&big, &big), Ok(()));
    let e = device_support::check_binary_shapes(&big, &col).unwrap_err();
    assert!(e.to_string().contains("broadcasting"), "{e}");
    assert_eq!(device_support::check_matmul(true), Ok(()));
    let e = device_support::check_matmul(false).unwrap_err();
    assert!(e.to_string().contains("transpose_x"), "{e}");
    // Every message names its source.
    for e in [
        Unsupported::Divide,
        Unsupported::Modulo { name: "fmod" },
        Unsupported::Broadcast { a: big, b: col },
        Unsupported::MatmulTranspose,
    ] {
        assert!(e.to_string().contains("release notes"), "{e}");
        assert!(e.to_string().starts_with("`strict_hardware`"), "{e}");
    }
}
