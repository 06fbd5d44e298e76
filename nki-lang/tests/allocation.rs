//! Tile allocation by `ProgramBuf::finish`: SBUF tiles are placed first-fit by live range at
//! 64-byte-aligned addresses, PSUM tiles take one 2 KiB bank each, and a tile used both
//! inside and outside a loop stays live for the whole loop. Addresses and the
//! `sbuf_bytes()` / `psum_banks()` footprints are worked out by hand for each program. The
//! loops are `sequential_range`: these programs store the same output rows in every iteration,
//! which an `affine_range` loop may not (`err_unexpected_output_dependencies`); allocation does
//! not depend on the loop kind.

mod common;

use common::{compile, dims};
use nki_lang::builder::{Grid, ProgramBuilder, TensorId, TileId};
use nki_lang::{Alu, CompiledProgram, DType, Extent, LoopKind, Memory, Scalar, Target, Write};

/// A builder with input `x` and output `out`, both f32 [512, 512].
fn io() -> (ProgramBuilder, TensorId, TensorId) {
    let mut b = ProgramBuilder::new("alloc", Target::Trn1);
    let x = b.input("x", DType::F32, &dims(&[512, 512])).unwrap();
    let out = b.output("out", DType::F32, &dims(&[512, 512])).unwrap();
    (b, x, out)
}

fn sbuf(b: &mut ProgramBuilder, name: &str, dtype: DType, shape: &[u32]) -> TileId {
    b.tile(name, Memory::Sbuf, dtype, shape).unwrap()
}

fn psum(b: &mut ProgramBuilder, name: &str) -> TileId {
    b.tile(name, Memory::Psum, DType::F32, &[128, 512]).unwrap()
}

/// The program view agrees with the compiled program on every address and footprint.
fn check_program_view(p: &CompiledProgram) {
    let parts = p.parts();
    let program = parts.program();
    let addrs: Vec<u32> = program.tiles().iter().map(|t| t.addr).collect();
    assert_eq!(addrs, p.addrs());
    assert_eq!(program.sbuf_bytes(), p.sbuf_bytes());
    assert_eq!(program.psum_banks(), p.psum_banks());
}

#[test]
fn tiles_with_disjoint_live_ranges_share_address_zero() {
    let (mut b, x, out) = io();
    let a = sbuf(&mut b, "a", DType::F32, &[128, 512]); // 2048 B
    let c = sbuf(&mut b, "c", DType::Bf16, &[128, 256]); // 512 B
    b.load(a, Grid::origin(x)).unwrap(); // 0
    b.store(Grid::origin(out), a).unwrap(); // 1: a's last use
    b.load(c, Grid::origin(x)).unwrap(); // 2: c's first use
    b.store(Grid::origin(out), c).unwrap(); // 3
    let p = compile(b);
    assert_eq!(p.addrs(), &[0, 0]);
    assert_eq!(p.sbuf_bytes(), 2048);
    assert_eq!(p.psum_banks(), 0);
    check_program_view(&p);
}

#[test]
fn a_tile_first_used_where_another_is_last_used_does_not_share() {
    // tensor_copy c <- a at instruction 1 reads a and writes c in the same instruction.
    let (mut b, x, out) = io();
    let a = sbuf(&mut b, "a", DType::F32, &[128, 512]);
    let c = sbuf(&mut b, "c", DType::F32, &[128, 512]);
    b.load(a, Grid::origin(x)).unwrap();
    b.tensor_copy(c, a).unwrap();
    b.store(Grid::origin(out), c).unwrap();
    let p = compile(b);
    assert_eq!(p.addrs(), &[0, 2048]);
    assert_eq!(p.sbuf_bytes(), 4096);
}

#[test]
fn overlapping_tiles_are_disjoint_and_64_byte_aligned() {
    let (mut b, x, out) = io();
    // 20, 100 and 12 bytes per partition: rounded up to 64, 128 and 64.
    let t0 = sbuf(&mut b, "t0", DType::Bf16, &[128, 10]);
    let t1 = sbuf(&mut b, "t1", DType::Bf16, &[128, 50]);
    let t2 = sbuf(&mut b, "t2", DType::F32, &[128, 3]);
    for t in [t0, t1, t2] {
        b.load(t, Grid::origin(x)).unwrap();
    }
    for t in [t0, t1, t2] {
        b.store(Grid::origin(out), t).unwrap();
    }
    let p = compile(b);
    assert_eq!(p.addrs(), &[0, 64, 192]);
    assert_eq!(p.sbuf_bytes(), 256);

    // The same facts stated generally: aligned, and no two byte ranges overlap.
    let bytes = [20u32, 100, 12];
    for (i, &a) in p.addrs().iter().enumerate() {
        assert_eq!(a % 64, 0, "tile {i} at {a}");
        for (j, &c) in p.addrs().iter().enumerate().skip(i + 1) {
            let disjoint = a + bytes[i] <= c || c + bytes[j] <= a;
            assert!(disjoint, "tiles {i} and {j} overlap");
        }
    }
    check_program_view(&p);
}

