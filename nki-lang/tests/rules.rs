//! The hardware rules `ProgramBuf::finish` enforces, one test per rule: each builds a small
//! program with `ProgramBuilder` that breaks exactly that rule (next to a control that keeps
//! it) and checks the whole list of diagnostics: the `RuleViolation` with its hand-computed
//! numbers, its NKI error `code()`, and the `site` (tile, tensor, or instruction and operand).
//!
//! Structural problems (`Malformed`) are in `malformed.rs`.

mod common;

use common::{buf_violations, compile, diag, dims, edit_view, operand, slot, violations, whole};
use nki_lang::builder::{Grid, ProgramBuilder};
use nki_lang::{
    Affine, DType, Diagnostic, Extent, LoopKind, Memory, Opcode, RuleViolation, Scalar, Site,
    Target, TileShape, Write,
};

fn shape(d: &[u32]) -> TileShape {
    TileShape::new(d).expect("valid rank")
}

/// One tile of the matmul test program.
#[derive(Copy, Clone)]
struct T {
    memory: Memory,
    dtype: DType,
    shape: &'static [u32],
}

const fn sbuf(dtype: DType, shape: &'static [u32]) -> T {
    T {
        memory: Memory::Sbuf,
        dtype,
        shape,
    }
}

const fn psum(dtype: DType, shape: &'static [u32]) -> T {
    T {
        memory: Memory::Psum,
        dtype,
        shape,
    }
}

const STATIONARY: T = sbuf(DType::Bf16, &[128, 128]);
const MOVING: T = sbuf(DType::Bf16, &[128, 512]);
const RESULT: T = psum(DType::F32, &[128, 512]);

/// `out = stationaryᵀ · moving` with the operands filled by `memset` (which accepts SBUF and
/// PSUM, so an operand may live anywhere) and the result copied to an SBUF tile of its shape
/// and stored.
///
/// Tiles: 0 stationary, 1 moving, 2 dst, 3 res (SBUF f32). Instructions: 0 memset stationary,
/// 1 memset moving, 2 nc_matmul, 3 tensor_copy res <- dst, 4 store out <- res.
fn matmul_program(st: T, mv: T, dst: T) -> ProgramBuilder {
    let mut b = ProgramBuilder::new("mm", Target::Trn1);
    let out_shape: Vec<u64> = dst.shape.iter().map(|&d| d as u64).collect();
    let out = b.output("out", DType::F32, &dims(&out_shape)).unwrap();
    let s = b.tile("s", st.memory, st.dtype, st.shape).unwrap();
    let m = b.tile("m", mv.memory, mv.dtype, mv.shape).unwrap();
    let d = b.tile("d", dst.memory, dst.dtype, dst.shape).unwrap();
    let r = b.tile("r", Memory::Sbuf, DType::F32, dst.shape).unwrap();
    b.memset(s, Scalar::float(1.0)).unwrap();
    b.memset(m, Scalar::float(1.0)).unwrap();
    b.nc_matmul(d, s, m, Write::Overwrite).unwrap();
    b.tensor_copy(r, d).unwrap();
    b.store(Grid::origin(out), r).unwrap();
    b
}

#[test]
fn a_matmul_within_every_limit_compiles() {
    // The control for the matmul tests: stationary [128, 128], moving [128, 512] (both at
    // their limits), an f32 PSUM result of exactly one bank.
    let p = compile(matmul_program(STATIONARY, MOVING, RESULT));
    assert_eq!(p.source().instrs.len(), 5);
}

#[test]
fn partition_dim_over_128() {
    let mut b = ProgramBuilder::new("k", Target::Trn1);
    let out = b.output("out", DType::F32, &dims(&[128, 512])).unwrap();
    let big = b
        .tile("big", Memory::Sbuf, DType::F32, &[256, 512])
        .unwrap();
    let r = b.tile("r", Memory::Sbuf, DType::F32, &[128, 512]).unwrap();
    b.memset(big, Scalar::float(0.0)).unwrap();
    b.memset(r, Scalar::float(0.0)).unwrap();
    b.store(Grid::origin(out), r).unwrap();
    let v = RuleViolation::PartitionDimTooLarge { size: 256 };
    // Reported on the tile's declaration and on the instruction that uses it.
    assert_eq!(
        violations(b),
        vec![
            diag(Site::Tile(0), v.clone()),
            diag(operand(0, slot::DST), v.clone()),
        ]
    );
    assert_eq!(v.code(), "err_num_partition_exceed_arch_limit");
    assert_eq!(
        v.to_string(),
        "partition dimension 256 exceeds the architecture limit of 128 (nl.tile_size.pmax)"
    );
}

