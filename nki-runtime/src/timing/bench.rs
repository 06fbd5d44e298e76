//! A benchmark shaped like `nki.benchmark`: warm-up runs, timed runs, latency percentiles.

use core::fmt;
use std::time::Instant;

use super::{Detail, Schedule, Timing, TimingError};
use crate::bind::{HbmIn, HbmOut};
use crate::core::NeuronCore;
use crate::launch::Kernel;

/// Latency samples in µs, with `nki.benchmark`'s percentile accessor.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Latency {
    samples: Vec<f64>,
}

impl Latency {
    /// The percentiles `nki.benchmark` reports.
    pub const PERCENTILES: [u32; 8] = [0, 1, 10, 25, 50, 90, 99, 100];

    /// Samples (µs), in the order they were taken.
    pub fn from_samples(samples: Vec<f64>) -> Latency {
        Latency { samples }
    }

    /// The samples (µs), in the order they were taken.
    pub fn samples(&self) -> &[f64] {
        &self.samples
    }

    /// Percentile `p` (0 to 100; nearest rank) in µs, as `nki.benchmark`'s
    /// `get_latency_percentile`; `None` without samples or for `p` above 100.
    pub fn get_latency_percentile(&self, p: u32) -> Option<f64> {
        if self.samples.is_empty() || p > 100 {
            return None;
        }
        let mut s = self.samples.clone();
        s.sort_by(f64::total_cmp);
        let rank = (p as usize * s.len()).div_ceil(100);
        Some(s[rank.saturating_sub(1).min(s.len() - 1)])
    }

    /// Every percentile of [`Latency::PERCENTILES`].
    pub fn percentiles(&self) -> Vec<(u32, f64)> {
        Latency::PERCENTILES
            .iter()
            .filter_map(|&p| self.get_latency_percentile(p).map(|v| (p, v)))
            .collect()
    }
}

impl fmt::Display for Latency {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, (p, v)) in self.percentiles().into_iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            write!(f, "p{p} {v:.3}")?;
        }
        f.write_str(" µs")
    }
}

/// What a benchmark measured.
#[derive(Clone, Debug)]
pub struct BenchmarkResult {
    /// Modeled device latency of each timed iteration (`nki.benchmark`'s `nc_latency`). The
    /// model is deterministic: every sample, hence every percentile, is the same.
    pub nc_latency: Latency,
    /// Measured host launch overhead of each timed iteration: checking and binding the
    /// launch's tensors ([`Kernel::bind`]), what a launch costs the host before the device
    /// runs.
    pub host_launch: Latency,
    /// Measured host time of each timed iteration's modeled run (the timing model itself,
    /// plus the arithmetic for [`super::Mode::Compute`]).
    pub host_model: Latency,
    /// The last iteration's schedule.
    pub schedule: Schedule,
}

impl fmt::Display for BenchmarkResult {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "{}: modeled nc_latency {} (the model is deterministic: every percentile is the same)",
            self.schedule.kernel(),
            self.nc_latency
        )?;
        writeln!(f, "  host launch overhead (measured): {}", self.host_launch)?;
        write!(
            f,
            "  host time of the modeled run (measured): {}",
            self.host_model
        )
    }
}

/// `nki.benchmark(warmup, iters)` for the model: `warmup` untimed runs, then `iters` timed
/// ones. Defaults: 5 and 10, as NKI's; timing only, [`Detail::Summary`].
#[derive(Clone, Debug)]
pub struct Benchmark {
    warmup: usize,
    iters: usize,
    timing: Timing,
}

impl Default for Benchmark {
    fn default() -> Self {
        Benchmark {
            warmup: 5,
            iters: 10,
            timing: Timing::new().detail(Detail::Summary),
        }
    }
}

impl Benchmark {
    /// Most warm-up runs, and most timed runs, a benchmark makes (each timed run keeps three
    /// samples): larger counts are refused with [`TimingError::TooManyRuns`].
    pub const MAX_RUNS: usize = 1 << 24;

    /// 5 warm-up runs, 10 timed runs, timing only.
    pub fn new() -> Benchmark {
        Benchmark::default()
    }

    /// Untimed runs before the timed ones (at most [`Benchmark::MAX_RUNS`]).
    pub fn warmup(mut self, n: usize) -> Benchmark {
        self.warmup = n;
        self
    }

    /// Timed runs (at least 1, at most [`Benchmark::MAX_RUNS`]).
    pub fn iters(mut self, n: usize) -> Benchmark {
        self.iters = n;
        self
    }

    /// Times with `timing` (parameters, detail, mode, grid).
    pub fn timing(mut self, timing: Timing) -> Benchmark {
        self.timing = timing;
        self
    }

    /// Benchmarks `kernel` on the given tensors.
    pub fn run(
        &self,
        core: &mut NeuronCore,
        kernel: &Kernel<'_>,
        inputs: &[HbmIn<'_>],
        outputs: &mut [HbmOut<'_>],
    ) -> Result<BenchmarkResult, TimingError> {
        if self.iters == 0 {
            return Err(TimingError::NoIterations);
        }
        for (what, count) in [("warm-up", self.warmup), ("timed", self.iters)] {
            if count > Benchmark::MAX_RUNS {
                return Err(TimingError::TooManyRuns {
                    what,
                    count,
                    max: Benchmark::MAX_RUNS,
                });
            }
        }
        let grid = self.timing.launch_grid();
        for _ in 0..self.warmup {
            let bound = kernel.bind_on(grid, inputs, outputs)?;
            self.timing.run_bound(core, bound)?;
        }
        // The samples grow with the runs made (nothing is reserved for a count up front).
        let (mut nc, mut launch, mut model) = (Vec::new(), Vec::new(), Vec::new());
        let mut last = None;
        for _ in 0..self.iters {
            let t0 = Instant::now();
            let bound = kernel.bind_on(grid, inputs, outputs)?;
            let t1 = Instant::now();
            let s = self.timing.run_bound(core, bound)?;
            let t2 = Instant::now();
            nc.push(s.latency_us());
            launch.push((t1 - t0).as_secs_f64() * 1e6);
            model.push((t2 - t1).as_secs_f64() * 1e6);
            last = Some(s);
        }
        Ok(BenchmarkResult {
            nc_latency: Latency::from_samples(nc),
            host_launch: Latency::from_samples(launch),
            host_model: Latency::from_samples(model),
            schedule: last.ok_or(TimingError::NoIterations)?,
        })
    }

    /// Benchmarks `kernel` on placeholder tensors of the given input shapes (timing only: the
    /// placeholders hold zeros).
    pub fn run_shapes(
        &self,
        core: &mut NeuronCore,
        kernel: &Kernel<'_>,
        input_shapes: &[&[usize]],
    ) -> Result<BenchmarkResult, TimingError> {
        self.timing
            .on_placeholders(kernel, input_shapes, |inputs, outputs| {
                self.run(core, kernel, inputs, outputs)
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_by_nearest_rank() {
        let l = Latency::from_samples((1..=100).map(f64::from).rev().collect());
        assert_eq!(l.get_latency_percentile(0), Some(1.0));
        assert_eq!(l.get_latency_percentile(1), Some(1.0));
        assert_eq!(l.get_latency_percentile(50), Some(50.0));
        assert_eq!(l.get_latency_percentile(99), Some(99.0));
        assert_eq!(l.get_latency_percentile(100), Some(100.0));
        assert_eq!(l.get_latency_percentile(101), None);
        assert_eq!(Latency::default().get_latency_percentile(50), None);
        assert_eq!(l.percentiles().len(), 8);
    }
}
