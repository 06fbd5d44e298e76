//! The macro never panics, whatever tokens it is given: three seed kernels, every kernel of the
//! examples (the ported tutorials) and a kernel with a 5,120-term expression, mutated a few
//! thousand times (tokens deleted, duplicated, swapped, replaced by other kernel words or
//! extreme literals), each expanded under `catch_unwind`. A mutation either expands or yields
//! `compile_error!`s; a panic fails the test with the mutated source. `NKI_MUTATIONS=N` sets the
//! mutations per seed kernel (1200 by default; 30000 per seed, 90000 in all, found no panic).

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::str::FromStr;

use proc_macro2::{Delimiter, Spacing, TokenStream, TokenTree};

/// Kernels to mutate: the seed, a tiled loop with symbolic sizes and masks, and one with
/// compute operations, static unrolling and reductions.
const SEEDS: [&str; 3] = [
    "fn seed(lhs_t: Hbm<bf16, 128, 128>, rhs: Hbm<bf16, 128, 512>) -> Hbm<bf16, 128, 512> {
        let result = ndarray([128, 512], bf16, SharedHbm);
        let (i_lp, i_lf) = mgrid![0..128, 0..128];
        let (i_rp, i_rf) = mgrid![0..128, 0..512];
        let lhs_tile = load(lhs_t[[i_lp, i_lf]]);
        let rhs_tile = load(rhs[[i_rp, i_rf]]);
        let acc = nc_matmul(lhs_tile, rhs_tile);
        store(result[[i_rp, i_rf]], copy(acc, bf16));
        result
    }",
    "fn tiled(x: Hbm<f32, K, N>, w: Hbm<f32, K, 512>) -> Hbm<f32, N, 512> {
        let out = ndarray([N, 512], f32, SharedHbm);
        let (ip, jf) = mgrid![0..128, 0..512];
        let (kp, nf) = mgrid![0..128, 0..128];
        for i in affine_range((N + 127) / 128) {
            let acc = zeros([128, 512], f32, Psum);
            for k in affine_range(K / 128) {
                let a = load(x[[k * 128 + kp, i * 128 + nf]], mask = i * 128 + nf < N);
                let b = load(w[[k * 128 + ip, jf]]);
                acc[..] += nc_matmul(a, b);
            }
            store(out[[i * 128 + ip, jf]], copy(acc, f32), mask = i * 128 + ip < N);
        }
        out
    }",
    "fn compute(x: Hbm<f32, 256, 64>) -> Hbm<f32, 256, 64> {
        let out = ndarray([256, 64], f32, SharedHbm);
        let (ip, jf) = mgrid![0..128, 0..64];
        for i in static_range(2) {
            let t = load(x[[i * 128 + ip, jf]]);
            let m = tensor_reduce(max, data = t, axis = 1, keepdims = true, negate = true);
            let e = activation(exp, data = t, bias = m, scale = 1.0);
            let r = e * 0.5;
            let q = affine_select(pred = jf < 32, on_true_tile = r, on_false_value = -0.0);
            store(out[[i * 128 + ip, jf]], q);
        }
        out
    }",
];

/// The sources of the examples, whose every `#[kernel]` is mutated too.
const EXAMPLES: [&str; 20] = [
    include_str!("../../examples/autotune_matmul.rs"),
    include_str!("../../examples/average_pool2d.rs"),
    include_str!("../../examples/data_movement.rs"),
    include_str!("../../examples/exp.rs"),
    include_str!("../../examples/fused_attention.rs"),
    include_str!("../../examples/fused_matmul_bias_gelu.rs"),
    include_str!("../../examples/kernel_optimization_v2.rs"),
    include_str!("../../examples/layernorm.rs"),
    include_str!("../../examples/mamba.rs"),
    include_str!("../../examples/mamba_tutorial_shapes.rs"),
    include_str!("../../examples/matmul_basic.rs"),
    include_str!("../../examples/matmul_block_free_dimension.rs"),
    include_str!("../../examples/matmul_fully_optimized.rs"),
    include_str!("../../examples/matmul_hoist_load.rs"),
    include_str!("../../examples/matmul_tiled.rs"),
    include_str!("../../examples/maxpool2d.rs"),
    include_str!("../../examples/rmsnorm.rs"),
    include_str!("../../examples/softmax.rs"),
    include_str!("../../examples/tensor_add.rs"),
    include_str!("../../examples/transpose2d.rs"),
];

