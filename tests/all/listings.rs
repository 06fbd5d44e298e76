//! The instruction listings of the example kernels, snapshot-tested.
//! To accept a change: `UPDATE_SNAPSHOTS=1 cargo test --test all listings::`, then review the diff.

// The example kernels, compiled here as modules; each example brings its own copy of
// `examples/common`, which is why the same file is loaded twice.
use crate::examples::matmul_basic as basic;
use crate::examples::matmul_tiled as tiled;

use std::path::PathBuf;

fn check(name: &str, listing: String) {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/snapshots")
        .join(format!("{name}.txt"));
    if std::env::var_os("UPDATE_SNAPSHOTS").is_some() {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, &listing).unwrap();
        return;
    }
    let expected = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "{}: {e}; run with UPDATE_SNAPSHOTS=1 to create it",
            path.display()
        )
    });
    assert_eq!(
        listing, expected,
        "listing of `{name}` changed; run with UPDATE_SNAPSHOTS=1 to accept"
    );
}

#[test]
fn matmul_basic_listing() {
    check(
        "matmul_basic",
        basic::matmul_basic::KERNEL.program().to_string(),
    );
}

#[test]
fn matmul_tiled_listing() {
    check(
        "matmul_tiled",
        tiled::matmul_tiled::KERNEL.program().to_string(),
    );
}
