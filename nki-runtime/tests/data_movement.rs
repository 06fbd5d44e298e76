//! DMA loads and stores (casts, strided and non-contiguous tensors, loops), VectorE copies and
//! memsets, against references computed with `half` and ndarray.

mod common;

use common::{Builder, Rng, access, access2, plain_cores, view, whole};
use half::{bf16, f16};
use ndarray::{Array2, Array3, Ix2, s};
use nki_lang::{Affine, CompiledProgram, DType, Dim, Extent, Memory};
use nki_runtime::{DeviceTensor, Isa, Kernel, NeuronCore};

fn fixed(dims: &[u64]) -> Vec<Dim> {
    dims.iter().map(|&d| Dim::Fixed(d)).collect()
}

/// `out = x` through a tile of `tile_dtype`: f32 → tile → f32.
fn roundtrip_program(tile_dtype: DType, rows: u32, cols: u32) -> CompiledProgram {
    let mut b = Builder::new("roundtrip");
    let shape = fixed(&[rows as u64, cols as u64]);
    let x = b.input("x", DType::F32, &shape);
    let out = b.output("out", DType::F32, &shape);
    let t = b.tile("t", Memory::Sbuf, tile_dtype, &[rows, cols]);
    let z = Affine::ZERO;
    b.load(whole(t, &[rows, cols]), access2(x, z, z));
    b.store(access2(out, z, z), whole(t, &[rows, cols]));
    b.finish()
}

/// Random normal f32s of every magnitude, exact rounding ties, and special values.
fn cast_inputs(n: usize) -> Vec<f32> {
    let mut rng = Rng::new(42);
    let mut v: Vec<f32> = Vec::with_capacity(n);
    let specials = [
        0.0,
        -0.0,
        1.0,
        -1.0,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::MAX,
        f32::MIN_POSITIVE,
        65504.0,
        65520.0,
        1.0 / 3.0,
        6.0e-8,
    ];
    v.extend_from_slice(&specials);
    while v.len() < n {
        let r = rng.next_u64();
        let x = match r % 4 {
            // Exact ties at bf16 precision, with even and odd kept bits.
            0 => f32::from_bits(((r >> 8) as u32 & 0xffff_0000) | 0x8000),
            // Exact ties at f16 precision in f16's normal range.
            1 => {
                let bits = 0x3880_0000 + ((r >> 8) as u32 % (0x4700_0000 - 0x3880_0000));
                f32::from_bits((bits & !0x1fff) | 0x1000)
            }
            _ => f32::from_bits((r >> 16) as u32),
        };
        // Subnormal f32 inputs are tested separately (bf16 flushes them).
        if x.is_nan() || x.is_subnormal() {
            continue;
        }
        v.push(x);
    }
    v
}

fn run_roundtrip(kernel: &Kernel<'_>, x: &[f32], isa: Isa) -> Vec<f32> {
    let xd = DeviceTensor::from_vec(&[128, x.len() / 128], x.to_vec()).unwrap();
    let mut o = DeviceTensor::<f32>::zeros(xd.shape()).unwrap();
    NeuronCore::default()
        .with_isa(isa)
        .unwrap()
        .launch(kernel, &[xd.arg()], &mut [o.arg_mut()])
        .unwrap();
    o.as_slice().to_vec()
}

#[test]
fn load_store_casts_round_to_nearest_even() {
    let x = cast_inputs(128 * 512);
    for (dtype, reference) in [
        (
            DType::Bf16,
            (|v| bf16::from_f32(v).to_f32()) as fn(f32) -> f32,
        ),
        (DType::F16, |v| f16::from_f32(v).to_f32()),
        (DType::F32, |v| v),
    ] {
        let compiled = roundtrip_program(dtype, 128, 512);
        let parts = compiled.parts();
        let kernel = Kernel::new(parts.program());
        for isa in Isa::supported() {
            let got = run_roundtrip(&kernel, &x, isa);
            for (i, (&g, &v)) in got.iter().zip(&x).enumerate() {
                let want = reference(v);
                assert_eq!(
                    g.to_bits(),
                    want.to_bits(),
                    "{dtype} {isa:?} element {i}: {v:e} gave {g:e}, want {want:e}"
                );
            }
        }
    }
}

