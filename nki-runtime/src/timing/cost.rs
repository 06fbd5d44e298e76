//! What one executed instruction costs: the engine time of every opcode, from its resolved
//! operands and the generation's [`Params`].
//!
//! The formulas are those of `neuroncore-model.md` §1.3–§1.8 and §5 (sources in
//! [`Params`]). `N` is the number of free elements per partition of the instruction's grid
//! (the destination's, a reduction's input's): the engines process one element per partition
//! per cycle, and fewer than 128 partitions cost the same as 128 [ARCH1].

use nki_lang::{ActFn, Alu, DType, Engine, Instr, InstrData, MAX_TILE_RANK, Opcode};

use super::params::{Params, bytes_ps, cycles_ps, ns_ps};
use crate::operand::{Loc, Operands, Resolved};

/// The engine work of one instruction.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(crate) enum Work {
    /// An instruction of the Vector, Scalar or GpSimd engine.
    Compute(Compute),
    /// A TensorE instruction: a LoadStationary then a MultiplyMoving.
    Pe(Pe),
    /// A DMA transfer, triggered from the Sync engine.
    Dma(Dma),
}

/// A Vector, Scalar or GpSimd instruction.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(crate) struct Compute {
    /// The engine.
    pub engine: Engine,
    /// Engine cycles of the opcode's formula.
    pub cycles: u64,
    /// The initiation interval in picoseconds: the formula's cycles and, on Vector and
    /// Scalar, the static overhead.
    pub busy: u64,
    /// Time from the end of the interval to the result being visible to a dependent
    /// instruction.
    pub latency: u64,
    /// The activation-table group the instruction needs (Scalar activations).
    pub table: Option<u8>,
    /// Whether it touches SBUF (for the v2 Vector/GpSimd port).
    pub sbuf: bool,
    /// Whether it touches PSUM (for the v2 Vector/Scalar port).
    pub psum: bool,
}

/// A TensorE instruction.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(crate) struct Pe {
    /// The LoadStationary's interval, picoseconds.
    pub ls: u64,
    /// The MultiplyMoving's interval, picoseconds.
    pub mm: u64,
    /// Useful FLOPs (matmuls: `2·K·M·N`; transposes: 0).
    pub flops: u64,
    /// FLOPs the PE array executes (transposes count as the matmul with an identity).
    pub hw_flops: u64,
}

/// A DMA transfer.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(crate) struct Dma {
    /// DMA engines used.
    pub engines: u32,
    /// Time each of them moves data, picoseconds.
    pub data: u64,
    /// Bytes moved (the larger side when the transfer casts).
    pub bytes: u64,
    /// Bytes read from HBM.
    pub hbm_read: u64,
    /// Bytes written to HBM.
    pub hbm_write: u64,
}

/// Free elements per partition of an operand.
fn free(r: &Resolved) -> u64 {
    r.dims[1..].iter().map(|&d| d as u64).product()
}

/// Whether an operand is an on-chip tile.
fn is_tile(r: &Resolved) -> bool {
    matches!(r.loc, Loc::Sbuf | Loc::Psum)
}

/// 16-bit float (the types VectorE's fast modes take).
fn half(d: DType) -> bool {
    matches!(d, DType::Bf16 | DType::F16)
}

/// The innermost free dimension of size above 1, with its stride, if any.
fn innermost(r: &Resolved) -> Option<(usize, isize)> {
    (1..MAX_TILE_RANK)
        .rev()
        .find(|&j| r.dims[j] > 1)
        .map(|j| (r.dims[j], r.pattern.strides[j]))
}

/// Whether the innermost free dimension is contiguous (or there is none).
fn contiguous(r: &Resolved) -> bool {
    innermost(r).is_none_or(|(_, s)| s == 1)
}

/// Whether the innermost stride exceeds the full-rate limit (ARCH1 §1.7).
fn wide(r: &Resolved, p: &Params) -> bool {
    innermost(r).is_some_and(|(_, s)| {
        (s.unsigned_abs() as u64).saturating_mul(u64::from(r.dtype.size()))
            > u64::from(p.wide_stride_bytes)
    })
}

/// The operand in `slot`, if it is an on-chip tile.
fn tile(ops: &Operands, slot: usize) -> Option<&Resolved> {
    ops.slot(slot).filter(|r| is_tile(r))
}

/// The activation-table group of a function. Groups observed on hardware: {copy, square,
/// rsqrt}, {sigmoid}, {silu}, {exp}, {softplus} [X-DN]; every other function is assumed to
/// need a table of its own (UNSURE).
pub(crate) const fn table_group(f: ActFn) -> u8 {
    match f {
        ActFn::Identity | ActFn::Square | ActFn::Rsqrt => 0,
        ActFn::Sigmoid => 1,
        ActFn::Silu => 2,
        ActFn::Exp => 3,
        ActFn::Softplus => 4,
        ActFn::Log => 5,
        ActFn::Tanh => 6,
        ActFn::Sqrt => 7,
        ActFn::Reciprocal => 8,
        ActFn::Relu => 9,
        ActFn::Gelu => 10,
        ActFn::GeluDx => 11,
        ActFn::GeluApproxTanh => 12,
        ActFn::GeluApproxSigmoid => 13,
        ActFn::SiluDx => 14,
        ActFn::Mish => 15,
        ActFn::Erf => 16,
        ActFn::ErfDx => 17,
        ActFn::Sin => 18,
        ActFn::Cos => 19,
        ActFn::Tan => 20,
        ActFn::Arctan => 21,
        ActFn::Abs => 22,
        ActFn::Sign => 23,
        ActFn::Floor => 24,
        ActFn::Ceil => 25,
        ActFn::Trunc => 26,
    }
}

