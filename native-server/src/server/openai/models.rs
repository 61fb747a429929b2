//! `GET /v1/models` (every model the server knows, loaded or not) and `GET /v1/models/{id}`,
//! both within the caller's scope (a tenant's allow-list): a model out of scope is absent.

use axum::extract::{Path, State};
use axum::Json;

use super::types::{ModelList, ModelObject};
use crate::server::auth::caller::Caller;
use crate::server::clock::unix;
use crate::server::error::{OpenAiError, OpenAiErrorBody};
use crate::server::inference::admission;
use crate::server::openai::OpenAiState;

#[utoipa::path(get, path = "/models", tag = "openai",
    responses((status = 200, body = ModelList)))]
pub async fn list(
    State(st): State<OpenAiState>,
    caller: Caller,
) -> Result<Json<ModelList>, OpenAiError> {
    let scope = admission::scope(&st.inference, &caller).await?;
    let data = st.registry.with_catalog(|c| {
        c.names_in(&scope)
            .iter()
            .filter_map(|n| {
                c.resolve(n)
                    .ok()
                    .map(|r| ModelObject::new(n, unix(r.facts.modified)))
            })
            .collect()
    });
    Ok(Json(ModelList {
        object: "list",
        data,
    }))
}

#[utoipa::path(get, path = "/models/{id}", tag = "openai",
    params(("id" = String, Path, description = "A model name")),
    responses((status = 200, body = ModelObject), (status = 404, body = OpenAiErrorBody)))]
pub async fn one(
    State(st): State<OpenAiState>,
    caller: Caller,
    Path(id): Path<String>,
) -> Result<Json<ModelObject>, OpenAiError> {
    let scope = admission::scope(&st.inference, &caller).await?;
    let r = st.registry.with_catalog(|c| c.resolve_in(&id, &scope))?;
    Ok(Json(ModelObject::new(&r.name, unix(r.facts.modified))))
}
