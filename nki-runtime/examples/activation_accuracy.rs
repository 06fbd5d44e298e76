//! Measures the accuracy of every activation function over its whole valid range (every f32 in
//! it) and of `power` on sampled operands, against f64 references, and prints a Markdown table.
//!
//! ```text
//! cargo run --release -p nki-runtime --example activation_accuracy [-- --step K] [--only exp,tanh]
//! ```
//!
//! `--step K` tests every K-th bit pattern only (for quick checks; the table in
//! `docs/numerics.md` is the full sweep, `K = 1`). Results are computed with the fastest path
//! this CPU has ([`Isa::detect`]), which the unit tests prove bit-identical to the definition.

use std::time::Instant;

use nki_lang::{ActFn, ValidRange};
use nki_runtime::Isa;
use nki_runtime::cpu::act;

#[path = "../src/cpu/act/reference.rs"]
mod act_ref;
use act_ref::*;

/// Error statistics of one function.
#[derive(Clone, Debug, Default)]
struct Stats {
    /// Inputs tested.
    n: u64,
    /// Largest ulp error outside the window around an interior zero, and its input.
    max_ulp: f64,
    at: f32,
    /// Results that are not the correctly rounded value.
    not_cr: u64,
    /// Within the window around an interior zero: largest ulp error and its input, and largest
    /// absolute error.
    zero_ulp: f64,
    zero_at: f32,
    zero_abs: f64,
}

impl Stats {
    fn merge(&mut self, o: &Stats) {
        self.n += o.n;
        self.not_cr += o.not_cr;
        if o.max_ulp > self.max_ulp {
            self.max_ulp = o.max_ulp;
            self.at = o.at;
        }
        if o.zero_ulp > self.zero_ulp {
            self.zero_ulp = o.zero_ulp;
            self.zero_at = o.zero_at;
        }
        self.zero_abs = self.zero_abs.max(o.zero_abs);
    }

    fn record(&mut self, x: f32, got: f32, r: f64, zero: Option<f64>) {
        self.n += 1;
        if !correctly_rounded(got, r) {
            self.not_cr += 1;
        }
        let e = ulp_error(got, r);
        if let Some(z) = zero
            && (x as f64 - z).abs() < ZERO_WINDOW
        {
            if e > self.zero_ulp {
                self.zero_ulp = e;
                self.zero_at = x;
            }
            self.zero_abs = self.zero_abs.max((got as f64 - r).abs());
            return;
        }
        if e > self.max_ulp || (e.is_nan() && !self.max_ulp.is_nan()) {
            self.max_ulp = e;
            self.at = x;
        }
    }
}

/// The bit patterns (as `u64` to cover `0..=u32::MAX`) of the f32 in `range`, as inclusive
/// intervals.
fn intervals(range: ValidRange) -> Vec<(u64, u64)> {
    // The bit patterns of the non-negative f32 in [lo, hi] (lo ≥ 0), if any.
    let magnitudes = |lo: f64, hi: f64| -> Option<(u64, u64)> {
        let mut a = (lo as f32).to_bits() as u64;
        if (f32::from_bits(a as u32) as f64) < lo {
            a += 1;
        }
        let mut b = (hi as f32).to_bits() as u64;
        if (f32::from_bits(b as u32) as f64) > hi {
            b -= 1;
        }
        (a <= b).then_some((a, b))
    };
    let sign = |(a, b): (u64, u64)| (a | 0x8000_0000, b | 0x8000_0000);
    let max = f32::MAX as f64;
    let (pos, neg) = match range {
        ValidRange::All => (magnitudes(0.0, max), magnitudes(0.0, max)),
        ValidRange::Magnitude(lo, hi) => (magnitudes(lo, hi), magnitudes(lo, hi)),
        ValidRange::Closed(lo, hi) => (
            (hi >= 0.0).then(|| magnitudes(lo.max(0.0), hi)).flatten(),
            (lo <= 0.0)
                .then(|| magnitudes((-hi).max(0.0), -lo))
                .flatten(),
        ),
    };
    pos.into_iter().chain(neg.map(sign)).collect()
}