/// Whether [`cost`] gives one instruction the same work on operands `a` and `b`: every field
/// of every operand it reads is equal (the base element, which no formula reads, may differ).
pub(crate) fn same_inputs(a: &Operands, b: &Operands) -> bool {
    (0..nki_lang::MAX_SLOTS).all(|s| match (a.slot(s), b.slot(s)) {
        (None, None) => true,
        // Element by element: the arrays' `==` calls `memcmp`, slower at this size.
        (Some(x), Some(y)) => {
            x.dims.iter().zip(&y.dims).all(|(a, b)| a == b)
                && (x.pattern.strides.iter())
                    .zip(&y.pattern.strides)
                    .all(|(a, b)| a == b)
                && x.dtype == y.dtype
                && x.loc == y.loc
                && x.dir == y.dir
                && x.slot == y.slot
        }
        (Some(_), None) | (None, Some(_)) => false,
    })
}

/// The cost of one executed instruction. `None` only for loop control, which the executor
/// never shows to observers (the sequencers run it alongside the data path [ARCH1 §1.9]).
pub(crate) fn cost(ins: &Instr, ops: &Operands, p: &Params) -> Option<Work> {
    // The grid: the destination's dimensions (a reduction's: its input's).
    let grid = |slot: usize| ops.slot(slot).map_or(1, free);
    let n = grid(0);
    let min_ii = u64::from(p.min_ii_cycles);
    let mi = |c: u64| c.max(min_ii);
    let engine = ins.engine;
    // Vector engine cycles of an instruction with `n` elements, per its formula.
    let cycles = match ins.opcode {
        Opcode::LoopBegin | Opcode::LoopEnd => return None,
        // A sequencer's register move: one cycle (the model's estimate; AWS publishes none).
        Opcode::RegisterMove => 1,
        // A sequencer's one-element SBUF access: the minimum instruction interval of an
        // engine's access (the model's estimate; AWS publishes none).
        Opcode::RegisterLoad | Opcode::RegisterStore => min_ii,
        Opcode::Load
        | Opcode::Store
        | Opcode::LoadTranspose2d
        | Opcode::DmaTranspose
        | Opcode::DmaTransposeSbuf => {
            return Some(Work::Dma(dma(ins.opcode, ops, p)));
        }
        Opcode::IndirectLoad | Opcode::IndirectStore | Opcode::AtomicRmw => {
            return Some(Work::Dma(indirect_dma(ins, ops, p)));
        }
        Opcode::DmaCompute => return Some(Work::Dma(dma_compute(ops, p))),
        Opcode::Matmul => return Some(Work::Pe(matmul(ops, p))),
        // An x4 element per PE and cycle: a pass takes the time of a bf16 matmul of the same
        // `[K, M]` × `[K, N]` x4 shapes, for four times its multiply-adds (NKI's Trn3 guide:
        // "4x the throughput compared to a BF16/FP16 matmul").
        Opcode::MatmulMx => {
            let mut pe = matmul(ops, p);
            pe.flops = pe.flops.saturating_mul(4);
            pe.hw_flops = pe.hw_flops.saturating_mul(4);
            return Some(Work::Pe(pe));
        }
        Opcode::Transpose => match engine {
            Engine::Tensor => return Some(Work::Pe(pe_transpose(ops, p))),
            // VectorE transposes 32×32 blocks: max(MIN_II, N) [ISA]. (The op table runs
            // `nc_transpose` on no other engine.)
            Engine::Vector | Engine::Scalar | Engine::GpSimd | Engine::Dma | Engine::Sync => mi(n),
        },
        Opcode::TensorCopy => match engine {
            // An ACTIVATE with the copy function [ISA activation: max(MIN_II, N)].
            Engine::Scalar => mi(n),
            Engine::GpSimd => gpsimd(n, p),
            Engine::Vector | Engine::Tensor | Engine::Dma | Engine::Sync => {
                match (tile(ops, 1), accumulating(ops)) {
                    // `dst += src` of two tiles: NKI emits a `tensor_tensor` of the destination
                    // and the source (the fused Mamba tutorial: "a VectorE tensor_tensor add").
                    (Some(src), Some(dst)) => {
                        let add_like = matches!(
                            ins.data.dst().map(|d| d.write),
                            Some(nki_lang::Write::Accumulate(
                                Alu::Add | Alu::Multiply | Alu::Subtract
                            ))
                        );
                        mi(two_inputs(dst, src, Some(dst), add_like, p, n))
                    }
                    (Some(_), None) | (None, _) => vector_fast(mi(n), ops, p),
                }
            }
        },
        Opcode::Memset => match engine {
            Engine::GpSimd => gpsimd(n, p),
            Engine::Vector | Engine::Tensor | Engine::Scalar | Engine::Dma | Engine::Sync => {
                let dst_half = ops.slot(0).is_some_and(|r| half(r.dtype));
                let zero = match ins.data {
                    InstrData::Fill { value, .. } => value.as_f32() == 0.0,
                    InstrData::LoopBegin { .. }
                    | InstrData::LoopEnd { .. }
                    | InstrData::Dma { .. }
                    | InstrData::Unary { .. }
                    | InstrData::Iota { .. }
                    | InstrData::Alu { .. }
                    | InstrData::Act { .. }
                    | InstrData::Act2 { .. }
                    | InstrData::Reduce { .. }
                    | InstrData::Scan { .. }
                    | InstrData::Select { .. }
                    | InstrData::Matmul { .. }
                    | InstrData::Match8 { .. }
                    | InstrData::SelectReduce { .. }
                    | InstrData::Indirect { .. }
                    | InstrData::Gather { .. }
                    | InstrData::DynCopy { .. }
                    | InstrData::Rng { .. }
                    | InstrData::Seed { .. }
                    | InstrData::RangeSelect { .. }
                    | InstrData::Shuffle { .. }
                    | InstrData::QuantizeMx { .. }
                    | InstrData::MatmulMx { .. }
                    | InstrData::LocalGather { .. }
                    | InstrData::Nonzero { .. }
                    | InstrData::DmaCompute { .. }
                    | InstrData::TopK { .. }
                    | InstrData::Register { .. } => false,
                };
                // max(MIN_II, N/2) for a zero BF16/FP16 fill, else max(MIN_II, N) [ISA].
                if zero && dst_half { mi(n / 2) } else { mi(n) }
            }
        },
        Opcode::TensorTensor => match engine {
            Engine::GpSimd => gpsimd(n, p),
            Engine::Vector | Engine::Tensor | Engine::Scalar | Engine::Dma | Engine::Sync => {
                mi(tensor_tensor(ins, ops, p, n))
            }
        },
        Opcode::TensorScalar => match engine {
            Engine::Scalar => mi(n),
            Engine::GpSimd => gpsimd(n, p),
            Engine::Vector | Engine::Tensor | Engine::Dma | Engine::Sync => {
                vector_fast(mi(n), ops, p)
            }
        },
        Opcode::ScalarTensorTensor => {
            // N if both inputs BF16, op0 = subtract, op1 = multiply and N even; else 2N [ISA].
            let bf = |s| ops.slot(s).is_some_and(|r| r.dtype == DType::Bf16);
            let fast = matches!(
                ins.data,
                InstrData::Alu {
                    op: [Alu::Subtract, Alu::Multiply],
                    ..
                }
            ) && bf(1)
                && bf(3)
                && n % 2 == 0;
            mi(if fast { n } else { n.saturating_mul(2) })
        }
        // max(MIN_II, N) + MIN_II [ISA].
        Opcode::TensorScalarReduce => mi(n).saturating_add(min_ii),
        Opcode::Activation => {
            let reduces = matches!(ins.data, InstrData::Act { acc: Some(_), .. });
            // max(MIN_II, N), plus the accumulator read-out (≈ MIN_II) of activation_reduce
            // [ISA, ARCH1].
            mi(n).saturating_add(if reduces { min_ii } else { 0 })
        }
        Opcode::TensorReduce => {
            let n = grid(1);
            let bf = ops.slot(0).is_some_and(|r| r.dtype == DType::Bf16)
                && ops.slot(1).is_some_and(|r| r.dtype == DType::Bf16);
            let fast_op = matches!(
                ins.data,
                InstrData::Reduce {
                    op: Alu::Add | Alu::Max,
                    ..
                }
            );
            // N/2 for BF16 in and out with add/max, else N [ISA].
            mi(if bf && fast_op { n / 2 } else { n })
        }
        // max(MIN_II, 2N) [ISA].
        Opcode::TensorTensorScan => mi(n.saturating_mul(2)),
        // 150 + N [ISA].
        Opcode::Iota | Opcode::AffineSelect => gpsimd(n, p),
        // NKI's nc_n_gather: one GpSimd instruction group per 512 elements of a partition,
        // assumed to cost as any GpSimd instruction of the destination's size.
        Opcode::GatherFlattened | Opcode::NcNGather => gpsimd(n, p),
        // NKI: max(MIN_II_DYNAMIC, N), MIN_II_DYNAMIC about 600 engine cycles.
        Opcode::TensorCopyDynamicSrc | Opcode::TensorCopyDynamicDst => match engine {
            Engine::GpSimd => gpsimd(n, p).max(600),
            Engine::Vector | Engine::Scalar | Engine::Tensor | Engine::Dma | Engine::Sync => {
                n.max(600)
            }
        },
        Opcode::Select => {
            // tensor_copy_predicated: 2N when the predicate and a value are both in SBUF, N
            // when they are in different memories [ISA].
            let sbuf = (1..4)
                .filter_map(|s| tile(ops, s))
                .filter(|r| r.loc == Loc::Sbuf)
                .count();
            mi(if sbuf >= 2 { n.saturating_mul(2) } else { n })
        }
        // max(MIN_II, 8N) [ISA].
        Opcode::Reciprocal => mi(n.saturating_mul(8)),
        // max(MIN_II, N) [ISA].
        Opcode::BnStats => mi(grid(1)),
        // max(MIN_II, 13·N/3) [ISA].
        Opcode::BnAggr => mi(grid(1).saturating_mul(13) / 3),
        // N cycles, N the source's (the searched data's) elements per partition [ISA max8,
        // nc_find_index8, nc_match_replace8], at least MIN_II as every Vector instruction.
        Opcode::Max8 | Opcode::FindIndex8 | Opcode::MatchReplace8 => mi(grid(1)),
        // As `select` (tensor_copy_predicated): 2N with the predicate and `on_true` both in
        // SBUF, else N; plus the accumulator read-out (≈ MIN_II) with a reduction, as
        // `activation`'s. NKI documents no cost for select_reduce: assumed.
        Opcode::SelectReduce => {
            let sbuf = (1..3)
                .filter_map(|s| tile(ops, s))
                .filter(|r| r.loc == Loc::Sbuf)
                .count();
            let reduces = matches!(ins.data, InstrData::SelectReduce { acc: Some(_), .. });
            mi(if sbuf >= 2 { n.saturating_mul(2) } else { n }).saturating_add(if reduces {
                min_ii
            } else {
                0
            })
        }
        // nki.isa.dropout: max(MIN_II, N) [ISA]; `rand` is the same generator without the
        // select, and `random_seed` one element.
        Opcode::Rand | Opcode::Dropout => mi(n),
        Opcode::RandomSeed => mi(1),
        // NKI publishes no cost for the XORWOW instructions: assumed as the engine's streaming
        // copy of the same elements per partition (`tensor_copy`: max(MIN_II, N) on Vector,
        // 150 + N on GpSimd), N the destination's (`rand_set_state`: the source's) elements
        // per partition; `set_rng_seed` reads one element.
        Opcode::Rng | Opcode::Rand2 | Opcode::RandGetState => match engine {
            Engine::GpSimd => gpsimd(n, p),
            Engine::Vector | Engine::Scalar | Engine::Tensor | Engine::Dma | Engine::Sync => mi(n),
        },
        Opcode::RandSetState => match engine {
            Engine::GpSimd => gpsimd(grid(1), p),
            Engine::Vector | Engine::Scalar | Engine::Tensor | Engine::Dma | Engine::Sync => {
                mi(grid(1))
            }
        },
        Opcode::SetRngSeed => mi(1),
        // max(MIN_II, N), N the elements per partition [ISA] (`neuroncore-model.md`'s Vector
        // cost table gives range_select that one figure, its reduction included).
        Opcode::RangeSelect => mi(n),
        // max(MIN_II, N), N the elements per partition [ISA] (the same table).
        Opcode::NcStreamShuffle => mi(n),
        // max(MIN_II, N/4), N the source's elements per partition: NKI's Trn3 guide says the
        // Vector engine quantizes four input elements per partition per cycle; no MIN_II or
        // fixed overhead is published for it (assumed as the other Vector instructions').
        // The destination has N/4 x4 elements.
        Opcode::QuantizeMx => mi(n),
        // 150 + (valid indices × elements per index) / C [ISA]; the source gives no C: taken
        // as 1, as `iota`'s 150 + N (N the destination's elements per partition).
        Opcode::LocalGather => gpsimd(n, p),
        // No published cost: assumed as any GpSimd instruction of its result's size (the `2n`
        // bounds), 150 + N.
        Opcode::SequenceBounds => gpsimd(n, p),
        // No published cost: assumed max(MIN_II, 2N) as `tensor_tensor_scan` [ISA], the other
        // Vector instruction that carries a register along the free elements.
        Opcode::TensorScalarCumulative => mi(n.saturating_mul(2)),
        // No published cost: assumed 150 + N as any GpSimd instruction, N = T + 1 the
        // destination's elements per partition (one step per element, the count included).
        Opcode::NonzeroWithCount => gpsimd(n, p),
        // NKI: "4*n + K GpSIMD Engine cycles per partition", `n` the snake's values, `K` the
        // results. "Per partition" read as per snake: each group of 16 partitions is one
        // GpSimd core's, and the cores run their groups at once; plus the fixed start every
        // GpSimd instruction is charged.
        Opcode::TopK => {
            let snake = if let InstrData::TopK { n, .. } = ins.data {
                u64::from(n)
            } else {
                0
            };
            gpsimd(snake.saturating_mul(4).saturating_add(n), p)
        }
        // No published cost: assumed as `activation` with a reduction, one element per cycle
        // of the engine that runs it, max(MIN_II, N), plus the accumulator read-out (≈ MIN_II)
        // with `reduce_res`.
        Opcode::Exponential => {
            let reduces = matches!(ins.data, InstrData::Act { acc: Some(_), .. });
            mi(n).saturating_add(if reduces { min_ii } else { 0 })
        }
        // No published cost: assumed as `activation` (its tensor-scalar stage in the same
        // pass, as `activation`'s scale and bias are), plus the accumulator read-out with
        // `reduce_res`.
        Opcode::Activate2 => {
            let reduces = matches!(ins.data, InstrData::Act2 { acc: Some(_), .. });
            mi(n).saturating_add(if reduces { min_ii } else { 0 })
        }
    };
    Some(Work::Compute(compute(ins, ops, p, cycles)))
}

