//! What a program's tiles are to its instructions, found once per launch: which instructions
//! read each tile, whether the Tensor engine does, and which tiles one load fills for matmuls
//! alone. The host's shortcuts decide their steps from these facts without scanning the
//! program.

use nki_lang::{Engine, Instr, InstrData, Opcode};

use crate::cpu::matmul::NARROW_COLUMNS;

/// The tile a view of the program belongs to.
pub(crate) fn tile_of(p: &nki_lang::Program<'_>, view: nki_lang::ViewId) -> Option<u16> {
    p.views().get(view.index()).map(|v| v.tile)
}

/// The readers of each tile of a program: the first and last instruction that reads it, and
/// whether the Tensor engine does. Computed once per launch into buffers the core keeps, so
/// that deciding a step does not scan the program.
#[derive(Clone, Debug, Default)]
pub(crate) struct Readers {
    /// By tile: its first and last reader, [`Readers::NONE`] when no instruction reads it.
    first_last: Vec<(u32, u32)>,
    /// Whether a Tensor-engine instruction reads the tile.
    by_tensor: Vec<bool>,
    /// By tile: the one instruction that writes it when that is a `load` outside every loop
    /// and every reader is a matmul outside every loop after it ([`Readers::NONE_WRITTEN`]
    /// otherwise; `host::input_tiles`).
    loaded_once: Vec<u32>,
    /// By tile: whether anything but a matmul outside every loop reads it.
    other_readers: Vec<bool>,
}

impl Readers {
    /// No instruction reads the tile.
    const NONE: (u32, u32) = (u32::MAX, 0);
    /// An instruction index that does not fit (it never counts as any one instruction).
    const TOO_FAR: u32 = u32::MAX;
    /// The tile is not loaded once for matmuls alone.
    const NONE_WRITTEN: u32 = u32::MAX;
    /// The tile has more than one writer, or one that is not such a load.
    const WRITTEN: u32 = u32::MAX - 1;

    /// Finds the readers of `p`'s tiles (reusing the buffers: no allocation once they have
    /// grown to the largest program's tile count).
    pub(crate) fn find(&mut self, p: &nki_lang::Program<'_>) {
        self.first_last.clear();
        self.first_last.resize(p.tiles().len(), Self::NONE);
        self.by_tensor.clear();
        self.by_tensor.resize(p.tiles().len(), false);
        self.loaded_once.clear();
        self.loaded_once.resize(p.tiles().len(), Self::NONE_WRITTEN);
        let other_readers = &mut self.other_readers;
        other_readers.clear();
        other_readers.resize(p.tiles().len(), false);
        let mut depth = 0usize;
        for (i, x) in p.instrs().iter().enumerate() {
            if matches!(x.data, InstrData::LoopBegin { .. }) {
                depth = depth.saturating_add(1);
            } else if matches!(x.data, InstrData::LoopEnd { .. }) {
                depth = depth.saturating_sub(1);
            }
            let i = u32::try_from(i).unwrap_or(Self::TOO_FAR);
            let top_load = depth == 0 && x.opcode == Opcode::Load && i < Self::WRITTEN;
            // A matmul with a narrow moving operand reads its operands in SBUF (the narrow
            // kernel's chains).
            let wide = if let InstrData::Matmul { moving, .. } = x.data {
                p.views()
                    .get(moving.index())
                    .is_some_and(|v| v.shape.free_elems() > NARROW_COLUMNS as u64)
            } else {
                false
            };
            let top_matmul = depth == 0 && x.opcode == Opcode::Matmul && wide;
            for o in x.operands() {
                let Some(t) = o.view().and_then(|v| tile_of(p, v)).map(usize::from) else {
                    continue;
                };
                if o.dir.writes()
                    && let Some(w) = self.loaded_once.get_mut(t)
                {
                    *w = match *w {
                        Self::NONE_WRITTEN if top_load => i,
                        _ => Self::WRITTEN,
                    };
                }
                if !o.dir.reads() {
                    continue;
                }
                let (Some(span), Some(tensor), Some(other)) = (
                    self.first_last.get_mut(t),
                    self.by_tensor.get_mut(t),
                    other_readers.get_mut(t),
                ) else {
                    continue;
                };
                *tensor |= x.engine == Engine::Tensor;
                *span = (span.0.min(i), span.1.max(i));
                *other |= !top_matmul;
            }
        }
        // Loaded once, read after it by matmuls alone, at least one.
        for ((w, other), &(first, _)) in self
            .loaded_once
            .iter_mut()
            .zip(&self.other_readers)
            .zip(&self.first_last)
        {
            if *w >= Self::WRITTEN || *other || first == Self::NONE.0 || first <= *w {
                *w = Self::NONE_WRITTEN;
            }
        }
    }

