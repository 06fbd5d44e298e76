//! Random calls of the timing, benchmark, host-profile and device-tensor APIs on random valid
//! programs: every call returns a result or a typed error, never panics or allocates in
//! proportion to a count it was given, and every result it returns holds what the API
//! documents.

use nki_lang::CompiledProgram;
use nki_runtime::host_profile::HostProfile;
use nki_runtime::timing::{
    Benchmark, Detail, Mode, Params, Schedule, Scheduling, Timing, TimingError,
};
use nki_runtime::{DeviceTensor, GridDim, Kernel, LaunchGrid, NeuronCore, TensorError, spmd_dim};

use super::generate::Choices;
use super::run::{Buf, build, dims, record_out_of_order};
use super::spec::Case;

/// The input shapes of a case's program.
fn shapes(case: &Case) -> Vec<Vec<usize>> {
    case.program.inputs.iter().map(dims).collect()
}

/// A value for a `u32` parameter: the documented one, or one at or near an edge.
fn param(c: &mut Choices<'_>, documented: u32) -> u32 {
    match c.below(8) {
        0 => 0,
        1 => 1,
        2 => u32::MAX,
        3 => documented.saturating_mul(2),
        4 => documented / 2,
        _ => documented,
    }
}

/// The target's table with some parameters at random values.
fn random_params(c: &mut Choices<'_>, base: Params) -> Params {
    let mut p = base;
    for _ in 0..c.below(6) {
        match c.below(16) {
            0 => p.pe_mhz = param(c, p.pe_mhz),
            1 => p.vector_mhz = param(c, p.vector_mhz),
            2 => p.scalar_mhz = param(c, p.scalar_mhz),
            3 => p.min_ii_cycles = param(c, p.min_ii_cycles),
            4 => p.static_overhead_cycles = param(c, p.static_overhead_cycles),
            5 => p.dma_engines = param(c, p.dma_engines),
            6 => p.dma_partitions_per_engine = param(c, p.dma_partitions_per_engine),
            7 => p.dma_queues = param(c, p.dma_queues),
            8 => p.dma_engine_bytes_per_us = param(c, p.dma_engine_bytes_per_us),
            9 => p.dma_fixed_latency_ns = param(c, p.dma_fixed_latency_ns),
            10 => p.hbm_bytes_per_us = param(c, p.hbm_bytes_per_us),
            11 => p.psum_banks = param(c, p.psum_banks),
            12 => p.sbuf_partition_bytes = param(c, p.sbuf_partition_bytes),
            13 => p.execution_overhead_ns = param(c, p.execution_overhead_ns),
            14 => p.vector_elements_per_cycle = param(c, p.vector_elements_per_cycle),
            _ => p.dma_descriptor_overhead_bytes = param(c, p.dma_descriptor_overhead_bytes),
        }
    }
    p
}

/// A launch grid: one of up to four instances (`Ok`), or one a launch refuses (`Err`).
fn random_grid(c: &mut Choices<'_>) -> (LaunchGrid, bool) {
    match c.below(8) {
        0 => (LaunchGrid::new(&[GridDim::new(0)]), false),
        1 => (LaunchGrid::new(&[GridDim::new(1); 4]), false),
        2 => (
            LaunchGrid::new(&[spmd_dim(GridDim::new(usize::MAX), GridDim::new(3))]),
            false,
        ),
        3 => (LaunchGrid::new(&[GridDim::new(2), GridDim::new(2)]), true),
        4 => (LaunchGrid::new(&[GridDim::new(3)]), true),
        _ => (LaunchGrid::SINGLE, true),
    }
}

/// What any schedule must satisfy: records in order within the latency, the execution no
/// shorter than the latency, utilisations between 0 and 1, and (with records) a trace that
/// is JSON and an SVG timeline.
fn check_schedule(s: &Schedule, detail: Detail) -> Result<(), String> {
    if let Some(why) = record_out_of_order(s) {
        return Err(why);
    }
    if s.execution_ps() < s.total_ps() {
        return Err("the execution is shorter than the kernel".into());
    }
    let p = s.profile();
    for e in &p.engines {
        if !(0.0..=1.0 + 1e-9).contains(&e.utilisation) || !e.active_us.is_finite() {
            return Err(format!("engine row out of range: {e:?}"));
        }
    }
    if !p.latency_us.is_finite() || !p.mfu.is_finite() || !(0.0..=1.0 + 1e-9).contains(&p.hfu) {
        return Err(format!("profile figures out of range: {p:?}"));
    }
    serde_json::from_str::<serde_json::Value>(&p.to_json())
        .map_err(|e| format!("the profile's JSON does not parse: {e}"))?;
    let mut trace = Vec::new();
    let mut svg = Vec::new();
    let (t, v) = (s.write_chrome_trace(&mut trace), s.write_svg(&mut svg));
    match detail {
        Detail::Summary => {
            if !matches!(t, Err(TimingError::NoRecords))
                || !matches!(v, Err(TimingError::NoRecords))
            {
                return Err(format!("a summary wrote a trace or timeline: {t:?}, {v:?}"));
            }
        }
        Detail::Profile | Detail::Trace => {
            t.map_err(|e| format!("the trace failed: {e}"))?;
            v.map_err(|e| format!("the timeline failed: {e}"))?;
            serde_json::from_slice::<serde_json::Value>(&trace)
                .map_err(|e| format!("the Chrome trace does not parse: {e}"))?;
            if !svg.starts_with(b"<svg") && !svg.starts_with(b"<?xml") {
                return Err("the timeline is not SVG".into());
            }
        }
    }
    Ok(())
}

