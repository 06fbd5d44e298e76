//! Structurally inconsistent programs, which only a hand-built or hand-edited `ProgramBuf`
//! (or an unusual use of `ProgramBuilder`) can produce: unbalanced or too-deep loops, indices
//! past the tile, tensor, loop-variable and symbol tables, loop variables used outside their
//! loop, misplaced tensors and tiles. Each must come back as `RuleViolation::Malformed`
//! (code `err_malformed_program`) at the right site, never as a panic.

mod common;

use common::{buf_violations, compile, diag, dims, edit_access, edit_view, operand, slot, whole};
use nki_lang::builder::{Grid, ProgramBuilder};
use nki_lang::{
    Affine, Alu, DType, Dim, Engine, Extent, Instr, InstrData, LoopKind, Memory, Opcode,
    ProgramBuf, RegId, RegSrc, RuleViolation, Scalar, Site, Target, TensorBuf, TensorRole, Write,
};

fn malformed(what: &'static str) -> RuleViolation {
    RuleViolation::Malformed { what }
}

/// `for i in range(4): out[128i + p, f] = x[128i + p, f]` through tile `t`.
/// Instructions: 0 loop, 1 load, 2 store, 3 end.
fn looped() -> ProgramBuf {
    let mut b = ProgramBuilder::new("k", Target::Trn1);
    let x = b.input("x", DType::F32, &dims(&[512, 512])).unwrap();
    let out = b.output("out", DType::F32, &dims(&[512, 512])).unwrap();
    let t = b.tile("t", Memory::Sbuf, DType::F32, &[128, 512]).unwrap();
    let i = b
        .begin_loop(LoopKind::Affine, "i", Extent::Fixed(4))
        .unwrap();
    b.load(t, Grid::origin(x).at(0, i.checked_scale(128).unwrap()))
        .unwrap();
    b.store(Grid::origin(out).at(0, i.checked_scale(128).unwrap()), t)
        .unwrap();
    b.end_loop().unwrap();
    compile(b).source().clone()
}

/// Inserts `tensors` (inputs) in front of the tensor table, keeping every HBM access on the
/// tensor it named: accesses refer to tensors by index, so those indices move up.
fn insert_inputs_in_front(p: &mut ProgramBuf, tensors: Vec<TensorBuf>) {
    let n = tensors.len() as u8;
    p.tensors.splice(0..0, tensors);
    for a in &mut p.accesses {
        a.tensor += n;
    }
}

/// A program of `depth` empty nested loops of one iteration each, and nothing else.
fn nested_loops(depth: usize) -> ProgramBuf {
    let mut p = ProgramBuf {
        name: "nest".into(),
        ..ProgramBuf::default()
    };
    let last = 2 * depth - 1;
    for d in 0..depth {
        p.loop_vars.push(format!("i{d}"));
        p.instrs.push(Instr::new(
            Opcode::LoopBegin,
            InstrData::LoopBegin {
                kind: LoopKind::Sequential,
                trip: Extent::Fixed(1),
                var: d as u16,
                end: (last - d) as u32,
            },
        ));
    }
    for d in (0..depth).rev() {
        p.instrs.push(Instr::new(
            Opcode::LoopEnd,
            InstrData::LoopEnd { begin: d as u32 },
        ));
    }
    p
}

#[test]
fn the_unedited_programs_are_valid() {
    looped().finish().expect("looped() is valid");
    nested_loops(8)
        .finish()
        .expect("8 nested loops are allowed");
}

#[test]
fn loop_without_its_end() {
    let mut p = looped();
    p.instrs.pop();
    let d = buf_violations(p);
    assert_eq!(d, vec![diag(whole(0), malformed("unmatched loop"))]);
    assert_eq!(d[0].violation.code(), "err_malformed_program");
}

#[test]
fn loop_end_without_its_begin() {
    let mut p = looped();
    p.instrs
        .push(Instr::new(Opcode::LoopEnd, InstrData::LoopEnd { begin: 0 }));
    assert_eq!(
        buf_violations(p),
        vec![diag(whole(4), malformed("unmatched loop end"))]
    );
}

