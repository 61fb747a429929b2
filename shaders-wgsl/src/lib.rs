//! WGSL kernels for the wgpu backend (one file per kernel family); filled in by the wgpu backend work.
