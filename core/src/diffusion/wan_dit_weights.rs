//! The Wan DiT's weights, loaded into a backend from a `ModelFile` under the GGUF
//! (Wan-original) tensor names (`wan_names.rs`).
//!
//! Most tensors load as they are (used in place, quantized ones through the backend's quant
//! kernels). A few are re-laid out on the host into a small in-memory GGUF first:
//! - `patch_embedding.weight` is 5-D `[dim, in, pt, ph, pw]`: loaded as `[dim, in·pt·ph·pw]`
//!   (the unfolded patch rows' order);
//! - the modulation tables (`blocks.N.modulation` `[1, 6, dim]`, `head.modulation`
//!   `[1, 2, dim]`) are split into one `dim` vector per part, added to the timestep's parts;
//! - a matrix whose rows are not whole 32-value blocks (the GPU products take whole blocks:
//!   the tiny test models' text width 40 and FFN width 48, the i2v patch width 144) gets zero
//!   columns up to the next multiple of 32, and the layer that feeds it zero output rows (and
//!   bias entries) as well, so the activation it reads is padded with zeros. Zeros change no
//!   sum, so the results are those of the unpadded layers.

use std::sync::Arc;

use super::files::ModelFileError;
use super::wan_dit::WanDitConfig;
use crate::backend::{Backend, Weight};
use crate::dtype::GgmlType;
use crate::gguf::{write_gguf, ModelFile, TensorToWrite};

/// Products read activations in whole blocks of this many values (see the module docs).
pub(super) const ALIGN: usize = 32;

/// `n` rounded up to whole [`ALIGN`] blocks.
pub(super) fn padded(n: usize) -> usize {
    n.next_multiple_of(ALIGN)
}

/// A linear layer: weight `[out, in]` and bias `[out]` handles (both possibly padded).
#[derive(Clone, Copy)]
pub(super) struct Lin {
    pub w: Weight,
    pub b: Weight,
}

/// One attention of a block.
pub(super) struct Attn {
    pub q: Lin,
    pub k: Lin,
    pub v: Lin,
    pub o: Lin,
    pub norm_q: Weight,
    pub norm_k: Weight,
}

pub(super) struct Block {
    /// shift, scale, gate, c_shift, c_scale, c_gate (each `dim`).
    pub modulation: [Weight; 6],
    pub self_attn: Attn,
    /// `norm3`'s weight and bias when `cross_attn_norm`.
    pub cross_norm: Option<(Weight, Weight)>,
    pub cross_attn: Attn,
    pub ffn_in: Lin,
    pub ffn_out: Lin,
}

/// Every weight of the transformer, as backend handles.
pub(super) struct DitWeights {
    pub patch: Lin,
    pub time_1: Lin,
    pub time_2: Lin,
    /// `[6·dim, dim]`: the six modulation parts side by side.
    pub time_proj: Lin,
    pub text_1: Lin,
    pub text_2: Lin,
    pub blocks: Vec<Block>,
    /// shift, scale of the output norm.
    pub head_modulation: [Weight; 2],
    pub head: Lin,
}

/// A tensor re-laid out on the host (f32), to load from the derived file.
struct Derived {
    name: String,
    cols: usize,
    rows: usize,
    data: Vec<f32>,
}

/// Loading state: the model file, the backend and the derived tensors made so far.
struct Loader<'a> {
    file: &'a Arc<ModelFile>,
    backend: &'a mut dyn Backend,
    derived: Vec<Derived>,
}

fn bad(name: &str, message: String) -> ModelFileError {
    ModelFileError::Weights {
        path: name.to_string(),
        message,
    }
}

