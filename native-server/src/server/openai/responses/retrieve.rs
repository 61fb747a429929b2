//! The stored-response routes: `GET /v1/responses/{id}`, `DELETE /v1/responses/{id}` and
//! `GET /v1/responses/{id}/input_items` (a page of the conversation's input items, cursor
//! `after`, `limit` 1–100 (20), `order` `desc` (default, newest first) or `asc`). Each reads
//! only the caller's own responses: another principal's id is the 404 of a missing one.

use axum::extract::{Path, Query, State};
use axum::response::IntoResponse;
use axum::Json;
use serde::Deserialize;
use utoipa::IntoParams;

use super::store::Stored;
use super::types::{Deleted, InputItemList, Item, ResponseObject};
use crate::server::auth::caller::Caller;
use crate::server::error::{ApiError, OpenAiErrorBody};
use crate::server::openai::OpenAiState;
use crate::server::openai::Res;

/// The one message for an id that is missing or not the caller's.
pub fn missing(id: &str) -> ApiError {
    ApiError::not_found(format!("No response with id '{id}' found."))
}

async fn stored(st: &OpenAiState, caller: &Caller, id: &str) -> Result<Stored, ApiError> {
    st.responses
        .get(caller.owner(), id)
        .await?
        .ok_or_else(|| missing(id))
}

#[utoipa::path(get, path = "/responses/{id}", tag = "openai",
    params(("id" = String, Path, description = "The response's id (resp_…)")),
    responses((status = 200, body = ResponseObject), (status = 404, body = OpenAiErrorBody)))]
pub async fn retrieve(
    State(st): State<OpenAiState>,
    caller: Caller,
    Path(id): Path<String>,
) -> Res {
    Ok(Json(stored(&st, &caller, &id).await?.response).into_response())
}

#[utoipa::path(delete, path = "/responses/{id}", tag = "openai",
    params(("id" = String, Path, description = "The response's id (resp_…)")),
    responses((status = 200, body = Deleted), (status = 404, body = OpenAiErrorBody)))]
pub async fn delete(State(st): State<OpenAiState>, caller: Caller, Path(id): Path<String>) -> Res {
    if !st.responses.delete(caller.owner(), &id).await? {
        return Err(missing(&id).into());
    }
    Ok(Json(Deleted {
        id,
        object: "response",
        deleted: true,
    })
    .into_response())
}

/// `input_items` paging (strings, so a bad value is this API's 400, not a plain rejection).
#[derive(Debug, Default, Deserialize, IntoParams)]
pub struct ListQuery {
    /// An item id: list the items after it (in the chosen order).
    after: Option<String>,
    /// 1–100, default 20.
    limit: Option<String>,
    /// `desc` (default) or `asc`.
    order: Option<String>,
}

/// One page of `items` as `q` asks.
fn page(items: &[Item], q: &ListQuery) -> Result<InputItemList, ApiError> {
    let limit = match q.limit.as_deref() {
        None => 20,
        Some(l) => l
            .parse::<usize>()
            .ok()
            .filter(|n| (1..=100).contains(n))
            .ok_or_else(|| ApiError::invalid(format!("limit must be 1 to 100, got {l:?}")))?,
    };
    let mut all: Vec<&Item> = items.iter().collect();
    match q.order.as_deref() {
        None | Some("desc") => all.reverse(),
        Some("asc") => {}
        Some(o) => {
            return Err(ApiError::invalid(format!(
                "order must be \"asc\" or \"desc\", got {o:?}"
            )))
        }
    }
    let start = match q.after.as_deref() {
        None => 0,
        Some(a) => {
            all.iter().position(|i| id(i) == a).ok_or_else(|| {
                ApiError::invalid(format!("after names no input item of this response: {a:?}"))
            })? + 1
        }
    };
    let data: Vec<Item> = all
        .iter()
        .skip(start)
        .take(limit)
        .map(|i| (*i).clone())
        .collect();
    Ok(InputItemList {
        object: "list",
        first_id: data.first().map(|i| id(i).to_string()),
        last_id: data.last().map(|i| id(i).to_string()),
        has_more: all.len() > start + data.len(),
        data,
    })
}

fn id(i: &Item) -> &str {
    match i {
        Item::Message(m) => &m.id,
        Item::FunctionCall(c) => &c.id,
        Item::FunctionCallOutput(o) => &o.id,
    }
}

#[utoipa::path(get, path = "/responses/{id}/input_items", tag = "openai",
    params(("id" = String, Path, description = "The response's id (resp_…)"), ListQuery),
    responses((status = 200, body = InputItemList), (status = 400, body = OpenAiErrorBody),
        (status = 404, body = OpenAiErrorBody)))]
pub async fn input_items(
    State(st): State<OpenAiState>,
    caller: Caller,
    Path(id): Path<String>,
    Query(q): Query<ListQuery>,
) -> Res {
    let s = stored(&st, &caller, &id).await?;
    Ok(Json(page(&s.input, &q)?).into_response())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::server::openai::responses::input;

    #[test]
    fn pages_go_newest_first_by_default_and_follow_the_cursor() {
        let items: Vec<Item> = (0..5)
            .map(|i| input::message("user", vec![input::output_text(&i.to_string())]))
            .collect();
        let q = |after: Option<&str>, limit: Option<&str>, order: Option<&str>| ListQuery {
            after: after.map(str::to_string),
            limit: limit.map(str::to_string),
            order: order.map(str::to_string),
        };
        let p = page(&items, &q(None, Some("2"), None)).unwrap();
        assert_eq!(p.data, vec![items[4].clone(), items[3].clone()]);
        assert!(p.has_more);
        let next = page(&items, &q(p.last_id.as_deref(), Some("10"), None)).unwrap();
        assert_eq!(next.data.len(), 3);
        assert!(!next.has_more);
        let asc = page(&items, &q(None, None, Some("asc"))).unwrap();
        assert_eq!(asc.data, items);
        for bad in [
            q(None, Some("0"), None),
            q(None, None, Some("up")),
            q(Some("nope"), None, None),
        ] {
            assert_eq!(page(&items, &bad).unwrap_err().status, 400);
        }
    }
}
