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
    Backend, BackendError, BlockTables, Graph, KvCacheId, KvCacheSpec, KvDtype, PendingStep,
    Readback, Result, StepBatch, Weight, KV_BLOCK, NO_BLOCK,
};
use weft_core::dtype::GgmlType;
use weft_core::gguf::ModelFile;

use crate::devices::CudaDevice;
use crate::graphs::{GraphCache, Plan, ShapeKey};

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
    ctx: Arc<CudaContext>,
    stream: Arc<CudaStream>,
    functions: HashMap<&'static str, CudaFunction>,
    weights: Vec<DevWeight>,
    caches: Vec<DevCache>,
    gelu_table: CudaSlice<f32>,
    /// Decode steps captured as CUDA graphs (crate::graphs).
    graphs: GraphCache<replay::Captured>,
    graphs_on: bool,
    /// Page-locked host buffers the outputs of submitted steps are copied into.
    pinned: readback::PinnedPool,
}

/// A step's per-row inputs on the device.
pub(super) struct StepInputs {
    pub tokens: CudaSlice<u32>,
    pub positions: CudaSlice<u32>,
    pub seqs: CudaSlice<u32>,
}

impl StepInputs {
    fn upload(s: &Arc<CudaStream>, batch: &StepBatch) -> Result<Self> {
        let up = |v: &[u32]| s.clone_htod(v).map_err(err("uploading"));
        Ok(StepInputs {
            tokens: up(batch.tokens)?,
            positions: up(batch.positions)?,
            seqs: up(batch.seqs)?,
        })
    }
}

/// The device buffers of a step's results: values per node and ids of top-k nodes (`None`
/// before a node runs and after its last reader).
pub(super) struct Results {
    pub vals: Vec<Option<CudaSlice<f32>>>,
    pub ids: Vec<Option<CudaSlice<u32>>>,
}

impl Results {
    fn empty(n: usize) -> Self {
        Results {
            vals: vec![None; n],
            ids: vec![None; n],
        }
    }
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
        "encoder_attention_f32" | "pool_rows_f32" => "encoder",
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
        // SAFETY: the backend issues all its work on one stream, so cudarc's per-buffer events
        // (ordering between streams) are not needed; without them nothing waits on an event
        // recorded outside a graph capture.
        unsafe { ctx.disable_event_tracking() };
        // A stream of our own: the legacy default stream cannot be captured into a graph.
        let stream = ctx.new_stream().map_err(err("creating a stream"))?;
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
            ctx,
            stream,
            functions,
            weights: Vec::new(),
            caches: Vec::new(),
            gelu_table,
            graphs: GraphCache::new(crate::graphs::CAPACITY),
            graphs_on: crate::graphs::enabled(),
            pinned: readback::PinnedPool::default(),
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

    fn copy_prefix(&mut self, kv: KvCacheId, src: u32, dst: u32, n: usize) -> Result<()> {
        let c = self
            .caches
            .get(kv.0 as usize)
            .ok_or_else(|| BackendError::InvalidStep(format!("unknown KV cache {}", kv.0)))?;
        kv_copy::copy_prefix(&self.stream, c, src, dst, n)
    }

    fn execute(&mut self, graph: &Graph, batch: &StepBatch) -> Result<Vec<Readback>> {
        let launched = self.launch_step(graph, batch)?;
        let s = self.stream.clone();
        readback::read_outputs(&s, graph, self.results(&launched)?)
    }

    /// Enqueues the step and copies of its outputs into pinned host memory, and returns at
    /// once: the scheduler prepares the next step while the GPU runs this one. Waiting blocks
    /// on the copies' event (natively nothing polls a CUDA stream for us).
    fn submit(&mut self, graph: &Graph, batch: &StepBatch) -> Result<PendingStep> {
        let launched = self.launch_step(graph, batch)?;
        let s = self.stream.clone();
        let pool = self.pinned.clone();
        let reads = readback::enqueue_reads(&s, &pool, graph, self.results(&launched)?)?;
        // A direct step's buffers are freed here, on the stream, after the copies were
        // enqueued; a graph's outputs are overwritten only by a later replay on this stream.
        drop(launched);
        Ok(PendingStep::later(Box::pin(async move {
            readback::finish_reads(reads, &pool)
        })))
    }
}

/// Where a step's outputs are once its launches are enqueued.
enum Launched {
    /// Launched kernel by kernel: the step's own output buffers.
    Direct(Results),
    /// A replay of captured graph `i`: the outputs are the graph's.
    Graph(usize),
}

