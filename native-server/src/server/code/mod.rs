//! Code execution and its by-products: the sandbox (`--code-exec`), the skill registry and the
//! artifact store the server holds, the chat-UI sessions' workspaces, and
//! `GET /api/code/artifacts/{runId}/{*path}`, which serves the files a run wrote.
//!
//! Both belong to a principal: a session's workspace is keyed by (owner, session id), and a
//! principal's artifacts live in a folder of their own under the artifacts root, which the
//! download route opens for the caller only; another principal's run id is a 404 like an
//! unknown one.
//!
//! The server-side tool loop the chat surfaces share lives here too: `plan.rs` decides what a
//! request is offered, `agent.rs` runs the loop, `types.rs` holds its wire shapes.

pub mod agent;
pub mod plan;
mod state;
pub mod types;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use anyhow::Context;
use axum::extract::{Path as UrlPath, State};
use axum::http::header;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use utoipa_axum::router::OpenApiRouter;
use weft_sandbox::{ArtifactStore, Language, RunSlots, Sandbox, SkillRegistry, Workspace};

use sha2::{Digest, Sha256};

use super::auth::caller::Caller;
use super::error::{ApiError, PlainError, PlainErrorBody};
use crate::server::auth::RouterState;
use axum::extract::FromRef;
pub use state::CodeState;

/// How long a run's files stay downloadable.
const ARTIFACT_TTL: Duration = Duration::from_secs(3600);

/// The `Retry-After` of a request turned away while every run slot is taken.
const RETRY_AFTER_SECS: u32 = 5;

/// What the server can execute and serve.
pub struct CodeTools {
    /// The sandbox, only with `--code-exec`.
    pub sandbox: Option<Arc<Sandbox>>,
    pub skills: Arc<SkillRegistry>,
    /// The artifacts root: one folder per owner (`artifacts_dir`).
    artifacts_root: PathBuf,
    /// Without `--code-exec`, the sandbox the skill tools' loop holds (made on first use; it
    /// never runs code, since code tools are off).
    skills_only: OnceLock<Arc<Sandbox>>,
    /// (owner, chat-UI session id) → its workspace (deleted with the session).
    workspaces: Mutex<HashMap<(String, String), Arc<Workspace>>>,
    /// The bound on sandbox runs at once, shared by every request's tool loop
    /// (`--sandbox-runs`, default one per core).
    pub runs: RunSlots,
}

impl CodeTools {
    /// The tools under `home` (`$WEFT_HOME`): installed skills in `home/skills`, artifacts in
    /// `home/artifacts`, discovered skills in `skills_dirs`. With `code_exec`, the runtimes
    /// must be installed: their absence is a start-up error rather than a failure at the
    /// first tool call.
    pub fn new(home: &Path, skills_dirs: Vec<PathBuf>, code_exec: bool) -> anyhow::Result<Self> {
        let sandbox = if code_exec {
            let sandbox = Sandbox::from_env()?;
            let dir = &sandbox.config().runtime_dir;
            for l in Language::ALL {
                if !dir.join(l.file_name()).is_file() {
                    return Err(weft_sandbox::Error::RuntimeMissing {
                        path: dir.join(l.file_name()),
                    })
                    .context(
                        "--code-exec needs the sandbox runtimes: install them with \
                         scripts/fetch-sandbox.sh (scripts/start.sh runs it), or set \
                         WEFT_SANDBOX_DIR to where they are",
                    );
                }
            }
            Some(Arc::new(sandbox))
        } else {
            None
        };
        let skills = Arc::new(SkillRegistry::new(Some(home.join("skills")), skills_dirs));
        let artifacts_root = home.join("artifacts");
        // Runs of owners who never come back expire too (each owner's own saves sweep its
        // folder; this sweeps them all once per start).
        sweep_all(&artifacts_root);
        Ok(CodeTools {
            sandbox,
            skills,
            artifacts_root,
            skills_only: OnceLock::new(),
            workspaces: Mutex::new(HashMap::new()),
            runs: RunSlots::per_core(),
        })
    }

    /// The same tools with at most `n` sandbox runs at once.
    pub fn with_run_slots(mut self, n: usize) -> Self {
        self.runs = RunSlots::new(n);
        self
    }

    /// A request that may run code, admitted only while a run slot is free: with every slot
    /// taken by a running guest, a 429 with `Retry-After` (runs end within their timeout).
    /// Admitted requests still wait for a slot before each run (`ToolLoop::slots`).
    pub fn admit_code_request(&self) -> Result<(), ApiError> {
        if self.runs.free() > 0 {
            return Ok(());
        }
        Err(ApiError::rate_limited(
            format!(
                "the code sandbox is busy: {} runs at once, all taken; retry shortly",
                self.runs.size()
            ),
            RETRY_AFTER_SECS,
        ))
    }

    /// The sandbox a tool loop runs with: the `--code-exec` one, else one for skill tools
    /// only (no runtime is ever loaded into it).
    pub fn loop_sandbox(&self) -> Result<Arc<Sandbox>, ApiError> {
        if let Some(s) = &self.sandbox {
            return Ok(s.clone());
        }
        if let Some(s) = self.skills_only.get() {
            return Ok(s.clone());
        }
        let s = Arc::new(Sandbox::from_env()?);
        Ok(self.skills_only.get_or_init(|| s).clone())
    }

    /// The folder of `owner`'s artifacts (a hash of the owner: any owner string maps to one
    /// safe name).
    pub fn artifacts_dir(&self, owner: &str) -> PathBuf {
        let h = Sha256::digest(format!("weft artifacts\0{owner}").as_bytes());
        let hex: String = h[..16].iter().map(|b| format!("{b:02x}")).collect();
        self.artifacts_root.join(format!("o-{hex}"))
    }