#[test]
fn loop_begin_pointing_at_a_non_end() {
    let mut p = looped();
    let InstrData::LoopBegin { end, .. } = &mut p.instrs[0].data else {
        panic!("instruction 0 is the loop")
    };
    *end = 2;
    assert_eq!(
        buf_violations(p),
        vec![diag(whole(0), malformed("unmatched loop"))]
    );
}

#[test]
fn loop_variable_index_out_of_range() {
    let mut p = looped();
    let InstrData::LoopBegin { var, .. } = &mut p.instrs[0].data else {
        panic!("instruction 0 is the loop")
    };
    *var = 7;
    assert_eq!(
        buf_violations(p),
        vec![diag(whole(0), malformed("unmatched loop"))]
    );
}

#[test]
fn trip_count_with_unknown_symbol_or_zero_divisor() {
    let mut p = looped();
    let InstrData::LoopBegin { trip, .. } = &mut p.instrs[0].data else {
        panic!("instruction 0 is the loop")
    };
    // The program has no symbols at all.
    *trip = Extent::Sym {
        sym: 0,
        add: 0,
        div: 128,
    };
    assert_eq!(
        buf_violations(p),
        vec![diag(whole(0), malformed("bad trip count"))]
    );

    let mut b = ProgramBuilder::new("k", Target::Trn1);
    let k = b.symbol("K").unwrap();
    let x = b.input("x", DType::F32, &[k, Dim::Fixed(512)]).unwrap();
    let out = b.output("out", DType::F32, &dims(&[128, 512])).unwrap();
    let t = b.tile("t", Memory::Sbuf, DType::F32, &[128, 512]).unwrap();
    b.begin_loop(
        LoopKind::Affine,
        "k",
        Extent::Sym {
            sym: 0,
            add: 0,
            div: 0,
        },
    )
    .unwrap();
    b.load(t, Grid::origin(x)).unwrap();
    b.store(Grid::origin(out), t).unwrap();
    b.end_loop().unwrap();
    let nki_lang::builder::BuildError::Rules(d) = b.finish().unwrap_err() else {
        panic!("expected rule violations")
    };
    assert_eq!(d, vec![diag(whole(0), malformed("bad trip count"))]);
}

#[test]
fn loops_nested_nine_deep() {
    // Instructions 0..=8 open loops; the ninth (index 8) is one too many.
    assert_eq!(
        buf_violations(nested_loops(9)),
        vec![diag(whole(8), malformed("loops nested deeper than 8"))]
    );
}

#[test]
fn tile_index_out_of_range() {
    let mut p = looped();
    edit_view(&mut p, 1, Opcode::Load, slot::TILE, |dst| dst.tile = 5);
    assert_eq!(
        buf_violations(p),
        vec![diag(
            operand(1, slot::TILE),
            malformed("tile index out of range")
        )]
    );

    let mut p = looped();
    edit_view(&mut p, 2, Opcode::Store, slot::TILE, |src| src.tile = 1);
    assert_eq!(
        buf_violations(p),
        vec![diag(
            operand(2, slot::TILE),
            malformed("tile index out of range")
        )]
    );
}

#[test]
fn tensor_index_out_of_range_and_wrong_access_rank() {
    let mut p = looped();
    edit_access(&mut p, 1, Opcode::Load, |src| src.tensor = 9);
    assert_eq!(
        buf_violations(p),
        vec![diag(
            operand(1, slot::HBM),
            malformed("tensor index out of range")
        )]
    );

    let mut p = looped();
    edit_access(&mut p, 2, Opcode::Store, |dst| dst.rank = 1);
    assert_eq!(
        buf_violations(p),
        vec![diag(
            operand(2, slot::HBM),
            malformed("access rank differs from tensor rank")
        )]
    );
}

