//! The timing model on small programs built with `ProgramBuilder`: hand-computed schedules
//! (one load, one matmul, a dependency chain across engines, DMA overlapping compute, two
//! matmuls sharing a PSUM bank, an activation-table switch), monotonicity, the Chrome trace,
//! and timing-only runs agreeing with full runs.
//!
//! Every expected time below is worked out from the Trn1 table (`Params::TRN1`), in
//! picoseconds: `cyc(c, mhz)` is `c` cycles at `mhz` rounded to the nearest ps, `dma(b)` the
//! time of one engine moving `b` bytes at 17 B/ns rounded up.

use nki_lang::builder::{Grid, Operand, ProgramBuilder, TileId};
use nki_lang::{
    ActFn, Alu, CompiledProgram, DType, Dim, Dst, Engine, Extent, Instr, InstrData, LoopKind,
    Memory, Opcode, Scalar, Src, Target, TileShape, TileView, Write,
};
use nki_runtime::timing::{
    Benchmark, Detail, Kind, Mode, Params, Record, Schedule, Scheduling, Timing, TimingError, Track,
};
use nki_runtime::{DeviceTensor, Kernel, NeuronCore};

/// `c` cycles at `mhz`, in ps rounded to nearest.
fn cyc(c: u64, mhz: u64) -> u64 {
    (c * 1_000_000 + mhz / 2) / mhz
}

/// One DMA engine moving `bytes` (payload plus descriptor overhead) at 17 B/ns, in ps.
fn dma(bytes: u64) -> u64 {
    (bytes * 1_000_000).div_ceil(17_000)
}

/// Trn1's fixed times, ps.
const ISSUE: u64 = 50_000;
const LATENCY: u64 = 1_300_000;
const DESC: u64 = 228;
/// Each engine's time per transfer beyond its descriptors (`dma_transfer_overhead_ns`).
const TRANSFER: u64 = 360_000;

/// The data phase of a `[128, F]` transfer with rows of `row` bytes, one descriptor per row:
/// each of the 16 engines moves 8 rows.
fn rows(row: u64) -> u64 {
    dma(8 * row + 8 * DESC) + TRANSFER
}

fn fixed(n: u64) -> Dim {
    Dim::Fixed(n)
}

/// Times `c` (timing only, traced) on placeholder inputs of `shapes`.
/// The program as allocated and ordered: the mechanics these tests pin (the device schedule
/// has its own tests in `device_schedule.rs`).
fn program_order() -> Timing {
    Timing::new().scheduling(Scheduling::ProgramOrder { buffers: 1 })
}

fn time(c: &CompiledProgram, shapes: &[&[usize]]) -> Schedule {
    time_with(c, shapes, program_order().detail(Detail::Trace))
}

fn time_with(c: &CompiledProgram, shapes: &[&[usize]], t: Timing) -> Schedule {
    let mut core = NeuronCore::new(Target::Trn1).with_host_threads(1);
    let parts = c.parts();
    t.run_shapes(&mut core, &Kernel::new(parts.program()), shapes)
        .unwrap()
}

/// The record of instruction `pc` of kind `kind`.
fn rec(s: &Schedule, pc: u32, kind: Kind) -> Record {
    *s.records()
        .iter()
        .find(|r| r.pc == pc && r.kind == kind)
        .unwrap_or_else(|| panic!("no {kind:?} record for pc {pc}"))
}

/// `x [128, F] dtype` loaded, `body` applied, the tile it returns stored.
fn elementwise(
    dtype: DType,
    f: u32,
    body: impl FnOnce(&mut ProgramBuilder, TileId) -> TileId,
) -> CompiledProgram {
    let mut b = ProgramBuilder::new("elementwise", Target::Trn1);
    let x = b.input("x", dtype, &[fixed(128), fixed(f as u64)]).unwrap();
    let out = b
        .output("out", dtype, &[fixed(128), fixed(f as u64)])
        .unwrap();
    let t = b.tile("t", Memory::Sbuf, dtype, &[128, f]).unwrap();
    b.load(t, Grid::origin(x)).unwrap();
    let r = body(&mut b, t);
    b.store(Grid::origin(out), r).unwrap();
    b.finish().unwrap()
}

#[test]
fn one_load() {
    // load [128, 512] bf16, then store it back.
    let c = elementwise(DType::Bf16, 512, |_, t| t);
    let s = time(&c, &[&[128, 512]]);
    // The trigger on Sync, 50 ns; the data after the 1.3 µs fixed latency: 16 engines, 8
    // rows of 1 KiB each (one descriptor per row).
    let trig = rec(&s, 0, Kind::DmaTrigger);
    assert_eq!((trig.start, trig.end), (0, ISSUE));
    let load = rec(&s, 0, Kind::DmaTransfer);
    let data = rows(1024);
    assert_eq!(data, 589_177 + TRANSFER);
    assert_eq!(load.done, ISSUE + LATENCY + data);
    assert_eq!(load.wait, LATENCY);
    // The store waits for the load (read after write), then the same again.
    let store = rec(&s, 1, Kind::DmaTransfer);
    assert_eq!(rec(&s, 1, Kind::DmaTrigger).start, load.done);
    assert_eq!(store.done, load.done + ISSUE + LATENCY + data);
    assert_eq!(s.total_ps(), 4_598_354);
    assert_eq!(s.hbm_read_bytes(), 128 * 1024);
    assert_eq!(s.hbm_write_bytes(), 128 * 1024);
    assert_eq!(s.dma_transfers(), 2);
}

/// `nc_matmul` of a `[128, 128]` and a `[128, 512]` bf16 tile, evicted by VectorE and stored.
fn seed() -> CompiledProgram {
    let mut b = ProgramBuilder::new("matmul_basic", Target::Trn1);
    let lhs_t = b
        .input("lhs_t", DType::Bf16, &[fixed(128), fixed(128)])
        .unwrap();
    let rhs = b
        .input("rhs", DType::Bf16, &[fixed(128), fixed(512)])
        .unwrap();
    let out = b
        .output("result", DType::Bf16, &[fixed(128), fixed(512)])
        .unwrap();
    let a = b
        .tile("lhs_tile", Memory::Sbuf, DType::Bf16, &[128, 128])
        .unwrap();
    let x = b
        .tile("rhs_tile", Memory::Sbuf, DType::Bf16, &[128, 512])
        .unwrap();
    let acc = b
        .tile("acc", Memory::Psum, DType::F32, &[128, 512])
        .unwrap();
    let res = b
        .tile("res", Memory::Sbuf, DType::Bf16, &[128, 512])
        .unwrap();
    b.load(a, Grid::origin(lhs_t)).unwrap();
    b.load(x, Grid::origin(rhs)).unwrap();
    b.nc_matmul(acc, a, x, Write::Overwrite).unwrap();
    b.tensor_copy(res, acc).unwrap();
    b.store(Grid::origin(out), res).unwrap();
    b.finish().unwrap()
}

