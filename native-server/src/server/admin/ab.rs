//! `/api/v1/ab`: A/B tests between two served models. Requests with `model: "ab:<id>"` (or an
//! `X-Ab-Test-Id` header) are split between the arms by `share_b` (the routing itself is in
//! `server/inference/admission.rs`, the split in weft-storage's `ab.rs`); votes say which arm's
//! answers people preferred; `GET /ab/{id}` gives both counts.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::{Extension, Json};
use serde::{Deserialize, Serialize};
use serde_json::json;
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;
use weft_storage::{AbTest, NewAbTest, NewAbVote, Variant};

use super::common::{changed, check_name, Changed, List};
use crate::server::admin::AdminState;
use crate::server::auth::Principal;
use crate::server::auth::RouterState;
use crate::server::error::{ApiError, PlainError, PlainErrorBody};
use crate::server::extract::ApiJson;
use crate::server::inference::admission::AB_PREFIX;
use axum::extract::FromRef;

pub fn routes<S: RouterState>() -> OpenApiRouter<S>
where
    AdminState: FromRef<S>,
{
    OpenApiRouter::new()
        .routes(routes!(list, create))
        .routes(routes!(vote))
        .routes(routes!(get_one, delete_one))
}

/// Requests routed to each arm.
#[derive(Debug, Serialize, ToSchema)]
pub struct ArmCounts {
    pub a: i64,
    pub b: i64,
    pub total: i64,
}

/// An A/B test with its results.
#[derive(Debug, Serialize, ToSchema)]
pub struct AbInfo {
    pub id: String,
    pub name: String,
    /// What requests send as `model` to be routed by this test: `ab:<id>`.
    pub model: String,
    pub model_a: String,
    pub model_b: String,
    /// B's share of requests, 0 to 1.
    pub share_b: f64,
    /// Requests routed to each arm so far (by every replica).
    pub requests: ArmCounts,
    /// Votes for each arm.
    pub votes: ArmCounts,
    pub created_at: i64,
}

fn info(t: AbTest, votes: (i64, i64)) -> AbInfo {
    let b = t.routed_b();
    AbInfo {
        model: format!("{AB_PREFIX}{}", t.id),
        share_b: t.share_b as f64 / weft_storage::AB_WHOLE as f64,
        requests: ArmCounts {
            a: t.routed - b,
            b,
            total: t.routed,
        },
        votes: ArmCounts {
            a: votes.0,
            b: votes.1,
            total: votes.0 + votes.1,
        },
        id: t.id,
        name: t.name,
        model_a: t.model_a,
        model_b: t.model_b,
        created_at: t.created_at,
    }
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateAb {
    pub name: String,
    /// A served model (name or alias).
    pub model_a: String,
    /// A served model (name or alias; may be the same as A).
    pub model_b: String,
    /// B's share of requests, 0 to 1 (default 0.5).
    pub share_b: Option<f64>,
}

#[utoipa::path(get, path = "/ab", tag = "admin",
    responses((status = 200, body = List<AbInfo>), (status = 403, body = PlainErrorBody)))]
async fn list(State(st): State<AdminState>) -> Result<Json<List<AbInfo>>, PlainError> {
    let mut data = Vec::new();
    for t in st.storage.list_ab_tests().await? {
        let votes = st.storage.ab_tally(&t.id).await?;
        data.push(info(t, votes));
    }
    Ok(Json(List { data }))
}

/// The stored name of a served model, or a 400.
fn served(st: &AdminState, field: &str, name: &str) -> Result<String, ApiError> {
    if name.trim().starts_with(AB_PREFIX) {
        return Err(ApiError::invalid(format!(
            "{field} must be a served model, not another A/B test"
        )));
    }
    st.registry.with_catalog(|c| c.find(name)).ok_or_else(|| {
        ApiError::invalid(format!(
            "{field} {name:?} is not a model this server serves (see GET /v1/models)"
        ))
    })
}

#[utoipa::path(post, path = "/ab", tag = "admin", request_body = CreateAb,
    responses((status = 201, body = AbInfo), (status = 400, body = PlainErrorBody),
              (status = 409, body = PlainErrorBody)))]
async fn create(State(st): State<AdminState>, ApiJson(b): ApiJson<CreateAb>) -> Changed<AbInfo> {
    let name = check_name("A/B test", &b.name)?;
    let model_a = served(&st, "model_a", &b.model_a)?;
    let model_b = served(&st, "model_b", &b.model_b)?;
    let share = b.share_b.unwrap_or(0.5);
    if !(0.0..=1.0).contains(&share) {
        return Err(
            ApiError::invalid(format!("share_b must be between 0 and 1, not {share}")).into(),
        );
    }
    let t = st
        .storage
        .create_ab_test(NewAbTest {
            name,
            model_a,
            model_b,
            share_b: (share * weft_storage::AB_WHOLE as f64).round() as i64,
        })
        .await?;
    let details = json!({"ab_test_id": t.id, "name": t.name});
    changed(StatusCode::CREATED, details, info(t, (0, 0)))
}