/// Every `#[kernel]` item of `src` (an example's source), as the attribute's arguments and the
/// function: from `#[kernel` at a line's start to the brace that closes the function's body.
fn kernels_in(src: &str) -> Vec<(String, String)> {
    // Comments may hold unbalanced braces; kernels hold no string literals.
    let code: Vec<&str> = src
        .lines()
        .map(|l| l.split("//").next().unwrap_or(""))
        .collect();
    let code = code.join("\n");
    let mut found = Vec::new();
    let mut rest = code.as_str();
    while let Some(at) = rest.find("\n#[kernel") {
        rest = &rest[at + "\n#[kernel".len()..];
        // The attribute's arguments: `(...)` up to the `]` that closes the attribute.
        let close = rest.find("]\n").unwrap_or(0);
        let args = rest[..close].trim();
        let args = args
            .strip_prefix('(')
            .and_then(|a| a.strip_suffix(')'))
            .unwrap_or("");
        rest = &rest[close + 1..];
        // The body's brace: the first outside the signature's parentheses and generics
        // (`Hbm<T, P, { F1 * F2 }>`).
        let (mut nest, mut prev) = (0i32, ' ');
        let open = rest.char_indices().find_map(|(i, c)| {
            match c {
                '(' | '[' | '<' => nest += 1,
                ')' | ']' => nest -= 1,
                '>' if prev != '-' => nest -= 1,
                '{' if nest == 0 => return Some(i),
                _ => {}
            }
            prev = c;
            None
        });
        let Some(open) = open else { break };
        let mut depth = 0usize;
        let mut end = None;
        for (i, c) in rest[open..].char_indices() {
            match c {
                '{' => depth += 1,
                '}' => {
                    depth -= 1;
                    if depth == 0 {
                        end = Some(open + i + 1);
                        break;
                    }
                }
                _ => {}
            }
        }
        let Some(end) = end else { break };
        found.push((args.to_string(), rest[..end].to_string()));
        rest = &rest[end..];
    }
    found
}

/// Words a mutation may put in place of a token.
const WORDS: [&str; 40] = [
    "load",
    "store",
    "nc_matmul",
    "copy",
    "mgrid",
    "affine_range",
    "sequential_range",
    "static_range",
    "zeros",
    "ndarray",
    "full",
    "iota",
    "exp",
    "tensor_reduce",
    "activation",
    "f32",
    "bf16",
    "i32",
    "Sbuf",
    "Psum",
    "SharedHbm",
    "Hbm",
    "N",
    "K",
    "i",
    "ip",
    "mask",
    "dtype",
    "axis",
    "let",
    "for",
    "in",
    "fn",
    "return",
    "if",
    "else",
    "true",
    "program_id",
    "core",
    "_",
];

/// Literals a mutation may put in place of a token.
const LITERALS: [&str; 12] = [
    "0",
    "1",
    "-1",
    "127",
    "129",
    "4294967296",
    "9223372036854775807",
    "18446744073709551615",
    "1e300",
    "-0.0",
    "0.5",
    "\"text\"",
];

/// Tokens as text, groups opened and closed by their delimiters.
fn flatten(ts: TokenStream, out: &mut Vec<String>) {
    let mut joint = false;
    for tt in ts {
        let next_joint = matches!(&tt, TokenTree::Punct(p) if p.spacing() == Spacing::Joint);
        match tt {
            TokenTree::Group(g) => {
                let (open, close) = match g.delimiter() {
                    Delimiter::Parenthesis => ("(", ")"),
                    Delimiter::Brace => ("{", "}"),
                    Delimiter::Bracket => ("[", "]"),
                    Delimiter::None => ("", ""),
                };
                out.push(open.to_string());
                flatten(g.stream(), out);
                out.push(close.to_string());
            }
            // A joint punctuation (`->`, `+=`, `..`) stays one token.
            TokenTree::Punct(p) => match (out.last_mut(), joint) {
                (Some(last), true) => last.push(p.as_char()),
                _ => out.push(p.as_char().to_string()),
            },
            other => out.push(other.to_string()),
        }
        joint = next_joint;
    }
}

/// A small deterministic generator (xorshift64*).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// One to three edits of `tokens`.
fn mutate(tokens: &[String], rng: &mut Rng) -> Vec<String> {
    let mut t = tokens.to_vec();
    for _ in 0..1 + rng.below(3) {
        if t.is_empty() {
            break;
        }
        let at = rng.below(t.len());
        match rng.below(6) {
            0 => {
                t.remove(at);
            }
            1 => {
                let dup = t[at].clone();
                t.insert(at, dup);
            }
            2 if at + 1 < t.len() => t.swap(at, at + 1),
            3 => t[at] = WORDS[rng.below(WORDS.len())].to_string(),
            4 => t[at] = LITERALS[rng.below(LITERALS.len())].to_string(),
            _ => {
                let punct = [";", ",", "+", "*", "-", "/", "..", "=", "<", "+=", "%", ":"];
                t.insert(at, punct[rng.below(punct.len())].to_string());
            }
        }
    }
    t
}

