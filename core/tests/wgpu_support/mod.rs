//! Shared by the wgpu tests: opening the backend (skip loudly without an adapter, fail under
//! CI), writing small GGUF files of random tensors, and comparing outputs.

#![allow(dead_code)]

use std::path::Path;
use std::sync::Arc;

use weft_core::backend::wgpu::{WgpuBackend, WgpuOptions, NO_ADAPTER};
use weft_core::backend::{
    Backend, BackendError, Graph, KvCacheId, KvCacheSpec, KvDtype, Readback, StepBatch, Weight,
};
use weft_core::dtype::GgmlType;
use weft_core::gguf::ModelFile;

/// Opens the wgpu backend, or returns None after a loud message when this machine has no
/// adapter. Under CI (`CI` set, where mesa-vulkan-drivers is installed) a missing adapter fails.
pub fn backend(opts: &WgpuOptions) -> Option<WgpuBackend> {
    quiet_loader();
    match WgpuBackend::new(opts) {
        Ok(b) => Some(b),
        Err(BackendError::Unsupported(m)) if m == NO_ADAPTER => {
            if std::env::var_os("CI").is_some() {
                panic!("no GPU adapter under CI (install mesa-vulkan-drivers): {m}");
            }
            eprintln!("\n*** SKIPPING wgpu test: {m} ***\n");
            None
        }
        Err(e) => panic!("cannot open the wgpu backend: {e}"),
    }
}

/// Points `XDG_RUNTIME_DIR` at a private directory when it is unset, which quiets the Vulkan
/// loader's warnings.
fn quiet_loader() {
    if std::env::var_os("XDG_RUNTIME_DIR").is_none() {
        let dir = std::env::temp_dir().join(format!("weft-xdg-{}", std::process::id()));
        let _ = std::fs::create_dir_all(&dir);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let _ = std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700));
        }
        // SAFETY: set before any thread of this test reads the environment for the loader;
        // tests that race here only ever write the same kind of value.
        unsafe { std::env::set_var("XDG_RUNTIME_DIR", dir) };
    }
}

/// A small deterministic generator (xorshift64*).
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }
    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    /// Uniform in [-1, 1).
    pub fn f32(&mut self) -> f32 {
        (self.next_u64() >> 40) as f32 / (1u64 << 23) as f32 - 1.0
    }
    pub fn vec(&mut self, n: usize, scale: f32) -> Vec<f32> {
        (0..n).map(|_| self.f32() * scale).collect()
    }
}

/// A tensor to write: name, type, (cols, rows), bytes in that type.
pub struct TensorSpec {
    pub name: String,
    pub ty: GgmlType,
    pub cols: usize,
    pub rows: usize,
    pub data: Vec<u8>,
}

/// Random bytes of type `ty` for a `rows × cols` tensor: quantized from random floats where a
/// quantizer exists, otherwise random blocks with sane f16 scales.
pub fn random_tensor(
    rng: &mut Rng,
    name: &str,
    ty: GgmlType,
    cols: usize,
    rows: usize,
) -> TensorSpec {
    let n = cols * rows;
    let bytes = ty.bytes_for(n as u64).expect("whole blocks") as usize;
    let mut data = vec![0u8; bytes];
    if weft_core::quant::can_quantize(ty) {
        let x = rng.vec(n, 1.0);
        weft_core::quant::quantize(ty, &x, &mut data).unwrap();
    } else {
        for b in data.iter_mut() {
            *b = rng.next_u64() as u8;
        }
        let (_, bs) = ty.block_geometry();
        // Offsets of the f16 scale fields, so values stay finite and moderate.
        let scales: &[usize] = match ty {
            GgmlType::Q5_K | GgmlType::Q4_K => &[0, 2],
            GgmlType::Q2_K => &[80, 82],
            GgmlType::Q3_K => &[108],
            GgmlType::Q6_K => &[208],
            _ => panic!("no random generator for {ty}"),
        };
        for block in data.chunks_exact_mut(bs) {
            for &o in scales {
                let v = half::f16::from_f32(0.002 + 0.01 * (rng.f32().abs()));
                block[o..o + 2].copy_from_slice(&v.to_le_bytes());
            }
        }
    }
    TensorSpec {
        name: name.to_string(),
        ty,
        cols,
        rows,
        data,
    }
}