    /// The artifact store in `dir` (made if missing; disk work: call off the async workers).
    pub fn artifacts_in(dir: PathBuf) -> Result<ArtifactStore, weft_sandbox::Error> {
        ArtifactStore::new(dir, ARTIFACT_TTL)
    }

    /// The workspace of `owner`'s chat-UI session, made on first use.
    pub async fn session_workspace(
        &self,
        owner: &str,
        session: &str,
    ) -> Result<Arc<Workspace>, ApiError> {
        let key = (owner.to_string(), session.to_string());
        if let Some(ws) = self.lock_workspaces().get(&key) {
            return Ok(ws.clone());
        }
        let ws = tokio::task::spawn_blocking(Workspace::temporary)
            .await
            .map_err(|e| ApiError::internal(e.to_string()))??;
        let mut map = self.lock_workspaces();
        // Two first requests of one session race: keep the first workspace made.
        Ok(map.entry(key).or_insert_with(|| Arc::new(ws)).clone())
    }

    /// Forgets a deleted session's workspace; its folder goes when the last run using it ends.
    pub fn drop_session(&self, owner: &str, session: &str) {
        let ws = self
            .lock_workspaces()
            .remove(&(owner.to_string(), session.to_string()));
        if let Some(ws) = ws {
            // Removing a folder tree is disk work: not on an async worker.
            tokio::task::spawn_blocking(move || drop(ws));
        }
    }

    #[allow(clippy::type_complexity)]
    fn lock_workspaces(
        &self,
    ) -> std::sync::MutexGuard<'_, HashMap<(String, String), Arc<Workspace>>> {
        self.workspaces.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Compiles (or loads from the cache) both runtimes off the request path, so the first
    /// tool call does not pay for it. The hash check happens here too; a mismatch is logged.
    pub fn warm_up(&self) {
        let Some(sb) = self.sandbox.clone() else {
            return;
        };
        tokio::task::spawn_blocking(move || {
            for l in Language::ALL {
                if !sb.is_ready(l) {
                    tracing::info!(runtime = l.name(),
                        "compiling the sandbox runtime once (up to a minute); later starts load it from the cache");
                }
                match sb.prepare(l) {
                    Ok(p) => tracing::info!(runtime = l.name(), origin = ?p.origin,
                        seconds = p.took.as_secs_f64(), "sandbox runtime ready"),
                    Err(e) => tracing::error!(runtime = l.name(), error = %e,
                        "sandbox runtime failed to load"),
                }
            }
        });
    }
}

/// Sweeps the expired runs of every owner's artifact folder.
fn sweep_all(root: &Path) {
    let Ok(rd) = std::fs::read_dir(root) else {
        return;
    };
    for e in rd.flatten() {
        if e.file_name().to_string_lossy().starts_with("o-") {
            if let Ok(store) = CodeTools::artifacts_in(e.path()) {
                store.sweep();
            }
        }
    }
}

/// Routes relative to `/api`. The path is a wildcard (files sit in folders), which utoipa's
/// route macro would register as one segment, so the route is added by hand.
pub fn routes<S: RouterState>() -> crate::server::auth::Routes<S>
where
    CodeState: FromRef<S>,
{
    crate::server::auth::Routes::read(
        OpenApiRouter::new().route("/code/artifacts/{run_id}/{*path}", get(artifact)),
    )
}

/// One file a run wrote, as a download (never rendered inline by a browser). The annotation
/// documents the hand-registered wildcard route in `/openapi.json` (`openapi.rs` lists it).
#[utoipa::path(get, path = "/api/code/artifacts/{run_id}/{path}", tag = "code",
    params(("run_id" = String, Path, description = "The run id (32 hex digits) from a file's url"),
           ("path" = String, Path, description = "The file's path inside the run; may hold `/`")),
    responses((status = 200, description = "The file, as an attachment (Content-Type sniffed from the bytes, X-Content-Type-Options: nosniff)",
               content_type = "application/octet-stream"),
              (status = 400, body = PlainErrorBody, description = "A path leading out of the run"),
              (status = 404, body = PlainErrorBody, description = "Unknown or expired run, or no such file")))]
pub async fn artifact(
    State(st): State<CodeState>,
    caller: Caller,
    UrlPath((run_id, path)): UrlPath<(String, String)>,
) -> Result<Response, PlainError> {
    // Only the caller's own folder is looked in: another principal's run is not found.
    let dir = st.code.artifacts_dir(caller.owner());
    let a = tokio::task::spawn_blocking(move || {
        // A path out of the run is refused (400) whether or not the caller has any run.
        weft_sandbox::workspace::paths::relative(&path, false)?;
        if !dir.is_dir() {
            return Err(weft_sandbox::Error::NotFound(format!(
                "artifact run {run_id}"
            )));
        }
        CodeTools::artifacts_in(dir)?.open(&run_id, &path)
    })
    .await
    .map_err(|e| ApiError::internal(e.to_string()))??;
    // A header value must be visible ASCII; the name is only a hint for the browser.
    let safe: String = a
        .file_name
        .chars()
        .map(|c| {
            if (c.is_ascii_graphic() && c != '"' && c != '\\') || c == ' ' {
                c
            } else {
                '_'
            }
        })
        .collect();
    let disposition = format!("attachment; filename=\"{safe}\"");
    Ok((
        [
            (header::CONTENT_TYPE, a.content_type.to_string()),
            (header::CONTENT_DISPOSITION, disposition),
            (header::X_CONTENT_TYPE_OPTIONS, "nosniff".to_string()),
        ],
        a.bytes,
    )
        .into_response())
}