#[test]
fn one_matmul() {
    let c = seed();
    let s = time(&c, &[&[128, 128], &[128, 512]]);
    // lhs: 8 rows of 256 B per engine.
    let lhs = rec(&s, 0, Kind::DmaTransfer);
    assert_eq!(lhs.done, ISSUE + LATENCY + rows(256));
    assert_eq!(lhs.done, 1_937_765);
    // rhs: triggered right after, its data waits for the engines to finish lhs.
    let rhs = rec(&s, 1, Kind::DmaTransfer);
    assert_eq!(rec(&s, 1, Kind::DmaTrigger).start, ISSUE);
    assert_eq!(rhs.done, lhs.done + rows(1024));
    // LoadStationary: max(128, 64) / 4 = 32 PE cycles at 2.8 GHz, once lhs is in.
    let ls = rec(&s, 2, Kind::LoadStationary);
    assert_eq!((ls.start, ls.end), (lhs.done, lhs.done + cyc(32, 2800)));
    assert_eq!(ls.track, Track::Tensor);
    // MultiplyMoving: max(512, 64) + 64 start cycles = 576 PE cycles once rhs is in; the
    // result 150 ns later.
    let mm = rec(&s, 2, Kind::MultiplyMoving);
    assert_eq!(mm.track, Track::TensorMatrix);
    assert_eq!(mm.start, rhs.done);
    assert_eq!(mm.end, rhs.done + cyc(576, 2800));
    assert_eq!(mm.done, mm.end + 150_000);
    // The PSUM → SBUF copy on VectorE: max(64, 512) cycles and the 100-cycle static overhead
    // at 1.12 GHz, visible at its end.
    let copy = rec(&s, 3, Kind::Instruction);
    assert_eq!(copy.start, mm.done);
    assert_eq!(copy.end, mm.done + cyc(512 + 100, 1120));
    assert_eq!(copy.done, copy.end);
    let store = rec(&s, 4, Kind::DmaTransfer);
    assert_eq!(store.done, copy.done + ISSUE + LATENCY + rows(1024));
    assert_eq!(s.total_ps(), 6_088_262);
    assert_eq!(s.flops(), 2 * 128 * 128 * 512);
    // MFU: 16.8 MFLOP in 6.088 µs of a 91.75 TFLOPS peak.
    let p = s.profile();
    assert!((p.mfu - 2.0 * 128.0 * 128.0 * 512.0 / (91.7504e12 * 6.088262e-6)).abs() < 1e-6);
    assert_eq!(s.opcode_count(Engine::Tensor, Opcode::Matmul), 1);
    assert_eq!(s.opcode_count(Engine::Dma, Opcode::Load), 2);
}

/// A `tensor_scalar` on GpSimd (the builder's helper uses VectorE).
fn gpsimd_scale(b: &mut ProgramBuilder, dst: TileId, src: TileId, shape: &[u32]) {
    let shape = TileShape::new(shape).unwrap();
    let d = b.view(TileView::whole(dst.index(), &shape)).unwrap();
    let s = b.view(TileView::whole(src.index(), &shape)).unwrap();
    let mut ins = Instr::new(
        Opcode::TensorScalar,
        InstrData::Alu {
            dst: Dst::overwrite(d),
            src: [Src::Tile(s), Src::Imm(Scalar::float(0.5)), Src::None],
            op: [Alu::Multiply, Alu::Bypass],
            rev: 0,
            acc: None,
        },
    );
    ins.engine = Engine::GpSimd;
    b.push(ins).unwrap();
}

#[test]
fn dependency_chain_across_engines() {
    // load → VectorE tensor_scalar → ScalarE exp → GpSimdE tensor_scalar → store, f32.
    let c = elementwise(DType::F32, 512, |b, t| {
        let y = b.tile("y", Memory::Sbuf, DType::F32, &[128, 512]).unwrap();
        let z = b.tile("z", Memory::Sbuf, DType::F32, &[128, 512]).unwrap();
        let w = b.tile("w", Memory::Sbuf, DType::F32, &[128, 512]).unwrap();
        let two = Operand::Imm(Scalar::float(2.0));
        b.tensor_scalar(y, t, Alu::Multiply, two, Alu::Bypass, Operand::None)
            .unwrap();
        let one = Operand::Imm(Scalar::float(1.0));
        b.activation(z, ActFn::Exp, y, one, Operand::None).unwrap();
        gpsimd_scale(b, w, z, &[128, 512]);
        w
    });
    let s = time(&c, &[&[128, 512]]);
    // The load: 8 rows of 2 KiB per engine.
    let load = rec(&s, 0, Kind::DmaTransfer);
    assert_eq!(load.done, ISSUE + LATENCY + rows(2048));
    let v = rec(&s, 1, Kind::Instruction);
    assert_eq!((v.track, v.start), (Track::Vector, load.done));
    assert_eq!(v.done, load.done + cyc(512, 1120) + cyc(100, 1120));
    // The exp table loads at the start, hidden behind the load.
    let table = rec(&s, 2, Kind::TableLoad);
    assert_eq!((table.start, table.end), (0, 1_300_000));
    let a = rec(&s, 2, Kind::Instruction);
    assert_eq!((a.track, a.start), (Track::Scalar, v.done));
    assert_eq!(a.done, v.done + cyc(512, 1400) + cyc(100, 1400));
    // GpSimd: 150 + N cycles at 1.4 GHz.
    let g = rec(&s, 3, Kind::Instruction);
    assert_eq!((g.track, g.start), (Track::GpSimd, a.done));
    assert_eq!(g.done, a.done + cyc(150 + 512, 1400) + cyc(100, 1400));
    let store = rec(&s, 4, Kind::DmaTransfer);
    assert_eq!(store.done, g.done + ISSUE + LATENCY + rows(2048));
    assert_eq!(s.total_ps(), 7_089_976);
    // Every step waits for the previous one: the critical path is the whole chain.
    let cp = s.critical_path_by_track().unwrap();
    assert_eq!(cp.idle, 0);
    assert_eq!(
        cp.engines.iter().sum::<u64>() + cp.dma,
        s.total_ps(),
        "{cp:?}"
    );
    // The GpSimd step (index 5 of `Track::ENGINES`) is on it.
    assert_eq!(Track::ENGINES[5], Track::GpSimd);
    assert!(cp.engines[5] >= cyc(150 + 512, 1400));
}