#[utoipa::path(get, path = "/ab/{id}", tag = "admin",
    params(("id" = String, Path, description = "The test's id")),
    responses((status = 200, body = AbInfo), (status = 404, body = PlainErrorBody)))]
async fn get_one(
    State(st): State<AdminState>,
    Path(id): Path<String>,
) -> Result<Json<AbInfo>, PlainError> {
    let t = st.storage.get_ab_test(&id).await?;
    let votes = st.storage.ab_tally(&id).await?;
    Ok(Json(info(t, votes)))
}

/// Deletes a test and its votes; `ab:<id>` is then an unknown model.
#[utoipa::path(delete, path = "/ab/{id}", tag = "admin",
    params(("id" = String, Path, description = "The test's id")),
    responses((status = 200, body = AbInfo), (status = 404, body = PlainErrorBody)))]
async fn delete_one(State(st): State<AdminState>, Path(id): Path<String>) -> Changed<AbInfo> {
    let votes = st.storage.ab_tally(&id).await?;
    let t = st.storage.delete_ab_test(&id).await?;
    changed(StatusCode::OK, json!({"ab_test_id": t.id}), info(t, votes))
}

/// A vote for one arm. `variant`, `winner` and `preferred` are the same field (one of them).
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct VoteRequest {
    pub test_id: String,
    /// `a` or `b`.
    pub variant: Option<String>,
    /// Same as `variant`.
    pub winner: Option<String>,
    /// Same as `variant` (the reference peer's name).
    pub preferred: Option<String>,
    /// The request the vote is about (its `X-Request-Id`), if known.
    pub request_id: Option<String>,
    pub comment: Option<String>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct VoteInfo {
    pub id: String,
    pub test_id: String,
    /// `a` or `b`.
    pub variant: String,
    /// The arm's model.
    pub model: String,
    pub request_id: Option<String>,
    pub created_at: i64,
    /// The test's votes after this one.
    pub votes: ArmCounts,
}

#[utoipa::path(post, path = "/ab/vote", tag = "admin", request_body = VoteRequest,
    responses((status = 201, body = VoteInfo), (status = 400, body = PlainErrorBody),
              (status = 404, body = PlainErrorBody)))]
async fn vote(
    State(st): State<AdminState>,
    who: Option<Extension<Principal>>,
    ApiJson(b): ApiJson<VoteRequest>,
) -> Changed<VoteInfo> {
    let given: Vec<&String> = [&b.variant, &b.winner, &b.preferred]
        .into_iter()
        .flatten()
        .collect();
    let v = match given.as_slice() {
        [one] => Variant::parse(one).ok_or_else(|| {
            ApiError::invalid(format!("the vote must be for \"a\" or \"b\", not {one:?}"))
        })?,
        [] => {
            return Err(
                ApiError::invalid("say which arm won: variant must be \"a\" or \"b\"").into(),
            )
        }
        _ => {
            return Err(ApiError::invalid("give only one of variant, winner and preferred").into())
        }
    };
    for (field, text, max) in [
        ("request_id", &b.request_id, 200),
        ("comment", &b.comment, 2000),
    ] {
        if text.as_ref().is_some_and(|t| t.chars().count() > max) {
            return Err(
                ApiError::invalid(format!("{field} is longer than {max} characters")).into(),
            );
        }
    }
    let test = st.storage.get_ab_test(b.test_id.trim()).await?;
    let actor = who.map_or_else(|| "open".to_string(), |w| w.0.actor);
    let row = st
        .storage
        .add_ab_vote(NewAbVote {
            test_id: test.id.clone(),
            variant: v,
            request_id: b.request_id,
            comment: b.comment,
            actor,
        })
        .await?;
    let (a, bv) = st.storage.ab_tally(&test.id).await?;
    let details = json!({"ab_test_id": test.id, "vote_id": row.id, "variant": v.as_str()});
    changed(
        StatusCode::CREATED,
        details,
        VoteInfo {
            id: row.id,
            test_id: row.test_id,
            variant: v.as_str().to_string(),
            model: test.model(v).to_string(),
            request_id: row.request_id,
            created_at: row.created_at,
            votes: ArmCounts {
                a,
                b: bv,
                total: a + bv,
            },
        },
    )
}