#[test]
fn tile_view_indexed_by_a_loop_that_does_not_enclose_it() {
    // The store is at depth 1; a coefficient on depth 1 names no enclosing loop.
    let mut p = looped();
    edit_view(&mut p, 2, Opcode::Store, slot::TILE, |src| {
        src.offset = Affine::loop_var(1, 1)
    });
    assert_eq!(
        buf_violations(p),
        vec![diag(
            whole(2),
            malformed("index uses a loop that does not enclose it")
        )]
    );
}

#[test]
fn hbm_access_indexed_by_a_loop_that_has_ended() {
    // for i in range(4): t = x[128i + p, f]; afterwards: out[128i + p, f] = t  (i out of scope)
    let mut b = ProgramBuilder::new("k", Target::Trn1);
    let x = b.input("x", DType::F32, &dims(&[512, 512])).unwrap();
    let out = b.output("out", DType::F32, &dims(&[512, 512])).unwrap();
    let t = b.tile("t", Memory::Sbuf, DType::F32, &[128, 512]).unwrap();
    let i = b
        .begin_loop(LoopKind::Affine, "i", Extent::Fixed(4))
        .unwrap();
    b.load(t, Grid::origin(x).at(0, i.checked_scale(128).unwrap()))
        .unwrap();
    b.end_loop().unwrap();
    b.store(Grid::origin(out).at(0, i.checked_scale(128).unwrap()), t)
        .unwrap();
    // Instruction 3 is the store, at depth 0, indexed with depth-0's variable.
    let nki_lang::builder::BuildError::Rules(d) = b.finish().expect_err("must be rejected") else {
        panic!("expected rule violations")
    };
    assert_eq!(
        d,
        vec![diag(
            whole(3),
            malformed("index uses a loop that does not enclose it")
        )]
    );
}

#[test]
fn tile_in_hbm() {
    let mut b = ProgramBuilder::new("k", Target::Trn1);
    let out = b.output("out", DType::F32, &dims(&[128, 512])).unwrap();
    let h = b.tile("h", Memory::Hbm, DType::F32, &[128, 512]).unwrap();
    let r = b.tile("r", Memory::Sbuf, DType::F32, &[128, 512]).unwrap();
    b.memset(h, Scalar::float(0.0)).unwrap();
    b.memset(r, Scalar::float(0.0)).unwrap();
    b.store(Grid::origin(out), r).unwrap();
    let nki_lang::builder::BuildError::Rules(d) = b.finish().unwrap_err() else {
        panic!("expected rule violations")
    };
    assert_eq!(
        d,
        vec![
            diag(Site::Tile(0), malformed("a tile must live in SBUF or PSUM")),
            diag(
                operand(0, slot::DST),
                RuleViolation::WrongMemory {
                    op: "memset",
                    operand: "dst",
                    expected: "psum|sbuf",
                    found: Memory::Hbm,
                }
            ),
        ]
    );
}

/// An accumulation group over the loops in `loops` (bit `d` = the loop at depth `d`).
fn group(loops: u8) -> Write {
    Write::Group {
        loops,
        op: Alu::Add,
    }
}

/// A matmul at depth `depth` (inside that many one-trip loops) with the given write mode.
/// Instructions: loops, then memset s, memset m, nc_matmul, copy, store, then the ends.
fn matmul_at_depth(depth: usize, write: Write) -> ProgramBuilder {
    let mut b = ProgramBuilder::new("k", Target::Trn1);
    let out = b.output("out", DType::F32, &dims(&[128, 512])).unwrap();
    let s = b.tile("s", Memory::Sbuf, DType::Bf16, &[128, 128]).unwrap();
    let m = b.tile("m", Memory::Sbuf, DType::Bf16, &[128, 512]).unwrap();
    let d = b.tile("d", Memory::Psum, DType::F32, &[128, 512]).unwrap();
    let r = b.tile("r", Memory::Sbuf, DType::F32, &[128, 512]).unwrap();
    for l in 0..depth {
        b.begin_loop(LoopKind::Sequential, &format!("l{l}"), Extent::Fixed(2))
            .unwrap();
    }
    b.memset(s, Scalar::float(1.0)).unwrap();
    b.memset(m, Scalar::float(1.0)).unwrap();
    b.nc_matmul(d, s, m, write).unwrap();
    b.tensor_copy(r, d).unwrap();
    b.store(Grid::origin(out), r).unwrap();
    for _ in 0..depth {
        b.end_loop().unwrap();
    }
    b
}

