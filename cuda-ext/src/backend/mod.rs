//! The CUDA backend: executes step graphs op by op with the kernels of `cuda-ext/kernels/`, on
//! one stream, reading back only the graph's outputs.
//!
//! Written without a GPU to run it on: it compiles, its launch arithmetic is unit-tested
//! (`launch.rs`), its kernels compile under NVRTC, but no step has been executed yet
//! (docs/cuda.md). Weights are uploaded in their file format (types without a kernel are
//! converted to f32 at load); 1-D weights (norms, biases, RoPE factors) also get an f32 copy.

use std::collections::HashMap;
use std::sync::Arc;

use cudarc::driver::{CudaContext, CudaFunction, CudaSlice, CudaStream, LaunchConfig};
use weft_core::backend::{
    Backend, BackendError, BlockTables, Graph, KvCacheId, KvCacheSpec, KvDtype, Readback, Result,
    StepBatch, Weight, KV_BLOCK, NO_BLOCK,
};
use weft_core::dtype::GgmlType;
use weft_core::gguf::ModelFile;

use crate::devices::CudaDevice;

/// Opens the CUDA backend on `device`.
pub fn open(device: &CudaDevice) -> Result<Box<dyn Backend>> {
    Ok(Box::new(CudaBackend::new(device)?))
}

fn err(what: &str) -> impl Fn(cudarc::driver::DriverError) -> BackendError + '_ {
    move |e| BackendError::Unsupported(format!("CUDA: {what}: {e}"))
}

/// A weight on the device.
struct DevWeight {
    ty: GgmlType,
    data: CudaSlice<u8>,
    /// An f32 copy of a 1-D weight (norm weights, biases, RoPE frequency factors).
    vector: Option<CudaSlice<f32>>,
}

/// One layer's cache: keys and values, `[slots][n_kv_head · head_dim]` (the pool's
/// `n_blocks · KV_BLOCK` slots for a full-attention layer, `n_seq · capacity` ring slots for a
/// sliding-window one).
struct DevLayer {
    k: CudaSlice<u8>,
    v: CudaSlice<u8>,
}

struct DevCache {
    spec: KvCacheSpec,
    layers: Vec<DevLayer>,
    /// The block tables: the host copy steps are checked against, and the device copy the
    /// kernels read (uploaded before a step when a table changed).
    tables: BlockTables,
    tables_dev: CudaSlice<u32>,
    tables_stale: bool,
}

/// The CUDA backend on one device.
pub struct CudaBackend {
    device: CudaDevice,
    _ctx: Arc<CudaContext>,
    stream: Arc<CudaStream>,
    functions: HashMap<&'static str, CudaFunction>,
    weights: Vec<DevWeight>,
    caches: Vec<DevCache>,
    gelu_table: CudaSlice<f32>,
}

/// The kernel family each kernel is taken from (the quantizers are in every family; the
/// products' copy is used).
fn family_of(kernel: &str) -> &'static str {
    match kernel {
        k if k.starts_with("matvec_") || k.starts_with("matmul_") || k.starts_with("quantize_") => {
            "matvec"
        }
        "rms_norm_f32" | "layer_norm_f32" => "norm",
        "rope_f32" => "rope",
        "kv_store" => "kv",
        "attention_f32" | "attention_combine" => "attention",
        "softmax_f32" | "top_k_f32" => "softmax",
        "embed_rows" => "embed",
        _ => "elementwise",
    }
}

/// The product kernel suffix for a weight type, if there is a kernel for it.
pub fn product_suffix(ty: GgmlType) -> Option<&'static str> {
    use GgmlType::*;
    Some(match ty {
        F32 => "f32",
        F16 => "f16",
        BF16 => "bf16",
        Q4_0 => "q4_0",
        Q4_1 => "q4_1",
        Q5_0 => "q5_0",
        Q5_1 => "q5_1",
        Q8_0 => "q8_0",
        Q4_K => "q4_k",
        Q5_K => "q5_k",
        Q6_K => "q6_k",
        _ => return None,
    })
}