/// Times the case's program with random options: a valid launch gives a schedule that holds
/// [`check_schedule`], a refused grid a typed error; nothing panics.
pub fn check_timing_options(case: &Case, c: &mut Choices<'_>) -> Result<(), String> {
    let compiled: CompiledProgram = build(case)?;
    let parts = compiled.parts();
    let program = parts.program();
    let kernel = Kernel::new(program);
    let shapes = shapes(case);
    let shapes: Vec<&[usize]> = shapes.iter().map(Vec::as_slice).collect();
    let detail = c.pick(&[Detail::Summary, Detail::Profile, Detail::Trace]);
    let scheduling = if c.chance(50) {
        Scheduling::Device {
            rotation: c.pick(&[0, 1, 2, 4, 7, u32::MAX]),
        }
    } else {
        Scheduling::ProgramOrder {
            buffers: c.pick(&[0, 1, 3, u32::MAX]),
        }
    };
    let (grid, launches) = random_grid(c);
    let timing = Timing::new()
        .params(random_params(c, Params::for_target(program.target())))
        .detail(detail)
        .mode(c.pick(&[Mode::TimingOnly, Mode::Compute]))
        .grid(grid)
        .dma_engine_rows(c.chance(30))
        .scheduling(scheduling);
    let mut core = NeuronCore::new(program.target()).with_host_threads(1);
    match (timing.run_shapes(&mut core, &kernel, &shapes), launches) {
        (Ok(s), true) => check_schedule(&s, detail),
        (Err(TimingError::Launch(_)), false) => Ok(()),
        (Ok(_), false) => Err(format!("a refused grid was timed: {grid:?}")),
        (Err(e), _) => Err(format!("timing failed: {e} ({e:?}), grid {grid:?}")),
    }
}

/// Benchmarks the case's program with counts at and beyond the limits: zero timed runs and
/// counts above [`Benchmark::MAX_RUNS`] are typed errors (returned at once, whatever the
/// count), others give one identical modeled sample per timed run.
pub fn check_benchmark_counts(case: &Case, c: &mut Choices<'_>) -> Result<(), String> {
    let compiled = build(case)?;
    let parts = compiled.parts();
    let kernel = Kernel::new(parts.program());
    let shapes = shapes(case);
    let shapes: Vec<&[usize]> = shapes.iter().map(Vec::as_slice).collect();
    let counts = [0, 1, 3, Benchmark::MAX_RUNS + 1, 1 << 40, usize::MAX];
    let (warmup, iters) = (c.pick(&counts), c.pick(&counts));
    let mut core = NeuronCore::new(parts.program().target()).with_host_threads(1);
    let result = Benchmark::new()
        .warmup(warmup)
        .iters(iters)
        .run_shapes(&mut core, &kernel, &shapes);
    let too_many = |n: usize| n > Benchmark::MAX_RUNS;
    match result {
        Err(TimingError::NoIterations) if iters == 0 => Ok(()),
        Err(TimingError::TooManyRuns { count, .. })
            if iters != 0 && (too_many(warmup) || too_many(iters)) && too_many(count) =>
        {
            Ok(())
        }
        Ok(r) if iters != 0 && !too_many(warmup) && !too_many(iters) => {
            let samples = r.nc_latency.samples();
            if samples.len() != iters || r.host_launch.samples().len() != iters {
                return Err(format!("{} samples for {iters} runs", samples.len()));
            }
            let latency = r.schedule.latency_us();
            if samples.iter().any(|&x| x != latency) {
                return Err(format!("samples {samples:?} differ from {latency}"));
            }
            let p50 = r.nc_latency.get_latency_percentile(50);
            if p50 != Some(latency) || r.nc_latency.get_latency_percentile(101).is_some() {
                return Err(format!("percentiles wrong: P50 {p50:?}"));
            }
            Ok(())
        }
        other => Err(format!(
            "warmup {warmup}, iters {iters}: unexpected {:?}",
            other.map(|r| r.nc_latency.samples().len())
        )),
    }
}

