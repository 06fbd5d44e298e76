//! `nc_matmul` and `nc_transpose` programs against f64 references.

mod common;

use common::{
    ACCUMULATE, Builder, Rng, access2, accumulation_group, assert_close, plain_cores,
    reference_matmul, seed_program, tiled_program, view, whole,
};
use half::{bf16, f16};
use ndarray::Array2;
use nki_lang::{Affine, DType, Dim, Memory, Target, Write};
use nki_runtime::{DeviceTensor, HbmIn, Isa, Kernel, NeuronCore};

fn random_bf16(rng: &mut Rng, rows: usize, cols: usize) -> Array2<bf16> {
    Array2::from_shape_fn((rows, cols), |_| bf16::from_f64(rng.unit()))
}

/// Writes new random values over `to`, the elements of a `rows × cols` bf16 tensor, in place.
fn rewrite(to: &mut [bf16], rng: &mut Rng, rows: usize, cols: usize) {
    to.copy_from_slice(random_bf16(rng, rows, cols).as_slice().unwrap());
}

fn to_f64<T: Copy + Into<f32>>(a: &[T]) -> Vec<f64> {
    a.iter().map(|&x| x.into() as f64).collect()
}

#[test]
fn seed_matmul_matches_f64_reference() {
    let compiled = seed_program();
    let parts = compiled.parts();
    let kernel = Kernel::new(parts.program());
    let mut rng = Rng::new(1);
    let lhs = random_bf16(&mut rng, 128, 128);
    let rhs = random_bf16(&mut rng, 128, 512);
    let (want, abs) = reference_matmul(
        &to_f64(lhs.as_slice().unwrap()),
        &to_f64(rhs.as_slice().unwrap()),
        128,
        128,
        512,
    );
    let lhs_d = DeviceTensor::from_array(&lhs).unwrap();
    let rhs_d = DeviceTensor::from_array(&rhs).unwrap();
    let mut first: Option<Vec<bf16>> = None;
    for isa in Isa::supported() {
        let mut core = NeuronCore::new(Target::Trn1).with_isa(isa).unwrap();
        let mut out = DeviceTensor::<bf16>::zeros(&[128, 512]).unwrap();
        core.launch(&kernel, &[lhs_d.arg(), rhs_d.arg()], &mut [out.arg_mut()])
            .unwrap();
        // bf16 output: half an ulp (2⁻⁸ relative) on top of the fp32 accumulation error.
        assert_close(&to_f64(out.as_slice()), &want, &abs, 128, 2f64.powi(-8));
        // Every code path gives the same bits.
        match &first {
            None => first = Some(out.as_slice().to_vec()),
            Some(f) => assert_eq!(f.as_slice(), out.as_slice(), "{isa:?} differs"),
        }
    }
}

fn run_tiled(
    kernel: &Kernel<'_>,
    k: usize,
    m: usize,
    n: usize,
    seed: u64,
) -> (Vec<f32>, Vec<f64>, Vec<f64>) {
    let mut rng = Rng::new(seed);
    let lhs = random_bf16(&mut rng, k, m);
    let rhs = random_bf16(&mut rng, k, n);
    let (want, abs) = reference_matmul(
        &to_f64(lhs.as_slice().unwrap()),
        &to_f64(rhs.as_slice().unwrap()),
        k,
        m,
        n,
    );
    let lhs_d = DeviceTensor::from_array(&lhs).unwrap();
    let rhs_d = DeviceTensor::from_array(&rhs).unwrap();
    let syms = kernel.bind_inputs(&[lhs_d.arg(), rhs_d.arg()]).unwrap();
    let shape = kernel.output_shape(0, &syms).unwrap();
    assert_eq!(shape.as_slice(), &[m, n]);
    let mut out = DeviceTensor::<f32>::zeros(shape.as_slice()).unwrap();
    let mut core = NeuronCore::default();
    core.launch(kernel, &[lhs_d.arg(), rhs_d.arg()], &mut [out.arg_mut()])
        .unwrap();
    (out.as_slice().to_vec(), want, abs)
}

#[test]
fn tiled_matmul_over_symbolic_dims() {
    let compiled = tiled_program(accumulation_group(0));
    let parts = compiled.parts();
    let kernel = Kernel::new(parts.program());
    for (i, &(k, m, n)) in [(384, 256, 1024), (128, 128, 512), (256, 384, 512)]
        .iter()
        .enumerate()
    {
        let (got, want, abs) = run_tiled(&kernel, k, m, n, 10 + i as u64);
        let got: Vec<f64> = got.iter().map(|&x| x as f64).collect();
        assert_close(&got, &want, &abs, k, 0.0);
    }
}

#[test]
fn group_and_plain_accumulation_agree() {
    let group = tiled_program(accumulation_group(0));
    let plain = tiled_program(ACCUMULATE);
    let (gp, pp) = (group.parts(), plain.parts());
    let (g, p) = (Kernel::new(gp.program()), Kernel::new(pp.program()));
    let (a, _, _) = run_tiled(&g, 256, 128, 512, 5);
    let (b, _, _) = run_tiled(&p, 256, 128, 512, 5);
    // -0.0 + x == x for every x, so only the sign of exact zeros may differ.
    assert!(a.iter().zip(&b).all(|(x, y)| x == y));
}

