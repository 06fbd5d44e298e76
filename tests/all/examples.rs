//! The example kernels the tests run, each compiled once for the whole test binary; their
//! `main` functions and the items only their `main` uses stay unused here.

#![allow(dead_code)]

#[path = "../../examples/autotune_matmul.rs"]
pub mod autotune_matmul;
#[path = "../../examples/average_pool2d.rs"]
pub mod average_pool2d;
#[path = "../../examples/calibration.rs"]
pub mod calibration;
#[path = "../../examples/data_movement.rs"]
pub mod data_movement;
#[path = "../../examples/exp.rs"]
pub mod exp;
#[path = "../../examples/fused_attention.rs"]
pub mod fused_attention;
#[path = "../../examples/fused_matmul_bias_gelu.rs"]
pub mod fused_matmul_bias_gelu;
#[path = "../../examples/kernel_optimization_v2.rs"]
pub mod kernel_optimization_v2;
#[path = "../../examples/layernorm.rs"]
pub mod layernorm;
#[path = "../../examples/mamba.rs"]
pub mod mamba;
#[path = "../../examples/mamba_tutorial_shapes.rs"]
pub mod mamba_tutorial_shapes;
#[path = "../../examples/matmul_basic.rs"]
pub mod matmul_basic;
#[path = "../../examples/matmul_block_free_dimension.rs"]
pub mod matmul_block_free_dimension;
#[path = "../../examples/matmul_fully_optimized.rs"]
pub mod matmul_fully_optimized;
#[path = "../../examples/matmul_hoist_load.rs"]
pub mod matmul_hoist_load;
#[path = "../../examples/matmul_tiled.rs"]
pub mod matmul_tiled;
#[path = "../../examples/maxpool2d.rs"]
pub mod maxpool2d;
#[path = "../../examples/nkilib_cumsum.rs"]
pub mod nkilib_cumsum;
#[path = "../../examples/nkilib_rope.rs"]
pub mod nkilib_rope;
#[path = "../../examples/nkilib_topk.rs"]
pub mod nkilib_topk;
#[path = "../../examples/rmsnorm.rs"]
pub mod rmsnorm;
#[path = "../../examples/select_and_scatter.rs"]
pub mod select_and_scatter;
#[path = "../../examples/softmax.rs"]
pub mod softmax;
#[path = "../../examples/tensor_add.rs"]
pub mod tensor_add;
#[path = "../../examples/transpose2d.rs"]
pub mod transpose2d;
