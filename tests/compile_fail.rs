//! Every rule `#[kernel]` checks is a compile error on the offending tokens.
//! Snapshots: `TRYBUILD=overwrite cargo test --test compile_fail`, then review the diff.

#[test]
fn rules_are_compile_errors() {
    let t = trybuild::TestCases::new();
    t.compile_fail("tests/ui/*.rs");
}