#[test]
fn tile_without_free_dim_or_with_empty_dim() {
    let mut b = ProgramBuilder::new("k", Target::Trn1);
    let out = b.output("out", DType::F32, &dims(&[128, 512])).unwrap();
    let r = b.tile("r", Memory::Sbuf, DType::F32, &[128, 512]).unwrap();
    b.tile("flat", Memory::Sbuf, DType::F32, &[128]).unwrap();
    b.tile("empty", Memory::Sbuf, DType::F32, &[128, 0])
        .unwrap();
    b.memset(r, Scalar::float(0.0)).unwrap();
    b.store(Grid::origin(out), r).unwrap();
    let d = violations(b);
    assert_eq!(
        d,
        vec![
            diag(
                Site::Tile(1),
                RuleViolation::BadTileShape {
                    shape: shape(&[128])
                }
            ),
            diag(
                Site::Tile(2),
                RuleViolation::BadTileShape {
                    shape: shape(&[128, 0])
                }
            ),
        ]
    );
    assert_eq!(
        d[0].violation.code(),
        "err_failed_to_infer_tile_from_local_tensor"
    );
}

#[test]
fn stationary_free_size_over_128() {
    let d = violations(matmul_program(
        sbuf(DType::Bf16, &[128, 256]),
        MOVING,
        RESULT,
    ));
    let v = RuleViolation::StationaryTooWide { size: 256 };
    assert_eq!(d, vec![diag(operand(2, slot::STATIONARY), v.clone())]);
    assert_eq!(v.code(), "err_size_of_dimension_exceed_arch_limit");
}

#[test]
fn stationary_free_size_counts_every_free_dim() {
    // [128, 2, 65]: 130 free elements, two over the limit although no single dim is.
    let d = violations(matmul_program(
        sbuf(DType::Bf16, &[128, 2, 65]),
        MOVING,
        RESULT,
    ));
    assert_eq!(
        d,
        vec![diag(
            operand(2, slot::STATIONARY),
            RuleViolation::StationaryTooWide { size: 130 }
        )]
    );
}

#[test]
fn moving_free_size_over_512() {
    let d = violations(matmul_program(
        STATIONARY,
        sbuf(DType::Bf16, &[128, 1024]),
        RESULT,
    ));
    let v = RuleViolation::MovingTooWide { size: 1024 };
    assert_eq!(d, vec![diag(operand(2, slot::MOVING), v.clone())]);
    assert_eq!(v.code(), "err_size_of_dimension_exceed_arch_limit");
}

#[test]
fn contraction_sizes_differ() {
    let d = violations(matmul_program(
        STATIONARY,
        sbuf(DType::Bf16, &[64, 512]),
        RESULT,
    ));
    let v = RuleViolation::ContractionMismatch {
        stationary: 128,
        moving: 64,
    };
    // Neither operand alone is at fault: the site is the instruction as a whole.
    assert_eq!(d, vec![diag(whole(2), v.clone())]);
    assert_eq!(v.code(), "err_num_partition_mismatch");
}

#[test]
fn matmul_operand_in_psum() {
    let d = violations(matmul_program(
        psum(DType::Bf16, &[128, 128]),
        MOVING,
        RESULT,
    ));
    let v = RuleViolation::WrongMemory {
        op: "nc_matmul",
        operand: "stationary",
        expected: "sbuf",
        found: Memory::Psum,
    };
    assert_eq!(d, vec![diag(operand(2, slot::STATIONARY), v.clone())]);
    assert_eq!(v.code(), "err_unsupported_memory");
    assert_eq!(
        v.to_string(),
        "expected operand 'stationary' of 'nc_matmul' to be in address space 'sbuf', \
         but got a tile in 'psum' instead"
    );

    let d = violations(matmul_program(
        STATIONARY,
        psum(DType::Bf16, &[128, 512]),
        RESULT,
    ));
    assert_eq!(
        d,
        vec![diag(
            operand(2, slot::MOVING),
            RuleViolation::WrongMemory {
                op: "nc_matmul",
                operand: "moving",
                expected: "sbuf",
                found: Memory::Psum,
            }
        )]
    );
}

#[test]
fn matmul_dst_not_in_psum() {
    let d = violations(matmul_program(
        STATIONARY,
        MOVING,
        sbuf(DType::F32, &[128, 512]),
    ));
    let v = RuleViolation::WrongMemory {
        op: "nc_matmul",
        operand: "dst",
        expected: "psum",
        found: Memory::Sbuf,
    };
    assert_eq!(d, vec![diag(operand(2, slot::DST), v.clone())]);
    assert_eq!(v.code(), "err_unsupported_memory");
}

#[test]
fn matmul_dst_not_f32() {
    let d = violations(matmul_program(
        STATIONARY,
        MOVING,
        psum(DType::Bf16, &[128, 512]),
    ));
    let v = RuleViolation::WrongDType {
        op: "nc_matmul",
        operand: "dst",
        expected: "f32",
        found: DType::Bf16,
    };
    assert_eq!(d, vec![diag(operand(2, slot::DST), v.clone())]);
    assert_eq!(v.code(), "err_unsupported_dtype");
}