/// An f32 tensor with the given values.
pub fn f32_tensor(name: &str, cols: usize, rows: usize, values: &[f32]) -> TensorSpec {
    assert_eq!(values.len(), cols * rows);
    TensorSpec {
        name: name.to_string(),
        ty: GgmlType::F32,
        cols,
        rows,
        data: bytemuck::cast_slice(values).to_vec(),
    }
}

fn put_str(out: &mut Vec<u8>, s: &str) {
    out.extend_from_slice(&(s.len() as u64).to_le_bytes());
    out.extend_from_slice(s.as_bytes());
}

/// A GGUF v3 file holding `tensors` (no metadata), parsed back as a [`ModelFile`].
pub fn gguf(tensors: &[TensorSpec]) -> Arc<ModelFile> {
    const ALIGN: usize = 32;
    let mut out = Vec::new();
    out.extend_from_slice(b"GGUF");
    out.extend_from_slice(&3u32.to_le_bytes());
    out.extend_from_slice(&(tensors.len() as u64).to_le_bytes());
    out.extend_from_slice(&0u64.to_le_bytes());
    let mut offset = 0usize;
    for t in tensors {
        put_str(&mut out, &t.name);
        let dims: Vec<u64> = if t.rows == 1 {
            vec![t.cols as u64]
        } else {
            vec![t.cols as u64, t.rows as u64]
        };
        out.extend_from_slice(&(dims.len() as u32).to_le_bytes());
        for d in &dims {
            out.extend_from_slice(&d.to_le_bytes());
        }
        out.extend_from_slice(&(t.ty as u32).to_le_bytes());
        out.extend_from_slice(&(offset as u64).to_le_bytes());
        offset += t.data.len().div_ceil(ALIGN) * ALIGN;
    }
    out.resize(out.len().div_ceil(ALIGN) * ALIGN, 0);
    for t in tensors {
        out.extend_from_slice(&t.data);
        out.resize(out.len().div_ceil(ALIGN) * ALIGN, 0);
    }
    Arc::new(ModelFile::from_vec(out).expect("the test GGUF parses"))
}

/// Asserts `|got - want| <= abs + rel·|want|` element-wise, naming the first failure.
pub fn assert_close(what: &str, got: &[f32], want: &[f32], abs: f32, rel: f32) {
    assert_eq!(got.len(), want.len(), "{what}: lengths differ");
    let mut worst = (0usize, 0f32);
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        let err = (g - w).abs();
        let bound = abs + rel * w.abs();
        assert!(
            err <= bound && g.is_finite() == w.is_finite(),
            "{what}: element {i}: got {g}, want {w} (error {err}, bound {bound})"
        );
        if err > worst.1 {
            worst = (i, err);
        }
    }
}

/// A step's output as f32 values (top-k outputs: the ids as f32, then the values).
pub fn data(r: Readback) -> Vec<f32> {
    match r {
        Readback::F32 { data, .. } => data,
        Readback::TopK { ids, values, .. } => ids.iter().map(|&i| i as f32).chain(values).collect(),
    }
}

/// Bit patterns, for bit-exact comparisons that also tell -0.0 from 0.0 and NaNs apart.
pub fn bits(v: &[f32]) -> Vec<u32> {
    v.iter().map(|x| x.to_bits()).collect()
}

/// The query, key and value tables of the attention tests: `n_rows` rows each, for `n_head`
/// query heads on `n_kv` key/value heads of `hd` dimensions (random, keys scaled by 2).
pub fn qkv_tensors(
    rng: &mut Rng,
    n_head: usize,
    n_kv: usize,
    hd: usize,
    n_rows: usize,
) -> [TensorSpec; 3] {
    let (qc, kc) = (n_head * hd, n_kv * hd);
    [
        f32_tensor("q", qc, n_rows, &rng.vec(qc * n_rows, 2.0)),
        f32_tensor("k", kc, n_rows, &rng.vec(kc * n_rows, 2.0)),
        f32_tensor("v", kc, n_rows, &rng.vec(kc * n_rows, 1.0)),
    ]
}

/// One attention step over `tokens.len()` rows: q, k and v gathered from their tables, stored
/// into each of `layers` of cache `kv`, attended (scale 1/8); one output per layer.
pub fn attention_graph(
    n_tokens: usize,
    [qw, kw, vw]: [Weight; 3],
    kv: KvCacheId,
    layers: usize,
    n_head: usize,
    hd: usize,
) -> Graph {
    let mut g = Graph::new(n_tokens);
    let q = g.embed(qw, 1.0);
    let k = g.embed(kw, 1.0);
    let v = g.embed(vw, 1.0);
    let mut outs = Vec::new();
    for l in 0..layers {
        let st = g.kv_store(kv, l, k, v);
        outs.push(g.attention(q, st, kv, l, n_head, hd, 0.125));
    }
    for o in outs {
        g.output(o);
    }
    g
}