#[test]
fn tiled_matmul_1024_cubed() {
    let compiled = tiled_program(accumulation_group(0));
    let parts = compiled.parts();
    let kernel = Kernel::new(parts.program());
    let (got, want, abs) = run_tiled(&kernel, 1024, 1024, 1024, 99);
    let got: Vec<f64> = got.iter().map(|&x| x as f64).collect();
    assert_close(&got, &want, &abs, 1024, 0.0);
}

/// Small and strided operands: `K = 64`, stationary `[64, 96]` f32 from a partition offset,
/// moving f16 every other column of a wider tile, destination every other PSUM column, then
/// a second matmul accumulating into the same destination.
#[test]
fn strided_and_mixed_dtype_operands() {
    let mut b = Builder::new("odd_matmul");
    let s_in = b.input("s", DType::F32, &[Dim::Fixed(128), Dim::Fixed(96)]);
    let m_in = b.input("mv", DType::F16, &[Dim::Fixed(64), Dim::Fixed(200)]);
    let out = b.output("out", DType::F32, &[Dim::Fixed(96), Dim::Fixed(200)]);
    let st = b.tile("st", Memory::Sbuf, DType::F32, &[128, 96]);
    let mv = b.tile("mv_tile", Memory::Sbuf, DType::F16, &[64, 400]);
    let acc = b.tile("acc", Memory::Psum, DType::F32, &[96, 500]);
    let res = b.tile("res", Memory::Sbuf, DType::F32, &[96, 200]);
    let z = Affine::ZERO;
    b.load(whole(st, &[128, 96]), access2(s_in, z, z));
    // Every other column of the moving tile holds `mv`.
    b.load(view(mv, 0, &[64, 200], z, &[2]), access2(m_in, z, z));
    // Partitions 64..128 of the stationary tile, twice: first overwrite, then accumulate.
    for write in [Write::Overwrite, ACCUMULATE] {
        b.matmul(
            view(acc, 0, &[96, 200], Affine::constant(1), &[2]),
            view(st, 64, &[64, 96], z, &[1]),
            view(mv, 0, &[64, 100, 2], z, &[4, 2]),
            write,
        );
    }
    b.copy(
        whole(res, &[96, 200]),
        view(acc, 0, &[96, 200], Affine::constant(1), &[2]),
    );
    b.store(access2(out, z, z), whole(res, &[96, 200]));
    let compiled = b.finish();
    let parts = compiled.parts();
    let kernel = Kernel::new(parts.program());

    let mut rng = Rng::new(7);
    let s = Array2::from_shape_fn((128, 96), |_| rng.unit() as f32);
    let mvh = Array2::from_shape_fn((64, 200), |_| f16::from_f64(rng.unit()));
    let s64: Vec<f64> = s.iter().skip(64 * 96).map(|&x| 2.0 * x as f64).collect();
    let (want, abs) = reference_matmul(&s64, &to_f64(mvh.as_slice().unwrap()), 64, 96, 200);
    let sd = DeviceTensor::from_array(&s).unwrap();
    let md = DeviceTensor::from_array(&mvh).unwrap();
    let mut o = DeviceTensor::<f32>::zeros(&[96, 200]).unwrap();
    for isa in Isa::supported() {
        let mut core = NeuronCore::default().with_isa(isa).unwrap();
        core.launch(&kernel, &[sd.arg(), md.arg()], &mut [o.arg_mut()])
            .unwrap();
        let got: Vec<f64> = o.as_slice().iter().map(|&x| x as f64).collect();
        assert_close(&got, &want, &abs, 128, 0.0);
    }
}

/// `nc_transpose` of a bf16 `[128, 96]` view (a `[128, 2, 48]` grid) is exact.
#[test]
fn transpose_is_exact() {
    let mut b = Builder::new("transpose");
    let x = b.input("x", DType::Bf16, &[Dim::Fixed(128), Dim::Fixed(96)]);
    let out = b.output("out", DType::F32, &[Dim::Fixed(96), Dim::Fixed(128)]);
    let t = b.tile("t", Memory::Sbuf, DType::Bf16, &[128, 96]);
    let pt = b.tile("pt", Memory::Psum, DType::F32, &[96, 128]);
    let res = b.tile("res", Memory::Sbuf, DType::F32, &[96, 128]);
    let z = Affine::ZERO;
    b.load(whole(t, &[128, 96]), access2(x, z, z));
    b.transpose(whole(pt, &[96, 128]), whole(t, &[128, 2, 48]));
    b.copy(whole(res, &[96, 128]), whole(pt, &[96, 128]));
    b.store(access2(out, z, z), whole(res, &[96, 128]));
    let compiled = b.finish();
    let parts = compiled.parts();
    let kernel = Kernel::new(parts.program());
    let mut rng = Rng::new(3);
    let xa = random_bf16(&mut rng, 128, 96);
    let xd = DeviceTensor::from_array(&xa).unwrap();
    let mut o = DeviceTensor::<f32>::zeros(&[96, 128]).unwrap();
    NeuronCore::default()
        .launch(&kernel, &[xd.arg()], &mut [o.arg_mut()])
        .unwrap();
    let o = o.into_array::<ndarray::Ix2>().unwrap();
    for p in 0..128 {
        for f in 0..96 {
            assert_eq!(o[[f, p]], xa[[p, f]].to_f32());
        }
    }
}