#[test]
fn matmul_dst_shape_must_be_stationary_free_by_moving_free() {
    // stationary [128, 64] · moving [128, 512] gives [64, 512], not [128, 512].
    let d = violations(matmul_program(
        sbuf(DType::Bf16, &[128, 64]),
        MOVING,
        RESULT,
    ));
    let v = RuleViolation::ShapeMismatch {
        op: "nc_matmul",
        operand: "dst",
        expected: shape(&[64, 512]),
        found: shape(&[128, 512]),
    };
    assert_eq!(d, vec![diag(operand(2, slot::DST), v.clone())]);
    assert_eq!(v.code(), "err_store_dst_shape_smaller_than_other_shape");
    // [64, 1, 512] holds the same elements as [64, 512].
    compile(matmul_program(
        sbuf(DType::Bf16, &[128, 64]),
        MOVING,
        psum(DType::F32, &[64, 1, 512]),
    ));
}

#[test]
fn psum_tile_over_one_bank() {
    let program = |dtype, free| {
        let mut b = ProgramBuilder::new("k", Target::Trn1);
        let out = b.output("out", DType::F32, &dims(&[128, free])).unwrap();
        let p = b
            .tile("p", Memory::Psum, dtype, &[128, free as u32])
            .unwrap();
        let s = b
            .tile("s", Memory::Sbuf, DType::F32, &[128, free as u32])
            .unwrap();
        b.memset(p, Scalar::float(0.0)).unwrap();
        b.tensor_copy(s, p).unwrap();
        b.store(Grid::origin(out), s).unwrap();
        b
    };
    // 1024 f32 = 4096 bytes per partition.
    let v = RuleViolation::PsumTileTooLarge { bytes: 4096 };
    assert_eq!(
        violations(program(DType::F32, 1024)),
        vec![diag(Site::Tile(0), v.clone())]
    );
    assert_eq!(v.code(), "err_psum_tile_exceeds_bank");
    // 1025 bf16 = 2050 bytes: two over.
    assert_eq!(
        violations(program(DType::Bf16, 1025)),
        vec![diag(
            Site::Tile(0),
            RuleViolation::PsumTileTooLarge { bytes: 2050 }
        )]
    );
    // Exactly one bank (512 f32 or 1024 bf16 = 2048 bytes) fits.
    compile(program(DType::F32, 512));
    compile(program(DType::Bf16, 1024));
}

/// Two f32 [128, 25600] tiles (102_400 bytes per partition each) live at once:
/// 204_800 bytes, over Trn1's 196_608 but within Trn2's 229_376.
fn two_100k_tiles(target: Target) -> ProgramBuilder {
    let mut b = ProgramBuilder::new("k", target);
    let x = b.input("x", DType::F32, &dims(&[128, 25600])).unwrap();
    let out = b.output("out", DType::F32, &dims(&[128, 25600])).unwrap();
    let a = b
        .tile("a", Memory::Sbuf, DType::F32, &[128, 25600])
        .unwrap();
    let c = b
        .tile("c", Memory::Sbuf, DType::F32, &[128, 25600])
        .unwrap();
    b.load(a, Grid::origin(x)).unwrap();
    b.load(c, Grid::origin(x)).unwrap();
    b.store(Grid::origin(out), a).unwrap();
    b.store(Grid::origin(out), c).unwrap();
    b
}

#[test]
fn sbuf_capacity_differs_between_trn1_and_trn2() {
    let v = RuleViolation::SbufCapacity {
        needed: 204_800,
        capacity: 196_608,
        target: "trn1",
    };
    // The second tile is the one that does not fit.
    assert_eq!(
        violations(two_100k_tiles(Target::Trn1)),
        vec![diag(Site::Tile(1), v.clone())]
    );
    assert_eq!(v.code(), "err_sbuf_capacity_exceeded");

    let p = compile(two_100k_tiles(Target::Trn2));
    assert_eq!(p.addrs(), &[0, 102_400]);
    assert_eq!(p.sbuf_bytes(), 204_800);
}

#[test]
fn sbuf_filled_exactly_fits_trn1() {
    // f32 [128, 49152]: 196_608 bytes per partition, all of Trn1's SBUF.
    let mut b = ProgramBuilder::new("k", Target::Trn1);
    let x = b.input("x", DType::F32, &dims(&[128, 49152])).unwrap();
    let out = b.output("out", DType::F32, &dims(&[128, 49152])).unwrap();
    let t = b
        .tile("t", Memory::Sbuf, DType::F32, &[128, 49152])
        .unwrap();
    b.load(t, Grid::origin(x)).unwrap();
    b.store(Grid::origin(out), t).unwrap();
    assert_eq!(compile(b).sbuf_bytes(), 196_608);
}

/// `n` PSUM tiles all live at once: memset each (instructions 0..n), then copy each into one
/// SBUF tile (tile n), then store it.
fn live_psum_tiles(n: usize) -> ProgramBuilder {
    let mut b = ProgramBuilder::new("k", Target::Trn1);
    let out = b.output("out", DType::F32, &dims(&[128, 512])).unwrap();
    let ps: Vec<_> = (0..n)
        .map(|i| {
            b.tile(&format!("p{i}"), Memory::Psum, DType::F32, &[128, 512])
                .unwrap()
        })
        .collect();
    let s = b.tile("s", Memory::Sbuf, DType::F32, &[128, 512]).unwrap();
    for &p in &ps {
        b.memset(p, Scalar::float(0.0)).unwrap();
    }
    for &p in &ps {
        b.tensor_copy(s, p).unwrap();
    }
    b.store(Grid::origin(out), s).unwrap();
    b
}