/// Attention outputs of the GPU against the CPU: within f32 rounding (f32 cache) or one f16
/// rounding step (f16 cache: queries and weights are rounded to f16 on both sides, but f32
/// differences upstream can flip a rounding).
pub fn assert_attention_close(what: &str, dtype: KvDtype, gpu: &[f32], cpu: &[f32]) {
    let rel = if dtype == KvDtype::F16 { 2e-3 } else { 1e-5 };
    assert_close(&format!("{dtype:?} {what}"), gpu, cpu, 1e-4, rel);
}

/// Two wgpu backends opened with different options (e.g. a feature on and off) holding the
/// same weights and caches, whose every output must agree bit for bit.
pub struct Twin {
    pub a: WgpuBackend,
    pub b: WgpuBackend,
}

impl Twin {
    /// Both backends, or None without an adapter.
    pub fn new(a: &WgpuOptions, b: &WgpuOptions) -> Option<Twin> {
        Some(Twin {
            a: backend(a)?,
            b: backend(b)?,
        })
    }

    /// Loads `name` into both (the handles must agree).
    pub fn load(&mut self, file: &Arc<ModelFile>, name: &str) -> Weight {
        let w = self.a.load_weight(file, name).unwrap();
        assert_eq!(w, self.b.load_weight(file, name).unwrap());
        w
    }

    /// Creates the same cache in both.
    pub fn kv(&mut self, spec: &KvCacheSpec) -> KvCacheId {
        let id = self.a.create_kv_cache(spec).unwrap();
        assert_eq!(id, self.b.create_kv_cache(spec).unwrap());
        id
    }

    /// Runs `g` on both, asserts every output is bit-identical (naming `what`), and returns
    /// the outputs.
    pub fn run(&mut self, what: &str, g: &Graph, batch: &StepBatch) -> Vec<Vec<f32>> {
        let x = self.a.execute(g, batch).unwrap();
        let y = self.b.execute(g, batch).unwrap();
        let x: Vec<Vec<f32>> = x.into_iter().map(data).collect();
        for (i, (x, y)) in x.iter().zip(y).enumerate() {
            assert!(
                bits(x) == bits(&data(y)),
                "{what}: output {i} differs between the two option sets"
            );
        }
        x
    }

    /// Loads the model at `path` into both, then runs `prompt` and `decodes` greedy decode
    /// steps (each feeding back the argmax) on an f16 cache, asserting at every step that both
    /// give the same logits bit for bit (named `what` and the step).
    pub fn greedy_steps(&mut self, what: &str, path: &Path, prompt: &[u32], decodes: usize) {
        let file = Arc::new(ModelFile::open(path).unwrap());
        let model = weft_core::model::load(&file, &mut self.a, &mut |_, _| {}).unwrap();
        // The same weights in the same order: the graph's handles hold for both backends.
        weft_core::model::load(&file, &mut self.b, &mut |_, _| {}).unwrap();
        let spec = KvCacheSpec {
            layers: model.kv_layers(32, 8),
            n_seq: 1,
            dtype: KvDtype::F16,
            pool_blocks: None,
        };
        let kv = self.kv(&spec);
        let mut tokens = prompt.to_vec();
        let mut pos: Vec<u32> = (0..tokens.len() as u32).collect();
        for step in 0..=decodes {
            let last = tokens.len() as u32 - 1;
            let mut g = Graph::new(tokens.len());
            let logits = model.build(&mut g, kv, &[last]);
            g.output(logits);
            let seqs = vec![0; tokens.len()];
            let batch = StepBatch {
                tokens: &tokens,
                positions: &pos,
                seqs: &seqs,
            };
            let out = self.run(&format!("{what} step {step}"), &g, &batch);
            let l = &out[0];
            assert_eq!(l.len(), model.info().n_vocab);
            let best = (0..l.len()).max_by(|&i, &j| l[i].total_cmp(&l[j])).unwrap();
            let next = pos[pos.len() - 1] + 1;
            tokens = vec![best as u32];
            pos = vec![next];
        }
    }
}