#[test]
fn accumulation_group_over_a_loop_that_does_not_enclose_it() {
    // Bit 0 names the loop at depth 0: fine inside one loop.
    compile(matmul_at_depth(1, group(0b1)));
    // Outside any loop: instruction 2 is the matmul.
    let nki_lang::builder::BuildError::Rules(d) =
        matmul_at_depth(0, group(0b1)).finish().unwrap_err()
    else {
        panic!("expected rule violations")
    };
    let v = malformed("accumulation group names a loop that does not enclose it");
    assert_eq!(d, vec![diag(operand(2, slot::DST), v.clone())]);
    // Inside one loop, bit 1 names depth 1, which is not there: the matmul is instruction 3.
    let nki_lang::builder::BuildError::Rules(d) =
        matmul_at_depth(1, group(0b10)).finish().unwrap_err()
    else {
        panic!("expected rule violations")
    };
    assert_eq!(d, vec![diag(operand(3, slot::DST), v)]);
}

#[test]
fn output_after_a_scratch_tensor_in_the_tensor_table() {
    let mut p = looped();
    let at = p.tensors.len() - 1;
    p.tensors.insert(
        at,
        TensorBuf {
            name: "spill".into(),
            dtype: DType::F32,
            shape: dims(&[512, 512]),
            role: TensorRole::Scratch,
            scope: None,
            data: vec![],
        },
    );
    assert_eq!(
        buf_violations(p),
        vec![diag(
            Site::Program,
            malformed("outputs must precede scratch and constant tensors in the tensor table")
        )]
    );
}

#[test]
fn input_after_an_output_in_the_tensor_table() {
    let mut p = looped();
    p.tensors.push(TensorBuf {
        name: "late".into(),
        dtype: DType::F32,
        shape: dims(&[128]),
        role: TensorRole::Input,
        scope: None,
        data: vec![],
    });
    assert_eq!(
        buf_violations(p),
        vec![diag(
            Site::Program,
            malformed("inputs must precede outputs in the tensor table")
        )]
    );
}

#[test]
fn tensor_with_bad_rank_or_unknown_symbol() {
    // Tensor 0 is an input no instruction accesses (an accessed tensor of the wrong rank would
    // also break its accesses' rank); tensor 1 is `x`, whose access keeps its rank 2.
    let mut p = looped();
    let unused = TensorBuf {
        name: "unused".into(),
        dtype: DType::F32,
        shape: vec![],
        role: TensorRole::Input,
        scope: None,
        data: vec![],
    };
    insert_inputs_in_front(&mut p, vec![unused]);
    p.tensors[1].shape = vec![Dim::Sym(3), Dim::Fixed(512)];
    assert_eq!(
        buf_violations(p),
        vec![
            diag(Site::Tensor(0), malformed("tensor rank must be 1 to 6")),
            diag(Site::Tensor(1), malformed("symbol index out of range")),
        ]
    );
}

#[test]
fn too_many_symbols_or_tensors() {
    // Nine symbols, all bound by the inputs (ranks 5 and 4).
    let mut p = looped();
    p.symbols = (0..9).map(|s| format!("S{s}")).collect();
    let input = |name: &str, syms: std::ops::Range<u8>| TensorBuf {
        name: name.into(),
        dtype: DType::F32,
        shape: syms.map(Dim::Sym).collect(),
        role: TensorRole::Input,
        scope: None,
        data: vec![],
    };
    insert_inputs_in_front(&mut p, vec![input("a", 0..5), input("b", 5..9)]);
    assert_eq!(
        buf_violations(p),
        vec![diag(
            Site::Program,
            malformed("more than 8 symbolic dimensions")
        )]
    );

    // Seventeen tensors: sixteen extra inputs in front.
    let mut p = looped();
    let extra = (0..16)
        .rev()
        .map(|n| TensorBuf {
            name: format!("in{n}"),
            dtype: DType::F32,
            shape: dims(&[1]),
            role: TensorRole::Input,
            scope: None,
            data: vec![],
        })
        .collect();
    insert_inputs_in_front(&mut p, extra);
    assert_eq!(
        buf_violations(p),
        vec![diag(Site::Program, malformed("more than 16 HBM tensors"))]
    );
}