/// A matmul followed by a `tensor_copy` of its result: the plain cores run the copy as part of
/// the matmul (converting each block of results while it is in cache), the strict core runs the
/// two instructions one after the other. Every variant, on every host code path and with one
/// and two host threads, gives the strict core's bits, and the f64 reference's values:
/// - the copy to bf16 and to f32;
/// - the copy written over the moving operand's own tile (the packing of both operands comes
///   before any result, so the matmul still reads the operand's old values);
/// - a second matmul accumulating into the first one's result before the copy;
/// - a copy of half of the result's columns, and a second copy of the whole result after the
///   first (neither of which runs fused; the second reads PSUM, which still holds the results).
#[test]
fn a_copy_after_a_matmul_gives_the_bits_of_both_in_turn() {
    let (k, m, n) = (128usize, 128usize, 512usize);
    let dims = [m as u32, n as u32];
    let z = Affine::ZERO;
    let program = |variant: &str| {
        let mut b = Builder::new("matmul_then_copy");
        let lhs = b.input("lhsT", DType::Bf16, &[Dim::Fixed(128), Dim::Fixed(128)]);
        let rhs = b.input("rhs", DType::Bf16, &[Dim::Fixed(128), Dim::Fixed(512)]);
        let out_dt = if variant == "f32" {
            DType::F32
        } else {
            DType::Bf16
        };
        let out = b.output("out", out_dt, &[Dim::Fixed(128), Dim::Fixed(512)]);
        let a = b.tile("lhsT_tile", Memory::Sbuf, DType::Bf16, &[128, 128]);
        let r = b.tile("rhs_tile", Memory::Sbuf, DType::Bf16, &[128, 512]);
        let acc = b.tile("acc", Memory::Psum, DType::F32, &[128, 512]);
        let res = b.tile("res", Memory::Sbuf, out_dt, &[128, 512]);
        b.load(whole(a, &[128, 128]), access2(lhs, z, z));
        b.load(whole(r, &[128, 512]), access2(rhs, z, z));
        let product = |b: &mut Builder, write| {
            b.matmul(
                whole(acc, &dims),
                whole(a, &[128, 128]),
                whole(r, &dims),
                write,
            )
        };
        product(&mut b, Write::Overwrite);
        match variant {
            "over the operand" => {
                b.copy(whole(r, &dims), whole(acc, &dims));
                b.store(access2(out, z, z), whole(r, &dims));
            }
            "accumulated" => {
                product(&mut b, ACCUMULATE);
                b.copy(whole(res, &dims), whole(acc, &dims));
                b.store(access2(out, z, z), whole(res, &dims));
            }
            "half, then whole" => {
                b.copy(whole(res, &[128, 256]), whole(acc, &[128, 256]));
                b.copy(whole(res, &dims), whole(acc, &dims));
                b.store(access2(out, z, z), whole(res, &dims));
            }
            _ => {
                b.copy(whole(res, &dims), whole(acc, &dims));
                b.store(access2(out, z, z), whole(res, &dims));
            }
        }
        b.finish()
    };
    let mut rng = Rng::new(21);
    let lhs = random_bf16(&mut rng, k, m);
    let rhs = random_bf16(&mut rng, k, n);
    let (want, abs) = reference_matmul(
        &to_f64(lhs.as_slice().unwrap()),
        &to_f64(rhs.as_slice().unwrap()),
        k,
        m,
        n,
    );
    let lhs_d = DeviceTensor::from_array(&lhs).unwrap();
    let rhs_d = DeviceTensor::from_array(&rhs).unwrap();
    let inputs = [lhs_d.arg(), rhs_d.arg()];
    for variant in [
        "bf16",
        "f32",
        "over the operand",
        "accumulated",
        "half, then whole",
    ] {
        let compiled = program(variant);
        let parts = compiled.parts();
        let kernel = Kernel::new(parts.program());
        let scale = if variant == "accumulated" { 2.0 } else { 1.0 };
        let want: Vec<f64> = want.iter().map(|w| w * scale).collect();
        let abs: Vec<f64> = abs.iter().map(|w| w * scale).collect();
        let run = |core: &mut NeuronCore| -> Vec<f64> {
            if variant == "f32" {
                let mut out = DeviceTensor::<f32>::zeros(&[m, n]).unwrap();
                core.launch(&kernel, &inputs, &mut [out.arg_mut()]).unwrap();
                out.as_slice().iter().map(|&x| f64::from(x)).collect()
            } else {
                let mut out = DeviceTensor::<bf16>::zeros(&[m, n]).unwrap();
                core.launch(&kernel, &inputs, &mut [out.arg_mut()]).unwrap();
                to_f64(out.as_slice())
            }
        };
        let strict = run(&mut NeuronCore::default().with_strict(true));
        let rel = if variant == "f32" { 0.0 } else { 2f64.powi(-8) };
        assert_close(&strict, &want, &abs, 2 * k, rel);
        for (label, mut core) in plain_cores() {
            let got = run(&mut core);
            let same = got
                .iter()
                .zip(&strict)
                .all(|(g, s)| g.to_bits() == s.to_bits());
            assert!(same, "{variant}: {label} differs from strict");
        }
    }
}