#[test]
fn more_than_eight_live_psum_tiles() {
    let v = RuleViolation::PsumBanks { needed: 9 };
    assert_eq!(
        violations(live_psum_tiles(9)),
        vec![diag(Site::Tile(8), v.clone())]
    );
    assert_eq!(v.code(), "err_psum_banks_exceeded");
    assert_eq!(compile(live_psum_tiles(8)).psum_banks(), 8);
}

#[test]
fn store_into_an_input() {
    let mut b = ProgramBuilder::new("k", Target::Trn1);
    let x = b.input("x", DType::F32, &dims(&[128, 512])).unwrap();
    let out = b.output("out", DType::F32, &dims(&[128, 512])).unwrap();
    let t = b.tile("t", Memory::Sbuf, DType::F32, &[128, 512]).unwrap();
    b.load(t, Grid::origin(x)).unwrap();
    b.store(Grid::origin(x), t).unwrap();
    b.store(Grid::origin(out), t).unwrap();
    let v = RuleViolation::ImmutableParameter { name: "x".into() };
    assert_eq!(violations(b), vec![diag(operand(1, slot::HBM), v.clone())]);
    assert_eq!(v.code(), "err_cannot_update_immutable_parameter");
}

#[test]
fn tile_read_before_any_write() {
    // copy(r, t) reads t, which nothing wrote; then t is loaded, and read again: one error.
    let mut b = ProgramBuilder::new("k", Target::Trn1);
    let x = b.input("x", DType::F32, &dims(&[128, 512])).unwrap();
    let y = b.output("y", DType::F32, &dims(&[128, 512])).unwrap();
    let t = b.tile("t", Memory::Sbuf, DType::F32, &[128, 512]).unwrap();
    let r = b.tile("r", Memory::Sbuf, DType::F32, &[128, 512]).unwrap();
    b.tensor_copy(r, t).unwrap();
    b.load(t, Grid::origin(x)).unwrap();
    b.tensor_copy(r, t).unwrap();
    b.store(Grid::origin(y), r).unwrap();
    let v = RuleViolation::ReadBeforeWrite { tile: "t".into() };
    assert_eq!(violations(b), vec![diag(operand(0, 1), v.clone())]);
    assert_eq!(v.code(), "err_read_before_write");
}

#[test]
fn affine_iterations_writing_the_same_output_elements() {
    // for i in affine_range(2): t = x[128 i + p, f]; y[p, f] = t  (y's index ignores i).
    let build = |kind: LoopKind, trip: u64| {
        let mut b = ProgramBuilder::new("k", Target::Trn1);
        let x = b.input("x", DType::F32, &dims(&[256, 512])).unwrap();
        let y = b.output("y", DType::F32, &dims(&[128, 512])).unwrap();
        let i = b.begin_loop(kind, "i", Extent::Fixed(trip)).unwrap();
        let t = b.tile("t", Memory::Sbuf, DType::F32, &[128, 512]).unwrap();
        b.load(t, Grid::origin(x).at(0, i.checked_scale(128).unwrap()))
            .unwrap();
        b.store(Grid::origin(y), t).unwrap();
        b.end_loop().unwrap();
        b
    };
    let v = RuleViolation::OutputDependencies {
        tensor: "y".into(),
        var: "i".into(),
    };
    assert_eq!(
        violations(build(LoopKind::Affine, 2)),
        vec![diag(whole(2), v.clone())]
    );
    assert_eq!(v.code(), "err_unexpected_output_dependencies");
    // One iteration, or iterations in order: nothing to decide.
    compile(build(LoopKind::Affine, 1));
    compile(build(LoopKind::Sequential, 2));
}

#[test]
fn output_never_stored() {
    let mut b = ProgramBuilder::new("k", Target::Trn1);
    let x = b.input("x", DType::F32, &dims(&[128, 512])).unwrap();
    let y0 = b.output("y0", DType::F32, &dims(&[128, 512])).unwrap();
    b.output("y1", DType::F32, &dims(&[128, 512])).unwrap();
    let t = b.tile("t", Memory::Sbuf, DType::F32, &[128, 512]).unwrap();
    b.load(t, Grid::origin(x)).unwrap();
    b.store(Grid::origin(y0), t).unwrap();
    // Tensor 2 (x = 0, y0 = 1, y1 = 2).
    let v = RuleViolation::OutputNotWritten { name: "y1".into() };
    assert_eq!(violations(b), vec![diag(Site::Tensor(2), v.clone())]);
    assert_eq!(v.code(), "err_tensor_output_not_written_to");
}

#[test]
fn symbol_only_in_an_output_shape_is_unbound() {
    let mut b = ProgramBuilder::new("k", Target::Trn1);
    let k = b.symbol("K").unwrap();
    let n = b.symbol("N").unwrap();
    let x = b
        .input("x", DType::F32, &[k, nki_lang::Dim::Fixed(512)])
        .unwrap();
    let out = b
        .output("out", DType::F32, &[nki_lang::Dim::Fixed(128), n])
        .unwrap();
    let t = b.tile("t", Memory::Sbuf, DType::F32, &[128, 512]).unwrap();
    b.load(t, Grid::origin(x)).unwrap();
    b.store(Grid::origin(out), t).unwrap();
    // K is bound by x; N appears only in the output.
    let v = RuleViolation::UnboundSymbol { name: "N".into() };
    assert_eq!(violations(b), vec![diag(Site::Program, v.clone())]);
    assert_eq!(v.code(), "err_unbound_symbolic_dimension");
}