#[test]
fn partition_start_near_u32_max_is_rejected_not_overflowed() {
    let mut b = ProgramBuilder::new("k", Target::Trn1);
    let x = b.input("x", DType::F32, &dims(&[128, 512])).unwrap();
    let out = b.output("out", DType::F32, &dims(&[128, 512])).unwrap();
    let t = b.tile("t", Memory::Sbuf, DType::F32, &[128, 512]).unwrap();
    b.load(t, Grid::origin(x)).unwrap();
    b.store(Grid::origin(out), t).unwrap();
    let mut p = compile(b).source().clone();
    // u32::MAX - 63 + 128 wraps to 64 in u32 arithmetic.
    edit_view(&mut p, 0, Opcode::Load, slot::TILE, |dst| {
        dst.part_start = u32::MAX - 63
    });
    let result = std::panic::catch_unwind(|| p.finish());
    let d = result
        .expect("finish must not panic")
        .expect_err("a view 4 billion partitions past its tile must be rejected");
    assert_eq!(d[0].site, operand(0, slot::TILE));
    assert_eq!(
        d[0].violation,
        RuleViolation::OutOfBounds {
            tensor: "t".into(),
            axis: 0,
            lo: (u32::MAX - 63) as i64,
            hi: u32::MAX as i64 + 64,
            size: 128,
        }
    );
}

#[test]
fn instructions_keep_their_engines() {
    // Not a rule, but what every later stage relies on: the builder assigns each operation
    // NKI's engine.
    let p = looped();
    let engines: Vec<Engine> = p.instrs.iter().map(|i| i.engine).collect();
    assert_eq!(
        engines,
        vec![Engine::Sync, Engine::Dma, Engine::Dma, Engine::Sync]
    );
}

#[test]
fn tile_used_after_the_loop_that_declares_it() {
    // for i in range(4): t = x[128i + p, f] (t declared in the loop); afterwards: out = t.
    let mut b = ProgramBuilder::new("k", Target::Trn1);
    let x = b.input("x", DType::F32, &dims(&[512, 512])).unwrap();
    let out = b.output("out", DType::F32, &dims(&[128, 512])).unwrap();
    let i = b
        .begin_loop(LoopKind::Affine, "i", Extent::Fixed(4))
        .unwrap();
    let t = b.tile("t", Memory::Sbuf, DType::F32, &[128, 512]).unwrap();
    b.load(t, Grid::origin(x).at(0, i.checked_scale(128).unwrap()))
        .unwrap();
    b.end_loop().unwrap();
    b.store(Grid::origin(out), t).unwrap();
    let nki_lang::builder::BuildError::Rules(d) = b.finish().expect_err("must be rejected") else {
        panic!("expected rule violations")
    };
    assert_eq!(
        d,
        vec![diag(
            operand(3, slot::TILE),
            malformed("a tile is used outside the loop that declares it")
        )]
    );
}

#[test]
fn tile_scope_that_is_not_a_loop() {
    let mut p = looped();
    p.tiles[0].scope = Some(1);
    let outside = || malformed("a tile is used outside the loop that declares it");
    assert_eq!(
        buf_violations(p),
        vec![
            diag(operand(1, slot::TILE), outside()),
            diag(operand(2, slot::TILE), outside())
        ]
    );
}

