use nki::prelude::*;

// quantize_mx is NeuronCore-v4 only.
#[kernel(target = trn2)]
fn quantize_on_trn2(x: Hbm<bf16, 32, 16>) {
    let src = load(x[..]);
    let d = ndarray([32, 4], float8_e4m3fn_x4, Sbuf);
    let s = ndarray([4, 4], u8, Sbuf);
    nisa::quantize_mx(dst = d, src = src, dst_scale = s);
}

#[kernel(target = trn3)]
fn quantize_refusals(x: Hbm<bf16, 128, 64>, y: Hbm<f32, 32, 16>) {
    let src = load(x[..]);
    let d = ndarray([128, 16], float8_e4m3fn_x4, Sbuf);
    let s = ndarray([128, 16], u8, Sbuf);
    // The source is fp16 or bf16.
    let f = load(y[..]);
    let d4 = ndarray([32, 4], float8_e4m3fn_x4, Sbuf);
    let s4 = ndarray([4, 4], u8, Sbuf);
    nisa::quantize_mx(dst = d4, src = f, dst_scale = s4);
    // No fp4 output.
    let d_fp4 = ndarray([128, 16], float4_e2m1fn_x4, Sbuf);
    nisa::quantize_mx(dst = d_fp4, src = src, dst_scale = s);
    // A multiple of 32 partitions.
    let d16 = ndarray([16, 16], float8_e4m3fn_x4, Sbuf);
    nisa::quantize_mx(dst = d16, src = src[[0..16, 0..64]], dst_scale = s);
    // dst has a quarter of src's elements per partition.
    let d_wide = ndarray([128, 64], float8_e4m3fn_x4, Sbuf);
    nisa::quantize_mx(dst = d_wide, src = src, dst_scale = s);
    // Beyond 32 partitions the scales span the quadrants: 100 partitions at least.
    let s_short = ndarray([16, 16], u8, Sbuf);
    nisa::quantize_mx(dst = d, src = src, dst_scale = s_short);
    // Scales are float8_e8m0fnu or uint8.
    let s_f32 = ndarray([128, 16], f32, Sbuf);
    nisa::quantize_mx(dst = d, src = src, dst_scale = s_f32);
}

fn main() {}