#[test]
fn first_fit_reuses_a_freed_hole() {
    let (mut b, x, out) = io();
    let a = sbuf(&mut b, "a", DType::F32, &[128, 512]); // 2048 B
    let s = sbuf(&mut b, "s", DType::Bf16, &[128, 32]); // 64 B
    let c = sbuf(&mut b, "c", DType::F32, &[128, 512]); // 2048 B
    let d = sbuf(&mut b, "d", DType::Bf16, &[128, 16]); // 32 B -> 64
    b.load(a, Grid::origin(x)).unwrap(); // 0: a at 0
    b.load(s, Grid::origin(x)).unwrap(); // 1: s at 2048
    b.load(c, Grid::origin(x)).unwrap(); // 2: c at 2112
    b.store(Grid::origin(out), s).unwrap(); // 3: s dies
    b.load(d, Grid::origin(x)).unwrap(); // 4: d fits s's hole at 2048
    for t in [a, c, d] {
        b.store(Grid::origin(out), t).unwrap();
    }
    let p = compile(b);
    assert_eq!(p.addrs(), &[0, 2048, 2112, 2048]);
    assert_eq!(p.sbuf_bytes(), 4160);
}

#[test]
fn unused_tiles_take_no_space() {
    let (mut b, x, out) = io();
    sbuf(&mut b, "unused", DType::F32, &[128, 25600]); // 100 KiB, never used
    let t = sbuf(&mut b, "t", DType::Bf16, &[128, 512]);
    b.load(t, Grid::origin(x)).unwrap();
    b.store(Grid::origin(out), t).unwrap();
    let p = compile(b);
    assert_eq!(p.addrs(), &[0, 0]);
    assert_eq!(p.sbuf_bytes(), 1024);
}

/// ```text
/// 0  load a               (a: 2048 B)
/// 1  for i in range(4):
/// 2      copy c <- a      (a's last use)
/// 3      store out <- c
/// 4      load d
/// 5      store out <- d
/// 6  end
/// ```
/// With `looped = false` the same instructions without the loop.
fn value_carried_into_a_loop(looped: bool) -> CompiledProgram {
    let (mut b, x, out) = io();
    let a = sbuf(&mut b, "a", DType::F32, &[128, 512]);
    let c = sbuf(&mut b, "c", DType::F32, &[128, 512]);
    let d = sbuf(&mut b, "d", DType::F32, &[128, 512]);
    b.load(a, Grid::origin(x)).unwrap();
    if looped {
        b.begin_loop(LoopKind::Sequential, "i", Extent::Fixed(4))
            .unwrap();
    }
    b.tensor_copy(c, a).unwrap();
    b.store(Grid::origin(out), c).unwrap();
    b.load(d, Grid::origin(x)).unwrap();
    b.store(Grid::origin(out), d).unwrap();
    if looped {
        b.end_loop().unwrap();
    }
    compile(b)
}

#[test]
fn a_tile_defined_before_a_loop_and_used_inside_lives_for_the_whole_loop() {
    // Straight-line: a dies at the copy, so d (first used two instructions later) takes
    // address 0 back.
    let p = value_carried_into_a_loop(false);
    assert_eq!(p.addrs(), &[0, 2048, 0]);
    // In a loop, the second iteration reads a again after d was written: d must not take
    // a's address. c (live) is at 2048; d takes c's place after c dies.
    let p = value_carried_into_a_loop(true);
    assert_eq!(p.addrs(), &[0, 2048, 2048]);
    assert_eq!(p.sbuf_bytes(), 4096);
}

#[test]
fn the_loop_extension_stops_at_the_loop_that_carries_the_value() {
    // ```text
    // 0  for i in range(2):
    // 1      load a
    // 2      for j in range(2):
    // 3          copy c <- a     (a's last use: a lives through loop j, 2..=7)
    // 4          store out <- c
    // 5          load d          (may not take a's address)
    // 6          store out <- d
    // 7      end j
    // 8      load e              (a is dead here: e takes address 0)
    // 9      store out <- e
    // 10 end i
    // ```
    let (mut b, x, out) = io();
    let a = sbuf(&mut b, "a", DType::F32, &[128, 512]);
    let c = sbuf(&mut b, "c", DType::F32, &[128, 512]);
    let d = sbuf(&mut b, "d", DType::F32, &[128, 512]);
    let e = sbuf(&mut b, "e", DType::F32, &[128, 512]);
    b.begin_loop(LoopKind::Sequential, "i", Extent::Fixed(2))
        .unwrap();
    b.load(a, Grid::origin(x)).unwrap();
    b.begin_loop(LoopKind::Sequential, "j", Extent::Fixed(2))
        .unwrap();
    b.tensor_copy(c, a).unwrap();
    b.store(Grid::origin(out), c).unwrap();
    b.load(d, Grid::origin(x)).unwrap();
    b.store(Grid::origin(out), d).unwrap();
    b.end_loop().unwrap();
    b.load(e, Grid::origin(x)).unwrap();
    b.store(Grid::origin(out), e).unwrap();
    b.end_loop().unwrap();
    let p = compile(b);
    assert_eq!(p.addrs(), &[0, 2048, 2048, 0]);
    assert_eq!(p.sbuf_bytes(), 4096);
}

