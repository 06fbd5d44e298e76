//! Launch checks: every bad launch is an `Err` with a clear message, and writes nothing.

mod common;

use common::{Builder, access2, accumulation_group, seed_program, tiled_program, whole};
use core::ops::ControlFlow;
use half::bf16;
use ndarray::Ix2;

use nki_lang::{Affine, DType, Dim, Instr, Memory, Target, VarValues};
use nki_runtime::exec::Operands;
use nki_runtime::{DeviceTensor, HbmIn, HbmOut, Kernel, LaunchError, NeuronCore, Observer};

const SENTINEL: f32 = 12345.0;

fn bf(shape: &[usize]) -> DeviceTensor<bf16> {
    let n = shape.iter().product();
    DeviceTensor::from_vec(shape, vec![bf16::from_f32(0.5); n]).unwrap()
}

fn sentinel(shape: &[usize]) -> DeviceTensor<f32> {
    let n = shape.iter().product();
    DeviceTensor::from_vec(shape, vec![SENTINEL; n]).unwrap()
}

/// Launches the tiled kernel and returns the error message; checks the output is untouched.
fn tiled_error(lhs: &[usize], rhs: &[usize], out: &[usize]) -> String {
    let compiled = tiled_program(accumulation_group(0));
    let parts = compiled.parts();
    let kernel = Kernel::new(parts.program());
    let (l, r) = (bf(lhs), bf(rhs));
    let mut o = sentinel(out);
    let err = NeuronCore::default()
        .launch(&kernel, &[l.arg(), r.arg()], &mut [o.arg_mut()])
        .unwrap_err();
    assert!(
        o.as_slice().iter().all(|&x| x == SENTINEL),
        "output modified"
    );
    err.to_string()
}

#[test]
fn rank_mismatch() {
    assert_eq!(
        tiled_error(&[128, 128, 1], &[128, 512], &[128, 512]),
        "tensor `lhsT`: rank 3 where the kernel declares 2"
    );
}

#[test]
fn inconsistent_symbol() {
    assert_eq!(
        tiled_error(&[256, 128], &[384, 512], &[128, 512]),
        "symbolic dim `K` is 256 from `lhsT` axis 0 but 384 from `rhs` axis 0"
    );
}

#[test]
fn failed_divisibility() {
    assert_eq!(
        tiled_error(&[200, 128], &[200, 512], &[128, 512]),
        "launch constraint `K % 128 == 0` fails with K = 200"
    );
}

#[test]
fn output_shape_mismatch() {
    assert_eq!(
        tiled_error(&[128, 256], &[128, 512], &[128, 512]),
        "output `out`: shape [128, 512] where the kernel produces [256, 512]"
    );
}

#[test]
fn wrong_literal_dim_and_counts_and_dtypes() {
    let compiled = seed_program();
    let parts = compiled.parts();
    let kernel = Kernel::new(parts.program());
    let lhs = bf(&[128, 128]);
    let bad = bf(&[128, 500]);
    let rhs = bf(&[128, 512]);
    let mut out =
        DeviceTensor::from_vec(&[128, 512], vec![bf16::from_f32(SENTINEL); 128 * 512]).unwrap();
    let mut core = NeuronCore::default();
    let mut check = |inputs: &[HbmIn<'_>], outputs: &mut [HbmOut<'_>], want: &str| {
        let err = core.launch(&kernel, inputs, outputs).unwrap_err();
        assert_eq!(err.to_string(), want);
    };
    check(
        &[lhs.arg(), bad.arg()],
        &mut [out.arg_mut()],
        "tensor `rhs` axis 1 is 500 where the kernel declares 512",
    );
    check(
        &[lhs.arg()],
        &mut [out.arg_mut()],
        "kernel `matmul_seed` takes 2 inputs, but 1 was given",
    );
    check(
        &[lhs.arg(), rhs.arg()],
        &mut [],
        "kernel `matmul_seed` takes 1 output, but 0 were given",
    );
    // The type-erased bindings carry their dtype; the launch checks it.
    let f = vec![0.0f32; 128 * 512];
    let f_in = HbmIn::new(&f, &[128, 512]).unwrap();
    check(
        &[lhs.arg(), f_in],
        &mut [out.arg_mut()],
        "tensor `rhs`: element type f32 where the kernel declares bf16",
    );
    let mut fo = vec![0.0f32; 128 * 512];
    check(
        &[lhs.arg(), rhs.arg()],
        &mut [HbmOut::new(&mut fo, &[128, 512]).unwrap()],
        "tensor `out`: element type f32 where the kernel declares bf16",
    );
    assert!(fo.iter().all(|&x| x == 0.0));
    assert!(
        out.as_slice()
            .iter()
            .all(|&x| x == bf16::from_f32(SENTINEL))
    );
    // Bindings check their own shapes.
    assert!(HbmIn::new(&f, &[128, 511]).is_err());
    assert!(HbmIn::new(&f, &[1; 7]).is_err());
}

