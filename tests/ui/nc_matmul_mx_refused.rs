use nki::prelude::*;

// nc_matmul_mx is NeuronCore-v4 only.
#[kernel(target = trn2)]
fn matmul_mx_on_trn2(s: Hbm<float8_e4m3fn_x4, 32, 8>, sc: Hbm<u8, 4, 8>) {
    let st = ndarray([32, 8], float8_e4m3fn_x4, Sbuf);
    let ss = ndarray([4, 8], u8, Sbuf);
    nisa::dma_copy(dst = st, src = s);
    nisa::dma_copy(dst = ss, src = sc);
    let acc = ndarray([8, 8], f32, Psum);
    nisa::nc_matmul_mx(dst = acc, stationary = st, moving = st, stationary_scale = ss, moving_scale = ss);
}

#[kernel(target = trn3)]
fn matmul_mx_refusals(s: Hbm<float8_e4m3fn_x4, 64, 8>, sc: Hbm<u8, 36, 8>, b: Hbm<bf16, 64, 8>) {
    let st = ndarray([64, 8], float8_e4m3fn_x4, Sbuf);
    let ss = ndarray([36, 8], u8, Sbuf);
    nisa::dma_copy(dst = st, src = s);
    nisa::dma_copy(dst = ss, src = sc);
    let acc = ndarray([8, 8], f32, Psum);
    // The operands are packed MX types.
    let plain = ndarray([64, 8], bf16, Sbuf);
    nisa::dma_copy(dst = plain, src = b);
    nisa::nc_matmul_mx(dst = acc, stationary = plain, moving = st, stationary_scale = ss, moving_scale = ss);
    // One contraction: as many partitions in both.
    nisa::nc_matmul_mx(dst = acc, stationary = st, moving = st[[0..32, 0..8]], stationary_scale = ss, moving_scale = ss);
    // The stationary's width is even.
    nisa::nc_matmul_mx(dst = acc, stationary = st[[0..64, 0..7]], moving = st, stationary_scale = ss, moving_scale = ss);
    // A scale tile spans the quadrants: 36 partitions for 64.
    nisa::nc_matmul_mx(dst = acc, stationary = st, moving = st, stationary_scale = ss[[0..8, 0..8]], moving_scale = ss);
    // The destination is float32 or bfloat16 in PSUM.
    let acc16 = ndarray([8, 8], f16, Psum);
    nisa::nc_matmul_mx(dst = acc16, stationary = st, moving = st, stationary_scale = ss, moving_scale = ss);
    // Row tiling only; the tile holds the stationary's 64 partitions (row tiles accepted).
    nisa::nc_matmul_mx(dst = acc, stationary = st, moving = st, stationary_scale = ss, moving_scale = ss, tile_position = (64, 0), tile_size = (64, 128));
    nisa::nc_matmul_mx(dst = acc, stationary = st, moving = st, stationary_scale = ss, moving_scale = ss, tile_position = (0, 0), tile_size = (64, 64));
    nisa::nc_matmul_mx(dst = acc, stationary = st, moving = st, stationary_scale = ss, moving_scale = ss, tile_position = (0, 0), tile_size = (32, 128));
}

fn main() {}