#[test]
fn dma_overlaps_compute() {
    // load a, load b, reciprocal of a (long: 8N cycles), store 1/a, store b.
    let mut b = ProgramBuilder::new("overlap", Target::Trn1);
    let shape = [fixed(128), fixed(512)];
    let ia = b.input("a", DType::F32, &shape).unwrap();
    let ib = b.input("b", DType::F32, &shape).unwrap();
    let oa = b.output("ra", DType::F32, &shape).unwrap();
    let ob = b.output("rb", DType::F32, &shape).unwrap();
    let ta = b.tile("ta", Memory::Sbuf, DType::F32, &[128, 512]).unwrap();
    let tb = b.tile("tb", Memory::Sbuf, DType::F32, &[128, 512]).unwrap();
    let ra = b.tile("ra", Memory::Sbuf, DType::F32, &[128, 512]).unwrap();
    b.load(ta, Grid::origin(ia)).unwrap();
    b.load(tb, Grid::origin(ib)).unwrap();
    let (d, s) = (
        b.view(TileView::whole(
            ra.index(),
            &TileShape::new(&[128, 512]).unwrap(),
        ))
        .unwrap(),
        b.view(TileView::whole(
            ta.index(),
            &TileShape::new(&[128, 512]).unwrap(),
        ))
        .unwrap(),
    );
    b.push(Instr::new(
        Opcode::Reciprocal,
        InstrData::Unary {
            dst: Dst::overwrite(d),
            src: s,
        },
    ))
    .unwrap();
    b.store(Grid::origin(oa), ra).unwrap();
    b.store(Grid::origin(ob), tb).unwrap();
    let c = b.finish().unwrap();
    let s = time(&c, &[&[128, 512], &[128, 512]]);
    let la = rec(&s, 0, Kind::DmaTransfer);
    let lb = rec(&s, 1, Kind::DmaTransfer);
    let r = rec(&s, 2, Kind::Instruction);
    let data = rows(2048);
    assert_eq!(la.done, ISSUE + LATENCY + data);
    // b's data follows a's on the engines, while VectorE computes 1/a.
    assert_eq!(lb.done, la.done + data);
    assert_eq!(r.start, la.done);
    assert_eq!(r.end, la.done + cyc(8 * 512 + 100, 1120));
    assert!(lb.start + lb.wait < r.end && lb.done > r.start, "overlap");
    // The stores: 1/a after the reciprocal; b behind it on the Sync queue.
    let sa = rec(&s, 3, Kind::DmaTransfer);
    let sb = rec(&s, 4, Kind::DmaTransfer);
    assert_eq!(sa.done, r.done + ISSUE + LATENCY + data);
    assert_eq!(sb.done, sa.done + data);
    // Overlapped: less than the parts one after the other.
    let serial = 2 * (ISSUE + LATENCY + data) + (r.done - r.start) + 2 * (ISSUE + LATENCY + data);
    assert!(s.total_ps() < serial);
    assert_eq!(s.total_ps(), 10_739_606);
}

/// `dma_overlaps_compute`'s program (load a, load b, 1/a, store 1/a, store b) with the
/// scheduling control of `ProgramBuilder`: the loads in a `no_reorder` block, and the store
/// of b made to wait for the reciprocal (`schedule("store_b", "recip")`).
fn overlap_controlled(control: bool) -> CompiledProgram {
    let mut b = ProgramBuilder::new("overlap_controlled", Target::Trn1);
    let shape = [fixed(128), fixed(512)];
    let ia = b.input("a", DType::F32, &shape).unwrap();
    let ib = b.input("b", DType::F32, &shape).unwrap();
    let oa = b.output("ra", DType::F32, &shape).unwrap();
    let ob = b.output("rb", DType::F32, &shape).unwrap();
    let ta = b.tile("ta", Memory::Sbuf, DType::F32, &[128, 512]).unwrap();
    let tb = b.tile("tb", Memory::Sbuf, DType::F32, &[128, 512]).unwrap();
    let ra = b.tile("ra", Memory::Sbuf, DType::F32, &[128, 512]).unwrap();
    let first = b.instr_count();
    b.load(ta, Grid::origin(ia)).unwrap();
    b.load(tb, Grid::origin(ib)).unwrap();
    if control {
        b.no_reorder_since(first).unwrap();
    }
    let whole = TileShape::new(&[128, 512]).unwrap();
    let d = b.view(TileView::whole(ra.index(), &whole)).unwrap();
    let src = b.view(TileView::whole(ta.index(), &whole)).unwrap();
    let at = b.instr_count();
    b.push(Instr::new(
        Opcode::Reciprocal,
        InstrData::Unary {
            dst: Dst::overwrite(d),
            src,
        },
    ))
    .unwrap();
    b.name_since("recip", at).unwrap();
    b.store(Grid::origin(oa), ra).unwrap();
    let at = b.instr_count();
    b.store(Grid::origin(ob), tb).unwrap();
    b.name_since("store_b", at).unwrap();
    if control {
        b.schedule("store_b", "recip").unwrap();
        // The rules: an edge goes forward, between names the program has.
        assert!(b.schedule("recip", "store_b").is_err());
        assert!(b.schedule("store_b", "nothing").is_err());
        assert!(b.name_since("recip", at).is_err());
    }
    b.finish().unwrap()
}