/// A plain run skips a load whose tile only the matmul right after it (or after one more load)
/// reads, and that matmul packs the operand from the input tensor; it also skips a load outside
/// every loop whose tile only matmuls read, which read the input where it lies
/// (`host::input_tiles`). Whether or not the loads are skipped, every variant gives the strict
/// core's bits on every host code path with one and two host threads, and the f64 reference's
/// values:
/// - the seed (both loads skipped), and the same with the moving operand loaded first;
/// - a `memset` between the stationary load and the matmul (skipped: only the matmul reads
///   the tile);
/// - the tiles read by a second, accumulating matmul (both skipped: only matmuls read them);
/// - the moving operand converted from an f32 tensor by its load (that load runs).
///
/// Where a load was skipped, a fresh plain core's SBUF still holds zeros in its tile, while
/// the strict core's holds the loaded values.
#[test]
fn loads_forwarded_into_a_matmul_give_the_same_bits() {
    let (k, m, n) = (128usize, 128usize, 512usize);
    let z = Affine::ZERO;
    let program = |variant: &str| {
        let mut b = Builder::new("forwarded_loads");
        let rhs_dt = if variant == "converted" {
            DType::F32
        } else {
            DType::Bf16
        };
        let lhs = b.input("lhsT", DType::Bf16, &[Dim::Fixed(128), Dim::Fixed(128)]);
        let rhs = b.input("rhs", rhs_dt, &[Dim::Fixed(128), Dim::Fixed(512)]);
        let out = b.output("out", DType::Bf16, &[Dim::Fixed(128), Dim::Fixed(512)]);
        let a = b.tile("lhsT_tile", Memory::Sbuf, DType::Bf16, &[128, 128]);
        let r = b.tile("rhs_tile", Memory::Sbuf, DType::Bf16, &[128, 512]);
        let other = b.tile("other", Memory::Sbuf, DType::F32, &[128, 4]);
        let acc = b.tile("acc", Memory::Psum, DType::F32, &[128, 512]);
        let res = b.tile("res", Memory::Sbuf, DType::Bf16, &[128, 512]);
        let load_a = |b: &mut Builder| b.load(whole(a, &[128, 128]), access2(lhs, z, z));
        let load_r = |b: &mut Builder| b.load(whole(r, &[128, 512]), access2(rhs, z, z));
        match variant {
            "moving first" => {
                load_r(&mut b);
                load_a(&mut b);
            }
            "memset between" => {
                load_a(&mut b);
                b.memset(whole(other, &[128, 4]), 1.0);
                load_r(&mut b);
            }
            _ => {
                load_a(&mut b);
                load_r(&mut b);
            }
        }
        let product = |b: &mut Builder, write| {
            b.matmul(
                whole(acc, &[128, 512]),
                whole(a, &[128, 128]),
                whole(r, &[128, 512]),
                write,
            )
        };
        product(&mut b, Write::Overwrite);
        if variant == "read twice" {
            product(&mut b, ACCUMULATE);
        }
        b.copy(whole(res, &[128, 512]), whole(acc, &[128, 512]));
        b.store(access2(out, z, z), whole(res, &[128, 512]));
        (b.finish(), a, r)
    };
    let mut rng = Rng::new(33);
    let lhs = random_bf16(&mut rng, k, m);
    let rhs = random_bf16(&mut rng, k, n);
    let rhs_f32 = rhs.mapv(|x| x.to_f32());
    let (want, abs) = reference_matmul(
        &to_f64(lhs.as_slice().unwrap()),
        &to_f64(rhs.as_slice().unwrap()),
        k,
        m,
        n,
    );
    let lhs_d = DeviceTensor::from_array(&lhs).unwrap();
    let rhs_d = DeviceTensor::from_array(&rhs).unwrap();
    let rhs_f32_d = DeviceTensor::from_array(&rhs_f32).unwrap();
    let variants = [
        ("seed", [true, true]),
        ("moving first", [true, true]),
        ("memset between", [true, true]),
        ("read twice", [true, true]),
        ("converted", [true, false]),
    ];
    for (variant, forwarded) in variants {
        let (compiled, a, r) = program(variant);
        let parts = compiled.parts();
        let program = parts.program();
        let kernel = Kernel::new(program);
        let rhs_arg = if variant == "converted" {
            rhs_f32_d.arg()
        } else {
            rhs_d.arg()
        };
        let inputs = [lhs_d.arg(), rhs_arg];
        let scale = if variant == "read twice" { 2.0 } else { 1.0 };
        let want: Vec<f64> = want.iter().map(|w| w * scale).collect();
        let abs: Vec<f64> = abs.iter().map(|w| w * scale).collect();
        let run = |core: &mut NeuronCore| -> Vec<bf16> {
            let mut out = DeviceTensor::<bf16>::zeros(&[m, n]).unwrap();
            core.launch(&kernel, &inputs, &mut [out.arg_mut()]).unwrap();
            out.as_slice().to_vec()
        };
        let mut strict_core = NeuronCore::default().with_strict(true);
        let strict = run(&mut strict_core);
        assert_close(&to_f64(&strict), &want, &abs, 2 * k, 2f64.powi(-8));
        for (label, mut core) in plain_cores() {
            let got = run(&mut core);
            assert!(got == strict, "{variant}: {label} differs from strict");
            // Partition 5 of each loaded tile, where no other tile takes its place: zeros
            // unless the load ran.
            for (tile, skipped) in [a, r].into_iter().zip(forwarded) {
                let decl = &program.tiles()[usize::from(tile)];
                let at = decl.addr as usize;
                let end = at + decl.bytes_per_partition() as usize;
                let alone: Vec<usize> = (at..end)
                    .filter(|&x| {
                        program.tiles().iter().all(|o| {
                            let (lo, hi) = (
                                o.addr as usize,
                                (o.addr as u64 + o.bytes_per_partition()) as usize,
                            );
                            o.name == decl.name || o.memory != Memory::Sbuf || x < lo || x >= hi
                        })
                    })
                    .collect();
                let plain = core.sbuf().partition(5).unwrap();
                let strict = strict_core.sbuf().partition(5).unwrap();
                let untouched = alone.iter().all(|&x| plain[x] == 0);
                let what = format!("{variant}: tile {}, {} bytes alone", decl.name, alone.len());
                if !alone.is_empty() {
                    assert_eq!(untouched, skipped, "{what}");
                }
                if !skipped {
                    assert!(alone.iter().all(|&x| plain[x] == strict[x]), "{what}");
                }
            }
        }
    }
}