/// `for i in range(trips): out[start(i) + p, f] = x[start(i) + p, f]` over [512, 512]
/// tensors with a [128, 512] tile. Instructions: 0 loop, 1 load, 2 store, 3 end.
fn row_blocks(trips: u64, load_start: Affine, store_start: Affine) -> ProgramBuilder {
    let mut b = ProgramBuilder::new("k", Target::Trn1);
    let x = b.input("x", DType::F32, &dims(&[512, 512])).unwrap();
    let out = b.output("out", DType::F32, &dims(&[512, 512])).unwrap();
    let t = b.tile("t", Memory::Sbuf, DType::F32, &[128, 512]).unwrap();
    b.begin_loop(LoopKind::Affine, "i", Extent::Fixed(trips))
        .unwrap();
    b.load(t, Grid::origin(x).at(0, load_start)).unwrap();
    b.store(Grid::origin(out).at(0, store_start), t).unwrap();
    b.end_loop().unwrap();
    b
}

#[test]
fn static_out_of_bounds_in_a_fixed_loop() {
    let i128 = Affine::loop_var(0, 128);
    // Four blocks of 128 rows cover 512 exactly.
    compile(row_blocks(4, i128, i128));
    // Five reach row 128·4 + 127 = 639.
    let d = violations(row_blocks(5, i128, i128));
    let oob = |tensor: &str| RuleViolation::OutOfBounds {
        tensor: tensor.into(),
        axis: 0,
        lo: 0,
        hi: 639,
        size: 512,
    };
    assert_eq!(
        d,
        vec![
            diag(operand(1, slot::HBM), oob("x")),
            diag(operand(2, slot::HBM), oob("out")),
        ]
    );
    assert_eq!(d[0].violation.code(), "err_tensor_access_out_of_bound");
    assert_eq!(
        d[0].violation.to_string(),
        "out-of-bound access for tensor `x` on dimension 0: index range [0, 639] exceeds \
         dimension size of 512"
    );
}

#[test]
fn static_out_of_bounds_below_zero_with_a_negative_coefficient() {
    let i128 = Affine::loop_var(0, 128);
    // 384 - 128·i over i = 0..4 stays in [0, 511].
    let down = Affine::constant(384)
        .checked_add(&Affine::loop_var(0, -128))
        .unwrap();
    compile(row_blocks(4, down, i128));
    // 256 - 128·i reaches 256 - 384 = -128; its top is 256 + 127 = 383.
    let down = Affine::constant(256)
        .checked_add(&Affine::loop_var(0, -128))
        .unwrap();
    assert_eq!(
        violations(row_blocks(4, down, i128)),
        vec![diag(
            operand(1, slot::HBM),
            RuleViolation::OutOfBounds {
                tensor: "x".into(),
                axis: 0,
                lo: -128,
                hi: 383,
                size: 512,
            }
        )]
    );
}

#[test]
fn out_of_bounds_on_the_free_axis_of_a_tensor() {
    // A [128, 512] tile at column 1 of a [128, 512] tensor reaches column 512.
    let mut b = ProgramBuilder::new("k", Target::Trn1);
    let x = b.input("x", DType::F32, &dims(&[128, 512])).unwrap();
    let out = b.output("out", DType::F32, &dims(&[128, 512])).unwrap();
    let t = b.tile("t", Memory::Sbuf, DType::F32, &[128, 512]).unwrap();
    b.load(t, Grid::origin(x).at(1, Affine::constant(1)))
        .unwrap();
    b.store(Grid::origin(out), t).unwrap();
    assert_eq!(
        violations(b),
        vec![diag(
            operand(0, slot::HBM),
            RuleViolation::OutOfBounds {
                tensor: "x".into(),
                axis: 1,
                lo: 1,
                hi: 512,
                size: 512,
            }
        )]
    );
}

/// A valid `out = x` program through tile `t` ([128, 512] f32); instructions 0 load, 1 store.
fn copy_through_tile() -> nki_lang::ProgramBuf {
    let mut b = ProgramBuilder::new("k", Target::Trn1);
    let x = b.input("x", DType::F32, &dims(&[128, 512])).unwrap();
    let out = b.output("out", DType::F32, &dims(&[128, 512])).unwrap();
    let t = b.tile("t", Memory::Sbuf, DType::F32, &[128, 512]).unwrap();
    b.load(t, Grid::origin(x)).unwrap();
    b.store(Grid::origin(out), t).unwrap();
    compile(b).source().clone()
}