#[test]
fn bounds_constraint_names_the_tensor() {
    // A fixed 128-row tile loaded from a tensor with a symbolic number of rows.
    let mut b = Builder::new("head");
    let r = b.sym("R");
    let x = b.input("x", DType::F32, &[Dim::Sym(r), Dim::Fixed(64)]);
    let out = b.output("out", DType::F32, &[Dim::Fixed(128), Dim::Fixed(64)]);
    let t = b.tile("t", Memory::Sbuf, DType::F32, &[128, 64]);
    let z = Affine::ZERO;
    b.load(whole(t, &[128, 64]), access2(x, z, z));
    b.store(access2(out, z, z), whole(t, &[128, 64]));
    let compiled = b.finish();
    let parts = compiled.parts();
    let kernel = Kernel::new(parts.program());
    let x = DeviceTensor::<f32>::zeros(&[100, 64]).unwrap();
    let err = kernel.bind_inputs(&[x.arg()]).unwrap_err();
    assert!(matches!(err, LaunchError::Constraint { .. }));
    assert_eq!(
        err.to_string(),
        "launch constraint `x axis 0: index in [0, 127] < R` fails with R = 100"
    );
    let x = DeviceTensor::<f32>::zeros(&[300, 64]).unwrap();
    let syms = kernel.bind_inputs(&[x.arg()]).unwrap();
    assert_eq!(syms[0], 300);
    assert_eq!(kernel.output_dims::<Ix2>(0, &syms), Some(Ix2(128, 64)));
    assert_eq!(kernel.output_dims::<ndarray::Ix3>(0, &syms), None);
    assert_eq!(kernel.output_shape(1, &syms), None);
}

#[test]
fn trn2_program_on_trn1_core() {
    // One partition of 200 000 bytes: fits Trn2's 224 KiB, not Trn1's 192 KiB.
    let mut b = Builder::with_target("wide", Target::Trn2);
    let x = b.input("x", DType::F32, &[Dim::Fixed(1), Dim::Fixed(50_000)]);
    let out = b.output("out", DType::F32, &[Dim::Fixed(1), Dim::Fixed(50_000)]);
    let t = b.tile("t", Memory::Sbuf, DType::F32, &[1, 50_000]);
    let z = Affine::ZERO;
    b.load(whole(t, &[1, 50_000]), access2(x, z, z));
    b.store(access2(out, z, z), whole(t, &[1, 50_000]));
    let compiled = b.finish();
    let parts = compiled.parts();
    let kernel = Kernel::new(parts.program());
    let xs: Vec<f32> = (0..50_000).map(|i| i as f32).collect();
    let x = DeviceTensor::from_vec(&[1, 50_000], xs.clone()).unwrap();
    let mut o = sentinel(&[1, 50_000]);
    let err = NeuronCore::new(Target::Trn1)
        .launch(&kernel, &[x.arg()], &mut [o.arg_mut()])
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "kernel `wide` needs 200000 bytes of SBUF per partition (compiled for trn2), but this trn1 core has 196608"
    );
    assert!(o.as_slice().iter().all(|&x| x == SENTINEL));
    NeuronCore::new(Target::Trn2)
        .launch(&kernel, &[x.arg()], &mut [o.arg_mut()])
        .unwrap();
    assert_eq!(o.as_slice(), xs.as_slice());
}

#[test]
fn bind_then_execute() {
    let compiled = seed_program();
    let parts = compiled.parts();
    let kernel = Kernel::new(parts.program());
    let (lhs, rhs) = (bf(&[128, 128]), bf(&[128, 512]));
    let mut out = DeviceTensor::<bf16>::zeros(&[128, 512]).unwrap();
    let inputs = [lhs.arg(), rhs.arg()];
    let mut outputs = [out.arg_mut()];
    let bound = kernel.bind(&inputs, &mut outputs).unwrap();
    assert_eq!(bound.program().name(), "matmul_seed");
    NeuronCore::default().execute(bound).unwrap();
    // 128 products of 0.25.
    assert!(out.as_slice().iter().all(|&x| x == bf16::from_f32(32.0)));
}

