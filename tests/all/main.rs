//! The facade's integration tests, one module per subject, in one test binary so that the suite
//! links once. `tests/compile_fail.rs` (trybuild) and `tests/zero_alloc.rs` (a counting global
//! allocator, which other tests running in parallel would disturb) stay binaries of their own.
//! Run one subject with `cargo test --test all <module>::`.

#![allow(clippy::duplicate_mod)]

#[path = "../common/mod.rs"]
mod common;
#[path = "../doc_kernels/mod.rs"]
mod doc_kernels;
mod examples;

mod access_patterns;
mod ap_offsets;
mod block_axes;
mod budget;
mod calibration;
mod compute;
mod destination_first;
mod device_loops;
mod dma_compute;
mod dma_transpose;
mod docs_cover_ops;
mod dtypes;
mod fp32_to_int;
mod gather_flattened;
mod hbm_kinds;
mod hbm_views;
mod helpers;
mod host_profile;
mod indexing_forms;
mod indirect_dma;
mod input_tiles;
mod integer_division;
mod isa;
mod isa_activate2;
mod isa_exponential;
mod isa_local_gather;
mod isa_nc_n_gather;
mod isa_nc_stream_shuffle;
mod isa_nonzero_with_count;
mod isa_range_select;
mod isa_select_reduce;
mod isa_sequence_bounds;
mod isa_tensor_scalar_cumulative;
mod isa_top8;
mod keyword_arguments;
mod language;
mod listings;
mod long_expressions;
mod masks;
mod matmul;
mod matmul_options;
mod meta_params;
mod mx;
mod nki_constructs;
mod nkilib_attention_tkg;
mod nkilib_cumsum;
mod nkilib_rmsnorm_quant;
mod nkilib_rope;
mod nkilib_router_topk;
mod nkilib_topk;
mod no_circles;
mod ops_smoke;
mod parallel_loops;
mod partition_blocks;
mod partition_broadcast;
mod partition_starts;
mod ported_attention_tutorial;
mod ported_contributed;
mod ported_cumsum;
mod ported_flash_attention;
mod ported_resize_nearest;
mod ported_rmsnorm_qkv;
mod ported_rotary;
mod ported_select_and_scatter;
mod ported_top8_examples;
mod ported_vision;
mod predicated_branches;
mod program_size;
mod psum_copies;
mod random;
mod rearrange;
mod reused_operands;
mod rng_state;
mod robustness;
mod schedule;
mod schedule_control;
mod split_blocks;
mod spmd;
mod stream_in_place;
mod strict;
mod strict_hardware;
mod symbolic_quotients;
mod tensor_copy_dynamic;
mod timing;
mod timing_fast_forward;
mod topk_gpsimd;
mod tutorials_attention;
mod tutorials_exp;
mod tutorials_mamba;
mod tutorials_matmul;
mod tutorials_norm;
mod tutorials_pool;
mod uninitialized;
mod view_dtype;
mod views;
