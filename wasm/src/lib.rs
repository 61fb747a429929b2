//! weft-wasm: the wasm-bindgen API over weft-core (WebGPU in the browser); filled in by the browser work.