fn sweep(isa: Isa, f: ActFn, step: u64) -> Stats {
    let ivs = intervals(f.valid_range());
    let zero = interior_zero(f);
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get()) as u64;
    const CHUNK: u64 = 1 << 16;
    let mut total = Stats::default();
    for &(a, b) in &ivs {
        let count = (b - a) / step + 1;
        let chunks = count.div_ceil(CHUNK);
        let parts: Vec<Stats> = std::thread::scope(|s| {
            let hs: Vec<_> = (0..threads)
                .map(|t| {
                    s.spawn(move || {
                        let mut st = Stats::default();
                        let mut src = Vec::with_capacity(CHUNK as usize);
                        let mut dst = vec![0f32; CHUNK as usize];
                        let mut c = t;
                        while c < chunks {
                            src.clear();
                            let first = c * CHUNK;
                            let last = ((c + 1) * CHUNK).min(count);
                            for i in first..last {
                                let x = f32::from_bits((a + i * step) as u32);
                                if in_range(f.valid_range(), x) {
                                    src.push(x);
                                }
                            }
                            let d = &mut dst[..src.len()];
                            act::apply(isa, f, &src, d, 1.0, -0.0);
                            for (&x, &g) in src.iter().zip(d.iter()) {
                                st.record(x, g, reference(f, x), zero);
                            }
                            c += threads;
                        }
                        st
                    })
                })
                .collect();
            hs.into_iter().map(|h| h.join().unwrap()).collect()
        });
        for p in &parts {
            total.merge(p);
        }
    }
    total
}

/// `power` on sampled operands: random bit patterns for both, and structured sets (bases near 1
/// with large exponents, negative bases with integer exponents, results near over/underflow).
fn sweep_pow(isa: Isa, samples: u64) -> (Stats, f32) {
    let mut rng = 0x2545_f491_4f6c_dd1du64;
    let mut next = move || {
        rng ^= rng >> 12;
        rng ^= rng << 25;
        rng ^= rng >> 27;
        (rng.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 32) as u32
    };
    let mut st = Stats::default();
    let mut worst_y = 0f32;
    let n = 1 << 16;
    let (mut a, mut b, mut d) = (vec![0f32; n], vec![0f32; n], vec![0f32; n]);
    let rounds = samples.div_ceil(n as u64);
    for round in 0..rounds {
        for i in 0..n {
            let (x, y) = match round % 5 {
                // Any finite operands.
                0 => (
                    f32::from_bits(next() & 0xff7f_ffff | (next() & 0x8000_0000)),
                    f32::from_bits(next()),
                ),
                // Positive bases of every magnitude, exponents in [-8, 8].
                1 => (
                    f32::from_bits(next() % 0x7f80_0000),
                    (next() as f32 / u32::MAX as f32) * 16.0 - 8.0,
                ),
                // Bases near 1, large exponents.
                2 => (
                    f32::from_bits(0x3f00_0000 + next() % 0x0100_0000),
                    (next() as f32 / u32::MAX as f32) * 4000.0 - 2000.0,
                ),
                // Negative bases, integer exponents.
                3 => (
                    -f32::from_bits(0x3c00_0000 + next() % 0x0800_0000),
                    (next() % 81) as f32 - 40.0,
                ),
                // Results near the overflow / underflow thresholds.
                _ => {
                    let x = f32::from_bits(0x3f80_0001 + next() % 0x0100_0000);
                    let t = [127.5f32, 128.0, -126.0, -149.5, -150.0][(next() % 5) as usize];
                    (
                        x,
                        t / (x as f64).log2() as f32 * (1.0 + (next() % 64) as f32 * 1e-7),
                    )
                }
            };
            a[i] = x;
            b[i] = y;
        }
        act::apply_pow(isa, &a, &b, &mut d);
        for i in 0..n {
            let r = reference_pow(a[i], b[i]);
            if ulp_error(d[i], r) > st.max_ulp {
                worst_y = b[i];
            }
            st.record(a[i], d[i], r, None);
        }
    }
    (st, worst_y)
}

