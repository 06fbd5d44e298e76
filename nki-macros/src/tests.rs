//! The macro's own tests: kernels given as tokens, lowered, and the instructions and each
//! error's message and position checked.

use nki_lang::{ActFn, Alu, InstrData, Opcode, ProgramBuf, Scalar, Src, Write};
use proc_macro2::TokenStream;
use quote::quote;

use crate::errors::Errors;
use crate::{check, lower, parse};

/// Lowers a kernel (`#[kernel]` item tokens); the program, or the errors with positions.
fn lower(item: TokenStream) -> Result<ProgramBuf, Vec<(String, usize, usize)>> {
    let mut errors = Errors::default();
    let kernel = parse::parse(TokenStream::new(), item, &mut errors).expect("a function");
    let lowered = lower::lower(&kernel, None, &mut errors);
    if !errors.is_empty() {
        return Err(errors.reported());
    }
    let buf = lowered.buf.clone();
    let fallback = kernel.name.span().into();
    match check::check(lowered, fallback, &mut errors) {
        Some(_) => Ok(buf),
        None => Err(errors.reported()),
    }
}

fn opcodes(p: &ProgramBuf) -> Vec<Opcode> {
    p.instrs.iter().map(|i| i.opcode).collect()
}

/// The first error's message and position.
fn error(item: TokenStream) -> (String, usize, usize) {
    match lower(item) {
        Ok(_) => panic!("expected an error"),
        Err(mut e) => e.remove(0),
    }
}

#[test]
fn the_seed_kernel_lowers_to_its_five_instructions() {
    let p = lower(quote! {
        fn seed(a: Hbm<bf16, 128, 128>, b: Hbm<bf16, 128, 512>) -> Hbm<bf16, 128, 512> {
            let out = ndarray([128, 512], bf16, SharedHbm);
            let x = load(a[..]);
            let y = load(b[..]);
            let acc = nc_matmul(x, y);
            store(out[..], copy(acc, bf16));
            out
        }
    })
    .unwrap();
    use Opcode::*;
    assert_eq!(opcodes(&p), [Load, Load, Matmul, TensorCopy, Store]);
    // Views are pooled: the copy's source is the matmul's destination.
    let (InstrData::Matmul { dst, .. }, InstrData::Unary { src, .. }) =
        (p.instrs[2].data, p.instrs[3].data)
    else {
        panic!("formats");
    };
    assert_eq!(dst.view, src);
}

#[test]
fn operators_and_functions_pick_their_instruction() {
    let p = lower(quote! {
        fn ops(a: Hbm<f32, 128, 64>, c: Hbm<f32, 128, 1>) -> Hbm<f32, 128, 1> {
            let out = ndarray([128, 1], f32, SharedHbm);
            let x = load(a[..]);
            let col = load(c[..]);
            let s = x + x;
            let t = s * 2.0;
            let u = t - col;
            let e = exp(u);
            let r = sum(e, axis = 1);
            store(out[..], r);
            out
        }
    })
    .unwrap();
    let body: Vec<&nki_lang::Instr> = p.instrs[2..7].iter().collect();
    assert_eq!(body[0].opcode, Opcode::TensorTensor);
    let InstrData::Alu { op, src, .. } = body[1].data else {
        panic!()
    };
    assert_eq!(
        (body[1].opcode, op[0]),
        (Opcode::TensorScalar, Alu::Multiply)
    );
    assert_eq!(src[1], Src::Imm(Scalar::float(2.0)));
    // `t - col`: the [128, 1] column is a tensor_scalar operand read along the free axis.
    let InstrData::Alu { src, op, .. } = body[2].data else {
        panic!()
    };
    assert_eq!(
        (body[2].opcode, op[0]),
        (Opcode::TensorScalar, Alu::Subtract)
    );
    let col = p.views[src[1].view().unwrap().index()];
    assert_eq!((col.shape.dims(), col.strides[0]), (&[128, 64][..], 0));
    let InstrData::Act { func, .. } = body[3].data else {
        panic!()
    };
    assert_eq!(func, ActFn::Exp);
    let InstrData::Reduce { op, axes, dst, .. } = body[4].data else {
        panic!()
    };
    assert_eq!((op, axes), (Alu::Add, 1));
    assert_eq!(p.views[dst.view.index()].shape.dims(), &[128, 1]);
}

