//! Programs built at run time with HBM scratch and constants (`ProgramBuilder::scratch`,
//! `private_scratch`, `constant`): the same results on the core, strictly, and on the reference
//! interpreter, against plain loops; malformed declarations refused.

use nki_lang::builder::{BuildError, Grid, ProgramBuilder};
use nki_lang::{DType, Dim, Extent, LoopKind, Memory, Target, TensorRole};
use nki_runtime::{DeviceTensor, Kernel, NeuronCore};

/// `out = x + x + c`: `x` stored to `shared_hbm` scratch and loaded back, plus `x` again, plus
/// the constant `c` (given as f32 values, held as bf16, all exact); each of 4 `affine_range`
/// iterations also round-trips `x` through its own `private_hbm` tensor.
fn program() -> Result<nki_lang::CompiledProgram, BuildError> {
    let fixed = |d: &[u64]| d.iter().map(|&n| Dim::Fixed(n)).collect::<Vec<_>>();
    let mut b = ProgramBuilder::new("scratch_round_trip", Target::Trn1);
    let x = b.input("x", DType::F32, &fixed(&[128, 64]))?;
    let out = b.output("out", DType::F32, &fixed(&[128, 64]))?;
    let spill = b.scratch("spill", DType::F32, &fixed(&[128, 64]))?;
    let values: Vec<f32> = (0..128 * 64).map(|k| (k % 7) as f32 - 3.0).collect();
    let c = b.constant("c", DType::Bf16, &[128, 64], &values)?;
    let t = b.tile("t", Memory::Sbuf, DType::F32, &[128, 64])?;
    b.load(t, Grid::origin(x))?;
    b.store(Grid::origin(spill), t)?;
    let acc = b.tile("acc", Memory::Sbuf, DType::F32, &[128, 64])?;
    b.load(acc, Grid::origin(spill))?;
    b.begin_loop(LoopKind::Affine, "i", Extent::Fixed(4))?;
    let mine = b.private_scratch("mine", DType::F32, &fixed(&[128, 64]))?;
    let u = b.tile("u", Memory::Sbuf, DType::F32, &[128, 64])?;
    b.load(u, Grid::origin(x))?;
    b.store(Grid::origin(mine), u)?;
    let v = b.tile("v", Memory::Sbuf, DType::F32, &[128, 64])?;
    b.load(v, Grid::origin(mine))?;
    b.end_loop()?;
    let w = b.tile("w", Memory::Sbuf, DType::F32, &[128, 64])?;
    b.load(w, Grid::origin(x))?;
    let sum = b.tile("sum", Memory::Sbuf, DType::F32, &[128, 64])?;
    b.tensor_tensor(sum, acc, w, nki_lang::Alu::Add)?;
    let cf = b.tile("cf", Memory::Sbuf, DType::F32, &[128, 64])?;
    b.load(cf, Grid::origin(c))?;
    let res = b.tile("res", Memory::Sbuf, DType::F32, &[128, 64])?;
    b.tensor_tensor(res, sum, cf, nki_lang::Alu::Add)?;
    b.store(Grid::origin(out), res)?;
    b.finish()
}

#[test]
fn built_scratch_and_constants_match_plain_loops_on_every_path() {
    let compiled = program().unwrap();
    let parts = compiled.parts();
    let p = parts.program();
    let roles: Vec<TensorRole> = p.allocated().iter().map(|t| t.role).collect();
    assert_eq!(
        roles,
        [
            TensorRole::Scratch,
            TensorRole::Constant,
            TensorRole::Private
        ]
    );
    assert!(p.allocated()[2].scope.is_some());
    let kernel = Kernel::new(p);
    let xs: Vec<f32> = (0..128 * 64).map(|k| (k as f32 * 0.37).sin()).collect();
    let want: Vec<f32> = xs
        .iter()
        .enumerate()
        .map(|(k, &v)| (v + v) + ((k % 7) as f32 - 3.0))
        .collect();
    let x = DeviceTensor::from_vec(&[128, 64], xs).unwrap();
    let run = |how: &str| {
        let mut out = DeviceTensor::<f32>::zeros(&[128, 64]).unwrap();
        let mut core = NeuronCore::default().with_strict(how == "strict");
        let r = match how {
            "reference" => nki_runtime::reference_launch::launch(
                &mut core,
                &kernel,
                &[x.arg()],
                &mut [out.arg_mut()],
            ),
            _ => core.launch(&kernel, &[x.arg()], &mut [out.arg_mut()]),
        };
        r.unwrap();
        out.as_slice().to_vec()
    };
    for how in ["plain", "strict", "reference"] {
        assert_eq!(run(how), want, "{how}");
    }
    let listing = p.to_string();
    assert!(
        listing.contains("shared_hbm spill: f32[128, 64]"),
        "{listing}"
    );
    assert!(
        listing.contains("shared_constant c: bf16[128, 64]"),
        "{listing}"
    );
}

#[test]
fn malformed_allocated_tensors_are_refused() {
    let fixed = |d: &[u64]| d.iter().map(|&n| Dim::Fixed(n)).collect::<Vec<_>>();
    let mut b = ProgramBuilder::new("late_output", Target::Trn1);
    b.scratch("s", DType::F32, &fixed(&[4])).unwrap();
    assert!(matches!(
        b.output("o", DType::F32, &fixed(&[4])),
        Err(BuildError::Usage(_))
    ));
    // A constant whose values do not fill its shape.
    let mut b = ProgramBuilder::new("short_constant", Target::Trn1);
    let x = b.input("x", DType::F32, &fixed(&[2, 2])).unwrap();
    let o = b.output("o", DType::F32, &fixed(&[2, 2])).unwrap();
    let c = b
        .constant("c", DType::F32, &[2, 2], &[1.0, 2.0, 3.0])
        .unwrap();
    let t = b.tile("t", Memory::Sbuf, DType::F32, &[2, 2]).unwrap();
    b.load(t, Grid::origin(c)).unwrap();
    b.store(Grid::origin(o), t).unwrap();
    let _ = x;
    let err = b.finish().unwrap_err().to_string();
    assert!(err.contains("a constant's data"), "{err}");
    // A store into a constant.
    let mut b = ProgramBuilder::new("writes_constant", Target::Trn1);
    let x = b.input("x", DType::F32, &fixed(&[2, 2])).unwrap();
    let o = b.output("o", DType::F32, &fixed(&[2, 2])).unwrap();
    let c = b.constant("c", DType::F32, &[2, 2], &[1.0; 4]).unwrap();
    let t = b.tile("t", Memory::Sbuf, DType::F32, &[2, 2]).unwrap();
    b.load(t, Grid::origin(x)).unwrap();
    b.store(Grid::origin(c), t).unwrap();
    b.store(Grid::origin(o), t).unwrap();
    let err = b.finish().unwrap_err().to_string();
    assert!(err.contains("cannot write constant tensor `c`"), "{err}");
}
