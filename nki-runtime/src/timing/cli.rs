//! `--profile` on a command line: the request it makes, and one call for an example's `main`
//! that times a kernel when the request is there. Parsing for programs, apart from the timing
//! model's API.

use std::path::PathBuf;

use super::{Detail, Profile, Schedule, Timing, TimingError};
use crate::bind::HbmIn;
use crate::core::NeuronCore;
use crate::grid::LaunchGrid;
use crate::launch::Kernel;

/// What `--profile` asks for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProfileRequest {
    /// Where to write the Chrome trace and the SVG timeline (`--profile=DIR`), if anywhere.
    pub dir: Option<PathBuf>,
}

impl ProfileRequest {
    /// Finds `--profile` or `--profile=DIR` among `args`: `Ok(None)` when absent, an error
    /// for an empty directory.
    pub fn from_args<I, S>(args: I) -> Result<Option<ProfileRequest>, TimingError>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let mut found = None;
        for a in args {
            let a = a.as_ref();
            if a == "--profile" {
                found = Some(ProfileRequest { dir: None });
            } else if let Some(dir) = a.strip_prefix("--profile=") {
                if dir.is_empty() {
                    return Err(TimingError::Args {
                        arg: a.to_string(),
                        why: "give a directory after `=`, or no `=`",
                    });
                }
                found = Some(ProfileRequest {
                    dir: Some(PathBuf::from(dir)),
                });
            }
        }
        Ok(found)
    }
}

/// Whether `arg` is one of the arguments [`profile_from_args`] reads (for an example's own
/// argument parser to skip).
pub fn is_profile_arg(arg: &str) -> bool {
    arg == "--profile" || arg.starts_with("--profile=")
}

impl ProfileRequest {
    /// Times one launch of `kernel` on `inputs` over `grid` (timing only, placeholder
    /// outputs), prints its profile, writes the trace and the timeline if a directory was
    /// asked for, and returns the profile.
    pub fn run_inputs(
        &self,
        core: &mut NeuronCore,
        kernel: &Kernel<'_>,
        grid: LaunchGrid,
        inputs: &[HbmIn<'_>],
    ) -> Result<Profile, TimingError> {
        let schedule = self.timing().grid(grid).run_inputs(core, kernel, inputs)?;
        self.report(&schedule, kernel)
    }

    /// [`ProfileRequest::run_inputs`] on placeholder inputs of the given shapes.
    pub fn run_shapes(
        &self,
        core: &mut NeuronCore,
        kernel: &Kernel<'_>,
        input_shapes: &[&[usize]],
    ) -> Result<Profile, TimingError> {
        let schedule = self.timing().run_shapes(core, kernel, input_shapes)?;
        self.report(&schedule, kernel)
    }

    /// The timing this request needs: operands in the trace only when files are written.
    fn timing(&self) -> Timing {
        Timing::new().detail(if self.dir.is_some() {
            Detail::Trace
        } else {
            Detail::Profile
        })
    }

    /// Prints the profile and writes the files.
    fn report(&self, schedule: &Schedule, kernel: &Kernel<'_>) -> Result<Profile, TimingError> {
        let profile = schedule.profile();
        println!("{profile}");
        if let Some(dir) = &self.dir {
            let (trace, svg) = schedule.write_files(dir, kernel.name())?;
            println!("trace: {}\ntimeline: {}", trace.display(), svg.display());
        }
        Ok(profile)
    }
}

/// If the command line has `--profile` (or `--profile=DIR`), times one launch of `kernel` on
/// `inputs` (timing only, placeholder outputs), prints its profile, and with a directory writes
/// `<kernel>.trace.json` (Chrome trace-event JSON, for Perfetto or chrome://tracing) and
/// `<kernel>.svg` there. Returns the profile, or `None` without `--profile`. One line in an
/// example's `main`:
///
/// ```ignore
/// nki::timing::profile_from_args(&mut core, &my_kernel::KERNEL, &[a.arg(), b.arg()])?;
/// ```
pub fn profile_from_args(
    core: &mut NeuronCore,
    kernel: &Kernel<'_>,
    inputs: &[HbmIn<'_>],
) -> Result<Option<Profile>, TimingError> {
    profile_grid_from_args(core, kernel, LaunchGrid::SINGLE, inputs)
}

/// [`profile_from_args`] for a launch over an SPMD grid.
pub fn profile_grid_from_args(
    core: &mut NeuronCore,
    kernel: &Kernel<'_>,
    grid: LaunchGrid,
    inputs: &[HbmIn<'_>],
) -> Result<Option<Profile>, TimingError> {
    ProfileRequest::from_args(std::env::args().skip(1))?
        .map(|req| req.run_inputs(core, kernel, grid, inputs))
        .transpose()
}

/// [`profile_from_args`] on placeholder inputs of the given shapes (for an example whose
/// inputs are not device tensors).
pub fn profile_shapes_from_args(
    core: &mut NeuronCore,
    kernel: &Kernel<'_>,
    input_shapes: &[&[usize]],
) -> Result<Option<Profile>, TimingError> {
    ProfileRequest::from_args(std::env::args().skip(1))?
        .map(|req| req.run_shapes(core, kernel, input_shapes))
        .transpose()
}
