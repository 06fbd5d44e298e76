//! The timing model against the published Trainium measurements it is calibrated on
//! (`docs/sources/calibration.md`): each case is NKI's own kernel at the published shape, timed
//! by the model (timing only, [`Scheduling::Device`] and, for comparison, the program as
//! allocated and ordered), with the published latency and engine utilisations beside it.
//!
//! ```sh
//! cargo run --release --example calibration              # the table, the error summary
//! cargo run --release --example calibration -- --markdown  # the table of docs/timing.md
//! ```
//!
//! `r` = modeled / published, where modeled is one NEFF execution: the kernel's latency plus
//! the execution's fixed start-up and tear-down (`Params::execution_overhead_ns`), as the
//! published figures (the profiler's device execution time, `nki.benchmark`) measure. The
//! summary gives the geometric mean of `r`, the median
//! `|ln r|`, the share of cases within ±15 % and ±30 %, and, for the pairs of kernel versions
//! at one shape, whether the model orders them as the hardware does.

#![allow(dead_code, clippy::duplicate_mod)]

#[path = "kernel_optimization_v2.rs"]
mod kernel_optimization_v2;
#[path = "mamba_tutorial_shapes.rs"]
mod mamba_tutorial_shapes;
#[path = "matmul_fully_optimized.rs"]
mod matmul_fully_optimized;
#[path = "matmul_tiled.rs"]
mod matmul_tiled;

use clap::Parser;
use nki::prelude::*;
use nki::timing::{Detail, Params, Profile, Scheduling, Timing, TimingError};

/// An engine's published utilisation: the profile row it is compared with, the published
/// share (0–1).
#[derive(Copy, Clone, Debug)]
pub struct Utilisation {
    /// `HFU`, `DMA` (time any transfer moves data), or a profile row (`TensorMatrix`,
    /// `Vector`).
    pub row: &'static str,
    /// The published share.
    pub published: f64,
}

/// One calibration case.
pub struct Case {
    /// Its id in `docs/sources/calibration.md`.
    pub id: &'static str,
    /// NKI's kernel.
    pub kernel: &'static Kernel<'static>,
    /// The NeuronCore generation it ran on.
    pub target: Target,
    /// Input shapes.
    pub shapes: Vec<Vec<usize>>,
    /// Published latency, µs.
    pub published_us: f64,
    /// Published engine utilisations.
    pub utilisation: Vec<Utilisation>,
}

/// The five cases of `docs/sources/calibration.md`.
pub fn cases() -> Vec<Case> {
    let mamba = |channels: usize| mamba_tutorial_shapes::input_shapes(channels, 512).to_vec();
    vec![
        Case {
            id: "mm-tiled-trn1",
            kernel: &matmul_tiled::matmul_tiled::KERNEL,
            target: Target::Trn1,
            shapes: vec![vec![8192, 4096], vec![8192, 8192]],
            published_us: 51_800.0,
            utilisation: vec![Utilisation {
                row: "HFU",
                published: 0.1098,
            }],
        },
        Case {
            id: "mm-fully-optimized-trn1",
            kernel: &matmul_fully_optimized::nki_matmul_fully_optimized_::KERNEL,
            target: Target::Trn1,
            shapes: vec![vec![8192, 4096], vec![8192, 8192]],
            published_us: 6_970.0,
            utilisation: vec![Utilisation {
                row: "HFU",
                published: 0.8524,
            }],
        },
        Case {
            id: "kopt-v2-tiled-trn2",
            kernel: &kernel_optimization_v2::matrix_multiply_kernel::KERNEL,
            target: Target::Trn2,
            shapes: vec![vec![8192, 4096], vec![8192, 8192]],
            published_us: 39_890.0,
            utilisation: vec![
                Utilisation {
                    row: "DMA",
                    published: 0.9993,
                },
                Utilisation {
                    row: "TensorMatrix",
                    published: 0.8728,
                },
            ],
        },
        Case {
            id: "mamba-v1-small",
            kernel: &mamba_tutorial_shapes::mamba_v1_512x256::KERNEL,
            target: Target::Trn1,
            shapes: mamba(256),
            published_us: 172.93,
            utilisation: vec![Utilisation {
                row: "Vector",
                published: 0.9871,
            }],
        },
        Case {
            id: "mamba-v2",
            kernel: &mamba_tutorial_shapes::mamba_v2_512x4096::KERNEL,
            target: Target::Trn1,
            shapes: mamba(4096),
            published_us: 1_610.0,
            utilisation: vec![Utilisation {
                row: "Vector",
                published: 0.9963,
            }],
        },
    ]
}