#[test]
fn masks_and_accumulation_reach_the_instructions() {
    let p = lower(quote! {
        fn ragged(x: Hbm<f32, N, 64>) -> Hbm<f32, N, 64> {
            let out = ndarray([N, 64], f32, SharedHbm);
            let (i_p, i_f) = mgrid![0..128, 0..64];
            let acc = zeros([128, 64], f32, Sbuf);
            for k in affine_range((N + 127) / 128) {
                let t = load(x[[k * 128 + i_p, i_f]], mask = k * 128 + i_p < N);
                acc += t;
                store(out[[k * 128 + i_p, i_f]], t, mask = k * 128 + i_p < N);
            }
            out
        }
    })
    .unwrap();
    let load = p.instrs.iter().find(|i| i.opcode == Opcode::Load).unwrap();
    let mask = p.masks[load.mask.unwrap().index()];
    let t = mask.terms()[0];
    assert_eq!((t.axis, t.coef, t.sym), (0, 1, Some(0)));
    assert_eq!(t.offset.loop_coef(0), 128);
    let add = p
        .instrs
        .iter()
        .find(|i| i.opcode == Opcode::TensorCopy)
        .unwrap();
    assert_eq!(add.data.dst().unwrap().write, Write::Accumulate(Alu::Add));
}

#[test]
fn errors_name_the_rule_on_the_users_tokens() {
    // From source text, so that tokens have real lines and columns (1-based lines, 0-based
    // columns).
    let source = "fn k(x: Hbm<f32, 128, 64>) -> Hbm<f32, 128, 64> {
    let out = ndarray([128, 64], f32, SharedHbm);
    let t = laod(x[..]);
    store(out[..], t);
    out
}";
    let (msg, line, col) = error(source.parse().unwrap());
    assert_eq!(
        msg,
        "unknown function `laod` in a kernel; did you mean `load`?"
    );
    assert_eq!((line, col), (3, 12), "{msg}");
    let source = "fn k(x: Hbm<f32, 128, 64>) -> Hbm<f32, 128, 64> {
    let out = ndarray([128, 64], f32, SharedHbm);
    let t = load(x[..]);
    let y = tensor_tensor(t, zeros([64, 64], f32, Sbuf), add);
    store(out[..], y);
    out
}";
    let (msg, line, col) = error(source.parse().unwrap());
    assert_eq!(
        msg,
        "number of partitions (dimension 0 size of a tile) mismatch in parameters (data1[128, 64], data2[64, 64]) of 'tensor_tensor' (err_num_partition_mismatch)"
    );
    // On the second operand.
    assert_eq!((line, col), (4, 29), "{msg}");
    let (msg, ..) = error(quote! {
        fn k(x: Hbm<f32, 128, 64>) -> Hbm<f32, 128, 64> {
            let out = ndarray([128, 64], f32, SharedHbm);
            let t = load(x[..]);
            let e = activation(exp, t, engine = vector);
            store(out[..], e);
            out
        }
    });
    assert!(
        msg.contains("`activation` has no argument `engine`"),
        "{msg}"
    );
    let (msg, ..) = error(quote! {
        fn k(x: Hbm<f32, 128, 64>) -> Hbm<f32, 128, 64> {
            let out = ndarray([128, 64], f32, SharedHbm);
            let (i_p, i_f) = mgrid![0..128, 0..64];
            let t = load(x[..], mask = i_p < i_f);
            store(out[..], t);
            out
        }
    });
    assert!(
        msg.contains("not a box") && msg.ends_with("(err_unsupported_expression_in_mask)"),
        "{msg}"
    );
    let (msg, ..) = error(quote! {
        fn k(x: Hbm<f32, 128, 64>) -> Hbm<f32, 128, 64> {
            let out = ndarray([128, 64], f32, SharedHbm);
            let t = load(x[..]);
            let u = tensor_reduce(add, t, axis = 1, engine = gpsimd);
            store(out[..], t);
            out
        }
    });
    assert!(msg.contains("has no argument `engine`"), "{msg}");
    let (msg, ..) = error(quote! {
        fn k(x: Hbm<f32, 128, 64>) -> Hbm<f32, 128, 64> {
            let out = ndarray([128, 64], f32, SharedHbm);
            let t = load(x[..]);
            let u = tensor_copy(t, engine = tensor);
            store(out[..], u);
            out
        }
    });
    assert_eq!(
        msg,
        "'tensor_copy' cannot run on the Tensor engine; it runs on Vector, Scalar or GpSimd (err_unsupported_engine)"
    );
}

