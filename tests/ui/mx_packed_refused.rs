use nki::prelude::*;

// NKI's packed MX types (_x4) are only for quantize_mx, nc_matmul_mx and DMA copies.
#[kernel]
fn packed_refused(a: Hbm<float8_e4m3fn_x4, 128, 16>) -> Hbm<float8_e4m3fn_x4, 128, 16> {
    let out = ndarray([128, 16], float8_e4m3fn_x4, SharedHbm);
    let t = ndarray([128, 16], float8_e4m3fn_x4, Sbuf);
    // A DMA copies them as bits: accepted.
    nisa::dma_copy(dst = t, src = a);
    // A DMA cannot convert one.
    let f = ndarray([128, 16], f32, Sbuf);
    nisa::dma_copy(dst = f, src = a);
    // No compute instruction takes one.
    let c = ndarray([128, 16], float8_e4m3fn_x4, Sbuf);
    nisa::tensor_copy(dst = c, src = t);
    let d = ndarray([128, 16], f32, Sbuf);
    nisa::tensor_tensor(dst = d, data1 = t, data2 = t, op = add);
    nisa::activation(dst = d, op = exp, data = t);
    let p = ndarray([16, 16], f32, Psum);
    nisa::nc_matmul(dst = p, stationary = t, moving = t);
    nisa::dma_copy(dst = out, src = t);
    out
}

fn main() {}
