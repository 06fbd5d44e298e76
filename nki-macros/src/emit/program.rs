//! The checked program as a `static`: plain data, built by const expressions.
//!
//! Each pool entry (view, access, mask, expression) is emitted once; instructions refer to them
//! by index.

use core::fmt::Debug;

use nki_lang::constraint::Computed;
use nki_lang::{
    AccOut, Affine, AxisIndex, Bounded, CompiledProgram, Constraint, Dim, Dst, Extent, HbmAccess,
    Instr, InstrData, LoopKind, Mask, MaskTerm, Pred, RegSrc, Scalar, Src, TileShape, TileView,
    Write,
};
use proc_macro2::{Ident, Span, TokenStream};
use quote::quote;

use super::paths::item;

/// `Program::from_checked_parts(...)` for a compiled program.
pub fn program(p: &CompiledProgram) -> TokenStream {
    let parts = p.parts();
    let prog = parts.program();
    let program_t = item("Program");
    let name = prog.name();
    let target = variant("Target", prog.target());
    let symbols = prog.symbols();
    let tensors = prog.tensors().iter().map(|t| {
        let (name, dtype, role) = (
            t.name,
            variant("DType", t.dtype),
            variant("TensorRole", t.role),
        );
        let shape = t.shape.iter().map(|d| dim(*d));
        let decl = item("TensorDecl");
        let scope = option(t.scope, |s| quote!(#s));
        let data = t.data;
        quote!(#decl { name: #name, dtype: #dtype, shape: const { &[#(#shape),*] }, role: #role, scope: #scope, data: const { &[#(#data),*] } })
    });
    let reshapes = prog.reshapes().iter().map(|r| {
        let (name, tensor) = (r.name, r.tensor);
        let shape = r.shape.iter().map(|d| dim(*d));
        let decl = item("ReshapeDecl");
        quote!(#decl { name: #name, tensor: #tensor, shape: const { &[#(#shape),*] } })
    });
    let tiles = prog.tiles().iter().map(|t| {
        let (name, memory, dtype, shape, addr) = (
            t.name,
            variant("Memory", t.memory),
            variant("DType", t.dtype),
            shape(&t.shape),
            t.addr,
        );
        let scope = match t.scope {
            Some(s) => quote!(::core::option::Option::Some(#s)),
            None => quote!(::core::option::Option::None),
        };
        let blocks = match t.blocks {
            Some(e) => {
                let e = extent(e);
                quote!(::core::option::Option::Some(#e))
            }
            None => quote!(::core::option::Option::None),
        };
        let block_axes = t.block_axes;
        let decl = item("TileDecl");
        quote!(#decl { name: #name, memory: #memory, dtype: #dtype, shape: #shape, addr: #addr, scope: #scope, blocks: #blocks, block_axes: #block_axes })
    });
    let loop_vars = prog.loop_vars();
    let views = prog.views().iter().map(view);
    let accesses = prog.accesses().iter().map(access);
    let masks = prog.masks().iter().map(mask);
    let exprs = prog.exprs().iter().map(axis_index);
    let instrs = prog.instrs().iter().map(instr);
    let constraints = prog.constraints().iter().map(constraint);
    let (sbuf, psum) = (prog.sbuf_bytes(), prog.psum_banks());
    let control = prog.control();
    let with_control = if control.names.is_empty() && !control.orders() {
        TokenStream::new()
    } else {
        let (control_t, name_t, edge_t, ordered_t) = (
            item("ScheduleControl"),
            item("InstrName"),
            item("Edge"),
            item("Ordered"),
        );
        let names = control.names.iter().map(|n| {
            let (name, first, end) = (n.name, n.first, n.end);
            quote!(#name_t { name: #name, first: #first, end: #end })
        });
        let edges = control.edges.iter().map(|e| {
            let (after, before) = (e.after, e.before);
            quote!(#edge_t { after: #after, before: #before })
        });
        let ordered = control.ordered.iter().map(|o| {
            let (first, end) = (o.first, o.end);
            quote!(#ordered_t { first: #first, end: #end })
        });
        quote! {
            .with_control(#control_t {
                names: const { &[#(#names),*] },
                edges: const { &[#(#edges),*] },
                ordered: const { &[#(#ordered),*] },
            })
        }
    };
    quote! {
        #program_t::from_checked_parts(
            #name,
            #target,
            const { &[#(#symbols),*] },
            const { &[#(#tensors),*] },
            const { &[#(#reshapes),*] },
            const { &[#(#tiles),*] },
            const { &[#(#loop_vars),*] },
            const { &[#(#views),*] },
            const { &[#(#accesses),*] },
            const { &[#(#masks),*] },
            const { &[#(#exprs),*] },
            const { &[#(#instrs),*] },
            const { &[#(#constraints),*] },
            #sbuf,
            #psum,
        )#with_control
    }
}

/// A variant of a fieldless enum of `nki-lang`, by its `Debug` name (which is its identifier).
pub(super) fn variant(ty: &str, value: impl Debug) -> TokenStream {
    let ty = item(ty);
    let v = Ident::new(&format!("{value:?}"), Span::call_site());
    quote!(#ty::#v)
}

fn option<T>(x: Option<T>, f: impl Fn(T) -> TokenStream) -> TokenStream {
    match x {
        Some(x) => {
            let x = f(x);
            quote!(::core::option::Option::Some(#x))
        }
        None => quote!(::core::option::Option::None),
    }
}

fn dim(d: Dim) -> TokenStream {
    let ty = item("Dim");
    match d {
        Dim::Fixed(n) => quote!(#ty::Fixed(#n)),
        Dim::Sym(s) => quote!(#ty::Sym(#s)),
    }
}

fn loop_kind(k: LoopKind) -> TokenStream {
    let ty = item("LoopKind");
    match k {
        LoopKind::Affine => quote!(#ty::Affine),
        LoopKind::Sequential => quote!(#ty::Sequential),
        LoopKind::Dynamic { var, upper, step } => {
            let (var, upper) = (id("RegId", var.0), id("RegId", upper.0));
            quote!(#ty::Dynamic { var: #var, upper: #upper, step: #step })
        }
        LoopKind::While { cond } => {
            let cond = id("RegId", cond.0);
            quote!(#ty::While { cond: #cond })
        }
    }
}

fn extent(e: Extent) -> TokenStream {
    let ty = item("Extent");
    match e {
        Extent::Fixed(n) => quote!(#ty::Fixed(#n)),
        Extent::Sym { sym, add, div } => quote!(#ty::Sym { sym: #sym, add: #add, div: #div }),
    }
}

fn shape(s: &TileShape) -> TokenStream {
    let ty = item("TileShape");
    let dims = s.dims();
    quote!(match #ty::new(&[#(#dims),*]) {
        ::core::option::Option::Some(s) => s,
        ::core::option::Option::None => ::core::panic!(),
    })
}

fn affine(a: &Affine) -> TokenStream {
    let ty = item("Affine");
    let (c, coef) = (a.constant, a.coef);
    quote!(#ty { constant: #c, coef: [#(#coef),*] })
}

fn view(v: &TileView) -> TokenStream {
    let ty = item("TileView");
    let (tile, part_start, shape, offset, strides, part_var) = (
        v.tile,
        v.part_start,
        shape(&v.shape),
        affine(&v.offset),
        v.strides,
        affine(&v.part_var),
    );
    let dtype = option(v.dtype, |d| variant("DType", d));
    quote!(#ty { tile: #tile, part_start: #part_start, shape: #shape, offset: #offset, strides: [#(#strides),*], part_var: #part_var, dtype: #dtype })
}

fn axis_index(x: &AxisIndex) -> TokenStream {
    let ty = item("AxisIndex");
    let (start, grid) = (affine(&x.start), x.grid);
    quote!(#ty { start: #start, grid: [#(#grid),*] })
}

fn access(a: &HbmAccess) -> TokenStream {
    let ty = item("HbmAccess");
    let (tensor, rank, shape) = (a.tensor, a.rank, shape(&a.shape));
    let reshape = option(a.reshape, |r| quote!(#r));
    let axes = a.axes.iter().map(axis_index);
    quote!(#ty { tensor: #tensor, reshape: #reshape, rank: #rank, shape: #shape, axes: [#(#axes),*] })
}

fn mask(m: &Mask) -> TokenStream {
    let ty = item("Mask");
    let term_t = item("MaskTerm");
    let terms = m.terms.iter().map(|t: &MaskTerm| {
        let (axis, coef, offset) = (t.axis, t.coef, affine(&t.offset));
        let sym = option(t.sym, |s| quote!(#s));
        quote!(#term_t { axis: #axis, coef: #coef, offset: #offset, sym: #sym })
    });
    let len = m.len;
    quote!(#ty { terms: [#(#terms),*], len: #len })
}

fn id(ty: &str, i: u16) -> TokenStream {
    let ty = item(ty);
    quote!(#ty(#i))
}

fn scalar(x: Scalar) -> TokenStream {
    let ty = item("Scalar");
    match x {
        Scalar::Float(bits) => quote!(#ty::Float(#bits)),
        Scalar::Int(v) => quote!(#ty::Int(#v)),
    }
}

fn src(s: Src) -> TokenStream {
    let ty = item("Src");
    match s {
        Src::None => quote!(#ty::None),
        Src::Tile(v) => {
            let v = id("ViewId", v.0);
            quote!(#ty::Tile(#v))
        }
        Src::Imm(x) => {
            let x = scalar(x);
            quote!(#ty::Imm(#x))
        }
    }
}

fn dst(d: Dst) -> TokenStream {
    let ty = item("Dst");
    let w = item("Write");
    let v = id("ViewId", d.view.0);
    let write = match d.write {
        Write::Overwrite => quote!(#w::Overwrite),
        Write::Accumulate(op) => {
            let op = variant("Alu", op);
            quote!(#w::Accumulate(#op))
        }
        Write::Group { loops, op } => {
            let op = variant("Alu", op);
            quote!(#w::Group { loops: #loops, op: #op })
        }
    };
    quote!(#ty { view: #v, write: #write })
}

fn acc(a: Option<AccOut>) -> TokenStream {
    option(a, |a| {
        let ty = item("AccOut");
        let (op, v) = (variant("Alu", a.op), id("ViewId", a.view.0));
        quote!(#ty { op: #op, view: #v })
    })
}

fn instr(i: &Instr) -> TokenStream {
    let instr_t = item("Instr");
    let d = item("InstrData");
    let opcode = variant("Opcode", i.opcode);
    let engine = variant("Engine", i.engine);
    let mask = option(i.mask, |m| id("MaskId", m.0));
    let line = i.line;
    let data = match i.data {
        InstrData::LoopBegin {
            kind,
            trip,
            var,
            end,
        } => {
            let (kind, trip) = (loop_kind(kind), extent(trip));
            quote!(#d::LoopBegin { kind: #kind, trip: #trip, var: #var, end: #end })
        }
        InstrData::LoopEnd { begin } => quote!(#d::LoopEnd { begin: #begin }),
        InstrData::Dma { tile, hbm } => {
            let (tile, hbm) = (id("ViewId", tile.0), id("AccessId", hbm.0));
            quote!(#d::Dma { tile: #tile, hbm: #hbm })
        }
        InstrData::Indirect {
            tile,
            hbm,
            index,
            axis,
            mode,
        } => {
            let (tile, hbm) = (id("ViewId", tile.0), id("AccessId", hbm.0));
            let index = id("ViewId", index.0);
            let m = item("IndirectMode");
            let mode = match mode {
                nki_lang::IndirectMode::Rows => quote!(#m::Rows),
                nki_lang::IndirectMode::Scalar { scale, bound } => {
                    quote!(#m::Scalar { scale: #scale, bound: #bound })
                }
            };
            quote!(#d::Indirect { tile: #tile, hbm: #hbm, index: #index, axis: #axis, mode: #mode })
        }
        InstrData::DynCopy {
            dst: t,
            src,
            offset,
            stride,
        } => {
            let t = dst(t);
            let (src, offset) = (id("ViewId", src.0), id("ViewId", offset.0));
            quote!(#d::DynCopy { dst: #t, src: #src, offset: #offset, stride: #stride })
        }
        InstrData::Gather {
            dst: t,
            data,
            indices,
        } => {
            let t = dst(t);
            let (data, indices) = (id("ViewId", data.0), id("ViewId", indices.0));
            quote!(#d::Gather { dst: #t, data: #data, indices: #indices })
        }
        InstrData::Unary { dst: t, src: s } => {
            let (t, s) = (dst(t), id("ViewId", s.0));
            quote!(#d::Unary { dst: #t, src: #s })
        }
        InstrData::Fill { dst: t, value } => {
            let (t, value) = (dst(t), scalar(value));
            quote!(#d::Fill { dst: #t, value: #value })
        }
        InstrData::Iota { dst: t, expr } => {
            let (t, expr) = (dst(t), id("ExprId", expr.0));
            quote!(#d::Iota { dst: #t, expr: #expr })
        }
        InstrData::Alu {
            dst: t,
            src: s,
            op,
            rev,
            acc: a,
        } => {
            let t = dst(t);
            let s = s.map(src);
            let op = op.map(|o| variant("Alu", o));
            let a = acc(a);
            quote!(#d::Alu { dst: #t, src: [#(#s),*], op: [#(#op),*], rev: #rev, acc: #a })
        }
        InstrData::Act {
            dst: t,
            src: s,
            func,
            scale,
            bias,
            acc: a,
        } => {
            let (t, s, func) = (dst(t), id("ViewId", s.0), variant("ActFn", func));
            let (scale, bias, a) = (src(scale), src(bias), acc(a));
            quote!(#d::Act { dst: #t, src: #s, func: #func, scale: #scale, bias: #bias, acc: #a })
        }
        InstrData::Act2 {
            dst: t,
            src: s,
            imm,
            op,
            rev,
            func,
            acc: a,
        } => {
            let (t, s, func) = (dst(t), id("ViewId", s.0), variant("ActFn", func));
            let imm = imm.map(src);
            let op = op.map(|o| variant("Alu", o));
            let a = acc(a);
            quote!(#d::Act2 {
                dst: #t,
                src: #s,
                imm: [#(#imm),*],
                op: [#(#op),*],
                rev: #rev,
                func: #func,
                acc: #a,
            })
        }
        InstrData::Reduce {
            dst: t,
            src: s,
            op,
            axes,
            negate,
        } => {
            let (t, s, op) = (dst(t), id("ViewId", s.0), variant("Alu", op));
            quote!(#d::Reduce { dst: #t, src: #s, op: #op, axes: #axes, negate: #negate })
        }
        InstrData::Scan {
            dst: t,
            src: s,
            init,
            op,
            rev,
        } => {
            let t = dst(t);
            let s = s.map(|v| id("ViewId", v.0));
            let init = src(init);
            let op = op.map(|o| variant("Alu", o));
            quote!(#d::Scan { dst: #t, src: [#(#s),*], init: #init, op: [#(#op),*], rev: #rev })
        }
        InstrData::Select {
            dst: t,
            pred,
            on_true,
            on_false,
        } => {
            let p = item("Pred");
            let pred = match pred {
                Pred::Tile(v) => {
                    let v = id("ViewId", v.0);
                    quote!(#p::Tile(#v))
                }
                Pred::Affine { expr, cmp } => {
                    let (expr, cmp) = (id("ExprId", expr.0), variant("Cmp", cmp));
                    quote!(#p::Affine { expr: #expr, cmp: #cmp })
                }
            };
            let (t, on_true, on_false) = (dst(t), src(on_true), src(on_false));
            quote!(#d::Select { dst: #t, pred: #pred, on_true: #on_true, on_false: #on_false })
        }
        InstrData::Matmul {
            dst: t,
            stationary,
            moving,
        } => {
            let t = dst(t);
            let (s, m) = (id("ViewId", stationary.0), id("ViewId", moving.0));
            quote!(#d::Matmul { dst: #t, stationary: #s, moving: #m })
        }
        InstrData::Match8 {
            dst: t,
            data,
            vals,
            imm,
            idx,
        } => {
            let t = dst(t);
            let (data, vals) = (id("ViewId", data.0), id("ViewId", vals.0));
            let imm = option(imm, scalar);
            let idx = option(idx, |v| id("ViewId", v.0));
            quote!(#d::Match8 { dst: #t, data: #data, vals: #vals, imm: #imm, idx: #idx })
        }
        InstrData::SelectReduce {
            dst: t,
            pred,
            on_true,
            on_false,
            reverse,
            acc: a,
        } => {
            let t = dst(t);
            let (p, o) = (id("ViewId", pred.0), id("ViewId", on_true.0));
            let (f, a) = (src(on_false), acc(a));
            quote!(#d::SelectReduce { dst: #t, pred: #p, on_true: #o, on_false: #f, reverse: #reverse, acc: #a })
        }
        InstrData::Rng {
            dst: t,
            src: s,
            prob,
        } => {
            let (t, s, prob) = (dst(t), src(s), src(prob));
            quote!(#d::Rng { dst: #t, src: #s, prob: #prob })
        }
        InstrData::Seed { seed } => {
            let seed = id("ViewId", seed.0);
            quote!(#d::Seed { seed: #seed })
        }
        InstrData::Register { reg, src, tile } => {
            let r = item("RegSrc");
            let src = match src {
                RegSrc::None => quote!(#r::None),
                RegSrc::Imm(v) => quote!(#r::Imm(#v)),
                RegSrc::Reg(x) => {
                    let x = id("RegId", x.0);
                    quote!(#r::Reg(#x))
                }
            };
            let (reg, tile) = (id("RegId", reg.0), option(tile, |v| id("ViewId", v.0)));
            quote!(#d::Register { reg: #reg, src: #src, tile: #tile })
        }
        InstrData::RangeSelect {
            dst: t,
            on_true,
            bounds,
            cmp,
            start,
            acc: a,
        } => {
            let (t, o) = (dst(t), id("ViewId", on_true.0));
            let (b0, b1) = (id("ViewId", bounds[0].0), id("ViewId", bounds[1].0));
            let (c0, c1) = (variant("Cmp", cmp[0]), variant("Cmp", cmp[1]));
            let a = acc(a);
            quote!(#d::RangeSelect { dst: #t, on_true: #o, bounds: [#b0, #b1], cmp: [#c0, #c1], start: #start, acc: #a })
        }
        InstrData::MatmulMx {
            dst: t,
            stationary,
            moving,
            scales,
        } => {
            let t = dst(t);
            let (s, m) = (id("ViewId", stationary.0), id("ViewId", moving.0));
            let (c0, c1) = (id("ViewId", scales[0].0), id("ViewId", scales[1].0));
            quote!(#d::MatmulMx { dst: #t, stationary: #s, moving: #m, scales: [#c0, #c1] })
        }
        InstrData::QuantizeMx { dst: t, src, scale } => {
            let (t, s, c) = (dst(t), id("ViewId", src.0), id("ViewId", scale.0));
            quote!(#d::QuantizeMx { dst: #t, src: #s, scale: #c })
        }
        InstrData::Shuffle { dst: t, src, mask } => {
            let (t, s) = (dst(t), id("ViewId", src.0));
            quote!(#d::Shuffle { dst: #t, src: #s, mask: [#(#mask),*] })
        }
        InstrData::LocalGather {
            dst: t,
            src,
            index,
            elems,
            valid,
        } => {
            let (t, s, i) = (dst(t), id("ViewId", src.0), id("ViewId", index.0));
            quote!(#d::LocalGather { dst: #t, src: #s, index: #i, elems: #elems, valid: #valid })
        }
        InstrData::Nonzero {
            dst: t,
            src,
            offset,
            padding,
        } => {
            let (t, s) = (dst(t), id("ViewId", src.0));
            quote!(#d::Nonzero { dst: #t, src: #s, offset: #offset, padding: #padding })
        }
        InstrData::TopK { val, idx, src, n } => {
            let t = dst(val);
            let (i, s) = (id("ViewId", idx.0), id("ViewId", src.0));
            quote!(#d::TopK { val: #t, idx: #i, src: #s, n: #n })
        }
        InstrData::DmaCompute { dst: t, srcs } => {
            let t = dst(t);
            let srcs = srcs.iter().map(|&s| option(s, |v| id("ViewId", v.0)));
            quote!(#d::DmaCompute { dst: #t, srcs: [#(#srcs),*] })
        }
    };
    quote!(#instr_t { opcode: #opcode, engine: #engine, mask: #mask, line: #line, data: #data })
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
            upper,
        } => {
            let b = item("Bounded");
            let target = match target {
                Bounded::Tensor { tensor, axis } => {
                    quote!(#b::Tensor { tensor: #tensor, axis: #axis })
                }
                Bounded::Reshape { reshape, axis } => {
                    quote!(#b::Reshape { reshape: #reshape, axis: #axis })
                }
                Bounded::TileFree { tile } => quote!(#b::TileFree { tile: #tile }),
                Bounded::TileBlocks { tile, div, add } => {
                    quote!(#b::TileBlocks { tile: #tile, div: #div, add: #add })
                }
            };
            let size = dim(size);
            let loops = loops.iter().map(|e| extent(*e));
            quote!(#ty::InBounds { target: #target, size: #size, lo: #lo, hi: #hi, coef: [#(#coef),*], loops: [#(#loops),*], depth: #depth, upper: #upper })
        }
        Constraint::InRange {
            what,
            lo,
            hi,
            coef,
            loops,
            depth,
        } => {
            let c = item("Computed");
            let what = match what {
                Computed::MaskedIndex { tensor, axis } => {
                    quote!(#c::MaskedIndex { tensor: #tensor, axis: #axis })
                }
                Computed::MaskedReshapeIndex { reshape, axis } => {
                    quote!(#c::MaskedReshapeIndex { reshape: #reshape, axis: #axis })
                }
                Computed::MaskBound { mask } => quote!(#c::MaskBound { mask: #mask }),
                Computed::Expr { expr } => quote!(#c::Expr { expr: #expr }),
            };
            let loops = loops.iter().map(|e| extent(*e));
            quote!(#ty::InRange { what: #what, lo: #lo, hi: #hi, coef: [#(#coef),*], loops: [#(#loops),*], depth: #depth })
        }
        Constraint::Blocks {
            tile,
            count,
            capacity,
        } => {
            let count = extent(count);
            quote!(#ty::Blocks { tile: #tile, count: #count, capacity: #capacity })
        }
    }
}