#[test]
fn builder_scheduling_control_orders_the_schedule() {
    for scheduling in [
        Scheduling::ProgramOrder { buffers: 1 },
        Scheduling::default(),
    ] {
        let t = || Timing::new().scheduling(scheduling).detail(Detail::Trace);
        let free = time_with(&overlap_controlled(false), &[&[128, 512], &[128, 512]], t());
        let ctl = time_with(&overlap_controlled(true), &[&[128, 512], &[128, 512]], t());
        // Free, b's load is triggered before a's completes and b's store does not wait for
        // the reciprocal; controlled, both wait.
        let (la, lb) = (
            rec(&free, 0, Kind::DmaTrigger),
            rec(&free, 1, Kind::DmaTrigger),
        );
        assert!(
            lb.start < rec(&free, 0, Kind::DmaTransfer).done,
            "{la:?} {lb:?}"
        );
        if scheduling != (Scheduling::ProgramOrder { buffers: 1 }) {
            // (In program order the store of b waits behind the store of 1/a on Sync.)
            assert!(rec(&free, 4, Kind::DmaTrigger).start < rec(&free, 2, Kind::Instruction).done);
        }
        let a_done = rec(&ctl, 0, Kind::DmaTransfer).done;
        assert!(rec(&ctl, 1, Kind::DmaTrigger).start >= a_done);
        let recip = rec(&ctl, 2, Kind::Instruction);
        let store_b = rec(&ctl, 4, Kind::DmaTrigger);
        assert!(store_b.start >= recip.done);
        assert_eq!(ctl.instr_name(2), Some("recip"));
        assert_eq!(ctl.instr_name(4), Some("store_b"));
        assert_eq!(ctl.instr_name(3), None);
        assert!(ctl.total_ps() >= free.total_ps());
    }
}

/// Two matmuls of the same operands, each evicted by VectorE; `shared`: into the same PSUM
/// tile (bank), each evicted before the next matmul; else both matmuls first, into two tiles
/// live at once (so the allocator gives them two banks), then both evictions.
fn two_matmuls(shared: bool) -> CompiledProgram {
    let mut b = ProgramBuilder::new("two_matmuls", Target::Trn1);
    let lhs_t = b
        .input("lhs_t", DType::Bf16, &[fixed(128), fixed(128)])
        .unwrap();
    let rhs = b
        .input("rhs", DType::Bf16, &[fixed(128), fixed(512)])
        .unwrap();
    let o1 = b
        .output("o1", DType::Bf16, &[fixed(128), fixed(512)])
        .unwrap();
    let o2 = b
        .output("o2", DType::Bf16, &[fixed(128), fixed(512)])
        .unwrap();
    let a = b.tile("a", Memory::Sbuf, DType::Bf16, &[128, 128]).unwrap();
    let x = b.tile("x", Memory::Sbuf, DType::Bf16, &[128, 512]).unwrap();
    let acc1 = b
        .tile("acc1", Memory::Psum, DType::F32, &[128, 512])
        .unwrap();
    let acc2 = if shared {
        acc1
    } else {
        b.tile("acc2", Memory::Psum, DType::F32, &[128, 512])
            .unwrap()
    };
    let r1 = b
        .tile("r1", Memory::Sbuf, DType::Bf16, &[128, 512])
        .unwrap();
    let r2 = b
        .tile("r2", Memory::Sbuf, DType::Bf16, &[128, 512])
        .unwrap();
    b.load(a, Grid::origin(lhs_t)).unwrap();
    b.load(x, Grid::origin(rhs)).unwrap();
    b.nc_matmul(acc1, a, x, Write::Overwrite).unwrap();
    if shared {
        b.tensor_copy(r1, acc1).unwrap();
        b.nc_matmul(acc2, a, x, Write::Overwrite).unwrap();
    } else {
        b.nc_matmul(acc2, a, x, Write::Overwrite).unwrap();
        b.tensor_copy(r1, acc1).unwrap();
    }
    b.tensor_copy(r2, acc2).unwrap();
    b.store(Grid::origin(o1), r1).unwrap();
    b.store(Grid::origin(o2), r2).unwrap();
    b.finish().unwrap()
}

#[test]
fn two_matmuls_sharing_a_psum_bank() {
    let shapes: &[&[usize]] = &[&[128, 128], &[128, 512]];
    let shared = time(&two_matmuls(true), shapes);
    let apart = time(&two_matmuls(false), shapes);
    for (s, second) in [(&shared, 4), (&apart, 3)] {
        assert_eq!(rec(s, 2, Kind::MultiplyMoving).start, 2_886_942);
        assert_eq!(rec(s, 2, Kind::MultiplyMoving).end, 3_092_656);
        // The second LoadStationary loads in the background as soon as the first matmul
        // streams.
        assert_eq!(rec(s, second, Kind::LoadStationary).start, 2_886_942);
    }
    // Apart: the second matmul follows the first on the PE array (its II later).
    let mm2 = rec(&apart, 3, Kind::MultiplyMoving);
    assert_eq!(mm2.start, 3_092_656);
    // Shared: it overwrites the bank the first copy reads (write after read), so it waits for
    // that copy to complete.
    let copy1 = rec(&shared, 3, Kind::Instruction);
    assert_eq!(copy1.done, 3_242_656 + cyc(512, 1120) + cyc(100, 1120));
    let mm2 = rec(&shared, 4, Kind::MultiplyMoving);
    assert_eq!(mm2.start, copy1.done);
    assert_eq!(
        mm2.pred,
        Some(shared.records().iter().position(|r| *r == copy1).unwrap() as u32)
    );
    // Sharing the bank delays the second matmul (the stores that follow, in another order,
    // decide the totals).
    assert!(rec(&shared, 4, Kind::MultiplyMoving).end > rec(&apart, 3, Kind::MultiplyMoving).end);
    assert_eq!(shared.peak_memory().1, 1);
    assert_eq!(apart.peak_memory().1, 2);
}

