//! NKI's 2.26-era API, name by name (the SDK 2.26.0 reference pages `nki.language`, `nki.isa`,
//! `nki` and `nki.compiler`): every function is one the macro lowers or refuses with its
//! rewrite, and every name is in `docs/language.md`.

use crate::lower::builtins;

/// The functions of `nki.isa` at SDK 2.26.0.
const NKI_ISA: &[&str] = &[
    "nc_matmul",
    "nc_transpose",
    "activation",
    "activation_reduce",
    "tensor_reduce",
    "tensor_partition_reduce",
    "tensor_tensor",
    "tensor_tensor_scan",
    "scalar_tensor_tensor",
    "tensor_scalar",
    "tensor_scalar_reduce",
    "tensor_copy",
    "tensor_copy_dynamic_src",
    "tensor_copy_dynamic_dst",
    "tensor_copy_predicated",
    "reciprocal",
    "iota",
    "dropout",
    "affine_select",
    "range_select",
    "select_reduce",
    "sequence_bounds",
    "memset",
    "bn_stats",
    "bn_aggr",
    "local_gather",
    "dma_copy",
    "dma_transpose",
    "max8",
    "nc_find_index8",
    "nc_match_replace8",
    "nc_stream_shuffle",
    "get_nc_version",
];

/// The functions of `nki.language` at SDK 2.26.0.
const NKI_LANGUAGE: &[&str] = &[
    "load",
    "store",
    "load_transpose2d",
    "atomic_rmw",
    "copy",
    "broadcast_to",
    "ndarray",
    "empty_like",
    "zeros",
    "zeros_like",
    "ones",
    "full",
    "rand",
    "random_seed",
    "shared_constant",
    "shared_identity_matrix",
    "add",
    "subtract",
    "multiply",
    "divide",
    "power",
    "maximum",
    "minimum",
    "max",
    "min",
    "mean",
    "var",
    "sum",
    "prod",
    "all",
    "abs",
    "negative",
    "sign",
    "trunc",
    "floor",
    "ceil",
    "mod",
    "fmod",
    "exp",
    "log",
    "cos",
    "sin",
    "tan",
    "tanh",
    "arctan",
    "sqrt",
    "rsqrt",
    "sigmoid",
    "relu",
    "gelu",
    "gelu_dx",
    "gelu_apprx_tanh",
    "gelu_apprx_sigmoid",
    "silu",
    "silu_dx",
    "erf",
    "erf_dx",
    "softplus",
    "mish",
    "square",
    "softmax",
    "rms_norm",
    "dropout",
    "matmul",
    "transpose",
    "reciprocal",
    "bitwise_and",
    "bitwise_or",
    "bitwise_xor",
    "invert",
    "left_shift",
    "right_shift",
    "equal",
    "not_equal",
    "greater",
    "greater_equal",
    "less",
    "less_equal",
    "logical_and",
    "logical_or",
    "logical_xor",
    "logical_not",
    "ds",
    "arange",
    "expand_dims",
    "where",
    "gather_flattened",
    "all_reduce",
    "par_dim",
    "program_id",
    "num_programs",
    "program_ndim",
    "device_print",
    "loop_reduce",
];

/// The other names of `nki.isa` and `nki.language` at SDK 2.26.0: enumerations, iterators
/// (the `for` loops' own syntax), memory kinds, launch-grid helpers, dtypes and constants.
const NKI_OTHER_NAMES: &[&str] = &[
    "engine",
    "reduce_cmd",
    "dge_mode",
    "nc_version",
    "mgrid",
    "static_range",
    "affine_range",
    "sequential_range",
    "psum",
    "sbuf",
    "hbm",
    "private_hbm",
    "shared_hbm",
    "spmd_dim",
    "nc",
    "tfloat32",
    "bfloat16",
    "float8_e4m3",
    "float8_e5m2",
    "tile_size",
    "fp32",
];

/// `nki` and `nki.compiler` at SDK 2.26.0: decorators, tools and allocation.
const NKI_AND_COMPILER: &[&str] = &[
    "jit",
    "benchmark",
    "profile",
    "baremetal",
    "simulate_kernel",
    "tensor",
    "mod_alloc",
    "auto_alloc",
    "alloc",
    "skip_middle_end_transformations",
    "enable_stack_allocator",
    "force_auto_alloc",
];

#[test]
fn every_name_of_nki_is_in_the_language_reference() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/language.md");
    let doc = std::fs::read_to_string(path).expect("docs/language.md");
    let missing: Vec<&str> = NKI_ISA
        .iter()
        .chain(NKI_LANGUAGE)
        .chain(NKI_OTHER_NAMES)
        .chain(NKI_AND_COMPILER)
        .copied()
        .filter(|name| !mentions(&doc, name))
        .collect();
    assert!(
        missing.is_empty(),
        "docs/language.md does not name {missing:?}"
    );
}

#[test]
fn every_nki_function_is_lowered_or_refused() {
    // Each is a call the table lowers, or one it refuses with the rewrite.
    let known: Vec<&str> = builtins::names().collect();
    let unknown: Vec<&str> = NKI_ISA
        .iter()
        .chain(NKI_LANGUAGE)
        .copied()
        .filter(|name| !known.contains(name) && builtins::refused(name).is_none())
        .collect();
    assert!(unknown.is_empty(), "{unknown:?}");
}

/// Whether the page writes `name` as code: `` `name` ``, `` `name(…` ``, `` `nl.name` ``,
/// `` `x.name…` `` or `` `…name,` ``.
fn mentions(doc: &str, name: &str) -> bool {
    doc.match_indices(name).any(|(at, _)| {
        let before = doc[..at].chars().next_back();
        let after = doc[at + name.len()..].chars().next();
        let ident = |c: Option<char>| c.is_some_and(|c| c.is_alphanumeric() || c == '_');
        !ident(before)
            && !ident(after)
            && matches!(before, Some('`' | '.' | '@'))
            && matches!(after, Some('`' | '(' | '.' | ',' | '['))
    })
}
