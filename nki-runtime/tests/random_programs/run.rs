//! Running cases on modeled cores and checking the properties: the generated program builds,
//! launches without error on a strict core, gives the same bits on every core configuration as
//! on the runtime's reference interpreter (`nki-runtime/src/exec/reference.rs`), and equals the
//! spec-level reference (`reference.rs`); wrong launch arguments are refused and change nothing.

use half::bf16;
use nki_lang::CompiledProgram;
use nki_runtime::{HbmIn, HbmOut, Isa, Kernel, NeuronCore};

use super::generate::Choices;
use super::lower::lower;
use super::numerics::Val;
use super::reference::evaluate;
use super::spec::{Case, Dt, Tensor};

/// The core configurations every case runs on, reused across cases (SBUF and PSUM keep what
/// earlier cases left, as a device's do), and a core that runs on the reference interpreter
/// (`nki_runtime::reference_launch`: every instruction element by element), first.
pub struct Cores {
    cores: Vec<(String, NeuronCore)>,
}

/// The name of the run on the reference interpreter.
const REFERENCE: &str = "reference interpreter";

/// Launches on `core`: on the reference interpreter for the [`REFERENCE`] run.
fn launch(
    name: &str,
    core: &mut NeuronCore,
    kernel: &Kernel<'_>,
    ins: &[HbmIn<'_>],
    outs: &mut [HbmOut<'_>],
) -> Result<(), nki_runtime::LaunchError> {
    if name == REFERENCE {
        nki_runtime::reference_launch::launch(core, kernel, ins, outs)
    } else {
        core.launch(kernel, ins, outs)
    }
}

impl Cores {
    /// The reference interpreter, a strict core, plain cores with one and two host threads
    /// (one of them blocking partitions at a 1 KiB budget), and a plain two-thread core for
    /// every other host code path this machine supports.
    pub fn new() -> Cores {
        let mut cores = vec![
            (REFERENCE.to_string(), NeuronCore::default()),
            (
                "strict".to_string(),
                NeuronCore::default().with_strict(true),
            ),
            (
                "plain, 1 host thread".to_string(),
                NeuronCore::default()
                    .with_strict(false)
                    .with_host_threads(1),
            ),
            (
                "plain, 2 host threads".to_string(),
                NeuronCore::default()
                    .with_strict(false)
                    .with_host_threads(2),
            ),
            // A cache of 1 KiB per block of partitions: runs of partition-local instructions
            // of these small programs run a few partitions at a time, as large ones do.
            (
                "plain, 2 host threads, 1 KiB blocks".to_string(),
                NeuronCore::default()
                    .with_strict(false)
                    .with_host_threads(2)
                    .with_host_cache_bytes(1024),
            ),
        ];
        let native = NeuronCore::default().isa();
        for isa in Isa::supported() {
            if isa != native {
                let core = NeuronCore::default()
                    .with_isa(isa)
                    .expect("a supported path")
                    .with_strict(false)
                    .with_host_threads(2);
                cores.push((format!("plain, 2 host threads, {isa:?}"), core));
            }
        }
        Cores { cores }
    }
}

/// A host buffer of one tensor.
#[derive(Clone, Debug, PartialEq)]
pub enum Buf {
    /// f32 elements.
    F32(Vec<f32>),
    /// bf16 elements.
    Bf16(Vec<bf16>),
}

/// What no engine writes: a NaN with a payload (the engines' NaNs are canonical).
const SENTINEL: u32 = 0x7fa5_a5a5;

impl Buf {
    /// The values `xs` (exact in `dt`) as a buffer of `dt`.
    pub fn new(dt: Dt, xs: &[f32]) -> Buf {
        match dt {
            Dt::F32 => Buf::F32(xs.to_vec()),
            Dt::Bf16 => Buf::Bf16(
                xs.iter()
                    .map(|&x| bf16::from_bits((x.to_bits() >> 16) as u16))
                    .collect(),
            ),
        }
    }

    /// `n` sentinel elements of `dt`.
    pub fn sentinel(dt: Dt, n: usize) -> Buf {
        match dt {
            Dt::F32 => Buf::F32(vec![f32::from_bits(SENTINEL); n]),
            Dt::Bf16 => Buf::Bf16(vec![bf16::from_bits((SENTINEL >> 16) as u16); n]),
        }
    }

    /// The same elements in the other dtype (a wrong-dtype argument).
    pub fn other_dtype(&self) -> Buf {
        match self {
            Buf::F32(v) => Buf::Bf16(vec![bf16::ZERO; v.len()]),
            Buf::Bf16(v) => Buf::F32(vec![0.0; v.len()]),
        }
    }

    /// Its element count.
    pub fn len(&self) -> usize {
        match self {
            Buf::F32(v) => v.len(),
            Buf::Bf16(v) => v.len(),
        }
    }

    /// Bound as an input of `shape`.
    pub fn arg(&self, shape: &[usize]) -> HbmIn<'_> {
        match self {
            Buf::F32(v) => HbmIn::new(v, shape),
            Buf::Bf16(v) => HbmIn::new(v, shape),
        }
        .expect("shape matches the buffer")
    }

    /// Bound as an output of `shape`.
    pub fn arg_mut(&mut self, shape: &[usize]) -> HbmOut<'_> {
        match self {
            Buf::F32(v) => HbmOut::new(v, shape),
            Buf::Bf16(v) => HbmOut::new(v, shape),
        }
        .expect("shape matches the buffer")
    }

    /// Its elements' bits.
    pub fn bits(&self) -> Vec<u32> {
        match self {
            Buf::F32(v) => v.iter().map(|x| x.to_bits()).collect(),
            Buf::Bf16(v) => v.iter().map(|x| u32::from(x.to_bits())).collect(),
        }
    }
}

