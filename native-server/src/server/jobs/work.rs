//! What the model jobs do, and how their models reach the registry.

use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

use serde_json::{json, Value};

use super::persist::PersistedJobs;
use crate::jobs::{Job, JobKind, JobRunner, ProgressUnit};
use crate::registry::{names, Registry};
use crate::server::error::ApiError;
use crate::store::{
    self, check_convert, checked_path, ConvertRequest, ImportRequest, PullRequest, QuantizeRequest,
    Store, StoreError,
};

/// The job runner and the store the jobs write into. Every job records the principal that
/// asked for it (`owner` of the `submit_*` calls).
pub struct ModelJobs {
    pub runner: Arc<JobRunner>,
    pub store: Store,
    /// The runner's job store (memory, copied to the admin storage once attached).
    pub(super) jobs: Arc<PersistedJobs>,
    /// The admin storage, once [`ModelJobs::persist`] attached it.
    pub(super) storage: OnceLock<weft_storage::Storage>,
    /// A one-thread runner on the same store for video generations (one at a time), made
    /// when a video model is served; the jobs routes cancel through it too.
    pub(super) video: OnceLock<Arc<JobRunner>>,
}

fn to_api(e: StoreError) -> ApiError {
    ApiError::invalid(e.message)
}

impl ModelJobs {
    /// Jobs on `parallel` threads writing into `store`, registering what they make in
    /// `registry` (its catalog stays the only writer of the names file).
    pub fn new(store: Store, registry: Arc<Registry>, parallel: usize) -> Arc<ModelJobs> {
        let store = store.with_registrar(Arc::new(move |name, path| {
            registry
                .with_catalog(|c| c.add_arrived(name, path))
                .map_err(|e| StoreError::failed(e.to_string()))
        }));
        let jobs = Arc::new(PersistedJobs::new(256));
        Arc::new(ModelJobs {
            runner: JobRunner::new(jobs.clone(), parallel),
            store,
            jobs,
            storage: OnceLock::new(),
            video: OnceLock::new(),
        })
    }

    /// The runner video generations queue on: one thread, this store.
    pub fn video_runner(&self) -> Arc<JobRunner> {
        self.video
            .get_or_init(|| JobRunner::new(self.jobs.clone(), 1))
            .clone()
    }

    /// Starts a pull (400 for a reference or name that cannot work).
    pub fn submit_pull(&self, owner: &str, req: PullRequest) -> Result<Job, ApiError> {
        let r = req.reference.trim();
        if r.is_empty() {
            return Err(ApiError::invalid(
                "model (a URL or hf.co/OWNER/REPO:FILE) is required",
            ));
        }
        if !(r.starts_with("http://")
            || r.starts_with("https://")
            || r.starts_with("hf.co/")
            || r.starts_with("huggingface.co/"))
        {
            return Err(ApiError::invalid(format!(
                "unknown model reference {r:?}: give an http(s) URL or hf.co/OWNER/REPO:FILE_OR_QUANT"
            )));
        }
        if let Some(n) = &req.name {
            names::check_new(n)?;
        }
        let store = self.store.clone();
        // Stored and shown by /api/v1/jobs: without the URL's credentials.
        let request = json!({"model": store::pull_policy::redact(&req.reference),
                             "name": req.name, "sha256": req.sha256});
        Ok(self.runner.submit_as(
            owner,
            JobKind::Pull,
            request,
            ProgressUnit::Bytes,
            Box::new(move |ctx| {
                let mut phase = "";
                store::pull(&store, &req, &mut |p| {
                    if p.phase != phase {
                        phase = p.phase;
                        ctx.phase(p.phase);
                    }
                    if let Some(d) = &p.digest {
                        ctx.note("digest", Value::String(format!("sha256:{d}")));
                    }
                    ctx.progress(p.done, p.total);
                    !ctx.cancelled()
                })
                .map(|p| json!(p))
                .map_err(|e| e.message)
            }),
        ))
    }