    /// Whether tile `tile` is written by the load at `pc` alone, outside every loop, and read
    /// by matmuls alone, outside every loop and after it (at least one).
    pub(crate) fn loaded_once(&self, tile: u16, pc: usize) -> bool {
        self.loaded_once
            .get(usize::from(tile))
            .is_some_and(|&w| usize::try_from(w).is_ok_and(|w| w == pc))
    }

    /// Whether every instruction of the program that reads tile `tile` is among `instrs`
    /// (none reads it, or its first and last readers are).
    pub(crate) fn all_among(&self, tile: u16, instrs: core::ops::Range<usize>) -> bool {
        match self.first_last.get(usize::from(tile)) {
            Some(&Self::NONE) => true,
            Some(&(first, last)) => {
                let among = |i: u32| usize::try_from(i).is_ok_and(|i| instrs.contains(&i));
                last != Self::TOO_FAR && among(first) && among(last)
            }
            None => false,
        }
    }

    /// Whether no instruction of the program but the one at `except` reads tile `tile`.
    pub(crate) fn only(&self, tile: u16, except: usize) -> bool {
        self.all_among(tile, except..except.saturating_add(1))
    }

    /// Whether `ins` may split its rows with a far worker: not a load whose tile a
    /// Tensor-engine instruction reads. Those of SBUF operands never split with a far worker
    /// (their halves share their operands), so the matmul would read the worker's half of the
    /// tile from the other core's cache: in the far placement of a Zen 5 guest the NKI Library
    /// router took 1.49–1.55 ms on two threads so, against 1.30–1.33 ms on one (its loads are
    /// now skipped altogether: `host::input_tiles`).
    pub(crate) fn far_split(&self, p: &nki_lang::Program<'_>, ins: &Instr) -> bool {
        match (ins.opcode, ins.data) {
            (Opcode::Load, InstrData::Dma { tile: view, .. }) => !tile_of(p, view)
                .and_then(|t| self.by_tensor.get(usize::from(t)))
                .copied()
                .unwrap_or(false),
            _ => true,
        }
    }
}

#[cfg(test)]
mod tests {
    use nki_lang::builder::{Grid, ProgramBuilder};
    use nki_lang::{DType, Dim, Extent, LoopKind, Memory, Opcode, Target, Write};

    use super::Readers;

    /// A load whose tile the Tensor engine reads (a transpose) does not split with a far
    /// worker; a load only the Vector engine reads does, and so does any other instruction.
    #[test]
    fn loads_into_the_tensor_engine_stay_on_the_calling_thread_when_far() {
        let mut b = ProgramBuilder::new("far_split", Target::Trn1);
        let dims = [Dim::Fixed(128), Dim::Fixed(128)];
        let x = b.input("x", DType::F32, &dims).unwrap();
        let y = b.input("y", DType::F32, &dims).unwrap();
        let out = b.output("out", DType::F32, &dims).unwrap();
        let to_tensor = b.tile("a", Memory::Sbuf, DType::F32, &[128, 128]).unwrap();
        let to_vector = b.tile("b", Memory::Sbuf, DType::F32, &[128, 128]).unwrap();
        let transposed = b.tile("t", Memory::Psum, DType::F32, &[128, 128]).unwrap();
        let copied = b.tile("c", Memory::Sbuf, DType::F32, &[128, 128]).unwrap();
        b.load(to_tensor, Grid::origin(x)).unwrap();
        b.load(to_vector, Grid::origin(y)).unwrap();
        b.nc_transpose(transposed, to_tensor).unwrap();
        b.tensor_copy(copied, to_vector).unwrap();
        b.store(Grid::origin(out), copied).unwrap();
        let compiled = b.finish().unwrap();
        let parts = compiled.parts();
        let p = parts.program();
        let mut readers = Readers::default();
        readers.find(&p);
        let splits: Vec<(Opcode, bool)> = p
            .instrs()
            .iter()
            .map(|ins| (ins.opcode, readers.far_split(&p, ins)))
            .collect();
        assert_eq!(
            splits,
            [
                (Opcode::Load, false),
                (Opcode::Load, true),
                (Opcode::Transpose, true),
                (Opcode::TensorCopy, true),
                (Opcode::Store, true),
            ]
        );
    }