/// A tensor's shape as launch arguments take it.
pub fn dims(t: &Tensor) -> Vec<usize> {
    vec![t.rows as usize, t.cols as usize]
}

/// What one checked case held.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct Summary {
    /// Output elements compared bit for bit.
    pub exact: usize,
    /// Output elements compared against a range.
    pub within: usize,
    /// Output elements the reference leaves unconstrained.
    pub any: usize,
    /// Instructions of the program.
    pub instructions: usize,
}

/// Builds the case's program (a refusal is a failure: the generator makes valid programs).
pub fn build(case: &Case) -> Result<CompiledProgram, String> {
    lower(&case.program).map_err(|e| {
        format!(
            "the builder refused a generated program: {e}\n{e:?}\n{:?}",
            case.program
        )
    })
}

/// Runs the case on every core and checks the properties.
pub fn check(cores: &mut Cores, case: &Case) -> Result<Summary, String> {
    let compiled = build(case)?;
    let parts = compiled.parts();
    let program = parts.program();
    let kernel = Kernel::new(program);
    let expected = evaluate(case);
    let inputs: Vec<Buf> = case
        .program
        .inputs
        .iter()
        .zip(&case.inputs)
        .map(|(t, xs)| Buf::new(t.dt, xs))
        .collect();
    let mut results: Vec<(String, Vec<Vec<u32>>)> = Vec::new();
    for (name, core) in &mut cores.cores {
        let mut outs: Vec<Buf> = case
            .program
            .outputs
            .iter()
            .map(|t| Buf::sentinel(t.dt, t.len()))
            .collect();
        let ins: Vec<HbmIn<'_>> = inputs
            .iter()
            .zip(&case.program.inputs)
            .map(|(b, t)| b.arg(&dims(t)))
            .collect();
        let mut out_args: Vec<HbmOut<'_>> = outs
            .iter_mut()
            .zip(&case.program.outputs)
            .map(|(b, t)| b.arg_mut(&dims(t)))
            .collect();
        launch(name, core, &kernel, &ins, &mut out_args).map_err(|e| {
            format!(
                "launch on the {name} core failed: {e}\n{program}\n{:?}",
                case.program
            )
        })?;
        drop(out_args);
        results.push((name.clone(), outs.iter().map(Buf::bits).collect()));
    }
    let (first_name, first) = &results[0];
    for (name, got) in &results[1..] {
        for (o, (a, b)) in first.iter().zip(got).enumerate() {
            if let Some(i) = (0..a.len()).find(|&i| a[i] != b[i]) {
                return Err(format!(
                    "cores disagree: output {o} element {i} is {:#x} on the {first_name} core, \
                     {:#x} on the {name} core\n{program}\n{:?}",
                    a[i], b[i], case.program
                ));
            }
        }
    }
    let mut summary = Summary {
        instructions: program.instrs().len(),
        ..Summary::default()
    };
    for (o, (want, got)) in expected.iter().zip(first).enumerate() {
        let t = case.program.outputs[o];
        for (i, (w, &g)) in want.iter().zip(got).enumerate() {
            let Some(w) = *w else {
                return Err(format!(
                    "generator bug: the reference leaves output {o} element {i} unwritten"
                ));
            };
            if !w.admits(t.dt, g) {
                return Err(format!(
                    "output {o} ({:?}) element ({}, {}): expected {w:?}, got {:#x} = {:e}\n{program}\n{:?}",
                    t.dt,
                    i / t.cols as usize,
                    i % t.cols as usize,
                    g,
                    super::numerics::value_of(t.dt, g),
                    case.program
                ));
            }
            match w {
                Val::Exact(_) => summary.exact += 1,
                Val::Within(..) => summary.within += 1,
                Val::Any => summary.any += 1,
            }
        }
    }
    Ok(summary)
}