/// Matmuls accumulating into one PSUM tile pipeline on the PE array: each starts at the end of
/// the previous one's interval, not 150 ns after it.
#[test]
fn accumulation_pipelines() {
    let mut b = ProgramBuilder::new("acc", Target::Trn1);
    let lhs_t = b
        .input("lhs_t", DType::Bf16, &[fixed(128), fixed(128)])
        .unwrap();
    let rhs = b
        .input("rhs", DType::Bf16, &[fixed(128), fixed(512)])
        .unwrap();
    let out = b
        .output("out", DType::Bf16, &[fixed(128), fixed(512)])
        .unwrap();
    let a = b.tile("a", Memory::Sbuf, DType::Bf16, &[128, 128]).unwrap();
    let x = b.tile("x", Memory::Sbuf, DType::Bf16, &[128, 512]).unwrap();
    let acc = b
        .tile("acc", Memory::Psum, DType::F32, &[128, 512])
        .unwrap();
    let r = b.tile("r", Memory::Sbuf, DType::Bf16, &[128, 512]).unwrap();
    b.load(a, Grid::origin(lhs_t)).unwrap();
    b.load(x, Grid::origin(rhs)).unwrap();
    b.memset(acc, Scalar::float(0.0)).unwrap();
    b.begin_loop(LoopKind::Affine, "k", Extent::Fixed(4))
        .unwrap();
    b.nc_matmul(acc, a, x, Write::Accumulate(Alu::Add)).unwrap();
    b.end_loop().unwrap();
    b.tensor_copy(r, acc).unwrap();
    b.store(Grid::origin(out), r).unwrap();
    let c = b.finish().unwrap();
    let s = time(&c, &[&[128, 128], &[128, 512]]);
    let mms: Vec<&Record> = s
        .records()
        .iter()
        .filter(|r| r.kind == Kind::MultiplyMoving)
        .collect();
    assert_eq!(mms.len(), 4);
    for w in mms.windows(2) {
        assert_eq!(w[1].start, w[0].end);
    }
}

#[test]
fn activation_table_switch() {
    // exp, sigmoid, exp in a chain: three table loads; exp three times: one.
    let chain = |funcs: [ActFn; 3]| {
        elementwise(DType::F32, 512, move |b, t| {
            let mut src = t;
            for (i, f) in funcs.into_iter().enumerate() {
                let dst = b
                    .tile(&format!("y{i}"), Memory::Sbuf, DType::F32, &[128, 512])
                    .unwrap();
                b.activation(dst, f, src, Operand::Imm(Scalar::float(1.0)), Operand::None)
                    .unwrap();
                src = dst;
            }
            src
        })
    };
    let switching = time(
        &chain([ActFn::Exp, ActFn::Sigmoid, ActFn::Exp]),
        &[&[128, 512]],
    );
    let same = time(&chain([ActFn::Exp, ActFn::Exp, ActFn::Exp]), &[&[128, 512]]);
    assert_eq!(switching.table_loads(), 3);
    assert_eq!(same.table_loads(), 1);
    // max(64, 512) cycles and the 100-cycle static overhead at 1.4 GHz, visible at the end.
    let act = cyc(512 + 100, 1400);
    let load = ISSUE + LATENCY + rows(2048);
    let exp1 = rec(&switching, 1, Kind::Instruction);
    assert_eq!((exp1.start, exp1.end), (load, load + act));
    // The sigmoid's table loads after the exp, on ScalarE: 1.3 µs.
    let t2 = rec(&switching, 2, Kind::TableLoad);
    assert_eq!((t2.start, t2.end), (exp1.end, exp1.end + 1_300_000));
    let sig = rec(&switching, 2, Kind::Instruction);
    assert_eq!(sig.start, t2.end);
    let t3 = rec(&switching, 3, Kind::TableLoad);
    assert_eq!(t3.start, sig.end);
    assert_eq!(rec(&switching, 3, Kind::Instruction).start, t3.end);
    // Without switches each activation waits only for the previous one's result.
    let e2 = rec(&same, 2, Kind::Instruction);
    assert_eq!(e2.start, load + act);
    assert_eq!(switching.total_ps() - same.total_ps(), 2 * 1_300_000);
}

/// The tiled matmul: `K/128` tiles of the contraction per `[128, 512]` output tile, every
/// tile loaded inside the loop.
fn tiled(k_tiles: u64, m_tiles: u64, n_tiles: u64) -> CompiledProgram {
    let (k, m, n) = (128 * k_tiles, 128 * m_tiles, 512 * n_tiles);
    let mut b = ProgramBuilder::new("tiled", Target::Trn1);
    let lhs_t = b
        .input("lhs_t", DType::Bf16, &[fixed(k), fixed(m)])
        .unwrap();
    let rhs = b.input("rhs", DType::Bf16, &[fixed(k), fixed(n)]).unwrap();
    let out = b.output("out", DType::Bf16, &[fixed(m), fixed(n)]).unwrap();
    let a = b.tile("a", Memory::Sbuf, DType::Bf16, &[128, 128]).unwrap();
    let x = b.tile("x", Memory::Sbuf, DType::Bf16, &[128, 512]).unwrap();
    let acc = b
        .tile("acc", Memory::Psum, DType::F32, &[128, 512])
        .unwrap();
    let r = b.tile("r", Memory::Sbuf, DType::Bf16, &[128, 512]).unwrap();
    b.begin_loop(LoopKind::Affine, "m", Extent::Fixed(m_tiles))
        .unwrap();
    b.begin_loop(LoopKind::Affine, "n", Extent::Fixed(n_tiles))
        .unwrap();
    b.begin_loop(LoopKind::Affine, "k", Extent::Fixed(k_tiles))
        .unwrap();
    let (m128, n512, k128) = (
        b.loop_var(0, 128).unwrap(),
        b.loop_var(1, 512).unwrap(),
        b.loop_var(2, 128).unwrap(),
    );
    b.load(a, Grid::origin(lhs_t).at(0, k128).at(1, m128))
        .unwrap();
    b.load(x, Grid::origin(rhs).at(0, k128).at(1, n512))
        .unwrap();
    b.nc_matmul(
        acc,
        a,
        x,
        Write::Group {
            loops: 0b100,
            op: Alu::Add,
        },
    )
    .unwrap();
    b.end_loop().unwrap();
    b.tensor_copy(r, acc).unwrap();
    b.store(Grid::origin(out).at(0, m128).at(1, n512), r)
        .unwrap();
    b.end_loop().unwrap();
    b.end_loop().unwrap();
    b.finish().unwrap()
}