#[test]
fn nan_and_subnormal_casts() {
    let mut x = vec![0.0f32; 128];
    x[0] = f32::NAN;
    x[1] = -f32::NAN;
    x[2] = f32::from_bits(1); // smallest subnormal
    x[3] = -f32::from_bits(0x007f_ffff); // largest subnormal, negative
    x[4] = 1.0e-40;
    for dtype in [DType::Bf16, DType::F16] {
        let compiled = roundtrip_program(dtype, 128, 1);
        let parts = compiled.parts();
        let kernel = Kernel::new(parts.program());
        let got = run_roundtrip(&kernel, &x, Isa::detect());
        assert!(got[0].is_nan() && got[1].is_nan());
        // f32 subnormals are below both formats' range (f16 subnormals start at 2⁻²⁴) or
        // flushed (bf16): signed zeros.
        assert_eq!(got[2].to_bits(), 0);
        assert_eq!(got[3].to_bits(), 0x8000_0000);
        assert_eq!(got[4].to_bits(), 0);
    }
}

/// `out[128, 64] = x[128, 64]` in f32.
fn copy_kernel_program() -> CompiledProgram {
    roundtrip_program(DType::F32, 128, 64)
}

#[test]
fn non_contiguous_uploads() {
    let compiled = copy_kernel_program();
    let parts = compiled.parts();
    let kernel = Kernel::new(parts.program());
    let mut rng = Rng::new(5);
    let wide = Array2::from_shape_fn((64, 128), |_| rng.unit() as f32);
    let tall = Array2::from_shape_fn((128, 64), |_| rng.unit() as f32);
    let big = Array2::from_shape_fn((257, 100), |_| rng.unit() as f32);
    let views = [
        wide.t(),
        tall.slice(s![..;-1, ..]),
        big.slice(s![1..;2, 3..67]),
        big.slice(s![1..;2, 35..99;-1]),
    ];
    for v in views {
        let xd = DeviceTensor::from_array(&v).unwrap();
        let mut o = DeviceTensor::<f32>::zeros(&[128, 64]).unwrap();
        NeuronCore::default()
            .launch(&kernel, &[xd.arg()], &mut [o.arg_mut()])
            .unwrap();
        assert_eq!(o.into_array::<Ix2>().unwrap(), v);
    }
}

#[test]
fn strided_hbm_access() {
    // Odd columns of x go to the even columns of out; out's odd columns stay untouched.
    let mut b = Builder::new("every_other");
    let x = b.input("x", DType::F32, &fixed(&[128, 512]));
    let out = b.output("out", DType::F32, &fixed(&[128, 512]));
    let t = b.tile("t", Memory::Sbuf, DType::F32, &[128, 256]);
    let z = Affine::ZERO;
    b.load(
        whole(t, &[128, 256]),
        access(
            x,
            &[(z, [1, 0, 0, 0, 0]), (Affine::constant(1), [0, 2, 0, 0, 0])],
        ),
    );
    b.store(
        access(out, &[(z, [1, 0, 0, 0, 0]), (z, [0, 2, 0, 0, 0])]),
        whole(t, &[128, 256]),
    );
    let compiled = b.finish();
    let parts = compiled.parts();
    let kernel = Kernel::new(parts.program());
    let xa = Array2::from_shape_fn((128, 512), |(i, j)| (i * 1000 + j) as f32);
    let xd = DeviceTensor::from_array(&xa).unwrap();
    let mut o = DeviceTensor::from_vec(&[128, 512], vec![-1.0f32; 128 * 512]).unwrap();
    // Half the output stays unwritten on purpose, which a strict launch refuses.
    NeuronCore::default()
        .with_strict(false)
        .launch(&kernel, &[xd.arg()], &mut [o.arg_mut()])
        .unwrap();
    let o = o.into_array::<Ix2>().unwrap();
    for i in 0..128 {
        for j in 0..256 {
            assert_eq!(o[[i, 2 * j]], xa[[i, 2 * j + 1]]);
            assert_eq!(o[[i, 2 * j + 1]], -1.0);
        }
    }
}