#[test]
fn mutated_kernels_expand_or_report_errors_but_never_panic() {
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let (mut expanded, mut clean) = (0, 0);
    for seed in SEEDS {
        let out = crate::expand::expand(
            TokenStream::new(),
            TokenStream::from_str(seed).unwrap(),
            TokenStream::new(),
        );
        assert!(
            !out.to_string().contains("compile_error"),
            "the seed expands cleanly:\n{seed}"
        );
    }
    let per_seed = std::env::var("NKI_MUTATIONS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1200);
    for seed in SEEDS {
        let mut tokens = Vec::new();
        flatten(
            TokenStream::from_str(seed).expect("a seed kernel tokenizes"),
            &mut tokens,
        );
        for _ in 0..per_seed {
            let text = mutate(&tokens, &mut rng).join(" ");
            // Unbalanced delimiters never reach a macro: rustc rejects them first.
            let Ok(item) = TokenStream::from_str(&text) else {
                continue;
            };
            let result = catch_unwind(AssertUnwindSafe(|| {
                crate::expand::expand(TokenStream::new(), item, TokenStream::new())
            }));
            let Ok(out) = result else {
                panic!("the macro panicked on:\n{text}");
            };
            expanded += 1;
            if !out.to_string().contains("compile_error") {
                clean += 1;
            }
        }
    }
    // Most mutations keep their delimiters balanced.
    assert!(expanded > SEEDS.len() * per_seed / 2, "{expanded}");
    // The examples' kernels (the tutorials as ported), each expanded as written (those that
    // call `#[helper]`s report the unknown helpers: a helper is expanded with its kernel by
    // `nki::kernel`), then mutated a tenth as often as the seeds.
    let kernels: Vec<_> = EXAMPLES.iter().flat_map(|src| kernels_in(src)).collect();
    assert!(
        kernels.len() >= 28,
        "{} kernels found in the examples",
        kernels.len()
    );
    let mut as_written = 0;
    for (args, item) in &kernels {
        let attr = TokenStream::from_str(args).expect("an attribute tokenizes");
        let out = crate::expand::expand(
            attr.clone(),
            TokenStream::from_str(item).unwrap_or_else(|e| panic!("{e:?} in:\n{item}")),
            TokenStream::new(),
        );
        as_written += usize::from(!out.to_string().contains("compile_error"));
        let mut tokens = Vec::new();
        flatten(
            TokenStream::from_str(item).unwrap_or_else(|e| panic!("{e:?} in:\n{item}")),
            &mut tokens,
        );
        for _ in 0..per_seed.div_ceil(10) {
            let text = mutate(&tokens, &mut rng).join(" ");
            let Ok(item) = TokenStream::from_str(&text) else {
                continue;
            };
            let result = catch_unwind(AssertUnwindSafe(|| {
                crate::expand::expand(attr.clone(), item, TokenStream::new())
            }));
            if result.is_err() {
                panic!("the macro panicked on:\n#[kernel({args})]\n{text}");
            }
            expanded += 1;
        }
    }
    assert_eq!(
        as_written,
        kernels.len(),
        "every example kernel expands as written"
    );
    // A kernel whose load bound is a sum of 5,120 terms (a syntax tree thousands of levels
    // deep), mutated too: each mutation expands or errs, never overflows the stack.
    let long = format!(
        "fn long_sum(x: Hbm<f32, 128, 64>) -> Hbm<f32, 128, 64> {{
            let out = ndarray([128, 64], f32, SharedHbm);
            let t = load(x[[0..128, 0..({} 0 - 5056)]]);
            store(out[[0..128, 0..64]], t + 1.0);
            out
        }}",
        "1 + ".repeat(5120)
    );
    let mut tokens = Vec::new();
    flatten(
        TokenStream::from_str(&long).expect("tokenizes"),
        &mut tokens,
    );
    for _ in 0..per_seed.div_ceil(100) {
        let text = mutate(&tokens, &mut rng).join(" ");
        let Ok(item) = TokenStream::from_str(&text) else {
            continue;
        };
        let result = catch_unwind(AssertUnwindSafe(|| {
            crate::expand::expand(TokenStream::new(), item, TokenStream::new())
        }));
        assert!(result.is_ok(), "the macro panicked on a mutated long sum");
        expanded += 1;
    }
    // Some mutations stay valid kernels (a literal changed, a statement duplicated): the
    // lowering and the checks ran on those too.
    assert!(clean > 0, "{clean}");
    eprintln!("{expanded} mutations expanded, {clean} without errors");
}