#[test]
fn tile_view_outside_its_tile() {
    // Free offset 1: elements 1..=512 of a 512-element partition.
    let mut p = copy_through_tile();
    edit_view(&mut p, 1, Opcode::Store, slot::TILE, |src| {
        src.offset = Affine::constant(1)
    });
    assert_eq!(
        buf_violations(p),
        vec![diag(
            operand(1, slot::TILE),
            RuleViolation::OutOfBounds {
                tensor: "t".into(),
                axis: 1,
                lo: 1,
                hi: 512,
                size: 512,
            }
        )]
    );

    // Partitions 64..192 of a 128-partition tile.
    let mut p = copy_through_tile();
    edit_view(&mut p, 0, Opcode::Load, slot::TILE, |dst| {
        dst.part_start = 64
    });
    assert_eq!(
        buf_violations(p),
        vec![diag(
            operand(0, slot::TILE),
            RuleViolation::OutOfBounds {
                tensor: "t".into(),
                axis: 0,
                lo: 64,
                hi: 191,
                size: 128,
            }
        )]
    );
}

#[test]
fn load_into_psum_and_store_from_psum() {
    let mut b = ProgramBuilder::new("k", Target::Trn1);
    let x = b.input("x", DType::F32, &dims(&[128, 512])).unwrap();
    let out = b.output("out", DType::F32, &dims(&[128, 512])).unwrap();
    let p = b.tile("p", Memory::Psum, DType::F32, &[128, 512]).unwrap();
    b.load(p, Grid::origin(x)).unwrap();
    b.store(Grid::origin(out), p).unwrap();
    assert_eq!(
        violations(b),
        vec![
            diag(
                operand(0, slot::TILE),
                RuleViolation::WrongMemory {
                    op: "load",
                    operand: "dst",
                    expected: "sbuf",
                    found: Memory::Psum,
                }
            ),
            diag(
                operand(1, slot::TILE),
                RuleViolation::WrongMemory {
                    op: "store",
                    operand: "value",
                    expected: "sbuf",
                    found: Memory::Psum,
                }
            ),
        ]
    );
}

#[test]
fn copy_shapes_must_match() {
    let mut b = ProgramBuilder::new("k", Target::Trn1);
    let out = b.output("out", DType::F32, &dims(&[128, 512])).unwrap();
    let src = b
        .tile("src", Memory::Sbuf, DType::F32, &[128, 256])
        .unwrap();
    let dst = b
        .tile("dst", Memory::Sbuf, DType::F32, &[128, 512])
        .unwrap();
    b.memset(src, Scalar::float(0.0)).unwrap();
    b.tensor_copy(dst, src).unwrap();
    b.store(Grid::origin(out), dst).unwrap();
    assert_eq!(
        violations(b),
        vec![diag(
            operand(1, slot::DST),
            RuleViolation::ShapeMismatch {
                op: "tensor_copy",
                operand: "dst",
                expected: shape(&[128, 256]),
                found: shape(&[128, 512]),
            }
        )]
    );
}

/// `out = transpose(x)`: x [64, 128] bf16 loaded into `src`, transposed into `dst`, copied to
/// `res` [dst shape] and stored. Instructions: 0 load, 1 nc_transpose, 2 copy, 3 store.
fn transpose_program(src: &[u32], dst: T) -> ProgramBuilder {
    let mut b = ProgramBuilder::new("k", Target::Trn1);
    let in_shape: Vec<u64> = src.iter().map(|&d| d as u64).collect();
    let out_shape: Vec<u64> = dst.shape.iter().map(|&d| d as u64).collect();
    let x = b.input("x", DType::Bf16, &dims(&in_shape)).unwrap();
    let out = b.output("out", DType::F32, &dims(&out_shape)).unwrap();
    let s = b.tile("s", Memory::Sbuf, DType::Bf16, src).unwrap();
    let d = b.tile("d", dst.memory, dst.dtype, dst.shape).unwrap();
    let r = b.tile("r", Memory::Sbuf, DType::F32, dst.shape).unwrap();
    b.load(s, Grid::origin(x)).unwrap();
    b.nc_transpose(d, s).unwrap();
    b.tensor_copy(r, d).unwrap();
    b.store(Grid::origin(out), r).unwrap();
    b
}

#[test]
fn transpose_rules() {
    // [64, 128] -> [128, 64] in PSUM f32 is fine.
    compile(transpose_program(&[64, 128], psum(DType::F32, &[128, 64])));
    // 256 free elements would become 256 partitions.
    assert_eq!(
        violations(transpose_program(&[64, 256], psum(DType::F32, &[128, 64]))),
        vec![diag(
            operand(1, slot::SRC),
            RuleViolation::PartitionDimTooLarge { size: 256 }
        )]
    );
    assert_eq!(
        violations(transpose_program(&[64, 128], psum(DType::Bf16, &[128, 64]))),
        vec![diag(
            operand(1, slot::DST),
            RuleViolation::WrongDType {
                op: "nc_transpose",
                operand: "dst",
                expected: "f32",
                found: DType::Bf16,
            }
        )]
    );
    assert_eq!(
        violations(transpose_program(&[64, 128], psum(DType::F32, &[64, 128]))),
        vec![diag(
            operand(1, slot::DST),
            RuleViolation::ShapeMismatch {
                op: "nc_transpose",
                operand: "dst",
                expected: shape(&[128, 64]),
                found: shape(&[64, 128]),
            }
        )]
    );
}