/// When a store is the only reader of the tile a matmul's copy writes, a plain run converts the
/// results straight into the output tensor: from the matmul's blocks on the paths that fuse the
/// copy into it (the AVX-512 ones), from PSUM on the others. The output has the strict core's
/// bits on every path and thread count, and a fresh plain core's SBUF still holds zeros where
/// the copy's tile is (and no other tile), while the strict core's holds the copy.
#[test]
fn a_copy_stored_alone_goes_straight_to_the_output() {
    let z = Affine::ZERO;
    let mut b = Builder::new("copy_into_store");
    let lhs = b.input("lhsT", DType::Bf16, &[Dim::Fixed(128), Dim::Fixed(128)]);
    let rhs = b.input("rhs", DType::Bf16, &[Dim::Fixed(128), Dim::Fixed(512)]);
    let out = b.output("out", DType::Bf16, &[Dim::Fixed(128), Dim::Fixed(512)]);
    let out2 = b.output(
        "rhs_again",
        DType::Bf16,
        &[Dim::Fixed(128), Dim::Fixed(512)],
    );
    let a = b.tile("lhsT_tile", Memory::Sbuf, DType::Bf16, &[128, 128]);
    let r = b.tile("rhs_tile", Memory::Sbuf, DType::Bf16, &[128, 512]);
    let acc = b.tile("acc", Memory::Psum, DType::F32, &[128, 512]);
    let res = b.tile("res", Memory::Sbuf, DType::Bf16, &[128, 512]);
    let dims = [128, 512];
    b.load(whole(a, &[128, 128]), access2(lhs, z, z));
    b.load(whole(r, &dims), access2(rhs, z, z));
    b.matmul(
        whole(acc, &dims),
        whole(a, &[128, 128]),
        whole(r, &dims),
        Write::Overwrite,
    );
    b.copy(whole(res, &dims), whole(acc, &dims));
    b.store(access2(out, z, z), whole(res, &dims));
    // The moving tile stays live past the copy, so the copy's tile cannot take its place.
    b.store(access2(out2, z, z), whole(r, &dims));
    let compiled = b.finish();
    let parts = compiled.parts();
    let program = parts.program();
    let kernel = Kernel::new(program);
    let mut rng = Rng::new(45);
    let lhs_a = random_bf16(&mut rng, 128, 128);
    let rhs_a = random_bf16(&mut rng, 128, 512);
    let (want, abs) = reference_matmul(
        &to_f64(lhs_a.as_slice().unwrap()),
        &to_f64(rhs_a.as_slice().unwrap()),
        128,
        128,
        512,
    );
    let lhs_d = DeviceTensor::from_array(&lhs_a).unwrap();
    let rhs_d = DeviceTensor::from_array(&rhs_a).unwrap();
    let inputs = [lhs_d.arg(), rhs_d.arg()];
    let run = |core: &mut NeuronCore| -> (Vec<bf16>, Vec<bf16>) {
        let mut o = DeviceTensor::<bf16>::zeros(&[128, 512]).unwrap();
        let mut o2 = DeviceTensor::<bf16>::zeros(&[128, 512]).unwrap();
        core.launch(&kernel, &inputs, &mut [o.arg_mut(), o2.arg_mut()])
            .unwrap();
        (o.as_slice().to_vec(), o2.as_slice().to_vec())
    };
    let mut strict_core = NeuronCore::default().with_strict(true);
    let strict = run(&mut strict_core);
    assert_close(&to_f64(&strict.0), &want, &abs, 128, 2f64.powi(-8));
    assert_eq!(strict.1.as_slice(), rhs_a.as_slice().unwrap());
    let decl = &program.tiles()[usize::from(res)];
    let alone: Vec<usize> = (decl.addr as usize
        ..(decl.addr as u64 + decl.bytes_per_partition()) as usize)
        .filter(|&x| {
            program.tiles().iter().all(|o| {
                let (lo, hi) = (
                    o.addr as usize,
                    (o.addr as u64 + o.bytes_per_partition()) as usize,
                );
                o.name == decl.name || o.memory != Memory::Sbuf || x < lo || x >= hi
            })
        })
        .collect();
    assert!(
        !alone.is_empty(),
        "the copy's tile shares every byte with other tiles"
    );
    let strict_res = strict_core.sbuf().partition(7).unwrap();
    assert!(alone.iter().any(|&x| strict_res[x] != 0));
    for (label, mut core) in plain_cores() {
        assert!(run(&mut core) == strict, "{label}");
        // The paths that pack both operands before computing fuse the copy into the
        // matmul; the others run the copy, straight into the output.
        let plain_res = core.sbuf().partition(7).unwrap();
        let untouched = alone.iter().all(|&x| plain_res[x] == 0);
        assert!(untouched, "{label}");
    }
}

