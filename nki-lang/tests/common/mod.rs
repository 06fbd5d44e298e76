//! Helpers shared by the integration tests: literal shapes, finishing a program and
//! collecting its diagnostics, naming an instruction operand's site, and editing one
//! instruction's pooled operand in a hand-edited program.

// Each test file uses only some of the helpers.
#![allow(dead_code)]

use nki_lang::builder::{BuildError, ProgramBuilder};
use nki_lang::{
    CompiledProgram, Diagnostic, Dim, HbmAccess, InstrData, Opcode, OperandRef, ProgramBuf, Site,
    TileView, ViewId,
};

/// Operand slots, numbered as the formats number them (see `InstrData`'s variants; the names
/// are the opcode table's, `OpInfo::operands`).
pub mod slot {
    /// `load`'s and `store`'s tile (`load`: `dst`, `store`: `value`).
    pub const TILE: u8 = 0;
    /// `load`'s and `store`'s HBM access (`load`: `src`, `store`: `dst`).
    pub const HBM: u8 = 1;
    /// The destination of `nc_matmul`, `nc_transpose`, `tensor_copy` and `memset`.
    pub const DST: u8 = 0;
    /// The source of `nc_transpose` (`data`) and `tensor_copy` (`src`).
    pub const SRC: u8 = 1;
    /// `nc_matmul`'s stationary operand.
    pub const STATIONARY: u8 = 1;
    /// `nc_matmul`'s moving operand.
    pub const MOVING: u8 = 2;
}

/// A tensor shape of literal dimensions.
pub fn dims(sizes: &[u64]) -> Vec<Dim> {
    sizes.iter().map(|&n| Dim::Fixed(n)).collect()
}

/// Finishes a program that must pass every rule.
pub fn compile(b: ProgramBuilder) -> CompiledProgram {
    b.finish()
        .unwrap_or_else(|e| panic!("expected a valid program, got {e:?}"))
}

/// Finishes a program that must break rules; returns the diagnostics.
pub fn violations(b: ProgramBuilder) -> Vec<Diagnostic> {
    match b.finish() {
        Err(BuildError::Rules(d)) => d,
        Ok(_) => panic!("expected rule violations, but the program compiled"),
        Err(e) => panic!("expected rule violations, got {e:?}"),
    }
}

/// Finishes a hand-edited [`ProgramBuf`] that must break rules; returns the diagnostics.
pub fn buf_violations(p: ProgramBuf) -> Vec<Diagnostic> {
    match p.finish() {
        Err(d) => d,
        Ok(_) => panic!("expected rule violations, but the program compiled"),
    }
}

/// The site of operand `slot` of instruction `instr`.
pub fn operand(instr: usize, slot: u8) -> Site {
    Site::Operand { instr, slot }
}

/// The site of instruction `instr` as a whole.
pub fn whole(instr: usize) -> Site {
    Site::Instr(instr)
}

/// A diagnostic, for comparing whole lists.
pub fn diag(site: Site, violation: nki_lang::RuleViolation) -> Diagnostic {
    Diagnostic { site, violation }
}

/// Edits the view in operand `slot` of instruction `instr` (which must be a `opcode`).
///
/// Views are pooled and an equal view is stored once, so the view an instruction uses may be
/// shared with others: the edited copy is added to the pool and only this operand is pointed
/// at it, as editing the operand of one instruction used to do.
pub fn edit_view(
    p: &mut ProgramBuf,
    instr: usize,
    opcode: Opcode,
    slot: u8,
    edit: impl FnOnce(&mut TileView),
) {
    let ins = p.instrs[instr];
    assert_eq!(
        ins.opcode,
        opcode,
        "instruction {instr} is the {}",
        opcode.info().name
    );
    let Some(OperandRef::View(id)) = ins.operands().get(slot as usize).map(|o| o.operand) else {
        panic!("operand {slot} of instruction {instr} is not a tile view")
    };
    let mut v = p.views[id.index()];
    edit(&mut v);
    let id = p.add_view(v).expect("room in the view pool");
    p.instrs[instr].data = with_view(ins.data, slot, id);
}

/// Edits the HBM access of `load` or `store` instruction `instr` (which must be a `opcode`),
/// for this instruction only (see [`edit_view`]).
pub fn edit_access(
    p: &mut ProgramBuf,
    instr: usize,
    opcode: Opcode,
    edit: impl FnOnce(&mut HbmAccess),
) {
    let ins = p.instrs[instr];
    assert_eq!(
        ins.opcode,
        opcode,
        "instruction {instr} is the {}",
        opcode.info().name
    );
    let InstrData::Dma { tile, hbm } = ins.data else {
        panic!("instruction {instr} is not a DMA")
    };
    let mut a = p.accesses[hbm.index()];
    edit(&mut a);
    let hbm = p.add_access(a).expect("room in the access pool");
    p.instrs[instr].data = InstrData::Dma { tile, hbm };
}

/// The view of operand `slot` of instruction `instr`.
pub fn view_of(p: &ProgramBuf, instr: usize, slot: u8) -> TileView {
    match p.instrs[instr]
        .operands()
        .get(slot as usize)
        .map(|o| o.operand)
    {
        Some(OperandRef::View(id)) => p.views[id.index()],
        _ => panic!("operand {slot} of instruction {instr} is not a tile view"),
    }
}

/// `data` with the view in `slot` replaced by `id`.
fn with_view(data: InstrData, slot: u8, id: ViewId) -> InstrData {
    match (data, slot) {
        (InstrData::Dma { hbm, .. }, 0) => InstrData::Dma { tile: id, hbm },
        (InstrData::Unary { dst, .. }, 1) => InstrData::Unary { dst, src: id },
        (InstrData::Matmul { dst, moving, .. }, 1) => InstrData::Matmul {
            dst,
            stationary: id,
            moving,
        },
        (
            InstrData::Matmul {
                dst, stationary, ..
            },
            2,
        ) => InstrData::Matmul {
            dst,
            stationary,
            moving: id,
        },
        (data, 0) if data.dst().is_some() => data.with_dst_view(id),
        (data, slot) => panic!("no view in slot {slot} of {data:?}"),
    }
}