/// A Vector/Scalar/GpSimd instruction of `cycles`, slowed by a wide innermost stride.
fn compute(ins: &Instr, ops: &Operands, p: &Params, cycles: u64) -> Compute {
    let slow = ops.iter().any(|r| is_tile(r) && wide(r, p));
    let cycles = if slow {
        cycles.saturating_mul(u64::from(p.wide_stride_factor.max(1)))
    } else {
        cycles
    };
    // VectorE's base rate (v4: two 32-bit elements per lane per cycle) and ScalarE's v4
    // performance mode for 16-bit copies and tensor_scalar [TRN3ARCH]; never below the floor.
    let floor = u64::from(p.min_ii_cycles);
    let cycles = match ins.engine {
        Engine::Vector => (cycles / u64::from(p.vector_elements_per_cycle.max(1))).max(floor),
        Engine::Scalar
            if p.scalar_perf_mode
                && matches!(ins.opcode, Opcode::TensorCopy | Opcode::TensorScalar)
                && ops.iter().filter(|r| is_tile(r)).all(|r| half(r.dtype)) =>
        {
            (cycles / 2).max(floor)
        }
        Engine::Scalar | Engine::GpSimd | Engine::Tensor | Engine::Dma | Engine::Sync => cycles,
    };
    let mhz = match ins.engine {
        Engine::Scalar => p.scalar_mhz,
        Engine::GpSimd => p.gpsimd_mhz,
        Engine::Vector => p.vector_mhz,
        // Only the compute engines reach here (TensorE and DMA have their own cost paths).
        Engine::Tensor | Engine::Dma | Engine::Sync => p.vector_mhz,
    };
    let table = match (ins.opcode, ins.data, ins.engine) {
        (Opcode::Activation, InstrData::Act { func, .. }, _) => Some(table_group(func)),
        (Opcode::Activate2, InstrData::Act2 { func, .. }, _) => Some(table_group(func)),
        (Opcode::TensorCopy, _, Engine::Scalar) => Some(table_group(ActFn::Identity)),
        _ => None,
    };
    // Vector and Scalar are busy for their static overhead too, and their result is visible
    // at the interval's end; GpSimd's formula has its start-up, and its result is visible the
    // overhead after its interval.
    let overhead = u64::from(p.static_overhead_cycles);
    let (busy_cycles, latency_cycles) = match ins.engine {
        Engine::Vector | Engine::Scalar => (cycles.saturating_add(overhead), 0),
        Engine::GpSimd | Engine::Tensor | Engine::Dma | Engine::Sync => (cycles, overhead),
    };
    Compute {
        engine: ins.engine,
        cycles,
        busy: cycles_ps(busy_cycles, mhz),
        latency: cycles_ps(latency_cycles, mhz),
        table,
        sbuf: ops.iter().any(|r| r.loc == Loc::Sbuf),
        psum: ops.iter().any(|r| r.loc == Loc::Psum),
    }
}