#[test]
fn tiles_used_only_inside_one_iteration_share_addresses() {
    // for i in range(4): load a; store a; load c; store c  -- a and c never overlap.
    let (mut b, x, out) = io();
    let a = sbuf(&mut b, "a", DType::F32, &[128, 512]);
    let c = sbuf(&mut b, "c", DType::F32, &[128, 512]);
    b.begin_loop(LoopKind::Sequential, "i", Extent::Fixed(4))
        .unwrap();
    b.load(a, Grid::origin(x)).unwrap();
    b.store(Grid::origin(out), a).unwrap();
    b.load(c, Grid::origin(x)).unwrap();
    b.store(Grid::origin(out), c).unwrap();
    b.end_loop().unwrap();
    let p = compile(b);
    assert_eq!(p.addrs(), &[0, 0]);
    assert_eq!(p.sbuf_bytes(), 2048);
}

#[test]
fn live_psum_tiles_get_distinct_banks_and_reuse_the_lowest_free_one() {
    // ```text
    // 0 memset p0   1 memset p1   2 memset p2      (banks 0, 1, 2)
    // 3 copy s <- p1                               (p1 dies)
    // 4 memset p3                                  (p0, p2 live: lowest free bank is 1)
    // 5 copy s <- p0   6 copy s <- p2   7 copy s <- p3
    // 8 memset p4                                  (all dead: bank 0)
    // 9 copy s <- p4   10 store out <- s
    // ```
    let (mut b, _x, out) = io();
    let ps: Vec<TileId> = (0..5).map(|i| psum(&mut b, &format!("p{i}"))).collect();
    let s = sbuf(&mut b, "s", DType::F32, &[128, 512]);
    for &p in &ps[..3] {
        b.memset(p, Scalar::float(0.0)).unwrap();
    }
    b.tensor_copy(s, ps[1]).unwrap();
    b.memset(ps[3], Scalar::float(0.0)).unwrap();
    for i in [0, 2, 3] {
        b.tensor_copy(s, ps[i]).unwrap();
    }
    b.memset(ps[4], Scalar::float(0.0)).unwrap();
    b.tensor_copy(s, ps[4]).unwrap();
    b.store(Grid::origin(out), s).unwrap();
    let p = compile(b);
    // PSUM addresses are bank × 2048; s is the only SBUF tile.
    assert_eq!(p.addrs(), &[0, 2048, 4096, 2048, 0, 0]);
    assert_eq!(p.psum_banks(), 3);
    assert_eq!(p.sbuf_bytes(), 2048);
    check_program_view(&p);
}

#[test]
fn a_small_psum_tile_still_takes_a_whole_bank() {
    // Two 64-byte PSUM tiles live together: banks 0 and 1, not bytes 0 and 64.
    let (mut b, _x, out) = io();
    let p0 = b.tile("p0", Memory::Psum, DType::F32, &[128, 16]).unwrap();
    let p1 = b.tile("p1", Memory::Psum, DType::F32, &[128, 16]).unwrap();
    let s = sbuf(&mut b, "s", DType::F32, &[128, 16]);
    b.memset(p0, Scalar::float(0.0)).unwrap();
    b.memset(p1, Scalar::float(0.0)).unwrap();
    b.tensor_copy(s, p0).unwrap();
    b.tensor_copy(s, p1).unwrap();
    b.store(Grid::origin(out), s).unwrap();
    let p = compile(b);
    assert_eq!(p.addrs(), &[0, 2048, 0]);
    assert_eq!(p.psum_banks(), 2);
    assert_eq!(p.sbuf_bytes(), 64);
}