#[test]
fn timing_only_agrees_with_a_full_run() {
    let c = tiled(4, 2, 2);
    let parts = c.parts();
    let k = Kernel::new(parts.program());
    let lhs = DeviceTensor::<half::bf16>::zeros(&[512, 256]).unwrap();
    let rhs = DeviceTensor::<half::bf16>::zeros(&[512, 1024]).unwrap();
    let mut out = DeviceTensor::<half::bf16>::zeros(&[256, 1024]).unwrap();
    let mut core = NeuronCore::new(Target::Trn1);
    let mut run = |mode| {
        program_order()
            .detail(Detail::Trace)
            .mode(mode)
            .run(&mut core, &k, &[lhs.arg(), rhs.arg()], &mut [out.arg_mut()])
            .unwrap()
    };
    let full = run(Mode::Compute);
    let only = run(Mode::TimingOnly);
    assert_eq!(full.total_ps(), only.total_ps());
    assert_eq!(full.records(), only.records());
    assert_eq!(full.profile(), only.profile());
    assert_eq!(full.instructions(), 2 * 2 * (4 * 3 + 2));
}

#[test]
fn more_work_never_takes_less_time() {
    let shape = |k: u64, m: u64, n: u64| {
        vec![
            vec![128 * k as usize, 128 * m as usize],
            vec![128 * k as usize, 512 * n as usize],
        ]
    };
    let total = |k, m, n| {
        let c = tiled(k, m, n);
        let sh = shape(k, m, n);
        let refs: Vec<&[usize]> = sh.iter().map(Vec::as_slice).collect();
        time_with(&c, &refs, program_order().detail(Detail::Summary)).total_ps()
    };
    let mut prev = 0;
    for k in 1..=6 {
        let t = total(k, 1, 2);
        assert!(t >= prev, "K tiles {k}: {t} < {prev}");
        prev = t;
    }
    let mut prev = 0;
    for m in 1..=4 {
        let t = total(2, m, 1);
        assert!(t >= prev, "M tiles {m}: {t} < {prev}");
        prev = t;
    }
    // A longer elementwise instruction never ends earlier.
    let mut prev = 0;
    for f in [1u32, 32, 64, 65, 128, 512, 2048, 8192] {
        let c = elementwise(DType::F32, f, |b, t| {
            let y = b.tile("y", Memory::Sbuf, DType::F32, &[128, f]).unwrap();
            b.activation(
                y,
                ActFn::Exp,
                t,
                Operand::Imm(Scalar::float(1.0)),
                Operand::None,
            )
            .unwrap();
            y
        });
        let t = time(&c, &[&[128, f as usize]]).total_ps();
        assert!(t >= prev, "F = {f}: {t} < {prev}");
        prev = t;
    }
    // Slower hardware never finishes earlier.
    let c = tiled(3, 2, 2);
    let base = time_with(&c, &[&[384, 256], &[384, 1024]], program_order()).total_ps();
    let slower = [
        Params {
            dma_fixed_latency_ns: 2000,
            ..Params::TRN1
        },
        Params {
            pe_latency_ns: 400,
            ..Params::TRN1
        },
        Params {
            dma_engine_bytes_per_us: 10_000,
            ..Params::TRN1
        },
        Params {
            vector_mhz: 500,
            ..Params::TRN1
        },
        Params {
            dma_issue_ns: 500,
            ..Params::TRN1
        },
    ];
    for p in slower {
        let t = time_with(
            &c,
            &[&[384, 256], &[384, 1024]],
            program_order().params(p.clone()),
        )
        .total_ps();
        assert!(t >= base, "{t} < {base} with {p:?}");
    }
}

/// A deterministic generator.
struct Lcg(u64);

impl Lcg {
    fn next(&mut self, n: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 33) % n
    }
}

/// A random program over a pool of `[128, 256]` f32 tiles and `[128, 1]` columns; with
/// `extra`, the activation at step `extra` also reads a bias column (a dependency added
/// without changing what the instruction costs).
fn random_program(seed: u64, steps: usize, extra: Option<usize>) -> CompiledProgram {
    let mut rng = Lcg(seed);
    let mut b = ProgramBuilder::new("random", Target::Trn1);
    let x = b.input("x", DType::F32, &[fixed(128), fixed(256)]).unwrap();
    let out = b
        .output("out", DType::F32, &[fixed(128), fixed(256)])
        .unwrap();
    let tiles: Vec<TileId> = (0..4)
        .map(|i| {
            b.tile(&format!("t{i}"), Memory::Sbuf, DType::F32, &[128, 256])
                .unwrap()
        })
        .collect();
    let cols: Vec<TileId> = (0..2)
        .map(|i| {
            b.tile(&format!("c{i}"), Memory::Sbuf, DType::F32, &[128, 1])
                .unwrap()
        })
        .collect();
    for &t in &tiles {
        b.load(t, Grid::origin(x)).unwrap();
    }
    for &c in &cols {
        b.memset(c, Scalar::float(0.0)).unwrap();
    }
    let mut acts = 0usize;
    for _ in 0..steps {
        let d = tiles[rng.next(4) as usize];
        let s = tiles[rng.next(4) as usize];
        match rng.next(5) {
            0 => {
                let bias = if extra == Some(acts) {
                    Operand::Column(cols[rng.next(2) as usize])
                } else {
                    let _ = rng.next(2);
                    Operand::None
                };
                acts += 1;
                b.activation(d, ActFn::Exp, s, Operand::Imm(Scalar::float(1.0)), bias)
                    .unwrap();
            }
            1 => b
                .tensor_scalar(
                    d,
                    s,
                    Alu::Add,
                    Operand::Imm(Scalar::float(1.0)),
                    Alu::Bypass,
                    Operand::None,
                )
                .unwrap(),
            2 => b
                .tensor_tensor(d, s, tiles[rng.next(4) as usize], Alu::Multiply)
                .unwrap(),
            3 => b.load(d, Grid::origin(x)).unwrap(),
            _ => {
                let c = cols[rng.next(2) as usize];
                b.tensor_reduce(c, Alu::Add, s, 1, false).unwrap();
            }
        }
    }
    b.store(Grid::origin(out), tiles[0]).unwrap();
    b.finish().unwrap()
}