/// GpSimd: start-up plus one cycle per element [ISA].
fn gpsimd(n: u64, p: &Params) -> u64 {
    u64::from(p.gpsimd_start_cycles).saturating_add(n)
}

/// `tensor_copy` / `tensor_scalar` on VectorE with v3's performance mode: 4× when both sides
/// are 16-bit floats in SBUF with a contiguous innermost dimension, 2× when 16-bit but strided
/// or with one side in PSUM [ARCH2].
fn vector_fast(cycles: u64, ops: &Operands, p: &Params) -> u64 {
    if !p.vector_perf_mode {
        return cycles;
    }
    let (Some(dst), Some(src)) = (tile(ops, 0), tile(ops, 1)) else {
        return cycles;
    };
    if !(half(dst.dtype) && half(src.dtype)) {
        return cycles;
    }
    let both_sbuf = dst.loc == Loc::Sbuf && src.loc == Loc::Sbuf;
    let speedup = if both_sbuf && contiguous(dst) && contiguous(src) {
        4
    } else {
        2
    };
    // Never below the instruction floor.
    (cycles / speedup).max(u64::from(p.min_ii_cycles))
}

/// `tensor_tensor` on VectorE: N with one input in PSUM and one in SBUF, or both in SBUF, all
/// BF16, add/multiply/subtract and contiguous; else 2N [ISA]. v3's performance mode: N for
/// both inputs in SBUF and all operands 16-bit floats [ARCH2].
fn tensor_tensor(ins: &Instr, ops: &Operands, p: &Params, n: u64) -> u64 {
    let (Some(a), Some(b)) = (tile(ops, 1), tile(ops, 2)) else {
        return n.saturating_mul(2);
    };
    let add_like = matches!(
        ins.data,
        InstrData::Alu {
            op: [Alu::Add | Alu::Multiply | Alu::Subtract, _],
            ..
        }
    );
    two_inputs(a, b, ops.slot(0), add_like, p, n)
}