/// Runs the case's program under a host profile: its counts agree with the timing model's
/// count of executed instructions and add up by instruction and by opcode; `clear` empties
/// it.
pub fn check_host_profile(case: &Case) -> Result<(), String> {
    let compiled = build(case)?;
    let parts = compiled.parts();
    let kernel = Kernel::new(parts.program());
    let shapes = shapes(case);
    let shapes: Vec<&[usize]> = shapes.iter().map(Vec::as_slice).collect();
    let mut core = NeuronCore::new(parts.program().target()).with_host_threads(1);
    let timed = Timing::new()
        .scheduling(Scheduling::ProgramOrder { buffers: 1 })
        .detail(Detail::Summary)
        .run_shapes(&mut core, &kernel, &shapes)
        .map_err(|e| format!("timing failed: {e}"))?;
    let mut profile = HostProfile::new();
    let inputs: Vec<Buf> = (case.program.inputs.iter().zip(&case.inputs))
        .map(|(t, xs)| Buf::new(t.dt, xs))
        .collect();
    let mut outputs: Vec<Buf> = (case.program.outputs.iter())
        .map(|t| Buf::sentinel(t.dt, dims(t).iter().product()))
        .collect();
    let ins: Vec<_> = (inputs.iter().zip(&shapes))
        .map(|(b, s)| b.arg(s))
        .collect();
    let out_shapes: Vec<Vec<usize>> = case.program.outputs.iter().map(dims).collect();
    let mut outs: Vec<_> = (outputs.iter_mut().zip(&out_shapes))
        .map(|(b, s)| b.arg_mut(s))
        .collect();
    let bound = kernel
        .bind(&ins, &mut outs)
        .map_err(|e| format!("the launch was refused: {e}"))?;
    core.execute_observed(bound, &mut profile)
        .map_err(|e| format!("the profiled launch failed: {e}"))?;
    let by_instruction: u64 = profile.by_instruction().iter().map(|r| r.count).sum();
    let by_opcode: u64 = profile.by_opcode().iter().map(|r| r.count).sum();
    if profile.executed() != timed.instructions()
        || by_instruction != profile.executed()
        || by_opcode != profile.executed()
    {
        return Err(format!(
            "executed {} (timing {}), by instruction {by_instruction}, by opcode {by_opcode}",
            profile.executed(),
            timed.instructions()
        ));
    }
    profile.clear();
    if profile.executed() != 0 || !profile.by_instruction().is_empty() {
        return Err("clear left counts".into());
    }
    Ok(())
}

/// Creates device tensors of random shapes, small or far beyond any host: a tensor is
/// created exactly when its shape is valid and small, and the refusals are typed.
pub fn check_device_tensors(c: &mut Choices<'_>) -> Result<(), String> {
    // Products of the small axes stay within 2^20 elements (8^6 = 2^18): a tensor is either
    // small or at least 2^40 elements, never one that fits only just.
    let axes = [0, 1, 2, 3, 7, 8, 1 << 40, (1 << 40) + 1, usize::MAX];
    let rank = c.below(nki_lang::MAX_TENSOR_RANK + 2);
    let shape: Vec<usize> = (0..rank).map(|_| c.pick(&axes)).collect();
    let valid_rank = rank <= nki_lang::MAX_TENSOR_RANK;
    // ndarray's rule: every axis within `MAX_DIM`, and the product of the nonzero axes within
    // `isize::MAX` bytes.
    let nonzero = shape
        .iter()
        .filter(|&&d| d != 0)
        .try_fold(1usize, |n, &d| n.checked_mul(d))
        .filter(|&n| n <= isize::MAX as usize / 4);
    let count = if shape.iter().any(|&d| d > nki_runtime::MAX_DIM) {
        None
    } else {
        nonzero.map(|_| shape.iter().product::<usize>())
    };
    let created = DeviceTensor::<f32>::zeros(&shape);
    match (created, valid_rank, count) {
        // Small: created with the shape asked for, every element zero.
        (Ok(t), true, Some(n)) if n <= 1 << 20 => {
            if t.shape() != shape.as_slice() || t.as_slice().len() != n {
                return Err(format!("created {:?} for {shape:?}", t.shape()));
            }
            if t.as_slice().iter().any(|&x| x != 0.0) {
                return Err("zeros holds a nonzero".into());
            }
            let back = t.to_array();
            if back.shape() != shape.as_slice() {
                return Err("the array's shape differs".into());
            }
            // A row-major vector of the wrong length is refused.
            if DeviceTensor::<f32>::from_vec(&shape, vec![0.0; n + 1]).is_ok() {
                return Err("from_vec took one element too many".into());
            }
            Ok(())
        }
        (Err(TensorError::Shape(_)), false, _) | (Err(TensorError::Shape(_)), true, None) => Ok(()),
        // Representable but far beyond the host (at least 2^40 elements of 4 bytes).
        (Err(TensorError::Allocation { .. } | TensorError::Shape(_)), true, Some(n))
            if n >= 1 << 40 =>
        {
            Ok(())
        }
        (other, valid_rank, count) => Err(format!(
            "shape {shape:?} (rank valid {valid_rank}, count {count:?}): {:?}",
            other.map(|t| t.shape().to_vec())
        )),
    }
}