#[test]
fn every_violation_is_reported_not_just_the_first() {
    // Two independent faults in one program: a stationary operand in PSUM, and an output
    // that is never stored. Instruction checks come before the output check.
    let mut b = ProgramBuilder::new("k", Target::Trn1);
    let out = b.output("out", DType::F32, &dims(&[128, 512])).unwrap();
    b.output("unused", DType::F32, &dims(&[128, 512])).unwrap();
    let s = b.tile("s", Memory::Psum, DType::Bf16, &[128, 128]).unwrap();
    let m = b.tile("m", Memory::Sbuf, DType::Bf16, &[128, 512]).unwrap();
    let d = b.tile("d", Memory::Psum, DType::F32, &[128, 512]).unwrap();
    let r = b.tile("r", Memory::Sbuf, DType::F32, &[128, 512]).unwrap();
    b.memset(s, Scalar::float(0.0)).unwrap();
    b.memset(m, Scalar::float(0.0)).unwrap();
    b.nc_matmul(d, s, m, Write::Overwrite).unwrap();
    b.tensor_copy(r, d).unwrap();
    b.store(Grid::origin(out), r).unwrap();
    let d = violations(b);
    assert_eq!(
        d.iter().map(|d| d.site).collect::<Vec<_>>(),
        vec![operand(2, slot::STATIONARY), Site::Tensor(1)]
    );
    assert_eq!(
        d.iter().map(|d| d.violation.code()).collect::<Vec<_>>(),
        vec!["err_unsupported_memory", "err_tensor_output_not_written_to"]
    );
}

#[test]
fn operand_slots_are_the_ones_the_opcode_table_names() {
    // The sites above name operands by slot (`common::slot`); these are the operands the
    // opcode table gives those slots, so that each diagnostic is about the operand it says.
    let names = |op: Opcode| -> Vec<&str> { op.info().operands.iter().map(|s| s.name).collect() };
    assert_eq!(slot::TILE, 0);
    assert_eq!(slot::HBM, 1);
    assert_eq!(names(Opcode::Load), ["dst", "src"]);
    assert_eq!(names(Opcode::Store), ["value", "dst"]);
    assert_eq!((slot::DST, slot::STATIONARY, slot::MOVING), (0, 1, 2));
    assert_eq!(names(Opcode::Matmul), ["dst", "stationary", "moving"]);
    assert_eq!((slot::DST, slot::SRC), (0, 1));
    assert_eq!(names(Opcode::Transpose), ["dst", "data"]);
    assert_eq!(names(Opcode::TensorCopy), ["dst", "src"]);
    assert_eq!(names(Opcode::Memset), ["dst"]);
}

/// A `memset` of `[1, free]` u8 then a `tensor_copy` of it, stored.
fn fill_and_copy(memory: Memory, free: u32) -> ProgramBuilder {
    let mut b = ProgramBuilder::new("wide", Target::Trn1);
    let out = b
        .output("out", DType::U8, &dims(&[1, u64::from(free)]))
        .unwrap();
    let a = b.tile("a", memory, DType::U8, &[1, free]).unwrap();
    let c = b.tile("c", Memory::Sbuf, DType::U8, &[1, free]).unwrap();
    b.memset(a, Scalar::float(1.0)).unwrap();
    b.tensor_copy(c, a).unwrap();
    b.store(Grid::origin(out), c).unwrap();
    b
}

#[test]
fn copy_and_memset_free_size_over_the_engine_limit() {
    compile(fill_and_copy(Memory::Sbuf, 65536));
    let limit = |op, operand, size, limit| RuleViolation::SizeLimit {
        op,
        operand,
        what: "free size",
        size,
        limit,
    };
    assert_eq!(
        violations(fill_and_copy(Memory::Sbuf, 70_000)),
        vec![
            diag(operand(0, 0), limit("memset", "dst", 70_000, 65536)),
            diag(operand(1, 1), limit("tensor_copy", "src", 70_000, 65536)),
        ]
    );
    // From PSUM: 4K elements (a PSUM tile this wide does not fit a bank either).
    let v = violations(fill_and_copy(Memory::Psum, 5000));
    assert!(
        v.contains(&diag(operand(0, 0), limit("memset", "dst", 5000, 4096))),
        "{v:?}"
    );
    assert!(
        v.contains(&diag(
            operand(1, 1),
            limit("tensor_copy", "src", 5000, 4096)
        )),
        "{v:?}"
    );
    let sizes: Vec<&Diagnostic> = v
        .iter()
        .filter(|d| matches!(d.violation, RuleViolation::SizeLimit { .. }))
        .collect();
    assert_eq!(sizes.len(), 2, "{v:?}");
    assert!(
        sizes
            .iter()
            .all(|d| d.violation.code() == "err_size_of_dimension_exceed_arch_limit")
    );
}

