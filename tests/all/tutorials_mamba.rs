//! NKI's fused Mamba selective scan (`examples/mamba.rs`), its three versions against the f64
//! reference of the recurrence and against each other, and their launch constraints.

use crate::examples::mamba;

use mamba::{Inputs, Mamba, VERSIONS, max_error};
use nki::ndarray::{Array2, Array3, Ix3};
use nki::prelude::*;

/// Runs `kernel` on device-resident inputs.
fn run(kernel: Mamba, x: &Inputs) -> Array3<f32> {
    let [delta, u, a, b, c] = &x.device().unwrap();
    let mut core = NeuronCore::default();
    kernel(&mut core, delta, u, a, b, c)
        .unwrap()
        .into_array::<Ix3>()
        .unwrap()
}

/// Checks `kernel`'s result against the reference; returns it.
fn check(name: &str, kernel: Mamba, x: &Inputs) -> Array3<f32> {
    let out = run(kernel, x);
    assert_eq!(out.dim(), x.delta.dim(), "{name}");
    let (want, bound) = x.reference();
    let (worst, ratio, within) = max_error(out.view(), &want, &bound);
    assert!(
        within,
        "{name} {:?}: largest error {worst:e}, {ratio} of the bound",
        x.delta.dim()
    );
    out
}

#[test]
fn the_tutorial_shape_in_every_version() {
    // B = 1, L = 512, C = 256, S = 16. NKI's own accuracy mode requires v2 and v3 to equal v1
    // exactly: the same operations in the same order, so the same bits.
    let x = Inputs::random(1, 512, 256, 16, 7);
    let v1 = check("mamba_v1", VERSIONS[0].1, &x);
    for (name, kernel) in &VERSIONS[1..] {
        let out = check(name, *kernel, &x);
        assert!(
            out.iter().zip(&v1).all(|(a, b)| a.to_bits() == b.to_bits()),
            "{name} differs from mamba_v1"
        );
    }
}

#[test]
fn two_batches_and_a_sequence_of_several_tiles() {
    // v3 carries the scan from one 512-wide sequence tile to the next.
    let x = Inputs::random(2, 1024, 128, 4, 11);
    for (name, kernel) in VERSIONS {
        check(name, kernel, &x);
    }
}

#[test]
fn v1_and_v2_take_any_sequence_length_up_to_the_capacity() {
    let x = Inputs::random(1, 300, 384, 3, 13);
    for (name, kernel) in &VERSIONS[..2] {
        check(name, *kernel, &x);
    }
    let x = Inputs::random(1, 2048, 128, 2, 17);
    for (name, kernel) in VERSIONS {
        check(name, kernel, &x);
    }
}

#[test]
fn the_tutorial_inputs_of_ones() {
    // mamba_torch.py's check: delta = u = B = C = 1, A = −1. Then every state's scan is
    // h[t] = e⁻¹·h[t−1] + 1, and out[t] = S·h[t].
    let (batch, seq_len, channels, state_size) = (1, 512, 256, 16);
    let ones = Array3::<f32>::ones((batch, channels, seq_len));
    let bc = Array3::<f32>::ones((batch, state_size, seq_len));
    let x = Inputs {
        delta: ones.clone(),
        u: ones,
        A: -Array2::<f32>::ones((channels, state_size)),
        B: bc.clone(),
        C: bc,
    };
    let decay = (-1.0f64).exp();
    for (name, kernel) in VERSIONS {
        let out = check(name, kernel, &x);
        let mut h = 0.0;
        for t in 0..seq_len {
            h = decay * h + 1.0;
            let want = state_size as f64 * h;
            let got = f64::from(out[[0, 17, t]]);
            assert!(
                (got - want).abs() <= 1e-5 * want,
                "{name} t={t}: {got} vs {want}"
            );
        }
    }
}

#[test]
fn launch_constraints_name_the_shapes_each_version_needs() {
    let mut core = NeuronCore::default();
    let mut err = |kernel: Mamba, seq_len: usize, channels: usize| {
        let (batch, state_size) = (1, 2);
        let x = DeviceTensor::<f32>::zeros(&[batch, channels, seq_len]).unwrap();
        let a = DeviceTensor::<f32>::zeros(&[channels, state_size]).unwrap();
        let bc = DeviceTensor::<f32>::zeros(&[batch, state_size, seq_len]).unwrap();
        kernel(&mut core, &x, &x, &a, &bc, &bc)
            .unwrap_err()
            .to_string()
    };
    for (name, kernel) in VERSIONS {
        let e = err(kernel, 512, 200);
        assert!(e.contains("CHANNELS % 128 == 0"), "{name}: {e}");
        // The SBUF tiles hold 2048 columns.
        let e = err(kernel, 2048 + 512, 128);
        assert!(e.contains("SEQ_LEN") && e.contains("2560"), "{name}: {e}");
    }
    // v1's accumulator, NKI's block tile of `channels // 128` channel tiles, has room for 18
    // beside the kernel's other tiles.
    let e = err(VERSIONS[0].1, 512, 19 * 128);
    assert!(
        e.contains("scanC_accum blocks: CHANNELS / 128 <= 18") && e.contains("CHANNELS = 2432"),
        "{e}"
    );
    // v3 tiles the sequence by 512.
    let e = err(VERSIONS[2].1, 300, 128);
    assert!(e.contains("SEQ_LEN % 512 == 0"), "{e}");
}