/// A plain core keeps the packings of operands it reads straight from input tensors for the
/// rest of a launch (the tiled matmul reads each one several times); a second launch with an
/// input changed in place must see the new values, on every path and thread count.
#[test]
fn packings_kept_within_a_launch_follow_inputs_changed_between_launches() {
    let compiled = tiled_program(accumulation_group(0));
    let parts = compiled.parts();
    let kernel = Kernel::new(parts.program());
    let (k, m, n) = (256usize, 256usize, 1024usize);
    let mut rng = Rng::new(61);
    let lhs = random_bf16(&mut rng, k, m);
    let rhs = random_bf16(&mut rng, k, n);
    let rhs2 = random_bf16(&mut rng, k, n);
    for (_, mut core) in plain_cores() {
        let lhs_d = DeviceTensor::from_array(&lhs).unwrap();
        let mut rhs_d = DeviceTensor::from_array(&rhs).unwrap();
        for values in [&rhs, &rhs2] {
            rhs_d
                .as_mut_slice()
                .copy_from_slice(values.as_slice().unwrap());
            let mut out = DeviceTensor::<f32>::zeros(&[m, n]).unwrap();
            core.launch(&kernel, &[lhs_d.arg(), rhs_d.arg()], &mut [out.arg_mut()])
                .unwrap();
            let (want, abs) = reference_matmul(
                &to_f64(lhs.as_slice().unwrap()),
                &to_f64(values.as_slice().unwrap()),
                k,
                m,
                n,
            );
            let got: Vec<f64> = out.as_slice().iter().map(|&x| f64::from(x)).collect();
            assert_close(&got, &want, &abs, k, 0.0);
        }
    }
}