#[test]
fn rank3_tensors_loops_and_reversed_views() {
    let mut b = Builder::new("gather3");
    let x = b.input("x", DType::Bf16, &fixed(&[4, 128, 64]));
    let out = b.output("out", DType::F32, &fixed(&[128, 256]));
    let out2 = b.output("out2", DType::F32, &fixed(&[128, 256]));
    let t3 = b.tile("t3", Memory::Sbuf, DType::Bf16, &[128, 4, 64]);
    let z = Affine::ZERO;
    // out[p, 64 i + f] = x[i, p, 63 - f], one tile per loop iteration.
    let i = b.begin("i", Extent::Fixed(4));
    let t = b.tile("t", Memory::Sbuf, DType::Bf16, &[128, 64]);
    b.load(
        whole(t, &[128, 64]),
        access(
            x,
            &[
                (Affine::loop_var(i, 1), [0, 0, 0, 0, 0]),
                (z, [1, 0, 0, 0, 0]),
                (z, [0, 1, 0, 0, 0]),
            ],
        ),
    );
    b.store(
        access2(out, z, Affine::loop_var(i, 64)),
        view(t, 0, &[128, 64], Affine::constant(63), &[-1]),
    );
    b.end();
    // out2[p, 64 a + f] = x[a, p, f] with one 3-D tile.
    b.load(
        whole(t3, &[128, 4, 64]),
        access(
            x,
            &[
                (z, [0, 1, 0, 0, 0]),
                (z, [1, 0, 0, 0, 0]),
                (z, [0, 0, 1, 0, 0]),
            ],
        ),
    );
    b.store(
        access(out2, &[(z, [1, 0, 0, 0, 0]), (z, [0, 64, 1, 0, 0])]),
        whole(t3, &[128, 4, 64]),
    );
    let compiled = b.finish();
    let parts = compiled.parts();
    let kernel = Kernel::new(parts.program());
    let mut rng = Rng::new(9);
    let xa = Array3::from_shape_fn((4, 128, 64), |_| bf16::from_f64(rng.unit()));
    let xd = DeviceTensor::from_array(&xa).unwrap();
    let mut o = DeviceTensor::<f32>::zeros(&[128, 256]).unwrap();
    let mut o2 = DeviceTensor::<f32>::zeros(&[128, 256]).unwrap();
    NeuronCore::default()
        .launch(&kernel, &[xd.arg()], &mut [o.arg_mut(), o2.arg_mut()])
        .unwrap();
    let (o, o2) = (
        o.into_array::<Ix2>().unwrap(),
        o2.into_array::<Ix2>().unwrap(),
    );
    for a in 0..4 {
        for p in 0..128 {
            for f in 0..64 {
                assert_eq!(o[[p, 64 * a + f]], xa[[a, p, 63 - f]].to_f32());
                assert_eq!(o2[[p, 64 * a + f]], xa[[a, p, f]].to_f32());
            }
        }
    }
}