    /// Starts an import (400 for a path outside the import roots or a bad name).
    pub fn submit_import(&self, owner: &str, req: ImportRequest) -> Result<Job, ApiError> {
        checked_path(&req.path, Some(&self.store.import_roots)).map_err(to_api)?;
        if let Some(n) = &req.name {
            names::check_new(n)?;
        }
        let store = self.store.clone();
        let request = json!({"path": req.path, "name": req.name});
        Ok(self.runner.submit_as(
            owner,
            JobKind::Import,
            request,
            ProgressUnit::Bytes,
            Box::new(move |ctx| {
                let roots: Vec<PathBuf> = store.import_roots.clone();
                store::import(&store, &req, Some(&roots), &mut |phase, d, t| {
                    ctx.phase(phase);
                    ctx.progress(d, t);
                    !ctx.cancelled()
                })
                .map(|i| json!(i))
                .map_err(|e| e.message)
            }),
        ))
    }

    /// Starts a quantization of a model of the store (400 for an unknown type or name).
    pub fn submit_quantize(&self, owner: &str, req: QuantizeRequest) -> Result<Job, ApiError> {
        req.r#type
            .parse::<weft_core::quantize::FileType>()
            .map_err(|e| ApiError::invalid(e.to_string()))?;
        if let Some(t) = &req.target {
            names::check_new(t)?;
        }
        let store = self.store.clone();
        let request = json!({"model": req.source, "name": req.target, "type": req.r#type,
                             "allow_requantize": req.allow_requantize});
        Ok(self.runner.submit_as(
            owner,
            JobKind::Quantize,
            request,
            ProgressUnit::Bytes,
            Box::new(move |ctx| {
                ctx.phase("quantizing");
                store::quantize_in_store(&store, &req, false, &mut |p| {
                    ctx.progress(p.bytes_done, p.bytes_total);
                    ctx.note("tensors_done", json!(p.tensors_done));
                    ctx.note("tensors_total", json!(p.tensors_total));
                    !ctx.cancelled()
                })
                .map(|q| json!(q))
                .map_err(|e| e.message)
            }),
        ))
    }

    /// Starts a conversion of a Hugging Face folder inside the import roots (400 for a path
    /// outside them, a folder of an unknown family, an unknown type or a bad name).
    pub fn submit_convert(&self, owner: &str, req: ConvertRequest) -> Result<Job, ApiError> {
        self.submit_convert_of(owner, req, None)
    }

    /// Like [`ModelJobs::submit_convert`]; `scratch`, a folder made for this job only (Ollama's
    /// `/api/create` with files), is removed when the job ends, and on a 400.
    pub fn submit_convert_of(
        &self,
        owner: &str,
        mut req: ConvertRequest,
        scratch: Option<PathBuf>,
    ) -> Result<Job, ApiError> {
        let drop_scratch = |scratch: &Option<PathBuf>| {
            if let Some(d) = scratch {
                let _ = std::fs::remove_dir_all(d);
            }
        };
        let checked = (|| {
            req.path = checked_path(&req.path, Some(&self.store.import_roots)).map_err(to_api)?;
            check_convert(&req).map_err(to_api)?;
            if let Some(t) = &req.target {
                names::check_new(t)?;
            }
            Ok::<_, ApiError>(())
        })();
        if let Err(e) = checked {
            drop_scratch(&scratch);
            return Err(e);
        }
        let store = self.store.clone();
        let request = json!({"path": req.path, "name": req.target, "type": req.r#type});
        Ok(self.runner.submit_as(
            owner,
            JobKind::Convert,
            request,
            ProgressUnit::Bytes,
            Box::new(move |ctx| {
                let mut phase = "";
                let r = store::convert_in_store(&store, &req, false, &mut |p| {
                    if p.phase != phase {
                        phase = p.phase;
                        ctx.phase(p.phase);
                    }
                    ctx.progress(p.done, p.total);
                    !ctx.cancelled()
                })
                .map(|c| json!(c))
                .map_err(|e| e.message);
                drop_scratch(&scratch);
                r
            }),
        ))
    }
}
