//! Host CPU code paths.