/// The destination of an accumulating instruction (read and written), if it is a tile.
fn accumulating(ops: &Operands) -> Option<&Resolved> {
    tile(ops, 0).filter(|r| r.dir == nki_lang::Dir::ReadWrite)
}

/// VectorE cycles of an elementwise operation of two tile inputs `a` and `b` into `dst`
/// (`tensor_tensor`'s table [ISA]); `add_like`: the operator is add, multiply or subtract.
fn two_inputs(
    a: &Resolved,
    b: &Resolved,
    dst: Option<&Resolved>,
    add_like: bool,
    p: &Params,
    n: u64,
) -> u64 {
    let mixed = a.loc != b.loc;
    let both_sbuf = a.loc == Loc::Sbuf && b.loc == Loc::Sbuf;
    let all = |f: fn(DType) -> bool| f(a.dtype) && f(b.dtype) && dst.is_some_and(|d| f(d.dtype));
    let v2_fast = both_sbuf
        && all(|d| d == DType::Bf16)
        && add_like
        && contiguous(a)
        && contiguous(b)
        && dst.is_some_and(contiguous);
    let v3_fast = p.vector_perf_mode && both_sbuf && all(half);
    if mixed || v2_fast || v3_fast {
        n
    } else {
        n.saturating_mul(2)
    }
}