/// A plain core keeps the packings of a device tensor's operands from one launch to the next
/// while the tensor keeps its version. Every way a launch's inputs can change gives the new
/// values, on every path and thread count: an input written in place, a tensor dropped and
/// another one created (perhaps at the same address), a clone, the output of a launch read
/// as the next one's input, and borrowed host memory (no version) rewritten between launches.
#[test]
fn packings_kept_across_launches_follow_every_change_of_an_input() {
    let seed = seed_program();
    let tiled = tiled_program(accumulation_group(0));
    let (seed_parts, tiled_parts) = (seed.parts(), tiled.parts());
    // Kernel, K, M, N, and whether its output is f32 (else bf16).
    let kernels = [
        (
            Kernel::new(seed_parts.program()),
            128usize,
            128usize,
            512usize,
            false,
        ),
        (Kernel::new(tiled_parts.program()), 256, 128, 1024, true),
    ];
    let mut rng = Rng::new(62);
    for (kernel, k, m, n, out_f32) in &kernels {
        let (k, m, n, out_f32) = (*k, *m, *n, *out_f32);
        // The result's values (exact in f64) of a launch with these inputs.
        let launch = |core: &mut NeuronCore, lhs: HbmIn<'_>, rhs: HbmIn<'_>| -> Vec<f64> {
            if out_f32 {
                let mut out = DeviceTensor::<f32>::zeros(&[m, n]).unwrap();
                core.launch(kernel, &[lhs, rhs], &mut [out.arg_mut()])
                    .unwrap();
                to_f64(out.as_slice())
            } else {
                let mut out = DeviceTensor::<bf16>::zeros(&[m, n]).unwrap();
                core.launch(kernel, &[lhs, rhs], &mut [out.arg_mut()])
                    .unwrap();
                to_f64(out.as_slice())
            }
        };
        let rel = if out_f32 { 0.0 } else { 2f64.powi(-8) };
        let check = |lhs: &[bf16], rhs: &[bf16], got: &[f64]| {
            let (want, abs) = reference_matmul(&to_f64(lhs), &to_f64(rhs), k, m, n);
            assert_close(got, &want, &abs, k, rel);
        };
        let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        for (label, mut core) in plain_cores() {
            let core = &mut core;
            println!("{label}, K={k} M={m} N={n}");
            let mut lhs_d = DeviceTensor::from_array(&random_bf16(&mut rng, k, m)).unwrap();
            let mut rhs_d = DeviceTensor::from_array(&random_bf16(&mut rng, k, n)).unwrap();
            // Unchanged inputs: the kept packings give the bits of the first launch.
            let first = launch(core, lhs_d.arg(), rhs_d.arg());
            check(lhs_d.as_slice(), rhs_d.as_slice(), &first);
            for _ in 0..2 {
                let again = launch(core, lhs_d.arg(), rhs_d.arg());
                assert_eq!(bits(&again), bits(&first), "{label}: unchanged inputs");
            }
            // Written in place: each operand alone, then both.
            for (s, r) in [(true, false), (false, true), (true, true)] {
                if s {
                    rewrite(lhs_d.as_mut_slice(), &mut rng, k, m);
                }
                if r {
                    rewrite(rhs_d.as_mut_slice(), &mut rng, k, n);
                }
                let got = launch(core, lhs_d.arg(), rhs_d.arg());
                check(lhs_d.as_slice(), rhs_d.as_slice(), &got);
            }
            // Dropped, and new tensors of other values created (the allocator may well give
            // them the same addresses).
            drop((lhs_d, rhs_d));
            let lhs_d = DeviceTensor::from_array(&random_bf16(&mut rng, k, m)).unwrap();
            let rhs_d = DeviceTensor::from_array(&random_bf16(&mut rng, k, n)).unwrap();
            let got = launch(core, lhs_d.arg(), rhs_d.arg());
            check(lhs_d.as_slice(), rhs_d.as_slice(), &got);
            // A clone written in place: its own values, and the original's still.
            let mut rhs_c = rhs_d.clone();
            rewrite(rhs_c.as_mut_slice(), &mut rng, k, n);
            let got = launch(core, lhs_d.arg(), rhs_c.arg());
            check(lhs_d.as_slice(), rhs_c.as_slice(), &got);
            let got = launch(core, lhs_d.arg(), rhs_d.arg());
            check(lhs_d.as_slice(), rhs_d.as_slice(), &got);
            // A launch's output read as the next launch's moving operand (the seed's output
            // has the moving operand's shape and dtype).
            if !out_f32 && k == m {
                let mut product = DeviceTensor::<bf16>::zeros(&[k, n]).unwrap();
                for _ in 0..2 {
                    let rhs_next = DeviceTensor::from_array(&random_bf16(&mut rng, k, n)).unwrap();
                    core.launch(
                        kernel,
                        &[lhs_d.arg(), rhs_next.arg()],
                        &mut [product.arg_mut()],
                    )
                    .unwrap();
                    let got = launch(core, lhs_d.arg(), product.arg());
                    check(lhs_d.as_slice(), product.as_slice(), &got);
                }
            }
            // Borrowed host memory has no version: rewritten between launches, it is packed
            // anew.
            let mut host = random_bf16(&mut rng, k, n);
            for _ in 0..2 {
                let rhs_in = HbmIn::new(host.as_slice().unwrap(), &[k, n]).unwrap();
                let got = launch(core, lhs_d.arg(), rhs_in);
                check(lhs_d.as_slice(), host.as_slice().unwrap(), &got);
                rewrite(host.as_slice_mut().unwrap(), &mut rng, k, n);
            }
        }
    }
}

