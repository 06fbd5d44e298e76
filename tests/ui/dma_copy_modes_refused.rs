use nki::prelude::*;

// dma_copy's arguments the model does not run, and hardware DGE on a NeuronCore-v2.
#[kernel]
fn dma_copy_modes(x: Hbm<f32, 128, 64>) -> Hbm<f32, 128, 64> {
    let out = ndarray([128, 64], f32, SharedHbm);
    let t = ndarray([128, 64], f32, Sbuf);
    dma_copy(dst = t, src = x[..], dst_rmw_op = add);
    dma_copy(dst = t, src = x[..], oob_mode = oob_mode.skip);
    dma_copy(dst = t, src = x[..], dge_mode = dge_mode.hwdge);
    dma_copy(dst = out[..], src = t);
    out
}

fn main() {}