#[test]
fn nothing_is_not_a_tile() {
    // `store` returns nothing; using its result is an error, not a silent no-op.
    let (msg, ..) = error(quote! {
        fn k(x: Hbm<f32, 128, 64>) -> Hbm<f32, 128, 64> {
            let out = ndarray([128, 64], f32, SharedHbm);
            let t = load(x[..]);
            let u = copy(store(out[..], t));
            out
        }
    });
    assert!(msg.contains("must be a tile, not nothing"), "{msg}");
}

#[test]
fn one_mistake_gives_one_error() {
    let Err(errors) = lower(quote! {
        fn k(x: Hbm<f32, 128, 64>) -> Hbm<f32, 128, 64> {
            let out = ndarray([128, 64], f32, SharedHbm);
            let t = load(x[..]);
            let a = exp(undefined);
            let b = a + t;
            let c = sum(b, axis = 1);
            store(out[..], t);
            out
        }
    }) else {
        panic!("expected an error");
    };
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert_eq!(errors[0].0, "cannot find `undefined` in this kernel");
}

/// The `compile_error!` messages of an expansion.
fn expansion_errors(attr: TokenStream, item: TokenStream) -> Vec<String> {
    let out = crate::expand::expand(attr, item, TokenStream::new()).to_string();
    out.split("compile_error !")
        .skip(1)
        .map(|e| {
            let start = e.find('"').map_or(0, |i| i + 1);
            let end = e[start..].find("\" }").map_or(e.len(), |i| start + i);
            e[start..end].replace("\\n", "\n")
        })
        .collect()
}

#[test]
fn meta_parameters_compile_once_per_instantiation() {
    let item = quote! {
        fn blocks<const TILES: usize, const WIDE: bool>(x: Hbm<f32, 128, 1024>) -> Hbm<f32, 128, 1024> {
            let out = ndarray([128, 1024], f32, SharedHbm);
            for b in affine_range(1024 / (TILES * 128)) {
                let t = load(x[[0..128, b * TILES * 128..(b + 1) * TILES * 128]]);
                store(out[[0..128, b * TILES * 128..(b + 1) * TILES * 128]], t);
            }
            out
        }
    };
    let good = quote!(one(TILES = 1, WIDE = false), four(WIDE = true, TILES = 4));
    let out = crate::expand::expand(good, item.clone(), TokenStream::new()).to_string();
    assert!(!out.contains("compile_error"), "{out}");
    for needle in ["mod one", "mod four", "mod blocks", "INSTANCES"] {
        assert!(out.contains(needle), "{needle}: {out}");
    }
    // A load of TILES · 512 columns reaches past the tensor in two instantiations: one error
    // naming both.
    let past = quote! {
        fn wide<const TILES: usize, const WIDE: bool>(x: Hbm<f32, 128, 1024>) -> Hbm<f32, 128, 1024> {
            let out = ndarray([128, 1024], f32, SharedHbm);
            let t = load(x[[0..128, 0..TILES * 512]]);
            store(out[[0..128, 0..TILES * 512]], t);
            out
        }
    };
    let bad = quote!(
        a(TILES = 3, WIDE = false),
        b(TILES = 3, WIDE = true),
        c(TILES = 2, WIDE = true),
        d(TILES = 4, WIDE = true)
    );
    let errs = expansion_errors(bad, past.clone());
    assert_eq!(errs.len(), 4, "{errs:?}");
    let both = "in the instantiations `a` (TILES = 3, WIDE = false), `b` (TILES = 3, WIDE = true)";
    assert!(
        errs[0].contains("tensor `x`") && errs[0].contains(both),
        "{errs:?}"
    );
    assert!(
        errs[1].contains("tensor `out`") && errs[1].contains(both),
        "{errs:?}"
    );
    assert!(
        errs[2].ends_with("in the instantiation `d` (TILES = 4, WIDE = true)"),
        "{errs:?}"
    );
    let errs = expansion_errors(
        quote!(a(TILES = 3, WIDE = false), b(TILES = 3, WIDE = true)),
        past,
    );
    assert!(errs[0].ends_with("in every instantiation"), "{errs:?}");
    // Mistakes in the attribute, each once.
    let errs = expansion_errors(
        quote!(a(TILES = 1), b(TILES = true, WIDE = false, X = 2)),
        item.clone(),
    );
    let expect = [
        "the instantiation `a` does not set `WIDE`",
        "`TILES` is an integer",
        "`blocks` has no meta-parameter `X`",
    ];
    for e in expect {
        assert!(errs.iter().any(|m| m.contains(e)), "{e}: {errs:?}");
    }
    assert_eq!(errs.len(), 3, "{errs:?}");
    let errs = expansion_errors(TokenStream::new(), item);
    assert!(
        errs[0].contains("compiled once per instantiation"),
        "{errs:?}"
    );
}