#[test]
fn tile_decl_reports_its_bytes_per_partition() {
    let mut b = ProgramBuilder::new("bytes", Target::Trn1);
    let x = b.input("x", DType::Bf16, &dims(&[64, 3, 100])).unwrap();
    let out = b.output("out", DType::Bf16, &dims(&[64, 3, 100])).unwrap();
    let t = sbuf(&mut b, "t", DType::Bf16, &[64, 3, 100]);
    b.load(t, Grid::origin(x)).unwrap();
    b.store(Grid::origin(out), t).unwrap();
    let p = compile(b);
    let parts = p.parts();
    // 3 · 100 bf16 = 600 bytes, placed as 640 (ten 64-byte units).
    assert_eq!(parts.program().tiles()[0].bytes_per_partition(), 600);
    assert_eq!(p.sbuf_bytes(), 640);
}

#[test]
fn an_accumulator_over_a_loop_keeps_its_bank_across_iterations() {
    // ```text
    // 0 for k in range(4):
    // 1     load st             (x[p, 128k + f0])
    // 2     load mv
    // 3     acc += st^T · mv    (group over k: overwrite at k = 0, accumulate after)
    // 4     copy r <- acc       (acc's last use in the body)
    // 5     p2 = st^T · mv      (first use of p2: gets acc's bank 0)
    // 6     copy r2 <- p2
    // 7     store out <- r
    // 8     store out <- r2
    // 9 end
    // ```
    let mut b = ProgramBuilder::new("acc", Target::Trn1);
    let x = b.input("x", DType::Bf16, &dims(&[128, 512])).unwrap();
    let out = b.output("out", DType::F32, &dims(&[128, 512])).unwrap();
    let st = sbuf(&mut b, "st", DType::Bf16, &[128, 128]);
    let mv = sbuf(&mut b, "mv", DType::Bf16, &[128, 512]);
    let acc = psum(&mut b, "acc");
    let p2 = psum(&mut b, "p2");
    let r = sbuf(&mut b, "r", DType::F32, &[128, 512]);
    let r2 = sbuf(&mut b, "r2", DType::F32, &[128, 512]);
    let k = b
        .begin_loop(LoopKind::Sequential, "k", Extent::Fixed(4))
        .unwrap();
    b.load(st, Grid::origin(x).at(1, k.checked_scale(128).unwrap()))
        .unwrap();
    b.load(mv, Grid::origin(x)).unwrap();
    b.nc_matmul(
        acc,
        st,
        mv,
        Write::Group {
            loops: 0b1,
            op: Alu::Add,
        },
    )
    .unwrap();
    b.tensor_copy(r, acc).unwrap();
    b.nc_matmul(p2, st, mv, Write::Overwrite).unwrap();
    b.tensor_copy(r2, p2).unwrap();
    b.store(Grid::origin(out), r).unwrap();
    b.store(Grid::origin(out), r2).unwrap();
    b.end_loop().unwrap();
    let p = compile(b);
    // Tiles 2 (acc) and 3 (p2) are both PSUM; acc must keep bank 0 for the whole loop.
    assert_eq!(p.addrs()[2], 0);
    assert_ne!(
        p.addrs()[3],
        p.addrs()[2],
        "p2 overwrites acc's partial sum"
    );
    assert_eq!(p.psum_banks(), 2);
}

#[test]
fn sbuf_capacity_diagnostic_is_consistent_when_first_fit_fragments() {
    // ```text
    // 0 load a   (100 KiB at 0)
    // 1 load s   (64 B at 102_400)
    // 2 store a  (a dies: a 100 KiB hole below s)
    // 3 load c   (150 KiB: does not fit the hole, and 102_464 + 153_600 > 196_608)
    // 4 store s   5 store c
    // ```
    let mut b = ProgramBuilder::new("frag", Target::Trn1);
    let x = b.input("x", DType::F32, &dims(&[128, 38400])).unwrap();
    let out = b.output("out", DType::F32, &dims(&[128, 38400])).unwrap();
    let a = sbuf(&mut b, "a", DType::F32, &[128, 25600]);
    let s = sbuf(&mut b, "s", DType::F32, &[128, 16]);
    let c = sbuf(&mut b, "c", DType::F32, &[128, 38400]);
    b.load(a, Grid::origin(x)).unwrap();
    b.load(s, Grid::origin(x)).unwrap();
    b.store(Grid::origin(out), a).unwrap();
    b.load(c, Grid::origin(x)).unwrap();
    b.store(Grid::origin(out), s).unwrap();
    b.store(Grid::origin(out), c).unwrap();
    // Either the program fits (64 + 153_600 live bytes ≤ 196_608), or the diagnostic's
    // `needed` is really over the capacity it names.
    if let Err(e) = b.finish() {
        let nki_lang::builder::BuildError::Rules(d) = e else {
            panic!("expected rule violations, got {e:?}")
        };
        match &d[0].violation {
            nki_lang::RuleViolation::SbufCapacity {
                needed, capacity, ..
            } => assert!(
                *needed > *capacity as u64,
                "needed {needed} is not over capacity {capacity}"
            ),
            v => panic!("unexpected violation {v:?}"),
        }
    }
}