/// FP32 operands run the PE array at a quarter of its rate (as two passes) [ARCH1, ISA].
fn fp32(d: DType) -> bool {
    d == DType::F32
}

/// `nc_matmul`: LS II = max(M, 64)/4, MM II = max(N, 64) + 64 PE cycles, ×4 for FP32.
fn matmul(ops: &Operands, p: &Params) -> Pe {
    let (Some(st), Some(mv)) = (ops.slot(1), ops.slot(2)) else {
        return Pe {
            ls: 0,
            mm: 0,
            flops: 0,
            hw_flops: 0,
        };
    };
    let k = st.dims[0] as u64;
    let m = free(st);
    let n = free(mv);
    let factor = if fp32(st.dtype) || fp32(mv.dtype) {
        u64::from(p.pe_fp32_factor.max(1))
    } else {
        1
    };
    let floor = u64::from(p.mm_min_ii_cycles);
    let ls = m.max(floor).div_ceil(u64::from(p.ls_speedup.max(1)));
    let mm = n.max(floor).saturating_add(u64::from(p.mm_start_cycles));
    let flops = 2u64.saturating_mul(k).saturating_mul(m).saturating_mul(n);
    Pe {
        ls: cycles_ps(ls.saturating_mul(factor), p.pe_mhz),
        mm: cycles_ps(mm.saturating_mul(factor), p.pe_mhz),
        flops,
        hw_flops: flops,
    }
}

/// `nc_transpose` on TensorE of data `[P, F]`: a matmul of the data (stationary, F columns)
/// against a `[P, P]` identity; MM II = max(P, min(64, F)) [ISA nc_transpose] + the start
/// cycles of a matmul pass, FP32 data at
/// the generation's transpose factor.
fn pe_transpose(ops: &Operands, p: &Params) -> Pe {
    let Some(src) = ops.slot(1) else {
        return Pe {
            ls: 0,
            mm: 0,
            flops: 0,
            hw_flops: 0,
        };
    };
    let rows = src.dims[0] as u64;
    let cols = free(src);
    let factor = if fp32(src.dtype) {
        u64::from(p.pe_fp32_transpose_factor.max(1))
    } else {
        1
    };
    let floor = u64::from(p.mm_min_ii_cycles);
    let ls = cols.max(floor).div_ceil(u64::from(p.ls_speedup.max(1)));
    let mm = rows
        .max(cols.min(floor))
        .saturating_add(u64::from(p.mm_start_cycles));
    Pe {
        ls: cycles_ps(ls.saturating_mul(factor), p.pe_mhz),
        mm: cycles_ps(mm.saturating_mul(factor), p.pe_mhz),
        flops: 0,
        hw_flops: 2u64
            .saturating_mul(rows)
            .saturating_mul(cols)
            .saturating_mul(rows),
    }
}