#[test]
fn operand_in_a_slot_the_opcode_does_not_have() {
    // `tensor_scalar_cumulative` takes the Alu format's first four slots; a reduction's view
    // in slot 4 (which `tensor_scalar_reduce` fills) is not one of its operands.
    let mut b = ProgramBuilder::new("k", Target::Trn1);
    let t = b.tile("t", Memory::Sbuf, DType::F32, &[128, 64]).unwrap();
    b.memset(t, Scalar::float(1.0)).unwrap();
    b.tensor_scalar_cumulative(
        t,
        t,
        Alu::Add,
        nki_lang::builder::Operand::Imm(Scalar::float(1.0)),
        Alu::Add,
        nki_lang::builder::Operand::None,
    )
    .unwrap();
    let mut p = compile(b).source().clone();
    let at = p
        .instrs
        .iter()
        .position(|i| i.opcode == Opcode::TensorScalarCumulative)
        .unwrap();
    let InstrData::Alu {
        dst, ref mut acc, ..
    } = p.instrs[at].data
    else {
        unreachable!("the Alu format")
    };
    *acc = Some(nki_lang::AccOut {
        op: Alu::Add,
        view: dst.view,
    });
    assert_eq!(
        buf_violations(p),
        vec![diag(
            operand(at, 4),
            malformed("an operand in a slot the opcode does not have")
        )]
    );
}

/// `looped()` with its loop made the device loop `kind` (static trip `trip`).
fn device_looped(kind: LoopKind, trip: Extent) -> ProgramBuf {
    let mut p = looped();
    let InstrData::LoopBegin {
        kind: k, trip: t, ..
    } = &mut p.instrs[0].data
    else {
        panic!("instruction 0 is the loop")
    };
    (*k, *t) = (kind, trip);
    p
}

#[test]
fn an_index_using_a_device_loops_variable() {
    let dynamic = LoopKind::Dynamic {
        var: RegId(0),
        upper: RegId(1),
        step: 1,
    };
    let device = malformed("an index uses a device loop's variable (its value is a register)");
    for kind in [dynamic, LoopKind::While { cond: RegId(2) }] {
        assert_eq!(
            buf_violations(device_looped(kind, Extent::Fixed(1))),
            vec![
                diag(operand(1, 1), device.clone()),
                diag(operand(2, 1), device.clone())
            ]
        );
    }
}

#[test]
fn device_loops_with_bad_registers_steps_or_trips() {
    let bad =
        malformed("a device loop's register index is out of range or its step is not positive");
    let trip = malformed("a device loop's static trip count is not 1");
    let dynamic = |var: u16, step: i32| LoopKind::Dynamic {
        var: RegId(var),
        upper: RegId(1),
        step,
    };
    for (kind, t, want) in [
        (dynamic(0, 0), Extent::Fixed(1), bad.clone()),
        (dynamic(0, -2), Extent::Fixed(1), bad.clone()),
        (dynamic(64, 1), Extent::Fixed(1), bad.clone()),
        (LoopKind::While { cond: RegId(64) }, Extent::Fixed(1), bad),
        (dynamic(0, 1), Extent::Fixed(4), trip),
    ] {
        let mut p = nested_loops(1);
        let InstrData::LoopBegin {
            kind: k, trip: tr, ..
        } = &mut p.instrs[0].data
        else {
            panic!("instruction 0 is the loop")
        };
        (*k, *tr) = (kind, t);
        assert_eq!(buf_violations(p), vec![diag(whole(0), want)], "{kind:?}");
    }
}

#[test]
fn register_index_out_of_range() {
    let mut p = nested_loops(1);
    for (reg, src) in [
        (RegId(64), RegSrc::Imm(1)),
        (RegId(0), RegSrc::Reg(RegId(99))),
    ] {
        p.instrs.insert(
            1,
            Instr::new(
                Opcode::RegisterMove,
                InstrData::Register {
                    reg,
                    src,
                    tile: None,
                },
            ),
        );
    }
    // The loop's end moved two instructions on.
    let InstrData::LoopBegin { end, .. } = &mut p.instrs[0].data else {
        panic!("instruction 0 is the loop")
    };
    *end = 3;
    if let InstrData::LoopEnd { begin } = &mut p.instrs[3].data {
        *begin = 0;
    }
    let range = malformed("register index out of range");
    assert_eq!(
        buf_violations(p),
        vec![diag(whole(1), range.clone()), diag(whole(2), range)]
    );
}