#[test]
fn an_error_in_an_unrolled_loop_names_its_instantiation_once() {
    // The same statement fails in each of the four unrolled iterations: one error, one name.
    let item = quote! {
        fn unrolled<const W: usize>(x: Hbm<f32, 128, 512>) -> Hbm<f32, 128, 512> {
            let out = ndarray([128, 512], f32, SharedHbm);
            for h in static_range(4) {
                let t = load(x[[0..128, 0..W]]);
                store(out[[0..128, 0..W]], t);
            }
            out
        }
    };
    let errs = expansion_errors(quote!(a(W = 1024), b(W = 512)), item);
    assert_eq!(errs.len(), 2, "{errs:?}");
    for e in &errs {
        assert!(
            e.ends_with("in the instantiation `a` (W = 1024)"),
            "{errs:?}"
        );
    }
}

#[test]
fn nl_tile_size_and_unsupported_masks() {
    let ok = lower(quote! {
        fn k(x: Hbm<f32, 128, 512>) -> Hbm<f32, 128, 512> {
            let out = ndarray([128, 512], f32, SharedHbm);
            let (i_p, i_f) = mgrid![0..tile_size.pmax, 0..tile_size.gemm_moving_fmax];
            store(out[[i_p, i_f]], load(x[[i_p, i_f]]));
            out
        }
    });
    assert!(ok.is_ok(), "{ok:?}");
    let (msg, ..) = error(quote! {
        fn k(x: Hbm<f32, 128, 512>) -> Hbm<f32, 128, 6> {
            let out = ndarray([128, 6], f32, SharedHbm);
            let (i_p, i_f) = mgrid![0..128, 0..512];
            let t = load(x[[i_p, i_f]]);
            store(out[[0..128, 0..6]], bn_stats(t, mask = i_f < 300));
            out
        }
    });
    assert!(msg.contains("err_unsupported_mask"), "{msg}");
    let (msg, ..) = error(quote! {
        fn k(x: Hbm<f32, 128, 512>) -> Hbm<f32, 128, 512> {
            let out = ndarray([128, 512], f32, SharedHbm);
            let t = load(x[[0..128, 0..512]]);
            store(out[[0..128, 0..512]], t.reshape([64, 1024]));
            out
        }
    });
    // NKI 0.6's tile reshape keeps the partition dimension.
    assert!(
        msg.starts_with("`reshape` of an SBUF or PSUM tile keeps its partition dimension"),
        "{msg}"
    );
}

#[test]
fn calls_of_unknown_functions_fetch_helpers_and_typos_stay_typos() {
    let item = quote! {
        fn k(x: Hbm<f32, 128, 512>) -> Hbm<f32, 128, 512> {
            let out = ndarray([128, 512], f32, SharedHbm);
            store(out[..], twice(load(x[..])));
            out
        }
    };
    // Without the helper's definition: a chain through the helper's macro.
    let out =
        crate::expand::expand(TokenStream::new(), item.clone(), TokenStream::new()).to_string();
    assert!(out.starts_with("twice ! { @ nki_helpers [] {"), "{out}");
    // With it: inlined.
    let defs = quote!(
        fn twice(t: Tile) -> Tile {
            t * 2.0
        }
    );
    let out = crate::expand::expand(TokenStream::new(), item, defs).to_string();
    assert!(out.contains("pub static KERNEL"), "{out}");
    assert!(!out.contains("compile_error"), "{out}");
    // `exq` is a typo of `exp`, not a helper to fetch.
    let (msg, ..) = error(quote! {
        fn k(x: Hbm<f32, 128, 512>) -> Hbm<f32, 128, 512> {
            let out = ndarray([128, 512], f32, SharedHbm);
            store(out[..], exq(load(x[..])));
            out
        }
    });
    assert!(msg.contains("did you mean `exp`"), "{msg}");
}