#[test]
fn vector_copies_and_memsets() {
    let mut b = Builder::new("vector");
    let x = b.input("x", DType::F32, &fixed(&[128, 64]));
    let out = b.output("out", DType::Bf16, &fixed(&[128, 32]));
    let consts = b.output("consts", DType::F32, &fixed(&[128, 4]));
    let a = b.tile("a", Memory::Sbuf, DType::F32, &[128, 64]);
    let h = b.tile("h", Memory::Sbuf, DType::F16, &[128, 32]);
    let ps = b.tile("ps", Memory::Psum, DType::F32, &[128, 32]);
    let c = b.tile("c", Memory::Sbuf, DType::Bf16, &[128, 32]);
    let k = b.tile("k", Memory::Sbuf, DType::F32, &[128, 4]);
    let kb = b.tile("kb", Memory::Sbuf, DType::Bf16, &[128, 1]);
    let kh = b.tile("kh", Memory::Sbuf, DType::F16, &[128, 1]);
    let z = Affine::ZERO;
    b.load(whole(a, &[128, 64]), access2(x, z, z));
    // h = f16(a[:, 1::2]): strided SBUF source, different dtype in the same memory.
    b.copy(
        whole(h, &[128, 32]),
        view(a, 0, &[128, 32], Affine::constant(1), &[2]),
    );
    // SBUF → PSUM, then a memset of partitions 32..64, columns 0, 2, 4, ... of PSUM.
    b.copy(whole(ps, &[128, 32]), whole(h, &[128, 32]));
    b.memset(view(ps, 32, &[32, 16], z, &[2]), 1.0 / 3.0);
    // PSUM → SBUF bf16, through views that differ in size-1 dimensions.
    b.copy(whole(c, &[128, 1, 32]), whole(ps, &[128, 32, 1]));
    b.store(access2(out, z, z), whole(c, &[128, 32]));
    // Memset values rounded to bf16 and f16 (70000 overflows f16), widened back to f32.
    b.memset(whole(kb, &[128, 1]), 1.0 / 3.0);
    b.memset(whole(kh, &[128, 1]), 70000.0);
    b.copy(view(k, 0, &[128, 1], z, &[1]), whole(kb, &[128, 1]));
    b.copy(
        view(k, 0, &[128, 1], Affine::constant(1), &[1]),
        whole(kh, &[128, 1]),
    );
    // Copies within one tile: columns 0..2 → 2..4 (same dtype, same buffer).
    b.copy(
        view(k, 0, &[128, 2], Affine::constant(2), &[1]),
        view(k, 0, &[128, 2], z, &[1]),
    );
    b.store(access2(consts, z, z), whole(k, &[128, 4]));
    let compiled = b.finish();
    let parts = compiled.parts();
    let kernel = Kernel::new(parts.program());
    let mut rng = Rng::new(11);
    let xa = Array2::from_shape_fn((128, 64), |_| (rng.unit() * 100.0) as f32);
    let xd = DeviceTensor::from_array(&xa).unwrap();
    let mut o = DeviceTensor::<bf16>::zeros(&[128, 32]).unwrap();
    let mut k = DeviceTensor::<f32>::zeros(&[128, 4]).unwrap();
    NeuronCore::default()
        .launch(&kernel, &[xd.arg()], &mut [o.arg_mut(), k.arg_mut()])
        .unwrap();
    let o = o.into_array::<Ix2>().unwrap();
    for p in 0..128 {
        for f in 0..32 {
            let v = xa[[p, 2 * f + 1]];
            let want = if (32..64).contains(&p) && f % 2 == 0 {
                bf16::from_f32(1.0 / 3.0)
            } else {
                bf16::from_f32(f16::from_f32(v).to_f32())
            };
            assert_eq!(o[[p, f]], want, "p {p} f {f}");
        }
    }
    let third = bf16::from_f32(1.0 / 3.0).to_f32();
    for row in k.as_slice().chunks(4) {
        assert_eq!(row, &[third, f32::INFINITY, third, f32::INFINITY]);
    }
}

