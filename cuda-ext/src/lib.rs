//! weft-cuda: the CUDA backend (cudarc, loaded at run time); filled in by the CUDA work.