impl Loader<'_> {
    /// `name`'s values in f32 (any stored type), checked to hold `len` values.
    fn values(&self, name: &str, len: usize) -> Result<Vec<f32>, ModelFileError> {
        let (info, bytes) = self
            .file
            .tensor(name)
            .ok_or_else(|| bad(name, "missing from the model file".into()))?;
        if info.n_elements != len as u64 {
            return Err(bad(
                name,
                format!("has {} values, expected {len}", info.n_elements),
            ));
        }
        crate::quant::dequantize_to_vec(info.ty, bytes, len).map_err(|e| bad(name, e.to_string()))
    }

    /// `name` loaded as it is, checked to be `rows × cols`.
    fn direct(&mut self, name: &str, cols: usize, rows: usize) -> Result<Weight, ModelFileError> {
        let w = self
            .backend
            .load_weight(self.file, name)
            .map_err(|e| bad(name, e.to_string()))?;
        if (w.cols, w.rows) != (cols, rows) {
            return Err(bad(
                name,
                format!(
                    "is {} x {}, expected {rows} x {cols} (rows x columns)",
                    w.rows, w.cols
                ),
            ));
        }
        Ok(w)
    }

    /// A derived tensor, loaded at the end; returns its index.
    fn derive(&mut self, name: String, cols: usize, rows: usize, data: Vec<f32>) -> usize {
        self.derived.push(Derived {
            name,
            cols,
            rows,
            data,
        });
        self.derived.len() - 1
    }

    /// A linear layer `prefix.weight` (`n_out × n_in`, stored with `stored_in` values a row)
    /// and `prefix.bias`; rows padded to `out_rows` and columns to a whole number of blocks
    /// where needed. Returns the handles, or the derived indices to load later.
    fn linear(
        &mut self,
        prefix: &str,
        n_in: usize,
        n_out: usize,
        out_rows: usize,
    ) -> Result<Pending, ModelFileError> {
        let (wn, bn) = (format!("{prefix}.weight"), format!("{prefix}.bias"));
        let info = self
            .file
            .gguf
            .tensor(&wn)
            .ok_or_else(|| bad(&wn, "missing from the model file".into()))?;
        let plain = info.dims.len() == 2 && n_in == padded(n_in) && out_rows == n_out;
        let bias_plain = out_rows == n_out;
        let w = if plain {
            Slot::Loaded(self.direct(&wn, n_in, n_out)?)
        } else {
            let v = self.values(&wn, n_in * n_out)?;
            let cols = padded(n_in);
            let mut data = vec![0f32; cols * out_rows];
            for (dst, src) in data.chunks_exact_mut(cols).zip(v.chunks_exact(n_in)) {
                dst[..n_in].copy_from_slice(src);
            }
            Slot::Derived(self.derive(wn, cols, out_rows, data))
        };
        let b = if bias_plain {
            Slot::Loaded(self.direct(&bn, n_out, 1)?)
        } else {
            let mut v = self.values(&bn, n_out)?;
            v.resize(out_rows, 0.0);
            Slot::Derived(self.derive(bn, out_rows, 1, v))
        };
        Ok(Pending { w, b })
    }

    /// The `parts` vectors of `dim` values of the table `name` (`[1, parts, dim]`).
    fn table<const N: usize>(
        &mut self,
        name: &str,
        dim: usize,
    ) -> Result<[Slot; N], ModelFileError> {
        let v = self.values(name, N * dim)?;
        Ok(std::array::from_fn(|i| {
            let data = v[i * dim..(i + 1) * dim].to_vec();
            Slot::Derived(self.derive(format!("{name}.{i}"), dim, 1, data))
        }))
    }

    /// Loads the derived tensors; returns their handles in order.
    fn load_derived(&mut self) -> Result<Vec<Weight>, ModelFileError> {
        if self.derived.is_empty() {
            return Ok(Vec::new());
        }
        let dims: Vec<[u64; 2]> = self
            .derived
            .iter()
            .map(|d| [d.cols as u64, d.rows as u64])
            .collect();
        let list: Vec<TensorToWrite> = self
            .derived
            .iter()
            .zip(&dims)
            .map(|(d, dims)| TensorToWrite {
                name: &d.name,
                dims,
                ty: GgmlType::F32,
                data: bytemuck::cast_slice(&d.data),
            })
            .collect();
        let bytes = write_gguf(&[], &list, 32);
        let file = Arc::new(
            ModelFile::from_vec(bytes).map_err(|e| bad("re-laid-out tensors", e.to_string()))?,
        );
        let names: Vec<String> = self.derived.iter().map(|d| d.name.clone()).collect();
        names
            .iter()
            .map(|n| {
                self.backend
                    .load_weight(&file, n)
                    .map_err(|e| bad(n, e.to_string()))
            })
            .collect()
    }
}

/// A weight loaded now or derived (loaded with the others at the end).
#[derive(Clone, Copy)]
enum Slot {
    Loaded(Weight),
    Derived(usize),
}

impl Slot {
    fn get(self, derived: &[Weight]) -> Weight {
        match self {
            Slot::Loaded(w) => w,
            Slot::Derived(i) => derived[i],
        }
    }
}

#[derive(Clone, Copy)]
struct Pending {
    w: Slot,
    b: Slot,
}

