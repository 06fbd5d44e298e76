//! The `Display` listing of a compiled `Program`: signature line, `require` lines, footprint,
//! tile table with hex addresses, and one indented line per instruction with its engine,
//! mnemonic, tile views and HBM accesses. The expected text is written out by hand from the
//! programs' definitions and the addresses the allocator must give them.

mod common;

use common::{compile, dims, edit_view, slot};
use nki_lang::builder::{Grid, ProgramBuilder};
use nki_lang::{
    Affine, Alu, CompiledProgram, DType, Dim, Extent, LoopKind, Memory, Opcode, Scalar, Target,
    Write,
};

fn listing(p: &CompiledProgram) -> String {
    p.parts().program().to_string()
}

/// `out = Σ_k x[k-block]ᵀ · y[k-block]` over `K / 128` blocks.
fn kt_sum() -> CompiledProgram {
    let mut b = ProgramBuilder::new("kt_sum", Target::Trn1);
    let k = b.symbol("K").unwrap();
    let x = b.input("x", DType::Bf16, &[k, Dim::Fixed(128)]).unwrap();
    let y = b.input("y", DType::Bf16, &[k, Dim::Fixed(512)]).unwrap();
    let out = b.output("out", DType::F32, &dims(&[128, 512])).unwrap();
    let a = b.tile("a", Memory::Sbuf, DType::Bf16, &[128, 128]).unwrap();
    let m = b.tile("b", Memory::Sbuf, DType::Bf16, &[128, 512]).unwrap();
    let acc = b
        .tile("acc", Memory::Psum, DType::F32, &[128, 512])
        .unwrap();
    let res = b
        .tile("res", Memory::Sbuf, DType::F32, &[128, 512])
        .unwrap();
    let kv = b
        .begin_loop(
            LoopKind::Affine,
            "k",
            Extent::Sym {
                sym: 0,
                add: 0,
                div: 128,
            },
        )
        .unwrap();
    let row = kv.checked_scale(128).unwrap();
    b.load(a, Grid::origin(x).at(0, row)).unwrap();
    b.load(m, Grid::origin(y).at(0, row)).unwrap();
    b.nc_matmul(
        acc,
        a,
        m,
        Write::Group {
            loops: 0b1,
            op: Alu::Add,
        },
    )
    .unwrap();
    b.end_loop().unwrap();
    b.tensor_copy(res, acc).unwrap();
    b.store(Grid::origin(out), res).unwrap();
    compile(b)
}

#[test]
fn listing_of_a_k_tiled_matmul() {
    // Addresses: acc lives from the loop start to the copy (bank 0); a takes SBUF 0..256;
    // b, live with a, takes 256..1280 (0x100); res, after both died, takes 0..2048.
    let expected = "\
kernel kt_sum(x: bf16[K, 128], y: bf16[K, 512]) -> (out: f32[128, 512])  target trn1
  require K % 128 == 0
  sbuf 2048 B/partition, psum 1 bank(s)
  tile t0 a            sbuf bf16[128, 128] @0x00000
  tile t1 b            sbuf bf16[128, 512] @0x00100
  tile t2 acc          psum f32[128, 512] @0x00000
  tile t3 res          sbuf f32[128, 512] @0x00000
0000  for k in affine_range(K / 128):
0001    DMA     load         t0 sbuf:bf16[128, 128] @0x0 <- x:bf16[128*k + p, f0]
0002    DMA     load         t1 sbuf:bf16[128, 512] @0x100 <- y:bf16[128*k + p, f0]
0003    Tensor  nc_matmul    t2 psum:f32[128, 512] @0x0 += (group over k) \
t0 sbuf:bf16[128, 128] @0x0ᵀ · t1 sbuf:bf16[128, 512] @0x100
0005  Vector  tensor_copy  t3 sbuf:f32[128, 512] @0x0 <- t2 psum:f32[128, 512] @0x0
0006  DMA     store        out:f32[p, f0] <- t3 sbuf:f32[128, 512] @0x0
";
    assert_eq!(listing(&kt_sum()), expected);
}

#[test]
fn listing_key_lines() {
    // The same facts as single substrings, so a failure names the line that changed.
    let text = listing(&kt_sum());
    for line in [
        "kernel kt_sum(x: bf16[K, 128], y: bf16[K, 512]) -> (out: f32[128, 512])  target trn1\n",
        "\n  require K % 128 == 0\n",
        "\n  tile t1 b            sbuf bf16[128, 512] @0x00100\n",
        "\n0000  for k in affine_range(K / 128):\n",
        "\n0001    DMA     load         t0 sbuf:bf16[128, 128] @0x0 <- x:bf16[128*k + p, f0]\n",
        "\n0003    Tensor  nc_matmul    t2 psum:f32[128, 512] @0x0 += (group over k) ",
        "\n0005  Vector  tensor_copy  ",
    ] {
        assert!(text.contains(line), "missing {line:?} in\n{text}");
    }
    // The loop's end has no line of its own.
    assert!(!text.contains("\n0004"), "{text}");
}

