//! The checked program as a `static`: plain data, built by const expressions.

use nki_lang::{
    Affine, AxisIndex, Bounded, CompiledProgram, Constraint, DType, Dim, Engine, Extent, HbmAccess,
    Instr, LoopKind, Memory, Op, PsumWrite, TensorRole, TileShape, TileView,
};
use proc_macro2::TokenStream;
use quote::quote;

use super::paths::item;

/// `Program::from_checked_parts(...)` for a compiled program.
pub fn program(p: &CompiledProgram) -> TokenStream {
    let parts = p.parts();
    let prog = parts.program();
    let program_t = item("Program");
    let name = prog.name();
    let target = target(prog.target());
    let symbols = prog.symbols();
    let tensors = prog.tensors().iter().map(|t| {
        let (name, dtype, role) = (t.name, dtype(t.dtype), role(t.role));
        let shape = t.shape.iter().map(|d| dim(*d));
        let decl = item("TensorDecl");
        quote!(#decl { name: #name, dtype: #dtype, shape: const { &[#(#shape),*] }, role: #role })
    });
    let tiles = prog.tiles().iter().map(|t| {
        let (name, memory, dtype, shape, addr) = (
            t.name,
            memory(t.memory),
            dtype(t.dtype),
            shape(&t.shape),
            t.addr,
        );
        let decl = item("TileDecl");
        quote!(#decl { name: #name, memory: #memory, dtype: #dtype, shape: #shape, addr: #addr })
    });
    let loop_vars = prog.loop_vars();
    let instrs = prog.instrs().iter().map(instr);
    let constraints = prog.constraints().iter().map(constraint);
    let (sbuf, psum) = (prog.sbuf_bytes(), prog.psum_banks());
    quote! {
        #program_t::from_checked_parts(
            #name,
            #target,
            const { &[#(#symbols),*] },
            const { &[#(#tensors),*] },
            const { &[#(#tiles),*] },
            const { &[#(#loop_vars),*] },
            const { &[#(#instrs),*] },
            const { &[#(#constraints),*] },
            #sbuf,
            #psum,
        )
    }
}

fn target(t: nki_lang::Target) -> TokenStream {
    let ty = item("Target");
    match t {
        nki_lang::Target::Trn1 => quote!(#ty::Trn1),
        nki_lang::Target::Trn2 => quote!(#ty::Trn2),
    }
}

fn dtype(d: DType) -> TokenStream {
    let ty = item("DType");
    let v = match d {
        DType::F32 => quote!(F32),
        DType::Tf32 => quote!(Tf32),
        DType::Bf16 => quote!(Bf16),
        DType::F16 => quote!(F16),
        DType::F8E4M3 => quote!(F8E4M3),
        DType::F8E5M2 => quote!(F8E5M2),
        DType::I8 => quote!(I8),
        DType::I16 => quote!(I16),
        DType::I32 => quote!(I32),
        DType::U8 => quote!(U8),
        DType::U16 => quote!(U16),
        DType::U32 => quote!(U32),
        DType::Bool => quote!(Bool),
    };
    quote!(#ty::#v)
}

fn role(r: TensorRole) -> TokenStream {
    let ty = item("TensorRole");
    match r {
        TensorRole::Input => quote!(#ty::Input),
        TensorRole::Output => quote!(#ty::Output),
    }
}

fn memory(m: Memory) -> TokenStream {
    let ty = item("Memory");
    match m {
        Memory::Hbm => quote!(#ty::Hbm),
        Memory::Sbuf => quote!(#ty::Sbuf),
        Memory::Psum => quote!(#ty::Psum),
    }
}

fn dim(d: Dim) -> TokenStream {
    let ty = item("Dim");
    match d {
        Dim::Fixed(n) => quote!(#ty::Fixed(#n)),
        Dim::Sym(s) => quote!(#ty::Sym(#s)),
    }
}

fn extent(e: Extent) -> TokenStream {
    let ty = item("Extent");
    match e {
        Extent::Fixed(n) => quote!(#ty::Fixed(#n)),
        Extent::Sym { sym, div } => quote!(#ty::Sym { sym: #sym, div: #div }),
    }
}

fn shape(s: &TileShape) -> TokenStream {
    let ty = item("TileShape");
    let dims = s.dims();
    quote!(match #ty::new(&[#(#dims),*]) { ::core::option::Option::Some(s) => s, ::core::option::Option::None => panic!() })
}

fn affine(a: &Affine) -> TokenStream {
    let ty = item("Affine");
    let (c, coef) = (a.constant, a.coef);
    quote!(#ty { constant: #c, coef: [#(#coef),*] })
}

fn view(v: &TileView) -> TokenStream {
    let ty = item("TileView");
    let (tile, part_start, shape, offset, strides) = (
        v.tile,
        v.part_start,
        shape(&v.shape),
        affine(&v.offset),
        v.strides,
    );
    quote!(#ty { tile: #tile, part_start: #part_start, shape: #shape, offset: #offset, strides: [#(#strides),*] })
}

fn access(a: &HbmAccess) -> TokenStream {
    let ty = item("HbmAccess");
    let axis_t = item("AxisIndex");
    let (tensor, rank) = (a.tensor, a.rank);
    let axes = a.axes.iter().map(|x: &AxisIndex| {
        let (start, grid) = (affine(&x.start), x.grid);
        quote!(#axis_t { start: #start, grid: [#(#grid),*] })
    });
    quote!(#ty { tensor: #tensor, rank: #rank, axes: [#(#axes),*] })
}

fn instr(i: &Instr) -> TokenStream {
    let instr_t = item("Instr");
    let op_t = item("Op");
    let engine_t = item("Engine");
    let engine = match i.engine {
        Engine::Tensor => quote!(#engine_t::Tensor),
        Engine::Vector => quote!(#engine_t::Vector),
        Engine::Scalar => quote!(#engine_t::Scalar),
        Engine::GpSimd => quote!(#engine_t::GpSimd),
        Engine::Dma => quote!(#engine_t::Dma),
        Engine::Sync => quote!(#engine_t::Sync),
    };
    let op = match &i.op {
        Op::LoopBegin {
            kind,
            trip,
            var,
            end,
        } => {
            let k = item("LoopKind");
            let kind = match kind {
                LoopKind::Affine => quote!(#k::Affine),
                LoopKind::Sequential => quote!(#k::Sequential),
            };
            let trip = extent(*trip);
            quote!(#op_t::LoopBegin { kind: #kind, trip: #trip, var: #var, end: #end })
        }
        Op::LoopEnd { begin } => quote!(#op_t::LoopEnd { begin: #begin }),
        Op::Load { src, dst } => {
            let (src, dst) = (access(src), view(dst));
            quote!(#op_t::Load { src: #src, dst: #dst })
        }
        Op::Store { dst, src } => {
            let (dst, src) = (access(dst), view(src));
            quote!(#op_t::Store { dst: #dst, src: #src })
        }
        Op::Matmul {
            stationary,
            moving,
            dst,
            write,
        } => {
            let (s, m, d) = (view(stationary), view(moving), view(dst));
            let w = item("PsumWrite");
            let write = match write {
                PsumWrite::Overwrite => quote!(#w::Overwrite),
                PsumWrite::Accumulate => quote!(#w::Accumulate),
                PsumWrite::Group { loops } => quote!(#w::Group { loops: #loops }),
            };
            quote!(#op_t::Matmul { stationary: #s, moving: #m, dst: #d, write: #write })
        }
        Op::Transpose { src, dst } => {
            let (src, dst) = (view(src), view(dst));
            quote!(#op_t::Transpose { src: #src, dst: #dst })
        }
        Op::Copy { src, dst } => {
            let (src, dst) = (view(src), view(dst));
            quote!(#op_t::Copy { src: #src, dst: #dst })
        }
        Op::Memset { dst, value } => {
            let dst = view(dst);
            let bits = value.to_bits();
            quote!(#op_t::Memset { dst: #dst, value: f32::from_bits(#bits) })
        }
    };
    let line = i.line;
    quote!(#instr_t { engine: #engine, line: #line, op: #op })
}

fn constraint(c: &Constraint) -> TokenStream {
    let ty = item("Constraint");
    match *c {
        Constraint::Divisible { sym, by } => quote!(#ty::Divisible { sym: #sym, by: #by }),
        Constraint::InBounds {
            target,
            size,
            lo,
            hi,
            coef,
            loops,
            depth,
        } => {
            let b = item("Bounded");
            let target = match target {
                Bounded::Tensor { tensor, axis } => {
                    quote!(#b::Tensor { tensor: #tensor, axis: #axis })
                }
                Bounded::TileFree { tile } => quote!(#b::TileFree { tile: #tile }),
            };
            let size = dim(size);
            let loops = loops.iter().map(|e| extent(*e));
            quote!(#ty::InBounds { target: #target, size: #size, lo: #lo, hi: #hi, coef: [#(#coef),*], loops: [#(#loops),*], depth: #depth })
        }
    }
}