    /// A tile loaded once outside every loop for wide matmuls alone is `loaded_once` at its
    /// load; not one also read by a copy, loaded twice, loaded in a loop, read by a matmul in
    /// a loop, or read by a narrow matmul.
    #[test]
    fn tiles_loaded_once_for_wide_matmuls() {
        let mut b = ProgramBuilder::new("loaded_once", Target::Trn1);
        let x = b
            .input("x", DType::F32, &[Dim::Fixed(128), Dim::Fixed(128)])
            .unwrap();
        let n = b
            .input("n", DType::F32, &[Dim::Fixed(128), Dim::Fixed(4)])
            .unwrap();
        let sbuf = |b: &mut ProgramBuilder, name: &str, cols: u32| {
            b.tile(name, Memory::Sbuf, DType::F32, &[128, cols])
                .unwrap()
        };
        let [once, copied, twice, looped, late, narrow_st] =
            ["once", "copied", "twice", "looped", "late", "narrow_st"]
                .map(|t| sbuf(&mut b, t, 128));
        let narrow = sbuf(&mut b, "narrow", 4);
        let out = sbuf(&mut b, "out", 128);
        let acc = b
            .tile("acc", Memory::Psum, DType::F32, &[128, 128])
            .unwrap();
        let acc4 = b.tile("acc4", Memory::Psum, DType::F32, &[128, 4]).unwrap();
        for t in [once, copied, twice, late, narrow_st] {
            b.load(t, Grid::origin(x)).unwrap();
        }
        b.load(narrow, Grid::origin(n)).unwrap();
        b.load(twice, Grid::origin(x)).unwrap();
        b.begin_loop(LoopKind::Affine, "i", Extent::Fixed(2))
            .unwrap();
        b.load(looped, Grid::origin(x)).unwrap();
        b.nc_matmul(acc, looped, looped, Write::Overwrite).unwrap();
        b.nc_matmul(acc, late, late, Write::Overwrite).unwrap();
        b.end_loop().unwrap();
        for (st, mv) in [(once, once), (copied, copied), (twice, twice)] {
            b.nc_matmul(acc, st, mv, Write::Overwrite).unwrap();
        }
        b.nc_matmul(acc4, narrow_st, narrow, Write::Overwrite)
            .unwrap();
        b.tensor_copy(out, copied).unwrap();
        let compiled = b.finish().unwrap();
        let parts = compiled.parts();
        let p = parts.program();
        let mut readers = Readers::default();
        readers.find(&p);
        let tile = |name: &str| p.tiles().iter().position(|t| t.name == name).unwrap() as u16;
        let loads: Vec<(String, bool)> = p
            .instrs()
            .iter()
            .enumerate()
            .filter(|(_, ins)| ins.opcode == Opcode::Load)
            .map(|(pc, ins)| {
                let nki_lang::InstrData::Dma { tile: view, .. } = ins.data else {
                    unreachable!("a load")
                };
                let t = p.views()[view.index()].tile;
                let name = p.tiles()[usize::from(t)].name.to_string();
                let once = readers.loaded_once(t, pc);
                (name, once)
            })
            .collect();
        let want: Vec<(String, bool)> = [
            ("once", true),
            ("copied", false),
            ("twice", false),
            ("late", false),
            ("narrow_st", false),
            ("narrow", false),
            ("twice", false),
            ("looped", false),
        ]
        .iter()
        .map(|&(n, o)| (n.to_string(), o))
        .collect();
        assert_eq!(loads, want);
        // At its own load only.
        assert!(!readers.loaded_once(tile("once"), 1));
    }
}