impl Pending {
    fn get(self, d: &[Weight]) -> Lin {
        Lin {
            w: self.w.get(d),
            b: self.b.get(d),
        }
    }
}

struct PendingAttn([Pending; 4], Weight, Weight);

struct PendingBlock {
    modulation: [Slot; 6],
    self_attn: PendingAttn,
    cross_norm: Option<(Weight, Weight)>,
    cross_attn: PendingAttn,
    ffn_in: Pending,
    ffn_out: Pending,
}

impl PendingAttn {
    fn get(&self, d: &[Weight]) -> Attn {
        let [q, k, v, o] = self.0.map(|p| p.get(d));
        Attn {
            q,
            k,
            v,
            o,
            norm_q: self.1,
            norm_k: self.2,
        }
    }
}

/// Loads every DiT weight of `file` (GGUF names) into `backend`, checked against `c`.
pub(super) fn load(
    c: &WanDitConfig,
    file: &Arc<ModelFile>,
    backend: &mut dyn Backend,
) -> Result<DitWeights, ModelFileError> {
    let mut l = Loader {
        file,
        backend,
        derived: Vec::new(),
    };
    let dim = c.dim();
    let patch_in = c.in_channels * c.patch_size.iter().product::<usize>();
    let patch_out = c.out_channels * c.patch_size.iter().product::<usize>();
    let ffn = padded(c.ffn_dim);
    let patch = l.linear("patch_embedding", patch_in, dim, dim)?;
    let time_1 = l.linear("time_embedding.0", c.freq_dim, dim, dim)?;
    let time_2 = l.linear("time_embedding.2", dim, dim, dim)?;
    let time_proj = l.linear("time_projection.1", dim, 6 * dim, 6 * dim)?;
    let text_1 = l.linear("text_embedding.0", c.text_dim, dim, dim)?;
    let text_2 = l.linear("text_embedding.2", dim, dim, dim)?;
    let mut blocks = Vec::with_capacity(c.num_layers);
    for i in 0..c.num_layers {
        let b = format!("blocks.{i}");
        let attn = |l: &mut Loader, a: &str| -> Result<PendingAttn, ModelFileError> {
            let p = format!("{b}.{a}");
            Ok(PendingAttn(
                [
                    l.linear(&format!("{p}.q"), dim, dim, dim)?,
                    l.linear(&format!("{p}.k"), dim, dim, dim)?,
                    l.linear(&format!("{p}.v"), dim, dim, dim)?,
                    l.linear(&format!("{p}.o"), dim, dim, dim)?,
                ],
                l.direct(&format!("{p}.norm_q.weight"), dim, 1)?,
                l.direct(&format!("{p}.norm_k.weight"), dim, 1)?,
            ))
        };
        let self_attn = attn(&mut l, "self_attn")?;
        let cross_attn = attn(&mut l, "cross_attn")?;
        let cross_norm = if c.cross_attn_norm {
            Some((
                l.direct(&format!("{b}.norm3.weight"), dim, 1)?,
                l.direct(&format!("{b}.norm3.bias"), dim, 1)?,
            ))
        } else {
            None
        };
        blocks.push(PendingBlock {
            modulation: l.table::<6>(&format!("{b}.modulation"), dim)?,
            self_attn,
            cross_norm,
            cross_attn,
            ffn_in: l.linear(&format!("{b}.ffn.0"), dim, c.ffn_dim, ffn)?,
            ffn_out: l.linear(&format!("{b}.ffn.2"), c.ffn_dim, dim, dim)?,
        });
    }
    let head_modulation = l.table::<2>("head.modulation", dim)?;
    let head = l.linear("head.head", dim, patch_out, patch_out)?;
    let d = l.load_derived()?;
    Ok(DitWeights {
        patch: patch.get(&d),
        time_1: time_1.get(&d),
        time_2: time_2.get(&d),
        time_proj: time_proj.get(&d),
        text_1: text_1.get(&d),
        text_2: text_2.get(&d),
        blocks: blocks
            .iter()
            .map(|b| Block {
                modulation: b.modulation.map(|s| s.get(&d)),
                self_attn: b.self_attn.get(&d),
                cross_norm: b.cross_norm,
                cross_attn: b.cross_attn.get(&d),
                ffn_in: b.ffn_in.get(&d),
                ffn_out: b.ffn_out.get(&d),
            })
            .collect(),
        head_modulation: head_modulation.map(|s| s.get(&d)),
        head: head.get(&d),
    })
}
