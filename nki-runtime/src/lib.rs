//! Executes NKI programs on a modeled NeuronCore.
pub mod cpu;