/// A tile loaded only to be stored, the store keeping its bits, moves straight from the input
/// to the output on a plain core, converted once as the load converts: f32 → bf16 (rounded,
/// with NaNs and infinities) and bf16 → f32. Where the store converts again (f32 → bf16 → f32)
/// or a second store reads the tile, both instructions run. Every case gives the `half`
/// reference's bits on the strict core and on plain cores of every path with one and two host
/// threads; on a fresh plain core, SBUF keeps zeros in a forwarded tile.
#[test]
fn a_tile_loaded_only_to_be_stored_goes_straight_to_the_output() {
    let (rows, cols) = (128u32, 1024u32);
    let n = (rows * cols) as usize;
    let mut xs = cast_inputs(n);
    xs[7] = f32::NAN;
    let bf: Vec<bf16> = xs.iter().map(|&x| bf16::from_f32(x)).collect();
    let cases: [(&str, DType, DType, DType, bool, bool); 4] = [
        (
            "f32 → bf16 → bf16",
            DType::F32,
            DType::Bf16,
            DType::Bf16,
            false,
            true,
        ),
        (
            "bf16 → f32 → f32",
            DType::Bf16,
            DType::F32,
            DType::F32,
            false,
            true,
        ),
        (
            "f32 → bf16 → f32",
            DType::F32,
            DType::Bf16,
            DType::F32,
            false,
            false,
        ),
        (
            "stored twice",
            DType::F32,
            DType::Bf16,
            DType::Bf16,
            true,
            false,
        ),
    ];
    for (what, input, tile_dt, output, twice, forwarded) in cases {
        let mut b = Builder::new("load_store");
        let shape = fixed(&[rows as u64, cols as u64]);
        let x = b.input("x", input, &shape);
        let out = b.output("out", output, &shape);
        let out2 = twice.then(|| b.output("again", output, &shape));
        let t = b.tile("t", Memory::Sbuf, tile_dt, &[rows, cols]);
        let z = Affine::ZERO;
        b.load(whole(t, &[rows, cols]), access2(x, z, z));
        b.store(access2(out, z, z), whole(t, &[rows, cols]));
        if let Some(o2) = out2 {
            b.store(access2(o2, z, z), whole(t, &[rows, cols]));
        }
        let compiled = b.finish();
        let parts = compiled.parts();
        let kernel = Kernel::new(parts.program());
        let x_f32 = DeviceTensor::from_vec(&[128, 1024], xs.clone()).unwrap();
        let x_bf16 = DeviceTensor::from_vec(&[128, 1024], bf.clone()).unwrap();
        let xd = if input == DType::F32 {
            x_f32.arg()
        } else {
            x_bf16.arg()
        };
        // Output bits as u32s, f32 or bf16 widened.
        let want: Vec<u32> = (0..n)
            .map(|i| match (input, tile_dt, output) {
                (DType::F32, DType::Bf16, DType::Bf16) => u32::from(bf[i].to_bits()),
                (DType::Bf16, _, _) => bf[i].to_f32().to_bits(),
                _ => bf[i].to_f32().to_bits(),
            })
            .collect();
        let run = |core: &mut NeuronCore| -> Vec<u32> {
            if output == DType::Bf16 {
                let mut o = DeviceTensor::<bf16>::zeros(&[128, 1024]).unwrap();
                let mut o2 = DeviceTensor::<bf16>::zeros(&[128, 1024]).unwrap();
                let mut outs = vec![o.arg_mut()];
                if twice {
                    outs.push(o2.arg_mut());
                }
                core.launch(&kernel, &[xd], &mut outs).unwrap();
                if twice {
                    // Bits, not values: NaN is in the data.
                    let bits = |t: &DeviceTensor<bf16>| -> Vec<u16> {
                        t.as_slice().iter().map(|h| h.to_bits()).collect()
                    };
                    assert!(bits(&o) == bits(&o2), "{what}: the two stores differ");
                }
                o.as_slice()
                    .iter()
                    .map(|h| u32::from(h.to_bits()))
                    .collect()
            } else {
                let mut o = DeviceTensor::<f32>::zeros(&[128, 1024]).unwrap();
                core.launch(&kernel, &[xd], &mut [o.arg_mut()]).unwrap();
                o.as_slice().iter().map(|f| f.to_bits()).collect()
            }
        };
        let canonical = |v: Vec<u32>| -> Vec<u32> {
            // NaN payloads aside, which the reference's `half` keeps and the model quiets.
            v.into_iter()
                .map(|w| match output {
                    DType::Bf16 if (w & 0x7fff) > 0x7f80 => 0x7fc0,
                    DType::F32 if (w & 0x7fff_ffff) > 0x7f80_0000 => 0x7fc0_0000,
                    _ => w,
                })
                .collect()
        };
        let strict = run(&mut NeuronCore::default().with_strict(true));
        assert!(
            canonical(strict.clone()) == canonical(want.clone()),
            "{what}: strict"
        );
        for (label, mut core) in plain_cores() {
            assert!(run(&mut core) == strict, "{what}: {label}");
            let tile = core.sbuf().partition(3).unwrap();
            let untouched = tile[..(cols * tile_dt.size()) as usize]
                .iter()
                .all(|&x| x == 0);
            assert_eq!(untouched, forwarded, "{what}: {label}");
        }
    }
}