/// A kernel whose load reads `0..(1 + 1 + ... + 1 - (n - 64))`: columns 0..64 through a sum
/// of `n` ones, and whose result is a sum of `tiles` loaded tiles.
fn long_sum_kernel(n: usize, tiles: usize) -> TokenStream {
    let ones = vec!["1"; n].join(" + ");
    let sum = vec!["load(x[[0..128, 0..64]])"; tiles].join(" + ");
    format!(
        "fn long_sum(x: Hbm<f32, 128, 64>) -> Hbm<f32, 128, 64> {{
            let out = ndarray([128, 64], f32, SharedHbm);
            let t = load(x[[0..128, 0..({ones} - {})]]);
            store(out[[0..128, 0..64]], t + {sum});
            out
        }}",
        n - 64
    )
    .parse()
    .expect("tokens")
}

#[test]
fn long_sums_compile_in_linear_time() {
    // 20,000 terms of index arithmetic and 2,000 tiles: a tree 20,000 levels deep, on a test
    // thread's 2 MiB stack (the expansion grows its own).
    // (Quadratic work, a span printed per node, took minutes here; speed is not asserted.)
    expands_without_errors(long_sum_kernel(20_000, 2_000));
}

/// Asserts that `item` expands to a kernel with its program and no `compile_error!`.
fn expands_without_errors(item: TokenStream) {
    let out = crate::expand::expand(TokenStream::new(), item, TokenStream::new()).to_string();
    assert!(
        !out.contains("compile_error"),
        "{}",
        &out[..out.len().min(2000)]
    );
    assert!(out.contains("pub static KERNEL"));
}

#[test]
fn a_statement_nested_too_deeply_is_an_error_on_its_tokens_with_a_fallback() {
    let n = crate::depth::MAX_NESTING;
    let out = crate::expand::expand(
        TokenStream::new(),
        long_sum_kernel(n, 1),
        TokenStream::new(),
    );
    let text = out.to_string();
    assert_eq!(text.matches("compile_error").count(), 1, "{text}");
    assert!(text.contains("too long or nests too deeply"), "{text}");
    // The fallback: the launch functions, without a program.
    assert!(text.contains("pub static KERNEL"), "{text}");
    // Deep nesting through groups rather than operators: `((((1))))`.
    let item: TokenStream = format!(
        "fn deep(x: Hbm<f32, 128, 64>) -> Hbm<f32, 128, 64> {{
            let out = ndarray([128, 64], f32, SharedHbm);
            store(out[..], load(x[[0..128, 0..{}64{}]]));
            out
        }}",
        "(".repeat(crate::depth::MAX_HEAVY),
        ")".repeat(crate::depth::MAX_HEAVY)
    )
    .parse()
    .expect("tokens");
    let mut errors = Errors::default();
    assert!(!crate::depth::check(&item, &mut errors).fits());
    let reported = errors.reported();
    assert_eq!(reported.len(), 1, "{reported:?}");
    // On the innermost statement past the bound: inside the index, not the whole `store`.
    assert!(reported[0].0.contains("nests too deeply"), "{reported:?}");
    assert_eq!(reported[0].1, 3, "{reported:?}");
    assert!(reported[0].2 > 30, "{reported:?}");
}

#[test]
fn operands_nested_up_to_the_bound_compile() {
    // Unary minuses and parentheses: each a level of recursion in syn's parser, this crate's
    // parsing and its lowering, just within the bound.
    let depth = crate::depth::MAX_HEAVY - 64;
    let item: TokenStream = format!(
        "fn nested(x: Hbm<f32, 128, 64>) -> Hbm<f32, 128, 64> {{
            let out = ndarray([128, 64], f32, SharedHbm);
            let t = load(x[[0..128, 0..{}64{}]]);
            let u = load(x[[0..128, 0..{}64{}]]);
            store(out[..], t + u);
            out
        }}",
        "- ".repeat(depth / 2 * 2),
        "",
        "(".repeat(depth),
        ")".repeat(depth),
    )
    .parse()
    .expect("tokens");
    expands_without_errors(item);
}

#[test]
fn names_one_edit_from_the_language_are_typos_unless_they_differ_by_a_version_number() {
    // Typos of the language's functions are reported as such, not fetched as helpers.
    assert!(lower::near_builtin("laod"));
    assert!(lower::near_builtin("tensor_tenser"));
    // NKI's versioned names (`activate2`, `max8`) leave the plain words to helpers.
    assert!(!lower::near_builtin("activate"));
    assert!(!lower::near_builtin("max88"));
    // The language's own names are not typos of each other.
    assert!(!lower::near_builtin("load"));
}