/// The activation quantizer for a weight type and its bytes per block of `block` elements
/// (None: the product reads f32 activations).
pub fn activation_format(ty: GgmlType) -> Option<(&'static str, usize, usize)> {
    use GgmlType::*;
    match ty {
        Q4_0 | Q5_0 | Q8_0 => Some(("quantize_q8_0", 32, 34)),
        Q4_1 | Q5_1 => Some(("quantize_q8_1", 32, 36)),
        Q4_K | Q5_K | Q6_K => Some(("quantize_q8_k", 256, 292)),
        _ => None,
    }
}

/// GELU (tanh form) as the CPU computes its table's entries.
fn gelu_exact(x: f32) -> f32 {
    const SQRT_2_OVER_PI: f32 = 0.797_884_6;
    0.5 * x * (1.0 + (SQRT_2_OVER_PI * x * (1.0 + 0.044715 * x * x)).tanh())
}

fn cfg(grid: (u32, u32, u32), block: u32, shared: u32) -> LaunchConfig {
    LaunchConfig {
        grid_dim: grid,
        block_dim: (block, 1, 1),
        shared_mem_bytes: shared,
    }
}

/// Launches `$f` on `$s` with the arguments listed (each borrowed for the launch).
macro_rules! launch {
    ($s:expr, $f:expr, $cfg:expr, $($arg:expr),+ $(,)?) => {{
        let mut b = $s.launch_builder(&$f);
        $( b.arg($arg); )+
        // SAFETY: every argument matches the kernel's parameter list in cuda-ext/kernels/, and
        // every buffer is sized for the grid (checked by the graph's shapes).
        unsafe { b.launch($cfg) }.map(|_| ()).map_err(err("kernel launch"))
    }};
}

impl CudaBackend {
    /// Creates a context on `device` and compiles (or loads from cache) every kernel family.
    pub fn new(device: &CudaDevice) -> Result<Self> {
        let ctx = CudaContext::new(device.index).map_err(err("creating a context"))?;
        let stream = ctx.default_stream();
        let arch = device.arch();
        let mut functions = HashMap::new();
        for (name, src) in crate::kernels::SOURCES {
            let ptx = crate::nvrtc::compile_cached(name, &crate::kernels::program(src), &arch)
                .map_err(BackendError::Unsupported)?;
            let module = ctx
                .load_module(cudarc::nvrtc::Ptx::from_src(ptx))
                .map_err(err("loading PTX"))?;
            for k in crate::kernels::all_entry_points(src) {
                if family_of(&k) == *name {
                    let f = module.load_function(&k).map_err(err("finding a kernel"))?;
                    functions.insert(&*Box::leak(k.into_boxed_str()), f);
                }
            }
        }
        let table: Vec<f32> = (0..=u16::MAX)
            .map(|b| {
                let x = half::f16::from_bits(b).to_f32();
                half::f16::from_f32(gelu_exact(x)).to_f32()
            })
            .collect();
        let gelu_table = stream.clone_htod(&table).map_err(err("uploading"))?;
        Ok(CudaBackend {
            device: device.clone(),
            _ctx: ctx,
            stream,
            functions,
            weights: Vec::new(),
            caches: Vec::new(),
            gelu_table,
        })
    }

    /// The device in use.
    pub fn device(&self) -> &CudaDevice {
        &self.device
    }

    fn f(&self, name: &str) -> Result<CudaFunction> {
        self.functions
            .get(name)
            .cloned()
            .ok_or_else(|| BackendError::Unsupported(format!("CUDA kernel {name} is missing")))
    }

    fn weight(&self, w: &Weight) -> Result<&DevWeight> {
        self.weights
            .get(w.id as usize)
            .ok_or_else(|| BackendError::InvalidStep(format!("unknown weight handle {}", w.id)))
    }

    fn vector(&self, w: &Weight) -> Result<&CudaSlice<f32>> {
        self.weight(w)?
            .vector
            .as_ref()
            .ok_or_else(|| BackendError::InvalidStep(format!("weight {} is not a vector", w.id)))
    }