/// The pairs of cases that are versions of one kernel at one shape, slower first, with the
/// published speed-up.
pub const PAIRS: [(&str, &str); 1] = [("mm-tiled-trn1", "mm-fully-optimized-trn1")];

/// A published measurement the model was not fitted to: the fused Mamba tutorial's other
/// versions and sequence lengths (aws-neuron-sdk `nki/guides/tutorials/fused_mamba.rst`,
/// Trn1, fp32, batch 1, 4096 channels, 16 states).
pub struct Check {
    /// What it is.
    pub id: &'static str,
    /// NKI's kernel at the shape.
    pub kernel: &'static Kernel<'static>,
    /// The sequence length.
    pub seq_len: usize,
    /// Published latency, µs.
    pub published_us: f64,
}

/// The held-out measurements, in pairs of versions at one shape (slower first).
pub fn held_out() -> Vec<(Check, Check)> {
    use mamba_tutorial_shapes as m;
    let check = |id, kernel, seq_len, published_us| Check {
        id,
        kernel,
        seq_len,
        published_us,
    };
    vec![
        (
            check(
                "mamba_v1 L=512",
                &m::mamba_v1_512x4096::KERNEL,
                512,
                2_340.0,
            ),
            check(
                "mamba_v2 L=512",
                &m::mamba_v2_512x4096::KERNEL,
                512,
                1_610.0,
            ),
        ),
        (
            check("mamba_v2 L=1024", &m::mamba_v2_1024::KERNEL, 1024, 4_400.0),
            check("mamba_v3 L=1024", &m::mamba_v3_1024::KERNEL, 1024, 3_300.0),
        ),
        (
            check("mamba_v2 L=2048", &m::mamba_v2_2048::KERNEL, 2048, 8_900.0),
            check("mamba_v3 L=2048", &m::mamba_v3_2048::KERNEL, 2048, 6_600.0),
        ),
    ]
}

/// Times a held-out check (Trn1, timing only): its modeled NEFF execution, µs.
pub fn time_check(c: &Check) -> Result<f64, TimingError> {
    let shapes = mamba_tutorial_shapes::input_shapes(4096, c.seq_len);
    let shapes = shapes.each_ref().map(Vec::as_slice);
    let mut core = NeuronCore::new(Target::Trn1);
    Ok(Timing::new()
        .detail(Detail::Summary)
        .run_shapes(&mut core, c.kernel, &shapes)?
        .execution_us())
}

/// A case as the model times it.
pub struct Outcome {
    /// The case.
    pub case: Case,
    /// The profile under [`Scheduling::Device`].
    pub profile: Profile,
    /// The DMA active share (time any transfer moves data over the latency).
    pub dma_active: f64,
    /// The modeled NEFF execution of the program as allocated and ordered, µs.
    pub program_order_us: f64,
}

impl Outcome {
    /// Modeled / published: the modeled NEFF execution (the kernel's latency with the
    /// execution's start-up and tear-down), as the published figures measure.
    pub fn ratio(&self) -> f64 {
        self.profile.execution_us / self.case.published_us
    }

    /// The modeled share for a published utilisation's row.
    pub fn modeled(&self, u: &Utilisation) -> f64 {
        match u.row {
            "HFU" => self.profile.hfu,
            "DMA" => self.dma_active,
            row => self.profile.engine(row).map_or(0.0, |e| e.utilisation),
        }
    }
}

/// Times every case.
pub fn run() -> Result<Vec<Outcome>, TimingError> {
    cases()
        .into_iter()
        .map(|case| {
            let mut core = NeuronCore::new(case.target);
            let shapes: Vec<&[usize]> = case.shapes.iter().map(Vec::as_slice).collect();
            let timing = Timing::new().params(Params::for_target(case.target));
            let schedule = timing.clone().detail(Detail::Profile).run_shapes(
                &mut core,
                case.kernel,
                &shapes,
            )?;
            let program_order = timing
                .detail(Detail::Summary)
                .scheduling(Scheduling::ProgramOrder { buffers: 1 })
                .run_shapes(&mut core, case.kernel, &shapes)?;
            let dma_active =
                schedule.dma_active_ps().unwrap_or(0) as f64 / schedule.total_ps().max(1) as f64;
            Ok(Outcome {
                profile: schedule.profile(),
                dma_active,
                program_order_us: program_order.execution_us(),
                case,
            })
        })
        .collect()
}