/// Records the instructions it sees and stops the run before instruction `stop_at`.
struct StopAt {
    stop_at: usize,
    seen: Vec<usize>,
}

impl Observer for StopAt {
    fn before(&mut self, pc: usize, _: &Instr, _: &Operands, _: &VarValues) -> ControlFlow<String> {
        self.seen.push(pc);
        if pc == self.stop_at {
            ControlFlow::Break("stopped by the observer".into())
        } else {
            ControlFlow::Continue(())
        }
    }
}

#[test]
fn an_observer_can_stop_an_execution() {
    // The seed program: 0 load, 1 load, 2 nc_matmul, 3 tensor_copy, 4 store.
    let compiled = seed_program();
    let parts = compiled.parts();
    let kernel = Kernel::new(parts.program());
    let (lhs, rhs) = (bf(&[128, 128]), bf(&[128, 512]));
    let mut out =
        DeviceTensor::from_vec(&[128, 512], vec![bf16::from_f32(SENTINEL); 128 * 512]).unwrap();
    let mut observer = StopAt {
        stop_at: 2,
        seen: Vec::new(),
    };
    let err = {
        let inputs = [lhs.arg(), rhs.arg()];
        let mut outputs = [out.arg_mut()];
        let bound = kernel.bind(&inputs, &mut outputs).unwrap();
        NeuronCore::default()
            .execute_observed(bound, &mut observer)
            .unwrap_err()
    };
    assert!(matches!(err, LaunchError::Exec(_)), "{err:?}");
    assert_eq!(
        err.to_string(),
        "kernel `matmul_seed`, instruction 2 (nc_matmul, line 0): stopped by the observer"
    );
    assert_eq!(observer.seen, [0, 1, 2]);
    // The store never ran.
    assert!(
        out.as_slice()
            .iter()
            .all(|&x| x == bf16::from_f32(SENTINEL))
    );
}

#[test]
fn shapes_that_cannot_be_allocated_or_viewed_are_errors() {
    // ndarray counts the non-zero axes even when another axis is 0.
    assert!(nki_runtime::Shape::new(&[0, 1 << 40, 1 << 40]).is_err());
    // 2^62 elements are more bytes than an allocation can hold.
    assert!(nki_runtime::DeviceTensor::<f32>::zeros(&[1 << 40, 1 << 22]).is_err());
    let empty = nki_runtime::DeviceTensor::<f32>::zeros(&[0, 1 << 20]).unwrap();
    assert_eq!(empty.to_array().shape(), &[0, 1 << 20]);
}

#[test]
fn a_program_runs_on_its_generation_and_later_ones() {
    let copy = |target| {
        let mut b = Builder::with_target("copy", target);
        let x = b.input("x", DType::F32, &[Dim::Fixed(128), Dim::Fixed(4)]);
        let out = b.output("out", DType::F32, &[Dim::Fixed(128), Dim::Fixed(4)]);
        let t = b.tile("t", Memory::Sbuf, DType::F32, &[128, 4]);
        let z = Affine::ZERO;
        b.load(whole(t, &[128, 4]), access2(x, z, z));
        b.store(access2(out, z, z), whole(t, &[128, 4]));
        b.finish()
    };
    let xs: Vec<f32> = (0..512).map(|i| i as f32).collect();
    let x = DeviceTensor::from_vec(&[128, 4], xs.clone()).unwrap();
    let targets = [Target::Trn1, Target::Trn2, Target::Trn3];
    for (i, &compiled) in targets.iter().enumerate() {
        let c = copy(compiled);
        let parts = c.parts();
        let kernel = Kernel::new(parts.program());
        for (j, &core) in targets.iter().enumerate() {
            let mut o = sentinel(&[128, 4]);
            let r = NeuronCore::new(core).launch(&kernel, &[x.arg()], &mut [o.arg_mut()]);
            if j >= i {
                r.unwrap();
                assert_eq!(o.as_slice(), xs.as_slice());
            } else {
                let e = r.unwrap_err();
                assert!(matches!(e, LaunchError::Target { .. }), "{e}");
                assert_eq!(
                    e.to_string(),
                    format!(
                        "kernel `copy` is compiled for {}; this {} core runs programs compiled for {} or earlier",
                        compiled.name(),
                        core.name(),
                        core.name()
                    )
                );
                assert!(
                    o.as_slice().iter().all(|&v| v == SENTINEL),
                    "nothing written"
                );
            }
        }
    }
}