    fn cache(&self, kv: u32, layer: usize) -> Result<(&DevCache, &DevLayer)> {
        let c = self
            .caches
            .get(kv as usize)
            .ok_or_else(|| BackendError::InvalidStep(format!("unknown KV cache {kv}")))?;
        let l = c.layers.get(layer).ok_or_else(|| {
            BackendError::InvalidStep(format!("KV cache {kv} has no layer {layer}"))
        })?;
        Ok((c, l))
    }

    fn alloc(&self, n: usize) -> Result<CudaSlice<f32>> {
        self.stream
            .alloc_zeros::<f32>(n.max(1))
            .map_err(err("allocating"))
    }
}

impl Backend for CudaBackend {
    fn name(&self) -> &'static str {
        "cuda"
    }

    fn load_weight(&mut self, file: &Arc<ModelFile>, name: &str) -> Result<Weight> {
        let (handle, range) = Weight::locate(file, name)?;
        let bytes = &file.bytes()[range];
        let n = handle.cols * handle.rows;
        let bad = |m: String| BackendError::BadTensor {
            name: name.to_string(),
            message: m,
        };
        let unit = if matches!(handle.ty, GgmlType::Q4_K | GgmlType::Q5_K | GgmlType::Q6_K) {
            256
        } else {
            32
        };
        // Types without a product kernel, and rows the kernels cannot split into units, are
        // converted to f32 (the f32 kernels still need 32-element units; narrower rows are only
        // ever vectors).
        let as_f32 = product_suffix(handle.ty).is_none() || handle.cols % unit != 0;
        let f32_data = if as_f32 || handle.rows == 1 {
            Some(
                weft_core::quant::dequantize_to_vec(handle.ty, bytes, n)
                    .map_err(|e| bad(e.to_string()))?,
            )
        } else {
            None
        };
        let (ty, data) = match (&f32_data, as_f32) {
            (Some(v), true) => (
                GgmlType::F32,
                self.stream
                    .clone_htod(bytemuck::cast_slice::<f32, u8>(v))
                    .map_err(err("uploading"))?,
            ),
            _ => (
                handle.ty,
                self.stream.clone_htod(bytes).map_err(err("uploading"))?,
            ),
        };
        let vector = match (&f32_data, handle.rows == 1) {
            (Some(v), true) => Some(self.stream.clone_htod(v).map_err(err("uploading"))?),
            _ => None,
        };
        self.weights.push(DevWeight { ty, data, vector });
        Ok(Weight {
            id: self.weights.len() as u32 - 1,
            ..handle
        })
    }

    fn create_kv_cache(&mut self, spec: &KvCacheSpec) -> Result<KvCacheId> {
        let elem = match spec.dtype {
            KvDtype::F16 => 2,
            KvDtype::F32 => 4,
        };
        let mut layers = Vec::new();
        for l in &spec.layers {
            let slots = match l.window {
                Some(_) => spec.n_seq * l.capacity,
                None => spec.n_blocks() * KV_BLOCK,
            } * l.n_kv_head;
            let k = self
                .stream
                .alloc_zeros::<u8>((slots * l.head_dim_k * elem).max(1));
            let v = self
                .stream
                .alloc_zeros::<u8>((slots * l.head_dim_v * elem).max(1));
            layers.push(DevLayer {
                k: k.map_err(err("allocating the KV cache"))?,
                v: v.map_err(err("allocating the KV cache"))?,
            });
        }
        let tables = BlockTables::new(spec);
        let tables_dev = self
            .stream
            .clone_htod(&[tables.ids(), &[NO_BLOCK]].concat())
            .map_err(err("uploading the block tables"))?;
        self.caches.push(DevCache {
            spec: spec.clone(),
            layers,
            tables,
            tables_dev,
            tables_stale: false,
        });
        Ok(KvCacheId(self.caches.len() as u32 - 1))
    }

    fn set_block_table(&mut self, kv: KvCacheId, seq: u32, table: &[u32]) -> Result<()> {
        let c = self
            .caches
            .get_mut(kv.0 as usize)
            .ok_or_else(|| BackendError::InvalidStep(format!("unknown KV cache {}", kv.0)))?;
        c.tables.set(seq, table)?;
        c.tables_stale = true;
        Ok(())
    }

    fn execute(&mut self, graph: &Graph, batch: &StepBatch) -> Result<Vec<Readback>> {
        graph.check_batch(batch)?;
        for c in self.caches.iter_mut().filter(|c| c.tables_stale) {
            self.stream
                .memcpy_htod(c.tables.ids(), &mut c.tables_dev)
                .map_err(err("uploading the block tables"))?;
            c.tables_stale = false;
        }
        let s = self.stream.clone();
        let tokens = s.clone_htod(batch.tokens).map_err(err("uploading"))?;
        let positions = s.clone_htod(batch.positions).map_err(err("uploading"))?;
        let seqs = s.clone_htod(batch.seqs).map_err(err("uploading"))?;
        let last = graph.last_uses();
        let mut bufs: Vec<Option<CudaSlice<f32>>> = vec![None; graph.nodes.len()];
        let mut ids: Vec<Option<CudaSlice<u32>>> = vec![None; graph.nodes.len()];
        for (i, node) in graph.nodes.iter().enumerate() {
            let out = self.alloc(node.rows * node.cols)?;
            let step = ops::Step {
                graph,
                batch,
                tokens: &tokens,
                positions: &positions,
                seqs: &seqs,
                bufs: &bufs,
            };
            let (out, topk) = self.run_node(&step, i, out)?;
            bufs[i] = Some(out);
            ids[i] = topk;
            // Release inputs (and an unread result) after their last reader.
            for t in node
                .op
                .inputs()
                .into_iter()
                .chain([weft_core::backend::TensorId(i as u32)])
            {
                if last[t.0 as usize] == i {
                    bufs[t.0 as usize] = None;
                    ids[t.0 as usize] = None;
                }
            }
        }
        let mut out = Vec::new();
        for &t in &graph.outputs {
            let shape = graph.output_shape(t);
            let vals = match &bufs[t.0 as usize] {
                Some(b) => s.clone_dtoh(b).map_err(err("reading back"))?,
                None => Vec::new(),
            };
            let idv = match &ids[t.0 as usize] {
                Some(b) => s.clone_dtoh(b).map_err(err("reading back"))?,
                None => Vec::new(),
            };
            let mut vals = vals;
            vals.truncate(shape.values());
            out.push(shape.assemble(vals, idv));
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every kernel the backend launches exists, in the family it is loaded from.
    #[test]
    fn launched_kernels_exist_in_their_family() {
        let mut names: Vec<String> = [
            "add_f32",
            "mul_f32",
            "scale_f32",
            "soft_cap_f32",
            "gelu_f32",
            "gelu_erf_f32",
            "silu_f32",
            "geglu_f32",
            "swiglu_f32",
            "add_bias_f32",
            "select_rows_f32",
            "rms_norm_f32",
            "layer_norm_f32",
            "rope_f32",
            "kv_store",
            "attention_f32",
            "attention_combine",
            "softmax_f32",
            "top_k_f32",
            "embed_rows",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        use GgmlType::*;
        for ty in [
            F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K, Q5_K, Q6_K,
        ] {
            let sfx = product_suffix(ty).unwrap();
            names.push(format!("matvec_{sfx}"));
            names.push(format!("matmul_{sfx}"));
            if let Some((q, _, _)) = activation_format(ty) {
                names.push(q.to_string());
            }
        }
        for n in names {
            let fam = family_of(&n);
            let src = crate::kernels::source(fam).unwrap();
            assert!(
                crate::kernels::all_entry_points(src).contains(&n),
                "{n} is not in family {fam}"
            );
        }
        assert!(product_suffix(GgmlType::Q3_K).is_none());
    }
}

// After the launch! macro: macros by example are visible only below their definition.
mod ops;
