//! The key/value cache in GPU memory: per layer, one key and one value buffer of
//! `[positions][n_kv_head · head_dim]` elements (f16 pairs packed in u32 words, or f32) — the
//! shared pool's `n_blocks · KV_BLOCK` positions for a full-attention layer, `n_seq · capacity`
//! ring positions for a sliding-window one — and the block tables the kernels map positions
//! through.

use crate::backend::{
    copy_plan, BackendError, BlockTables, KvCacheSpec, KvDtype, KvLayerSpec, Result, KV_BLOCK,
};

pub(super) struct GpuLayer {
    pub spec: KvLayerSpec,
    pub k: wgpu::Buffer,
    pub v: wgpu::Buffer,
}

pub(super) struct GpuKvCache {
    pub n_seq: usize,
    pub dtype: KvDtype,
    pub layers: Vec<GpuLayer>,
    /// The host copy of the tables, to check steps against.
    pub tables: BlockTables,
    /// The tables as the kernels read them, `[n_seq][per_seq]`.
    pub table_buf: wgpu::Buffer,
}

impl GpuKvCache {
    pub fn new(device: &wgpu::Device, spec: &KvCacheSpec, max_binding: u64) -> Result<Self> {
        if spec.n_seq == 0 {
            return Err(BackendError::Unsupported(
                "a KV cache needs at least one sequence slot".into(),
            ));
        }
        let elem = match spec.dtype {
            KvDtype::F16 => 2u64,
            KvDtype::F32 => 4,
        };
        let mut layers = Vec::with_capacity(spec.layers.len());
        for (i, l) in spec.layers.iter().enumerate() {
            let wk = (l.n_kv_head * l.head_dim_k) as u64;
            let wv = (l.n_kv_head * l.head_dim_v) as u64;
            if !wk.is_multiple_of(2) || !wv.is_multiple_of(2) {
                return Err(BackendError::Unsupported(format!(
                    "layer {i}: key/value widths must be even for the GPU cache"
                )));
            }
            let slots = match l.window {
                Some(_) => spec.n_seq * l.capacity,
                None => spec.n_blocks() * KV_BLOCK,
            } as u64;
            let make = |w: u64, what: &str| -> Result<wgpu::Buffer> {
                let size = (slots * w * elem).max(4);
                if size > max_binding {
                    return Err(BackendError::Unsupported(format!(
                        "layer {i}: the {what} cache needs {size} bytes, more than one GPU binding \
                         ({max_binding}); use a smaller --ctx or fewer sequences"
                    )));
                }
                Ok(device.create_buffer(&wgpu::BufferDescriptor {
                    label: Some(what),
                    size,
                    // Copies within the cache: a shared prompt prefix (`copy_prefix`).
                    usage: wgpu::BufferUsages::STORAGE
                        | wgpu::BufferUsages::COPY_SRC
                        | wgpu::BufferUsages::COPY_DST,
                    mapped_at_creation: false,
                }))
            };
            layers.push(GpuLayer {
                spec: l.clone(),
                k: make(wk, "key")?,
                v: make(wv, "value")?,
            });
        }
        let tables = BlockTables::new(spec);
        let table_buf = device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("block tables"),
            size: (tables.ids().len() as u64 * 4).max(4),
            usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        let c = GpuKvCache {
            n_seq: spec.n_seq,
            dtype: spec.dtype,
            layers,
            tables,
            table_buf,
        };
        Ok(c)
    }

    /// Replaces one sequence's table and queues its upload (ahead of any later step).
    pub fn set_table(&mut self, queue: &wgpu::Queue, seq: u32, table: &[u32]) -> Result<()> {
        self.tables.set(seq, table)?;
        let per = self.tables.per_seq();
        let row = &self.tables.ids()[seq as usize * per..][..per];
        if !row.is_empty() {
            let bytes: Vec<u8> = row.iter().flat_map(|b| b.to_le_bytes()).collect();
            queue.write_buffer(&self.table_buf, (seq as usize * per * 4) as u64, &bytes);
        }
        Ok(())
    }

    /// Records the copy of sequence `src`'s positions `0..n` into `dst`, every layer
    /// ([`crate::backend::Backend::copy_prefix`]). WebGPU cannot copy within one buffer, so
    /// each layer's runs go out to a scratch buffer and back.
    pub fn copy_prefix(
        &self,
        device: &wgpu::Device,
        enc: &mut wgpu::CommandEncoder,
        src: u32,
        dst: u32,
        n: usize,
    ) -> Result<()> {
        let specs = self.layers.iter().map(|l| &l.spec);
        let runs = copy_plan(specs, self.n_seq, &self.tables, src, dst, n)?;
        let elem = match self.dtype {
            KvDtype::F16 => 2u64,
            KvDtype::F32 => 4,
        };
        // Widths are even (checked at creation), so f16 offsets stay 4-byte aligned.
        let widths = |l: &GpuLayer| {
            let w = |d: usize| (l.spec.n_kv_head * d) as u64 * elem;
            (w(l.spec.head_dim_k), w(l.spec.head_dim_v))
        };
        let scratch_size = self
            .layers
            .iter()
            .zip(&runs)
            .map(|(l, r)| {
                let (wk, wv) = widths(l);
                r.iter().map(|r| r.len as u64).sum::<u64>() * (wk + wv)
            })
            .max()
            .unwrap_or(0);
        if scratch_size == 0 {
            return Ok(());
        }
        let scratch = device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("prefix copy"),
            size: scratch_size,
            usage: wgpu::BufferUsages::COPY_SRC | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        // Copies in one encoder run in order, so every layer can reuse the scratch buffer.
        for (l, runs) in self.layers.iter().zip(runs) {
            let (wk, wv) = widths(l);
            for (buf, w) in [(&l.k, wk), (&l.v, wv)] {
                let mut at = 0;
                for r in &runs {
                    let len = r.len as u64 * w;
                    enc.copy_buffer_to_buffer(buf, r.src as u64 * w, &scratch, at, len);
                    at += len;
                }
                let mut at = 0;
                for r in &runs {
                    let len = r.len as u64 * w;
                    enc.copy_buffer_to_buffer(&scratch, at, buf, r.dst as u64 * w, len);
                    at += len;
                }
            }
        }
        Ok(())
    }

    /// Uploads every table (once, after creation).
    pub fn upload_tables(&self, queue: &wgpu::Queue) {
        let ids = self.tables.ids();
        if !ids.is_empty() {
            let bytes: Vec<u8> = ids.iter().flat_map(|b| b.to_le_bytes()).collect();
            queue.write_buffer(&self.table_buf, 0, &bytes);
        }
    }
}