#[test]
fn a_tile_larger_than_an_sbuf_partition_is_refused_even_unused() {
    let program = |free: &[u32], target| {
        let mut b = ProgramBuilder::new("unused", target);
        let out = b.output("out", DType::F32, &dims(&[128, 4])).unwrap();
        let t = b.tile("t", Memory::Sbuf, DType::F32, &[128, 4]).unwrap();
        let mut shape = vec![128];
        shape.extend_from_slice(free);
        b.tile("huge", Memory::Sbuf, DType::F32, &shape).unwrap();
        b.memset(t, Scalar::float(0.0)).unwrap();
        b.store(Grid::origin(out), t).unwrap();
        b
    };
    // Exactly one Trn1 partition (192 KiB of f32), unused: accepted.
    compile(program(&[49_152], Target::Trn1));
    assert_eq!(
        violations(program(&[49_153], Target::Trn1)),
        vec![diag(
            Site::Tile(1),
            RuleViolation::SbufTileTooLarge {
                bytes: 196_612,
                capacity: 196_608,
                target: "trn1"
            }
        )]
    );
    // Fits a Trn2 partition.
    compile(program(&[49_153], Target::Trn2));
    // The free sizes multiply past u64: the size saturates, still refused.
    let v = violations(program(&[u32::MAX, u32::MAX, 2], Target::Trn1));
    assert!(
        matches!(v.as_slice(), [d] if d.site == Site::Tile(1)
            && matches!(d.violation, RuleViolation::SbufTileTooLarge { capacity: 196_608, .. })),
        "{v:?}"
    );
    assert_eq!(v[0].violation.code(), "err_sbuf_capacity_exceeded");
}

#[test]
fn a_tensor_axis_above_the_maximum_is_refused() {
    let program = |n: u64| {
        let mut b = ProgramBuilder::new("wide", Target::Trn1);
        let x = b.input("x", DType::F32, &dims(&[n, 1])).unwrap();
        let out = b.output("out", DType::F32, &dims(&[128, 1])).unwrap();
        let t = b.tile("t", Memory::Sbuf, DType::F32, &[128, 1]).unwrap();
        b.load(t, Grid::origin(x)).unwrap();
        b.store(Grid::origin(out), t).unwrap();
        b
    };
    compile(program(nki_lang::MAX_TENSOR_DIM));
    for n in [nki_lang::MAX_TENSOR_DIM + 1, u64::MAX] {
        assert_eq!(
            violations(program(n)),
            vec![diag(
                Site::Tensor(0),
                RuleViolation::TensorDimTooLarge {
                    tensor: "x".to_string(),
                    axis: 0,
                    size: n,
                    max: nki_lang::MAX_TENSOR_DIM
                }
            )]
        );
    }
}

/// Reduction axes: NumPy's negative axes count from the last; out of range is an error that
/// keeps the axis as written.
#[test]
fn reduce_axes_normalise_negative_axes() {
    use nki_lang::rules::{check_reduce_axes, normalize_axis};
    // A [P, A, B] tile: free axes 1 and 2.
    assert_eq!(check_reduce_axes("sum", &[-2, -1], 2), Ok(0b11));
    assert_eq!(check_reduce_axes("sum", &[-1], 2), Ok(0b10));
    assert_eq!(check_reduce_axes("sum", &[1], 2), Ok(0b01));
    assert_eq!(
        check_reduce_axes("sum", &[-3], 2),
        Err(RuleViolation::NegativePartitionAxis {
            op: "sum",
            axis: -3,
            max_axis: 2
        })
    );
    let e = check_reduce_axes("sum", &[-4], 2).unwrap_err();
    assert_eq!(
        e,
        RuleViolation::AxisOutOfRange {
            op: "sum",
            axis: -4,
            rank: 3
        }
    );
    assert_eq!(e.code(), "err_unsupported_reduce_axes");
    assert_eq!(normalize_axis("sum", 3, 3).ok(), None);
    assert_eq!(normalize_axis("sum", -3, 3), Ok(0));
    assert_eq!(normalize_axis("sum", i64::MIN, 3).ok(), None);
}

#[test]
fn psum_tiles_with_block_axes_take_a_bank_per_block() {
    use nki_lang::rules::check_psum_block_tile;
    let shape = |d: &[u32]| TileShape::new(d).unwrap();
    // Two blocks of one bank each; eight; a plain tile of two banks is still refused.
    assert!(check_psum_block_tile(&shape(&[128, 2, 512]), DType::F32, 1).is_ok());
    assert!(check_psum_block_tile(&shape(&[128, 8, 512]), DType::F32, 1).is_ok());
    assert!(check_psum_block_tile(&shape(&[128, 2, 512]), DType::F32, 0).is_err());
    // Nine banks; blocks of 1536 bytes that would straddle banks; blocks of 512 bytes pack.
    for (dims, axes) in [(&[128u32, 9, 512][..], 1u8), (&[128, 2, 384], 1)] {
        let v = check_psum_block_tile(&shape(dims), DType::F32, axes).unwrap_err();
        assert_eq!(v.code(), "err_psum_tile_exceeds_bank", "{dims:?}");
    }
    assert!(check_psum_block_tile(&shape(&[128, 2, 4, 128]), DType::F32, 2).is_ok());
}
