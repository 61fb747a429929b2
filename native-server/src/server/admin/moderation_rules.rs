//! `/api/v1/moderation/rules`: list, add and delete moderation rules (admin only, like all of
//! `/api/v1`; the auth layer audits the changes).

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::Json;
use serde::{Deserialize, Serialize};
use serde_json::json;
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;
use weft_storage::{ModerationRule, NewRule};

use super::common::{changed, Changed, List};
use crate::server::auth::RouterState;
use crate::server::error::{ApiError, PlainError, PlainErrorBody};
use crate::server::extract::ApiJson;
use crate::server::moderation::ModerationState;
use axum::extract::FromRef;

/// Routes relative to `/api/v1`.
pub fn routes<S: RouterState>() -> OpenApiRouter<S>
where
    ModerationState: FromRef<S>,
{
    OpenApiRouter::new()
        .routes(routes!(list, create))
        .routes(routes!(delete))
}

#[derive(Debug, Serialize, ToSchema)]
pub struct RuleInfo {
    pub id: String,
    pub pattern: String,
    /// `keyword` (literal text, case-insensitive) or `regex` (the `regex` crate's syntax).
    pub kind: String,
    /// `block` or `flag`.
    pub action: String,
    /// `input`, `output` or `both`.
    pub applies_to: String,
    /// Unix seconds.
    pub created_at: i64,
}

impl From<ModerationRule> for RuleInfo {
    fn from(r: ModerationRule) -> Self {
        RuleInfo {
            id: r.id,
            pattern: r.pattern,
            kind: r.kind,
            action: r.action,
            applies_to: r.applies_to,
            created_at: r.created_at,
        }
    }
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateRule {
    pub pattern: String,
    /// `keyword` or `regex`.
    pub kind: String,
    /// `block` or `flag`.
    pub action: String,
    /// `input`, `output` or `both`.
    pub applies_to: String,
}

#[utoipa::path(get, path = "/moderation/rules", tag = "admin",
    responses((status = 200, body = List<RuleInfo>), (status = 403, body = PlainErrorBody)))]
async fn list(State(st): State<ModerationState>) -> Result<Json<List<RuleInfo>>, PlainError> {
    let data = st.storage.list_rules().await?;
    Ok(Json(List {
        data: data.into_iter().map(RuleInfo::from).collect(),
    }))
}

/// Adds a rule; it applies to requests that arrive from then on (on other replicas within
/// 2 s).
#[utoipa::path(post, path = "/moderation/rules", tag = "admin", request_body = CreateRule,
    responses((status = 201, body = RuleInfo), (status = 400, body = PlainErrorBody)))]
async fn create(
    State(st): State<ModerationState>,
    ApiJson(b): ApiJson<CreateRule>,
) -> Changed<RuleInfo> {
    crate::server::moderation::rules::check(&b.pattern, &b.kind, &b.action, &b.applies_to)
        .map_err(ApiError::invalid)?;
    let r = st
        .storage
        .create_rule(NewRule {
            pattern: b.pattern,
            kind: b.kind,
            action: b.action,
            applies_to: b.applies_to,
        })
        .await?;
    st.moderation.reload().await?;
    // The pattern is not secret, but it may quote the very text it is meant to catch: the
    // audit row names the rule, not its pattern.
    let details =
        json!({"rule_id": r.id, "kind": r.kind, "action": r.action, "applies_to": r.applies_to});
    changed(StatusCode::CREATED, details, RuleInfo::from(r))
}

#[utoipa::path(delete, path = "/moderation/rules/{id}", tag = "admin",
    params(("id" = String, Path, description = "The rule's id")),
    responses((status = 200, body = Object), (status = 404, body = PlainErrorBody)))]
async fn delete(
    State(st): State<ModerationState>,
    Path(id): Path<String>,
) -> Changed<serde_json::Value> {
    st.storage.delete_rule(&id).await?;
    st.moderation.reload().await?;
    changed(
        StatusCode::OK,
        json!({"rule_id": id}),
        json!({"id": id, "deleted": true}),
    )
}