#[test]
fn an_added_dependency_never_shortens_a_schedule() {
    let mut checked = 0;
    for seed in 0..40 {
        let base = random_program(seed, 24, None);
        let t0 = time_with(
            &base,
            &[&[128, 256]],
            program_order().detail(Detail::Summary),
        )
        .total_ps();
        for extra in 0..4 {
            let with = random_program(seed, 24, Some(extra));
            let s = time_with(
                &with,
                &[&[128, 256]],
                program_order().detail(Detail::Summary),
            );
            assert!(
                s.total_ps() >= t0,
                "seed {seed}, extra {extra}: {} < {t0}",
                s.total_ps()
            );
            checked += 1;
        }
    }
    assert_eq!(checked, 160);
}

#[test]
fn chrome_trace_is_valid_json_with_perfetto_fields() {
    let c = tiled(2, 1, 2);
    let s = time_with(
        &c,
        &[&[256, 128], &[256, 1024]],
        program_order().detail(Detail::Trace).dma_engine_rows(true),
    );
    assert!(!s.dma_phases().is_empty());
    assert!(
        time(&c, &[&[256, 128], &[256, 1024]])
            .dma_phases()
            .is_empty()
    );
    let mut buf = Vec::new();
    s.write_chrome_trace(&mut buf).unwrap();
    let v: serde_json::Value = serde_json::from_slice(&buf).unwrap();
    assert_eq!(v["displayTimeUnit"], "ns");
    let events = v["traceEvents"].as_array().unwrap();
    let mut complete = 0;
    let mut names = std::collections::BTreeSet::new();
    let mut counters = 0;
    for e in events {
        let ph = e["ph"].as_str().unwrap();
        assert!(e["pid"].is_u64() && e["name"].is_string(), "{e}");
        match ph {
            "X" => {
                complete += 1;
                assert!(e["ts"].as_f64().unwrap() >= 0.0);
                assert!(e["dur"].as_f64().unwrap() >= 0.0);
                assert!(e["tid"].is_u64());
                assert!(e["args"]["opcode"].is_string());
                assert!(e["args"]["line"].is_u64());
            }
            "M" => {
                if e["name"] == "thread_name" {
                    names.insert(e["args"]["name"].as_str().unwrap().to_string());
                }
            }
            "C" => {
                counters += 1;
                assert!(e["ts"].as_f64().is_some());
            }
            other => panic!("unexpected phase {other}"),
        }
    }
    assert_eq!(complete, s.records().len() + s.dma_phases().len());
    for n in [
        "Sync",
        "Tensor",
        "TensorMatrix",
        "Vector",
        "qSyncIO0",
        "qSyncIO1",
        "DMA-E0",
        "DMA-E15",
    ] {
        assert!(names.contains(n), "no track {n}: {names:?}");
    }
    assert!(counters > 0);
    // A matmul's arguments name its operands.
    let mm = events.iter().find(|e| e["name"] == "MATMUL").unwrap();
    let ops = &mm["args"]["operands"];
    assert!(
        ops["stationary"]
            .as_str()
            .unwrap()
            .starts_with("a sbuf:bf16[128, 128]"),
        "{ops}"
    );
    assert!(
        ops["dst"]
            .as_str()
            .unwrap()
            .starts_with("acc psum:f32[128, 512]"),
        "{ops}"
    );
    // Events on one thread never overlap.
    let mut by_tid: std::collections::BTreeMap<u64, Vec<(f64, f64)>> = Default::default();
    for e in events.iter().filter(|e| e["ph"] == "X") {
        let ts = e["ts"].as_f64().unwrap();
        by_tid
            .entry(e["tid"].as_u64().unwrap())
            .or_default()
            .push((ts, ts + e["dur"].as_f64().unwrap()));
    }
    for (tid, mut v) in by_tid {
        v.sort_by(|a, b| a.0.total_cmp(&b.0));
        for w in v.windows(2) {
            assert!(w[1].0 >= w[0].1 - 1e-6, "tid {tid}: {w:?}");
        }
    }
    // The SVG is self-contained.
    let mut svg = Vec::new();
    s.write_svg(&mut svg).unwrap();
    let svg = String::from_utf8(svg).unwrap();
    assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
    assert!(!svg.contains("href"));
    // A summary-only schedule has nothing to draw.
    let lean = time_with(
        &c,
        &[&[256, 128], &[256, 1024]],
        program_order().detail(Detail::Summary),
    );
    assert!(lean.records().is_empty());
    assert!(lean.write_chrome_trace(Vec::new()).is_err());
    assert_eq!(lean.total_ps(), s.total_ps());
    assert_eq!(lean.profile().mfu, s.profile().mfu);
}

#[test]
fn benchmark_reports_percentiles() {
    let c = seed();
    let parts = c.parts();
    let k = Kernel::new(parts.program());
    let mut core = NeuronCore::new(Target::Trn1);
    let r = Benchmark::new()
        .warmup(1)
        .iters(4)
        .run_shapes(&mut core, &k, &[&[128, 128], &[128, 512]])
        .unwrap();
    let p50 = r.nc_latency.get_latency_percentile(50).unwrap();
    assert_eq!(p50, 6.088262);
    assert_eq!(r.nc_latency.samples().len(), 4);
    for (_, v) in r.nc_latency.percentiles() {
        assert_eq!(v, p50, "the model is deterministic");
    }
    assert!(r.host_launch.get_latency_percentile(99).unwrap() >= 0.0);
    assert!(
        Benchmark::new()
            .iters(0)
            .run_shapes(&mut core, &k, &[&[128, 128], &[128, 512]])
            .is_err()
    );
    // Wrong shapes are launch errors, not panics.
    assert!(
        Benchmark::new()
            .run_shapes(&mut core, &k, &[&[128, 128]])
            .is_err()
    );
    assert!(
        Benchmark::new()
            .run_shapes(&mut core, &k, &[&[128, 128], &[128, 256]])
            .is_err()
    );
    assert!(
        program_order()
            .run_shapes(&mut core, &k, &[&[usize::MAX, 2], &[128, 512]])
            .is_err()
    );
}

#[test]
fn trn2_is_timed_with_its_own_table() {
    let c = seed();
    let parts = c.parts();
    let mut core = NeuronCore::new(Target::Trn2);
    let s = program_order()
        .run_shapes(
            &mut core,
            &Kernel::new(parts.program()),
            &[&[128, 128], &[128, 512]],
        )
        .unwrap();
    assert_eq!(s.params(), &Params::TRN2);
    let mm = s
        .records()
        .iter()
        .find(|r| r.kind == Kind::MultiplyMoving)
        .unwrap();
    assert_eq!(mm.end - mm.start, cyc(576, 2400));
    // HW DGE triggers take 600 ns on the Sync engine.
    let trig = s
        .records()
        .iter()
        .find(|r| r.kind == Kind::DmaTrigger)
        .unwrap();
    assert_eq!(trig.end - trig.start, 600_000);
}