impl CudaBackend {
    /// Checks the step, then enqueues it: replaying a captured graph, capturing one, or
    /// launching kernel by kernel (crate::graphs decides).
    fn launch_step(&mut self, graph: &Graph, batch: &StepBatch) -> Result<Launched> {
        graph.check_batch(batch)?;
        // Host-side checks of the step's data, which a replayed graph would not make.
        self.check_step(graph, batch)?;
        // Changed block tables go to their fixed device buffers, on the stream before the
        // step's kernels (captured graphs read those same buffers).
        for c in self.caches.iter_mut().filter(|c| c.tables_stale) {
            self.stream
                .memcpy_htod(c.tables.ids(), &mut c.tables_dev)
                .map_err(err("uploading the block tables"))?;
            c.tables_stale = false;
        }
        let key_bound = crate::graphs::step_key_bound(batch.positions);
        let capturable =
            crate::graphs::capturable(graph, self.graphs_on, self.ctx.has_async_alloc()).is_ok();
        let plan = if capturable {
            let key = ShapeKey {
                rows: graph.n_tokens,
                key_bound,
            };
            self.graphs.plan(key, graph)
        } else {
            Plan::Direct
        };
        let i = match plan {
            Plan::Direct => {
                return self
                    .run_direct(graph, batch, key_bound)
                    .map(Launched::Direct)
            }
            Plan::Replay(i) => i,
            Plan::Capture(i) => match self.capture(graph, batch, key_bound) {
                Ok(c) => {
                    self.graphs.store(i, c);
                    i
                }
                Err(e) => {
                    eprintln!(
                        "weft-cuda: a step of {} rows was not captured as a CUDA graph ({e}); it runs kernel by kernel",
                        graph.n_tokens
                    );
                    self.graphs.fail(i);
                    return self
                        .run_direct(graph, batch, key_bound)
                        .map(Launched::Direct);
                }
            },
        };
        self.replay(i, batch)?;
        Ok(Launched::Graph(i))
    }

    fn results<'a>(&'a mut self, launched: &'a Launched) -> Result<&'a Results> {
        match launched {
            Launched::Direct(r) => Ok(r),
            Launched::Graph(i) => self.captured_outputs(*i),
        }
    }
}

impl CudaBackend {
    /// Uploads the step's inputs and launches its kernels one by one.
    fn run_direct(&self, graph: &Graph, batch: &StepBatch, key_bound: u32) -> Result<Results> {
        let inputs = StepInputs::upload(&self.stream, batch)?;
        let tables = self.upload_tables(graph)?;
        let mut res = Results::empty(graph.nodes.len());
        self.launch_nodes(graph, batch, &inputs, &tables, key_bound, &mut res)?;
        Ok(res)
    }

    /// The tables the graph's ops carry, on the device, by node: `SelectRows` row lists and
    /// the (start, len, valid) spans of encoder ops.
    fn upload_tables(&self, graph: &Graph) -> Result<Vec<Option<CudaSlice<u32>>>> {
        use weft_core::backend::Op;
        let up = |v: &[u32]| {
            self.stream
                .clone_htod(v)
                .map(Some)
                .map_err(err("uploading"))
        };
        graph
            .nodes
            .iter()
            .map(|n| match &n.op {
                Op::SelectRows { rows, .. } => up(rows),
                Op::EncoderAttention { spans, .. } | Op::Pool { spans, .. } => {
                    let flat: Vec<u32> = spans
                        .iter()
                        .flat_map(|s| [s.start, s.len, s.valid])
                        .collect();
                    up(&flat)
                }
                _ => Ok(None),
            })
            .collect()
    }

    /// Launches every node of `graph` in order. Buffers already in `res` (a graph's outputs,
    /// allocated before a capture) are written in place; the others are allocated here and
    /// freed after their last reader, so inside a capture they become the graph's own memory.
    fn launch_nodes(
        &self,
        graph: &Graph,
        batch: &StepBatch,
        inputs: &StepInputs,
        tables: &[Option<CudaSlice<u32>>],
        key_bound: u32,
        res: &mut Results,
    ) -> Result<()> {
        let last = graph.last_uses();
        for (i, node) in graph.nodes.iter().enumerate() {
            let out = match res.vals[i].take() {
                Some(b) => b,
                None => self.alloc(node.rows * node.cols)?,
            };
            let ids = res.ids[i].take();
            let step = ops::Step {
                graph,
                batch,
                inputs,
                tables,
                key_bound,
                bufs: &res.vals,
            };
            let (out, topk) = self.run_node(&step, i, out, ids)?;
            res.vals[i] = Some(out);
            res.ids[i] = topk;
            // Release inputs (and an unread result) after their last reader.
            for t in node
                .op
                .inputs()
                .into_iter()
                .chain([weft_core::backend::TensorId(i as u32)])
            {
                if last[t.0 as usize] == i {
                    res.vals[t.0 as usize] = None;
                    res.ids[t.0 as usize] = None;
                }
            }
        }
        Ok(())
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
            "encoder_attention_f32",
            "pool_rows_f32",
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
                // Quantized activations: the tiled prompt products exist too.
                names.push(format!("matmul_tiled_{sfx}"));
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
mod checks;
mod kv_copy;
mod ops;
mod readback;
mod replay;
