use nki::prelude::*;

#[kernel]
fn bad_dtype_views(a: Hbm<f32, 128, 64>) -> Hbm<f32, 128, 64> {
    let out = ndarray([128, 64], f32, SharedHbm);
    let t = ndarray([128, 64], f32, Sbuf);
    nisa::dma_copy(dst = t, src = a);
    let b = ndarray([128, 6], u8, Sbuf);
    // The last dimension is not contiguous: a stepped slice, a permute.
    let x = t.slice(1, 0, 64, 2).view(u8);
    let x = t.reshape_dim(1, (8, 8)).permute((0, 2, 1)).view(bf16);
    // Joining elements: the last dimension's size must be divisible by the ratio.
    let x = b.view(f32);
    // ... and the view must start on a whole element of the new dtype.
    let x = t.view(u8).slice(1, 2, 10).view(f32);
    // Not a dtype.
    let x = t.view(float64);
    // A DMA through an HBM view converts nothing: its tile side has the view's dtype.
    let w = ndarray([128, 256], f32, Sbuf);
    nisa::dma_copy(dst = w, src = a.view(u8));
    // An HBM view is moved in whole elements of the tensor (bytes 1..9 split two f32s).
    let c = ndarray([128, 8], u8, Sbuf);
    nisa::dma_copy(dst = c, src = a.view(u8).slice(1, 1, 9));
    // Its last dimension is contiguous, as a tile's.
    let x = a.permute((1, 0)).view(u8);
    nisa::dma_copy(dst = out, src = t);
    out
}

fn main() {}
