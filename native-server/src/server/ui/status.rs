//! `GET /api/models` (the served models and settings as the chat UI lists them) and
//! `GET /api/queue/status`.

use axum::extract::State;
use axum::Json;

use crate::server::error::PlainError;

use super::types::{QueueStatus, UiModel, UiModels, UiSkills};
use crate::registry::{RegistryError, Resolved};
use crate::server::ui::UiState;
use weft_sandbox::SkillRegistry;

fn file_name(r: &Resolved) -> Option<String> {
    r.facts
        .path
        .file_name()
        .map(|f| f.to_string_lossy().into_owned())
}

/// The file name of the vision projector a model is served with.
fn projector_name(r: &Resolved) -> Option<String> {
    let p = r.facts.mmproj.as_ref()?;
    p.path.file_name().map(|f| f.to_string_lossy().into_owned())
}

/// `model` is the default, `models` every known name with whether it is loaded.
#[utoipa::path(get, path = "/models", tag = "chat-ui", responses((status = 200, body = UiModels)))]
pub async fn models(
    State(st): State<UiState>,
    caller: crate::server::auth::caller::Caller,
) -> Result<Json<UiModels>, PlainError> {
    // A key in a tenant sees only the tenant's allowed models.
    let scope = crate::server::inference::admission::scope(&st.inference, &caller).await?;
    let reg = &st.registry;
    let (default, list) = reg.with_catalog(|c| {
        let list: Vec<(String, Result<Resolved, RegistryError>)> = c
            .names_in(&scope)
            .into_iter()
            .map(|n| {
                let r = c.resolve(&n);
                (n, r)
            })
            .collect();
        // The default too only when in scope (a tenant is not told of a model it may not use).
        let default = c.default_name().filter(|d| scope.allows(d));
        (default.map(str::to_string), list)
    });
    let models = list
        .iter()
        .map(|(n, r)| match r {
            Ok(r) => UiModel {
                name: n.clone(),
                file: file_name(r),
                architecture: Some(r.facts.architecture.clone()),
                loaded: reg.is_loaded(n),
                broken: None,
                projector: projector_name(r),
            },
            Err(e) => UiModel {
                name: n.clone(),
                file: None,
                architecture: None,
                loaded: false,
                broken: Some(e.to_string()),
                projector: None,
            },
        })
        .collect();
    let def = list
        .iter()
        .find(|(n, _)| Some(n) == default.as_ref())
        .and_then(|(_, r)| r.as_ref().ok());
    // The registry rescans its folders: file-system work, kept off the async workers as the
    // skills routes do.
    let reg_skills = st.code.skills.clone();
    let skills = tokio::task::spawn_blocking(move || skills_status(&reg_skills))
        .await
        .ok();
    Ok(Json(UiModels {
        file: def.and_then(file_name),
        architecture: def.map(|r| r.facts.architecture.clone()),
        loaded: default.as_deref().is_some_and(|d| reg.is_loaded(d)),
        model: default,
        backend: st.cfg.backend.clone(),
        supported_backends: vec!["cpu", "wgpu"],
        context_length: st.cfg.n_ctx,
        default_max_tokens: st.inference.max_tokens(),
        parallel: st.cfg.parallel,
        projector: def.and_then(projector_name).map(serde_json::Value::from),
        video: st
            .video
            .as_ref()
            .and_then(|v| serde_json::to_value(v.info()).ok()),
        skills,
        models,
    }))
}

#[utoipa::path(get, path = "/queue/status", tag = "chat-ui",
    responses((status = 200, body = QueueStatus)))]
pub async fn queue(State(st): State<UiState>) -> Json<QueueStatus> {
    let t = st.registry.totals().counters;
    Json(QueueStatus {
        pending_requests: t.waiting,
        running_requests: t.running,
        queue_capacity: st.registry.queue_size(),
        parallel: st.cfg.parallel,
    })
}

/// What `GET /api/models` says about skills.
fn skills_status(reg: &SkillRegistry) -> UiSkills {
    UiSkills {
        enabled: true,
        installable: reg.installable(),
        count: reg.list().skills.len(),
    }
}