/// Launches the case's program with arguments that break its signature in one way chosen by
/// `c`: each launch must return an error and leave every output as it was.
pub fn check_bad_launch(cores: &mut Cores, case: &Case, c: &mut Choices<'_>) -> Result<(), String> {
    let compiled = build(case)?;
    let parts = compiled.parts();
    let kernel = Kernel::new(parts.program());
    let p = &case.program;
    let mut ins: Vec<(Buf, Vec<usize>)> = p
        .inputs
        .iter()
        .zip(&case.inputs)
        .map(|(t, xs)| (Buf::new(t.dt, xs), dims(t)))
        .collect();
    let mut outs: Vec<(Buf, Vec<usize>)> = p
        .outputs
        .iter()
        .map(|t| (Buf::sentinel(t.dt, t.len()), dims(t)))
        .collect();
    /// A shape of another rank, or one more row or column (the buffer resized to fit).
    fn reshape(c: &mut Choices<'_>, buf: &mut Buf, shape: &mut Vec<usize>) {
        let (r, k) = (shape[0], shape[1]);
        *shape = match c.below(4) {
            0 => vec![r * k],
            1 => vec![1, r, k],
            2 => vec![r + 1, k],
            _ => vec![r, k + 1],
        };
        let n = shape.iter().product();
        if n != buf.len() {
            *buf = match buf {
                Buf::F32(_) => Buf::F32(vec![0.0; n]),
                Buf::Bf16(_) => Buf::Bf16(vec![bf16::ZERO; n]),
            };
        }
    }
    let what = match c.below(7) {
        0 if !ins.is_empty() => {
            ins.pop();
            "an input missing"
        }
        0 | 1 => {
            ins.push((Buf::F32(vec![0.0; 4]), vec![2, 2]));
            "an extra input"
        }
        2 if !ins.is_empty() => {
            let i = c.below(ins.len());
            ins[i].0 = ins[i].0.other_dtype();
            "an input of the wrong dtype"
        }
        2 | 3 if !ins.is_empty() => {
            let i = c.below(ins.len());
            let (buf, shape) = &mut ins[i];
            reshape(c, buf, shape);
            "an input of the wrong shape"
        }
        4 => {
            let i = c.below(outs.len());
            outs[i].0 = outs[i].0.other_dtype();
            "an output of the wrong dtype"
        }
        5 => {
            let i = c.below(outs.len());
            let (buf, shape) = &mut outs[i];
            reshape(c, buf, shape);
            "an output of the wrong shape"
        }
        _ => {
            if c.chance(50) {
                outs.pop();
                "an output missing"
            } else {
                outs.push((Buf::F32(vec![0.0; 4]), vec![2, 2]));
                "an extra output"
            }
        }
    };
    for (name, core) in &mut cores.cores {
        let before: Vec<Vec<u32>> = outs.iter().map(|(b, _)| b.bits()).collect();
        let args: Vec<HbmIn<'_>> = ins.iter().map(|(b, s)| b.arg(s)).collect();
        let mut out_args: Vec<HbmOut<'_>> = outs.iter_mut().map(|(b, s)| b.arg_mut(s)).collect();
        let r = launch(name, core, &kernel, &args, &mut out_args);
        drop(out_args);
        if r.is_ok() {
            return Err(format!(
                "a launch with {what} succeeded on the {name} core\n{:?}",
                case.program
            ));
        }
        let after: Vec<Vec<u32>> = outs.iter().map(|(b, _)| b.bits()).collect();
        if before != after {
            return Err(format!(
                "a refused launch with {what} changed an output on the {name} core"
            ));
        }
    }
    Ok(())
}