#[test]
fn affine_buffers_overlap_independent_iterations() {
    // As allocated, the tiled matmul's loads of k + 1 overwrite the tiles the matmul of k
    // reads: they wait for it. With two buffers per loop-body tile they do not.
    let c = tiled(4, 1, 1);
    let shapes: &[&[usize]] = &[&[512, 128], &[512, 512]];
    let one = time(&c, shapes);
    let two = time_with(
        &c,
        shapes,
        program_order().detail(Detail::Trace).affine_buffers(2),
    );
    assert!(two.total_ps() < one.total_ps());
    let loads = |s: &Schedule| -> Vec<Record> {
        s.records()
            .iter()
            .filter(|r| r.kind == Kind::DmaTransfer && r.opcode == Opcode::Load)
            .copied()
            .collect()
    };
    let mms = |s: &Schedule| -> Vec<Record> {
        s.records()
            .iter()
            .filter(|r| r.kind == Kind::MultiplyMoving)
            .copied()
            .collect()
    };
    // As allocated: the lhs load of k = 1 is triggered only once the first LoadStationary
    // has read its tile.
    let trig1 = one
        .records()
        .iter()
        .filter(|r| r.kind == Kind::DmaTrigger)
        .nth(2)
        .copied()
        .unwrap();
    let ls0 = one
        .records()
        .iter()
        .find(|r| r.kind == Kind::LoadStationary)
        .unwrap();
    assert!(trig1.start >= ls0.end);
    // Two buffers: the loads of k = 1 are in flight before the first matmul starts.
    assert!(loads(&two)[2].start < mms(&two)[0].start);
    // Same work either way.
    assert_eq!(one.instructions(), two.instructions());
    assert_eq!(one.dma_bytes(), two.dma_bytes());
    // More buffers never hurt; one buffer is the program as allocated.
    let four = time_with(&c, shapes, program_order().affine_buffers(4));
    assert!(four.total_ps() <= two.total_ps());
    let same = time_with(&c, shapes, program_order().affine_buffers(1));
    assert_eq!(same.total_ps(), one.total_ps());
}

#[test]
fn docs_list_every_parameter() {
    let doc = include_str!("../../docs/timing.md");
    let (v2, v3, v4) = (
        Params::TRN1.entries(),
        Params::TRN2.entries(),
        Params::TRN3.entries(),
    );
    assert!(v2.len() == v3.len() && v3.len() == v4.len());
    for ((a, b), c) in v2.iter().zip(&v3).zip(&v4) {
        let row = format!(
            "| `{}` | {} | {} | {} | {} | {} |",
            a.name, a.value, b.value, c.value, a.unit, a.source
        );
        assert!(doc.contains(&row), "docs/timing.md lacks the row {row}");
    }
}

/// `x [128, 2048] f32` loaded, squared with `tensor_tensor` on VectorE, stored, for `target`.
fn square_f32(target: Target) -> CompiledProgram {
    let mut b = ProgramBuilder::new("square", target);
    let x = b
        .input("x", DType::F32, &[fixed(128), fixed(2048)])
        .unwrap();
    let out = b
        .output("out", DType::F32, &[fixed(128), fixed(2048)])
        .unwrap();
    let t = b.tile("t", Memory::Sbuf, DType::F32, &[128, 2048]).unwrap();
    let y = b.tile("y", Memory::Sbuf, DType::F32, &[128, 2048]).unwrap();
    b.load(t, Grid::origin(x)).unwrap();
    b.tensor_tensor(y, t, t, Alu::Multiply).unwrap();
    b.store(Grid::origin(out), y).unwrap();
    b.finish().unwrap()
}

#[test]
fn trn3_is_timed_with_its_own_table() {
    let vector = |target: Target| {
        let c = square_f32(target);
        let parts = c.parts();
        let mut core = NeuronCore::new(target);
        let s = Timing::new()
            .run_shapes(&mut core, &Kernel::new(parts.program()), &[&[128, 2048]])
            .unwrap();
        assert_eq!(s.params(), &Params::for_target(target));
        let r = *s
            .records()
            .iter()
            .find(|r| r.track == Track::Vector)
            .unwrap();
        r.end - r.start
    };
    // fp32 tensor_tensor with both inputs in SBUF: 2N cycles and the static overhead, at 0.96
    // GHz on Trn2; on Trn3 VectorE takes two 32-bit elements per lane per cycle at 1.2 GHz
    // [TRN3ARCH].
    assert_eq!(vector(Target::Trn2), cyc(2 * 2048 + 100, 960));
    assert_eq!(vector(Target::Trn3), cyc(2048 + 100, 1200));
    assert_eq!(Params::TRN3.generation.to_string(), "NeuronCore-v4 (Trn3)");
    assert_eq!(Params::TRN3.sbuf_partition_bytes, 256 * 1024);
}

#[test]
fn benchmark_counts_beyond_the_limit_are_refused_before_any_run() {
    let c = seed();
    let parts = c.parts();
    let k = Kernel::new(parts.program());
    let mut core = NeuronCore::new(Target::Trn1);
    let shapes: &[&[usize]] = &[&[128, 128], &[128, 512]];
    for (bench, what) in [
        (Benchmark::new().warmup(usize::MAX), "warm-up"),
        (Benchmark::new().iters(usize::MAX), "timed"),
        (Benchmark::new().iters(1 << 40), "timed"),
        (Benchmark::new().iters(Benchmark::MAX_RUNS + 1), "timed"),
    ] {
        let e = bench.run_shapes(&mut core, &k, shapes).unwrap_err();
        assert!(
            matches!(e, TimingError::TooManyRuns { what: w, max, .. } if w == what && max == Benchmark::MAX_RUNS),
            "{e}"
        );
    }
    // The core is still usable.
    let r = Benchmark::new()
        .iters(2)
        .run_shapes(&mut core, &k, shapes)
        .unwrap();
    assert_eq!(r.nc_latency.samples().len(), 2);
}
