//! `HostProfile`: host time per instruction and per opcode, counted over every execution of
//! every observed launch, and a run under it computes what a plain run computes.

use nki::host_profile::HostProfile;
use nki::ndarray::Ix2;
use nki::prelude::*;

/// One load before the loop, then per row tile: a load, a multiply, an `exp` and a store.
#[kernel]
fn scaled_exp(x: Hbm<f32, N, 512>, w: Hbm<f32, 128, 512>) -> Hbm<f32, N, 512> {
    let out = ndarray([N, 512], f32, SharedHbm);
    let (ip, jf) = mgrid![0..128, 0..512];
    let wt = load(w[[ip, jf]]);
    for i in affine_range(N / 128) {
        let t = load(x[[i * 128 + ip, jf]]);
        let u = exp(t * wt);
        store(out[[i * 128 + ip, jf]], u);
    }
    out
}

fn inputs(n: usize) -> (DeviceTensor<f32>, DeviceTensor<f32>) {
    let x =
        nki::ndarray::Array2::from_shape_fn((n, 512), |(r, c)| ((r * 7 + c) % 13) as f32 / 13.0);
    let w = nki::ndarray::Array2::from_shape_fn((128, 512), |(r, c)| ((r + c) % 5) as f32 / 5.0);
    (
        DeviceTensor::from_array(&x).unwrap(),
        DeviceTensor::from_array(&w).unwrap(),
    )
}

#[test]
fn counts_every_execution_of_every_observed_launch() {
    let n = 1024;
    let (x, w) = inputs(n);
    // Plain: strict launches are not host-profiled.
    let mut core = NeuronCore::default().with_strict(false);
    let mut profile = HostProfile::new();
    let launches = 3u64;
    let mut out = DeviceTensor::<f32>::zeros(&[n, 512]).unwrap();
    for _ in 0..launches {
        let (ins, mut outs) = ([x.arg(), w.arg()], [out.arg_mut()]);
        let bound = scaled_exp::KERNEL.bind(&ins, &mut outs).unwrap();
        core.execute_observed(bound, &mut profile).unwrap();
    }
    let trips = (n / 128) as u64;
    let runs = |name: &str| -> u64 {
        profile
            .by_opcode()
            .iter()
            .filter(|r| r.opcode.info().name == name)
            .map(|r| r.count)
            .sum()
    };
    assert_eq!(runs("load"), launches * (1 + trips));
    assert_eq!(runs("store"), launches * trips);
    assert_eq!(runs("tensor_tensor"), launches * trips);
    assert_eq!(runs("activation"), launches * trips);
    assert_eq!(profile.executed(), launches * (1 + 4 * trips));
    // Per instruction: the loop's load ran `trips` times per launch, the first load once.
    let rows = profile.by_instruction();
    assert_eq!(rows.len(), 5);
    let loads: Vec<u64> = {
        let mut v: Vec<_> = rows
            .iter()
            .filter(|r| r.opcode.info().name == "load")
            .map(|r| r.count)
            .collect();
        v.sort_unstable();
        v
    };
    assert_eq!(loads, [launches, launches * trips]);
    assert!(
        rows.windows(2).all(|p| p[0].time >= p[1].time),
        "most time first"
    );
    let sum = rows
        .iter()
        .fold(std::time::Duration::ZERO, |t, r| t + r.time);
    assert_eq!(sum, profile.total());
    let table = profile.to_string();
    for name in ["load", "store", "tensor_tensor", "activation", "Scalar"] {
        assert!(table.contains(name), "{table}");
    }
    profile.clear();
    assert_eq!(profile.executed(), 0);
    assert!(profile.by_instruction().is_empty());
}

#[test]
fn an_observed_run_computes_the_plain_runs_bits() {
    let n = 2048;
    let (x, w) = inputs(n);
    // Plain: strict launches are not host-profiled.
    let mut core = NeuronCore::default().with_strict(false);
    let plain = scaled_exp(&mut core, &x, &w).unwrap();
    let mut observed = DeviceTensor::<f32>::zeros(&[n, 512]).unwrap();
    let (ins, mut outs) = ([x.arg(), w.arg()], [observed.arg_mut()]);
    let bound = scaled_exp::KERNEL.bind(&ins, &mut outs).unwrap();
    core.execute_observed(bound, &mut HostProfile::new())
        .unwrap();
    let (a, b) = (
        plain.into_array::<Ix2>().unwrap(),
        observed.into_array::<Ix2>().unwrap(),
    );
    assert!(a.iter().zip(&b).all(|(p, q)| p.to_bits() == q.to_bits()));
}