/// A `tensor_copy` whose tile only the next store reads (the store keeping its bits) goes
/// straight from the copy's source to the output on a plain core: f32 → bf16 rounding (NaNs and
/// infinities in the data) from an SBUF tile. Where the store converts again, both run. Every
/// case gives the strict core's bits on plain cores of every path with one and two host
/// threads, and the `half` reference's; on a fresh plain core, SBUF keeps zeros in a forwarded
/// copy's tile.
#[test]
fn a_copy_only_to_be_stored_goes_straight_to_the_output() {
    let (rows, cols) = (128u32, 512u32);
    let n = (rows * cols) as usize;
    let mut xs = cast_inputs(n);
    xs[9] = f32::NAN;
    for (output, forwarded) in [(DType::Bf16, true), (DType::F32, false)] {
        let mut b = Builder::new("copy_store");
        let shape = fixed(&[rows as u64, cols as u64]);
        let x = b.input("x", DType::F32, &shape);
        let out = b.output("out", output, &shape);
        let a = b.tile("a", Memory::Sbuf, DType::F32, &[rows, cols]);
        let c = b.tile("c", Memory::Sbuf, DType::Bf16, &[rows, cols]);
        let z = Affine::ZERO;
        b.load(whole(a, &[rows, cols]), access2(x, z, z));
        b.copy(whole(c, &[rows, cols]), whole(a, &[rows, cols]));
        b.store(access2(out, z, z), whole(c, &[rows, cols]));
        let compiled = b.finish();
        let parts = compiled.parts();
        let program = parts.program();
        let kernel = Kernel::new(program);
        let xd = DeviceTensor::from_vec(&[128, 512], xs.clone()).unwrap();
        let run = |core: &mut NeuronCore| -> Vec<u32> {
            if output == DType::Bf16 {
                let mut o = DeviceTensor::<bf16>::zeros(&[128, 512]).unwrap();
                core.launch(&kernel, &[xd.arg()], &mut [o.arg_mut()])
                    .unwrap();
                o.as_slice()
                    .iter()
                    .map(|h| u32::from(h.to_bits()))
                    .collect()
            } else {
                let mut o = DeviceTensor::<f32>::zeros(&[128, 512]).unwrap();
                core.launch(&kernel, &[xd.arg()], &mut [o.arg_mut()])
                    .unwrap();
                o.as_slice().iter().map(|f| f.to_bits()).collect()
            }
        };
        let strict = run(&mut NeuronCore::default().with_strict(true));
        for (i, (&got, &x)) in strict.iter().zip(&xs).enumerate() {
            let h = bf16::from_f32(x);
            let want = match output {
                DType::Bf16 => u32::from(h.to_bits()),
                _ => h.to_f32().to_bits(),
            };
            assert!(got == want || x.is_nan(), "{output:?}: element {i}");
        }
        let decl = &program.tiles()[usize::from(c)];
        let (at, len) = (decl.addr as usize, decl.bytes_per_partition() as usize);
        let alone = program.tiles().iter().all(|o| {
            o.name == decl.name || o.addr as usize + o.bytes_per_partition() as usize <= at
        });
        for (label, core) in plain_cores() {
            // A budget the run's tiles fit, whatever the host's L2: where they do not, the
            // run goes block by block instead (`host::rows`), which keeps the copy.
            let mut core = core.with_host_cache_bytes(1 << 30);
            assert!(run(&mut core) == strict, "{output:?}: {label}");
            if alone {
                let tile = &core.sbuf().partition(3).unwrap()[at..at + len];
                let untouched = tile.iter().all(|&x| x == 0);
                assert_eq!(untouched, forwarded, "{output:?}: {label}");
            }
        }
        assert!(alone, "the copy's tile shares bytes with another tile");
    }
}