/// Times the case's program under both schedulings, timing only and computing, and checks
/// what must hold of any schedule: the two modes give the same schedule; the device's program
/// runs every executed instruction or counts it as not run; its on-chip peaks stay within
/// capacity; every record ends after it starts, within the latency.
pub fn check_timing(case: &Case) -> Result<(), String> {
    use nki_runtime::timing::{Detail, Mode, Scheduling, Timing};
    let compiled = build(case)?;
    let parts = compiled.parts();
    let program = parts.program();
    let kernel = Kernel::new(program);
    let shapes: Vec<Vec<usize>> = case.program.inputs.iter().map(dims).collect();
    let shapes: Vec<&[usize]> = shapes.iter().map(Vec::as_slice).collect();
    let target = program.target();
    let mut core = NeuronCore::new(target).with_host_threads(1);
    let mut time = |scheduling, mode| {
        Timing::new()
            .scheduling(scheduling)
            .mode(mode)
            .detail(Detail::Profile)
            .run_shapes(&mut core, &kernel, &shapes)
            .map_err(|e| format!("timing failed: {e}\n{program}\n{:?}", case.program))
    };
    let device = time(Scheduling::default(), Mode::TimingOnly)?;
    let computed = time(Scheduling::default(), Mode::Compute)?;
    let order = time(Scheduling::ProgramOrder { buffers: 1 }, Mode::TimingOnly)?;
    let fail = |why: String| Err(format!("{why}\n{program}\n{:?}", case.program));
    if device.records() != computed.records() || device.total_ps() != computed.total_ps() {
        return fail("timing only and computing give different schedules".into());
    }
    if device.instructions() + device.not_run() != order.instructions() || order.not_run() != 0 {
        return fail(format!(
            "executed instructions: device {} + {} not run, program order {}",
            device.instructions(),
            device.not_run(),
            order.instructions()
        ));
    }
    let p = device.profile();
    if p.peak_sbuf_bytes > p.sbuf_capacity || p.peak_psum_banks > p.psum_banks {
        return fail(format!(
            "peaks beyond capacity: SBUF {} of {}, PSUM {} of {}",
            p.peak_sbuf_bytes, p.sbuf_capacity, p.peak_psum_banks, p.psum_banks
        ));
    }
    for s in [&device, &order] {
        if let Some(why) = record_out_of_order(s) {
            return fail(why);
        }
    }
    Ok(())
}

/// A record of `s` that ends before it starts, is seen before it ends, or is seen after the
/// latency, described.
pub fn record_out_of_order(s: &nki_runtime::timing::Schedule) -> Option<String> {
    let r = s
        .records()
        .iter()
        .find(|r| r.end < r.start || r.done < r.end || r.done > s.total_ps())?;
    Some(format!(
        "a record out of order: {r:?} (latency {} ps)",
        s.total_ps()
    ))
}

/// The case's program with its every instruction in one `no_reorder!` block
/// (`nki_lang::schedule_control`): timed under the device's schedule, each executed
/// instruction starts no earlier than the previous one completes, and the timing-only and
/// summary runs agree with the traced one (the fast-forward is off for such a program).
pub fn check_ordered_timing(case: &Case) -> Result<(), String> {
    use nki_runtime::timing::{Detail, Kind, Mode, Scheduling, Timing};
    let compiled = build(case)?;
    let mut buf = compiled.source().clone();
    let n = u32::try_from(buf.instrs.len()).map_err(|e| e.to_string())?;
    buf.control.ordered(0, n);
    let ordered = buf
        .finish()
        .map_err(|d| format!("a no_reorder block over a valid program refused: {d:?}"))?;
    let parts = ordered.parts();
    let program = parts.program();
    let kernel = Kernel::new(program);
    let shapes: Vec<Vec<usize>> = case.program.inputs.iter().map(dims).collect();
    let shapes: Vec<&[usize]> = shapes.iter().map(Vec::as_slice).collect();
    let mut core = NeuronCore::new(program.target()).with_host_threads(1);
    let mut time = |detail| {
        Timing::new()
            .scheduling(Scheduling::default())
            .mode(Mode::TimingOnly)
            .detail(detail)
            .run_shapes(&mut core, &kernel, &shapes)
            .map_err(|e| format!("timing failed: {e}\n{program}\n{:?}", case.program))
    };
    let traced = time(Detail::Trace)?;
    let summary = time(Detail::Summary)?;
    let fail = |why: String| Err(format!("{why}\n{program}\n{:?}", case.program));
    if summary.total_ps() != traced.total_ps() {
        return fail(format!(
            "summary {} ps, traced {} ps",
            summary.total_ps(),
            traced.total_ps()
        ));
    }
    // Each execution: the start of its first waiting record (an instruction, a
    // LoadStationary, a DMA trigger) and the completion of its last.
    let mut execs: Vec<(u64, u64)> = Vec::new();
    for r in traced.records() {
        match r.kind {
            Kind::TableLoad => {}
            Kind::Instruction | Kind::LoadStationary | Kind::DmaTrigger => {
                execs.push((r.start, r.done));
            }
            Kind::MultiplyMoving | Kind::DmaTransfer => {
                if let Some(e) = execs.last_mut() {
                    e.1 = e.1.max(r.done);
                }
            }
        }
    }
    for w in execs.windows(2) {
        if w[1].0 < w[0].1 {
            return fail(format!(
                "in a no_reorder block an instruction starts at {} ps, before the previous one completes at {} ps",
                w[1].0, w[0].1
            ));
        }
    }
    Ok(())
}