fn range_text(r: ValidRange) -> String {
    match r {
        ValidRange::All => "all finite".into(),
        ValidRange::Closed(lo, hi) => format!("[{lo:.6e}, {hi:.6e}]"),
        ValidRange::Magnitude(lo, hi) => format!("±[{lo:.6e}, {hi:.6e}]"),
    }
}

/// What the command line takes.
const USAGE: &str = "Usage: activation_accuracy [--step K] [--only F,G,...] [--pow-samples N]

  --step K           test every K-th bit pattern only (default 1: all)
  --only F,G,...     these functions only (e.g. exp,gelu)
  --pow-samples N    operand pairs of `power` (default 104857600)
  -h, --help         print this";

/// A flag's number.
fn number(arg: Option<String>, why: &'static str) -> Result<u64, &'static str> {
    arg.and_then(|s| s.parse().ok()).ok_or(why)
}

/// `--only`'s list.
fn list(arg: Option<String>) -> Result<Vec<String>, &'static str> {
    let list = arg.ok_or("--only takes a list: exp,gelu,...")?;
    Ok(list.split(',').map(String::from).collect())
}

fn main() {
    let mut step = 1u64;
    let mut only: Option<Vec<String>> = None;
    let mut pow_samples = 100u64 << 20;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let parsed = match a.as_str() {
            "--step" => number(args.next(), "--step takes a number").map(|k| step = k),
            "--only" => list(args.next()).map(|l| only = Some(l)),
            "--pow-samples" => {
                number(args.next(), "--pow-samples takes a number").map(|n| pow_samples = n)
            }
            "-h" | "--help" => {
                println!("{USAGE}");
                return;
            }
            _ => Err("unknown argument"),
        };
        if let Err(why) = parsed {
            eprintln!("error: {why} (at `{a}`)\n\n{USAGE}");
            std::process::exit(2);
        }
    }
    let isa = Isa::detect();
    println!("path: {isa:?}, every {step}. bit pattern in the valid range\n");
    println!(
        "| function | valid range | inputs | max ulp error | at x | not correctly rounded | near the interior zero |"
    );
    println!("|---|---|---:|---:|---:|---:|---|");
    let want = |name: &str| only.as_ref().is_none_or(|o| o.iter().any(|n| n == name));
    for &f in ActFn::ALL {
        if !want(f.name()) {
            continue;
        }
        let t = Instant::now();
        let st = sweep(isa, f, step);
        let zero = match interior_zero(f) {
            Some(z) => format!(
                "within {ZERO_WINDOW} of {z:.6}: max {:.3e} ulp at {:e}, abs. error ≤ {:.2e}",
                st.zero_ulp, st.zero_at, st.zero_abs
            ),
            None => String::new(),
        };
        println!(
            "| {} | {} | {} | {:.3} | {:e} | {} ({:.2e}) | {} |",
            f.name(),
            range_text(f.valid_range()),
            st.n,
            st.max_ulp,
            st.at,
            st.not_cr,
            st.not_cr as f64 / st.n.max(1) as f64,
            zero
        );
        eprintln!("{}: {:.1} s", f.name(), t.elapsed().as_secs_f64());
    }
    if want("power") {
        let (st, y) = sweep_pow(isa, pow_samples / step.max(1));
        println!(
            "| power | sampled pairs | {} | {:.3} | x = {:e}, y = {:e} | {} ({:.2e}) | |",
            st.n,
            st.max_ulp,
            st.at,
            y,
            st.not_cr,
            st.not_cr as f64 / st.n.max(1) as f64,
        );
    }
}
