//! Code execution and its by-products: the sandbox (`--code-exec`), the skill registry and the
//! artifact store the server holds, and `GET /api/code/artifacts/{runId}/{*path}`, which serves
//! the files a run wrote.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Path as UrlPath, State};
use axum::http::header;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use utoipa_axum::router::OpenApiRouter;
use weft_sandbox::{ArtifactStore, Language, Sandbox, SkillRegistry};

use super::error::PlainError;
use super::state::Shared;

/// How long a run's files stay downloadable.
const ARTIFACT_TTL: Duration = Duration::from_secs(3600);

/// What the server can execute and serve.
pub struct CodeTools {
    /// The sandbox, only with `--code-exec`.
    pub sandbox: Option<Arc<Sandbox>>,
    pub skills: Arc<SkillRegistry>,
    pub artifacts: ArtifactStore,
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
                    }
                    .into());
                }
            }
            Some(Arc::new(sandbox))
        } else {
            None
        };
        let skills = Arc::new(SkillRegistry::new(Some(home.join("skills")), skills_dirs));
        let artifacts = ArtifactStore::new(home.join("artifacts"), ARTIFACT_TTL)?;
        Ok(CodeTools {
            sandbox,
            skills,
            artifacts,
        })
    }

    /// Compiles (or loads from the cache) both runtimes off the request path, so the first
    /// tool call does not pay for it. The hash check happens here too; a mismatch is logged.
    pub fn warm_up(&self) {
        let Some(sb) = self.sandbox.clone() else {
            return;
        };
        tokio::task::spawn_blocking(move || {
            for l in Language::ALL {
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

/// Routes relative to `/api`. The path is a wildcard (files sit in folders), which utoipa's
/// route macro would register as one segment, so the route is added by hand.
pub fn routes() -> OpenApiRouter<Shared> {
    OpenApiRouter::new().route("/code/artifacts/{run_id}/{*path}", get(artifact))
}

/// One file a run wrote, as a download (never rendered inline by a browser).
async fn artifact(
    State(st): State<Shared>,
    UrlPath((run_id, path)): UrlPath<(String, String)>,
) -> Result<Response, PlainError> {
    let store = st.code.artifacts.clone();
    let a = tokio::task::spawn_blocking(move || store.open(&run_id, &path))
        .await
        .map_err(|e| super::error::ApiError::internal(e.to_string()))??;
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
