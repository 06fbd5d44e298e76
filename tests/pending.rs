//! Kernels NKI accepts that `#[kernel]` does not compile yet, each a program under
//! `tests/pending/` that asserts the right results when it runs. Ignored until the bug named
//! in the attribute is fixed; run with `cargo test --test pending -- --ignored`.

#[test]
#[ignore = "bug: `where` is a Rust keyword and `r#where` is not found: the function name is looked up with its `r#` prefix (nki-macros/src/lower/call.rs:72, `func.to_string()`)"]
fn where_as_r_where() {
    trybuild::TestCases::new().pass("tests/pending/where.rs");
}

#[test]
#[ignore = "bug: `t op= number` is rejected (\"cannot assign an integer/a float to a tile\"): Stmt::OpAssign (nki-macros/src/lower/mod.rs:316) produces a number into the tile, and `produce` (nki-macros/src/lower/call.rs:56-69) only copies tiles into a destination"]
fn op_assign_with_a_number() {
    trybuild::TestCases::new().pass("tests/pending/op_assign_scalar.rs");
}