/// A DMA between a tile (slot 0) and HBM (slot 1), or another SBUF tile
/// (`dma_transpose_sbuf`): `ceil(P / 8)` engines (at most 16), each moving its partitions'
/// bytes at the engine bandwidth with a fixed overhead per descriptor (a contiguous run of
/// both sides, at most one partition row) [ARCH1, DMAOV, DMABW]. A transpose (`load_transpose2d`,
/// `dma_transpose`) moves at `dma_transpose_percent` of that bandwidth
/// (`dma_transpose_sbuf_percent` within SBUF) where the engines transpose natively [ARCH2],
/// else one element per descriptor.
fn dma(opcode: Opcode, ops: &Operands, p: &Params) -> Dma {
    let (Some(t), Some(h)) = (ops.slot(0), ops.slot(1)) else {
        return Dma {
            engines: 1,
            data: 0,
            bytes: 0,
            hbm_read: 0,
            hbm_write: 0,
        };
    };
    let elems = t.elems() as u64;
    let size = u64::from(t.dtype.size().max(h.dtype.size()));
    let hbm = (h.elems() as u64).saturating_mul(u64::from(h.dtype.size()));
    let parts = (t.dims[0] as u64).max(1);
    let per_part = free(t).saturating_mul(size);
    let bytes = elems.saturating_mul(size);
    let engines = parts
        .div_ceil(u64::from(p.dma_partitions_per_engine.max(1)))
        .clamp(1, u64::from(p.dma_engines.max(1)));
    let parts_per_engine = parts.div_ceil(engines);
    let engine_bytes = parts_per_engine.saturating_mul(per_part);
    let transpose = matches!(
        opcode,
        Opcode::LoadTranspose2d | Opcode::DmaTranspose | Opcode::DmaTransposeSbuf
    );
    // A transpose within SBUF runs at its own share of the peak (ARCH2: up to 50 %).
    let percent = if opcode == Opcode::DmaTransposeSbuf {
        p.dma_transpose_sbuf_percent
    } else {
        p.dma_transpose_percent
    };
    let data = if transpose && p.dma_native_transpose {
        let bw = (u64::from(p.dma_engine_bytes_per_us) * u64::from(percent) / 100)
            .clamp(1, u64::from(u32::MAX));
        bytes_ps(engine_bytes, bw as u32)
    } else {
        // The descriptor: the contiguous run common to both sides, within one partition row
        // (a transposing load without native support moves one element per descriptor).
        let run = if transpose { 1 } else { common_run(t, h) };
        let desc = run.saturating_mul(size).clamp(1, per_part.max(1));
        let descriptors = parts_per_engine.saturating_mul(per_part.div_ceil(desc));
        let overhead = descriptors.saturating_mul(u64::from(p.dma_descriptor_overhead_bytes));
        bytes_ps(
            engine_bytes.saturating_add(overhead),
            p.dma_engine_bytes_per_us,
        )
    };
    let data = data.saturating_add(ns_ps(p.dma_transfer_overhead_ns));
    let (hbm_read, hbm_write) = match opcode {
        Opcode::Load | Opcode::LoadTranspose2d | Opcode::IndirectLoad | Opcode::DmaTranspose => {
            (hbm, 0)
        }
        // Within SBUF: no HBM traffic.
        Opcode::DmaTransposeSbuf => (0, 0),
        Opcode::Store | Opcode::IndirectStore => (0, hbm),
        Opcode::AtomicRmw => (hbm, hbm),
        // Not transfers: `cost` gives them no DMA work.
        Opcode::LoopBegin
        | Opcode::LoopEnd
        | Opcode::RegisterMove
        | Opcode::RegisterLoad
        | Opcode::RegisterStore
        | Opcode::Matmul
        | Opcode::Transpose
        | Opcode::TensorCopy
        | Opcode::Memset
        | Opcode::TensorTensor
        | Opcode::TensorScalar
        | Opcode::ScalarTensorTensor
        | Opcode::TensorScalarReduce
        | Opcode::Activation
        | Opcode::TensorReduce
        | Opcode::TensorTensorScan
        | Opcode::Iota
        | Opcode::AffineSelect
        | Opcode::Select
        | Opcode::Reciprocal
        | Opcode::BnStats
        | Opcode::BnAggr
        | Opcode::Max8
        | Opcode::FindIndex8
        | Opcode::MatchReplace8
        | Opcode::SelectReduce
        | Opcode::GatherFlattened
        | Opcode::NcNGather
        | Opcode::TensorCopyDynamicSrc
        | Opcode::TensorCopyDynamicDst
        | Opcode::Rand
        | Opcode::RandomSeed
        | Opcode::Dropout
        | Opcode::RangeSelect
        | Opcode::NcStreamShuffle
        | Opcode::QuantizeMx
        | Opcode::MatmulMx
        | Opcode::LocalGather
        | Opcode::SequenceBounds
        | Opcode::TensorScalarCumulative
        | Opcode::NonzeroWithCount
        | Opcode::Exponential
        | Opcode::Activate2
        | Opcode::DmaCompute
        | Opcode::TopK
        | Opcode::Rng
        | Opcode::Rand2
        | Opcode::RandGetState
        | Opcode::RandSetState
        | Opcode::SetRngSeed => {
            unreachable!("{opcode:?} is not a DMA transfer")
        }
    };
    Dma {
        engines: engines as u32,
        data,
        bytes,
        hbm_read,
        hbm_write,
    }
}

