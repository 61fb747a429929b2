//! `GET /v1/models` (every model the server knows, loaded or not) and `GET /v1/models/{id}`.

use axum::extract::{Path, State};
use axum::Json;

use super::types::{ModelList, ModelObject};
use crate::server::auth::access;
use crate::server::error::{OpenAiError, OpenAiErrorBody};
use crate::server::state::{unix, Shared};

#[utoipa::path(get, path = "/models", tag = "openai",
    responses((status = 200, body = ModelList)))]
pub async fn list(State(st): State<Shared>) -> Result<Json<ModelList>, OpenAiError> {
    // A key in a tenant sees only the tenant's allowed models.
    let shown = access::visible_models(&st).await?;
    let data = st.registry.with_catalog(|c| {
        c.names()
            .iter()
            .filter(|n| access::shows(&shown, n))
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
    State(st): State<Shared>,
    Path(id): Path<String>,
) -> Result<Json<ModelObject>, OpenAiError> {
    let r = st.registry.with_catalog(|c| c.resolve(&id))?;
    Ok(Json(ModelObject::new(&r.name, unix(r.facts.modified))))
}