#[test]
fn listing_of_a_sequential_loop_with_memsets_and_a_strided_view() {
    // ```text
    // 0 for i in sequential_range(3):
    // 1     memset p0[p, 1 + 2*f0] (a [128, 32] view of a [128, 64] tile) <- 1.5
    // 2     memset p1 <- -2.0
    // 3     copy s <- p0
    // 4     copy s <- p1
    // 5 end
    // 6 store out <- s
    // ```
    let mut b = ProgramBuilder::new("seq", Target::Trn2);
    let out = b.output("out", DType::F32, &dims(&[128, 64])).unwrap();
    let p0 = b.tile("p0", Memory::Psum, DType::F32, &[128, 64]).unwrap();
    let p1 = b.tile("p1", Memory::Psum, DType::F32, &[128, 64]).unwrap();
    let s = b.tile("s", Memory::Sbuf, DType::F32, &[128, 64]).unwrap();
    b.begin_loop(LoopKind::Sequential, "i", Extent::Fixed(3))
        .unwrap();
    b.memset(p0, Scalar::float(1.5)).unwrap();
    b.memset(p1, Scalar::float(-2.0)).unwrap();
    b.tensor_copy(s, p0).unwrap();
    b.tensor_copy(s, p1).unwrap();
    b.end_loop().unwrap();
    b.store(Grid::origin(out), s).unwrap();
    let mut src = compile(b).source().clone();
    edit_view(&mut src, 1, Opcode::Memset, slot::DST, |dst| {
        dst.shape = nki_lang::TileShape::new(&[128, 32]).unwrap();
        dst.offset = Affine::constant(1);
        dst.strides = [2, 0, 0, 0];
    });
    let p = src.finish().expect("valid");
    let text = listing(&p);

    // p0 and p1 are live together: banks 0 and 1. s (carried out of the loop) is at 0.
    for line in [
        "kernel seq() -> (out: f32[128, 64])  target trn2\n",
        "\n  sbuf 256 B/partition, psum 2 bank(s)\n",
        "\n  tile t0 p0           psum f32[128, 64] @0x00000\n",
        "\n  tile t1 p1           psum f32[128, 64] @0x00800\n",
        "\n  tile t2 s            sbuf f32[128, 64] @0x00000\n",
        "\n0000  for i in sequential_range(3):\n",
        // The view starts one f32 (4 bytes) into the tile.
        "\n0001    Vector  memset       t0 psum:f32[128, 32]{p+0, f: 1 + 2*f0} @0x4 <- 1.5\n",
        "\n0002    Vector  memset       t1 psum:f32[128, 64] @0x800 <- -2.0\n",
        "\n0004    Vector  tensor_copy  t2 sbuf:f32[128, 64] @0x0 <- t1 psum:f32[128, 64] @0x800\n",
        "\n0006  DMA     store        out:f32[p, f0] <- t2 sbuf:f32[128, 64] @0x0\n",
    ] {
        assert!(text.contains(line), "missing {line:?} in\n{text}");
    }
    // No symbolic dimension, so no launch requirement.
    assert!(!text.contains("require"), "{text}");
}

#[test]
fn listing_of_nested_loops_and_a_fixed_tensor_axis() {
    // for i in affine_range(K): for j in sequential_range(2): t = x[i, 128*j + p, f0]
    let mut b = ProgramBuilder::new("nest", Target::Trn1);
    let k = b.symbol("K").unwrap();
    let x = b
        .input("x", DType::F32, &[k, Dim::Fixed(256), Dim::Fixed(64)])
        .unwrap();
    let out = b.output("out", DType::F32, &dims(&[128, 64])).unwrap();
    let t = b.tile("t", Memory::Sbuf, DType::F32, &[128, 64]).unwrap();
    let i = b
        .begin_loop(
            LoopKind::Affine,
            "i",
            Extent::Sym {
                sym: 0,
                add: 0,
                div: 1,
            },
        )
        .unwrap();
    let j = b
        .begin_loop(LoopKind::Sequential, "j", Extent::Fixed(2))
        .unwrap();
    let row = j.checked_scale(128).unwrap();
    b.load(t, Grid::origin(x).from_axis(1).at(0, i).at(1, row))
        .unwrap();
    b.store(Grid::origin(out), t).unwrap();
    b.end_loop().unwrap();
    b.end_loop().unwrap();
    let text = listing(&compile(b));
    for line in [
        "kernel nest(x: f32[K, 256, 64]) -> (out: f32[128, 64])  target trn1\n",
        "\n0000  for i in affine_range(K):\n",
        "\n0001    for j in sequential_range(2):\n",
        "\n0002      DMA     load         t0 sbuf:f32[128, 64] @0x0 <- x:f32[i, 128*j + p, f0]\n",
        "\n0003      DMA     store        out:f32[p, f0] <- t0 sbuf:f32[128, 64] @0x0\n",
    ] {
        assert!(text.contains(line), "missing {line:?} in\n{text}");
    }
    // Row i of K over K iterations, and 128*1 + 127 = 255 of 256: nothing left to check
    // at launch.
    assert!(!text.contains("require"), "{text}");
}