/// An indirect DMA (`indirect_load`, `indirect_store`, `atomic_rmw`): NKI's descriptor
/// generation makes one descriptor per partition row at least, as [`dma`] counts a direct
/// transfer's (its rows never merge across partitions), after fetching each partition's index
/// from SBUF: one more descriptor of 4 bytes per partition. `atomic_rmw` reads each row and
/// writes it back: its data phase is twice a store's. (Assumptions: NKI publishes no figure
/// for indirect transfers.) A scalar-offset DMA (`.ap(..., scalar_offset=)`) fetches its one
/// offset once: one descriptor of 4 bytes on each queue, its transfer a `load`'s or `store`'s.
fn indirect_dma(ins: &Instr, ops: &Operands, p: &Params) -> Dma {
    let opcode = ins.opcode;
    let mut d = dma(opcode, ops, p);
    let scalar = matches!(
        ins.data,
        InstrData::Indirect {
            mode: nki_lang::IndirectMode::Scalar { .. },
            ..
        }
    );
    let parts = match ops.slot(0) {
        _ if scalar => u64::from(d.engines.max(1)),
        Some(t) => (t.dims[0] as u64).max(1),
        None => 1,
    };
    let per_engine = parts.div_ceil(u64::from(d.engines.max(1)));
    let index = per_engine.saturating_mul(u64::from(p.dma_descriptor_overhead_bytes) + 4);
    d.data = d
        .data
        .saturating_add(bytes_ps(index, p.dma_engine_bytes_per_us));
    if opcode == Opcode::AtomicRmw {
        let moving = d.data.saturating_sub(ns_ps(p.dma_transfer_overhead_ns));
        d.data = d.data.saturating_add(moving);
    }
    d
}

/// `dma_compute`: no published cost; priced as [`dma`] prices a copy, of the bytes it reads
/// and writes. The destination's partitions are spread over the engines as a transfer's; each
/// engine moves, per partition, the bytes of every source and of the destination, with one
/// descriptor overhead per contiguous run each source shares with the destination and per run
/// of the destination itself, plus the transfer's fixed overhead. Its operands are SBUF tiles
/// (the kernel language moves an HBM operand by a `load` or `store` of its own), so it moves no
/// HBM bytes.
fn dma_compute(ops: &Operands, p: &Params) -> Dma {
    let Some(dst) = ops.slot(0) else {
        return Dma {
            engines: 1,
            data: 0,
            bytes: 0,
            hbm_read: 0,
            hbm_write: 0,
        };
    };
    let parts = (dst.dims[0] as u64).max(1);
    let engines = parts
        .div_ceil(u64::from(p.dma_partitions_per_engine.max(1)))
        .clamp(1, u64::from(p.dma_engines.max(1)));
    let parts_per_engine = parts.div_ceil(engines);
    let n = free(dst);
    let sources = (1..=nki_lang::DMA_COMPUTE_SOURCES).map_while(|slot| ops.slot(slot));
    let (mut per_part, mut descriptors) = (0u64, 0u64);
    for side in core::iter::once(dst).chain(sources) {
        let size = u64::from(side.dtype.size());
        let side_bytes = n.saturating_mul(size);
        let run = common_run(dst, side)
            .saturating_mul(size)
            .clamp(1, side_bytes.max(1));
        per_part = per_part.saturating_add(side_bytes);
        descriptors = descriptors.saturating_add(side_bytes.div_ceil(run));
    }
    let engine_bytes = parts_per_engine.saturating_mul(per_part);
    let overhead = parts_per_engine
        .saturating_mul(descriptors)
        .saturating_mul(u64::from(p.dma_descriptor_overhead_bytes));
    let data = bytes_ps(
        engine_bytes.saturating_add(overhead),
        p.dma_engine_bytes_per_us,
    )
    .saturating_add(ns_ps(p.dma_transfer_overhead_ns));
    Dma {
        engines: engines as u32,
        data,
        bytes: parts.saturating_mul(per_part),
        hbm_read: 0,
        hbm_write: 0,
    }
}

/// Elements of the innermost free dimensions that are contiguous on both sides of a move.
fn common_run(a: &Resolved, b: &Resolved) -> u64 {
    let bs = b.strides_on(&a.dims);
    let mut run = 1u64;
    for j in (1..MAX_TILE_RANK).rev() {
        let n = a.dims[j] as u64;
        if n == 1 {
            continue;
        }
        let expect = run as isize;
        if a.pattern.strides[j] == expect && bs[j] == expect {
            run = run.saturating_mul(n);
        } else {
            break;
        }
    }
    run
}

/// The activation table load's time.
pub(crate) fn table_load_ps(p: &Params) -> u64 {
    ns_ps(p.act_table_load_ns)
}