/// The same matmul twice, then again after writes to its operands' tiles (a load over the
/// moving tile, a `memset` of a few columns of the stationary one): whatever a plain core keeps
/// of the operands between matmuls (packings), the products have the strict core's bits on
/// every path and thread count, and the f64 reference's values.
#[test]
fn matmuls_of_rewritten_operands_see_the_new_values() {
    let z = Affine::ZERO;
    let mut b = Builder::new("rewritten_operands");
    let lhs = b.input("lhsT", DType::Bf16, &[Dim::Fixed(128), Dim::Fixed(128)]);
    let rhs = b.input("rhs", DType::Bf16, &[Dim::Fixed(128), Dim::Fixed(512)]);
    let rhs2 = b.input("rhs2", DType::Bf16, &[Dim::Fixed(128), Dim::Fixed(512)]);
    let out = b.output("out", DType::F32, &[Dim::Fixed(128), Dim::Fixed(1024)]);
    let a = b.tile("lhsT_tile", Memory::Sbuf, DType::Bf16, &[128, 128]);
    let r = b.tile("rhs_tile", Memory::Sbuf, DType::Bf16, &[128, 512]);
    let acc = b.tile("acc", Memory::Psum, DType::F32, &[128, 512]);
    let res = b.tile("res", Memory::Sbuf, DType::F32, &[128, 1024]);
    let dims = [128, 512];
    b.load(whole(a, &[128, 128]), access2(lhs, z, z));
    b.load(whole(r, &dims), access2(rhs, z, z));
    b.matmul(
        whole(acc, &dims),
        whole(a, &[128, 128]),
        whole(r, &dims),
        Write::Overwrite,
    );
    b.copy(view(res, 0, &dims, z, &[1]), whole(acc, &dims));
    // The same matmul again, accumulating.
    b.matmul(
        whole(acc, &dims),
        whole(a, &[128, 128]),
        whole(r, &dims),
        ACCUMULATE,
    );
    b.copy(view(res, 0, &dims, z, &[1]), whole(acc, &dims));
    // New moving values, and stationary columns 40..48 zeroed.
    b.load(whole(r, &dims), access2(rhs2, z, z));
    b.memset(view(a, 0, &[128, 8], Affine::constant(40), &[1]), 0.0);
    b.matmul(
        whole(acc, &dims),
        whole(a, &[128, 128]),
        whole(r, &dims),
        Write::Overwrite,
    );
    b.copy(
        view(res, 0, &dims, Affine::constant(512), &[1]),
        whole(acc, &dims),
    );
    b.store(access2(out, z, z), whole(res, &[128, 1024]));
    let compiled = b.finish();
    let parts = compiled.parts();
    let kernel = Kernel::new(parts.program());
    let mut rng = Rng::new(71);
    let lhs_a = random_bf16(&mut rng, 128, 128);
    let rhs_a = random_bf16(&mut rng, 128, 512);
    let rhs2_a = random_bf16(&mut rng, 128, 512);
    let lhs_z = Array2::from_shape_fn((128, 128), |(k, m)| {
        if (40..48).contains(&m) {
            bf16::ZERO
        } else {
            lhs_a[[k, m]]
        }
    });
    let (first, abs1) = reference_matmul(
        &to_f64(lhs_a.as_slice().unwrap()),
        &to_f64(rhs_a.as_slice().unwrap()),
        128,
        128,
        512,
    );
    let (second, abs2) = reference_matmul(
        &to_f64(lhs_z.as_slice().unwrap()),
        &to_f64(rhs2_a.as_slice().unwrap()),
        128,
        128,
        512,
    );
    let mut want = vec![0.0; 128 * 1024];
    let mut abs = vec![0.0; 128 * 1024];
    for row in 0..128 {
        for col in 0..512 {
            want[row * 1024 + col] = 2.0 * first[row * 512 + col];
            abs[row * 1024 + col] = 2.0 * abs1[row * 512 + col];
            want[row * 1024 + 512 + col] = second[row * 512 + col];
            abs[row * 1024 + 512 + col] = abs2[row * 512 + col];
        }
    }
    let inputs_d = [
        DeviceTensor::from_array(&lhs_a).unwrap(),
        DeviceTensor::from_array(&rhs_a).unwrap(),
        DeviceTensor::from_array(&rhs2_a).unwrap(),
    ];
    let inputs = [inputs_d[0].arg(), inputs_d[1].arg(), inputs_d[2].arg()];
    let run = |core: &mut NeuronCore| -> Vec<f32> {
        let mut o = DeviceTensor::<f32>::zeros(&[128, 1024]).unwrap();
        core.launch(&kernel, &inputs, &mut [o.arg_mut()]).unwrap();
        o.as_slice().to_vec()
    };
    let strict = run(&mut NeuronCore::default().with_strict(true));
    let got: Vec<f64> = strict.iter().map(|&x| f64::from(x)).collect();
    assert_close(&got, &want, &abs, 256, 0.0);
    for (label, mut core) in plain_cores() {
        let got = run(&mut core);
        let same = got
            .iter()
            .zip(&strict)
            .all(|(g, s)| g.to_bits() == s.to_bits());
        assert!(same, "{label} differs from strict");
    }
}

/// `cpu::matmul::matmul` refuses, with its documented panic, an operand of any dtype but f32,
/// bf16 and f16 on every path this CPU runs, before any path reads it: its slices are sized
/// for the dtype, which the paths' f32 reads would overrun.
#[test]
fn matmul_refuses_operands_of_other_dtypes_on_every_path() {
    use nki_runtime::cpu::matmul::{MatmulScratch, Operand, Output, matmul};
    let (k, m, n) = (4usize, 2usize, 16usize);
    let refused: Vec<DType> = DType::ALL
        .iter()
        .copied()
        .filter(|d| !matches!(d, DType::F32 | DType::Bf16 | DType::F16))
        .collect();
    assert!(refused.len() >= 8, "{refused:?}");
    for isa in [Isa::Portable, Isa::Avx2Fma, Isa::Avx512, Isa::Avx512Bf16] {
        if !isa.is_supported() {
            continue;
        }
        for &dtype in &refused {
            let size = dtype.size() as usize;
            let (st, mv) = (vec![0u8; k * m * size], vec![0u8; k * n * size]);
            let operand = |data, cols| Operand {
                data,
                dtype,
                offset: 0,
                row_stride: cols * size,
                rows: k,
                cols,
            };
            let (st, mv) = (operand(st.as_slice(), m), operand(mv.as_slice(), n));
            let r = std::panic::catch_unwind(|| {
                let mut out = vec![0f32; m * n];
                let mut output = Output {
                    data: &mut out,
                    offset: 0,
                    row_stride: n,
                };
                matmul(
                    isa,
                    &mut MatmulScratch::new(),
                    &st,
                    &mv,
                    &mut output,
                    false,
                    0..n,
                );
            });
            let message = r
                .expect_err(&format!("{isa:?} took a {dtype:?} operand"))
                .downcast::<String>()
                .map(|s| *s)
                .unwrap_or_default();
            assert!(
                message.contains("f32, bf16 or f16"),
                "{isa:?} {dtype:?}: {message}"
            );
        }
    }
}
