use nki::prelude::*;

// The PE array's tiling: both options, multiples of 32, inside the array, holding the
// stationary operand; 32-wide tiles need Trn2.
#[kernel]
fn matmul_tiling_refused(a: Hbm<bf16, 64, 128>) -> Hbm<f32, 64, 64> {
    let out = ndarray([64, 64], f32, SharedHbm);
    let at = load(a[..]);
    let s = at[[0..64, 0..64]];
    let p = nc_matmul(s, s, tile_position = (0, 0));
    let q = nc_matmul(s, s, tile_position = (0, 16), tile_size = (64, 64));
    let r = nc_matmul(s, s, tile_position = (96, 0), tile_size = (64, 64));
    let u = nc_matmul(s, s, tile_position = (0, 0), tile_size = (32, 64));
    let v = nc_matmul(s, s, tile_position = (0, 0), tile_size = (64, 32));
    let w = nc_matmul(s, s, is_transpose = 1);
    let s32 = at[[0..32, 0..32]];
    let x = nc_matmul(s32, s32, tile_position = (0, 0), tile_size = (32, 32));
    store(out[..], copy(p, f32));
    out
}

fn main() {}
