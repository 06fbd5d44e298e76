use nki::prelude::*;

#[kernel]
fn bad_rearranges(a: Hbm<f32, 128, 24>) -> Hbm<f32, 128, 24> {
    let out = ndarray([128, 24], f32, SharedHbm);
    let t = ndarray([128, 24], f32, Sbuf);
    nisa::dma_copy(dst = t, src = a);
    // A name of dst_pattern that src_pattern does not have; one it drops; one given twice.
    let x = t.rearrange(("p", "f"), ("p", "g"));
    let x = t.rearrange(("p", ("h", "w")), ("p", "h"), [("h", 4)]);
    let x = t.rearrange(("p", ("h", "h")), ("p", "h"));
    // src_pattern names each axis.
    let x = t.rearrange(("p",), ("p",));
    // Sizes that do not divide; two names of a group without a size; a name not in the pattern.
    let x = t.rearrange(("p", ("h", "w")), ("p", "w", "h"), [("h", 5)]);
    let x = t.rearrange(("p", ("h", "w")), ("p", "w", "h"));
    let x = t.rearrange(("p", ("h", "w")), ("p", "w", "h"), [("h", 4), ("z", 2)]);
    // A tile keeps its partition axis first and whole.
    let x = t.rearrange(("p", "f"), ("f", "p"));
    let x = t.rearrange(("p", "f"), (("p", "f"),));
    // A merge of axes the permutation separated.
    let x = t.rearrange(("p", ("h", "w")), ("p", ("w", "h")), [("h", 4)]);
    // Names are string literals.
    let x = t.rearrange(("p", 1), ("p", "f"));
    let x = t.rearrange(("p", "f"), ("p", "f"), 4);
    nisa::dma_copy(dst = out, src = t);
    out
}

fn main() {}