/// The error summary: geometric mean of r, median |ln r|, shares within ±15 % and ±30 %.
pub fn summary(outcomes: &[Outcome]) -> (f64, f64, f64, f64) {
    let logs: Vec<f64> = outcomes.iter().map(|o| o.ratio().ln()).collect();
    let n = logs.len().max(1) as f64;
    let geomean = (logs.iter().sum::<f64>() / n).exp();
    let mut abs: Vec<f64> = logs.iter().map(|l| l.abs()).collect();
    abs.sort_by(f64::total_cmp);
    let median = match abs.len() {
        0 => 0.0,
        k if k % 2 == 1 => abs[k / 2],
        k => (abs[k / 2 - 1] + abs[k / 2]) / 2.0,
    };
    let within = |band: f64| {
        outcomes
            .iter()
            .filter(|o| (o.ratio() - 1.0).abs() <= band)
            .count() as f64
            / n
    };
    (geomean, median, within(0.15), within(0.30))
}

/// The fidelity table of `docs/timing.md`, as Markdown.
pub fn markdown(outcomes: &[Outcome]) -> String {
    let mut s = String::from(
        "| case | target | published | modeled | r | program order | engines: published / modeled |\n\
         |---|---|---|---|---|---|---|\n",
    );
    for o in outcomes {
        let engines: Vec<String> = o
            .case
            .utilisation
            .iter()
            .map(|u| {
                format!(
                    "{} {:.1} % / {:.1} %",
                    u.row,
                    100.0 * u.published,
                    100.0 * o.modeled(u)
                )
            })
            .collect();
        s.push_str(&format!(
            "| `{}` | {} | {} | {} | {:.2} | {} | {} |\n",
            o.case.id,
            o.case.target.name(),
            us(o.case.published_us),
            us(o.profile.execution_us),
            o.ratio(),
            us(o.program_order_us),
            engines.join(", ")
        ));
    }
    s
}

/// The held-out table of `docs/timing.md`, as Markdown: each pair's latencies, ratios and
/// whether the model orders the two versions as the hardware does.
pub fn markdown_held_out() -> Result<String, TimingError> {
    let mut s = String::from(
        "| versions at one shape | published | modeled | r | speed-up published / modeled |\n\
         |---|---|---|---|---|\n",
    );
    let held = held_out();
    let mut right = 0;
    for (slow, fast) in &held {
        let (a, b) = (time_check(slow)?, time_check(fast)?);
        let (published, modeled) = (slow.published_us / fast.published_us, a / b);
        let same = (published > 1.0) == (modeled > 1.0);
        right += usize::from(same);
        s.push_str(&format!(
            "| {} → {} | {} → {} | {} → {} | {:.2}, {:.2} | {published:.2}× / {modeled:.2}× ({}) |\n",
            slow.id,
            fast.id,
            us(slow.published_us),
            us(fast.published_us),
            us(a),
            us(b),
            a / slow.published_us,
            b / fast.published_us,
            if same { "right" } else { "wrong" }
        ));
    }
    s.push_str(&format!("\nDirections right: {right} of {}.\n", held.len()));
    Ok(s)
}

/// A latency in µs or ms, three significant figures.
fn us(t: f64) -> String {
    if t >= 1000.0 {
        format!("{:.3} ms", t / 1000.0)
    } else {
        format!("{t:.1} µs")
    }
}

/// The timing model against the published Trainium measurements it is calibrated on.
#[derive(Parser)]
struct Cli {
    /// Print only the tables of docs/timing.md (Markdown)
    #[arg(long)]
    markdown: bool,
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let cli = Cli::parse();
    let outcomes = run()?;
    if cli.markdown {
        print!("{}", markdown(&outcomes));
        println!();
        print!("{}", markdown_held_out()?);
        return Ok(());
    }
    println!("the timing model against docs/sources/calibration.md (Scheduling::Device):");
    print!("{}", markdown(&outcomes));
    let (geomean, median, w15, w30) = summary(&outcomes);
    println!(
        "\ngeomean r {geomean:.3}, median |ln r| {median:.3}, within ±15 %: {:.0} %, within ±30 %: {:.0} %",
        100.0 * w15,
        100.0 * w30
    );
    println!("\nheld out (published, not used to fit; Trn1):");
    print!("{}", markdown_held_out()?);
    for (slow, fast) in PAIRS {
        let find = |id| outcomes.iter().find(|o| o.case.id == id);
        if let (Some(a), Some(b)) = (find(slow), find(fast)) {
            let published = a.case.published_us / b.case.published_us;
            let modeled = a.profile.execution_us / b.profile.execution_us;
            println!(
                "{slow} → {fast}: published {published:.2}×, modeled {modeled:.2}× faster (direction {})",
                if (published > 1.0) == (modeled > 1.0) {
                    "right"
                } else {
                    "wrong"
                }
            );
        }
    }
    Ok(())
}
